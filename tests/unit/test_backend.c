/* test_backend.c - regression test of the code the backend generates (backend/), through the
 * object path that `onnxcc check` uses.
 *
 * Small kernel-IR programs are built by hand (one elementwise kernel per operator over a sweep
 * of inputs), bufferized, emitted as a host object into a temporary directory and loaded
 * in-process with be_load_object. Checked:
 * - the math helpers of backend/math.c (every float unary math op, and pow) against libm in a
 *   wider type: double for float, long double for double. Errors are measured in ulps of the
 *   result type; each op has a bound a little above what was measured when this test was
 *   written, so that a regression of math.c shows as a larger error. Where the exact result is
 *   NaN, an infinity or a zero, the generated code must give exactly that (sign included);
 * - the run() contract of emit.c: NULL arena 1 (when there are temporaries), misaligned
 *   arena 2, NULL inputs/outputs 3, else 0, and outputs untouched on an error;
 * - the integer and cast semantics of kir.h: K_DIV/K_REM truncate, signed and unsigned,
 *   K_MIN/K_MAX give NaN for a NaN operand, float->int truncates, ->bool is x != 0;
 * - kir_interpret on the same programs agrees: bitwise for integers, within the op's bound
 *   (+1 for libm's own rounding in the interpreter) for math;
 * - the float math program compiled for a Cortex-M4 imports nothing but the mem* functions
 *   (`arm-none-eabi-nm -u`; skipped when the tool is missing).
 * One line per op with the measured max ulp; the last line is
 * "backend: N passed, N failed[, N skipped]".
 *
 * Build: see tests/run-all.sh (links against the archive of all compiler objects and LLVM). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../backend/backend.h"
#include "../../passes/pipeline.h"

typedef long double LD;

static int passed, failed, skipped;

static bool check(bool ok, const char *what) {
    if (ok) passed++;
    else { failed++; printf("FAIL: %s\n", what); }
    return ok;
}

/* check() that also says "ok" */
static void report(bool ok, const char *what) {
    if (check(ok, what)) printf("ok   %s\n", what);
}

/* ---- building programs ---- */
enum { MAXIO = 64 };

static Program *prog_new(Arena *a, const char *name, const Target *t) {
    Program *p = kir_program_new(a, name);
    p->inputs = ARENA_ARRAY(a, Buf *, MAXIO);
    p->outputs = ARENA_ARRAY(a, Buf *, MAXIO);
    p->arena_align = t->arena_align;
    p->vector_bytes = t->vector_bytes;
    p->opt_level = 2;
    return p;
}

/* A 1-d buffer; inputs and outputs take the next run() slot. */
static Buf *buf(Program *p, const char *name, DType t, int64_t n, BufKind k) {
    Buf *b = kir_buf_new(p, name, t, 1, &n, k);
    if (k == B_INPUT) {
        if (p->ninputs == MAXIO) die("too many inputs");
        b->io_index = p->ninputs;
        p->inputs[p->ninputs++] = b;
    } else if (k == B_OUTPUT) {
        if (p->noutputs == MAXIO) die("too many outputs");
        b->io_index = p->noutputs;
        p->outputs[p->noutputs++] = b;
    }
    return b;
}

static Expr *at(Program *p, Buf *b, int var) {
    Expr *idx[1] = {kx_var(p, var)};
    return kx_load(p, b, idx);
}

/* out[i] = op(a[i]) or op(a[i], b[i]); K_CAST converts to out's dtype. */
static void map(Program *p, Buf *out, KOp op, Buf *a, Buf *b) {
    Kernel *k = kir_kernel_new(p, out->name, kop_name[op], KC_ELEMENTWISE);
    int i = kir_var(k);
    kir_param(p, k, a, KP_IN);
    if (b) kir_param(p, k, b, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *x = at(p, a, i), *val;
    if (b) val = kx_bin(p, op, x, at(p, b, i));
    else if (op == K_CAST) val = kx_cast(p, out->dtype, x);
    else val = kx_un(p, op, x);
    Expr *idx[1] = {kx_var(p, i)};
    k->body = ks_loop(p, i, 0, out->dims[0], 1, ks_store(p, out, idx, val));
}

/* ---- float formats, ulps ---- */
typedef struct Fmt {
    const char *name;
    DType t;
    int mant, emin, emax;
    double trig_max;                /* sin/cos/tan are accurate below this (kir.h) */
} Fmt;
static const Fmt F32 = {"f32", DT_FLOAT, 23, -126, 127, 1e5};
static const Fmt F64 = {"f64", DT_DOUBLE, 52, -1022, 1023, 1.6e6};

static LD get(const Fmt *f, const void *a, int64_t i) {
    return f->t == DT_FLOAT ? (LD)((const float *)a)[i] : (LD)((const double *)a)[i];
}

/* |got - want| in ulps of want in format f. An infinity counts as 2^(emax+1), where rounding
 * overflows, so the largest finite number is 1 ulp from an infinite exact result. */
static double ulps(const Fmt *f, LD got, LD want) {
    LD big = ldexpl(1, f->emax + 1);
    if (isinf(got)) got = copysignl(big, got);
    if (fabsl(want) > big) want = copysignl(big, want);
    int e = want == 0 ? f->emin : ilogbl(want);
    e = e < f->emin ? f->emin : e > f->emax ? f->emax : e;
    return (double)(fabsl(got - want) / ldexpl(1, e - f->mant));
}

/* Where the exact result is NaN, an infinity or a zero, got must be exactly that. */
static bool special_ok(LD got, LD want) {
    if (isnan(want)) return isnan(got);
    if (isnan(got)) return false;
    if (isinf(want) || want == 0) return got == want && signbit(got) == signbit(want);
    return true;
}

/* ---- the math ops and their references ---- */
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static LD rl_sigmoid(LD x) { return 1 / (1 + expl(-x)); }
static double r_recip(double x) { return 1 / x; }
static LD rl_recip(LD x) { return 1 / x; }

typedef struct MathOp {
    KOp op;
    double (*ref)(double);          /* for float: libm in double */
    LD (*refl)(LD);                 /* for double: libm in long double */
    double bound[2];                /* max ulp: float, double */
} MathOp;

/* Bounds: the max ulp measured when this test was written (printed by it; f32 / f64 in the
 * comments) rounded up with at least a quarter ulp to spare (a denser sweep finds a little
 * more: tanh f32 reaches 2.05); exactly 0 or 0.5 where the result must be exact or correctly
 * rounded. */
static const MathOp maths[] = {
    {K_EXP, exp, expl, {2, 2}},                     /* 1.11 / 1.04 */
    {K_LOG, log, logl, {1, 1}},                     /* 0.76 / 0.74 */
    {K_TANH, tanh, tanhl, {3, 2.5}},                  /* 2.09 / 1.80 */
    {K_SIGMOID, r_sigmoid, rl_sigmoid, {3, 3}},     /* 2.28 / 2.12 */
    /* double erf is weak next to |x| = 1 (where its approximations meet): 20.4 ulp there */
    {K_ERF, erf, erfl, {3, 22}},                    /* 2.28 / 20.44 */
    {K_SQRT, sqrt, sqrtl, {0.5, 0.5}},
    {K_FLOOR, floor, floorl, {0, 0}},
    {K_CEIL, ceil, ceill, {0, 0}},
    {K_ROUND, nearbyint, nearbyintl, {0, 0}},       /* half to even, as the default rounding */
    {K_RECIP, r_recip, rl_recip, {0.5, 0.5}},
    {K_SIN, sin, sinl, {3, 2}},                     /* 2.36 / 1.39 */
    {K_COS, cos, cosl, {3, 2}},                     /* 2.11 / 1.40 */
    {K_TAN, tan, tanl, {5, 3}},                     /* 3.86 / 2.54 */
    {K_ASIN, asin, asinl, {3, 2.5}},                  /* 2.13 / 1.70 */
    {K_ACOS, acos, acosl, {2, 1.5}},                  /* 1.08 / 0.92 */
    {K_ATAN, atan, atanl, {1, 1}},                  /* 0.76 / 0.73 */
    {K_SINH, sinh, sinhl, {3, 2}},                  /* 2.24 / 1.52 */
    {K_COSH, cosh, coshl, {3, 2}},                  /* 2.24 / 1.52 */
    {K_ASINH, asinh, asinhl, {2, 2}},               /* 1.62 / 1.65 */
    {K_ACOSH, acosh, acoshl, {2, 2}},               /* 1.65 / 1.20 */
    {K_ATANH, atanh, atanhl, {2, 2}},               /* 1.59 / 1.36 */
};
enum { NMATH = sizeof maths / sizeof maths[0] };
static const double pow_bound[2] = {2, 2};          /* 1.19 / 1.15 */

/* ---- inputs ---- */
static void put(const Fmt *f, void *a, int64_t i, LD v) {
    if (f->t == DT_FLOAT) ((float *)a)[i] = (float)v;
    else ((double *)a)[i] = (double)v;
}

/* 0, -0, +-inf, NaN, the smallest subnormal and normal, the largest finite, +-1. */
static int specials(const Fmt *f, void *a, int n) {
    LD tiny = f->t == DT_FLOAT ? FLT_TRUE_MIN : DBL_TRUE_MIN;
    LD minn = f->t == DT_FLOAT ? FLT_MIN : DBL_MIN;
    LD huge = f->t == DT_FLOAT ? FLT_MAX : DBL_MAX;
    LD v[] = {0.0L, -0.0L, INFINITY, -INFINITY, NAN, tiny, -tiny, minn, -minn, huge, -huge, 1, -1};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) put(f, a, n++, v[i]);
    return n;
}

