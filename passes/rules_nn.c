/* rules_nn.c - shape and lowering rules of the neural-network ops: Conv, Gemm, MatMul, the
 * pools (windowed and global), BatchNormalization, Softmax/LogSoftmax and the Reduce* family.
 *
 * Shape inference (passes/infer_shapes.c) calls the infer_* rules; lowering (passes/lower.c)
 * calls the lower_* rules, which emit kernels of one fixed shape that fusion and tiling rely
 * on: parallel loops over the output dims outermost (in natural order), reduction loops inside
 * accumulating into scalar registers, and one final store `out[o...] = value` per element so
 * that fusion can substitute an elementwise consumer into it. Windowed ops never load outside
 * their input: each padded tap is guarded by an `if` placed at the level of its own loop.
 * Every node reaching these rules is in the canonical form of docs/canonical-forms.md. */
#include <math.h>
#include <string.h>

#include "lower.h"

/* ---- small kernel-building helpers ---- */

/* The smallest / largest value of a dtype: the identity of max / min. Integers use their
 * range so that pools over int8/uint8 work; int64's largest is not exact in a double, so
 * min-reductions start from a loaded element instead (see emit_reduce). */
static double dtype_lowest(DType t) {
    switch (t) {
    case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64: case DT_BOOL: return 0;
    case DT_INT8: return INT8_MIN;
    case DT_INT16: return INT16_MIN;
    case DT_INT32: return INT32_MIN;
    case DT_INT64: return (double)INT64_MIN;
    default: return -INFINITY;
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* ---- window geometry shared by Conv and the pools ---- */

/* Output size of one spatial dim with explicit pads. In ceil mode the last window must
 * start inside the input or the left padding (as onnx's reference and PyTorch do). */
static int64_t window_out(Window *w, int i, bool ceil_mode) {
    int64_t ext = (w->k[i] - 1) * w->d[i] + 1;
    int64_t span = w->in[i] + w->pb[i] + w->pe[i] - ext;
    if (span < 0) return -1;
    if (!ceil_mode) return span / w->s[i] + 1;
    int64_t o = ceil_div(span, w->s[i]) + 1;
    if ((o - 1) * w->s[i] >= w->in[i] + w->pb[i]) o--;
    return o;
}

/* (lower.h) */
bool rule_window(Graph *g, Node *n, const Value *x, const int64_t *ks, bool ceil_mode, Window *w) {
    const char *where = g ? ir_where(g, n) : n->name;
    const int64_t *st, *dl, *pd;
    int nsp = x->rank - 2;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp)) {
        error(where, "strides/dilations/pads do not match %d spatial dims", nsp);
        return false;
    }
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    bool valid = !strcmp(ap, "VALID");
    if (!same && !valid && *ap && strcmp(ap, "NOTSET")) {
        error(where, "unknown auto_pad '%s'", ap);
        return false;
    }
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        w->in[i] = x->dims[2 + i];
        w->k[i] = ks[i];
        w->s[i] = nst ? st[i] : 1;
        w->d[i] = ndl ? dl[i] : 1;
        w->pb[i] = npd && !same && !valid ? pd[i] : 0;
        w->pe[i] = npd && !same && !valid ? pd[nsp + i] : 0;
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0) {
            error(where, "kernel, strides and dilations must be positive and pads non-negative");
            return false;
        }
        if (same) {
            int64_t ext = (w->k[i] - 1) * w->d[i] + 1;
            w->out[i] = ceil_div(w->in[i], w->s[i]);
            int64_t total = MAX(0, (w->out[i] - 1) * w->s[i] + ext - w->in[i]);
            w->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
        } else {
            w->out[i] = window_out(w, i, ceil_mode && !valid);
        }
        if (w->out[i] < 1) {
            error(where, "window of spatial dim %d larger than the padded input", i);
            return false;
        }
    }
    return true;
}

/* Input coordinate of tap t at output position o along spatial dim i, and the condition
 * that it lies inside the input (*cond = NULL when no position can leave it). */
static Expr *tap_index(Program *p, const Window *w, int i, Expr *o, Expr *t, Expr **cond) {
    Expr *ix = kx_addc(p, kx_add(p, kx_mul(p, o, w->s[i]), kx_mul(p, t, w->d[i])), -w->pb[i]);
    int64_t hi = (w->out[i] - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] - w->pb[i];
    *cond = NULL;
    if (w->pb[i] > 0) *cond = kx_bin(p, K_GE, ix, kx_index(p, 0));
    if (hi >= w->in[i]) *cond = kx_and(p, *cond, kx_bin(p, K_LT, ix, kx_index(p, w->in[i])));
    return ix;
}

/* Wrap the per-tap statement in the tap loops (spatial dim 0 outermost), each dim's bounds
 * check just inside its own loop so that a row out of bounds is skipped whole. */
static Stmt *wrap_taps(Program *p, const Window *w, const int *tv, Expr **conds, Stmt *body) {
    for (int i = w->nsp - 1; i >= 0; i--) {
        if (conds[i]) body = ks_if(p, conds[i], body, NULL);
        body = ks_red_loop(p, tv[i], w->k[i], body);
    }
    return body;
}

