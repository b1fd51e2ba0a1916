/* sequence.c - sequences and optionals: SequenceConstruct, SequenceEmpty, SequenceInsert,
 * SequenceErase, SequenceAt, SequenceLength, SplitToSequence, ConcatFromSequence,
 * SequenceMap, Optional, OptionalHasElement, OptionalGetElement, and Loops carrying them.
 *
 * A sequence or an optional never exists at run time. Its structure (how many elements, or
 * whether the optional holds one) is fixed at compile time and its elements are ordinary
 * tensor Values (ir.h: Value.kind, Value.elems), so the shape rules here follow the
 * containers through the graph and rewrite each consumer into a tensor op on the elements:
 *   SequenceAt, OptionalGetElement  -> Identity of the element
 *   SequenceLength, OptionalHasElement -> a constant
 *   SplitToSequence                 -> Split (+ Squeeze) feeding a SequenceConstruct
 *   ConcatFromSequence              -> Concat of the elements (+ Unsqueeze for new_axis)
 * The nodes building containers compute nothing and die once nothing reads their result
 * (simplify's dead-code elimination). Positions must be compile-time constants (the
 * shape_in column of ir/ops.def, so `onnxcc check` binds them from the data set); element
 * shapes may differ from element to element. Graph inputs and outputs of these types are
 * expanded into one tensor per element (fix_shapes and expand_containers below); If branches
 * returning them are flattened by rule_flatten_branches; SequenceMap and Loops carrying
 * them are expanded per element or iteration (below). What needs a structure known only at
 * run time (a sequence grown by a Loop with a run-time trip count, an optional whose presence
 * depends on an If's run-time condition) is reported as unsupported. */
#include <string.h>

#include "../lower.h"
#include "../pipeline.h"

static const char *kind_name(ValueKind k) {
    return k == VK_SEQ ? "a sequence" : k == VK_OPT ? "an optional" : "a tensor";
}

static void set_container(Graph *g, Value *v, ValueKind kind, ValueKind elem, DType t, Value **elems, int n) {
    int64_t none = 0;
    ir_set_shape(v, t ? t : DT_FLOAT, 0, &none);
    v->kind = kind;
    v->elem_kind = elem;
    v->nelems = n;
    v->elems = ARENA_ARRAY(g->arena, Value *, n + 1);
    if (n) memcpy(v->elems, elems, sizeof(Value *) * (size_t)n);
}

void rule_container_like(Graph *g, Value *out, const Value *x) {
    set_container(g, out, x->kind, x->elem_kind, x->dtype, x->elems, x->nelems);
}

static bool want_kind(Graph *g, Node *n, int i, ValueKind k) {
    Value *v = n->in[i];
    if (v && v->kind == k) return true;
    error(ir_where(g, n), "input %d ('%s') is %s, not %s", i, v ? v->name : "", v ? kind_name(v->kind) : "absent",
          kind_name(k));
    return false;
}

/* Input i, a position in a sequence of len elements (ONNX: negative counts from the back),
 * into *pos in 0..len-1, or 0..len when inserting; dflt when the input is absent. */
static bool position(Graph *g, Node *n, int i, int64_t len, bool insert, int64_t dflt, int64_t *pos) {
    if (i >= n->nin || !n->in[i]) {
        *pos = dflt;
    } else {
        Value *p = rule_const_ints(g, n, i, "position", 1);
        if (!p) return false;
        *pos = ir_const_int(p, 0);
        if (*pos < 0) *pos += len;
    }
    if (*pos < 0 || *pos > len - !insert) {
        error(ir_where(g, n), "position %lld is outside the sequence of %lld elements", (long long)*pos,
              (long long)len);
        return false;
    }
    return true;
}

/* n becomes op on `ins`, and is inferred as such. */
static void rewrite(Graph *g, Node *n, Op op, Value **ins, int nin) {
    n->op = op;
    n->nin = nin;
    n->in = ARENA_ARRAY(g->arena, Value *, nin + 1);
    if (nin) memcpy(n->in, ins, sizeof(Value *) * (size_t)nin);    /* ins may be NULL then */
    op_info[op].infer(g, n);
}

