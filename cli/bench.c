/* bench.c - `onnxcc bench`: how fast a model runs on this machine, and where its time goes.
 *
 *   onnxcc bench [options] MODEL.onnx [DATA_SET_DIR]
 *
 * The model is compiled for the host exactly as `onnxcc -o` would compile it (cli_build,
 * be_emit_levels), loaded in-process (be_load_object) and run on random inputs (a fixed seed), or on
 * DATA_SET_DIR/input_K.pb. After a warm-up, single runs are timed for --seconds (default 1) and
 * the median and min latency printed. Then the model is compiled a second time with per-kernel
 * cycle counters (Program.profile: the normal object never carries them), run for the same
 * time, and each kernel's share of the counted ticks, applied to the instrumented run's mean
 * time, gives its time per run. Its work comes from the kernel IR (kir_kernel_cost): GFLOP/s
 * (2 per multiply-add) where it multiplies-adds, else GB/s over its params' bytes; % of peak
 * relates GFLOP/s to this core's FMA peak, measured in the same command (be_fma_peak).
 * Kernels are listed by time, the first --top of them (default TOP), then the rest as one line;
 * a name too long for its column keeps its head and its tail, where generated names differ.
 * With --tune-file, a kernel whose schedule the file chose is marked '*'. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "../runtime/onnxcc_pool.h"


enum { TOP = 20, NAME_MIN = 32, NAME_MAX = 48 };


static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *zalloc(size_t n) {
    size_t sz = (n + 63) / 64 * 64;
    void *p = aligned_alloc(64, sz ? sz : 64);
    if (!p) die("out of memory");
    memset(p, 0, sz ? sz : 64);
    return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static double uniform(void) {       /* xorshift64*, in [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717u) >> 11) / 4503599627370496.0 - 1.0;
}

/* Random floats in [-1, 1); integers are 0 (they are often indices, and 0 is always one). */
static void fill_random(const Buf *b, void *dst) {
    int64_t n = kir_numel(b);
    for (int64_t i = 0; i < n; i++) {
        double x = uniform();
        switch (b->dtype) {
        case DT_FLOAT: ((float *)dst)[i] = (float)x; break;
        case DT_DOUBLE: ((double *)dst)[i] = x; break;
        case DT_BOOL: ((uint8_t *)dst)[i] = x > 0; break;
        case DT_BFLOAT16: {
            float f = (float)x;
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)dst)[i] = (uint16_t)(u >> 16);
            break;
        }
        case DT_FLOAT16: ((uint16_t *)dst)[i] = x > 0 ? 0x3800 : 0xb800; break;   /* +-0.5 */
        case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
        case DT_FLOAT4E2M1: case DT_FLOAT8E8M0:
            ((uint8_t *)dst)[i] = f8_encode(b->dtype, (float)x);
            break;
        default: break;
        }
    }
}


/* Compile for the host (profiled or not) and load. Each compilation needs a fresh graph. */
Bench bench_build(Arena *a, Cli *c, const Target *t, bool profile) {
    Graph *g = fe_load_model(a, c->model);
    g->name = (char *)(c->name ? c->name : cli_identifier(a, c->model));
    Build bl;
    cli_build(&bl, g, c, t);
    Bench b = {.p = bl.p[0]};
    b.run = cli_load(&bl, c->o.opt_level, profile);
    cli_build_free(&bl);
    if (c->threads > 1) {
        b.run_par = (RunParFn)(uintptr_t)be_loaded_symbol(arena_printf(a, "%s_run_par", b.p->name));
        if (!b.run_par) die("the host object has no %s_run_par", b.p->name);
    }
    return b;
}

