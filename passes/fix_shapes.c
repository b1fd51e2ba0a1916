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

/* "1x3xHxW": the known dims, 1 (the usual batch size) for an unknown first dim, and the
 * others by their symbol's name ("?" when they have none): a hint that can be pasted as it
 * is when only the batch is open, and that says which sizes to choose otherwise (a guess of
 * 1 for a CNN's height and width made a hint that failed further on). */
static const char *shape_hint(Graph *g, const Value *v) {
    char *s = "";
    for (int d = 0; d < v->rank; d++) {
        const char *x = d ? "x" : "";
        if (v->dims[d] >= 0) s = arena_printf(g->arena, "%s%s%" PRId64, s, x, v->dims[d]);
        else if (d == 0) s = arena_printf(g->arena, "%s1", s);
        else s = arena_printf(g->arena, "%s%s%s", s, x, v->sym[d] && *v->sym[d] ? v->sym[d] : "?");
    }
    return s;
}

/* One message per input, naming every open dim: "dimension 'N' (dim 0)", "dimensions 'N'
 * (dim 0), 'H' (dim 2) and 'W' (dim 3)"; the hint says which sizes still need a choice. */
static void check_static(Graph *g, const Value *v) {
    if (v->rank < 0) {
        error(g->path, "input '%s' has an unknown rank; fix it with --shape %s=D0xD1x...", v->name,
              v->name);
        return;
    }
    int open = 0, named = 0, seen = 0, spatial = 0;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0) open++, named += v->sym[d] != NULL, spatial += d > 0;
    if (!open) return;
    char *list = "";
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] >= 0) continue;
        seen++;
        const char *sep = seen == 1 ? "" : seen == open ? " and " : ", ";
        list = v->sym[d] ? arena_printf(g->arena, "%s%s'%s' (dim %d)", list, sep, v->sym[d], d)
                         : arena_printf(g->arena, "%s%sdim %d", list, sep, d);
    }
    error(g->path, "input '%s' has %s %s %s; fix %s with --shape %s=%s%s", v->name,
          named == open ? "unresolved" : "unknown", open > 1 ? "dimensions" : "dimension", list,
          open > 1 ? "them" : "it", v->name, shape_hint(g, v),
          spatial ? ", each name or ? replaced by its size" : "");
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

/* ---- sequence and optional inputs ---- */

static Node *prepend(Graph *g, Node *first, Op op, const char *name, int nin, Value *out) {
    Node *n = first ? ir_node_insert_before(g, first, op, name, nin, 1) : ir_node_new(g, op, name, nin, 1);
    n->out[0] = out;
    out->producer = n;
    return n;
}

/* Input v, a sequence or optional (passes/ops/sequence.c), becomes `len` tensor inputs NAME.K
 * with the declared element type, which --shape NAME.K may complete, and the nodes building
 * the container from them at the top of the graph. len -1: an absent optional. */
static int expand_input(Graph *g, Value *v, int64_t len, Value **ins) {
    Node *first = g->nnodes ? g->nodes[0] : NULL;
    ValueKind inner = v->kind == VK_OPT ? v->elem_kind : v->kind;
    int n = len < 0 ? 0 : (int)len;
    for (int k = 0; k < n; k++) {
        Value *e = ins[k] = ir_value_new(g, arena_printf(g->arena, "%s.%d", v->name, k));
        e->dtype = v->dtype;
        e->rank = v->rank;
        memcpy(e->dims, v->dims, sizeof e->dims);
        memcpy(e->sym, v->sym, sizeof e->sym);
        e->is_input = true;
    }
    v->is_input = false;
    if (v->kind == VK_OPT && len < 0) {
        Node *o = prepend(g, first, OP_Optional, arena_printf(g->arena, "%s.none", v->name), 0, v);
        int64_t ty[3] = {inner, VK_TENSOR, v->dtype};
        ir_attr_set_ints(g, o, "type", ty, 3);
        return 0;
    }
    Value *inside = v->kind == VK_OPT ? (inner == VK_SEQ ? ir_value_new(g, arena_printf(g->arena, "%s.seq", v->name)) : ins[0]) : v;
    if (inner == VK_SEQ) {
        Node *s = prepend(g, first, n ? OP_SequenceConstruct : OP_SequenceEmpty,
                          arena_printf(g->arena, "%s.construct", v->name), n, inside);
        memcpy(s->in, ins, sizeof(Value *) * (size_t)n);
        ir_attr_set_int(g, s, "dtype", v->dtype);
    }
    if (v->kind == VK_OPT) prepend(g, first, OP_Optional, arena_printf(g->arena, "%s.some", v->name), 1, v)->in[0] = inside;
    return n;
}

void fix_containers(Graph *g, const Options *o) {
    int total = 0, ncont = 0;
    int64_t *lens = ARENA_ARRAY(g->arena, int64_t, g->ninputs + 1);
    for (int i = 0; i < g->ninputs; i++) {
        Value *v = g->inputs[i];
        lens[i] = 1;
        if (v->kind == VK_TENSOR) {
            total++;
            continue;
        }
        bool found = false;
        ncont++;
        for (int k = 0; o && k < o->nseqs; k++)
            if (strcmp(o->seq_names[k], v->name) == 0) found = true, lens[i] = o->seq_lens[k];
        const char *what = v->kind == VK_SEQ ? "a sequence" : "an optional";
        if (!found) {
            error(g->path, "input '%s' is %s; give its %s with --seq %s=%s", v->name, what,
                  v->kind == VK_SEQ || v->elem_kind == VK_SEQ ? "length" : "presence", v->name,
                  v->kind == VK_SEQ ? "N" : v->elem_kind == VK_SEQ ? "N|none" : "1|none");
        } else if ((lens[i] < 0 && v->kind != VK_OPT) || (v->kind == VK_OPT && v->elem_kind == VK_TENSOR && lens[i] > 1)) {
            error(g->path, "--seq %s: input '%s' is %s of %s", v->name, v->name, what,
                  v->elem_kind == VK_SEQ || v->kind == VK_SEQ ? "a sequence (N >= 0)" : "a tensor (1 or none)");
        }
        total += lens[i] < 0 ? 0 : (int)lens[i];
    }
    for (int k = 0; o && k < o->nseqs; k++) {
        Value *v = NULL;            /* an input, or one expanded already (check, then fix_shapes) */
        for (int i = 0; i < ir_root(g)->nvalues; i++)
            if (strcmp(g->values[i]->name, o->seq_names[k]) == 0) v = g->values[i];
        if (!v || v->kind == VK_TENSOR)
            error(g->path, "--seq %s: the model has no sequence or optional input named '%s'", o->seq_names[k], o->seq_names[k]);
    }
    if (error_count || !ncont) return;
    Value **ins = ARENA_ARRAY(g->arena, Value *, total + 1);
    int n = 0;
    for (int i = 0; i < g->ninputs; i++) {
        Value *v = g->inputs[i];
        if (v->kind == VK_TENSOR) ins[n++] = v;
        else n += expand_input(g, v, lens[i], ins + n);
    }
    g->inputs = ins;
    g->ninputs = n;
}

void fix_shapes(Graph *g, const Options *o) {
    fix_containers(g, o);
    exit_if_errors();
    for (int k = 0; o && k < o->ntrips; k++) apply_max_trip(g, o, k);
    for (int k = 0; o && k < o->nshapes; k++) apply_shape(g, o, k);
    for (int k = 0; o && k < o->nbinds; k++) apply_binding(g, &o->binds[k]);
    for (int i = 0; i < g->ninputs; i++) check_static(g, g->inputs[i]);
    exit_if_errors();
}
