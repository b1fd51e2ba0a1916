/* fuse_qdq.c - integer inference for QDQ models: the groups DequantizeLinear -> op ->
 * QuantizeLinear that quantizers write around each op become integer ops, so that int8
 * weights stay int8 in the object and activations stay 8-bit in the arena.
 *
 *   Conv(DQ(x), DQ(w), DQ(b)) -> Q        QLinearConv(x, w, b), int32 accumulation
 *   Gemm(DQ(a), DQ(B), DQ(c)) -> Q        a 1x1 QLinearConv over a [M, K, 1, 1] view of a
 *   MatMul(DQ(a), DQ(B)) -> Q               (B constant, as [N, K, 1, 1]; per-column scales
 *                                           are the conv's per-channel ones)
 *   QLinearMatMul(a, B, ...)               the same, for a QOperator model's dense layer (B
 *                                           constant int8 with zero points 0)
 *   MaxPool / Flatten / Reshape / Concat   the op itself on the 8-bit data, when the output is
 *     (DQ(x)...) -> Q                       quantized with its input's scale and zero point
 *                                           (they only select or move values)
 *   Add / Mul (DQ(a), DQ(b)) -> Q          QLinearAdd / QLinearMul (a, b of the output's shape)
 *   GlobalAveragePool(DQ(x)) -> Q          QLinearGlobalAveragePool, the sum in int32 (and
 *     an AveragePool whose window is its    whole input)
 *   Relu / Clip(DQ(x)) -> Q                QLinearClip: the bounds become the requantisation's
 *   Sigmoid / Tanh / LeakyRelu /           QLinearLookup, a 256-entry table of the group's
 *     HardSigmoid (DQ(x)) -> Q               result for each input byte
 * (the last four are internal ops, passes/ops/qlinear.c, which says how each rounds)
 * Conditions: the weights and the bias are constants behind their DequantizeLinear, per
 * tensor or per output channel; the bias is int32 with scale x_scale * w_scale and zero
 * point 0 (what every quantizer writes); every other scale and zero point is a constant
 * scalar; the op's float result feeds nothing but the QuantizeLinear. The requantisation is
 * QLinearConv's: float scaling of the int32 sum (docs/int8.md says why).
 * Everything else keeps the float op between its DequantizeLinear and QuantizeLinear: an
 * elementwise op (an Add that broadcasts, ...) is then fused with them into one kernel that
 * reads and writes 8-bit data and computes in registers; other ops (AveragePool, Softmax,
 * ...) get a float temporary. -v names each of those.
 *
 * Runs after infer_shapes (which leaves DequantizeLinear of constants unfolded for this pass)
 * and before fold_constants, which folds the DequantizeLinears left over into float weights. */
#include <math.h>
#include <string.h>

#include "pipeline.h"

/* The operands of a DequantizeLinear or QuantizeLinear. */
typedef struct Quant {
    Node *node;
    Value *x, *scale, *zp;          /* zp NULL: absent (0 of uint8) */
    int axis;                       /* -1: per tensor */
} Quant;

static bool quant_of(Node *n, Op op, Quant *q) {
    if (!n || n->dead || n->op != op) return false;
    q->node = n;
    q->x = n->in[0];
    q->scale = n->in[1];
    q->zp = n->nin > 2 ? n->in[2] : NULL;
    q->axis = -1;
    if (!q->scale->data || (q->zp && !q->zp->data)) return false;
    /* a quantization to int4/uint4 saturates to 4 bits, which the integer forms do not */
    if (op == OP_QuantizeLinear && ((q->zp && q->zp->nibbles) ||
                                    dtype_nibbles((int)ir_attr_int(n, "output_dtype", 0)) != DT_UNDEF))
        return false;
    /* the forms of opset 13: float32 scale and data, 8-bit quantized values (int32 for a
     * DequantizeLinear's bias), the zero point's type or uint8, not blocked (the newer forms
     * stay as they are) */
    DType qt = op == OP_QuantizeLinear ? n->out[0]->dtype : q->x->dtype;
    if (q->scale->dtype != DT_FLOAT || ir_attr_int(n, "block_size", 0) ||
        (op == OP_QuantizeLinear ? q->x : n->out[0])->dtype != DT_FLOAT ||
        (q->zp ? q->zp->dtype != qt : op == OP_QuantizeLinear && qt != DT_UINT8) ||
        (qt != DT_INT8 && qt != DT_UINT8 && !(op == OP_DequantizeLinear && qt == DT_INT32)))
        return false;
    if (ir_numel(q->scale) == 1) return !q->zp || ir_numel(q->zp) == 1;
    int64_t a = ir_attr_int(n, "axis", 1), r = q->x->rank;
    q->axis = (int)(a < 0 ? a + r : a);
    return true;
}

