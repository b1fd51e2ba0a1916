/* guard.c - checks of the generated code itself, run by tests/guard.sh over a sample of compiled
 * models (one per op family and the sample models), whose objects and test data it links
 * through the generated models.h and cases.h (tables from tests/firmware/pb2c.py):
 *   - guard pages: every input, output and the arena sits between two PROT_NONE pages, once
 *     ending at a page end and once starting at a page start, inputs read-only, so any access
 *     outside a buffer (or a write to an input) faults; the outputs must match the test data;
 *   - garbage arena: an arena (and output buffers) filled with 0xFF, quiet NaNs or 0x80 bytes
 *     gives bit-identical outputs to a zeroed one: nothing reads scratch it has not written;
 *   - two threads, each with its own arena and outputs, run the model many times at once and
 *     always get the outputs of a single-threaded run: the code keeps no state of its own.
 * The hostile cases (tests/guard/hostile.py: NaN coordinates, indices far out of range,
 * integer division by zero) take every check but the comparison with expected values where
 * ONNX leaves them undefined (values 0).
 * Each check runs in a child process so that a fault fails that check only.
 * Prints "ok ..." or "FAIL ..." per check. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models.h"    /* generated: each model's header and test data tables */

typedef struct gcase {
    const char *name;
    const onnxcc_model_info *info;
    const void *const *inputs;
    void *const *outputs;       /* pb2c's buffers: unused, the checks bring their own */
    const tcheck *ins, *outs;
    int nin, nout;
    int values;                 /* 0: hostile data whose outputs ONNX leaves undefined */
} gcase;

#include "cases.h"     /* generated: gcases[], one per model */

enum { MAXT = 64, THREAD_RUNS = 200 };

static size_t page;

/* A mapping with PROT_NONE pages on both sides of a body that holds size bytes; the buffer
 * starts at the body's start, or ends at its end (rounded down to align, as the arena must
 * be aligned: then up to align-1 bytes of slack remain before the guard page). */
typedef struct gbuf {
    unsigned char *map;
    size_t maplen;
    unsigned char *p;
} gbuf;

static int guarded(gbuf *g, size_t size, size_t align, int at_end)
{
    size_t body = (size + page - 1) / page * page;
    if (body == 0)
        body = page;
    g->maplen = body + 2 * page;
    g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->map == MAP_FAILED)
        return 0;
    if (mprotect(g->map, page, PROT_NONE) != 0 ||
        mprotect(g->map + page + body, page, PROT_NONE) != 0)
        return 0;
    g->p = g->map + page;
    if (at_end) {
        uintptr_t end = (uintptr_t)(g->map + page + body);
        g->p = (unsigned char *)((end - size) / align * align);
    }
    return 1;
}

/* Tensors need only their element's alignment, so that they can end exactly at a page end. */
static size_t elem_size(const tcheck *t) { return t->count ? t->nbytes / t->count : 1; }

static int outputs_match(const gcase *c, void *const *outs)
{
    int ok = 1;
    if (!c->values)
        return 1;
    for (int i = 0; i < c->nout; i++) {
        tcheck t = c->outs[i];
        size_t bad;
        t.out = outs[i];
        double err = tcheck_compare(&t, 1e-3, 1e-5, &bad);
        if (bad) {
            printf("    %s: output %s: %zu of %zu elements differ, max error %g\n", c->name,
                   t.name, bad, t.count, err);
            ok = 0;
        }
    }
    return ok;
}

/* Child: inputs, outputs and arena each against guard pages. Exit status 0 if the run
 * returned 0 with the expected outputs. */
static int guard_run(const gcase *c, int at_end)
{
    const onnxcc_model_info *m = c->info;
    const void *in[MAXT];
    void *out[MAXT];
    gbuf g;
    for (int i = 0; i < c->nin; i++) {
        if (!guarded(&g, c->ins[i].nbytes, elem_size(&c->ins[i]), at_end))
            return 2;
        memcpy(g.p, c->ins[i].expect, c->ins[i].nbytes);
        if (mprotect(g.map + page, g.maplen - 2 * page, PROT_READ) != 0)
            return 2;
        in[i] = g.p;
    }
    for (int i = 0; i < c->nout; i++) {
        if (!guarded(&g, c->outs[i].nbytes, elem_size(&c->outs[i]), at_end))
            return 2;
        out[i] = g.p;
    }
    if (!guarded(&g, m->arena_size, m->arena_align, at_end))
        return 2;
    int rc = m->run(in, out, g.p);
    if (rc != 0) {
        printf("    %s: run returned %d\n", c->name, rc);
        return 1;
    }
    return outputs_match(c, out) ? 0 : 1;
}

/* One run with arena and output bytes filled with the pattern (a repeated 4-byte word). */
static int run_filled(const gcase *c, unsigned char *arena, void *const *out, uint32_t word)
{
    size_t n = c->info->arena_size;
    for (size_t i = 0; i + 4 <= n; i += 4)
        memcpy(arena + i, &word, 4);
    memset(arena + n / 4 * 4, (int)(word & 0xFF), n % 4);
    for (int i = 0; i < c->nout; i++)
        memset(out[i], (int)(word & 0xFF), c->outs[i].nbytes);
    return c->info->run(c->inputs, out, arena);
}

