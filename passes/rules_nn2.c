/* rules_nn2.c - shape and lowering rules of more neural-network ops: the remaining Reduce*
 * ops (L1, L2, LogSum, LogSumExp, Prod, SumSquare) and GlobalLpPool, the normalisations
 * (LayerNormalization, InstanceNormalization, MeanVarianceNormalization, LRN), ConvTranspose,
 * and Resize/Upsample.
 *
 * The kernels follow the shapes of passes/rules_nn.c: parallel loops over the output dims
 * outermost, reduction loops inside accumulating into scalar registers, one final store per
 * output element. Kernels that need several passes over the reduced dims (LogSumExp, the
 * normalisations) are KC_GENERIC, like Softmax. Resize computes its sampling positions at
 * compile time (every size is static) into small constant tables, so that the kernel is a
 * gather or a short weighted sum whatever the interpolation and coordinate mode. */
#include <math.h>
#include <string.h>

#include "lower.h"

/* ---- small helpers ---- */

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static Expr *fconst(Program *p, DType t, double v) { return kx_const(p, t, v); }

/* A constant buffer of `count` elements of type t made from v (copied into the arena). */
static Buf *const_table(Lower *L, const char *name, DType t, int rank, const int64_t *dims,
                        const void *v) {
    Buf *b = kir_buf_new(L->p, name, t, rank, dims, B_CONST);
    size_t sz = dtype_size(t) * (size_t)kir_numel(b);
    void *d = arena_alloc(L->p->arena, sz + 1);
    memcpy(d, v, sz);
    b->data = d;
    return b;
}

/* Loops over the dims marked `red` (reduction or not), innermost last, around body. */
static Stmt *wrap_dims(Program *p, int rank, const int64_t *dims, const bool *sel, const int *vars,
                       Stmt *body, bool reduction) {
    for (int d = rank - 1; d >= 0; d--)
        if (sel[d]) body = reduction ? ks_red_loop(p, vars[d], dims[d], body)
                                     : ks_loop(p, vars[d], 0, dims[d], 1, body);
    return body;
}

/* Fresh variables for the dims marked in sel, written into idx. */
static void sel_vars(Program *p, Kernel *k, int rank, const bool *sel, int *vars, Expr **idx) {
    for (int d = 0; d < rank; d++)
        if (sel[d]) {
            vars[d] = kir_var(k);
            idx[d] = kx_var(p, vars[d]);
        }
}

/* ---- the Reduce* family and GlobalLpPool ---- */

/* out[o...] = fin(acc) where acc = init, acc = step(acc, x) over the reduced dims:
 *   L1 |x| summed; L2 sqrt of sum x^2; SumSquare sum x^2; LogSum log of sum; Prod product;
 *   GlobalLpPool (sum |x|^p)^(1/p);
 *   LogSumExp m + log sum exp(x - m) with m the max (a first pass), so exp never overflows. */
static void emit_reduce_more(Lower *L, Node *n, Buf *in, Buf *out, const bool *mask,
                             bool keepdims) {
    Program *p = L->p;
    DType t = out->dtype;
    bool lse = n->op == OP_ReduceLogSumExp;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, lse ? KC_GENERIC : KC_CONTRACTION);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int ov[MAX_RANK], rv[MAX_RANK] = {0}, acc = kir_scalar(p, k, t);
    int mx = lse ? kir_scalar(p, k, t) : -1;
    Expr *oi[MAX_RANK], *ii[MAX_RANK];
    lower_vars(k, out->rank, ov);
    lower_var_idx(p, out->rank, ov, oi);
    for (int d = 0, o = 0; d < in->rank; d++) {
        if (!mask[d]) ii[d] = oi[o++];
        else if (keepdims) o++;
    }
    Stmt *body = NULL;
    if (lse) {
        sel_vars(p, k, in->rank, mask, rv, ii);
        Stmt *s = ks_set(p, mx, kx_bin(p, K_MAX, kx_scalar(p, k, mx), kx_load(p, in, ii)));
        body = ks_seq(ks_set(p, mx, fconst(p, t, -INFINITY)),
                      wrap_dims(p, in->rank, in->dims, mask, rv, s, true));
    }
    sel_vars(p, k, in->rank, mask, rv, ii);
    Expr *xv = kx_load(p, in, ii), *av = kx_scalar(p, k, acc), *nv;
    double init = 0;
    switch (n->op) {
    case OP_ReduceL1: nv = kx_bin(p, K_ADD, av, kx_un(p, K_ABS, xv)); break;
    case OP_ReduceL2: case OP_ReduceSumSquare:
        nv = kx_bin(p, K_ADD, av, kx_bin(p, K_MUL, xv, xv));
        break;
    case OP_ReduceLogSum: nv = kx_bin(p, K_ADD, av, xv); break;
    case OP_ReduceLogSumExp:
        nv = kx_bin(p, K_ADD, av, kx_un(p, K_EXP, kx_bin(p, K_SUB, xv, kx_scalar(p, k, mx))));
        break;
    case OP_ReduceProd: nv = kx_bin(p, K_MUL, av, xv), init = 1; break;
    case OP_GlobalLpPool: {
        double pw = (double)ir_attr_int(n, "p", 2);
        Expr *ax = kx_un(p, K_ABS, xv);
        Expr *term = pw == 2 ? kx_bin(p, K_MUL, ax, ax) : kx_bin(p, K_POW, ax, fconst(p, t, pw));
        nv = kx_bin(p, K_ADD, av, term);
        break;
    }
    default: die("emit_reduce_more: op %s", n->op_type);
    }
    body = ks_seq(body, ks_set(p, acc, fconst(p, t, init)));
    ks_seq(body, wrap_dims(p, in->rank, in->dims, mask, rv, ks_set(p, acc, nv), true));
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_ReduceL2) v = kx_un(p, K_SQRT, v);
    else if (n->op == OP_ReduceLogSum) v = kx_un(p, K_LOG, v);
    else if (lse) v = kx_bin(p, K_ADD, kx_scalar(p, k, mx), kx_un(p, K_LOG, v));
    else if (n->op == OP_GlobalLpPool) {
        double pw = (double)ir_attr_int(n, "p", 2);
        v = pw == 2 ? kx_un(p, K_SQRT, v) : pw == 1 ? v : kx_bin(p, K_POW, v, fconst(p, t, 1 / pw));
    }
    ks_seq(body, ks_store(p, out, oi, v));
    k->body = lower_wrap(p, out->rank, out->dims, ov, body);
}

