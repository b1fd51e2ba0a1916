/* helpers.c - what the per-family rules in passes/ops/ share, declared in passes/lower.h:
 * operand checks (axes, constant integer operands, one-element scalars), the window geometry
 * of Conv, ConvTranspose, ConvInteger, QLinearConv and the pools, the reduction emitter, the
 * MatMul shape rule, the constant re-layout of weights and the quantisation arithmetic. A helper lives here once a second family needs it. */
#include <math.h>
#include <string.h>

#include "../lower.h"

bool rule_axis(Graph *g, Node *n, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank) {
        if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)axis, rank);
        return false;
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

Value *rule_const_ints(Graph *g, Node *n, int i, const char *what, int64_t max) {
    Value *v = n->in[i];
    if (!v->data) {
        error(ir_where(g, n), "%s '%s' is not a compile-time constant (unsupported)", what, v->name);
        return NULL;
    }
    if (dtype_is_float(v->dtype) || v->rank > 1 || ir_numel(v) > max) {
        error(ir_where(g, n), "%s '%s' must be a 1-D integer tensor of at most %lld elements",
              what, v->name, (long long)max);
        return NULL;
    }
    return v;
}

/* Which dims a Reduce* node reduces; returns false for "no reduction" (empty axes with
 * noop_with_empty_axes) and -1 after reporting a bad or repeated axis (ONNX refuses both). */
int rule_reduce_mask(Graph *g, Node *n, bool *mask) {
    Value *x = n->in[0], *ax = n->nin > 1 ? n->in[1] : NULL;
    int64_t na = ax ? ir_numel(ax) : 0;
    if (ax && !ax->data) {
        if (g) error(ir_where(g, n), "axes must be a constant");
        return -1;
    }
    for (int d = 0; d < x->rank; d++) mask[d] = na == 0;
    if (na == 0) return !ir_attr_int(n, "noop_with_empty_axes", 0);
    for (int64_t i = 0; i < na; i++) {
        int64_t a = ir_const_int(ax, i);
        if (a < -x->rank || a >= x->rank) {
            if (g) error(ir_where(g, n), "axis %lld out of range for rank %d", (long long)a, x->rank);
            return -1;
        }
        if (mask[a < 0 ? a + x->rank : a]) {
            if (g) error(ir_where(g, n), "axis %lld repeated", (long long)a);
            return -1;
        }
        mask[a < 0 ? a + x->rank : a] = true;
    }
    return 1;
}

bool rule_matmul_shape(const Value *a, const Value *b, MatShape *s) {
    int64_t bd[MAX_RANK];
    if (a->rank < 1 || b->rank < 1) return false;
    s->nba = MAX(a->rank - 2, 0);
    s->nbb = MAX(b->rank - 2, 0);
    s->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    s->kd = a->dims[a->rank - 1];
    s->nn = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if (b->dims[b->rank >= 2 ? b->rank - 2 : 0] != s->kd) return false;
    if (!ir_broadcast(s->nba, a->dims, s->nbb, b->dims, &s->nb, bd)) return false;
    memcpy(s->dims, bd, sizeof(int64_t) * (size_t)s->nb);
    s->rank = s->nb;
    if (a->rank >= 2) s->dims[s->rank++] = s->m;
    if (b->rank >= 2) s->dims[s->rank++] = s->nn;
    return s->rank <= MAX_RANK;
}

const char *rule_dims_str(Graph *g, int rank, const int64_t *dims) {
    const char *s = "[";
    for (int d = 0; d < rank; d++)
        s = arena_printf(g->arena, "%s%s%lld", s, d ? "," : "", (long long)dims[d]);
    return arena_printf(g->arena, "%s]", s);
}

/* (lower.h) */
bool rule_broadcasts_to(const Value *v, int rank, const int64_t *dims) {
    int r;
    int64_t bd[MAX_RANK];
    return v->rank <= rank && ir_broadcast(v->rank, v->dims, rank, dims, &r, bd) &&
           !memcmp(bd, dims, sizeof(int64_t) * (size_t)rank);
}

/* A constant scalar as an expression of type t, keeping all 64 bits of an integer. */
Expr *rule_scalar_const(Program *p, const Value *v, DType t) {
    if (dtype_is_float(t)) return kx_const(p, t, ir_const_float(v, 0));
    Expr *e = kx_const(p, t, 0);
    e->i = ir_const_int(v, 0);
    return e;
}

/* ---- small kernel-building helpers ---- */

/* The smallest / largest value of a dtype: the identity of max / min. Integers use their
 * range so that pools over int8/uint8 work; int64's largest is not exact in a double, so
 * min-reductions start from a loaded element instead (see rule_emit_reduce). */
