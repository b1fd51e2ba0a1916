/* test_kir.c - unit tests of the kernel IR infrastructure and the loop-level passes.
 *
 * Hand-built programs (the shapes lowering produces: a matmul, a padded convolution, chains
 * of elementwise kernels) are run through the interpreter before and after fuse, schedule and
 * bufferize; results must be bitwise identical (the passes never reorder arithmetic). The
 * arena plan is checked independently of kir_verify, the verifier is shown to reject broken
 * kernels, and the text form is compared with a golden string. Last line:
 * "kir: N passed, N failed".
 *
 * Build (no op table needed):
 *   cc -std=c11 -Iir -Ibuild/gen tests/unit/test_kir.c build/ir/{kir,util,ir,kprint,kverify,kinterp}.o
 *      build/passes/{fuse,schedule,loops,bufferize}.o -lm -o build/test_kir */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../passes/loops.h"
#include "../../passes/pipeline.h"

/* ir.o refers to the op table; these tests never look at it. */
const OpInfo op_info[OP_COUNT];

static int passed, failed;

static void check(bool ok, const char *what) {
    if (ok) passed++;
    else { failed++; printf("FAIL: %s\n", what); }
}

/* ---- building blocks ---- */
static Expr *v(Program *p, int var) { return kx_var(p, var); }

static Expr *load2(Program *p, Buf *b, Expr *a, Expr *c) {
    Expr *idx[2] = {a, c};
    return kx_load(p, b, idx);
}

static Stmt *store2(Program *p, Buf *b, Expr *a, Expr *c, Expr *val) {
    Expr *idx[2] = {a, c};
    return ks_store(p, b, idx, val);
}

/* out[i,j] = f(in[i,j], other[bcast]) over a rank-2 shape: the lower_map form. */
static Kernel *ew2(Program *p, const char *name, const char *ops, Buf *out, Buf *in, KOp op,
                   Buf *other, Expr *c) {
    Kernel *k = kir_kernel_new(p, name, ops, KC_ELEMENTWISE);
    int i = kir_var(k), j = kir_var(k);
    kir_param(p, k, in, KP_IN);
    Expr *a = load2(p, in, v(p, i), v(p, j)), *b = c;
    if (other) {
        kir_param(p, k, other, KP_IN);
        Expr *idx[1] = {v(p, j)};
        b = kx_load(p, other, idx);
    }
    if (!b) b = kx_clone(p, a);                 /* in op in: the input used twice */
    kir_param(p, k, out, KP_OUT);
    k->body = ks_loop(p, i, 0, out->dims[0], 1,
                      ks_loop(p, j, 0, out->dims[1], 1,
                              store2(p, out, v(p, i), v(p, j), kx_bin(p, op, a, b))));
    return k;
}

static void fill(Buf *b, void *data, unsigned seed) {
    int64_t n = kir_numel(b);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        int val = (int)((seed >> 16) % 11) - 5;
        if (b->dtype == DT_FLOAT) ((float *)data)[i] = (float)val * 0.37f;
        else ((int32_t *)data)[i] = val;
    }
}

/* ---- programs ---- */
typedef struct Prog {
    Program *p;
    void *in;
    size_t out_bytes;
} Prog;

/* Y = relu(A @ W + bias): A input [M,K], W [K,N] and bias [N] constants. */
static Prog matmul_prog(Arena *a, DType t, int64_t m, int64_t kk, int64_t n) {
    Program *p = kir_program_new(a, "mm");
    int64_t da[2] = {m, kk}, dw[2] = {kk, n}, db[1] = {n}, dy[2] = {m, n};
    Buf *A = kir_buf_new(p, "A", t, 2, da, B_INPUT);
    Buf *W = kir_buf_new(p, "W", t, 2, dw, B_CONST);
    Buf *bias = kir_buf_new(p, "bias", t, 1, db, B_CONST);
    Buf *t1 = kir_buf_new(p, "t1", t, 2, dy, B_TEMP);
    Buf *t2 = kir_buf_new(p, "t2", t, 2, dy, B_TEMP);
    Buf *Y = kir_buf_new(p, "Y", t, 2, dy, B_OUTPUT);
    void *w = arena_alloc(a, (size_t)(kk * n) * 4), *bb = arena_alloc(a, (size_t)n * 4);
    fill(W, w, 7);
    fill(bias, bb, 9);
    W->data = w;
    bias->data = bb;
    p->ninputs = p->noutputs = 1;
    p->inputs = ARENA_ARRAY(a, Buf *, 1);
    p->outputs = ARENA_ARRAY(a, Buf *, 1);
    p->inputs[0] = A;
    p->outputs[0] = Y;

    Kernel *k = kir_kernel_new(p, "matmul", "MatMul", KC_CONTRACTION);
    int i = kir_var(k), j = kir_var(k), r = kir_var(k), acc = kir_scalar(p, k, t);
    kir_param(p, k, A, KP_IN);
    kir_param(p, k, W, KP_IN);
    kir_param(p, k, t1, KP_OUT);
    Expr *prod = kx_bin(p, K_MUL, load2(p, A, v(p, i), v(p, r)), load2(p, W, v(p, r), v(p, j)));
    Stmt *red = ks_loop(p, r, 0, kk, 1, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod)));
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, t, 0)),
                        ks_seq(red, store2(p, t1, v(p, i), v(p, j), kx_scalar(p, k, acc))));
    k->body = ks_loop(p, i, 0, m, 1, ks_loop(p, j, 0, n, 1, body));
    ew2(p, "add", "Add", t2, t1, K_ADD, bias, NULL);
    ew2(p, "relu", "Relu", Y, t2, K_MAX, NULL, kx_const(p, t, 0));

    Prog r0 = {p, arena_alloc(a, (size_t)(m * kk) * 4), (size_t)(m * n) * 4};
    fill(A, r0.in, 3);
    return r0;
}

