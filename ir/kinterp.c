/* kinterp.c - a tree-walking interpreter of the kernel IR (kir_interpret).
 *
 * Constant folding lowers a node whose inputs are all constant and runs the little program
 * here; the unit tests run programs before and after each kernel pass and compare. It follows
 * the semantics written in kir.h exactly, and is slow on purpose: no caching, no cleverness,
 * just every statement and expression evaluated as written. Float32 arithmetic is done in
 * float (with libm: this runs on the host at compile time); integers are kept as int64 and
 * wrapped to their dtype's width after every operation; bool is 0/1; index is int64.
 * float16/bfloat16 values are float32 values too: rounded to 16 bits only by a cast to them
 * and by a store, with the same bit arithmetic as the generated code.
 *
 * Every load and store is bounds-checked: a rule or pass that leaves a buffer is a bug of
 * ours, reported with die() rather than reading garbage. */
#include "kir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef union Val { double f; int64_t i; uint64_t u; } Val;

typedef struct Interp {
    Program *p;
    Kernel *k;
    const void *const *inputs;
    void *const *outputs;
    unsigned char *arena;           /* bufferized temporaries */
    unsigned char **temp;           /* by buf id: calloc'ed storage of unplaced temporaries */
    int64_t *vars;
    Val *regs;
} Interp;

static bool is_unsigned(DType t) {
    return t == DT_UINT8 || t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64;
}

/* Bring an integer result back to its dtype's range (two's complement wrap-around). */
static int64_t wrap(DType t, int64_t v) {
    switch (t) {
    case DT_INT8: return (int8_t)v;
    case DT_UINT8: return (uint8_t)v;
    case DT_INT16: return (int16_t)v;
    case DT_UINT16: return (uint16_t)v;
    case DT_INT32: return (int32_t)v;
    case DT_UINT32: return (uint32_t)v;
    case DT_BOOL: return v != 0;
    default: return v;
    }
}

/* float32 arithmetic, also for the 16-bit float types (kir.h) */
static bool is_single(DType t) { return t != DT_DOUBLE; }

static Val fval(DType t, double v) {
    Val r;
    r.f = is_single(t) ? (double)(float)v : v;
    return r;
}

static bool is_half(DType t) { return t == DT_FLOAT16 || t == DT_BFLOAT16; }

/* float32 -> float16/bfloat16 bit pattern, rounding to nearest even. Integer arithmetic on the
 * float's bits, step for step what backend/kernel.c emits (float_to_half), so that constant
 * folding and the generated code agree to the bit. NaNs stay NaN (quiet, sign and the top
 * payload bits kept); values past the largest finite half round to infinity. */
static uint16_t float_to_half(DType t, float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t a = x & 0x7fffffffu;
    if (t == DT_BFLOAT16) {
        if (a > 0x7f800000u) return (uint16_t)(x >> 16 | 0x40);
        return (uint16_t)((x + 0x7fffu + (x >> 16 & 1)) >> 16);
    }
    uint32_t sign = x >> 16 & 0x8000, h;
    if (a > 0x7f800000u) h = 0x7e00 | (a >> 13 & 0x3ff);
    else if (a >= 0x477ff000u) h = 0x7c00;                 /* >= 65520: rounds to inf */
    else if (a >= 0x38800000u) h = ((a + 0xfffu + (a >> 13 & 1)) >> 13) - (112u << 10);
    else {                                                  /* half subnormal or zero */
        uint32_t e = a >> 23, s = e < 101 ? 25 : 126 - e, m = (a & 0x7fffffu) | 0x800000u;
        h = (m + ((1u << (s - 1)) - 1) + (m >> s & 1)) >> s;
    }
    return (uint16_t)(sign | h);
}

static double half_value(DType t, uint16_t h) {
    Value v = {.dtype = t, .data = &h};
    return ir_const_float(&v, 0);
}

/* A float32 value rounded to float16/bfloat16 precision (the value of K_CAST to them). */
static Val round_half(DType t, double v) {
    Val r;
    r.f = half_value(t, float_to_half(t, (float)v));
    return r;
}

static Val ival(DType t, int64_t v) {
    Val r;
    r.i = wrap(t, v);
    return r;
}

static Val eval(Interp *in, const Expr *e);