/* Inputs from DATA_SET_DIR/input_K.pb, or random; outputs and arena zeroed. */
void bench_prepare(Arena *a, Bench *b, const char *dir) {
    Program *p = b->p;
    b->in = ARENA_ARRAY(a, const void *, p->ninputs + 1);
    b->out = ARENA_ARRAY(a, void *, p->noutputs + 1);
    for (int i = 0; i < p->ninputs; i++) {
        const Buf *x = p->inputs[i];
        void *d = zalloc(kir_nbytes(x));
        if (dir) {
            const char *path = arena_printf(a, "%s/input_%d.pb", dir, i);
            Tensor t;
            if (!fe_load_tensor(a, path, &t)) exit_if_errors();
            if (t.dtype != x->dtype || t.nbytes != kir_nbytes(x))
                fatal(path, "input %d ('%s'): the data is %s with %zu bytes, the model wants %s with %zu",
                      i, x->name, dtype_name(t.dtype), t.nbytes, dtype_name(x->dtype), kir_nbytes(x));
            if (x->nibbles) kir_nibbles_pack(d, t.data, t.nbytes, kir_pack_bits(x));   /* int4: two a byte */
            else memcpy(d, t.data, t.nbytes);
        } else {
            fill_random(x, d);
        }
        b->in[i] = d;
    }
    for (int i = 0; i < p->noutputs; i++) b->out[i] = zalloc(kir_nbytes(p->outputs[i]));
    b->arena = zalloc((size_t)p->arena_size);
}

/* Frees what bench_prepare allocated. */
void bench_release(Bench *b) {
    for (int i = 0; i < b->p->ninputs; i++) free((void *)b->in[i]);
    for (int i = 0; i < b->p->noutputs; i++) free(b->out[i]);
    free(b->arena);
}

static void run_once(const Bench *b) {
    int rc = b->run_par ? b->run_par(b->in, b->out, b->arena, onnxcc_pool_parallel_for, b->pool)
                        : b->run(b->in, b->out, b->arena);
    if (rc) die("the compiled model's run() returned %d", rc);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}


static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* Warm up (a tenth of the time, at least 3 runs), then time single runs for `seconds` (at
 * least 5 runs). */
static Timing time_runs(const Bench *b, double seconds) {
    double t0 = now_s();
    for (int k = 0; k < 3 || now_s() - t0 < seconds / 10; k++) run_once(b);
    int n = 0, cap = 1024;
    double *us = malloc((size_t)cap * sizeof *us), sum = 0;
    if (!us) die("out of memory");
    double end = now_s() + seconds;
    do {
        if (n == cap && !(us = realloc(us, (size_t)(cap *= 2) * sizeof *us))) die("out of memory");
        double t = now_s();
        run_once(b);
        us[n] = (now_s() - t) * 1e6;
        sum += us[n++];
    } while (n < 5 || now_s() < end);
    Timing r = {median(us, n), 0, sum / n, n};
    r.min = us[0];
    free(us);
    return r;
}

/* The instrumented build, run like time_runs; after each run the counters' increments are
 * kept, so that each kernel's time is the median of its own runs (a rare slow run, an
 * interrupt say, moves no median). Ticks become microseconds at the rate that makes the median
 * run's total ticks its median wall time. Returns false if the counters did not move (no cycle
 * counter on this host). */
bool bench_profile_runs(const Bench *b, uint64_t *counters, double seconds, double *us, Timing *tm) {
    int nk = b->p->nkernels;
    double t0 = now_s();
    for (int k = 0; k < 3 || now_s() - t0 < seconds / 10; k++) run_once(b);
    /* at most ~16 MB of samples */
    int cap = (int)(((size_t)2 << 20) / (size_t)(nk + 1)), n = 0;
    double *ticks = malloc((size_t)cap * (size_t)(nk + 1) * sizeof *ticks);
    double *wall = malloc((size_t)cap * sizeof *wall), *col = malloc((size_t)cap * sizeof *col);
    uint64_t *last = calloc((size_t)nk + 1, sizeof *last);
    if (!ticks || !wall || !col || !last) die("out of memory");
    memcpy(last, counters, (size_t)nk * sizeof *last);
    double end = now_s() + seconds, sum = 0;
    do {
        double t = now_s();
        run_once(b);
        wall[n] = (now_s() - t) * 1e6;
        sum += wall[n];
        double total = 0;
        for (int k = 0; k < nk; k++) {
            total += ticks[(size_t)n * (size_t)(nk + 1) + (size_t)k] = (double)(counters[k] - last[k]);
            last[k] = counters[k];
        }
        ticks[(size_t)n * (size_t)(nk + 1) + (size_t)nk] = total;
        n++;
    } while (n < cap && (n < 5 || now_s() < end));
    *tm = (Timing){0, 0, sum / n, n};
    for (int k = 0; k <= nk; k++) {
        for (int i = 0; i < n; i++) col[i] = ticks[(size_t)i * (size_t)(nk + 1) + (size_t)k];
        us[k] = median(col, n);
    }
    tm->median = median(wall, n);
    tm->min = wall[0];
    bool moved = us[nk] > 0;
    for (int k = 0; k < nk; k++) us[k] = moved ? us[k] * tm->median / us[nk] : 0;
    free(ticks), free(wall), free(col), free(last);
    return moved;
}