/* The unary sweep: specials; every STRIDE-th bit pattern of the finite numbers, both signs
 * (all binades evenly, subnormals included); a dense grid on [-16, 16]; 1 and -1 +- a few
 * ulps (log, acosh, atanh, asin and acos are at their edges there). With a NULL array it only
 * counts. */
static int64_t sweep(const Fmt *f, void *a) {
    char scratch[16 * 8];
    int64_t n = specials(f, a ? a : scratch, 0);
    bool dbl = f->t == DT_DOUBLE;
    uint64_t top = dbl ? 0x7ff0000000000000u : 0x7f800000u;
    uint64_t stride = dbl ? (top >> 15) | 1 : 0x3fff;
    for (uint64_t b = stride; b < top; b += stride, n += 2) {
        if (!a) continue;
        LD v;
        if (dbl) { double d; memcpy(&d, &b, 8); v = d; }
        else { uint32_t w = (uint32_t)b; float x; memcpy(&x, &w, 4); v = x; }
        put(f, a, n, v);
        put(f, a, n + 1, -v);
    }
    int lin = dbl ? 4096 : 16384;
    for (int i = -lin; i <= lin; i++, n++)
        if (a) put(f, a, n, (LD)i * 16 / lin);
    for (int s = -1; s <= 1; s += 2)
        for (int k = -32; k <= 32; k++, n++) {
            if (!a) continue;
            if (dbl) put(f, a, n, s * (1 + k * (LD)DBL_EPSILON / 2));
            else put(f, a, n, s * (1 + k * (LD)FLT_EPSILON / 2));
        }
    return n;
}

/* pow: specials crossed with specials, negative bases with integral exponents, and a
 * positive grid whose results span the whole range. */
static int64_t pow_grid(const Fmt *f, void *x, void *y) {
    static const double bases[] = {-INFINITY, -1e30, -3, -2.5, -2, -1, -0.5, -1e-30, -0.0, 0.0,
                                   1e-30, 0.5, 1, 1.5, 2, 3, 10, 1e30, INFINITY, NAN};
    static const double exps[] = {-INFINITY, -1e10, -3, -2.5, -2, -1, -0.5, -0.0, 0.0, 0.5, 1,
                                  2, 2.5, 3, 7, 31, 1e10, INFINITY, NAN};
    int64_t n = 0;
#define PUT(a, b) do { if (x) { put(f, x, n, a); put(f, y, n, b); } n++; } while (0)
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        for (size_t j = 0; j < sizeof exps / sizeof exps[0]; j++) PUT(bases[i], exps[j]);
    for (int i = 1; i <= 80; i++)
        for (int j = -25; j <= 25; j++) PUT(-(LD)i / 8, j);
    for (int i = -160; i <= 160; i++)
        for (int j = -60; j <= 60; j++) PUT(powl(2, (LD)i / 5), (LD)j * 0.37L);
#undef PUT
    return n;
}

/* ---- the math program ---- */
typedef struct MathData {           /* one float type's inputs, outputs and buffers */
    const Fmt *f;
    int64_t n, np;
    void *x, *px, *py;
    void *y[NMATH], *pow, *neg;     /* object results */
    void *iy[NMATH], *ipow, *ineg;  /* interpreter results */
    Buf *bx, *bpx, *bpy, *by[NMATH], *bpow, *bneg;
} MathData;

/* Test data lives until the end of main, which frees it all (xfree_all): separate heap
 * blocks rather than the arena, so that ASan sees an overrun of any one of them. */
static void **allocs;
static size_t nallocs;

static void *xalloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    void **a = realloc(allocs, sizeof *a * (nallocs + 1));
    if (!p || !a) die("out of memory");
    allocs = a;
    allocs[nallocs++] = p;
    return p;
}

static void xfree_all(void) {
    for (size_t i = 0; i < nallocs; i++) free(allocs[i]);
    free(allocs);
    allocs = NULL;
    nallocs = 0;
}

static void math_data(MathData *d, const Fmt *f) {
    memset(d, 0, sizeof *d);
    size_t sz = dtype_size(f->t);
    d->f = f;
    d->n = sweep(f, NULL);
    d->x = xalloc((size_t)d->n * sz);
    sweep(f, d->x);
    d->np = pow_grid(f, NULL, NULL);
    d->px = xalloc((size_t)d->np * sz);
    d->py = xalloc((size_t)d->np * sz);
    pow_grid(f, d->px, d->py);
    for (int i = 0; i < NMATH; i++) {
        d->y[i] = xalloc((size_t)d->n * sz);
        d->iy[i] = xalloc((size_t)d->n * sz);
    }
    d->pow = xalloc((size_t)d->np * sz);
    d->ipow = xalloc((size_t)d->np * sz);
    d->neg = xalloc((size_t)d->n * sz);
    d->ineg = xalloc((size_t)d->n * sz);
}

/* One kernel per math op over x, pow over (px, py), and -(-x) through a temporary so that
 * the program needs an arena. */
static Program *math_prog(Arena *a, const char *name, const Target *t, MathData *ds, int nd) {
    Program *p = prog_new(a, name, t);
    for (int j = 0; j < nd; j++) {
        MathData *d = &ds[j];
        const char *s = d->f->name;
        DType dt = d->f->t;
        d->bx = buf(p, arena_printf(a, "x_%s", s), dt, d->n, B_INPUT);
        d->bpx = buf(p, arena_printf(a, "px_%s", s), dt, d->np, B_INPUT);
        d->bpy = buf(p, arena_printf(a, "py_%s", s), dt, d->np, B_INPUT);
        for (int i = 0; i < NMATH; i++) {
            d->by[i] = buf(p, arena_printf(a, "%s_%s", kop_name[maths[i].op], s), dt, d->n, B_OUTPUT);
            map(p, d->by[i], maths[i].op, d->bx, NULL);
        }
        d->bpow = buf(p, arena_printf(a, "POW_%s", s), dt, d->np, B_OUTPUT);
        map(p, d->bpow, K_POW, d->bpx, d->bpy);
        Buf *tmp = buf(p, arena_printf(a, "negx_%s", s), dt, d->n, B_TEMP);
        map(p, tmp, K_NEG, d->bx, NULL);
        d->bneg = buf(p, arena_printf(a, "negneg_%s", s), dt, d->n, B_OUTPUT);
        map(p, d->bneg, K_NEG, tmp, NULL);
    }
    kir_verify(p, "test_backend");
    bufferize(p);
    return p;
}

static void math_io(MathData *ds, int nd, const void **in, void **out, bool interp) {
    for (int j = 0; j < nd; j++) {
        MathData *d = &ds[j];
        in[d->bx->io_index] = d->x;
        in[d->bpx->io_index] = d->px;
        in[d->bpy->io_index] = d->py;
        for (int i = 0; i < NMATH; i++) out[d->by[i]->io_index] = interp ? d->iy[i] : d->y[i];
        out[d->bpow->io_index] = interp ? d->ipow : d->pow;
        out[d->bneg->io_index] = interp ? d->ineg : d->neg;
    }
}

/* One op's results against a reference: the max ulp error and the failures (the first few
 * printed). `exact`: NaN, infinite and zero references must be matched exactly (the libm
 * checks); otherwise only NaN must match NaN (object vs interpreter, whose libm may round a
 * tiny result to zero where ours gives a subnormal). */
typedef struct Cmp {
    const char *what;
    const Fmt *f;
    double bound;
    int bad;
    double max;
    LD x, y;                        /* the operands, for messages */
    bool binary;
} Cmp;

static void cmp_one(Cmp *c, LD got, LD want, bool exact) {
    bool ok = exact ? special_ok(got, want) : isnan(got) == isnan(want);
    double u = 0;
    if (ok && !isnan(want)) {
        u = ulps(c->f, got, want);
        if (u > c->max) c->max = u;
        ok = u <= c->bound;
    }
    if (!ok && c->bad++ < 5) {
        char in[64];
        if (c->binary) snprintf(in, sizeof in, "%.9Lg, %.9Lg", c->x, c->y);
        else snprintf(in, sizeof in, "%.9Lg", c->x);
        printf("FAIL: %s %s(%s) = %.9Lg, want %.9Lg (%.2f ulp > %g)\n", c->what, c->f->name, in,
               got, want, u, c->bound);
    }
}

static LD ref1(const MathOp *m, const Fmt *f, LD x) {
    return f->t == DT_FLOAT ? (LD)m->ref((double)x) : m->refl(x);
}

static bool is_trig(KOp op) { return op == K_SIN || op == K_COS || op == K_TAN; }