static double zp_value(const Quant *q, int64_t i) { return q->zp ? ir_const_float(q->zp, i) : 0; }

/* Pass state: the single consumer of each value (NULL when it has none or several). */
typedef struct Fuser {
    Graph *g;
    Node **use;
    int nvalues;                    /* values made by the pass have no entry in use */
} Fuser;

static bool is_graph_output(const Graph *g, const Value *v) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

/* The QuantizeLinear that is the only consumer of v, with scalar parameters. */
static bool quantized_by(Fuser *f, Value *v, Quant *q) {
    if (v->id >= f->nvalues || v->nuses != 1 || is_graph_output(f->g, v)) return false;
    return quant_of(f->use[v->id], OP_QuantizeLinear, q) && q->axis < 0;
}

/* An activation: DQ of a tensor with scalar parameters. */
static bool activation(Value *v, Quant *q) {
    return v && quant_of(v->producer, OP_DequantizeLinear, q) && q->axis < 0 && !q->x->data;
}

/* Same scale and zero point (and type): a select or move needs no requantisation. */
static bool same_params(const Quant *a, const Quant *b) {
    DType ta = a->zp ? a->zp->dtype : DT_UINT8, tb = b->zp ? b->zp->dtype : DT_UINT8;
    return ta == tb && ir_const_float(a->scale, 0) == ir_const_float(b->scale, 0) &&
           zp_value(a, 0) == zp_value(b, 0);
}

/* A zero point as a value: the given one, or a uint8 0 when absent. */
static Value *zp_or_zero(Graph *g, const Quant *q, int64_t n) {
    if (q->zp) return q->zp;
    return ir_const_new(g, arena_printf(g->arena, "%s_zero_point", q->x->name), DT_UINT8, n > 1, &n, NULL);
}

/* Constant weights DQ(w) with per-tensor or axis-`axis` parameters. */
static bool weights(Value *v, int axis, Quant *q) {
    if (!v || !quant_of(v->producer, OP_DequantizeLinear, q) || !q->x->data) return false;
    if (q->x->dtype != DT_INT8 && q->x->dtype != DT_UINT8) return false;
    return q->axis < 0 || q->axis == axis;
}

/* The int32 data of bias DQ(b) if its scale is x_scale * w_scale per channel and its zero
 * point 0; NULL otherwise. */
static Value *int_bias(Value *v, const Quant *x, const Quant *w, int64_t m) {
    Quant b;
    if (!v || !quant_of(v->producer, OP_DequantizeLinear, &b) || !b.x->data || b.x->dtype != DT_INT32 ||
        ir_numel(b.x) != m)
        return NULL;
    double sx = ir_const_float(x->scale, 0);
    for (int64_t c = 0; c < m; c++) {
        double want = sx * ir_const_float(w->scale, w->axis < 0 ? 0 : c);
        double got = ir_const_float(b.scale, b.axis < 0 ? 0 : c);
        if (fabs(got - want) > 1e-6 * fabs(want) || zp_value(&b, b.axis < 0 ? 0 : c) != 0) return NULL;
    }
    return b.x;
}

/* n becomes QLinearConv(x, w, bias) writing y's QuantizeLinear output; out: its output
 * value (the QuantizeLinear's, or a new one when the caller reshapes it). */
