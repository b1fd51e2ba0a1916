/* matmul.c - the matrix-product family: Gemm, MatMul, MatMulInteger, QLinearMatMul, Einsum,
 * and Det.
 *
 * Kernels keep the shape fusion and tiling rely on: parallel loops over the output dims
 * outermost (in natural order), the reduction loop inside accumulating into a scalar
 * register, and one final store `out[o...] = value` per element so that fusion can substitute
 * an elementwise consumer into it. The layout of constant weights is the schedule pass's
 * business (column panels: passes/schedule.c). The integer
 * products compute in int32 after subtracting the zero points, like the ONNX reference.
 * Einsum is one sum-of-products loop nest, for any equation numpy accepts. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- Gemm and MatMul ---- */

void infer_gemm(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[1], *c = n->nin > 2 ? n->in[2] : NULL;
    bool ta = ir_attr_int(n, "transA", 0), tb = ir_attr_int(n, "transB", 0);
    if (!rule_same_type(g, n, 1, 2)) return;
    if (a->rank != 2 || b->rank != 2) {
        error(ir_where(g, n), "A and B must be matrices (ranks %d, %d)", a->rank, b->rank);
        return;
    }
    int64_t dims[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
    if (a->dims[ta ? 0 : 1] != b->dims[tb ? 1 : 0]) {
        error(ir_where(g, n), "inner dimensions differ: %lld and %lld",
              (long long)a->dims[ta ? 0 : 1], (long long)b->dims[tb ? 1 : 0]);
        return;
    }
    if (c && !rule_broadcasts_to(c, 2, dims)) {
        error(ir_where(g, n), "C does not broadcast to [%lld, %lld]", (long long)dims[0],
              (long long)dims[1]);
        return;
    }
    ir_set_shape(n->out[0], a->dtype, 2, dims);
}

/* y[i, j] = alpha * sum_k A'[i, k] * B'[k, j] + beta * C[i, j] (C broadcast, ' = transposed
 * when asked). */
void lower_gemm(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *a = lower_in(L, n, 0), *b = lower_in(L, n, 1), *c = lower_in(L, n, 2);
    Buf *y = lower_out(L, n, 0);
    bool ta = ir_attr_int(n, "transA", 0), tb = ir_attr_int(n, "transB", 0);
    double alpha = ir_attr_float(n, "alpha", 1), beta = ir_attr_float(n, "beta", 1);
    int64_t kd = a->dims[ta ? 0 : 1];
    if (beta == 0) c = NULL;

    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(a, b, c), y, NULL, NULL);
    int ov[2], kv, acc;
    lower_vars(k, 2, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, y->dtype);
    Expr *oi[2], *ai[2], *bi[3], *kx = kx_var(p, kv);
    lower_var_idx(p, 2, ov, oi);
    ai[ta ? 1 : 0] = oi[0];
    ai[ta ? 0 : 1] = kx;
    bi[tb ? 1 : 0] = kx;
    bi[tb ? 0 : 1] = oi[1];
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, a, ai), kx_load(p, b, bi));
    Stmt *body = ks_set(p, acc, kx_const(p, y->dtype, 0));
    ks_seq(body, ks_red_loop(p, kv, kd, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod))));
    Expr *v = kx_scalar(p, k, acc);
    if (alpha != 1) v = kx_bin(p, K_MUL, kx_const(p, y->dtype, alpha), v);
    if (c) {
        Expr *ci[2];
        lower_bcast_idx(p, c, 2, oi, ci);
        Expr *cv = kx_load(p, c, ci);
        if (cv->type != y->dtype) cv = kx_cast(p, y->dtype, cv);
        if (beta != 1) cv = kx_bin(p, K_MUL, kx_const(p, y->dtype, beta), cv);
        v = kx_bin(p, K_ADD, v, cv);
    }
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, 2, y->dims, ov, body);
}

void infer_matmul(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[1];
    MatShape s;
    if (!rule_same_type(g, n, 1, 1)) return;
    if (!rule_matmul_shape(a, b, &s)) {
        error(ir_where(g, n), "shapes of A (rank %d) and B (rank %d) do not multiply", a->rank,
              b->rank);
        return;
    }
    ir_set_shape(n->out[0], a->dtype, s.rank, s.dims);
}

