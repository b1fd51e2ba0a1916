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

/* Where a scale (and zero point) applies: per tensor (axis -1), per axis (a 1-D scale along
 * x's dim `axis`), or blocked (block > 0, opset 21: the scale has x's rank and
 * ceil(D / block) entries along `axis`, each for `block` consecutive elements of x, the last
 * for what remains). */
typedef struct QLayout {
    int axis;
    int64_t block;
} QLayout;

/* The layout of n's scale, checked against x; false after an error (g NULL: no message). */
static bool quant_layout(Graph *g, Node *n, const Value *x, QLayout *q) {
    Value *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    q->axis = -1;
    q->block = ir_attr_int(n, "block_size", 0);
    if (zp && !ir_same_shape(s, zp)) {
        if (g) error(ir_where(g, n), "zero point '%s' must have the shape of scale '%s'", zp->name, s->name);
        return false;
    }
    if (q->block < 0) {
        if (g) error(ir_where(g, n), "block_size %lld is negative", (long long)q->block);
        return false;
    }
    if (!q->block && (s->rank == 0 || ir_numel(s) == 1)) return true;
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 1), x->rank, &q->axis)) return false;
    int a = q->axis;
    if (!q->block) {
        if (s->rank != 1 || s->dims[0] != x->dims[a]) {
            if (g) error(ir_where(g, n), "scale '%s' (and zero point) must have %lld elements",
                         s->name, (long long)x->dims[a]);
            return false;
        }
        return true;
    }
    bool ok = s->rank == x->rank && x->rank < MAX_RANK;
    for (int d = 0; ok && d < x->rank; d++)
        ok = d == a ? s->dims[d] == rule_ceil_div(x->dims[d], q->block) : s->dims[d] == x->dims[d];
    if (!ok) {
        if (g) error(ir_where(g, n), "blocked scale '%s' %s does not fit input %s with block_size "
                     "%lld on axis %d", s->name, rule_dims_str(g, s->rank, s->dims),
                     rule_dims_str(g, x->rank, x->dims), (long long)q->block, a);
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

/* Blocked: x (and y) viewed with the axis split into [D / block, block], the scale and zero
 * point with [D / block, 1], so that lower_map's broadcasting repeats each over its block. */
static Buf *block_view(Lower *L, Buf *b, const QLayout *q, bool operand) {
    int64_t dims[MAX_RANK];
    if (!b) return NULL;
    for (int d = 0, o = 0; d < b->rank; d++) {
        if (d != q->axis) {
            dims[o++] = b->dims[d];
            continue;
        }
        dims[o++] = operand ? b->dims[d] : b->dims[d] / q->block;
        dims[o++] = operand ? 1 : q->block;
    }
    return kir_view_new(L->p, b, b->name, b->rank + 1, dims);
}

/* Blocked with a shorter last block: one kernel over y reading the scale and zero point at
 * the axis index divided by the block. */
static void quant_blocks(Lower *L, Node *n, const QLayout *q, MapFn build) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *s = lower_in(L, n, 1), *zp = lower_in(L, n, 2), *y = lower_out(L, n, 0);
    int ov[MAX_RANK];
    Expr *oi[MAX_RANK], *si[MAX_RANK], *zi[MAX_RANK], *v[3];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, s, zp), y, ov, oi);
    for (int d = 0; d < y->rank; d++) {
        si[d] = d == q->axis ? kx_bin(p, K_DIV, kx_clone(p, oi[d]), kx_index(p, q->block)) : kx_clone(p, oi[d]);
        zi[d] = kx_clone(p, si[d]);
    }
    v[0] = kx_load(p, x, oi);
    v[1] = kx_load(p, s, si);
    v[2] = zp ? kx_load(p, zp, zi) : NULL;
    k->body = lower_wrap(p, y->rank, y->dims, ov, ks_store(p, y, oi, build(L, n, v, NULL)));
}