static Expr *in_range(Program *p, Expr *x, int64_t hi) {
    return kx_bin(p, K_AND, kx_bin(p, K_GE, x, kx_index(p, 0)), kx_bin(p, K_LT, kx_clone(p, x), kx_index(p, hi)));
}

/* 3x3 convolution with padding 1 (guarded by an if) storing acc + 1, then y = -(t*t + t): the
 * square reads the convolution's result three times (fusion keeps it in a register), the
 * negation chains. */
static Prog conv_prog(Arena *a, DType t, int64_t c, int64_t co, int64_t h, int64_t w) {
    Program *p = kir_program_new(a, "conv");
    int64_t dx[4] = {1, c, h, w}, dw[4] = {co, c, 3, 3}, dy[4] = {1, co, h, w};
    Buf *X = kir_buf_new(p, "X", t, 4, dx, B_INPUT);
    Buf *Wt = kir_buf_new(p, "Wt", t, 4, dw, B_CONST);
    Buf *t1 = kir_buf_new(p, "t1", t, 4, dy, B_TEMP);
    Buf *t2 = kir_buf_new(p, "t2", t, 4, dy, B_TEMP);
    Buf *Y = kir_buf_new(p, "Y", t, 4, dy, B_OUTPUT);
    void *wd = arena_alloc(a, (size_t)kir_numel(Wt) * 4);
    fill(Wt, wd, 5);
    Wt->data = wd;
    p->ninputs = p->noutputs = 1;
    p->inputs = ARENA_ARRAY(a, Buf *, 1);
    p->outputs = ARENA_ARRAY(a, Buf *, 1);
    p->inputs[0] = X;
    p->outputs[0] = Y;

    Kernel *k = kir_kernel_new(p, "conv1", "Conv", KC_CONTRACTION);
    int vn = kir_var(k), vo = kir_var(k), vh = kir_var(k), vw = kir_var(k);
    int vc = kir_var(k), kh = kir_var(k), kw = kir_var(k), acc = kir_scalar(p, k, t);
    kir_param(p, k, X, KP_IN);
    kir_param(p, k, Wt, KP_IN);
    kir_param(p, k, t1, KP_OUT);
    Expr *y = kx_addc(p, kx_add(p, v(p, vh), v(p, kh)), -1), *x = kx_addc(p, kx_add(p, v(p, vw), v(p, kw)), -1);
    Expr *xi[4] = {v(p, vn), v(p, vc), y, x}, *wi[4] = {v(p, vo), v(p, vc), v(p, kh), v(p, kw)};
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, X, xi), kx_load(p, Wt, wi));
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod));
    Expr *cond = kx_bin(p, K_AND, in_range(p, kx_clone(p, y), h), in_range(p, kx_clone(p, x), w));
    Stmt *red = ks_loop(p, vc, 0, c, 1, ks_loop(p, kh, 0, 3, 1, ks_loop(p, kw, 0, 3, 1, ks_if(p, cond, upd, NULL))));
    Expr *oi[4] = {v(p, vn), v(p, vo), v(p, vh), v(p, vw)};
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, t, 0)), ks_seq(red, ks_store(p, t1, oi, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_const(p, t, 1)))));
    k->body = ks_loop(p, vn, 0, 1, 1, ks_loop(p, vo, 0, co, 1, ks_loop(p, vh, 0, h, 1, ks_loop(p, vw, 0, w, 1, body))));

    /* The two elementwise kernels, rank 4. */
    for (int e = 0; e < 2; e++) {
        Buf *in = e ? t2 : t1, *out = e ? Y : t2;
        Kernel *q = kir_kernel_new(p, e ? "neg" : "square", e ? "Neg" : "Mul+Add", KC_ELEMENTWISE);
        int vs[4];
        Expr *ix[4];
        for (int d = 0; d < 4; d++) { vs[d] = kir_var(q); ix[d] = v(p, vs[d]); }
        kir_param(p, q, in, KP_IN);
        kir_param(p, q, out, KP_OUT);
        Expr *l = kx_load(p, in, ix);
        Expr *val = e ? kx_un(p, K_NEG, l)
                      : kx_bin(p, K_ADD, kx_bin(p, K_MUL, l, kx_clone(p, l)), kx_clone(p, l));
        Stmt *s = ks_store(p, out, ix, val);
        for (int d = 3; d >= 0; d--) s = ks_loop(p, vs[d], 0, dy[d], 1, s);
        q->body = s;
    }
    Prog r0 = {p, arena_alloc(a, (size_t)kir_numel(X) * 4), (size_t)kir_numel(Y) * 4};
    fill(X, r0.in, 11);
    return r0;
}