/* A node computing `op` inserted before n, with a fresh output named after n's. */
static Node *insert_op(Graph *g, Node *n, Op op, Value **ins, int nin, const char *suffix) {
    Node *m = ir_node_insert_before(g, n, op, arena_printf(g->arena, "%s_%s", n->name, suffix), nin, 1);
    if (nin) memcpy(m->in, ins, sizeof(Value *) * (size_t)nin);
    m->out[0] = ir_value_new(g, arena_printf(g->arena, "%s_%s", n->out[0]->name, suffix));
    m->out[0]->producer = m;
    return m;
}

static Value *axes_const(Graph *g, Node *n, const char *suffix, int64_t axis) {
    int64_t one = 1;
    return ir_const_new(g, arena_printf(g->arena, "%s_%s_axes", n->name, suffix), DT_INT64, 1, &one, &axis);
}

static void set_const(Graph *g, Value *v, DType t, int64_t x) {
    ir_set_shape(v, t, 0, NULL);
    v->data = arena_alloc(g->arena, dtype_size(t));
    if (t == DT_BOOL) *(uint8_t *)v->data = x != 0;
    else *(int64_t *)v->data = x;
}

/* ---- sequences ---- */

void infer_seq_construct(Graph *g, Node *n) {
    for (int i = 0; i < n->nin; i++)
        if (!want_kind(g, n, i, VK_TENSOR)) return;
        else if (n->in[i]->dtype != n->in[0]->dtype) {
            error(ir_where(g, n), "element '%s' is %s, element '%s' %s", n->in[i]->name,
                  dtype_name(n->in[i]->dtype), n->in[0]->name, dtype_name(n->in[0]->dtype));
            return;
        }
    set_container(g, n->out[0], VK_SEQ, VK_TENSOR, n->in[0]->dtype, n->in, n->nin);
}

void infer_seq_empty(Graph *g, Node *n) {
    DType t = (DType)ir_attr_int(n, "dtype", DT_FLOAT);
    if (!dtype_supported(t)) {
        error(ir_where(g, n), "unsupported element type %s", dtype_name(t));
        return;
    }
    set_container(g, n->out[0], VK_SEQ, VK_TENSOR, t, NULL, 0);
}

void infer_seq_insert(Graph *g, Node *n) {
    Value *s = n->in[0], *t = n->in[1];
    int64_t pos;
    if (!want_kind(g, n, 0, VK_SEQ) || !want_kind(g, n, 1, VK_TENSOR)) return;
    if (s->nelems && t->dtype != s->dtype) {
        error(ir_where(g, n), "inserting %s into a sequence of %s", dtype_name(t->dtype), dtype_name(s->dtype));
        return;
    }
    if (!position(g, n, 2, s->nelems, true, s->nelems, &pos)) return;
    Value **e = ARENA_ARRAY(g->arena, Value *, s->nelems + 2);
    memcpy(e, s->elems, sizeof(Value *) * (size_t)pos);
    e[pos] = t;
    memcpy(e + pos + 1, s->elems + pos, sizeof(Value *) * (size_t)(s->nelems - pos));
    set_container(g, n->out[0], VK_SEQ, VK_TENSOR, t->dtype, e, s->nelems + 1);
}

void infer_seq_erase(Graph *g, Node *n) {
    Value *s = n->in[0];
    int64_t pos;
    if (!want_kind(g, n, 0, VK_SEQ) || !position(g, n, 1, s->nelems, false, s->nelems - 1, &pos)) return;
    Value **e = ARENA_ARRAY(g->arena, Value *, s->nelems + 1);
    memcpy(e, s->elems, sizeof(Value *) * (size_t)pos);
    memcpy(e + pos, s->elems + pos + 1, sizeof(Value *) * (size_t)(s->nelems - pos - 1));
    set_container(g, n->out[0], VK_SEQ, VK_TENSOR, s->dtype, e, s->nelems - 1);
}

