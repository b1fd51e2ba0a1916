/* main.c - the command line: parse the options, then load -> run_pipeline -> emit.
 *
 *   onnxcc [options] MODEL.onnx[.gz] -o OUT.o       writes OUT.o and OUT.h
 *   onnxcc check [options] MODEL [DATA_SET_DIR...]  compiles for the host and compares
 *   onnxcc --run-pass=PASS[,PASS...] PROG.kir       runs kernel passes on a kernel-IR text
 *   onnxcc bench [options] MODEL [DATA_SET_DIR]     compiles for the host and times (bench.c)
 *
 * Exit status: 0 success, 1 a user error in the model or the files (error()/fatal()), 2 a bad
 * command line (usage(), with a hint to --help). Output files are registered with
 * out_register() so that a failure never leaves a half-written one behind. */
#include <ctype.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../passes/tune.h"

#define ONNXCC_VERSION "0.1"

/* Three strings: C11 compilers need only take 4095 characters in one. */
static const char usage_text[] =
    "usage: onnxcc [options] MODEL.onnx[.gz] -o OUT.o      compile; writes OUT.o and OUT.h\n"
    "       onnxcc check [options] MODEL.onnx|MODEL.tar.gz [DATA_SET_DIR...]\n"
    "                                                     compile for the host, run on ONNX\n"
    "                                                     test data (default: the\n"
    "                                                     test_data_set_* next to the model)\n"
    "       onnxcc --run-pass=PASS[,PASS...] PROG.kir      read kernel IR text (as --print-after\n"
    "                                                     prints it), run the kernel passes\n"
    "                                                     in order, print the result\n"
    "       onnxcc bench [options] MODEL.onnx [DATA_SET_DIR]\n"
    "                                                     compile for the host, time it on random\n"
    "                                                     inputs (or the set's input_N.pb): median\n"
    "                                                     and min latency, then per kernel (from an\n"
    "                                                     instrumented build) time, share, GFLOP/s\n"
    "                                                     or GB/s and % of the measured FMA peak\n"
    "options:\n";
static const char options_text[] =
    "  -o PATH               output file; the C header is PATH with its extension made .h\n"
    "                        (none when PATH is not a regular file, such as /dev/null)\n"
    "  --header PATH         write the C header to PATH\n"
    "  --max-model-size N    read model files of up to N bytes (suffix k, M or G), gzip\n"
    "                        data expanding to up to N bytes (default: 2G for a plain\n"
    "                        file, 100 times the file's size for gzip, at most 2G)\n"
    "  --max-arena N         the arena's budget in bytes (suffix k, M, G): over it, run a\n"
    "                        CNN's first stages in row bands (band_rows), lower again, and\n"
    "                        then with int8 convs reading their input in place of im2col buffers,\n"
    "                        the largest first, until it fits; then fail if still over; the\n"
    "                        error gives the least arena the program can have and what is\n"
    "                        live there\n"
    "  --name NAME           symbol prefix (NAME_run, ...); default: output base name\n"
    "  --emit=obj|asm|llvm   object file (default), assembly or LLVM IR text\n"
    "  -O0 -O1 -O2 -O3       optimisation level (default -O2; -O0: no fusion or tiling)\n"
    "  --weights-section NAME  put the constant tensors (the weights) in section NAME, for\n"
    "                        a linker script to place (external flash, QSPI); the header's\n"
    "                        NAME_WEIGHTS_SIZE gives its bytes, NAME_FLASH_SIZE leaves them out\n"
    "  --emit-weights FILE   write the weights to FILE, a blob of the layout the header\n"
    "                        documents, instead of the object; it has NAME_run_w(inputs,\n"
    "                        outputs, arena, weights) in place of NAME_run\n"
    "  --fp-strict           no FMA contraction at -O2/-O3 (results as the interpreter's)\n"
    "  --profile             an instrumented object: NAME_run adds the clock ticks of each\n"
    "                        kernel to NAME_profile[] (the header says how; not for release)\n"
    "  --target TRIPLE       e.g. thumbv7em-none-eabihf (default: the host)\n"
    "  --cpu CPU  --features FEATS  --abi ABI\n"
    "                        target details passed to LLVM. x86-64 host default: every\n"
    "                        kernel for x86-64-v3 (AVX2) and for x86-64-v4 with VNNI\n"
    "                        (AVX-512), run() picking the best this CPU has (NAME_isa);\n"
    "                        --cpu or --features: that one level (--cpu native: this\n"
    "                        machine, bench's default). AArch64 default: generic. x86 run()\n"
    "                        returns NAME_ERR_CPU on a CPU without the lowest level's features\n"
    "  --shape NAME=D0xD1x.. fix the shape of input NAME (repeatable)\n"
    "  --bind NAME=FILE.pb   make input NAME a compile-time constant holding that\n"
    "                        TensorProto (repeatable); it is no longer an input of the\n"
    "                        compiled model. check binds integer inputs that fix shapes\n"
    "                        (Reshape's shape, Slice's starts, ...) from each data set\n"
    "  --seq NAME=N|none     the length of sequence input NAME (its elements are the\n"
    "                        inputs NAME.0 .. NAME.N-1), or whether optional input NAME\n"
    "                        holds a value (1, or N for an optional sequence) or none\n"
    "  --max-trip NODE=N     at most N iterations of Loop NODE, whose trip count is known\n"
    "                        only at run time: sizes its scan outputs (repeatable)\n"
    "  --max-strlen N        bytes per string element (char[N], NUL-padded; default 32):\n"
    "                        longer string constants or test values are an error\n"
    ;