static void check_math(MathData *d) {
    const Fmt *f = d->f;
    int fi = f->t == DT_DOUBLE;
    char what[96];
    for (int i = 0; i < NMATH; i++) {
        const MathOp *m = &maths[i];
        Cmp c = {.what = kop_name[m->op], .f = f, .bound = m->bound[fi]};
        snprintf(what, sizeof what, "interpreter %s vs object:", kop_name[m->op]);
        Cmp ci = {.what = what, .f = f, .bound = m->bound[fi] + 1};
        int far = 0;
        for (int64_t k = 0; k < d->n; k++) {
            LD x = get(f, d->x, k), got = get(f, d->y[i], k), ig = get(f, d->iy[i], k);
            if (is_trig(m->op) && isfinite(x) && fabsl(x) >= f->trig_max) {
                /* No accurate reduction out there (kir.h): only a sane value. */
                bool ok = !isnan(got) && (m->op == K_TAN || fabsl(got) <= 1);
                if (!ok && far++ < 5) printf("FAIL: %s %s(%.9Lg) = %Lg\n", kop_name[m->op], f->name, x, got);
                continue;
            }
            c.x = ci.x = x;
            cmp_one(&c, got, ref1(m, f, x), true);
            cmp_one(&ci, ig, got, false);
        }
        printf("%s %-8s %s max %6.3f ulp (bound %g), interpreter %6.3f ulp, %lld inputs\n",
               c.bad || ci.bad || far ? "FAIL" : "ok  ", kop_name[m->op], f->name, c.max, c.bound,
               ci.max, (long long)d->n);
        snprintf(what, sizeof what, "%s %s", kop_name[m->op], f->name);
        check(!c.bad && !far, what);
        snprintf(what, sizeof what, "%s %s: interpreter agrees", kop_name[m->op], f->name);
        check(!ci.bad, what);
    }

    Cmp c = {.what = "POW", .f = f, .bound = pow_bound[fi]};
    Cmp ci = {.what = "interpreter POW vs object:", .f = f, .bound = pow_bound[fi] + 1};
    for (int64_t k = 0; k < d->np; k++) {
        LD x = get(f, d->px, k), y = get(f, d->py, k), got = get(f, d->pow, k);
        LD want = fi ? powl(x, y) : (LD)pow((double)x, (double)y);
        c.x = ci.x = x;
        c.y = ci.y = y;
        c.binary = ci.binary = true;
        cmp_one(&c, got, want, true);
        cmp_one(&ci, get(f, d->ipow, k), got, false);
    }
    printf("%s POW      %s max %6.3f ulp (bound %g), interpreter %6.3f ulp, %lld inputs\n",
           c.bad || ci.bad ? "FAIL" : "ok  ", f->name, c.max, c.bound, ci.max, (long long)d->np);
    snprintf(what, sizeof what, "POW %s", f->name);
    check(!c.bad, what);
    snprintf(what, sizeof what, "POW %s: interpreter agrees", f->name);
    check(!ci.bad, what);

    size_t sz = dtype_size(f->t);
    snprintf(what, sizeof what, "NEG(NEG) %s through a temporary, object and interpreter", f->name);
    check(!memcmp(d->neg, d->x, (size_t)d->n * sz) && !memcmp(d->ineg, d->x, (size_t)d->n * sz), what);
}