/* Batch part of an operand's index: right-aligned on the result's batch loops, size-1 dims
 * read index 0. */
static void batch_idx(Program *p, const Buf *in, int nbin, int nb, Expr **oi, Expr **res) {
    for (int d = 0; d < nbin; d++)
        res[d] = in->dims[d] == 1 ? kx_index(p, 0) : oi[nb - nbin + d];
}

/* The contraction y = a x b over MatShape s (lower_matmul, and Einsum's matrix products). */
static void matmul_kernel(Lower *L, Node *n, Buf *a, Buf *b, Buf *y, const MatShape *s) {
    Program *p = L->p;
    int r = y->rank;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(a, b), y, NULL, NULL);
    int ov[MAX_RANK], kv, acc;
    lower_vars(k, r, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, y->dtype);
    Expr *oi[MAX_RANK], *ai[MAX_RANK], *bi[MAX_RANK], *kx = kx_var(p, kv);
    lower_var_idx(p, r, ov, oi);
    batch_idx(p, a, s->nba, s->nb, oi, ai);
    batch_idx(p, b, s->nbb, s->nb, oi, bi);
    if (a->rank >= 2) ai[a->rank - 2] = oi[s->nb];
    ai[a->rank - 1] = kx;
    if (b->rank >= 2) {
        bi[b->rank - 2] = kx;
        bi[b->rank - 1] = oi[r - 1];
    } else {
        bi[0] = kx;
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, a, ai), kx_load(p, b, bi));
    Stmt *body = ks_set(p, acc, kx_const(p, y->dtype, 0));
    ks_seq(body, ks_red_loop(p, kv, s->kd, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod))));
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, r, y->dims, ov, body);
}

void lower_matmul(Lower *L, Node *n) {
    MatShape s;
    if (!rule_matmul_shape(n->in[0], n->in[1], &s)) die("lower_matmul %s: unchecked shapes", n->name);
    Buf *a = lower_in(L, n, 0), *b = lower_in(L, n, 1), *y = lower_out(L, n, 0);   /* in this order */
    matmul_kernel(L, n, a, b, y, &s);
}

/* ---- Einsum ---- */

/* Every label of the equation is a dimension id: 'a'..'z' are 0..25, 'A'..'Z' 26..51, and
 * the dims an ellipsis stands for are EIN_ELL.. (right-aligned across the inputs, as numpy
 * broadcasts them). */
enum { EIN_MAXIN = 16, EIN_ELL = 52, EIN_IDS = EIN_ELL + MAX_RANK };

typedef struct EinTerm {
    int tok[MAX_RANK + 1];          /* label ids; -1 for the ellipsis */
    int ntok;
    bool ell;
} EinTerm;

typedef struct Einsum {
    int ids[EIN_MAXIN][MAX_RANK];   /* per input dim: its id */
    int oids[MAX_RANK], orank;      /* per output dim: its id */
    int red[EIN_IDS], nred;         /* ids summed over */
    int64_t size[EIN_IDS];          /* -1: unused */
} Einsum;

static int ein_label(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
    return -1;
}

/* One comma-separated term; stops at the first character that is not part of it. */
static bool ein_term(const char **s, EinTerm *t) {
    t->ntok = 0;
    t->ell = false;
    for (;;) {
        char c = **s;
        if (c == ' ') {
            (*s)++;
            continue;
        }
        if (c != '.' && ein_label(c) < 0) return true;
        if (t->ntok == MAX_RANK + 1) return false;
        if (c == '.') {
            if (strncmp(*s, "...", 3) || t->ell) return false;
            t->ell = true;
            t->tok[t->ntok++] = -1;
            *s += 3;
        } else {
            t->tok[t->ntok++] = ein_label(c);
            (*s)++;
        }
    }
}

/* The output's ids when the equation has no "->": the ellipsis dims, then the labels used
 * once, in ASCII order (capitals first, as numpy does). */
static void ein_implicit(Einsum *e, const int *count, int ell) {
    e->orank = 0;
    for (int k = 0; k < ell; k++) e->oids[e->orank++] = EIN_ELL + k;
    for (int c = 0; c < EIN_ELL; c++) {
        int id = c < 26 ? 26 + c : c - 26;
        if (count[id] == 1 && e->orank < MAX_RANK) e->oids[e->orank++] = id;
    }
}

