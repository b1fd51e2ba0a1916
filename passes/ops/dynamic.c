/* dynamic.c - the ops whose output shape depends on the input values: NonZero, Compress,
 * Unique, NonMaxSuppression.
 *
 * There is no heap: each such output gets a buffer of the largest size the op can produce for
 * any input values (its capacity, the static dims of the graph value, which is marked dyn), and
 * the kernel writes the actual dims into an int64 dims buffer (lower_dims: for a graph output,
 * the extra output the header contract describes). The data is packed row-major with the
 * actual dims at the start of the buffer and the rest is zeroed, so every element of the
 * capacity is stored exactly once, as the kernel IR's write-once rule wants; since the count
 * is needed before the first packed store, the kernels count in a first pass and store in a
 * second. When the shape-deciding inputs are constants (a constant NonZero input, a constant
 * Compress condition), the shape rule computes the exact shape and the value is not dyn. */
#include <math.h>
#include <string.h>

#include "../lower.h"

static Expr *sreg(Program *p, Kernel *k, int r) { return kx_scalar(p, k, r); }

/* buf[unravel(lin)]: the element at row-major position lin of a buffer of any rank. */
static Expr **unravel(Program *p, const Buf *b, Expr *lin, Expr **idx) {
    for (int d = b->rank - 1; d >= 0; d--) {
        Expr *dim = kx_index(p, b->dims[d]);
        idx[d] = d == 0 ? lin : kx_bin(p, K_REM, kx_clone(p, lin), dim);
        if (d) lin = kx_bin(p, K_DIV, lin, kx_index(p, b->dims[d]));
    }
    return idx;
}

static Expr *load_lin(Program *p, Buf *b, Expr *lin) {
    Expr *idx[MAX_RANK];
    return kx_load(p, b, unravel(p, b, lin, idx));
}

static Stmt *store_lin(Program *p, Buf *b, Expr *lin, Expr *val) {
    Expr *idx[MAX_RANK];
    if (val->type != b->dtype) val = kx_cast(p, b->dtype, val);
    return ks_store(p, b, unravel(p, b, lin, idx), val);
}

/* r = r + 1 on an index register */
static Stmt *incr(Program *p, Kernel *k, int r) {
    return ks_set(p, r, kx_addc(p, sreg(p, k, r), 1));
}

/* The end of a kernel that wrote the first prod(actual) elements of out (packed): zero the rest
 * of the capacity and store the actual dims (DT_INDEX expressions, consumed) into dims. */
static Stmt *finish_dyn(Program *p, Kernel *k, Buf *out, Buf *dims, Expr **actual) {
    kir_param(p, k, dims, KP_OUT);
    Expr *used = kx_index(p, 1);
    Stmt *s = NULL;
    for (int d = 0; d < out->rank; d++) {
        used = d ? kx_bin(p, K_MUL, used, kx_clone(p, actual[d])) : kx_clone(p, actual[d]);
        Expr *di = kx_index(p, d);
        s = ks_seq(s, ks_store(p, dims, &di, kx_cast(p, DT_INT64, actual[d])));
    }
    int j = kir_var(k);
    Stmt *z = ks_if(p, kx_bin(p, K_GE, kx_var(p, j), used),
                    store_lin(p, out, kx_var(p, j), kx_const(p, out->dtype, 0)), NULL);
    return ks_seq(s, ks_loop(p, j, 0, kir_numel(out), 1, z));
}

/* for (var = 0; var < hi; var++) body, hi an index expression evaluated once before the loop
 * (a run-time count: the loop runs over the valid part of a data-dependent value only) */
static Stmt *dyn_loop(Program *p, int var, Expr *hi, Stmt *body) {
    Stmt *s = ks_loop(p, var, 0, hi->kind == E_CONST ? hi->i : 1, 1, body);
    if (hi->kind != E_CONST) s->hi = hi;
    return s;
}

/* The run-time length of dim d of a data-dependent value (dims: its dims buffer), clamped to
 * its capacity cap, so that a loop bounded by it never leaves the buffer whatever it holds. */
static Expr *dyn_loop_bound(Program *p, Buf *dims, int d, int64_t cap) {
    Expr *di = kx_index(p, d);
    return kx_bin(p, K_MAX, kx_index(p, 0),
                  kx_bin(p, K_MIN, kx_cast(p, DT_INDEX, kx_load(p, dims, &di)), kx_index(p, cap)));
}

static Expr *nonzero(Program *p, Expr *v) {
    return kx_bin(p, K_NE, v, kx_const(p, v->type, 0));
}

/* ---- NonZero ---- */

void infer_nonzero(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank == 0) {
        error(ir_where(g, n), "input '%s' is a scalar", x->name);
        return;
    }
    int64_t cnt = ir_numel(x);
    if (x->data) {
        cnt = 0;
        for (int64_t i = 0; i < ir_numel(x); i++) cnt += ir_const_float(x, i) != 0;
    }
    ir_set_shape(n->out[0], DT_INT64, 2, (int64_t[]){x->rank, cnt});
    n->out[0]->dyn = !x->data;
    n->out[0]->dynmask = 2;
}

static Expr *inside(Program *p, const Value *v, Buf *dims, Expr **idx);

/* x[idx] != 0, and (x of data-dependent dims, at the capacity's strides) idx in its valid box:
 * the coordinates are the same either way. */
static Expr *nonzero_at(Lower *L, Node *n, Buf *x, Expr **idx) {
    Program *p = L->p;
    Expr *nz = nonzero(p, kx_load(p, x, idx));
    if (!n->in[0]->dyn) return nz;
    return kx_bin(p, K_AND, inside(p, n->in[0], L->vdims[n->in[0]->id], idx), nz);
}

void lower_nonzero(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, NULL, NULL);
    if (n->in[0]->dyn) kir_param(p, k, L->vdims[n->in[0]->id], KP_IN);
    int r = x->rank, cnt = kir_scalar(p, k, DT_INDEX), pos = kir_scalar(p, k, DT_INDEX);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    /* pass 1: count */
    lower_vars(k, r, vars);
    lower_var_idx(p, r, vars, idx);
    Stmt *body = ks_set(p, cnt, kx_index(p, 0));
    ks_seq(body, lower_wrap(p, r, x->dims, vars, ks_if(p, nonzero_at(L, n, x, idx), incr(p, k, cnt), NULL)));
    /* pass 2: row d of the [rank, cnt] result holds the d-th coordinates */
    lower_vars(k, r, vars);
    lower_var_idx(p, r, vars, idx);
    Stmt *put = NULL;
    for (int d = 0; d < r; d++) {
        Expr *lin = kx_add(p, kx_bin(p, K_MUL, kx_index(p, d), sreg(p, k, cnt)), sreg(p, k, pos));
        put = ks_seq(put, store_lin(p, out, lin, kx_cast(p, DT_INT64, kx_var(p, vars[d]))));
    }
    ks_seq(put, incr(p, k, pos));
    ks_seq(body, ks_set(p, pos, kx_index(p, 0)));
    ks_seq(body, lower_wrap(p, r, x->dims, vars, ks_if(p, nonzero_at(L, n, x, idx), put, NULL)));
    Expr *actual[2] = {kx_index(p, r), sreg(p, k, cnt)};
    k->body = ks_seq(body, finish_dyn(p, k, out, lower_dims(L, n, 0), actual));
}

/* ---- Compress ---- */

/* The kept length along the axis: the condition is cut to the axis' length. */
static bool compress_geometry(Graph *g, Node *n, int *axis, int64_t *pre, int64_t *len, int64_t *post) {
    Value *x = n->in[0], *c = n->in[1];
    Attr *a = ir_attr(n, "axis");
    if (c->rank != 1) {
        if (g) error(ir_where(g, n), "condition '%s' is not 1-D", c->name);
        return false;
    }
    *axis = -1;
    *pre = 1, *post = 1, *len = ir_numel(x);
    if (a) {
        if (!rule_axis(g, n, a->i, x->rank, axis)) return false;
        *len = x->dims[*axis];
        for (int d = 0; d < x->rank; d++) {
            if (d < *axis) *pre *= x->dims[d];
            if (d > *axis) *post *= x->dims[d];
        }
    }
    *len = MIN(*len, c->dims[0]);
    return true;
}

void infer_compress(Graph *g, Node *n) {
    Value *x = n->in[0], *c = n->in[1];
    int axis;
    int64_t pre, len, post;
    if (!compress_geometry(g, n, &axis, &pre, &len, &post)) return;
    int64_t kept = len;
    if (c->data) {
        kept = 0;
        for (int64_t i = 0; i < len; i++) kept += ir_const_float(c, i) != 0;
    }
    if (axis < 0) {
        ir_set_shape(n->out[0], x->dtype, 1, &kept);
    } else {
        int64_t d[MAX_RANK];
        memcpy(d, x->dims, sizeof d);
        d[axis] = kept;
        ir_set_shape(n->out[0], x->dtype, x->rank, d);
    }
    n->out[0]->dyn = !c->data;
    n->out[0]->dynmask = 1u << (axis < 0 ? 0 : axis);
}

