/* text.c - the ops on text: StringNormalizer, TfIdfVectorizer, and Cast/CastLike to and from
 * strings (elementwise.c's Cast rules hand those here), and Equal of strings (opset 19).
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The pool as a list of n-grams: ngram_counts[l] is where the (l+1)-grams start in the pool
 * (pool_int64s, or pool_strings for string tokens), ngram_indexes[g] the output column of the
 * g-th n-gram in pool order. */
typedef struct Pool {
    int64_t nlevels, ngrams, width;     /* width: the output columns */
    const int64_t *counts, *indexes, *ints;
    char **strings;                     /* pool_strings, or NULL */
    int64_t ntokens;
} Pool;

static bool read_pool(Graph *g, Node *n, bool strings, Pool *pl) {
    const char *where = g ? ir_where(g, n) : NULL;
    memset(pl, 0, sizeof *pl);
    pl->nlevels = ir_attr_ints(n, "ngram_counts", &pl->counts);
    int64_t nidx = ir_attr_ints(n, "ngram_indexes", &pl->indexes);
    Attr *ps = ir_attr(n, "pool_strings");
    if (strings) {
        pl->strings = ps ? ps->strings : NULL;
        pl->ntokens = ps ? ps->n : 0;
    } else {
        pl->ntokens = ir_attr_ints(n, "pool_int64s", &pl->ints);
    }
    const char *pool = strings ? "pool_strings" : "pool_int64s";
    if ((strings && ir_attr(n, "pool_int64s")) || (!strings && ps)) {
        if (where) error(where, "%s tokens need %s", strings ? "string" : "integer", pool);
        return false;
    }
    for (int64_t l = 0; l < pl->nlevels; l++) {
        int64_t lo = pl->counts[l], hi = l + 1 < pl->nlevels ? pl->counts[l + 1] : pl->ntokens;
        if (lo < 0 || hi < lo || hi > pl->ntokens || (hi - lo) % (l + 1)) {
            if (where) error(where, "ngram_counts does not cut %s (%lld values) into whole %lld-grams",
                             pool, (long long)pl->ntokens, (long long)(l + 1));
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
    if (x->dtype != DT_INT32 && x->dtype != DT_INT64 && x->dtype != DT_STRING) {
        error(ir_where(g, n), "input '%s' is %s; TfIdfVectorizer takes int32, int64 or strings", x->name,
              dtype_name(x->dtype));
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
    int64_t skip = ir_attr_int(n, "max_skip_count", 0);
    if (lo < 1 || hi < lo || skip < 0 || skip > INT32_MAX) {
        error(ir_where(g, n), "bad n-gram lengths (min %lld, max %lld) or max_skip_count %lld (0 to 2^31 - 1)",
              (long long)lo, (long long)hi, (long long)skip);
        return;
    }
    Pool pl;
    if (!read_pool(g, n, x->dtype == DT_STRING, &pl)) return;
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

/* The n-grams of lengths min..max as tables: tokens gram[g][j] (int64, or for strings
 * char[ir_strlen] each, NUL-padded), len[g], col[g] (output column), wt[g] (weight). An
 * n-gram outside the lengths, or with a string longer than the capacity (no input can
 * hold it), is never counted: it is left out and its column stays 0. */
typedef struct Grams {
    int64_t n, maxn;
    int64_t *gram, *len, *col;
    uint8_t *bytes;
    float *wt;
} Grams;

static void pool_grams(Program *p, Node *n, const Pool *pl, Grams *G) {
    int64_t lo = ir_attr_int(n, "min_gram_length", 1), hi = ir_attr_int(n, "max_gram_length", 1);
    Attr *wa = ir_attr(n, "weights");
    size_t N = ir_strlen;
    memset(G, 0, sizeof *G);
    G->maxn = MAX(MIN(hi, pl->nlevels), 1);
    int64_t cap = pl->ngrams * G->maxn + 1;
    G->gram = ARENA_ARRAY(p->arena, int64_t, cap);
    G->bytes = arena_alloc(p->arena, (size_t)cap * N);
    memset(G->bytes, 0, (size_t)cap * N);
    G->len = ARENA_ARRAY(p->arena, int64_t, pl->ngrams + 1);
    G->col = ARENA_ARRAY(p->arena, int64_t, pl->ngrams + 1);
    G->wt = ARENA_ARRAY(p->arena, float, pl->ngrams + 1);
    for (int64_t l = 0, gi = 0; l < pl->nlevels; l++) {
        int64_t a = pl->counts[l], e = l + 1 < pl->nlevels ? pl->counts[l + 1] : pl->ntokens;
        for (int64_t q = a; q < e; q += l + 1, gi++) {
            bool fits = l + 1 >= lo && l + 1 <= hi;
            for (int64_t j = 0; j <= l && fits && pl->strings; j++) fits = strlen(pl->strings[q + j]) <= N;
            if (!fits) continue;
            for (int64_t j = 0; j <= l; j++) {
                int64_t at = G->n * G->maxn + j;
                if (pl->strings) memcpy(G->bytes + at * (int64_t)N, pl->strings[q + j], strlen(pl->strings[q + j]));
                else G->gram[at] = pl->ints[q + j];
            }
            G->len[G->n] = l + 1;
            G->col[G->n] = pl->indexes[gi];
            G->wt[G->n] = wa && wa->n ? wa->floats[gi] : 1.0f;
            G->n++;
        }
    }
}

/* out[b, o] = sum over the pool n-grams g with column o of their term (TF: count, IDF:
 * weight if count > 0, TFIDF: count * weight); the count of g is how often it occurs in row
 * b with its tokens s+1 apart, s = 0..max_skip_count (a unigram once). The pool is read from
 * constant tables in loops, so the code does not grow with it. String tokens are equal when
 * their bytes are, up to the pool string's end (as StringNormalizer's stopwords). */
void lower_tfidf(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Pool pl;
    Grams G;
    if (!read_pool(NULL, n, x->string, &pl)) die("lower_tfidf: %s", n->name);
    pool_grams(p, n, &pl, &G);
    int64_t skips = ir_attr_int(n, "max_skip_count", 0) + 1;
    const char *mode = ir_attr_str(n, "mode", "");
    int64_t gd[3] = {MAX(G.n, 1), G.maxn, (int64_t)ir_strlen};
    Buf *tg = x->string ? const_table(L, n, "pool", DT_UINT8, 3, gd, G.bytes)
                        : const_table(L, n, "pool", DT_INT64, 2, gd, G.gram);
    Buf *tl = const_table(L, n, "len", DT_INT64, 1, gd, G.len);
    Buf *tc = const_table(L, n, "col", DT_INT64, 1, gd, G.col);
    Buf *tw = const_table(L, n, "weights", DT_FLOAT, 1, gd, G.wt);
    int vars[2];
    Expr *idx[2];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, tg, tl, tc, tw), y, vars, idx);
    int rank = y->rank, acc = kir_scalar(p, k, DT_FLOAT), cnt = kir_scalar(p, k, DT_FLOAT);
    int m = kir_scalar(p, k, DT_BOOL);
    int gv = kir_var(k), sv = kir_var(k), iv = kir_var(k), jv = kir_var(k);
    int64_t c = x->dims[rank - 1];
    /* m = the n-gram g starts at token i of the row with gaps of s */
    Expr *pos = kx_add(p, kx_var(p, iv), kx_bin(p, K_MUL, kx_var(p, jv), kx_addc(p, kx_var(p, sv), 1)));
    Expr *xi[3] = {rank == 2 ? kx_clone(p, idx[0]) : NULL, NULL, NULL};
    xi[rank - 1] = kx_bin(p, K_MIN, kx_clone(p, pos), kx_index(p, c - 1));
    Expr *lg = kx_load(p, tl, (Expr *[]){kx_var(p, gv)});
    Expr *past = kx_bin(p, K_GE, kx_cast(p, DT_INT64, kx_var(p, jv)), kx_clone(p, lg));
    Stmt *at = ks_set(p, m, kx_const(p, DT_BOOL, 1));
    Stmt *step;
    if (x->string) {
        /* eq = token pos equals the pool string: match_word's comparison */
        int eq = kir_scalar(p, k, DT_BOOL), done = kir_scalar(p, k, DT_BOOL), bv = kir_var(k);
        xi[rank] = kx_var(p, bv);
        Expr *pc = kx_load(p, tg, (Expr *[]){kx_var(p, gv), kx_var(p, jv), kx_var(p, bv)});
        Stmt *cmp = ks_set(p, eq, kx_and(p, sreg(p, k, eq), kx_bin(p, K_OR, sreg(p, k, done),
                                                                     kx_bin(p, K_EQ, kx_load(p, x, xi), pc))));
        ks_seq(cmp, ks_set(p, done, kx_bin(p, K_OR, sreg(p, k, done), kx_bin(p, K_EQ, kx_clone(p, pc), u8(p, 0)))));
        step = ks_set(p, eq, kx_const(p, DT_BOOL, 1));
        ks_seq(step, ks_set(p, done, kx_const(p, DT_BOOL, 0)));
        ks_seq(step, ks_loop(p, bv, 0, (int64_t)ir_strlen, 1, cmp));
        Expr *hit = kx_and(p, kx_bin(p, K_LT, pos, kx_index(p, c)), sreg(p, k, eq));
        ks_seq(step, ks_set(p, m, kx_and(p, sreg(p, k, m), kx_bin(p, K_OR, past, hit))));
    } else {
        Expr *tok = kx_cast(p, DT_INT64, kx_load(p, x, xi));
        Expr *hit = kx_and(p, kx_bin(p, K_LT, pos, kx_index(p, c)),
                           kx_bin(p, K_EQ, tok, kx_load(p, tg, (Expr *[]){kx_var(p, gv), kx_var(p, jv)})));
        step = ks_set(p, m, kx_and(p, sreg(p, k, m), kx_bin(p, K_OR, past, hit)));
    }
    ks_seq(at, ks_loop(p, jv, 0, G.maxn, 1, step));
    ks_seq(at, ks_if(p, sreg(p, k, m), ks_set(p, cnt, kx_bin(p, K_ADD, sreg(p, k, cnt), kx_const(p, DT_FLOAT, 1))), NULL));
    Expr *once = kx_bin(p, K_OR, kx_bin(p, K_EQ, kx_var(p, sv), kx_index(p, 0)),
                        kx_bin(p, K_GT, lg, kx_const(p, DT_INT64, 1)));
    Stmt *count = ks_set(p, cnt, kx_const(p, DT_FLOAT, 0));
    ks_seq(count, ks_loop(p, sv, 0, skips, 1, ks_if(p, once, ks_loop(p, iv, 0, c, 1, at), NULL)));
    Expr *w = kx_load(p, tw, (Expr *[]){kx_var(p, gv)});
    Expr *term = strcmp(mode, "TF") == 0 ? sreg(p, k, cnt)
               : strcmp(mode, "IDF") == 0 ? kx_select(p, kx_bin(p, K_GT, sreg(p, k, cnt), kx_const(p, DT_FLOAT, 0)), w, kx_const(p, DT_FLOAT, 0))
               : kx_bin(p, K_MUL, sreg(p, k, cnt), w);
    ks_seq(count, ks_set(p, acc, kx_bin(p, K_ADD, sreg(p, k, acc), term)));
    Expr *mine = kx_bin(p, K_EQ, kx_load(p, tc, (Expr *[]){kx_var(p, gv)}), kx_cast(p, DT_INT64, kx_clone(p, idx[rank - 1])));
    Stmt *body = ks_set(p, acc, kx_const(p, DT_FLOAT, 0));
    ks_seq(body, ks_loop(p, gv, 0, G.n, 1, ks_if(p, mine, count, NULL)));
    ks_seq(body, ks_store(p, y, idx, sreg(p, k, acc)));
    k->body = lower_wrap(p, rank, y->dims, vars, body);
}

/* ---- Cast and CastLike to and from strings ----
 * Number -> string writes numpy's str() of a float32 (what ONNX's reference and test data
 * use): the shortest decimal that reads back as the same float, positional for 1e-4 <= |x| <
 * 1e16 ("0.5", "100.0", "-0.0"), else scientific ("1e-05", "3.4028235e+38"), "nan", "inf",
 * "-inf". The shortest digits are found by trying 1..9 significant digits in double
 * arithmetic and keeping the first that converts back to x; each output byte is then a
 * function of its position, so the bytes are stored once each, in order. String -> number
 * reads [+-]digits[.digits][(e|E)[+-]digits], NaN, INF and Infinity (any case); anything
 * else (spaces included) gives NaN. Digits past the 17th only scale the result. */

enum { POW_BIAS = 350 };                /* pow10 table: 10^(k - POW_BIAS), k = 0..2*POW_BIAS */

static Buf *pow10_table(Lower *L, Node *n) {
    double *t = ARENA_ARRAY(L->p->arena, double, 2 * POW_BIAS + 1);
    char s[16];
    for (int k = 0; k <= 2 * POW_BIAS; k++) {
        snprintf(s, sizeof s, "1e%d", k - POW_BIAS);
        t[k] = strtod(s, NULL);         /* correctly rounded, unlike a product of tens */
    }
    int64_t d = 2 * POW_BIAS + 1;
    return const_table(L, n, "pow10", DT_DOUBLE, 1, &d, t);
}

static Expr *i64(Program *p, int64_t v) { return kx_int(p, DT_INT64, v); }
static Expr *f64(Program *p, double v) { return kx_const(p, DT_DOUBLE, v); }
static Expr *bin(Program *p, KOp op, Expr *a, Expr *b) { return kx_bin(p, op, a, b); }

/* 10^e for an int64 e (clamped to the table) */
static Expr *pow10_of(Program *p, Buf *pw, Expr *e) {
    Expr *i = bin(p, K_MIN, bin(p, K_MAX, bin(p, K_ADD, e, i64(p, POW_BIAS)), i64(p, 0)), i64(p, 2 * POW_BIAS));
    Expr *ix = kx_cast(p, DT_INDEX, i);
    return kx_load(p, pw, &ix);
}

void infer_cast_string(Graph *g, Node *n, DType to) {
    Value *x = n->in[0];
    if (to == DT_STRING && x->dtype != DT_FLOAT) {
        error(ir_where(g, n), "cast of %s to string: onnxcc casts only float32 to string", dtype_name(x->dtype));
        return;
    }
    if (x->dtype == DT_STRING && to != DT_FLOAT && to != DT_DOUBLE) {
        error(ir_where(g, n), "cast of string to %s: onnxcc casts strings only to float32 and float64", dtype_name(to));
        return;
    }
    if (to == DT_STRING && ir_strlen < 19) {
        error(ir_where(g, n), "cast to string needs a string capacity of at least 19 bytes "
              "(--max-strlen is %zu)", ir_strlen);
        return;
    }
    ir_set_shape(n->out[0], to, x->rank, x->dims);
}

/* string -> float32 / float64 */
static void lower_parse(Lower *L, Node *n, Buf *x, Buf *y) {
    Program *p = L->p;
    Buf *pw = pow10_table(L, n);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, pw), y, vars, idx);
    enum { ENDED, NEG, SEEN, BAD, ENEG, ESEEN, NREG_BOOL };
    int rb[NREG_BOOL], phase = kir_scalar(p, k, DT_INT64), mant = kir_scalar(p, k, DT_INT64);
    int fexp = kir_scalar(p, k, DT_INT64), ex = kir_scalar(p, k, DT_INT64), lw = kir_scalar(p, k, DT_INT64);
    for (int i = 0; i < NREG_BOOL; i++) rb[i] = kir_scalar(p, k, DT_BOOL);
#define R(r) sreg(p, k, r)
#define B(r) sreg(p, k, rb[r])
#define SETB(r, v) ks_set(p, rb[r], v)
    int j = kir_var(k);
    Expr *xi[MAX_RANK + 1];
    for (int d = 0; d < y->rank; d++) xi[d] = kx_clone(p, idx[d]);
    xi[y->rank] = kx_var(p, j);
    Expr *c = kx_load(p, x, xi);
#define C() kx_clone(p, c)
#define IS(ch) bin(p, K_EQ, C(), u8(p, ch))
#define PH(op, v) bin(p, op, R(phase), i64(p, v))
    Expr *dig = kx_and(p, bin(p, K_GE, C(), u8(p, '0')), bin(p, K_LE, C(), u8(p, '9')));
    Expr *d = bin(p, K_SUB, kx_cast(p, DT_INT64, C()), i64(p, '0'));
    Expr *lc = bin(p, K_OR, C(), u8(p, 32));
    Expr *letter = kx_and(p, bin(p, K_GE, kx_clone(p, lc), u8(p, 'a')), bin(p, K_LE, kx_clone(p, lc), u8(p, 'z')));
    /* a mantissa digit: kept while the int64 has room, else it only scales */
    Stmt *keep = ks_set(p, mant, bin(p, K_ADD, bin(p, K_MUL, R(mant), i64(p, 10)), kx_clone(p, d)));
    ks_seq(keep, ks_if(p, PH(K_EQ, 2), ks_set(p, fexp, bin(p, K_SUB, R(fexp), i64(p, 1))), NULL));
    Stmt *mdig = ks_if(p, bin(p, K_LT, R(mant), i64(p, 100000000000000000)), keep,
                       ks_if(p, PH(K_NE, 2), ks_set(p, fexp, bin(p, K_ADD, R(fexp), i64(p, 1))), NULL));
    ks_seq(mdig, SETB(SEEN, kx_const(p, DT_BOOL, 1)));
    ks_seq(mdig, ks_if(p, PH(K_EQ, 0), ks_set(p, phase, i64(p, 1)), NULL));
    Stmt *edig = ks_set(p, ex, bin(p, K_MIN, bin(p, K_ADD, bin(p, K_MUL, R(ex), i64(p, 10)), kx_clone(p, d)), i64(p, 100000)));
    ks_seq(edig, ks_set(p, phase, i64(p, 4)));
    ks_seq(edig, SETB(ESEEN, kx_const(p, DT_BOOL, 1)));
    Stmt *word = ks_set(p, lw, bin(p, K_ADD, bin(p, K_MUL, R(lw), i64(p, 32)),
                                   bin(p, K_SUB, kx_cast(p, DT_INT64, kx_clone(p, lc)), i64(p, 'a' - 1))));
    ks_seq(word, ks_set(p, phase, i64(p, 1)));
    ks_seq(word, ks_if(p, bin(p, K_GE, R(lw), i64(p, (int64_t)1 << 50)), SETB(BAD, kx_const(p, DT_BOOL, 1)), NULL));
    Expr *sign = bin(p, K_OR, IS('+'), IS('-'));
    Expr *nolw = bin(p, K_EQ, R(lw), i64(p, 0));
    /* the chain of cases for one byte, last case first */
    Stmt *st = SETB(BAD, kx_const(p, DT_BOOL, 1));
    st = ks_if(p, kx_and(p, kx_and(p, letter, PH(K_LE, 1)), kx_un(p, K_NOT, B(SEEN))), word, st);
    st = ks_if(p, kx_and(p, kx_clone(p, dig), PH(K_GE, 3)), edig, st);
    Stmt *esg = ks_set(p, phase, i64(p, 4));
    ks_seq(esg, SETB(ENEG, IS('-')));
    st = ks_if(p, kx_and(p, kx_clone(p, sign), PH(K_EQ, 3)), esg, st);
    st = ks_if(p, kx_and(p, kx_and(p, bin(p, K_OR, IS('e'), IS('E')), PH(K_LE, 2)), kx_and(p, B(SEEN), kx_clone(p, nolw))),
               ks_set(p, phase, i64(p, 3)), st);
    st = ks_if(p, kx_and(p, IS('.'), kx_and(p, PH(K_LE, 1), kx_clone(p, nolw))), ks_set(p, phase, i64(p, 2)), st);
    st = ks_if(p, kx_and(p, dig, kx_and(p, PH(K_LE, 2), nolw)), mdig, st);
    Stmt *sg = ks_set(p, phase, i64(p, 1));
    ks_seq(sg, SETB(NEG, IS('-')));
    st = ks_if(p, kx_and(p, sign, PH(K_EQ, 0)), sg, st);
    st = ks_if(p, IS(0), SETB(ENDED, kx_const(p, DT_BOOL, 1)), st);
    Stmt *body = NULL;
    for (int i = 0; i < NREG_BOOL; i++) body = ks_seq(body, SETB(i, kx_const(p, DT_BOOL, 0)));
    int zero[] = {phase, mant, fexp, ex, lw};
    for (int i = 0; i < 5; i++) ks_seq(body, ks_set(p, zero[i], i64(p, 0)));
    ks_seq(body, ks_loop(p, j, 0, x->dims[x->rank - 1], 1, ks_if(p, kx_un(p, K_NOT, B(ENDED)), st, NULL)));
    /* the value */
    Expr *e = bin(p, K_ADD, R(fexp), kx_select(p, B(ENEG), bin(p, K_SUB, i64(p, 0), R(ex)), R(ex)));
    Expr *m = kx_cast(p, DT_DOUBLE, R(mant));
    Expr *v = kx_select(p, bin(p, K_GE, kx_clone(p, e), i64(p, 0)), bin(p, K_MUL, m, pow10_of(p, pw, kx_clone(p, e))),
                        bin(p, K_DIV, kx_clone(p, m), pow10_of(p, pw, bin(p, K_SUB, i64(p, 0), e))));
    v = kx_select(p, B(NEG), kx_un(p, K_NEG, kx_clone(p, v)), v);
    int64_t h_inf = (9 * 32 + 14) * 32 + 6;                /* "inf" as parsed into lw */
    int64_t h_infinity = h_inf;
    for (const char *s = "inity"; *s; s++) h_infinity = h_infinity * 32 + (*s - 'a' + 1);
    Expr *isinf = bin(p, K_OR, bin(p, K_EQ, R(lw), i64(p, h_inf)), bin(p, K_EQ, R(lw), i64(p, h_infinity)));
    Expr *inf = kx_select(p, B(NEG), f64(p, -INFINITY), f64(p, INFINITY));
    Expr *num_ok = kx_and(p, kx_and(p, B(SEEN), kx_un(p, K_NOT, B(BAD))),
                          kx_un(p, K_NOT, bin(p, K_OR, PH(K_EQ, 3), kx_and(p, PH(K_EQ, 4), kx_un(p, K_NOT, B(ESEEN))))));
    Expr *word_ok = kx_and(p, kx_un(p, K_NOT, B(BAD)), bin(p, K_NE, R(lw), i64(p, 0)));
    /* "nan", like every malformed string, gives NaN */
    Expr *val = kx_select(p, num_ok, v, kx_select(p, kx_and(p, word_ok, isinf), inf, f64(p, NAN)));
    ks_seq(body, ks_store(p, y, idx, kx_cast(p, y->dtype, val)));
    k->body = lower_wrap(p, y->rank, y->dims, vars, body);
#undef R
#undef B
#undef SETB
#undef C
#undef IS
#undef PH
}

