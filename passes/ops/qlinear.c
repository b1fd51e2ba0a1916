/* qlinear.c - the integer forms fuse_qdq gives the QDQ groups that are not products:
 * QLinearAdd, QLinearMul, QLinearGlobalAveragePool and QLinearLookup (a 256-entry table).
 * They are internal ops (OPF_INTERNAL): only fuse_qdq makes them, with constant scalar scales
 * and zero points, so the ratios of the scales are folded here at compile time.
 *
 * How each rounds, against the float reference Q(op(DQ(a), DQ(b))) (docs/int8.md):
 *   QLinearAdd   y = sat(round((a - za) * (sa / sy) + (b - zb) * (sb / sy)) + zy)
 *   QLinearMul   y = sat(round((a - za) * (b - zb) * (sa * sb / sy)) + zy)
 *   QLinearClip  y = clamp(round((x - zx) * (sx / sy)) + zy, lo, hi): Relu and Clip, whose
 *                bounds commute with the rounding (round(max(v, 0) / sy) = max(round(v / sy), 0)),
 *                so they are integer bounds lo, hi (attributes) on the requantisation
 *   QLinearGlobalAveragePool
 *                y = sat(round((sum x - HW * zx) * (sx / (HW * sy))) + zy), the sum exact in int32
 * in float32 with the ratios rounded once to float32: a multiply where the reference divides,
 * so a result within one quantum of it (it differs only when the reference lands within an
 * ulp or two of a rounding tie).
 *   QLinearLookup y = table[x]: the table holds the reference's own result for each of the 256
 *                inputs (fuse_qdq computes it with the reference's float32 steps), so it is
 *                exact.
 * The ratios of Add, Mul and Clip are a small constant table of the kernel (ratio_table), not
 * immediates: `fuse` merges these ops into the conv before them, and two such kernels that
 * differ only in their scales (a model's repeated residual blocks) then compile to the same
 * code, which the backend's mergefunc keeps once (the KWS model's two pointwise convs with
 * their residual Add: -1.1 KB of code on Cortex-M4). The loads are loop-invariant. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* QLinearAdd / QLinearMul: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp; fuse_qdq makes
 * them only for A and B of C's shape. */
void infer_qlinear_binary(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[3];
    if (!ir_same_shape(a, b) || a->dtype != b->dtype) {
        error(ir_where(g, n), "internal op with operands of different shapes or types");
        return;
    }
    ir_set_shape(n->out[0], n->in[7]->dtype, a->rank, a->dims);
}

static double cf(const Node *n, int i) { return ir_const_float(n->in[i], 0); }

/* The op's ratios, rounded once to float32, as a constant table NAME_ratios[n]. */
static Buf *ratio_table(Program *p, const Node *n, int nr, const float *r) {
    int64_t dim = nr;
    Buf *t = kir_buf_new(p, arena_printf(p->arena, "%s_ratios", n->out[0]->name), DT_FLOAT, 1, &dim, B_CONST);
    float *d = ARENA_ARRAY(p->arena, float, nr);
    memcpy(d, r, (size_t)nr * sizeof *d);
    t->data = d;
    return t;
}

/* t[i] */
static Expr *ratio(Program *p, Buf *t, int i) {
    Expr *ix = kx_const(p, DT_INDEX, i);
    return kx_load(p, t, &ix);
}

typedef struct BinRatios {
    Buf *t;                         /* Add: sa / sy and sb / sy; Mul: sa * sb / sy */
    double za, zb, zy;
} BinRatios;

static Expr *map_qlinear_binary(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    const BinRatios *r = ctx;
    Expr *a = kx_bin(p, K_SUB, kx_cast(p, DT_INT32, v[0]), kx_const(p, DT_INT32, r->za));
    Expr *b = kx_bin(p, K_SUB, kx_cast(p, DT_INT32, v[1]), kx_const(p, DT_INT32, r->zb));
    Expr *y;
    if (n->op == OP_QLinearAdd)
        y = kx_bin(p, K_ADD, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, a), ratio(p, r->t, 0)),
                   kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, b), ratio(p, r->t, 1)));
    else  /* |a b| < 2^16: exact in int32 and in float32 */
        y = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, kx_bin(p, K_MUL, a, b)), ratio(p, r->t, 0));
    return rule_quantize(p, y, kx_const(p, DT_FLOAT, r->zy), n->out[0]->dtype);
}

void lower_qlinear_binary(Lower *L, Node *n) {
    BinRatios r;
    double sa = cf(n, 1), sb = cf(n, 4), sy = cf(n, 6);
    float ra[2] = {n->op == OP_QLinearAdd ? (float)(sa / sy) : (float)(sa * sb / sy), (float)(sb / sy)};
    r.t = ratio_table(L->p, n, n->op == OP_QLinearAdd ? 2 : 1, ra);
    r.za = cf(n, 2);
    r.zb = cf(n, 5);
    r.zy = cf(n, 7);
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 3)};
    Kernel *k = lower_map(L, n, lower_out(L, n, 0), 2, ins, map_qlinear_binary, &r);
    kir_param(L->p, k, r.t, KP_IN);
}