void lower_reduce_more(Lower *L, Node *n) {
    bool mask[MAX_RANK];
    Buf *x = lower_in(L, n, 0);
    int any = rule_reduce_mask(NULL, n, mask);
    if (any < 0) die("lower_reduce_more %s: node not checked by infer_reduce", n->name);
    if (!any) {
        /* No reduction: the element function alone (|x|, x^2, log x, ...) is still applied. */
        for (int d = 0; d < x->rank; d++) mask[d] = false;
    }
    emit_reduce_more(L, n, x, lower_out(L, n, 0), mask, !any || ir_attr_int(n, "keepdims", 1) != 0);
}

void lower_global_lppool(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    bool mask[MAX_RANK];
    for (int d = 0; d < x->rank; d++) mask[d] = d >= 2;
    emit_reduce_more(L, n, x, lower_out(L, n, 0), mask, true);
}

/* ---- normalisations: LayerNormalization, InstanceNormalization, MVN ---- */

/* How a normalisation reads its scale and bias at element index idx of x. */
typedef enum AffineKind { AF_NONE, AF_CHANNEL, AF_TRAILING } AffineKind;

typedef struct Norm {
    bool mask[MAX_RANK];        /* the dims the statistics are taken over */
    double eps;
    bool eps_outside;           /* MVN: (x - mean) / (sqrt(var) + eps) */
    AffineKind af;
    int axis;                   /* AF_TRAILING: scale/bias broadcast to x.shape[axis:] */
    Buf *scale, *bias;          /* NULL: 1 / 0 */
    Buf *mean_out, *inv_out;    /* LayerNormalization's optional outputs (keepdims shape) */
} Norm;

static Expr *affine_load(Program *p, const Norm *nm, Buf *b, int rank, Expr **idx) {
    Expr *bi[MAX_RANK];
    if (nm->af == AF_CHANNEL) return kx_load(p, b, &idx[1]);
    lower_bcast_idx(p, b, rank - nm->axis, idx + nm->axis, bi);
    return kx_load(p, b, bi);
}

/* For every position of the kept dims, three passes over the reduced ones:
 *   mean = sum x / N;  var = sum (x - mean)^2 / N;  inv = 1 / sqrt(var + eps)
 *   y = (x - mean) * inv * scale + bias
 * Two passes for the statistics (not E[x^2] - E[x]^2) keep the variance from cancelling. */