/* Parse n's equation against its inputs' shapes; false after an error (g NULL: quiet). */
static bool ein_plan(Graph *g, Node *n, Einsum *e) {
    const char *s = ir_attr_str(n, "equation", "");
    EinTerm in[EIN_MAXIN], out;
    int ellrank[EIN_MAXIN], ell = 0, count[EIN_IDS] = {0};
    bool ok = n->nin <= EIN_MAXIN, has_out = false;
    for (int i = 0; ok && i < n->nin; i++) {
        ok = ein_term(&s, &in[i]) && (i + 1 == n->nin || *s++ == ',');
        int labels = in[i].ntok - in[i].ell;
        ellrank[i] = n->in[i]->rank - labels;
        ok = ok && ellrank[i] >= 0 && (in[i].ell || !ellrank[i]);
        ell = MAX(ell, ellrank[i]);
    }
    if (ok && s[0] == '-' && s[1] == '>') {
        s += 2;
        has_out = ein_term(&s, &out);
        ok = has_out;
    }
    if (!ok || *s) {
        if (g) error(ir_where(g, n), "equation '%s' does not fit the inputs (or is malformed)",
                     ir_attr_str(n, "equation", ""));
        return false;
    }
    for (int id = 0; id < EIN_IDS; id++) e->size[id] = -1;
    for (int i = 0; i < n->nin; i++) {
        Value *x = n->in[i];
        for (int t = 0, d = 0; t < in[i].ntok; t++) {
            int first = d, last = in[i].tok[t] < 0 ? d + ellrank[i] : d + 1;
            for (; d < last; d++) {
                int id = in[i].tok[t] < 0 ? EIN_ELL + ell - ellrank[i] + (d - first) : in[i].tok[t];
                int64_t dim = x->dims[d];
                e->ids[i][d] = id;
                count[id]++;
                if (e->size[id] < 0 || e->size[id] == 1) e->size[id] = dim;
                else if (dim != 1 && dim != e->size[id]) {
                    if (g) error(ir_where(g, n), "dimension of size %lld does not match %lld",
                                 (long long)dim, (long long)e->size[id]);
                    return false;
                }
            }
        }
    }
    if (!has_out) {
        ein_implicit(e, count, ell);
    } else {
        e->orank = 0;
        bool seen[EIN_IDS] = {false};
        for (int t = 0; t < out.ntok; t++) {
            int nid = out.tok[t] < 0 ? ell : 1;
            for (int k = 0; k < nid; k++) {
                int id = out.tok[t] < 0 ? EIN_ELL + k : out.tok[t];
                if (e->orank == MAX_RANK || seen[id] || e->size[id] < 0) {
                    if (g) error(ir_where(g, n), "bad output subscripts in '%s'",
                                 ir_attr_str(n, "equation", ""));
                    return false;
                }
                seen[id] = true;
                e->oids[e->orank++] = id;
            }
        }
    }
    bool in_out[EIN_IDS] = {false};
    for (int d = 0; d < e->orank; d++) in_out[e->oids[d]] = true;
    e->nred = 0;
    for (int id = 0; id < EIN_IDS; id++)
        if (e->size[id] >= 0 && !in_out[id]) e->red[e->nred++] = id;
    return true;
}

void infer_einsum(Graph *g, Node *n) {
    Einsum e;
    int64_t dims[MAX_RANK];
    for (int i = 1; i < n->nin; i++)
        if (n->in[i]->dtype != n->in[0]->dtype) {
            error(ir_where(g, n), "inputs of different types");
            return;
        }
    if (n->in[0]->dtype == DT_BOOL) {
        error(ir_where(g, n), "bool inputs are not supported");
        return;
    }
    if (!ein_plan(g, n, &e)) return;
    for (int d = 0; d < e.orank; d++) dims[d] = e.size[e.oids[d]];
    ir_set_shape(n->out[0], n->in[0]->dtype, e.orank, dims);
}

/* x's dims permuted so that its ids come in the order of `order` (r ids), copied into a
 * temporary by a Transpose kernel; x itself when they already do. */
