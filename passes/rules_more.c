/* rules_more.c - shape and lowering rules of further data and elementwise ops: the scans
 * (ArgMax/ArgMin, Hardmax, CumSum), the index-pattern ops (Trilu, EyeLike, Range), the data
 * movers (GatherElements, Tile, Split, DepthToSpace, SpaceToDepth), Size, Einsum (one
 * sum-of-products loop nest, any equation numpy accepts), and the elementwise CastLike, Mod,
 * ThresholdedRelu and Shrink.
 *
 * They follow rules_data.c and rules_ew.c. Operands that decide a shape (Tile's repeats,
 * Split's sizes, Range's bounds) must be compile-time constants. Operands that ONNX allows at
 * run time and that do not change any shape (CumSum's axis, Trilu's k) are loaded by the
 * kernel instead: CumSum then holds one loop nest per possible axis behind an `if`. The data
 * movers are KC_COPY kernels iterating over the output, so every output element is stored
 * once; run-time indices are wrapped and clamped so that no load leaves its buffer. The scans
 * keep their running value in scalar registers, one output row at a time. */
#include <string.h>

#include "lower.h"

/* A one-element integer operand (CumSum's axis, Trilu's k), constant or not. */
static bool int_scalar(Graph *g, Node *n, int i, const char *what) {
    Value *v = n->in[i];
    if (dtype_is_float(v->dtype) || v->dtype == DT_BOOL || v->rank > 1 || ir_numel(v) != 1) {
        error(ir_where(g, n), "%s '%s' must be a single integer", what, v->name);
        return false;
    }
    return true;
}

/* The DT_INDEX value of a one-element integer operand: folded when constant, else loaded
 * (and the buffer made a parameter of k). */
static Expr *index_operand(Lower *L, Node *n, Kernel *k, int i) {
    Program *p = L->p;
    Value *v = n->in[i];
    if (v->data) return kx_index(p, ir_const_int(v, 0));
    Buf *b = lower_in(L, n, i);
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_cast(p, DT_INDEX, kx_load(p, b, zero));
}

/* An output-sized kernel: vars[] and idx[] are the plain loop index over out. */
static Kernel *out_kernel(Lower *L, Node *n, Buf *out, KernelClass c, int *vars, Expr **idx) {
    Kernel *k = kir_kernel_new(L->p, lower_kname(L, n), n->op_type, c);
    lower_vars(k, out->rank, vars);
    lower_var_idx(L->p, out->rank, vars, idx);
    return k;
}

/* ---- elementwise: CastLike, ThresholdedRelu, Shrink, Mod ---- */

void infer_castlike(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    if (!dtype_supported(n->in[1]->dtype)) {
        error(ir_where(g, n), "cast to unsupported type %s", dtype_name(n->in[1]->dtype));
        return;
    }
    ir_set_shape(n->out[0], n->in[1]->dtype, x->rank, x->dims);
}

static Expr *map_more_unary(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = v[0];
    DType t = x->type;
    switch (n->op) {
    case OP_CastLike: return kx_cast(p, n->out[0]->dtype, x);
    case OP_ThresholdedRelu: {
        Expr *alpha = kx_const(p, t, ir_attr_float(n, "alpha", 1.0f));
        return kx_select(p, kx_bin(p, K_GT, x, alpha), x, kx_const(p, t, 0));
    }
    case OP_Shrink: {
        double lambd = ir_attr_float(n, "lambd", 0.5f), bias = ir_attr_float(n, "bias", 0);
        Expr *below = kx_bin(p, K_ADD, x, kx_const(p, t, bias));
        Expr *above = kx_bin(p, K_SUB, x, kx_const(p, t, bias));
        Expr *e = kx_select(p, kx_bin(p, K_GT, x, kx_const(p, t, lambd)), above, kx_const(p, t, 0));
        return kx_select(p, kx_bin(p, K_LT, x, kx_const(p, t, -lambd)), below, e);
    }
    default: die("lower_more_unary: %s", n->op_type);
    }
}