void lower_compress(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *c = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int axis;
    int64_t pre, len, post;
    if (!compress_geometry(NULL, n, &axis, &pre, &len, &post)) die("lower_compress: %s", n->name);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, c), out, NULL, NULL);
    int cnt = kir_scalar(p, k, DT_INDEX), pos = kir_scalar(p, k, DT_INDEX);
    int iv = kir_var(k);
    Expr *ci = kx_var(p, iv);
    Stmt *body = ks_set(p, cnt, kx_index(p, 0));
    ks_seq(body, ks_loop(p, iv, 0, len, 1, ks_if(p, nonzero(p, kx_load(p, c, &ci)), incr(p, k, cnt), NULL)));
    /* out[o, pos, q] = x[o, i, q] for the kept i, pos counting them */
    int jv = kir_var(k), ov = kir_var(k), qv = kir_var(k);
    Expr *src = kx_add(p, kx_mul(p, kx_add(p, kx_mul(p, kx_var(p, ov), x->rank && axis >= 0 ? x->dims[axis] : 0),
                                           kx_var(p, jv)), post), kx_var(p, qv));
    Expr *dst = kx_add(p, kx_bin(p, K_MUL, kx_add(p, kx_bin(p, K_MUL, kx_var(p, ov), sreg(p, k, cnt)),
                                                 sreg(p, k, pos)), kx_index(p, post)), kx_var(p, qv));
    Stmt *copy = ks_loop(p, ov, 0, pre, 1, ks_loop(p, qv, 0, post, 1, store_lin(p, out, dst, load_lin(p, x, src))));
    ks_seq(copy, incr(p, k, pos));
    Expr *cj = kx_var(p, jv);
    ks_seq(body, ks_set(p, pos, kx_index(p, 0)));
    ks_seq(body, ks_loop(p, jv, 0, len, 1, ks_if(p, nonzero(p, kx_load(p, c, &cj)), copy, NULL)));
    Expr *actual[MAX_RANK];
    for (int d = 0; d < out->rank; d++)
        actual[d] = d == axis || axis < 0 ? sreg(p, k, cnt) : kx_index(p, out->dims[d]);
    k->body = ks_seq(body, finish_dyn(p, k, out, lower_dims(L, n, 0), actual));
}

/* ---- Unique ---- */
/* The input is seen as [pre, m, post] around the axis (without one: [1, numel, 1]); slice i is
 * x[:, i, :] and slices compare lexicographically in row-major order, as numpy's unique does.
 * Three kernels, each O(m^2 * slice): the first occurrence of each slice's value, then each
 * slice's rank among the distinct values (sorted, or by first occurrence) and count, then the
 * outputs. */

typedef struct Slices { int axis; int64_t pre, m, post; } Slices;

static void unique_slices(const Node *n, const Value *x, Slices *s) {
    Attr *a = ir_attr(n, "axis");
    s->axis = -1;
    s->pre = 1, s->post = 1, s->m = ir_numel(x);
    if (!a) return;
    s->axis = (int)(a->i < 0 ? a->i + x->rank : a->i);
    s->m = x->dims[s->axis];
    for (int d = 0; d < x->rank; d++) {
        if (d < s->axis) s->pre *= x->dims[d];
        if (d > s->axis) s->post *= x->dims[d];
    }
}

void infer_unique(Graph *g, Node *n) {
    Value *x = n->in[0];
    Attr *a = ir_attr(n, "axis");
    int axis;
    if (a && !rule_axis(g, n, a->i, x->rank, &axis)) return;
    Slices s;
    unique_slices(n, x, &s);
    if (n->out[0]) {
        if (a) ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
        else ir_set_shape(n->out[0], x->dtype, 1, &s.m);
        n->out[0]->dyn = true;
        n->out[0]->dynmask = 1u << (a ? axis : 0);
    }
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) {
            ir_set_shape(n->out[i], DT_INT64, 1, &s.m);
            n->out[i]->dyn = i != 2;        /* inverse_indices has one entry per slice */
            n->out[i]->dynmask = 1;
        }
}

/* Element e of slice i (index expressions, consumed). */
static Expr *slice_elem(Program *p, Buf *x, const Slices *s, Expr *i, Expr *e) {
    Expr *o = kx_bin(p, K_DIV, kx_clone(p, e), kx_index(p, s->post));
    Expr *q = kx_bin(p, K_REM, e, kx_index(p, s->post));
    Expr *lin = kx_add(p, kx_mul(p, kx_add(p, kx_mul(p, o, s->m), i), s->post), q);
    return load_lin(p, x, lin);
}

/* eq = slices a and b are equal (a, b: index expressions, cloned). */
static Stmt *slices_eq(Program *p, Kernel *k, Buf *x, const Slices *s, int eq, Expr *a, Expr *b) {
    int ev = kir_var(k);
    Expr *same = kx_bin(p, K_EQ, slice_elem(p, x, s, kx_clone(p, a), kx_var(p, ev)),
                        slice_elem(p, x, s, kx_clone(p, b), kx_var(p, ev)));
    Stmt *st = ks_set(p, eq, kx_const(p, DT_BOOL, 1));
    return ks_seq(st, ks_loop(p, ev, 0, s->pre * s->post, 1, ks_set(p, eq, kx_bin(p, K_AND, sreg(p, k, eq), same))));
}

/* lt = slice a sorts before slice b (lexicographic); dec is a scratch register. */
static Stmt *slices_lt(Program *p, Kernel *k, Buf *x, const Slices *s, int lt, int dec, Expr *a, Expr *b) {
    int ev = kir_var(k);
    Expr *va = slice_elem(p, x, s, kx_clone(p, a), kx_var(p, ev));
    Expr *vb = slice_elem(p, x, s, kx_clone(p, b), kx_var(p, ev));
    Expr *undecided = kx_un(p, K_NOT, sreg(p, k, dec));
    Stmt *step = ks_set(p, lt, kx_bin(p, K_OR, sreg(p, k, lt), kx_bin(p, K_AND, undecided, kx_bin(p, K_LT, va, vb))));
    ks_seq(step, ks_set(p, dec, kx_bin(p, K_OR, sreg(p, k, dec), kx_bin(p, K_NE, kx_clone(p, va), kx_clone(p, vb)))));
    Stmt *st = ks_set(p, lt, kx_const(p, DT_BOOL, 0));
    ks_seq(st, ks_set(p, dec, kx_const(p, DT_BOOL, 0)));
    return ks_seq(st, ks_loop(p, ev, 0, s->pre * s->post, 1, step));
}

static Expr *load1(Program *p, Buf *b, Expr *i) { return kx_cast(p, DT_INDEX, kx_load(p, b, &i)); }

