/* onnxcc_pool.h - a small thread pool for the NAME_run_par entry point of onnxcc's objects.
 *
 * The generated code creates no thread: NAME_run_par takes a parallel-for from its caller.
 * Applications that have a thread pool of their own (OpenMP, TBB, a game engine's job
 * system) pass that; this pool is for the others. It needs POSIX threads and C11 atomics:
 *
 *     #include "onnxcc_pool.h"
 *     onnxcc_pool *pool = onnxcc_pool_new(0);       // 0: one thread per online CPU
 *     int rc = model_run_par(inputs, outputs, arena, onnxcc_pool_parallel_for, pool);
 *     ...
 *     onnxcc_pool_free(pool);
 *
 *     cc app.c model.o onnxcc_pool.c -pthread
 *
 * A pool of n threads is the caller plus n - 1 workers; the caller runs tasks too. Between
 * parallel-fors the workers spin for a short while (ONNXCC_POOL_SPIN_US, default 200
 * microseconds), so that the next kernel finds them awake, and then sleep. One pool serves one
 * parallel-for at a time: calls from several threads at once take turns. The results of
 * NAME_run_par do not depend on the number of threads. */
#ifndef ONNXCC_POOL_H
#define ONNXCC_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct onnxcc_pool onnxcc_pool;

/* A pool of `threads` threads in all (0: as many as online CPUs), or NULL if no thread could be
 * created (the caller can then pass a NULL parallel-for: every kernel runs on its thread). */
onnxcc_pool *onnxcc_pool_new(int threads);
/* Stops and joins the workers and frees the pool. */
void onnxcc_pool_free(onnxcc_pool *pool);
/* The number of threads of the pool, the caller included. */
int onnxcc_pool_threads(const onnxcc_pool *pool);
/* The parallel-for of runtime/model.h.in's onnxcc_parallel_for, with ctx the pool: runs task(arg,
 * i) for i in 0..n-1 on the pool's threads and returns when all have returned. */
void onnxcc_pool_parallel_for(void *ctx, int n, void (*task)(void *arg, int i), void *arg);

#ifdef __cplusplus
}
#endif

#endif
