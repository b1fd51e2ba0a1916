/* rules_data.c - shape and lowering rules of the ops that create, reshape or move data:
 * Constant, ConstantOfShape, Shape, Identity/Dropout, the views (Reshape, Flatten, Squeeze,
 * Unsqueeze), Expand, Transpose, Concat, Gather, Slice and Pad.
 *
 * Shapes are static, so every "shape-like" operand (Reshape's target, Slice's starts, Pad's
 * pads, ...) must be a compile-time constant by the time its consumer's rule runs: shape
 * inference and constant folding have turned shape subgraphs into constants (Shape even sets
 * its result's data here). A non-constant one is reported as unsupported.
 *
 * The views lower to lower_identity (passes/lower.c). The data movers lower to KC_COPY kernels
 * that iterate over the output and load from a computed input position, so each output element
 * is stored exactly once; index arithmetic is arranged so that no load can leave its buffer
 * (Pad splits its loops into padding and interior ranges, Gather clamps run-time indices).
 * Expand and ConstantOfShape are exactly lower_map's broadcast form, so they are elementwise
 * kernels that fusion can merge into their consumers. */
#include <string.h>

#include "lower.h"

static const char *dims_str(Graph *g, int rank, const int64_t *dims) {
    const char *s = "[";
    for (int d = 0; d < rank; d++)
        s = arena_printf(g->arena, "%s%s%lld", s, d ? "," : "", (long long)dims[d]);
    return arena_printf(g->arena, "%s]", s);
}

/* A constant scalar as an expression of type t, keeping all 64 bits of an integer. */
static Expr *scalar_const(Program *p, const Value *v, DType t) {
    if (dtype_is_float(t)) return kx_const(p, t, ir_const_float(v, 0));
    Expr *e = kx_const(p, t, 0);
    e->i = ir_const_int(v, 0);
    return e;
}

/* ---- constants and shapes ---- */

/* Normally canonicalisation has already turned Constant nodes into constant values; this
 * covers graphs that skip it. */
void infer_constant(Graph *g, Node *n) {
    Value *o = n->out[0];
    Attr *a = n->nattrs ? &n->attrs[0] : NULL;
    int64_t count;
    if (!a || n->nattrs != 1) {
        error(ir_where(g, n), "needs exactly one value attribute");
        return;
    }
    if (a->type == A_TENSOR && !strcmp(a->name, "value")) {
        ir_set_shape(o, a->t->dtype, a->t->rank, a->t->dims);
        o->data = a->t->data;
    } else if (a->type == A_FLOAT && !strcmp(a->name, "value_float")) {
        ir_set_shape(o, DT_FLOAT, 0, NULL);
        o->data = ARENA_NEW(g->arena, float);
        *(float *)o->data = a->f;
    } else if (a->type == A_INT && !strcmp(a->name, "value_int")) {
        ir_set_shape(o, DT_INT64, 0, NULL);
        o->data = ARENA_NEW(g->arena, int64_t);
        *(int64_t *)o->data = a->i;
    } else if (a->type == A_FLOATS && !strcmp(a->name, "value_floats")) {
        count = a->n;
        ir_set_shape(o, DT_FLOAT, 1, &count);
        o->data = ARENA_ARRAY(g->arena, float, count + 1);
        memcpy(o->data, a->floats, sizeof(float) * (size_t)count);
    } else if (a->type == A_INTS && !strcmp(a->name, "value_ints")) {
        count = a->n;
        ir_set_shape(o, DT_INT64, 1, &count);
        o->data = ARENA_ARRAY(g->arena, int64_t, count + 1);
        memcpy(o->data, a->ints, sizeof(int64_t) * (size_t)count);
    } else {
        error(ir_where(g, n), "value attribute '%s' is not supported", a->name);
    }
}

void lower_constant(Lower *L, Node *n) {
    die("%s: %s should have been folded", n->name, n->op_type);
}

