/* fold_constants.c - evaluate at compile time the nodes whose inputs are all constant.
 *
 * There is no second implementation of the ops here: a node is folded by lowering a copy of it
 * (through the same rules that generate code) into a one-node Program and running that program
 * with the kernel IR interpreter (ir/kinterp.c). Folding and the generated code thus share the
 * algorithm (the same kernel), and a new op gets folding for free. They may still differ in
 * the last bits: the interpreter evaluates exp, log, tanh, ... with the host's libm, while the
 * generated code uses its own approximations (backend/math.c), so a folded transcendental can
 * differ from what the compiled model would have computed by a few ulp.
 *
 * fold_node() is also called by infer_shapes right after each node, so that shape subgraphs
 * (Shape -> Gather -> Concat -> Reshape) are constant by the time Reshape's rule runs. The pass
 * fold_constants() folds whatever became foldable later (after fuse_batchnorm, say). */
#include "pipeline.h"

enum { FOLD_MAX_BYTES = 16 << 20 }; /* bigger results stay computed at run time */

static bool all_inputs_constant(const Node *n) {
    int present = 0;
    for (int i = 0; i < n->nin; i++) {
        if (!n->in[i]) continue;
        if (!n->in[i]->data) return false;
        present++;
    }
    return present > 0;
}

static bool all_outputs_constant(const Node *n) {
    for (int i = 0; i < n->nout; i++)
        if (n->out[i] && !n->out[i]->data) return false;
    return true;
}

/* Only results the interpreter can produce and that are worth keeping in the object file. */
static bool outputs_foldable(const Node *n) {
    for (int i = 0; i < n->nout; i++) {
        const Value *v = n->out[i];
        if (!v) continue;
        if (!dtype_supported(v->dtype) || v->rank < 0 || v->dyn || v->kind) return false;
        for (int d = 0; d < v->rank; d++)
            if (v->dims[d] < 0) return false;
        if (ir_nbytes(v) > FOLD_MAX_BYTES) return false;
    }
    return true;
}

static Value *copy_value(Graph *t, const Value *v) {
    Value *c = ir_value_new(t, v->name);
    ir_set_shape(c, v->dtype, v->rank, v->dims);
    c->data = v->data;              /* shared, never written */
    return c;
}

/* A graph holding a copy of n alone: its inputs are constants, its outputs graph outputs. */
static Graph *single_node_graph(Graph *g, const Node *n) {
    Graph *t = ir_graph_new(g->arena);
    t->name = "fold";
    t->path = g->path;
    t->opset = g->opset;
    Node *c = ir_node_new(t, n->op, n->name, n->nin, n->nout);
    c->op_type = n->op_type;
    c->domain = n->domain;
    c->opset = n->opset;
    c->attrs = n->attrs;
    c->nattrs = n->nattrs;
    t->outputs = ARENA_ARRAY(g->arena, Value *, n->nout + 1);
    for (int i = 0; i < n->nin; i++)
        if (n->in[i]) c->in[i] = copy_value(t, n->in[i]);
    for (int i = 0; i < n->nout; i++) {
        if (!n->out[i]) continue;
        Value *o = copy_value(t, n->out[i]);
        o->producer = c;
        o->is_output = true;
        t->outputs[t->noutputs++] = c->out[i] = o;
    }
    return t;
}

static void kill_folded(Node *n) {
    for (int i = 0; i < n->nout; i++)
        if (n->out[i]) n->out[i]->producer = NULL;
    n->dead = true;
}

/* A DequantizeLinear of int4/uint4 weights (Value.nibbles) read by MatMul or Gemm as their B
 * alone stays a node: lowered, its kernel goes into the matrix product's loads of B (fuse.c,
 * inline_weights), so the weights stay 4-bit in the object, where folding would store them
 * as floats, eight times the bytes. Anywhere else it is folded as usual. */
static bool keep_nibbles(const Graph *g, const Node *n) {
    if (n->op != OP_DequantizeLinear || !n->in[0] || !n->in[0]->nibbles || !n->out[0] || n->out[0]->is_output)
        return false;
    const Value *y = n->out[0];
    int uses = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const Node *c = g->nodes[i];
        if (c->dead) continue;
        for (int j = 0; j < c->nin; j++) {
            if (c->in[j] != y) continue;
            if (j != 1 || (c->op != OP_MatMul && c->op != OP_Gemm)) return false;
            uses++;
        }
    }
    return uses > 0;
}

bool fold_node(Graph *g, Node *n) {
    if (n->dead) return false;
    if (keep_nibbles(g, n)) return false;
    if (all_outputs_constant(n)) {  /* a shape rule already computed it (Shape, Size) */
        kill_folded(n);
        return true;
    }
    Graph *sub[1];
    if (ir_subgraphs(n, sub, 1)) return false;  /* a body may read outer run-time values */
    if (!all_inputs_constant(n) || !outputs_foldable(n)) return false;
    Graph *t = single_node_graph(g, n);
    Program *p = lower(t, NULL);
    void **outs = ARENA_ARRAY(g->arena, void *, t->noutputs + 1);
    for (int i = 0; i < t->noutputs; i++) {
        size_t nb = ir_nbytes(t->outputs[i]);
        outs[i] = arena_alloc(g->arena, nb ? nb : 1);
    }
    kir_interpret(p, NULL, outs);
    for (int i = 0, k = 0; i < n->nout; i++)
        if (n->out[i]) n->out[i]->data = outs[k++];
    kill_folded(n);
    return true;
}

static void fold_graph(Graph *g) {
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead) fold_node(g, g->nodes[i]);
}

void fold_constants(Graph *g) {
    ir_each_subgraph(g, fold_graph);
    int folded = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead) folded += fold_node(g, g->nodes[i]);
    if (folded) progress("fold_constants: %d nodes folded", folded);
    ir_dce(g);
    ir_compact(g);
}
