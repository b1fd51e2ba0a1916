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
}

void lower_nonzero(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, NULL, NULL);
    int r = x->rank, cnt = kir_scalar(p, k, DT_INDEX), pos = kir_scalar(p, k, DT_INDEX);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    /* pass 1: count */
    lower_vars(k, r, vars);
    lower_var_idx(p, r, vars, idx);
    Stmt *body = ks_set(p, cnt, kx_index(p, 0));
    ks_seq(body, lower_wrap(p, r, x->dims, vars, ks_if(p, nonzero(p, kx_load(p, x, idx)), incr(p, k, cnt), NULL)));
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
    ks_seq(body, lower_wrap(p, r, x->dims, vars, ks_if(p, nonzero(p, kx_load(p, x, idx)), put, NULL)));
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
    }
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) {
            ir_set_shape(n->out[i], DT_INT64, 1, &s.m);
            n->out[i]->dyn = i != 2;        /* inverse_indices has one entry per slice */
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
 * iou_threshold, until max_output_boxes_per_class are taken or none is left. A scratch byte per
 * box (a temporary the kernel reads back, KP_INOUT) says whether it is still a candidate. */

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

void lower_nms(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *boxes = lower_in(L, n, 0), *scores = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int64_t nb = boxes->dims[0], nbox = boxes->dims[1], ncls = scores->dims[1];
    bool center = ir_attr_int(n, "center_point_box", 0) != 0;
    Buf *cand = kir_buf_new(p, arena_printf(p->arena, "%s.candidate", lower_kname(L, n)), DT_BOOL, 1, &nbox, B_TEMP);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(boxes, scores), out, NULL, NULL);
    kir_param(p, k, cand, KP_INOUT);
    Expr *maxout = rule_opt_in(n, 2) ? rule_index_operand(L, n, k, 2) : kx_index(p, 0);
    Value *iv_ = rule_opt_in(n, 3), *sv_ = rule_opt_in(n, 4);
    Expr *iou_thr = iv_ ? kx_cast(p, DT_FLOAT, rule_load_first(p, k, lower_in(L, n, 3))) : kx_const(p, DT_FLOAT, 0);
    Expr *score_thr = sv_ ? kx_cast(p, DT_FLOAT, rule_load_first(p, k, lower_in(L, n, 4))) : NULL;
    int total = kir_scalar(p, k, DT_INDEX), taken = kir_scalar(p, k, DT_INDEX), best = kir_scalar(p, k, DT_INDEX);
    int bs = kir_scalar(p, k, DT_FLOAT), lim = kir_scalar(p, k, DT_INDEX);
    int bv = kir_var(k), cv = kir_var(k), tv = kir_var(k), jv = kir_var(k), sv = kir_var(k), qv = kir_var(k);
    Expr *bat = kx_var(p, bv);
    /* candidates: every box whose score passes the threshold */
    Expr *sidx[3] = {kx_var(p, bv), kx_var(p, cv), kx_var(p, jv)};
    Expr *score = kx_cast(p, DT_FLOAT, kx_load(p, scores, sidx));
    Expr *ok = score_thr ? kx_bin(p, K_GT, kx_clone(p, score), kx_clone(p, score_thr)) : kx_const(p, DT_BOOL, 1);
    Expr *jj = kx_var(p, jv);
    Stmt *cls = ks_loop(p, jv, 0, nbox, 1, ks_store(p, cand, &jj, ok));
    ks_seq(cls, ks_set(p, taken, kx_index(p, 0)));
    /* one selection per round */
    Expr *sj[3] = {kx_var(p, bv), kx_var(p, cv), kx_var(p, sv)};
    Expr *sc = kx_cast(p, DT_FLOAT, kx_load(p, scores, sj));
    Expr *cs = kx_var(p, sv);
    Expr *better = kx_bin(p, K_AND, kx_load(p, cand, &cs),
                          kx_bin(p, K_OR, kx_bin(p, K_LT, sreg(p, k, best), kx_index(p, 0)),
                                 kx_bin(p, K_GT, kx_clone(p, sc), sreg(p, k, bs))));
    Stmt *scan = ks_if(p, better, ks_seq(ks_set(p, best, kx_var(p, sv)), ks_set(p, bs, sc)), NULL);
    Stmt *round = ks_set(p, best, kx_index(p, -1));
    ks_seq(round, ks_set(p, bs, kx_const(p, DT_FLOAT, 0)));
    ks_seq(round, ks_loop(p, sv, 0, nbox, 1, scan));
    /* take it: a row (batch, class, box), and drop it and its overlaps from the candidates */
    Stmt *take = NULL;
    Expr *val[3] = {kx_var(p, bv), kx_var(p, cv), sreg(p, k, best)};
    for (int j = 0; j < 3; j++) {
        Expr *oi[2] = {sreg(p, k, total), kx_index(p, j)};
        take = ks_seq(take, ks_store(p, out, oi, kx_cast(p, DT_INT64, val[j])));
    }
    ks_seq(take, incr(p, k, total));
    ks_seq(take, incr(p, k, taken));
    Expr *a[4], *b[4];
    nms_box(p, boxes, bat, sreg(p, k, best), center, a);
    nms_box(p, boxes, bat, kx_var(p, qv), center, b);
    Expr *ih = kx_bin(p, K_MAX, kx_const(p, DT_FLOAT, 0), kx_bin(p, K_SUB, kx_bin(p, K_MIN, kx_clone(p, a[2]), kx_clone(p, b[2])),
                                                                  kx_bin(p, K_MAX, kx_clone(p, a[0]), kx_clone(p, b[0]))));
    Expr *iw = kx_bin(p, K_MAX, kx_const(p, DT_FLOAT, 0), kx_bin(p, K_SUB, kx_bin(p, K_MIN, kx_clone(p, a[3]), kx_clone(p, b[3])),
                                                                  kx_bin(p, K_MAX, kx_clone(p, a[1]), kx_clone(p, b[1]))));
    Expr *inter = kx_bin(p, K_MUL, ih, iw);
    Expr *area_a = kx_bin(p, K_MUL, kx_bin(p, K_SUB, a[2], a[0]), kx_bin(p, K_SUB, a[3], a[1]));
    Expr *area_b = kx_bin(p, K_MUL, kx_bin(p, K_SUB, b[2], b[0]), kx_bin(p, K_SUB, b[3], b[1]));
    Expr *uni = kx_bin(p, K_SUB, kx_bin(p, K_ADD, area_a, area_b), kx_clone(p, inter));
    /* inter / union > thr, written without a division: union > 0 and inter > thr * union */
    Expr *over = kx_bin(p, K_AND, kx_bin(p, K_GT, kx_clone(p, uni), kx_const(p, DT_FLOAT, 0)),
                        kx_bin(p, K_GT, inter, kx_bin(p, K_MUL, kx_clone(p, iou_thr), uni)));
    Expr *cq = kx_var(p, qv), *cq2 = kx_var(p, qv);
    Expr *drop = kx_bin(p, K_OR, kx_bin(p, K_EQ, kx_var(p, qv), sreg(p, k, best)), over);
    Stmt *sup = ks_store(p, cand, &cq, kx_bin(p, K_AND, kx_load(p, cand, &cq2), kx_un(p, K_NOT, drop)));
    ks_seq(take, ks_loop(p, qv, 0, nbox, 1, sup));
    ks_seq(round, ks_if(p, kx_bin(p, K_AND, kx_bin(p, K_GE, sreg(p, k, best), kx_index(p, 0)),
                                  kx_bin(p, K_LT, sreg(p, k, taken), sreg(p, k, lim))), take, NULL));
    ks_seq(cls, ks_loop(p, tv, 0, nbox, 1, round));
    Stmt *body = ks_set(p, total, kx_index(p, 0));
    ks_seq(body, ks_set(p, lim, kx_bin(p, K_MIN, maxout, kx_index(p, nms_per_class(n, nbox)))));
    ks_seq(body, ks_loop(p, bv, 0, nb, 1, ks_loop(p, cv, 0, ncls, 1, cls)));
    Expr *actual[2] = {sreg(p, k, total), kx_index(p, 3)};
    k->body = ks_seq(body, finish_dyn(p, k, out, lower_dims(L, n, 0), actual));
}