static const char options_text2[] =
    "  --print-after=PASS    print the IR after PASS to stdout\n"
    "  --print-after-all     print the IR after every pass\n"
    "  --verify, --no-verify run the IR verifiers between passes (default: on)\n"
    "  --run-pass=P1,P2..    see above: kernel passes (fuse, schedule, bufferize) on a .kir\n"
    "                        file; an empty list only reads, verifies and prints it\n"
    "  --roundtrip-kir       (tests) after each kernel pass, print the kernel IR, read it\n"
    "                        back and abort if printing that gives another text\n"
    "  --sanitize-thread     (tests) ThreadSanitizer's checks in the generated code; link\n"
    "                        the object with cc -fsanitize=thread\n"
    "  --split-all           (tests) split every kernel parallelize can into tasks, small\n"
    "                        ones and small programs too\n"
    "  --winograd-bands      (tests) run every conv the winograd pass takes in three row\n"
    "                        bands, whatever its size\n"
    "  --report FILE.html    also write a self-contained HTML page about the compilation\n"
    "                        (compile, check and bench): sizes, pass times, kernels and\n"
    "                        the ONNX nodes each computes, the arena plan as a picture,\n"
    "                        flash by weight and kernel; bench adds the time per kernel\n"
    "  --report-counts FILE  add a firmware run's instructions per kernel to the report: the\n"
    "                        lines 'kernel NAME: N instructions, M MACs' of tests/firmware\n"
    "  -v                    progress and pass timings on stderr (LLVM's too), and the\n"
    "                        memory report: flash, arena, stack, multiply-accumulates\n"
    "  --rtol X  --atol X    check: tolerances, |got - want| <= atol + rtol*|want|\n"
    "                        (default 1e-3 and 1e-7)\n"
    "  --seconds S           bench: time runs for S seconds (default 1); --autotune: time\n"
    "                        each candidate for S seconds a round (default 0.2)\n"
    "  --isa N               check, bench: run ISA level N of a dispatching object (0: the\n"
    "                        x86-64-v3 baseline) instead of the best this CPU has\n"
    "  --threads N           bench: run NAME_run_par on a pool of N threads (runtime/onnxcc_pool.c)\n"
    "  --autotune            with --tune-file FILE: time the best candidate schedules of each\n"
    "                        kernel (the cost model's first) on this machine, in rounds of\n"
    "                        --seconds each, for --cpu's target or each ISA\n"
    "                        level of a default object this CPU runs; write the fastest to FILE;\n"
    "                        with -o, then compile with it. Progress on stderr\n"
    "  --tune-file FILE      take each kernel's schedule from FILE (written by --autotune;\n"
    "                        keyed by target and kernel signature) where it has one: builds\n"
    "                        are deterministic and quick; bench marks those kernels with *\n"
    "  --top N               bench: list the N slowest kernels one per row, the rest as one\n"
    "                        line (default 20; 0: all of them)\n"
    "  -h, --help            this text\n"
    "  --version             print the version\n";

/* From the pass table (passes/pipeline.c): the names in order on one line, then one line
 * per pass with the lowest -O level that runs it and the IR it works on. */
static void print_passes(FILE *f) {
    static const char *const ir[] = {[PASS_GRAPH] = "graph", [PASS_GRAPH_OPTS] = "graph",
                                     [PASS_LOWER] = "graph->kernel", [PASS_KERNEL] = "kernel"};
    fputs("passes:", f);
    for (int i = 0; i < npasses; i++) fprintf(f, " %s", passes[i].name);
    fputs("\n  (in this order; from -O, on IR: what it does)\n", f);
    for (int i = 0; i < npasses; i++)
        fprintf(f, "  %-15s -O%d  %-13s  %s\n", passes[i].name, passes[i].min_opt, ir[passes[i].ir],
                passes[i].doc);
}

/* The names of the passes on `ir` (any IR if ir < 0), comma-separated. */
static const char *pass_list(Arena *a, int ir) {
    const char *s = "";
    for (int i = 0; i < npasses; i++)
        if (ir < 0 || (int)passes[i].ir == ir) s = arena_printf(a, "%s%s%s", s, *s ? ", " : "", passes[i].name);
    return s;
}

