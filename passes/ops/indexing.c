/* indexing.c - the indexing family: Gather, GatherElements, GatherND, Scatter,
 * ScatterElements, ScatterND, TensorScatter, OneHot.
 *
 * Constant indices outside [-size, size) of their axis are errors, as in ONNX; run-time ones
 * are wrapped when negative and clamped into their axis so that no load or store leaves its
 * buffer (ONNX leaves them undefined), and an empty axis cannot be indexed at all. The gathers iterate over the
 * output. The scatters copy data into the output and then update the positions the indices
 * name, so they write elements twice and read back what they wrote: the output is KP_INOUT.
 * TensorScatter (a KV cache update, opset 24) instead gathers: each element of the cache
 * takes the update's element that lands on it, or the past one.
 * OneHot's depth decides its shape and must be a compile-time constant. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- Gather ---- */

static bool is_index_type(DType t) { return t == DT_INT64 || t == DT_INT32; }

/* Gather's, GatherElements' and ScatterElements' indices: int32 or int64. */
static bool indices_ok(Graph *g, Node *n, const Value *ind) {
    if (is_index_type(ind->dtype)) return true;
    error(ir_where(g, n), "indices '%s' are %s, not int32/int64", ind->name, dtype_name(ind->dtype));
    return false;
}

/* Indices into data x: element i of ind indexes axis first + i % m. Constant ones must lie in
 * [-size, size), as ONNX requires (the clamp below would hide a bad one); run-time ones are
 * clamped into their axis, which therefore must not be empty. False after an error. */
static bool indices_in_range(Graph *g, Node *n, const Value *ind, const Value *x, int first, int m) {
    int64_t count = ir_numel(ind);
    if (count == 0) return true;
    for (int j = 0; j < m; j++)
        if (x->dims[first + j] == 0) {
            error(ir_where(g, n), "indices '%s' index axis %d of '%s', which is empty", ind->name,
                  first + j, x->name);
            return false;
        }
    for (int64_t i = 0; ind->data && i < count; i++) {
        int64_t v = ir_const_int(ind, i), dim = x->dims[first + i % m];
        if (v < -dim || v >= dim) {
            error(ir_where(g, n), "index %lld out of range for axis %d of size %lld",
                  (long long)v, first + (int)(i % m), (long long)dim);
            return false;
        }
    }
    return true;
}

void infer_gather(Graph *g, Node *n) {
    Value *x = n->in[0], *ind = n->in[1];
    int axis;
    if (x->rank == 0) {
        error(ir_where(g, n), "data '%s' is a scalar", x->name);
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (!indices_ok(g, n, ind)) return;
    int rank = x->rank - 1 + ind->rank;
    if (rank > MAX_RANK) {
        error(ir_where(g, n), "result rank %d exceeds %d", rank, MAX_RANK);
        return;
    }
    if (!indices_in_range(g, n, ind, x, axis, 1)) return;
    int64_t dims[MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++) dims[r++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++) dims[r++] = ind->dims[d];
    for (int d = axis + 1; d < x->rank; d++) dims[r++] = x->dims[d];
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* The position along the gathered axis. A constant scalar index is folded; other indices are
 * wrapped when negative and clamped into the axis, since the data must never be read out of
 * bounds even for a bad index (infer_gather refuses bad constant ones, but the clamp does not
 * rely on constants having been seen there). */
static Expr *gather_index(Lower *L, Node *n, Buf *ind, Expr **idx, int64_t dim) {
    Program *p = L->p;
    Value *v = n->in[1];
    if (v->data && ir_numel(v) == 1) {
        int64_t i = ir_const_int(v, 0);
        i = i < 0 ? i + dim : i;
        return kx_index(p, MIN(MAX(i, 0), dim - 1));
    }
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, idx));
    Expr *neg = kx_bin(p, K_LT, i, kx_index(p, 0));
    i = kx_select(p, neg, kx_addc(p, kx_clone(p, i), dim), kx_clone(p, i));
    i = kx_bin(p, K_MAX, i, kx_index(p, 0));
    return kx_bin(p, K_MIN, i, kx_index(p, dim - 1));
}