/* Digit kk (0 = the first) of the P-digit integer in register D, as a character; '0'
 * outside 0..P-1 (the zeros a positional number adds on either side). */
static Expr *digit_char(Program *p, Kernel *k, Buf *pi, int D, int P, Expr *kk) {
    Expr *valid = kx_and(p, bin(p, K_GE, kx_clone(p, kk), i64(p, 0)), bin(p, K_LT, kx_clone(p, kk), sreg(p, k, P)));
    Expr *e = bin(p, K_SUB, bin(p, K_SUB, sreg(p, k, P), i64(p, 1)), kk);
    Expr *ei = kx_cast(p, DT_INDEX, bin(p, K_MIN, bin(p, K_MAX, e, i64(p, 0)), i64(p, 18)));
    Expr *d = bin(p, K_REM, bin(p, K_DIV, sreg(p, k, D), kx_load(p, pi, &ei)), i64(p, 10));
    return kx_select(p, valid, kx_cast(p, DT_UINT8, bin(p, K_ADD, d, i64(p, '0'))), u8(p, '0'));
}

/* float32 -> string */
static void lower_format(Lower *L, Node *n, Buf *x, Buf *y) {
    Program *p = L->p;
    Buf *pw = pow10_table(L, n);
    int64_t pwi_d = 19, *pwi = ARENA_ARRAY(p->arena, int64_t, 19);
    for (int i = 0; i < 19; i++) pwi[i] = i ? pwi[i - 1] * 10 : 1;
    Buf *pi = const_table(L, n, "pow10i", DT_INT64, 1, &pwi_d, pwi);
    static const uint8_t words[3][4] = {"nan", "inf", "-inf"};
    Buf *tw = const_table(L, n, "words", DT_UINT8, 2, (int64_t[]){3, 4}, (void *)words);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, pw, pi, tw), NULL, NULL, NULL);
    kir_param(p, k, y, KP_OUT);
    int rank = x->rank;
    lower_vars(k, rank, vars);
    lower_var_idx(p, rank, vars, idx);
    int ax = kir_scalar(p, k, DT_DOUBLE), q = kir_scalar(p, k, DT_DOUBLE);
    int e10 = kir_scalar(p, k, DT_INT64), D = kir_scalar(p, k, DT_INT64), P = kir_scalar(p, k, DT_INT64);
    int sc = kir_scalar(p, k, DT_INT64), neg = kir_scalar(p, k, DT_BOOL), found = kir_scalar(p, k, DT_BOOL);
    int special = kir_scalar(p, k, DT_INT64);       /* -1 a number, else the row of words */
    int sci = kir_scalar(p, k, DT_BOOL);
