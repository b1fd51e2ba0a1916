/* normalize.c - the normalisation family: BatchNormalization, InstanceNormalization,
 * GroupNormalization, LayerNormalization, LpNormalization, MeanVarianceNormalization,
 * RMSNormalization, LRN, Softmax and LogSoftmax.
 *
 * BatchNormalization in inference form is a per-channel affine map (an elementwise kernel); in
 * training mode it normalises with the batch's statistics like InstanceNormalization over
 * every dim but the channel, and also writes the running statistics.
 * The others need several passes over the normalised dims (max or mean, then sum, then the
 * store), so their kernels are KC_GENERIC: the passes are reduction loops into scalar
 * registers inside the parallel loops over the remaining dims. */
#include <math.h>
#include <string.h>

#include "../lower.h"

static int norm_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* ---- BatchNormalization (inference) ---- */

void infer_batchnorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 2) {
        error(ir_where(g, n), "input must have rank >= 2 (N, C, ...), not %d", x->rank);
        return;
    }
    /* opset 15 lets scale and bias (T1), mean and var (T2) be other float types than x */
    for (int i = 0; i < 5; i++)
        if (!dtype_is_float(n->in[i]->dtype)) {
            error(ir_where(g, n), "input %d '%s' is %s; it must be a float type", i,
                  n->in[i]->name, dtype_name(n->in[i]->dtype));
            return;
        }
    /* which inputs share a type (ONNX's type variables): all five up to opset 13; from 14 x,
     * scale and bias (T), and mean and var (U); from 15 scale and bias (T1), and mean and var
     * (T2) */
    static const int group[3][5] = {{0, 0, 0, 0, 0}, {0, 0, 0, 1, 1}, {0, 1, 1, 2, 2}};
    const int *gr = group[n->opset < 14 ? 0 : n->opset < 15 ? 1 : 2];
    for (int i = 1; i < 5; i++)
        for (int j = 0; j < i; j++)
            if (gr[i] == gr[j] && n->in[i]->dtype != n->in[j]->dtype) {
                error(ir_where(g, n), "input %d '%s' is %s and input %d '%s' %s: opset %d gives them one type",
                      j, n->in[j]->name, dtype_name(n->in[j]->dtype), i, n->in[i]->name,
                      dtype_name(n->in[i]->dtype), n->opset);
                return;
            }
    for (int i = 1; i < 5; i++)
        if (ir_numel(n->in[i]) != x->dims[1] || n->in[i]->rank != 1) {
            error(ir_where(g, n), "input %d must have shape [%lld]", i, (long long)x->dims[1]);
            return;
        }
    bool training = ir_attr_int(n, "training_mode", 0) != 0;
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) {
            if (!training) {
                error(ir_where(g, n), "running statistics are outputs only in training mode");
                return;
            }
            ir_set_shape(n->out[i], n->in[i + 2]->dtype, 1, &x->dims[1]);
        }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

static void lower_bn_training(Lower *L, Node *n, Buf *x, Buf *y);    /* with the normalisations */

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

/* e as dtype t: opset 15 lets BatchNormalization's scale and bias, mean and var be other
 * float types than x. */
static Expr *as(Program *p, DType t, Expr *e) { return e->type == t ? e : kx_cast(p, t, e); }

static Expr *bn_formula(Lower *L, Node *n, Expr **v) {
    Program *p = L->p;
    Expr *eps = kx_const(p, v[0]->type, ir_attr_float(n, "epsilon", 1e-5f));
    Expr *den = kx_un(p, K_SQRT, kx_bin(p, K_ADD, v[4], eps));
    Expr *xn = kx_bin(p, K_DIV, kx_bin(p, K_SUB, v[0], v[3]), den);
    return kx_bin(p, K_ADD, kx_bin(p, K_MUL, xn, v[1]), v[2]);
}

/* (x - mean) / sqrt(var + eps) * scale + bias, from the five operands. Opset 14 and 15 let the
 * statistics, and scale and bias, be other float types than x: the formula then runs in the
 * widest of them (double if one is, else float: 16-bit floats are float values in
 * expressions), and only the result takes x's type, rounded once. */
