/* reduce.c - the reduction and scan family: ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
 * ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare, ArgMax ArgMin, Hardmax,
 * CumSum, CumProd and TopK.
 *
 * Reductions keep the contraction shape: parallel loops over the output dims outermost,
 * reduction loops inside accumulating into scalar registers, one store per output element.
 * The scans keep their running value in scalar registers, one output row at a time; CumSum's
 * axis may be a run-time value, and then the kernel holds one loop nest per possible axis
 * behind an `if`. TopK keeps write-once without scratch: the j-th result is the best element
 * among those that come after the (j-1)-th in the total order (value, then lower index
 * first), so each row is a k-step selection scan remembering only the previous pick. */
#include <math.h>
#include <string.h>

#include "../lower.h"

void infer_reduce(Graph *g, Node *n) {
    Value *x = n->in[0];
    bool mask[MAX_RANK], keep = ir_attr_int(n, "keepdims", 1) != 0;
    int64_t dims[MAX_RANK];
    int r = 0, any = rule_reduce_mask(g, n, mask);
    if (any < 0) return;
    RedKind kind = rule_red_kind(n);   /* square roots and logarithms: of floats only, here */
    if ((kind == R_L2 || kind == R_LOGSUM || kind == R_LOGSUMEXP) && !rule_float_input(g, n, 0)) return;
    for (int d = 0; d < x->rank; d++) {
        if (!any || !mask[d]) dims[r++] = x->dims[d];
        else if (keep) dims[r++] = 1;
    }
    ir_set_shape(n->out[0], x->dtype, r, dims);
}

/* Reduce*. With nothing to reduce (empty axes and noop_with_empty_axes) Sum, Mean, Max and Min
 * are their input (a view); the others still apply their element function (|x|, x^2, log x). */
void lower_reduce(Lower *L, Node *n) {
    bool mask[MAX_RANK];
    Buf *x = lower_in(L, n, 0);
    RedKind kind = rule_red_kind(n);
    int any = rule_reduce_mask(NULL, n, mask);
    if (any < 0) die("lower_reduce %s: node not checked by infer_reduce", n->name);
    if (!any && kind <= R_MIN) {
        lower_view(L, n, 0, x);
        return;
    }
    for (int d = 0; d < x->rank && !any; d++) mask[d] = false;
    rule_emit_reduce(L, n, x, lower_out(L, n, 0), mask,
                     !any || ir_attr_int(n, "keepdims", 1) != 0, kind);
}


/* ---- ArgMax, ArgMin, Hardmax: position of the extreme value ---- */

void infer_arg(Graph *g, Node *n) {
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
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, ov, oi);
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
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, NULL, NULL);
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
    Value *x = n->in[0];
    int axis;
    if (x->rank == 0 || x->dtype == DT_BOOL) {
        error(ir_where(g, n), "input '%s' must be a numeric tensor of rank >= 1", x->name);
        return;
    }
    if (!rule_int_scalar(g, n, 1, "axis")) return;
    if (n->in[1]->data && !rule_axis(g, n, ir_const_int(n->in[1], 0), x->rank, &axis)) return;
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* The scan along `axis` for every position of the other dims, in order or reversed:
 *   acc = 0; for j: acc += x[j]; y[j] = acc    (exclusive: store before adding)
 * CumProd (opset 26) the same with acc = 1 and *=. */
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
    bool prod = n->op == OP_CumProd;
    Stmt *add = ks_set(p, acc, kx_bin(p, prod ? K_MUL : K_ADD, kx_scalar(p, k, acc), kx_load(p, x, idx)));
    Stmt *store = ks_store(p, y, idx, kx_scalar(p, k, acc));
    Stmt *step = ir_attr_int(n, "exclusive", 0) ? ks_seq(store, add) : ks_seq(add, store);
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, x->dtype, prod)), ks_loop(p, vars[axis], 0, len, 1, step));
    return lower_wrap(p, no, od, ov, body);
}

/* A constant axis gives one nest; a run-time one gives a nest per possible axis, each behind
 * `if (axis == a || axis == a - rank)`. */
void lower_cumsum(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, NULL, NULL);
    int acc = kir_scalar(p, k, x->dtype), r = x->rank, axis;
    if (n->in[1]->data) {
        if (!rule_axis(L->g, n, ir_const_int(n->in[1], 0), r, &axis)) return;
        k->body = cumsum_nest(p, k, n, x, y, axis, acc);
        return;
    }
    Expr *ax = rule_index_operand(L, n, k, 1);
    for (int a = 0; a < r; a++) {
        Expr *is = kx_bin(p, K_OR, kx_bin(p, K_EQ, ax, kx_index(p, a)),
                          kx_bin(p, K_EQ, ax, kx_index(p, a - r)));
        k->body = ks_seq(k->body, ks_if(p, is, cumsum_nest(p, k, n, x, y, a, acc), NULL));
    }
}