/* ---- checks ---- */
static void *run(Prog *g) {
    const void *ins[1] = {g->in};
    void *res = calloc(g->out_bytes, 1);
    void *outs[1] = {res};
    kir_interpret(g->p, ins, outs);
    return res;
}

static int count_live(const Program *p) {
    int n = 0;
    for (int i = 0; i < p->nkernels; i++) n += !p->kernels[i]->dead;
    return n;
}

static bool find_hint(const Stmt *s, unsigned h) {
    for (; s; s = s->next)
        if ((s->kind == S_LOOP && (s->hints & h)) || find_hint(s->body, h) || find_hint(s->then, h) ||
            find_hint(s->els, h))
            return true;
    return false;
}

/* Independent check of the arena plan: buffers live at once never share bytes, except an
 * in-place pair (same place, one dying where the other is born). */
static bool plan_ok(const Program *p) {
    for (int i = 0; i < p->nbufs; i++)
        for (int j = 0; j < i; j++) {
            Buf *a = p->bufs[i], *b = p->bufs[j];
            if (a->kind != B_TEMP || b->kind != B_TEMP || a->alias || b->alias) continue;
            if (a->first < 0 || b->first < 0 || !kir_nbytes(a) || !kir_nbytes(b)) continue;
            if (a->offset < 0 || a->offset + (int64_t)kir_nbytes(a) > p->arena_size) return false;
            bool live = a->first <= b->last && b->first <= a->last;
            bool overlap = a->offset < b->offset + (int64_t)kir_nbytes(b) &&
                           b->offset < a->offset + (int64_t)kir_nbytes(a);
            bool inplace = a->offset == b->offset && (a->first == b->last || b->first == a->last);
            if (live && overlap && !inplace) return false;
        }
    return true;
}

/* Every pass, in order, must keep the program's result bitwise. */
static void pipeline_case(const char *name, Prog g, int kernels_after_fuse) {
    char what[128];
    Program *p = g.p;
    kir_verify(p, "build");
    void *ref = run(&g);
    fuse(p);
    kir_verify(p, "fuse");
    snprintf(what, sizeof what, "%s: fuse leaves %d kernel(s)", name, kernels_after_fuse);
    check(count_live(p) == kernels_after_fuse, what);
    void *r1 = run(&g);
    snprintf(what, sizeof what, "%s: same result after fuse", name);
    check(!memcmp(ref, r1, g.out_bytes), what);
    schedule(p);
    kir_verify(p, "schedule");
    snprintf(what, sizeof what, "%s: schedule jams the output loop", name);
    check(find_hint(p->kernels[0]->body, LH_TILE) && find_hint(p->kernels[0]->body, LH_REDUCTION), what);
    void *r2 = run(&g);
    snprintf(what, sizeof what, "%s: same result after schedule", name);
    check(!memcmp(ref, r2, g.out_bytes), what);
    bufferize(p);
    kir_verify(p, "bufferize");
    void *r3 = run(&g);
    snprintf(what, sizeof what, "%s: same result after bufferize", name);
    check(!memcmp(ref, r3, g.out_bytes), what);
    if (getenv("KIR_PRINT")) kir_print(stdout, p);
    free(ref), free(r1), free(r2), free(r3);
}

static void test_passes(Arena *a) {
    pipeline_case("matmul int32 3x5x37", matmul_prog(a, DT_INT32, 3, 5, 37), 1);
    pipeline_case("matmul float 4x9x16", matmul_prog(a, DT_FLOAT, 4, 9, 16), 1);
    pipeline_case("matmul float 2x3x7", matmul_prog(a, DT_FLOAT, 2, 3, 7), 1);
    pipeline_case("conv int32 2->3 6x7", conv_prog(a, DT_INT32, 2, 3, 6, 7), 1);
    pipeline_case("conv float 3->2 5x21", conv_prog(a, DT_FLOAT, 3, 2, 5, 21), 1);
}

static void test_no_tiling_below_o2(Arena *a) {
    Prog g = matmul_prog(a, DT_FLOAT, 2, 3, 40);
    g.p->opt_level = 1;
    schedule(g.p);
    check(!find_hint(g.p->kernels[0]->body, LH_TILE | LH_REDUCTION), "-O1: schedule changes nothing");
}