#define R(r) sreg(p, k, r)
    Expr *v = kx_cast(p, DT_DOUBLE, kx_load(p, x, idx));
    Stmt *b = ks_set(p, ax, kx_un(p, K_ABS, kx_clone(p, v)));
    /* -0.0 is negative: 1/x is -inf */
    ks_seq(b, ks_set(p, neg, bin(p, K_OR, bin(p, K_LT, kx_clone(p, v), f64(p, 0)),
                                 bin(p, K_LT, kx_un(p, K_RECIP, kx_clone(p, v)), f64(p, 0)))));
    ks_seq(b, ks_set(p, special, kx_select(p, bin(p, K_NE, kx_clone(p, v), kx_clone(p, v)), i64(p, 0),
                                           kx_select(p, bin(p, K_GT, R(ax), f64(p, 3.5e38)),
                                                     kx_select(p, R(neg), i64(p, 2), i64(p, 1)), i64(p, -1)))));
    Expr *zero = bin(p, K_EQ, R(ax), f64(p, 0));
    Expr *num = bin(p, K_LT, R(special), i64(p, 0));
    /* e10: the place of the first digit; log10 may be one off near powers of ten */
    Stmt *e = ks_set(p, e10, kx_cast(p, DT_INT64, kx_un(p, K_FLOOR, bin(p, K_DIV, kx_un(p, K_LOG, R(ax)), f64(p, log(10.0))))));
    ks_seq(e, ks_if(p, bin(p, K_GE, R(ax), pow10_of(p, pw, bin(p, K_ADD, R(e10), i64(p, 1)))),
                    ks_set(p, e10, bin(p, K_ADD, R(e10), i64(p, 1))), NULL));
    ks_seq(e, ks_if(p, bin(p, K_LT, R(ax), pow10_of(p, pw, R(e10))), ks_set(p, e10, bin(p, K_SUB, R(e10), i64(p, 1))), NULL));
    ks_seq(b, ks_set(p, e10, i64(p, 0)));
    ks_seq(b, ks_if(p, kx_and(p, kx_clone(p, num), kx_un(p, K_NOT, kx_clone(p, zero))), e, NULL));
    /* the fewest digits (1..9) that read back as x */
    ks_seq(b, ks_set(p, found, kx_un(p, K_NOT, kx_clone(p, num))));
    ks_seq(b, ks_set(p, found, bin(p, K_OR, R(found), zero)));
    ks_seq(b, ks_set(p, D, i64(p, 0)));
    ks_seq(b, ks_set(p, P, i64(p, 1)));
    int pv = kir_var(k);
    Expr *pd = bin(p, K_ADD, kx_cast(p, DT_INT64, kx_var(p, pv)), i64(p, 1));
    Stmt *t = ks_set(p, sc, bin(p, K_ADD, bin(p, K_SUB, R(e10), kx_clone(p, pd)), i64(p, 1)));
    Expr *up = bin(p, K_GE, R(sc), i64(p, 0));
    ks_seq(t, ks_set(p, q, kx_un(p, K_ROUND, kx_select(p, up, bin(p, K_DIV, R(ax), pow10_of(p, pw, R(sc))),
                                                       bin(p, K_MUL, R(ax), pow10_of(p, pw, bin(p, K_SUB, i64(p, 0), R(sc))))))));
    Expr *back = kx_select(p, kx_clone(p, up), bin(p, K_MUL, R(q), pow10_of(p, pw, R(sc))),
                           bin(p, K_DIV, R(q), pow10_of(p, pw, bin(p, K_SUB, i64(p, 0), R(sc)))));
    Stmt *hit = ks_set(p, found, kx_const(p, DT_BOOL, 1));
    ks_seq(hit, ks_set(p, D, kx_cast(p, DT_INT64, R(q))));
    ks_seq(hit, ks_set(p, P, pd));
    ks_seq(t, ks_if(p, bin(p, K_EQ, kx_cast(p, DT_FLOAT, back), kx_cast(p, DT_FLOAT, R(ax))), hit, NULL));
    ks_seq(b, ks_loop(p, pv, 0, 9, 1, ks_if(p, kx_un(p, K_NOT, R(found)), t, NULL)));
    /* rounding up to 10^P (found at P = 1, D = 10) is one digit at the next place */
    Stmt *carry = ks_set(p, D, i64(p, 1));
    ks_seq(carry, ks_set(p, e10, bin(p, K_ADD, R(e10), i64(p, 1))));
    ks_seq(b, ks_if(p, bin(p, K_EQ, R(D), i64(p, 10)), carry, NULL));
    ks_seq(b, ks_set(p, sci, kx_and(p, kx_un(p, K_NOT, bin(p, K_EQ, R(ax), f64(p, 0))),
                                    bin(p, K_OR, bin(p, K_LT, R(ax), f64(p, 1e-4)), bin(p, K_GE, R(ax), f64(p, 1e16))))));
    /* byte j of the text, as a function of j */
    int jv = kir_var(k);
    Expr *jj = bin(p, K_SUB, kx_cast(p, DT_INT64, kx_var(p, jv)), kx_cast(p, DT_INT64, R(neg)));