double rule_dtype_lowest(DType t) {
    switch (t) {
    case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64: case DT_BOOL: return 0;
    case DT_INT8: return INT8_MIN;
    case DT_INT16: return INT16_MIN;
    case DT_INT32: return INT32_MIN;
    case DT_INT64: return (double)INT64_MIN;
    default: return -INFINITY;
    }
}

int64_t rule_ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

/* ---- window geometry shared by Conv and the pools ---- */

/* Output size of one spatial dim with explicit pads. In ceil mode the last window must
 * start inside the input or the left padding (as onnx's reference and PyTorch do). */
static int64_t window_out(Window *w, int i, bool ceil_mode) {
    int64_t ext = sz_add(sz_mul(w->k[i] - 1, w->d[i]), 1);
    int64_t span = w->in[i] + w->pb[i] + w->pe[i] - ext;
    if (span < 0) return -1;
    if (!ceil_mode) return span / w->s[i] + 1;
    int64_t o = rule_ceil_div(span, w->s[i]) + 1;
    if ((o - 1) * w->s[i] >= w->in[i] + w->pb[i]) o--;
    return o;
}

/* (lower.h) */
bool rule_window(Graph *g, Node *n, const Value *x, const int64_t *ks, bool ceil_mode, Window *w) {
    const char *where = g ? ir_where(g, n) : n->name;
    const int64_t *st, *dl, *pd;
    int nsp = x->rank - 2;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp)) {
        error(where, "strides/dilations/pads do not match %d spatial dims", nsp);
        return false;
    }
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    bool valid = !strcmp(ap, "VALID");
    if (!same && !valid && *ap && strcmp(ap, "NOTSET")) {
        error(where, "unknown auto_pad '%s'", ap);
        return false;
    }
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        w->in[i] = x->dims[2 + i];
        w->k[i] = ks[i];
        w->s[i] = nst ? st[i] : 1;
        w->d[i] = ndl ? dl[i] : 1;
        w->pb[i] = npd && !same && !valid ? pd[i] : 0;
        w->pe[i] = npd && !same && !valid ? pd[nsp + i] : 0;
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0) {
            error(where, "kernel, strides and dilations must be positive and pads non-negative");
            return false;
        }
        /* each below 2^40, so that the sums below cannot overflow */
        if (MAX(MAX(w->k[i], w->s[i]), MAX(w->d[i], MAX(w->pb[i], w->pe[i]))) > IR_MAX_BYTES_64) {
            error(where, "kernel, strides, dilations or pads too large (over 2^40)");
            return false;
        }
        if (same) {
            int64_t ext = sz_add(sz_mul(w->k[i] - 1, w->d[i]), 1);
            if (ext > IR_MAX_BYTES_64) {
                error(where, "window of spatial dim %d larger than the padded input", i);
                return false;
            }
            w->out[i] = rule_ceil_div(w->in[i], w->s[i]);
            int64_t total = MAX(0, (w->out[i] - 1) * w->s[i] + ext - w->in[i]);
            w->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
        } else {
            w->out[i] = window_out(w, i, ceil_mode && !valid);
        }
        if (w->out[i] < 1) {
            error(where, "window of spatial dim %d larger than the padded input", i);
            return false;
        }
    }
    return true;
}

/* Input coordinate of tap t at output position o along spatial dim i, and the condition
 * that it lies inside the input (*cond = NULL when no position can leave it). */
Expr *rule_tap_index(Program *p, const Window *w, int i, Expr *o, Expr *t, Expr **cond) {
    Expr *ix = kx_addc(p, kx_add(p, kx_mul(p, o, w->s[i]), kx_mul(p, t, w->d[i])), -w->pb[i]);
    int64_t hi = (w->out[i] - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] - w->pb[i];
    *cond = NULL;
    if (w->pb[i] > 0) *cond = kx_bin(p, K_GE, ix, kx_index(p, 0));
    if (hi >= w->in[i]) *cond = kx_and(p, *cond, kx_bin(p, K_LT, ix, kx_index(p, w->in[i])));
    return ix;
}

/* Wrap the per-tap statement in the tap loops (spatial dim 0 outermost), each dim's bounds
 * check just inside its own loop so that a row out of bounds is skipped whole. */
Stmt *rule_wrap_taps(Program *p, const Window *w, const int *tv, Expr **conds, Stmt *body) {
    for (int i = w->nsp - 1; i >= 0; i--) {
        if (conds[i]) body = ks_if(p, conds[i], body, NULL);
        body = ks_red_loop(p, tv[i], w->k[i], body);
    }
    return body;
}