void lower_more_unary(Lower *L, Node *n) {
    Buf *in = lower_in(L, n, 0);
    lower_map(L, n, lower_out(L, n, 0), 1, &in, map_more_unary, NULL);
}

void infer_mod(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *a = n->in[0], *b = n->in[1];
    int rank;
    int64_t dims[MAX_RANK];
    if (a->dtype != b->dtype) {
        error(ir_where(g, n), "inputs are %s and %s", dtype_name(a->dtype), dtype_name(b->dtype));
        return;
    }
    if (dtype_is_float(a->dtype) && !ir_attr_int(n, "fmod", 0)) {
        error(ir_where(g, n), "fmod=0 on %s inputs (the spec requires fmod=1)", dtype_name(a->dtype));
        return;
    }
    if (a->dtype == DT_BOOL || !ir_broadcast(a->rank, a->dims, b->rank, b->dims, &rank, dims)) {
        error(ir_where(g, n), "inputs '%s' and '%s' do not broadcast", a->name, b->name);
        return;
    }
    ir_set_shape(n->out[0], a->dtype, rank, dims);
}

/* fmod=1: C's remainder (dividend's sign); fmod=0: Python's, which takes the divisor's sign.
 * A zero integer divisor is replaced by 1 (ONNX leaves the result undefined; the generated
 * code must not trap). */
static Expr *map_mod(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *a = v[0], *b = v[1];
    DType t = a->type;
    if (dtype_is_float(t)) return kx_bin(p, K_REM, a, b);
    Expr *zero = kx_const(p, t, 0);
    b = kx_select(p, kx_bin(p, K_EQ, b, zero), kx_const(p, t, 1), b);
    Expr *r = kx_bin(p, K_REM, a, b);
    if (ir_attr_int(n, "fmod", 0) || dtype_is_unsigned(t)) return r;
    Expr *signs_differ = kx_bin(p, K_XOR, kx_bin(p, K_LT, r, zero), kx_bin(p, K_LT, b, zero));
    Expr *fix = kx_bin(p, K_AND, kx_bin(p, K_NE, r, zero), signs_differ);
    return kx_select(p, fix, kx_bin(p, K_ADD, r, b), r);
}

void lower_mod(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_mod, NULL);
}

/* ---- Size and Range: shapes and constants ---- */

/* Size depends on the shape only: its result is a constant, like Shape's. */
void infer_size(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    int64_t *data = ARENA_NEW(g->arena, int64_t);
    *data = ir_numel(n->in[0]);
    ir_set_shape(n->out[0], DT_INT64, 0, NULL);
    n->out[0]->data = data;
}

/* The element count of Range is its shape, so start, limit and delta must be constants. */
void infer_range(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    DType t = n->in[0]->dtype;
    for (int i = 0; i < 3; i++) {
        Value *v = n->in[i];
        if (!v->data || ir_numel(v) != 1 || v->dtype != t) {
            error(ir_where(g, n), "'%s' must be a compile-time constant scalar of type %s "
                  "(a run-time Range is unsupported)", v->name, dtype_name(t));
            return;
        }
    }
    double start, limit, delta;
    if (dtype_is_float(t)) {
        start = ir_const_float(n->in[0], 0), limit = ir_const_float(n->in[1], 0);
        delta = ir_const_float(n->in[2], 0);
    } else {
        start = (double)ir_const_int(n->in[0], 0), limit = (double)ir_const_int(n->in[1], 0);
        delta = (double)ir_const_int(n->in[2], 0);
    }
    if (delta == 0) {
        error(ir_where(g, n), "delta is 0");
        return;
    }
    double q = (limit - start) / delta;
    int64_t count = q > 0 ? (int64_t)q + ((double)(int64_t)q < q) : 0;
    ir_set_shape(n->out[0], t, 1, &count);
}