static void make_qlinear_conv(Fuser *f, Node *n, const Quant *x, Value *xq, Value *wq, const Quant *w,
                              Value *bias, const Quant *y, Value *out) {
    Graph *g = f->g;
    int64_t m = wq->dims[0];
    Value **in = ARENA_ARRAY(g->arena, Value *, 9);
    in[0] = xq;
    in[1] = x->scale;
    in[2] = zp_or_zero(g, x, 1);
    in[3] = wq;
    in[4] = w->scale;
    in[5] = w->zp ? w->zp : ir_const_new(g, arena_printf(g->arena, "%s_zero_point", wq->name), wq->dtype, 0, &m, NULL);
    in[6] = y->scale;
    in[7] = zp_or_zero(g, y, 1);
    in[8] = bias;
    n->op = OP_QLinearConv;
    n->op_type = "QLinearConv";
    n->in = in;
    n->nin = bias ? 9 : 8;
    n->out[0] = out;
    out->producer = n;
    y->node->dead = true;
}

static void fuse_conv(Fuser *f, Node *n) {
    Quant x, w, y;
    Value *b = n->nin > 2 ? n->in[2] : NULL, *bias = NULL;
    if (!activation(n->in[0], &x) || !weights(n->in[1], 0, &w) || !quantized_by(f, n->out[0], &y)) return;
    if (b && !(bias = int_bias(b, &x, &w, n->in[1]->dims[0]))) return;
    make_qlinear_conv(f, n, &x, x.x, w.x, &w, bias, &y, y.node->out[0]);
    progress("fuse_qdq: %s: QLinearConv", n->name);
}

static Value *reshaped(Graph *g, Node *before, Value *v, int rank, const int64_t *dims, const char *suffix) {
    Node *r = ir_node_insert_before(g, before, OP_Reshape, arena_printf(g->arena, "%s_%s", before->name, suffix), 2, 1);
    int64_t rk = rank;
    Value *shape = ir_const_new(g, arena_printf(g->arena, "%s_%s_shape", before->name, suffix), DT_INT64, 1, &rk, dims);
    r->in[0] = v;
    r->in[1] = shape;
    r->out[0] = ir_value_new(g, arena_printf(g->arena, "%s_%s", v->name, suffix));
    ir_set_shape(r->out[0], v->dtype, rank, dims);
    r->out[0]->producer = r;
    return r->out[0];
}

/* Gemm A [M, K] x B (constant, [K, N] or [N, K] with transB) + C, alpha = beta = 1; MatMul
 * of a rank-2 A by a constant [K, N]. The weights become [N, K, 1, 1] (B's per-column
 * parameters are then per output channel), A is viewed as [M, K, 1, 1] and the result as
 * [M, N]: a 1x1 convolution computes exactly the product. */
static void fuse_gemm(Fuser *f, Node *n) {
    Graph *g = f->g;
    Quant a, w, y;
    bool gemm = n->op == OP_Gemm, tb = gemm && ir_attr_int(n, "transB", 0);
    Value *av = n->in[0], *bv = n->in[1], *c = gemm && n->nin > 2 ? n->in[2] : NULL, *bias = NULL;
    if (gemm && (ir_attr_int(n, "transA", 0) || ir_attr_float(n, "alpha", 1) != 1 || ir_attr_float(n, "beta", 1) != 1))
        return;
    if (av->rank != 2 || bv->rank != 2 || !activation(av, &a) || !weights(bv, tb ? 0 : 1, &w) ||
        !quantized_by(f, n->out[0], &y))
        return;
    int64_t mm = av->dims[0], k = av->dims[1], nn = tb ? bv->dims[0] : bv->dims[1];
    if (c && (c->rank != 1 || !(bias = int_bias(c, &a, &w, nn)))) return;
    const uint8_t *src = w.x->data;
    int64_t wd[4] = {nn, k, 1, 1};
    Value *wq = ir_const_new(g, arena_printf(g->arena, "%s_nk", w.x->name), w.x->dtype, 4, wd, NULL);
    uint8_t *dst = wq->data;
    for (int64_t i = 0; i < nn; i++)
        for (int64_t j = 0; j < k; j++) dst[i * k + j] = tb ? src[i * k + j] : src[j * nn + i];
    int64_t xd[4] = {mm, k, 1, 1}, yd[4] = {mm, nn, 1, 1};
    Value *x4 = reshaped(g, n, a.x, 4, xd, "x4");
    Value *y4 = ir_value_new(g, arena_printf(g->arena, "%s_y4", n->name));
    ir_set_shape(y4, y.node->out[0]->dtype, 4, yd);
    Node *q = y.node;
    Value *yq = q->out[0];
    make_qlinear_conv(f, n, &a, x4, wq, &w, bias, &y, y4);
    ir_attr_remove(n, "transA");
    ir_attr_remove(n, "transB");
    ir_attr_remove(n, "alpha");
    ir_attr_remove(n, "beta");
    /* the QuantizeLinear becomes the Reshape back to [M, N] */
    int64_t two = 2, od[2] = {mm, nn};
    q->dead = false;
    q->op = OP_Reshape;
    q->op_type = "Reshape";
    q->nin = 2;
    q->in[0] = y4;
    q->in[1] = ir_const_new(g, arena_printf(g->arena, "%s_shape", yq->name), DT_INT64, 1, &two, od);
    q->nattrs = 0;
    progress("fuse_qdq: %s: %s as a 1x1 QLinearConv", n->name, gemm ? "Gemm" : "MatMul");
}

