/* rules_util.c - small checks and constructors shared by the per-op rules (rules_*.c):
 * operand availability, axis normalisation, constant integer operands. Declared in lower.h. */
#include <string.h>

#include "lower.h"

bool rule_inputs_known(const Node *n) {
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] && (n->in[i]->rank < 0 || n->in[i]->dtype == DT_UNDEF)) return false;
    return true;
}

bool rule_axis(Graph *g, Node *n, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) {
        if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)axis, rank);
        return false;
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

Value *rule_const_ints(Graph *g, Node *n, int i, const char *what, int64_t max) {
    Value *v = n->in[i];
    if (!v->data) {
        error(ir_where(g, n), "%s '%s' is not a compile-time constant (unsupported)", what, v->name);
        return NULL;
    }
    if (dtype_is_float(v->dtype) || v->rank > 1 || ir_numel(v) > max) {
        error(ir_where(g, n), "%s '%s' must be a 1-D integer tensor of at most %lld elements",
              what, v->name, (long long)max);
        return NULL;
    }
    return v;
}

/* Which dims a Reduce* node reduces; returns false for "no reduction" (empty axes with
 * noop_with_empty_axes) and -1 after reporting a bad axis. */
int rule_reduce_mask(Graph *g, Node *n, bool *mask) {
    Value *x = n->in[0], *ax = n->nin > 1 ? n->in[1] : NULL;
    int64_t na = ax ? ir_numel(ax) : 0;
    if (ax && !ax->data) {
        if (g) error(ir_where(g, n), "axes must be a constant");
        return -1;
    }
    for (int d = 0; d < x->rank; d++) mask[d] = na == 0;
    if (na == 0) return !ir_attr_int(n, "noop_with_empty_axes", 0);
    for (int64_t i = 0; i < na; i++) {
        int64_t a = ir_const_int(ax, i);
        if (a < -x->rank || a >= x->rank) {
            if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)a, x->rank);
            return -1;
        }
        mask[a < 0 ? a + x->rank : a] = true;
    }
    return 1;
}

bool rule_matmul_shape(const Value *a, const Value *b, MatShape *s) {
    int64_t bd[MAX_RANK];
    if (a->rank < 1 || b->rank < 1) return false;
    s->nba = MAX(a->rank - 2, 0);
    s->nbb = MAX(b->rank - 2, 0);
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->kd = a->dims[a->rank - 1];
    s->nn = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (b->dims[b->rank >= 2 ? b->rank - 2 : 0] != s->kd) return false;
    if (!ir_broadcast(s->nba, a->dims, s->nbb, b->dims, &s->nb, bd)) return false;
    memcpy(s->dims, bd, sizeof(int64_t) * (size_t)s->nb);
    s->rank = s->nb;
    if (a->rank >= 2) s->dims[s->rank++] = s->m;
    if (b->rank >= 2) s->dims[s->rank++] = s->nn;
    return s->rank <= MAX_RANK;
}
