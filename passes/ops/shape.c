/* shape.c - the ops that only look at or relabel shapes: Shape, Size, Identity, Dropout
 * (inference), and the views Reshape, Flatten, Squeeze, Unsqueeze.
 *
 * Shapes are static, so Shape and Size compute their result here (it becomes constant data)
 * and every shape-like operand (Reshape's target, Squeeze's axes, ...) must be a compile-time
 * constant when its rule runs; ops.def's shape-operand column names them. The views lower to
 * lower_identity (passes/lower.c): no data moves. */
#include <string.h>

#include "../lower.h"

/* Shape (with opset 15's start/end): a constant, so its consumers see known data. */
void infer_shape_op(Graph *g, Node *n) {
    Value *x = n->in[0], *o = n->out[0];
    int64_t r = x->rank;
    int64_t start = ir_attr_int(n, "start", 0), end = ir_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = MAX(0, MIN(start, r));
    end = MAX(start, MIN(end, r));
    int64_t len = end - start;
    ir_set_shape(o, DT_INT64, 1, &len);
    int64_t *data = ARENA_ARRAY(g->arena, int64_t, len + 1);
    for (int64_t i = 0; i < len; i++) data[i] = x->dims[start + i];
    o->data = data;
}

/* ---- views ---- */

void infer_identity(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->kind) {                  /* a sequence or optional passes through (sequence.c) */
        rule_container_like(g, n->out[0], x);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* Inference-mode Dropout: the data passes through; the optional mask is all true. */
void infer_dropout(Graph *g, Node *n) {
    Value *x = n->in[0];
    /* a training-mode Dropout numbers its elements with a 32-bit Philox counter */
    Value *t = n->nin >= 3 ? n->in[2] : NULL;
    bool off = t && t->data && t->dtype == DT_BOOL && ir_numel(t) == 1 && !*(const uint8_t *)t->data;
    if (t && !off && ir_numel(x) > 0xffffffffll) {
        error(ir_where(g, n), "a Dropout with a training_mode input takes at most 2^32 elements, not %lld",
              (long long)ir_numel(x));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_BOOL, x->rank, x->dims);
}

void infer_flatten(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t axis = ir_attr_int(n, "axis", 1);
    if (axis < -x->rank || axis > x->rank) {   /* axis == rank is allowed here */
        error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)axis, x->rank);
        return;
    }
    if (axis < 0) axis += x->rank;
    int64_t dims[2] = {1, 1};
    /* saturating: with a dim of 0 the others may be huge (the size check then refuses it) */
    for (int d = 0; d < x->rank; d++) dims[d >= axis] = sz_mul(dims[d >= axis], x->dims[d]);
    ir_set_shape(n->out[0], x->dtype, 2, dims);
}