/* ---- run() contract ---- */
static void check_contract(Program *p, RunFn run, const void **in, void **out, void *arena) {
    char what[96];
    snprintf(what, sizeof what, "%s needs an arena (arena_size %lld)", p->name, (long long)p->arena_size);
    report(p->arena_size > 0, what);
    /* A sentinel in the first output shows that a rejected call wrote nothing. */
    size_t nb = kir_nbytes(p->outputs[0]);
    unsigned char *first = out[0];
    memset(first, 0x5a, nb);
    static const struct { int which, want; const char *what; } cases[] = {
        {0, 1, "NULL arena -> 1"}, {1, 2, "misaligned arena -> 2"},
        {2, 3, "NULL inputs -> 3"}, {3, 3, "NULL outputs -> 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w = cases[i].which;
        int rc = run(w == 2 ? NULL : (const void *const *)in, w == 3 ? NULL : (void *const *)out,
                     w == 0 ? NULL : w == 1 ? (char *)arena + p->arena_align / 2 : arena);
        bool untouched = true;
        for (size_t k = 0; k < nb; k++) untouched &= first[k] == 0x5a;
        snprintf(what, sizeof what, "run(): %s (got %d), outputs untouched", cases[i].what, rc);
        report(rc == cases[i].want && untouched, what);
    }
    int rc = run((const void *const *)in, (void *const *)out, arena);
    snprintf(what, sizeof what, "run(): success -> 0 (got %d)", rc);
    report(rc == 0, what);
}

/* ---- integer ops, min/max, casts ---- */
typedef struct IntCase {            /* one output: op over inputs a (and b), expected values */
    const char *name;
    Buf *out;
    void *got, *igot, *want;
} IntCase;

static int64_t geti(DType t, const void *a, int64_t i) {
    switch (t) {
    case DT_BOOL: return ((const uint8_t *)a)[i];
    case DT_INT32: return ((const int32_t *)a)[i];
    case DT_UINT32: return ((const uint32_t *)a)[i];
    case DT_INT64: return ((const int64_t *)a)[i];
    default: die("geti: dtype %d", t);
    }
}

/* Bitwise comparison of object, interpreter and expected values (for floats: NaN is any NaN
 * and zeros compare by value: kir.h leaves the sign of min(0, -0) open). */
static void check_case(IntCase *c) {
    Buf *b = c->out;
    int64_t n = kir_numel(b);
    int bad = 0, ibad = 0;
    for (int64_t i = 0; i < n; i++) {
        bool ok, iok;
        if (b->dtype == DT_FLOAT) {
            float g = ((float *)c->got)[i], ig = ((float *)c->igot)[i], w = ((float *)c->want)[i];
            ok = isnan(w) ? isnan(g) : g == w;
            iok = isnan(w) ? isnan(ig) : ig == w;
            if (!ok && bad < 5) printf("FAIL: %s[%lld] = %g, want %g\n", c->name, (long long)i, g, w);
        } else {
            int64_t g = geti(b->dtype, c->got, i), w = geti(b->dtype, c->want, i);
            ok = g == w;
            iok = geti(b->dtype, c->igot, i) == w;
            if (!ok && bad < 5) printf("FAIL: %s[%lld] = %lld, want %lld\n", c->name, (long long)i, (long long)g, (long long)w);
        }
        bad += !ok;
        ibad += !iok;
    }
    printf("%s %-24s %lld cases, %d wrong, interpreter %d wrong\n", bad || ibad ? "FAIL" : "ok  ",
           c->name, (long long)n, bad, ibad);
    char what[96];
    snprintf(what, sizeof what, "%s", c->name);
    check(!bad, what);
    snprintf(what, sizeof what, "%s: interpreter agrees", c->name);
    check(!ibad, what);
}

static const int64_t int_vals[] = {INT64_MIN, INT64_MIN + 1, INT32_MIN, INT32_MIN + 1, -100, -7,
                                   -6, -5, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7, 100, INT32_MAX,
                                   INT64_MAX - 1, INT64_MAX};
static const uint32_t uint_vals[] = {0, 1, 2, 3, 7, 100, 0x7fffffffu, 0x80000000u, 0xfffffff9u, 0xffffffffu};

typedef struct IntProg {
    Program *p;
    IntCase cases[32];
    int ncases;
    const void *in[MAXIO];
    void *out[MAXIO], *iout[MAXIO];
} IntProg;

static IntCase *int_case(IntProg *ip, Buf *out, KOp op, Buf *a, Buf *b, const char *name) {
    IntCase *c = &ip->cases[ip->ncases++];
    size_t nb = kir_nbytes(out);
    c->name = name;
    c->out = out;
    c->got = ip->out[out->io_index] = xalloc(nb);
    c->igot = ip->iout[out->io_index] = xalloc(nb);
    c->want = xalloc(nb);
    map(ip->p, out, op, a, b);
    return c;
}

static Buf *int_input(IntProg *ip, const char *name, DType t, int64_t n, const void *data) {
    Buf *b = buf(ip->p, name, t, n, B_INPUT);
    ip->in[b->io_index] = data;
    return b;
}

/* div, rem, min, max of signed 32/64-bit and unsigned 32-bit pairs, all of a small value set
 * crossed, except division by zero and MIN / -1 (undefined, kir.h). */
static void int_ops(IntProg *ip, Arena *a, DType t) {
    int64_t n = 0, cap = 32 * 32;
    int64_t *av = xalloc((size_t)cap * 8), *bv = xalloc((size_t)cap * 8);
    if (t == DT_UINT32) {
        for (size_t i = 0; i < sizeof uint_vals / sizeof uint_vals[0]; i++)
            for (size_t j = 0; j < sizeof uint_vals / sizeof uint_vals[0]; j++)
                if (uint_vals[j]) av[n] = uint_vals[i], bv[n++] = uint_vals[j];
    } else {
        int64_t lo = t == DT_INT32 ? INT32_MIN : INT64_MIN, hi = t == DT_INT32 ? INT32_MAX : INT64_MAX;
        for (size_t i = 0; i < sizeof int_vals / sizeof int_vals[0]; i++)
            for (size_t j = 0; j < sizeof int_vals / sizeof int_vals[0]; j++) {
                int64_t x = int_vals[i], y = int_vals[j];
                if (x < lo || x > hi || y < lo || y > hi || y == 0 || (x == lo && y == -1)) continue;
                av[n] = x, bv[n++] = y;
            }
    }
    size_t sz = dtype_size(t);
    void *ad = xalloc((size_t)n * sz), *bd = xalloc((size_t)n * sz);
    const char *s = dtype_name(t);
    for (int64_t i = 0; i < n; i++) {
        if (sz == 4) { ((int32_t *)ad)[i] = (int32_t)av[i]; ((int32_t *)bd)[i] = (int32_t)bv[i]; }
        else { ((int64_t *)ad)[i] = av[i]; ((int64_t *)bd)[i] = bv[i]; }
    }
    Buf *ba = int_input(ip, arena_printf(a, "a_%s", s), t, n, ad);
    Buf *bb = int_input(ip, arena_printf(a, "b_%s", s), t, n, bd);
    static const KOp ops[] = {K_DIV, K_REM, K_MIN, K_MAX};
    for (int o = 0; o < 4; o++) {
        const char *name = arena_printf(a, "%s %s", kop_name[ops[o]], s);
        IntCase *c = int_case(ip, buf(ip->p, arena_printf(a, "%s_%s", kop_name[ops[o]], s), t, n, B_OUTPUT),
                              ops[o], ba, bb, name);
        for (int64_t i = 0; i < n; i++) {
            int64_t w;
            if (t == DT_UINT32) {
                uint32_t x = (uint32_t)av[i], y = (uint32_t)bv[i];
                uint32_t r = ops[o] == K_DIV ? x / y : ops[o] == K_REM ? x % y : ops[o] == K_MIN ? (x < y ? x : y) : (x > y ? x : y);
                w = r;
            } else {
                int64_t x = av[i], y = bv[i];
                w = ops[o] == K_DIV ? x / y : ops[o] == K_REM ? x % y : ops[o] == K_MIN ? (x < y ? x : y) : (x > y ? x : y);
            }
            if (sz == 4) ((int32_t *)c->want)[i] = (int32_t)w;
            else ((int64_t *)c->want)[i] = w;
        }
    }
}

static float fminmax(float x, float y, bool max) {
    if (isnan(x) || isnan(y)) return NAN;
    return max ? (x > y ? x : y) : (x < y ? x : y);
}

static void float_ops(IntProg *ip) {
    /* min/max: every pair of these */
    static const float mv[] = {NAN, -NAN, 1, -1, 0.0f, -0.0f, INFINITY, -INFINITY, 2.5f, FLT_TRUE_MIN};
    enum { NV = sizeof mv / sizeof mv[0] };
    float *fa = xalloc(NV * NV * 4), *fb = xalloc(NV * NV * 4);
    for (int i = 0; i < NV; i++)
        for (int j = 0; j < NV; j++) fa[i * NV + j] = mv[i], fb[i * NV + j] = mv[j];
    Buf *ba = int_input(ip, "fa", DT_FLOAT, NV * NV, fa), *bb = int_input(ip, "fb", DT_FLOAT, NV * NV, fb);
    for (int o = 0; o < 2; o++) {
        KOp op = o ? K_MAX : K_MIN;
        IntCase *c = int_case(ip, buf(ip->p, o ? "MAX_f32" : "MIN_f32", DT_FLOAT, NV * NV, B_OUTPUT), op, ba, bb,
                              o ? "MAX float (NaN)" : "MIN float (NaN)");
        for (int i = 0; i < NV * NV; i++) ((float *)c->want)[i] = fminmax(fa[i], fb[i], o);
    }

    /* casts to integers: values inside the target's range (outside is undefined) */
    static const float cv[] = {0.0f, -0.0f, 0.4f, -0.4f, 0.5f, -0.5f, 0.99999994f, -0.99999994f, 1, -1,
                               1.5f, -1.5f, 2.5f, -2.5f, 2.7f, -2.7f, 123456.78f, -123456.78f, 8388607.5f,
                               -8388607.5f, 1e9f, -1e9f, 2147483520.0f, -2147483648.0f, FLT_TRUE_MIN, -FLT_MIN};
    enum { NC = sizeof cv / sizeof cv[0] };
    static const float cl[] = {1e18f, -1e18f, 9223371487098961920.0f, -9223372036854775808.0f, 4294967296.5f};
    enum { NL = NC + sizeof cl / sizeof cl[0] };
    float *c64 = xalloc(NL * 4);
    memcpy(c64, cv, sizeof cv);
    memcpy(c64 + NC, cl, sizeof cl);
    Buf *bc = int_input(ip, "cast32", DT_FLOAT, NC, cv), *bl = int_input(ip, "cast64", DT_FLOAT, NL, c64);
    IntCase *c = int_case(ip, buf(ip->p, "CAST_i32", DT_INT32, NC, B_OUTPUT), K_CAST, bc, NULL, "CAST float->int32");
    for (int i = 0; i < NC; i++) ((int32_t *)c->want)[i] = (int32_t)cv[i];
    c = int_case(ip, buf(ip->p, "CAST_i64", DT_INT64, NL, B_OUTPUT), K_CAST, bl, NULL, "CAST float->int64");
    for (int i = 0; i < NL; i++) ((int64_t *)c->want)[i] = (int64_t)c64[i];

    /* casts to bool: anything but a zero is true, NaN included */
    static const float bv[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, FLT_TRUE_MIN, -FLT_TRUE_MIN, 0.1f, -2, 1e30f};
    enum { NB = sizeof bv / sizeof bv[0] };
    Buf *bbv = int_input(ip, "castb", DT_FLOAT, NB, bv);
    c = int_case(ip, buf(ip->p, "CAST_bool", DT_BOOL, NB, B_OUTPUT), K_CAST, bbv, NULL, "CAST float->bool");
    for (int i = 0; i < NB; i++) ((uint8_t *)c->want)[i] = bv[i] != 0;
    static const int32_t iv[] = {0, 1, -1, 256, INT32_MIN, INT32_MAX, 2};
    enum { NI = sizeof iv / sizeof iv[0] };
    Buf *bi = int_input(ip, "casti", DT_INT32, NI, iv);
    c = int_case(ip, buf(ip->p, "CAST_ibool", DT_BOOL, NI, B_OUTPUT), K_CAST, bi, NULL, "CAST int32->bool");
    for (int i = 0; i < NI; i++) ((uint8_t *)c->want)[i] = iv[i] != 0;
}

static void test_int(Arena *a, const Target *host, const char *dir) {
    IntProg *ip = xalloc(sizeof *ip);
    ip->p = prog_new(a, "bint", host);
    int_ops(ip, a, DT_INT32);
    int_ops(ip, a, DT_INT64);
    int_ops(ip, a, DT_UINT32);
    float_ops(ip);
    kir_verify(ip->p, "test_backend");
    bufferize(ip->p);
    const char *obj = arena_printf(a, "%s/bint.o", dir);
    be_emit(ip->p, host, 2, EMIT_OBJ, obj);
    RunFn run = be_load_object(obj, ip->p->name);
    /* No temporaries: no arena needed, NULL is fine. */
    int rc = run(ip->in, ip->out, NULL);
    char what[64];
    snprintf(what, sizeof what, "run() without temporaries, NULL arena -> 0 (got %d)", rc);
    report(ip->p->arena_size == 0 && rc == 0, what);
    kir_interpret(ip->p, ip->in, ip->iout);
    for (int i = 0; i < ip->ncases; i++) check_case(&ip->cases[i]);
    remove(obj);
}

/* ---- firmware: what the Cortex-M4 object imports ---- */
static bool allowed_import(const char *s) {
    static const char *const ok[] = {"memcpy", "memset", "memmove"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(s, ok[i])) return true;
    return !strncmp(s, "__aeabi_mem", 11);
}

static void test_firmware(Arena *a, MathData *d, const char *dir) {
    if (system("command -v arm-none-eabi-nm >/dev/null 2>&1") != 0) {
        printf("skip: arm-none-eabi-nm not found, Cortex-M4 imports not checked\n");
        skipped++;
        return;
    }
    Target t;
    be_target(&t, "thumbv7em-none-eabihf", "cortex-m4", NULL, NULL);
    Program *p = math_prog(a, "bfw", &t, d, 1);
    const char *obj = arena_printf(a, "%s/bfw.o", dir);
    be_emit(p, &t, 2, EMIT_OBJ, obj);
    FILE *f = popen(arena_printf(a, "arm-none-eabi-nm -u '%s' 2>&1", obj), "r");
    if (!f) die("popen");
    char line[256], what[320];
    int bad = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        char sym[256];
        line[strcspn(line, "\n")] = 0;
        /* "         U memcpy" */
        if (sscanf(line, " U %255s", sym) != 1 || !allowed_import(sym)) {
            snprintf(what, sizeof what, "Cortex-M4 object imports only mem*: nm says '%s'", line);
            check(false, what);
            bad++;
        }
        n++;
    }
    be_target_free(&t);
    int st = pclose(f);
    check(st == 0, "arm-none-eabi-nm -u runs");
    printf("%s Cortex-M4 object of the f32 math program: %d undefined symbols, %d not mem*\n",
           bad || st ? "FAIL" : "ok  ", n, bad);
    if (!bad) passed++;
    remove(obj);
}