static Expr *bn_full(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    DType xt = v[0]->type, t = DT_FLOAT;
    for (int i = 0; i < 5; i++)
        if (v[i]->type == DT_DOUBLE) t = DT_DOUBLE;
    bool mixed = false;
    for (int i = 1; i < 5; i++) mixed |= v[i]->type != xt;
    if (mixed) {
        for (int i = 0; i < 5; i++) v[i] = as(p, t, v[i]);
        return as(p, xt, bn_formula(L, n, v));
    }
    return bn_formula(L, n, v);
}

/* With constant statistics (the usual inference case) the whole op is y = x * s[c] + t[c]
 * with s, t computed here once; otherwise the formula is evaluated per element. */
void lower_batchnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    if (ir_attr_int(n, "training_mode", 0)) {
        lower_bn_training(L, n, x, y);
        return;
    }
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

    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, NULL, NULL);
    int rv[MAX_RANK] = {0}, mx = kir_scalar(p, k, t), sm = kir_scalar(p, k, t);
    int fin = kir_scalar(p, k, t);
    Expr *idx[MAX_RANK];
    int oo[MAX_RANK], no = 0;
    int64_t od[MAX_RANK];
    bool blk[MAX_RANK];
    for (int d = 0; d < r; d++) {
        blk[d] = d >= lo && d < hi;
        if (!blk[d]) {
            oo[no] = kir_var(k);
            idx[d] = kx_var(p, oo[no]);
            od[no++] = x->dims[d];
        }
    }

    rule_sel_vars(p, k, r, blk, rv, idx);
    Stmt *body = rule_red_pass(p, k, r, x->dims, blk, rv, mx, kx_const(p, t, -INFINITY), K_MAX,
                               kx_load(p, x, idx));
    rule_sel_vars(p, k, r, blk, rv, idx);
    Expr *e = kx_un(p, K_EXP, kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)));
    ks_seq(body, rule_red_pass(p, k, r, x->dims, blk, rv, sm, kx_const(p, t, 0), K_ADD, e));

    rule_sel_vars(p, k, r, blk, rv, idx);
    Expr *xm = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)), *v;
    if (n->op == OP_LogSoftmax) {
        ks_seq(body, ks_set(p, fin, kx_un(p, K_LOG, kx_scalar(p, k, sm))));
        v = kx_bin(p, K_SUB, xm, kx_scalar(p, k, fin));
    } else {
        ks_seq(body, ks_set(p, fin, kx_un(p, K_RECIP, kx_scalar(p, k, sm))));
        v = kx_bin(p, K_MUL, kx_un(p, K_EXP, xm), kx_scalar(p, k, fin));
    }
    ks_seq(body, rule_wrap_dims(p, r, x->dims, blk, rv, ks_store(p, y, idx, v), false));
    k->body = lower_wrap(p, no, od, oo, body);
}

/* ---- small helpers ---- */

/* ---- normalisations: LayerNormalization, InstanceNormalization, MVN ---- */

/* How a normalisation reads its scale and bias at element index idx of x. */
typedef enum AffineKind { AF_NONE, AF_CHANNEL, AF_TRAILING, AF_GROUP } AffineKind;

typedef struct Norm {
    bool mask[MAX_RANK];        /* the dims the statistics are taken over */
    double eps;
    bool eps_outside;           /* MVN: (x - mean) / (sqrt(var) + eps) */
    bool rms;                   /* RMSNormalization: the mean is taken as 0 */
    int64_t group_size;         /* AF_GROUP: x is viewed [N, G, C/G, ...]; scale/bias are per
                                   channel (index g * C/G + c), or per group with 0 here */
    AffineKind af;
    int axis;                   /* AF_TRAILING: scale/bias broadcast to x.shape[axis:] */
    Buf *scale, *bias;          /* NULL: 1 / 0 */
    Buf *mean_out, *inv_out;    /* LayerNormalization's optional outputs (keepdims shape) */
    /* BatchNormalization in training mode: run_mean[c] = mean_in[c] * momentum + mean *
     * (1 - momentum), the same for the variance (either output may be NULL) */
    Buf *mean_in, *var_in, *run_mean, *run_var;
    double momentum;
} Norm;