/* Shape (with opset 15's start/end): a constant, so its consumers see known data. */
void infer_shape_op(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
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

/* The fill value of ConstantOfShape: a one-element tensor attribute, float 0 by default. */
static Value *fill_value(Node *n) {
    Attr *a = ir_attr(n, "value");
    return a && a->type == A_TENSOR ? a->t : NULL;
}

void infer_constant_of_shape(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *s = rule_const_ints(g, n, 0, "shape", MAX_RANK);
    if (!s) return;
    Value *fill = fill_value(n);
    DType t = fill ? fill->dtype : DT_FLOAT;
    if (fill && ir_numel(fill) != 1) {
        error(ir_where(g, n), "value attribute must have one element");
        return;
    }
    if (!dtype_supported(t)) {
        error(ir_where(g, n), "unsupported value type %s", dtype_name(t));
        return;
    }
    int64_t dims[MAX_RANK];
    int rank = (int)ir_numel(s);
    for (int d = 0; d < rank; d++) {
        dims[d] = ir_const_int(s, d);
        if (dims[d] < 0) {
            error(ir_where(g, n), "negative dimension in shape %s", dims_str(g, d + 1, dims));
            return;
        }
    }
    ir_set_shape(n->out[0], t, rank, dims);
}

static Expr *map_fill(Lower *L, Node *n, Expr **vals, void *ctx) {
    Value *fill = fill_value(n);
    if (!fill) return kx_const(L->p, DT_FLOAT, 0);
    return scalar_const(L->p, fill, fill->dtype);
}

void lower_constant_of_shape(Lower *L, Node *n) {
    lower_map(L, n, lower_out(L, n, 0), 0, NULL, map_fill, NULL);
}

/* ---- views ---- */

void infer_identity(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* Inference-mode Dropout: the data passes through; the optional mask is all true. */
void infer_dropout(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_BOOL, x->rank, x->dims);
}

void infer_flatten(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int64_t axis = ir_attr_int(n, "axis", 1);
    if (axis < -x->rank || axis > x->rank) {   /* axis == rank is allowed here */
        error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)axis, x->rank);
        return;
    }
    if (axis < 0) axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++) dims[d >= axis] *= x->dims[d];
    ir_set_shape(n->out[0], x->dtype, 2, dims);
}

