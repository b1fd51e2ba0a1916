/* infer_shapes.c - give every value a dtype and a static shape, folding constants on the way.
 *
 * The nodes are visited in (topological) order and each op's shape rule (op_info[].infer, in
 * passes/ops/<family>.c) sets the dtype and dims of its outputs. A node whose inputs are all
 * constant is folded at once (fold_node), so that the rule of a later node sees constant data
 * where it needs it: Reshape's target shape is often computed by a Shape -> Gather -> Concat
 * subgraph. Every problem is reported (error()) and the pass exits only at the end, so a model
 * with several bad nodes gets every message at once. Subgraphs (If's branches, Loop's and
 * Scan's bodies) are inferred by their owner's rule (passes/ops/control.c), through
 * infer_graph, once the owner knows the types of the body's inputs. A rule may mark an output
 * dyn (its shape depends on the data: NonZero, Unique, ...); such a value may feed the ops
 * dynamic.c's dyn_infer knows, which mark their outputs dyn in turn. */
#include "pipeline.h"

static bool has_shape(const Value *v) {
    if (v->dtype == DT_UNDEF || v->rank < 0) return false;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0) return false;
    return true;
}

/* Declared output types in the model (value_info, graph outputs) are not trusted: the rule
 * recomputes them from the inputs, which --shape may have changed. */
static void forget_outputs(Node *n) {
    for (int i = 0; i < n->nout; i++) {
        Value *v = n->out[i];
        if (!v || v->data) continue;
        v->dtype = DT_UNDEF;
        v->rank = -1;
        v->dyn = false;
        v->dynmask = 0;
        v->kind = VK_TENSOR;
        v->nelems = 0;
        for (int d = 0; d < MAX_RANK; d++) v->sym[d] = NULL;
    }
}

/* canonical-forms.md promises a non-negative Softmax axis; the input's rank is first known
 * here, after canonicalize has run. */
static void fix_softmax_axis(Graph *g, Node *n) {
    if (n->op != OP_Softmax && n->op != OP_LogSoftmax) return;
    int rank = n->in[0]->rank;
    int64_t axis = ir_attr_int(n, "axis", -1);
    if (axis < -rank || axis >= rank) {
        error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)axis, rank);
        return;
    }
    if (axis < 0) ir_attr_set_int(g, n, "axis", axis + rank);
}

/* The size limit, for values whose shape the model states (inputs, constants) and for each
 * rule's outputs, before anything multiplies their dims again. */
static bool size_ok(Graph *g, const char *where, const Value *v) {
    /* a string's bytes are one more dim in the kernel IR (ir.h) */
    if (v->dtype == DT_STRING && v->rank >= MAX_RANK) {
        error(where, "'%s' is a string tensor of rank %d; onnxcc supports strings up to rank %d",
              v->name, v->rank, MAX_RANK - 1);
        return false;
    }
    if (!has_shape(v) || ir_extent(v) <= g->max_bytes) return true;
    const char *dims = "";
    for (int d = 0; d < v->rank; d++)
        dims = arena_printf(g->arena, "%s%s%lld", dims, d ? "x" : "", (long long)v->dims[d]);
    error(where, "'%s' (%s[%s]) is too large: onnxcc's limit for this target is %lld bytes "
          "per tensor", v->name, dtype_name(v->dtype), dims, (long long)g->max_bytes);
    return false;
}

static bool inputs_known(const Node *n) {
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] && !has_shape(n->in[i])) return false;
    return true;
}

/* A data-dependent shape (Value.dyn) is known only at run time: its rule sees the capacity,
 * and only the consumers dynamic.c knows how to follow at run time may take it. */
