/* random.c - the random family: RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike, Bernoulli, Multinomial.
 *
 * Every number comes from the Philox-4x32-10 generator of helpers.c (rule_random), which
 * Dropout's training mode uses too: the counter is (element or sample index, 0, the node's
 * stream, 0) and the key the node's `seed` attribute (0 without one). The stream is a hash of
 * the node's first output name, so two random nodes with the same seed still draw different
 * numbers, and a model compiles to the same numbers every time, on every target. The values
 * cannot match numpy's generator (the ONNX tests' expected outputs); tests/unit/test_random.c
 * checks the generator and tests/random.sh the distributions of these ops. */
#include <math.h>
#include <string.h>

#include "../lower.h"


static bool random_dtype(Graph *g, Node *n, DType t) {
    if (t == DT_FLOAT || t == DT_DOUBLE || t == DT_FLOAT16) return true;
    error(ir_where(g, n), "dtype %s is not a float type", dtype_name(t));
    return false;
}

/* ---- RandomUniform, RandomNormal and their Like forms ---- */

void infer_random(Graph *g, Node *n) {
    bool like = n->op == OP_RandomUniformLike || n->op == OP_RandomNormalLike;
    if (like) {
        Value *x = n->in[0];
        DType t = (DType)ir_attr_int(n, "dtype", 0);
        if (!t) t = x->dtype;
        if (!random_dtype(g, n, t)) return;
        ir_set_shape(n->out[0], t, x->rank, x->dims);
        return;
    }
    const int64_t *shape;
    int rank = ir_attr_ints(n, "shape", &shape);
    DType t = (DType)ir_attr_int(n, "dtype", DT_FLOAT);
    if (!ir_attr(n, "shape") || rank > MAX_RANK) {
        error(ir_where(g, n), "needs a shape attribute of at most %d dims", MAX_RANK);
        return;
    }
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0) {
            error(ir_where(g, n), "negative dim in shape");
            return;
        }
    if (random_dtype(g, n, t)) ir_set_shape(n->out[0], t, rank, shape);
}

/* Uniform: low + (high - low) u. Normal (Box-Muller): mean + scale sqrt(-2 ln u1) cos(2 pi u2),
 * u1 in (0, 1] so that the log is finite. */
void lower_random(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0);
    int vars[MAX_RANK], w[4];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KNOINS, out, vars, idx);
    Expr *lin = kx_index(p, 0);
    for (int d = 0; d < out->rank; d++) lin = kx_add(p, kx_mul(p, lin, out->dims[d]), kx_var(p, vars[d]));
    Stmt *body = rule_random(p, k, n, lin, w);
    DType f = DT_FLOAT;
    Expr *v;
    if (n->op == OP_RandomUniform || n->op == OP_RandomUniformLike) {
        double lo = ir_attr_float(n, "low", 0), hi = ir_attr_float(n, "high", 1);
        v = kx_bin(p, K_ADD, kx_const(p, f, lo), kx_bin(p, K_MUL, kx_const(p, f, hi - lo), rule_uniform01(p, k, w[0])));
    } else {
        Expr *u1 = kx_bin(p, K_SUB, kx_const(p, f, 1), rule_uniform01(p, k, w[0]));
        Expr *r = kx_un(p, K_SQRT, kx_bin(p, K_MUL, kx_const(p, f, -2), kx_un(p, K_LOG, u1)));
        Expr *c = kx_un(p, K_COS, kx_bin(p, K_MUL, kx_const(p, f, 2 * M_PI), rule_uniform01(p, k, w[1])));
        v = kx_bin(p, K_ADD, kx_const(p, f, ir_attr_float(n, "mean", 0)),
                   kx_bin(p, K_MUL, kx_const(p, f, ir_attr_float(n, "scale", 1)), kx_bin(p, K_MUL, r, c)));
    }
    ks_seq(body, ks_store(p, out, idx, kx_cast(p, out->dtype, v)));
    k->body = lower_wrap(p, out->rank, out->dims, vars, body);
}

/* ---- Bernoulli ---- */

