/* mutate.c - the structure-aware mutator of `make fuzz` (LLVMFuzzerCustomMutator), linked
 * into build-fuzz/fuzz_struct next to tests/fuzz/fuzz_model.c.
 *
 * A byte flip in a protobuf mostly makes a message that does not parse, or one that the
 * importer's first checks refuse, so the deep passes rarely see the odd-but-valid models
 * that find bugs there. This mutator parses the input as a ModelProto (protobuf-c, into an
 * arena), changes one thing, and serialises it again:
 *   a dim of a graph input, output or value_info, or of an initializer;
 *   an element type (value info or initializer);
 *   an attribute's value, boundary values first (0, -1, INT64_MAX, NaN, empty lists), or
 *     its type;
 *   an op type, drawn from ir/ops.def (and one name nobody knows);
 *   a node's input or output name, rewired to another value of the model, to "" or to a name
 *     nothing defines; a graph output's name likewise;
 *   an opset number;
 *   a subgraph swapped for a copy of another;
 *   an initializer's raw data resized, or a byte of it changed;
 *   a node dropped or duplicated.
 * When the input does not parse, when the result would not fit max_size, and on one call in
 * eight anyway, it mutates bytes (LLVMFuzzerMutate), as the byte-level fuzzer does. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "../../ir/util.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed);

static const char *const op_names[] = {
#define OP(name, ...) #name,
#include "../../ir/ops.def"
#undef OP
    "NoSuchOp",
};

static const int64_t int_edges[] = {0, 1, -1, 2, 3, -2, 7, 64, 255, 256, 65535, (int64_t)1 << 31,
                                    -((int64_t)1 << 31), (int64_t)1 << 32, INT64_MAX, INT64_MIN};
#define NINT (sizeof int_edges / sizeof int_edges[0])

typedef struct Parts {
    Arena *a;
    uint64_t rng;
    Onnx__ModelProto *m;
    /* everything the model holds, subgraphs included */
    Onnx__GraphProto **graphs;
    Onnx__NodeProto **nodes;
    Onnx__GraphProto **node_graph;      /* the graph holding nodes[i] */
    Onnx__ValueInfoProto **vis;
    Onnx__TensorProto **tensors;
    Onnx__AttributeProto **attrs;
    char **names;
    int ngraphs, nnodes, nng, nvis, ntensors, nattrs, nnames;
    int cgraphs, cnodes, cnode_graph, cvis, ctensors, cattrs, cnames;
} Parts;

static uint64_t rnd(Parts *p) {
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return p->rng;
}

static int pick(Parts *p, int n) { return n > 0 ? (int)(rnd(p) % (uint64_t)n) : 0; }

static int64_t edge_int(Parts *p) {
    return pick(p, 4) ? int_edges[pick(p, NINT)] : (int64_t)(rnd(p) % 100) - 10;
}

static float edge_float(Parts *p) {
    static const float f[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-45f, 3.4e38f, -3.4e38f, 1e-7f};
    switch (pick(p, 12)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    default: return f[pick(p, (int)(sizeof f / sizeof f[0]))];
    }
}

#define PUSH(p, arr, n, c, x) ((arr) = arena_grow((p)->a, (arr), (n), &(c), (n) + 1, sizeof *(arr)), (arr)[(n)++] = (x))

static void collect_graph(Parts *p, Onnx__GraphProto *g, int depth);

static void collect_tensor(Parts *p, Onnx__TensorProto *t) {
    if (t) PUSH(p, p->tensors, p->ntensors, p->ctensors, t);
}