/* QLinearMatMul of a rank-2 A by a constant int8 B [K, N] whose zero points are 0 (a
 * QOperator model's dense layer, as onnxruntime's quantizer writes it): the QDQ Gemm's 1x1
 * QLinearConv over [M, K, 1, 1] (B as [N, K, 1, 1], its per-column scales per output
 * channel), then a Reshape to [M, N] (n itself). Both requantise acc * (sa * sb / sy) in the
 * same float32 steps, so the bits are the same; the conv gets the dot forms (VNNI, pmaddwd)
 * where the plain product was a vpmulld per 8 terms (lenet_qop's last layer, 0.4 us of 6.8 on
 * x86-64-v3). */
static void fuse_qlinear_matmul(Fuser *f, Node *n) {
    Graph *g = f->g;
    Value *av = n->in[0], *bv = n->in[3], *bs = n->in[4], *bz = n->in[5];
    if (av->rank != 2 || bv->rank != 2 || !bv->data || bv->dtype != DT_INT8 || (bz && !bz->data)) return;
    int64_t mm = av->dims[0], k = av->dims[1], nn = bv->dims[1];
    if (ir_numel(bs) != 1 && ir_numel(bs) != nn) return;
    for (int64_t i = 0; bz && i < ir_numel(bz); i++)
        if (ir_const_float(bz, i) != 0) return;
    static const int scalars[] = {1, 2, 6, 7};
    for (int i = 0; i < 4; i++)
        if (!n->in[scalars[i]] || !n->in[scalars[i]]->data || ir_numel(n->in[scalars[i]]) != 1) return;
    if (!bs->data || n->in[1]->dtype != DT_FLOAT || bs->dtype != DT_FLOAT || n->in[6]->dtype != DT_FLOAT) return;
    const int8_t *src = bv->data;
    int64_t wd[4] = {nn, k, 1, 1}, xd[4] = {mm, k, 1, 1}, yd[4] = {mm, nn, 1, 1}, two = 2, od[2] = {mm, nn};
    Value *wq = ir_const_new(g, arena_printf(g->arena, "%s_nk", bv->name), DT_INT8, 4, wd, NULL);
    int8_t *dst = wq->data;
    for (int64_t i = 0; i < nn; i++)
        for (int64_t j = 0; j < k; j++) dst[i * k + j] = src[j * nn + i];
    Value *x4 = reshaped(g, n, av, 4, xd, "x4");
    Node *c = ir_node_insert_before(g, n, OP_QLinearConv, arena_printf(g->arena, "%s_conv", n->name), 8, 1);
    c->op_type = "QLinearConv";
    c->in[0] = x4;
    c->in[1] = n->in[1];
    c->in[2] = n->in[2];
    c->in[3] = wq;
    c->in[4] = bs;
    c->in[5] = ir_const_new(g, arena_printf(g->arena, "%s_zero_point", wq->name), DT_INT8, 0, &nn, NULL);
    c->in[6] = n->in[6];
    c->in[7] = n->in[7];
    c->out[0] = ir_value_new(g, arena_printf(g->arena, "%s_y4", n->name));
    ir_set_shape(c->out[0], n->out[0]->dtype, 4, yd);
    c->out[0]->producer = c;
    n->op = OP_Reshape;
    n->op_type = "Reshape";
    n->nin = 2;
    n->in[0] = c->out[0];
    n->in[1] = ir_const_new(g, arena_printf(g->arena, "%s_shape", n->out[0]->name), DT_INT64, 1, &two, od);
    n->nattrs = 0;
    (void)f;
    progress("fuse_qdq: %s: QLinearMatMul as a 1x1 QLinearConv", n->name);
}

