/* rules_misc.c - shape and lowering rules of assorted ops: the index ops GatherND, ScatterND,
 * ScatterElements (and the deprecated Scatter), OneHot and TopK; the integer elementwise ops
 * Xor and BitShift; and the quantisation family QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
 *
 * They follow rules_data.c and rules_more.c: operands that decide a shape (TopK's k, OneHot's
 * depth) must be compile-time constants; run-time indices are wrapped when negative and
 * clamped into their axis so that no load or store leaves its buffer (ONNX leaves bad indices
 * undefined). Two kinds of kernel here break the usual "iterate over the output" shape:
 * - The scatters copy data into the output and then update the positions the indices name,
 *   so they write elements twice and read back what they wrote: the output is KP_INOUT.
 * - TopK keeps write-once without scratch: the j-th result is the best element among those
 *   that come after the (j-1)-th in the total order (value, then lower index first), so each
 *   row is a k-step selection scan remembering only the previous pick in registers.
 * The quantisation ops compute in float32 (round half to even, then saturate) and in int32
 * for the integer products, like the ONNX reference. */
#include <math.h>
#include <string.h>

#include "lower.h"

/* ---- helpers ---- */

static bool is_index_type(DType t) { return t == DT_INT64 || t == DT_INT32; }

/* Element 0 of a one-element buffer (zero points, scales), registered as an input of k. */
static Expr *load_first(Program *p, Kernel *k, Buf *b) {
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, zero);
}

/* A run-time index into an axis of size dim: negative counts from the end, then clamped. */
static Expr *wrap_clamp(Program *p, Expr *i, int64_t dim) {
    i = kx_cast(p, DT_INDEX, i);
    i = kx_select(p, kx_bin(p, K_LT, i, kx_index(p, 0)), kx_addc(p, kx_clone(p, i), dim),
                  kx_clone(p, i));
    return kx_bin(p, K_MIN, kx_bin(p, K_MAX, i, kx_index(p, 0)), kx_index(p, MAX(dim - 1, 0)));
}

static Expr **clone_idx(Program *p, int rank, Expr **idx, Expr **res) {
    for (int d = 0; d < rank; d++) res[d] = kx_clone(p, idx[d]);
    return res;
}

/* A copy nest out = in (same shape), appended to k's body. */
static void copy_nest(Program *p, Kernel *k, Buf *out, Buf *in) {
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, idx);
    Stmt *s = ks_store(p, out, idx, kx_load(p, in, idx));
    k->body = ks_seq(k->body, lower_wrap(p, out->rank, out->dims, vars, s));
}

/* Input i as a one-element constant, or NULL after an error. */
static Value *const_scalar(Graph *g, Node *n, int i, const char *what) {
    Value *v = n->in[i];
    if (!v->data) {
        error(ir_where(g, n), "%s '%s' is not a compile-time constant (unsupported)", what, v->name);
        return NULL;
    }
    if (v->rank > 1 || ir_numel(v) != 1 || v->dtype == DT_BOOL) {
        error(ir_where(g, n), "%s '%s' must be a single number", what, v->name);
        return NULL;
    }
    return v;
}

/* ---- Xor and BitShift ---- */

static Expr *map_xor(Lower *L, Node *n, Expr **v, void *ctx) {
    return kx_bin(L->p, K_XOR, v[0], v[1]);
}

void lower_xor(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_xor, NULL);
}

void infer_bitshift(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *y = n->in[1];
    const char *dir = ir_attr_str(n, "direction", "");
    int rank;
    int64_t dims[MAX_RANK];
    if (x->dtype != y->dtype || !dtype_is_unsigned(x->dtype)) {
        error(ir_where(g, n), "inputs are %s and %s, need the same unsigned type",
              dtype_name(x->dtype), dtype_name(y->dtype));
        return;
    }
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")) {
        error(ir_where(g, n), "direction '%s' must be LEFT or RIGHT", dir);
        return;
    }
    if (!ir_broadcast(x->rank, x->dims, y->rank, y->dims, &rank, dims)) {
        error(ir_where(g, n), "shapes of '%s' and '%s' do not broadcast", x->name, y->name);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* There is no shift operator in the kernel IR: x << y is x * 2^y and x >> y is x / 2^y, with
 * 2^y built from the bits of y (a product of selects). Shifts by the width or more give 0. */
static Expr *map_bitshift(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    DType t = v[0]->type;
    int bits = (int)dtype_size(t) * 8;
    Expr *y = kx_bin(p, K_MIN, v[1], kx_const(p, t, bits - 1));
    Expr *pow2 = kx_const(p, t, 1);
    for (int b = 0; (1 << b) < bits; b++) {
        Expr *bit = kx_bin(p, K_REM, kx_bin(p, K_DIV, kx_clone(p, y), kx_const(p, t, 1 << b)),
                           kx_const(p, t, 2));
        Expr *f = kx_select(p, kx_bin(p, K_NE, bit, kx_const(p, t, 0)),
                            kx_const(p, t, ldexp(1, 1 << b)), kx_const(p, t, 1));
        pow2 = kx_bin(p, K_MUL, pow2, f);
    }
    bool left = !strcmp(ir_attr_str(n, "direction", ""), "LEFT");
    Expr *r = kx_bin(p, left ? K_MUL : K_DIV, v[0], pow2);
    Expr *big = kx_bin(p, K_GE, kx_clone(p, v[1]), kx_const(p, t, bits));
    return kx_select(p, big, kx_const(p, t, 0), r);
}

void lower_bitshift(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_bitshift, NULL);
}

