/* test_bench.c - what `onnxcc bench` builds on: kir_kernel_cost (ir/kcost.c), the profile
 * instrumentation of profiled objects (Program.profile, backend/emit.c) and its absence from be_emit's objects.
 *
 * Programs are built by hand, so the expected counts come from the loop nests written here, not
 * from the code under test:
 * - a matmul C[M,N] = sum_k A[M,K] B[K,N] (acc + a*b in a reduction loop): M*N*K MACs, and
 *   the same count after schedule() has unrolled and jammed it (tails with N not a multiple of the
 *   tile); bytes = 4 * (M*K + K*N + M*N);
 * - a padded 1-d convolution whose loads are guarded by an if: the taps times the outputs, the
 *   padded ones included (the op-level count);
 * - a triangular loop (j < i), whose inner bound reads the outer variable: n(n-1)/2;
 * - y = x*2 + 1 (one MAC per element) and y = x + 1 (none).
 * Then the elementwise program is emitted both ways into a temporary directory: the normal object
 * has no NAME_profile symbol and no rdtsc (objdump -d, nm), the profiled one has both (so the
 * check can fail), and run through the loader its counter moves.
 * Last line: "bench: N passed, N failed[, N skipped]". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../backend/backend.h"
#include "../../passes/pipeline.h"

static int passed, failed, skipped;

static void check(bool ok, const char *fmt, long long got, long long want) {
    if (ok) passed++, printf("ok   ");
    else failed++, printf("FAIL ");
    printf(fmt, got, want);
    putchar('\n');
}

static Program *prog(Arena *a, const Target *t) {
    Program *p = kir_program_new(a, "tb");
    p->inputs = ARENA_ARRAY(a, Buf *, 4);
    p->outputs = ARENA_ARRAY(a, Buf *, 4);
    p->arena_align = t->arena_align;
    p->vector_bytes = t->vector_bytes;
    p->opt_level = 2;
    return p;
}

static Buf *io(Program *p, const char *name, int rank, const int64_t *dims, BufKind k) {
    Buf *b = kir_buf_new(p, name, DT_FLOAT, rank, dims, k);
    if (k == B_INPUT) b->io_index = p->ninputs, p->inputs[p->ninputs++] = b;
    if (k == B_OUTPUT) b->io_index = p->noutputs, p->outputs[p->noutputs++] = b;
    return b;
}

static Expr *ld2(Program *p, Buf *b, Expr *i, Expr *j) {
    Expr *idx[2] = {i, j};
    return kx_load(p, b, idx);
}

static Kernel *matmul(Program *p, int64_t m, int64_t kk, int64_t n) {
    Buf *A = io(p, "A", 2, (int64_t[]){m, kk}, B_INPUT), *B = io(p, "B", 2, (int64_t[]){kk, n}, B_INPUT);
    Buf *C = io(p, "C", 2, (int64_t[]){m, n}, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "mm", "MatMul", KC_CONTRACTION);
    kir_param(p, k, A, KP_IN), kir_param(p, k, B, KP_IN), kir_param(p, k, C, KP_OUT);
    int i = kir_var(k), j = kir_var(k), r = kir_var(k), acc = kir_scalar(p, k, DT_FLOAT);
    Stmt *red = ks_red_loop(p, r, kk, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
        kx_bin(p, K_MUL, ld2(p, A, kx_var(p, i), kx_var(p, r)), ld2(p, B, kx_var(p, r), kx_var(p, j))))));
    Expr *idx[2] = {kx_var(p, i), kx_var(p, j)};
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, DT_FLOAT, 0)), ks_seq(red, ks_store(p, C, idx, kx_scalar(p, k, acc))));
    k->body = ks_loop(p, i, 0, m, 1, ks_loop(p, j, 0, n, 1, body));
    return k;
}

static void test_matmul(Arena *a, const Target *t) {
    int64_t m = 7, kk = 33, n = 45, macs, bytes;
    Program *p = prog(a, t);
    Kernel *k = matmul(p, m, kk, n);
    kir_kernel_cost(k, &macs, &bytes);
    check(macs == m * n * kk, "matmul 7x33x45: %lld MACs, want %lld", macs, m * n * kk);
    check(bytes == 4 * (m * kk + kk * n + m * n), "matmul: %lld bytes, want %lld", bytes, 4 * (m * kk + kk * n + m * n));
    schedule(p);
    kir_kernel_cost(p->kernels[0], &macs, &bytes);
    check(macs == m * n * kk, "matmul after schedule: %lld MACs, want %lld", macs, m * n * kk);
}

/* y[o] = sum_t (0 <= o+t-P < W ? x[o+t-P] : skipped) * w[t], O = W outputs, T taps, pad P */
static void test_conv(Arena *a, const Target *t) {
    int64_t w = 20, taps = 5, pad = 2, macs, bytes;
    Program *p = prog(a, t);
    Buf *x = io(p, "x", 1, &w, B_INPUT), *wt = io(p, "w", 1, &taps, B_INPUT), *y = io(p, "y", 1, &w, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "conv", "Conv", KC_CONTRACTION);
    kir_param(p, k, x, KP_IN), kir_param(p, k, wt, KP_IN), kir_param(p, k, y, KP_OUT);
    int o = kir_var(k), tv = kir_var(k), acc = kir_scalar(p, k, DT_FLOAT);
    Expr *pos = kx_addc(p, kx_add(p, kx_var(p, o), kx_var(p, tv)), -pad);
    Expr *in = kx_and(p, kx_bin(p, K_GE, pos, kx_index(p, 0)), kx_bin(p, K_LT, kx_clone(p, pos), kx_index(p, w)));
    Expr *xi[1] = {kx_clone(p, pos)}, *wi[1] = {kx_var(p, tv)}, *yi[1] = {kx_var(p, o)};
    Stmt *mac = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
                                       kx_bin(p, K_MUL, kx_load(p, x, xi), kx_load(p, wt, wi))));
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, DT_FLOAT, 0)),
                        ks_seq(ks_red_loop(p, tv, taps, ks_if(p, in, mac, NULL)), ks_store(p, y, yi, kx_scalar(p, k, acc))));
    k->body = ks_loop(p, o, 0, w, 1, body);
    kir_kernel_cost(k, &macs, &bytes);
    check(macs == w * taps, "padded conv: %lld MACs, want %lld", macs, w * taps);
}