void lower_gather(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int axis, q = ind->rank, vars[MAX_RANK];
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    Expr *oidx[MAX_RANK], *xidx[MAX_RANK];
    Buf *read = !n->in[1]->data || ir_numel(n->in[1]) != 1 ? ind : NULL;  /* else folded */
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x, read), out, vars, oidx);
    for (int d = 0; d < axis; d++) xidx[d] = oidx[d];
    xidx[axis] = gather_index(L, n, ind, oidx + axis, x->dims[axis]);
    for (int d = axis + 1; d < x->rank; d++) xidx[d] = oidx[d - 1 + q];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, x, xidx)));
}

/* ---- GatherElements ---- */

void infer_gather_elements(Graph *g, Node *n) {
    Value *x = n->in[0], *ind = n->in[1];
    int axis;
    if (x->rank == 0 || ind->rank != x->rank) {
        error(ir_where(g, n), "data '%s' (rank %d) and indices '%s' (rank %d) need the same "
              "rank >= 1", x->name, x->rank, ind->name, ind->rank);
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (!indices_ok(g, n, ind)) return;
    for (int d = 0; d < x->rank; d++)
        if (d != axis && ind->dims[d] > x->dims[d]) {
            error(ir_where(g, n), "indices dim %d (%lld) exceeds data's (%lld)", d,
                  (long long)ind->dims[d], (long long)x->dims[d]);
            return;
        }
    if (!indices_in_range(g, n, ind, x, axis, 1)) return;
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
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x, ind), out, vars, idx);
    int64_t dim = x->dims[axis];
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, idx));
    i = kx_select(p, kx_bin(p, K_LT, i, kx_index(p, 0)), kx_addc(p, i, dim), i);
    i = kx_bin(p, K_MIN, kx_bin(p, K_MAX, i, kx_index(p, 0)), kx_index(p, dim - 1));
    for (int d = 0; d < x->rank; d++) xi[d] = d == axis ? i : idx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- helpers ---- */


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
    Value *x = n->in[0], *ind = n->in[1];
    int m, b, r = 0;
    int64_t dims[MAX_RANK];
    if (!gathernd_check(g, n, &m, &b) || !indices_in_range(g, n, ind, x, b, m)) return;
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
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *ii[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x, ind), out, vars, oi);
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

/* The scatters' kernel: data, indices and updates in, out = data copied first (so out is
 * KP_INOUT), then vars/ui: the loop index of the update nest, `rank` dims. */
static Kernel *scatter_kernel(Lower *L, Node *n, Buf *out, int rank, int *vars, Expr **ui) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, lower_in(L, n, 1), lower_in(L, n, 2)), out,
                             NULL, NULL);
    kir_param(p, k, out, KP_IN);
    copy_nest(p, k, out, x);
    lower_vars(k, rank, vars);
    lower_var_idx(p, rank, vars, ui);
    return k;
}

