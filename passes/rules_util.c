/* rules_util.c - small checks and constructors shared by the per-op rules (rules_*.c):
 * operand availability, axis normalisation, constant integer operands. Declared in lower.h. */
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
