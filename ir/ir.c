/* ir.c - constructors, edits and small queries on the graph IR (see ir.h). */
#include "ir.h"

#include <string.h>

size_t ir_strlen = IR_STRLEN_DEFAULT;

size_t dtype_size(DType t) {
    switch (t) {
    case DT_STRING: return ir_strlen;
    case DT_FLOAT: case DT_INT32: case DT_UINT32: return 4;
    case DT_INT64: case DT_UINT64: case DT_DOUBLE: return 8;
    case DT_INT16: case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: return 2;
    case DT_INT8: case DT_UINT8: case DT_BOOL: return 1;
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ: return 1;
    case DT_FLOAT4E2M1: return 1;  /* in the arena; two a byte in constants and I/O */
    case DT_FLOAT8E8M0: return 1;
    default: return 0;
    }
}

const char *dtype_name(DType t) {
    switch (t) {
    case DT_FLOAT: return "float32";
    case DT_UINT8: return "uint8";
    case DT_INT8: return "int8";
    case DT_UINT16: return "uint16";
    case DT_INT16: return "int16";
    case DT_INT32: return "int32";
    case DT_INT64: return "int64";
    case DT_STRING: return "string";
    case DT_BOOL: return "bool";
    case DT_FLOAT16: return "float16";
    case DT_DOUBLE: return "float64";
    case DT_UINT32: return "uint32";
    case DT_UINT64: return "uint64";
    case DT_BFLOAT16: return "bfloat16";
    case DT_INDEX: return "index";
    default: break;
    }
    /* ONNX types onnxcc has no DType for (named in error messages) */
    static const char *const more[] = {[14] = "complex64", [15] = "complex128",
        [17] = "float8e4m3fn", [18] = "float8e4m3fnuz", [19] = "float8e5m2",
        [20] = "float8e5m2fnuz", [21] = "uint4", [22] = "int4", [23] = "float4e2m1",
        [24] = "float8e8m0", [25] = "uint2", [26] = "int2"};
    if ((int)t > 0 && (int)t < COUNTOF(more) && more[t]) return more[t];
    switch (t) {
    default: return "undefined";
    }
}

bool dtype_is_float(DType t) {
    return t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16 || t == DT_BFLOAT16 || dtype_is_minifloat(t);
}

bool dtype_is_unsigned(DType t) {
    return t == DT_UINT8 || t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64;
}

bool dtype_supported(DType t) {
    switch (t) {
    case DT_FLOAT: case DT_DOUBLE: case DT_INT8: case DT_UINT8: case DT_INT16: case DT_UINT16:
    case DT_INT32: case DT_UINT32: case DT_INT64: case DT_UINT64: case DT_BOOL: return true;
    case DT_FLOAT16: case DT_BFLOAT16: return true;    /* stored 16-bit, computed in float32 */
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0:
        return true;                                    /* stored 8-bit, computed in float32 */
    default: return false;
    }
}

bool dtype_known(DType t) { return dtype_supported(t) || t == DT_STRING; }

DType dtype_nibbles(int onnx) {
    switch (onnx) {
    case DT_INT4: case DT_INT2: return DT_INT8;
    case DT_UINT4: case DT_UINT2: return DT_UINT8;
    case DT_FLOAT4E2M1: return DT_FLOAT4E2M1;
    default: return DT_UNDEF;
    }
}

int dtype_pack_bits(int onnx) {
    return onnx == DT_INT2 || onnx == DT_UINT2 ? 2 : dtype_nibbles(onnx) != DT_UNDEF ? 4 : 0;
}

int dtype_onnx(DType t, int bits) {
    if (bits && (t == DT_INT8 || t == DT_UINT8))
        return bits == 2 ? (t == DT_INT8 ? DT_INT2 : DT_UINT2) : (t == DT_INT8 ? DT_INT4 : DT_UINT4);
    return (int)t;
}

Graph *ir_graph_new(Arena *a) {
    Graph *g = ARENA_NEW(a, Graph);
    g->arena = a;
    g->name = "model";
    g->path = "";
    g->max_bytes = IR_MAX_BYTES_64;
    return g;
}

Graph *ir_root(Graph *g) {
    while (g->parent) g = g->parent;
    return g;
}

Graph *ir_subgraph_new(Graph *parent, Node *owner) {
    Graph *g = ir_graph_new(parent->arena);
    g->name = arena_printf(parent->arena, "%s.body", owner->name);
    g->path = parent->path;
    g->opset = parent->opset;
    g->parent = parent;
    g->owner = owner;
    return g;
}