/* lower_map over x, scale and zero point in the layout q (the zero point may be absent) */
static void quant_map(Lower *L, Node *n, const QLayout *q, MapFn build) {
    int r = n->in[0]->rank;
    /* int4 weights too: one kernel over y itself (no view of it), which fuse can inline
     * into the MatMul reading y (fuse.c, inline_weights) */
    if (q->block && (n->in[0]->dims[q->axis] % q->block || n->in[0]->nibbles)) {
        quant_blocks(L, n, q, build);
        return;
    }
    Buf *x = lower_in(L, n, 0), *s = lower_in(L, n, 1), *zp = lower_in(L, n, 2), *y = lower_out(L, n, 0);
    Buf *ins[3];
    if (q->block) {
        ins[0] = block_view(L, x, q, false);
        ins[1] = block_view(L, s, q, true);
        ins[2] = block_view(L, zp, q, true);
        y = block_view(L, y, q, false);
    } else {
        ins[0] = x;
        ins[1] = axis_view(L, s, r, q->axis);
        ins[2] = axis_view(L, zp, r, q->axis);
    }
    lower_map(L, n, y, zp ? 3 : 2, ins, build, NULL);
}

/* A float8 (or float4e2m1) quantization's zero point must be absent or zeros (the reference refuses others):
 * x / scale is cast to float8 as it is, no zero added (which would turn a -0 into +0). */
static bool zero_point_zero(Graph *g, Node *n) {
    Value *zp = n->nin > 2 ? n->in[2] : NULL;
    if (!zp) return true;
    bool zero = zp->data != NULL;
    for (int64_t i = 0; zero && i < ir_numel(zp); i++) zero = ir_const_float(zp, i) == 0;
    if (!zero) error(ir_where(g, n), "the zero point '%s' of a float8 quantization must be a constant of zeros", zp->name);
    return zero;
}

/* x float (float16 and bfloat16 from opset 19) or int32, a float scale; y uint8, int8, uint16
 * or int16 (opset 21), the type of the zero point or of output_dtype (opset 21). Computed in float32 whatever the
 * `precision` (opset 23) asks, which is refused unless float32. */