/* The scatters' result has data's shape, once the operand shapes were found to agree (ok). */
static void scatter_shape(Graph *g, Node *n, bool ok) {
    Value *x = n->in[0], *ind = n->in[1], *upd = n->in[2];
    if (!ok) {
        error(ir_where(g, n), "shapes of data '%s', indices '%s' and updates '%s' do not match",
              x->name, ind->name, upd->name);
        return;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

void infer_scatternd(Graph *g, Node *n) {
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
    if (ok && !indices_in_range(g, n, ind, x, 0, (int)m)) return;
    scatter_shape(g, n, ok);
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
    Expr *ui[MAX_RANK], *oi[MAX_RANK], *ii[MAX_RANK];
    Kernel *k = scatter_kernel(L, n, out, upd->rank, vars, ui);
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
    Value *x = n->in[0], *ind = n->in[1], *upd = n->in[2];
    int axis;
    KOp op;
    if (!scatter_reduction(g, n, &op)) return;
    if (x->rank == 0 || !rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    if (!indices_ok(g, n, ind)) return;
    bool ok = ind->rank == x->rank && upd->dtype == x->dtype && ir_same_shape(ind, upd);
    for (int d = 0; ok && d < x->rank; d++) ok = d == axis || ind->dims[d] <= x->dims[d];
    if (ok && !indices_in_range(g, n, ind, x, axis, 1)) return;
    scatter_shape(g, n, ok);
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
    Expr *ui[MAX_RANK], *oi[MAX_RANK];
    Kernel *k = scatter_kernel(L, n, out, ind->rank, vars, ui);
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
    Expr *oi[MAX_RANK], *ii[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(ind, vals), out, vars, oi);
    for (int d = 0, j = 0; d < out->rank; d++)
        if (d != axis) ii[j++] = oi[d];
    Expr *i = kx_cast(p, DT_INDEX, kx_load(p, ind, ii));
    i = kx_select(p, kx_bin(p, K_LT, i, kx_index(p, 0)), kx_addc(p, kx_clone(p, i), depth),
                  kx_clone(p, i));
    Expr *off = kx_index(p, 0), *on = kx_index(p, 1);
    Expr *v = kx_select(p, kx_bin(p, K_EQ, i, oi[axis]), kx_load(p, vals, &on), kx_load(p, vals, &off));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oi, v));
}

/* ---- TensorScatter (opset 24) ---- */

/* The sequence axis (not the batch); false after an error (g NULL: no message). */
static bool tscatter_axis(Graph *g, Node *n, int *axis) {
    Value *c = n->in[0], *u = n->in[1], *w = rule_opt_in(n, 2);
    const char *m = ir_attr_str(n, "mode", "linear");
    if (!rule_axis(g, n, ir_attr_int(n, "axis", -2), c->rank, axis)) return false;
    bool ok = *axis > 0 && c->rank == u->rank && c->dtype == u->dtype &&
              (!strcmp(m, "linear") || !strcmp(m, "circular"));
    for (int d = 0; ok && d < c->rank; d++)
        ok = d == *axis ? u->dims[d] <= c->dims[d] : u->dims[d] == c->dims[d];
    if (!ok) {
        if (g) error(ir_where(g, n), "update %s must match past_cache %s but along the sequence "
                     "axis %d (not 0), of the same type, mode linear or circular",
                     rule_dims_str(g, u->rank, u->dims), rule_dims_str(g, c->rank, c->dims), *axis);
        return false;
    }
    if (w && (w->dtype != DT_INT64 || w->rank != 1 || w->dims[0] != c->dims[0])) {
        if (g) error(ir_where(g, n), "write_indices must be int64 [%lld]", (long long)c->dims[0]);
        return false;
    }
    return true;
}

void infer_tensor_scatter(Graph *g, Node *n) {
    int axis;
    if (!tscatter_axis(g, n, &axis)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, n->in[0]->dims);
}

/* present[.., m, ..] = update[.., j, ..] if 0 <= j < L, else past[.., m, ..], with
 * j = m - write_indices[b] (linear) or that modulo the cache length M (circular); the
 * update's index is clamped into it so that the load never leaves it. Positions a linear
 * write past the end would reach are dropped (the spec requires they are none). */
void lower_tensor_scatter(Lower *L, Node *n) {
    Program *p = L->p;
    int axis;
    if (!tscatter_axis(NULL, n, &axis)) die("lower_tensor_scatter %s: unchecked", n->name);
    Buf *c = lower_in(L, n, 0), *u = lower_in(L, n, 1), *w = lower_in(L, n, 2), *y = lower_out(L, n, 0);
    int ov[MAX_RANK];
    Expr *oi[MAX_RANK], *ui[MAX_RANK], *ci[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(c, u, w), y, ov, oi);
    int64_t M = c->dims[axis], len = u->dims[axis];
    Expr *j = kx_clone(p, oi[axis]);
    if (w) {
        Expr *bi[1] = {kx_clone(p, oi[0])};
        Expr *wi = kx_cast(p, DT_INDEX, kx_load(p, w, bi));
        if (!strcmp(ir_attr_str(n, "mode", "linear"), "circular"))
            j = kx_bin(p, K_REM, kx_addc(p, kx_bin(p, K_SUB, j, kx_bin(p, K_REM, wi, kx_index(p, M))), M),
                       kx_index(p, M));
        else
            j = kx_bin(p, K_SUB, j, wi);
    }
    Expr *in = kx_and(p, kx_bin(p, K_GE, kx_clone(p, j), kx_index(p, 0)),
                      kx_bin(p, K_LT, kx_clone(p, j), kx_index(p, len)));
    for (int d = 0; d < c->rank; d++) {
        ci[d] = kx_clone(p, oi[d]);
        ui[d] = d == axis ? kx_bin(p, K_MIN, kx_bin(p, K_MAX, j, kx_index(p, 0)), kx_index(p, len - 1))
                          : kx_clone(p, oi[d]);
    }
    Expr *v = len ? kx_select(p, in, kx_load(p, u, ui), kx_load(p, c, ci)) : kx_load(p, c, ci);
    k->body = lower_wrap(p, y->rank, y->dims, ov, ks_store(p, y, oi, v));
}