void infer_bernoulli(Graph *g, Node *n) {
    Value *x = n->in[0];
    DType t = (DType)ir_attr_int(n, "dtype", 0);
    if (!rule_float_input(g, n, 0)) return;
    if (!t) t = x->dtype;
    if (!dtype_supported(t)) {
        error(ir_where(g, n), "dtype %s", dtype_name(t));
        return;
    }
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

/* out = 1 where a uniform u < p (so p = 0 never, p = 1 always). */
void lower_bernoulli(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int vars[MAX_RANK], w[4];
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, vars, idx);
    Expr *lin = kx_index(p, 0);
    for (int d = 0; d < out->rank; d++) lin = kx_add(p, kx_mul(p, lin, out->dims[d]), kx_var(p, vars[d]));
    Stmt *body = rule_random(p, k, n, lin, w);
    Expr *hit = kx_bin(p, K_LT, rule_uniform01(p, k, w[0]), kx_cast(p, DT_FLOAT, kx_load(p, x, idx)));
    ks_seq(body, ks_store(p, out, idx, kx_cast(p, out->dtype, hit)));
    k->body = lower_wrap(p, out->rank, out->dims, vars, body);
}

/* ---- Multinomial ---- */

void infer_multinomial(Graph *g, Node *n) {
    Value *x = n->in[0];
    DType t = (DType)ir_attr_int(n, "dtype", DT_INT32);
    int64_t s = ir_attr_int(n, "sample_size", 1);
    if (!rule_float_input(g, n, 0)) return;
    if (x->rank != 2 || x->dims[1] < 1 || s < 1 || (t != DT_INT32 && t != DT_INT64)) {
        error(ir_where(g, n), "input must be [batch, classes], sample_size >= 1, dtype int32 or int64");
        return;
    }
    ir_set_shape(n->out[0], t, 2, (int64_t[]){x->dims[0], s});
}

/* Sample j of row b: the first class whose running sum of exp(x - max) exceeds u times the
 * total (the input holds unnormalised log-probabilities); the max keeps exp finite. */
void lower_multinomial(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int64_t nc = x->dims[1], ns = out->dims[1];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, NULL, NULL);
    DType t = DT_DOUBLE;
    int bv = kir_var(k), cv = kir_var(k), sv = kir_var(k), c2 = kir_var(k), w[4];
    int mx = kir_scalar(p, k, t), tot = kir_scalar(p, k, t), run = kir_scalar(p, k, t), goal = kir_scalar(p, k, t);
    int pick = kir_scalar(p, k, DT_INDEX);
#define X(c) kx_cast(p, t, kx_load(p, x, (Expr *[]){kx_var(p, bv), kx_var(p, c)}))
    Stmt *body = ks_set(p, mx, kx_cast(p, t, kx_load(p, x, (Expr *[]){kx_var(p, bv), kx_index(p, 0)})));
    ks_seq(body, ks_loop(p, cv, 0, nc, 1, ks_set(p, mx, kx_bin(p, K_MAX, kx_scalar(p, k, mx), X(cv)))));
    ks_seq(body, ks_set(p, tot, kx_const(p, t, 0)));
    Expr *e = kx_un(p, K_EXP, kx_bin(p, K_SUB, X(cv), kx_scalar(p, k, mx)));
    ks_seq(body, ks_loop(p, cv, 0, nc, 1, ks_set(p, tot, kx_bin(p, K_ADD, kx_scalar(p, k, tot), e))));
    Stmt *smp = rule_random(p, k, n, kx_add(p, kx_mul(p, kx_var(p, bv), ns), kx_var(p, sv)), w);
    ks_seq(smp, ks_set(p, goal, kx_bin(p, K_MUL, kx_cast(p, t, rule_uniform01(p, k, w[0])), kx_scalar(p, k, tot))));
    ks_seq(smp, ks_set(p, run, kx_const(p, t, 0)));
    ks_seq(smp, ks_set(p, pick, kx_index(p, nc - 1)));
    Expr *e2 = kx_un(p, K_EXP, kx_bin(p, K_SUB, X(c2), kx_scalar(p, k, mx)));
    Stmt *step = ks_set(p, run, kx_bin(p, K_ADD, kx_scalar(p, k, run), e2));
    Expr *first = kx_bin(p, K_AND, kx_bin(p, K_GT, kx_scalar(p, k, run), kx_scalar(p, k, goal)),
                         kx_bin(p, K_GT, kx_scalar(p, k, pick), kx_var(p, c2)));
    ks_seq(step, ks_if(p, first, ks_set(p, pick, kx_var(p, c2)), NULL));
    /* pick takes the first class that qualifies and then no other (pick > c no longer holds) */
    ks_seq(smp, ks_loop(p, c2, 0, nc, 1, step));
    ks_seq(smp, ks_store(p, out, (Expr *[]){kx_var(p, bv), kx_var(p, sv)}, kx_cast(p, out->dtype, kx_scalar(p, k, pick))));
    ks_seq(body, ks_loop(p, sv, 0, ns, 1, smp));
    k->body = ks_loop(p, bv, 0, x->dims[0], 1, body);
#undef X
}