static void emit_norm(Lower *L, Node *n, Buf *x, Buf *y, const Norm *nm) {
    Program *p = L->p;
    DType t = y->dtype;
    int r = x->rank, ov[MAX_RANK], rv[MAX_RANK] = {0}, no = 0;
    bool keep[MAX_RANK];
    int64_t cnt = 1, od[MAX_RANK];
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    if (nm->scale) kir_param(p, k, nm->scale, KP_IN);
    if (nm->bias) kir_param(p, k, nm->bias, KP_IN);
    kir_param(p, k, y, KP_OUT);
    if (nm->mean_out) kir_param(p, k, nm->mean_out, KP_OUT);
    if (nm->inv_out) kir_param(p, k, nm->inv_out, KP_OUT);
    int sm = kir_scalar(p, k, t), mean = kir_scalar(p, k, t), inv = kir_scalar(p, k, t);
    Expr *idx[MAX_RANK], *kidx[MAX_RANK];
    for (int d = 0; d < r; d++) {
        keep[d] = !nm->mask[d];
        if (keep[d]) {
            ov[no] = kir_var(k);
            kidx[d] = idx[d] = kx_var(p, ov[no]);
            od[no++] = x->dims[d];
        } else {
            kidx[d] = kx_index(p, 0);
            cnt *= x->dims[d];
        }
    }
    Expr *nc = fconst(p, t, (double)(cnt ? cnt : 1));

    sel_vars(p, k, r, nm->mask, rv, idx);
    Stmt *body = ks_set(p, sm, fconst(p, t, 0));
    Stmt *acc1 = ks_set(p, sm, kx_bin(p, K_ADD, kx_scalar(p, k, sm), kx_load(p, x, idx)));
    ks_seq(body, wrap_dims(p, r, x->dims, nm->mask, rv, acc1, true));
    ks_seq(body, ks_set(p, mean, kx_bin(p, K_DIV, kx_scalar(p, k, sm), nc)));

    sel_vars(p, k, r, nm->mask, rv, idx);
    Expr *dv = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mean));
    ks_seq(body, ks_set(p, sm, fconst(p, t, 0)));
    Stmt *acc2 = ks_set(p, sm, kx_bin(p, K_ADD, kx_scalar(p, k, sm), kx_bin(p, K_MUL, dv, dv)));
    ks_seq(body, wrap_dims(p, r, x->dims, nm->mask, rv, acc2, true));
    Expr *var = kx_bin(p, K_DIV, kx_scalar(p, k, sm), nc), *eps = fconst(p, t, nm->eps);
    Expr *den = nm->eps_outside ? kx_bin(p, K_ADD, kx_un(p, K_SQRT, var), eps)
                                : kx_un(p, K_SQRT, kx_bin(p, K_ADD, var, eps));
    ks_seq(body, ks_set(p, inv, kx_un(p, K_RECIP, den)));
    if (nm->mean_out) ks_seq(body, ks_store(p, nm->mean_out, kidx, kx_scalar(p, k, mean)));
    if (nm->inv_out) ks_seq(body, ks_store(p, nm->inv_out, kidx, kx_scalar(p, k, inv)));

    sel_vars(p, k, r, nm->mask, rv, idx);
    Expr *v = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mean));
    v = kx_bin(p, K_MUL, v, kx_scalar(p, k, inv));
    if (nm->scale) v = kx_bin(p, K_MUL, v, affine_load(p, nm, nm->scale, r, idx));
    if (nm->bias) v = kx_bin(p, K_ADD, v, affine_load(p, nm, nm->bias, r, idx));
    ks_seq(body, wrap_dims(p, r, x->dims, nm->mask, rv, ks_store(p, y, idx, v), false));
    k->body = lower_wrap(p, no, od, ov, body);
}

static bool layernorm_axis(Graph *g, Node *n, int *axis) {
    int r = n->in[0]->rank;
    int64_t a = ir_attr_int(n, "axis", -1);
    if (a < -r || a >= r) {
        if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)a, r);
        return false;
    }
    *axis = norm_axis(a, r);
    return true;
}

void infer_layernorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    int axis, r, rank = x->rank;
    int64_t dims[MAX_RANK], sd[MAX_RANK];
    if (!layernorm_axis(g, n, &axis)) return;
    for (int i = 1; i < 3 && i < n->nin; i++) {
        Value *s = n->in[i];
        if (s && (s->rank > rank - axis || !ir_broadcast(s->rank, s->dims, rank - axis,
                                                          x->dims + axis, &r, sd) ||
                  memcmp(sd, x->dims + axis, sizeof(int64_t) * (size_t)(rank - axis)))) {
            error(ir_where(g, n), "%s does not broadcast to the normalized shape",
                  i == 1 ? "Scale" : "B");
            return;
        }
    }
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input must be a float tensor, not %s", dtype_name(x->dtype));
        return;
    }
    if (x->dtype != DT_FLOAT && ((n->nout > 1 && n->out[1]) || (n->nout > 2 && n->out[2]))) {
        error(ir_where(g, n), "Mean and InvStdDev outputs need a float32 input");
        return;
    }
    ir_set_shape(n->out[0], x->dtype, rank, x->dims);
    for (int d = 0; d < rank; d++) dims[d] = d < axis ? x->dims[d] : 1;
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) ir_set_shape(n->out[i], DT_FLOAT, rank, dims);
}

void lower_layernorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_TRAILING};
    if (!layernorm_axis(NULL, n, &nm.axis)) die("lower_layernorm %s: unchecked axis", n->name);
    for (int d = 0; d < x->rank; d++) nm.mask[d] = d >= nm.axis;
    nm.scale = lower_in(L, n, 1);
    nm.bias = lower_in(L, n, 2);
    if (n->nout > 1 && n->out[1]) nm.mean_out = lower_out(L, n, 1);
    if (n->nout > 2 && n->out[2]) nm.inv_out = lower_out(L, n, 2);
    emit_norm(L, n, x, y, &nm);
}