static _Noreturn void usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("onnxcc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nsee onnxcc --help\n", stderr);
    exit(2);
}

const char *cli_identifier(Arena *a, const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char *s = arena_strdup(a, base);
    char *dot = strchr(s, '.');     /* "net.onnx.gz" -> "net" */
    if (dot && dot != s) *dot = 0;
    for (char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c)) *c = '_';
    if (!*s) return "model";
    return isdigit((unsigned char)s[0]) ? arena_printf(a, "_%s", s) : s;
}

/* OUT with the extension of its base name replaced by .h ("model" -> "model.h"). */
static const char *header_path(Arena *a, const char *out) {
    char *s = arena_strdup(a, out);
    char *base = strrchr(s, '/') ? strrchr(s, '/') + 1 : s;
    char *dot = strrchr(base, '.');
    if (dot && dot != base) *dot = 0;
    return arena_printf(a, "%s.h", s);
}

/* "1x3x224x224" (empty: a scalar). Returns the rank or -1 on bad syntax. */
static int parse_dims(const char *s, int64_t *dims) {
    int rank = 0;
    while (*s) {
        if (rank == MAX_RANK || !isdigit((unsigned char)*s)) return -1;
        char *end;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (errno || d < 0) return -1;
        dims[rank++] = d;
        s = end;
        if (*s == 'x' && s[1]) s++;
        else if (*s) return -1;
    }
    return rank;
}

static void add_shape(Arena *a, Cli *c, const char *arg) {
    const char *eq = strrchr(arg, '=');
    Options *o = &c->o;
    if (!eq || eq == arg) usage("bad --shape '%s': expected NAME=D0xD1x...", arg);
    int k = o->nshapes++;
    o->shape_names[k] = arena_printf(a, "%.*s", (int)(eq - arg), arg);
    o->shape_ranks[k] = parse_dims(eq + 1, o->shape_dims[k]);
    if (o->shape_ranks[k] < 0) usage("bad --shape '%s': expected NAME=D0xD1x... (e.g. x=1x3x224x224)", arg);
}

/* NODE=N: the last '=' ends the node name. */
static void add_max_trip(Arena *a, Cli *c, const char *arg) {
    const char *eq = strrchr(arg, '=');
    Options *o = &c->o;
    char *end;
    long long n = eq && eq != arg && eq[1] ? strtoll(eq + 1, &end, 10) : -1;
    if (n < 0 || *end) usage("bad --max-trip '%s': expected NODE=N (a Loop node's name, N >= 0)", arg);
    o->trip_nodes[o->ntrips] = arena_printf(a, "%.*s", (int)(eq - arg), arg);
    o->trip_max[o->ntrips++] = n;
}

/* NAME=N or NAME=none: the last '=' ends the input name. */
static void add_seq(Arena *a, Cli *c, const char *arg) {
    const char *eq = strrchr(arg, '=');
    Options *o = &c->o;
    char *end = "";
    long long n = !eq || eq == arg || !eq[1] ? -2 : strcmp(eq + 1, "none") == 0 ? -1 : strtoll(eq + 1, &end, 10);
    if (n < -1 || *end) usage("bad --seq '%s': expected NAME=N (N >= 0) or NAME=none", arg);
    o->seq_names[o->nseqs] = arena_printf(a, "%.*s", (int)(eq - arg), arg);
    o->seq_lens[o->nseqs++] = n;
}

/* NAME=FILE.pb: the first '=' ends the name (a path is likelier to hold one than an input
 * name). The file is read at once, so a bad one is reported before anything is compiled. */
static void add_binding(Arena *a, Cli *c, const char *arg) {
    const char *eq = strchr(arg, '=');
    Options *o = &c->o;
    if (!eq || eq == arg || !eq[1]) usage("bad --bind '%s': expected NAME=FILE.pb", arg);
    const char *name = arena_printf(a, "%.*s", (int)(eq - arg), arg);
    for (int k = 0; k < o->nbinds; k++)
        if (strcmp(o->binds[k].name, name) == 0) usage("--bind: input '%s' bound twice", name);
    Tensor t;
    if (!fe_load_tensor(a, eq + 1, &t)) exit_if_errors();
    Binding *b = &o->binds[o->nbinds++];
    *b = (Binding){.name = name, .from = eq + 1, .dtype = t.dtype, .rank = t.rank, .data = t.data};
    memcpy(b->dims, t.dims, sizeof b->dims);
}

/* --max-model-size, --max-arena: bytes, with an optional k, M or G suffix (powers of 1024). */
static uint64_t parse_size(const char *flag, const char *s) {
    char *end;
    errno = 0;
    unsigned long long n = isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
    int shift = 0;
    if (n && !errno) {
        if (*end == 'k' || *end == 'K') shift = 10, end++;
        else if (*end == 'm' || *end == 'M') shift = 20, end++;
        else if (*end == 'g' || *end == 'G') shift = 30, end++;
    }
    if (!n || errno || *end || n > ((uint64_t)INT64_MAX >> shift))
        usage("bad %s '%s': expected a positive number of bytes (e.g. 4G)", flag, s);
    return (uint64_t)n << shift;
}