/* ---- memory ---- */
static unsigned char *base_of(Interp *in, Buf *b) {
    Buf *r = kir_root(b);
    switch (r->kind) {
    case B_INPUT: return (unsigned char *)in->inputs[r->io_index];
    case B_OUTPUT: return (unsigned char *)in->outputs[r->io_index];
    case B_CONST: return (unsigned char *)r->data;
    case B_TEMP: return in->arena ? in->arena + r->offset : in->temp[r->id];
    }
    die("buffer %s: kind %d", r->name, r->kind);
}

static unsigned char *addr(Interp *in, Buf *b, Expr *const *idx, const char *what) {
    int64_t lin = 0;
    for (int d = 0; d < b->rank; d++) {
        Val v = eval(in, idx[d]);
        if (v.i < 0 || v.i >= b->dims[d])
            die("interpreter: kernel %s: %s of %%%s: index %d is %lld, dim %lld", in->k->name, what,
                b->name, d, (long long)v.i, (long long)b->dims[d]);
        lin = lin * b->dims[d] + v.i;
    }
    unsigned char *base = base_of(in, b);
    if (!base) die("interpreter: kernel %s: %%%s has no storage", in->k->name, b->name);
    return base + lin * (int64_t)dtype_size(b->dtype);
}

static Val load(DType t, const unsigned char *a) {
    Val v = {0};
    switch (t) {
    case DT_FLOAT: { float x; memcpy(&x, a, 4); v.f = x; break; }
    case DT_DOUBLE: memcpy(&v.f, a, 8); break;
    case DT_INT8: { int8_t x; memcpy(&x, a, 1); v.i = x; break; }
    case DT_UINT8: { uint8_t x; memcpy(&x, a, 1); v.i = x; break; }
    case DT_BOOL: { uint8_t x; memcpy(&x, a, 1); v.i = x != 0; break; }
    case DT_INT16: { int16_t x; memcpy(&x, a, 2); v.i = x; break; }
    case DT_UINT16: { uint16_t x; memcpy(&x, a, 2); v.i = x; break; }
    case DT_INT32: { int32_t x; memcpy(&x, a, 4); v.i = x; break; }
    case DT_UINT32: { uint32_t x; memcpy(&x, a, 4); v.i = x; break; }
    case DT_INT64: case DT_UINT64: memcpy(&v.i, a, 8); break;
    case DT_FLOAT16: case DT_BFLOAT16: { uint16_t x; memcpy(&x, a, 2); v.f = half_value(t, x); break; }
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0:
        v.f = f8_decode(t, *a);
        break;
    default: die("interpreter: load of %s", dtype_name(t));
    }
    return v;
}

static void store(DType t, unsigned char *a, Val v) {
    switch (t) {
    case DT_FLOAT: { float x = (float)v.f; memcpy(a, &x, 4); break; }
    case DT_DOUBLE: memcpy(a, &v.f, 8); break;
    case DT_INT8: case DT_UINT8: case DT_BOOL: { uint8_t x = (uint8_t)v.i; memcpy(a, &x, 1); break; }
    case DT_INT16: case DT_UINT16: { uint16_t x = (uint16_t)v.i; memcpy(a, &x, 2); break; }
    case DT_INT32: case DT_UINT32: { uint32_t x = (uint32_t)v.i; memcpy(a, &x, 4); break; }
    case DT_INT64: case DT_UINT64: memcpy(a, &v.i, 8); break;
    case DT_FLOAT16: case DT_BFLOAT16: { uint16_t x = float_to_half(t, (float)v.f); memcpy(a, &x, 2); break; }
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ:
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0:
        *a = f8_encode(t, (float)v.f);
        break;
    default: die("interpreter: store of %s", dtype_name(t));
    }
}

/* ---- operators ---- */
static Val cast(DType to, DType from, Val v) {
    bool ff = dtype_is_float(from), tf = dtype_is_float(to);
    if (to == DT_BOOL) return ival(to, ff ? v.f != 0 : v.i != 0);
    if (tf) {
        /* to a 16-bit float through float32, as the backend does (double->float16 thus
         * rounds twice; see kir.h) */
        Val r = fval(to, ff ? v.f : from == DT_UINT64 ? (double)v.u : (double)v.i);
        if (dtype_is_minifloat(to)) {  /* rounded as a store would (kir.h) */
            r.f = f8_decode(to, f8_encode(to, (float)r.f));
            return r;
        }
        return is_half(to) ? round_half(to, r.f) : r;
    }
    if (!ff) return ival(to, v.i);
    if (to == DT_UINT64 && v.f >= 9223372036854775808.0) { Val r; r.u = (uint64_t)v.f; return r; }
    return ival(to, sat_i64(v.f));                      /* NaN 0, saturated: no UB */
}