int ir_subgraphs(const Node *n, Graph **out, int max) {
    int k = 0;
    for (int i = 0; i < n->nattrs && k < max; i++)
        if (n->attrs[i].type == A_GRAPH && n->attrs[i].g) out[k++] = n->attrs[i].g;
    return k;
}

void ir_each_subgraph(Graph *g, void (*f)(Graph *)) {
    for (int i = 0; i < g->nnodes; i++) {
        Graph *sub[4];
        if (g->nodes[i]->dead) continue;
        for (int j = 0, ns = ir_subgraphs(g->nodes[i], sub, 4); j < ns; j++) {
            ir_each_subgraph(sub[j], f);
            f(sub[j]);
        }
    }
}

Value *ir_value_new(Graph *g, const char *name) {
    g = ir_root(g);                 /* one id space for the model and its subgraphs */
    g->values = arena_grow(g->arena, g->values, g->nvalues, &g->capvalues, g->nvalues + 1, sizeof(Value *));
    Value *v = ARENA_NEW(g->arena, Value);
    v->id = g->nvalues;
    v->name = arena_strdup(g->arena, name ? name : "");
    v->rank = -1;
    g->values[g->nvalues++] = v;
    return v;
}

void ir_set_shape(Value *v, DType t, int rank, const int64_t *dims) {
    if (rank < 0 || rank > MAX_RANK) die("value %s: rank %d", v->name, rank);
    v->dtype = t;
    v->rank = rank;
    for (int d = 0; d < rank; d++) v->dims[d] = dims[d];
}

Value *ir_const_new(Graph *g, const char *name, DType t, int rank, const int64_t *dims, const void *data) {
    Value *v = ir_value_new(g, name);
    ir_set_shape(v, t, rank, dims);
    size_t n = ir_nbytes(v);
    v->data = arena_alloc(g->arena, n ? n : 1);
    if (data && n) memcpy(v->data, data, n);
    return v;
}

Value *ir_const_ints(Graph *g, const char *name, const int64_t *v, int n) {
    int64_t len = n;
    return ir_const_new(g, name, DT_INT64, 1, &len, v);
}

static Node *node_make(Graph *g, Op op, const char *name, int nin, int nout) {
    Node *n = ARENA_NEW(g->arena, Node);
    n->op = op;
    n->op_type = arena_strdup(g->arena, op < OP_COUNT ? op_info[op].name : "?");
    n->domain = "";
    n->opset = g->opset;
    n->name = arena_strdup(g->arena, name);
    n->nin = nin;
    n->nout = nout;
    n->in = ARENA_ARRAY(g->arena, Value *, nin + 1);
    n->out = ARENA_ARRAY(g->arena, Value *, nout + 1);
    return n;
}

Node *ir_node_new(Graph *g, Op op, const char *name, int nin, int nout) {
    g->nodes = arena_grow(g->arena, g->nodes, g->nnodes, &g->capnodes, g->nnodes + 1, sizeof(Node *));
    Node *n = node_make(g, op, name, nin, nout);
    n->id = g->nnodes;
    g->nodes[g->nnodes++] = n;
    return n;
}

Node *ir_node_insert_before(Graph *g, Node *before, Op op, const char *name, int nin, int nout) {
    g->nodes = arena_grow(g->arena, g->nodes, g->nnodes, &g->capnodes, g->nnodes + 1, sizeof(Node *));
    int at = 0;
    while (at < g->nnodes && g->nodes[at] != before) at++;
    if (at == g->nnodes) die("insert before a node not in the graph");
    memmove(g->nodes + at + 1, g->nodes + at, sizeof(Node *) * (size_t)(g->nnodes - at));
    g->nnodes++;
    Node *n = node_make(g, op, name, nin, nout);
    g->nodes[at] = n;
    for (int i = 0; i < g->nnodes; i++) g->nodes[i]->id = i;
    return n;
}

Node *ir_node_insert_op(Graph *g, Node *before, Op op, const char *name, int nin) {
    Node *c = ir_node_insert_before(g, before, op, name, nin, 1);
    if (c->opset < 13) c->opset = 13;
    c->out[0] = ir_value_new(g, arena_printf(g->arena, "%s_out", name));
    c->out[0]->producer = c;
    return c;
}

void ir_replace_uses(Graph *g, Value *from, Value *to) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] == from) n->in[j] = to;
        Graph *sub[4];
        for (int j = 0, ns = ir_subgraphs(n, sub, 4); j < ns; j++) ir_replace_uses(sub[j], from, to);
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == from) g->outputs[i] = to;
}

