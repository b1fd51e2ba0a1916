/* kcost.c - how much arithmetic and memory traffic a kernel does per run, read off its loop
 * nest (for `onnxcc bench`'s GFLOP/s and GB/s columns, and for anyone who wants a kernel's
 * MAC count).
 *
 * A multiply-accumulate is a K_MUL on data (float or integer, not index arithmetic) that is an
 * operand of a K_ADD or K_SUB: the `acc + a*b` of a matmul or convolution, also `x*scale + bias`
 * of a fused batch norm; an accumulated K_DOT4 (four byte products) is four, a K_DOT2 two. An integer
 * product by a constant is not one: it places a byte in a word (the `x1 * 256 + x0` of the
 * words dot4 reads), the work of a shift. Other
 * arithmetic is not counted, so an elementwise or copy kernel has no MACs and is measured in
 * bytes. Each statement's MACs are multiplied by the trip counts of its enclosing loops. Where
 * an if guards a statement (padding of a convolution), both branches are priced at their larger
 * one: the count is the work the loop nest is written to do, as an op-level count (2*K*M*N for
 * a matmul, Cout*Hout*Wout*Cin*kh*kw for a convolution, padding included) is.
 *
 * Loop bounds are constants, except tails that tiling bounds by an outer variable; a loop whose
 * inner bounds read its own variable is walked iteration by iteration (with the variable's
 * value known), otherwise trip count times body. Bytes are the sizes of the kernel's params,
 * each counted once: what a kernel must at least read and write. */
#include <stdlib.h>

#include "kir.h"

typedef struct Env {
    int64_t *val;
    bool *known;
} Env;

/* An index expression's value given the known loop variables; false if it reads anything else. */
static bool eval(const Expr *e, const Env *env, int64_t *out) {
    int64_t a, b;
    switch (e->kind) {
    case E_CONST: *out = e->i; return e->type == DT_INDEX || !dtype_is_float(e->type);
    case E_VAR:
        if (!env->known[e->var]) return false;
        *out = env->val[e->var];
        return true;
    case E_BIN:
        if (!eval(e->args[0], env, &a) || !eval(e->args[1], env, &b)) return false;
        switch (e->op) {
        case K_ADD: *out = a + b; return true;
        case K_SUB: *out = a - b; return true;
        case K_MUL: *out = a * b; return true;
        case K_DIV: if (!b) return false; *out = a / b; return true;
        case K_REM: if (!b) return false; *out = a % b; return true;
        case K_MIN: *out = a < b ? a : b; return true;
        case K_MAX: *out = a > b ? a : b; return true;
        default: return false;
        }
    case E_SELECT: {
        int64_t c;
        if (!eval(e->args[0], env, &c)) return false;
        return eval(e->args[c ? 1 : 2], env, out);
    }
    default: return false;
    }
}

/* Arithmetic on data, not on indices (DT_INDEX) or conditions. */
static bool is_data(const Expr *e) { return e->type != DT_INDEX && e->type != DT_BOOL; }

static bool is_add(const Expr *e) {
    return e->kind == E_BIN && (e->op == K_ADD || e->op == K_SUB) && is_data(e);
}

/* An integer product by a constant. */
static bool shift(const Expr *m) {
    return !dtype_is_float(m->type) && (m->args[0]->kind == E_CONST || m->args[1]->kind == E_CONST);
}

/* A load's indices are addresses: not looked into. */
static int64_t expr_macs(const Expr *e) {
    int64_t n = 0;
    for (int i = 0; i < e->nargs && e->kind != E_LOAD; i++) {
        const Expr *x = e->args[i];
        if (is_add(e) && x->kind == E_BIN && x->op == K_MUL && is_data(x) && !shift(x)) n++;
        if (is_add(e) && x->kind == E_BIN && x->op == K_DOT4) n += 4;
        if (is_add(e) && x->kind == E_BIN && x->op == K_DOT2) n += 2;
        n += expr_macs(x);
    }
    return n;
}

/* Whether a loop bound inside the list s depends on variable var. */
static bool bounds_read(const Stmt *s, int var) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (expr_reads_var(s->lo, var) || expr_reads_var(s->hi, var) || bounds_read(s->body, var)))
            return true;
        if (s->kind == S_IF && (bounds_read(s->then, var) || bounds_read(s->els, var))) return true;
    }
    return false;
}

static int64_t list_macs(const Stmt *s, Env *env);

/* Counts saturate at INT64_MAX (util.h's sat_add, sat_mul): a loop nest of a model's huge
 * (fuzzed) dims is "very many", not an overflow. */

/* Above this many trips a loop whose body reads its variable in bounds is priced from its
 * first iteration times the trips, not walked value by value. */
enum { WALK_TRIPS = 1 << 16 };

static int64_t loop_macs(const Stmt *s, Env *env) {
    int64_t lo, hi, step = s->step > 0 ? s->step : 1;
    if (!eval(s->lo, env, &lo) || !eval(s->hi, env, &hi)) return 0;     /* unknown: not counted */
    int64_t span;
    if (hi <= lo || __builtin_sub_overflow(hi, lo, &span) || span > INT64_MAX - step) return 0;
    int64_t trips = (span + step - 1) / step;
    if (!bounds_read(s->body, s->var) || trips > WALK_TRIPS) {
        /* the body's count may still read the variable's value through an if; price it once.
         * Values redone (LH_REDO) were counted in the loops that did them first. */
        int64_t n = 0;
        if (trips > WALK_TRIPS) {
            env->known[s->var] = true;
            env->val[s->var] = lo;
        }
        n = sat_mul(trips, list_macs(s->body, env));
        env->known[s->var] = false;
        if (!(s->hints & LH_REDO) || n == INT64_MAX) return n;
        return n - (int64_t)((double)n * (double)s->redo / (double)span);
    }
    int64_t n = 0;
    env->known[s->var] = true;
    for (int64_t v = lo; v < hi; v += step) {
        env->val[s->var] = v;
        n = sat_add(n, list_macs(s->body, env));
    }
    env->known[s->var] = false;
    return n;
}

static int64_t list_macs(const Stmt *s, Env *env) {
    int64_t n = 0;
    for (; s; s = s->next) {
        switch (s->kind) {
        case S_LOOP: n = sat_add(n, loop_macs(s, env)); break;
        case S_STORE:
        case S_SET: n = sat_add(n, expr_macs(s->val)); break;
        case S_IF: {
            int64_t a = list_macs(s->then, env), b = list_macs(s->els, env);
            n = sat_add(n, a > b ? a : b);
            break;
        }
        }
    }
    return n;
}

void kir_kernel_cost(const Kernel *k, int64_t *macs, int64_t *bytes) {
    size_t nv = (size_t)(k->nvars > 0 ? k->nvars : 1);
    Env env = {calloc(nv, sizeof(int64_t)), calloc(nv, sizeof(bool))};
    if (!env.val || !env.known) die("out of memory");
    *macs = list_macs(k->body, &env);
    free(env.val);
    free(env.known);
    int64_t b = 0;
    for (int i = 0; i < k->nparams; i++) b = sat_add(b, (int64_t)kir_nbytes(k->params[i]));
    *bytes = b;
}

void kir_kernel_work(const Program *p, int i, int64_t *macs, int64_t *bytes) {
    kir_kernel_cost(p->kernels[i], macs, bytes);
    int64_t n = kir_runs(p, i);
    *macs = sat_mul(*macs, n);
    *bytes = sat_mul(*bytes, n);
}