/* ---- GatherND ---- */

/* Checks data, indices and batch_dims; sets *m (length of an index tuple) and *b. */
static bool gathernd_check(Graph *g, Node *n, int *m, int *b) {
    Value *x = n->in[0], *ind = n->in[1];
    int64_t bd = ir_attr_int(n, "batch_dims", 0);
    if (!is_index_type(ind->dtype) || ind->rank < 1) {
        error(ir_where(g, n), "indices '%s' must be int32/int64 of rank >= 1", ind->name);
        return false;
    }
    *m = (int)ind->dims[ind->rank - 1];
    if (bd < 0 || bd >= MIN(x->rank, ind->rank) || *m < 1 || bd + *m > x->rank) {
        error(ir_where(g, n), "batch_dims %lld and index tuples of %d do not fit data of rank %d",
              (long long)bd, *m, x->rank);
        return false;
    }
    *b = (int)bd;
    for (int d = 0; d < *b; d++)
        if (x->dims[d] != ind->dims[d]) {
            error(ir_where(g, n), "batch dim %d differs between data and indices", d);
            return false;
        }
    return true;
}

void infer_gathernd(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1];
    int m, b, r = 0;
    int64_t dims[MAX_RANK];
    if (!gathernd_check(g, n, &m, &b)) return;
    if (ind->rank - 1 + x->rank - b - m > MAX_RANK) {
        error(ir_where(g, n), "result rank exceeds %d", MAX_RANK);
        return;
    }
    for (int d = 0; d < ind->rank - 1; d++) dims[r++] = ind->dims[d];
    for (int d = b + m; d < x->rank; d++) dims[r++] = x->dims[d];
    ir_set_shape(n->out[0], x->dtype, r, dims);
}

/* out[i..., j...] = x[i[0..b), indices[i..., 0..m), j...] */
void lower_gathernd(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int m, b, q = ind->rank, vars[MAX_RANK];
    if (!gathernd_check(L->g, n, &m, &b)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *ii[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oi);
    for (int d = 0; d < b; d++) xi[d] = oi[d];
    for (int j = 0; j < m; j++) {
        clone_idx(p, q - 1, oi, ii);
        ii[q - 1] = kx_index(p, j);
        xi[b + j] = wrap_clamp(p, kx_load(p, ind, ii), x->dims[b + j]);
    }
    for (int d = b + m; d < x->rank; d++) xi[d] = oi[q - 1 + d - b - m];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oi, kx_load(p, x, xi)));
}

/* ---- ScatterND, ScatterElements, Scatter ---- */

/* The reduction attribute as the operator combining old and new values; K_COUNT for none. */
static bool scatter_reduction(Graph *g, Node *n, KOp *op) {
    const char *r = ir_attr_str(n, "reduction", "none");
    if (!strcmp(r, "none")) *op = K_COUNT;
    else if (!strcmp(r, "add")) *op = K_ADD;
    else if (!strcmp(r, "mul")) *op = K_MUL;
    else if (!strcmp(r, "max")) *op = K_MAX;
    else if (!strcmp(r, "min")) *op = K_MIN;
    else {
        if (g) error(ir_where(g, n), "reduction '%s' is not supported", r);
        return false;
    }
    return true;
}

/* out[oi] = upd (or out[oi] op upd) */
static Stmt *scatter_store(Program *p, Buf *out, Expr **oi, Expr *upd, KOp op) {
    Expr *ci[MAX_RANK];
    if (op != K_COUNT) upd = kx_bin(p, op, kx_load(p, out, clone_idx(p, out->rank, oi, ci)), upd);
    return ks_store(p, out, oi, upd);
}