void infer_seq_at(Graph *g, Node *n) {
    Value *s = n->in[0];
    int64_t pos;
    if (!want_kind(g, n, 0, VK_SEQ) || !position(g, n, 1, s->nelems, false, 0, &pos)) return;
    rewrite(g, n, OP_Identity, &s->elems[pos], 1);
}

void infer_seq_length(Graph *g, Node *n) {
    if (want_kind(g, n, 0, VK_SEQ)) set_const(g, n->out[0], DT_INT64, n->in[0]->nelems);
}

/* Every piece of a sequence is a value of the graph, and a SplitToSequence becomes a Split
 * with one output a piece: more than a node may have outputs (OP_INF) is refused (the fuzzer's
 * SplitToSequence of a 2^32-element axis into pieces of 1 asked for 32 GB; one of 65535 pieces
 * made a Split the verifier refused). */
enum { SEQ_PIECES = OP_INF };

static bool seq_count_ok(Graph *g, Node *n, int64_t count) {
    if (count <= SEQ_PIECES) return true;
    error(ir_where(g, n), "splits into %lld pieces; onnxcc supports at most %d", (long long)count, SEQ_PIECES);
    return false;
}

/* Split into pieces of `split` (a scalar: chunks of that size, the last one smaller; 1-D: the
 * sizes; absent: pieces of 1, squeezed unless keepdims). */
void infer_split_to_seq(Graph *g, Node *n) {
    Value *x = n->in[0], *sp = n->nin > 1 ? n->in[1] : NULL;
    int axis;
    if (!want_kind(g, n, 0, VK_TENSOR) || !rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    int64_t dim = x->dims[axis], count, *sizes;
    bool squeeze = !sp && !ir_attr_int(n, "keepdims", 1);
    if (sp && !rule_const_ints(g, n, 1, "split", INT32_MAX)) return;
    if (sp && sp->rank == 0) {
        int64_t c = ir_const_int(sp, 0);
        if (c <= 0) {
            error(ir_where(g, n), "split size %lld is not positive", (long long)c);
            return;
        }
        count = dim / c + (dim % c != 0);
        if (!seq_count_ok(g, n, count)) return;
        sizes = ARENA_ARRAY(g->arena, int64_t, count + 1);
        for (int64_t k = 0; k < count; k++) sizes[k] = MIN(c, dim - c * k);
    } else {
        count = sp ? ir_numel(sp) : dim;
        if (!seq_count_ok(g, n, count)) return;
        sizes = ARENA_ARRAY(g->arena, int64_t, count + 1);
        int64_t sum = 0;
        for (int64_t k = 0; k < count; k++) sum += sizes[k] = sp ? ir_const_int(sp, k) : 1;
        if (sum != dim) {
            error(ir_where(g, n), "split sizes add up to %lld, the axis has %lld", (long long)sum, (long long)dim);
            return;
        }
    }
    Value **parts = ARENA_ARRAY(g->arena, Value *, count + 1);
    if (count) {
        Node *s = ir_node_insert_before(g, n, OP_Split, arena_printf(g->arena, "%s_split", n->name), 1, (int)count);
        s->in[0] = x;
        ir_attr_set_int(g, s, "axis", axis);
        ir_attr_set_ints(g, s, "split", sizes, (int)count);
        for (int64_t k = 0; k < count; k++) {
            parts[k] = s->out[k] = ir_value_new(g, arena_printf(g->arena, "%s.%lld", n->out[0]->name, (long long)k));
            s->out[k]->producer = s;
        }
        infer_node(g, s);
    }
    for (int64_t k = 0; squeeze && k < count; k++) {
        Value *ins[2] = {parts[k], axes_const(g, n, arena_printf(g->arena, "sq%lld", (long long)k), axis)};
        Node *q = insert_op(g, n, OP_Squeeze, ins, 2, arena_printf(g->arena, "sq%lld", (long long)k));
        infer_node(g, q);
        parts[k] = q->out[0];
    }
    if (!count) {
        ir_attr_set_int(g, n, "dtype", x->dtype);
        rewrite(g, n, OP_SequenceEmpty, NULL, 0);
        return;
    }
    rewrite(g, n, OP_SequenceConstruct, parts, (int)count);
}

void infer_concat_from_seq(Graph *g, Node *n) {
    Value *s = n->in[0];
    if (!want_kind(g, n, 0, VK_SEQ)) return;
    if (!s->nelems) {
        error(ir_where(g, n), "concatenating an empty sequence (the result has no static shape)");
        return;
    }
    bool new_axis = ir_attr_int(n, "new_axis", 0) != 0;
    int axis, rank = s->elems[0]->rank + new_axis;
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), rank, &axis)) return;
    Value **parts = ARENA_ARRAY(g->arena, Value *, s->nelems + 1);
    for (int k = 0; k < s->nelems; k++) {
        parts[k] = s->elems[k];
        if (!new_axis) continue;
        const char *sfx = arena_printf(g->arena, "unsq%d", k);
        Value *ins[2] = {parts[k], axes_const(g, n, sfx, axis)};
        Node *u = insert_op(g, n, OP_Unsqueeze, ins, 2, sfx);
        infer_node(g, u);
        parts[k] = u->out[0];
    }
    ir_attr_remove(n, "new_axis");
    ir_attr_set_int(g, n, "axis", axis);
    rewrite(g, n, OP_Concat, parts, s->nelems);
}