void infer_instnorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 3) {
        error(ir_where(g, n), "input must have rank >= 3 (N, C, spatial...), not %d", x->rank);
        return;
    }
    for (int i = 1; i < 3; i++)
        if (n->in[i]->rank != 1 || n->in[i]->dims[0] != x->dims[1]) {
            error(ir_where(g, n), "input %d must have shape [%lld]", i, (long long)x->dims[1]);
            return;
        }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

void lower_instnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_CHANNEL};
    for (int d = 0; d < x->rank; d++) nm.mask[d] = d >= 2;
    nm.scale = lower_in(L, n, 1);
    nm.bias = lower_in(L, n, 2);
    emit_norm(L, n, x, lower_out(L, n, 0), &nm);
}

/* MVN's axes attribute (default [0, 2, 3]); false after reporting a bad axis. */
static bool mvn_mask(Graph *g, Node *n, bool *mask) {
    static const int64_t dflt[3] = {0, 2, 3};
    const int64_t *ax;
    int na = ir_attr_ints(n, "axes", &ax), r = n->in[0]->rank;
    if (!ax) ax = dflt, na = 3;
    for (int d = 0; d < r; d++) mask[d] = false;
    for (int i = 0; i < na; i++) {
        if (ax[i] < -r || ax[i] >= r) {
            if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)ax[i], r);
            return false;
        }
        mask[norm_axis(ax[i], r)] = true;
    }
    return true;
}

void infer_mvn(Graph *g, Node *n) {
    bool mask[MAX_RANK];
    if (!mvn_mask(g, n, mask)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, n->in[0]->dims);
}

/* The ONNX function body divides by sqrt(var) + 1e-9 (not sqrt(var + eps)). */
void lower_mvn(Lower *L, Node *n) {
    Norm nm = {.eps = 1e-9, .eps_outside = true, .af = AF_NONE};
    if (!mvn_mask(NULL, n, nm.mask)) die("lower_mvn %s: unchecked axes", n->name);
    emit_norm(L, n, lower_in(L, n, 0), lower_out(L, n, 0), &nm);
}

/* ---- LRN ---- */

void infer_lrn(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 2 || ir_attr_int(n, "size", 0) < 1) {
        error(ir_where(g, n), "need an input of rank >= 2 and a positive size attribute");
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* y[n, c, ...] = x[n, c, ...] / (bias + alpha / size * sum x[n, c', ...]^2)^beta over the
 * channels c' in [c - floor((size-1)/2), c + ceil((size-1)/2)] inside [0, C). */
void lower_lrn(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int64_t size = ir_attr_int(n, "size", 1), lo = (size - 1) / 2, c = x->dims[1];
    double alpha = ir_attr_float(n, "alpha", 1e-4f), beta = ir_attr_float(n, "beta", 0.75f);
    double bias = ir_attr_float(n, "bias", 1);
    DType t = y->dtype;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[MAX_RANK], tv, acc;
    lower_vars(k, y->rank, ov);
    tv = kir_var(k);
    acc = kir_scalar(p, k, t);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    memcpy(xi, oi, sizeof(Expr *) * (size_t)y->rank);
    xi[1] = kx_addc(p, kx_add(p, oi[1], kx_var(p, tv)), -lo);
    Expr *xv = kx_load(p, x, xi);
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, xv, xv)));
    Expr *cond = kx_and(p, kx_bin(p, K_GE, xi[1], kx_index(p, 0)),
                      kx_bin(p, K_LT, xi[1], kx_index(p, c)));
    Stmt *body = ks_seq(ks_set(p, acc, fconst(p, t, 0)),
                        ks_red_loop(p, tv, size, ks_if(p, cond, upd, NULL)));
    Expr *base = kx_bin(p, K_ADD, fconst(p, t, bias),
                        kx_bin(p, K_MUL, fconst(p, t, alpha / (double)size), kx_scalar(p, k, acc)));
    Expr *v = kx_bin(p, K_DIV, kx_load(p, x, oi), kx_bin(p, K_POW, base, fconst(p, t, beta)));
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- ConvTranspose ---- */

/* Geometry of a ConvTranspose: output size and begin padding per spatial dim, from the
 * weights' kernel shape, strides, dilations, pads, output_padding, output_shape and auto_pad.
 * With output_shape (or SAME auto_pad) the total padding may be negative: the output then
 * extends past the last input contribution (those positions get the bias only). */
static bool twindow_init(Graph *g, Node *n, Window *w) {
    const char *where = g ? ir_where(g, n) : n->name;
    const Value *x = n->in[0], *wt = n->in[1];
    const int64_t *st, *dl, *pd, *op, *os, *ks;
    int nsp = x->rank - 2;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd), nop = ir_attr_ints(n, "output_padding", &op);
    int nos = ir_attr_ints(n, "output_shape", &os), nks = ir_attr_ints(n, "kernel_shape", &ks);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp) ||
        (nop && nop != nsp) || (nos && nos != nsp && nos != nsp + 2) || (nks && nks != nsp)) {
        error(where, "strides/dilations/pads/output_padding/output_shape do not match %d "
                     "spatial dims", nsp);
        return false;
    }
    if (!same && strcmp(ap, "VALID") && strcmp(ap, "NOTSET") && *ap) {
        error(where, "unknown auto_pad '%s'", ap);
        return false;
    }
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        w->in[i] = x->dims[2 + i];
        w->k[i] = wt->dims[2 + i];
        w->s[i] = nst ? st[i] : 1;
        w->d[i] = ndl ? dl[i] : 1;
        if ((nks && ks[i] != w->k[i]) || w->s[i] < 1 || w->d[i] < 1) {
            error(where, "kernel_shape must match the weights, strides and dilations be positive");
            return false;
        }
        int64_t opad = nop ? op[i] : 0, ext = (w->k[i] - 1) * w->d[i] + 1;
        int64_t full = w->s[i] * (w->in[i] - 1) + opad + ext;
        if (nos || same) {
            int64_t o = nos ? os[nos - nsp + i] : w->in[i] * w->s[i], total = full - o;
            bool upper = nos ? strcmp(ap, "SAME_UPPER") == 0 : ap[5] == 'U';
            w->out[i] = o;
            w->pb[i] = upper ? floor_div(total, 2) : total - floor_div(total, 2);
        } else {
            bool explicit_pads = npd && strcmp(ap, "VALID");
            int64_t pb = explicit_pads ? pd[i] : 0, pe = explicit_pads ? pd[nsp + i] : 0;
            w->out[i] = full - pb - pe;
            w->pb[i] = pb;
        }
        if (w->out[i] < 1) {
            error(where, "output size of spatial dim %d is %lld", i, (long long)w->out[i]);
            return false;
        }
    }
    return true;
}