static size_t parse_strlen(const char *s) {
    char *end;
    errno = 0;
    long long n = isdigit((unsigned char)*s) ? strtoll(s, &end, 10) : 0;
    if (n < 1 || n > 65536 || errno || *end) usage("bad --max-strlen '%s': expected 1 to 65536 bytes", s);
    return (size_t)n;
}

static int parse_top(const char *s) {
    char *end;
    errno = 0;
    long n = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : -1;
    if (n < 0 || n > 1000000 || errno || *end) usage("bad --top '%s': expected a number of kernels (0: all)", s);
    return (int)n;
}

/* A whole number from lo to hi for option `flag`. */
static int parse_count(const char *flag, const char *s, int lo, int hi) {
    char *end;
    errno = 0;
    long n = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : -1;
    if (n < lo || n > hi || errno || *end) usage("bad %s '%s': expected a number from %d to %d", flag, s, lo, hi);
    return (int)n;
}

static double parse_tol(const char *flag, const char *s) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || x < 0) usage("bad %s '%s'", flag, s);
    return x;
}

/* The value of an option written "--opt=V" or "--opt V"; NULL if `arg` is another option. */
static const char *opt_value(const char *opt, int argc, char **argv, int *i) {
    const char *arg = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(arg, opt, n) != 0) return NULL;
    if (arg[n] == '=') return arg + n + 1;
    if (arg[n]) return NULL;
    if (*i + 1 >= argc) usage("%s needs a value", opt);
    return argv[++*i];
}

static void parse_emit(Cli *c, const char *v) {
    if (strcmp(v, "obj") == 0) c->emit = EMIT_OBJ;
    else if (strcmp(v, "asm") == 0) c->emit = EMIT_ASM;
    else if (strcmp(v, "llvm") == 0) c->emit = EMIT_LLVM;
    else usage("bad --emit '%s': expected obj, asm or llvm", v);
}

/* One option at argv[*i]; returns false if it is not an option (a positional argument). */
static bool parse_option(Arena *a, Cli *c, int argc, char **argv, int *i) {
    const char *arg = argv[*i], *v;
    if (arg[0] != '-' || !arg[1]) return false;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        fputs(usage_text, stdout);
        fputs(options_text, stdout);
        fputs(options_text2, stdout);
        print_passes(stdout);
        exit(0);                    /* the arena stays reachable: main_arena */
    }
    if (strcmp(arg, "--version") == 0) { puts("onnxcc " ONNXCC_VERSION); exit(0); }
    if (strcmp(arg, "-v") == 0) verbose_level++;
    else if (strcmp(arg, "-o") == 0) {
        if (*i + 1 >= argc) usage("-o needs a path");
        c->out = argv[++*i];
    } else if (strncmp(arg, "-o", 2) == 0 && arg[2] != '-') c->out = arg + 2;
    else if (arg[1] == 'O' && !arg[3] && arg[2] >= '0' && arg[2] <= '3') c->o.opt_level = arg[2] - '0';
    else if (arg[1] == 'O') usage("bad optimisation level '%s': expected -O0, -O1, -O2 or -O3", arg);
    else if (strcmp(arg, "--print-after-all") == 0) c->o.print_after_all = true;
    else if (strcmp(arg, "--verify") == 0) c->o.verify = true;
    else if (strcmp(arg, "--no-verify") == 0) c->o.verify = false;
    else if (strcmp(arg, "--fp-strict") == 0) c->o.fp_strict = true;
    else if (strcmp(arg, "--profile") == 0) c->o.profile = true;
    else if (strcmp(arg, "--roundtrip-kir") == 0) c->o.roundtrip_kir = true;
    else if (strcmp(arg, "--sanitize-thread") == 0) c->tsan = true;
    else if (strcmp(arg, "--split-all") == 0) c->o.split_all = true;
    else if (strcmp(arg, "--winograd-bands") == 0) c->o.winograd_bands = true;
    else if (strcmp(arg, "--autotune") == 0) c->autotune = true;
    else if ((v = opt_value("--tune-file", argc, argv, i))) c->tune_file = v;
    else if ((v = opt_value("--name", argc, argv, i))) c->name = v;
    else if ((v = opt_value("--header", argc, argv, i))) c->header = v;
    else if ((v = opt_value("--weights-section", argc, argv, i))) c->weights_section = v;
    else if ((v = opt_value("--emit-weights", argc, argv, i))) c->emit_weights = v;
    else if ((v = opt_value("--report-counts", argc, argv, i))) c->report_counts = v;
    else if ((v = opt_value("--report", argc, argv, i))) c->report_path = v;
    else if ((v = opt_value("--max-model-size", argc, argv, i))) fe_max_model_size = parse_size("--max-model-size", v);
    else if ((v = opt_value("--max-arena", argc, argv, i))) c->max_arena = c->o.max_arena = (int64_t)parse_size("--max-arena", v);
    else if ((v = opt_value("--emit", argc, argv, i))) parse_emit(c, v);
    else if ((v = opt_value("--target", argc, argv, i))) c->triple = v;
    else if ((v = opt_value("--cpu", argc, argv, i))) c->cpu = v;
    else if ((v = opt_value("--features", argc, argv, i))) c->features = v;
    else if ((v = opt_value("--abi", argc, argv, i))) c->abi = v;
    else if ((v = opt_value("--shape", argc, argv, i))) add_shape(a, c, v);
    else if ((v = opt_value("--bind", argc, argv, i))) add_binding(a, c, v);
    else if ((v = opt_value("--max-trip", argc, argv, i))) add_max_trip(a, c, v);
    else if ((v = opt_value("--seq", argc, argv, i))) add_seq(a, c, v);
    else if ((v = opt_value("--max-strlen", argc, argv, i))) ir_strlen = parse_strlen(v);
    else if ((v = opt_value("--rtol", argc, argv, i))) c->rtol = parse_tol("--rtol", v);
    else if ((v = opt_value("--atol", argc, argv, i))) c->atol = parse_tol("--atol", v);
    else if ((v = opt_value("--seconds", argc, argv, i))) c->seconds = parse_tol("--seconds", v);
    else if ((v = opt_value("--top", argc, argv, i))) c->top = parse_top(v);
    else if ((v = opt_value("--isa", argc, argv, i))) c->isa = parse_count("--isa", v, 0, MAX_ISAS - 1);
    else if ((v = opt_value("--threads", argc, argv, i))) c->threads = parse_count("--threads", v, 1, 256);
    else if ((v = opt_value("--print-after", argc, argv, i))) {
        if (!pass_find(v)) usage("unknown pass '%s' for --print-after (valid: %s)", v, pass_list(a, -1));
        c->o.print_after = v;
    } else if ((v = opt_value("--run-pass", argc, argv, i))) c->run_pass = v; else usage("unknown option '%s'", arg);
    return true;
}