void infer_reshape(Graph *g, Node *n) {
    Value *x = n->in[0];
    Value *s = rule_const_ints(g, n, 1, "shape", MAX_RANK);
    if (!s) return;
    bool allowzero = ir_attr_int(n, "allowzero", 0) != 0;
    int rank = (int)ir_numel(s), infer_at = -1;
    int64_t dims[MAX_RANK], known = 1;
    for (int d = 0; d < rank; d++) {
        dims[d] = ir_const_int(s, d);
        if (dims[d] == 0 && !allowzero) {
            if (d >= x->rank) {
                error(ir_where(g, n), "shape copies dim %d of a rank-%d input", d, x->rank);
                return;
            }
            dims[d] = x->dims[d];
        }
        if (dims[d] == -1 && infer_at < 0) {
            infer_at = d;
            continue;
        }
        if (dims[d] < 0) {
            error(ir_where(g, n), "bad target shape %s", rule_dims_str(g, rank, dims));
            return;
        }
        known = sz_mul(known, dims[d]);
    }
    if (infer_at >= 0) dims[infer_at] = known ? ir_numel(x) / known : 0;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel = sz_mul(numel, dims[d]);
    if (numel != ir_numel(x)) {
        error(ir_where(g, n), "cannot reshape %s into %s", rule_dims_str(g, x->rank, x->dims),
              rule_dims_str(g, rank, dims));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* Marks the axes listed in constant input 1 (normalised against `rank`) in mask[]. */
static bool axes_mask(Graph *g, Node *n, int rank, bool *mask) {
    Value *a = rule_const_ints(g, n, 1, "axes", MAX_RANK);
    if (!a) return false;
    memset(mask, 0, sizeof(bool) * MAX_RANK);
    for (int64_t i = 0; i < ir_numel(a); i++) {
        int ax;
        if (!rule_axis(g, n, ir_const_int(a, i), rank, &ax)) return false;
        if (mask[ax]) {
            error(ir_where(g, n), "axis %d repeated", ax);
            return false;
        }
        mask[ax] = true;
    }
    return true;
}

void infer_squeeze(Graph *g, Node *n) {
    Value *x = n->in[0];
    bool mask[MAX_RANK];
    if (n->nin > 1 && n->in[1]) {
        if (!axes_mask(g, n, x->rank, mask)) return;
    } else {
        for (int d = 0; d < x->rank; d++) mask[d] = x->dims[d] == 1;
    }
    int rank = 0;
    int64_t dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        if (!mask[d]) dims[rank++] = x->dims[d];
        else if (x->dims[d] != 1) {
            error(ir_where(g, n), "cannot squeeze axis %d of size %lld", d, (long long)x->dims[d]);
            return;
        }
    }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

void infer_unsqueeze(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (n->nin < 2 || !n->in[1]) {
        error(ir_where(g, n), "axes input missing");
        return;
    }
    int rank = x->rank + (int)ir_numel(n->in[1]);
    bool mask[MAX_RANK];
    if (rank > MAX_RANK) {
        error(ir_where(g, n), "result rank %d exceeds %d", rank, MAX_RANK);
        return;
    }
    if (!axes_mask(g, n, rank, mask)) return;
    int64_t dims[MAX_RANK];
    for (int d = 0, j = 0; d < rank; d++) dims[d] = mask[d] ? 1 : x->dims[j++];
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* ---- Size and Range: shapes and constants ---- */

/* Size depends on the shape only: its result is a constant, like Shape's. */
void infer_size(Graph *g, Node *n) {
    int64_t *data = ARENA_NEW(g->arena, int64_t);
    *data = ir_numel(n->in[0]);
    ir_set_shape(n->out[0], DT_INT64, 0, NULL);
    n->out[0]->data = data;
}

/* Dropout with a training_mode input that is not a constant false (canonicalize keeps its
 * ratio and training_mode inputs then): where training_mode is true at run time, element i is
 * kept when a uniform [0, 1) number from the Philox generator (rule_random: counter i, key
 * `seed`, 0 when absent) is >= ratio, and scaled by 1 / (1 - ratio); the mask says which were kept. With
 * training_mode false it is the identity. The numbers cannot match numpy's generator. */
void lower_dropout(Lower *L, Node *n) {
    if (n->nin < 3 || !n->in[2]) {
        lower_identity(L, n);
        return;
    }
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ratio = lower_in(L, n, 1), *train = lower_in(L, n, 2);
    Buf *y = lower_out(L, n, 0), *mask = n->nout > 1 && n->out[1] ? lower_out(L, n, 1) : NULL;
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, vars, idx);
    if (mask) kir_param(p, k, mask, KP_OUT);
    DType t = x->dtype;
    Expr *lin = kx_index(p, 0);
    for (int d = 0; d < x->rank; d++) lin = kx_add(p, kx_mul(p, lin, x->dims[d]), kx_var(p, vars[d]));
    if (kir_numel(x) > 0xffffffffll) die("lower_dropout: %s: more elements than a 32-bit counter", n->name);
    int w[4], keep = kir_scalar(p, k, DT_BOOL), on = kir_scalar(p, k, DT_BOOL);
    Stmt *body = rule_random(p, k, n, lin, w);
    Expr *r = ratio ? kx_cast(p, DT_FLOAT, rule_load_first(p, k, ratio)) : kx_const(p, DT_FLOAT, 0.5);
    ks_seq(body, ks_set(p, keep, kx_bin(p, K_GE, rule_uniform01(p, k, w[0]), kx_clone(p, r))));
    ks_seq(body, ks_set(p, on, kx_cast(p, DT_BOOL, rule_load_first(p, k, train))));
    Expr *scaled = kx_bin(p, K_DIV, kx_load(p, x, idx), kx_cast(p, t, kx_bin(p, K_SUB, kx_const(p, DT_FLOAT, 1), r)));
    Expr *dropped = kx_select(p, kx_scalar(p, k, keep), scaled, kx_const(p, t, 0));
    Expr *yv = kx_select(p, kx_scalar(p, k, on), dropped, kx_load(p, x, idx));
    ks_seq(body, ks_store(p, y, idx, yv));
    if (mask) {
        Expr *mv = kx_bin(p, K_OR, kx_un(p, K_NOT, kx_scalar(p, k, on)), kx_scalar(p, k, keep));
        ks_seq(body, ks_store(p, mask, idx, mv));
    }
    k->body = lower_wrap(p, x->rank, x->dims, vars, body);
}