static void test_triangle(Arena *a, const Target *t) {
    int64_t n = 10, macs, bytes;
    Program *p = prog(a, t);
    Buf *x = io(p, "x", 1, &n, B_INPUT), *y = io(p, "y", 1, &n, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "tri", "CumSum", KC_GENERIC);
    kir_param(p, k, x, KP_IN), kir_param(p, k, y, KP_OUT);
    int i = kir_var(k), j = kir_var(k), acc = kir_scalar(p, k, DT_FLOAT);
    Expr *xj[1] = {kx_var(p, j)}, *yi[1] = {kx_var(p, i)};
    Stmt *inner = ks_loop(p, j, 0, 1, 1, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
                                                     kx_bin(p, K_MUL, kx_load(p, x, xj), kx_load(p, x, xj)))));
    inner->hi = kx_var(p, i);       /* for j < i */
    k->body = ks_loop(p, i, 0, n, 1, ks_seq(ks_set(p, acc, kx_const(p, DT_FLOAT, 0)),
                                            ks_seq(inner, ks_store(p, y, yi, kx_scalar(p, k, acc)))));
    kir_kernel_cost(k, &macs, &bytes);
    check(macs == n * (n - 1) / 2, "triangular loop: %lld MACs, want %lld", macs, n * (n - 1) / 2);
}