static Expr *affine_load(Program *p, const Norm *nm, Buf *b, int rank, Expr **idx, DType t) {
    Expr *bi[MAX_RANK];
    if (nm->af == AF_CHANNEL) return as(p, t, kx_load(p, b, &idx[1]));
    if (nm->af == AF_GROUP) {
        Expr *c = nm->group_size ? kx_add(p, kx_mul(p, kx_clone(p, idx[1]), nm->group_size), kx_clone(p, idx[2]))
                                 : kx_clone(p, idx[1]);
        return as(p, t, kx_load(p, b, &c));
    }
    lower_bcast_idx(p, b, rank - nm->axis, idx + nm->axis, bi);
    return as(p, t, kx_load(p, b, bi));
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
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, nm->scale, nm->bias), y, NULL, NULL);
    if (nm->mean_out) kir_param(p, k, nm->mean_out, KP_OUT);
    if (nm->inv_out) kir_param(p, k, nm->inv_out, KP_OUT);
    if (nm->run_mean) kir_param(p, k, nm->mean_in, KP_IN), kir_param(p, k, nm->run_mean, KP_OUT);
    if (nm->run_var) kir_param(p, k, nm->var_in, KP_IN), kir_param(p, k, nm->run_var, KP_OUT);
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
    Expr *nc = kx_const(p, t, (double)(cnt ? cnt : 1));

    Stmt *body;
    if (nm->rms) {
        body = ks_set(p, mean, kx_const(p, t, 0));
    } else {
        rule_sel_vars(p, k, r, nm->mask, rv, idx);
        body = rule_red_pass(p, k, r, x->dims, nm->mask, rv, sm, kx_const(p, t, 0), K_ADD,
                             kx_load(p, x, idx));
        ks_seq(body, ks_set(p, mean, kx_bin(p, K_DIV, kx_scalar(p, k, sm), nc)));
    }

    rule_sel_vars(p, k, r, nm->mask, rv, idx);
    Expr *dv = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mean));
    ks_seq(body, rule_red_pass(p, k, r, x->dims, nm->mask, rv, sm, kx_const(p, t, 0), K_ADD,
                               kx_bin(p, K_MUL, dv, dv)));
    Expr *var = kx_bin(p, K_DIV, kx_scalar(p, k, sm), nc), *eps = kx_const(p, t, nm->eps);
    Expr *den = nm->eps_outside ? kx_bin(p, K_ADD, kx_un(p, K_SQRT, var), eps)
                                : kx_un(p, K_SQRT, kx_bin(p, K_ADD, var, eps));
    if (nm->run_var) {      /* before var is consumed by den below */
        Expr *c = kx_clone(p, kidx[1]), *c2 = kx_clone(p, kidx[1]);
        Expr *old = kx_bin(p, K_MUL, as(p, t, kx_load(p, nm->var_in, &c)), kx_const(p, t, nm->momentum));
        ks_seq(body, ks_store(p, nm->run_var, &c2, as(p, nm->run_var->dtype, kx_bin(p, K_ADD, old, kx_bin(p, K_MUL, kx_clone(p, var),
                                                                                 kx_const(p, t, 1 - nm->momentum))))));
    }
    if (nm->run_mean) {
        Expr *c = kx_clone(p, kidx[1]), *c2 = kx_clone(p, kidx[1]);
        Expr *old = kx_bin(p, K_MUL, as(p, t, kx_load(p, nm->mean_in, &c)), kx_const(p, t, nm->momentum));
        ks_seq(body, ks_store(p, nm->run_mean, &c2, as(p, nm->run_mean->dtype, kx_bin(p, K_ADD, old, kx_bin(p, K_MUL, kx_scalar(p, k, mean),
                                                                                   kx_const(p, t, 1 - nm->momentum))))));
    }
    ks_seq(body, ks_set(p, inv, kx_un(p, K_RECIP, den)));
    if (nm->mean_out) ks_seq(body, ks_store(p, nm->mean_out, kidx, as(p, nm->mean_out->dtype, kx_scalar(p, k, mean))));
    if (nm->inv_out) ks_seq(body, ks_store(p, nm->inv_out, kidx, as(p, nm->inv_out->dtype, kx_scalar(p, k, inv))));

    rule_sel_vars(p, k, r, nm->mask, rv, idx);
    Expr *v = kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mean));
    v = kx_bin(p, K_MUL, v, kx_scalar(p, k, inv));
    if (nm->scale) v = kx_bin(p, K_MUL, v, affine_load(p, nm, nm->scale, r, idx, t));
    if (nm->bias) v = kx_bin(p, K_ADD, v, affine_load(p, nm, nm->bias, r, idx, t));
    ks_seq(body, rule_wrap_dims(p, r, x->dims, nm->mask, rv, ks_store(p, y, idx, v), false));
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
    int axis, rank = x->rank;
    int64_t dims[MAX_RANK];
    if (!layernorm_axis(g, n, &axis) || !rule_same_type(g, n, 1, 2)) return;
    for (int i = 1; i < 3 && i < n->nin; i++) {
        Value *s = n->in[i];
        if (s && !rule_broadcasts_to(s, rank - axis, x->dims + axis)) {
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
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input must be a float tensor, not %s", dtype_name(x->dtype));
        return;
    }
    if (!rule_same_type(g, n, 1, 2)) return;
    for (int i = 1; i < 3; i++)
        if (n->in[i]->rank != 1 || n->in[i]->dims[0] != x->dims[1]) {
            error(ir_where(g, n), "input %d must have shape [%lld]", i, (long long)x->dims[1]);
            return;
        }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* BatchNormalization with training_mode=1: the statistics of this batch over every dim but
 * the channel (the population variance, as ONNX's reference), and the running statistics. */
static void lower_bn_training(Lower *L, Node *n, Buf *x, Buf *y) {
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_CHANNEL};
    for (int d = 0; d < x->rank; d++) nm.mask[d] = d != 1;
    nm.scale = lower_in(L, n, 1);
    nm.bias = lower_in(L, n, 2);
    nm.momentum = ir_attr_float(n, "momentum", 0.9f);
    nm.mean_in = lower_in(L, n, 3);
    nm.var_in = lower_in(L, n, 4);
    if (n->nout > 1 && n->out[1]) nm.run_mean = lower_out(L, n, 1);
    if (n->nout > 2 && n->out[2]) nm.run_var = lower_out(L, n, 2);
    emit_norm(L, n, x, y, &nm);
}

void lower_instnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_CHANNEL};
    for (int d = 0; d < x->rank; d++) nm.mask[d] = d >= 2;
    nm.scale = lower_in(L, n, 1);
    nm.bias = lower_in(L, n, 2);
    emit_norm(L, n, x, lower_out(L, n, 0), &nm);
}