static Buf *ein_permuted(Lower *L, Node *n, Buf *x, const int *ids, const int *order, int r) {
    int perm[MAX_RANK];
    bool same = true;
    int64_t dims[MAX_RANK];
    for (int d = 0; d < r; d++) {
        for (perm[d] = 0; ids[perm[d]] != order[d]; perm[d]++) {}
        same &= perm[d] == d;
        dims[d] = x->dims[perm[d]];
    }
    if (same) return x;
    Program *p = L->p;
    Buf *t = kir_buf_new(p, arena_printf(p->arena, "%s.ein", x->name), x->dtype, r, dims, B_TEMP);
    lower_permute(L, lower_name(L, arena_printf(p->arena, "%s_in", n->name)), t, x, perm);
    return t;
}

/* An Einsum of two float inputs that is a batched matrix product: every id in both inputs
 * and the output (the batch), one in the first input and the output only (M), one in the
 * second and the output only (N), one in both inputs only (K), no diagonal, no size-1
 * broadcast, and the output [batch..., M, N] or [batch..., N, M]. It is lowered as MatMul
 * is, a contraction the schedule tiles (column panels, register tiles), after copying an
 * input whose dims are in another order into [batch..., rows, K] or [batch..., K, columns],
 * as an exported Transpose -> MatMul would (attention's q k^T). The sum-of-products nest it
 * had instead ran at ~3% of the FMA peak: MaxViT-T's attention ("BGHID,BGHJD->BGHIJ" and
 * "BGHIJ,BGHJD->BGHID"), 22 kernels, a quarter of its run. Returns false to leave the
 * general form to lower_einsum. */
static bool ein_matmul(Lower *L, Node *n, const Einsum *e) {
    if (n->nin != 2 || !dtype_is_float(n->in[0]->dtype) || e->orank < 2) return false;
    const Value *a = n->in[0], *b = n->in[1];
    int where[EIN_IDS] = {0};       /* bit 0: in a, bit 1: in b, bit 2: in the output */
    for (int d = 0; d < a->rank; d++) {
        if (where[e->ids[0][d]] & 1 || a->dims[d] != e->size[e->ids[0][d]]) return false;
        where[e->ids[0][d]] |= 1;
    }
    for (int d = 0; d < b->rank; d++) {
        if (where[e->ids[1][d]] & 2 || b->dims[d] != e->size[e->ids[1][d]]) return false;
        where[e->ids[1][d]] |= 2;
    }
    for (int d = 0; d < e->orank; d++) where[e->oids[d]] |= 4;
    int m = -1, nn = -1, kk = -1, nbatch = 0;
    for (int id = 0; id < EIN_IDS; id++) {
        if (!where[id]) continue;
        if (where[id] == 7) nbatch++;
        else if (where[id] == 5 && m < 0) m = id;
        else if (where[id] == 6 && nn < 0) nn = id;
        else if (where[id] == 3 && kk < 0) kk = id;
        else return false;
    }
    int r = e->orank;
    if (m < 0 || nn < 0 || kk < 0 || nbatch != r - 2 || a->rank != r || b->rank != r) return false;
    for (int d = 0; d < r - 2; d++)
        if (where[e->oids[d]] != 7) return false;
    /* the output's rows come from `lo`, its columns from `hi` */
    int row = e->oids[r - 2], col = e->oids[r - 1], lo = row == m ? 0 : 1, hi = 1 - lo;
    int lorder[MAX_RANK], horder[MAX_RANK];
    for (int d = 0; d < r - 2; d++) lorder[d] = horder[d] = e->oids[d];
    lorder[r - 2] = row, lorder[r - 1] = kk;
    horder[r - 2] = kk, horder[r - 1] = col;
    Buf *x = ein_permuted(L, n, lower_in(L, n, lo), e->ids[lo], lorder, r);
    Buf *w = ein_permuted(L, n, lower_in(L, n, hi), e->ids[hi], horder, r);
    MatShape s = {.nba = r - 2, .nbb = r - 2, .nb = r - 2, .m = e->size[row], .kd = e->size[kk],
                  .nn = e->size[col], .rank = r};
    matmul_kernel(L, n, x, w, lower_out(L, n, 0), &s);
    return true;
}