void infer_scatternd(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1], *upd = n->in[2];
    KOp op;
    if (!scatter_reduction(g, n, &op)) return;
    if (!is_index_type(ind->dtype) || ind->rank < 1) {
        error(ir_where(g, n), "indices '%s' must be int32/int64 of rank >= 1", ind->name);
        return;
    }
    int64_t m = ind->dims[ind->rank - 1];
    bool ok = m >= 1 && m <= x->rank && upd->dtype == x->dtype &&
              upd->rank == ind->rank - 1 + x->rank - m;
    for (int d = 0; ok && d < ind->rank - 1; d++) ok = upd->dims[d] == ind->dims[d];
    for (int d = (int)m; ok && d < x->rank; d++) ok = upd->dims[ind->rank - 1 + d - m] == x->dims[d];
    if (!ok) {
        error(ir_where(g, n), "shapes of data '%s', indices '%s' and updates '%s' do not match",
              x->name, ind->name, upd->name);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* out = data; then for each index tuple position i and slice position j, in order:
 * out[indices[i], j] = updates[i, j] (or combined with the reduction). */
void lower_scatternd(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *upd = lower_in(L, n, 2);
    Buf *out = lower_out(L, n, 0);
    int q = ind->rank, m = (int)ind->dims[q - 1], vars[MAX_RANK];
    KOp op;
    if (!scatter_reduction(NULL, n, &op)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, upd, KP_IN);
    kir_param(p, k, out, KP_INOUT);
    copy_nest(p, k, out, x);
    Expr *ui[MAX_RANK], *oi[MAX_RANK], *ii[MAX_RANK];
    lower_vars(k, upd->rank, vars);
    lower_var_idx(p, upd->rank, vars, ui);
    for (int j = 0; j < m; j++) {
        clone_idx(p, q - 1, ui, ii);
        ii[q - 1] = kx_index(p, j);
        oi[j] = wrap_clamp(p, kx_load(p, ind, ii), x->dims[j]);
    }
    for (int d = m; d < x->rank; d++) oi[d] = ui[q - 1 + d - m];
    Stmt *s = scatter_store(p, out, oi, kx_load(p, upd, ui), op);
    k->body = ks_seq(k->body, lower_wrap(p, upd->rank, upd->dims, vars, s));
}

void infer_scatter_elements(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1], *upd = n->in[2];
    int axis;
    KOp op;
    if (!scatter_reduction(g, n, &op)) return;
    if (x->rank == 0 || !rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (!is_index_type(ind->dtype)) {
        error(ir_where(g, n), "indices '%s' are %s, not int32/int64", ind->name,
              dtype_name(ind->dtype));
        return;
    }
    bool ok = ind->rank == x->rank && upd->dtype == x->dtype && ir_same_shape(ind, upd);
    for (int d = 0; ok && d < x->rank; d++) ok = d == axis || ind->dims[d] <= x->dims[d];
    if (!ok) {
        error(ir_where(g, n), "shapes of data '%s', indices '%s' and updates '%s' do not match",
              x->name, ind->name, upd->name);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* out = data; then for each position i of indices, in order:
 * out[i with i[axis] = indices[i]] = updates[i] (or combined with the reduction). */
void lower_scatter_elements(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *upd = lower_in(L, n, 2);
    Buf *out = lower_out(L, n, 0);
    int axis, vars[MAX_RANK];
    KOp op;
    if (!scatter_reduction(NULL, n, &op) || !rule_axis(NULL, n, ir_attr_int(n, "axis", 0), x->rank, &axis))
        return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, upd, KP_IN);
    kir_param(p, k, out, KP_INOUT);
    copy_nest(p, k, out, x);
    Expr *ui[MAX_RANK], *oi[MAX_RANK];
    lower_vars(k, ind->rank, vars);
    lower_var_idx(p, ind->rank, vars, ui);
    for (int d = 0; d < x->rank; d++)
        oi[d] = d == axis ? wrap_clamp(p, kx_load(p, ind, ui), x->dims[axis]) : ui[d];
    Stmt *s = scatter_store(p, out, oi, kx_load(p, upd, ui), op);
    k->body = ks_seq(k->body, lower_wrap(p, ind->rank, ind->dims, vars, s));
}

/* ---- OneHot ---- */

/* depth (constant) and the output axis; false after an error (g NULL: no message). */
static bool onehot_params(Graph *g, Node *n, int64_t *depth, int *axis) {
    Value *dv = g ? const_scalar(g, n, 1, "depth") : n->in[1];
    if (!dv) return false;
    *depth = dtype_is_float(dv->dtype) ? (int64_t)ir_const_float(dv, 0) : ir_const_int(dv, 0);
    if (*depth < 1) {
        if (g) error(ir_where(g, n), "depth %lld must be positive", (long long)*depth);
        return false;
    }
    return rule_axis(g, n, ir_attr_int(n, "axis", -1), n->in[0]->rank + 1, axis);
}

void infer_onehot(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *ind = n->in[0], *vals = n->in[2];
    int64_t depth, dims[MAX_RANK];
    int axis;
    if (ind->rank + 1 > MAX_RANK) {
        error(ir_where(g, n), "result rank exceeds %d", MAX_RANK);
        return;
    }
    if (ind->dtype == DT_BOOL || ir_numel(vals) != 2 || vals->rank != 1) {
        error(ir_where(g, n), "needs numeric indices and values [off, on]");
        return;
    }
    if (!onehot_params(g, n, &depth, &axis)) return;
    for (int d = 0, j = 0; d <= ind->rank; d++) dims[d] = d == axis ? depth : ind->dims[j++];
    ir_set_shape(n->out[0], vals->dtype, ind->rank + 1, dims);
}

/* out[i..., a, j...] = (indices[i..., j...] wrapped into depth) == a ? on : off */
void lower_onehot(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *ind = lower_in(L, n, 0), *vals = lower_in(L, n, 2), *out = lower_out(L, n, 0);
    int64_t depth;
    int axis, vars[MAX_RANK];
    if (!onehot_params(NULL, n, &depth, &axis)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, vals, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *oi[MAX_RANK], *ii[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oi);
    for (int d = 0, j = 0; d < out->rank; d++)
        if (d != axis) ii[j++] = oi[d];
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, ii));
    i = kx_select(p, kx_bin(p, K_LT, i, kx_index(p, 0)), kx_addc(p, kx_clone(p, i), depth),
                  kx_clone(p, i));
    Expr *off = kx_index(p, 0), *on = kx_index(p, 1);
    Expr *v = kx_select(p, kx_bin(p, K_EQ, i, oi[axis]), kx_load(p, vals, &on), kx_load(p, vals, &off));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oi, v));
}

