/* pipeline.c - every pass of onnxcc, in order, in one place.
 *
 * The pass table below is the whole compiler between the frontend and the backend: one row per
 * pass, in the order they run, with the lowest -O level that runs it, the IR it works on and a
 * one-line summary. run_pipeline() walks it; --help prints it and --print-after / --run-pass
 * look names up in it, so there is no second list to keep in step. Each pass is a plain
 * function over the graph IR (before lowering) or the kernel IR (after); `lower` is the one
 * pass that takes a graph and gives a program. Between passes the driver prints the IR when
 * asked (--print-after=PASS, --print-after-all), runs the verifier of the current IR (unless
 * --no-verify), reads the kernel IR's text form back when asked (--roundtrip-kir) and reports
 * timings with -v. A pass that does not run at this -O level is still announced by
 * --print-after, so a missing dump is never a mystery. */
#include <string.h>
#include <time.h>

#include "pipeline.h"

const Pass passes[] = {
    {"fix_shapes", 0, PASS_GRAPH_OPTS, {.graph_opts = fix_shapes},
     "--shape and --bind; no symbolic input dims left"},
    {"canonicalize", 0, PASS_GRAPH, {.graph = canonicalize}, "one form per op; Constant -> data"},
    {"infer_shapes", 0, PASS_GRAPH, {.graph = infer_shapes}, "static shapes; folds shape subgraphs"},
    {"simplify", 0, PASS_GRAPH, {.graph = simplify}, "drop Identity, Dropout, no-op reshapes"},
    {"fuse_qdq", 1, PASS_GRAPH, {.graph = fuse_qdq}, "DQ -> Conv/Gemm/MaxPool... -> Q as integer ops"},
    {"fuse_batchnorm", 1, PASS_GRAPH, {.graph = fuse_batchnorm}, "BN into Conv/ConvTranspose/Gemm weights"},
    {"dead_taps", 1, PASS_GRAPH_OPTS, {.graph_opts = dead_taps}, "Conv taps that only ever read padding cut off"},
    {"winograd", 2, PASS_GRAPH_OPTS, {.graph_opts = winograd},
     "3x3 stride-1 Convs as Winograd F(4x4,3x3) or F(2x2,3x3): transforms around 36 or 16 1x1 Convs"},
    {"split_channels", 2, PASS_GRAPH_OPTS, {.graph_opts = split_channels},
     "Convs, MatMuls, Gemms with weights past the L2 as sums over input channel chunks"},
    {"fold_constants", 0, PASS_GRAPH, {.graph = fold_constants}, "whatever became constant since"},
    {"band_rows", 1, PASS_GRAPH_OPTS, {.graph_opts = band_rows},
     "--max-arena: a CNN's first stages band by band of rows"},
    {"lower", 0, PASS_LOWER, {.lower = lower}, "graph IR -> kernel IR (passes/ops/)"},
    {"fuse", 1, PASS_KERNEL, {.kernel = fuse}, "elementwise consumers into producers"},
    {"schedule", 2, PASS_KERNEL, {.kernel = schedule}, "loop primitives per kernel class and target"},
    {"pad_in_place", 1, PASS_KERNEL, {.kernel = pad_in_place}, "padded copies and Concats written in place by their inputs' writers"},
    {"parallelize", 0, PASS_KERNEL, {.kernel = parallelize}, "large kernels' outer loops into tasks for NAME_run_par"},
    {"bufferize", 0, PASS_KERNEL, {.kernel = bufferize}, "arena offsets of the temporaries"},
};
const int npasses = COUNTOF(passes);

const Pass *pass_find(const char *name) {
    for (int i = 0; i < npasses; i++)
        if (strcmp(passes[i].name, name) == 0) return &passes[i];
    return NULL;
}

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
    double ms = now_ms() - t0;
    progress("%-15s %8.2f ms", pass, ms);
    if (o->on_pass) o->on_pass(o->on_pass_ctx, pass, ms, g, p);
    if (wants_print(o, pass)) {
        if (o->level) printf("; --- after %s (%s) ---\n", pass, o->level);
        else printf("; --- after %s ---\n", pass);
        if (g) ir_print(stdout, g);
        else kir_print(stdout, p);
        fflush(stdout);
    }
    if (p && o->roundtrip_kir) kir_roundtrip(p, pass);
    if (!o->verify) return;
    if (g) ir_verify(g, pass);
    else kir_verify(p, pass);
}

static void skipped(const Options *o, const char *pass) {
    progress("%-15s skipped at -O%d", pass, o->opt_level);
    if (wants_print(o, pass)) printf("; --- %s skipped at -O%d ---\n", pass, o->opt_level);
}

/* One pass of the table on whichever IR it takes; lowering replaces *g by *p. */
static void run_pass(const Pass *ps, Graph *g, Program **p, const Options *o) {
    double t0 = now_ms();
    switch (ps->ir) {
    case PASS_GRAPH: ps->fn.graph(g); break;
    case PASS_GRAPH_OPTS: ps->fn.graph_opts(g, o); break;
    case PASS_LOWER: *p = ps->fn.lower(g, o); break;
    case PASS_KERNEL: ps->fn.kernel(*p); break;
    }
    after(o, ps->name, t0, *p ? NULL : g, *p);
}

void run_graph_pass(const Pass *ps, Graph *g, const Options *o) {
    Program *p = NULL;
    if (ps->ir != PASS_GRAPH && ps->ir != PASS_GRAPH_OPTS) die("run_graph_pass: %s is not a graph pass", ps->name);
    run_pass(ps, g, &p, o);
}

void run_pipeline_levels(Graph *g, const Options *os, int n, Program **ps) {
    Options dflt = {.opt_level = 2, .verify = true};
    if (!os) os = &dflt, n = 1;
    /* the graph passes once: they do not depend on the target */
    int i = 0;
    ps[0] = NULL;
    for (; i < npasses && passes[i].ir != PASS_LOWER; i++) {
        if (os[0].opt_level >= passes[i].min_opt) run_pass(&passes[i], g, &ps[0], &os[0]);
        else skipped(&os[0], passes[i].name);
    }
    run_lowering_levels(g, os, n, ps);
}

/* Lowering and the kernel passes once per level: vector widths differ (lower reads none of the
 * graph's state that it changes, so each level lowers the same graph, and a second call with
 * other options, --max-arena's ram_first, lowers it again). */
void run_lowering_levels(Graph *g, const Options *os, int n, Program **ps) {
    int i = 0;
    while (i < npasses && passes[i].ir != PASS_LOWER) i++;
    for (int l = 0; l < n; l++) {
        ps[l] = NULL;
        for (int j = i; j < npasses; j++) {
            if (os[l].opt_level >= passes[j].min_opt) run_pass(&passes[j], g, &ps[l], &os[l]);
            else skipped(&os[l], passes[j].name);
        }
    }
    if (os[0].roundtrip_kir) fprintf(stderr, "onnxcc: kernel IR text read back identically after every kernel pass\n");
}

Program *run_pipeline(Graph *g, const Options *o) {
    Program *p = NULL;
    run_pipeline_levels(g, o, 1, &p);
    return p;
}

void run_kernel_passes(Program *p, const Pass *const *ps, int n, const Options *o) {
    for (int i = 0; i < n; i++) {
        if (ps[i]->ir != PASS_KERNEL) die("run_kernel_passes: %s is not a kernel pass", ps[i]->name);
        run_pass(ps[i], NULL, &p, o);
    }
}