/* out[output ids] = sum over the other ids of the product of the inputs, each read at its
 * own ids (a repeated id reads a diagonal; a size-1 dim broadcasts); a batched matrix product
 * as MatMul (ein_matmul). */
void lower_einsum(Lower *L, Node *n) {
    Program *p = L->p;
    Einsum e;
    if (!ein_plan(NULL, n, &e)) die("lower_einsum %s: not checked by infer_einsum", n->name);
    if (ein_matmul(L, n, &e)) return;
    Buf *out = lower_out(L, n, 0);
    Buf *ins[EIN_MAXIN];
    for (int i = 0; i < n->nin; i++) ins[i] = lower_in(L, n, i);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, n->nin, ins, out, NULL, NULL);
    int var[EIN_IDS], ov[MAX_RANK], acc = kir_scalar(p, k, out->dtype);
    for (int d = 0; d < e.orank; d++) var[e.oids[d]] = ov[d] = kir_var(k);
    for (int r = 0; r < e.nred; r++) var[e.red[r]] = kir_var(k);
    Expr *prod = NULL;
    for (int i = 0; i < n->nin; i++) {
        Buf *x = ins[i];
        Expr *idx[MAX_RANK];
        for (int d = 0; d < x->rank; d++)
            idx[d] = x->dims[d] == 1 ? kx_index(p, 0) : kx_var(p, var[e.ids[i][d]]);
        Expr *v = kx_load(p, x, idx);
        prod = prod ? kx_bin(p, K_MUL, prod, v) : v;
    }
    Stmt *s = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod));
    for (int r = e.nred - 1; r >= 0; r--) s = ks_loop(p, var[e.red[r]], 0, e.size[e.red[r]], 1, s);
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, out->dtype, 0)), s);
    Expr *oi[MAX_RANK];
    lower_var_idx(p, e.orank, ov, oi);
    ks_seq(body, ks_store(p, out, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, e.orank, out->dims, ov, body);
}

/* ---- MatMulInteger, QLinearMatMul ---- */

/* Input positions of MatMulInteger / QLinearMatMul: A, A's zero point, B, B's zero point. */
typedef struct IntMatIn { int a, azp, b, bzp; } IntMatIn;

static IntMatIn intmat_in(const Node *n) {
    if (n->op == OP_QLinearMatMul) return (IntMatIn){0, 2, 3, 5};
    return (IntMatIn){0, 2, 1, 3};
}

static bool intmat_check(Graph *g, Node *n, MatShape *s) {
    IntMatIn ix = intmat_in(n);
    Value *a = n->in[ix.a], *b = n->in[ix.b];
    Value *azp = rule_opt_in(n, ix.azp), *bzp = rule_opt_in(n, ix.bzp);
    if (!rule_quant_type(a->dtype) || !rule_quant_type(b->dtype) || (azp && azp->dtype != a->dtype) ||
        (bzp && bzp->dtype != b->dtype)) {
        error(ir_where(g, n), "needs uint8/int8 operands with zero points of the same types");
        return false;
    }
    if (!rule_matmul_shape(a, b, s)) {
        error(ir_where(g, n), "shapes of A (rank %d) and B (rank %d) do not multiply", a->rank,
              b->rank);
        return false;
    }
    if ((azp && ir_numel(azp) != 1 && (azp->rank != 1 || azp->dims[0] != s->m)) ||
        (bzp && ir_numel(bzp) != 1 && (bzp->rank != 1 || bzp->dims[0] != s->nn))) {
        error(ir_where(g, n), "zero points must be scalars, per row of A or per column of B");
        return false;
    }
    if (n->op == OP_QLinearMatMul) {
        static const int scales[] = {1, 4, 6};
        for (int i = 0; i < 3; i++)
            if (!dtype_is_float(n->in[scales[i]]->dtype) || n->in[scales[i]]->dtype == DT_DOUBLE ||
                ir_numel(n->in[scales[i]]) != 1) {
                error(ir_where(g, n), "scale '%s' must be a single float, float16 or bfloat16",
                      n->in[scales[i]]->name);
                return false;
            }
        Value *yzp = n->in[7];
        if (!rule_quant_type(yzp->dtype) || ir_numel(yzp) != 1) {
            error(ir_where(g, n), "y_zero_point '%s' must be a single uint8/int8", yzp->name);
            return false;
        }
    }
    return true;
}