/* ---- GroupNormalization, RMSNormalization ---- */

/* GroupNormalization's groups: C / num_groups channels each; false after an error (g NULL:
 * no message). */
static bool groupnorm_groups(Graph *g, Node *n, int64_t *groups) {
    const Value *x = n->in[0];
    *groups = ir_attr_int(n, "num_groups", 0);
    if (x->rank < 2 || x->rank + 1 > MAX_RANK) {
        if (g) error(ir_where(g, n), "input must have rank 2 to %d (N, C, ...), not %d", MAX_RANK - 1, x->rank);
        return false;
    }
    if (*groups < 1 || x->dims[1] % *groups != 0) {
        if (g) error(ir_where(g, n), "num_groups %lld does not divide the %lld channels",
                     (long long)*groups, (long long)x->dims[1]);
        return false;
    }
    return true;
}

void infer_groupnorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t groups;
    if (!groupnorm_groups(g, n, &groups)) return;
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input must be a float tensor, not %s", dtype_name(x->dtype));
        return;
    }
    if (!rule_same_type(g, n, 1, 2)) return;
    int64_t want = ir_attr_int(n, "per_group", 0) ? groups : x->dims[1];
    for (int i = 1; i < 3; i++)
        if (n->in[i]->rank != 1 || n->in[i]->dims[0] != want) {
            error(ir_where(g, n), "input %d must have shape [%lld] (one value per %s)", i,
                  (long long)want, want == groups ? "group, opset 18" : "channel, opset 21");
            return;
        }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* x and y are viewed [N, G, C/G, spatial...], the statistics taken over dims 2 on. */
