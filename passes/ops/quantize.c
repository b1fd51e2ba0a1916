/* quantize.c - the quantisation family: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear. (The quantised products, MatMulInteger, QLinearMatMul, ConvInteger
 * and QLinearConv, are with their float forms in matmul.c and conv.c.)
 *
 * They compute in float32 (round half to even, then saturate), like the ONNX reference; the
 * per-axis scale and zero point are read through a view broadcasting along the axis. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- QuantizeLinear, DequantizeLinear ---- */

/* The quantisation axis of a per-axis scale (numel > 1), checked against x; -1 per tensor. */
static bool quant_axis(Graph *g, Node *n, const Value *x, int *axis) {
    Value *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    *axis = -1;
    if (s->rank == 0 || ir_numel(s) == 1) {
        if (zp && ir_numel(zp) != 1) {
            if (g) error(ir_where(g, n), "zero point '%s' must be a scalar like the scale", zp->name);
            return false;
        }
        return true;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 1), x->rank, axis)) return false;
    if (s->rank != 1 || s->dims[0] != x->dims[*axis] || (zp && !ir_same_shape(s, zp))) {
        if (g) error(ir_where(g, n), "scale '%s' (and zero point) must have %lld elements",
                     s->name, (long long)x->dims[*axis]);
        return false;
    }
    return true;
}

/* A per-axis operand viewed as [C, 1, ..., 1] so that lower_map broadcasts it along `axis`
 * of a rank-xrank tensor; a one-element one as a scalar. */
static Buf *axis_view(Lower *L, Buf *b, int xrank, int axis) {
    int64_t dims[MAX_RANK] = {0};
    if (!b) return NULL;
    if (axis < 0) return kir_view_new(L->p, b, b->name, 0, dims);
    dims[0] = b->dims[0];
    for (int d = 1; d < xrank - axis; d++) dims[d] = 1;
    return kir_view_new(L->p, b, b->name, xrank - axis, dims);
}

void infer_quantize(Graph *g, Node *n) {
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    int axis;
    DType t = zp ? zp->dtype : DT_UINT8;
    if ((x->dtype != DT_FLOAT && x->dtype != DT_INT32) || s->dtype != DT_FLOAT || !rule_quant_type(t)) {
        error(ir_where(g, n), "needs float/int32 x, float scale and uint8/int8 zero point");
        return;
    }
    if (!quant_axis(g, n, x, &axis)) return;
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

static Expr *map_quantize(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = kx_cast(p, DT_FLOAT, v[0]);
    return rule_quantize(p, kx_bin(p, K_DIV, x, v[1]), n->nin > 2 && n->in[2] ? v[2] : NULL,
                    n->out[0]->dtype);
}

void lower_quantize(Lower *L, Node *n) {
    int axis;
    if (!quant_axis(NULL, n, n->in[0], &axis)) return;
    int r = n->in[0]->rank;
    Buf *ins[3] = {lower_in(L, n, 0), axis_view(L, lower_in(L, n, 1), r, axis),
                   axis_view(L, lower_in(L, n, 2), r, axis)};
    lower_map(L, n, lower_out(L, n, 0), ins[2] ? 3 : 2, ins, map_quantize, NULL);
}

void infer_dequantize(Graph *g, Node *n) {
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    int axis;
    if ((!rule_quant_type(x->dtype) && x->dtype != DT_INT32) || s->dtype != DT_FLOAT ||
        (zp && zp->dtype != x->dtype)) {
        error(ir_where(g, n), "needs uint8/int8/int32 x, float scale and a zero point of x's type");
        return;
    }
    if (!quant_axis(g, n, x, &axis)) return;
    ir_set_shape(n->out[0], DT_FLOAT, x->rank, x->dims);
}

/* (x - zp) * scale, the difference taken exactly in int32 */
static Expr *map_dequantize(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = kx_cast(p, DT_INT32, v[0]);
    if (n->nin > 2 && n->in[2]) x = kx_bin(p, K_SUB, x, kx_cast(p, DT_INT32, v[2]));
    return kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, x), v[1]);
}