typedef struct Row {
    const Kernel *k;
    double us;
    int64_t macs, bytes;
} Row;

static int by_time(const void *x, const void *y) {
    const Row *a = x, *b = y;
    return (a->us < b->us) - (a->us > b->us);
}

/* name in at most w columns: if longer, its first third and its tail around "..". */
static const char *fit_name(Arena *a, const char *name, int w) {
    int n = (int)strlen(name);
    if (n <= w) return name;
    int head = (w - 2) / 3;
    return arena_printf(a, "%.*s..%s", head, name, name + n - (w - 2 - head));
}

static void print_row(Arena *a, int w, const char *name, const char *ops, double us, double total,
                      int64_t macs, int64_t bytes, double peak) {
    char rate[32] = "-", pct[16] = "-";
    if (us > 0 && macs > 0) {
        double gf = 2.0 * (double)macs / us / 1e3;
        snprintf(rate, sizeof rate, "%.2f GFLOP/s", gf);
        if (peak > 0) snprintf(pct, sizeof pct, "%.1f%%", 100 * gf / peak);
    } else if (us > 0 && bytes > 0) {
        snprintf(rate, sizeof rate, "%.2f GB/s", (double)bytes / us / 1e3);
    }
    printf("%-*s %-20.20s %10.2f %6.1f%% %16s %7s\n", w, fit_name(a, name, w), ops, us,
           total > 0 ? 100 * us / total : 0.0, rate, pct);
}