/* Ops that only select or move values run on the 8-bit data when input and output share
 * their parameters. */
static void fuse_move(Fuser *f, Node *n) {
    Quant x, y, xi;
    int ndata = n->op == OP_Concat ? n->nin : 1;
    if (!activation(n->in[0], &x) || !quantized_by(f, n->out[0], &y) || !same_params(&x, &y)) return;
    for (int i = 1; i < ndata; i++)
        if (!activation(n->in[i], &xi) || !same_params(&x, &xi)) return;
    for (int i = 0; i < ndata; i++) n->in[i] = n->in[i]->producer->in[0];
    Value *yq = y.node->out[0];
    n->out[0] = yq;
    yq->producer = n;
    y.node->dead = true;
    progress("fuse_qdq: %s: %s on 8-bit data", n->name, n->op_type);
}

/* Add and Mul of two activations of the output's shape: QLinearAdd / QLinearMul
 * (passes/ops/qlinear.c), the scale ratios folded. */
static void fuse_binary(Fuser *f, Node *n) {
    Quant a, b, y;
    Graph *g = f->g;
    if (!activation(n->in[0], &a) || !activation(n->in[1], &b) || !quantized_by(f, n->out[0], &y)) return;
    if (!ir_same_shape(a.x, b.x) || !ir_same_shape(a.x, n->out[0]) || a.x->dtype != b.x->dtype) return;
    Value **in = ARENA_ARRAY(g->arena, Value *, 8);
    in[0] = a.x, in[1] = a.scale, in[2] = zp_or_zero(g, &a, 1);
    in[3] = b.x, in[4] = b.scale, in[5] = zp_or_zero(g, &b, 1);
    in[6] = y.scale, in[7] = zp_or_zero(g, &y, 1);
    bool add = n->op == OP_Add;
    n->op = add ? OP_QLinearAdd : OP_QLinearMul;
    n->op_type = add ? "QLinearAdd" : "QLinearMul";
    n->in = in;
    n->nin = 8;
    n->out[0] = y.node->out[0];
    n->out[0]->producer = n;
    y.node->dead = true;
    progress("fuse_qdq: %s: %s", n->name, n->op_type);
}

/* GlobalAveragePool of an activation: QLinearGlobalAveragePool, the sum in int32. */
static void fuse_global_pool(Fuser *f, Node *n) {
    Quant x, y;
    Graph *g = f->g;
    if (!activation(n->in[0], &x) || !quantized_by(f, n->out[0], &y) || x.x->rank < 3) return;
    int64_t hw = 1;
    for (int d = 2; d < x.x->rank; d++) hw *= x.x->dims[d];
    if (hw > (1 << 22)) return;     /* the int32 sum of 8-bit values would overflow */
    Value **in = ARENA_ARRAY(g->arena, Value *, 5);
    in[0] = x.x, in[1] = x.scale, in[2] = zp_or_zero(g, &x, 1);
    in[3] = y.scale, in[4] = zp_or_zero(g, &y, 1);
    n->op = OP_QLinearGlobalAveragePool;
    n->op_type = "QLinearGlobalAveragePool";
    n->in = in;
    n->nin = 5;
    n->out[0] = y.node->out[0];
    n->out[0]->producer = n;
    y.node->dead = true;
    progress("fuse_qdq: %s: QLinearGlobalAveragePool", n->name);
}

/* An AveragePool whose window is its whole input (kernel_shape the spatial dims, no
 * padding, no dilation, one output position): GlobalAveragePool, whatever its strides,
 * ceil_mode and count_include_pad (the window holds no padding). A keyword spotter's pool
 * (DS-CNN: 25x5 over 25x5) then sums its 8-bit input instead of a float copy of it. */
static bool global_window(const Node *n) {
    const Value *x = n->in[0];
    const int64_t *k, *v;
    int nsp = x->rank - 2;
    if (nsp < 1 || ir_attr_ints(n, "kernel_shape", &k) != nsp) return false;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return false;
    for (int d = 0; d < nsp; d++)
        if (k[d] != x->dims[2 + d] || n->out[0]->dims[2 + d] != 1) return false;
    int np = ir_attr_ints(n, "pads", &v);
    for (int i = 0; i < np; i++)
        if (v[i]) return false;
    int nd = ir_attr_ints(n, "dilations", &v);
    for (int i = 0; i < nd; i++)
        if (v[i] != 1) return false;
    return true;
}