/* ---- optionals ---- */

void infer_optional(Graph *g, Node *n) {
    Value *x = n->nin ? n->in[0] : NULL;
    if (x) {
        if (x->kind == VK_OPT) {
            error(ir_where(g, n), "an optional of an optional");
            return;
        }
        set_container(g, n->out[0], VK_OPT, x->kind, x->dtype, &x, 1);
        return;
    }
    const int64_t *ty;
    if (ir_attr_ints(n, "type", &ty) != 3 || ty[0] == VK_OPT) {
        error(ir_where(g, n), "an empty Optional needs a tensor or sequence `type` attribute");
        return;
    }
    set_container(g, n->out[0], VK_OPT, (ValueKind)ty[0], (DType)ty[2], NULL, 0);
}

void infer_opt_has(Graph *g, Node *n) {
    Value *x = n->nin ? n->in[0] : NULL;
    set_const(g, n->out[0], DT_BOOL, x && (x->kind != VK_OPT || x->nelems));
}

void infer_opt_get(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->kind != VK_OPT) {        /* opset 18: a tensor or sequence passes through */
        rewrite(g, n, OP_Identity, &x, 1);
        return;
    }
    if (!x->nelems) {
        error(ir_where(g, n), "optional '%s' is empty", x->name);
        return;
    }
    rewrite(g, n, OP_Identity, x->elems, 1);
}

/* ---- bodies over sequences: SequenceMap, Loops carrying containers ----
 * A sequence's structure is fixed at compile time, so a body that maps its elements, or a
 * Loop that builds a sequence, cannot be a loop at run time: its iterations may give
 * elements of different shapes and change the sequence's length. Such a body is expanded
 * once per element (or iteration) into the enclosing graph (ir_inline_body), each copy
 * inferred with the shapes of its own element, and the node is replaced by the containers
 * built from the copies' results. Only the structure is unrolled: the tensor ops in each copy
 * are ordinary nodes, and a body's own If/Loop/Scan stay control regions. */

enum {
    MAX_EXPANSIONS = 4096,          /* copies of one body: more is surely not a sequence */
    MAX_VALUES = 1 << 20,           /* values of the model with the copies (nested expansions
                                       multiply): memory stays bounded on untrusted models */
};

/* One copy of n's body `b` with inputs ins, inferred; its outputs in outs. False after a
 * reported error. Every node from the first copy up to n is inferred, as infer_graph would:
 * a rule may insert nodes after its own (rule_flatten_branches rebuilds containers there). */
