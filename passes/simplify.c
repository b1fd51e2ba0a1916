/* simplify.c - drop nodes that compute nothing, then dead nodes.
 *
 * Identity and (inference) Dropout forward their input, and so does a Pad whose pads are all
 * zero; a view (OPF_VIEW: Reshape, Flatten, Squeeze, Unsqueeze) whose output shape equals its
 * input shape is a no-op once shapes are static.
 * Their consumers read the input directly. A node whose output is a graph output is kept: the
 * output's name is part of the compiled API, and lowering turns such a node into a copy.
 * Bodies of If/Loop/Scan are simplified the same way (a body output is kept like a graph
 * output: the owner's rule reads it).
 * A zero Pad of the spatial dims read only by an AveragePool of no padding of its own (an
 * `avg_pool2d(padding=1)` exported as Pad + AveragePool: InceptionV3's branch pools) becomes
 * the pool's pads with count_include_pad=1, the same sums and divisors. The Pad's copy was a
 * kernel of its own that the channel-last layouts cannot run channel-innermost (its indices
 * are offsets), so it kept every temporary around it NCHW, and through them InceptionV3's
 * whole stem and Mixed_5 blocks, whose dense convs then stored each vector of output
 * channels as a scatter (passes/schedule.c, channel_last_layouts). */
#include <string.h>

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

static bool is_graph_output(const Graph *g, const Value *v);

/* The zero padding of Pad node d on dims 2.. only, pads >= 0, into pb[] (begins, then ends, as
 * AveragePool's pads): false if it pads anything else or with another value. */
static bool spatial_zero_pad(const Node *d, int64_t *pb) {
    const Value *x = d->in[0], *p = d->nin > 1 ? d->in[1] : NULL, *c = d->nin > 2 ? d->in[2] : NULL;
    if (strcmp(ir_attr_str(d, "mode", "constant"), "constant") || (d->nin > 3 && d->in[3]) || !p || !p->data ||
        p->rank != 1 || x->rank < 3 || p->dims[0] != 2 * x->rank || !dtype_is_float(x->dtype))
        return false;
    if (c && (!c->data || ir_numel(c) != 1 || ir_const_float(c, 0) != 0)) return false;
    int r = x->rank;
    for (int i = 0; i < 2 * r; i++) {
        int64_t v = ir_const_int(p, i), dim = i % r;
        if (v < 0 || (dim < 2 && v)) return false;
        if (dim >= 2) pb[(i / r) * (r - 2) + dim - 2] = v;
    }
    return true;
}

/* AveragePool n reading a Pad that spatial_zero_pad takes, used only by n: n reads the Pad's
 * input with those pads and count_include_pad=1 (ceil_mode 0 and no padding of its own). */
static void fold_pad_into_pool(Graph *g, Node *n) {
    Node *d = n->in[0]->producer;
    const int64_t *ap;
    int64_t pb[2 * MAX_RANK];
    if (!d || d->dead || d->op != OP_Pad || n->in[0]->nuses != 1 || is_graph_output(g, n->in[0]) ||
        !spatial_zero_pad(d, pb) || ir_attr_int(n, "ceil_mode", 0) ||
        strcmp(ir_attr_str(n, "auto_pad", "NOTSET"), "NOTSET"))
        return;
    int np = ir_attr_ints(n, "pads", &ap);
    for (int i = 0; i < np; i++)
        if (ap[i]) return;
    ir_attr_set_ints(g, n, "pads", pb, 2 * (d->in[0]->rank - 2));
    ir_attr_set_int(g, n, "count_include_pad", 1);
    n->in[0] = d->in[0];
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
    ir_count_uses(g);
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == OP_AveragePool) fold_pad_into_pool(g, g->nodes[i]);
    ir_dce(g);
    ir_compact(g);
}

void simplify(Graph *g) {
    ir_each_subgraph(g, simplify_graph);
    simplify_graph(g);
}