void lower_unique(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0);
    Slices s;
    unique_slices(n, n->in[0], &s);
    bool sorted = ir_attr_int(n, "sorted", 1) != 0;
    const char *name = lower_kname(L, n);
    Buf *first = kir_buf_new(p, arena_printf(p->arena, "%s.first", name), DT_INT64, 1, &s.m, B_TEMP);
    Buf *rank = kir_buf_new(p, arena_printf(p->arena, "%s.rank", name), DT_INT64, 1, &s.m, B_TEMP);
    Buf *count = kir_buf_new(p, arena_printf(p->arena, "%s.count", name), DT_INT64, 1, &s.m, B_TEMP);

    /* first[i] = the smallest j whose slice equals slice i */
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), first, NULL, NULL);
    int iv = kir_var(k), jv = kir_var(k);
    int eq = kir_scalar(p, k, DT_BOOL), f = kir_scalar(p, k, DT_INDEX);
    Stmt *probe = slices_eq(p, k, x, &s, eq, kx_var(p, jv), kx_var(p, iv));
    ks_seq(probe, ks_if(p, kx_bin(p, K_AND, sreg(p, k, eq), kx_bin(p, K_LT, sreg(p, k, f), kx_index(p, 0))),
                        ks_set(p, f, kx_var(p, jv)), NULL));
    Stmt *row = ks_set(p, f, kx_index(p, -1));
    ks_seq(row, ks_loop(p, jv, 0, s.m, 1, probe));
    Expr *fi = kx_var(p, iv);
    ks_seq(row, ks_store(p, first, &fi, kx_cast(p, DT_INT64, sreg(p, k, f))));
    k->body = ks_loop(p, iv, 0, s.m, 1, row);

    /* rank[i] = how many distinct values come before slice i's; count[i] = its occurrences */
    k = lower_kernel(L, n, KC_GENERIC, KINS(x, first), rank, NULL, NULL);
    kir_param(p, k, count, KP_OUT);
    iv = kir_var(k), jv = kir_var(k);
    int r = kir_scalar(p, k, DT_INDEX), c = kir_scalar(p, k, DT_INDEX);
    int lt = kir_scalar(p, k, DT_BOOL), dec = kir_scalar(p, k, DT_BOOL);
    Expr *fj = load1(p, first, kx_var(p, jv)), *fsi = load1(p, first, kx_var(p, iv));
    Stmt *cmp;
    if (sorted) {
        cmp = slices_lt(p, k, x, &s, lt, dec, kx_var(p, jv), fsi);
    } else {
        cmp = ks_set(p, lt, kx_bin(p, K_LT, kx_var(p, jv), fsi));
    }
    Expr *rep = kx_bin(p, K_EQ, fj, kx_var(p, jv));             /* j is a first occurrence */
    ks_seq(cmp, ks_if(p, kx_bin(p, K_AND, rep, sreg(p, k, lt)), incr(p, k, r), NULL));
    ks_seq(cmp, ks_if(p, kx_bin(p, K_EQ, load1(p, first, kx_var(p, jv)), load1(p, first, kx_var(p, iv))),
                      incr(p, k, c), NULL));
    row = ks_set(p, r, kx_index(p, 0));
    ks_seq(row, ks_set(p, c, kx_index(p, 0)));
    ks_seq(row, ks_loop(p, jv, 0, s.m, 1, cmp));
    Expr *ri = kx_var(p, iv), *ci = kx_var(p, iv);
    ks_seq(row, ks_store(p, rank, &ri, kx_cast(p, DT_INT64, sreg(p, k, r))));
    ks_seq(row, ks_store(p, count, &ci, kx_cast(p, DT_INT64, sreg(p, k, c))));
    k->body = ks_loop(p, iv, 0, s.m, 1, row);

    /* the outputs: distinct slice i goes to position rank[i] */
    Buf *outs[4];
    for (int i = 0; i < 4; i++) outs[i] = i < n->nout && n->out[i] ? lower_out(L, n, i) : NULL;
    k = lower_kernel(L, n, KC_GENERIC, KINS(x, first, rank, count), NULL, NULL, NULL);
    for (int i = 0; i < 4; i++)
        if (outs[i]) kir_param(p, k, outs[i], KP_OUT);
    int u = kir_scalar(p, k, DT_INDEX);
    iv = kir_var(k);
    Stmt *body = ks_set(p, u, kx_index(p, 0));
    ks_seq(body, ks_loop(p, iv, 0, s.m, 1, ks_if(p, kx_bin(p, K_EQ, load1(p, first, kx_var(p, iv)), kx_var(p, iv)),
                                                 incr(p, k, u), NULL)));
    iv = kir_var(k);
    Stmt *put = NULL;
    if (outs[0]) {
        int ev = kir_var(k);
        Expr *e = kx_var(p, ev);
        Expr *o = kx_bin(p, K_DIV, kx_clone(p, e), kx_index(p, s.post)), *q = kx_bin(p, K_REM, kx_clone(p, e), kx_index(p, s.post));
        Expr *dst = kx_add(p, kx_bin(p, K_MUL, kx_add(p, kx_bin(p, K_MUL, o, sreg(p, k, u)), load1(p, rank, kx_var(p, iv))),
                                     kx_index(p, s.post)), q);
        put = ks_loop(p, ev, 0, s.pre * s.post, 1, store_lin(p, outs[0], dst, slice_elem(p, x, &s, kx_var(p, iv), e)));
    }
    if (outs[1]) {
        Expr *at = load1(p, rank, kx_var(p, iv));
        put = ks_seq(put, ks_store(p, outs[1], &at, kx_cast(p, DT_INT64, kx_var(p, iv))));
    }
    if (outs[3]) {
        Expr *at = load1(p, rank, kx_var(p, iv)), *ci2 = kx_var(p, iv);
        put = ks_seq(put, ks_store(p, outs[3], &at, kx_load(p, count, &ci2)));
    }
    Stmt *each = put ? ks_if(p, kx_bin(p, K_EQ, load1(p, first, kx_var(p, iv)), kx_var(p, iv)), put, NULL) : NULL;
    if (outs[2]) {
        Expr *at = kx_var(p, iv), *fi2 = load1(p, first, kx_var(p, iv));
        each = ks_seq(each, ks_store(p, outs[2], &at, kx_load(p, rank, &fi2)));
    }
    if (each) ks_seq(body, ks_loop(p, iv, 0, s.m, 1, each));
    for (int i = 0; i < 4; i++) {
        if (!outs[i] || i == 2) continue;
        Expr *actual[MAX_RANK];
        for (int d = 0; d < outs[i]->rank; d++)
            actual[d] = i > 0 || s.axis < 0 || d == s.axis ? sreg(p, k, u) : kx_index(p, outs[i]->dims[d]);
        ks_seq(body, finish_dyn(p, k, outs[i], lower_dims(L, n, i), actual));
    }
    k->body = body;
}

/* ---- NonMaxSuppression ---- */
/* Per batch and class, greedy selection: take the best-scoring box left (ties: the lower index)
 * whose score passes score_threshold, then drop the boxes left whose IoU with it exceeds
 * iou_threshold, until max_output_boxes_per_class are taken or none is left. The candidates
 * are sorted once into that order (O(m log m)), so a round is no scan for the best but the
 * next alive candidate, and its suppression touches only the candidates after it; scratch
 * temporaries the kernel reads back (KP_INOUT) hold the sorted candidates. */

static int64_t nms_per_class(const Node *n, int64_t boxes) {
    Value *mx = rule_opt_in(n, 2);
    if (!mx) return 0;
    if (!mx->data) return boxes;
    return MAX(0, MIN(boxes, ir_const_int(mx, 0)));
}

void infer_nms(Graph *g, Node *n) {
    Value *b = n->in[0], *s = n->in[1];
    if (b->rank != 3 || b->dims[2] != 4 || s->rank != 3 || s->dims[0] != b->dims[0] || s->dims[2] != b->dims[1]) {
        error(ir_where(g, n), "boxes %s and scores %s are not [B,N,4] and [B,C,N]",
              rule_dims_str(g, b->rank, b->dims), rule_dims_str(g, s->rank, s->dims));
        return;
    }
    if (!rule_float_input(g, n, 0) || !rule_float_input(g, n, 1)) return;
    if (rule_opt_in(n, 2) && !rule_int_scalar(g, n, 2, "max_output_boxes_per_class")) return;
    int64_t d[2] = {b->dims[0] * s->dims[1] * nms_per_class(n, b->dims[1]), 3};
    ir_set_shape(n->out[0], DT_INT64, 2, d);
    n->out[0]->dyn = true;
    n->out[0]->dynmask = 1;
}

/* The box of index `i` (consumed) as y1, x1, y2, x2 with y1 <= y2, x1 <= x2. */
static void nms_box(Program *p, Buf *boxes, Expr *bat, Expr *i, bool center, Expr **c) {
    Expr *v[4];
    for (int j = 0; j < 4; j++) {
        Expr *idx[3] = {kx_clone(p, bat), kx_clone(p, i), kx_index(p, j)};
        v[j] = kx_cast(p, DT_FLOAT, kx_load(p, boxes, idx));
    }
    if (center) {       /* [x_center, y_center, width, height] */
        Expr *hw = kx_bin(p, K_MUL, v[2], kx_const(p, DT_FLOAT, 0.5)), *hh = kx_bin(p, K_MUL, v[3], kx_const(p, DT_FLOAT, 0.5));
        c[0] = kx_bin(p, K_SUB, kx_clone(p, v[1]), hh);
        c[2] = kx_bin(p, K_ADD, v[1], kx_clone(p, hh));
        c[1] = kx_bin(p, K_SUB, kx_clone(p, v[0]), hw);
        c[3] = kx_bin(p, K_ADD, v[0], kx_clone(p, hw));
    } else {
        c[0] = kx_bin(p, K_MIN, v[0], v[2]);
        c[2] = kx_bin(p, K_MAX, kx_clone(p, v[0]), kx_clone(p, v[2]));
        c[1] = kx_bin(p, K_MIN, v[1], v[3]);
        c[3] = kx_bin(p, K_MAX, kx_clone(p, v[1]), kx_clone(p, v[3]));
    }
}

static Buf *nms_scratch(Lower *L, Node *n, const char *what, DType t, int rank, const int64_t *dims) {
    return kir_buf_new(L->p, arena_printf(L->p->arena, "%s.%s", lower_kname(L, n), what), t, rank, dims, B_TEMP);
}