static void count_uses(Graph *g) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]) n->in[j]->nuses++;
        Graph *sub[4];
        for (int j = 0, ns = ir_subgraphs(n, sub, 4); j < ns; j++) count_uses(sub[j]);
    }
    for (int i = 0; i < g->noutputs; i++) g->outputs[i]->nuses++;
}

void ir_count_uses(Graph *g) {
    g = ir_root(g);
    for (int i = 0; i < g->nvalues; i++) g->values[i]->nuses = 0;
    count_uses(g);
}

void ir_dce(Graph *g) {
    ir_count_uses(g);
    for (int i = g->nnodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        bool used = false;
        for (int j = 0; j < n->nout; j++)
            if (n->out[j] && n->out[j]->nuses) used = true;
        if (used) continue;
        n->dead = true;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]) n->in[j]->nuses--;
    }
    /* Bodies last: a dead node's body no longer counts as a user, recounted next time. */
    for (int i = 0; i < g->nnodes; i++) {
        Graph *sub[4];
        if (g->nodes[i]->dead) continue;
        for (int j = 0, ns = ir_subgraphs(g->nodes[i], sub, 4); j < ns; j++) {
            ir_dce(sub[j]);
            ir_compact(sub[j]);
        }
    }
}

void ir_compact(Graph *g) {
    int k = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead) { g->nodes[k] = g->nodes[i]; g->nodes[k]->id = k; k++; }
    g->nnodes = k;
}

int64_t ir_numel(const Value *v) {
    int64_t n = 1;
    for (int d = 0; d < v->rank; d++) n = sz_mul(n, v->dims[d]);
    return n;
}

int64_t ir_extent(const Value *v) {
    int64_t n = (int64_t)dtype_size(v->dtype);
    for (int d = 0; d < v->rank; d++) n = sz_mul(n, MAX(v->dims[d], 1));
    return n;
}

size_t ir_nbytes(const Value *v) { return (size_t)ir_numel(v) * dtype_size(v->dtype); }

