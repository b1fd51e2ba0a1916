/* pipeline.h - every pass of onnxcc and the pipeline that runs them in order (pipeline.c). */
#ifndef ONNXCC_PIPELINE_H
#define ONNXCC_PIPELINE_H
#include "../ir/kir.h"

/* --bind NAME=FILE.pb: graph input NAME becomes a compile-time constant (fix_shapes). */
typedef struct Binding {
    const char *name;               /* the graph input */
    const char *from;               /* where the contents come from, for messages */
    DType dtype;
    int rank;
    int64_t dims[MAX_RANK];
    const void *data;               /* packed, native byte order */
} Binding;

/* Options the driver hands to the pipeline. */
typedef struct Options {
    int opt_level;                  /* 0..3 */
    const char *print_after;        /* pass name, or NULL */
    bool print_after_all;
    bool verify;                    /* run the verifiers between passes */
    bool fp_strict;                 /* --fp-strict: no FMA contraction (Program.fp_strict) */
    bool profile;                   /* --profile: an instrumented run() (Program.profile) */
    bool roundtrip_kir;             /* print, parse and print the kernel IR after each pass */
    const char **shape_names;       /* --shape NAME=1x3x224x224 */
    int64_t (*shape_dims)[MAX_RANK];
    int *shape_ranks;
    int nshapes;
    Binding *binds;                 /* --bind NAME=FILE.pb */
    int nbinds;
    const char **seq_names;         /* --seq NAME=N|none: a sequence or optional input's length */
    int64_t *seq_lens;              /* -1: none (an absent optional) */
    int nseqs;
    const char **trip_nodes;        /* --max-trip NODE=N: a bound on a Loop's trip count */
    int64_t *trip_max;
    int ntrips;
    int vector_bytes;               /* from the target */
    bool dot2, ubs;                 /* from the target: Program.dot2, Program.ubs */
    int arena_align;                /* from the target */
    const char *level;              /* the ISA level of this lowering, in dumps (NULL: the only one) */
    bool split_all;                 /* --split-all (tests): parallelize splits every kernel it can */
    bool winograd_bands;            /* --winograd-bands (tests): winograd runs every conv it takes in row bands */
    int64_t max_arena;              /* --max-arena: band_rows runs a prefix in row bands to fit it (0: none) */
    bool ram_first;                 /* the smaller arena where a pass can choose (Program.ram_first) */
    int64_t x4_max;                 /* with it: Program.x4_max */
    const struct Tuning *tuning;    /* --tune-file, --autotune: Program.tuning (passes/tune.h) */
    const char *tune_target;        /* this level's key in it: Program.tune_target */
    /* called after each pass that ran, with its time and the IR it left (g before lowering,
     * p from it on): --report (cli/report.c) keeps what it shows; NULL: none */
    void (*on_pass)(void *ctx, const char *pass, double ms, const Graph *g, const Program *p);
    void *on_pass_ctx;
} Options;

/* Graph passes (passes/<name>.c). */
void fix_shapes(Graph *g, const Options *o);   /* apply --shape and --bind, report unresolved symbols */
/* Sequence and optional inputs into their tensors, by --seq (fix_shapes, and check before
 * it binds inputs from the data) */
void fix_containers(Graph *g, const Options *o);
void canonicalize(Graph *g);        /* one form per op: old opsets upgraded, attrs -> inputs */
void infer_shapes(Graph *g);        /* dtype and static shape of every value (passes/ops/) */
/* The same over one graph or subgraph without stopping at errors (control-flow rules). */
void infer_graph(Graph *g);
/* One node (its rule, checks, folding); for rules that insert nodes before their own. */
void infer_node(Graph *g, Node *n);
/* Root outputs that are sequences or optionals become one tensor output per element
 * (passes/ops/sequence.c). */
void expand_containers(Graph *g);
bool rule_takes_containers(Op op);  /* may op read a sequence or optional (sequence.c) */
/* Data-dependent values as operands (passes/ops/dynamic.c): whether n has a dyn input, whether
 * n may take v (a user error naming the op if not), and, after n's shape rule, which of its
 * output dims follow run-time dims (Value.dyn, Value.dynmask). */