/* out[i] = start + i * delta */
void lower_range(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0), *start = lower_in(L, n, 0), *delta = lower_in(L, n, 2);
    int vars[1];
    Expr *idx[1], *zero[MAX_RANK];
    Kernel *k = out_kernel(L, n, out, KC_GENERIC, vars, idx);
    kir_param(p, k, start, KP_IN);
    kir_param(p, k, delta, KP_IN);
    kir_param(p, k, out, KP_OUT);
    for (int d = 0; d < MAX_RANK; d++) zero[d] = kx_index(p, 0);
    Expr *step = kx_bin(p, K_MUL, kx_cast(p, out->dtype, idx[0]), kx_load(p, delta, zero));
    Expr *v = kx_bin(p, K_ADD, kx_load(p, start, zero), step);
    k->body = lower_wrap(p, 1, out->dims, vars, ks_store(p, out, idx, v));
}

/* ---- Trilu and EyeLike: values chosen by the position ---- */

void infer_trilu(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    if (x->rank < 2) {
        error(ir_where(g, n), "input '%s' has rank %d; Trilu needs at least 2", x->name, x->rank);
        return;
    }
    if (n->nin > 1 && n->in[1] && !int_scalar(g, n, 1, "k")) return;
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* out = x where column - row >= k (upper) or <= k (lower), else 0. The loop variables of the
 * last two dims take part in the expression, which fusion substitutes like any other. */
void lower_trilu(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int vars[MAX_RANK], r = out->rank;
    Expr *idx[MAX_RANK];
    Kernel *k = out_kernel(L, n, out, KC_ELEMENTWISE, vars, idx);
    kir_param(p, k, x, KP_IN);
    Expr *kk = n->nin > 1 && n->in[1] ? index_operand(L, n, k, 1) : kx_index(p, 0);
    kir_param(p, k, out, KP_OUT);
    Expr *diag = kx_bin(p, K_SUB, idx[r - 1], idx[r - 2]);
    Expr *keep = kx_bin(p, ir_attr_int(n, "upper", 1) ? K_GE : K_LE, diag, kk);
    Expr *v = kx_select(p, keep, kx_load(p, x, idx), kx_const(p, out->dtype, 0));
    k->body = lower_wrap(p, r, out->dims, vars, ks_store(p, out, idx, v));
}

void infer_eyelike(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    DType t = (DType)ir_attr_int(n, "dtype", x->dtype);
    if (x->rank != 2) {
        error(ir_where(g, n), "input '%s' has rank %d; EyeLike needs 2", x->name, x->rank);
        return;
    }
    if (!dtype_supported(t)) {
        error(ir_where(g, n), "unsupported dtype %s", dtype_name(t));
        return;
    }
    ir_set_shape(n->out[0], t, 2, x->dims);
}

/* out[i, j] = (j - i == k); the input's data is not read. */
void lower_eyelike(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0);
    int vars[2];
    Expr *idx[2];
    Kernel *k = out_kernel(L, n, out, KC_ELEMENTWISE, vars, idx);
    kir_param(p, k, out, KP_OUT);
    Expr *diag = kx_bin(p, K_SUB, idx[1], idx[0]);
    Expr *on = kx_bin(p, K_EQ, diag, kx_index(p, ir_attr_int(n, "k", 0)));
    Expr *v = kx_select(p, on, kx_const(p, out->dtype, 1), kx_const(p, out->dtype, 0));
    k->body = lower_wrap(p, 2, out->dims, vars, ks_store(p, out, idx, v));
}

/* ---- GatherElements ---- */