void infer_convtranspose(Graph *g, Node *n) {
    Value *x = n->in[0], *wt = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
    int64_t grp = ir_attr_int(n, "group", 1), dims[MAX_RANK];
    Window w;
    if (x->rank < 3 || wt->rank != x->rank) {
        error(ir_where(g, n), "input rank %d and weight rank %d: need equal ranks >= 3", x->rank,
              wt->rank);
        return;
    }
    if (grp < 1 || x->dims[1] != wt->dims[0] || wt->dims[0] % grp) {
        error(ir_where(g, n), "channels do not match: input %lld, weights %lld, %lld groups",
              (long long)x->dims[1], (long long)wt->dims[0], (long long)grp);
        return;
    }
    if (b && (b->rank != 1 || b->dims[0] != wt->dims[1] * grp)) {
        error(ir_where(g, n), "bias must have shape [%lld]", (long long)(wt->dims[1] * grp));
        return;
    }
    if (!twindow_init(g, n, &w)) return;
    dims[0] = x->dims[0];
    dims[1] = wt->dims[1] * grp;
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* Gather form (each output element sums its own contributions, so it is written once):
 *   y[n, m, o...] = bias[m] + sum over c < C/group and taps t of
 *       x[n, g*C/group + c, i] * w[g*C/group + c, m % (M/group), t],   g = m / (M/group)
 *   where i = (o + pb - t*d) / s, for the taps where that division is exact and i is in
 *   [0, in). Each spatial dim's test sits just inside its own tap loop. */
void lower_convtranspose(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *wt = lower_in(L, n, 1), *b = lower_in(L, n, 2);
    Buf *y = lower_out(L, n, 0);
    int64_t grp = ir_attr_int(n, "group", 1), cg = x->dims[1] / grp, mg = wt->dims[1];
    Window w;
    if (!twindow_init(NULL, n, &w)) die("lower_convtranspose %s: node not checked", n->name);

    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, wt, KP_IN);
    if (b) kir_param(p, k, b, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[MAX_RANK], tv[MAX_RANK], cv, acc;
    lower_vars(k, y->rank, ov);
    cv = kir_var(k);
    lower_vars(k, w.nsp, tv);
    acc = kir_scalar(p, k, y->dtype);

    Expr *xi[MAX_RANK], *wi[MAX_RANK], *oi[MAX_RANK], *conds[MAX_RANK];
    Expr *m = kx_var(p, ov[1]), *c = kx_var(p, cv);
    lower_var_idx(p, y->rank, ov, oi);
    Expr *ch = grp == 1 ? c : kx_add(p, kx_mul(p, kx_bin(p, K_DIV, m, kx_index(p, mg)), cg), c);
    xi[0] = oi[0];
    xi[1] = ch;
    wi[0] = ch;
    wi[1] = grp == 1 ? m : kx_bin(p, K_REM, m, kx_index(p, mg));
    for (int i = 0; i < w.nsp; i++) {
        Expr *t = kx_var(p, tv[i]);
        Expr *num = kx_bin(p, K_SUB, kx_addc(p, oi[2 + i], w.pb[i]), kx_mul(p, t, w.d[i]));
        Expr *cond = kx_bin(p, K_GE, num, kx_index(p, 0));
        if (w.s[i] > 1)
            cond = kx_and(p, cond, kx_bin(p, K_EQ, kx_bin(p, K_REM, num, kx_index(p, w.s[i])),
                                        kx_index(p, 0)));
        xi[2 + i] = w.s[i] > 1 ? kx_bin(p, K_DIV, num, kx_index(p, w.s[i])) : num;
        conds[i] = kx_and(p, cond, kx_bin(p, K_LT, xi[2 + i], kx_index(p, w.in[i])));
        wi[2 + i] = t;
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, x, xi), kx_load(p, wt, wi));
    Stmt *taps = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod));
    for (int i = w.nsp - 1; i >= 0; i--)
        taps = ks_red_loop(p, tv[i], w.k[i], ks_if(p, conds[i], taps, NULL));
    Expr *init = b ? kx_load(p, b, &m) : kx_const(p, y->dtype, 0);
    Stmt *body = ks_set(p, acc, init);
    ks_seq(body, ks_red_loop(p, cv, cg, taps));
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- Resize and Upsample ---- */