/* Vector reductions (tile): a softmax row's max and sum over 64 floats become
 * [reduction, vector] at -O2 with 16-byte vectors, and stay scalar at --fp-strict; a sum
 * down a column (no operand contiguous along the loop) stays scalar either way. The
 * interpreter runs them in order, so results stay bitwise. Not at --fp-strict, the two rows
 * are first jammed into one iteration (row_jam). */
static Prog softmax_sums(Arena *a) {
    Program *p = kir_program_new(a, "sm");
    int64_t dx[2] = {2, 64}, dy[2] = {2, 2};
    Buf *X = kir_buf_new(p, "X", DT_FLOAT, 2, dx, B_INPUT), *Y = kir_buf_new(p, "Y", DT_FLOAT, 2, dy, B_OUTPUT);
    p->ninputs = p->noutputs = 1;
    p->inputs = ARENA_ARRAY(a, Buf *, 1);
    p->outputs = ARENA_ARRAY(a, Buf *, 1);
    p->inputs[0] = X;
    p->outputs[0] = Y;
    Kernel *k = kir_kernel_new(p, "softmax", "Softmax", KC_GENERIC);
    kir_param(p, k, X, KP_IN);
    kir_param(p, k, Y, KP_OUT);
    int i = kir_var(k), j = kir_var(k), l = kir_var(k), c = kir_var(k);
    int m = kir_scalar(p, k, DT_FLOAT), sm = kir_scalar(p, k, DT_FLOAT), col = kir_scalar(p, k, DT_FLOAT);
    Stmt *b = ks_set(p, m, kx_const(p, DT_FLOAT, -INFINITY));
    ks_seq(b, ks_loop(p, j, 0, 64, 1, ks_set(p, m, kx_bin(p, K_MAX, kx_scalar(p, k, m), load2(p, X, v(p, i), v(p, j))))));
    ks_seq(b, ks_set(p, sm, kx_const(p, DT_FLOAT, 0)));
    Expr *e = kx_un(p, K_EXP, kx_bin(p, K_SUB, load2(p, X, v(p, i), v(p, l)), kx_scalar(p, k, m)));
    ks_seq(b, ks_loop(p, l, 0, 64, 1, ks_set(p, sm, kx_bin(p, K_ADD, kx_scalar(p, k, sm), e))));
    ks_seq(b, store2(p, Y, v(p, i), kx_index(p, 0), kx_scalar(p, k, sm)));
    ks_seq(b, ks_set(p, col, kx_const(p, DT_FLOAT, 0)));
    ks_seq(b, ks_loop(p, c, 0, 2, 1, ks_set(p, col, kx_bin(p, K_ADD, kx_scalar(p, k, col), load2(p, X, v(p, c), v(p, i))))));
    ks_seq(b, store2(p, Y, v(p, i), kx_index(p, 1), kx_scalar(p, k, col)));
    k->body = ks_loop(p, i, 0, 2, 1, b);
    Prog g = {p, arena_alloc(a, 2 * 64 * 4), 2 * 2 * 4};
    fill(X, g.in, 5);
    return g;
}

static void test_reduction_policy(Arena *a) {
    for (int strict = 0; strict < 2; strict++) {
        Prog g = softmax_sums(a);
        g.p->vector_bytes = 16;
        g.p->fp_strict = strict;
        void *ref = run(&g);
        schedule(g.p);
        kir_verify(g.p, "schedule");
        /* the row loop's body (its two rows jammed into one when not strict: row_jam) */
        Stmt *outer = g.p->kernels[0]->body;
        unsigned rv = LH_REDUCTION | LH_VECTOR;
        int rows = 0, column = 0, other = 0;
        for (Stmt *s = outer->body; s; s = s->next) {
            if (s->kind != S_LOOP) continue;
            if (trips(s) == 64 && (s->hints & rv) == rv) rows++;
            else if (trips(s) == 2 && (s->hints & rv) == LH_REDUCTION) column++;
            else other++;
        }
        void *got = run(&g);
        check(strict ? !find_hint(g.p->kernels[0]->body, LH_VECTOR) : rows == 2 && column == 1 && !other,
              strict ? "schedule --fp-strict: no vector reductions"
                     : "schedule: a softmax row's max and sum are vector reductions, a column sum is not");
        check(strict ? !outer->next && outer->step == 1 && !outer->hints
                     : !outer->next && outer->step == 2 && (outer->hints & LH_TILE),
              strict ? "schedule --fp-strict: the rows are not jammed"
                     : "schedule: the two rows are jammed into one iteration (row_jam)");
        check(!memcmp(ref, got, g.out_bytes), "schedule: vector reductions: same interpreted result");
        free(ref), free(got);
    }
}

/* A temporary read by two consumers, or written by a kernel between producer and consumer,
 * must not be fused. */