int bench_main(Arena *a, Cli *c) {
    double secs = c->seconds > 0 ? c->seconds : 1.0;
    const char *dir = c->ndirs ? c->dirs[0] : NULL;
    if (c->ndirs > 1) fatal(c->dirs[1], "bench takes one data set directory");
    Target t;
    if (c->isa >= 0) {
        /* one level of what a default object holds, compiled alone (a profile is of one) */
        Target base, lv[MAX_ISAS];
        be_target(&base, NULL, NULL, NULL, c->abi);
        int n = be_isa_levels(&base, lv);
        be_target_free(&base);
        if (c->isa >= n) fatal(NULL, "--isa %d: a default object for this host has %d ISA level%s", c->isa, n, n > 1 ? "s" : "");
        t = lv[c->isa];
        for (int l = 0; l < n; l++)
            if (l != c->isa) be_target_free(&lv[l]);
        c->isa = -1;
    } else {
        /* what this machine can do, not the distributable baseline objects default to */
        be_target(&t, NULL, c->cpu ? c->cpu : "native", c->features, c->abi);
    }
    onnxcc_pool *pool = NULL;
    if (c->threads > 1 && !(pool = onnxcc_pool_new(c->threads))) fatal(NULL, "--threads %d: cannot start threads", c->threads);

    Bench b = bench_build(a, c, &t, false);
    b.pool = pool;
    Program *p = b.p;
    if (c->report) report_program(c->report, p, &t, c->o.opt_level);
    bench_prepare(a, &b, dir);
    double peak = be_fma_peak(&t, secs / 10 < 0.05 ? secs / 10 : 0.05);
    Timing plain = time_runs(&b, secs);

    int64_t macs = 0, bytes = 0;
    Row *rows = ARENA_ARRAY(a, Row, p->nkernels + 1);
    Bench pb = bench_build(a, c, &t, true);
    pb.pool = pool;
    if (pb.p->nkernels != p->nkernels) die("the instrumented build has other kernels");
    pb.in = b.in, pb.out = b.out;
    pb.arena = zalloc((size_t)pb.p->arena_size);
    uint64_t *counters = be_loaded_symbol(arena_printf(a, "%s_profile", pb.p->name));
    if (!counters) die("the instrumented object has no %s_profile", pb.p->name);
    double *kus = ARENA_ARRAY(a, double, p->nkernels + 1);
    Timing prof;
    bool ticks = bench_profile_runs(&pb, counters, secs, kus, &prof);
    int nk = 0;                     /* kernels that compute (not a region's control) */
    for (int i = 0; i < pb.p->nkernels; i++) {
        Row *r = &rows[i];
        r->k = pb.p->kernels[i];
        nk += !r->k->dead && !r->k->ctl;
        kir_kernel_work(pb.p, i, &r->macs, &r->bytes);
        r->us = kus[i];
        macs = sat_add(macs, r->macs);
        bytes = sat_add(bytes, r->bytes);
    }

    if (c->report) {
        report_bench(c->report, kus, ticks ? peak : 0, plain.median);
        report_write(c->report);
    }
    printf("model: %s, -O%d, %s (%s), %d-bit vectors, %d thread%s\n", c->model, c->o.opt_level, t.triple, t.isa,
           t.vector_bytes * 8, c->threads > 1 ? c->threads : 1, c->threads > 1 ? "s" : "");
    printf("inputs: %s\n", dir ? dir : "random (fixed seed)");
    printf("peak: %.1f GFLOP/s (float multiply-add, one core, measured)\n", peak);
    printf("work: %lld MACs (%.3f GFLOP) in %d kernels\n", (long long)macs, 2e-9 * (double)macs, nk);
    printf("latency: median %.2f us, min %.2f us (%d runs); %.2f GFLOP/s, %.1f%% of peak\n",
           plain.median, plain.min, plain.n, 2e-3 * (double)macs / plain.median,
           peak > 0 ? 100 * 2e-3 * (double)macs / plain.median / peak : 0.0);
    printf("instrumented build: median %.2f us (%d runs)%s\n", prof.median, prof.n,
           ticks ? "" : "; no cycle counter on this host, kernel times unknown");
    if (c->tune_file) {
        int tuned = 0;
        for (int i = 0; i < p->nkernels; i++) tuned += rows[i].k->tune_file;
        printf("tuning: %s, the schedule of %d kernel%s (marked *)\n", c->tune_file, tuned, tuned == 1 ? "" : "s");
    }
    qsort(rows, (size_t)p->nkernels, sizeof *rows, by_time);
    int top = c->top < 0 ? TOP : c->top == 0 ? p->nkernels : c->top;
    int shown = p->nkernels < top ? p->nkernels : top, w = NAME_MIN;
    for (int i = 0; i < shown; i++) {
        int n = (int)strlen(rows[i].k->name);
        if (n > w) w = n < NAME_MAX ? n : NAME_MAX;
    }
    printf("%-*s %-20s %10s %7s %16s %7s\n", w, "kernel", "ops", "us/run", "share", "rate", "%peak");
    double total = 0;
    for (int i = 0; i < p->nkernels; i++) total += rows[i].us;
    for (int i = 0; i < shown; i++)
        print_row(a, w, rows[i].k->tune_file ? arena_printf(a, "*%s", rows[i].k->name) : rows[i].k->name,
                  rows[i].k->ops ? rows[i].k->ops : "", rows[i].us, total, rows[i].macs, rows[i].bytes, peak);
    if (p->nkernels > shown) {
        double us = 0;
        int64_t m = 0, by = 0;
        for (int i = shown; i < p->nkernels; i++) us += rows[i].us, m += rows[i].macs, by += rows[i].bytes;
        print_row(a, w, arena_printf(a, "(%d more)", p->nkernels - shown), "", us, total, m, by, peak);
    }
    bench_release(&b);
    free(pb.arena);
    onnxcc_pool_free(pool);
    be_target_free(&t);
    return 0;
}