static void parse_args(Arena *a, Cli *c, int argc, char **argv, bool check) {
    c->o.shape_names = ARENA_ARRAY(a, const char *, argc);
    c->o.shape_dims = arena_alloc(a, sizeof(int64_t[MAX_RANK]) * (size_t)argc);
    c->o.shape_ranks = ARENA_ARRAY(a, int, argc);
    c->o.binds = ARENA_ARRAY(a, Binding, argc);
    c->o.trip_nodes = ARENA_ARRAY(a, const char *, argc);
    c->o.trip_max = ARENA_ARRAY(a, int64_t, argc);
    c->o.seq_names = ARENA_ARRAY(a, const char *, argc);
    c->o.seq_lens = ARENA_ARRAY(a, int64_t, argc);
    c->dirs = ARENA_ARRAY(a, const char *, argc);
    bool dashdash = false;
    for (int i = check ? 2 : 1; i < argc; i++) {
        if (!dashdash && strcmp(argv[i], "--") == 0) { dashdash = true; continue; }
        if (!dashdash && parse_option(a, c, argc, argv, &i)) continue;
        if (!c->model) c->model = argv[i];
        else if (check) c->dirs[c->ndirs++] = argv[i];
        else usage("more than one model given ('%s' and '%s')", c->model, argv[i]);
    }
    if (!c->model) usage("no model given");
}

static char tmp_dir[64], tmp_obj[96];

static void remove_tmp(void) {
    if (tmp_obj[0]) unlink(tmp_obj);
    if (tmp_dir[0]) rmdir(tmp_dir);
}

RunFn cli_load(Build *b, int opt_level, bool profile) {
    if (!tmp_dir[0]) {              /* one directory for all compilations of this process */
        snprintf(tmp_dir, sizeof tmp_dir, "%s", "/tmp/onnxcc-XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            tmp_dir[0] = 0;
            fatal("/tmp", "cannot create a temporary directory");
        }
        atexit(remove_tmp);
        snprintf(tmp_obj, sizeof tmp_obj, "%s/model.o", tmp_dir);
    }
    if (profile && b->n > 1) die("a profiled build of %d ISA levels", b->n);
    b->p[0]->profile = profile;
    be_emit_levels(b->p, b->t, b->n, opt_level, EMIT_OBJ, tmp_obj);
    exit_if_errors();
    RunFn run = be_load_object(tmp_obj, b->p[0]->name);
    if (b->isa >= 0) {              /* check/bench --isa: force a level of a dispatching object */
        int (*isa)(int) = (int (*)(int))(uintptr_t)be_loaded_symbol(arena_printf(b->p[0]->arena, "%s_isa", b->p[0]->name));
        if (!isa) fatal(NULL, "--isa %d: the object holds one ISA level (%s); --isa needs the default "
                        "x86-64 CPU, which dispatches", b->isa, b->t[0].isa);
        if (b->isa >= b->n || isa(b->isa) != b->isa)
            fatal(NULL, "--isa %d: the object's levels are 0 to %d, and this CPU runs up to %d",
                  b->isa, b->n - 1, isa(-1));
    }
    return run;
}

