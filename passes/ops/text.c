/* text.c - the ops on text: StringNormalizer, TfIdfVectorizer.
 *
 * A string tensor is, in the kernel IR, a uint8 buffer with one more dimension of ir_strlen
 * bytes (ir.h, lower_value_buf), so string work is ordinary byte loops: no new scalar
 * operator, nothing the interpreter, the backend or a firmware target lacks. A string ends
 * at its first NUL or at the end of its bytes; outputs are NUL-padded. Case changes touch the
 * ASCII letters only (other bytes, UTF-8 included, pass unchanged).
 *
 * StringNormalizer's output size depends on the data when it has stopwords: the output is
 * then dyn (dynamic.c's contract): capacity the input's length, the kept strings packed at the
 * start, the rest zero, the actual dims in lower_dims. ONNX's rule that an empty result is
 * one empty string gives dims of at least 1, the empty string being the zeroed first row. */
#include <string.h>

#include "../lower.h"

static Expr *sreg(Program *p, Kernel *k, int r) { return kx_scalar(p, k, r); }

static Expr *u8(Program *p, int c) { return kx_const(p, DT_UINT8, c); }

/* c with ASCII letters moved to upper (+1) or lower (-1) case; 0 leaves it. */
static Expr *change_case(Program *p, Expr *c, int dir) {
    if (!dir) return c;
    int lo = dir > 0 ? 'a' : 'A';
    Expr *in = kx_and(p, kx_bin(p, K_GE, c, u8(p, lo)), kx_bin(p, K_LE, kx_clone(p, c), u8(p, lo + 25)));
    Expr *moved = dir > 0 ? kx_bin(p, K_SUB, kx_clone(p, c), u8(p, 32)) : kx_bin(p, K_ADD, kx_clone(p, c), u8(p, 32));
    return kx_select(p, in, moved, kx_clone(p, c));
}

static int case_dir(const char *action) {
    return strcmp(action, "UPPER") == 0 ? 1 : strcmp(action, "LOWER") == 0 ? -1 : 0;
}

/* ---- StringNormalizer ---- */

void infer_string_normalizer(Graph *g, Node *n) {
    Value *x = n->in[0];
    const char *act = ir_attr_str(n, "case_change_action", "NONE");
    const char *loc = ir_attr_str(n, "locale", "");
    if (x->dtype != DT_STRING) {
        error(ir_where(g, n), "input '%s' is %s; StringNormalizer takes strings", x->name, dtype_name(x->dtype));
        return;
    }
    if (!(x->rank == 1 || (x->rank == 2 && x->dims[0] == 1))) {
        error(ir_where(g, n), "input '%s' has shape %s; StringNormalizer takes [C] or [1,C]", x->name,
              rule_dims_str(g, x->rank, x->dims));
        return;
    }
    if (!case_dir(act) && strcmp(act, "NONE") != 0) {
        error(ir_where(g, n), "case_change_action '%s' is not LOWER, UPPER or NONE", act);
        return;
    }
    /* case changes are ASCII-only: a locale that could mean more is refused, not ignored */
    if (*loc && strcmp(loc, "C") != 0 && strcmp(loc, "POSIX") != 0 && strncmp(loc, "en_US", 5) != 0) {
        error(ir_where(g, n), "locale '%s' is not supported: onnxcc changes the case of ASCII letters "
              "only (locales C, POSIX, en_US)", loc);
        return;
    }
    Attr *sw = ir_attr(n, "stopwords");
    int64_t c = x->dims[x->rank - 1];
    int64_t dims[2] = {1, MAX(c, 1)};
    ir_set_shape(n->out[0], DT_STRING, x->rank, x->rank == 1 ? dims + 1 : dims);
    n->out[0]->dyn = sw && sw->n > 0;
}

/* out = true when string row x[at] equals stopword s (bytes of w, NUL-padded table row),
 * comparing case-folded to `fold` when it is not 0. */