/* ---- Conv ---- */

/* The kernel's spatial shape: the attribute when present (checked against the weights),
 * else the weights' trailing dims. */
static bool conv_kernel_shape(Graph *g, Node *n, const Value *wt, int64_t *ks) {
    const int64_t *a;
    int na = ir_attr_ints(n, "kernel_shape", &a);
    for (int i = 0; i < wt->rank - 2; i++) {
        ks[i] = wt->dims[2 + i];
        if (na && (na != wt->rank - 2 || a[i] != ks[i])) {
            if (g) error(ir_where(g, n), "kernel_shape does not match the weights");
            return false;
        }
    }
    return true;
}

void infer_conv(Graph *g, Node *n) {
    Value *x = n->in[0], *wt = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
    int64_t grp = ir_attr_int(n, "group", 1), ks[MAX_RANK], dims[MAX_RANK];
    Window w;
    if (x->rank < 3 || wt->rank != x->rank) {
        error(ir_where(g, n), "input rank %d and weight rank %d: need equal ranks >= 3", x->rank,
              wt->rank);
        return;
    }
    if (grp < 1 || x->dims[1] != wt->dims[1] * grp || wt->dims[0] % grp) {
        error(ir_where(g, n), "channels do not match: input %lld, weights %lld x %lld groups",
              (long long)x->dims[1], (long long)wt->dims[1], (long long)grp);
        return;
    }
    if (b && (b->rank != 1 || b->dims[0] != wt->dims[0])) {
        error(ir_where(g, n), "bias must have shape [%lld]", (long long)wt->dims[0]);
        return;
    }
    if (!conv_kernel_shape(g, n, wt, ks) || !rule_window(g, n, x, ks, false, &w)) return;
    dims[0] = x->dims[0];
    dims[1] = wt->dims[0];
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* What one Conv node's kernel needs to build the statements of one output element. */
typedef struct ConvGeom {
    Buf *x, *wt, *b, *y;
    Window w;
    int64_t grp, cg, mg;
    Buf *wc;                            /* non-NULL: the weights as [C/group, k..., M] */
    int acc;
    int ov[MAX_RANK];                   /* output loop variables; the last one per segment */
} ConvGeom;

/* acc = bias; acc += x * w over channels and taps; y[o...] = acc, for the output element
 * whose last spatial coordinate is loop variable `last`. With `inside` the taps of the last
 * spatial dim are known to stay inside the input and get no bounds check; with `cm` the
 * weights are read from g->wc. */
static Stmt *conv_point(Program *p, Kernel *k, const ConvGeom *g, int last, bool inside, bool cm) {
    const Window *w = &g->w;
    int r = g->y->rank, tv[MAX_RANK], cv = kir_var(k);
    lower_vars(k, w->nsp, tv);
    Expr *xi[MAX_RANK], *wi[MAX_RANK], *oi[MAX_RANK], *conds[MAX_RANK];
    lower_var_idx(p, r - 1, g->ov, oi);
    oi[r - 1] = kx_var(p, last);
    Expr *m = oi[1], *c = kx_var(p, cv);
    xi[0] = oi[0];
    xi[1] = g->grp == 1 ? c : kx_add(p, kx_mul(p, kx_bin(p, K_DIV, m, kx_index(p, g->mg)), g->cg), c);
    wi[0] = m;
    wi[1] = c;
    for (int i = 0; i < w->nsp; i++) {
        wi[2 + i] = kx_var(p, tv[i]);
        xi[2 + i] = tap_index(p, w, i, oi[2 + i], wi[2 + i], &conds[i]);
    }
    if (inside) conds[w->nsp - 1] = NULL;
    if (cm) {                           /* [m, c, t...] -> [c, t..., m] */
        for (int i = 0; i < w->nsp + 1; i++) wi[i] = wi[i + 1];
        wi[w->nsp + 1] = m;
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, g->x, xi), kx_load(p, cm ? g->wc : g->wt, wi));
    Stmt *taps = wrap_taps(p, w, tv, conds, ks_set(p, g->acc, kx_bin(p, K_ADD, kx_scalar(p, k, g->acc), prod)));
    Expr *init = g->b ? kx_load(p, g->b, &m) : kx_const(p, g->y->dtype, 0);
    Stmt *body = ks_set(p, g->acc, init);
    ks_seq(body, ks_red_loop(p, cv, g->cg, taps));
    return ks_seq(body, ks_store(p, g->y, oi, kx_scalar(p, k, g->acc)));
}

/* Constant weights [M, C, k...] of a one-group conv relaid out as [C, k..., M], for running
 * the conv with the output channel innermost: tiling then vectorizes across output channels
 * (weights loaded contiguously, each input element broadcast) and blocks the output column
 * around that (tile.c). */
