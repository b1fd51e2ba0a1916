/* tune.c - `onnxcc --autotune --tune-file FILE MODEL [-o OUT.o]`: measure the candidate
 * schedules of each kernel on this machine, keep the fastest, write them to FILE (the format:
 * passes/tune.c), then, with -o, compile with FILE as --tune-file would.
 *
 * The schedule pass ranks each kernel's candidates with its cost model (passes/sched_tile.c);
 * build number v (0 .. TUNE_CANDIDATES-1) of the model gives every kernel its v-th candidate
 * (Tuning.variant; build 0 is the default compile, the cost model's choices). Each build is
 * compiled with per-kernel cycle counters and loaded in-process as `bench` does (bench_build),
 * and all are timed in ROUNDS interleaved rounds of --seconds each (default SECONDS), a
 * kernel's time in a build the least of its rounds' medians, so that a load that comes and
 * goes on the machine reaches every candidate alike. Kernels of the same signature (a
 * ResNet's repeated blocks) are one entry: their times are added. A candidate replaces the
 * default only if it is MARGIN_PCT% faster, so noise does not move the choice; so the tuned
 * model is never predicted slower than the default, which is one of the candidates. Then the
 * tuned build and the default are timed whole against each other in ROUNDS interleaved rounds
 * (a check of the per-kernel figures; the file's last comment and stderr say both).
 * Which targets: --cpu/--features name one; otherwise the ISA levels a default object holds
 * (x86-64-v3 and -v4), each measured alone, those this CPU runs. Progress on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "../passes/tune.h"

enum { ROUNDS = 3, MARGIN_PCT = 3 };
#define SECONDS 0.2

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Whether this CPU runs code for level l: its vectors are at most the host's and it needs no
 * VNNI the host lacks (the levels differ in nothing else the schedule sees). */
static bool host_runs(const Target *host, const Target *l) {
    return l->vector_bytes <= host->vector_bytes && (!l->vnni || host->vnni);
}

typedef struct Cand {
    double us;                      /* the kernels of one signature, summed */
    int kind, a, b;
    int64_t cost;
    bool seen;
} Cand;

/* Measures the candidates on target t and appends an entry per signature to out; the lines
 * of the file go to f. */