void infer_gather_elements(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1];
    int axis;
    if (x->rank == 0 || ind->rank != x->rank) {
        error(ir_where(g, n), "data '%s' (rank %d) and indices '%s' (rank %d) need the same "
              "rank >= 1", x->name, x->rank, ind->name, ind->rank);
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (ind->dtype != DT_INT64 && ind->dtype != DT_INT32) {
        error(ir_where(g, n), "indices '%s' are %s, not int32/int64", ind->name,
              dtype_name(ind->dtype));
        return;
    }
    for (int d = 0; d < x->rank; d++)
        if (d != axis && ind->dims[d] > x->dims[d]) {
            error(ir_where(g, n), "indices dim %d (%lld) exceeds data's (%lld)", d,
                  (long long)ind->dims[d], (long long)x->dims[d]);
            return;
        }
    ir_set_shape(n->out[0], x->dtype, ind->rank, ind->dims);
}

/* out[i...] = x[i... with i[axis] = indices[i...]]; a negative index counts from the end, and
 * the result is clamped into the axis so that a bad index cannot read outside x. */
void lower_gather_elements(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int axis, vars[MAX_RANK];
    Expr *idx[MAX_RANK], *xi[MAX_RANK];
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    Kernel *k = out_kernel(L, n, out, KC_COPY, vars, idx);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int64_t dim = x->dims[axis];
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, idx));
    i = kx_select(p, kx_bin(p, K_LT, i, kx_index(p, 0)), kx_addc(p, i, dim), i);
    i = kx_bin(p, K_MIN, kx_bin(p, K_MAX, i, kx_index(p, 0)), kx_index(p, dim - 1));
    for (int d = 0; d < x->rank; d++) xi[d] = d == axis ? i : idx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- Tile ---- */

void infer_tile(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    Value *rep = rule_const_ints(g, n, 1, "repeats", MAX_RANK);
    if (!rep) return;
    if (ir_numel(rep) != x->rank) {
        error(ir_where(g, n), "%lld repeats for rank %d", (long long)ir_numel(rep), x->rank);
        return;
    }
    int64_t dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        int64_t r = ir_const_int(rep, d);
        if (r < 0) {
            error(ir_where(g, n), "negative repeat %lld", (long long)r);
            return;
        }
        dims[d] = x->dims[d] * r;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* out[o...] = x[o % dims...] (no remainder where the dim is not repeated). */
void lower_tile(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = out_kernel(L, n, out, KC_COPY, vars, idx);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, out, KP_OUT);
    for (int d = 0; d < x->rank; d++)
        xi[d] = out->dims[d] == x->dims[d] ? idx[d] : kx_bin(p, K_REM, idx[d], kx_index(p, x->dims[d]));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- Split ---- */

/* The sizes of the parts along the axis: the `split` attribute (opset < 13) or constant input,
 * else num_outputs (opset 18: the last part may be smaller) or the output count (even parts). */
static bool split_sizes(Graph *g, Node *n, int *axis, int64_t *sizes) {
    Value *x = n->in[0];
    const int64_t *attr;
    int na = ir_attr_ints(n, "split", &attr);
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, axis)) return false;
    int64_t dim = x->dims[*axis], sum = 0;
    if (attr || (n->nin > 1 && n->in[1])) {
        Value *s = attr ? NULL : rule_const_ints(g, n, 1, "split", n->nout);
        if (!attr && !s) return false;
        int count = attr ? na : (int)ir_numel(s);
        if (count != n->nout) {
            if (g) error(ir_where(g, n), "%d split sizes for %d outputs", count, n->nout);
            return false;
        }
        for (int i = 0; i < count; i++) sum += sizes[i] = attr ? attr[i] : ir_const_int(s, i);
    } else {
        int64_t parts = ir_attr_int(n, "num_outputs", n->nout);
        int64_t chunk = parts > 0 ? (dim + parts - 1) / parts : 0;
        if (parts != n->nout || (!ir_attr(n, "num_outputs") && dim % parts)) {
            if (g) error(ir_where(g, n), "cannot split size %lld into %d equal parts",
                         (long long)dim, n->nout);
            return false;
        }
        for (int i = 0; i < n->nout; i++) sum += sizes[i] = MAX(0, MIN(chunk, dim - chunk * i));
    }
    for (int i = 0; i < n->nout; i++)
        if (sizes[i] < 0) sum = -1;
    if (sum != dim) {
        if (g) error(ir_where(g, n), "split sizes do not add up to the axis size %lld", (long long)dim);
        return false;
    }
    return true;
}