static void collect_graph(Parts *p, Onnx__GraphProto *g, int depth) {
    if (!g || depth > 16) return;
    PUSH(p, p->graphs, p->ngraphs, p->cgraphs, g);
    for (size_t i = 0; i < g->n_input; i++) PUSH(p, p->vis, p->nvis, p->cvis, g->input[i]);
    for (size_t i = 0; i < g->n_output; i++) PUSH(p, p->vis, p->nvis, p->cvis, g->output[i]);
    for (size_t i = 0; i < g->n_value_info; i++) PUSH(p, p->vis, p->nvis, p->cvis, g->value_info[i]);
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i]->name) PUSH(p, p->names, p->nnames, p->cnames, g->input[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++) {
        collect_tensor(p, g->initializer[i]);
        if (g->initializer[i]->name) PUSH(p, p->names, p->nnames, p->cnames, g->initializer[i]->name);
    }
    for (size_t i = 0; i < g->n_node; i++) {
        Onnx__NodeProto *n = g->node[i];
        PUSH(p, p->nodes, p->nnodes, p->cnodes, n);
        PUSH(p, p->node_graph, p->nng, p->cnode_graph, g);
        for (size_t j = 0; j < n->n_output; j++) PUSH(p, p->names, p->nnames, p->cnames, n->output[j]);
        for (size_t j = 0; j < n->n_attribute; j++) {
            Onnx__AttributeProto *at = n->attribute[j];
            PUSH(p, p->attrs, p->nattrs, p->cattrs, at);
            collect_tensor(p, at->t);
            for (size_t k = 0; k < at->n_tensors; k++) collect_tensor(p, at->tensors[k]);
            collect_graph(p, at->g, depth + 1);
            for (size_t k = 0; k < at->n_graphs; k++) collect_graph(p, at->graphs[k], depth + 1);
        }
    }
}

static void *pb_alloc(void *data, size_t n) { return arena_alloc(data, n ? n : 1); }
static void pb_free(void *data, void *ptr) { (void)data, (void)ptr; }

static char *name_for(Parts *p) {
    switch (pick(p, 8)) {
    case 0: return "";
    case 1: return "fuzz_undefined";
    default: return p->nnames ? p->names[pick(p, p->nnames)] : "";
    }
}

static Onnx__TensorShapeProto__Dimension *dim_of(Parts *p, Onnx__ValueInfoProto *vi) {
    Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type || !t->tensor_type->shape)
        return NULL;
    Onnx__TensorShapeProto *s = t->tensor_type->shape;
    return s->n_dim ? s->dim[pick(p, (int)s->n_dim)] : NULL;
}

static bool mutate_dim(Parts *p) {
    if (p->nvis && pick(p, 3)) {
        Onnx__TensorShapeProto__Dimension *d = dim_of(p, p->vis[pick(p, p->nvis)]);
        if (!d) return false;
        if (pick(p, 6) == 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = edge_int(p);
        }
        return true;
    }
    if (!p->ntensors) return false;
    Onnx__TensorProto *t = p->tensors[pick(p, p->ntensors)];
    if (!t->n_dims) return false;
    int64_t *dims = arena_alloc(p->a, t->n_dims * sizeof *dims);
    memcpy(dims, t->dims, t->n_dims * sizeof *dims);
    dims[pick(p, (int)t->n_dims)] = edge_int(p);
    t->dims = dims;
    return true;
}

static bool mutate_dtype(Parts *p) {
    int32_t dt = pick(p, 4) ? pick(p, 26) : (int32_t)edge_int(p);
    if (p->nvis && pick(p, 2)) {
        Onnx__TypeProto *t = p->vis[pick(p, p->nvis)]->type;
        if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) return false;
        t->tensor_type->has_elem_type = 1;
        t->tensor_type->elem_type = dt;
        return true;
    }
    if (!p->ntensors) return false;
    Onnx__TensorProto *t = p->tensors[pick(p, p->ntensors)];
    t->has_data_type = 1;
    t->data_type = dt;
    return true;
}

/* A list of n elements of size sz: one element set by `set`, or the list shortened,
 * emptied, or lengthened by one. */