static void test_fuse_refusals(Arena *a) {
    Prog g = matmul_prog(a, DT_INT32, 2, 3, 5);
    Program *p = g.p;
    Buf *t1 = p->bufs[3], *Y = p->outputs[0];
    int64_t dy[2] = {2, 5};
    Buf *t3 = kir_buf_new(p, "t3", DT_INT32, 2, dy, B_TEMP);
    Kernel *extra = ew2(p, "other", "Neg", t3, t1, K_SUB, NULL, kx_const(p, DT_INT32, 1));
    (void)extra;
    (void)Y;
    fuse(p);
    check(count_live(p) == 3, "fuse: a temporary with two readers stays (add+relu fuse, matmul stays)");
}

/* Elementwise chain with a view: in-place reuse and overlap-free placement. */
static void test_bufferize(Arena *a) {
    Program *p = kir_program_new(a, "chain");
    int64_t d[2] = {4, 6}, dv[2] = {6, 4};
    Buf *X = kir_buf_new(p, "X", DT_INT32, 2, d, B_INPUT);
    Buf *t1 = kir_buf_new(p, "t1", DT_INT32, 2, d, B_TEMP);
    Buf *t2 = kir_buf_new(p, "t2", DT_INT32, 2, d, B_TEMP);
    Buf *t3 = kir_buf_new(p, "t3", DT_INT32, 2, d, B_TEMP);
    Buf *t2v = kir_view_new(p, t2, "t2v", 2, dv);
    Buf *t4 = kir_buf_new(p, "t4", DT_INT32, 2, dv, B_TEMP);
    Buf *dead = kir_buf_new(p, "dead", DT_INT32, 2, d, B_TEMP);
    Buf *Y = kir_buf_new(p, "Y", DT_INT32, 2, dv, B_OUTPUT);
    p->ninputs = p->noutputs = 1;
    p->inputs = ARENA_ARRAY(a, Buf *, 1);
    p->outputs = ARENA_ARRAY(a, Buf *, 1);
    p->inputs[0] = X;
    p->outputs[0] = Y;
    p->arena_align = 64;
    ew2(p, "k0", "Mul", t1, X, K_MUL, NULL, kx_const(p, DT_INT32, 3));
    ew2(p, "k1", "Add", t2, t1, K_ADD, NULL, kx_const(p, DT_INT32, 1));    /* t1 dies: in place */
    ew2(p, "k2", "Mul", t3, t2, K_MUL, NULL, NULL);                        /* t2 lives on (view) */
    /* Never read: a write-only temporary still needs its own bytes while written. */
    ew2(p, "k3", "Sub", dead, X, K_SUB, NULL, kx_const(p, DT_INT32, 2));
    ew2(p, "k4", "Add", t4, t2v, K_ADD, NULL, kx_const(p, DT_INT32, 5));
    ew2(p, "k5", "Sub", Y, t4, K_SUB, NULL, NULL);
    kir_verify(p, "build");
    int32_t in[24], ref[24], out[24];
    for (int i = 0; i < 24; i++) in[i] = i * 7 - 40;
    const void *ins[1] = {in};
    void *o1[1] = {ref}, *o2[1] = {out};
    kir_interpret(p, ins, o1);
    bufferize(p);
    kir_verify(p, "bufferize");
    kir_interpret(p, ins, o2);
    check(!memcmp(ref, out, sizeof ref), "bufferize: same result from the arena");
    check(plan_ok(p), "bufferize: live temporaries never share bytes");
    check(t2->offset == t1->offset, "bufferize: elementwise output reuses its dying input");
    check(t3->offset != t2->offset, "bufferize: no reuse of an input that lives on");
    check(t2->last == 4, "bufferize: a view extends its root's live range");
    check(p->arena_size > 0 && p->arena_size % 64 == 0, "bufferize: arena size aligned");
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i]->kind == B_TEMP && !p->bufs[i]->alias) check(p->bufs[i]->offset % 64 == 0, "bufferize: offsets aligned");
    Program *e = kir_program_new(a, "empty");
    bufferize(e);
    check(e->arena_size == 0, "bufferize: no temporaries, no arena");
}