/* Loops over the dims marked `sel` (reduction or not), innermost last, around body. */
Stmt *rule_wrap_dims(Program *p, int rank, const int64_t *dims, const bool *sel, const int *vars,
                       Stmt *body, bool reduction) {
    for (int d = rank - 1; d >= 0; d--)
        if (sel[d]) body = reduction ? ks_red_loop(p, vars[d], dims[d], body)
                                     : ks_loop(p, vars[d], 0, dims[d], 1, body);
    return body;
}

/* Fresh variables for the dims marked in sel, written into idx. */
void rule_sel_vars(Program *p, Kernel *k, int rank, const bool *sel, int *vars, Expr **idx) {
    for (int d = 0; d < rank; d++)
        if (sel[d]) {
            vars[d] = kir_var(k);
            idx[d] = kx_var(p, vars[d]);
        }
}

/* (lower.h) */
Stmt *rule_red_pass(Program *p, Kernel *k, int rank, const int64_t *dims, const bool *mask,
                    const int *vars, int acc, Expr *init, KOp op, Expr *term) {
    Stmt *step = ks_set(p, acc, kx_bin(p, op, kx_scalar(p, k, acc), term));
    return ks_seq(ks_set(p, acc, init), rule_wrap_dims(p, rank, dims, mask, vars, step, true));
}

/* ---- the reductions: Reduce*, the global pools ---- */

/* What each element adds (term), and what the accumulator becomes at the end (fin). */
typedef enum RedTerm { RT_X, RT_ABS, RT_SQUARE, RT_EXP_OFF, RT_ABS_POW } RedTerm;
typedef enum RedFin { RF_NONE, RF_MEAN, RF_SQRT, RF_LOG, RF_LOG_OFF, RF_ROOT } RedFin;

/* acc = init; acc = acc op term(x) over the reduced dims; out = fin(acc). `first`: start from
 * the window's first element instead of init (Max/Min: exact for every dtype, no identity
 * needed; init is then only the value of an empty reduction). LogSumExp takes the max m in a
 * first pass so that exp(x - m) never overflows. Lp's p is the node's attribute. */
static const struct {
    KOp op;
    RedTerm term;
    RedFin fin;
    bool first;
    double init;
} reductions[] = {
    [R_SUM] = {K_ADD, RT_X, RF_NONE, false, 0},
    [R_MEAN] = {K_ADD, RT_X, RF_MEAN, false, 0},
    [R_MAX] = {K_MAX, RT_X, RF_NONE, true, -INFINITY},
    [R_MIN] = {K_MIN, RT_X, RF_NONE, true, INFINITY},
    [R_PROD] = {K_MUL, RT_X, RF_NONE, false, 1},
    [R_L1] = {K_ADD, RT_ABS, RF_NONE, false, 0},
    [R_L2] = {K_ADD, RT_SQUARE, RF_SQRT, false, 0},
    [R_SUMSQUARE] = {K_ADD, RT_SQUARE, RF_NONE, false, 0},
    [R_LOGSUM] = {K_ADD, RT_X, RF_LOG, false, 0},
    [R_LOGSUMEXP] = {K_ADD, RT_EXP_OFF, RF_LOG_OFF, false, 0},
    [R_LP] = {K_ADD, RT_ABS_POW, RF_ROOT, false, 0},
};

/* (lower.h) */
RedKind rule_red_kind(const Node *n) {
    switch (n->op) {
    case OP_ReduceSum: return R_SUM;
    case OP_ReduceMean: case OP_GlobalAveragePool: return R_MEAN;
    case OP_ReduceMax: case OP_GlobalMaxPool: return R_MAX;
    case OP_ReduceMin: return R_MIN;
    case OP_ReduceProd: return R_PROD;
    case OP_ReduceL1: return R_L1;
    case OP_ReduceL2: return R_L2;
    case OP_ReduceSumSquare: return R_SUMSQUARE;
    case OP_ReduceLogSum: return R_LOGSUM;
    case OP_ReduceLogSumExp: return R_LOGSUMEXP;
    case OP_GlobalLpPool: return R_LP;
    default: die("rule_red_kind: %s is no reduction", n->op_type);
    }
}

