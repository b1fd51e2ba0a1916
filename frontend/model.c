/* model.c - ONNX ModelProto -> graph IR, the first step of the pipeline.
 *
 * The protobuf is decoded by protobuf-c (code generated from Debian's onnx.proto at build
 * time) into the arena, then walked once: opset imports, initializers (constant values),
 * graph inputs, nodes with their attributes, graph outputs. Values are interned by name, so
 * every distinct ONNX name becomes exactly one Value.
 *
 * Everything the rest of onnxcc cannot handle is reported here, all of it at once (every
 * unsupported op, every bad dtype, every dangling value) before exit_if_errors(): a user
 * fixing a model wants the whole list, not one complaint per run. */
#include <string.h>

#include "tensor.h"

typedef struct Parser {
    Graph *g;                       /* the graph being read: the model's or a subgraph */
    const char *path;
    const Onnx__ModelProto *m;
    Value **tab;                    /* open-addressing hash of values by name (this scope) */
    int cap, count;
    struct Parser *up;              /* a subgraph's enclosing scope, whose names it may use */
} Parser;

/* ---- values by name ---- */

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u;       /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static Value **slot(Parser *p, const char *name) {
    uint32_t i = hash_name(name) & (uint32_t)(p->cap - 1);
    while (p->tab[i] && strcmp(p->tab[i]->name, name) != 0) i = (i + 1) & (uint32_t)(p->cap - 1);
    return &p->tab[i];
}

static void grow_table(Parser *p) {
    Value **old = p->tab;
    int oldcap = p->cap;
    p->cap = oldcap ? oldcap * 2 : 256;
    p->tab = ARENA_ARRAY(p->g->arena, Value *, p->cap);
    for (int i = 0; i < oldcap; i++)
        if (old[i]) *slot(p, old[i]->name) = old[i];
}

static Value *lookup(Parser *p, const char *name) { return *slot(p, name); }

/* The value called `name` in this scope or an enclosing one (a subgraph's outer reference). */
static Value *lookup_scoped(Parser *p, const char *name) {
    for (; p; p = p->up) {
        Value *v = lookup(p, name);
        if (v) return v;
    }
    return NULL;
}

/* The value called `name`, created (untyped, no producer) on first mention. */
static Value *intern(Parser *p, const char *name) {
    if (2 * (p->count + 1) > p->cap) grow_table(p);
    Value **s = slot(p, name);
    Value *outer = *s || !p->up ? NULL : lookup_scoped(p->up, name);
    if (outer) return outer;
    if (!*s) {
        *s = ir_value_new(p->g, name);
        p->count++;
    }
    return *s;
}

/* ---- types of graph inputs and outputs ---- */

static void read_dims(Parser *p, Value *v, const Onnx__TensorShapeProto *sh, const char *what) {
    if (sh->n_dim > MAX_RANK) {
        error(p->path, "%s '%s' has rank %zu; onnxcc supports at most %d", what, v->name,
              sh->n_dim, MAX_RANK);
        return;
    }
    v->rank = (int)sh->n_dim;
    for (int d = 0; d < v->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sh->dim[d];
        v->dims[d] = -1;
        v->sym[d] = "?";
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dim->dim_value >= 0) {
            v->dims[d] = dim->dim_value;
            v->sym[d] = NULL;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dim->dim_param && *dim->dim_param) {
            v->sym[d] = arena_strdup(p->g->arena, dim->dim_param);
        }
    }
}

/* The tensor type inside a tensor, sequence-of-tensor, optional-of-tensor or
 * optional-of-sequence type, and the kinds around it; NULL for anything else (maps, nests). */
static const Onnx__TypeProto__Tensor *container_type(const Onnx__TypeProto *tp, ValueKind *kind,
                                                     ValueKind *elem) {
    *kind = *elem = VK_TENSOR;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && tp->optional_type) {
        *kind = VK_OPT;
        tp = tp->optional_type->elem_type;
    }
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type) {
        if (*kind == VK_OPT) *elem = VK_SEQ;
        else *kind = VK_SEQ;
        tp = tp->sequence_type->elem_type;
    }
    return tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
}