/* The verifier must die on a broken kernel (run in a child process). */
static bool verify_dies(Program *p) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(0);
        kir_verify(p, "test");
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Vector loops (LH_VECTOR): the matmul's j loop (2 lanes) around acc = 0; for k: acc += ... */
static void test_vector_verifier(Program *p) {
    Kernel *mm = p->kernels[0];
    Stmt *iloop = mm->body, *jloop = iloop->body, *set = jloop->body, *red = set->next;
    jloop->hints = LH_VECTOR;
    check(!verify_dies(p), "verify: vector loop with a lane-private accumulator passes");
    iloop->hints = LH_VECTOR;
    check(verify_dies(p), "verify: vector loop nested in a vector loop");
    iloop->hints = 0;
    jloop->hi = kx_index(p, 1);
    check(verify_dies(p), "verify: vector loop of one lane");
    jloop->hi = kx_index(p, 2);
    jloop->body = red;                            /* acc read before it is set */
    check(verify_dies(p), "verify: vector loop reading a private register before setting it");
    jloop->body = set;
    Stmt *saved = red->next;
    red->next = ks_store(p, mm->params[2], (Expr *[]){kx_var(p, iloop->var), kx_var(p, jloop->var)},
                         kx_scalar(p, mm, 0));
    jloop->next = NULL;
    iloop->body = ks_seq(jloop, ks_loop(p, kir_var(mm), 0, 1, 1, ks_set(p, 0, kx_scalar(p, mm, 0))));
    check(verify_dies(p), "verify: a lane-private register read after the vector loop");
    red->next = saved;
    iloop->body = jloop;
    jloop->next = NULL;
    set->next = ks_if(p, kx_bin(p, K_LT, kx_var(p, jloop->var), kx_index(p, 1)), red, NULL);
    check(verify_dies(p), "verify: if on the lane inside a vector loop");
    set->next = red;
    jloop->hints = 0;
    check(!verify_dies(p), "verify: restored program passes");
}

/* Vector reductions (LH_REDUCTION | LH_VECTOR): the matmul's k loop, acc = acc + a * b. */
static void test_reduction_verifier(Program *p) {
    Kernel *mm = p->kernels[0];
    Stmt *jloop = mm->body->body, *red = jloop->body->next, *upd = red->body;
    int acc = upd->var, t = kir_scalar(p, mm, mm->scalars[acc]);
    Expr *term = upd->val->args[1], *av = kx_scalar(p, mm, acc);
    red->hints = LH_REDUCTION | LH_VECTOR;
    check(!verify_dies(p), "verify: vector reduction acc = acc + a*b passes");
    upd->val = kx_bin(p, K_ADD, term, av);
    check(!verify_dies(p), "verify: vector reduction acc = a*b + acc passes");
    red->body = ks_seq(ks_set(p, t, term), ks_set(p, acc, kx_bin(p, K_MAX, av, kx_scalar(p, mm, t))));
    check(!verify_dies(p), "verify: vector reduction with a lane-private register passes");
    red->body = ks_seq(ks_set(p, t, kx_bin(p, K_MUL, av, term)), upd);
    check(verify_dies(p), "verify: vector reduction reading its accumulator outside the update");
    red->body = ks_set(p, acc, kx_bin(p, K_SUB, av, term));
    check(verify_dies(p), "verify: vector reduction updating with a non-associative operator");
    red->body = ks_seq(ks_set(p, acc, kx_bin(p, K_ADD, av, term)), ks_set(p, acc, kx_bin(p, K_MUL, av, term)));
    check(verify_dies(p), "verify: vector reduction updating one accumulator with two operators");
    red->body = ks_seq(ks_set(p, acc, kx_const(p, mm->scalars[acc], 0)), upd);
    check(verify_dies(p), "verify: vector reduction resetting its accumulator");
    red->body = upd;
    jloop->hints = LH_VECTOR;
    check(verify_dies(p), "verify: vector reduction inside a vector loop");
    jloop->hints = 0;
    red->hints = LH_REDUCTION;
    check(!verify_dies(p), "verify: restored program passes");
}

static void test_verifier(Arena *a) {
    Prog g = matmul_prog(a, DT_INT32, 2, 2, 2);
    Kernel *add = g.p->kernels[1];
    add->modes[0] = KP_OUT;                       /* load of an out parameter */
    check(verify_dies(g.p), "verify: load of an out parameter");
    add->modes[0] = KP_IN;
    check(!verify_dies(g.p), "verify: well-formed program passes");
    Stmt *inner = add->body->body;
    int var = inner->var;
    inner->var = add->body->var;                  /* inner loop reuses the outer variable */
    check(verify_dies(g.p), "verify: nested reuse of a loop variable");
    inner->var = var;
    Expr *saved = inner->body->idx[1];
    inner->body->idx[1] = kx_const(g.p, DT_INT32, 0); /* index of the wrong type */
    check(verify_dies(g.p), "verify: non-index index");
    inner->body->idx[1] = saved;
    Stmt *set = g.p->kernels[0]->body->body->body;
    set->var = 5;                                 /* register out of range */
    check(verify_dies(g.p), "verify: register out of range");
    set->var = 0;
    test_vector_verifier(g.p);
    test_reduction_verifier(g.p);
}