/* (lower.h) */
void rule_emit_reduce(Lower *L, Node *n, Buf *in, Buf *out, const bool *mask, bool keepdims,
                      RedKind kind) {
    Program *p = L->p;
    DType t = out->dtype;
    bool lse = kind == R_LOGSUMEXP;
    double pw = kind == R_LP ? (double)ir_attr_int(n, "p", 2) : 0;
    int ov[MAX_RANK], rv[MAX_RANK] = {0};
    Expr *oi[MAX_RANK], *ii[MAX_RANK], *first[MAX_RANK];
    Kernel *k = lower_kernel(L, n, lse ? KC_GENERIC : KC_CONTRACTION, KINS(in), out, ov, oi);
    int acc = kir_scalar(p, k, t), mx = lse ? kir_scalar(p, k, t) : -1;
    int64_t count = 1;
    for (int d = 0, o = 0; d < in->rank; d++) {
        if (mask[d]) {
            first[d] = kx_index(p, 0);
            count *= in->dims[d];
            if (keepdims) o++;
        } else {
            ii[d] = first[d] = oi[o++];
        }
    }
    Stmt *body = NULL;
    if (lse) {
        rule_sel_vars(p, k, in->rank, mask, rv, ii);
        body = rule_red_pass(p, k, in->rank, in->dims, mask, rv, mx, kx_const(p, t, -INFINITY),
                             K_MAX, kx_load(p, in, ii));
    }
    rule_sel_vars(p, k, in->rank, mask, rv, ii);
    Expr *x = kx_load(p, in, ii), *term = x, *ax;
    switch (reductions[kind].term) {
    case RT_X: break;
    case RT_ABS: term = kx_un(p, K_ABS, x); break;
    case RT_SQUARE: term = kx_bin(p, K_MUL, x, x); break;
    case RT_EXP_OFF: term = kx_un(p, K_EXP, kx_bin(p, K_SUB, x, kx_scalar(p, k, mx))); break;
    case RT_ABS_POW:
        ax = kx_un(p, K_ABS, x);
        term = pw == 2 ? kx_bin(p, K_MUL, ax, ax) : kx_bin(p, K_POW, ax, kx_const(p, t, pw));
        break;
    }
    Expr *init;
    if (reductions[kind].first && count > 0) init = kx_load(p, in, first);
    else if (kind == R_MAX) init = kx_const(p, t, rule_dtype_lowest(t));
    else if (kind == R_MIN && t == DT_BOOL) init = kx_const(p, t, 1);
    else init = kx_const(p, t, reductions[kind].init);
    KOp op = reductions[kind].op;   /* ReduceMax/Min-20 on bool: any / all */
    if (t == DT_BOOL && (kind == R_MAX || kind == R_MIN)) op = kind == R_MAX ? K_OR : K_AND;
    body = ks_seq(body, rule_red_pass(p, k, in->rank, in->dims, mask, rv, acc, init, op, term));
    Expr *v = kx_scalar(p, k, acc);
    switch (reductions[kind].fin) {
    case RF_NONE: break;
    case RF_MEAN: if (count > 0) v = kx_bin(p, K_DIV, v, kx_const(p, t, (double)count)); break;
    case RF_SQRT: v = kx_un(p, K_SQRT, v); break;
    case RF_LOG: v = kx_un(p, K_LOG, v); break;
    case RF_LOG_OFF: v = kx_bin(p, K_ADD, kx_scalar(p, k, mx), kx_un(p, K_LOG, v)); break;
    case RF_ROOT:
        if (pw != 1) v = pw == 2 ? kx_un(p, K_SQRT, v) : kx_bin(p, K_POW, v, kx_const(p, t, 1 / pw));
        break;
    }
    ks_seq(body, ks_store(p, out, oi, v));
    k->body = lower_wrap(p, out->rank, out->dims, ov, body);
}

/* A one-element integer operand (CumSum's axis, Trilu's k), constant or not. */
bool rule_int_scalar(Graph *g, Node *n, int i, const char *what) {
    Value *v = n->in[i];
    if (dtype_is_float(v->dtype) || v->dtype == DT_BOOL || v->rank > 1 || ir_numel(v) != 1) {
        error(ir_where(g, n), "%s '%s' must be a single integer", what, v->name);
        return false;
    }
    return true;
}

/* The DT_INDEX value of a one-element integer operand: folded when constant, else loaded
 * (and the buffer made a parameter of k). */
Expr *rule_index_operand(Lower *L, Node *n, Kernel *k, int i) {
    Program *p = L->p;
    Value *v = n->in[i];
    if (v->data) return kx_index(p, ir_const_int(v, 0));
    Buf *b = lower_in(L, n, i);
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_cast(p, DT_INDEX, kx_load(p, b, zero));
}

/* Element 0 of a one-element buffer (zero points, scales), registered as an input of k. */
Expr *rule_load_first(Program *p, Kernel *k, Buf *b) {
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, zero);
}

bool rule_quant_type(DType t) { return t == DT_UINT8 || t == DT_INT8; }

/* lo <= v <= hi for float v, as two selects (v < lo ? lo : v, then v > hi ? hi : v) rather
 * than K_MAX/K_MIN, whose NaN propagation costs a compare and a blend more on x86: here NaN
 * passes through either way (a quantisation's NaN has no defined result), and each select
 * is one vmaxps/vminps. */