static void *mutate_list(Parts *p, const void *old, size_t *n, size_t sz, void (*set)(Parts *, void *)) {
    size_t m = *n;
    switch (pick(p, 5)) {
    case 0: m = 0; break;
    case 1: m = m ? m - 1 : 0; break;
    case 2: m = m + 1; break;
    default: break;
    }
    uint8_t *v = arena_alloc(p->a, (m ? m : 1) * sz);
    if (old) memcpy(v, old, (m < *n ? m : *n) * sz);
    for (size_t i = *n; i < m; i++) set(p, v + i * sz);
    if (m) set(p, v + (size_t)pick(p, (int)m) * sz);
    *n = m;
    return v;
}

static void set_int(Parts *p, void *x) { *(int64_t *)x = edge_int(p); }
static void set_float(Parts *p, void *x) { *(float *)x = edge_float(p); }
static void set_bytes(Parts *p, void *x) {
    static const char *const s[] = {"", "?", "NOTSET", "SAME_UPPER", "constant", "linear", "\xff\xfe", "a,b->c"};
    ProtobufCBinaryData *b = x;
    const char *c = s[pick(p, (int)(sizeof s / sizeof s[0]))];
    b->data = (uint8_t *)c;
    b->len = strlen(c);
}

static bool mutate_raw(Parts *p, Onnx__TensorProto *t);

static bool mutate_attr(Parts *p) {
    if (!p->nattrs) return false;
    Onnx__AttributeProto *at = p->attrs[pick(p, p->nattrs)];
    if (pick(p, 10) == 0) {                     /* another type, its value fields as they are */
        at->has_type = 1;
        at->type = (Onnx__AttributeProto__AttributeType)pick(p, 15);
        return true;
    }
    switch (at->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at->has_i = 1, at->i = edge_int(p); return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at->has_f = 1, at->f = edge_float(p); return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: at->has_s = 1, set_bytes(p, &at->s); return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        at->ints = mutate_list(p, at->ints, &at->n_ints, sizeof *at->ints, set_int);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        at->floats = mutate_list(p, at->floats, &at->n_floats, sizeof *at->floats, set_float);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        at->strings = mutate_list(p, at->strings, &at->n_strings, sizeof *at->strings, set_bytes);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return at->t && mutate_raw(p, at->t);
    default: return false;
    }
}

static bool mutate_op(Parts *p) {
    if (!p->nnodes) return false;
    p->nodes[pick(p, p->nnodes)]->op_type = (char *)op_names[pick(p, (int)(sizeof op_names / sizeof op_names[0]))];
    return true;
}

static bool mutate_name(Parts *p) {
    if (p->nnodes && pick(p, 4)) {
        Onnx__NodeProto *n = p->nodes[pick(p, p->nnodes)];
        bool in = pick(p, 3) != 0;
        size_t cnt = in ? n->n_input : n->n_output;
        if (!cnt) return false;
        char **v = arena_alloc(p->a, cnt * sizeof *v);
        memcpy(v, in ? n->input : n->output, cnt * sizeof *v);
        v[pick(p, (int)cnt)] = name_for(p);
        if (in) n->input = v;
        else n->output = v;
        return true;
    }
    Onnx__GraphProto *g = p->graphs[pick(p, p->ngraphs)];
    if (!g->n_output) return false;
    g->output[pick(p, (int)g->n_output)]->name = name_for(p);
    return true;
}

static bool mutate_opset(Parts *p) {
    Onnx__ModelProto *m = p->m;
    if (!m->n_opset_import) return false;
    Onnx__OperatorSetIdProto *o = m->opset_import[pick(p, (int)m->n_opset_import)];
    o->has_version = 1;
    o->version = pick(p, 4) ? pick(p, 28) : edge_int(p);
    if (pick(p, 8) == 0) o->domain = pick(p, 2) ? "com.microsoft" : "ai.onnx.ml";
    return true;
}

/* A copy of another subgraph (packed and unpacked again, so that no graph ever holds itself)
 * in place of one. */