void infer_matmul_integer(Graph *g, Node *n) {
    MatShape s;
    if (!intmat_check(g, n, &s)) return;
    DType t = n->op == OP_QLinearMatMul ? n->in[7]->dtype : DT_INT32;
    ir_set_shape(n->out[0], t, s.rank, s.dims);
}

/* acc = sum_k (A - azp) * (B - bzp) in int32; MatMulInteger stores it, QLinearMatMul
 * requantises: saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero_point). */
void lower_matmul_integer(Lower *L, Node *n) {
    Program *p = L->p;
    IntMatIn ix = intmat_in(n);
    Buf *a = lower_in(L, n, ix.a), *b = lower_in(L, n, ix.b), *y = lower_out(L, n, 0);
    Buf *azp = lower_in(L, n, ix.azp), *bzp = lower_in(L, n, ix.bzp);
    MatShape s;
    if (!rule_matmul_shape(n->in[ix.a], n->in[ix.b], &s)) die("lower_matmul_integer %s: unchecked", n->name);
    int ov[MAX_RANK], kv, acc;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(a, b), y, ov, NULL);
    kv = kir_var(k);
    acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *ai[MAX_RANK], *bi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    for (int d = 0; d < s.nba; d++) ai[d] = a->dims[d] == 1 ? kx_index(p, 0) : oi[s.nb - s.nba + d];
    for (int d = 0; d < s.nbb; d++) bi[d] = b->dims[d] == 1 ? kx_index(p, 0) : oi[s.nb - s.nbb + d];
    Expr *row = a->rank >= 2 ? oi[s.nb] : NULL, *col = b->rank >= 2 ? oi[y->rank - 1] : NULL;
    if (row) ai[a->rank - 2] = row;
    ai[a->rank - 1] = kx_var(p, kv);
    if (b->rank >= 2) bi[b->rank - 2] = kx_var(p, kv);
    bi[b->rank - 1] = col ? col : kx_var(p, kv);
    Expr *prod = kx_bin(p, K_MUL, rule_centered(p, k, a, ai, azp, row ? kx_clone(p, row) : NULL),
                        rule_centered(p, k, b, bi, bzp, col ? kx_clone(p, col) : NULL));
    Stmt *loop = ks_loop(p, kv, 0, s.kd, 1, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod)));
    loop->hints |= LH_REDUCTION;
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, DT_INT32, 0)), loop);
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_QLinearMatMul) {
        Expr *sc[3];                /* float16 and bfloat16 scales (opset 21) in float32 */
        for (int i = 0; i < 3; i++) {
            sc[i] = rule_load_first(p, k, lower_in(L, n, (int[]){1, 4, 6}[i]));
            if (sc[i]->type != DT_FLOAT) sc[i] = kx_cast(p, DT_FLOAT, sc[i]);
        }
        Expr *mul = kx_bin(p, K_DIV, kx_bin(p, K_MUL, sc[0], sc[1]), sc[2]);
        v = rule_quantize(p, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v), mul),
                     rule_load_first(p, k, lower_in(L, n, 7)), y->dtype);
    }
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- Det ---- */
/* Gaussian elimination with partial pivoting on a copy of each matrix (a scratch temporary the
 * kernel reads back, KP_INOUT): the determinant is the product of the pivots, negated per row
 * swap. Loops keep constant bounds: "rows below the pivot" is a guard, not a bound. */

void infer_det(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2] || !dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input '%s' %s is not a batch of square float matrices", x->name,
              rule_dims_str(g, x->rank, x->dims));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank - 2, x->dims);
}