Expr *rule_clamp(Program *p, Expr *v, double lo, double hi) {
    Expr *l = kx_const(p, DT_FLOAT, lo), *h = kx_const(p, DT_FLOAT, hi);
    v = kx_select(p, kx_bin(p, K_LT, v, l), kx_clone(p, l), v);
    Expr *v2 = kx_clone(p, v);
    return kx_select(p, kx_bin(p, K_GT, v, h), kx_clone(p, h), v2);
}

/* saturate(round(v) + zp) into t's range, v float32, zp a number of any type (NULL: 0), as
 * round(clamp(v, lo - zp, hi - zp)) + zp: the same value (rounding is monotonic and keeps
 * integers), but the clamped value converts to int32 in range, so that the conversion may
 * round itself (one instruction on Cortex-M4F and RV32F, backend/kernel.c's round_cvt,
 * where the float rounding took nine), and the zero point is an integer add. */
Expr *rule_quantize(Program *p, Expr *v, Expr *zp, DType t) {
    return rule_quantize_in(p, v, zp, t, t == DT_INT8 ? -128 : 0, t == DT_INT8 ? 127 : 255);
}

Expr *rule_quantize_in(Program *p, Expr *v, Expr *zp, DType t, double lo_q, double hi_q) {
    Expr *lo = kx_const(p, DT_FLOAT, lo_q), *hi = kx_const(p, DT_FLOAT, hi_q);
    if (zp) {
        Expr *zf = kx_cast(p, DT_FLOAT, kx_clone(p, zp));
        lo = kx_bin(p, K_SUB, lo, zf);
        hi = kx_bin(p, K_SUB, hi, kx_clone(p, zf));
    }
    v = kx_select(p, kx_bin(p, K_LT, v, lo), kx_clone(p, lo), kx_clone(p, v));
    v = kx_select(p, kx_bin(p, K_GT, v, hi), kx_clone(p, hi), kx_clone(p, v));
    Expr *r = kx_cast(p, DT_INT32, kx_un(p, K_ROUND, v));
    if (zp) r = kx_bin(p, K_ADD, r, kx_cast(p, DT_INT32, zp));
    return kx_cast(p, t, r);
}

Expr *rule_float8_cast(Program *p, Expr *v, DType t, bool saturate) {
    F8Format f = f8_format(t);
    Expr *x = v->type == DT_FLOAT ? v : kx_cast(p, DT_FLOAT, v), *c = kx_cast(p, t, x);
    if (saturate && !f.inf) return c;
    if (saturate) {                 /* e5m2: +-inf -> +-57344 */
        float mx = f8_decode(t, (uint8_t)f.maxmag);
        Expr *big = kx_select(p, kx_bin(p, K_LT, kx_clone(p, x), kx_const(p, DT_FLOAT, 0)),
                              kx_cast(p, t, kx_const(p, DT_FLOAT, -mx)), kx_cast(p, t, kx_const(p, DT_FLOAT, mx)));
        Expr *inf = kx_bin(p, K_EQ, kx_un(p, K_ABS, kx_clone(p, x)), kx_const(p, DT_FLOAT, INFINITY));
        return kx_select(p, inf, big, c);
    }
    Expr *over = kx_bin(p, f.overflow_ge ? K_GE : K_GT, kx_un(p, K_ABS, kx_clone(p, x)), kx_const(p, DT_FLOAT, f.overflow));
    Expr *out = f.inf ? kx_select(p, kx_bin(p, K_LT, kx_clone(p, x), kx_const(p, DT_FLOAT, 0)),
                                  kx_cast(p, t, kx_const(p, DT_FLOAT, -INFINITY)), kx_cast(p, t, kx_const(p, DT_FLOAT, INFINITY)))
                      : kx_cast(p, t, kx_const(p, DT_FLOAT, NAN));
    return kx_select(p, over, out, c);
}

/* v cast to float8e8m0 as Cast-24 with `saturate` and `round_mode` (e8m0_encode). K_CAST
 * rounds up and saturates; the other modes compute the code from the float32 bits (the
 * exponent field, plus one by the mode) and cast the power of two it stands for (2^-127 is
 * bits 0x00400000, a code past 0xfe NaN), which K_CAST keeps as it is. */