void infer_reshape(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
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
            error(ir_where(g, n), "bad target shape %s", dims_str(g, rank, dims));
            return;
        }
        known *= dims[d];
    }
    if (infer_at >= 0) dims[infer_at] = known ? ir_numel(x) / known : 0;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= dims[d];
    if (numel != ir_numel(x)) {
        error(ir_where(g, n), "cannot reshape %s into %s", dims_str(g, x->rank, x->dims),
              dims_str(g, rank, dims));
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
    if (!rule_inputs_known(n)) return;
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
    if (!rule_inputs_known(n)) return;
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

/* ---- Expand ---- */

void infer_expand(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    Value *s = rule_const_ints(g, n, 1, "shape", MAX_RANK);
    if (!s) return;
    int64_t want[MAX_RANK], dims[MAX_RANK];
    int rank = (int)ir_numel(s);
    for (int d = 0; d < rank; d++) want[d] = ir_const_int(s, d);
    if (!ir_broadcast(x->rank, x->dims, rank, want, &rank, dims)) {
        error(ir_where(g, n), "cannot expand %s to %s", dims_str(g, x->rank, x->dims),
              dims_str(g, (int)ir_numel(s), want));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

static Expr *map_same(Lower *L, Node *n, Expr **vals, void *ctx) { return vals[0]; }

void lower_expand(Lower *L, Node *n) {
    Buf *in = lower_in(L, n, 0);
    lower_map(L, n, lower_out(L, n, 0), 1, &in, map_same, NULL);
}

/* ---- Transpose ---- */

/* perm attribute (default: reversed dims), checked to be a permutation. */
static bool get_perm(Graph *g, Node *n, int rank, int *perm) {
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    bool seen[MAX_RANK] = {false};
    if (!p) {
        for (int d = 0; d < rank; d++) perm[d] = rank - 1 - d;
        return true;
    }
    if (np != rank) {
        error(ir_where(g, n), "perm has %d entries for rank %d", np, rank);
        return false;
    }
    for (int d = 0; d < rank; d++) {
        if (!rule_axis(g, n, p[d], rank, &perm[d])) return false;
        if (seen[perm[d]]) {
            error(ir_where(g, n), "perm is not a permutation");
            return false;
        }
        seen[perm[d]] = true;
    }
    return true;
}

void infer_transpose(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int perm[MAX_RANK];
    int64_t dims[MAX_RANK];
    if (!get_perm(g, n, x->rank, perm)) return;
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* out[o0..on-1] = in[i] with i[perm[d]] = o[d]: loops in output order, so stores are
 * contiguous and loads strided. */
void lower_transpose(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int perm[MAX_RANK], vars[MAX_RANK];
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    if (!get_perm(L->g, n, in->rank, perm)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, out, KP_OUT);
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oidx);
    for (int d = 0; d < out->rank; d++) iidx[perm[d]] = oidx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
}

/* ---- Concat ---- */

void infer_concat(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int axis;
    if (!ir_attr(n, "axis")) {
        error(ir_where(g, n), "axis attribute missing");
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    int64_t dims[MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    for (int i = 1; i < n->nin; i++) {
        Value *v = n->in[i];
        bool ok = v->rank == x->rank && v->dtype == x->dtype;
        for (int d = 0; ok && d < x->rank; d++) ok = d == axis || v->dims[d] == x->dims[d];
        if (!ok) {
            error(ir_where(g, n), "input '%s' (%s %s) does not match '%s' (%s %s) on axis %d",
                  v->name, dtype_name(v->dtype), dims_str(g, v->rank, v->dims), x->name,
                  dtype_name(x->dtype), dims_str(g, x->rank, x->dims), axis);
            return;
        }
        dims[axis] += v->dims[axis];
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* One kernel for the whole output: a loop nest per input stores into its own slice, so every
 * output element is written once. */
void lower_concat(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0);
    int axis;
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), out->rank, &axis)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, out, KP_OUT);
    int64_t off = 0;
    for (int i = 0; i < n->nin; i++) {
        Buf *in = lower_in(L, n, i);
        if (kir_numel(in) == 0) continue;
        int vars[MAX_RANK];
        Expr *iidx[MAX_RANK], *oidx[MAX_RANK];
        kir_param(p, k, in, KP_IN);
        lower_vars(k, in->rank, vars);
        lower_var_idx(p, in->rank, vars, iidx);
        lower_var_idx(p, in->rank, vars, oidx);
        oidx[axis] = kx_addc(p, oidx[axis], off);
        Stmt *s = ks_store(p, out, oidx, kx_load(p, in, iidx));
        k->body = ks_seq(k->body, lower_wrap(p, in->rank, in->dims, vars, s));
        off += in->dims[axis];
    }
}

/* ---- Gather ---- */

void infer_gather(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1];
    int axis;
    if (x->rank == 0) {
        error(ir_where(g, n), "data '%s' is a scalar", x->name);
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (ind->dtype != DT_INT64 && ind->dtype != DT_INT32) {
        error(ir_where(g, n), "indices '%s' are %s, not int32/int64", ind->name,
              dtype_name(ind->dtype));
        return;
    }
    int rank = x->rank - 1 + ind->rank;
    if (rank > MAX_RANK) {
        error(ir_where(g, n), "result rank %d exceeds %d", rank, MAX_RANK);
        return;
    }
    int64_t dim = x->dims[axis];
    for (int64_t i = 0; ind->data && i < ir_numel(ind); i++) {
        int64_t v = ir_const_int(ind, i);
        if (v < -dim || v >= dim) {
            error(ir_where(g, n), "index %lld out of range for axis %d of size %lld",
                  (long long)v, axis, (long long)dim);
            return;
        }
    }
    int64_t dims[MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++) dims[r++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++) dims[r++] = ind->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[r++] = x->dims[d];
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* The position along the gathered axis. A constant scalar index is folded; a run-time index
 * is wrapped when negative and clamped into the axis, since the data must never be read out
 * of bounds even for a bad index (ONNX leaves that case undefined). */
static Expr *gather_index(Lower *L, Node *n, Buf *ind, Expr **idx, int64_t dim) {
    Program *p = L->p;
    Value *v = n->in[1];
    if (v->data && ir_numel(v) == 1) {
        int64_t i = ir_const_int(v, 0);
        return kx_index(p, i < 0 ? i + dim : i);
    }
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, idx));
    Expr *neg = kx_bin(p, K_LT, i, kx_index(p, 0));
    i = kx_select(p, neg, kx_addc(p, kx_clone(p, i), dim), kx_clone(p, i));
    if (v->data) return i;          /* checked in range by infer_gather */
    i = kx_bin(p, K_MAX, i, kx_index(p, 0));
    return kx_bin(p, K_MIN, i, kx_index(p, dim - 1));
}

void lower_gather(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int axis, q = ind->rank, vars[MAX_RANK];
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, x, KP_IN);
    if (!n->in[1]->data || ir_numel(n->in[1]) != 1) kir_param(p, k, ind, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *oidx[MAX_RANK], *xidx[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oidx);
    for (int d = 0; d < axis; d++) xidx[d] = oidx[d];
    xidx[axis] = gather_index(L, n, ind, oidx + axis, x->dims[axis]);
    for (int d = axis + 1; d < x->rank; d++) xidx[d] = oidx[d - 1 + q];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, x, xidx)));
}

/* ---- Slice ---- */