static Stmt *match_word(Program *p, Kernel *k, Buf *x, Expr **at, int rank, Buf *w, Expr *s,
                        int fold, int m) {
    int done = kir_scalar(p, k, DT_BOOL), j = kir_var(k);
    Expr *xi[MAX_RANK], *wi[2] = {s, kx_var(p, j)};
    for (int d = 0; d < rank; d++) xi[d] = kx_clone(p, at[d]);
    xi[rank] = kx_var(p, j);
    Expr *c = change_case(p, kx_load(p, x, xi), fold);
    Expr *wc = kx_load(p, w, wi);
    Stmt *body = ks_set(p, m, kx_and(p, sreg(p, k, m), kx_bin(p, K_OR, sreg(p, k, done), kx_bin(p, K_EQ, c, wc))));
    ks_seq(body, ks_set(p, done, kx_bin(p, K_OR, sreg(p, k, done), kx_bin(p, K_EQ, kx_clone(p, wc), u8(p, 0)))));
    Stmt *s0 = ks_set(p, m, kx_const(p, DT_BOOL, 1));
    ks_seq(s0, ks_set(p, done, kx_const(p, DT_BOOL, 0)));
    return ks_seq(s0, ks_loop(p, j, 0, (int64_t)ir_strlen, 1, body));
}

/* The stopwords as a constant uint8[S, ir_strlen] table, case-folded when the comparison
 * ignores case; words longer than the capacity can match no input and are left out. */
static Buf *stopword_table(Lower *L, Node *n, int fold, int64_t *count) {
    Attr *sw = ir_attr(n, "stopwords");
    size_t N = ir_strlen;
    uint8_t *t = arena_alloc(L->p->arena, (size_t)sw->n * N + 1);
    memset(t, 0, (size_t)sw->n * N + 1);
    int64_t s = 0;
    for (int i = 0; i < sw->n; i++) {
        size_t len = strlen(sw->strings[i]);
        if (len > N) continue;
        for (size_t j = 0; j < len; j++) {
            uint8_t c = (uint8_t)sw->strings[i][j];
            if (fold > 0 && c >= 'a' && c <= 'z') c = (uint8_t)(c - 32);
            t[(size_t)s * N + j] = c;
        }
        s++;
    }
    *count = s;
    int64_t dims[2] = {MAX(s, 1), (int64_t)N};
    Buf *b = kir_buf_new(L->p, arena_printf(L->p->arena, "%s.stopwords", n->name), DT_UINT8, 2, dims, B_CONST);
    b->data = t;
    return b;
}

void lower_string_normalizer(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int dir = case_dir(ir_attr_str(n, "case_change_action", "NONE"));
    int fold = ir_attr_int(n, "is_case_sensitive", 0) ? 0 : 1;     /* compare upper-cased */
    Attr *sw = ir_attr(n, "stopwords");
    int64_t nsw = 0;
    Buf *w = sw && sw->n ? stopword_table(L, n, fold, &nsw) : NULL;
    int rank = x->rank - 1;                             /* the ONNX rank: 1 or 2 */
    int64_t c = x->dims[rank - 1];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, w), y, NULL, NULL);
    int cnt = kir_scalar(p, k, DT_INDEX), keep = kir_scalar(p, k, DT_BOOL);
    int m = kir_scalar(p, k, DT_BOOL), end = kir_scalar(p, k, DT_BOOL);
    int i = kir_var(k), j = kir_var(k);
    Expr *at[2] = {kx_index(p, 0), kx_var(p, i)};
    Expr **xat = rank == 1 ? at + 1 : at;
    /* keep = no stopword matches x[i] */
    Stmt *test = ks_set(p, keep, kx_const(p, DT_BOOL, 1));
    if (nsw) {
        int s = kir_var(k);
        Stmt *one = match_word(p, k, x, xat, rank, w, kx_var(p, s), fold, m);
        ks_seq(one, ks_set(p, keep, kx_and(p, sreg(p, k, keep), kx_un(p, K_NOT, sreg(p, k, m)))));
        ks_seq(test, ks_loop(p, s, 0, nsw, 1, one));
    }
    /* y[cnt] = x[i] with its case changed and NULs after its end */
    Expr *xi[3], *yi[3];
    for (int d = 0; d < rank; d++) xi[d] = kx_clone(p, xat[d]);
    xi[rank] = kx_var(p, j);
    yi[0] = kx_index(p, 0);
    yi[rank - 1] = sreg(p, k, cnt);
    yi[rank] = kx_var(p, j);
    Expr *xc = kx_load(p, x, xi);
    Stmt *copy = ks_set(p, end, kx_bin(p, K_OR, sreg(p, k, end), kx_bin(p, K_EQ, xc, u8(p, 0))));
    ks_seq(copy, ks_store(p, y, yi, kx_select(p, sreg(p, k, end), u8(p, 0), change_case(p, kx_clone(p, xc), dir))));
    Stmt *put = ks_set(p, end, kx_const(p, DT_BOOL, 0));
    ks_seq(put, ks_loop(p, j, 0, (int64_t)ir_strlen, 1, copy));
    ks_seq(put, ks_set(p, cnt, kx_addc(p, sreg(p, k, cnt), 1)));
    ks_seq(test, ks_if(p, sreg(p, k, keep), put, NULL));
    Stmt *body = ks_set(p, cnt, kx_index(p, 0));
    ks_seq(body, ks_loop(p, i, 0, c, 1, test));
    if (n->out[0]->dyn) {
        /* the rows after the kept ones are zero (the empty string of an empty result too) */
        int r = kir_var(k), b = kir_var(k);
        Expr *zi[3] = {kx_index(p, 0), kx_var(p, r), kx_var(p, b)};
        Expr **zat = rank == 1 ? zi + 1 : zi;
        Stmt *z = ks_if(p, kx_bin(p, K_GE, kx_var(p, r), sreg(p, k, cnt)), ks_store(p, y, zat, u8(p, 0)), NULL);
        ks_seq(body, ks_loop(p, r, 0, y->dims[rank - 1], 1, ks_loop(p, b, 0, (int64_t)ir_strlen, 1, z)));
        Buf *dims = lower_dims(L, n, 0);
        kir_param(p, k, dims, KP_OUT);
        Expr *kept = kx_bin(p, K_MAX, sreg(p, k, cnt), kx_index(p, 1));
        Expr *d0 = kx_index(p, 0), *d1 = kx_index(p, 1);
        if (rank == 2) {
            ks_seq(body, ks_store(p, dims, &d0, kx_const(p, DT_INT64, 1)));
            ks_seq(body, ks_store(p, dims, &d1, kx_cast(p, DT_INT64, kept)));
        } else {
            ks_seq(body, ks_store(p, dims, &d0, kx_cast(p, DT_INT64, kept)));
        }
    }
    k->body = body;
}