void lower_nms(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *boxes = lower_in(L, n, 0), *scores = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int64_t nb = boxes->dims[0], nbox = boxes->dims[1], ncls = scores->dims[1];
    bool center = ir_attr_int(n, "center_point_box", 0) != 0;
    /* a class's candidates in selection order: their scores and box indices (sorted by
     * rule_merge_sort, with the two scratch halves), their corners and areas in that order
     * (one row each, so that the suppression loop reads them contiguously), and whether each
     * is still alive */
    DType it = nbox <= INT32_MAX ? DT_INT32 : DT_INT64;
    int64_t cd[2] = {5, MAX(nbox, 1)}, one = MAX(nbox, 1);
    Buf *key = nms_scratch(L, n, "score", DT_FLOAT, 1, &one), *key2 = nms_scratch(L, n, "score2", DT_FLOAT, 1, &one);
    Buf *idx = nms_scratch(L, n, "box", it, 1, &one), *idx2 = nms_scratch(L, n, "box2", it, 1, &one);
    Buf *corner = nms_scratch(L, n, "corner", DT_FLOAT, 2, cd), *alive = nms_scratch(L, n, "alive", DT_BOOL, 1, &one);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(boxes, scores), out, NULL, NULL);
    kir_param(p, k, corner, KP_INOUT);
    kir_param(p, k, alive, KP_INOUT);
    Expr *maxout = rule_opt_in(n, 2) ? rule_index_operand(L, n, k, 2) : kx_index(p, 0);
    Value *iv_ = rule_opt_in(n, 3), *sv_ = rule_opt_in(n, 4);
    Expr *iou_thr = iv_ ? kx_cast(p, DT_FLOAT, rule_load_first(p, k, lower_in(L, n, 3))) : kx_const(p, DT_FLOAT, 0);
    Expr *score_thr = sv_ ? kx_cast(p, DT_FLOAT, rule_load_first(p, k, lower_in(L, n, 4))) : NULL;
    int total = kir_scalar(p, k, DT_INDEX), taken = kir_scalar(p, k, DT_INDEX), m = kir_scalar(p, k, DT_INDEX);
    int lim = kir_scalar(p, k, DT_INDEX), thr = kir_scalar(p, k, DT_FLOAT), sel[5];
    for (int j = 0; j < 5; j++) sel[j] = kir_scalar(p, k, DT_FLOAT);
    int bv = kir_var(k), cv = kir_var(k), jv = kir_var(k), tv = kir_var(k), uv = kir_var(k), gv = kir_var(k);
    /* boxes from a data-dependent value (dyn_rules: along the box dim only): the first `have`
     * (boxes' count if both are dyn: ONNX wants them equal) */
    Value *dv = n->in[0]->dyn ? n->in[0] : n->in[1]->dyn ? n->in[1] : NULL;
    /* the loops over boxes run to that count at run time, not to the capacity: a post-process
     * feeds NMS the concatenation of every class's candidates, whose capacity is many times
     * what survives the score filters */
    Expr *have = kx_index(p, nbox);
    if (dv) {
        kir_param(p, k, L->vdims[dv->id], KP_IN);
        have = dyn_loop_bound(p, L->vdims[dv->id], dv == n->in[0] ? 1 : 2, nbox);
    }
    /* the candidates: every box whose score passes the threshold, in index order */
    Expr *sidx[3] = {kx_var(p, bv), kx_var(p, cv), kx_var(p, jv)};
    Expr *score = kx_cast(p, DT_FLOAT, kx_load(p, scores, sidx));
    Expr *mi = sreg(p, k, m), *mi2 = sreg(p, k, m);
    Stmt *put = ks_store(p, key, &mi, kx_clone(p, score));
    ks_seq(put, ks_store(p, idx, &mi2, kx_cast(p, it, kx_var(p, jv))));
    ks_seq(put, incr(p, k, m));
    Stmt *cls = ks_set(p, m, kx_index(p, 0));
    ks_seq(cls, dyn_loop(p, jv, have, score_thr ? ks_if(p, kx_bin(p, K_GT, score, score_thr), put, NULL) : put));
    /* in selection order: the best score first, the lower index first on ties (a stable sort
     * of the index order), which is the greedy rounds' order (each takes the best one left) */
    ks_seq(cls, rule_merge_sort(p, k, key, idx, key2, idx2, m, K_GT, INT64_MAX));
    Expr *bat = kx_var(p, bv), *c[4];
    Expr *ti = kx_var(p, tv);
    nms_box(p, boxes, bat, kx_cast(p, DT_INDEX, kx_load(p, idx, &ti)), center, c);
    Stmt *gather = NULL;
    for (int j = 0; j < 4; j++) {
        Expr *at[2] = {kx_index(p, j), kx_var(p, tv)};
        gather = ks_seq(gather, ks_store(p, corner, at, c[j]));
    }
    Expr *ar[4];
    for (int j = 0; j < 4; j++) {
        Expr *at[2] = {kx_index(p, j), kx_var(p, tv)};
        ar[j] = kx_load(p, corner, at);
    }
    Expr *a5[2] = {kx_index(p, 4), kx_var(p, tv)}, *al = kx_var(p, tv);
    ks_seq(gather, ks_store(p, corner, a5, kx_bin(p, K_MUL, kx_bin(p, K_SUB, ar[2], ar[0]), kx_bin(p, K_SUB, ar[3], ar[1]))));
    ks_seq(gather, ks_store(p, alive, &al, kx_const(p, DT_BOOL, 1)));
    ks_seq(cls, dyn_loop(p, tv, sreg(p, k, m), gather));
    /* the greedy pass: the first alive candidate is the best left; take it, then drop the
     * later ones whose IoU with it exceeds the threshold (a loop over contiguous rows that the
     * vectoriser takes) */
    Stmt *take = NULL;
    Expr *tg = kx_var(p, gv);
    Expr *val[3] = {kx_var(p, bv), kx_var(p, cv), kx_cast(p, DT_INDEX, kx_load(p, idx, &tg))};
    for (int j = 0; j < 3; j++) {
        Expr *oi[2] = {sreg(p, k, total), kx_index(p, j)};
        take = ks_seq(take, ks_store(p, out, oi, kx_cast(p, DT_INT64, val[j])));
    }
    ks_seq(take, incr(p, k, total));
    ks_seq(take, incr(p, k, taken));
    for (int j = 0; j < 5; j++) {
        Expr *at[2] = {kx_index(p, j), kx_var(p, gv)};
        ks_seq(take, ks_set(p, sel[j], kx_load(p, corner, at)));
    }
    Expr *b[5];
    for (int j = 0; j < 5; j++) {
        Expr *at[2] = {kx_index(p, j), kx_var(p, uv)};
        b[j] = kx_load(p, corner, at);
    }
    Expr *ih = kx_bin(p, K_MAX, kx_const(p, DT_FLOAT, 0), kx_bin(p, K_SUB, kx_bin(p, K_MIN, sreg(p, k, sel[2]), b[2]),
                                                                  kx_bin(p, K_MAX, sreg(p, k, sel[0]), b[0])));
    Expr *iw = kx_bin(p, K_MAX, kx_const(p, DT_FLOAT, 0), kx_bin(p, K_SUB, kx_bin(p, K_MIN, sreg(p, k, sel[3]), b[3]),
                                                                  kx_bin(p, K_MAX, sreg(p, k, sel[1]), b[1])));
    Expr *inter = kx_bin(p, K_MUL, ih, iw);
    Expr *uni = kx_bin(p, K_SUB, kx_bin(p, K_ADD, sreg(p, k, sel[4]), b[4]), kx_clone(p, inter));
    /* inter / union > thr, written without a division: union > 0 and inter > thr * union */
    Expr *over = kx_bin(p, K_AND, kx_bin(p, K_GT, kx_clone(p, uni), kx_const(p, DT_FLOAT, 0)),
                        kx_bin(p, K_GT, inter, kx_bin(p, K_MUL, sreg(p, k, thr), uni)));
    Expr *cq = kx_var(p, uv), *cq2 = kx_var(p, uv);
    Stmt *sup = ks_store(p, alive, &cq, kx_bin(p, K_AND, kx_load(p, alive, &cq2), kx_un(p, K_NOT, over)));
    ks_seq(take, rule_loop_range(p, uv, kx_addc(p, kx_var(p, gv), 1), sreg(p, k, m), sup));
    Expr *ag = kx_var(p, gv);
    ks_seq(cls, ks_set(p, taken, kx_index(p, 0)));
    ks_seq(cls, dyn_loop(p, gv, sreg(p, k, m),
                         ks_if(p, kx_bin(p, K_AND, kx_load(p, alive, &ag), kx_bin(p, K_LT, sreg(p, k, taken), sreg(p, k, lim))),
                               take, NULL)));
    Stmt *body = ks_set(p, total, kx_index(p, 0));
    ks_seq(body, ks_set(p, lim, kx_bin(p, K_MIN, maxout, kx_index(p, nms_per_class(n, nbox)))));
    ks_seq(body, ks_set(p, thr, iou_thr));
    /* max_output_boxes_per_class 0 (or absent) takes nothing: no sorting */
    ks_seq(body, ks_if(p, kx_bin(p, K_GT, sreg(p, k, lim), kx_index(p, 0)),
                       ks_loop(p, bv, 0, nb, 1, ks_loop(p, cv, 0, ncls, 1, cls)), NULL));
    Expr *actual[2] = {sreg(p, k, total), kx_index(p, 3)};
    k->body = ks_seq(body, finish_dyn(p, k, out, lower_dims(L, n, 0), actual));
}

/* ---- Data-dependent values as operands ----
 * A dyn value inside the graph keeps its capacity as static dims, so every consumer's rule
 * runs unchanged over the capacity (its buffer sits in the arena like any other), and its
 * actual dims travel in an int64[rank] dims buffer (lower_dims) that its producer writes.
 * Consumers read a dyn value laid out at the capacity's strides (element i at the same place
 * as in a full buffer), with the valid part the leading box [0, dims[d]) of every dim d; what
 * lies outside it is some value that nobody reports. The producers above pack their result
 * instead (the header contract), so when another node reads it and its layout differs (a
 * data-dependent dim that is not the first), dyn_lower_results re-lays it at the capacity's
 * strides; when such a value is a graph output, dyn_pack_output packs it back.
 *
 * The consumers (dyn_rule) are those whose output dims follow their input dims one to one, or
 * by a simple formula: elementwise ops with broadcasting (a data-dependent dim broadcasts only
 * against 1), Transpose, Gather, GatherElements, GatherND, Squeeze, Unsqueeze, Reshape,
 * Flatten, Identity, Slice (constant starts >= 0 and ends along a data-dependent dim), Concat
 * (along a data-dependent dim the sum of the inputs' dims, DimRule.cat; concat_packed moves
 * each valid part after the ones before it), and Reduce*, ArgMax/ArgMin and TopK along exact dims. A TopK whose k
 * is a run-time value is data-dependent along its axis even with exact inputs (dyn_topk_k):
 * the rule caps the dim by k's value (DimRule.by); so is a ConstantOfShape of the whole Shape
 * of a dyn value (dyn_shape_source), dim d by the shape's element d. Gathers clamp
 * their indices into the capacity, so an index read from the part outside the valid box
 * cannot leave a buffer. For each output dim, a DimRule says how its run-time value follows. */