/* The float function of a one-input op that a table can replace; false for other ops. */
static bool unary_fn(const Node *n, float v, float *out) {
    switch (n->op) {
    case OP_Relu: *out = v > 0 ? v : 0; return true;
    case OP_Clip: {
        float lo = n->nin > 1 && n->in[1] ? (float)ir_const_float(n->in[1], 0) : -INFINITY;
        float hi = n->nin > 2 && n->in[2] ? (float)ir_const_float(n->in[2], 0) : INFINITY;
        *out = v < lo ? lo : v > hi ? hi : v;
        return true;
    }
    case OP_LeakyRelu: *out = v >= 0 ? v : v * ir_attr_float(n, "alpha", 0.01f); return true;
    case OP_Sigmoid: *out = 1.0f / (1.0f + expf(-v)); return true;
    case OP_Tanh: *out = tanhf(v); return true;
    case OP_HardSigmoid: {
        float t = ir_attr_float(n, "alpha", 0.2f) * v + ir_attr_float(n, "beta", 0.5f);
        *out = t < 0 ? 0 : t > 1 ? 1 : t;
        return true;
    }
    default: return false;
    }
}

/* Relu or Clip (constant bounds) of an activation: QLinearClip, its bounds as integer bounds
 * of the requantisation (rounding is monotonic, so it commutes with them). */
static bool fuse_clip(Fuser *f, Node *n) {
    Quant x, y;
    Graph *g = f->g;
    if (n->op != OP_Relu && n->op != OP_Clip) return false;
    if (!activation(n->in[0], &x) || !quantized_by(f, n->out[0], &y)) return false;
    double sy = ir_const_float(y.scale, 0), zy = zp_value(&y, 0);
    DType yt = y.node->out[0]->dtype;
    double lo = yt == DT_INT8 ? -128 : 0, hi = yt == DT_INT8 ? 127 : 255, blo = 0, bhi = INFINITY;
    if (n->op == OP_Clip) {
        for (int i = 1; i < n->nin; i++)
            if (n->in[i] && (!n->in[i]->data || ir_numel(n->in[i]) != 1)) return false;
        blo = n->nin > 1 && n->in[1] ? ir_const_float(n->in[1], 0) : -INFINITY;
        bhi = n->nin > 2 && n->in[2] ? ir_const_float(n->in[2], 0) : INFINITY;
    }
    /* the bounds quantized as the reference quantizes a value (float32 division) */
    if (blo > -INFINITY) lo = fmax(lo, nearbyintf((float)blo / (float)sy) + zy);
    if (bhi < INFINITY) hi = fmin(hi, nearbyintf((float)bhi / (float)sy) + zy);
    if (lo > hi) return false;
    const char *was = n->op_type;
    Value **in = ARENA_ARRAY(g->arena, Value *, 5);
    in[0] = x.x, in[1] = x.scale, in[2] = zp_or_zero(g, &x, 1);
    in[3] = y.scale, in[4] = zp_or_zero(g, &y, 1);
    n->op = OP_QLinearClip;
    n->op_type = "QLinearClip";
    n->in = in;
    n->nin = 5;
    n->nattrs = 0;
    ir_attr_set_int(g, n, "lo", (int64_t)lo);
    ir_attr_set_int(g, n, "hi", (int64_t)hi);
    n->out[0] = y.node->out[0];
    n->out[0]->producer = n;
    y.node->dead = true;
    progress("fuse_qdq: %s: %s as QLinearClip (bounds %g..%g)", n->name, was, lo, hi);
    return true;
}

/* A one-input elementwise op on an activation: QLinearLookup, a table of the reference's
 * result Q(op(DQ(q))) for each of the 256 inputs, computed with its float32 steps (exact for
 * Relu and Clip; Sigmoid and Tanh through libm, within an ulp of any other float32 one). */
