/* generator.c - the ops that create data from (almost) nothing: Constant, ConstantOfShape,
 * Range, EyeLike.
 *
 * Their output shapes come from constant operands (ConstantOfShape's shape, Range's bounds)
 * or from an input's shape (EyeLike). ConstantOfShape is lower_map's broadcast form, so it is
 * an elementwise kernel that fusion can merge into its consumers; Constant (and every op whose
 * shape rule computed its values, such as Shape) lowers to a constant buffer. */
#include <string.h>

#include "../lower.h"
#include "../pipeline.h"

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

/* The fill value of ConstantOfShape: a one-element tensor attribute, float 0 by default. */
static Value *fill_value(Node *n) {
    Attr *a = ir_attr(n, "value");
    return a && a->type == A_TENSOR ? a->t : NULL;
}

void infer_constant_of_shape(Graph *g, Node *n) {
    Value *src = dyn_shape_source(n), *s = src ? NULL : rule_const_ints(g, n, 0, "shape", MAX_RANK);
    if (!s && !src) return;
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
    if (src) {                  /* the shape of a data-dependent value: its capacity (dynamic.c) */
        ir_set_shape(n->out[0], t, src->rank, src->dims);
        return;
    }
    int rank = (int)ir_numel(s);
    for (int d = 0; d < rank; d++) {
        dims[d] = ir_const_int(s, d);
        if (dims[d] < 0) {
            error(ir_where(g, n), "negative dimension in shape %s", rule_dims_str(g, d + 1, dims));
            return;
        }
    }
    ir_set_shape(n->out[0], t, rank, dims);
}

static Expr *map_fill(Lower *L, Node *n, Expr **vals, void *ctx) {
    Value *fill = fill_value(n);
    if (!fill) return kx_const(L->p, DT_FLOAT, 0);
    return rule_scalar_const(L->p, fill, fill->dtype);
}

void lower_constant_of_shape(Lower *L, Node *n) {
    lower_map(L, n, lower_out(L, n, 0), 0, NULL, map_fill, NULL);
}

/* The element count of Range is its shape, so start, limit and delta must be constants. */
void infer_range(Graph *g, Node *n) {
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
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(start, delta), out, vars, idx);
    for (int d = 0; d < MAX_RANK; d++) zero[d] = kx_index(p, 0);
    Expr *step = kx_bin(p, K_MUL, kx_cast(p, out->dtype, idx[0]), kx_load(p, delta, zero));
    Expr *v = kx_bin(p, K_ADD, kx_load(p, start, zero), step);
    k->body = lower_wrap(p, 1, out->dims, vars, ks_store(p, out, idx, v));
}

void infer_eyelike(Graph *g, Node *n) {
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
    Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, KNOINS, out, vars, idx);
    Expr *diag = kx_bin(p, K_SUB, idx[1], idx[0]);
    Expr *on = kx_bin(p, K_EQ, diag, kx_index(p, ir_attr_int(n, "k", 0)));
    Expr *v = kx_select(p, on, kx_const(p, out->dtype, 1), kx_const(p, out->dtype, 0));
    k->body = lower_wrap(p, 2, out->dims, vars, ks_store(p, out, idx, v));
}