bool dyn_any_input(const Node *n);
bool dyn_topk_k(const Node *n);
bool dyn_runtime_dims(const Node *n);
Value *dyn_shape_source(const Node *n);
bool dyn_operand_ok(Graph *g, Node *n, const Value *v);
void dyn_infer(Graph *g, Node *n);
/* --max-arena over the estimated layer-by-layer peak: a prefix of convs and elementwise ops
 * copied once per band of output rows, joined by a Concat (passes/band_rows.c) */
void band_rows(Graph *g, const Options *o);
void fold_constants(Graph *g);      /* evaluate nodes whose inputs are all constant */
/* Evaluate one node whose inputs are all constant (kernel IR interpreter); on success its
 * outputs get data, lose their producer and the node dies. Returns whether it folded. */
bool fold_node(Graph *g, Node *n);
void simplify(Graph *g);            /* drop Identity/Dropout, no-op Reshape, dead nodes */
void fuse_qdq(Graph *g);           /* DQ -> op -> Q groups as integer ops (QLinearConv, ...) */
void dead_taps(Graph *g, const Options *o);          /* Conv taps that only read padding cut off */
void winograd(Graph *g, const Options *o);        /* 3x3 stride-1 Convs as F(4x4,3x3), F(2x2,3x3): transforms + 1x1 Convs */
void split_channels(Graph *g, const Options *o);  /* big-weight Convs, MatMuls, Gemms as chunk sums */
void fuse_batchnorm(Graph *g);      /* Conv/Gemm followed by BatchNormalization: fold constants */
/* Lowering: graph IR -> kernel IR. */
Program *lower(Graph *g, const Options *o);
/* Kernel passes. */
void fuse(Program *p);              /* elementwise consumers into their producer's loop nest */
void schedule(Program *p);          /* loop primitives for the target: vectors, register blocks */
void pad_in_place(Program *p);      /* a padded copy's or a Concat's inputs written into place */
void parallelize(Program *p);        /* outer loops of large kernels into tasks (threads) */
void bufferize(Program *p);         /* liveness-based arena offsets, in-place reuse */

/* The pass table (pipeline.c): every pass, in the order run_pipeline runs them. */
typedef enum PassIR {
    PASS_GRAPH,                     /* void f(Graph *) */
    PASS_GRAPH_OPTS,                /* void f(Graph *, const Options *) */
    PASS_LOWER,                     /* Program *f(Graph *, const Options *): graph -> kernel IR */
    PASS_KERNEL,                    /* void f(Program *) */
} PassIR;
typedef struct Pass {
    const char *name;
    int min_opt;                    /* the lowest -O level that runs it */
    PassIR ir;
    union {
        void (*graph)(Graph *);
        void (*graph_opts)(Graph *, const Options *);
        Program *(*lower)(Graph *, const Options *);
        void (*kernel)(Program *);
    } fn;
    const char *doc;                /* one line, for --help */
} Pass;
extern const Pass passes[];
extern const int npasses;
const Pass *pass_find(const char *name);        /* NULL if there is no such pass */

/* Runs the whole pipeline up to and including bufferization; prints/verifies as asked. */
Program *run_pipeline(Graph *g, const Options *o);
/* The same for n ISA levels of one object (run-time dispatch): the graph passes once with
 * os[0], then lowering and the kernel passes once per level with os[l], into ps[l]. */
void run_pipeline_levels(Graph *g, const Options *os, int n, Program **ps);
/* Its second half alone, on a graph the first half has run on: lowering and kernel passes. */
void run_lowering_levels(Graph *g, const Options *os, int n, Program **ps);
/* One graph pass outside the pipeline's run (cli_build's band_rows under --max-arena), with
 * the same dumps and checks as in it. */
void run_graph_pass(const Pass *ps, Graph *g, const Options *o);
/* Runs the given kernel passes on p in this order, whatever the -O level (--run-pass). */
void run_kernel_passes(Program *p, const Pass *const *ps, int n, const Options *o);

#endif
