/* print.c - the text form of the graph IR (ir_print), shown by --print-after and compared by
 * the golden tests of graph passes.
 *
 * The form is meant to be read by people and diffed by tests, so it is stable: values appear
 * in graph order, attributes in model order, numbers through one formatter. A sketch:
 *
 *   graph model (opset 13)
 *     input  %x: float32[1,3,8,8]
 *     const  %w: float32[4,3,3,3] = [0.1, -0.2, 0.3, 0.05, ...]
 *     %y: float32[1,4,8,8] = Conv(%x, %w, _) {group=1, pads=[1,1,1,1]}  # conv1
 *     output %y
 *
 * "_" is an absent optional input; "?" an unknown dtype, rank or dim; symbolic dims print
 * their name; "dyn" after the dims marks a data-dependent shape (they are its capacity). Only constants that something live uses are listed. */
#include <inttypes.h>
#include <string.h>

#include "ir.h"

enum { MAX_SHOWN = 4 };             /* constant/attribute elements shown before "..." */

static void print_type(FILE *f, const Value *v) {
    fputs(v->dtype == DT_UNDEF ? "?" : dtype_name(v->dtype), f);
    if (v->rank < 0) { fputs("[?]", f); return; }
    fputc('[', f);
    for (int d = 0; d < v->rank; d++) {
        if (d) fputc(',', f);
        if (v->dims[d] >= 0) fprintf(f, "%" PRId64, v->dims[d]);
        else fputs(v->sym[d] ? v->sym[d] : "?", f);
    }
    fputc(']', f);
    if (v->dyn) fputs(" dyn", f);
}

static void print_elem(FILE *f, const Value *v, int64_t i) {
    if (dtype_is_float(v->dtype)) fprintf(f, "%.7g", ir_const_float(v, i));
    else if (v->dtype == DT_UINT64) fprintf(f, "%" PRIu64, ((const uint64_t *)v->data)[i]);
    else fprintf(f, "%" PRId64, ir_const_int(v, i));
}

/* The contents of a constant: a scalar bare, a tensor as a (truncated) list. */
static void print_data(FILE *f, const Value *v) {
    if (!dtype_supported(v->dtype) || v->rank < 0) { fputs("<data>", f); return; }
    if (v->rank == 0) { print_elem(f, v, 0); return; }
    int64_t n = ir_numel(v);
    fputc('[', f);
    for (int64_t i = 0; i < n && i < MAX_SHOWN; i++) {
        if (i) fputs(", ", f);
        print_elem(f, v, i);
    }
    if (n > MAX_SHOWN) fputs(", ...", f);
    fputc(']', f);
}

static void print_attr(FILE *f, const Attr *a) {
    fprintf(f, "%s=", a->name);
    switch (a->type) {
    case A_INT: fprintf(f, "%" PRId64, a->i); break;
    case A_FLOAT: fprintf(f, "%.7g", a->f); break;
    case A_STRING: fprintf(f, "\"%s\"", a->s ? a->s : ""); break;
    case A_TENSOR:
        fputs("<tensor ", f);
        print_type(f, a->t);
        fputs(" = ", f);
        print_data(f, a->t);
        fputc('>', f);
        break;
    case A_GRAPH: fputs("<graph>", f); break;
    case A_INTS: case A_FLOATS: case A_STRINGS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++) {
            if (i) fputc(',', f);
            if (a->type == A_INTS) fprintf(f, "%" PRId64, a->ints[i]);
            else if (a->type == A_FLOATS) fprintf(f, "%.7g", a->floats[i]);
            else fprintf(f, "\"%s\"", a->strings[i]);
        }
        fputc(']', f);
        break;
    default: fputs("<undef>", f); break;
    }
}

static void print_node(FILE *f, const Node *n) {
    fputs("  ", f);
    for (int i = 0; i < n->nout; i++) {
        if (i) fputs(", ", f);
        if (!n->out[i]) { fputc('_', f); continue; }
        fprintf(f, "%%%s: ", n->out[i]->name);
        print_type(f, n->out[i]);
    }
    fprintf(f, " = %s(", n->op_type);
    for (int i = 0; i < n->nin; i++) {
        if (i) fputs(", ", f);
        if (n->in[i]) fprintf(f, "%%%s", n->in[i]->name);
        else fputc('_', f);
    }
    fputc(')', f);
    if (n->nattrs) {
        fputs(" {", f);
        for (int i = 0; i < n->nattrs; i++) {
            if (i) fputs(", ", f);
            print_attr(f, &n->attrs[i]);
        }
        fputc('}', f);
    }
    fprintf(f, "  # %s\n", n->name);
}

/* A subgraph, indented under its node: its inputs, nodes and outputs. */
static void print_body(FILE *f, Graph *g, int depth) {
    for (int i = 0; i < g->ninputs; i++) {
        fprintf(f, "%*s  input  %%%s: ", 2 * depth, "", g->inputs[i]->name);
        print_type(f, g->inputs[i]);
        fputc('\n', f);
    }
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        fprintf(f, "%*s", 2 * depth, "");
        print_node(f, n);
        Graph *sub[4];
        for (int j = 0, ns = ir_subgraphs(n, sub, 4); j < ns; j++) {
            fprintf(f, "%*s  body %s:\n", 2 * depth, "", sub[j]->name);
            print_body(f, sub[j], depth + 2);
        }
    }
    for (int i = 0; i < g->noutputs; i++) fprintf(f, "%*s  output %%%s\n", 2 * depth, "", g->outputs[i]->name);
}

void ir_print(FILE *f, Graph *g) {
    fprintf(f, "graph %s (opset %d)\n", g->name, g->opset);
    for (int i = 0; i < g->ninputs; i++) {
        fprintf(f, "  input  %%%s: ", g->inputs[i]->name);
        print_type(f, g->inputs[i]);
        fputc('\n', f);
    }
    /* Constants that a live node or an output uses; nuses is recomputed here so that the
     * printer can run between any two passes. */
    ir_count_uses(g);
    for (int i = 0; i < g->nvalues; i++) {
        Value *v = g->values[i];
        if (!v->data || v->is_input || !v->nuses || (v->producer && !v->producer->dead)) continue;
        fprintf(f, "  const  %%%s: ", v->name);
        print_type(f, v);
        fputs(" = ", f);
        print_data(f, v);
        fputc('\n', f);
    }
    Graph body = *g;                /* nodes and outputs as a body at depth 0 */
    body.ninputs = 0;
    print_body(f, &body, 0);
}