/* ---- vector loops (LH_VECTOR) against the interpreter ----
 * One program with the forms the backend must tell apart: a contiguous load and store, a
 * broadcast (uniform load), a reversed and a data-dependent index (gathers), a strided
 * store (scatter), math on vectors, a reduction with lane-private accumulators around an
 * inner loop, and a narrower remainder tile. The copies and, at --fp-strict, the reduction
 * must equal the interpreter's bit for bit; the math (the interpreter calls libm) and the
 * contracted reduction agree within 1e-5. */
enum { VN = 37, VK = 9 };

static Expr *vld(Program *p, Buf *b, Expr *i) { return kx_load(p, b, &i); }

static Program *vector_prog(Arena *a, const Target *t, bool strict) {
    Program *p = prog_new(a, strict ? "bvecs" : "bvecc", t);
    p->fp_strict = strict;
    Buf *x = buf(p, "x", DT_FLOAT, VN, B_INPUT), *ix = buf(p, "ix", DT_INT32, VN, B_INPUT);
    Buf *m = buf(p, "m", DT_FLOAT, VK * VN, B_INPUT);
    Buf *y = buf(p, "y", DT_FLOAT, VN, B_OUTPUT), *z = buf(p, "z", DT_FLOAT, 2 * VN, B_OUTPUT);
    Buf *r = buf(p, "r", DT_FLOAT, VN, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "vec", "test", KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ix, KP_IN);
    kir_param(p, k, m, KP_IN);
    kir_param(p, k, y, KP_OUT);
    kir_param(p, k, z, KP_OUT);
    kir_param(p, k, r, KP_OUT);
    int jo = kir_var(k), kv = kir_var(k);
    Stmt *pieces = NULL;
    /* [0, 32) as two vectors of 16 in a loop, [32, 37) as one vector of 5 */
    int64_t starts[2] = {0, 32}, widths[2] = {16, 5};
    for (int piece = 0; piece < 2; piece++) {
        int ji = kir_var(k), acc = kir_scalar(p, k, DT_FLOAT);
        Expr *j = piece ? kx_addc(p, kx_var(p, ji), starts[1]) : kx_add(p, kx_var(p, jo), kx_var(p, ji));
        Expr *rev = kx_add(p, kx_index(p, VN - 1), kx_mul(p, j, -1));
        Expr *gath = kx_cast(p, DT_INDEX, vld(p, ix, j));
        Expr *val = kx_bin(p, K_ADD, kx_un(p, K_EXP, vld(p, x, j)),
                           kx_bin(p, K_MUL, vld(p, x, kx_index(p, 3)), kx_un(p, K_TANH, vld(p, x, rev))));
        val = kx_bin(p, K_SUB, val, kx_un(p, K_SIGMOID, vld(p, x, gath)));
        Stmt *body = ks_store(p, y, (Expr *[]){j}, val);
        body = ks_seq(body, ks_store(p, z, (Expr *[]){kx_mul(p, j, 2)}, kx_un(p, K_ERF, vld(p, x, j))));
        body = ks_seq(body, ks_store(p, z, (Expr *[]){kx_addc(p, kx_mul(p, j, 2), 1)}, vld(p, x, rev)));
        Expr *mk = vld(p, m, kx_add(p, kx_mul(p, kx_var(p, kv), VN), j));
        Stmt *red = ks_red_loop(p, kv, VK, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
                                 kx_bin(p, K_MUL, mk, vld(p, x, kx_var(p, kv))))));
        body = ks_seq(body, ks_seq(ks_set(p, acc, kx_const(p, DT_FLOAT, 0.5)), red));
        body = ks_seq(body, ks_store(p, r, (Expr *[]){kx_cast(p, DT_INDEX, kx_cast(p, DT_INT32, kx_cast(p, DT_FLOAT, j)))},
                                     kx_scalar(p, k, acc)));
        Stmt *v = ks_loop(p, ji, 0, widths[piece], 1, body);
        v->hints = LH_VECTOR;
        pieces = ks_seq(pieces, piece ? v : ks_loop(p, jo, 0, 32, 16, v));
    }
    k->body = pieces;
    return p;
}

static void test_vectors(Arena *a, const Target *host, const char *dir) {
    float x[VN], m[VK * VN];
    int32_t ix[VN];
    for (int i = 0; i < VN; i++) {
        x[i] = (float)sin(i * 1.7) * 3;
        ix[i] = (i * 7 + 3) % VN;
    }
    for (int i = 0; i < VK * VN; i++) m[i] = (float)cos(i * 0.37);
    for (int strict = 1; strict >= 0; strict--) {
        Program *p = vector_prog(a, host, strict);
        kir_verify(p, "test_backend");
        bufferize(p);
        const char *obj = arena_printf(a, "%s/%s.o", dir, p->name);
        be_emit(p, host, 2, EMIT_OBJ, obj);
        RunFn run = be_load_object(obj, p->name);
        float y[2][VN], z[2][2 * VN], r[2][VN];
        const void *in[3] = {x, ix, m};
        void *out[2][3] = {{y[0], z[0], r[0]}, {y[1], z[1], r[1]}};
        check(run(in, out[0], NULL) == 0, "vector program runs");
        kir_interpret(p, in, out[1]);
        double err = 0;
        bool same = !strict || !memcmp(r[0], r[1], sizeof r[0]);
        for (int i = 0; i < VN; i++) {
            same &= !memcmp(&z[0][2 * i + 1], &z[1][2 * i + 1], sizeof(float));
            err = fmax(err, fabs(r[0][i] - r[1][i]) + fabs(y[0][i] - y[1][i]) + fabs(z[0][2 * i] - z[1][2 * i]));
        }
        char what[160];
        snprintf(what, sizeof what, "vector loops (gather, scatter, broadcast, math, reduction, remainder)%s: "
                 "copies%s exact, max diff %g", strict ? " --fp-strict" : "", strict ? " and reduction" : "", err);
        report(same && err < 1e-5, what);
        remove(obj);
    }
}

/* ---- strided and div/mod-indexed loads in vector loops against the interpreter ----
 * Loads whose lane coefficient is a small stride (2, 3, 4, -2, -3) become contiguous vector
 * loads and shuffles over the span between the first and the last lane's elements: one
 * kernel per stride and width (16 and 5 lanes) copies the tiles of x[base + s*i] whose first
 * read is x[0] and another whose last read is x[n-1] (float and int16 inputs, and a vector
 * sum over x[base + 2*i] ending at x[n-1]); the input is placed right after and right before
 * a PROT_NONE page, so that a read outside it faults. The program's LLVM IR must have no
 * gather. The div/mod copies index [(a*128 + v) / 128, (a*128 + v) % 128] (also as the
 * /128/1/1, %1 form of a flattened copy) and must compile without gathers too; indices the
 * ranges do not prove ((v + 8) / 16 across blocks, v*3/2) still must give the interpreter's
 * values. */
enum { SN = 203, SMAXO = 64, DM_ROWS = 6 };

static Expr *lane_i(Program *p, int o, int j, int w) { return kx_add(p, kx_mul(p, kx_var(p, o), w), kx_var(p, j)); }

/* for o in 0..t: for j in 0..w [vector]: body(o*w + j) */
static Stmt *tiles(Program *p, int o, int j, int64_t t, int w, Stmt *body) {
    Stmt *v = ks_loop(p, j, 0, w, 1, body);
    v->hints = LH_VECTOR;
    return ks_loop(p, o, 0, t, 1, v);
}

static Program *strided_prog(Arena *a, const Target *t, int *nout) {
    Program *p = prog_new(a, "bstride", t);
    Buf *x = buf(p, "x", DT_FLOAT, SN, B_INPUT), *h = buf(p, "h", DT_INT16, SN, B_INPUT);
    static const int strides[] = {2, 3, 4, -2, -3}, widths[] = {16, 5};
    for (int si = 0; si < COUNTOF(strides); si++)
        for (int wi = 0; wi < COUNTOF(widths); wi++)
            for (int hi = 0; hi < 2; hi++) {
                int64_t s = strides[si], w = widths[wi], as = llabs(s), tw = ((SN - 1) / as + 1) / w * w;
                /* s > 0: first read x[0] (lo) or last read x[SN-1] (hi); s < 0: the other way */
                int64_t base = (s > 0) == (hi == 0) ? (s > 0 ? 0 : SN - 1) : (s > 0 ? SN - 1 - s * (tw - 1) : as * (tw - 1));
                char name[32];
                snprintf(name, sizeof name, "s%d_w%d_%s", (int)s, (int)w, hi ? "hi" : "lo");
                Buf *y = buf(p, name, DT_FLOAT, tw, B_OUTPUT);
                Buf *yh = buf(p, arena_printf(a, "%s_h", name), DT_INT16, tw, B_OUTPUT);
                Kernel *k = kir_kernel_new(p, name, "test", KC_COPY);
                kir_param(p, k, x, KP_IN);
                kir_param(p, k, h, KP_IN);
                kir_param(p, k, y, KP_OUT);
                kir_param(p, k, yh, KP_OUT);
                int o = kir_var(k), j = kir_var(k);
                Expr *src = kx_addc(p, kx_mul(p, lane_i(p, o, j, (int)w), s), base);
                Stmt *body = ks_store(p, y, (Expr *[]){lane_i(p, o, j, (int)w)}, vld(p, x, src));
                body = ks_seq(body, ks_store(p, yh, (Expr *[]){lane_i(p, o, j, (int)w)}, vld(p, h, src)));
                k->body = tiles(p, o, j, tw / w, (int)w, body);
            }
    /* r = 0.25; for i in 0..n [reduction, vector]: r += x[SN - 1 - 2*(n-1) + 2*i] */
    Buf *r = buf(p, "rsum", DT_FLOAT, 1, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "rsum", "test", KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, r, KP_OUT);
    int i = kir_var(k), acc = kir_scalar(p, k, DT_FLOAT);
    int64_t n = (SN - 1) / 2 + 1 - 3;
    Expr *src = kx_addc(p, kx_mul(p, kx_var(p, i), 2), SN - 1 - 2 * (n - 1));
    Stmt *red = ks_red_loop(p, i, n, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), vld(p, x, src))));
    red->hints |= LH_VECTOR;
    k->body = ks_seq(ks_set(p, acc, kx_const(p, DT_FLOAT, 0.25)),
                     ks_seq(red, ks_store(p, r, (Expr *[]){kx_index(p, 0)}, kx_scalar(p, k, acc))));
    *nout = p->noutputs;
    return p;
}