void infer_quantize(Graph *g, Node *n) {
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    QLayout q;
    DType od = (DType)ir_attr_int(n, "output_dtype", 0), t;
    if (dtype_nibbles(od) != DT_UNDEF && (!zp || zp->nibbles)) od = dtype_nibbles(od);  /* quant_bits */
    t = zp ? zp->dtype : od ? od : DT_UINT8;
    if ((!dtype_is_float(x->dtype) && x->dtype != DT_INT32) || !dtype_is_float(s->dtype) ||
        s->dtype == DT_DOUBLE) {
        error(ir_where(g, n), "needs float/float16/bfloat16/int32 x and a float/float16/bfloat16 "
              "scale, not %s and %s", dtype_name(x->dtype), dtype_name(s->dtype));
        return;
    }
    if (od && zp && od != zp->dtype) {
        error(ir_where(g, n), "output_dtype %s is not the zero point's type %s", dtype_name(od),
              dtype_name(zp->dtype));
        return;
    }
    if (!rule_quant_type(t) && t != DT_INT16 && t != DT_UINT16 && (!dtype_is_minifloat(t) || t == DT_FLOAT8E8M0)) {
        error(ir_where(g, n), "quantizing to %s is not supported (uint8, int8, uint16, int16, "
              "int4, uint4, the float8 types and float4e2m1 are)", dtype_name(t));
        return;
    }
    if (dtype_is_minifloat(t) && !zero_point_zero(g, n)) return;
    int64_t prec = ir_attr_int(n, "precision", 0);
    if (prec != 0 && prec != DT_FLOAT) {
        error(ir_where(g, n), "precision %s is not supported (onnxcc divides in float32)",
              dtype_name((DType)prec));
        return;
    }
    if (!quant_layout(g, n, x, &q)) return;
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

/* The bits of y when it is int4/uint4 (opset 21) or int2/uint2 (opset 25), else 0: its zero
 * point is (a constant or graph input of that type: ir.h, Value.nibbles), or output_dtype
 * says so. Saturated to [-8, 7] or [0, 15], [-2, 1] or [0, 3]. */
static int quant_bits(const Node *n) {
    const Value *zp = n->nin > 2 ? n->in[2] : NULL;
    return zp ? ir_pack_bits(zp) : dtype_pack_bits((int)ir_attr_int(n, "output_dtype", 0));
}

static Expr *map_quantize(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = kx_cast(p, DT_FLOAT, v[0]), *s = v[1]->type == DT_FLOAT ? v[1] : kx_cast(p, DT_FLOAT, v[1]);
    DType t = n->out[0]->dtype;     /* 16-bit outputs: opset 21 */
    if (dtype_is_minifloat(t))      /* opset 19: rounded to nearest even, `saturate` (float4e2m1,
                                       opset 23: always saturated) */
        return rule_float8_cast(p, kx_bin(p, K_DIV, x, s), t, ir_attr_int(n, "saturate", 1) != 0 ||
                                t == DT_FLOAT4E2M1);
    double lo = t == DT_INT8 ? -128 : t == DT_INT16 ? -32768 : 0;
    double hi = t == DT_INT8 ? 127 : t == DT_UINT8 ? 255 : t == DT_INT16 ? 32767 : 65535;
    int bits = quant_bits(n);
    if (bits) {
        lo = t == DT_INT8 ? -(1 << (bits - 1)) : 0;
        hi = t == DT_INT8 ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
    }
    return rule_quantize_in(p, kx_bin(p, K_DIV, x, s), n->nin > 2 && n->in[2] ? v[2] : NULL, t, lo, hi);
}

void lower_quantize(Lower *L, Node *n) {
    QLayout q;
    if (!quant_layout(NULL, n, n->in[0], &q)) die("lower_quantize %s: unchecked", n->name);
    quant_map(L, n, &q, map_quantize);
}

/* x uint8, int8, int16, uint16 (opset 21) or int32, a zero point of x's type; y the type of
 * the scale (float, float16, bfloat16), or output_dtype (opset 23). A float8e8m0 scale
 * (opset 25: the MX formats, float4e2m1 or float8 x with a power of two a block) is read as
 * float; y is then output_dtype's. */
void infer_dequantize(Graph *g, Node *n) {
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    QLayout q;
    bool xok = rule_quant_type(x->dtype) || x->dtype == DT_INT32 || x->dtype == DT_INT16 ||
               x->dtype == DT_UINT16 || (dtype_is_minifloat(x->dtype) && x->dtype != DT_FLOAT8E8M0);
    DType t = (DType)ir_attr_int(n, "output_dtype", 0);
    if (!t) t = s->dtype;
    if (!xok || !dtype_is_float(s->dtype) || s->dtype == DT_DOUBLE || (zp && zp->dtype != x->dtype)) {
        error(ir_where(g, n), "needs uint8/int8/uint16/int16/int32 x, a float/float16/bfloat16 "
              "scale and a zero point of x's type, not %s, %s%s%s", dtype_name(x->dtype),
              dtype_name(s->dtype), zp ? " and " : "", zp ? dtype_name(zp->dtype) : "");
        return;
    }
    if (!dtype_is_float(t) || t == DT_DOUBLE || dtype_is_minifloat(t)) {   /* a float8e8m0 scale
                                                                        (opset 25) needs it */
        error(ir_where(g, n), "output_dtype %s is not float, float16 or bfloat16", dtype_name(t));
        return;
    }
    if (dtype_is_minifloat(x->dtype) && !zero_point_zero(g, n)) return;
    if (!quant_layout(g, n, x, &q)) return;
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

/* (x - zp) * scale, the difference taken exactly in int32, the product in float32 */
static Expr *map_dequantize(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *s = v[1]->type == DT_FLOAT ? v[1] : kx_cast(p, DT_FLOAT, v[1]);
    if (dtype_is_minifloat(v[0]->type)) {  /* x * scale (the zero point is 0) */
        Expr *y = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v[0]), s);
        return n->out[0]->dtype == DT_FLOAT ? y : kx_cast(p, n->out[0]->dtype, y);
    }
    Expr *x = kx_cast(p, DT_INT32, v[0]);
    if (n->nin > 2 && n->in[2]) x = kx_bin(p, K_SUB, x, kx_cast(p, DT_INT32, v[2]));
    Expr *y = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, x), s);
    return n->out[0]->dtype == DT_FLOAT ? y : kx_cast(p, n->out[0]->dtype, y);
}

void lower_dequantize(Lower *L, Node *n) {
    QLayout q;
    if (!quant_layout(NULL, n, n->in[0], &q)) die("lower_dequantize %s: unchecked", n->name);
    quant_map(L, n, &q, map_dequantize);
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