typedef struct DimRule {
    int nsrc;                       /* 0: exact (the static dim); else broadcast of the sources */
    int in[8], dim[8];              /* source: input in[j]'s dim dim[j] */
    int64_t mul;                    /* times this (Reshape merging a leading dim) */
    bool slice;                     /* then Slice: from start to min(end, it) by step */
    int64_t start, end, step;
    int by;                         /* 1 + the input whose run-time value caps it (TopK's k) */
    bool cat;                       /* the sum of every input's dim (Concat along it) */
    int at;                         /* ... its element at (ConstantOfShape's shape) */
} DimRule;

static unsigned dyn_bits(const Value *v) {
    if (!v || !v->dyn) return 0;
    return v->dynmask ? v->dynmask : (1u << v->rank) - 1;
}

static bool is_dyn_dim(const Value *v, int d) { return (dyn_bits(v) >> d) & 1; }

/* A TopK whose k is known only at run time: its output is data-dependent along the axis. */
bool dyn_topk_k(const Node *n) {
    return n->op == OP_TopK && n->nin > 1 && n->in[1] && !n->in[1]->data;
}

/* An upper bound on every element of the integer value v, proven from how it is computed, for
 * a capacity tighter than the dim it caps (a run-time TopK k: torchvision's post-process takes
 * min(K, the survivors' count), spelled ReduceMin of a Concat of [K] and a Shape element, so
 * K, not the axis' capacity, bounds its output). Constants, the dims of Shape (capacities:
 * a data-dependent dim is at most its capacity) and Size, ops that only move or pick elements,
 * Min/Max/Clip and ReduceMin/ReduceMax; anything else (arithmetic, graph inputs) has none. The
 * value's data-dependent part is not looked at: such a value is refused (its elements outside
 * the valid part are not computed by the rule). depth bounds the walk. */
static bool int_upper(const Value *v, int depth, int64_t *hi) {
    /* uint64: an element above INT64_MAX reads as negative here, a bound below the true one
     * (Min(uint64 2^63 + 5, c) bounded k to 1 whatever c was) */
    if (!v || depth > 32 || dtype_is_float(v->dtype) || v->dtype == DT_BOOL || v->dtype == DT_STRING ||
        v->dtype == DT_UINT64)
        return false;
    if (v->data) {
        int64_t n = ir_numel(v), m = INT64_MIN;
        if (n == 0 || n > 4096) return false;
        for (int64_t i = 0; i < n; i++) m = MAX(m, ir_const_int(v, i));
        *hi = m;
        return true;
    }
    Node *n = v->producer;
    if (!n || v->dyn) return false;
    const Value *x = n->in[0];
    int64_t b, m;
    switch (n->op) {
    case OP_Shape:
        m = 0;
        for (int d = 0; d < x->rank; d++) m = MAX(m, x->dims[d]);
        *hi = m;
        return true;
    case OP_Size:
        *hi = ir_numel(x);
        return true;
    case OP_Identity: case OP_Reshape: case OP_Squeeze: case OP_Unsqueeze: case OP_Flatten:
    case OP_Transpose: case OP_Gather: case OP_GatherElements: case OP_GatherND: case OP_Slice:
    case OP_Expand: case OP_Tile:
        return int_upper(x, depth + 1, hi);
    case OP_Cast:
        return !dtype_is_float(x->dtype) && dtype_size(v->dtype) >= dtype_size(x->dtype) &&
               dtype_is_unsigned(v->dtype) == dtype_is_unsigned(x->dtype) && int_upper(x, depth + 1, hi);
    case OP_Concat: case OP_Max:      /* every element is one of an input's */
        m = INT64_MIN;
        for (int i = 0; i < n->nin; i++) {
            if (!int_upper(n->in[i], depth + 1, &b)) return false;
            m = MAX(m, b);
        }
        *hi = m;
        return true;
    case OP_Min: {                    /* at most any input's element at that place */
        bool any = false;
        for (int i = 0; i < n->nin; i++)
            if (int_upper(n->in[i], depth + 1, &b)) *hi = any ? MIN(*hi, b) : b, any = true;
        return any;
    }
    case OP_Clip: {
        const Value *mx = n->nin > 2 ? n->in[2] : NULL;
        bool known = int_upper(x, depth + 1, hi);
        if (mx && mx->data && ir_numel(mx) == 1) *hi = known ? MIN(*hi, ir_const_int(mx, 0)) : ir_const_int(mx, 0), known = true;
        return known;
    }
    case OP_ReduceMax:
        return int_upper(x, depth + 1, hi);
    case OP_ReduceMin: {
        /* the minimum of all of a Concat's elements is at most that of any input that has
         * some (a static one with elements) */
        bool mask[MAX_RANK], all = true;
        int r = rule_reduce_mask(NULL, n, mask);
        for (int d = 0; d < x->rank; d++) all = all && mask[d];
        if (r > 0 && all && x->producer && x->producer->op == OP_Concat && !x->dyn) {
            bool any = false;
            for (int i = 0; i < x->producer->nin; i++) {
                const Value *c = x->producer->in[i];
                if (!c->dyn && ir_numel(c) > 0 && int_upper(c, depth + 1, &b)) *hi = any ? MIN(*hi, b) : b, any = true;
            }
            if (any) return true;
        }
        return int_upper(x, depth + 1, hi);
    }
    default:
        return false;
    }
}

bool dyn_int_upper(const Value *v, int64_t *hi) { return int_upper(v, 0, hi); }

/* A ConstantOfShape of the whole Shape of a data-dependent value (`torch.full_like` of one):
 * that value, whose capacity and dims it takes; NULL otherwise. */
Value *dyn_shape_source(const Node *n) {
    if (n->op != OP_ConstantOfShape || n->in[0]->data || !n->in[0]->producer) return NULL;
    Node *s = n->in[0]->producer;
    if (s->op != OP_Shape || !s->in[0]->dyn || n->in[0]->dims[0] != s->in[0]->rank) return NULL;
    return s->in[0];
}

bool dyn_runtime_dims(const Node *n) { return dyn_topk_k(n) || dyn_shape_source(n); }

bool dyn_any_input(const Node *n) {
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] && n->in[i]->dyn) return true;
    return false;
}

typedef enum DynKind { DK_NONE, DK_MAP, DK_TRANSPOSE, DK_GATHER, DK_GATHER_ELEMENTS, DK_GATHERND,
                       DK_VIEW, DK_SLICE, DK_CONCAT, DK_REDUCE, DK_ARG, DK_TOPK,
                       DK_SPLIT, DK_FILL /* ConstantOfShape */, DK_SHAPE /* Shape, Size: a run-time value of the dims */,
                       DK_SELF /* reports its own dims, reads the run-time ones (NMS) */ } DynKind;

static DynKind dyn_kind(const Node *n) {
    void (*f)(Lower *, Node *) = op_info[n->op].lower;
    if (f == lower_unary || f == lower_binary || f == lower_clip || f == lower_mod ||
        f == lower_variadic || f == lower_where || f == lower_bitwise || f == lower_bitshift)
        return n->op == OP_BitCast ? DK_NONE : DK_MAP;
    switch (n->op) {
    case OP_Transpose: return DK_TRANSPOSE;
    case OP_Gather: return DK_GATHER;
    case OP_GatherElements: return DK_GATHER_ELEMENTS;
    case OP_GatherND: return DK_GATHERND;
    case OP_Squeeze: case OP_Unsqueeze: case OP_Reshape: case OP_Flatten: case OP_Identity:
        return DK_VIEW;
    case OP_Slice: return DK_SLICE;
    case OP_Concat: return DK_CONCAT;
    case OP_Split: return DK_SPLIT;
    case OP_Shape: case OP_Size: return DK_SHAPE;
    case OP_ConstantOfShape: return DK_FILL;
    case OP_ArgMax: case OP_ArgMin: return DK_ARG;
    case OP_TopK: return DK_TOPK;
    case OP_NonMaxSuppression: case OP_NonZero: return DK_SELF;
    default: return f == lower_reduce ? DK_REDUCE : DK_NONE;
    }
}

bool dyn_operand_ok(Graph *g, Node *n, const Value *v) {
    if (v->dtype != DT_STRING && dyn_kind(n) != DK_NONE) return true;
    error(ir_where(g, n), "input '%s' has a data-dependent shape (output of %s '%s'); onnxcc "
          "cannot take such a value into %s (README, \"Data-dependent shapes\", lists the ops "
          "that can)", v->name, v->producer ? v->producer->op_type : "?",
          v->producer ? v->producer->name : "?", n->op_type);
    return false;
}

static void src(DimRule *r, int in, int dim) {
    if (r->nsrc == COUNTOF(r->in)) die("dyn: too many sources");
    r->in[r->nsrc] = in;
    r->dim[r->nsrc++] = dim;
}

/* Output dim o of n follows input `in`'s dim d (if that is data-dependent). */
static void follow(const Node *n, DimRule *rules, int o, int in, int d) {
    if (is_dyn_dim(n->in[in], d)) src(&rules[o], in, d);
}

static bool refuse(Graph *g, Node *n, const char *why) {
    if (g) error(ir_where(g, n), "%s: onnxcc follows a data-dependent dim there only %s", n->op_type, why);
    return false;
}

