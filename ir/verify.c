/* verify.c - the graph IR verifier (ir_verify), run after every graph pass when verification
 * is on (the default; --no-verify turns it off).
 *
 * It checks the conventions listed in ir.h and names the pass that broke one, so that a bad
 * rewrite is caught where it happens instead of as a strange crash in lowering. A failure is a
 * bug of ours, never the user's: it die()s. */
#include <string.h>

#include "ir.h"

/* Passes after which every live value must have a dtype and a full static shape. */
static bool shapes_final(const char *after) {
    static const char *const later[] = {"infer_shapes", "simplify", "fuse_batchnorm",
                                        "fold_constants"};
    for (int i = 0; i < COUNTOF(later); i++)
        if (after && strcmp(after, later[i]) == 0) return true;
    return false;
}

static void check_shape(const Value *v, const char *after) {
    if (v->dtype == DT_UNDEF) die("verifier after %s: value '%s' has no dtype", after, v->name);
    if (v->rank < 0) die("verifier after %s: value '%s' has no shape", after, v->name);
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0)
            die("verifier after %s: value '%s' has an unknown dim %d", after, v->name, d);
}

static void check_counts(const Node *n, const char *after) {
    if ((unsigned)n->op >= OP_COUNT) die("verifier after %s: node '%s' has no op", after, n->name);
    const OpInfo *oi = &op_info[n->op];
    if (n->nin < oi->min_in || n->nin > oi->max_in)
        die("verifier after %s: node '%s' (%s) has %d inputs, expected %d..%d", after, n->name,
            oi->name, n->nin, oi->min_in, oi->max_in);
    if (n->nout < oi->min_out || n->nout > oi->max_out)
        die("verifier after %s: node '%s' (%s) has %d outputs, expected %d..%d", after, n->name,
            oi->name, n->nout, oi->min_out, oi->max_out);
}

/* A value may be read if it is a graph input, a constant or already written by a live node. */
static void check_use(const Node *n, const Value *v, const bool *defined, const char *after) {
    if (v->producer && v->producer->dead)
        die("verifier after %s: '%s' reads '%s' of dead node '%s'", after, n ? n->name : "output",
            v->name, v->producer->name);
    if (!defined[v->id])
        die("verifier after %s: '%s' reads '%s' before it is defined", after,
            n ? n->name : "graph output", v->name);
}

/* The nodes and outputs of g (the root or a subgraph; `defined` is shared, since value ids
 * are global). A subgraph is checked where its node stands: it may read what is defined
 * before that node, its own inputs and what its own nodes write. */
static void verify_nodes(Graph *g, bool *defined, bool shapes, const char *after) {
    for (int i = 0; i < g->ninputs; i++) {
        if (!g->inputs[i]->is_input) die("verifier after %s: input '%s' not marked", after, g->inputs[i]->name);
        defined[g->inputs[i]->id] = true;
    }
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->id != i) die("verifier after %s: node '%s' has id %d at %d", after, n->name, n->id, i);
        if (n->dead) continue;
        check_counts(n, after);
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]) check_use(n, n->in[j], defined, after);
        Graph *sub[4];
        for (int j = 0, ns = ir_subgraphs(n, sub, 4); j < ns; j++) {
            if (sub[j]->parent != g || sub[j]->owner != n)
                die("verifier after %s: a subgraph of '%s' has another parent", after, n->name);
            verify_nodes(sub[j], defined, shapes, after);
        }
        for (int j = 0; j < n->nout; j++) {
            Value *v = n->out[j];
            if (!v) continue;
            if (v->producer != n)
                die("verifier after %s: '%s' is an output of '%s' but its producer is '%s'", after,
                    v->name, n->name, v->producer ? v->producer->name : "none");
            if (v->is_input) die("verifier after %s: node '%s' writes input '%s'", after, n->name, v->name);
            defined[v->id] = true;
            if (shapes) check_shape(v, after);
        }
    }
    for (int i = 0; i < g->noutputs; i++) {
        check_use(NULL, g->outputs[i], defined, after);
        if (shapes) check_shape(g->outputs[i], after);
    }
}

void ir_verify(Graph *g, const char *after) {
    bool *defined = ARENA_ARRAY(g->arena, bool, g->nvalues + 1);
    for (int i = 0; i < g->nvalues; i++) {
        Value *v = g->values[i];
        if (v->id != i) die("verifier after %s: value '%s' has id %d at %d", after, v->name, v->id, i);
        if (v->data && v->rank < 0) die("verifier after %s: constant '%s' has no shape", after, v->name);
        defined[i] = v->data != NULL;
    }
    verify_nodes(g, defined, shapes_final(after), after);
}