void infer_split(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int axis;
    int64_t *sizes = ARENA_ARRAY(g->arena, int64_t, n->nout + 1);
    if (!split_sizes(g, n, &axis, sizes)) return;
    for (int i = 0; i < n->nout; i++) {
        if (!n->out[i]) continue;
        int64_t dims[MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        ir_set_shape(n->out[i], x->dtype, x->rank, dims);
    }
}

/* One copy kernel per part: out_i[o...] = x[o... shifted by the offset along the axis]. */
void lower_split(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0);
    int axis;
    int64_t *sizes = ARENA_ARRAY(p->arena, int64_t, n->nout + 1), off = 0;
    if (!split_sizes(NULL, n, &axis, sizes)) die("lower_split %s: not checked by infer_split", n->name);
    for (int i = 0; i < n->nout; off += sizes[i++]) {
        if (!n->out[i] || n->out[i]->data) continue;
        Buf *out = lower_out(L, n, i);
        int vars[MAX_RANK];
        Expr *idx[MAX_RANK], *xi[MAX_RANK];
        Kernel *k = out_kernel(L, n, out, KC_COPY, vars, idx);
        kir_param(p, k, x, KP_IN);
        kir_param(p, k, out, KP_OUT);
        for (int d = 0; d < x->rank; d++) xi[d] = d == axis ? kx_addc(p, idx[d], off) : idx[d];
        k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
    }
}

/* ---- DepthToSpace and SpaceToDepth ---- */

static bool block_shape(Graph *g, Node *n, int64_t *b) {
    Value *x = n->in[0];
    *b = ir_attr_int(n, "blocksize", 0);
    if (x->rank != 4 || *b <= 0) {
        error(ir_where(g, n), "needs a rank-4 input and a positive blocksize");
        return false;
    }
    const char *mode = ir_attr_str(n, "mode", "DCR");
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) {
        error(ir_where(g, n), "mode '%s' is not DCR or CRD", mode);
        return false;
    }
    return true;
}

void infer_depth_to_space(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int64_t b;
    if (!block_shape(g, n, &b)) return;
    if (x->dims[1] % (b * b)) {
        error(ir_where(g, n), "channels %lld not divisible by blocksize^2", (long long)x->dims[1]);
        return;
    }
    int64_t dims[4] = {x->dims[0], x->dims[1] / (b * b), x->dims[2] * b, x->dims[3] * b};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* out[n, c, y, x] = in[n, ch, y / b, x / b] with the block offset (y % b, x % b) in the channel:
 * ch = (y%b * b + x%b) * C' + c (DCR) or c * b*b + y%b * b + x%b (CRD). */
void lower_depth_to_space(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int64_t b = ir_attr_int(n, "blocksize", 1), c = out->dims[1];
    int vars[4];
    Expr *idx[4], *bk = kx_index(p, b);
    Kernel *k = out_kernel(L, n, out, KC_COPY, vars, idx);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *yi = kx_bin(p, K_REM, idx[2], bk), *xi = kx_bin(p, K_REM, idx[3], bk);
    Expr *blk = kx_add(p, kx_mul(p, yi, b), xi), *ch;
    if (!strcmp(ir_attr_str(n, "mode", "DCR"), "DCR")) ch = kx_add(p, kx_mul(p, blk, c), idx[1]);
    else ch = kx_add(p, kx_mul(p, idx[1], b * b), blk);
    Expr *ii[4] = {idx[0], ch, kx_bin(p, K_DIV, idx[2], bk), kx_bin(p, K_DIV, idx[3], bk)};
    k->body = lower_wrap(p, 4, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, ii)));
}