/* dtype and shape of a graph input ("input") or output ("output") from its declared type. */
static void read_type(Parser *p, Value *v, const Onnx__TypeProto *tp, const char *what) {
    if (!tp) {
        /* ONNX requires a type; an output without one can still be inferred */
        if (strcmp(what, "input") == 0) error(p->path, "input '%s' has no type", v->name);
        return;
    }
    ValueKind kind, elem;
    const Onnx__TypeProto__Tensor *tt = container_type(tp, &kind, &elem);
    if (!tt) {
        error(p->path, "%s '%s' is not a tensor, a sequence of tensors or an optional of either "
              "(maps are not supported)", what, v->name);
        return;
    }
    v->kind = kind;
    v->elem_kind = elem;
    if (tt->has_elem_type && dtype_nibbles(tt->elem_type) != DT_UNDEF) {
        /* int4/uint4 (int8/uint8 inside) and float4e2m1: two values a byte at the interface (ir.h) */
        if (kind != VK_TENSOR) {
            error(p->path, "%s '%s' is a sequence or optional of %s, which onnxcc does not "
                  "support (4-bit tensors are)", what, v->name, dtype_name((DType)tt->elem_type));
            return;
        }
        v->dtype = dtype_nibbles(tt->elem_type);
        v->nibbles = true;
        v->crumbs = dtype_pack_bits(tt->elem_type) == 2;
    } else if (tt->has_elem_type && tt->elem_type != 0) {
        if (!dtype_known((DType)tt->elem_type)) {
            error(p->path, "%s '%s' has unsupported element type %s", what, v->name,
                  fe_type_name(tt->elem_type));
            return;
        }
        v->dtype = (DType)tt->elem_type;
    } else if (strcmp(what, "input") == 0) {
        error(p->path, "input '%s' has no element type (elem_type is 0, UNDEFINED)", v->name);
    }
    if (tt->shape) read_dims(p, v, tt->shape, what);
}

/* ---- constants ---- */

/* A constant Value from a TensorProto. In g->values (initializers) or detached (attributes:
 * ir.h says tensor attributes are not graph values). NULL after an error(). */
static Value *make_const(Parser *p, const Onnx__TensorProto *tp, const char *where,
                         const char *what, bool in_graph) {
    Tensor t;
    if (!fe_tensor_from_proto(p->g->arena, tp, p->path, where, what, &t)) return NULL;
    if (!dtype_known(t.dtype)) {
        error(where, "%s has unsupported element type %s", what, dtype_name(t.dtype));
        return NULL;
    }
    Value *v;
    if (in_graph) {
        v = intern(p, t.name);
    } else {
        v = ARENA_NEW(p->g->arena, Value);
        v->id = -1;
        v->name = t.name;
    }
    ir_set_shape(v, t.dtype, t.rank, t.dims);
    v->data = t.data;
    v->nibbles = t.nibbles;
    v->crumbs = t.crumbs;
    return v;
}

static void read_initializers(Parser *p, const Onnx__GraphProto *gp) {
    if (gp->n_sparse_initializer)
        error(p->path, "sparse initializers are not supported");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        const char *name = tp->name ? tp->name : "";
        const char *what = arena_printf(p->g->arena, "initializer '%s'", name);
        if (!*name) { error(p->path, "initializer #%zu has no name", i); continue; }
        if (lookup(p, name)) { error(p->path, "%s is defined twice", what); continue; }
        /* a bad one was reported; as an input without type its uses raise no more errors */
        if (!make_const(p, tp, p->path, what, true)) intern(p, name)->is_input = true;
    }
}

/* Graph inputs, minus the initializers that older exporters also list as inputs. */
static void read_inputs(Parser *p, const Onnx__GraphProto *gp) {
    Graph *g = p->g;
    g->inputs = ARENA_ARRAY(g->arena, Value *, gp->n_input + 1);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name ? vi->name : "";
        if (!*name) { error(p->path, "graph input #%zu has no name", i); continue; }
        Value *v = lookup(p, name);
        if (v && v->data) continue;
        if (v) { error(p->path, "graph input '%s' is listed twice", name); continue; }
        v = intern(p, name);
        v->is_input = true;
        read_type(p, v, vi->type, "input");
        g->inputs[g->ninputs++] = v;
    }
}

/* value_info only fills in element types: shapes are inferred anyway, and a stale shape in
 * value_info must not contradict inference. */
static void read_value_info(Parser *p, const Onnx__GraphProto *gp) {
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        if (!vi->name || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
            continue;
        Value *v = lookup(p, vi->name);
        const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        if (v && !v->data && v->dtype == DT_UNDEF && tt && dtype_known((DType)tt->elem_type))
            v->dtype = (DType)tt->elem_type;
    }
}

/* ---- attributes ---- */