static Buf *conv_weights_cm(Program *p, Buf *wt) {
    int64_t mg = wt->dims[0], dims[MAX_RANK], inner = kir_numel(wt) / mg;
    size_t es = dtype_size(wt->dtype);
    for (int i = 1; i < wt->rank; i++) dims[i - 1] = wt->dims[i];
    dims[wt->rank - 1] = mg;
    char name[256];
    snprintf(name, sizeof name, "%s_cm", wt->name);
    Buf *b = kir_buf_new(p, name, wt->dtype, wt->rank, dims, B_CONST);
    char *d = arena_alloc(p->arena, kir_nbytes(wt));
    const char *src = wt->data;
    for (int64_t m = 0; m < mg; m++)
        for (int64_t i = 0; i < inner; i++)
            memcpy(d + (size_t)(i * mg + m) * es, src + (size_t)(m * inner + i) * es, es);
    b->data = d;
    return b;
}

/* y[n, m, o...] = bias[m] + sum over c < C/group and taps t of
 *                 x[n, (m / (M/group)) * C/group + c, o*s + t*d - pb] * w[m, c, t]
 * The last spatial output dim is split into a left border, an interior whose windows all
 * lie inside the input, and a right border: only the borders check the column of each tap,
 * so the interior loop (the one tiling jams into vectors) has no branch in its body. (With
 * a guard per column, LLVM 19 still vectorizes a bare conv, but not one with a fused Relu:
 * 2x slower at 16 channels, 128x128.) */
void lower_conv(Lower *L, Node *n) {
    Program *p = L->p;
    ConvGeom g = {.x = lower_in(L, n, 0), .wt = lower_in(L, n, 1), .b = lower_in(L, n, 2)};
    g.y = lower_out(L, n, 0);
    int64_t ks[MAX_RANK];
    g.grp = ir_attr_int(n, "group", 1);
    g.cg = g.wt->dims[1];
    g.mg = g.wt->dims[0] / g.grp;
    if (!conv_kernel_shape(NULL, n, n->in[1], ks) || !rule_window(NULL, n, n->in[0], ks, false, &g.w))
        die("lower_conv %s: node not checked by infer_conv", n->name);

    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, g.x, KP_IN);
    /* Output channels innermost (cm) everywhere when the conv is strided (vectors along the
     * output width would gather every s-th input element) or has at least two target vectors
     * of output channels; else only in the border columns (whose per-tap checks keep them
     * scalar along the width) when the target has vectors, the interior running along the
     * width (16 channels at stride 1 run faster so). On AVX-512: stride-2 3x3 convs 2-6x
     * faster, 32 -> 32 channels at 64x64 1.5x. */
    bool can = g.grp == 1 && g.mg >= 8 && g.wt->kind == B_CONST && g.wt->data && !g.wt->alias;
    int64_t esz = (int64_t)dtype_size(g.y->dtype);
    bool cm = can && (g.w.s[g.w.nsp - 1] > 1 || esz * g.mg >= 2 * p->vector_bytes);
    bool border_cm = can && !cm && p->vector_bytes >= 16;
    g.wc = cm || border_cm ? conv_weights_cm(p, g.wt) : NULL;
    if (!cm) kir_param(p, k, g.wt, KP_IN);
    if (g.wc) kir_param(p, k, g.wc, KP_IN);
    if (g.b) kir_param(p, k, g.b, KP_IN);
    kir_param(p, k, g.y, KP_OUT);
    int r = g.y->rank, l = g.w.nsp - 1;
    lower_vars(k, r - 1, g.ov);
    g.acc = kir_scalar(p, k, g.y->dtype);

    /* Interior columns o: o*s - pb >= 0 and o*s + (k-1)*d - pb < in. */
    const Window *w = &g.w;
    int64_t nout = w->out[l], span = w->in[l] - 1 + w->pb[l] - (w->k[l] - 1) * w->d[l];
    int64_t lo = MIN(ceil_div(w->pb[l], w->s[l]), nout);
    int64_t hi = span < 0 ? lo : MAX(MIN(span / w->s[l] + 1, nout), lo);
    int64_t cut[4] = {0, lo, hi, nout};
    Stmt *segs = NULL;
    for (int i = 0; i < 3; i++) {
        if (cut[i] == cut[i + 1]) continue;
        int v = kir_var(k);
        bool seg_cm = cm || (border_cm && i != 1);
        Stmt *pt = conv_point(p, k, &g, v, i == 1, seg_cm), *seg;
        if (seg_cm) pt = ks_loop(p, g.ov[1], 0, g.mg, 1, pt);
        seg = ks_loop(p, v, cut[i], cut[i + 1], 1, pt);
        if (border_cm && !seg_cm) seg = ks_loop(p, g.ov[1], 0, g.mg, 1, seg);
        segs = ks_seq(segs, seg);
    }
    if (!g.wc) {
        k->body = lower_wrap(p, r - 1, g.y->dims, g.ov, segs);
        return;
    }
    /* Loops n, o[0..nsp-2], then the column segments, each with its own channel loop. */
    int64_t od[MAX_RANK];
    int vs[MAX_RANK];
    od[0] = g.y->dims[0];
    vs[0] = g.ov[0];
    for (int i = 2; i < r - 1; i++) {
        od[i - 1] = g.y->dims[i];
        vs[i - 1] = g.ov[i];
    }
    k->body = lower_wrap(p, r - 2, od, vs, segs);
}

