/* peak.c - this core's float multiply-add peak, for the "% of peak" columns of `make bench`
 * (tests/bench.sh runs it once per round, interleaved with the models, and keeps the best).
 *
 * CHAINS independent accumulators, each updated acc = acc * x + y by one FMA per iteration, on
 * the widest vectors the CPU has (checked at run time): AVX-512 (24 of the 32 zmm registers),
 * else AVX2+FMA (12 of 16 ymm), else SSE multiply and add. Enough independent chains hide the
 * FMA latency (4 cycles on two units needs 8), so the loop runs at the units' throughput.
 * Prints "GFLOPS VECTOR_BITS": the best of single ~2 ms calls over about 0.2 s, 2 FLOP per lane
 * per FMA. onnxcc bench measures the same with a loop it JIT-compiles (backend/peak.c). */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define BUDGET_S 0.2

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Each returns a sum of its accumulators, so that nothing is dead; flops = 2 * lanes * chains * n */
__attribute__((target("avx512f"))) static float fma512(long n)
{
    __m512 acc[24], x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(1e-4f);
#pragma GCC unroll 24
    for (int c = 0; c < 24; c++)
        acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 24
        for (int c = 0; c < 24; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], x, y);
    }
    for (int c = 1; c < 24; c++)
        acc[0] = _mm512_add_ps(acc[0], acc[c]);
    return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) static float fma256(long n)
{
    __m256 acc[12], x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(1e-4f);
#pragma GCC unroll 12
    for (int c = 0; c < 12; c++)
        acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int c = 0; c < 12; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], x, y);
    }
    float s[8], t = 0;
    for (int c = 1; c < 12; c++)
        acc[0] = _mm256_add_ps(acc[0], acc[c]);
    _mm256_storeu_ps(s, acc[0]);
    for (int l = 0; l < 8; l++)
        t += s[l];
    return t;
}

static float mad128(long n)
{
    __m128 acc[12], x = _mm_set1_ps(0.9999f), y = _mm_set1_ps(1e-4f);
#pragma GCC unroll 12
    for (int c = 0; c < 12; c++)
        acc[c] = _mm_set1_ps((float)c);
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int c = 0; c < 12; c++)
            acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], x), y);
    }
    float s[4], t = 0;
    for (int c = 1; c < 12; c++)
        acc[0] = _mm_add_ps(acc[0], acc[c]);
    _mm_storeu_ps(s, acc[0]);
    for (int l = 0; l < 4; l++)
        t += s[l];
    return t;
}

int main(void)
{
    float (*fn)(long) = mad128;
    int bits = 128, chains = 12;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        fn = fma512, bits = 512, chains = 24;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fn = fma256, bits = 256;

    long n = 1000;
    volatile float sink = 0;
    double t0 = now(), dt;
    while ((sink += fn(n), dt = now() - t0) < 2e-3)     /* ~2 ms per call */
        n *= 2, t0 = now();
    double best = dt, end = now() + BUDGET_S;
    while (now() < end) {
        t0 = now();
        sink += fn(n);
        dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    (void)sink;
    printf("%.1f %d\n", 2.0 * bits / 32 * chains * (double)n / best / 1e9, bits);
    return 0;
}