void lower_dequantize(Lower *L, Node *n) {
    int axis;
    if (!quant_axis(NULL, n, n->in[0], &axis)) return;
    int r = n->in[0]->rank;
    Buf *ins[3] = {lower_in(L, n, 0), axis_view(L, lower_in(L, n, 1), r, axis),
                   axis_view(L, lower_in(L, n, 2), r, axis)};
    lower_map(L, n, lower_out(L, n, 0), ins[2] ? 3 : 2, ins, map_dequantize, NULL);
}

/* ---- DynamicQuantizeLinear ---- */

void infer_dynamic_quantize(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->dtype != DT_FLOAT) {
        error(ir_where(g, n), "input '%s' is %s, not float32", x->name, dtype_name(x->dtype));
        return;
    }
    ir_set_shape(n->out[0], DT_UINT8, x->rank, x->dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_FLOAT, 0, NULL);
    if (n->nout > 2 && n->out[2]) ir_set_shape(n->out[2], DT_UINT8, 0, NULL);
}

static Expr *map_dynamic_quantize(Lower *L, Node *n, Expr **v, void *ctx) {
    return rule_quantize(L->p, kx_bin(L->p, K_DIV, v[0], v[1]), v[2], DT_UINT8);
}

/* Two kernels: a scan for min(0, min x) and max(0, max x) that stores the scale and zero
 * point (temporaries when the graph does not use them), then an elementwise quantisation. */
void lower_dynamic_quantize(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0);
    int64_t none[1] = {1};
    Buf *sc = n->nout > 1 && n->out[1] ? lower_out(L, n, 1)
                                       : kir_buf_new(p, "dq_scale", DT_FLOAT, 0, none, B_TEMP);
    Buf *zp = n->nout > 2 && n->out[2] ? lower_out(L, n, 2)
                                       : kir_buf_new(p, "dq_zero_point", DT_UINT8, 0, none, B_TEMP);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), sc, NULL, NULL);
    kir_param(p, k, zp, KP_OUT);
    int lo = kir_scalar(p, k, DT_FLOAT), hi = kir_scalar(p, k, DT_FLOAT), s = kir_scalar(p, k, DT_FLOAT);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    lower_vars(k, x->rank, vars);
    lower_var_idx(p, x->rank, vars, idx);
    Expr *v = kx_load(p, x, idx);
    Stmt *scan = ks_set(p, lo, kx_bin(p, K_MIN, kx_scalar(p, k, lo), v));
    ks_seq(scan, ks_set(p, hi, kx_bin(p, K_MAX, kx_scalar(p, k, hi), kx_clone(p, v))));
    Stmt *body = ks_set(p, lo, kx_const(p, DT_FLOAT, 0));
    ks_seq(body, ks_set(p, hi, kx_const(p, DT_FLOAT, 0)));
    ks_seq(body, lower_wrap(p, x->rank, x->dims, vars, scan));
    Expr *range = kx_bin(p, K_SUB, kx_scalar(p, k, hi), kx_scalar(p, k, lo));
    ks_seq(body, ks_set(p, s, kx_bin(p, K_DIV, range, kx_const(p, DT_FLOAT, 255))));
    ks_seq(body, ks_store(p, sc, idx, kx_scalar(p, k, s)));
    Expr *z = kx_bin(p, K_DIV, kx_un(p, K_NEG, kx_scalar(p, k, lo)), kx_scalar(p, k, s));
    ks_seq(body, ks_store(p, zp, idx, rule_quantize(p, z, NULL, DT_UINT8)));
    k->body = body;

    Buf *ins[3] = {x, sc, zp};
    lower_map(L, n, lower_out(L, n, 0), 3, ins, map_dynamic_quantize, NULL);
}
