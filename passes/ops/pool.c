/* pool.c - the pooling family: AveragePool, LpPool, MaxPool (with its Indices output),
 * GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool and MaxRoiPool.
 *
 * The windowed pools share Conv's window geometry (rule_window); the global pools are
 * reductions over the spatial dims and use the reduction emitter of helpers.c. Padded taps
 * are guarded so that no load leaves the input. */
#include <math.h>
#include <string.h>

#include "../lower.h"

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
    return rule_window(g, n, x, ks, ir_attr_int(n, "ceil_mode", 0) != 0, w);
}

void infer_pool(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t dims[MAX_RANK];
    Window w;
    if (!pool_window(g, n, &w)) return;
    if (n->op == OP_LpPool && !rule_float_input(g, n, 0)) return;
    if (n->op == OP_LpPool && ir_attr_int(n, "p", 2) < 1) {
        error(ir_where(g, n), "p %lld must be >= 1", (long long)ir_attr_int(n, "p", 2));
        return;
    }
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_INT64, x->rank, dims);
}

/* AveragePool's divisor at output position oi: the number of taps inside [lo, hi) along each
 * spatial dim, multiplied. lo/hi are the input (count_include_pad=0) or the padded input
 * (count_include_pad=1). A dim whose windows always fit contributes its kernel size. With
 * window start s = o*stride - pb and dilation d the taps inside are t in [0, k) with
 * lo <= s + t*d < hi: from max(0, ceil((lo - s) / d)) to min(k, floor((hi - 1 - s) / d) + 1),
 * both divisions of numbers made non-negative first (K_DIV truncates). */