/* Reshape-like ops: group the dims of both shapes (size-1 dims aside) into runs of equal
 * product; a data-dependent dim must be a run of its own on both sides, or the first dim of
 * the tensor (the only data-dependent one) merged with exact dims after it. */
static bool view_rules(Graph *g, Node *n, DimRule *rules) {
    Value *x = n->in[0], *y = n->out[0];
    unsigned bits = dyn_bits(x);
    int i = 0, j = 0;
    for (;;) {
        while (i < x->rank && x->dims[i] == 1 && !is_dyn_dim(x, i)) i++;
        while (i < x->rank && x->dims[i] == 1 && n->op == OP_Squeeze) i++;
        while (j < y->rank && y->dims[j] == 1) j++;
        if (i >= x->rank || j >= y->rank) break;
        if (x->dims[i] == 1) return refuse(g, n, "when its capacity is more than 1");
        int i0 = i, j0 = j;
        int64_t pi = x->dims[i++], pj = y->dims[j++];
        while (pi != pj) {
            if (pi < pj && i < x->rank) pi *= x->dims[i++];
            else if (pj < pi && j < y->rank) pj *= y->dims[j++];
            else return refuse(g, n, "when the shapes match");
        }
        bool has = false;
        for (int d = i0; d < i; d++) has |= is_dyn_dim(x, d);
        if (!has) continue;
        if (j - j0 != 1) return refuse(g, n, "when it is not split");
        if (i - i0 == 1) {
            src(&rules[j0], 0, i0);
            continue;
        }
        bool lead = bits == (1u << i0);
        for (int d = 0; d < i0; d++) lead &= x->dims[d] == 1;
        if (!lead) return refuse(g, n, "when it is the first dim merged with exact dims after it");
        src(&rules[j0], 0, i0);
        rules[j0].mul = pj / x->dims[i0];
    }
    for (int d = i; d < x->rank; d++)
        if (is_dyn_dim(x, d) && n->op != OP_Squeeze) return refuse(g, n, "when its capacity is more than 1");
    return true;
}

static bool slice_rules(Graph *g, Node *n, DimRule *rules) {
    Value *x = n->in[0];
    int64_t cnt = ir_numel(n->in[1]);
    for (int d = 0; d < x->rank; d++) follow(n, rules, d, 0, d);
    for (int64_t j = 0; j < cnt; j++) {
        Value *ax = n->nin > 3 ? n->in[3] : NULL, *st = n->nin > 4 ? n->in[4] : NULL;
        int64_t a = ax ? ir_const_int(ax, j) : j;
        if (a < 0) a += x->rank;
        if (a < 0 || a >= x->rank || !is_dyn_dim(x, (int)a)) continue;
        int64_t s = ir_const_int(n->in[1], j), e = ir_const_int(n->in[2], j), t = st ? ir_const_int(st, j) : 1;
        if (s < 0 || e < 0 || t <= 0) return refuse(g, n, "with starts and ends >= 0 and steps > 0");
        DimRule *r = &rules[a];
        r->slice = true, r->start = s, r->end = e, r->step = t;
    }
    return true;
}

/* What fills the capacity past the actual dims when n reduces along a data-dependent dim: the
 * identity of its reduction (dyn_lower_operands); false if there is none (maxima, minima and
 * means of integers). A mean of floats sums zeros there and is rescaled afterwards. */
static bool mask_fill(const Node *n, double *fill) {
    bool fl = dtype_is_float(n->in[0]->dtype);
    switch (n->op) {
    case OP_ArgMax: *fill = -INFINITY; return fl;
    case OP_ArgMin: *fill = INFINITY; return fl;
    case OP_TopK: *fill = ir_attr_int(n, "largest", 1) ? -INFINITY : INFINITY; return fl;
    default: break;
    }
    switch (rule_red_kind(n)) {
    case R_SUM: case R_L1: case R_L2: case R_SUMSQUARE: case R_LOGSUM: *fill = 0; return true;
    case R_PROD: *fill = 1; return true;
    case R_MEAN: *fill = 0; return fl;          /* a sum, rescaled by dyn_lower_results */
    case R_MAX: case R_LOGSUMEXP: *fill = -INFINITY; return fl;
    case R_MIN: *fill = INFINITY; return fl;
    default: return false;
    }
}

/* The dims of a reduction's output: which input dim each follows (keepdims or not); false if a
 * data-dependent dim is reduced by a reduction that has no identity to fill with. */
static bool reduce_rules(Graph *g, Node *n, const bool *mask, bool keep, DimRule *rules) {
    Value *x = n->in[0];
    double fill;
    for (int d = 0, o = 0; d < x->rank; d++) {
        if (mask[d] && is_dyn_dim(x, d) && !mask_fill(n, &fill))
            return refuse(g, n, "along the dims it does not reduce (or reducing it by a sum, "
                          "product, L1, L2, log-sum, or a maximum, minimum or mean of floats)");
        if (!mask[d]) follow(n, rules, o++, 0, d);
        else if (keep) o++;
    }
    return true;
}

/* Concat's axis, from 0 */
static int concat_axis(const Node *n) {
    int axis = (int)ir_attr_int(n, "axis", 0);
    return axis < 0 ? axis + n->out[0]->rank : axis;
}

/* The DimRules of output o of n (rank of that output entries); false after an error (g) or
 * if the form is not supported (g NULL). */
static bool dyn_rules(Graph *g, Node *n, int o, DimRule *rules) {
    Value *y = n->out[o], *x = n->in[0];
    for (int d = 0; d < y->rank; d++) rules[d] = (DimRule){.mul = 1};
    switch (dyn_kind(n)) {
    case DK_NONE: die("dyn_rules: %s", n->op_type);
    case DK_SELF:
        if (n->op == OP_NonZero) return true;       /* counts inside the valid box */
        if ((dyn_bits(n->in[0]) & ~2u) || (dyn_bits(n->in[1]) & ~4u))
            return refuse(g, n, "along the box dim of boxes and scores");
        for (int i = 2; i < n->nin; i++)
            if (n->in[i] && n->in[i]->dyn) return refuse(g, n, "in boxes or scores");
        return true;
    case DK_MAP:
        for (int d = 0; d < y->rank; d++) {
            bool big = false;
            for (int i = 0; i < n->nin; i++) {
                Value *v = n->in[i];
                int id = v ? d - (y->rank - v->rank) : -1;
                if (id < 0) continue;
                if (is_dyn_dim(v, id)) src(&rules[d], i, id);
                else big |= v->dims[id] != 1;
            }
            if (rules[d].nsrc && big) return refuse(g, n, "broadcast against a dim of 1");
        }
        return true;
    case DK_TRANSPOSE: {
        Attr *a = ir_attr(n, "perm");
        bool perm = a && a->type == A_INTS && a->n == y->rank;  /* else the default reversal */
        for (int d = 0; d < y->rank; d++) follow(n, rules, d, 0, perm ? (int)a->ints[d] : y->rank - 1 - d);
        return true;
    }
    case DK_GATHER: {
        int axis = (int)ir_attr_int(n, "axis", 0), q = n->in[1]->rank;
        if (axis < 0) axis += x->rank;
        for (int d = 0; d < y->rank; d++) {
            if (d < axis) follow(n, rules, d, 0, d);
            else if (d < axis + q) follow(n, rules, d, 1, d - axis);
            else follow(n, rules, d, 0, d - q + 1);
        }
        return true;
    }
    case DK_GATHER_ELEMENTS:
        for (int d = 0; d < y->rank; d++) follow(n, rules, d, 1, d);
        return true;
    case DK_GATHERND: {
        Value *ind = n->in[1];
        int b = (int)ir_attr_int(n, "batch_dims", 0), q = ind->rank;
        if (is_dyn_dim(ind, q - 1)) return refuse(g, n, "when the indices' last dim is exact");
        int m = (int)ind->dims[q - 1];
        for (int d = 0; d < y->rank; d++) {
            if (d < q - 1) follow(n, rules, d, 1, d);
            else follow(n, rules, d, 0, b + m + d - (q - 1));
        }
        for (int d = 0; d < b; d++) follow(n, rules, d, 0, d);
        return true;
    }
    case DK_VIEW: return view_rules(g, n, rules);
    case DK_SLICE: return slice_rules(g, n, rules);
    case DK_CONCAT: {
        int axis = concat_axis(n);
        for (int i = 0; i < n->nin; i++)
            if (is_dyn_dim(n->in[i], axis)) rules[axis].cat = true;
        for (int d = 0; d < y->rank; d++)
            for (int i = 0; i < n->nin && d != axis; i++) follow(n, rules, d, i, d);
        return true;
    }
    case DK_SPLIT: {
        int axis = (int)ir_attr_int(n, "axis", 0);
        if (axis < 0) axis += y->rank;
        if (is_dyn_dim(x, axis)) return refuse(g, n, "along the other dims than the axis");
        for (int d = 0; d < y->rank; d++) follow(n, rules, d, 0, d);
        return true;
    }
    case DK_FILL: {                     /* dim d is the shape's element d */
        Value *v = dyn_shape_source(n);
        for (int d = 0; v && d < y->rank; d++)
            if (is_dyn_dim(v, d)) rules[d].by = 1, rules[d].at = d;
        return true;
    }
    case DK_SHAPE: return true;         /* a static shape; its values are computed at run time */
    case DK_REDUCE: {
        bool mask[MAX_RANK];
        int any = rule_reduce_mask(NULL, n, mask);
        if (any < 0) return false;
        for (int d = 0; d < x->rank && !any; d++) mask[d] = false;
        return reduce_rules(g, n, mask, !any || ir_attr_int(n, "keepdims", 1) != 0, rules);
    }
    case DK_ARG: case DK_TOPK: {
        bool mask[MAX_RANK] = {0};
        int axis = (int)ir_attr_int(n, "axis", n->op == OP_TopK ? -1 : 0);
        if (axis < 0) axis += x->rank;
        if (dyn_topk_k(n)) {            /* min(k, the actual length) along the axis */
            double fill;
            if (is_dyn_dim(x, axis) && !mask_fill(n, &fill))
                return refuse(g, n, "on floats when k is a run-time value and the axis data-dependent");
            for (int d = 0; d < x->rank; d++) follow(n, rules, d, 0, d);
            rules[axis].by = 2;
            return true;
        }
        mask[axis] = true;
        return reduce_rules(g, n, mask, n->op == OP_TopK || ir_attr_int(n, "keepdims", 1) != 0, rules);
    }
    }
    return false;
}