void infer_space_to_depth(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int64_t b;
    if (!block_shape(g, n, &b)) return;
    if (x->dims[2] % b || x->dims[3] % b) {
        error(ir_where(g, n), "spatial dims not divisible by blocksize %lld", (long long)b);
        return;
    }
    int64_t dims[4] = {x->dims[0], x->dims[1] * b * b, x->dims[2] / b, x->dims[3] / b};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* out[n, (bh*b + bw)*C + c, h, w] = in[n, c, h*b + bh, w*b + bw] */
void lower_space_to_depth(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int64_t b = ir_attr_int(n, "blocksize", 1), c = x->dims[1];
    int vars[4];
    Expr *idx[4], *bk = kx_index(p, b);
    Kernel *k = out_kernel(L, n, out, KC_COPY, vars, idx);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *blk = kx_bin(p, K_DIV, idx[1], kx_index(p, c));
    Expr *bh = kx_bin(p, K_DIV, blk, bk), *bw = kx_bin(p, K_REM, blk, bk);
    Expr *ii[4] = {idx[0], kx_bin(p, K_REM, idx[1], kx_index(p, c)), kx_add(p, kx_mul(p, idx[2], b), bh),
                   kx_add(p, kx_mul(p, idx[3], b), bw)};
    k->body = lower_wrap(p, 4, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, ii)));
}

/* ---- ArgMax, ArgMin, Hardmax: position of the extreme value ---- */

void infer_arg(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int axis;
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (x->dims[axis] == 0) {
        error(ir_where(g, n), "axis %d is empty", axis);
        return;
    }
    int64_t dims[MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != axis) dims[r++] = x->dims[d];
        else if (ir_attr_int(n, "keepdims", 1)) dims[r++] = 1;
    }
    ir_set_shape(n->out[0], DT_INT64, r, dims);
}

/* The scan step shared by ArgMax/ArgMin and Hardmax: with `best` holding the extreme so far
 * and `at` its position, take value v at position pos when it is better (or equally good
 * with select_last_index). `at` is set before `best`, so both compare with the old best. */
static Stmt *arg_step(Program *p, Kernel *k, Node *n, int best, int at, Expr *v, Expr *pos) {
    bool last = ir_attr_int(n, "select_last_index", 0) != 0;
    KOp cmp = n->op == OP_ArgMin ? (last ? K_LE : K_LT) : (last ? K_GE : K_GT);
    Expr *take = kx_bin(p, cmp, v, kx_scalar(p, k, best));
    Stmt *s = ks_set(p, at, kx_select(p, take, pos, kx_scalar(p, k, at)));
    return ks_seq(s, ks_set(p, best, kx_select(p, take, v, kx_scalar(p, k, best))));
}

void lower_arg(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int axis, ov[MAX_RANK], jv;
    bool keep = ir_attr_int(n, "keepdims", 1) != 0;
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *first[MAX_RANK];
    Kernel *k = out_kernel(L, n, out, KC_GENERIC, ov, oi);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int best = kir_scalar(p, k, x->dtype), at = kir_scalar(p, k, DT_INDEX);
    jv = kir_var(k);
    for (int d = 0, o = 0; d < x->rank; d++) {
        if (d == axis) {
            xi[d] = kx_var(p, jv);
            first[d] = kx_index(p, 0);
            o += keep;
        } else {
            xi[d] = first[d] = oi[o++];
        }
    }
    Stmt *body = ks_set(p, best, kx_load(p, x, first));
    ks_seq(body, ks_set(p, at, kx_index(p, 0)));
    ks_seq(body, ks_loop(p, jv, 1, x->dims[axis], 1,
                         arg_step(p, k, n, best, at, kx_load(p, x, xi), kx_var(p, jv))));
    ks_seq(body, ks_store(p, out, oi, kx_cast(p, DT_INT64, kx_scalar(p, k, at))));
    k->body = lower_wrap(p, out->rank, out->dims, ov, body);
}