/* ---- TopK ---- */

/* k (constant) and the axis; false after an error (g NULL: no message). */
static bool topk_params(Graph *g, Node *n, int64_t *kk, int *axis) {
    Value *x = n->in[0], *kv = n->in[1];
    if (!rule_axis(g, n, ir_attr_int(n, "axis", -1), x->rank, axis)) return false;
    if (g && (!kv->data || dtype_is_float(kv->dtype) || ir_numel(kv) != 1)) {
        error(ir_where(g, n), "k '%s' must be a compile-time constant integer (unsupported "
              "otherwise)", kv->name);
        return false;
    }
    *kk = ir_const_int(kv, 0);
    if (*kk < 0 || *kk > x->dims[*axis]) {
        if (g) error(ir_where(g, n), "k %lld out of range for axis %d of size %lld", (long long)*kk,
                     *axis, (long long)x->dims[*axis]);
        return false;
    }
    return true;
}

void infer_topk(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    int64_t kk, dims[MAX_RANK];
    int axis;
    if (x->rank == 0 || x->dtype == DT_BOOL) {
        error(ir_where(g, n), "input '%s' must be a numeric tensor of rank >= 1", x->name);
        return;
    }
    if (!topk_params(g, n, &kk, &axis)) return;
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = kk;
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], DT_INT64, x->rank, dims);
}

/* The value that comes before every element in the order: +inf / the type's largest for
 * largest=1, -inf / the type's smallest otherwise. */
static Expr *topk_start(Program *p, DType t, bool largest) {
    if (dtype_is_float(t)) return kx_const(p, t, largest ? INFINITY : -INFINITY);
    if (dtype_is_unsigned(t)) return kx_int(p, t, largest ? -1 : 0);
    int bits = (int)dtype_size(t) * 8;
    int64_t hi = (int64_t)(((uint64_t)1 << (bits - 1)) - 1);
    return kx_int(p, t, largest ? hi : -hi - 1);
}

/* For each row along the axis and j < k: pick the best element (v, t) that comes after the
 * previous pick (pv, pi), i.e. v worse than pv, or equal with a higher position; among those
 * the first best (a strict comparison while t ascends keeps the lower index on ties). */