#define JJ() kx_clone(p, jj)
#define DIGIT(kk) digit_char(p, k, pi, D, P, kk)
    Expr *hi = bin(p, K_MAX, R(e10), i64(p, 0));
    Expr *lo = bin(p, K_MIN, bin(p, K_ADD, bin(p, K_SUB, R(e10), R(P)), i64(p, 1)), i64(p, -1));
    /* positional: places hi..0, '.', -1..lo */
    Expr *place = kx_select(p, bin(p, K_LE, JJ(), kx_clone(p, hi)), bin(p, K_SUB, kx_clone(p, hi), JJ()),
                            bin(p, K_ADD, bin(p, K_SUB, kx_clone(p, hi), JJ()), i64(p, 1)));
    Expr *pos = kx_select(p, bin(p, K_EQ, JJ(), bin(p, K_ADD, kx_clone(p, hi), i64(p, 1))), u8(p, '.'),
                          DIGIT(bin(p, K_SUB, R(e10), place)));
    Expr *plen = bin(p, K_SUB, bin(p, K_ADD, hi, i64(p, 2)), lo);       /* bytes after the sign */
    pos = kx_select(p, bin(p, K_GE, JJ(), plen), u8(p, 0), pos);
    /* scientific: d[.ddd]e(+|-)XX */
    Expr *q0 = kx_select(p, bin(p, K_GT, R(P), i64(p, 1)), bin(p, K_ADD, R(P), i64(p, 1)), i64(p, 1));
    Expr *ae = kx_un(p, K_ABS, R(e10));
    Expr *sv = kx_select(p, bin(p, K_EQ, JJ(), bin(p, K_ADD, kx_clone(p, q0), i64(p, 3))),
                         kx_cast(p, DT_UINT8, bin(p, K_ADD, bin(p, K_REM, kx_clone(p, ae), i64(p, 10)), i64(p, '0'))), u8(p, 0));
    sv = kx_select(p, bin(p, K_EQ, JJ(), bin(p, K_ADD, kx_clone(p, q0), i64(p, 2))),
                   kx_cast(p, DT_UINT8, bin(p, K_ADD, bin(p, K_DIV, ae, i64(p, 10)), i64(p, '0'))), sv);
    sv = kx_select(p, bin(p, K_EQ, JJ(), bin(p, K_ADD, kx_clone(p, q0), i64(p, 1))),
                   kx_select(p, bin(p, K_LT, R(e10), i64(p, 0)), u8(p, '-'), u8(p, '+')), sv);
    sv = kx_select(p, bin(p, K_EQ, JJ(), kx_clone(p, q0)), u8(p, 'e'), sv);
    sv = kx_select(p, kx_and(p, bin(p, K_GE, JJ(), i64(p, 2)), bin(p, K_LE, JJ(), R(P))), DIGIT(bin(p, K_SUB, JJ(), i64(p, 1))), sv);
    sv = kx_select(p, kx_and(p, bin(p, K_EQ, JJ(), i64(p, 1)), bin(p, K_GT, R(P), i64(p, 1))), u8(p, '.'), sv);
    sv = kx_select(p, bin(p, K_EQ, JJ(), i64(p, 0)), DIGIT(i64(p, 0)), sv);
    Expr *ch = kx_select(p, R(sci), sv, pos);
    ch = kx_select(p, bin(p, K_LT, JJ(), i64(p, 0)), u8(p, '-'), ch);
    /* nan, inf, -inf */
    Expr *wj = kx_bin(p, K_MIN, kx_var(p, jv), kx_index(p, 3));
    Expr *wi[2] = {kx_cast(p, DT_INDEX, bin(p, K_MAX, R(special), i64(p, 0))), wj};
    Expr *word = kx_select(p, bin(p, K_LT, kx_var(p, jv), kx_index(p, 4)), kx_load(p, tw, wi), u8(p, 0));
    ch = kx_select(p, bin(p, K_GE, R(special), i64(p, 0)), word, ch);
    Expr *yi[MAX_RANK + 1];
    for (int d = 0; d < rank; d++) yi[d] = kx_clone(p, idx[d]);
    yi[rank] = kx_var(p, jv);
    ks_seq(b, ks_loop(p, jv, 0, (int64_t)ir_strlen, 1, ks_store(p, y, yi, ch)));
    k->body = lower_wrap(p, rank, x->dims, vars, b);
