/* simplify.c - drop nodes that compute nothing, then dead nodes.
 *
 * Identity and (inference) Dropout forward their input, and so does a Pad whose pads are all
 * zero; a view (OPF_VIEW: Reshape, Flatten, Squeeze, Unsqueeze) whose output shape equals its
 * input shape is a no-op once shapes are static.
 * Their consumers read the input directly. A node whose output is a graph output is kept: the
 * output's name is part of the compiled API, and lowering turns such a node into a copy.
 * Bodies of If/Loop/Scan are simplified the same way (a body output is kept like a graph
 * output: the owner's rule reads it). */
#include "pipeline.h"

/* Pad's pads (input 1 after canonicalize), all zero: the copy of its input it would make. */
static bool zero_pads(const Node *n) {
    const Value *p = n->nin > 1 ? n->in[1] : NULL;
    if (!p || !p->data || p->dtype != DT_INT64 || p->rank != 1) return false;
    for (int64_t i = 0; i < p->dims[0]; i++)
        if (((const int64_t *)p->data)[i]) return false;
    return true;
}

static bool is_noop(const Node *n) {
    switch (n->op) {
    case OP_Pad:                    /* all pads zero (a pool's padding exported as a Pad) */
        return zero_pads(n) && n->in[0]->dtype == n->out[0]->dtype;
    case OP_Dropout:                /* the mask output, if used, still needs the node */
        if (n->nin > 2 && n->in[2]) return false;   /* training mode (canonicalize) */
        return n->nout < 2 || !n->out[1] || !n->out[1]->nuses;
    default:                        /* the views (OPF_VIEW in ir/ops.def) */
        return (op_info[n->op].flags & OPF_VIEW) && ir_same_shape(n->in[0], n->out[0]) &&
               n->in[0]->dtype == n->out[0]->dtype;
    }
}

/* Value.is_output may be stale after rewrites; g->outputs is the truth. */
static bool is_graph_output(const Graph *g, const Value *v) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

static void simplify_graph(Graph *g) {
    ir_count_uses(g);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead || !is_noop(n) || is_graph_output(g, n->out[0])) continue;
        ir_replace_uses(g, n->out[0], n->in[0]);
        n->dead = true;
    }
    ir_dce(g);
    ir_compact(g);
}

void simplify(Graph *g) {
    ir_each_subgraph(g, simplify_graph);
    simplify_graph(g);
}