void lower_topk(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *vals = lower_out(L, n, 0);
    Buf *inds = n->nout > 1 && n->out[1] ? lower_out(L, n, 1) : NULL;
    int64_t kk;
    int axis, r = x->rank, ov[MAX_RANK], no = 0;
    bool largest = ir_attr_int(n, "largest", 1) != 0;
    if (!topk_params(NULL, n, &kk, &axis)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, vals, KP_OUT);
    if (inds) kir_param(p, k, inds, KP_OUT);
    DType t = x->dtype;
    int pv = kir_scalar(p, k, t), pi = kir_scalar(p, k, DT_INDEX);
    int bv = kir_scalar(p, k, t), bi = kir_scalar(p, k, DT_INDEX), take = kir_scalar(p, k, DT_BOOL);
    int64_t od[MAX_RANK];
    Expr *xi[MAX_RANK], *oi[MAX_RANK];
    for (int d = 0; d < r; d++)
        if (d != axis) {
            ov[no] = kir_var(k);
            xi[d] = kx_var(p, ov[no]);
            od[no++] = x->dims[d];
        }
    int jv = kir_var(k), tv = kir_var(k);
    KOp worse = largest ? K_LT : K_GT, better = largest ? K_GT : K_LT;
    xi[axis] = kx_var(p, tv);
    Expr *v = kx_load(p, x, xi), *pos = kx_var(p, tv);
    Expr *after = kx_bin(p, K_OR, kx_bin(p, worse, v, kx_scalar(p, k, pv)),
                         kx_bin(p, K_AND, kx_bin(p, K_EQ, kx_clone(p, v), kx_scalar(p, k, pv)),
                                kx_bin(p, K_GT, pos, kx_scalar(p, k, pi))));
    Expr *best = kx_bin(p, K_OR, kx_bin(p, K_LT, kx_scalar(p, k, bi), kx_index(p, 0)),
                        kx_bin(p, better, kx_clone(p, v), kx_scalar(p, k, bv)));
    Stmt *step = ks_set(p, take, kx_bin(p, K_AND, after, best));
    ks_seq(step, ks_set(p, bi, kx_select(p, kx_scalar(p, k, take), kx_var(p, tv), kx_scalar(p, k, bi))));
    ks_seq(step, ks_set(p, bv, kx_select(p, kx_scalar(p, k, take), kx_clone(p, v), kx_scalar(p, k, bv))));

    Stmt *pick = ks_set(p, bi, kx_index(p, -1));
    ks_seq(pick, ks_set(p, bv, kx_scalar(p, k, pv)));
    ks_seq(pick, ks_loop(p, tv, 0, x->dims[axis], 1, step));
    for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, jv) : kx_clone(p, xi[d]);
    ks_seq(pick, ks_store(p, vals, oi, kx_scalar(p, k, bv)));
    if (inds) ks_seq(pick, ks_store(p, inds, oi, kx_cast(p, DT_INT64, kx_scalar(p, k, bi))));
    ks_seq(pick, ks_set(p, pv, kx_scalar(p, k, bv)));
    ks_seq(pick, ks_set(p, pi, kx_scalar(p, k, bi)));

    Stmt *row = ks_set(p, pv, topk_start(p, t, largest));
    ks_seq(row, ks_set(p, pi, kx_index(p, -1)));
    ks_seq(row, ks_loop(p, jv, 0, kk, 1, pick));
    k->body = lower_wrap(p, no, od, ov, row);
}

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

static bool quant_type(DType t) { return t == DT_UINT8 || t == DT_INT8; }

/* saturate(round(v) + zp) into t's range, v and zp float32 */
static Expr *quantize(Program *p, Expr *v, Expr *zp, DType t) {
    v = kx_un(p, K_ROUND, v);
    if (zp) v = kx_bin(p, K_ADD, v, kx_cast(p, DT_FLOAT, zp));
    double lo = t == DT_INT8 ? -128 : 0, hi = t == DT_INT8 ? 127 : 255;
    v = kx_bin(p, K_MIN, kx_bin(p, K_MAX, v, kx_const(p, DT_FLOAT, lo)), kx_const(p, DT_FLOAT, hi));
    return kx_cast(p, t, v);
}