/* ---- TfIdfVectorizer ---- */

/* The pool as a list of n-grams: ngram_counts[l] is where the (l+1)-grams start in the pool,
 * ngram_indexes[g] the output column of the g-th n-gram in pool order. */
typedef struct Pool {
    int64_t nlevels, ngrams, width;     /* width: the output columns */
    const int64_t *counts, *indexes, *ints;
    int64_t nints;
} Pool;

static bool read_pool(Graph *g, Node *n, Pool *pl) {
    const char *where = g ? ir_where(g, n) : NULL;
    memset(pl, 0, sizeof *pl);
    pl->nlevels = ir_attr_ints(n, "ngram_counts", &pl->counts);
    int64_t nidx = ir_attr_ints(n, "ngram_indexes", &pl->indexes);
    pl->nints = ir_attr_ints(n, "pool_int64s", &pl->ints);
    Attr *ps = ir_attr(n, "pool_strings");
    if (ps && ps->n) {
        if (where) error(where, "pool_strings: TfIdfVectorizer on strings is not supported (onnxcc takes integer n-grams, pool_int64s)");
        return false;
    }
    for (int64_t l = 0; l < pl->nlevels; l++) {
        int64_t lo = pl->counts[l], hi = l + 1 < pl->nlevels ? pl->counts[l + 1] : pl->nints;
        if (lo < 0 || hi < lo || hi > pl->nints || (hi - lo) % (l + 1)) {
            if (where) error(where, "ngram_counts does not cut pool_int64s (%lld values) into whole %lld-grams",
                             (long long)pl->nints, (long long)(l + 1));
            return false;
        }
        pl->ngrams += (hi - lo) / (l + 1);
    }
    if (nidx != pl->ngrams) {
        if (where) error(where, "ngram_indexes has %lld entries, the pool holds %lld n-grams", (long long)nidx,
                         (long long)pl->ngrams);
        return false;
    }
    for (int64_t i = 0; i < nidx; i++) {
        if (pl->indexes[i] < 0 || pl->indexes[i] > (int64_t)1 << 30) {
            if (where) error(where, "ngram_indexes[%lld] is %lld", (long long)i, (long long)pl->indexes[i]);
            return false;
        }
        pl->width = MAX(pl->width, pl->indexes[i] + 1);
    }
    return true;
}