typedef enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC } ResizeMode;

typedef struct ResizeSpec {
    ResizeMode mode;
    const char *coord, *nearest;
    double scale[MAX_RANK], roi_lo[MAX_RANK], roi_hi[MAX_RANK], cubic_a, extrap;
    int64_t out[MAX_RANK];
    bool exclude_outside;
} ResizeSpec;

/* Reads the node's attributes and its constant scales/sizes/roi. Resize-11+ inputs are
 * (X, roi, scales, sizes); Upsample's are (X, scales) or a `scales` attribute, and it always
 * samples asymmetrically (nearest rounds down). */
static bool resize_spec(Graph *g, Node *n, ResizeSpec *rs) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0], *roi = NULL, *sc = NULL, *sz = NULL;
    int r = x->rank;
    const char *mode = ir_attr_str(n, "mode", "nearest");
    rs->mode = !strcmp(mode, "nearest") ? RZ_NEAREST : !strcmp(mode, "cubic") ? RZ_CUBIC
             : RZ_LINEAR;
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear") &&
        strcmp(mode, "cubic")) {
        error(where, "unknown mode '%s'", mode);
        return false;
    }
    rs->cubic_a = ir_attr_float(n, "cubic_coeff_a", -0.75f);
    rs->extrap = ir_attr_float(n, "extrapolation_value", 0);
    rs->exclude_outside = ir_attr_int(n, "exclude_outside", 0) != 0;
    if (n->op == OP_Upsample) {
        const float *fa = NULL;
        Attr *a = ir_attr(n, "scales");
        rs->coord = "asymmetric";
        rs->nearest = "floor";
        sc = n->nin > 1 ? n->in[1] : NULL;
        if (a && a->type == A_FLOATS) fa = a->floats;
        if ((!sc && (!fa || a->n != r)) || (sc && (!sc->data || ir_numel(sc) != r))) {
            error(where, "need %d constant scales", r);
            return false;
        }
        for (int d = 0; d < r; d++) rs->scale[d] = sc ? ir_const_float(sc, d) : fa[d];
        sc = NULL;
    } else {
        rs->coord = ir_attr_str(n, "coordinate_transformation_mode", "half_pixel");
        rs->nearest = ir_attr_str(n, "nearest_mode", "round_prefer_floor");
        roi = n->nin > 1 ? n->in[1] : NULL;
        sc = n->nin > 2 && n->in[2] && ir_numel(n->in[2]) ? n->in[2] : NULL;
        sz = n->nin > 3 && n->in[3] && ir_numel(n->in[3]) ? n->in[3] : NULL;
        if (!!sc == !!sz || (sc && (!sc->data || ir_numel(sc) != r)) ||
            (sz && (!sz->data || ir_numel(sz) != r))) {
            error(where, "need exactly one of scales and sizes, constant, with %d entries", r);
            return false;
        }
        bool crop = !strcmp(rs->coord, "tf_crop_and_resize");
        if (crop && (!roi || !roi->data || ir_numel(roi) != 2 * r)) {
            error(where, "tf_crop_and_resize needs a constant roi with %d entries", 2 * r);
            return false;
        }
        if (crop)
            for (int d = 0; d < r; d++) {
                rs->roi_lo[d] = ir_const_float(roi, d);
                rs->roi_hi[d] = ir_const_float(roi, r + d);
            }
        for (int d = 0; d < r; d++) {
            if (sc) rs->scale[d] = (double)(float)ir_const_float(sc, d);
            else rs->scale[d] = (double)ir_const_int(sz, d) / (double)x->dims[d];
        }
    }
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn",
                                         "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    bool okc = false, okn = false;
    for (int i = 0; i < COUNTOF(coords); i++) okc = okc || !strcmp(rs->coord, coords[i]);
    for (int i = 0; i < COUNTOF(nearests); i++) okn = okn || !strcmp(rs->nearest, nearests[i]);
    if (!okc || !okn) {
        error(where, "unsupported coordinate_transformation_mode '%s' or nearest_mode '%s'",
              rs->coord, rs->nearest);
        return false;
    }
    for (int d = 0; d < r; d++) {
        rs->out[d] = sz ? ir_const_int(sz, d) : (int64_t)floor(rs->scale[d] * (double)x->dims[d]);
        if (rs->scale[d] <= 0 || rs->out[d] < 1) {
            error(where, "scale of dim %d gives an empty output", d);
            return false;
        }
    }
    if (rs->mode != RZ_NEAREST && !dtype_is_float(x->dtype)) {
        error(where, "%s interpolation needs a float input", mode);
        return false;
    }
    return true;
}