void lower_det(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int64_t m = x->dims[x->rank - 1], nb = kir_numel(y);
    int64_t sd[3] = {nb, m, m};
    Buf *xs = kir_view_new(p, x, arena_printf(p->arena, "%s.mats", x->name), 3, sd);
    Buf *s = kir_buf_new(p, arena_printf(p->arena, "%s.lu", lower_kname(L, n)), x->dtype, 3, sd, B_TEMP);
    Buf *ys = kir_view_new(p, y, arena_printf(p->arena, "%s.dets", y->name), 1, &nb);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(xs), ys, NULL, NULL);
    kir_param(p, k, s, KP_INOUT);
    DType t = x->dtype;
    int bv = kir_var(k), iv = kir_var(k), jv = kir_var(k), cv = kir_var(k), rv = kir_var(k);
    int det = kir_scalar(p, k, t), piv = kir_scalar(p, k, DT_INDEX), pv = kir_scalar(p, k, t);
    int tmp = kir_scalar(p, k, t), f = kir_scalar(p, k, t);
#define AT(r, c) (Expr *[]){kx_var(p, bv), (r), (c)}
#define V(x_) kx_var(p, x_)
#define S(r_) kx_scalar(p, k, r_)
    Stmt *body = ks_loop(p, iv, 0, m, 1, ks_loop(p, jv, 0, m, 1, ks_store(p, s, AT(V(iv), V(jv)), kx_load(p, xs, AT(V(iv), V(jv))))));
    ks_seq(body, ks_set(p, det, kx_const(p, t, 1)));
    /* column c: the pivot is the largest |s[r][c]| for r >= c */
    Stmt *col = ks_set(p, piv, V(cv));
    ks_seq(col, ks_set(p, pv, kx_un(p, K_ABS, kx_load(p, s, AT(V(cv), V(cv))))));
    Expr *cand = kx_un(p, K_ABS, kx_load(p, s, AT(V(rv), V(cv))));
    ks_seq(col, ks_loop(p, rv, 0, m, 1,
                        ks_if(p, kx_bin(p, K_AND, kx_bin(p, K_GT, V(rv), V(cv)), kx_bin(p, K_GT, cand, S(pv))),
                              ks_seq(ks_set(p, piv, V(rv)), ks_set(p, pv, kx_un(p, K_ABS, kx_load(p, s, AT(V(rv), V(cv)))))), NULL)));
    Stmt *swap = ks_set(p, det, kx_un(p, K_NEG, S(det)));
    Stmt *sw = ks_set(p, tmp, kx_load(p, s, AT(V(cv), V(jv))));
    ks_seq(sw, ks_store(p, s, AT(V(cv), V(jv)), kx_load(p, s, AT(S(piv), V(jv)))));
    ks_seq(sw, ks_store(p, s, AT(S(piv), V(jv)), S(tmp)));
    ks_seq(swap, ks_loop(p, jv, 0, m, 1, sw));
    ks_seq(col, ks_if(p, kx_bin(p, K_NE, S(piv), V(cv)), swap, NULL));
    ks_seq(col, ks_set(p, det, kx_bin(p, K_MUL, S(det), kx_load(p, s, AT(V(cv), V(cv))))));
    /* rows below: s[r][j] -= s[r][c] / s[c][c] * s[c][j] */
    Stmt *row = ks_set(p, f, kx_bin(p, K_DIV, kx_load(p, s, AT(V(rv), V(cv))), kx_load(p, s, AT(V(cv), V(cv)))));
    Expr *upd = kx_bin(p, K_SUB, kx_load(p, s, AT(V(rv), V(jv))), kx_bin(p, K_MUL, S(f), kx_load(p, s, AT(V(cv), V(jv)))));
    ks_seq(row, ks_loop(p, jv, 0, m, 1, ks_if(p, kx_bin(p, K_GE, V(jv), V(cv)), ks_store(p, s, AT(V(rv), V(jv)), upd), NULL)));
    Expr *go = kx_bin(p, K_NE, kx_load(p, s, AT(V(cv), V(cv))), kx_const(p, t, 0));
    ks_seq(col, ks_if(p, go, ks_loop(p, rv, 0, m, 1, ks_if(p, kx_bin(p, K_GT, V(rv), V(cv)), row, NULL)), NULL));
    ks_seq(body, ks_loop(p, cv, 0, m, 1, col));
    Expr *bi = V(bv);
    ks_seq(body, ks_store(p, ys, &bi, S(det)));
    k->body = ks_loop(p, bv, 0, nb, 1, body);
#undef AT
#undef V
#undef S
}