void dyn_infer(Graph *g, Node *n) {
    if (dyn_kind(n) == DK_SHAPE) {          /* not the capacity the rule folded: dyn_lower_shape */
        n->out[0]->data = NULL;
        return;
    }
    if (dyn_kind(n) == DK_SELF) {           /* its rule marked the outputs */
        DimRule rules[MAX_RANK];
        dyn_rules(g, n, 0, rules);
        return;
    }
    for (int o = 0; o < n->nout; o++) {
        Value *y = n->out[o];
        DimRule rules[MAX_RANK];
        if (!y || !dyn_rules(g, n, o, rules)) continue;
        y->dynmask = 0;
        for (int d = 0; d < y->rank; d++)
            if (rules[d].nsrc || rules[d].by || rules[d].cat) y->dynmask |= 1u << d;
        y->dyn = y->dynmask != 0;
    }
}

/* ---- their lowering ---- */

/* Dim d of the dyn value v as a DT_INDEX expression: loaded from its dims buffer when
 * data-dependent, the constant otherwise. k must read dims (registered by the caller). */
static Expr *dim_of(Program *p, const Value *v, Buf *dims, int d) {
    if (!is_dyn_dim(v, d)) return kx_index(p, v->dims[d]);
    Expr *i = kx_index(p, d);
    return kx_cast(p, DT_INDEX, kx_load(p, dims, &i));
}

static Buf *dims_buf(Lower *L, const Value *v) {
    if (!L->vdims[v->id]) die("dyn: '%s' has no dims buffer", v->name);
    return L->vdims[v->id];
}

/* Whether the element at capacity index idx lies in the valid box; and its row-major position
 * in the packed layout. */
static Expr *inside(Program *p, const Value *v, Buf *dims, Expr **idx) {
    Expr *in = NULL;
    for (int d = 0; d < v->rank; d++) {
        if (!is_dyn_dim(v, d)) continue;
        Expr *c = kx_bin(p, K_LT, kx_clone(p, idx[d]), dim_of(p, v, dims, d));
        in = in ? kx_bin(p, K_AND, in, c) : c;
    }
    return in ? in : kx_const(p, DT_BOOL, 1);
}

static Expr *packed_pos(Program *p, const Value *v, Buf *dims, Expr **idx) {
    Expr *lin = kx_index(p, 0);
    for (int d = 0; d < v->rank; d++)
        lin = kx_add(p, kx_bin(p, K_MUL, lin, dim_of(p, v, dims, d)), kx_clone(p, idx[d]));
    return lin;
}

/* The output dims kernel of a consumer of dyn values. */
static void lower_dyn_dims(Lower *L, Node *n) {
    Program *p = L->p;
    for (int o = 0; o < n->nout; o++) {
        Value *y = n->out[o];
        DimRule rules[MAX_RANK];
        if (!y || !y->dyn) continue;
        if (!dyn_rules(NULL, n, o, rules)) die("dyn: %s's rules changed since inference", n->name);
        Kernel *k = lower_kernel(L, n, KC_GENERIC, KNOINS, NULL, NULL, NULL);
        for (int i = 0; i < n->nin; i++)
            if (n->in[i] && n->in[i]->dyn) kir_param(p, k, dims_buf(L, n->in[i]), KP_IN);
        for (int d = 0; d < y->rank; d++)
            if (rules[d].by) kir_param(p, k, lower_in(L, n, rules[d].by - 1), KP_IN);
        Buf *out = lower_dims(L, n, o);
        kir_param(p, k, out, KP_OUT);
        Stmt *body = NULL;
        for (int d = 0; d < y->rank; d++) {
            DimRule *r = &rules[d];
            Expr *v = kx_index(p, y->dims[d]);
            for (int j = 0; j < r->nsrc; j++) {
                Expr *s = dim_of(p, n->in[r->in[j]], dims_buf(L, n->in[r->in[j]]), r->dim[j]);
                /* broadcasting: a dim of 1 takes the other */
                v = j == 0 ? s : kx_select(p, kx_bin(p, K_EQ, kx_clone(p, v), kx_index(p, 1)), s, v);
            }
            if (r->cat) {               /* Concat along it: the inputs' dims added */
                v = kx_index(p, 0);
                for (int i = 0; i < n->nin; i++)
                    v = kx_add(p, v, n->in[i]->dyn ? dim_of(p, n->in[i], dims_buf(L, n->in[i]), d)
                                                   : kx_index(p, n->in[i]->dims[d]));
            }
            if (r->by) {                /* a run-time count: min(it, max(0, the value)) */
                Buf *c = lower_in(L, n, r->by - 1);
                Expr *at = kx_index(p, r->at);
                Expr *cv = kx_cast(p, DT_INDEX, kx_load(p, c, c->rank ? &at : NULL));
                v = kx_bin(p, K_MIN, v, kx_bin(p, K_MAX, cv, kx_index(p, 0)));
            }
            if (r->mul != 1) v = kx_mul(p, v, r->mul);
            if (r->slice) {
                v = kx_bin(p, K_MIN, v, kx_index(p, r->end));
                v = kx_bin(p, K_MAX, kx_addc(p, v, -r->start), kx_index(p, 0));
                v = kx_bin(p, K_DIV, kx_addc(p, v, r->step - 1), kx_index(p, r->step));
            }
            /* never more than the capacity */
            v = kx_bin(p, K_MIN, v, kx_index(p, y->dims[d]));
            Expr *di = kx_index(p, d);
            body = ks_seq(body, ks_store(p, out, &di, kx_cast(p, DT_INT64, v)));
        }
        k->body = body;
    }
}

/* A packed dyn value that other nodes read, re-laid at its capacity's strides. */
static void lower_unpack(Lower *L, Node *n, int o) {
    Program *p = L->p;
    Value *v = n->out[o];
    Buf *packed = L->vbuf[v->id], *dims = dims_buf(L, v);
    Buf *out = kir_buf_new(p, arena_printf(p->arena, "%s.strided", v->name), packed->dtype, packed->rank,
                           packed->dims, B_TEMP);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(packed, dims), out, vars, idx);
    Expr *at = load_lin(p, packed, packed_pos(p, v, dims, idx));
    Expr *val = kx_select(p, inside(p, v, dims, idx), at, kx_const(p, out->dtype, 0));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, val));
    L->vbuf[v->id] = out;
}

/* ReduceMean along a data-dependent dim: the number of elements each output averages over the
 * capacity, or 0 if it reduces no data-dependent dim. */
static int64_t mean_capacity(Node *n) {
    bool mask[MAX_RANK];
    Value *x = n->in[0];
    if (n->op != OP_ReduceMean || !x->dyn || rule_reduce_mask(NULL, n, mask) <= 0) return 0;
    int64_t cnt = 1;
    bool dyn = false;
    for (int d = 0; d < x->rank; d++)
        if (mask[d]) cnt *= x->dims[d], dyn |= is_dyn_dim(x, d);
    return dyn ? cnt : 0;
}

/* out = mean * capacity count / actual count, into the Buf the rule would have written. */
static void rescale_mean(Lower *L, Node *n, int64_t cap) {
    Program *p = L->p;
    Value *x = n->in[0], *y = n->out[0];
    bool mask[MAX_RANK];
    rule_reduce_mask(NULL, n, mask);
    Buf *sum = L->vbuf[y->id], *dims = dims_buf(L, x), *out = NULL;
    for (int i = 0; i < L->g->noutputs && !out; i++)    /* see dyn_lower_operands */
        if (L->g->outputs[i] == y && !y->dyn) out = L->p->outputs[i];
    if (!out) out = kir_buf_new(p, arena_printf(p->arena, "%s.mean", y->name), sum->dtype, sum->rank, sum->dims, B_TEMP);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(sum, dims), out, vars, idx);
    Expr *have = kx_index(p, 1);
    for (int d = 0; d < x->rank; d++)
        if (mask[d]) have = kx_bin(p, K_MUL, have, dim_of(p, x, dims, d));
    Expr *scale = kx_bin(p, K_DIV, kx_const(p, DT_FLOAT, (double)cap), kx_cast(p, DT_FLOAT, have));
    Expr *v = kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, kx_load(p, sum, idx)), scale);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_cast(p, out->dtype, v)));
    L->vbuf[y->id] = out;
}