static void fuse_unary(Fuser *f, Node *n) {
    Quant x, y;
    Graph *g = f->g;
    float probe;
    if (fuse_clip(f, n)) return;
    for (int i = 1; i < n->nin; i++)
        if (n->in[i] && (!n->in[i]->data || ir_numel(n->in[i]) != 1)) return;
    if (!unary_fn(n, 0, &probe) || !activation(n->in[0], &x) || !quantized_by(f, n->out[0], &y)) return;
    DType xt = x.x->dtype, yt = y.node->out[0]->dtype;
    float sx = (float)ir_const_float(x.scale, 0), sy = (float)ir_const_float(y.scale, 0);
    float zx = (float)zp_value(&x, 0), zy = (float)zp_value(&y, 0);
    float lo = yt == DT_INT8 ? -128 : 0, hi = yt == DT_INT8 ? 127 : 255;
    int64_t len = 256;
    Value *tab = ir_const_new(g, arena_printf(g->arena, "%s_table", n->name), yt, 1, &len, NULL);
    uint8_t *d = tab->data;
    for (int i = 0; i < 256; i++) {
        float q = xt == DT_INT8 ? (float)(i - 128) : (float)i, v;
        unary_fn(n, (q - zx) * sx, &v);
        float r = nearbyintf(v / sy) + zy;
        r = r < lo ? lo : r > hi ? hi : r;
        d[i] = yt == DT_INT8 ? (uint8_t)(int8_t)r : (uint8_t)r;
    }
    const char *was = n->op_type;
    Value **in = ARENA_ARRAY(g->arena, Value *, 2);
    in[0] = x.x;
    in[1] = tab;
    n->op = OP_QLinearLookup;
    n->op_type = "QLinearLookup";
    n->in = in;
    n->nin = 2;
    n->nattrs = 0;
    n->out[0] = y.node->out[0];
    n->out[0]->producer = n;
    y.node->dead = true;
    progress("fuse_qdq: %s: %s as a 256-entry table", n->name, was);
}

/* -v: the float ops left between a DequantizeLinear and a QuantizeLinear. */
static void report_float(Fuser *f, Node *n) {
    Quant q;
    bool from_dq = false;
    for (int i = 0; i < n->nin; i++) from_dq |= n->in[i] && quant_of(n->in[i]->producer, OP_DequantizeLinear, &q) && !q.x->data;
    if (from_dq && n->op != OP_QuantizeLinear && n->op != OP_DequantizeLinear)
        progress("fuse_qdq: %s (%s) stays float between its DequantizeLinear and QuantizeLinear", n->name, n->op_type);
    (void)f;
}

void fuse_qdq(Graph *g) {
    Fuser f = {g, ARENA_ARRAY(g->arena, Node *, g->nvalues + 1), g->nvalues};
    ir_count_uses(g);
    for (int i = 0; i < g->nnodes; i++)
        for (int j = 0; j < g->nodes[i]->nin; j++)
            if (!g->nodes[i]->dead && g->nodes[i]->in[j]) f.use[g->nodes[i]->in[j]->id] = g->nodes[i];
    /* (a Gemm's inserted Reshape lands before it and is not visited; the node itself is
     * visited again one index on, as a QLinearConv that matches nothing) */
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        switch (n->op) {
        case OP_Conv: fuse_conv(&f, n); break;
        case OP_Gemm: case OP_MatMul: fuse_gemm(&f, n); break;
        case OP_QLinearMatMul: fuse_qlinear_matmul(&f, n); break;
        case OP_MaxPool: if (n->nout == 1 || !n->out[1]) fuse_move(&f, n); break;
        case OP_Flatten: case OP_Reshape: case OP_Concat: fuse_move(&f, n); break;
        case OP_Add: case OP_Mul: fuse_binary(&f, n); break;
        case OP_GlobalAveragePool: fuse_global_pool(&f, n); break;
        case OP_AveragePool:
            if (global_window(n)) {
                fuse_global_pool(&f, n);
                if (n->op == OP_QLinearGlobalAveragePool) n->nattrs = 0;
            }
            break;
        case OP_Relu: case OP_Clip: case OP_LeakyRelu: case OP_Sigmoid: case OP_Tanh:
        case OP_HardSigmoid: fuse_unary(&f, n); break;
        default: break;
        }
    }
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead && verbose_level) report_float(&f, g->nodes[i]);
    ir_dce(g);
    ir_compact(g);
}