/* QLinearClip: X, x_scale, x_zp, y_scale, y_zp; attributes lo, hi (in y's integers). */
void infer_qlinear_clip(Graph *g, Node *n) {
    Value *x = n->in[0];
    (void)g;
    ir_set_shape(n->out[0], n->in[4]->dtype, x->rank, x->dims);
}

static Expr *map_qlinear_clip(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = kx_bin(p, K_SUB, kx_cast(p, DT_INT32, v[0]), kx_const(p, DT_INT32, cf(n, 2)));
    double lo = (double)ir_attr_int(n, "lo", 0), hi = (double)ir_attr_int(n, "hi", 255);
    if (!ctx) {     /* the same scale on both sides: x - zx + zy, clamped, all in integers */
        Expr *l = kx_const(p, DT_INT32, lo), *h = kx_const(p, DT_INT32, hi);
        x = kx_bin(p, K_ADD, x, kx_const(p, DT_INT32, cf(n, 4)));
        x = kx_select(p, kx_bin(p, K_LT, x, l), kx_clone(p, l), kx_clone(p, x));
        x = kx_select(p, kx_bin(p, K_GT, x, h), kx_clone(p, h), kx_clone(p, x));
        return kx_cast(p, n->out[0]->dtype, x);
    }
    Expr *y = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, x), ratio(p, ctx, 0));
    return rule_quantize_in(p, y, kx_const(p, DT_FLOAT, cf(n, 4)), n->out[0]->dtype, lo, hi);
}

void lower_qlinear_clip(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0);
    float r = (float)(cf(n, 1) / cf(n, 3));
    Buf *t = r != 1 ? ratio_table(L->p, n, 1, &r) : NULL;
    Kernel *k = lower_map(L, n, lower_out(L, n, 0), 1, &x, map_qlinear_clip, t);
    if (t) kir_param(L->p, k, t, KP_IN);
}

/* QLinearGlobalAveragePool: X [N, C, spatial...], x_scale, x_zp, y_scale, y_zp. */
void infer_qlinear_global_pool(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t dims[MAX_RANK];
    if (x->rank < 3) {
        error(ir_where(g, n), "internal op with an input of rank %d", x->rank);
        return;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = d < 2 ? x->dims[d] : 1;
    ir_set_shape(n->out[0], n->in[4]->dtype, x->rank, dims);
}

/* y[n, c, 1...] = requantise(sum over the spatial dims of x[n, c, ...] in int32): a contraction
 * of the pools' form, its sum exact, one multiply and rounding per channel. */
void lower_qlinear_global_pool(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int nsp = x->rank - 2, ov[MAX_RANK], tv[MAX_RANK];
    int64_t hw = 1;
    for (int i = 0; i < nsp; i++) hw *= x->dims[2 + i];
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x), y, ov, NULL);
    lower_vars(k, nsp, tv);
    int acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    xi[0] = kx_clone(p, oi[0]);
    xi[1] = kx_clone(p, oi[1]);
    for (int i = 0; i < nsp; i++) xi[2 + i] = kx_var(p, tv[i]);
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_cast(p, DT_INT32, kx_load(p, x, xi))));
    for (int i = nsp - 1; i >= 0; i--) upd = ks_red_loop(p, tv[i], x->dims[2 + i], upd);
    Stmt *body = ks_set(p, acc, kx_const(p, DT_INT32, 0));
    ks_seq(body, upd);
    Expr *s = kx_bin(p, K_SUB, kx_scalar(p, k, acc), kx_const(p, DT_INT32, (double)hw * cf(n, 2)));
    float mult = (float)(cf(n, 1) / ((double)hw * cf(n, 3)));
    Expr *v = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, s), kx_const(p, DT_FLOAT, mult));
    ks_seq(body, ks_store(p, y, oi, rule_quantize(p, v, kx_const(p, DT_FLOAT, cf(n, 4)), y->dtype)));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* QLinearLookup: X (8-bit), table [256] of the output type, indexed by x's bits as unsigned
 * (x + 128 for int8). */
void infer_qlinear_lookup(Graph *g, Node *n) {
    Value *x = n->in[0], *t = n->in[1];
    if (!rule_quant_type(x->dtype) || !t->data || ir_numel(t) != 256) {
        error(ir_where(g, n), "internal op without an 8-bit input and a 256-entry table");
        return;
    }
    ir_set_shape(n->out[0], t->dtype, x->rank, x->dims);
}

static Expr *map_lookup(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Buf *t = ctx;
    Expr *i = kx_cast(p, DT_INDEX, v[0]);
    if (n->in[0]->dtype == DT_INT8) i = kx_addc(p, i, 128);
    return kx_load(p, t, &i);
}

void lower_qlinear_lookup(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *t = lower_in(L, n, 1);
    Kernel *k = lower_map(L, n, lower_out(L, n, 0), 1, &x, map_lookup, t);
    kir_param(L->p, k, t, KP_IN);
}