void infer_tfidf(Graph *g, Node *n) {
    Value *x = n->in[0];
    const char *mode = ir_attr_str(n, "mode", "");
    if (x->dtype == DT_STRING) {
        error(ir_where(g, n), "input '%s' is a string tensor: TfIdfVectorizer on strings is not supported "
              "(onnxcc takes int32 or int64 tokens)", x->name);
        return;
    }
    if (x->dtype != DT_INT32 && x->dtype != DT_INT64) {
        error(ir_where(g, n), "input '%s' is %s; TfIdfVectorizer takes int32 or int64", x->name, dtype_name(x->dtype));
        return;
    }
    if (x->rank != 1 && x->rank != 2) {
        error(ir_where(g, n), "input '%s' has rank %d; TfIdfVectorizer takes [C] or [N,C]", x->name, x->rank);
        return;
    }
    if (strcmp(mode, "TF") && strcmp(mode, "IDF") && strcmp(mode, "TFIDF")) {
        error(ir_where(g, n), "mode '%s' is not TF, IDF or TFIDF", mode);
        return;
    }
    int64_t lo = ir_attr_int(n, "min_gram_length", 1), hi = ir_attr_int(n, "max_gram_length", 1);
    if (lo < 1 || hi < lo || ir_attr_int(n, "max_skip_count", 0) < 0) {
        error(ir_where(g, n), "bad n-gram lengths (min %lld, max %lld) or max_skip_count", (long long)lo, (long long)hi);
        return;
    }
    Pool pl;
    if (!read_pool(g, n, &pl)) return;
    Attr *w = ir_attr(n, "weights");
    if (w && w->n && w->n != pl.ngrams) {
        error(ir_where(g, n), "weights has %d entries, the pool holds %lld n-grams", w->n, (long long)pl.ngrams);
        return;
    }
    int64_t dims[2] = {x->dims[0], pl.width};
    ir_set_shape(n->out[0], DT_FLOAT, x->rank, x->rank == 1 ? dims + 1 : dims);
}

static Buf *const_table(Lower *L, Node *n, const char *what, DType t, int rank, const int64_t *dims, void *data) {
    Buf *b = kir_buf_new(L->p, arena_printf(L->p->arena, "%s.%s", n->name, what), t, rank, dims, B_CONST);
    b->data = data;
    return b;
}

/* out[b, o] = sum over the pool n-grams g with column o, of lengths min..max, of their term
 * (TF: count, IDF: weight if count > 0, TFIDF: count * weight); the count of g is how often
 * it occurs in row b with its tokens s+1 apart, s = 0..max_skip_count (a unigram once). The
 * pool is read from constant tables in a loop, so the code does not grow with it. */