/* size bytes between two PROT_NONE pages, starting right after the first (at_end false) or
 * ending right before the second; *map and *maplen are what to munmap. */
static void *guarded(size_t size, bool at_end, void **map, size_t *maplen) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), data = (size + pg - 1) / pg * pg;
    *maplen = data + 2 * pg;
    char *m = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) die("mmap");
    if (mprotect(m, pg, PROT_NONE) || mprotect(m + pg + data, pg, PROT_NONE)) die("mprotect");
    *map = m;
    return at_end ? m + pg + data - size : m + pg;
}

/* Whether the LLVM IR of p (emitted to path) calls llvm.masked.gather. */
static bool has_gather(Program *p, const Target *t, const char *path) {
    be_emit(p, t, 2, EMIT_LLVM, path);
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read %s", path);
    char line[4096];
    bool g = false;
    while (fgets(line, sizeof line, f)) g |= strstr(line, "llvm.masked.gather") != NULL;
    fclose(f);
    remove(path);
    return g;
}

/* Runs p (no temporaries) and the interpreter; every output byte for byte, except float
 * output fuzzy (within 1e-5 relative: a reassociated sum). */
static bool same_as_interp(Program *p, RunFn run, const void **in, int fuzzy) {
    void *out[2][SMAXO];
    for (int c = 0; c < 2; c++)
        for (int o = 0; o < p->noutputs; o++) out[c][o] = xalloc(kir_nbytes(p->outputs[o]));
    bool ok = run(in, out[0], NULL) == 0;
    kir_interpret(p, in, out[1]);
    for (int o = 0; o < p->noutputs && ok; o++) {
        if (o == fuzzy) {
            float g = *(float *)out[0][o], want = *(float *)out[1][o];
            ok = fabsf(g - want) <= 1e-5f * fabsf(want);
        } else {
            ok = !memcmp(out[0][o], out[1][o], kir_nbytes(p->outputs[o]));
        }
        if (!ok) printf("  output %s differs\n", p->outputs[o]->name);
    }
    return ok;
}

static void test_strided(Arena *a, const Target *host, const char *dir) {
    int nout;
    Program *p = strided_prog(a, host, &nout);
    kir_verify(p, "test_backend");
    bufferize(p);
    const char *path = arena_printf(a, "%s/%s", dir, p->name);
    report(!has_gather(p, host, arena_printf(a, "%s.ll", path)), "strided loads: no gather in the LLVM IR");
    const char *obj = arena_printf(a, "%s.o", path);
    be_emit(p, host, 2, EMIT_OBJ, obj);
    RunFn run = be_load_object(obj, p->name);
    for (int at_end = 0; at_end < 2; at_end++) {
        void *mx, *mh;
        size_t lx, lh;
        float *x = guarded(SN * sizeof(float), at_end, &mx, &lx);
        int16_t *h = guarded(SN * sizeof(int16_t), at_end, &mh, &lh);
        for (int i = 0; i < SN; i++) {
            x[i] = (float)sin(i * 0.91) * 5;
            h[i] = (int16_t)(i * 37 - 3000);
        }
        const void *in[2] = {x, h};
        char what[160];
        snprintf(what, sizeof what, "strided loads (2, 3, 4, -2, -3; 16 and 5 lanes; a vector sum) at the "
                 "%s of a guarded page: as the interpreter", at_end ? "end" : "start");
        report(same_as_interp(p, run, in, nout - 1), what);
        munmap(mx, lx);
        munmap(mh, lh);
    }
    remove(obj);
}

/* y[a, v] = x[(a*128 + v) / 128, (a*128 + v) % 128] over tiles of 16 lanes; flat: the same
 * through a [rows, 1, 1, 128] view with the /128/1/1, %1 indices of a flattened copy. */
static Program *divmod_prog(Arena *a, const Target *t, bool provable) {
    Program *p = prog_new(a, provable ? "bdivmod" : "bdivmod2", t);
    int64_t d2[2] = {DM_ROWS, 128}, d4[4] = {DM_ROWS, 1, 1, 128};
    Buf *x = kir_buf_new(p, "x", DT_FLOAT, 2, d2, B_INPUT);
    x->io_index = p->ninputs;
    p->inputs[p->ninputs++] = x;
    Buf *xv = kir_view_new(p, x, "xv", 4, d4);
    Buf *y = buf(p, "y", DT_FLOAT, DM_ROWS * 128, B_OUTPUT), *z = buf(p, "z", DT_FLOAT, DM_ROWS * 128, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, "divmod", "test", KC_COPY);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, xv, KP_IN);
    kir_param(p, k, y, KP_OUT);
    kir_param(p, k, z, KP_OUT);
    int r = kir_var(k), t0 = kir_var(k), v = kir_var(k);
    Expr *col = kx_add(p, kx_var(p, t0), kx_var(p, v));
    Expr *f = kx_add(p, kx_mul(p, kx_var(p, r), 128), col);
    Expr *out = f;
    Expr *c128 = kx_index(p, 128), *c1 = kx_index(p, 1);
    Stmt *body;
    if (provable) {
        Expr *q = kx_bin(p, K_DIV, f, c128);
        Expr *i2[2] = {q, kx_bin(p, K_REM, f, c128)};
        body = ks_store(p, y, &out, kx_load(p, x, i2));
        Expr *i4[4] = {kx_bin(p, K_DIV, kx_bin(p, K_DIV, q, c1), c1), kx_bin(p, K_REM, kx_bin(p, K_DIV, q, c1), c1),
                       kx_bin(p, K_REM, q, c1), kx_bin(p, K_REM, f, c128)};
        body = ks_seq(body, ks_store(p, z, &out, kx_load(p, xv, i4)));
    } else {
        /* (f + 8) / 16 crosses blocks within a tile; f * 3 / 2 is not affine */
        Expr *g = kx_addc(p, f, 8);
        Expr *i2[2] = {kx_bin(p, K_REM, kx_bin(p, K_DIV, g, kx_index(p, 16)), kx_index(p, DM_ROWS)),
                       kx_bin(p, K_REM, g, c128)};
        body = ks_store(p, y, &out, kx_load(p, x, i2));
        Expr *i4[4] = {kx_bin(p, K_DIV, kx_bin(p, K_DIV, kx_mul(p, f, 3), kx_index(p, 2)), kx_index(p, 192)),
                       kx_index(p, 0), kx_index(p, 0), kx_bin(p, K_REM, kx_bin(p, K_DIV, kx_mul(p, f, 3), kx_index(p, 2)), c128)};
        body = ks_seq(body, ks_store(p, z, &out, kx_load(p, xv, i4)));
    }
    Stmt *vl = ks_loop(p, v, 0, 16, 1, body);
    vl->hints = LH_VECTOR;
    Stmt *tl = ks_loop(p, t0, 0, 128, 16, vl);
    tl->hints = LH_TILE;
    k->body = ks_loop(p, r, 0, DM_ROWS, 1, tl);
    return p;
}

static void test_divmod(Arena *a, const Target *host, const char *dir) {
    float *x = xalloc(DM_ROWS * 128 * sizeof(float));
    for (int i = 0; i < DM_ROWS * 128; i++) x[i] = (float)i * 0.5f - 7;
    for (int provable = 1; provable >= 0; provable--) {
        Program *p = divmod_prog(a, host, provable);
        kir_verify(p, "test_backend");
        bufferize(p);
        const char *path = arena_printf(a, "%s/%s", dir, p->name);
        bool g = has_gather(p, host, arena_printf(a, "%s.ll", path));
        const char *obj = arena_printf(a, "%s.o", path);
        be_emit(p, host, 2, EMIT_OBJ, obj);
        RunFn run = be_load_object(obj, p->name);
        const void *in[1] = {x};
        char what[160];
        snprintf(what, sizeof what, "div/mod-indexed copy (%s): %s, as the interpreter",
                 provable ? "blocks the ranges prove" : "across blocks, not affine",
                 provable ? "contiguous (no gather)" : "gathers");
        report(same_as_interp(p, run, in, -1) && g == !provable, what);
        remove(obj);
    }
}