Expr *rule_e8m0_cast(Program *p, Expr *v, bool saturate, int round_mode) {
    Expr *x = v->type == DT_FLOAT ? v : kx_cast(p, DT_FLOAT, v);
    if (round_mode == E8M0_UP && saturate) return kx_cast(p, DT_FLOAT8E8M0, x);
#define U(c) kx_const(p, DT_UINT32, (c))
    Expr *u = kx_bitcast(p, DT_UINT32, x);
    Expr *e = kx_bin(p, K_AND, kx_bin(p, K_DIV, u, U(8388608)), U(255));
    Expr *frac = kx_bin(p, K_AND, kx_clone(p, u), U(0x7fffff));
    Expr *up;
    if (round_mode == E8M0_UP)      /* a fraction; 2^-127 itself stays (e8m0_encode) */
        up = kx_bin(p, K_AND, kx_bin(p, K_NE, frac, U(0)),
                    kx_bin(p, K_NE, kx_bin(p, K_AND, kx_clone(p, u), U(0x7fffffff)), U(0x00400000)));
    else if (round_mode == E8M0_NEAREST)     /* a half or more; at exponent 0 more than a half */
        up = kx_bin(p, K_AND, kx_bin(p, K_GE, frac, U(0x400000)),
                    kx_bin(p, K_OR, kx_bin(p, K_NE, kx_bin(p, K_AND, kx_clone(p, frac), U(0x3fffff)), U(0)),
                           kx_bin(p, K_GT, kx_clone(p, e), U(0))));
    else up = kx_const(p, DT_BOOL, 0);
    if (saturate) up = kx_bin(p, K_AND, up, kx_bin(p, K_NE, kx_clone(p, e), U(254)));
    Expr *code = kx_bin(p, K_ADD, kx_clone(p, e), kx_cast(p, DT_UINT32, up));
    Expr *bits = kx_select(p, kx_bin(p, K_GE, kx_clone(p, code), U(255)), U(0x7fc00000),
                           kx_bin(p, K_MUL, kx_clone(p, code), U(8388608)));
    bits = kx_select(p, kx_bin(p, K_EQ, code, U(0)), U(0x00400000), bits);
#undef U
    return kx_cast(p, DT_FLOAT8E8M0, kx_bitcast(p, DT_FLOAT, bits));
}

Value *rule_opt_in(const Node *n, int i) { return i < n->nin ? n->in[i] : NULL; }

/* An operand element as int32 minus its zero point (zi: the zero point's index when it is
 * per row/column). */
Expr *rule_centered(Program *p, Kernel *k, Buf *b, Expr **bi, Buf *zp, Expr *zi) {
    Expr *v = kx_cast(p, DT_INT32, kx_load(p, b, bi));
    if (!zp) return v;
    Expr *z = kir_numel(zp) == 1 || !zi ? rule_load_first(p, k, zp) : kx_load(p, zp, &zi);
    kir_param(p, k, zp, KP_IN);
    return kx_bin(p, K_SUB, v, kx_cast(p, DT_INT32, z));
}

bool rule_same_type(Graph *g, Node *n, int first, int last) {
    DType t = n->in[0]->dtype;
    for (int i = first; i <= last && i < n->nin; i++) {
        Value *v = n->in[i];
        if (v && v->dtype != t) {
            error(ir_where(g, n), "input %d '%s' is %s, but input 0 is %s: they must have the "
                  "same type", i, v->name, dtype_name(v->dtype), dtype_name(t));
            return false;
        }
    }
    return true;
}

bool rule_float_input(Graph *g, Node *n, int i) {
    Value *v = n->in[i];
    if (v->dtype != DT_FLOAT && v->dtype != DT_DOUBLE) {
        error(ir_where(g, n), "input '%s' is %s; only float32/float64 are supported", v->name,
              dtype_name(v->dtype));
        return false;
    }
    return true;
}

/* ---- the random generator: Philox-4x32-10 (Salmon et al., SC'11) ----
 * Counter-based: the words for element i are a pure function of (i, key), so every element is
 * computed independently, in any order, vectorised or not, and a run gives the same numbers
 * for the same seed on every target. 32-bit words live in uint64 registers; a 32x32 product
 * is exact in 64 bits, and its halves are a division and a remainder by 2^32 (shifts after
 * LLVM). The round keys depend only on the seed, so they are folded here. */
enum { PHILOX_ROUNDS = 10 };
static const uint64_t philox_m[2] = {0xD2511F53u, 0xCD9E8D57u}, philox_w[2] = {0x9E3779B9u, 0xBB67AE85u};

static Expr *u64(Program *p, uint64_t v) { return kx_int(p, DT_UINT64, (int64_t)v); }