static bool expand(Graph *g, Node *n, const Graph *b, Value **ins, int64_t k, Value **outs) {
    int count, before = error_count, i = 0;
    if (ir_root(g)->nvalues > MAX_VALUES) {
        error(ir_where(g, n), "expanding the body once per element or iteration makes the model larger "
              "than %d values", MAX_VALUES);
        return false;
    }
    Node **copies = ir_inline_body(g, n, b, ins, arena_printf(g->arena, "%lld", (long long)k), outs, &count);
    if (!count) return true;
    while (g->nodes[i] != copies[0]) i++;
    for (; g->nodes[i] != n && error_count == before; i++) {
        Node *m = g->nodes[i];
        if (m->dead) continue;
        infer_node(g, m);
        while (g->nodes[i] != m) i++;     /* over the nodes its rule inserted before it */
    }
    return error_count == before;
}

/* A node before n writing v (which n wrote) from ins: n's results get new producers. */
static void produce(Graph *g, Node *n, Op op, Value *v, Value **ins, int nin) {
    Node *m = ir_node_insert_before(g, n, op, arena_printf(g->arena, "%s_%s", n->name, v->name), nin, 1);
    if (nin) memcpy(m->in, ins, sizeof(Value *) * (size_t)nin);
    m->out[0] = v;
    v->producer = m;
    infer_node(g, m);
}

/* v becomes the sequence of elems (dtype t when there are none). */
static void produce_seq(Graph *g, Node *n, Value *v, Value **elems, int len, DType t) {
    if (len) {
        produce(g, n, OP_SequenceConstruct, v, elems, len);
        return;
    }
    Node *m = ir_node_insert_before(g, n, OP_SequenceEmpty, arena_printf(g->arena, "%s_%s", n->name, v->name), 0, 1);
    ir_attr_set_int(g, m, "dtype", t);
    m->out[0] = v;
    v->producer = m;
    infer_node(g, m);
}

/* SequenceMap: output j is the sequence of body output j over the elements; the inputs after
 * the first are sequences of the same length (mapped element by element) or tensors (given
 * whole to every copy). */
void infer_seq_map(Graph *g, Node *n) {
    Attr *a = ir_attr(n, "body");
    Graph *b = a && a->type == A_GRAPH ? a->g : NULL;
    if (!b || b->ninputs != n->nin || b->noutputs != n->nout) {
        error(ir_where(g, n), "the body must take %d inputs and give %d outputs", n->nin, n->nout);
        return;
    }
    if (!want_kind(g, n, 0, VK_SEQ)) return;
    int len = n->in[0]->nelems;
    for (int i = 1; i < n->nin; i++)
        if (n->in[i]->kind == VK_OPT || (n->in[i]->kind == VK_SEQ && n->in[i]->nelems != len)) {
            error(ir_where(g, n), "input %d ('%s') is %s; SequenceMap takes tensors and sequences of %d "
                  "elements (as input 0)", i, n->in[i]->name, n->in[i]->kind == VK_OPT ? "an optional" :
                  arena_printf(g->arena, "a sequence of %d elements", n->in[i]->nelems), len);
            return;
        }
    Value **ins = ARENA_ARRAY(g->arena, Value *, n->nin + 1);
    Value **res = ARENA_ARRAY(g->arena, Value *, (size_t)n->nout * (size_t)len + 1);
    for (int k = 0; k < len; k++) {
        for (int i = 0; i < n->nin; i++) ins[i] = n->in[i]->kind == VK_SEQ ? n->in[i]->elems[k] : n->in[i];
        if (!expand(g, n, b, ins, k, res + (size_t)k * (size_t)n->nout)) return;
    }
    Value **elems = ARENA_ARRAY(g->arena, Value *, len + 1);
    for (int j = 0; j < n->nout; j++) {
        if (!n->out[j]) continue;
        for (int k = 0; k < len; k++) {
            elems[k] = res[(size_t)k * (size_t)n->nout + (size_t)j];
            if (elems[k]->kind != VK_TENSOR) {
                error(ir_where(g, n), "body output %d is %s; SequenceMap's body gives tensors", j,
                      kind_name(elems[k]->kind));
                return;
            }
        }
        DType t = b->outputs[j]->dtype;     /* an empty map: the type the body declares */
        if (!len && !t) {
            error(ir_where(g, n), "mapping an empty sequence, and body output %d declares no element type", j);
            return;
        }
        produce_seq(g, n, n->out[j], elems, len, t);
    }
    n->dead = true;
}