/* --max-arena N: an arena over the budget is an error that says what the program needs: its
 * arena, the least any placement could reach, and the temporaries live where that is. */
static void check_arena(const Cli *c, const Build *b) {
    if (c->max_arena <= 0) return;
    const Program *p = b->p[0];
    for (int l = 1; l < b->n; l++)
        if (b->p[l]->arena_lower_bound > p->arena_lower_bound) p = b->p[l];
    if (b->p[0]->arena_size <= c->max_arena) return;
    char live[1024] = "";
    size_t n = 0;
    int shown = 0, more = 0;
    for (int i = 0; i < p->nbufs && p->arena_peak >= 0; i++) {
        const Buf *x = p->bufs[i];
        if (x->kind != B_TEMP || x->alias || x->first < 0 || x->first > p->arena_peak || x->last < p->arena_peak)
            continue;
        if (shown == 8 || n + 128 > sizeof live) { more++; continue; }
        n += (size_t)snprintf(live + n, sizeof live - n, "%s'%s' %zu B", shown ? ", " : "", x->name, kir_nbytes(x));
        shown++;
    }
    if (more) snprintf(live + n, sizeof live - n, " and %d more", more);
    fatal(c->model, "the arena needs %lld bytes, over --max-arena %lld: no placement of this program goes below "
          "%lld bytes, which are live at kernel '%s': %s",
          (long long)b->p[0]->arena_size, (long long)c->max_arena, (long long)p->arena_lower_bound,
          p->arena_peak >= 0 ? p->kernels[p->arena_peak]->name : "?", live);
}

void cli_build(Build *b, Graph *g, Cli *c, const Target *t) {
    b->n = be_isa_levels(t, b->t);
    b->isa = c->isa;
    /* a blob or a profile describes one program's constants and kernels: the baseline's */
    while (b->n > 1 && (c->emit_weights || c->o.profile)) be_target_free(&b->t[--b->n]);
    /* --report shows the baseline level's passes and program */
    if (c->report) report_attach(c->report, g, &c->o);
    Options os[MAX_ISAS];
    for (int l = 0; l < b->n; l++) {
        os[l] = c->o;
        if (l) os[l].on_pass = NULL;
        os[l].vector_bytes = b->t[l].vector_bytes;
        os[l].dot2 = b->t[l].pmaddwd_bytes && !b->t[l].vnni;
        os[l].ubs = b->t[l].ssse3;
        os[l].arena_align = b->t[l].arena_align;
        os[l].level = b->n > 1 ? b->t[l].isa : NULL;
        os[l].tune_target = tune_target(g->arena, b->t[l].triple, b->t[l].isa);
    }
    g->max_bytes = t->ptr_bits == 32 ? IR_MAX_BYTES_32 : IR_MAX_BYTES_64;
    for (int l = 0; l < b->n; l++) os[l].max_arena = 0;     /* band_rows: only when over (below) */
    run_pipeline_levels(g, os, b->n, b->p);
    /* --max-arena over its budget: first the row bands of band_rows, whose copies of a CNN's
     * first stages cost some recomputation, then lowered again */
    bool over0 = false;
    for (int l = 0; l < b->n; l++) over0 |= c->max_arena > 0 && b->p[l]->arena_size > c->max_arena;
    if (over0 && c->o.opt_level >= pass_find("band_rows")->min_opt) {
        int before = g->nvalues;
        for (int l = 0; l < b->n; l++) os[l].max_arena = c->max_arena;
        run_graph_pass(pass_find("band_rows"), g, &os[0]);
        if (g->nvalues != before) run_lowering_levels(g, os, b->n, b->p);
    }
    /* --max-arena over its budget: lowered again, trading time for RAM one conv at a time
     * (Program.ram_first): the conv with the largest im2col buffer over its output's size
     * reads its input in place, then the next largest, until the arena fits or no such
     * buffer is left; check_arena judges the last one */
    for (;;) {
        bool over = false;
        int64_t largest = 0;
        for (int l = 0; l < b->n; l++) {
            over |= c->max_arena > 0 && b->p[l]->arena_size > c->max_arena;
            if (b->p[l]->x4_largest > largest) largest = b->p[l]->x4_largest;
        }
        if (!over || !largest) break;
        if (verbose_level)
            fprintf(stderr, "onnxcc: --max-arena %lld: the arena is %lld B; lowering again with no im2col buffer "
                    "of %lld B or more\n", (long long)c->max_arena, (long long)b->p[0]->arena_size, (long long)largest);
        for (int l = 0; l < b->n; l++) os[l].ram_first = true, os[l].x4_max = largest - 1;
        run_lowering_levels(g, os, b->n, b->p);
    }
    /* one arena serves every level */
    int64_t arena = 0, bound = 0;
    int align = 1;
    for (int l = 0; l < b->n; l++) {
        if (b->p[l]->arena_size > arena) arena = b->p[l]->arena_size;
        if (b->p[l]->arena_lower_bound > bound) bound = b->p[l]->arena_lower_bound;
        if (b->p[l]->arena_align > align) align = b->p[l]->arena_align;
    }
    for (int l = 0; l < b->n; l++) {
        b->p[l]->arena_size = arena, b->p[l]->arena_align = align, b->p[l]->arena_lower_bound = bound;
        b->p[l]->fp_strict = c->o.fp_strict;
        b->p[l]->profile = c->o.profile;
        b->p[l]->tsan = c->tsan;
    }
    check_arena(c, b);
}

