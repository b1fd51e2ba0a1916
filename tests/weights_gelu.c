/* weights_gelu.c - the constants of an --emit-weights blob are read at run time, never folded
 * into the code (tests/weights.sh builds it): a GELU as exported, y = x * (erf(x / r2) + one)
 * * half, whose `erf(..) + one` the backend computes in one when `one` is a folded 1
 * (backend/kernel.c, erf_plus_one). Its blob (argv[1]) is run as written and with `one` set
 * to 2; each output is compared with the formula in double. The model's name is "g" and its
 * weights r2, one, half, in that order. Prints "ok ..." or "FAIL ..."; exit status 1 on any
 * FAIL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "g.h"

#define N 4000

static int failures;

static int run(unsigned char *blob, float one, const char *what) {
    static float x[N], y[N];
    memcpy(blob + g_WEIGHT_1_OFFSET, &one, sizeof one);
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    const void *in[1] = {x};
    void *out[1] = {y};
    int rc = g_run_w(in, out, NULL, blob);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double want = x[i] * (erf(x[i] / sqrt(2.0)) + one) * 0.5;
        worst = fmax(worst, fabs(y[i] - want) / fmax(1.0, fabs(want)));
    }
    int ok = rc == g_OK && worst < 1e-5;
    printf("%s %s (rc %d, worst error %.2g)\n", ok ? "ok  " : "FAIL", what, rc, worst);
    failures += !ok;
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: weights_gelu BLOB\n"), 2;
    FILE *f = fopen(argv[1], "rb");
    unsigned char *blob = aligned_alloc(g_WEIGHTS_ALIGN, (g_WEIGHTS_SIZE + g_WEIGHTS_ALIGN - 1) / g_WEIGHTS_ALIGN * g_WEIGHTS_ALIGN);
    if (!f || !blob || fread(blob, 1, g_WEIGHTS_SIZE, f) != g_WEIGHTS_SIZE) return fprintf(stderr, "cannot read %s\n", argv[1]), 2;
    fclose(f);
    run(blob, 1.0f, "gelu --emit-weights: the blob as written");
    run(blob, 2.0f, "gelu --emit-weights: `one` set to 2 in the blob");
    free(blob);
    return failures != 0;
}