/* Whether v is a constant; its value (as int64) in *x. */
static bool const_scalar(const Value *v, int64_t *x) {
    if (!v || !v->data || ir_numel(v) != 1) return false;
    *x = ir_const_int(v, 0);
    return true;
}

bool rule_loop_has_containers(const Node *n) {
    for (int i = 2; i < n->nin; i++)
        if (n->in[i] && n->in[i]->kind != VK_TENSOR) return true;
    return false;
}

/* A Loop carrying a sequence or optional, unrolled: the trip count and every iteration's
 * condition must be known at compile time (the condition after inferring that iteration's
 * copy). The final carried values become Identities of the last copy's results; a scan
 * output becomes the ConcatFromSequence (new axis 0) of its rows. */
void rule_unroll_loop(Graph *g, Node *n) {
    Attr *a = ir_attr(n, "body");
    Graph *b = a && a->type == A_GRAPH ? a->g : NULL;
    Value *m = n->nin > 0 ? n->in[0] : NULL, *c = n->nin > 1 ? n->in[1] : NULL;
    int nc = n->nin - 2, nscan = n->nout - nc;
    int64_t trip = INT64_MAX, go = 1;
    if (nc < 0 || nscan < 0 || !b || b->ninputs != 2 + nc || b->noutputs != 1 + nc + nscan) {
        error(ir_where(g, n), "the body must take 2 + %d inputs and give 1 + %d outputs", nc, n->nout);
        return;
    }
    if ((m && !const_scalar(m, &trip)) || (c && !const_scalar(c, &go))) {
        error(ir_where(g, n), "the loop carries a sequence or optional, so its trip count and condition "
              "must be known at compile time (sequences are resolved at compile time)");
        return;
    }
    Value **ins = ARENA_ARRAY(g->arena, Value *, 2 + nc + 1), **outs = ARENA_ARRAY(g->arena, Value *, b->noutputs + 1);
    memcpy(ins + 2, n->in + 2, sizeof(Value *) * (size_t)nc);
    Value ***rows = ARENA_ARRAY(g->arena, Value **, nscan + 1);
    for (int j = 0; j < nscan; j++) rows[j] = ARENA_ARRAY(g->arena, Value *, MAX(0, MIN(trip, MAX_EXPANSIONS)) + 1);
    int64_t k = 0;
    for (; k < trip && go; k++) {
        if (k == MAX_EXPANSIONS) {
            error(ir_where(g, n), "the loop carries a sequence or optional and runs more than %d "
                  "iterations: onnxcc unrolls such loops at compile time", MAX_EXPANSIONS);
            return;
        }
        uint8_t yes = 1;
        ins[0] = ir_const_new(g, arena_printf(g->arena, "%s_iter%lld", n->name, (long long)k), DT_INT64, 0, NULL, &k);
        ins[1] = ir_const_new(g, arena_printf(g->arena, "%s_cond%lld", n->name, (long long)k), DT_BOOL, 0, NULL, &yes);
        if (!expand(g, n, b, ins, k, outs)) return;
        if (!const_scalar(outs[0], &go)) {
            error(ir_where(g, n), "the loop carries a sequence or optional, so the body's condition must be "
                  "known at compile time; '%s' is computed at run time", outs[0]->name);
            return;
        }
        memcpy(ins + 2, outs + 1, sizeof(Value *) * (size_t)nc);
        for (int j = 0; j < nscan; j++) rows[j][k] = outs[1 + nc + j];
    }
    for (int i = 0; i < nc; i++)
        if (n->out[i]) produce(g, n, OP_Identity, n->out[i], ins + 2 + i, 1);
    for (int j = 0; j < nscan; j++) {
        Value *o = n->out[nc + j];
        if (!o) continue;
        if (!k) {
            error(ir_where(g, n), "scan output '%s' of a loop that runs no iteration has no static shape", o->name);
            return;
        }
        Value *s = ir_value_new(g, arena_printf(g->arena, "%s_rows", o->name));
        produce_seq(g, n, s, rows[j], (int)k, DT_UNDEF);
        Node *cat = ir_node_insert_before(g, n, OP_ConcatFromSequence, arena_printf(g->arena, "%s_%s", n->name, o->name), 1, 1);
        cat->in[0] = s;
        ir_attr_set_int(g, cat, "axis", 0);
        ir_attr_set_int(g, cat, "new_axis", 1);
        cat->out[0] = o;
        o->producer = cat;
        infer_node(g, cat);
    }
    n->dead = true;
}