void cli_build_free(Build *b) {
    for (int l = 0; l < b->n; l++) be_target_free(&b->t[l]);
    b->n = 0;
}

/* Fail before the (possibly long) compilation if the output cannot be written at all. */
static void check_writable(Arena *a, const char *out) {
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) fatal(out, "cannot write the output: %s", strerror(EISDIR));
    if (out_is_special(out)) return;
    const char *slash = strrchr(out, '/');
    const char *dir = slash ? (slash == out ? "/" : arena_printf(a, "%.*s", (int)(slash - out), out)) : ".";
    if (access(dir, W_OK) != 0)
        fatal(out, "cannot write the output: directory '%s': %s", dir, strerror(errno));
}

/* --run-pass=LIST PROG.kir: the kernel passes of LIST, in order, on a parsed program (any -O
 * level above 1 lets schedule work; the vector width is the program header's). The result goes
 * to stdout. */
static int run_pass_main(Arena *a, Cli *c) {
    if (c->out) usage("--run-pass prints the program on stdout: -o is not used");
    const Pass **ps = ARENA_ARRAY(a, const Pass *, strlen(c->run_pass) + 1);
    int n = 0;
    for (const char *s = c->run_pass; *s;) {
        size_t len = strcspn(s, ",");
        const char *name = arena_printf(a, "%.*s", (int)len, s);
        ps[n] = pass_find(name);
        if (!ps[n] || ps[n]->ir != PASS_KERNEL)
            usage("--run-pass: '%s' is not a kernel pass (kernel passes: %s)", name,
                  pass_list(a, PASS_KERNEL));
        n++;
        s += len;
        if (*s) s++;
    }
    size_t size;
    uint8_t *bytes = fe_read_file(a, c->model, &size);
    char *text = arena_alloc(a, size + 1);
    memcpy(text, bytes, size);
    if (strlen(text) != size) fatal(c->model, "not a text file (it holds a NUL byte)");
    Program *p = kir_parse(a, c->model, text);
    p->opt_level = c->o.opt_level;
    if (c->o.verify) kir_verify(p, arena_printf(a, "reading %s", c->model));
    run_kernel_passes(p, ps, n, &c->o);
    kir_print(stdout, p);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int compile_main(Arena *a, Cli *c) {
    if (!c->out) usage("no output file given (-o OUT.o)");
    /* a special output (/dev/null, to see whether a model compiles) has no header beside it */
    const char *header = c->header ? c->header : out_is_special(c->out) ? NULL : header_path(a, c->out);
    if (header && strcmp(header, c->out) == 0)
        usage("the output '%s' would be overwritten by its header", c->out);
    check_writable(a, c->out);
    if (header) check_writable(a, header);
    const char *wpath = c->emit_weights;
    if (wpath && (strcmp(wpath, c->out) == 0 || (header && strcmp(wpath, header) == 0)))
        usage("--emit-weights '%s' is also the %s", wpath, strcmp(wpath, c->out) == 0 ? "output" : "header");
    if (wpath) check_writable(a, wpath);
    const char *rpath = c->report_path;
    if (rpath && ((header && strcmp(rpath, header) == 0) || (wpath && strcmp(rpath, wpath) == 0)))
        usage("--report '%s' is also the %s", rpath, header && strcmp(rpath, header) == 0 ? "header" : "weights blob");
    Target t;
    be_target(&t, c->triple, c->cpu, c->features, c->abi);
    Graph *g = fe_load_model(a, c->model);
    g->name = (char *)(c->name ? c->name : cli_identifier(a, c->out));
    Build b;
    cli_build(&b, g, c, &t);
    Program *p = b.p[0];
    for (int l = 0; l < b.n; l++) {
        b.p[l]->weights_section = c->weights_section;
        b.p[l]->weights_external = wpath != NULL;
    }
    out_register(c->out);
    if (header) out_register(header);
    if (wpath) out_register(wpath);
    be_emit_levels(b.p, b.t, b.n, c->o.opt_level, c->emit, c->out);
    if (c->report) report_program(c->report, p, &b.t[0], c->o.opt_level);
    if (wpath) be_write_weights(p, wpath);
    if (header) be_write_header(p, b.t, b.n, header);
    if (c->report) report_write(c->report);
    cli_build_free(&b);
    be_target_free(&t);
    exit_if_errors();
    out_commit();
    progress("wrote %s%s%s%s%s", c->out, header ? " and " : "", header ? header : "",
             c->report ? " and " : "", c->report ? c->report_path : "");
    return 0;
}

/* The compilation's arena, reachable from here while the process lives: options such as --help
 * and usage() exit from deep inside, and LeakSanitizer (make SANITIZE=1) must not take the
 * arena for a leak when main's copy of the pointer happens to live in no register. Volatile,
 * or the compiler drops the store that nothing reads. */
static Arena *volatile main_arena;

int main(int argc, char **argv) {
#ifdef __GLIBC__
    /* A compilation allocates and frees weight-sized blocks (packed panels, LLVM's constants):
     * from the heap, kept there when freed (not mmap'd and unmapped each time), they are
     * reused without faulting their pages in again. ResNet-18's compile spent a fifth of its
     * time in page faults. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
    Arena *a = arena_new();
    main_arena = a;
    Cli c = {.o = {.opt_level = 2, .verify = true}, .emit = EMIT_OBJ, .rtol = 1e-3, .atol = 1e-7, .top = -1, .isa = -1};
    bool check = argc > 1 && strcmp(argv[1], "check") == 0;
    bool bench = argc > 1 && strcmp(argv[1], "bench") == 0;
    parse_args(a, &c, argc, argv, check || bench);
    if (c.name && !*c.name) usage("--name needs a non-empty name");
    for (const char *s = c.name; s && *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_') || isdigit((unsigned char)c.name[0]))
            usage("--name '%s' is not a C identifier", c.name);
    if ((check || bench) && c.triple)
        usage("%s runs the model on this machine: --target is not allowed", argv[1]);
    if ((check || bench) && c.run_pass) usage("--run-pass is not an option of %s", argv[1]);
    if (!check && !bench && c.isa >= 0) usage("--isa is an option of check and bench");
    if (c.isa >= 0 && (c.cpu || c.features)) usage("--isa chooses a level of the default CPU: not with --cpu or --features");
    if (!bench && c.threads) usage("--threads is an option of bench");
    if ((check || bench || c.run_pass) && (c.weights_section || c.emit_weights))
        usage("--%s is not an option of %s", c.emit_weights ? "emit-weights" : "weights-section",
              check || bench ? argv[1] : "--run-pass");
    if (c.weights_section && c.emit_weights)
        usage("--weights-section and --emit-weights: the weights go to a section or to a blob, not both");
    if (c.weights_section) {
        /* an ELF section name that a linker script can match and a C string can hold */
        const char *s = c.weights_section;
        bool bad = !*s;
        for (; *s; s++) bad |= !(isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '$');
        if (bad) usage("bad --weights-section '%s': expected a section name of letters, digits, '_', '.', '$'",
                       c.weights_section);
    }
    if (c.report_path) {
        if (c.run_pass) usage("--report is not an option of --run-pass");
        if (c.out && strcmp(c.report_path, c.out) == 0) usage("--report '%s' is also the output", c.report_path);
        check_writable(a, c.report_path);
        c.report = report_new(a, c.report_path, check ? "check" : bench ? "bench" : "compile", c.model);
        if (c.report_counts) report_counts(c.report, c.report_counts);
    } else if (c.report_counts) usage("--report-counts needs --report");
    if (c.autotune && (check || bench || c.run_pass))
        usage("--autotune is an option of the compiling command, not of %s", check || bench ? argv[1] : "--run-pass");
    if (c.autotune && !c.tune_file) usage("--autotune needs --tune-file FILE, where it writes what it measured");
    if (c.autotune && c.triple) usage("--autotune measures on this machine: --target is not allowed");
    if (c.tune_file && c.run_pass) usage("--tune-file is not an option of --run-pass");
    if (c.autotune) {
        /* measure and write the file, then (with -o) compile with it as --tune-file does;
         * an output that cannot be written fails before the long measuring */
        check_writable(a, c.tune_file);
        if (c.out) check_writable(a, c.out);
        int rc = autotune_main(a, &c);
        if (rc || !c.out) {
            out_commit();
            arena_free(a);
            return rc;
        }
    }
    if (c.tune_file) c.o.tuning = tune_load(a, c.tune_file);
    int rc = check ? check_main(a, &c) : bench ? bench_main(a, &c) : c.run_pass ? run_pass_main(a, &c) : compile_main(a, &c);
    arena_free(a);
    return rc;
}