static bool mutate_graph(Parts *p) {
    int n = 0;
    Onnx__AttributeProto **ga = arena_alloc(p->a, (size_t)(p->nattrs + 1) * sizeof *ga);
    for (int i = 0; i < p->nattrs; i++)
        if (p->attrs[i]->g) ga[n++] = p->attrs[i];
    if (!n || p->ngraphs < 2) return false;
    Onnx__AttributeProto *at = ga[pick(p, n)];
    Onnx__GraphProto *src = p->graphs[1 + pick(p, p->ngraphs - 1)];
    size_t len = onnx__graph_proto__get_packed_size(src);
    uint8_t *buf = arena_alloc(p->a, len + 1);
    onnx__graph_proto__pack(src, buf);
    ProtobufCAllocator al = {pb_alloc, pb_free, p->a};
    Onnx__GraphProto *copy = onnx__graph_proto__unpack(&al, len, buf);
    if (!copy) return false;
    at->g = copy;
    return true;
}

static bool mutate_raw(Parts *p, Onnx__TensorProto *t) {
    if (!t->has_raw_data) {
        if (pick(p, 2)) return false;
        t->has_raw_data = 1;                    /* raw data next to typed data */
    }
    size_t old = t->raw_data.len, len = old;
    switch (pick(p, 5)) {
    case 0: len = 0; break;
    case 1: len = old / 2; break;
    case 2: len = old + 1 + (size_t)pick(p, 16); break;
    case 3: len = old ? old - 1 : 0; break;
    default: break;                             /* same length, one byte changed */
    }
    if (len > (1u << 20)) len = 1u << 20;
    uint8_t *d = arena_alloc(p->a, len + 1);
    if (t->raw_data.data) memcpy(d, t->raw_data.data, old < len ? old : len);
    for (size_t i = old; i < len; i++) d[i] = (uint8_t)rnd(p);
    if (len) d[pick(p, (int)len)] = (uint8_t)rnd(p);
    t->raw_data.data = d;
    t->raw_data.len = len;
    return true;
}

static bool mutate_node_list(Parts *p) {
    if (!p->nnodes) return false;
    int i = pick(p, p->nnodes);
    Onnx__GraphProto *g = p->node_graph[i];
    size_t at = 0;
    while (at < g->n_node && g->node[at] != p->nodes[i]) at++;
    if (at == g->n_node) return false;
    bool dup = pick(p, 2);
    Onnx__NodeProto **v = arena_alloc(p->a, (g->n_node + 1) * sizeof *v);
    size_t k = 0;
    for (size_t j = 0; j < g->n_node; j++) {
        if (j != at || dup) v[k++] = g->node[j];
        if (j == at && dup) v[k++] = g->node[j];
    }
    g->node = v;
    g->n_node = k;
    return true;
}

static bool mutate_once(Parts *p) {
    switch (pick(p, 10)) {
    case 0: return mutate_dim(p);
    case 1: return mutate_dtype(p);
    case 2: case 3: return mutate_attr(p);
    case 4: return mutate_op(p);
    case 5: return mutate_name(p);
    case 6: return mutate_opset(p);
    case 7: return mutate_graph(p);
    case 8: return p->ntensors && mutate_raw(p, p->tensors[pick(p, p->ntensors)]);
    default: return mutate_node_list(p);
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
    Parts p = {.rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 1 | 1)};
    rnd(&p);
    if (pick(&p, 8) == 0) return LLVMFuzzerMutate(data, size, max_size);
    p.a = arena_new();
    ProtobufCAllocator al = {pb_alloc, pb_free, p.a};
    size_t out = 0;
    p.m = onnx__model_proto__unpack(&al, size, data);
    if (p.m && p.m->graph) {
        collect_graph(&p, p.m->graph, 0);
        bool done = false;
        for (int tries = 0; tries < 8 && !done; tries++) done = mutate_once(&p);
        size_t len = done ? onnx__model_proto__get_packed_size(p.m) : 0;
        if (done && len <= max_size) out = onnx__model_proto__pack(p.m, data);
    }
    arena_free(p.a);
    return out ? out : LLVMFuzzerMutate(data, size, max_size);
}