/* Per input dim: first element, step and element count of the slice (ONNX clamping rules). */
typedef struct SliceDims {
    int64_t start[MAX_RANK], step[MAX_RANK], count[MAX_RANK];
} SliceDims;

static bool slice_dims(Graph *g, Node *n, SliceDims *s) {
    Value *x = n->in[0];
    Value *starts = rule_const_ints(g, n, 1, "starts", MAX_RANK);
    Value *ends = rule_const_ints(g, n, 2, "ends", MAX_RANK);
    Value *axes = n->nin > 3 && n->in[3] ? rule_const_ints(g, n, 3, "axes", MAX_RANK) : NULL;
    Value *steps = n->nin > 4 && n->in[4] ? rule_const_ints(g, n, 4, "steps", MAX_RANK) : NULL;
    if (!starts || !ends || (n->nin > 3 && n->in[3] && !axes) || (n->nin > 4 && n->in[4] && !steps))
        return false;
    int64_t k = ir_numel(starts);
    if (ir_numel(ends) != k || (axes && ir_numel(axes) != k) || (steps && ir_numel(steps) != k)) {
        error(ir_where(g, n), "starts, ends, axes and steps differ in length");
        return false;
    }
    bool seen[MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) s->start[d] = 0, s->step[d] = 1, s->count[d] = x->dims[d];
    for (int64_t i = 0; i < k; i++) {
        int ax;
        if (!rule_axis(g, n, axes ? ir_const_int(axes, i) : i, x->rank, &ax)) return false;
        if (seen[ax]) {
            error(ir_where(g, n), "axis %d repeated", ax);
            return false;
        }
        seen[ax] = true;
        int64_t dim = x->dims[ax], st = steps ? ir_const_int(steps, i) : 1;
        int64_t b = ir_const_int(starts, i), e = ir_const_int(ends, i);
        if (st == 0) {
            error(ir_where(g, n), "step 0 on axis %d", ax);
            return false;
        }
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (st > 0) {
            b = MAX(0, MIN(b, dim));
            e = MAX(0, MIN(e, dim));
            s->count[ax] = e > b ? (e - b + st - 1) / st : 0;
        } else {
            b = MAX(-1, MIN(b, dim - 1));
            e = MAX(-1, MIN(e, dim - 1));
            s->count[ax] = b > e ? (b - e - st - 1) / -st : 0;
        }
        s->start[ax] = b;
        s->step[ax] = st;
    }
    return true;
}

void infer_slice(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    SliceDims s;
    if (!slice_dims(g, n, &s)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, s.count);
}

void lower_slice(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    SliceDims s;
    if (!slice_dims(L->g, n, &s)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int vars[MAX_RANK];
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oidx);
    for (int d = 0; d < in->rank; d++)
        iidx[d] = kx_addc(p, kx_mul(p, oidx[d], s.step[d]), s.start[d]);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
}

/* ---- Pad ---- */

typedef enum PadMode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } PadMode;

/* Mode and per-dim pads (begin, end; negative crops); false after an error. */
static bool pad_params(Graph *g, Node *n, PadMode *mode, int64_t *pb, int64_t *pe) {
    Value *x = n->in[0];
    const char *m = ir_attr_str(n, "mode", "constant");
    if (!strcmp(m, "constant")) *mode = PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) *mode = PAD_REFLECT;
    else if (!strcmp(m, "edge")) *mode = PAD_EDGE;
    else {
        error(ir_where(g, n), "pad mode '%s' is not supported", m);
        return false;
    }
    if (n->nin < 2 || !n->in[1]) {
        error(ir_where(g, n), "pads input missing");
        return false;
    }
    Value *pads = rule_const_ints(g, n, 1, "pads", 2 * MAX_RANK);
    if (!pads) return false;
    if (ir_numel(pads) != 2 * x->rank) {
        error(ir_where(g, n), "%lld pads for rank %d", (long long)ir_numel(pads), x->rank);
        return false;
    }
    for (int d = 0; d < x->rank; d++) {
        pb[d] = ir_const_int(pads, d);
        pe[d] = ir_const_int(pads, x->rank + d);
        int64_t dim = x->dims[d];
        bool bad = dim + pb[d] + pe[d] < 0;
        if (*mode == PAD_REFLECT) bad |= pb[d] > dim - 1 || pe[d] > dim - 1;
        if (*mode == PAD_EDGE) bad |= (pb[d] > 0 || pe[d] > 0) && dim == 0;
        if (bad) {
            error(ir_where(g, n), "pads %lld,%lld do not fit axis %d of size %lld in mode %s",
                  (long long)pb[d], (long long)pe[d], d, (long long)dim, m);
            return false;
        }
    }
    return true;
}