/* ---- Gemm and MatMul ---- */

void infer_gemm(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[1], *c = n->nin > 2 ? n->in[2] : NULL;
    bool ta = ir_attr_int(n, "transA", 0), tb = ir_attr_int(n, "transB", 0);
    if (a->rank != 2 || b->rank != 2) {
        error(ir_where(g, n), "A and B must be matrices (ranks %d, %d)", a->rank, b->rank);
        return;
    }
    int64_t dims[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]}, bd[2];
    int r;
    if (a->dims[ta ? 0 : 1] != b->dims[tb ? 1 : 0]) {
        error(ir_where(g, n), "inner dimensions differ: %lld and %lld",
              (long long)a->dims[ta ? 0 : 1], (long long)b->dims[tb ? 1 : 0]);
        return;
    }
    if (c && (c->rank > 2 || !ir_broadcast(c->rank, c->dims, 2, dims, &r, bd) || bd[0] != dims[0] ||
              bd[1] != dims[1])) {
        error(ir_where(g, n), "C does not broadcast to [%lld, %lld]", (long long)dims[0],
              (long long)dims[1]);
        return;
    }
    ir_set_shape(n->out[0], a->dtype, 2, dims);
}

/* Constant B' (B, or B transposed with tb) [K, N] relaid out as panels [N/pw, K, pw]: with
 * the column loop split into panel and column in the panel, the reduction over k reads one
 * panel front to back, where B' itself would be read pw columns a row, a row apart (4 KiB at
 * N = 1024: a new page every load, which the prefetchers do not follow). */
static Buf *gemm_panels(Program *p, Buf *b, bool tb, int64_t pw) {
    int64_t kd = b->dims[tb ? 1 : 0], nd = b->dims[tb ? 0 : 1];
    int64_t dims[3] = {nd / pw, kd, pw};
    size_t es = dtype_size(b->dtype);
    char name[256];
    snprintf(name, sizeof name, "%s_panels", b->name);
    Buf *r = kir_buf_new(p, name, b->dtype, 3, dims, B_CONST);
    char *d = arena_alloc(p->arena, kir_nbytes(b));
    const char *src = b->data;
    for (int64_t k = 0; k < kd; k++)
        for (int64_t j = 0; j < nd; j++)
            memcpy(d + (size_t)(((j / pw) * kd + k) * pw + j % pw) * es,
                   src + (size_t)(tb ? j * kd + k : k * nd + j) * es, es);
    r->data = d;
    return r;
}

/* The panel width for a constant B' with nd columns: the columns tile.c jams (8 target
 * vectors, at most 128), if there are at least two panels of them; else 0 (B' as it is). */
static int64_t gemm_panel_width(const Program *p, const Buf *b, int64_t nd) {
    int64_t pw = MIN(8 * p->vector_bytes / (int64_t)dtype_size(b->dtype), 128);
    bool ok = p->vector_bytes >= 16 && b->kind == B_CONST && b->data && !b->alias && b->rank == 2;
    return ok && pw >= 4 && nd > pw && nd % pw == 0 ? pw : 0;
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

    /* Constant B with columns a multiple of the tile width: packed as panels. */
    int64_t pw = gemm_panel_width(p, b, y->dims[1]);
    Buf *bp = pw ? gemm_panels(p, b, tb, pw) : NULL;

    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, a, KP_IN);
    kir_param(p, k, bp ? bp : b, KP_IN);
    if (c) kir_param(p, k, c, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[3], kv, acc;
    lower_vars(k, bp ? 3 : 2, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, y->dtype);
    Expr *oi[2], *ai[2], *bi[3], *kx = kx_var(p, kv);
    lower_var_idx(p, 2, ov, oi);
    ai[ta ? 1 : 0] = oi[0];
    ai[ta ? 0 : 1] = kx;
    bi[tb ? 1 : 0] = kx;
    bi[tb ? 0 : 1] = oi[1];
    if (bp) {                           /* j = jb * pw + jj (ov[1] = jb, ov[2] = jj) */
        bi[0] = kx_var(p, ov[1]);
        bi[1] = kx;
        bi[2] = kx_var(p, ov[2]);
        oi[1] = kx_add(p, kx_mul(p, kx_var(p, ov[1]), pw), kx_var(p, ov[2]));
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, a, ai), kx_load(p, bp ? bp : b, bi));
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
    int64_t ld[3] = {y->dims[0], bp ? y->dims[1] / pw : y->dims[1], pw};
    k->body = lower_wrap(p, bp ? 3 : 2, ld, ov, body);
}