/* Models from before AttributeProto.type existed only set the field they use. */
static int attr_kind(const Onnx__AttributeProto *ap) {
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return ap->type;
    if (ap->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (ap->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (ap->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (ap->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (ap->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (ap->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (ap->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (ap->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    if (ap->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static char *bytes_str(Arena *a, ProtobufCBinaryData b) {
    char *s = arena_alloc(a, b.len + 1);
    if (b.len) memcpy(s, b.data, b.len);
    return s;
}

static Graph *read_subgraph(Parser *p, Node *owner, const Onnx__GraphProto *gp);

/* Fill `at` from `ap`. Returns false if the attribute makes the node unsupported (subgraphs,
 * sparse tensors, type protos); a bad tensor inside is an error() of its own. */
static bool read_attr(Parser *p, Node *n, Attr *at, const Onnx__AttributeProto *ap) {
    Arena *a = p->g->arena;
    at->name = arena_strdup(a, ap->name ? ap->name : "");
    switch (attr_kind(ap)) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at->type = A_FLOAT; at->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at->type = A_INT; at->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        at->type = A_STRING;
        at->s = bytes_str(a, ap->s);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        at->type = A_TENSOR;
        if (!ap->t) return false;
        at->t = make_const(p, ap->t, ir_where(p->g, n),
                           arena_printf(a, "attribute '%s'", at->name), false);
        if (at->t && !*at->t->name) at->t->name = arena_printf(a, "%s.%s", n->name, at->name);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        at->type = A_FLOATS;
        at->n = (int)ap->n_floats;
        at->floats = ARENA_ARRAY(a, float, at->n + 1);
        if (at->n) memcpy(at->floats, ap->floats, sizeof(float) * ap->n_floats);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        at->type = A_INTS;
        at->n = (int)ap->n_ints;
        at->ints = ARENA_ARRAY(a, int64_t, at->n + 1);
        if (at->n) memcpy(at->ints, ap->ints, sizeof(int64_t) * ap->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        at->type = A_STRINGS;
        at->n = (int)ap->n_strings;
        at->strings = ARENA_ARRAY(a, char *, at->n + 1);
        for (int i = 0; i < at->n; i++) at->strings[i] = bytes_str(a, ap->strings[i]);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        at->type = A_GRAPH;             /* If's branches, Loop's and Scan's body */
        if (!ap->g) return false;
        at->g = read_subgraph(p, n, ap->g);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: {
        /* Optional's `type`: kept as ints [kind, element kind, dtype] (ValueKind, ONNX dtype) */
        ValueKind kind, elem;
        const Onnx__TypeProto__Tensor *tt = container_type(ap->tp, &kind, &elem);
        if (!tt) return false;
        int64_t v[3] = {kind, elem, tt->has_elem_type ? tt->elem_type : 0};
        at->type = A_INTS;
        at->n = 3;
        at->ints = ARENA_ARRAY(a, int64_t, 3);
        memcpy(at->ints, v, sizeof v);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        at->type = A_GRAPH;             /* lists of graphs: no op onnxcc knows takes one */
        return false;
    default:
        at->type = A_UNDEF;             /* sparse tensors, type protos, tensor lists */
        return false;
    }
    return true;
}

/* ---- nodes ---- */

/* The opset version a node of `domain` runs under in this model (0 if not imported). */
static int domain_opset(Parser *p, const char *domain) {
    bool dflt = !*domain || strcmp(domain, "ai.onnx") == 0;
    if (dflt) return p->g->opset;
    for (size_t i = 0; i < p->m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = p->m->opset_import[i];
        if (os->domain && strcmp(os->domain, domain) == 0) return (int)os->version;
    }
    return 0;
}

/* The default domain's version, checked against the range onnxcc knows (ir.h). A model of
 * IR version 1 or 2 (before opset_import) is refused too: re-export it with an opset. */
static void read_opsets(Parser *p) {
    if (p->m->n_opset_import == 0)
        error(p->path, "the model imports no opset (opset_import is empty); onnxcc supports "
              "opsets 1 to %d of the default domain", OPSET_NEWEST);
    for (size_t i = 0; i < p->m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = p->m->opset_import[i];
        const char *d = os->domain ? os->domain : "";
        bool dflt = !*d || strcmp(d, "ai.onnx") == 0;
        int64_t newest = dflt ? OPSET_NEWEST : 1;
        if (!dflt && strcmp(d, "ai.onnx.preview.training") != 0) continue;
        if (os->version < 1 || os->version > newest)
            error(p->path, "opset %lld of domain '%s' is not supported (onnxcc supports %s)",
                  (long long)os->version, dflt ? "ai.onnx" : d,
                  dflt ? arena_printf(p->g->arena, "1 to %d", OPSET_NEWEST) : "version 1");
        else if (dflt)
            p->g->opset = (int)os->version;
    }
    exit_if_errors();
}

/* Trailing "" names are absent optionals: dropping them keeps nin/nout to what is there. */
static int count_names(char **names, size_t n) {
    while (n > 0 && (!names[n - 1] || !*names[n - 1])) n--;
    return (int)n;
}

static void check_supported(Parser *p, Node *n, bool attrs_ok) {
    const char *where = ir_where(p->g, n);
    if (n->op == OP_UNKNOWN || !attrs_ok) {
        error(where, "unsupported operator %s (domain '%s')", n->op_type, n->domain);
        return;
    }
    const OpInfo *oi = &op_info[n->op];
    int missing = -1;
    /* The required inputs: the first min_in, and all of a variadic list (ONNX has no optional
     * variadic inputs); but Scan-8's first input (sequence_lens) and Loop's first two (M,
     * cond) are optional. */
    int first = n->op == OP_Loop ? 2 : n->op == OP_Scan && n->opset < 9;
    int last = oi->max_in == OP_INF ? n->nin : oi->min_in;
    for (int i = first; i < n->nin && i < last; i++)
        if (!n->in[i] && missing < 0) missing = i;
    int missing_out = -1;           /* the required outputs: the first min_out */
    for (int i = 0; i < n->nout && i < oi->min_out; i++)
        if (!n->out[i] && missing_out < 0) missing_out = i;
    if (n->opset < oi->since)
        error(where, "unsupported operator %s (domain '%s'): opset %d is older than %d",
              n->op_type, n->domain, n->opset, oi->since);
    else if (n->nin < oi->min_in || n->nin > oi->max_in)
        error(where, "unsupported operator %s (domain '%s'): %d inputs", n->op_type, n->domain,
              n->nin);
    else if (n->nout < oi->min_out || n->nout > oi->max_out)
        error(where, "unsupported operator %s (domain '%s'): %d outputs", n->op_type,
              n->domain, n->nout);
    else if (missing >= 0)
        error(where, "input %d is required but its name is empty", missing);
    else if (missing_out >= 0)
        error(where, "output %d is required but its name is empty", missing_out);
    /* graphs only where an op reads them (passes/ops/control.c, sequence.c): another op's would
     * never be inferred, and ONNX's checker refuses an attribute the schema does not name */
    bool takes = n->op == OP_If || n->op == OP_Loop || n->op == OP_Scan || n->op == OP_SequenceMap;
    for (int i = 0; i < n->nattrs; i++) {
        const char *an = n->attrs[i].name;
        if (n->attrs[i].type != A_GRAPH) continue;
        if (!takes)
            error(where, "attribute '%s' is a graph, and %s takes none", an, n->op_type);
        else if (n->op == OP_If ? strcmp(an, "then_branch") && strcmp(an, "else_branch") : strcmp(an, "body") != 0)
            error(where, "attribute '%s' is a graph that %s does not take (its graphs: %s)", an, n->op_type,
                  n->op == OP_If ? "then_branch, else_branch" : "body");
    }
}

static void read_node(Parser *p, const Onnx__NodeProto *np, int index) {
    Graph *g = p->g;
    const char *op_type = np->op_type ? np->op_type : "";
    const char *domain = np->domain ? np->domain : "";
    const char *name = np->name && *np->name ? np->name
                                             : arena_printf(g->arena, "%s_%d", op_type, index);
    int nin = count_names(np->input, np->n_input), nout = count_names(np->output, np->n_output);
    Node *n = ir_node_new(g, op_lookup(domain, op_type), name, nin, nout);
    n->op_type = arena_strdup(g->arena, op_type);
    n->domain = arena_strdup(g->arena, domain);
    n->opset = domain_opset(p, domain);
    for (int i = 0; i < nin; i++)
        n->in[i] = *np->input[i] ? intern(p, np->input[i]) : NULL;
    for (int i = 0; i < nout; i++) {
        if (!*np->output[i]) continue;
        /* a body may not define a name of an outer scope, even one only read there so far
         * (the fuzzer's If whose condition was a value of its own else branch) */
        Value *o = p->up && !lookup(p, np->output[i]) ? lookup_scoped(p->up, np->output[i]) : NULL;
        if (o && !o->producer && !o->is_input && !o->data) {     /* defined outer ones: below */
            /* fatal: the outer reader and the body's later readers would each report it again */
            fatal(ir_where(g, n), "value '%s' is read by an enclosing graph, which cannot see a body's values",
                  np->output[i]);
        }
        Value *v = intern(p, np->output[i]);
        if (v->producer || v->is_input || v->data)
            error(ir_where(g, n), "value '%s' is already defined %s", v->name,
                  v->producer ? arena_printf(g->arena, "by node '%s'", v->producer->name)
                              : v->is_input ? "as a graph input" : "as an initializer");
        else
            v->producer = n;
        n->out[i] = v;
    }
    n->attrs = ARENA_ARRAY(g->arena, Attr, np->n_attribute + 1);
    n->nattrs = (int)np->n_attribute;
    bool attrs_ok = true;
    for (int i = 0; i < n->nattrs; i++)
        attrs_ok &= read_attr(p, n, &n->attrs[i], np->attribute[i]);
    check_supported(p, n, attrs_ok);
}

/* ONNX requires nodes in topological order; every pass relies on it, so check it here. */
static void check_order(Parser *p) {
    for (int i = 0; i < p->g->nnodes; i++) {
        Node *n = p->g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            Value *v = n->in[j];
            if (!v || v->is_input || v->data || (v->producer && v->producer->id < n->id))
                continue;
            if (v->producer)
                error(ir_where(p->g, n), "uses value '%s' before node '%s' produces it (the "
                      "graph is not topologically sorted)", v->name, v->producer->name);
            else
                error(ir_where(p->g, n), "uses value '%s', which is no graph input, initializer "
                      "or node output", v->name);
        }
    }
}

static void read_outputs(Parser *p, const Onnx__GraphProto *gp) {
    Graph *g = p->g;
    g->outputs = ARENA_ARRAY(g->arena, Value *, gp->n_output + 1);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const char *name = vi->name ? vi->name : "";
        Value *v = *name ? lookup(p, name) : NULL;
        if (!v || !(v->producer || v->is_input || v->data)) {
            error(p->path, "graph output '%s' is not produced by any node", name);
            continue;
        }
        if (v->is_output) {                 /* ONNX's checker: output names are unique */
            error(p->path, "graph output '%s' is listed twice (output #%zu)", name, i);
            continue;
        }
        v->is_output = true;
        if (v->data || v->is_input) {
            /* an initializer or a graph input listed as an output keeps its own type and shape
             * (the fuzzer's output declared uint16[N, 10] took an initializer's shape away) */
            const Onnx__TypeProto *tp = vi->type;
            int32_t et = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
                                 tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
            if (et && et != (int32_t)dtype_onnx(v->dtype, ir_pack_bits(v)))
                error(p->path, "graph output '%s' is declared %s, but is the %s of type %s", name, fe_type_name(et),
                      v->data ? "initializer" : "graph input", dtype_name((DType)dtype_onnx(v->dtype, ir_pack_bits(v))));
        } else {
            read_type(p, v, vi->type, "output");
        }
        g->outputs[g->noutputs++] = v;
    }
}

/* ---- subgraphs ----
 * A subgraph (If's branches, Loop's and Scan's body) is read like the model's graph, in a
 * scope of its own whose lookups fall back to the enclosing scopes: a name the body does not
 * define is an outer value, and the body's nodes point at that Value itself. Body inputs may
 * come without a type or shape (the owner's rule infers them); body outputs may be any value
 * in scope. */

static void read_body_inputs(Parser *p, const Onnx__GraphProto *gp) {
    Graph *g = p->g;
    g->inputs = ARENA_ARRAY(g->arena, Value *, gp->n_input + 1);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name ? vi->name : "";
        if (!*name || lookup(p, name)) {
            error(ir_where(p->up->g, g->owner), "body input #%zu ('%s') has no name or is listed twice", i, name);
            continue;
        }
        /* an outer value of that name, defined or only read so far (an outer node reading
         * the body's input: the fuzzer's Relu of a Loop's carried value) */
        Value *v = p->up && lookup_scoped(p->up, name) ? NULL : intern(p, name);
        if (!v || v->data || v->producer || v->is_input) {
            error(ir_where(p->up->g, g->owner), "body input '%s' has the name of an outer value", name);
            continue;
        }
        v->is_input = true;
        const Onnx__TypeProto *tp = vi->type;
        if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
            tp->tensor_type->has_elem_type && dtype_known((DType)tp->tensor_type->elem_type))
            v->dtype = (DType)tp->tensor_type->elem_type;
        else if (tp && tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->value_case != 0) {
            /* a sequence or optional carried by a Loop: the owner's rule gives it its value
             * (passes/ops/sequence.c unrolls such loops) */
            ValueKind kind, elem;
            if (!container_type(tp, &kind, &elem))
                error(ir_where(p->up->g, g->owner), "body input '%s' is not a tensor, a sequence of "
                      "tensors or an optional of either (maps are not supported)", name);
        }
        g->inputs[g->ninputs++] = v;
    }
}

/* An outer value v that a subgraph of scope p uses: defined before the node that owns the
 * subgraph (in the scope that holds that node, or further out before its owner in turn).
 * A value the owner itself or a later node produces is not (a Scan body returning the Scan's
 * own output made a value with no definition). */
static bool outer_defined(Parser *p, const Value *v) {
    for (; p->up; p = p->up) {
        if (lookup(p->up, v->name) != v) continue;
        return v->is_input || v->data || (v->producer && v->producer->id < p->g->owner->id);
    }
    return false;
}

/* Every node input of the body is defined before it: in the body (an input, a constant, an
 * earlier node) or outside (looked up through the enclosing scopes at read time). */
static void check_body_order(Parser *p) {
    Graph *g = p->g;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            Value *v = n->in[j];
            if (!v) continue;
            if (lookup(p, v->name) != v) {
                if (outer_defined(p, v)) continue;
            } else if (v->is_input || v->data || (v->producer && v->producer->id < n->id)) {
                continue;
            }
            error(ir_where(g, n), "uses value '%s', which is not defined before it in the body "
                  "or outside", v->name);
        }
    }
}

static void read_body_outputs(Parser *p, const Onnx__GraphProto *gp) {
    Graph *g = p->g;
    g->outputs = ARENA_ARRAY(g->arena, Value *, gp->n_output + 1);
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        Value *v = *name ? lookup_scoped(p, name) : NULL;
        if (!v || !(v->producer || v->is_input || v->data) || (lookup(p, name) != v && !outer_defined(p, v))) {
            error(ir_where(p->up->g, g->owner), "body output '%s' is not defined (in the body, or outside before the node)", name);
            continue;
        }
        g->outputs[g->noutputs++] = v;
    }
}

static Graph *read_subgraph(Parser *p, Node *owner, const Onnx__GraphProto *gp) {
    Parser q = {.g = ir_subgraph_new(p->g, owner), .path = p->path, .m = p->m, .up = p};
    grow_table(&q);
    if (gp->n_sparse_initializer) error(ir_where(p->g, owner), "sparse initializers are not supported");
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp->name || !*tp->name || lookup_scoped(&q, tp->name)) {
            error(ir_where(p->g, owner), "body initializer #%zu has no name or is defined twice", i);
            continue;
        }
        make_const(&q, tp, ir_where(p->g, owner), arena_printf(p->g->arena, "initializer '%s'", tp->name), true);
    }
    read_body_inputs(&q, gp);
    for (size_t i = 0; i < gp->n_node; i++) read_node(&q, gp->node[i], (int)i);
    check_body_order(&q);
    read_value_info(&q, gp);
    read_body_outputs(&q, gp);
    return q.g;
}

Graph *fe_parse_model(Arena *a, const uint8_t *buf, size_t size, const char *path) {
    if (size == 0) fatal(path, "not a valid ONNX model (empty file)");
    if (!fe_check_nesting(buf, size, path)) exit_if_errors();
    ProtobufCAllocator al = fe_pb_allocator(a);
    const Onnx__ModelProto *m = onnx__model_proto__unpack(&al, size, buf);
    if (!m) fatal(path, "not a valid ONNX model (protobuf parse failed)");
    const Onnx__GraphProto *gp = m->graph;
    if (!gp) fatal(path, "not a valid ONNX model (no graph)");
    if (gp->n_node == 0) fatal(path, "the model's graph is empty (no nodes)");
    if (gp->n_output == 0) fatal(path, "the model's graph has no outputs");

    Parser p = {.g = ir_graph_new(a), .path = path, .m = m};
    p.g->path = arena_strdup(a, path);
    grow_table(&p);
    read_opsets(&p);
    read_initializers(&p, gp);
    read_inputs(&p, gp);
    for (size_t i = 0; i < gp->n_node; i++) read_node(&p, gp->node[i], (int)i);
    check_order(&p);
    read_value_info(&p, gp);
    read_outputs(&p, gp);
    exit_if_errors();
    return p.g;
}