static void tune_level(Arena *a, Cli *c, const Target *t, FILE *f, double secs) {
    enum { K = TUNE_CANDIDATES };
    Tuning tn[K];
    Bench b[K];
    uint64_t *counters[K];
    double *us[K];
    double t0 = now_s();
    for (int v = 0; v < K; v++) {
        tn[v] = (Tuning){.path = "", .variant = v};
        c->o.tuning = &tn[v];
        b[v] = bench_build(a, c, t, true);
        counters[v] = be_loaded_symbol(arena_printf(a, "%s_profile", b[v].p->name));
        if (!counters[v]) die("the instrumented object has no %s_profile", b[v].p->name);
        if (v == 0) {
            bench_prepare(a, &b[0], NULL);
        } else {
            if (b[v].p->nkernels != b[0].p->nkernels) die("autotune: build %d has other kernels", v);
            b[v].in = b[0].in, b[v].out = b[0].out;
            b[v].arena = aligned_alloc(64, ((size_t)b[v].p->arena_size + 63) / 64 * 64 + 64);
            if (!b[v].arena) die("out of memory");
        }
        int n = b[v].p->nkernels;
        us[v] = ARENA_ARRAY(a, double, n + 1);
        for (int i = 0; i <= n; i++) us[v][i] = -1;
        fprintf(stderr, "onnxcc: autotune %s: compiled candidate %d of %d (%.1f s)\n", t->isa, v + 1, K, now_s() - t0);
    }
    c->o.tuning = NULL;
    int nk = b[0].p->nkernels;
    double *kus = ARENA_ARRAY(a, double, nk + 1);
    for (int r = 0; r < ROUNDS; r++) {
        for (int v = 0; v < K; v++) {
            Timing tm;
            if (!bench_profile_runs(&b[v], counters[v], secs, kus, &tm))
                fatal(NULL, "--autotune: no cycle counter on this host, kernel times unknown");
            for (int i = 0; i < nk; i++)
                if (us[v][i] < 0 || kus[i] < us[v][i]) us[v][i] = kus[i];
            if (us[v][nk] < 0 || tm.median < us[v][nk]) us[v][nk] = tm.median;
        }
        fprintf(stderr, "onnxcc: autotune %s: timed round %d of %d (%.1f s)\n", t->isa, r + 1, ROUNDS, now_s() - t0);
    }

    /* per signature, per build: the candidate and its time; the choices also go to `chosen`,
     * a tuning of this level, for the check below */
    Tuning chosen = {.path = "", .variant = 0};
    chosen.cap = nk + 1;
    chosen.e = ARENA_ARRAY(a, TuneEntry, chosen.cap);
    bool *done = ARENA_ARRAY(a, bool, nk + 1);
    int kept = 0, moved = 0;
    double def_us = 0, best_us = 0;
    for (int i = 0; i < nk; i++) {
        const Kernel *k = b[0].p->kernels[i];
        if (done[i] || !k->tune_sig || k->tune_kind == TUNE_NONE) continue;
        Cand cd[K] = {{0}};
        int count = 0;
        for (int j = i; j < nk; j++) {
            if (b[0].p->kernels[j]->tune_sig != k->tune_sig || strcmp(b[0].p->kernels[j]->ops, k->ops) != 0) continue;
            done[j] = true;
            count++;
            for (int v = 0; v < K; v++) {
                const Kernel *kv = b[v].p->kernels[j];
                cd[v].us += us[v][j];
                cd[v].kind = kv->tune_kind, cd[v].a = kv->tune_a, cd[v].b = kv->tune_b, cd[v].cost = kv->tune_cost;
                cd[v].seen = true;
            }
        }
        int alts = 0;
        for (int v = 1; v < K; v++) alts += cd[v].kind != TUNE_DEFAULT;
        if (!alts) continue;            /* a space of one */
        int best = 0;
        for (int v = 1; v < K; v++)
            if (cd[v].kind != TUNE_DEFAULT && cd[v].us * 100 < cd[0].us * (100 - MARGIN_PCT) && cd[v].us < cd[best].us) best = v;
        def_us += cd[0].us, best_us += cd[best].us;
        best ? moved++ : kept++;
        TuneEntry e = {.target = b[0].p->tune_target, .ops = k->ops ? k->ops : "-", .out = tune_out(a, k),
                       .sig = k->tune_sig, .kind = best ? cd[best].kind : TUNE_DEFAULT, .a = cd[best].a, .b = cd[best].b};
        /* the comment: every candidate measured, with the model's predicted cost */
        const char *cm = arena_printf(a, "%s%s:", k->name, count > 1 ? arena_printf(a, " and %d more", count - 1) : "");
        for (int v = 0; v < K; v++) {
            if (v && cd[v].kind == TUNE_DEFAULT) continue;
            cm = arena_printf(a, "%s %s %.2f us (model %lld)", cm, tune_choice_text(a, v ? cd[v].kind : TUNE_DEFAULT, cd[v].a, cd[v].b),
                              cd[v].us, (long long)cd[v].cost);
            if (v < K - 1 && cd[v + 1].kind != TUNE_DEFAULT) cm = arena_printf(a, "%s;", cm);
        }
        tune_write_entry(f, a, &e, cm);
        chosen.e[chosen.n++] = e;
    }
    /* the whole run, tuned against default, in interleaved rounds: every kernel's median time,
     * summed, the least of the rounds */
    double whole_def = -1, whole_tuned = -1;
    if (moved) {
        c->o.tuning = &chosen;
        Bench tb = bench_build(a, c, t, true);
        c->o.tuning = NULL;
        uint64_t *tc = be_loaded_symbol(arena_printf(a, "%s_profile", tb.p->name));
        if (!tc || tb.p->nkernels != nk) die("autotune: the tuned build has other kernels");
        tb.in = b[0].in, tb.out = b[0].out;
        tb.arena = aligned_alloc(64, ((size_t)tb.p->arena_size + 63) / 64 * 64 + 64);
        if (!tb.arena) die("out of memory");
        double *tus = ARENA_ARRAY(a, double, nk + 1);
        for (int r = 0; r < ROUNDS; r++) {
            Timing td, tt;
            bench_profile_runs(&b[0], counters[0], secs, kus, &td);
            bench_profile_runs(&tb, tc, secs, tus, &tt);
            /* each kernel's median, summed: a run's median takes in the preemptions of a
             * loaded machine, a kernel's median mostly not */
            double sd = 0, st = 0;
            for (int i = 0; i < nk; i++) sd += kus[i], st += tus[i];
            if (whole_def < 0 || sd < whole_def) whole_def = sd;
            if (whole_tuned < 0 || st < whole_tuned) whole_tuned = st;
        }
        free(tb.arena);
    }
    const char *whole = moved ? arena_printf(a, "all kernels %.1f -> %.1f us (%+.1f%%)", whole_def, whole_tuned,
                                             100 * (whole_def / whole_tuned - 1))
                              : arena_printf(a, "run %.1f us", us[0][nk]);
    fprintf(f, "# %s: %d kernel signatures, %d moved off the default; their kernels %.1f -> %.1f us (%+.1f%%); %s\n",
            t->isa, kept + moved, moved, def_us, best_us, best_us > 0 ? 100 * (def_us / best_us - 1) : 0.0, whole);
    fprintf(stderr, "onnxcc: autotune %s: %d of %d kernel signatures faster than the default by %d%% or more; "
                    "their kernels %.1f -> %.1f us (%+.1f%%); %s, interleaved (%.1f s)\n",
            t->isa, moved, kept + moved, MARGIN_PCT, def_us, best_us, best_us > 0 ? 100 * (def_us / best_us - 1) : 0.0,
            whole, now_s() - t0);
    bench_release(&b[0]);
    for (int v = 1; v < K; v++) free(b[v].arena);
}