void infer_pad(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    PadMode mode;
    int64_t pb[MAX_RANK], pe[MAX_RANK], dims[MAX_RANK];
    if (!pad_params(g, n, &mode, pb, pe)) return;
    Value *c = n->nin > 2 ? n->in[2] : NULL;
    if (c && (ir_numel(c) != 1 || c->dtype != x->dtype)) {
        error(ir_where(g, n), "constant_value '%s' must be a single %s", c->name,
              dtype_name(x->dtype));
        return;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d] + pb[d] + pe[d];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* Constant mode without conditionals: along each dim the output splits into a leading pad
 * range, the interior (which recurses into the next dim) and a trailing pad range; pad ranges
 * fill their whole sub-block with the value, so no load is ever out of range. */
typedef struct PadNest {
    Program *p;
    Kernel *k;
    Buf *in, *out;
    const int64_t *pb, *pe;
    Expr *fill;
} PadNest;

static Stmt *pad_fill(PadNest *c, int d, Expr **oidx, int64_t lo, int64_t hi) {
    int vars[MAX_RANK];
    int rank = c->out->rank;
    lower_vars(c->k, rank - d, vars);
    for (int j = d; j < rank; j++) oidx[j] = kx_var(c->p, vars[j - d]);
    Stmt *s = ks_store(c->p, c->out, oidx, kx_clone(c->p, c->fill));
    for (int j = rank - 1; j > d; j--) s = ks_loop(c->p, vars[j - d], 0, c->out->dims[j], 1, s);
    return ks_loop(c->p, vars[0], lo, hi, 1, s);
}

static Stmt *pad_nest(PadNest *c, int d, Expr **oidx, Expr **iidx) {
    Program *p = c->p;
    if (d == c->out->rank) return ks_store(p, c->out, oidx, kx_load(p, c->in, iidx));
    int64_t n = c->out->dims[d], lo = MAX(c->pb[d], 0), hi = n - MAX(c->pe[d], 0);
    Stmt *s = NULL;
    if (lo > 0) s = ks_seq(s, pad_fill(c, d, oidx, 0, MIN(lo, n)));
    if (hi > lo) {
        int v = kir_var(c->k);
        oidx[d] = kx_var(p, v);
        iidx[d] = kx_addc(p, kx_var(p, v), -c->pb[d]);
        s = ks_seq(s, ks_loop(p, v, lo, hi, 1, pad_nest(c, d + 1, oidx, iidx)));
    }
    if (n > MAX(hi, lo)) s = ks_seq(s, pad_fill(c, d, oidx, MAX(hi, lo), n));
    return s;
}

/* Reflect/edge: one nest; the source position is folded back into the axis arithmetically
 * (reflect: |t| then (dim-1) - |(dim-1) - t|; edge: clamp), valid because pads < dim. */
static Expr *pad_src(Program *p, PadMode mode, Expr *o, int64_t pb, int64_t pe, int64_t dim) {
    Expr *t = kx_addc(p, o, -pb);
    Expr *last = kx_index(p, dim - 1);
    if (mode == PAD_EDGE) {
        if (pb > 0) t = kx_bin(p, K_MAX, t, kx_index(p, 0));
        if (pe > 0) t = kx_bin(p, K_MIN, t, last);
        return t;
    }
    if (pb > 0) t = kx_un(p, K_ABS, t);
    if (pe > 0) t = kx_bin(p, K_SUB, last, kx_un(p, K_ABS, kx_bin(p, K_SUB, kx_index(p, dim - 1), t)));
    return t;
}

static Expr *pad_value(Lower *L, Node *n, Kernel *k, DType t) {
    Program *p = L->p;
    Value *c = n->nin > 2 ? n->in[2] : NULL;
    if (!c) return kx_const(p, t, 0);
    if (c->data) return scalar_const(p, c, t);
    Buf *b = lower_in(L, n, 2);
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, zero);
}

void lower_pad(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    PadMode mode;
    int64_t pb[MAX_RANK], pe[MAX_RANK];
    if (!pad_params(L->g, n, &mode, pb, pe)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    if (mode == PAD_CONSTANT) {
        PadNest c = {p, k, in, out, pb, pe, pad_value(L, n, k, out->dtype)};
        k->body = pad_nest(&c, 0, oidx, iidx);
        return;
    }
    int vars[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oidx);
    for (int d = 0; d < in->rank; d++)
        iidx[d] = pad_src(p, mode, kx_var(p, vars[d]), pb[d], pe[d], in->dims[d]);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
}