void infer_quantize(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    int axis;
    DType t = zp ? zp->dtype : DT_UINT8;
    if ((x->dtype != DT_FLOAT && x->dtype != DT_INT32) || s->dtype != DT_FLOAT || !quant_type(t)) {
        error(ir_where(g, n), "needs float/int32 x, float scale and uint8/int8 zero point");
        return;
    }
    if (!quant_axis(g, n, x, &axis)) return;
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

static Expr *map_quantize(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = kx_cast(p, DT_FLOAT, v[0]);
    return quantize(p, kx_bin(p, K_DIV, x, v[1]), n->nin > 2 && n->in[2] ? v[2] : NULL,
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
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *s = n->in[1], *zp = n->nin > 2 ? n->in[2] : NULL;
    int axis;
    if ((!quant_type(x->dtype) && x->dtype != DT_INT32) || s->dtype != DT_FLOAT ||
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
    if (!rule_inputs_known(n)) return;
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
    return quantize(L->p, kx_bin(L->p, K_DIV, v[0], v[1]), v[2], DT_UINT8);
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
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, sc, KP_OUT);
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
    ks_seq(body, ks_store(p, zp, idx, quantize(p, z, NULL, DT_UINT8)));
    k->body = body;

    Buf *ins[3] = {x, sc, zp};
    lower_map(L, n, lower_out(L, n, 0), 3, ins, map_dynamic_quantize, NULL);
}

/* ---- MatMulInteger, QLinearMatMul ---- */

/* Input positions of MatMulInteger / QLinearMatMul: A, A's zero point, B, B's zero point. */
typedef struct IntMatIn { int a, azp, b, bzp; } IntMatIn;

static IntMatIn intmat_in(const Node *n) {
    if (n->op == OP_QLinearMatMul) return (IntMatIn){0, 2, 3, 5};
    return (IntMatIn){0, 2, 1, 3};
}

static Value *opt_in(const Node *n, int i) { return i < n->nin ? n->in[i] : NULL; }

static bool intmat_check(Graph *g, Node *n, MatShape *s) {
    IntMatIn ix = intmat_in(n);
    Value *a = n->in[ix.a], *b = n->in[ix.b];
    Value *azp = opt_in(n, ix.azp), *bzp = opt_in(n, ix.bzp);
    if (!quant_type(a->dtype) || !quant_type(b->dtype) || (azp && azp->dtype != a->dtype) ||
        (bzp && bzp->dtype != b->dtype)) {
        error(ir_where(g, n), "needs uint8/int8 operands with zero points of the same types");
        return false;
    }
    if (!rule_matmul_shape(a, b, s)) {
        error(ir_where(g, n), "shapes of A (rank %d) and B (rank %d) do not multiply", a->rank,
              b->rank);
        return false;
    }
    if ((azp && ir_numel(azp) != 1 && (azp->rank != 1 || azp->dims[0] != s->m)) ||
        (bzp && ir_numel(bzp) != 1 && (bzp->rank != 1 || bzp->dims[0] != s->nn))) {
        error(ir_where(g, n), "zero points must be scalars, per row of A or per column of B");
        return false;
    }
    if (n->op == OP_QLinearMatMul) {
        static const int scales[] = {1, 4, 6};
        for (int i = 0; i < 3; i++)
            if (n->in[scales[i]]->dtype != DT_FLOAT || ir_numel(n->in[scales[i]]) != 1) {
                error(ir_where(g, n), "scale '%s' must be a single float", n->in[scales[i]]->name);
                return false;
            }
        Value *yzp = n->in[7];
        if (!quant_type(yzp->dtype) || ir_numel(yzp) != 1) {
            error(ir_where(g, n), "y_zero_point '%s' must be a single uint8/int8", yzp->name);
            return false;
        }
    }
    return true;
}

void infer_matmul_integer(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    MatShape s;
    if (!intmat_check(g, n, &s)) return;
    DType t = n->op == OP_QLinearMatMul ? n->in[7]->dtype : DT_INT32;
    ir_set_shape(n->out[0], t, s.rank, s.dims);
}

/* An operand element as int32 minus its zero point (zi: the zero point's index when it is
 * per row/column). */
static Expr *centered(Program *p, Kernel *k, Buf *b, Expr **bi, Buf *zp, Expr *zi) {
    Expr *v = kx_cast(p, DT_INT32, kx_load(p, b, bi));
    if (!zp) return v;
    Expr *z = kir_numel(zp) == 1 || !zi ? load_first(p, k, zp) : kx_load(p, zp, &zi);
    kir_param(p, k, zp, KP_IN);
    return kx_bin(p, K_SUB, v, kx_cast(p, DT_INT32, z));
}

/* acc = sum_k (A - azp) * (B - bzp) in int32; MatMulInteger stores it, QLinearMatMul
 * requantises: saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero_point). */
void lower_matmul_integer(Lower *L, Node *n) {
    Program *p = L->p;
    IntMatIn ix = intmat_in(n);
    Buf *a = lower_in(L, n, ix.a), *b = lower_in(L, n, ix.b), *y = lower_out(L, n, 0);
    Buf *azp = lower_in(L, n, ix.azp), *bzp = lower_in(L, n, ix.bzp);
    MatShape s;
    if (!rule_matmul_shape(n->in[ix.a], n->in[ix.b], &s)) die("lower_matmul_integer %s: unchecked", n->name);
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, a, KP_IN);
    kir_param(p, k, b, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[MAX_RANK], kv, acc;
    lower_vars(k, y->rank, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *ai[MAX_RANK], *bi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    for (int d = 0; d < s.nba; d++) ai[d] = a->dims[d] == 1 ? kx_index(p, 0) : oi[s.nb - s.nba + d];
    for (int d = 0; d < s.nbb; d++) bi[d] = b->dims[d] == 1 ? kx_index(p, 0) : oi[s.nb - s.nbb + d];
    Expr *row = a->rank >= 2 ? oi[s.nb] : NULL, *col = b->rank >= 2 ? oi[y->rank - 1] : NULL;
    if (row) ai[a->rank - 2] = row;
    ai[a->rank - 1] = kx_var(p, kv);
    if (b->rank >= 2) bi[b->rank - 2] = kx_var(p, kv);
    bi[b->rank - 1] = col ? col : kx_var(p, kv);
    Expr *prod = kx_bin(p, K_MUL, centered(p, k, a, ai, azp, row ? kx_clone(p, row) : NULL),
                        centered(p, k, b, bi, bzp, col ? kx_clone(p, col) : NULL));
    Stmt *loop = ks_loop(p, kv, 0, s.kd, 1, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod)));
    loop->hints |= LH_REDUCTION;
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, DT_INT32, 0)), loop);
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_QLinearMatMul) {
        Expr *mul = kx_bin(p, K_MUL, load_first(p, k, lower_in(L, n, 1)), load_first(p, k, lower_in(L, n, 4)));
        mul = kx_bin(p, K_DIV, mul, load_first(p, k, lower_in(L, n, 6)));
        v = quantize(p, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v), mul),
                     load_first(p, k, lower_in(L, n, 7)), y->dtype);
    }
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- ConvInteger, QLinearConv ---- */