static void **alloc_outputs(const gcase *c)
{
    void **out = calloc(MAXT, sizeof *out);
    for (int i = 0; i < c->nout; i++)
        out[i] = malloc(c->outs[i].nbytes + 1);
    return out;
}

static unsigned char *alloc_arena(const gcase *c)
{
    size_t a = c->info->arena_align;
    return aligned_alloc(a, (c->info->arena_size + a) / a * a);
}

static int same_outputs(const gcase *c, void *const *a, void *const *b)
{
    for (int i = 0; i < c->nout; i++)
        if (memcmp(a[i], b[i], c->outs[i].nbytes) != 0)
            return 0;
    return 1;
}

/* Child: a zeroed arena, then garbage ones; all outputs bit-identical. */
static int garbage_run(const gcase *c)
{
    static const uint32_t fills[] = {0xFFFFFFFFu, 0x7FC00000u, 0x80808080u, 0x7F800001u};
    unsigned char *arena = alloc_arena(c);
    void **ref = alloc_outputs(c), **out = alloc_outputs(c);
    if (run_filled(c, arena, ref, 0) != 0 || !outputs_match(c, ref))
        return 1;
    for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
        if (run_filled(c, arena, out, fills[f]) != 0 || !same_outputs(c, ref, out)) {
            printf("    %s: outputs differ with the arena filled with 0x%08x\n", c->name,
                   (unsigned)fills[f]);
            return 1;
        }
    }
    return 0;
}

typedef struct worker {
    const gcase *c;
    void **ref;
    int mismatches;
    uint32_t fill;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    unsigned char *arena = alloc_arena(w->c);
    void **out = alloc_outputs(w->c);
    for (int r = 0; r < THREAD_RUNS; r++)
        if (run_filled(w->c, arena, out, w->fill) != 0 || !same_outputs(w->c, w->ref, out))
            w->mismatches++;
    return NULL;
}

/* Child: two threads, two arenas, THREAD_RUNS runs each, all like a single-threaded run. */
static int thread_run(const gcase *c)
{
    unsigned char *arena = alloc_arena(c);
    void **ref = alloc_outputs(c);
    if (run_filled(c, arena, ref, 0) != 0)
        return 1;
    worker w[2] = {{c, ref, 0, 0x5A5A5A5Au}, {c, ref, 0, 0xFFFFFFFFu}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, work, &w[i]) != 0)
            return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (w[0].mismatches + w[1].mismatches) {
        printf("    %s: %d of %d runs differ\n", c->name, w[0].mismatches + w[1].mismatches,
               2 * THREAD_RUNS);
        return 1;
    }
    return 0;
}

/* The case's tables must describe the model the object was compiled from. */
static int consistent(const gcase *c)
{
    const onnxcc_model_info *m = c->info;
    if (m->num_inputs != c->nin || m->num_outputs != c->nout || c->nin > MAXT || c->nout > MAXT)
        return 0;
    for (int i = 0; i < c->nin; i++)
        if (m->inputs[i].size != c->ins[i].nbytes)
            return 0;
    for (int i = 0; i < c->nout; i++)
        if (m->outputs[i].size != c->outs[i].nbytes || m->outputs[i].dims_output >= 0)
            return 0;
    return 1;
}

static int failures;

static void verdict(const gcase *c, const char *what, int status)
{
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%s %s: %s", ok ? "ok  " : "FAIL", c->name, what);
    if (WIFSIGNALED(status))
        printf(" (killed by signal %d)", WTERMSIG(status));
    else if (!ok)
        printf(" (exit status %d)", WEXITSTATUS(status));
    printf("\n");
    fflush(stdout);
    failures += !ok;
}

enum { GUARD_END, GUARD_START, GARBAGE, THREADS };

static int child(const gcase *c, int check)
{
    switch (check) {
    case GUARD_END: return guard_run(c, 1);
    case GUARD_START: return guard_run(c, 0);
    case GARBAGE: return garbage_run(c);
    default: return thread_run(c);
    }
}

int main(void)
{
    static const char *const what[] = {
        "guard pages, buffers ending at a page end",
        "guard pages, buffers starting at a page start",
        "garbage in the arena and outputs gives the same outputs",
        "two threads on two arenas agree over many runs",
    };
    page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t k = 0; k < sizeof gcases / sizeof gcases[0]; k++) {
        const gcase *c = &gcases[k];
        if (!consistent(c)) {
            printf("FAIL %s: the test data do not match the model's header\n", c->name);
            failures++;
            continue;
        }
        for (int check = 0; check < 4; check++) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                int rc = child(c, check);
                fflush(stdout);
                _exit(rc);
            }
            int status = 0;
            if (pid < 0 || waitpid(pid, &status, 0) != pid)
                status = 2 << 8;
            verdict(c, what[check], status);
        }
    }
    return failures != 0;
}