void infer_matmul(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[1];
    MatShape s;
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

void lower_matmul(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *a = lower_in(L, n, 0), *b = lower_in(L, n, 1), *y = lower_out(L, n, 0);
    MatShape s;
    if (!rule_matmul_shape(n->in[0], n->in[1], &s)) die("lower_matmul %s: unchecked shapes", n->name);

    /* A constant matrix B with columns a multiple of the tile width: packed as panels. */
    int r = y->rank;
    int64_t pw = gemm_panel_width(p, b, b->rank == 2 ? b->dims[1] : 0);
    Buf *bp = pw ? gemm_panels(p, b, false, pw) : NULL;

    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, a, KP_IN);
    kir_param(p, k, bp ? bp : b, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[MAX_RANK + 1], kv, acc;
    lower_vars(k, bp ? r + 1 : r, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, y->dtype);
    Expr *oi[MAX_RANK], *ai[MAX_RANK], *bi[MAX_RANK], *kx = kx_var(p, kv);
    lower_var_idx(p, r, ov, oi);
    batch_idx(p, a, s.nba, s.nb, oi, ai);
    batch_idx(p, b, s.nbb, s.nb, oi, bi);
    if (a->rank >= 2) ai[a->rank - 2] = oi[s.nb];
    ai[a->rank - 1] = kx;
    if (b->rank >= 2) {
        bi[b->rank - 2] = kx;
        bi[b->rank - 1] = oi[r - 1];
    } else {
        bi[0] = kx;
    }
    if (bp) {                           /* j = jb * pw + jj (ov[r - 1] = jb, ov[r] = jj) */
        bi[0] = kx_var(p, ov[r - 1]);
        bi[1] = kx;
        bi[2] = kx_var(p, ov[r]);
        oi[r - 1] = kx_add(p, kx_mul(p, kx_var(p, ov[r - 1]), pw), kx_var(p, ov[r]));
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, a, ai), kx_load(p, bp ? bp : b, bi));
    Stmt *body = ks_set(p, acc, kx_const(p, y->dtype, 0));
    ks_seq(body, ks_red_loop(p, kv, s.kd, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod))));
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    int64_t ld[MAX_RANK + 1];
    memcpy(ld, y->dims, sizeof(int64_t) * (size_t)r);
    if (bp) {
        ld[r - 1] = y->dims[r - 1] / pw;
        ld[r] = pw;
    }
    k->body = lower_wrap(p, bp ? r + 1 : r, ld, ov, body);
}

/* ---- MaxPool and AveragePool ---- */

static bool pool_window(Graph *g, Node *n, Window *w) {
    const int64_t *ks;
    const char *where = g ? ir_where(g, n) : n->name;
    const Value *x = n->in[0];
    int nk = ir_attr_ints(n, "kernel_shape", &ks);
    if (x->rank < 3 || nk != x->rank - 2) {
        error(where, "need kernel_shape with one entry per spatial dim of a rank >= 3 input");
        return false;
    }
    if (n->op == OP_AveragePool) {
        const int64_t *dl;
        int ndl = ir_attr_ints(n, "dilations", &dl);
        for (int i = 0; i < ndl; i++)
            if (dl[i] != 1) {
                error(where, "AveragePool with dilations is not supported");
                return false;
            }
    }
    return rule_window(g, n, x, ks, ir_attr_int(n, "ceil_mode", 0) != 0, w);
}

void infer_pool(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t dims[MAX_RANK];
    Window w;
    if (!pool_window(g, n, &w)) return;
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_INT64, x->rank, dims);
}

/* AveragePool's divisor at output position oi: the number of taps inside [lo, hi) along each
 * spatial dim, multiplied. lo/hi are the input (count_include_pad=0) or the padded input
 * (count_include_pad=1). A dim whose windows always fit contributes its kernel size. */
static Expr *avg_divisor(Program *p, const Window *w, Expr **oi, bool include_pad, DType t) {
    int64_t konst = 1;
    Expr *cnt = NULL;
    for (int i = 0; i < w->nsp; i++) {
        int64_t lo = include_pad ? -w->pb[i] : 0, hi = include_pad ? w->in[i] + w->pe[i] : w->in[i];
        int64_t last = (w->out[i] - 1) * w->s[i] - w->pb[i] + w->k[i];
        if (-w->pb[i] >= lo && last <= hi) {
            konst *= w->k[i];
            continue;
        }
        Expr *start = kx_addc(p, kx_mul(p, oi[2 + i], w->s[i]), -w->pb[i]);
        Expr *end = kx_bin(p, K_MIN, kx_addc(p, start, w->k[i]), kx_index(p, hi));
        start = kx_bin(p, K_MAX, start, kx_index(p, lo));
        Expr *ci = kx_bin(p, K_SUB, end, start);
        cnt = cnt ? kx_bin(p, K_MUL, cnt, ci) : ci;
    }
    if (!cnt) return kx_const(p, t, (double)konst);
    return kx_cast(p, t, kx_mul(p, cnt, konst));
}

/* MaxPool's Indices value for input position xi: the flat index into x, with the spatial
 * dims in row-major order (storage_order 0) or column-major order (1: the first spatial dim
 * varies fastest), after the batch and channel offset. */