/* Input positions: x, x's zero point, w, w's zero point (-1: none). */
typedef struct IntConvIn { int x, xzp, w, wzp; } IntConvIn;

static IntConvIn intconv_in(const Node *n) {
    if (n->op == OP_QLinearConv) return (IntConvIn){0, 2, 3, 5};
    return (IntConvIn){0, 2, 1, 3};
}

static bool intconv_geom(Graph *g, Node *n, Window *c) {
    IntConvIn ix = intconv_in(n);
    Value *x = n->in[ix.x], *w = n->in[ix.w];
    int64_t grp = ir_attr_int(n, "group", 1);
    if (x->rank < 3 || w->rank != x->rank || grp < 1 || x->dims[1] != w->dims[1] * grp ||
        w->dims[0] % grp) {
        error(g ? ir_where(g, n) : n->name, "input, weights and group do not match");
        return false;
    }
    return rule_window(g, n, x, w->dims + 2, false, c);
}

void infer_conv_integer(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    IntConvIn ix = intconv_in(n);
    Value *x = n->in[ix.x], *w = n->in[ix.w];
    Value *xzp = opt_in(n, ix.xzp), *wzp = opt_in(n, ix.wzp);
    Window c;
    int64_t dims[MAX_RANK];
    if (!quant_type(x->dtype) || !quant_type(w->dtype) || (xzp && xzp->dtype != x->dtype) ||
        (wzp && wzp->dtype != w->dtype) || (xzp && ir_numel(xzp) != 1) ||
        (wzp && ir_numel(wzp) != 1 && ir_numel(wzp) != w->dims[0])) {
        error(ir_where(g, n), "needs uint8/int8 x and w, zero points of their types (x's a "
              "scalar, w's per tensor or per output channel)");
        return;
    }
    if (!intconv_geom(g, n, &c)) return;
    DType t = DT_INT32;
    if (n->op == OP_QLinearConv) {
        Value *b = opt_in(n, 8);
        t = n->in[7]->dtype;
        if (!quant_type(t) || (b && (b->dtype != DT_INT32 || ir_numel(b) != w->dims[0]))) {
            error(ir_where(g, n), "needs a uint8/int8 y_zero_point and an int32 bias per channel");
            return;
        }
    }
    dims[0] = x->dims[0];
    dims[1] = w->dims[0];
    for (int i = 0; i < c.nsp; i++) dims[2 + i] = c.out[i];
    ir_set_shape(n->out[0], t, x->rank, dims);
}

