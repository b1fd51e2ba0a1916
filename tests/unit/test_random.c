/* test_random.c - the random generator of the training-mode ops (rule_philox, rule_uniform01
 * in passes/ops/helpers.c), which no ONNX test can check: their expected values come from
 * numpy's generator.
 *
 * - Philox-4x32-10 known answers (the published test vectors of Random123's kat_vectors for
 *   counter/key all zeros and all ones), through the interpreter and the compiled code;
 * - determinism: the compiled code at -O2 gives the interpreter's numbers bit for bit, twice;
 * - statistics of 2^16 uniforms of one key: mean and variance against 1/2 and 1/12 within
 *   5 standard errors, a chi-square over 64 bins below the 0.9999 quantile for 63 degrees of
 *   freedom (~ 114), and the lag-1 correlation within 5 standard errors of 0; another key gives
 *   other numbers.
 * Last line: "random: N passed, N failed". Build: see tests/run-all.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../backend/backend.h"
#include "../../passes/lower.h"
#include "../../passes/pipeline.h"

static int passed, failed;

static void check(bool ok, const char *what) {
    if (ok) passed++;
    else failed++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
}

enum { N = 1 << 16 };

/* out[i] = the uniform of counter i under key; words[c][0..4) = Philox of counter (c?~0:0)
 * words under key (c?~0:0) (the two known-answer cases). */
static Program *gen_prog(Arena *a, const char *name, uint64_t key, const Target *t) {
    Program *p = kir_program_new(a, name);
    p->arena_align = t->arena_align;
    p->vector_bytes = t->vector_bytes;
    int64_t dn = N, dw[2] = {2, 4};
    Buf *out = kir_buf_new(p, "u", DT_FLOAT, 1, &dn, B_OUTPUT);
    Buf *words = kir_buf_new(p, "words", DT_UINT64, 2, dw, B_OUTPUT);
    out->io_index = 0, words->io_index = 1;
    p->outputs = ARENA_ARRAY(a, Buf *, 2);
    p->outputs[0] = out, p->outputs[1] = words;
    p->noutputs = 2;

    Kernel *k = kir_kernel_new(p, "uniform", "Test", KC_GENERIC);
    kir_param(p, k, out, KP_OUT);
    int i = kir_var(k), w[4];
    Expr *ctr[4] = {kx_var(p, i), kx_index(p, 0), kx_index(p, 0), kx_index(p, 0)};
    Stmt *body = rule_philox(p, k, ctr, key, w);
    Expr *ix = kx_var(p, i);
    ks_seq(body, ks_store(p, out, &ix, rule_uniform01(p, k, w[0])));
    k->body = ks_loop(p, i, 0, N, 1, body);

    for (int c = 0; c < 2; c++) {
        Kernel *kk = kir_kernel_new(p, c ? "kat_ones" : "kat_zeros", "Test", KC_GENERIC);
        kir_param(p, kk, words, c ? KP_INOUT : KP_OUT);
        int64_t v = c ? 0xffffffffll : 0;
        Expr *cc[4] = {kx_int(p, DT_UINT64, v), kx_int(p, DT_UINT64, v), kx_int(p, DT_UINT64, v), kx_int(p, DT_UINT64, v)};
        Stmt *s = rule_philox(p, kk, cc, c ? ~0ull : 0, w);
        for (int j = 0; j < 4; j++) {
            Expr *wi[2] = {kx_index(p, c), kx_index(p, j)};
            ks_seq(s, ks_store(p, words, wi, kx_scalar(p, kk, w[j])));
        }
        kk->body = s;
    }
    kir_verify(p, "test_random");
    return p;
}

static void stats(const float *u, const char *what) {
    double sum = 0, sq = 0, lag = 0;
    int bins[64] = {0};
    for (int i = 0; i < N; i++) {
        sum += u[i];
        sq += (u[i] - 0.5) * (u[i] - 0.5);
        if (i) lag += (u[i] - 0.5) * (u[i - 1] - 0.5);
        bins[(int)(u[i] * 64)]++;
    }
    double mean = sum / N, var = sq / N, chi = 0;
    for (int b = 0; b < 64; b++) chi += (bins[b] - N / 64.0) * (bins[b] - N / 64.0) / (N / 64.0);
    double corr = lag / (N - 1) / (1.0 / 12);
    char m[160];
    bool in01 = true;
    for (int i = 0; i < N; i++) in01 &= u[i] >= 0 && u[i] < 1;
    snprintf(m, sizeof m, "%s: all in [0, 1)", what);
    check(in01, m);
    snprintf(m, sizeof m, "%s: mean %.5f (1/2 within 5 s.e. %.5f)", what, mean, 5 * sqrt(1.0 / 12 / N));
    check(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / N), m);
    /* the variance of (u - 1/2)^2 is 1/180 for a uniform */
    snprintf(m, sizeof m, "%s: variance %.5f (1/12 within 5 s.e. %.5f)", what, var, 5 * sqrt(1.0 / 180 / N));
    check(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / N), m);
    snprintf(m, sizeof m, "%s: chi-square %.1f over 64 bins (< 114)", what, chi);
    check(chi < 114, m);
    snprintf(m, sizeof m, "%s: lag-1 correlation %.4f (0 within %.4f)", what, corr, 5 / sqrt(N));
    check(fabs(corr) < 5 / sqrt(N), m);
}

int main(void) {
    char dir[] = "/tmp/onnxcc-test-random-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp");
    Arena *a = arena_new();
    Target host;
    be_target(&host, NULL, NULL, NULL, NULL);
    static float ui[N], uc[N], uc2[N], uo[N];
    static uint64_t wi[8], wc[8], wo[8];

    Program *p = gen_prog(a, "rnd", 42, &host);
    void *outs[2] = {ui, wi};
    kir_interpret(p, NULL, outs);
    static const uint64_t kat[8] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8,
                                    0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    check(!memcmp(wi, kat, sizeof kat), "Philox-4x32-10 known answers (interpreter)");
    stats(ui, "key 42");

    bufferize(p);
    const char *obj = arena_printf(a, "%s/rnd.o", dir);
    be_emit(p, &host, 2, EMIT_OBJ, obj);
    RunFn run = be_load_object(obj, p->name);
    void *arena = aligned_alloc((size_t)p->arena_align, (size_t)p->arena_align);
    outs[0] = uc, outs[1] = wc;
    int rc = run(NULL, outs, arena);
    check(rc == 0 && !memcmp(wc, kat, sizeof kat), "Philox-4x32-10 known answers (compiled, -O2)");
    check(!memcmp(uc, ui, sizeof ui), "compiled code gives the interpreter's numbers bit for bit");
    outs[0] = uc2;
    run(NULL, outs, arena);
    check(!memcmp(uc2, uc, sizeof uc), "a second run gives the same numbers");
    remove(obj);

    Program *q = gen_prog(a, "rnd7", 7, &host);
    outs[0] = uo, outs[1] = wo;
    kir_interpret(q, NULL, outs);
    int same = 0;
    for (int i = 0; i < N; i++) same += uo[i] == ui[i];
    char m[96];
    snprintf(m, sizeof m, "key 7 differs from key 42 (%d of %d equal)", same, N);
    check(same < N / 1000, m);
    stats(uo, "key 7");

    free(arena);
    be_target_free(&host);
    rmdir(dir);
    arena_free(a);
    printf("random: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
