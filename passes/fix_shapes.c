/* fix_shapes.c - the first pass: give every graph input a static shape.
 *
 * onnxcc compiles for one shape. The user fixes symbolic or unknown input dims with
 * --shape NAME=D0xD1x...; whatever is still unresolved afterwards is reported here, input by
 * input, with the --shape flag that would fix it, rather than as a confusing failure deep in
 * shape inference. Output shapes are not looked at: infer_shapes recomputes them. */
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

void fix_shapes(Graph *g, const Options *o) {
    for (int k = 0; o && k < o->nshapes; k++) apply_shape(g, o, k);
    for (int i = 0; i < g->ninputs; i++) check_static(g, g->inputs[i]);
    exit_if_errors();
}