/* ---- TopK ---- */

/* k and the axis; false after an error (g NULL: no message). A k known only at run time (a
 * one-element integer tensor, as exporters write min(K, a run-time count)) gives *kk = the
 * axis' capacity: the output is data-dependent along the axis, min(k, its length) at run time
 * (dynamic.c). */
static bool topk_params(Graph *g, Node *n, int64_t *kk, int *axis) {
    Value *x = n->in[0], *kv = n->in[1];
    if (!rule_axis(g, n, ir_attr_int(n, "axis", -1), x->rank, axis)) return false;
    if (dtype_is_float(kv->dtype) || kv->dtype == DT_BOOL || ir_numel(kv) != 1) {
        if (g) error(ir_where(g, n), "k '%s' must be a one-element integer tensor", kv->name);
        return false;
    }
    if (!kv->data) {                    /* a run-time k: at most the axis, or its proven bound */
        int64_t hi;
        *kk = x->dims[*axis];
        if (dyn_int_upper(kv, &hi) && hi < *kk) *kk = MAX(hi, 1);
        return true;
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

/* Many picks (k above a few times log2 of the axis' length; a detector's post-process takes
 * 300 of every class's thousands of candidates with a run-time k): each row is copied with its
 * positions into scratch and sorted (rule_merge_sort: O(n log n), stable, so the lower index
 * comes first on ties), and the first k are the picks; the selection below is O(k n). */
static bool topk_sorts(int64_t kk, int64_t n) {
    int lg = 0;
    while (lg < 62 && ((int64_t)1 << lg) < n) lg++;
    return kk > 2 * lg + 2;
}

/* A variable for each dim of x but the axis (the rows TopK runs along): ov[] and od[] for
 * lower_wrap, xi[d] the index of dim d; returns their count. */
static int row_vars(Program *p, Kernel *k, const Buf *x, int axis, int *ov, int64_t *od, Expr **xi) {
    int no = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != axis) {
            ov[no] = kir_var(k);
            xi[d] = kx_var(p, ov[no]);
            od[no++] = x->dims[d];
        }
    return no;
}

static void topk_sorted(Lower *L, Node *n, Kernel *k, Buf *x, Buf *vals, Buf *inds, int64_t kk, int axis, bool largest) {
    Program *p = L->p;
    int r = x->rank, ov[MAX_RANK];
    int64_t len = x->dims[axis], od[MAX_RANK];
    DType it = len <= INT32_MAX ? DT_INT32 : DT_INT64;
    const char *kn = lower_kname(L, n);
    Buf *key = kir_buf_new(p, arena_printf(p->arena, "%s.key", kn), x->dtype, 1, &len, B_TEMP);
    Buf *key2 = kir_buf_new(p, arena_printf(p->arena, "%s.key2", kn), x->dtype, 1, &len, B_TEMP);
    Buf *idx = kir_buf_new(p, arena_printf(p->arena, "%s.pos", kn), it, 1, &len, B_TEMP);
    Buf *idx2 = kir_buf_new(p, arena_printf(p->arena, "%s.pos2", kn), it, 1, &len, B_TEMP);
    Expr *xi[MAX_RANK], *oi[MAX_RANK];
    int no = row_vars(p, k, x, axis, ov, od, xi);
    int m = kir_scalar(p, k, DT_INDEX), tv = kir_var(k), jv = kir_var(k), zv = kir_var(k);
    Expr *have, *cnt = dyn_topk_bounds(L, n, k, axis, &have);
    Stmt *row = ks_set(p, m, have ? have : kx_index(p, len));
    xi[axis] = kx_var(p, tv);
    Expr *at = kx_var(p, tv), *at2 = kx_var(p, tv);
    Stmt *fill = ks_store(p, key, &at, kx_load(p, x, xi));
    ks_seq(fill, ks_store(p, idx, &at2, kx_cast(p, it, kx_var(p, tv))));
    ks_seq(row, rule_loop_range(p, tv, kx_index(p, 0), kx_scalar(p, k, m), fill));
    ks_seq(row, rule_merge_sort(p, k, key, idx, key2, idx2, m, largest ? K_GT : K_LT, kk));
    for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, jv) : kx_clone(p, xi[d]);
    Expr *j1 = kx_var(p, jv), *j2 = kx_var(p, jv);
    Stmt *pick = ks_store(p, vals, oi, kx_load(p, key, &j1));
    if (inds) {
        for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, jv) : kx_clone(p, xi[d]);
        ks_seq(pick, ks_store(p, inds, oi, kx_cast(p, DT_INT64, kx_load(p, idx, &j2))));
    }
    Stmt *picks = ks_loop(p, jv, 0, kk, 1, pick);
    ks_seq(row, picks);
    if (cnt) {          /* the rest of the capacity: zeros, which nothing reports */
        picks->hi = cnt;
        for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, zv) : kx_clone(p, xi[d]);
        Stmt *zero = ks_store(p, vals, oi, kx_const(p, x->dtype, 0));
        for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, zv) : kx_clone(p, xi[d]);
        if (inds) ks_seq(zero, ks_store(p, inds, oi, kx_int(p, DT_INT64, 0)));
        Stmt *rest = ks_loop(p, zv, 0, kk, 1, zero);
        rest->lo = kx_clone(p, cnt);
        ks_seq(row, rest);
    }
    k->body = lower_wrap(p, no, od, ov, row);
}

