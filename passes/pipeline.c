/* pipeline.c - every pass of onnxcc, in order, in one place.
 *
 * run_pipeline() is the whole compiler between the frontend and the backend: a flat list of
 * passes, each a plain function over the graph IR (before lowering) or the kernel IR (after).
 * Between passes it prints the IR when asked (--print-after=PASS, --print-after-all), runs the
 * verifier of the current IR (unless --no-verify) and reports timings with -v. The -O level
 * decides which optimising passes run; a pass that does not run at this level is still
 * announced by --print-after, so a missing dump is never a mystery. */
#include <string.h>
#include <time.h>

#include "pipeline.h"

/* ORDER PASS: the order in which run_pipeline runs them. */
const char *const pass_names[] = {
    "fix_shapes", "canonicalize", "infer_shapes", "simplify", "fuse_batchnorm",
    "fold_constants", "lower", "fuse", "tile", "bufferize", NULL,
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool wants_print(const Options *o, const char *pass) {
    return o->print_after_all || (o->print_after && strcmp(o->print_after, pass) == 0);
}

/* After each pass: progress, dump, verify. Exactly one of g and p is set. */
static void after(const Options *o, const char *pass, double t0, Graph *g, Program *p) {
    exit_if_errors();               /* a pass that reported user errors ends the compilation */
    progress("%-15s %8.2f ms", pass, now_ms() - t0);
    if (wants_print(o, pass)) {
        printf("; --- after %s ---\n", pass);
        if (g) ir_print(stdout, g);
        else kir_print(stdout, p);
        fflush(stdout);
    }
    if (!o->verify) return;
    if (g) ir_verify(g, pass);
    else kir_verify(p, pass);
}

static void skipped(const Options *o, const char *pass) {
    progress("%-15s skipped at -O%d", pass, o->opt_level);
    if (wants_print(o, pass)) printf("; --- %s skipped at -O%d ---\n", pass, o->opt_level);
}

/* The graph passes take and return nothing but the graph; these wrappers keep the list below
 * one line per pass. */
#define GRAPH_PASS(name, call) do { double t0 = now_ms(); call; after(o, name, t0, g, NULL); } while (0)
#define KERNEL_PASS(name, call) do { double t0 = now_ms(); call; after(o, name, t0, NULL, p); } while (0)

Program *run_pipeline(Graph *g, const Options *o) {
    Options dflt = {.opt_level = 2, .verify = true};
    if (!o) o = &dflt;
    int opt = o->opt_level;
    Program *p = NULL;

    GRAPH_PASS("fix_shapes", fix_shapes(g, o));        /* --shape; no symbolic input dims left */
    GRAPH_PASS("canonicalize", canonicalize(g));       /* one form per op; Constant -> data */
    GRAPH_PASS("infer_shapes", infer_shapes(g));       /* static shapes; folds shape subgraphs */
    GRAPH_PASS("simplify", simplify(g));               /* drop Identity, Dropout, no-op reshapes */
    if (opt >= 1) GRAPH_PASS("fuse_batchnorm", fuse_batchnorm(g)); /* BN into Conv/Gemm weights */
    else skipped(o, "fuse_batchnorm");
    GRAPH_PASS("fold_constants", fold_constants(g));   /* whatever became constant since */
    KERNEL_PASS("lower", p = lower(g, o));             /* graph IR -> kernel IR (rules_*.c) */
    if (opt >= 1) KERNEL_PASS("fuse", fuse(p));        /* elementwise consumers into producers */
    else skipped(o, "fuse");
    if (opt >= 2) KERNEL_PASS("tile", tile(p));        /* loop splitting for caches and vectors */
    else skipped(o, "tile");
    KERNEL_PASS("bufferize", bufferize(p));            /* arena offsets of the temporaries */
    return p;
}