/* ---- vector reductions ([reduction, vector]) against C and the interpreter ----
 * One program per extent (below, equal to and above the host's lanes, multiples and not):
 * a kernel per accumulation r = init; for i [reduction, vector]: r = r OP f(x[i]); out = r.
 * Integer and min/max results must be exact (and a NaN anywhere in the row gives NaN);
 * float sums and products, which the backend reassociates, agree with a double-precision
 * C reference within 1e-5 of the sum of the terms' magnitudes. With --fp-strict the
 * backend keeps the loop in order: every float result equals the interpreter's bit for bit. */
enum { RED_CASES = 10 };

typedef struct RedProg {
    Program *p;
    int64_t n;
    Buf *x, *xn, *xi;
    Buf *out[RED_CASES];
} RedProg;

/* out[0] = r after r = init; for i [reduction, vector]: body (upd_i of r at register r) */
static Kernel *red_kernel(RedProg *rp, int c, const char *name, Buf *in, Buf *in2, DType t) {
    Program *p = rp->p;
    rp->out[c] = buf(p, name, t, 2, B_OUTPUT);
    Kernel *k = kir_kernel_new(p, name, "test", KC_GENERIC);
    kir_param(p, k, in, KP_IN);
    if (in2) kir_param(p, k, in2, KP_IN);
    kir_param(p, k, rp->out[c], KP_OUT);
    return k;
}

static Stmt *red_loop(Program *p, int var, int64_t n, Stmt *body) {
    Stmt *l = ks_red_loop(p, var, n, body);
    l->hints |= LH_VECTOR;
    return l;
}

static Stmt *store_at(Program *p, Buf *b, int64_t i, Expr *v) {
    return ks_store(p, b, (Expr *[]){kx_index(p, i)}, v);
}

/* r = init; for i: r = op(r, f) (or op(f, r) when `swap`); out = {r, init} */
static void red_case(RedProg *rp, int c, const char *name, Buf *in, KOp op, double init,
                     Expr *(*f)(Program *p, Buf *in, int i), bool swap) {
    Program *p = rp->p;
    DType t = in->dtype;
    Kernel *k = red_kernel(rp, c, name, in, NULL, t);
    int i = kir_var(k), r = kir_scalar(p, k, t);
    Expr *e = f(p, in, i), *rv = kx_scalar(p, k, r);
    Stmt *upd = ks_set(p, r, swap ? kx_bin(p, op, e, rv) : kx_bin(p, op, rv, e));
    Expr *iv = dtype_is_float(t) ? kx_const(p, t, init) : kx_int(p, t, (int64_t)init);
    k->body = ks_seq(ks_set(p, r, iv), red_loop(p, i, rp->n, upd));
    ks_seq(k->body, store_at(p, rp->out[c], 0, kx_scalar(p, k, r)));
    ks_seq(k->body, store_at(p, rp->out[c], 1, kx_clone(p, iv)));
}

static Expr *f_x(Program *p, Buf *in, int i) { return at(p, in, i); }
static Expr *f_sq(Program *p, Buf *in, int i) { return kx_bin(p, K_MUL, at(p, in, i), at(p, in, i)); }
static Expr *f_near1(Program *p, Buf *in, int i) {
    return kx_bin(p, K_ADD, kx_const(p, DT_FLOAT, 1), kx_bin(p, K_MUL, at(p, in, i), kx_const(p, DT_FLOAT, 0.01)));
}
/* x - 10 and x + 10: all of one sign, so that a wrong identity (0) of max/min shows */
static Expr *f_below(Program *p, Buf *in, int i) { return kx_bin(p, K_SUB, at(p, in, i), kx_const(p, DT_FLOAT, 10)); }
static Expr *f_above(Program *p, Buf *in, int i) { return kx_bin(p, K_ADD, at(p, in, i), kx_const(p, DT_FLOAT, 10)); }
static Expr *f_odd(Program *p, Buf *in, int i) { return kx_bin(p, K_OR, at(p, in, i), kx_int(p, DT_INT32, 1)); }

/* A softmax row's two reductions: m = max x; s = sum exp(x - m); out = {m, s}; and a loop
 * with two accumulators: out = {sum x, max x}. */
static void red_softmax(RedProg *rp, int c) {
    Program *p = rp->p;
    Kernel *k = red_kernel(rp, c, "softmax_row", rp->x, NULL, DT_FLOAT);
    int i = kir_var(k), j = kir_var(k), m = kir_scalar(p, k, DT_FLOAT), s = kir_scalar(p, k, DT_FLOAT);
    Expr *mv = kx_scalar(p, k, m), *sv = kx_scalar(p, k, s);
    Stmt *b = ks_set(p, m, kx_const(p, DT_FLOAT, -INFINITY));
    ks_seq(b, red_loop(p, i, rp->n, ks_set(p, m, kx_bin(p, K_MAX, mv, at(p, rp->x, i)))));
    ks_seq(b, ks_set(p, s, kx_const(p, DT_FLOAT, 0)));
    Expr *ex = kx_un(p, K_EXP, kx_bin(p, K_SUB, at(p, rp->x, j), kx_clone(p, mv)));
    ks_seq(b, red_loop(p, j, rp->n, ks_set(p, s, kx_bin(p, K_ADD, kx_clone(p, sv), ex))));
    ks_seq(b, store_at(p, rp->out[c], 0, kx_clone(p, mv)));
    k->body = ks_seq(b, store_at(p, rp->out[c], 1, kx_clone(p, sv)));

    k = red_kernel(rp, c + 1, "sum_and_max", rp->x, NULL, DT_FLOAT);
    i = kir_var(k);
    int a = kir_scalar(p, k, DT_FLOAT), t = kir_scalar(p, k, DT_FLOAT), x = kir_scalar(p, k, DT_FLOAT);
    Stmt *body = ks_set(p, x, at(p, rp->x, i));       /* a lane-private register */
    ks_seq(body, ks_set(p, a, kx_bin(p, K_ADD, kx_scalar(p, k, a), kx_scalar(p, k, x))));
    ks_seq(body, ks_set(p, t, kx_bin(p, K_MAX, kx_scalar(p, k, t), kx_scalar(p, k, x))));
    b = ks_set(p, a, kx_const(p, DT_FLOAT, 0));
    ks_seq(b, ks_set(p, t, kx_const(p, DT_FLOAT, -1e30)));
    ks_seq(b, red_loop(p, i, rp->n, body));
    ks_seq(b, store_at(p, rp->out[c + 1], 0, kx_scalar(p, k, a)));
    k->body = ks_seq(b, store_at(p, rp->out[c + 1], 1, kx_scalar(p, k, t)));
}

static RedProg red_prog(Arena *a, const Target *t, int64_t n, bool strict) {
    RedProg rp = {prog_new(a, arena_printf(a, "bred%lld%s", (long long)n, strict ? "s" : ""), t), n, 0, 0, 0, {0}};
    Program *p = rp.p;
    p->fp_strict = strict;
    rp.x = buf(p, "x", DT_FLOAT, n, B_INPUT);
    rp.xn = buf(p, "xn", DT_FLOAT, n, B_INPUT);
    rp.xi = buf(p, "xi", DT_INT32, n, B_INPUT);
    red_case(&rp, 0, "sum_sq", rp.x, K_ADD, 0.5, f_sq, false);
    red_case(&rp, 1, "sum_swapped", rp.x, K_ADD, -0.0, f_x, true);
    red_case(&rp, 2, "max", rp.x, K_MAX, -INFINITY, f_below, false);
    red_case(&rp, 3, "max_nan", rp.xn, K_MAX, -INFINITY, f_x, false);
    red_case(&rp, 4, "min", rp.x, K_MIN, 1e6, f_above, true);
    red_case(&rp, 5, "product", rp.x, K_MUL, 1, f_near1, false);
    red_case(&rp, 6, "int32_sum", rp.xi, K_ADD, 7, f_x, false);
    red_case(&rp, 7, "int32_product", rp.xi, K_MUL, 1, f_odd, false);
    red_softmax(&rp, 8);
    return rp;
}

/* The C reference of output c (two values). */
static void red_want(int c, int64_t n, const float *x, const float *xn, const int32_t *xi, double *w) {
    double s = 0, m = -INFINITY, mn = 1e6, pr = 1, mx = -1e30, e = 0;
    uint32_t is = 7, ip = 1;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        s += (double)x[i] * x[i];
        m = fmax(m, x[i]);
        mn = fmin(mn, x[i] + 10.0f);
        pr *= 1 + x[i] * 0.01;
        nan |= isnan(xn[i]);
        is += (uint32_t)xi[i];
        ip *= (uint32_t)(xi[i] | 1);
    }
    for (int64_t i = 0; i < n; i++) e += exp((double)x[i] - m), mx = fmax(mx, x[i]);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    double vals[RED_CASES][2] = {{0.5 + s, 0.5}, {sum, -0.0}, {(float)m - 10.0f, -INFINITY}, {nan ? NAN : m, -INFINITY},
                                 {mn, 1e6}, {pr, 1}, {(int32_t)is, 7}, {(int32_t)ip, 1}, {m, e}, {sum, mx}};
    w[0] = vals[c][0];
    w[1] = vals[c][1];
}