void infer_resize(Graph *g, Node *n) {
    ResizeSpec rs;
    if (!resize_spec(g, n, &rs)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, rs.out);
}

/* Input coordinate of output position o along one dim (the onnx reference's formulas; the
 * "output width" in them is scale * input width, not the rounded output size). Sets *outside
 * for tf_crop_and_resize positions outside the input. */
static double resize_coord(const ResizeSpec *rs, int d, int64_t o, int64_t in, bool *outside) {
    double s = rs->scale[d], ow = s * (double)in, x = (double)o, xo;
    const char *c = rs->coord;
    *outside = false;
    if (!strcmp(c, "align_corners")) xo = ow == 1 ? 0 : x * (double)(in - 1) / (ow - 1);
    else if (!strcmp(c, "asymmetric")) xo = x / s;
    else if (!strcmp(c, "pytorch_half_pixel")) xo = ow == 1 ? -0.5 : (x + 0.5) / s - 0.5;
    else if (!strcmp(c, "tf_half_pixel_for_nn")) xo = (x + 0.5) / s;
    else if (!strcmp(c, "tf_crop_and_resize")) {
        double lo = rs->roi_lo[d], hi = rs->roi_hi[d];
        double n1 = (double)(in - 1);   /* the reference's order of operations, exactly */
        xo = (ow == 1 ? (hi - lo) * n1 / 2 : x * (hi - lo) * n1 / (ow - 1)) + lo * n1;
        *outside = xo < 0 || xo > (double)(in - 1);
    } else xo = (x + 0.5) / s - 0.5;
    return xo;
}

/* Interpolation weights of the taps around a coordinate with fractional part ratio in (0, 1]
 * (the left neighbour is ceil(x) - 1, so an integral x has ratio 1). */