void lower_groupnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int64_t groups, dims[MAX_RANK];
    if (!groupnorm_groups(NULL, n, &groups)) die("lower_groupnorm %s: unchecked", n->name);
    dims[0] = x->dims[0];
    dims[1] = groups;
    dims[2] = x->dims[1] / groups;
    for (int d = 2; d < x->rank; d++) dims[d + 1] = x->dims[d];
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_GROUP,
               .group_size = ir_attr_int(n, "per_group", 0) ? 0 : dims[2]};
    for (int d = 0; d <= x->rank; d++) nm.mask[d] = d >= 2;
    nm.scale = lower_in(L, n, 1);
    nm.bias = lower_in(L, n, 2);
    emit_norm(L, n, kir_view_new(L->p, x, x->name, x->rank + 1, dims),
              kir_view_new(L->p, y, y->name, x->rank + 1, dims), &nm);
}

/* y = x / sqrt(mean(x^2 over dims axis..) + eps) * scale, scale broadcast to x.shape[axis:] */
void infer_rmsnorm(Graph *g, Node *n) {
    Value *x = n->in[0], *s = n->in[1];
    int axis;
    if (!layernorm_axis(g, n, &axis)) return;
    if (!dtype_is_float(x->dtype) || !dtype_is_float(s->dtype)) {
        error(ir_where(g, n), "X and scale must be float tensors, not %s and %s",
              dtype_name(x->dtype), dtype_name(s->dtype));
        return;
    }
    if (!rule_broadcasts_to(s, x->rank - axis, x->dims + axis)) {
        error(ir_where(g, n), "scale does not broadcast to the normalized shape");
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

void lower_rmsnorm(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Norm nm = {.eps = ir_attr_float(n, "epsilon", 1e-5f), .af = AF_TRAILING, .rms = true};
    if (!layernorm_axis(NULL, n, &nm.axis)) die("lower_rmsnorm %s: unchecked axis", n->name);
    for (int d = 0; d < x->rank; d++) nm.mask[d] = d >= nm.axis;
    nm.scale = lower_in(L, n, 1);
    emit_norm(L, n, x, y, &nm);
}

/* ---- LpNormalization ---- */

void infer_lpnorm(Graph *g, Node *n) {
    Value *x = n->in[0];
    int axis;
    int64_t pw = ir_attr_int(n, "p", 2);
    if (!rule_float_input(g, n, 0) || !rule_axis(g, n, ir_attr_int(n, "axis", -1), x->rank, &axis)) return;
    if (pw != 1 && pw != 2) {
        error(ir_where(g, n), "p %lld is neither 1 nor 2", (long long)pw);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* y = x / norm_p(x along axis): for every position of the other dims, the sum of |x| or x^2,
 * then the division (by its square root for p = 2). A zero vector gives NaN, as the ONNX
 * reference. */
void lower_lpnorm(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int axis, r = x->rank, rv[MAX_RANK] = {0}, ov[MAX_RANK], no = 0;
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", -1), r, &axis)) return;
    bool two = ir_attr_int(n, "p", 2) == 2, mask[MAX_RANK];
    int64_t od[MAX_RANK];
    DType t = y->dtype;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, NULL, NULL);
    int sm = kir_scalar(p, k, t), nrm = kir_scalar(p, k, t);
    Expr *idx[MAX_RANK];
    for (int d = 0; d < r; d++) {
        mask[d] = d == axis;
        if (!mask[d]) {
            ov[no] = kir_var(k);
            idx[d] = kx_var(p, ov[no]);
            od[no++] = x->dims[d];
        }
    }
    rule_sel_vars(p, k, r, mask, rv, idx);
    Expr *v = kx_load(p, x, idx);
    Expr *term = two ? kx_bin(p, K_MUL, v, kx_clone(p, v)) : kx_un(p, K_ABS, v);
    Stmt *body = rule_red_pass(p, k, r, x->dims, mask, rv, sm, kx_const(p, t, 0), K_ADD, term);
    Expr *s = kx_scalar(p, k, sm);
    ks_seq(body, ks_set(p, nrm, two ? kx_un(p, K_SQRT, s) : s));
    rule_sel_vars(p, k, r, mask, rv, idx);
    Expr *q = kx_bin(p, K_DIV, kx_load(p, x, idx), kx_scalar(p, k, nrm));
    ks_seq(body, rule_wrap_dims(p, r, x->dims, mask, rv, ks_store(p, y, idx, q), false));
    k->body = lower_wrap(p, no, od, ov, body);
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

/* Softmax, LogSoftmax: floating-point types only (the spec's T) */
void infer_softmax(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input '%s' is %s, %s needs a floating-point type", x->name,
              dtype_name(x->dtype), n->op_type);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

void infer_mvn(Graph *g, Node *n) {
    bool mask[MAX_RANK];
    if (!dtype_is_float(n->in[0]->dtype)) {
        error(ir_where(g, n), "input '%s' is %s, MeanVarianceNormalization needs a "
              "floating-point type", n->in[0]->name, dtype_name(n->in[0]->dtype));
        return;
    }
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
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input must be a float tensor, not %s", dtype_name(x->dtype));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* y[n, c, ...] = x[n, c, ...] / (bias + alpha / size * sum x[n, c', ...]^2)^beta over the
 * channels c' in [c - floor((size-1)/2), c + ceil((size-1)/2)] inside [0, C). The tap loop
 * runs over the taps t (c' = c + t - lo) that fall inside [0, C) for some c, at most 2C - 1
 * of them whatever the size (a size of 2^63 - 1 made a loop that never ended). */
void lower_lrn(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int64_t size = ir_attr_int(n, "size", 1), lo = (size - 1) / 2, c = x->dims[1];
    double alpha = ir_attr_float(n, "alpha", 1e-4f), beta = ir_attr_float(n, "beta", 0.75f);
    double bias = ir_attr_float(n, "bias", 1);
    DType t = y->dtype;
    int ov[MAX_RANK], tv, acc;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x), y, ov, NULL);
    tv = kir_var(k);
    acc = kir_scalar(p, k, t);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    memcpy(xi, oi, sizeof(Expr *) * (size_t)y->rank);
    int64_t t0 = MAX(0, lo - c + 1), t1 = MIN(size, lo + c);
    xi[1] = kx_addc(p, kx_add(p, oi[1], kx_var(p, tv)), t0 - lo);
    Expr *xv = kx_load(p, x, xi);
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, xv, xv)));
    Expr *cond = kx_and(p, kx_bin(p, K_GE, xi[1], kx_index(p, 0)),
                      kx_bin(p, K_LT, xi[1], kx_index(p, c)));
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, t, 0)),
                        ks_red_loop(p, tv, t1 - t0, ks_if(p, cond, upd, NULL)));
    Expr *base = kx_bin(p, K_ADD, kx_const(p, t, bias),
                        kx_bin(p, K_MUL, kx_const(p, t, alpha / (double)size), kx_scalar(p, k, acc)));
    Expr *v = kx_bin(p, K_DIV, kx_load(p, x, oi), kx_bin(p, K_POW, base, kx_const(p, t, beta)));
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}
