/* cli.h - what the commands of the driver share: `onnxcc` (cli/main.c) compiles a model,
 * `onnxcc check` (cli/check.c) compiles it for the host and runs it on ONNX test data,
 * `onnxcc bench` (cli/bench.c) times it on the host, per kernel too. */
#ifndef ONNXCC_CLI_H
#define ONNXCC_CLI_H
#include "../backend/backend.h"
#include "../frontend/frontend.h"
#include "../passes/pipeline.h"

typedef struct Report Report;       /* --report (report.c) */

typedef struct Cli {
    Options o;
    const char *model, *out, *name;
    const char *header;             /* --header PATH (default: beside a regular -o) */
    const char *run_pass;           /* --run-pass=PASS,...: the model is a .kir text */
    const char *weights_section;    /* --weights-section NAME: where the constants go */
    const char *emit_weights;       /* --emit-weights FILE: the constants go to this blob */
    const char *triple, *cpu, *features, *abi;
    EmitKind emit;
    double rtol, atol;
    double seconds;                 /* bench: how long to time (0: the default) */
    int top;                        /* bench: kernels listed one per row (-1: the default) */
    int isa;                        /* check, bench: --isa N, the ISA level to run (-1: the CPU's best) */
    int threads;                    /* bench: --threads N (0: one, through NAME_run) */
    bool tsan;                      /* --sanitize-thread: Program.tsan */
    int64_t max_arena;              /* --max-arena N: the arena's budget in bytes (0: none) */
    const char **dirs;              /* check, bench: data set directories given on the command line */
    int ndirs;
    const char *report_path;        /* --report FILE.html */
    const char *report_counts;      /* --report-counts FILE: a firmware run's counts */
    Report *report;                 /* made from it by main() */
    bool autotune;                  /* --autotune: measure candidates, write --tune-file */
    const char *tune_file;          /* --tune-file FILE */
} Cli;

/* A C identifier from a path's base name without extension: "models/my-net.onnx" -> "my_net". */
const char *cli_identifier(Arena *a, const char *path);
/* What one object is made of: a program per ISA level (be_isa_levels), each lowered and
 * scheduled for its target; p[0] is the baseline's, whose facts the header states. */
typedef struct Build {
    int n;
    Target t[MAX_ISAS];
    Program *p[MAX_ISAS];
    int isa;                        /* check/bench --isa: the level to run, -1: the CPU's best */
} Build;
/* Fill the options that come from each level's target, then run the pipeline on g (the graph
 * passes once, the rest per level). One arena size serves all levels. */
void cli_build(Build *b, Graph *g, Cli *c, const Target *t);
void cli_build_free(Build *b);
/* Writes b's host object (instrumented with `profile`: Program.profile) into this process's
 * temporary directory (made on first use, removed at exit) and loads it in-process; user errors
 * end the run. `check` and `bench` run their models so. */
RunFn cli_load(Build *b, int opt_level, bool profile);
/* `onnxcc check`: returns the exit status. */
int check_main(Arena *a, Cli *c);
/* `onnxcc bench`: returns the exit status. */
int bench_main(Arena *a, Cli *c);
/* What bench runs, which --autotune (cli/tune.c) runs too. */
typedef struct onnxcc_pool onnxcc_pool;
/* runtime/model.h.in's */
typedef void onnxcc_parallel_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg);
typedef int (*RunParFn)(const void *const *, void *const *, void *, onnxcc_parallel_for *, void *);
typedef struct Bench {
    Program *p;
    RunFn run;
    RunParFn run_par;               /* NAME_run_par with --threads N > 1, else NULL */
    onnxcc_pool *pool;
    const void **in;
    void **out;
    void *arena;
} Bench;
typedef struct Timing { double median, min, mean; int n; } Timing;
/* Compile c's model for t (profiled or not) and load it. */
Bench bench_build(Arena *a, Cli *c, const Target *t, bool profile);
/* Inputs from DATA_SET_DIR/input_K.pb, or random (a fixed seed); outputs and arena zeroed. */
void bench_prepare(Arena *a, Bench *b, const char *dir);
void bench_release(Bench *b);
/* Runs an instrumented build for `seconds`: us[k] the median time of kernel k per run
 * (us[nkernels] the total); false if there is no cycle counter. */
bool bench_profile_runs(const Bench *b, uint64_t *counters, double seconds, double *us, Timing *tm);
/* `onnxcc --autotune` (cli/tune.c): returns the exit status. */
int autotune_main(Arena *a, Cli *c);
/* --tune-file FILE (cli/tune.c): read and parse (passes/tune.c); user errors end the run. */
struct Tuning *tune_load(Arena *a, const char *path);

/* --report FILE.html (report.c): made by main(); cli_compile attaches it to the first
 * compilation (its ONNX nodes and the pipeline's pass hook); report_program keeps the program
 * and target once the backend has measured it (after be_emit); bench adds each kernel's time
 * per run; report_write writes the page (out_write: whole or not at all). */
Report *report_new(Arena *a, const char *path, const char *command, const char *model);
void report_attach(Report *r, Graph *g, Options *o);
void report_program(Report *r, const Program *p, const Target *t, int opt_level);
void report_bench(Report *r, const double *us, double peak_gflops, double median_us);
/* --report-counts FILE: instructions and MACs per kernel as the firmware tests print them
 * ("kernel NAME: N instructions, M MACs"); read at once, a file without any is an error. */
void report_counts(Report *r, const char *path);
void report_write(Report *r);

#endif