/* Concat along a data-dependent dim: the rule laid each input at its capacity's offset; the
 * valid part of input i goes at the sum of the actual lengths before it instead, into a new
 * buffer at the capacity's strides (zero past the valid part). */
static void concat_packed(Lower *L, Node *n) {
    Program *p = L->p;
    Value *y = n->out[0];
    int axis = concat_axis(n), r = y->rank;
    Buf *out = kir_buf_new(p, arena_printf(p->arena, "%s.joined", y->name), L->vbuf[y->id]->dtype, r,
                           L->vbuf[y->id]->dims, B_TEMP);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KNOINS, out, vars, idx);
    Buf *in[n->nin], *dims[n->nin];
    for (int i = 0; i < n->nin; i++) {
        in[i] = lower_in(L, n, i);
        kir_param(p, k, in[i], KP_IN);
        dims[i] = n->in[i]->dyn ? dims_buf(L, n->in[i]) : NULL;
        if (dims[i]) kir_param(p, k, dims[i], KP_IN);
    }
    Stmt *body = lower_wrap(p, r, out->dims, vars, ks_store(p, out, idx, kx_const(p, out->dtype, 0)));
    int off = kir_scalar(p, k, DT_INDEX);
    ks_seq(body, ks_set(p, off, kx_index(p, 0)));
    for (int i = 0; i < n->nin; i++) {
        Value *x = n->in[i];
        lower_vars(k, r, vars);
        lower_var_idx(p, r, vars, idx);
        Expr *to[MAX_RANK];
        for (int d = 0; d < r; d++)
            to[d] = d == axis ? kx_add(p, kx_clone(p, idx[d]), sreg(p, k, off)) : kx_clone(p, idx[d]);
        Expr *ok = dims[i] ? inside(p, x, dims[i], idx) : kx_const(p, DT_BOOL, 1);
        Stmt *put = ks_if(p, ok, ks_store(p, out, to, kx_load(p, in[i], idx)), NULL);
        ks_seq(body, lower_wrap(p, r, in[i]->dims, vars, put));
        Expr *len = dims[i] ? dim_of(p, x, dims[i], axis) : kx_index(p, x->dims[axis]);
        ks_seq(body, ks_set(p, off, kx_add(p, sreg(p, k, off), len)));
    }
    k->body = body;
    L->vbuf[y->id] = out;
}

Expr *dyn_topk_bounds(Lower *L, Node *n, Kernel *k, int axis, Expr **len) {
    Program *p = L->p;
    Value *x = n->in[0];
    int64_t cap = x->dims[axis];
    *len = NULL;
    if (!dyn_topk_k(n)) return NULL;
    if (is_dyn_dim(x, axis)) {
        kir_param(p, k, dims_buf(L, x), KP_IN);
        *len = dyn_loop_bound(p, dims_buf(L, x), axis, cap);
    }
    Expr *kv = kx_cast(p, DT_INDEX, rule_load_first(p, k, lower_in(L, n, 1)));
    /* and within the output's capacity, which a bound on k may have made smaller */
    Expr *c = kx_bin(p, K_MIN, kv, kx_index(p, MIN(cap, n->out[0]->dims[axis])));
    return kx_bin(p, K_MAX, kx_index(p, 0), *len ? kx_bin(p, K_MIN, c, kx_clone(p, *len)) : c);
}

Buf *dyn_lower_operands(Lower *L, Node *n) {
    /* a mean's rule writes a temporary that rescale_mean reads, not the graph output */
    Value *y = n->out[0];
    if (mean_capacity(n) && L->vbuf[y->id] && L->vbuf[y->id]->kind == B_OUTPUT) L->vbuf[y->id] = NULL;
    DynKind dk = dyn_kind(n);
    Value *x = n->in[0];
    double fill;
    if ((dk != DK_REDUCE && dk != DK_ARG && dk != DK_TOPK) || !x->dyn || !mask_fill(n, &fill)) return NULL;
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *dims = dims_buf(L, x);
    Buf *out = kir_buf_new(p, arena_printf(p->arena, "%s.masked", x->name), in->dtype, in->rank, in->dims, B_TEMP);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(in, dims), out, vars, idx);
    Expr *val = kx_select(p, inside(p, x, dims, idx), kx_load(p, in, idx), kx_const(p, in->dtype, fill));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, val));
    L->vbuf[x->id] = out;
    return in;
}

bool dyn_lower_shape(Lower *L, Node *n) {
    if (dyn_kind(n) != DK_SHAPE || !n->in[0]->dyn) return false;
    Program *p = L->p;
    Value *x = n->in[0];
    Buf *dims = dims_buf(L, x), *out = lower_out(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(dims), out, NULL, NULL);
    Stmt *body = NULL;
    if (n->op == OP_Size) {
        Expr *v = kx_index(p, 1);
        for (int d = 0; d < x->rank; d++) v = kx_bin(p, K_MUL, v, dim_of(p, x, dims, d));
        body = ks_store(p, out, NULL, kx_cast(p, out->dtype, v));
    } else {                            /* start and end as infer_shape_op clamps them */
        int64_t r = x->rank, start = ir_attr_int(n, "start", 0);
        if (start < 0) start += r;
        start = MAX(0, MIN(start, r));
        for (int64_t i = 0; i < out->dims[0]; i++) {
            Expr *at = kx_index(p, i);
            body = ks_seq(body, ks_store(p, out, &at, kx_cast(p, DT_INT64, dim_of(p, x, dims, (int)(start + i)))));
        }
    }
    k->body = body;
    return true;
}

void dyn_lower_branch_output(Lower *L, Node *n, int i, Value *v, Buf *out) {
    Program *p = L->p;
    Buf *in = lower_value(L, v), *dims = v->dyn ? dims_buf(L, v) : NULL;
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *c = NULL;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(in, dims), out, vars, idx);
    for (int d = 0; d < out->rank; d++) {
        Expr *lt = kx_bin(p, K_LT, kx_clone(p, idx[d]), v->dyn ? dim_of(p, v, dims, d) : kx_index(p, v->dims[d]));
        c = c ? kx_bin(p, K_AND, c, lt) : lt;
    }
    if (!c) c = kx_const(p, DT_BOOL, 1);
    Expr *zidx[MAX_RANK];
    for (int d = 0; d < out->rank; d++) zidx[d] = kx_clone(p, idx[d]);
    /* the load only where the element exists: a branch's value may be empty */
    Stmt *st = ks_if(p, c, ks_store(p, out, zidx, kx_load(p, in, idx)), ks_store(p, out, zidx, kx_const(p, out->dtype, 0)));
    k->body = lower_wrap(p, out->rank, out->dims, vars, st);
    Buf *od = lower_dims(L, n, i);
    k = lower_kernel(L, n, KC_GENERIC, KINS(dims), od, NULL, NULL);
    Stmt *body = NULL;
    for (int d = 0; d < out->rank; d++) {
        Expr *di = kx_index(p, d);
        body = ks_seq(body, ks_store(p, od, &di, kx_cast(p, DT_INT64, v->dyn ? dim_of(p, v, dims, d) : kx_index(p, v->dims[d]))));
    }
    k->body = body;
}

bool dyn_follows(const Node *n) {
    if (n->op == OP_If)                     /* writes at the capacity's strides, dims itself */
        for (int i = 0; i < n->nout; i++)
            if (n->out[i] && n->out[i]->dyn) return true;
    return (dyn_any_input(n) || dyn_runtime_dims(n)) && dyn_kind(n) != DK_SELF && dyn_kind(n) != DK_SHAPE;
}

void dyn_lower_results(Lower *L, Node *n) {
    if (n->op == OP_If) return;             /* lower_if did it all */
    if (dyn_follows(n)) {
        int64_t cap = mean_capacity(n);
        if (cap) rescale_mean(L, n, cap);
        if (n->op == OP_Concat && is_dyn_dim(n->out[0], concat_axis(n))) concat_packed(L, n);
        lower_dyn_dims(L, n);
        return;
    }
    for (int o = 0; o < n->nout; o++) {
        Value *v = n->out[o];
        if (!v || !v->dyn || v->nuses <= (v->is_output ? 1 : 0)) continue;
        if (dyn_bits(v) & ~1u) lower_unpack(L, n, o);
    }
}

void dyn_pack_output(Lower *L, Value *v, Buf *out, Buf *dims_out) {
    Program *p = L->p;
    Buf *in = L->vbuf[v->id], *dims = dims_buf(L, v);
    Kernel *k = kir_kernel_new(p, lower_name(L, arena_printf(p->arena, "%s_pack", v->name)), "Pack", KC_GENERIC);
    kir_param(p, k, in, KP_IN);
    kir_param(p, k, dims, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *actual[MAX_RANK];
    lower_vars(k, in->rank, vars);
    lower_var_idx(p, in->rank, vars, idx);
    Stmt *put = ks_if(p, inside(p, v, dims, idx), store_lin(p, out, packed_pos(p, v, dims, idx), kx_load(p, in, idx)), NULL);
    Stmt *body = lower_wrap(p, in->rank, in->dims, vars, put);
    for (int d = 0; d < v->rank; d++) actual[d] = dim_of(p, v, dims, d);
    k->body = ks_seq(body, finish_dyn(p, k, out, dims_out, actual));
}