static void test_reductions(Arena *a, const Target *host, const char *dir) {
    static const int64_t ns[] = {3, 16, 61, 64, 200, 1031};
    enum { NMAX = 1031 };
    float x[NMAX], xn[NMAX];
    int32_t xi[NMAX];
    for (int i = 0; i < NMAX; i++) {
        x[i] = (float)(sin(i * 0.91) * 3);
        xn[i] = x[i];
        xi[i] = (int32_t)(i * 2654435761u);                 /* wraps: sums and products do too */
    }
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int64_t n = ns[t];
        xn[n / 2] = NAN;
        for (int strict = 0; strict < 2; strict++) {
            RedProg rp = red_prog(a, host, n, strict);
            Program *p = rp.p;
            kir_verify(p, "test_backend");
            bufferize(p);
            const char *obj = arena_printf(a, "%s/%s.o", dir, p->name);
            be_emit(p, host, 2, EMIT_OBJ, obj);
            RunFn run = be_load_object(obj, p->name);
            const void *in[3] = {x, xn, xi};
            float got[2][RED_CASES][2];
            void *out[2][RED_CASES];
            for (int c = 0; c < RED_CASES; c++) out[0][c] = got[0][c], out[1][c] = got[1][c];
            check(run(in, out[0], NULL) == 0, "vector reduction program runs");
            kir_interpret(p, in, out[1]);
            int bad = 0;
            double maxerr = 0;
            for (int c = 0; c < RED_CASES; c++) {
                double w[2];
                red_want(c, n, x, xn, xi, w);
                for (int v = 0; v < 2; v++) {
                    /* min/max, integers, the initial values stored, and the max of softmax_row and
                     * sum_and_max are exact */
                    bool exact = c == 2 || c == 3 || c == 4 || c == 6 || c == 7 || (c == 8 ? v == 0 : v == 1);
                    double g, ig;
                    if (rp.out[c]->dtype == DT_INT32) g = ((int32_t *)got[0][c])[v], ig = ((int32_t *)got[1][c])[v];
                    else g = got[0][c][v], ig = got[1][c][v];
                    double scale = c == 0 ? w[0] : c == 1 || c == 9 ? 3.0 * (double)n : fabs(w[v]) + 1;
                    double err = isnan(w[v]) ? (isnan(g) && isnan(ig) ? 0 : INFINITY) : fabs(g - w[v]) / scale;
                    bool ok = exact ? (isnan(w[v]) ? err == 0 : g == w[v] && ig == w[v])
                                    : err < 1e-5 && fabs(ig - w[v]) / scale < 1e-5;
                    if (strict && rp.out[c]->dtype == DT_FLOAT && !isnan(w[v]))
                        ok &= !memcmp(&got[0][c][v], &got[1][c][v], sizeof(float));
                    if (!ok && bad++ < 5) printf("FAIL: n %lld %s: %s[%d] = %.9g (interpreter %.9g), want %.9g\n",
                                                 (long long)n, strict ? "strict" : "", rp.out[c]->name, v, g, ig, w[v]);
                    if (!exact) maxerr = fmax(maxerr, err);
                }
            }
            char what[160];
            snprintf(what, sizeof what, "vector reductions over %lld elements%s: %d cases, exact ones exact, "
                     "max rel err %.2g%s", (long long)n, strict ? " --fp-strict" : "", RED_CASES,
                     maxerr, strict ? ", floats bitwise the interpreter's" : "");
            report(!bad, what);
            remove(obj);
        }
        xn[n / 2] = x[n / 2];
    }
}

/* ---- K_DOT2 (kir.h) against the interpreter ----
 * y[i] = dot2(a[i], b[i]): a's two int16 halves times b's, summed;
 * in vector loops of 16, 8, 4, 5, 3 and 2 lanes (pmaddwd where the target has it, shuffles
 * elsewhere) and a scalar loop, on the host and on x86-64-v3 (AVX2, the dot2 form's level)
 * and x86-64 (SSE2) where the host runs them; the extremes of both operands included. */
enum { DN = 160 };

static Program *dot2_prog(Arena *a, const Target *t) {
    Program *p = prog_new(a, "bdot2", t);
    Buf *x = buf(p, "a", DT_INT32, DN, B_INPUT), *b = buf(p, "b", DT_INT32, DN, B_INPUT);
    static const int widths[] = {16, 8, 4, 5, 3, 2, 1};
    for (int wi = 0; wi < COUNTOF(widths); wi++) {
        int w = widths[wi];
        Buf *y = buf(p, arena_printf(a, "y%d", w), DT_INT32, DN / w * w, B_OUTPUT);
        Kernel *k = kir_kernel_new(p, arena_printf(a, "dot2_%d", w), "test", KC_ELEMENTWISE);
        kir_param(p, k, x, KP_IN);
        kir_param(p, k, b, KP_IN);
        kir_param(p, k, y, KP_OUT);
        int o = kir_var(k), j = kir_var(k);
        Expr *v = kx_bin(p, K_DOT2, vld(p, x, lane_i(p, o, j, w)), vld(p, b, lane_i(p, o, j, w)));
        Stmt *body = ks_store(p, y, (Expr *[]){lane_i(p, o, j, w)}, v);
        k->body = w > 1 ? tiles(p, o, j, DN / w, w, body) : ks_loop(p, o, 0, DN, 1, ks_loop(p, j, 0, 1, 1, body));
    }
    return p;
}

static void test_dot2(Arena *a, const Target *host, const char *dir) {
    int32_t x[DN], b[DN];
    static const int16_t hx[] = {-32768, 32767, -1, 0, 1, 255, -256, 12345};
    static const int16_t bx[] = {-128, 127, -1, 0, 1, -32768, 32767, 99};
    for (int i = 0; i < DN; i++) {
        uint16_t lo = (uint16_t)(i < 64 ? hx[i % 8] : (i * 7919) & 0xffff);
        uint16_t hi = (uint16_t)(i < 64 ? hx[(i / 8) % 8] : (i * 104729) & 0xffff);
        x[i] = (int32_t)((uint32_t)lo | (uint32_t)hi << 16);
        uint16_t b0 = (uint16_t)(i < 64 ? bx[(i + 3) % 8] : (i * 31) & 0xffff), b1 = (uint16_t)(i < 64 ? bx[(i / 8 + 5) % 8] : (i * 57) & 0xffff);
        b[i] = (int32_t)((uint32_t)b0 | (uint32_t)b1 << 16);
    }
    static const char *const cpus[] = {NULL, "x86-64-v3", "x86-64"};
    bool x86 = !strncmp(host->triple, "x86_64", 6);
    for (int c = 0; c < (x86 ? 3 : 1); c++) {
        Target t;
        if (c) be_target(&t, NULL, cpus[c], NULL, NULL);
        const Target *tt = c ? &t : host;
        Program *p = dot2_prog(a, tt);
        kir_verify(p, "test_backend");
        bufferize(p);
        const char *obj = arena_printf(a, "%s/%s%d.o", dir, p->name, c);
        be_emit(p, tt, 2, EMIT_OBJ, obj);
        RunFn run = be_load_object(obj, p->name);
        const void *in[2] = {x, b};
        char what[96];
        snprintf(what, sizeof what, "dot2 on 16, 8, 4, 5, 3, 2 lanes and scalar (%s) as the interpreter", c ? cpus[c] : "host");
        report(same_as_interp(p, run, in, -1), what);
        remove(obj);
        if (c) be_target_free(&t);
    }
}

int main(void) {
    char dir[] = "/tmp/onnxcc-test-backend-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp");
    Arena *a = arena_new();
    Target host;
    be_target(&host, NULL, NULL, NULL, NULL);

    /* math: float and double in one program */
    MathData md[2];
    math_data(&md[0], &F32);
    math_data(&md[1], &F64);
    Program *p = math_prog(a, "bmath", &host, md, 2);
    const char *obj = arena_printf(a, "%s/bmath.o", dir);
    be_emit(p, &host, 2, EMIT_OBJ, obj);
    RunFn run = be_load_object(obj, p->name);
    const void *in[MAXIO];
    void *out[MAXIO], *iout[MAXIO];
    math_io(md, 2, in, out, false);
    math_io(md, 2, in, iout, true);
    void *arena = aligned_alloc((size_t)p->arena_align, ((size_t)p->arena_size + 2 * (size_t)p->arena_align) & ~((size_t)p->arena_align - 1));
    if (!arena) die("out of memory");
    check_contract(p, run, in, out, arena);
    kir_interpret(p, in, iout);
    check_math(&md[0]);
    check_math(&md[1]);
    free(arena);
    remove(obj);

    test_int(a, &host, dir);
    test_vectors(a, &host, dir);
    test_reductions(a, &host, dir);
    test_strided(a, &host, dir);
    test_divmod(a, &host, dir);
    test_dot2(a, &host, dir);
    test_firmware(a, &md[0], dir);
    rmdir(dir);
    be_target_free(&host);
    xfree_all();
    arena_free(a);
    if (skipped) printf("backend: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("backend: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