static Expr *avg_divisor(Program *p, const Window *w, Expr **oi, bool include_pad, DType t) {
    int64_t konst = 1;
    Expr *cnt = NULL;
    for (int i = 0; i < w->nsp; i++) {
        int64_t lo = include_pad ? -w->pb[i] : 0, hi = include_pad ? w->in[i] + w->pe[i] : w->in[i];
        int64_t d = w->d[i], last = (w->out[i] - 1) * w->s[i] - w->pb[i] + (w->k[i] - 1) * d + 1;
        if (-w->pb[i] >= lo && last <= hi) {
            konst *= w->k[i];
            continue;
        }
        Expr *start = kx_addc(p, kx_mul(p, oi[2 + i], w->s[i]), -w->pb[i]), *ci;
        if (d == 1) {
            Expr *end = kx_bin(p, K_MIN, kx_addc(p, start, w->k[i]), kx_index(p, hi));
            start = kx_bin(p, K_MAX, start, kx_index(p, lo));
            ci = kx_bin(p, K_SUB, end, start);
        } else {
            Expr *a = kx_bin(p, K_MAX, kx_bin(p, K_SUB, kx_index(p, lo), start), kx_index(p, 0));
            Expr *tmin = kx_bin(p, K_DIV, kx_addc(p, a, d - 1), kx_index(p, d));
            Expr *b = kx_bin(p, K_SUB, kx_index(p, hi - 1 + d), kx_clone(p, start));
            b = kx_bin(p, K_MAX, b, kx_index(p, 0));
            Expr *tend = kx_bin(p, K_MIN, kx_bin(p, K_DIV, b, kx_index(p, d)), kx_index(p, w->k[i]));
            ci = kx_bin(p, K_MAX, kx_bin(p, K_SUB, tend, tmin), kx_index(p, 0));
        }
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

/* y[n, c, o...] = max / mean over the taps t inside the input of x[n, c, o*s + t*d - pb]
 * (LpPool: (sum of |x|^p)^(1/p), padding counting as 0); MaxPool's optional Indices output
 * gets the flat NCHW index of the first maximum. */
void lower_pool(Lower *L, Node *n) {
    Program *p = L->p;
    bool is_max = n->op == OP_MaxPool;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Buf *yi = is_max && n->nout > 1 && n->out[1] ? lower_out(L, n, 1) : NULL;
    Window w;
    if (!pool_window(NULL, n, &w)) die("lower_pool %s: node not checked by infer_pool", n->name);

    /* Two outputs do not fit the contraction form fusion expects (one final store). */
    int ov[MAX_RANK], tv[MAX_RANK];
    Kernel *k = lower_kernel(L, n, yi ? KC_GENERIC : KC_CONTRACTION, KINS(x), y, ov, NULL);
    if (yi) kir_param(p, k, yi, KP_OUT);
    lower_vars(k, w.nsp, tv);
    int acc = kir_scalar(p, k, y->dtype), arg = yi ? kir_scalar(p, k, DT_INDEX) : -1;

    Expr *oi[MAX_RANK], *xi[MAX_RANK], *conds[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    xi[0] = oi[0];
    xi[1] = oi[1];
    for (int i = 0; i < w.nsp; i++)
        xi[2 + i] = rule_tap_index(p, &w, i, oi[2 + i], kx_var(p, tv[i]), &conds[i]);
    Expr *flat = yi ? argmax_index(p, x, xi, ir_attr_int(n, "storage_order", 0) != 0) : NULL;
    Expr *xv = kx_load(p, x, xi), *av = kx_scalar(p, k, acc);
    Stmt *upd, *body = ks_set(p, acc, kx_const(p, y->dtype, is_max ? rule_dtype_lowest(y->dtype) : 0));
    double pw = (double)ir_attr_int(n, "p", 2);
    if (n->op == OP_LpPool) {
        Expr *ax = kx_un(p, K_ABS, xv);
        Expr *term = pw == 1 ? ax : pw == 2 ? kx_bin(p, K_MUL, ax, kx_clone(p, ax))
                                            : kx_bin(p, K_POW, ax, kx_const(p, y->dtype, pw));
        upd = ks_set(p, acc, kx_bin(p, K_ADD, av, term));
    } else if (!is_max) upd = ks_set(p, acc, kx_bin(p, K_ADD, av, xv));
    else if (!yi) upd = ks_set(p, acc, kx_bin(p, K_MAX, av, xv));
    else upd = ks_if(p, kx_bin(p, K_GT, xv, av), ks_seq(ks_set(p, acc, xv), ks_set(p, arg, flat)), NULL);
    if (yi) ks_seq(body, ks_set(p, arg, kx_index(p, 0)));
    ks_seq(body, rule_wrap_taps(p, &w, tv, conds, upd));
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_LpPool && pw != 1)
        v = pw == 2 ? kx_un(p, K_SQRT, v) : kx_bin(p, K_POW, v, kx_const(p, y->dtype, 1 / pw));
    else if (!is_max && n->op != OP_LpPool)
        v = kx_bin(p, K_DIV, v,
                   avg_divisor(p, &w, oi, ir_attr_int(n, "count_include_pad", 0) != 0, y->dtype));
    ks_seq(body, ks_store(p, y, oi, v));
    if (yi) ks_seq(body, ks_store(p, yi, oi, kx_cast(p, DT_INT64, kx_scalar(p, k, arg))));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

void infer_global_pool(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t dims[MAX_RANK];
    if (x->rank < 3) {
        error(ir_where(g, n), "input must have rank >= 3 (N, C, spatial...), not %d", x->rank);
        return;
    }
    if (n->op == OP_GlobalLpPool && !dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input '%s' is %s, GlobalLpPool needs a floating-point type",
              x->name, dtype_name(x->dtype));
        return;
    }
    /* the order of an Lp norm: p = 0 would take the 0th root */
    if (n->op == OP_GlobalLpPool && ir_attr_int(n, "p", 2) < 1) {
        error(ir_where(g, n), "p %lld must be >= 1", (long long)ir_attr_int(n, "p", 2));
        return;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = d < 2 ? x->dims[d] : 1;
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: reductions over the spatial dims. */
void lower_global_pool(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    bool mask[MAX_RANK];
    for (int d = 0; d < x->rank; d++) mask[d] = d >= 2;
    rule_emit_reduce(L, n, x, lower_out(L, n, 0), mask, true, rule_red_kind(n));
}


/* ---- MaxUnpool ---- */

/* The output dims that kernel_shape, strides and pads imply (MaxPool's input dims); false if
 * one overflows 64 bits (the fuzzer's kernel_shape INT64_MAX). */
static bool unpool_dims(const Node *n, const Value *x, int64_t *dims) {
    const int64_t *ks, *st = NULL, *pads = NULL;
    int sp = x->rank - 2;
    ir_attr_ints(n, "kernel_shape", &ks);
    int ns = ir_attr_ints(n, "strides", &st), np = ir_attr_ints(n, "pads", &pads);
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int d = 0; d < sp; d++) {
        int64_t v, p = 0;
        if (__builtin_mul_overflow(x->dims[2 + d] - 1, ns ? st[d] : 1, &v) || __builtin_add_overflow(v, ks[d], &v) ||
            (np && __builtin_add_overflow(pads[d], pads[sp + d], &p)) || __builtin_sub_overflow(v, p, &v))
            return false;
        dims[2 + d] = v;
    }
    return true;
}

void infer_max_unpool(Graph *g, Node *n) {
    Value *x = n->in[0], *ind = n->in[1];
    const int64_t *ks, *st = NULL, *pads = NULL;
    int sp = x->rank - 2, nk = ir_attr_ints(n, "kernel_shape", &ks);
    int ns = ir_attr_ints(n, "strides", &st), np = ir_attr_ints(n, "pads", &pads);
    if (x->rank < 3 || nk != sp || (ns && ns != sp) || (np && np != 2 * sp) ||
        !ir_same_shape(x, ind) || dtype_is_float(ind->dtype)) {
        error(ir_where(g, n), "needs X [N,C,D...], integer indices of X's shape and kernel_shape, "
              "strides, pads matching its spatial rank");
        return;
    }
    int64_t dims[MAX_RANK];
    if (!unpool_dims(n, x, dims)) {
        error(ir_where(g, n), "the output size that kernel_shape, strides and pads imply overflows 64 bits");
        return;
    }
    if (n->nin > 2 && n->in[2]) {
        Value *os = rule_const_ints(g, n, 2, "output_shape", MAX_RANK);
        if (!os) return;
        if (ir_numel(os) != x->rank) {
            error(ir_where(g, n), "output_shape '%s' must have %d elements", os->name, x->rank);
            return;
        }
        for (int d = 0; d < x->rank; d++) dims[d] = ir_const_int(os, d);
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* y = 0, then y[unflatten(indices[i])] = x[i] for every element i of x: MaxPool's indices count
 * in the whole (row-major) tensor of the implied dims (unpool_dims). An output_shape larger than
 * those pads at the end of each dim, as the ONNX reference does; coordinates are clamped into
 * the output. */
void lower_max_unpool(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int r = out->rank, ov[MAX_RANK], xv[MAX_RANK];
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, ind), out, ov, oi);
    kir_param(p, k, out, KP_IN);                        /* read back: scattered stores */
    k->body = lower_wrap(p, r, out->dims, ov, ks_store(p, out, oi, kx_const(p, out->dtype, 0)));
    lower_vars(k, r, xv);
    lower_var_idx(p, r, xv, xi);
    int64_t dims[MAX_RANK], stride = 1, total = 1;
    unpool_dims(n, n->in[0], dims);
    for (int d = 0; d < r; d++) total *= dims[d];
    Expr *f = kx_cast(p, DT_INDEX, kx_load(p, ind, xi));
    f = kx_bin(p, K_MIN, kx_bin(p, K_MAX, f, kx_index(p, 0)), kx_index(p, total - 1));
    for (int d = r - 1; d >= 0; d--) {
        Expr *q = stride > 1 ? kx_bin(p, K_DIV, kx_clone(p, f), kx_index(p, stride)) : kx_clone(p, f);
        q = d > 0 ? kx_bin(p, K_REM, q, kx_index(p, dims[d])) : q;
        oi[d] = kx_bin(p, K_MIN, q, kx_index(p, out->dims[d] - 1));
        stride *= dims[d];
    }
    Stmt *s = ks_store(p, out, oi, kx_load(p, x, xi));
    ks_seq(k->body, lower_wrap(p, r, x->dims, xv, s));
}

/* ---- MaxRoiPool (opsets 1 and 22) ----
 * For each RoI [batch, x1, y1, x2, y2] (scaled by spatial_scale and rounded half away from
 * zero, as Caffe2's RoIPool and onnxruntime), pooled_shape bins each take the maximum of the
 * input pixels they cover, 0 for an empty bin. The bins depend on the data, so the kernel
 * scans every row and column of the input and keeps those inside the bin. */

void infer_max_roi_pool(Graph *g, Node *n) {
    Value *x = n->in[0], *rois = n->in[1];
    const int64_t *ps;
    if (!rule_float_input(g, n, 0)) return;
    if (ir_attr_ints(n, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1 || x->rank != 4 ||
        rois->dtype != x->dtype || rois->rank != 2 || rois->dims[1] != 5 || x->dims[0] < 1) {
        error(ir_where(g, n), "needs X [N, C, H, W], rois [R, 5] of X's type and a positive "
              "pooled_shape of 2 values");
        return;
    }
    int64_t dims[4] = {rois->dims[0], x->dims[1], ps[0], ps[1]};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* v clamped into [0, hi], NaN (and -inf) to 0, so that it converts to an index safely */
static Expr *nan_safe_clamp(Program *p, DType t, Expr *v, double hi) {
    Expr *pos = kx_select(p, kx_bin(p, K_GE, v, kx_const(p, t, 0)), kx_clone(p, v), kx_const(p, t, 0));
    return kx_bin(p, K_MIN, pos, kx_const(p, t, hi));
}

void lower_max_roi_pool(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *rois = lower_in(L, n, 1), *y = lower_out(L, n, 0);
    const int64_t *ps;
    ir_attr_ints(n, "pooled_shape", &ps);
    DType t = y->dtype;
    double scale = ir_attr_float(n, "spatial_scale", 1.0f);
    int ov[4];
    Expr *oi[4];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, rois), y, ov, oi);
    int vh = kir_var(k), vw = kir_var(k), acc = kir_scalar(p, k, t);
    int lo[2], hi[2];
    Stmt *body = NULL;
    /* the RoI's corners: x1 = col 1, y1 = 2, x2 = 3, y2 = 4; dim 0 of the bins is h */
    for (int d = 0; d < 2; d++) {
        Expr *c[2];
        for (int e = 0; e < 2; e++) {
            Expr *ri[2] = {kx_clone(p, oi[0]), kx_index(p, 2 - d + 2 * e)};
            Expr *v = kx_bin(p, K_MUL, kx_load(p, rois, ri), kx_const(p, t, scale));
            /* round half away from zero */
            Expr *r = kx_un(p, K_FLOOR, kx_bin(p, K_ADD, kx_un(p, K_ABS, v), kx_const(p, t, 0.5)));
            c[e] = kx_bin(p, K_MUL, kx_un(p, K_SIGN, kx_clone(p, v)), r);
        }
        Expr *size = kx_bin(p, K_MAX, kx_bin(p, K_ADD, kx_bin(p, K_SUB, c[1], kx_clone(p, c[0])), kx_const(p, t, 1)),
                            kx_const(p, t, 1));
        Expr *bin = kx_bin(p, K_DIV, size, kx_const(p, t, (double)ps[d]));
        Expr *pos = kx_cast(p, t, kx_clone(p, oi[2 + d]));
        Expr *s0 = kx_un(p, K_FLOOR, kx_bin(p, K_MUL, pos, bin));
        Expr *e0 = kx_un(p, K_CEIL, kx_bin(p, K_MUL, kx_bin(p, K_ADD, kx_clone(p, pos), kx_const(p, t, 1)), kx_clone(p, bin)));
        double dim = (double)x->dims[2 + d];
        Expr *st = nan_safe_clamp(p, t, kx_bin(p, K_ADD, s0, kx_clone(p, c[0])), dim);
        Expr *en = nan_safe_clamp(p, t, kx_bin(p, K_ADD, e0, kx_clone(p, c[0])), dim);
        lo[d] = kir_scalar(p, k, DT_INDEX);
        hi[d] = kir_scalar(p, k, DT_INDEX);
        body = ks_seq(body, ks_set(p, lo[d], kx_cast(p, DT_INDEX, st)));
        ks_seq(body, ks_set(p, hi[d], kx_cast(p, DT_INDEX, en)));
    }
    Expr *bi[2] = {kx_clone(p, oi[0]), kx_index(p, 0)};
    Expr *b = kx_cast(p, DT_INDEX, nan_safe_clamp(p, t, kx_load(p, rois, bi), (double)(x->dims[0] - 1)));
    Expr *xi[4] = {b, kx_clone(p, oi[1]), kx_var(p, vh), kx_var(p, vw)};
    Expr *inw = kx_and(p, kx_bin(p, K_GE, kx_var(p, vw), kx_scalar(p, k, lo[1])),
                       kx_bin(p, K_LT, kx_var(p, vw), kx_scalar(p, k, hi[1])));
    Expr *inh = kx_and(p, kx_bin(p, K_GE, kx_var(p, vh), kx_scalar(p, k, lo[0])),
                       kx_bin(p, K_LT, kx_var(p, vh), kx_scalar(p, k, hi[0])));
    Stmt *upd = ks_if(p, inw, ks_set(p, acc, kx_bin(p, K_MAX, kx_scalar(p, k, acc), kx_load(p, x, xi))), NULL);
    upd = ks_if(p, inh, ks_red_loop(p, vw, x->dims[3], upd), NULL);
    ks_seq(body, ks_set(p, acc, kx_const(p, t, -INFINITY)));
    ks_seq(body, ks_red_loop(p, vh, x->dims[2], upd));
    Expr *empty = kx_bin(p, K_OR, kx_bin(p, K_LE, kx_scalar(p, k, hi[0]), kx_scalar(p, k, lo[0])),
                         kx_bin(p, K_LE, kx_scalar(p, k, hi[1]), kx_scalar(p, k, lo[1])));
    ks_seq(body, ks_store(p, y, oi, kx_select(p, empty, kx_const(p, t, 0), kx_scalar(p, k, acc))));
    k->body = lower_wrap(p, 4, y->dims, ov, body);
}