bool ir_same_shape(const Value *a, const Value *b) {
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

bool ir_broadcast(int ra, const int64_t *da_, int rb, const int64_t *db_, int *rout, int64_t *dout) {
    int64_t da[MAX_RANK], db[MAX_RANK];   /* copies: dout may be da_ or db_ */
    memcpy(da, da_, sizeof(int64_t) * (size_t)ra);
    memcpy(db, db_, sizeof(int64_t) * (size_t)rb);
    int r = MAX(ra, rb);
    for (int d = 0; d < r; d++) {
        int64_t x = d - (r - ra) >= 0 ? da[d - (r - ra)] : 1;
        int64_t y = d - (r - rb) >= 0 ? db[d - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1) return false;
        dout[d] = x == 1 ? y : x;
    }
    *rout = r;
    return true;
}

/* The float32 value of a float16 or bfloat16 bit pattern; exact (every half is a float).
 * float16 subnormals are m * 2^-24, which float32 holds as a normal number; NaN payloads are
 * kept. The backend emits the same bit arithmetic (backend/kernel.c, half_to_float). */
static double half_to_double(DType t, uint16_t h) {
    uint32_t bits;
    if (t == DT_BFLOAT16) {
        bits = (uint32_t)h << 16;
    } else {
        uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
        if (e == 0) return (sign ? -1.0 : 1.0) * (double)m / 16777216.0;   /* m * 2^-24 */
        bits = sign | (e == 31 ? 0x7f800000u | m << 13 : ((uint32_t)(h & 0x7fff) << 13) + (112u << 23));
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* A float constant read as an integer: truncated, saturated at the int64 range, NaN 0 (a cast
 * of a value outside the range is undefined in C). */
static int64_t float_int(double d) {
    if (d != d) return 0;
    if (d >= 0x1p63) return INT64_MAX;
    if (d < -0x1p63) return INT64_MIN;
    return (int64_t)d;
}

int64_t ir_const_int(const Value *v, int64_t i) {
    const void *p = v->data;
    switch (v->dtype) {
    case DT_INT64: return ((const int64_t *)p)[i];
    case DT_INT32: return ((const int32_t *)p)[i];
    case DT_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case DT_UINT32: return ((const uint32_t *)p)[i];
    case DT_INT16: return ((const int16_t *)p)[i];
    case DT_UINT16: return ((const uint16_t *)p)[i];
    case DT_INT8: return ((const int8_t *)p)[i];
    case DT_UINT8: case DT_BOOL: return ((const uint8_t *)p)[i];
    case DT_FLOAT: case DT_DOUBLE: case DT_FLOAT16: case DT_BFLOAT16:
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0:
        return float_int(ir_const_float(v, i));
    default: die("ir_const_int of %s", dtype_name(v->dtype));
    }
}

double ir_const_float(const Value *v, int64_t i) {
    if (v->dtype == DT_FLOAT) return ((const float *)v->data)[i];
    if (v->dtype == DT_DOUBLE) return ((const double *)v->data)[i];
    if (v->dtype == DT_FLOAT16 || v->dtype == DT_BFLOAT16)
        return half_to_double(v->dtype, ((const uint16_t *)v->data)[i]);
    if (dtype_is_minifloat(v->dtype)) return f8_decode(v->dtype, ((const uint8_t *)v->data)[i]);
    return (double)ir_const_int(v, i);
}

/* ---- attributes ---- */
Attr *ir_attr(const Node *n, const char *name) {
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* An attribute of another type than its op's schema says is the model's mistake. It is
 * reported once (rules read an attribute several times): then it becomes A_UNDEF, which the
 * frontend gives no attribute of a supported node, and the default is used until the pass
 * ends the compilation. */
static bool attr_typed(const Node *n, Attr *a, AttrType want, const char *what) {
    if (!a || a->type == want) return a != NULL;
    if (a->type != A_UNDEF)
        error(NULL, "node '%s' (%s): attribute '%s' must be %s", n->name, n->op_type ? n->op_type : "",
              a->name, what);
    a->type = A_UNDEF;
    return false;
}

int64_t ir_attr_int(const Node *n, const char *name, int64_t dflt) {
    Attr *a = ir_attr(n, name);
    return attr_typed(n, a, A_INT, "an int") ? a->i : dflt;
}

float ir_attr_float(const Node *n, const char *name, float dflt) {
    Attr *a = ir_attr(n, name);
    if (a && a->type == A_INT) return (float)a->i;
    return attr_typed(n, a, A_FLOAT, "a float") ? a->f : dflt;
}

const char *ir_attr_str(const Node *n, const char *name, const char *dflt) {
    Attr *a = ir_attr(n, name);
    return attr_typed(n, a, A_STRING, "a string") ? a->s : dflt;
}

int ir_attr_ints(const Node *n, const char *name, const int64_t **out) {
    Attr *a = ir_attr(n, name);
    if (!a || a->type != A_INTS) { *out = NULL; return 0; }
    *out = a->ints;
    return a->n;
}

Attr *ir_attr_set(Graph *g, Node *n, const char *name, AttrType t) {
    Attr *a = ir_attr(n, name);
    if (!a) {
        Attr *na = ARENA_ARRAY(g->arena, Attr, n->nattrs + 1);
        if (n->nattrs) memcpy(na, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
        n->attrs = na;
        a = &n->attrs[n->nattrs++];
    }
    memset(a, 0, sizeof *a);
    a->name = arena_strdup(g->arena, name);
    a->type = t;
    return a;
}

void ir_attr_set_int(Graph *g, Node *n, const char *name, int64_t v) { ir_attr_set(g, n, name, A_INT)->i = v; }
void ir_attr_set_float(Graph *g, Node *n, const char *name, float v) { ir_attr_set(g, n, name, A_FLOAT)->f = v; }

void ir_attr_set_ints(Graph *g, Node *n, const char *name, const int64_t *v, int count) {
    int64_t *copy = ARENA_ARRAY(g->arena, int64_t, count + 1);
    if (count) memcpy(copy, v, sizeof(int64_t) * (size_t)count);
    Attr *a = ir_attr_set(g, n, name, A_INTS);
    a->ints = copy;
    a->n = count;
}

void ir_attr_remove(Node *n, const char *name) {
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            memmove(&n->attrs[i], &n->attrs[i + 1], sizeof(Attr) * (size_t)(n->nattrs - i - 1));
            n->nattrs--;
            return;
        }
}

const char *ir_where(Graph *g, const Node *n) {
    return arena_printf(g->arena, "%s: node '%s' (%s, opset %d)", g->path, n->name, n->op_type, n->opset);
}

/* ---- copying a body (ir_inline_body) ----
 * The copier maps each value the body defines (its inputs and its nodes' outputs, nested
 * bodies included) to what stands for it in the copy, in a hash table sized by the body, so
 * that a copy costs what the body costs whatever the size of the model. A value not in the
 * table (an outer value, a constant) stands for itself: the copies share it. */
typedef struct Copier {
    Graph *root;
    const Value **keys;
    Value **vals;
    unsigned mask;
    const char *tag;
} Copier;

static int defined_count(const Graph *b) {
    int n = b->ninputs;
    for (int i = 0; i < b->nnodes; i++) {
        Graph *sub[4];
        n += b->nodes[i]->nout;
        for (int j = 0, ns = ir_subgraphs(b->nodes[i], sub, 4); j < ns; j++) n += defined_count(sub[j]);
    }
    return n;
}

static unsigned slot(const Copier *c, const Value *v) {
    unsigned h = (unsigned)v->id * 2654435761u & c->mask;
    while (c->keys[h] && c->keys[h] != v) h = (h + 1) & c->mask;
    return h;
}

static Value *mapped(const Copier *c, Value *v) {
    if (!v) return NULL;
    unsigned h = slot(c, v);
    return c->keys[h] ? c->vals[h] : v;
}

static void map_to(Copier *c, const Value *v, Value *w) {
    unsigned h = slot(c, v);
    c->keys[h] = v;
    c->vals[h] = w;
}

static Value *fresh(Copier *c, const Value *v) {
    Value *w = ir_value_new(c->root, arena_printf(c->root->arena, "%s_%s", v->name, c->tag));
    map_to(c, v, w);
    return w;
}

static Graph *copy_graph(Copier *c, Graph *parent, Node *owner, const Graph *b);

/* A copy of n, appended to g (or inserted before `before`). */
static Node *copy_node(Copier *c, Graph *g, Node *before, const Node *n) {
    const char *name = arena_printf(g->arena, "%s_%s", n->name, c->tag);
    Node *m = before ? ir_node_insert_before(g, before, n->op, name, n->nin, n->nout)
                     : ir_node_new(g, n->op, name, n->nin, n->nout);
    m->op_type = n->op_type;
    m->domain = n->domain;
    m->opset = n->opset;
    for (int i = 0; i < n->nin; i++) m->in[i] = mapped(c, n->in[i]);
    m->nattrs = n->nattrs;
    m->attrs = ARENA_ARRAY(g->arena, Attr, n->nattrs + 1);
    if (n->nattrs) memcpy(m->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
    for (int i = 0; i < n->nattrs; i++)
        if (m->attrs[i].type == A_GRAPH && m->attrs[i].g) m->attrs[i].g = copy_graph(c, g, m, n->attrs[i].g);
    for (int i = 0; i < n->nout; i++) {
        if (!n->out[i]) continue;
        m->out[i] = fresh(c, n->out[i]);
        m->out[i]->producer = m;
    }
    return m;
}

static Graph *copy_graph(Copier *c, Graph *parent, Node *owner, const Graph *b) {
    Graph *s = ir_subgraph_new(parent, owner);
    s->inputs = ARENA_ARRAY(s->arena, Value *, b->ninputs + 1);
    for (int i = 0; i < b->ninputs; i++) {
        Value *v = fresh(c, b->inputs[i]);
        v->dtype = b->inputs[i]->dtype;     /* what the model declared; the owner's rule decides */
        v->is_input = true;
        s->inputs[s->ninputs++] = v;
    }
    for (int i = 0; i < b->nnodes; i++)
        if (!b->nodes[i]->dead) copy_node(c, s, NULL, b->nodes[i]);
    s->outputs = ARENA_ARRAY(s->arena, Value *, b->noutputs + 1);
    for (int i = 0; i < b->noutputs; i++) s->outputs[s->noutputs++] = mapped(c, b->outputs[i]);
    return s;
}

Node **ir_inline_body(Graph *g, Node *before, const Graph *body, Value **ins, const char *tag, Value **outs,
                      int *count) {
    Copier c = {ir_root(g), NULL, NULL, 0, tag};
    unsigned size = 16;
    while (size < 2u * (unsigned)defined_count(body) + 2) size *= 2;
    c.mask = size - 1;
    c.keys = ARENA_ARRAY(g->arena, const Value *, size);
    c.vals = ARENA_ARRAY(g->arena, Value *, size);
    for (int i = 0; i < body->ninputs; i++) map_to(&c, body->inputs[i], ins[i]);
    Node **nodes = ARENA_ARRAY(g->arena, Node *, body->nnodes + 1);
    *count = 0;
    for (int i = 0; i < body->nnodes; i++)
        if (!body->nodes[i]->dead) nodes[(*count)++] = copy_node(&c, g, before, body->nodes[i]);
    for (int i = 0; i < body->noutputs; i++) outs[i] = mapped(&c, body->outputs[i]);
    return nodes;
}
