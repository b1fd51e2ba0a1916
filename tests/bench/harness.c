/* harness.c - the onnxcc side of `make bench` (tests/bench.sh).
 *
 * Linked with one model object that onnxcc compiled with --name model (its header model.h on
 * the include path) and runtime/onnxcc_pool.c, it reads the model's inputs from DIR/input_K.bin (raw packed tensors,
 * written by tests/bench/gen.py), then either writes the outputs of one run to
 * DIR/PREFIX_output_K.bin (--dump PREFIX, for the output comparison) or times the model:
 * warm-up runs, then single runs each timed with clock_gettime(CLOCK_MONOTONIC) (with THREADS
 * > 1 through model_run_par on a pool of that many threads), and prints
 *
 *     median_us min_us iterations
 *
 * The number of timed runs adapts to the model (about BUDGET_S seconds, at least MIN_ITERS,
 * at most MAX_ITERS), so that small and large models cost the bench about the same time;
 * tests/bench/ort.js uses the same rule, so both sides are timed alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "onnxcc_pool.h"

#define WARMUP_S 0.05
#define BUDGET_S 0.3
#define MIN_ITERS 5
#define MAX_ITERS 2000

static void die(const char *what, const char *path)
{
    fprintf(stderr, "harness: %s: %s\n", what, path);
    exit(1);
}

static void *xmalloc(size_t n, size_t align)
{
    void *p = NULL;
    /* aligned_alloc wants a multiple of the alignment; keep zero-sized tensors allocatable */
    size_t size = (n + align - 1) / align * align;
    if (!(p = aligned_alloc(align, size ? size : align)))
        die("out of memory", "");
    return p;
}

static void read_input(const char *dir, int k, void *buf, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%d.bin", dir, k);
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open", path);
    if (fread(buf, 1, size, f) != size || fgetc(f) != EOF)
        die("not the input's size", path);
    fclose(f);
}

static void write_output(const char *dir, const char *prefix, int k, const void *buf, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_output_%d.bin", dir, prefix, k);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size || fclose(f) != 0)
        die("cannot write", path);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static onnxcc_pool *pool;           /* THREADS > 1: model_run_par's parallel-for */

static void run(const void *const *in, void *const *out, void *arena)
{
    int rc = pool ? model_info.run_par(in, out, arena, onnxcc_pool_parallel_for, pool)
                  : model_info.run(in, out, arena);
    if (rc != 0)
        die("model_run failed", model_info.name);
}

int main(int argc, char **argv)
{
    const onnxcc_model_info *m = &model_info;
    const char *dump = NULL, *dir;
    int threads = 1;
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "--dump") == 0)
        dump = argv[2], dir = argv[3], threads = argc == 5 ? atoi(argv[4]) : 1;
    else if (argc == 2 || argc == 3)
        dir = argv[1], threads = argc == 3 ? atoi(argv[2]) : 1;
    else {
        fprintf(stderr, "usage: harness [--dump PREFIX] DIR [THREADS]\n");
        return 2;
    }
    if (threads > 1 && (!m->run_par || !(pool = onnxcc_pool_new(threads))))
        die("no threads", m->name);

    const void **in = calloc((size_t)m->num_inputs + 1, sizeof *in);
    void **out = calloc((size_t)m->num_outputs + 1, sizeof *out);
    void *arena = m->arena_size ? xmalloc(m->arena_size, m->arena_align) : NULL;
    if (!in || !out)
        die("out of memory", "");
    for (int k = 0; k < m->num_inputs; k++) {
        void *buf = xmalloc(m->inputs[k].size, 64);
        read_input(dir, k, buf, m->inputs[k].size);
        in[k] = buf;
    }
    for (int k = 0; k < m->num_outputs; k++)
        out[k] = xmalloc(m->outputs[k].size, 64);

    if (dump) {
        run(in, out, arena);
        for (int k = 0; k < m->num_outputs; k++)
            write_output(dir, dump, k, out[k], m->outputs[k].size);
        return 0;
    }

    /* warm-up: caches, page faults of the arena and the weights, CPU frequency */
    int warm = 0;
    double t0 = now(), t;
    do {
        run(in, out, arena);
        warm++;
    } while ((t = now()) - t0 < WARMUP_S || warm < 3);
    double est = (t - t0) / warm;
    int iters = est > 0 ? (int)(BUDGET_S / est) : MAX_ITERS;
    iters = iters < MIN_ITERS ? MIN_ITERS : iters > MAX_ITERS ? MAX_ITERS : iters;

    double *us = malloc((size_t)iters * sizeof *us);
    if (!us)
        die("out of memory", "");
    for (int i = 0; i < iters; i++) {
        t0 = now();
        run(in, out, arena);
        us[i] = (now() - t0) * 1e6;
    }
    qsort(us, (size_t)iters, sizeof *us, cmp_double);
    double median = iters % 2 ? us[iters / 2] : (us[iters / 2 - 1] + us[iters / 2]) / 2;
    printf("%.2f %.2f %d\n", median, us[0], iters);
    return 0;
}