#undef R
#undef JJ
#undef DIGIT
}

void lower_cast_string(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    if (y->string) lower_format(L, n, x, y);
    else lower_parse(L, n, x, y);
}

/* ---- Equal on strings (opset 19) ----
 * y = every byte of the two (NUL-padded) strings is the same, with numpy broadcasting over
 * the strings' dims. */
void lower_equal_string(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *a = lower_in(L, n, 0), *b = lower_in(L, n, 1), *y = lower_out(L, n, 0);
    int ov[MAX_RANK];
    Expr *oi[MAX_RANK], *ai[MAX_RANK + 1], *bi[MAX_RANK + 1];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(a, b), y, ov, oi);
    int acc = kir_scalar(p, k, DT_BOOL), j = kir_var(k);
    Buf *ab[2] = {a, b};
    Expr **idx[2] = {ai, bi};
    for (int i = 0; i < 2; i++) {
        int r = ab[i]->rank - 1;            /* the string's dims, without the bytes */
        for (int d = 0; d < r; d++)
            idx[i][d] = ab[i]->dims[d] == 1 ? kx_index(p, 0) : kx_clone(p, oi[y->rank - r + d]);
        idx[i][r] = kx_var(p, j);
    }
    Expr *same = kx_bin(p, K_EQ, kx_load(p, a, ai), kx_load(p, b, bi));
    Stmt *body = ks_set(p, acc, kx_const(p, DT_BOOL, 1));
    ks_seq(body, ks_red_loop(p, j, (int64_t)ir_strlen,
                             ks_set(p, acc, kx_bin(p, K_AND, kx_scalar(p, k, acc), same))));
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}