void lower_tfidf(Lower *L, Node *n) {
    Program *p = L->p;
    Pool pl;
    if (!read_pool(NULL, n, &pl)) die("lower_tfidf: %s", n->name);
    int64_t lo = ir_attr_int(n, "min_gram_length", 1), hi = ir_attr_int(n, "max_gram_length", 1);
    int64_t skips = ir_attr_int(n, "max_skip_count", 0) + 1;
    const char *mode = ir_attr_str(n, "mode", "");
    Attr *wa = ir_attr(n, "weights");
    int64_t ng = 0, maxn = MAX(MIN(hi, pl.nlevels), 1);
    int64_t *gram = ARENA_ARRAY(p->arena, int64_t, pl.ngrams * maxn + 1), *len = ARENA_ARRAY(p->arena, int64_t, pl.ngrams + 1);
    int64_t *col = ARENA_ARRAY(p->arena, int64_t, pl.ngrams + 1);
    float *wt = ARENA_ARRAY(p->arena, float, pl.ngrams + 1);
    for (int64_t l = 0, gi = 0; l < pl.nlevels; l++) {
        int64_t a = pl.counts[l], e = l + 1 < pl.nlevels ? pl.counts[l + 1] : pl.nints;
        for (int64_t q = a; q < e; q += l + 1, gi++) {
            if (l + 1 < lo || l + 1 > hi) continue;     /* never counted: its column stays 0 */
            for (int64_t j = 0; j <= l; j++) gram[ng * maxn + j] = pl.ints[q + j];
            len[ng] = l + 1;
            col[ng] = pl.indexes[gi];
            wt[ng] = wa && wa->n ? wa->floats[gi] : 1.0f;
            ng++;
        }
    }
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int64_t gd[2] = {MAX(ng, 1), maxn};
    Buf *tg = const_table(L, n, "pool", DT_INT64, 2, gd, gram);
    Buf *tl = const_table(L, n, "len", DT_INT64, 1, gd, len);
    Buf *tc = const_table(L, n, "col", DT_INT64, 1, gd, col);
    Buf *tw = const_table(L, n, "weights", DT_FLOAT, 1, gd, wt);
    int vars[2];
    Expr *idx[2];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, tg, tl, tc, tw), y, vars, idx);
    int rank = y->rank, acc = kir_scalar(p, k, DT_FLOAT), cnt = kir_scalar(p, k, DT_FLOAT);
    int m = kir_scalar(p, k, DT_BOOL);
    int gv = kir_var(k), sv = kir_var(k), iv = kir_var(k), jv = kir_var(k);
    int64_t c = x->dims[x->rank - 1];
    Expr *g = kx_var(p, gv);
    /* m = the n-gram g starts at token i of the row with gaps of s */
    Expr *pos = kx_add(p, kx_var(p, iv), kx_bin(p, K_MUL, kx_var(p, jv), kx_addc(p, kx_var(p, sv), 1)));
    Expr *xi[2] = {rank == 2 ? kx_clone(p, idx[0]) : NULL, NULL};
    xi[rank - 1] = kx_bin(p, K_MIN, kx_clone(p, pos), kx_index(p, c - 1));
    Expr *tok = kx_cast(p, DT_INT64, kx_load(p, x, xi));
    Expr *gj[2] = {kx_clone(p, g), kx_var(p, jv)};
    Expr *lg = kx_load(p, tl, &g);
    Expr *hit = kx_and(p, kx_bin(p, K_LT, pos, kx_index(p, c)), kx_bin(p, K_EQ, tok, kx_load(p, tg, gj)));
    Expr *past = kx_bin(p, K_GE, kx_cast(p, DT_INT64, kx_var(p, jv)), kx_clone(p, lg));
    Stmt *step = ks_set(p, m, kx_and(p, sreg(p, k, m), kx_bin(p, K_OR, past, hit)));
    Stmt *at = ks_set(p, m, kx_const(p, DT_BOOL, 1));
    ks_seq(at, ks_loop(p, jv, 0, maxn, 1, step));
    ks_seq(at, ks_if(p, sreg(p, k, m), ks_set(p, cnt, kx_bin(p, K_ADD, sreg(p, k, cnt), kx_const(p, DT_FLOAT, 1))), NULL));
    Expr *once = kx_bin(p, K_OR, kx_bin(p, K_EQ, kx_var(p, sv), kx_index(p, 0)),
                        kx_bin(p, K_GT, kx_clone(p, lg), kx_const(p, DT_INT64, 1)));
    Stmt *count = ks_set(p, cnt, kx_const(p, DT_FLOAT, 0));
    ks_seq(count, ks_loop(p, sv, 0, skips, 1, ks_if(p, once, ks_loop(p, iv, 0, c, 1, at), NULL)));
    Expr *w = kx_load(p, tw, (Expr *[]){kx_clone(p, g)});
    Expr *term = strcmp(mode, "TF") == 0 ? sreg(p, k, cnt)
               : strcmp(mode, "IDF") == 0 ? kx_select(p, kx_bin(p, K_GT, sreg(p, k, cnt), kx_const(p, DT_FLOAT, 0)), w, kx_const(p, DT_FLOAT, 0))
               : kx_bin(p, K_MUL, sreg(p, k, cnt), w);
    ks_seq(count, ks_set(p, acc, kx_bin(p, K_ADD, sreg(p, k, acc), term)));
    Expr *mine = kx_bin(p, K_EQ, kx_load(p, tc, (Expr *[]){kx_clone(p, g)}), kx_cast(p, DT_INT64, kx_clone(p, idx[rank - 1])));
    Stmt *body = ks_set(p, acc, kx_const(p, DT_FLOAT, 0));
    ks_seq(body, ks_loop(p, gv, 0, ng, 1, ks_if(p, mine, count, NULL)));
    ks_seq(body, ks_store(p, y, idx, sreg(p, k, acc)));
    k->body = lower_wrap(p, rank, y->dims, vars, body);
}
