/* fix_shapes.c - the first pass: give every graph input a static shape.
 *
 * onnxcc compiles for one shape. The user fixes symbolic or unknown input dims with
 * --shape NAME=D0xD1x...; whatever is still unresolved afterwards is reported here, input by
 * input, with the --shape flag that would fix it, rather than as a confusing failure deep in
 * shape inference. Output shapes are not looked at: infer_shapes recomputes them.
 *
 * --bind NAME=FILE.pb goes one step further: input NAME becomes a constant with the file's
 * contents and stops being an input of the compiled model. That is what makes models
 * compilable whose shape-like operands (Reshape's shape, Slice's starts, ...) are graph inputs:
 * infer_shapes then sees them as constant data like an initializer. */
#include <inttypes.h>
#include <string.h>

#include "pipeline.h"

static Value *find_input(Graph *g, const char *name) {
    for (int i = 0; i < g->ninputs; i++)
        if (strcmp(g->inputs[i]->name, name) == 0) return g->inputs[i];
    return NULL;
}

static void apply_shape(Graph *g, const Options *o, int k) {
    Value *v = find_input(g, o->shape_names[k]);
    if (!v) {
        error(g->path, "--shape %s: the model has no input named '%s'", o->shape_names[k],
              o->shape_names[k]);
        return;
    }
    if (v->rank >= 0 && v->rank != o->shape_ranks[k]) {
        error(g->path, "--shape %s: input '%s' has rank %d, not %d", o->shape_names[k], v->name,
              v->rank, o->shape_ranks[k]);
        return;
    }
    for (int d = 0; d < o->shape_ranks[k]; d++)
        if (v->rank >= 0 && v->dims[d] >= 0 && v->dims[d] != o->shape_dims[k][d])
            warn(g->path, "--shape %s: dim %d of input '%s' changed from %" PRId64 " to %" PRId64,
                 o->shape_names[k], d, v->name, v->dims[d], o->shape_dims[k][d]);
    v->rank = o->shape_ranks[k];
    for (int d = 0; d < v->rank; d++) {
        v->dims[d] = o->shape_dims[k][d];
        v->sym[d] = NULL;
    }
}

static const char *type_str(Graph *g, DType t, int rank, const int64_t *dims) {
    char *s = arena_printf(g->arena, "%s [", dtype_name(t));
    for (int d = 0; d < rank; d++)
        s = arena_printf(g->arena, "%s%s%" PRId64, s, d ? "," : "", dims[d]);
    return arena_printf(g->arena, "%s]", s);
}

/* The declared type must admit the bound tensor: unknown dtype, rank or dims admit anything. */
static bool binding_fits(const Value *v, const Binding *b) {
    if (v->dtype != DT_UNDEF && v->dtype != b->dtype) return false;
    if (v->rank < 0) return true;
    if (v->rank != b->rank) return false;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] >= 0 && v->dims[d] != b->dims[d]) return false;
    return true;
}

/* Input NAME becomes a constant value and leaves g->inputs (the graph's order of the others is
 * kept: it is the order of the compiled function's inputs). */
static void apply_binding(Graph *g, const Binding *b) {
    int i = 0;
    while (i < g->ninputs && strcmp(g->inputs[i]->name, b->name) != 0) i++;
    if (i == g->ninputs) {
        const char *names = "";
        for (int k = 0; k < g->ninputs; k++)
            names = arena_printf(g->arena, "%s%s'%s'", names, k ? ", " : "", g->inputs[k]->name);
        error(g->path, "--bind %s=%s: the model has no input named '%s' (its inputs: %s)", b->name,
              b->from, b->name, g->ninputs ? names : "none");
        return;
    }
    Value *v = g->inputs[i];
    if (!binding_fits(v, b)) {
        const char *want = v->rank < 0 ? dtype_name(v->dtype) : type_str(g, v->dtype, v->rank, v->dims);
        error(g->path, "--bind %s=%s: input '%s' is %s, the file holds %s", b->name, b->from,
              v->name, want, type_str(g, b->dtype, b->rank, b->dims));
        return;
    }
    ir_set_shape(v, b->dtype, b->rank, b->dims);
    for (int d = 0; d < MAX_RANK; d++) v->sym[d] = NULL;
    size_t n = ir_nbytes(v);
    v->data = arena_alloc(g->arena, n ? n : 1);     /* non-NULL even for an empty tensor */
    if (n) memcpy(v->data, b->data, n);
    v->is_input = false;
    g->ninputs--;
    memmove(&g->inputs[i], &g->inputs[i + 1], sizeof(Value *) * (size_t)(g->ninputs - i));
}

/* "1x3x224x224": the known dims, and 1 (the usual batch size) for the unknown ones, so that
 * the hint can be pasted as it is. */
static const char *shape_hint(Graph *g, const Value *v) {
    char *s = "";
    for (int d = 0; d < v->rank; d++)
        s = v->dims[d] >= 0 ? arena_printf(g->arena, "%s%s%" PRId64, s, d ? "x" : "", v->dims[d])
                            : arena_printf(g->arena, "%s%s1", s, d ? "x" : "");
    return s;
}

static void check_static(Graph *g, const Value *v) {
    if (v->rank < 0) {
        error(g->path, "input '%s' has an unknown rank; fix it with --shape %s=D0xD1x...", v->name,
              v->name);
        return;
    }
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] >= 0) continue;
        if (v->sym[d])
            error(g->path, "input '%s' has unresolved dimension '%s' (dim %d); fix it with --shape %s=%s",
                  v->name, v->sym[d], d, v->name, shape_hint(g, v));
        else
            error(g->path, "input '%s' has an unknown dimension (dim %d); fix it with --shape %s=%s",
                  v->name, d, v->name, shape_hint(g, v));
        return;                     /* one message per input is enough */
    }
}

/* The Loop node called `name`, in g or any body. */
static Node *find_node(Graph *g, const char *name) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i], *r;
        if (strcmp(n->name, name) == 0) return n;
        Graph *sub[4];
        for (int j = 0, ns = ir_subgraphs(n, sub, 4); j < ns; j++)
            if ((r = find_node(sub[j], name))) return r;
    }
    return NULL;
}

/* --max-trip NODE=N becomes the node's attribute onnxcc.max_trip, read by the Loop rule. */
static void apply_max_trip(Graph *g, const Options *o, int k) {
    Node *n = find_node(g, o->trip_nodes[k]);
    if (!n || n->op != OP_Loop) {
        error(g->path, "--max-trip %s=%lld: the model has no Loop node named '%s'", o->trip_nodes[k],
              (long long)o->trip_max[k], o->trip_nodes[k]);
        return;
    }
    ir_attr_set_int(g, n, "onnxcc.max_trip", o->trip_max[k]);
}

void fix_shapes(Graph *g, const Options *o) {
    for (int k = 0; o && k < o->ntrips; k++) apply_max_trip(g, o, k);
    for (int k = 0; o && k < o->nshapes; k++) apply_shape(g, o, k);
    for (int k = 0; o && k < o->nbinds; k++) apply_binding(g, &o->binds[k]);
    for (int i = 0; i < g->ninputs; i++) check_static(g, g->inputs[i]);
    exit_if_errors();
}