/* y = x*2 + 1 (fma true) or x + 1 */
static Program *axpb(Arena *a, const Target *t, int64_t n, bool fma) {
    Program *p = prog(a, t);
    Buf *x = io(p, "x", 1, &n, B_INPUT), *y = io(p, "y", 1, &n, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "axpb", "Mul+Add", KC_ELEMENTWISE);
    kir_param(p, k, x, KP_IN), kir_param(p, k, y, KP_OUT);
    int i = kir_var(k);
    Expr *xi[1] = {kx_var(p, i)}, *yi[1] = {kx_var(p, i)};
    Expr *v = kx_load(p, x, xi);
    if (fma) v = kx_bin(p, K_MUL, v, kx_const(p, DT_FLOAT, 2));
    k->body = ks_loop(p, i, 0, n, 1, ks_store(p, y, yi, kx_bin(p, K_ADD, v, kx_const(p, DT_FLOAT, 1))));
    return p;
}

/* Count of lines of `cmd`'s output matching the extended regex re. */
static int count(const char *cmd, const char *re) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s 2>/dev/null | grep -c -E '%s'", cmd, re);
    FILE *f = popen(buf, "r");
    int n = -1;
    if (!f || fscanf(f, "%d", &n) != 1) n = -1;
    if (f) pclose(f);
    return n;
}

static void test_profile(Arena *a, const Target *t) {
    int64_t n = 1000, macs, bytes;
    Program *p = axpb(a, t, n, true);
    kir_kernel_cost(p->kernels[0], &macs, &bytes);
    check(macs == n, "x*2+1: %lld MACs, want %lld", macs, n);
    check(bytes == 8 * n, "x*2+1: %lld bytes, want %lld", bytes, 8 * n);
    Program *q = axpb(a, t, n, false);
    kir_kernel_cost(q->kernels[0], &macs, &bytes);
    check(macs == 0, "x+1: %lld MACs, want %lld", macs, 0);

    if (system("command -v objdump >/dev/null && command -v nm >/dev/null") != 0) {
        printf("skip profile instrumentation: no objdump/nm\n");
        skipped++;
        return;
    }
    char dir[] = "/tmp/onnxcc-test-bench-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp");
    const char *plain = arena_printf(a, "%s/plain.o", dir), *prof = arena_printf(a, "%s/prof.o", dir);
    bufferize(p);
    be_emit(p, t, 2, EMIT_OBJ, plain);
    p->profile = true;
    be_emit(p, t, 2, EMIT_OBJ, prof);
    p->profile = false;
    const char *what[2] = {plain, prof};
    for (int w = 0; w < 2; w++) {
        int sym = count(arena_printf(a, "nm %s", what[w]), " tb_profile$");
        int rdtsc = count(arena_printf(a, "objdump -d %s", what[w]), "\\<rdtscp?\\>");
        int want = w ? 1 : 0;
        check(sym == want, w ? "profiled object: %lld tb_profile symbols, want %lld"
                             : "normal object: %lld tb_profile symbols, want %lld", sym, want);
#if defined(__x86_64__) || defined(__i386__)   /* llvm.readcyclecounter is rdtsc there */
        check(w ? rdtsc >= 2 : rdtsc == 0, w ? "profiled object: %lld rdtsc, want >= %lld"
                                              : "normal object: %lld rdtsc, want %lld", rdtsc, w ? 2 : 0);
#else
        (void)rdtsc;
#endif
    }
    RunFn run = be_load_object(prof, "tb");
    uint64_t *counters = be_loaded_symbol("tb_profile");
    float *x = calloc((size_t)n, 4), *y = calloc((size_t)n, 4);
    const void *in[1] = {x};
    void *out[1] = {y};
    int rc = run(in, out, NULL);
    check(rc == 0 && counters && counters[0] > 0, "profiled run: counter %lld ticks, want > %lld",
          counters ? (long long)counters[0] : -1, 0);
    check(y[0] == 1.0f, "profiled run: y[0] = %lld, want %lld", (long long)y[0], 1);
    free(x), free(y);
    unlink(plain), unlink(prof), rmdir(dir);
}

int main(void) {
    Arena *a = arena_new();
    Target t;
    be_target(&t, NULL, NULL, NULL, NULL);
    test_matmul(a, &t);
    test_conv(a, &t);
    test_triangle(a, &t);
    test_profile(a, &t);
    be_target_free(&t);
    arena_free(a);
    printf("bench: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed != 0;
}