static double round_even(double x) { return nearbyint(x); }  /* default mode: to nearest even */

static double funary(KOp op, double x, bool single) {
    switch (op) {
    case K_NEG: return -x;
    case K_ABS: return fabs(x);
    case K_SQRT: return single ? sqrtf((float)x) : sqrt(x);
    case K_EXP: return single ? expf((float)x) : exp(x);
    case K_LOG: return single ? logf((float)x) : log(x);
    case K_TANH: return single ? tanhf((float)x) : tanh(x);
    case K_SIGMOID:
        /* in double, and exp(x) itself far left, so that tiny results are not flushed to 0 */
        if (single) return (float)(1.0 / (1.0 + exp(-x)));
        return x < -700 ? exp(x) : 1.0 / (1.0 + exp(-x));
    case K_ERF: return single ? erff((float)x) : erf(x);
    case K_ERF1P: return single ? 1.0f + erff((float)x) : 1 + erf(x);
    case K_FLOOR: return floor(x);
    case K_CEIL: return ceil(x);
    case K_ROUND: return round_even(x);
    case K_RECIP: return single ? 1.0f / (float)x : 1.0 / x;
    case K_SIN: return single ? sinf((float)x) : sin(x);
    case K_COS: return single ? cosf((float)x) : cos(x);
    case K_TAN: return single ? tanf((float)x) : tan(x);
    case K_ASIN: return single ? asinf((float)x) : asin(x);
    case K_ACOS: return single ? acosf((float)x) : acos(x);
    case K_ATAN: return single ? atanf((float)x) : atan(x);
    case K_SINH: return single ? sinhf((float)x) : sinh(x);
    case K_COSH: return single ? coshf((float)x) : cosh(x);
    case K_ASINH: return single ? asinhf((float)x) : asinh(x);
    case K_ACOSH: return single ? acoshf((float)x) : acosh(x);
    case K_ATANH: return single ? atanhf((float)x) : atanh(x);
    case K_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;     /* keeps NaN and signed zero */
    case K_NOT: return x == 0;
    default: die("interpreter: float unary %s", kop_name[op]);
    }
}

static int64_t iunary(KOp op, DType t, int64_t x) {
    switch (op) {
    case K_NEG: return (int64_t)(0 - (uint64_t)x);
    case K_ABS: return x < 0 && !is_unsigned(t) ? (int64_t)(0 - (uint64_t)x) : x;
    case K_NOT: return t == DT_BOOL ? !x : ~x;
    case K_FLOOR: case K_CEIL: case K_ROUND: return x;
    case K_SIGN: return is_unsigned(t) ? x != 0 : (x > 0) - (x < 0);
    case K_SQRT: return (int64_t)sqrt((double)x);
    case K_RECIP: return x == 1 ? 1 : x == -1 ? -1 : 0;
    default: die("interpreter: integer unary %s", kop_name[op]);
    }
}

static double fbinary(KOp op, double a, double b, bool single) {
    switch (op) {
    case K_ADD: return a + b;
    case K_SUB: return a - b;
    case K_MUL: return a * b;
    case K_DIV: return a / b;
    case K_REM: return single ? fmodf((float)a, (float)b) : fmod(a, b);
    case K_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case K_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case K_POW: return single ? powf((float)a, (float)b) : pow(a, b);
    default: die("interpreter: float binary %s", kop_name[op]);
    }
}

static int64_t ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (; b; b >>= 1, x *= x)
        if (b & 1) r *= x;
    return (int64_t)r;
}