/* One element of a per-tensor or per-channel operand (index m). */
static Expr *per_channel(Program *p, Kernel *k, Buf *b, Expr *m) {
    if (kir_numel(b) == 1) return load_first(p, k, b);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, &m);
}

/* acc[n, m, o...] = sum over c < C/group and taps t, skipping padding, of
 *   (x[n, group_of(m) * C/group + c, o*s + t*d - pb] - xzp) * (w[m, c, t] - wzp[m])
 * then as lower_matmul_integer (QLinearConv adds the bias and requantises). */
void lower_conv_integer(Lower *L, Node *n) {
    Program *p = L->p;
    IntConvIn ix = intconv_in(n);
    Buf *x = lower_in(L, n, ix.x), *w = lower_in(L, n, ix.w), *y = lower_out(L, n, 0);
    Buf *xzp = lower_in(L, n, ix.xzp), *wzp = lower_in(L, n, ix.wzp);
    Window c;
    if (!intconv_geom(NULL, n, &c)) die("lower_conv_integer %s: unchecked", n->name);
    int64_t grp = ir_attr_int(n, "group", 1), cg = w->dims[1], mg = w->dims[0] / grp;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_CONTRACTION);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, w, KP_IN);
    kir_param(p, k, y, KP_OUT);
    int ov[MAX_RANK], tv[MAX_RANK], cv, acc;
    lower_vars(k, y->rank, ov);
    cv = kir_var(k);
    lower_vars(k, c.nsp, tv);
    acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *wi[MAX_RANK], *cond = NULL;
    lower_var_idx(p, y->rank, ov, oi);
    Expr *m = oi[1], *ch = kx_var(p, cv);
    xi[0] = oi[0];
    xi[1] = grp == 1 ? ch : kx_add(p, kx_mul(p, kx_bin(p, K_DIV, kx_clone(p, m), kx_index(p, mg)), cg),
                                   ch);
    wi[0] = kx_clone(p, m);
    wi[1] = kx_var(p, cv);
    for (int i = 0; i < c.nsp; i++) {
        wi[2 + i] = kx_var(p, tv[i]);
        xi[2 + i] = kx_addc(p, kx_add(p, kx_mul(p, oi[2 + i], c.s[i]), kx_mul(p, kx_var(p, tv[i]), c.d[i])),
                            -c.pb[i]);
        int64_t hi = (c.out[i] - 1) * c.s[i] + (c.k[i] - 1) * c.d[i] - c.pb[i];
        Expr *in = NULL;
        if (c.pb[i] > 0) in = kx_bin(p, K_GE, kx_clone(p, xi[2 + i]), kx_index(p, 0));
        if (hi >= c.in[i]) {
            Expr *lt = kx_bin(p, K_LT, kx_clone(p, xi[2 + i]), kx_index(p, c.in[i]));
            in = in ? kx_bin(p, K_AND, in, lt) : lt;
        }
        if (in) cond = cond ? kx_bin(p, K_AND, cond, in) : in;
    }
    Expr *xv = centered(p, k, x, xi, xzp, NULL);
    Expr *wv = kx_cast(p, DT_INT32, kx_load(p, w, wi));
    if (wzp) wv = kx_bin(p, K_SUB, wv, kx_cast(p, DT_INT32, per_channel(p, k, wzp, kx_clone(p, m))));
    Stmt *s = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, xv, wv)));
    if (cond) s = ks_if(p, cond, s, NULL);
    for (int i = c.nsp - 1; i >= 0; i--) s = ks_loop(p, tv[i], 0, c.k[i], 1, s);
    s = ks_loop(p, cv, 0, cg, 1, s);
    s->hints |= LH_REDUCTION;
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, DT_INT32, 0)), s);
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_QLinearConv) {
        Buf *b = lower_in(L, n, 8);
        if (b) v = kx_bin(p, K_ADD, v, per_channel(p, k, b, kx_clone(p, m)));
        Expr *mul = kx_bin(p, K_MUL, load_first(p, k, lower_in(L, n, 1)),
                           per_channel(p, k, lower_in(L, n, 4), kx_clone(p, m)));
        mul = kx_bin(p, K_DIV, mul, load_first(p, k, lower_in(L, n, 6)));
        v = quantize(p, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v), mul),
                     load_first(p, k, lower_in(L, n, 7)), y->dtype);
    }
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}