Stmt *rule_philox(Program *p, Kernel *k, Expr *const ctr[4], uint64_t key, int w[4]) {
    uint64_t k0 = key & 0xffffffffu, k1 = key >> 32;
    Stmt *s = NULL;
    for (int i = 0; i < 4; i++) {
        w[i] = kir_scalar(p, k, DT_UINT64);
        s = ks_seq(s, ks_set(p, w[i], kx_cast(p, DT_UINT64, ctr[i])));
    }
    int t[4];
    for (int i = 0; i < 4; i++) t[i] = kir_scalar(p, k, DT_UINT64);
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        Expr *p0 = kx_bin(p, K_MUL, u64(p, philox_m[0]), kx_scalar(p, k, w[0]));
        Expr *p1 = kx_bin(p, K_MUL, u64(p, philox_m[1]), kx_scalar(p, k, w[2]));
        s = ks_seq(s, ks_set(p, t[0], p0));                             /* M0 * c0 */
        s = ks_seq(s, ks_set(p, t[1], p1));                             /* M1 * c2 */
        Expr *hi0 = kx_bin(p, K_DIV, kx_scalar(p, k, t[0]), u64(p, 1ull << 32));
        Expr *hi1 = kx_bin(p, K_DIV, kx_scalar(p, k, t[1]), u64(p, 1ull << 32));
        Expr *c0 = kx_bin(p, K_XOR, kx_bin(p, K_XOR, hi1, kx_scalar(p, k, w[1])), u64(p, k0));
        Expr *c2 = kx_bin(p, K_XOR, kx_bin(p, K_XOR, hi0, kx_scalar(p, k, w[3])), u64(p, k1));
        s = ks_seq(s, ks_set(p, t[2], c0));
        s = ks_seq(s, ks_set(p, t[3], c2));
        s = ks_seq(s, ks_set(p, w[1], kx_bin(p, K_REM, kx_scalar(p, k, t[1]), u64(p, 1ull << 32))));
        s = ks_seq(s, ks_set(p, w[3], kx_bin(p, K_REM, kx_scalar(p, k, t[0]), u64(p, 1ull << 32))));
        s = ks_seq(s, ks_set(p, w[0], kx_scalar(p, k, t[2])));
        s = ks_seq(s, ks_set(p, w[2], kx_scalar(p, k, t[3])));
        k0 = (k0 + philox_w[0]) & 0xffffffffu;
        k1 = (k1 + philox_w[1]) & 0xffffffffu;
    }
    return s;
}

Stmt *rule_random(Program *p, Kernel *k, const Node *n, Expr *index, int w[4]) {
    Attr *a = ir_attr(n, "seed");   /* a float in the random ops, an int in Dropout */
    uint64_t key = !a ? 0 : a->type == A_INT ? (uint64_t)a->i : 0;
    if (a && a->type != A_INT) {    /* a NaN or huge float seed keys by its bits, not by UB */
        if (a->f > -9.2e18 && a->f < 9.2e18) key = (uint64_t)(int64_t)a->f;
        else {
            uint32_t bits;
            memcpy(&bits, &a->f, sizeof bits);
            key = bits;
        }
    }
    uint32_t h = 2166136261u;       /* FNV-1a of the first output's name: the stream */
    for (const char *s = n->out[0]->name; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    Expr *ctr[4] = {index, kx_index(p, 0), kx_int(p, DT_UINT64, h), kx_index(p, 0)};
    return rule_philox(p, k, ctr, key, w);
}

Expr *rule_uniform01(Program *p, Kernel *k, int word) {
    /* the top 24 bits: every float32 in [0, 1) that is a multiple of 2^-24, equally likely */
    Expr *top = kx_bin(p, K_DIV, kx_scalar(p, k, word), u64(p, 256));
    return kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, top), kx_const(p, DT_FLOAT, 1.0 / 16777216.0));
}

/* ---- Sorting at run time ----
 * A bottom-up merge sort: level w (1, 2, 4, ... below the capacity, each run only while w < m)
 * merges pairs of sorted runs of w entries from key/idx into key2/idx2 and copies them back.
 * O(m log m) where the selections it replaces (TopK's picks, NMS's rounds) were O(k m). A merge
 * takes the right run's head only when `first` puts it strictly before the left's, so equal
 * keys keep their order (TopK and NMS want the lower index first on ties). Only the first
 * `keep` of the result wanted (TopK's k), a merged run keeps only its first `keep`: no entry
 * after those can come first in the end, and the upper levels then merge `keep` a run. */
Stmt *rule_loop_range(Program *p, int var, Expr *lo, Expr *hi, Stmt *body) {
    Stmt *s = ks_loop(p, var, 0, 1, 1, body);
    s->lo = lo;
    s->hi = hi;
    return s;
}