static Expr *argmax_index(Program *p, const Buf *x, Expr **xi, bool colmajor) {
    int nsp = x->rank - 2;
    Expr *sp = kx_index(p, 0);
    int64_t size = 1;
    for (int j = 0; j < nsp; j++) {
        int i = colmajor ? nsp - 1 - j : j;
        sp = kx_add(p, kx_mul(p, sp, x->dims[2 + i]), xi[2 + i]);
        size *= x->dims[2 + i];
    }
    Expr *nc = kx_add(p, kx_mul(p, xi[0], x->dims[1]), xi[1]);
    return kx_add(p, kx_mul(p, nc, size), sp);
}

/* y[n, c, o...] = max / mean over the taps t inside the input of x[n, c, o*s + t*d - pb];
 * MaxPool's optional Indices output gets the flat NCHW index of the first maximum. */
void lower_pool(Lower *L, Node *n) {
    Program *p = L->p;
    bool is_max = n->op == OP_MaxPool;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Buf *yi = is_max && n->nout > 1 && n->out[1] ? lower_out(L, n, 1) : NULL;
    Window w;
    if (!pool_window(NULL, n, &w)) die("lower_pool %s: node not checked by infer_pool", n->name);

    /* Two outputs do not fit the contraction form fusion expects (one final store). */
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, yi ? KC_GENERIC : KC_CONTRACTION);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    if (yi) kir_param(p, k, yi, KP_OUT);
    int ov[MAX_RANK], tv[MAX_RANK];
    lower_vars(k, y->rank, ov);
    lower_vars(k, w.nsp, tv);
    int acc = kir_scalar(p, k, y->dtype), arg = yi ? kir_scalar(p, k, DT_INDEX) : -1;

    Expr *oi[MAX_RANK], *xi[MAX_RANK], *conds[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    xi[0] = oi[0];
    xi[1] = oi[1];
    for (int i = 0; i < w.nsp; i++)
        xi[2 + i] = tap_index(p, &w, i, oi[2 + i], kx_var(p, tv[i]), &conds[i]);
    Expr *flat = yi ? argmax_index(p, x, xi, ir_attr_int(n, "storage_order", 0) != 0) : NULL;
    Expr *xv = kx_load(p, x, xi), *av = kx_scalar(p, k, acc);
    Stmt *upd, *body = ks_set(p, acc, kx_const(p, y->dtype, is_max ? dtype_lowest(y->dtype) : 0));
    if (!is_max) upd = ks_set(p, acc, kx_bin(p, K_ADD, av, xv));
    else if (!yi) upd = ks_set(p, acc, kx_bin(p, K_MAX, av, xv));
    else upd = ks_if(p, kx_bin(p, K_GT, xv, av), ks_seq(ks_set(p, acc, xv), ks_set(p, arg, flat)), NULL);
    if (yi) ks_seq(body, ks_set(p, arg, kx_index(p, 0)));
    ks_seq(body, wrap_taps(p, &w, tv, conds, upd));
    Expr *v = kx_scalar(p, k, acc);
    if (!is_max)
        v = kx_bin(p, K_DIV, v,
                   avg_divisor(p, &w, oi, ir_attr_int(n, "count_include_pad", 0) != 0, y->dtype));
    ks_seq(body, ks_store(p, y, oi, v));
    if (yi) ks_seq(body, ks_store(p, yi, oi, kx_cast(p, DT_INT64, kx_scalar(p, k, arg))));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- reductions: Reduce*, GlobalAveragePool, GlobalMaxPool ---- */

typedef enum RedKind { R_SUM, R_MEAN, R_MAX, R_MIN } RedKind;

/* out[o...] = reduction over the dims of `in` marked in `mask`; out has in's rank with the
 * reduced dims 1 (keepdims) or dropped. Max/Min start from the window's first element, which
 * keeps them exact for every dtype (no identity value needed). */
static void emit_reduce(Lower *L, Node *n, Buf *in, Buf *out, const bool *mask, bool keepdims,
                        RedKind kind) {
    Program *p = L->p;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int ov[MAX_RANK], rv[MAX_RANK], acc = kir_scalar(p, k, out->dtype);
    Expr *oi[MAX_RANK], *ii[MAX_RANK], *first[MAX_RANK];
    int64_t count = 1;
    lower_vars(k, out->rank, ov);
    lower_var_idx(p, out->rank, ov, oi);
    for (int d = 0, o = 0; d < in->rank; d++) {
        if (mask[d]) {
            rv[d] = kir_var(k);
            ii[d] = kx_var(p, rv[d]);
            first[d] = kx_index(p, 0);
            count *= in->dims[d];
            if (keepdims) o++;
        } else {
            ii[d] = first[d] = oi[o++];
        }
    }
    Expr *xv = kx_load(p, in, ii), *av = kx_scalar(p, k, acc), *init;
    KOp op = kind == R_MAX ? K_MAX : kind == R_MIN ? K_MIN : K_ADD;
    if ((kind == R_MAX || kind == R_MIN) && count > 0) init = kx_load(p, in, first);
    else if (kind == R_MAX || kind == R_MIN)
        init = kx_const(p, out->dtype, kind == R_MAX ? dtype_lowest(out->dtype) : INFINITY);
    else init = kx_const(p, out->dtype, 0);
    Stmt *red = ks_set(p, acc, kx_bin(p, op, av, xv));
    for (int d = in->rank - 1; d >= 0; d--)
        if (mask[d]) red = ks_red_loop(p, rv[d], in->dims[d], red);
    Stmt *body = ks_seq(ks_set(p, acc, init), red);
    Expr *v = kx_scalar(p, k, acc);
    if (kind == R_MEAN && count > 0) v = kx_bin(p, K_DIV, v, kx_const(p, out->dtype, (double)count));
    ks_seq(body, ks_store(p, out, oi, v));
    k->body = lower_wrap(p, out->rank, out->dims, ov, body);
}

void infer_reduce(Graph *g, Node *n) {
    Value *x = n->in[0];
    bool mask[MAX_RANK], keep = ir_attr_int(n, "keepdims", 1) != 0;
    int64_t dims[MAX_RANK];
    int r = 0, any = rule_reduce_mask(g, n, mask);
    if (any < 0) return;
    for (int d = 0; d < x->rank; d++) {
        if (!any || !mask[d]) dims[r++] = x->dims[d];
        else if (keep) dims[r++] = 1;
    }
    ir_set_shape(n->out[0], x->dtype, r, dims);
}

void lower_reduce(Lower *L, Node *n) {
    bool mask[MAX_RANK];
    Buf *x = lower_in(L, n, 0);
    int any = rule_reduce_mask(NULL, n, mask);
    if (any < 0) die("lower_reduce %s: node not checked by infer_reduce", n->name);
    if (!any) {
        lower_view(L, n, 0, x);
        return;
    }
    RedKind kind = n->op == OP_ReduceMax ? R_MAX : n->op == OP_ReduceMin ? R_MIN
                 : n->op == OP_ReduceMean ? R_MEAN : R_SUM;
    emit_reduce(L, n, x, lower_out(L, n, 0), mask, ir_attr_int(n, "keepdims", 1) != 0, kind);
}

void infer_global_pool(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t dims[MAX_RANK];
    if (x->rank < 3) {
        error(ir_where(g, n), "input must have rank >= 3 (N, C, spatial...), not %d", x->rank);
        return;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = d < 2 ? x->dims[d] : 1;
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

void lower_global_pool(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    bool mask[MAX_RANK];
    for (int d = 0; d < x->rank; d++) mask[d] = d >= 2;
    emit_reduce(L, n, x, lower_out(L, n, 0), mask, true,
                n->op == OP_GlobalMaxPool ? R_MAX : R_MEAN);
}

/* ---- BatchNormalization (inference) ---- */

void infer_batchnorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 2) {
        error(ir_where(g, n), "input must have rank >= 2 (N, C, ...), not %d", x->rank);
        return;
    }
    for (int i = 1; i < 5; i++)
        if (ir_numel(n->in[i]) != x->dims[1] || n->in[i]->rank != 1) {
            error(ir_where(g, n), "input %d must have shape [%lld]", i, (long long)x->dims[1]);
            return;
        }
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) {
            error(ir_where(g, n), "training-mode outputs are not supported");
            return;
        }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* Per-channel operands are read through [C, 1, ..., 1] views so that lower_map's numpy
 * broadcasting lines them up with dim 1 of x. */
static Buf *channel_view(Lower *L, Buf *b, int xrank) {
    int64_t dims[MAX_RANK];
    if (xrank == 2) return b;
    dims[0] = kir_numel(b);
    for (int d = 1; d < xrank - 1; d++) dims[d] = 1;
    return kir_view_new(L->p, b, b->name, xrank - 1, dims);
}

static Buf *channel_const(Lower *L, const char *name, const float *v, int64_t c, int xrank) {
    int64_t one = c;
    Buf *b = kir_buf_new(L->p, name, DT_FLOAT, 1, &one, B_CONST);
    b->data = v;
    return channel_view(L, b, xrank);
}

static Expr *bn_affine(Lower *L, Node *n, Expr **v, void *ctx) {
    return kx_bin(L->p, K_ADD, kx_bin(L->p, K_MUL, v[0], v[1]), v[2]);
}

/* (x - mean) / sqrt(var + eps) * scale + bias, from the five operands. */
static Expr *bn_full(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *eps = kx_const(p, v[0]->type, ir_attr_float(n, "epsilon", 1e-5f));
    Expr *den = kx_un(p, K_SQRT, kx_bin(p, K_ADD, v[4], eps));
    Expr *xn = kx_bin(p, K_DIV, kx_bin(p, K_SUB, v[0], v[3]), den);
    return kx_bin(p, K_ADD, kx_bin(p, K_MUL, xn, v[1]), v[2]);
}

/* With constant statistics (the usual inference case) the whole op is y = x * s[c] + t[c]
 * with s, t computed here once; otherwise the formula is evaluated per element. */
void lower_batchnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    bool konst = x->dtype == DT_FLOAT;
    for (int i = 1; i < 5; i++) konst = konst && n->in[i]->data;
    if (konst) {
        int64_t c = x->dims[1];
        float *s = ARENA_ARRAY(L->p->arena, float, c), *t = ARENA_ARRAY(L->p->arena, float, c);
        double eps = ir_attr_float(n, "epsilon", 1e-5f);
        for (int64_t i = 0; i < c; i++) {
            double sc = ir_const_float(n->in[1], i) / sqrt(ir_const_float(n->in[4], i) + eps);
            s[i] = (float)sc;
            t[i] = (float)(ir_const_float(n->in[2], i) - ir_const_float(n->in[3], i) * sc);
        }
        const char *nm = n->out[0]->name;
        Buf *ins[3] = {x, channel_const(L, arena_printf(L->p->arena, "%s_scale", nm), s, c, x->rank),
                       channel_const(L, arena_printf(L->p->arena, "%s_shift", nm), t, c, x->rank)};
        lower_map(L, n, y, 3, ins, bn_affine, NULL);
        return;
    }
    Buf *ins[5] = {x};
    for (int i = 1; i < 5; i++) ins[i] = channel_view(L, lower_in(L, n, i), x->rank);
    lower_map(L, n, y, 5, ins, bn_full, NULL);
}