/* For each row along the axis and j < k: pick the best element (v, t) that comes after the
 * previous pick (pv, pi), i.e. v worse than pv, or equal with a higher position; among those
 * the first best (a strict comparison while t ascends keeps the lower index on ties). */
void lower_topk(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *vals = lower_out(L, n, 0);
    Buf *inds = n->nout > 1 && n->out[1] ? lower_out(L, n, 1) : NULL;
    int64_t kk;
    int axis, r = x->rank, ov[MAX_RANK];
    bool largest = ir_attr_int(n, "largest", 1) != 0;
    if (!topk_params(NULL, n, &kk, &axis)) return;
    kk = vals->dims[axis];              /* the capacity inference gave (a run-time k's bound) */
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), vals, NULL, NULL);
    if (inds) kir_param(p, k, inds, KP_OUT);
    if (topk_sorts(kk, x->dims[axis])) {
        topk_sorted(L, n, k, x, vals, inds, kk, axis, largest);
        return;
    }
    DType t = x->dtype;
    int pv = kir_scalar(p, k, t), pi = kir_scalar(p, k, DT_INDEX);
    int bv = kir_scalar(p, k, t), bi = kir_scalar(p, k, DT_INDEX), take = kir_scalar(p, k, DT_BOOL);
    int64_t od[MAX_RANK];
    Expr *xi[MAX_RANK], *oi[MAX_RANK];
    int no = row_vars(p, k, x, axis, ov, od, xi);
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
    /* a run-time k (dynamic.c): only its picks are made, each scanning the axis' valid part
     * only (a post-process takes min(K, survivors) of each class: quadratic in the capacity
     * otherwise); the rest of the capacity gets zeros, which nothing reports */
    Expr *len, *cnt = dyn_topk_bounds(L, n, k, axis, &len);
    Stmt *scan = ks_loop(p, tv, 0, x->dims[axis], 1, step);
    if (len) scan->hi = len;
    ks_seq(pick, scan);
    for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, jv) : kx_clone(p, xi[d]);
    ks_seq(pick, ks_store(p, vals, oi, kx_scalar(p, k, bv)));
    if (inds) ks_seq(pick, ks_store(p, inds, oi, kx_cast(p, DT_INT64, kx_scalar(p, k, bi))));
    ks_seq(pick, ks_set(p, pv, kx_scalar(p, k, bv)));
    ks_seq(pick, ks_set(p, pi, kx_scalar(p, k, bi)));

    Stmt *row = ks_set(p, pv, topk_start(p, t, largest));
    ks_seq(row, ks_set(p, pi, kx_index(p, -1)));
    Stmt *picks = ks_loop(p, jv, 0, kk, 1, pick);
    ks_seq(row, picks);
    if (cnt) {
        picks->hi = cnt;
        int zv = kir_var(k);
        for (int d = 0; d < r; d++) oi[d] = d == axis ? kx_var(p, zv) : kx_clone(p, xi[d]);
        Stmt *zero = ks_store(p, vals, oi, kx_const(p, t, 0));
        if (inds) ks_seq(zero, ks_store(p, inds, oi, kx_int(p, DT_INT64, 0)));
        Stmt *rest = ks_loop(p, zv, 0, kk, 1, zero);
        rest->lo = kx_clone(p, cnt);
        ks_seq(row, rest);
    }
    k->body = lower_wrap(p, no, od, ov, row);
}