static int64_t ibinary(KOp op, DType t, Val a, Val b) {
    bool u = is_unsigned(t);
    switch (op) {
    case K_ADD: return (int64_t)(a.u + b.u);
    case K_SUB: return (int64_t)(a.u - b.u);
    case K_MUL: return (int64_t)(a.u * b.u);
    case K_DIV:
    case K_REM:
        if (!b.i) return 0;     /* as the generated code does (backend/kernel.c idiv) */
        if (u) return (int64_t)(op == K_DIV ? a.u / b.u : a.u % b.u);
        if (b.i == -1) return op == K_DIV ? (int64_t)(0 - a.u) : 0;
        return op == K_DIV ? a.i / b.i : a.i % b.i;
    case K_MIN: return u ? (int64_t)(a.u < b.u ? a.u : b.u) : MIN(a.i, b.i);
    case K_MAX: return u ? (int64_t)(a.u > b.u ? a.u : b.u) : MAX(a.i, b.i);
    case K_POW: return ipow(a.i, b.i);
    case K_AND: return a.i & b.i;
    case K_OR: return a.i | b.i;
    case K_XOR: return a.i ^ b.i;
    case K_DOT4: {
        uint32_t ua = (uint32_t)a.u, ub = (uint32_t)b.u, sum = 0;
        for (int j = 0; j < 4; j++) sum += (uint32_t)((int32_t)((ua >> 8 * j) & 255) * (int8_t)(ub >> 8 * j));
        return (int32_t)sum;
    }
    case K_DOT2: {
        uint32_t ua = (uint32_t)a.u, ub = (uint32_t)b.u, sum = 0;
        for (int j = 0; j < 2; j++) sum += (uint32_t)((int32_t)(int16_t)(ua >> 16 * j) * (int16_t)(ub >> 16 * j));
        return (int32_t)sum;
    }
    default: die("interpreter: integer binary %s", kop_name[op]);
    }
}

static bool compare(KOp op, DType t, Val a, Val b) {
    if (dtype_is_float(t)) {
        switch (op) {
        case K_LT: return a.f < b.f;
        case K_LE: return a.f <= b.f;
        case K_GT: return a.f > b.f;
        case K_GE: return a.f >= b.f;
        case K_EQ: return a.f == b.f;
        default: return a.f != b.f;
        }
    }
    if (is_unsigned(t)) {
        switch (op) {
        case K_LT: return a.u < b.u;
        case K_LE: return a.u <= b.u;
        case K_GT: return a.u > b.u;
        case K_GE: return a.u >= b.u;
        case K_EQ: return a.u == b.u;
        default: return a.u != b.u;
        }
    }
    switch (op) {
    case K_LT: return a.i < b.i;
    case K_LE: return a.i <= b.i;
    case K_GT: return a.i > b.i;
    case K_GE: return a.i >= b.i;
    case K_EQ: return a.i == b.i;
    default: return a.i != b.i;
    }
}

/* K_BITCAST: the value's bytes in memory (store), read back as type `to` (load). */
static Val bitcast(DType to, DType from, Val v) {
    unsigned char b[8] = {0};
    store(from, b, v);
    return load(to, b);
}

/* ---- expressions and statements ---- */
static Val eval_un(Interp *in, const Expr *e) {
    DType at = e->args[0]->type;
    Val a = eval(in, e->args[0]);
    if (e->op == K_CAST) return cast(e->type, at, a);
    if (e->op == K_BITCAST) return bitcast(e->type, at, a);
    if (e->op == K_NOT && e->type == DT_BOOL)
        return ival(DT_BOOL, dtype_is_float(at) ? a.f == 0 : a.i == 0);
    if (dtype_is_float(at)) {
        double r = funary(e->op, a.f, is_single(at));
        return e->type == DT_BOOL ? ival(DT_BOOL, (int64_t)r) : fval(e->type, r);
    }
    return ival(e->type, iunary(e->op, at, a.i));
}

static Val eval_bin(Interp *in, const Expr *e) {
    DType t = e->args[0]->type;
    Val a = eval(in, e->args[0]), b = eval(in, e->args[1]);
    if (kop_flags[e->op] & KF_CMP) return ival(DT_BOOL, compare(e->op, t, a, b));
    if (dtype_is_float(t)) {
        if (kop_flags[e->op] & KF_BITWISE) die("interpreter: %s on %s", kop_name[e->op], dtype_name(t));
        return fval(t, fbinary(e->op, a.f, b.f, is_single(t)));
    }
    return ival(t, ibinary(e->op, t, a, b));
}

static Val eval(Interp *in, const Expr *e) {
    switch (e->kind) {
    case E_CONST: return dtype_is_float(e->type) ? fval(e->type, e->f) : ival(e->type, e->i);
    case E_VAR: { Val v; v.i = in->vars[e->var]; return v; }
    case E_SCALAR: return in->regs[e->var];
    case E_LOAD: return load(e->buf->dtype, addr(in, e->buf, e->args, "load"));
    case E_UN: return eval_un(in, e);
    case E_BIN: return eval_bin(in, e);
    case E_SELECT:
        return eval(in, e->args[0]).i ? eval(in, e->args[1]) : eval(in, e->args[2]);
    }
    die("interpreter: expression kind %d", e->kind);
}