/* Container nodes compute nothing; they are dead by lowering unless a container reached an
 * op that takes no container (reported by that op's rule). */
void lower_container(Lower *L, Node *n) {
    die("lower_container: %s '%s' is still live", n->op_type, n->name);
}

bool rule_takes_containers(Op op) {
    switch (op) {
    case OP_ConcatFromSequence: case OP_Optional: case OP_OptionalGetElement: case OP_OptionalHasElement:
    case OP_SequenceAt: case OP_SequenceConstruct: case OP_SequenceErase: case OP_SequenceInsert:
    case OP_SequenceLength: case OP_SequenceMap: case OP_Identity: case OP_If: case OP_Loop:
        return true;
    default:
        return false;
    }
}

/* ---- graph boundary ---- */

/* The tensors a container stands for, in order: a sequence's elements, an optional's element
 * (or, for an optional of a sequence, that sequence's elements); a tensor stands for itself. */
int rule_flatten(const Value *v, Value **out) {
    if (v->kind == VK_TENSOR) {
        if (out) out[0] = (Value *)v;
        return 1;
    }
    int n = 0;
    for (int k = 0; k < v->nelems; k++) n += rule_flatten(v->elems[k], out ? out + n : NULL);
    return n;
}

/* Root graph outputs that are containers become their elements' tensors, each through an
 * Identity named NAME.K (K counting the tensors), so that the compiled model's outputs are
 * tensors with names tied to the ONNX output's. */
void expand_containers(Graph *g) {
    int n = 0;
    for (int i = 0; i < g->noutputs; i++) n += rule_flatten(g->outputs[i], NULL);
    Value **outs = ARENA_ARRAY(g->arena, Value *, n + 1);
    int k = 0;
    for (int i = 0; i < g->noutputs; i++) {
        Value *v = g->outputs[i];
        if (v->kind == VK_TENSOR) {
            outs[k++] = v;
            continue;
        }
        v->is_output = false;
        int m = rule_flatten(v, outs + k);
        for (int j = 0; j < m; j++, k++) {
            Node *c = ir_node_new(g, OP_Identity, arena_printf(g->arena, "%s.%d", v->name, j), 1, 1);
            c->in[0] = outs[k];
            c->out[0] = ir_value_new(g, arena_printf(g->arena, "%s.%d", v->name, j));
            c->out[0]->producer = c;
            c->out[0]->is_output = true;
            infer_node(g, c);
            outs[k] = c->out[0];
        }
    }
    g->outputs = outs;
    g->noutputs = n;
}

/* The nodes rebuilding container v from the tensors ts (its flattening), before `next` (NULL:
 * at the end of g). */
