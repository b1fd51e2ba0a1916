/* threads.c - tests/threads.sh's checker: one model (compiled with --name model), linked with
 * runtime/onnxcc_pool.c.
 *
 *     threads [DIR]
 *
 * Fills the inputs with fixed pseudo-random values (or DIR/input_K.bin, raw), runs model_run
 * once as the reference, then model_run_par through a pool of 1, 2 and 3 threads (each twice)
 * and with no parallel-for, and requires outputs bitwise equal to the reference. With several
 * ISA levels it does the same at every level this CPU has (model_isa), each level against its
 * own reference. Prints an ok or FAIL line per check.
 *
 * With THREADS_RACE set, the parallel-for is a wrong one that runs every task on two threads
 * at once: the same values are stored twice, so the outputs still match, and only
 * ThreadSanitizer (an object compiled with --sanitize-thread, linked with -fsanitize=thread)
 * sees the race - tests/threads.sh's proof that the instrumentation works. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "onnxcc_pool.h"

static int failed;

static void check(int ok, const char *what, int level, int threads) {
    printf("%s %s (ISA level %d, %d threads)\n", ok ? "ok  " : "FAIL", what, level, threads);
    failed += !ok;
}

static void *alloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    if (!p) {
        fprintf(stderr, "threads: out of memory\n");
        exit(2);
    }
    memset(p, 0xA5, (n + 63) / 64 * 64 + 64);
    return p;
}

static uint64_t rng = 0x2545F4914F6CDD1Du;

static float uniform(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((double)((rng * 2685821657736338717u) >> 11) / 4503599627370496.0 * 2 - 1);
}

typedef struct Job { int n; void (*task)(void *, int); void *arg; } Job;

static void *all_tasks(void *v) {
    Job *j = v;
    for (int i = 0; i < j->n; i++) j->task(j->arg, i);
    return NULL;
}

static void racy_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg) {
    (void)ctx;
    Job j = {n, task, arg};
    pthread_t t;
    if (pthread_create(&t, NULL, all_tasks, &j) != 0) exit(2);
    all_tasks(&j);
    pthread_join(t, NULL);
}

/* A caller's parallel-for may run the tasks in any order and on any thread, each once: here
 * in reverse on the calling thread, and shuffled, the odd positions of the shuffle on a
 * second thread. */
static void reverse_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg) {
    (void)ctx;
    for (int i = n - 1; i >= 0; i--) task(arg, i);
}

typedef struct Half { int n, odd; const int *order; void (*task)(void *, int); void *arg; } Half;

static void *half_tasks(void *v) {
    Half *h = v;
    for (int i = h->odd; i < h->n; i += 2) h->task(h->arg, h->order[i]);
    return NULL;
}

static void shuffled_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg) {
    (void)ctx;
    int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!order) exit(2);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
        int j = (int)(rng % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    Half a = {n, 0, order, task, arg}, b = {n, 1, order, task, arg};
    pthread_t t;
    if (pthread_create(&t, NULL, half_tasks, &b) != 0) exit(2);
    half_tasks(&a);
    pthread_join(t, NULL);
    free(order);
}

int main(int argc, char **argv) {

    const onnxcc_model_info *mi = &model_info;
    const void *in[model_NUM_INPUTS + 1];
    void *out[model_NUM_OUTPUTS + 1], *ref[model_NUM_OUTPUTS + 1];
    for (int i = 0; i < mi->num_inputs; i++) {
        const onnxcc_tensor_info *t = &mi->inputs[i];
        void *b = alloc(t->size);
        memset(b, 0, t->size);
        if (argc > 1) {
            char path[4096];
            snprintf(path, sizeof path, "%s/input_%d.bin", argv[1], i);
            FILE *f = fopen(path, "rb");
            if (!f || fread(b, 1, t->size, f) != t->size) {
                fprintf(stderr, "threads: cannot read %s\n", path);
                return 2;
            }
            fclose(f);
        } else if (t->dtype == 1) {
            for (size_t k = 0; k < t->size / 4; k++) ((float *)b)[k] = uniform();
        }
        in[i] = b;
    }
    for (int i = 0; i < mi->num_outputs; i++) out[i] = alloc(mi->outputs[i].size), ref[i] = alloc(mi->outputs[i].size);
    void *arena = alloc(mi->arena_size);
    if (!mi->run_par) {
        fprintf(stderr, "threads: the object has no run_par\n");
        return 2;
    }
    if (getenv("THREADS_RACE")) return mi->run_par(in, out, arena, racy_for, NULL);
    onnxcc_pool *pools[4] = {NULL};
    for (int n = 1; n <= 3; n++) pools[n] = onnxcc_pool_new(n);
    int best = mi->isa ? mi->isa(-1) : 0;
    for (int level = 0; level < mi->num_isas; level++) {
        if (mi->isa && mi->isa(level) != level) continue;       /* this CPU lacks it */
        check(mi->run(in, ref, arena) == 0, "run", level, 1);
        for (int n = 0; n <= 3; n++)
            for (int rep = 0; rep < (n ? 2 : 1); rep++) {
                for (int i = 0; i < mi->num_outputs; i++) memset(out[i], 0x5A, mi->outputs[i].size);
                int rc = n ? mi->run_par(in, out, arena, onnxcc_pool_parallel_for, pools[n])
                           : mi->run_par(in, out, arena, NULL, NULL);
                int same = rc == 0;
                for (int i = 0; i < mi->num_outputs && same; i++)
                    same = !memcmp(out[i], ref[i], mi->outputs[i].size);
                check(same, n ? "run_par: outputs bitwise those of run" : "run_par without a parallel-for",
                      level, n ? onnxcc_pool_threads(pools[n]) : 1);
            }
        onnxcc_parallel_for *odd[2] = {reverse_for, shuffled_for};
        for (int f = 0; f < 2; f++) {
            for (int i = 0; i < mi->num_outputs; i++) memset(out[i], 0x5A, mi->outputs[i].size);
            int same = mi->run_par(in, out, arena, odd[f], NULL) == 0;
            for (int i = 0; i < mi->num_outputs && same; i++)
                same = !memcmp(out[i], ref[i], mi->outputs[i].size);
            check(same, f ? "run_par, tasks shuffled over two threads: outputs bitwise those of run"
                          : "run_par, tasks in reverse: outputs bitwise those of run", level, f + 1);
        }
    }
    if (mi->isa) mi->isa(best);
    for (int n = 1; n <= 3; n++) onnxcc_pool_free(pools[n]);
    for (int i = 0; i < mi->num_inputs; i++) free((void *)in[i]);
    for (int i = 0; i < mi->num_outputs; i++) free(out[i]), free(ref[i]);
    free(arena);
    printf("tasks: at most %d per kernel\n", model_MAX_TASKS);
    return failed ? 1 : 0;
}