static void exec(Interp *in, const Stmt *s) {
    for (; s; s = s->next) switch (s->kind) {
    case S_LOOP: {
        int64_t lo = eval(in, s->lo).i, hi = eval(in, s->hi).i;
        for (int64_t v = lo; v < hi; v += s->step) {
            in->vars[s->var] = v;
            exec(in, s->body);
        }
        break;
    }
    case S_STORE: {
        if (kir_root(s->buf)->kind == B_CONST || kir_root(s->buf)->kind == B_INPUT)
            die("interpreter: kernel %s stores to read-only %%%s", in->k->name, s->buf->name);
        Val v = eval(in, s->val);
        store(s->buf->dtype, addr(in, s->buf, s->idx, "store"), v);
        break;
    }
    case S_SET: in->regs[s->var] = eval(in, s->val); break;
    case S_IF:
        exec(in, eval(in, s->cond).i ? s->then : s->els);
        break;
    }
}

/* Temporaries live in one arena once bufferize has placed them all, else each on its own. */
static void alloc_temps(Interp *in) {
    Program *p = in->p;
    bool placed = true;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (b->kind == B_TEMP && !b->alias && b->offset < 0) placed = false;
    }
    in->temp = calloc((size_t)p->nbufs + 1, sizeof *in->temp);
    if (!in->temp) die("out of memory");
    if (placed) {
        in->arena = calloc((size_t)p->arena_size + 1, 1);
        if (!in->arena) die("out of memory (arena of %lld bytes)", (long long)p->arena_size);
        return;
    }
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (b->kind != B_TEMP || b->alias) continue;
        in->temp[i] = calloc(kir_nbytes(b) + 1, 1);
        if (!in->temp[i]) die("out of memory (%s)", b->name);
    }
}

static void run_kernel(Interp *in, Kernel *k) {
    in->k = k;
    in->vars = calloc((size_t)k->nvars + 1, sizeof *in->vars);
    in->regs = calloc((size_t)k->nscalars + 1, sizeof *in->regs);
    if (!in->vars || !in->regs) die("out of memory");
    exec(in, k->body);
    free(in->vars);
    free(in->regs);
}

/* Element 0 of a one-element integer or bool buffer (control kernels). */
static int64_t scalar_of(Interp *in, Buf *b) { return load(b->dtype, base_of(in, b)).i; }

/* Kernels lo..hi-1, following the control kernels' regions (kir.h, KernelCtl). */
static void run_kernels(Interp *in, int lo, int hi) {
    Program *p = in->p;
    for (int i = lo; i < hi; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        if (!k->ctl) {
            run_kernel(in, k);
            continue;
        }
        int m = kir_ctl_match(p, i);
        if (k->ctl == KCTL_IF) {
            int end = p->kernels[m]->ctl == KCTL_ELSE ? kir_ctl_match(p, m) : m;
            if (scalar_of(in, k->cond)) run_kernels(in, i + 1, m);
            else if (m != end) run_kernels(in, m + 1, end);
            i = end;
        } else if (k->ctl == KCTL_LOOP) {
            int64_t trip = k->trip ? scalar_of(in, k->trip) : k->ntrip;
            unsigned char *c = base_of(in, k->counter);
            store(DT_INT64, c, ival(DT_INT64, 0));
            for (int64_t n = 0;; n++) {
                if ((trip >= 0 && n >= trip) || (k->cond && !scalar_of(in, k->cond))) break;
                if (k->max >= 0 && n >= k->max)
                    die("loop %s runs past its bound of %lld iterations", k->name, (long long)k->max);
                run_kernels(in, i + 1, m);
                store(DT_INT64, c, ival(DT_INT64, n + 1));
            }
            i = m;
        } else {
            die("control kernel %s outside its region", k->name);
        }
    }
}

void kir_interpret(Program *p, const void *const *inputs, void *const *outputs) {
    Interp in = {.p = p, .inputs = inputs, .outputs = outputs};
    alloc_temps(&in);
    run_kernels(&in, 0, p->nkernels);
    for (int i = 0; i < p->nbufs; i++) free(in.temp[i]);
    free(in.temp);
    free(in.arena);
}