static int resize_coeffs(const ResizeSpec *rs, double xo, double ratio, double *cf) {
    double a = rs->cubic_a;
    switch (rs->mode) {
    case RZ_NEAREST: {
        const char *m = rs->nearest;
        bool hi = xo == floor(xo) ? true : !strcmp(m, "round_prefer_floor") ? ratio > 0.5
                : !strcmp(m, "round_prefer_ceil") ? ratio >= 0.5 : !strcmp(m, "ceil");
        cf[0] = !hi, cf[1] = hi;
        return 2;
    }
    case RZ_LINEAR: cf[0] = 1 - ratio, cf[1] = ratio; return 2;
    case RZ_CUBIC: {
        double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        cf[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
        cf[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
        cf[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        cf[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
        return 4;
    }
    }
    return 0;
}

/* One dim's sampling table: for every output position, `taps` input indices (clamped into
 * the input, as the reference's edge padding does) and their weights. A dim where each
 * position takes a single input with weight 1 (nearest; unscaled dims) gets taps = 1. */
typedef struct ResizeDim {
    int taps;
    int64_t *idx;               /* [out][taps] */
    float *wt;                  /* [out][taps] */
    uint8_t *outside;           /* [out], NULL when no position is outside */
    bool identity;              /* taps == 1 and idx[o] == o */
} ResizeDim;

static void resize_table(Arena *a, const ResizeSpec *rs, int d, int64_t in, ResizeDim *rd) {
    int64_t out = rs->out[d];
    double cf[4];
    int nt = rs->mode == RZ_CUBIC ? 4 : 2;
    rd->idx = ARENA_ARRAY(a, int64_t, out * nt);
    rd->wt = ARENA_ARRAY(a, float, out * nt);
    rd->outside = NULL;
    bool single = true;
    for (int64_t o = 0; o < out; o++) {
        bool outside;
        double xo = resize_coord(rs, d, o, in, &outside), base = ceil(xo) - 1, sum = 0;
        if (outside) {
            if (!rd->outside) rd->outside = ARENA_ARRAY(a, uint8_t, out);
            rd->outside[o] = 1;
        }
        resize_coeffs(rs, xo, xo - base, cf);
        int nz = 0;
        for (int j = 0; j < nt; j++) {
            int64_t ix = (int64_t)base + j - (nt / 2 - 1);
            if (rs->exclude_outside && (ix < 0 || ix >= in)) cf[j] = 0;
            sum += cf[j];
            rd->idx[o * nt + j] = MIN(MAX(ix, 0), in - 1);
            nz += cf[j] != 0;
        }
        for (int j = 0; j < nt; j++) {
            if (rs->exclude_outside && sum != 0) cf[j] /= sum;
            rd->wt[o * nt + j] = (float)cf[j];
            if (nz == 1 && cf[j] != 0 && cf[j] != 1) single = false;
        }
        if (nz != 1) single = false;
    }
    rd->taps = nt;
    rd->identity = false;
    if (!single) return;
    rd->taps = 1;
    rd->identity = out == in;
    for (int64_t o = 0; o < out; o++) {
        int j = 0;
        while (rd->wt[o * nt + j] == 0) j++;
        rd->idx[o] = rd->idx[o * nt + j];
        rd->identity = rd->identity && rd->idx[o] == o;
    }
}

/* y[o...] = sum over the taps of the dims that interpolate of prod_d wt_d[o_d, t_d] *
 *           x[idx_0[o_0, t_0], ...]
 * With no interpolating dim it is a gather (KC_COPY); tf_crop_and_resize positions outside
 * the input get extrapolation_value. */
void lower_resize(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    ResizeSpec rs;
    ResizeDim rd[MAX_RANK];
    int r = x->rank, ov[MAX_RANK], tv[MAX_RANK];
    bool interp = false;
    if (!resize_spec(NULL, n, &rs)) die("lower_resize %s: node not checked", n->name);
    for (int d = 0; d < r; d++) {
        resize_table(p->arena, &rs, d, x->dims[d], &rd[d]);
        interp = interp || rd[d].taps > 1;
    }
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, interp ? KC_CONTRACTION : KC_COPY);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    lower_vars(k, r, ov);
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *w = NULL, *outside = NULL;
    lower_var_idx(p, r, ov, oi);
    for (int d = 0; d < r; d++) {
        ResizeDim *t = &rd[d];
        int64_t td[2] = {y->dims[d], t->taps};
        const char *nm = arena_printf(p->arena, "%s_idx%d", y->name, d);
        if (t->taps > 1) tv[d] = kir_var(k);
        if (t->outside) {
            Buf *ob = const_table(L, arena_printf(p->arena, "%s_out%d", y->name, d), DT_BOOL, 1,
                                  td, t->outside);
            kir_param(p, k, ob, KP_IN);
            Expr *ol = kx_load(p, ob, &oi[d]);
            outside = outside ? kx_bin(p, K_OR, outside, ol) : ol;
        }
        if (t->identity) {
            xi[d] = oi[d];
            continue;
        }
        Buf *ib = const_table(L, nm, DT_INT64, 2, td, t->idx);
        Expr *ti[2] = {oi[d], t->taps > 1 ? kx_var(p, tv[d]) : kx_index(p, 0)};
        kir_param(p, k, ib, KP_IN);
        xi[d] = kx_cast(p, DT_INDEX, kx_load(p, ib, ti));
        if (t->taps == 1) continue;
        Buf *wb = const_table(L, arena_printf(p->arena, "%s_wt%d", y->name, d), DT_FLOAT, 2, td,
                              t->wt);
        kir_param(p, k, wb, KP_IN);
        Expr *wv = kx_load(p, wb, ti);
        if (y->dtype != DT_FLOAT) wv = kx_cast(p, y->dtype, wv);
        w = w ? kx_bin(p, K_MUL, w, wv) : wv;
    }
    Expr *xv = kx_load(p, x, xi);
    Stmt *body;
    if (!interp) {
        if (outside) xv = kx_select(p, outside, fconst(p, y->dtype, rs.extrap), xv);
        k->body = lower_wrap(p, r, y->dims, ov, ks_store(p, y, oi, xv));
        return;
    }
    int acc = kir_scalar(p, k, y->dtype);
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, w, xv)));
    for (int d = r - 1; d >= 0; d--)
        if (rd[d].taps > 1) upd = ks_red_loop(p, tv[d], rd[d].taps, upd);
    body = ks_seq(ks_set(p, acc, fconst(p, y->dtype, 0)), upd);
    Expr *v = kx_scalar(p, k, acc);
    if (outside) v = kx_select(p, outside, fconst(p, y->dtype, rs.extrap), v);
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, r, y->dims, ov, body);
}