/* Hardmax's reduced block: the dim `axis`, or with `legacy` (opset < 13) dims axis..rank-1. */
static bool hardmax_block(Graph *g, Node *n, int rank, int *lo, int *hi) {
    if (!rule_axis(g, n, ir_attr_int(n, "axis", -1), rank, lo)) return false;
    *hi = ir_attr_int(n, "legacy", 0) ? rank : *lo + 1;
    return true;
}

void infer_hardmax(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int lo, hi;
    if (!hardmax_block(g, n, x->rank, &lo, &hi)) return;
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* Fresh loop variables for the block dims [lo, hi), their index expressions in idx[], and the
 * row-major position inside the block. */
static Expr *block_vars(Program *p, Kernel *k, const Buf *x, int lo, int hi, int *vars, Expr **idx) {
    Expr *pos = kx_index(p, 0);
    for (int d = lo; d < hi; d++) {
        vars[d] = kir_var(k);
        idx[d] = kx_var(p, vars[d]);
        pos = kx_add(p, kx_mul(p, pos, x->dims[d]), idx[d]);
    }
    return pos;
}

static Stmt *block_wrap(Program *p, int lo, int hi, const int64_t *dims, const int *vars, Stmt *s) {
    for (int d = hi - 1; d >= lo; d--) s = ks_loop(p, vars[d], 0, dims[d], 1, s);
    return s;
}

/* Per position outside the block: find the first maximum (argmax scan), then store 1 there
 * and 0 elsewhere. */
void lower_hardmax(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int r = x->rank, lo, hi, ov[MAX_RANK], bv[MAX_RANK], no = 0;
    if (!hardmax_block(L->g, n, r, &lo, &hi)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int best = kir_scalar(p, k, x->dtype), at = kir_scalar(p, k, DT_INDEX);
    Expr *idx[MAX_RANK], *first[MAX_RANK];
    int64_t od[MAX_RANK];
    for (int d = 0; d < r; d++)
        if (d < lo || d >= hi) {
            ov[no] = kir_var(k);
            idx[d] = first[d] = kx_var(p, ov[no]);
            od[no++] = x->dims[d];
        } else {
            first[d] = kx_index(p, 0);
        }
    Stmt *body = NULL;
    if (kir_numel(x) > 0) {
        body = ks_set(p, best, kx_load(p, x, first));
        ks_seq(body, ks_set(p, at, kx_index(p, 0)));
        Expr *pos = block_vars(p, k, x, lo, hi, bv, idx);
        ks_seq(body, block_wrap(p, lo, hi, x->dims, bv,
                                arg_step(p, k, n, best, at, kx_load(p, x, idx), pos)));
    }
    Expr *pos = block_vars(p, k, x, lo, hi, bv, idx);
    Expr *one = kx_bin(p, K_EQ, pos, kx_scalar(p, k, at));
    Expr *v = kx_select(p, one, kx_const(p, y->dtype, 1), kx_const(p, y->dtype, 0));
    body = ks_seq(body, block_wrap(p, lo, hi, x->dims, bv, ks_store(p, y, idx, v)));
    k->body = lower_wrap(p, no, od, ov, body);
}

/* ---- CumSum ---- */

void infer_cumsum(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int axis;
    if (x->rank == 0 || x->dtype == DT_BOOL) {
        error(ir_where(g, n), "input '%s' must be a numeric tensor of rank >= 1", x->name);
        return;
    }
    if (!int_scalar(g, n, 1, "axis")) return;
    if (n->in[1]->data && !rule_axis(g, n, ir_const_int(n->in[1], 0), x->rank, &axis)) return;
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* The scan along `axis` for every position of the other dims, in order or reversed:
 *   acc = 0; for j: acc += x[j]; y[j] = acc    (exclusive: store before adding) */
static Stmt *cumsum_nest(Program *p, Kernel *k, Node *n, Buf *x, Buf *y, int axis, int acc) {
    int vars[MAX_RANK], r = x->rank, ov[MAX_RANK], no = 0;
    int64_t od[MAX_RANK], len = x->dims[axis];
    Expr *idx[MAX_RANK];
    for (int d = 0; d < r; d++) {
        vars[d] = kir_var(k);
        idx[d] = kx_var(p, vars[d]);
        if (d != axis) ov[no] = vars[d], od[no++] = x->dims[d];
    }
    if (ir_attr_int(n, "reverse", 0))
        idx[axis] = kx_bin(p, K_SUB, kx_index(p, len - 1), idx[axis]);
    Stmt *add = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_load(p, x, idx)));
    Stmt *store = ks_store(p, y, idx, kx_scalar(p, k, acc));
    Stmt *step = ir_attr_int(n, "exclusive", 0) ? ks_seq(store, add) : ks_seq(add, store);
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, x->dtype, 0)), ks_loop(p, vars[axis], 0, len, 1, step));
    return lower_wrap(p, no, od, ov, body);
}