static void rebuild(Graph *g, Node *next, Value *v, Value **ts, int m, const char *name) {
    Value *seq = v;
    if (v->kind == VK_OPT && (m || v->elem_kind == VK_SEQ)) {
        Node *o = next ? ir_node_insert_before(g, next, OP_Optional, name, 1, 1) : ir_node_new(g, OP_Optional, name, 1, 1);
        o->out[0] = v;
        v->producer = o;
        if (v->elem_kind == VK_TENSOR) {
            o->in[0] = ts[0];
            return;
        }
        seq = o->in[0] = ir_value_new(g, arena_printf(g->arena, "%s.seq", v->name));
        next = o;
    } else if (v->kind == VK_OPT) {
        Node *o = next ? ir_node_insert_before(g, next, OP_Optional, name, 0, 1) : ir_node_new(g, OP_Optional, name, 0, 1);
        int64_t ty[3] = {v->elem_kind, VK_TENSOR, v->dtype};
        ir_attr_set_ints(g, o, "type", ty, 3);
        o->out[0] = v;
        v->producer = o;
        return;
    }
    Op op = m ? OP_SequenceConstruct : OP_SequenceEmpty;
    const char *sname = arena_printf(g->arena, "%s_seq", name);
    Node *s = next ? ir_node_insert_before(g, next, op, sname, m, 1) : ir_node_new(g, op, sname, m, 1);
    memcpy(s->in, ts, sizeof(Value *) * (size_t)m);
    ir_attr_set_int(g, s, "dtype", v->dtype);
    s->out[0] = seq;
    seq->producer = s;
}

/* Outputs of control node n whose bodies bs[] return sequences or optionals: every body
 * returns their tensors instead, n gets one output per tensor, and nodes after n rebuild the
 * containers from them, so that If's rules see tensors only. The structure must agree
 * between the bodies: it is fixed at compile time. */
bool rule_flatten_branches(Graph *g, Node *n, Graph **bs, int nb) {
    int total = 0;
    bool any = false;
    for (int i = 0; i < n->nout; i++) {
        Value *a = bs[0]->outputs[i];
        int m = rule_flatten(a, NULL);
        any |= a->kind != VK_TENSOR;
        for (int b = 1; b < nb; b++) {
            Value *x = bs[b]->outputs[i];
            if (x->kind != a->kind || (a->kind && (rule_flatten(x, NULL) != m || x->elem_kind != a->elem_kind))) {
                error(ir_where(g, n), "the branches give output %d different structures (%s of %d tensors, "
                      "%s of %d): a sequence's length or an optional's presence must not depend on a "
                      "run-time condition", i, kind_name(a->kind), m, kind_name(x->kind), rule_flatten(x, NULL));
                return false;
            }
        }
        total += m;
    }
    if (!any) return true;
    Node *next = NULL;
    for (int i = 0; i + 1 < g->nnodes; i++)
        if (g->nodes[i] == n) next = g->nodes[i + 1];
    Value **orig = bs[0]->outputs;
    for (int b = 0; b < nb; b++) {
        Value **outs = ARENA_ARRAY(g->arena, Value *, total + 1);
        for (int i = 0, k = 0; i < n->nout; i++) k += rule_flatten(bs[b]->outputs[i], outs + k);
        bs[b]->outputs = outs;
        bs[b]->noutputs = total;
    }
    Value **outs = ARENA_ARRAY(g->arena, Value *, total + 1);
    for (int i = 0, k = 0; i < n->nout; i++) {
        Value *v = n->out[i];
        if (orig[i]->kind == VK_TENSOR) {
            outs[k++] = v;
            continue;
        }
        int m = rule_flatten(orig[i], NULL);
        const char *base = v ? v->name : arena_printf(g->arena, "%s_out%d", n->name, i);
        for (int j = 0; j < m; j++) {
            outs[k + j] = ir_value_new(g, arena_printf(g->arena, "%s.%d", base, j));
            outs[k + j]->producer = n;
        }
        if (v) {
            v->kind = orig[i]->kind;        /* what rebuild() builds */
            v->elem_kind = orig[i]->elem_kind;
            v->dtype = orig[i]->dtype;
            rebuild(g, next, v, outs + k, m, arena_printf(g->arena, "%s_%s", n->name, v->name));
        }
        k += m;
    }
    n->out = outs;
    n->nout = total;
    return true;
}