/* ---- Softmax and LogSoftmax ---- */

/* Fresh variables for the reduced dims [lo, hi) of one pass, written into idx. */
static void pass_vars(Program *p, Kernel *k, int lo, int hi, int *vars, Expr **idx) {
    for (int d = lo; d < hi; d++) {
        vars[d] = kir_var(k);
        idx[d] = kx_var(p, vars[d]);
    }
}

static Stmt *pass_wrap(Program *p, int lo, int hi, const int64_t *dims, const int *vars, Stmt *s,
                       bool reduction) {
    for (int d = hi - 1; d >= lo; d--)
        s = reduction ? ks_red_loop(p, vars[d], dims[d], s) : ks_loop(p, vars[d], 0, dims[d], 1, s);
    return s;
}

/* Over the reduced dims [lo, hi) (the single dim `axis`, or with `legacy` the block
 * axis..rank-1), for every position of the other dims, in three passes:
 *   m = max x;  s = sum exp(x - m);  y = exp(x - m) / s   (Softmax)
 *                                    y = (x - m) - log s  (LogSoftmax)
 * Subtracting the max keeps exp from overflowing. */
void lower_softmax(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int r = x->rank, axis = norm_axis(ir_attr_int(n, "axis", r - 1), r);
    int lo = axis, hi = ir_attr_int(n, "legacy", 0) ? r : axis + 1;
    DType t = y->dtype;

    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int rv[MAX_RANK] = {0}, mx = kir_scalar(p, k, t), sm = kir_scalar(p, k, t);
    int fin = kir_scalar(p, k, t);
    Expr *idx[MAX_RANK];
    int oo[MAX_RANK], no = 0;
    int64_t od[MAX_RANK];
    for (int d = 0; d < r; d++)
        if (d < lo || d >= hi) {
            oo[no] = kir_var(k);
            idx[d] = kx_var(p, oo[no]);
            od[no++] = x->dims[d];
        }

    pass_vars(p, k, lo, hi, rv, idx);
    Stmt *body = ks_set(p, mx, kx_const(p, t, -INFINITY));
    Expr *xv = kx_load(p, x, idx);
    ks_seq(body, pass_wrap(p, lo, hi, x->dims, rv,
                           ks_set(p, mx, kx_bin(p, K_MAX, kx_scalar(p, k, mx), xv)), true));

    pass_vars(p, k, lo, hi, rv, idx);
    Expr *e = kx_un(p, K_EXP, kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)));
    ks_seq(body, ks_set(p, sm, kx_const(p, t, 0)));
    ks_seq(body, pass_wrap(p, lo, hi, x->dims, rv,
                           ks_set(p, sm, kx_bin(p, K_ADD, kx_scalar(p, k, sm), e)), true));

    pass_vars(p, k, lo, hi, rv, idx);
    Expr *xm = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)), *v;
    if (n->op == OP_LogSoftmax) {
        ks_seq(body, ks_set(p, fin, kx_un(p, K_LOG, kx_scalar(p, k, sm))));
        v = kx_bin(p, K_SUB, xm, kx_scalar(p, k, fin));
    } else {
        ks_seq(body, ks_set(p, fin, kx_un(p, K_RECIP, kx_scalar(p, k, sm))));
        v = kx_bin(p, K_MUL, kx_un(p, K_EXP, xm), kx_scalar(p, k, fin));
    }
    ks_seq(body, pass_wrap(p, lo, hi, x->dims, rv, ks_store(p, y, idx, v), false));
    k->body = lower_wrap(p, no, od, oo, body);
}