static void test_print(Arena *a) {
    Program *p = kir_program_new(a, "tiny");
    int64_t d[2] = {2, 3}, db[1] = {3};
    Buf *X = kir_buf_new(p, "X", DT_FLOAT, 2, d, B_INPUT);
    Buf *b = kir_buf_new(p, "b", DT_FLOAT, 1, db, B_CONST);
    Buf *t = kir_buf_new(p, "t", DT_FLOAT, 2, d, B_TEMP);
    int64_t dv[1] = {6};
    kir_view_new(p, t, "flat", 1, dv);
    Kernel *k = ew2(p, "add", "Add", t, X, K_ADD, b, NULL);
    Stmt *st = k->body->body->body;
    st->val = kx_un(p, K_EXP, kx_bin(p, K_SUB, kx_const(p, DT_FLOAT, 1),
                                     kx_bin(p, K_SUB, st->val, kx_const(p, DT_FLOAT, 0.5))));
    const char *want =
        "program tiny (arena 0 bytes, align 16)\n"
        "  buf %X: float32[2,3] input 0\n"
        "  buf %b: float32[3] const\n"
        "  buf %t: float32[2,3] temp @?\n"
        "  buf %flat: float32[6] view of %t\n"
        "kernel add (Add, elementwise) (in %X, in %b, out %t):\n"
        "  for i0 in 0..2:\n"
        "    for i1 in 0..3:\n"
        "      %t[i0, i1] = exp(1.0 - (%X[i0, i1] + %b[i1] - 0.5))\n";
    char buf[2048] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    kir_print(f, p);
    fclose(f);
    check(!strcmp(buf, want), "print: golden text");
    if (strcmp(buf, want)) printf("got:\n%s", buf);
}

/* One scalar expression through the interpreter: stored into a rank-0 output. */
static double eval_scalar(Arena *a, Expr *(*build)(Program *p, int which), int which) {
    Program *p = kir_program_new(a, "scalar");
    Expr *e = build(p, which);
    Buf *y = kir_buf_new(p, "y", e->type, 0, NULL, B_OUTPUT);
    p->noutputs = 1;
    p->outputs = ARENA_ARRAY(a, Buf *, 1);
    p->outputs[0] = y;
    Kernel *k = kir_kernel_new(p, "k", "Test", KC_ELEMENTWISE);
    kir_param(p, k, y, KP_OUT);
    k->body = ks_store(p, y, NULL, e);
    kir_verify(p, "build");
    unsigned char out[8] = {0};
    void *outs[1] = {out};
    kir_interpret(p, NULL, outs);
    switch (e->type) {
    case DT_FLOAT: { float f; memcpy(&f, out, 4); return f; }
    case DT_INT32: { int32_t i; memcpy(&i, out, 4); return i; }
    case DT_UINT8: return out[0];
    case DT_BOOL: return out[0];
    default: { int64_t i; memcpy(&i, out, 8); return (double)i; }
    }
}

static Expr *sem_case(Program *p, int which) {
    Expr *f25 = kx_const(p, DT_FLOAT, 2.5), *fm7 = kx_const(p, DT_FLOAT, -7.9);
    switch (which) {
    case 0: return kx_un(p, K_ROUND, f25);                                     /* 2 */
    case 1: return kx_un(p, K_ROUND, kx_const(p, DT_FLOAT, 3.5));              /* 4 */
    case 2: return kx_cast(p, DT_INT32, fm7);                                  /* -7 */
    case 3: return kx_bin(p, K_DIV, kx_const(p, DT_INT32, -7), kx_const(p, DT_INT32, 2)); /* -3 */
    case 4: return kx_bin(p, K_REM, kx_const(p, DT_INT32, -7), kx_const(p, DT_INT32, 2)); /* -1 */
    case 5: return kx_bin(p, K_ADD, kx_const(p, DT_INT32, 2147483647), kx_const(p, DT_INT32, 1));
    case 6: return kx_bin(p, K_LT, kx_const(p, DT_UINT8, 200), kx_const(p, DT_UINT8, 100)); /* 0 */
    case 7: return kx_bin(p, K_MAX, kx_const(p, DT_FLOAT, NAN), f25);           /* nan */
    case 8: return kx_un(p, K_SIGN, fm7);                                      /* -1 */
    case 9: return kx_bin(p, K_POW, kx_const(p, DT_FLOAT, -2), kx_const(p, DT_FLOAT, 3)); /* -8 */
    case 10: return kx_cast(p, DT_BOOL, kx_const(p, DT_FLOAT, 0.25));          /* 1 */
    case 11: return kx_select(p, kx_bin(p, K_GT, f25, fm7), kx_const(p, DT_INT64, 5),
                              kx_const(p, DT_INT64, 6));                       /* 5 */
    case 12: return kx_bin(p, K_ADD, kx_const(p, DT_UINT8, 250), kx_const(p, DT_UINT8, 10)); /* 4 */
    default: return kx_un(p, K_NOT, kx_bin(p, K_EQ, f25, f25));                /* 0 */
    }
}

static void test_semantics(Arena *a) {
    static const double want[] = {2, 4, -7, -3, -1, -2147483648.0, 0, NAN, -1, -8, 1, 5, 4, 0};
    for (int i = 0; i < COUNTOF(want); i++) {
        double got = eval_scalar(a, sem_case, i);
        char what[64];
        snprintf(what, sizeof what, "interpreter semantics case %d", i);
        check(isnan(want[i]) ? isnan(got) : got == want[i], what);
    }
}

/* ---- loop primitives (passes/loops.c) ---- */