Stmt *rule_merge_sort(Program *p, Kernel *k, Buf *key, Buf *idx, Buf *key2, Buf *idx2, int m, KOp first,
                      int64_t keep) {
    int64_t cap = key->dims[0];
    keep = MAX(1, MIN(keep, cap));
    kir_param(p, k, key, KP_INOUT);
    kir_param(p, k, idx, KP_INOUT);
    kir_param(p, k, key2, KP_INOUT);
    kir_param(p, k, idx2, KP_INOUT);
    Stmt *all = NULL;
    for (int64_t w = 1; w < cap; w *= 2) {
        int lo = kir_scalar(p, k, DT_INDEX), mid = kir_scalar(p, k, DT_INDEX), hi = kir_scalar(p, k, DT_INDEX);
        int i = kir_scalar(p, k, DT_INDEX), j = kir_scalar(p, k, DT_INDEX), right = kir_scalar(p, k, DT_BOOL);
        int rv = kir_var(k), tv = kir_var(k), cv = kir_var(k);
        /* the heads, clamped into the buffer: a run's end may be the capacity */
        Expr *ic = kx_bin(p, K_MIN, kx_scalar(p, k, i), kx_index(p, cap - 1));
        Expr *jc = kx_bin(p, K_MIN, kx_scalar(p, k, j), kx_index(p, cap - 1));
        Expr *at[4];
        for (int a = 0; a < 4; a++) at[a] = kx_clone(p, a & 1 ? jc : ic);
        Expr *t = kx_var(p, tv), *t2 = kx_var(p, tv);
        Expr *r1 = kx_scalar(p, k, right), *r2 = kx_scalar(p, k, right);
        Stmt *step = ks_set(p, right, kx_bin(p, K_AND, kx_bin(p, K_LT, kx_scalar(p, k, j), kx_scalar(p, k, hi)),
                                             kx_bin(p, K_OR, kx_bin(p, K_GE, kx_scalar(p, k, i), kx_scalar(p, k, mid)),
                                                    kx_bin(p, first, kx_load(p, key, &jc), kx_load(p, key, &ic)))));
        ks_seq(step, ks_store(p, key2, &t, kx_select(p, r1, kx_load(p, key, &at[1]), kx_load(p, key, &at[0]))));
        ks_seq(step, ks_store(p, idx2, &t2, kx_select(p, r2, kx_load(p, idx, &at[3]), kx_load(p, idx, &at[2]))));
        ks_seq(step, ks_set(p, j, kx_add(p, kx_scalar(p, k, j), kx_select(p, kx_scalar(p, k, right), kx_index(p, 1), kx_index(p, 0)))));
        ks_seq(step, ks_set(p, i, kx_add(p, kx_scalar(p, k, i), kx_select(p, kx_scalar(p, k, right), kx_index(p, 0), kx_index(p, 1)))));
        /* the run [lo, lo + 2w): its left half's valid part [lo, mid), its right half's
         * [start, hi), the merged valid part [lo, end) (at most `keep` of each) */
        int start = kir_scalar(p, k, DT_INDEX), end = kir_scalar(p, k, DT_INDEX);
        Expr *whole = kx_bin(p, K_MIN, kx_addc(p, kx_scalar(p, k, lo), 2 * w), kx_scalar(p, k, m));
        Stmt *run = ks_set(p, lo, kx_mul(p, kx_var(p, rv), 2 * w));
        ks_seq(run, ks_set(p, start, kx_bin(p, K_MIN, kx_addc(p, kx_scalar(p, k, lo), w), kx_scalar(p, k, m))));
        ks_seq(run, ks_set(p, mid, kx_bin(p, K_MIN, kx_scalar(p, k, start), kx_addc(p, kx_scalar(p, k, lo), keep))));
        ks_seq(run, ks_set(p, hi, kx_bin(p, K_MIN, kx_clone(p, whole), kx_addc(p, kx_scalar(p, k, start), keep))));
        ks_seq(run, ks_set(p, end, kx_bin(p, K_MIN, whole, kx_addc(p, kx_scalar(p, k, lo), keep))));
        ks_seq(run, ks_set(p, i, kx_scalar(p, k, lo)));
        ks_seq(run, ks_set(p, j, kx_scalar(p, k, start)));
        ks_seq(run, rule_loop_range(p, tv, kx_scalar(p, k, lo), kx_scalar(p, k, end), step));
        Expr *c[4];
        for (int a = 0; a < 4; a++) c[a] = kx_var(p, cv);
        Stmt *back = ks_store(p, key, &c[0], kx_load(p, key2, &c[1]));
        ks_seq(back, ks_store(p, idx, &c[2], kx_load(p, idx2, &c[3])));
        ks_seq(run, rule_loop_range(p, cv, kx_scalar(p, k, lo), kx_scalar(p, k, end), back));
        Expr *runs = kx_bin(p, K_DIV, kx_addc(p, kx_scalar(p, k, m), 2 * w - 1), kx_index(p, 2 * w));
        Stmt *level = rule_loop_range(p, rv, kx_index(p, 0), runs, run);
        all = ks_seq(all, ks_if(p, kx_bin(p, K_LT, kx_index(p, w), kx_scalar(p, k, m)), level, NULL));
    }
    return all;
}