/* A constant axis gives one nest; a run-time one gives a nest per possible axis, each behind
 * `if (axis == a || axis == a - rank)`. */
void lower_cumsum(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int acc = kir_scalar(p, k, x->dtype), r = x->rank, axis;
    if (n->in[1]->data) {
        if (!rule_axis(L->g, n, ir_const_int(n->in[1], 0), r, &axis)) return;
        k->body = cumsum_nest(p, k, n, x, y, axis, acc);
        return;
    }
    Expr *ax = index_operand(L, n, k, 1);
    for (int a = 0; a < r; a++) {
        Expr *is = kx_bin(p, K_OR, kx_bin(p, K_EQ, ax, kx_index(p, a)),
                          kx_bin(p, K_EQ, ax, kx_index(p, a - r)));
        k->body = ks_seq(k->body, ks_if(p, is, cumsum_nest(p, k, n, x, y, a, acc), NULL));
    }
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
    if (!rule_inputs_known(n)) return;
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

/* out[output ids] = sum over the other ids of the product of the inputs, each read at its
 * own ids (a repeated id reads a diagonal; a size-1 dim broadcasts). */
void lower_einsum(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0);
    Einsum e;
    if (!ein_plan(NULL, n, &e)) die("lower_einsum %s: not checked by infer_einsum", n->name);
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    int var[EIN_IDS], ov[MAX_RANK], acc = kir_scalar(p, k, out->dtype);
    for (int d = 0; d < e.orank; d++) var[e.oids[d]] = ov[d] = kir_var(k);
    for (int r = 0; r < e.nred; r++) var[e.red[r]] = kir_var(k);
    Expr *prod = NULL;
    for (int i = 0; i < n->nin; i++) {
        Buf *x = lower_in(L, n, i);
        Expr *idx[MAX_RANK];
        kir_param(p, k, x, KP_IN);
        for (int d = 0; d < x->rank; d++)
            idx[d] = x->dims[d] == 1 ? kx_index(p, 0) : kx_var(p, var[e.ids[i][d]]);
        Expr *v = kx_load(p, x, idx);
        prod = prod ? kx_bin(p, K_MUL, prod, v) : v;
    }
    kir_param(p, k, out, KP_OUT);
    Stmt *s = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod));
    for (int r = e.nred - 1; r >= 0; r--) s = ks_loop(p, var[e.red[r]], 0, e.size[e.red[r]], 1, s);
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, out->dtype, 0)), s);
    Expr *oi[MAX_RANK];
    lower_var_idx(p, e.orank, ov, oi);
    ks_seq(body, ks_store(p, out, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, e.orank, out->dims, ov, body);
}