static bool expr_has_var(const Expr *e, int var) {
    if (e->kind == E_VAR && e->var == var) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_has_var(e->args[i], var)) return true;
    return false;
}

/* Does some if condition or select in the list read variable var? */
static bool cond_reads(const Stmt *s, int var) {
    for (; s; s = s->next)
        if ((s->kind == S_IF && expr_has_var(s->cond, var)) || cond_reads(s->body, var) ||
            cond_reads(s->then, var) || cond_reads(s->els, var))
            return true;
    return false;
}

/* The link that holds the first loop over var (depth first), or NULL. */
static Stmt **loop_link(Stmt **at, int var) {
    for (; *at; at = &(*at)->next) {
        if ((*at)->kind == S_LOOP && (*at)->var == var) return at;
        Stmt **r = loop_link(&(*at)->body, var);
        if (r) return r;
    }
    return NULL;
}

static void same_result(Prog *g, const void *ref, const char *what) {
    kir_verify(g->p, what);
    void *r = run(g);
    check(!memcmp(ref, r, g->out_bytes), what);
    free(r);
}

/* Each primitive on the padded convolution (vars: 0 n, 1 co, 2 oh, 3 ow, 4 c, 5 kh, 6 kw),
 * the interpreter's result bitwise unchanged after each step. */
static void test_primitives(Arena *a) {
    Prog g = conv_prog(a, DT_FLOAT, 2, 3, 5, 7);
    Program *p = g.p;
    Kernel *k = p->kernels[0];
    void *ref = run(&g);
    Stmt *mid = loop_peel(p, k, loop_link(&k->body, 3), 1, 1);
    check(mid && mid->lo->i == 1 && mid->hi->i == 6, "peel: the interior columns are 1..6");
    check(!cond_reads(mid->body, 3) && cond_reads(mid->body, 2), "peel: the interior tests rows, not columns");
    Stmt **first = loop_link(&k->body, 3);
    check(cond_reads((*first)->body, 3) && (*first)->hi->i == 1, "peel: the left border keeps its column test");
    same_result(&g, ref, "peel: same result");
    check(loop_interchange(p, k, k->body), "interchange of n and co");
    check(k->body->var == 1 && k->body->body->var == 0, "interchange: co outside n");
    same_result(&g, ref, "interchange: same result");
    for (int i = 0; i < 3; i++) loop_unroll(p, k, loop_link(&k->body, 6));    /* one per piece */
    check(!loop_link(&k->body, 6), "unroll: no loop over kw left");
    same_result(&g, ref, "unroll: same result");
    Stmt **ow = &(*loop_link(&k->body, 3))->next;      /* the interior piece */
    Stmt *in = loop_split(p, k, ow, 2);
    check(in && in->hi->i == 2 && (*ow)->step == 2, "split: tiles of 2 columns");
    same_result(&g, ref, "split: same result");
    check(loop_vectorize(p, k, in), "vectorize: the 2-column tile");
    same_result(&g, ref, "vectorize: same result");
    check(body_private(p, k, *loop_link(&k->body, 2)), "jam: the row loop's registers are private");
    loop_jam(p, k, loop_link(&k->body, 2), 2);
    same_result(&g, ref, "jam: same result");
    check(k->sched && !strcmp(k->sched, "peel(i3,1,1) interchange(i0,i1) unroll(i6) unroll(i6) unroll(i6) split(i3,2) "
                                         "vectorize(i8) jam(i2,2)"), "the schedule line lists the steps");
    free(ref);

    /* pack: W [5, 37] as column panels [10, 5, 4] (the last one padded with 3 zero columns),
     * read through the split column loop (vars: 0 i, 1 j, 2 k) and through the rest. */
    g = matmul_prog(a, DT_FLOAT, 3, 5, 37);
    p = g.p;
    k = p->kernels[0];
    ref = run(&g);
    loop_split(p, k, loop_link(&k->body, 1), 4);
    PackDim pd[3] = {{1, 4, false}, {0, 0, false}, {1, 4, true}};
    Buf *w = loop_pack(p, k, p->bufs[1], "panels4", 3, pd);
    check(w->dims[0] == 10 && w->dims[1] == 5 && w->dims[2] == 4 && ((const float *)w->data)[9 * 20 + 1] == 0,
          "pack: panels [10, 5, 4], padding zero");
    same_result(&g, ref, "pack: same result");
    bool still = false;
    for (int i = 0; i < k->nparams; i++) still |= k->params[i] == p->bufs[1];
    check(!still, "pack: W is no longer a parameter");
    free(ref);
}

int main(void) {
    Arena *a = arena_new();
    test_print(a);
    test_semantics(a);
    test_passes(a);
    test_no_tiling_below_o2(a);
    test_primitives(a);
    test_reduction_policy(a);
    test_fuse_refusals(a);
    test_bufferize(a);
    test_verifier(a);
    arena_free(a);
    printf("kir: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
