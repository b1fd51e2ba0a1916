/* onnxcc_pool.c - the thread pool of onnxcc_pool.h.
 *
 * A job is (task, arg, n). The caller publishes it under the lock, bumps the generation
 * counter and wakes the workers; every thread, the caller too, then takes task indices from
 * one atomic counter until none is left, and counts the tasks it finished. The caller returns
 * when all n are done. A worker waiting for the next generation spins first (the next
 * kernel's parallel-for usually follows within microseconds) and then sleeps on a condition
 * variable. A worker that took a job (under the lock) counts itself busy until it has left
 * work(); the next job is published only when none is, so that a late worker's last look at
 * the task counter cannot take an index of the next job. */
#define _POSIX_C_SOURCE 200809L
#include "onnxcc_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct onnxcc_pool {
    int nthreads;                   /* the caller included */
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t lock;           /* guards the job's fields, sleeping and stop */
    pthread_cond_t wake;            /* a new generation, or stop */
    pthread_mutex_t submit;         /* one parallel-for at a time */
    void (*task)(void *, int);
    void *arg;
    int n;
    atomic_int next;                /* the next task index to take */
    atomic_int done;                /* tasks finished */
    atomic_uint gen;                /* bumped for each job */
    atomic_int busy;                /* workers inside work() for the current job */
    int sleeping;                   /* workers waiting on `wake` */
    int stop;
    long spin_ns;
};

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Take and run tasks of the current job until none is left. */
static void work(onnxcc_pool *p, void (*task)(void *, int), void *arg, int n) {
    int mine = 0;
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= n) break;
        task(arg, i);
        mine++;
    }
    if (mine) atomic_fetch_add_explicit(&p->done, mine, memory_order_release);
}

static void *worker(void *v) {
    onnxcc_pool *p = v;
    unsigned seen = 0;
    for (;;) {
        /* spin for the next generation, then sleep */
        long until = now_ns() + p->spin_ns;
        unsigned g;
        int k = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            cpu_relax();
            if (++k % 256 == 0 && now_ns() > until) break;
        }
        pthread_mutex_lock(&p->lock);
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !p->stop) {
            p->sleeping++;
            pthread_cond_wait(&p->wake, &p->lock);
            p->sleeping--;
        }
        if (p->stop) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        void (*task)(void *, int) = p->task;
        void *arg = p->arg;
        int n = p->n;
        atomic_fetch_add_explicit(&p->busy, 1, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
        seen = g;
        work(p, task, arg, n);
        atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
    }
}

onnxcc_pool *onnxcc_pool_new(int threads) {
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    onnxcc_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->nthreads = threads;
    const char *spin = getenv("ONNXCC_POOL_SPIN_US");
    p->spin_ns = (spin ? atol(spin) : 200) * 1000L;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->submit, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->gen, 0);
    atomic_init(&p->busy, 0);
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    if (!p->workers) {
        onnxcc_pool_free(p);
        return NULL;
    }
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0) break;
        p->nworkers++;
    }
    p->nthreads = p->nworkers + 1;
    return p;
}

void onnxcc_pool_free(onnxcc_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->submit);
    free(p->workers);
    free(p);
}

int onnxcc_pool_threads(const onnxcc_pool *p) { return p ? p->nthreads : 1; }

void onnxcc_pool_parallel_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg) {
    onnxcc_pool *p = ctx;
    if (n <= 0) return;
    if (!p || p->nworkers == 0 || n == 1) {
        for (int i = 0; i < n; i++) task(arg, i);
        return;
    }
    pthread_mutex_lock(&p->submit);
    pthread_mutex_lock(&p->lock);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) != 0) {
        pthread_mutex_unlock(&p->lock);
        cpu_relax();
        pthread_mutex_lock(&p->lock);
    }
    p->task = task, p->arg = arg, p->n = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleeping) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    work(p, task, arg, n);
    while (atomic_load_explicit(&p->done, memory_order_acquire) < n) cpu_relax();
    pthread_mutex_unlock(&p->submit);
}