Tuning *tune_load(Arena *a, const char *path) {
    size_t size;
    uint8_t *bytes = fe_read_file(a, path, &size);
    exit_if_errors();
    Tuning *t = ARENA_NEW(a, Tuning);
    t->path = path;
    tune_parse(a, (const char *)bytes, size, t);
    exit_if_errors();
    return t;
}

int autotune_main(Arena *a, Cli *c) {
    double secs = c->seconds > 0 ? c->seconds : SECONDS;
    Target host, lv[MAX_ISAS];
    int n;
    be_target(&host, NULL, "native", NULL, c->abi);
    if (c->cpu || c->features) {
        be_target(&lv[0], NULL, c->cpu ? c->cpu : "native", c->features, c->abi);
        n = 1;
    } else {
        Target base;
        be_target(&base, NULL, NULL, NULL, c->abi);
        n = be_isa_levels(&base, lv);
        be_target_free(&base);
    }
    /* written whole at the end, or not at all */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) die("out of memory");
    tune_write_header(f);
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "# onnxcc --autotune of %s, %s: %d candidates a kernel, %d rounds of %.2f s each\n", c->model, when,
            TUNE_CANDIDATES, ROUNDS, secs);
    fprintf(f, "# target kernel-ops output signature choice  # kernel: each candidate's time (and the cost model's "
               "prediction)\n");
    bool any = false;
    Report *report = c->report;     /* --report is of the compilation with -o afterwards */
    c->report = NULL;
    for (int l = 0; l < n; l++) {
        if (host_runs(&host, &lv[l])) {
            tune_level(a, c, &lv[l], f, secs);
            any = true;
        } else {
            fprintf(stderr, "onnxcc: autotune: this CPU does not run %s: not tuned\n", lv[l].isa);
        }
        be_target_free(&lv[l]);
    }
    be_target_free(&host);
    c->report = report;
    if (fclose(f)) die("out of memory");
    if (!any) fatal(NULL, "--autotune: this CPU runs none of the target's ISA levels");
    out_register(c->tune_file);
    out_write(c->tune_file, text, len);
    free(text);
    fprintf(stderr, "onnxcc: autotune: wrote %s\n", c->tune_file);
    return 0;
}