static bool inputs_static(Graph *g, Node *n) {
    for (int i = 0; i < n->nin; i++) {
        Value *v = n->in[i];
        if (v && v->kind && !rule_takes_containers(n->op)) {
            error(ir_where(g, n), "input '%s' is a %s; %s takes tensors", v->name,
                  v->kind == VK_SEQ ? "sequence" : "optional", n->op_type);
            return false;
        }
        if (v && v->dtype == DT_STRING && !(op_info[n->op].flags & OPF_STRINGS)) {
            error(ir_where(g, n), "input '%s' is a string tensor; %s does not take strings "
                  "(onnxcc supports strings in StringNormalizer, TfIdfVectorizer, Equal, Cast and CastLike)",
                  v->name, n->op_type);
            return false;
        }
        if (v && v->dyn && !dyn_operand_ok(g, n, v)) return false;
    }
    return true;
}

void infer_node(Graph *g, Node *n) {
    if (!inputs_static(g, n)) return;
    if (!inputs_known(n)) {
        /* Only possible downstream of a node that already reported an error. */
        if (!error_count) {
            const Value *v = NULL;
            for (int i = 0; i < n->nin && !v; i++)
                if (n->in[i] && !has_shape(n->in[i])) v = n->in[i];
            die("infer_shapes: %s has an input without shape: '%s', from %s", n->name, v ? v->name : "?",
                v && v->producer ? v->producer->name : "no node");
        }
        return;
    }
    fix_softmax_axis(g, n);
    forget_outputs(n);
    int before = error_count;
    op_info[n->op].infer(g, n);
    if (error_count > before) return;
    if (dyn_any_input(n) || dyn_runtime_dims(n)) dyn_infer(g, n);       /* which output dims follow run-time ones */
    if (error_count > before) return;
    for (int i = 0; i < n->nout; i++) {
        Value *v = n->out[i];
        if (v && !has_shape(v)) {
            error(ir_where(g, n), "could not infer a static %s for output '%s'",
                  v->dtype == DT_UNDEF ? "dtype" : "shape", v->name);
            return;
        }
        if (v && !size_ok(g, ir_where(g, n), v)) return;
        /* a graph output declared int4/uint4/float4e2m1 (ir.h, Value.nibbles) is stored two
         * values a byte: what computes it must give 8-bit integers or float4e2m1, of a shape
         * known at compile time */
        if (v && v->nibbles && v->dtype != DT_INT8 && v->dtype != DT_UINT8 && v->dtype != DT_FLOAT4E2M1) {
            error(ir_where(g, n), "output '%s' is declared int4, uint4 or float4e2m1 but is %s", v->name,
                  dtype_name(v->dtype));
            return;
        }
        if (v && v->nibbles && v->dyn) {
            error(ir_where(g, n), "output '%s' is a 4-bit tensor whose shape depends on the data, "
                  "which onnxcc does not support", v->name);
            return;
        }
    }
    /* DequantizeLinear of constant weights is left for fuse_qdq, which keeps the 8-bit data;
     * fold_constants folds what it does not take */
    if (n->op != OP_DequantizeLinear) fold_node(g, n);
}

void infer_graph(Graph *g) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        infer_node(g, n);
        /* a rule may insert nodes before n (passes/ops/sequence.c), inferring them itself */
        while (g->nodes[i] != n) i++;
    }
}

void infer_shapes(Graph *g) {
    for (int i = 0; i < g->nvalues; i++) {
        Value *v = g->values[i];
        if (v->is_input || v->data) size_ok(g, g->path, v);
    }
    exit_if_errors();
    infer_graph(g);
    exit_if_errors();
    /* a 4-bit output no node computes (a Constant or an initializer: infer_node's check never
     * sees it) must hold the 8-bit integers or float4e2m1 values its stores pack */
    for (int i = 0; i < g->noutputs; i++) {
        const Value *v = g->outputs[i];
        if (v->nibbles && v->dtype != DT_INT8 && v->dtype != DT_UINT8 && v->dtype != DT_FLOAT4E2M1)
            error(g->path, "output '%s' is declared int4, uint4 or float4e2m1 but is %s", v->name,
                  dtype_name(v->dtype));
    }
    exit_if_errors();
    expand_containers(g);
    exit_if_errors();
}
