/* elementwise.c - the elementwise family (ir/ops.def rows flagged OPF_EW, and CastLike):
 *   unary maps   Abs Acos Acosh Asin Asinh Atan Atanh Cast CastLike Ceil Celu Cos Cosh Elu Erf
 *                Exp Floor HardSigmoid HardSwish IsInf IsNaN LeakyRelu Log Mish Neg Not
 *                Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt
 *                Tan Tanh ThresholdedRelu, and Clip
 *   binary       Add Sub Mul Div Pow PRelu Mod BitShift, the comparisons Equal Greater
 *                GreaterOrEqual Less LessOrEqual, the logical And Or Xor
 *   variadic     Max Min Mean Sum;  selection  Where
 *
 * Shape inference here is numpy broadcasting plus a dtype rule (same as the inputs, bool for
 * comparisons, the `to` attribute for Cast). Lowering is one lower_map() kernel per node: the
 * map helper (passes/lower.h) owns the loop nest and the broadcast loads, so every rule below
 * only builds the scalar expression from the loaded operands. Keeping that single shape is what
 * lets fusion (passes/fuse.c) merge chains of these kernels.
 *
 * Attribute constants (LeakyRelu's alpha, a constant Clip bound, ...) become expression
 * constants rather than loads, so the backend can fold them. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* Broadcast the shapes of the present inputs of n into (*rank, dims); false after an error. */
static bool broadcast_all(Graph *g, Node *n, int first, int count, int *rank, int64_t *dims) {
    *rank = 0;
    const Value *prev = NULL;
    for (int i = first; i < first + count; i++) {
        const Value *v = n->in[i];
        if (!v) continue;
        int64_t so_far[MAX_RANK];  /* ir_broadcast's input and output must not overlap */
        memcpy(so_far, dims, sizeof(int64_t) * (size_t)*rank);
        if (!ir_broadcast(*rank, so_far, v->rank, v->dims, rank, dims)) {
            error(ir_where(g, n), "input shapes %s ('%s') and %s ('%s') do not broadcast",
                  rule_dims_str(g, prev->rank, prev->dims), prev->name,
                  rule_dims_str(g, v->rank, v->dims), v->name);
            return false;
        }
        prev = v;
    }
    return true;
}

static bool same_dtypes(Graph *g, Node *n, int first, int count) {
    for (int i = first + 1; i < first + count; i++)
        if (n->in[i] && n->in[i]->dtype != n->in[first]->dtype) {
            error(ir_where(g, n), "inputs '%s' (%s) and '%s' (%s) have different types",
                  n->in[first]->name, dtype_name(n->in[first]->dtype), n->in[i]->name,
                  dtype_name(n->in[i]->dtype));
            return false;
        }
    return true;
}

/* ---- shape rules ---- */

/* The unary maps that the spec also defines on integers (Not is bool only); every other one
 * of infer_unary's ops takes floating-point types only. */
static bool integer_too(Op op) {
    switch (op) {
    case OP_Abs: case OP_Clip: case OP_Erf: case OP_Neg: case OP_Relu: case OP_Shrink:
    case OP_Sign:
        return true;
    default:
        return false;
    }
}

/* Same dtype and shape as input 0 (also Clip, whose bounds are rank-0 inputs); bool for
 * IsNaN and IsInf. */
void infer_unary(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (n->op == OP_Not && x->dtype != DT_BOOL) {
        error(ir_where(g, n), "input '%s' is %s, Not needs bool", x->name, dtype_name(x->dtype));
        return;
    }
    if (n->op == OP_Clip) {
        for (int i = 1; i < n->nin; i++)
            if (n->in[i] && (ir_numel(n->in[i]) != 1 || n->in[i]->dtype != x->dtype)) {
                error(ir_where(g, n), "bound '%s' must be a single %s", n->in[i]->name,
                      dtype_name(x->dtype));
                return;
            }
    }
    if (n->op != OP_Not && (x->dtype == DT_BOOL || (!integer_too(n->op) && !dtype_is_float(x->dtype)))) {
        error(ir_where(g, n), "input '%s' is %s, %s needs %s", x->name, dtype_name(x->dtype),
              n->op_type, integer_too(n->op) ? "a number" : "a floating-point type");
        return;
    }
    if (n->op == OP_Gelu && strcmp(ir_attr_str(n, "approximate", "none"), "none") &&
        strcmp(ir_attr_str(n, "approximate", "none"), "tanh")) {
        error(ir_where(g, n), "approximate '%s' is neither 'none' nor 'tanh'",
              ir_attr_str(n, "approximate", "none"));
        return;
    }
    DType t = n->op == OP_IsNaN || n->op == OP_IsInf ? DT_BOOL : x->dtype;
    ir_set_shape(n->out[0], t, x->rank, x->dims);
}

/* Cast-24's `round_mode`, which applies to float8e8m0 only: E8M0_UP, _DOWN or _NEAREST, -1
 * if it names none of them. */
static int e8m0_mode(const Node *n) {
    const char *m = ir_attr_str(n, "round_mode", "up");
    return !strcmp(m, "up") ? E8M0_UP : !strcmp(m, "down") ? E8M0_DOWN : !strcmp(m, "nearest") ? E8M0_NEAREST : -1;
}

void infer_cast(Graph *g, Node *n) {
    Value *x = n->in[0];
    DType to = (DType)ir_attr_int(n, "to", DT_UNDEF);
    if (to == DT_STRING || x->dtype == DT_STRING) {
        infer_cast_string(g, n, to);
        return;
    }
    if (dtype_nibbles(to) != DT_UNDEF) to = dtype_nibbles(to);     /* int4, int2: cast_bits */
    if (!dtype_supported(to)) {
        error(ir_where(g, n), "cast to unsupported type %s (%d)", dtype_name(to), (int)to);
        return;
    }
    if (to == DT_FLOAT8E8M0 && e8m0_mode(n) < 0) {
        error(ir_where(g, n), "round_mode '%s' is not up, down or nearest", ir_attr_str(n, "round_mode", ""));
        return;
    }
    ir_set_shape(n->out[0], to, x->rank, x->dims);
}

/* The bits of a Cast's or CastLike's result when it is int4/uint4 or int2/uint2 (to 22, 21,
 * 26 or 25, or a `like` of such a type that is stored as one: ir.h, Value.nibbles), else 0:
 * the 8-bit result then keeps only its low 4 (2) bits, sign-extended for int4 (int2) (the
 * spec's "discard higher bits" of fixed point; a float is first truncated toward zero, as
 * into int8). */
static int cast_bits(const Node *n) {
    if (n->out[0]->dtype != DT_INT8 && n->out[0]->dtype != DT_UINT8) return 0;
    if (n->op == OP_CastLike) return ir_pack_bits(n->in[1]);
    return dtype_pack_bits((int)ir_attr_int(n, "to", DT_UNDEF));
}

/* BitCast (opset 26): the bits of each element read as `to`, of the same size (as the
 * reference, which numpy's view gives). bool and the float8 types are refused: their
 * registers hold 0/1 and a float (kir.h's K_BITCAST), not their bits. */
void infer_bitcast(Graph *g, Node *n) {
    Value *x = n->in[0];
    DType to = (DType)ir_attr_int(n, "to", DT_UNDEF);
    DType bad = !dtype_supported(to) || to == DT_BOOL || dtype_is_minifloat(to) ? to
              : x->dtype == DT_BOOL || dtype_is_minifloat(x->dtype) || x->dtype == DT_STRING ? x->dtype : DT_UNDEF;
    if (bad != DT_UNDEF) {
        error(ir_where(g, n), "bitcast of %s to %s: %s is not supported (numbers of 8 to 64 bits "
              "but bool and float8 are)", dtype_name(x->dtype), dtype_name(to), dtype_name(bad));
        return;
    }
    if (dtype_size(to) != dtype_size(x->dtype)) {
        error(ir_where(g, n), "bitcast of %s to %s: the sizes differ", dtype_name(x->dtype), dtype_name(to));
        return;
    }
    ir_set_shape(n->out[0], to, x->rank, x->dims);
}

/* Add, Sub, Mul, Div, Pow, PRelu: result has input 0's dtype. Pow's exponent may be of another
 * numeric type (opset 12+); PRelu's slope broadcasts to X only one way. */
void infer_binary(Graph *g, Node *n) {
    if (n->op != OP_Pow && !same_dtypes(g, n, 0, 2)) return;
    int rank;
    int64_t dims[MAX_RANK];
    if (!broadcast_all(g, n, 0, 2, &rank, dims)) return;
    Value *x = n->in[0];
    if (n->op == OP_PRelu && !rule_broadcasts_to(n->in[1], x->rank, x->dims)) {
        error(ir_where(g, n), "slope shape %s does not broadcast to input shape %s",
              rule_dims_str(g, n->in[1]->rank, n->in[1]->dims), rule_dims_str(g, x->rank, x->dims));
        return;
    }
    for (int i = 0; i < 2; i++)
        if (n->in[i]->dtype == DT_BOOL) {
            error(ir_where(g, n), "input '%s' is bool, %s needs numbers", n->in[i]->name,
                  n->op_type);
            return;
        }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* Comparisons and logical ops: bool result; And/Or/Xor take bool inputs, the orderings
 * numbers, Equal either. */
void infer_compare(Graph *g, Node *n) {
    if (!same_dtypes(g, n, 0, 2)) return;
    bool logical = n->op == OP_And || n->op == OP_Or || n->op == OP_Xor;
    DType t = n->in[0]->dtype;
    if (logical ? t != DT_BOOL : n->op != OP_Equal && t == DT_BOOL) {
        error(ir_where(g, n), "inputs are %s, %s needs %s", dtype_name(t), n->op_type,
              logical ? "bool" : "numbers");
        return;
    }
    int rank;
    int64_t dims[MAX_RANK];
    if (!broadcast_all(g, n, 0, 2, &rank, dims)) return;
    ir_set_shape(n->out[0], DT_BOOL, rank, dims);
}

/* Max, Min, Sum, Mean: any number of inputs, all broadcast together. */
void infer_variadic(Graph *g, Node *n) {
    if (!same_dtypes(g, n, 0, n->nin)) return;
    if (n->in[0]->dtype == DT_BOOL) {
        error(ir_where(g, n), "inputs are bool, %s needs numbers", n->op_type);
        return;
    }
    int rank;
    int64_t dims[MAX_RANK];
    if (!broadcast_all(g, n, 0, n->nin, &rank, dims)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, rank, dims);
}

void infer_where(Graph *g, Node *n) {
    if (n->in[0]->dtype != DT_BOOL) {
        error(ir_where(g, n), "condition '%s' is %s, not bool", n->in[0]->name,
              dtype_name(n->in[0]->dtype));
        return;
    }
    if (!same_dtypes(g, n, 1, 2)) return;
    int rank;
    int64_t dims[MAX_RANK];
    if (!broadcast_all(g, n, 0, 3, &rank, dims)) return;
    ir_set_shape(n->out[0], n->in[1]->dtype, rank, dims);
}

/* ---- lowering ---- */

static Expr *cst(Lower *L, DType t, double v) { return kx_const(L->p, t, v); }

/* max(0, min(1, a*x + b)), the clamp HardSigmoid and HardSwish share. */
static Expr *hard_sigmoid(Lower *L, Expr *x, double a, double b) {
    Program *p = L->p;
    DType t = x->type;
    Expr *y = kx_bin(p, K_ADD, kx_bin(p, K_MUL, x, cst(L, t, a)), cst(L, t, b));
    return kx_bin(p, K_MAX, cst(L, t, 0), kx_bin(p, K_MIN, cst(L, t, 1), y));
}

static Expr *map_unary(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *x = v[0];
    DType t = x->type;
    switch (n->op) {
    case OP_Abs: return kx_un(p, K_ABS, x);
    case OP_Neg: return kx_un(p, K_NEG, x);
    case OP_Not: return kx_un(p, K_NOT, x);
    case OP_Sqrt: return kx_un(p, K_SQRT, x);
    case OP_Exp: return kx_un(p, K_EXP, x);
    case OP_Log: return kx_un(p, K_LOG, x);
    case OP_Tanh: return kx_un(p, K_TANH, x);
    case OP_Sigmoid: return kx_un(p, K_SIGMOID, x);
    case OP_Erf:    /* the spec allows integers too: erf of the value in double, truncated */
        if (dtype_is_float(t)) return kx_un(p, K_ERF, x);
        return kx_cast(p, t, kx_un(p, K_ERF, kx_cast(p, DT_DOUBLE, x)));
    case OP_Floor: return kx_un(p, K_FLOOR, x);
    case OP_Ceil: return kx_un(p, K_CEIL, x);
    case OP_Reciprocal: return kx_un(p, K_RECIP, x);
    case OP_Sign: return kx_un(p, K_SIGN, x);
    case OP_BitCast: return kx_bitcast(p, n->out[0]->dtype, x);
    case OP_Cast: case OP_CastLike:     /* `saturate` (opset 19) applies to float8 targets */
        if (n->out[0]->dtype == DT_FLOAT8E8M0)
            return rule_e8m0_cast(p, x, ir_attr_int(n, "saturate", 1) != 0, e8m0_mode(n));
        if (dtype_is_minifloat(n->out[0]->dtype))     /* float4e2m1: always saturated */
            return rule_float8_cast(p, x, n->out[0]->dtype, ir_attr_int(n, "saturate", 1) != 0 ||
                                    n->out[0]->dtype == DT_FLOAT4E2M1);
        if (cast_bits(n)) {         /* int4: ((v & 15) ^ 8) - 8, uint4: v & 15; int2: 3 and 2 */
            DType o = n->out[0]->dtype;
            int bits = cast_bits(n);
            Expr *q = kx_bin(p, K_AND, kx_cast(p, o, x), kx_const(p, o, (1 << bits) - 1));
            Expr *half = kx_const(p, o, 1 << (bits - 1));
            return o == DT_UINT8 ? q : kx_bin(p, K_SUB, kx_bin(p, K_XOR, q, half), kx_clone(p, half));
        }
        return kx_cast(p, n->out[0]->dtype, x);
    case OP_Relu: return kx_bin(p, K_MAX, x, cst(L, t, 0));
    case OP_LeakyRelu: {
        Expr *neg = kx_bin(p, K_MUL, x, cst(L, t, ir_attr_float(n, "alpha", 0.01f)));
        return kx_select(p, kx_bin(p, K_LT, x, cst(L, t, 0)), neg, x);
    }
    case OP_Elu: {
        Expr *e = kx_bin(p, K_SUB, kx_un(p, K_EXP, x), cst(L, t, 1));
        e = kx_bin(p, K_MUL, cst(L, t, ir_attr_float(n, "alpha", 1.0f)), e);
        return kx_select(p, kx_bin(p, K_LT, x, cst(L, t, 0)), e, x);
    }
    case OP_Selu: {
        double alpha = ir_attr_float(n, "alpha", 1.67326319217681884765625f);
        double gamma = ir_attr_float(n, "gamma", 1.05070102214813232421875f);
        Expr *neg = kx_bin(p, K_SUB, kx_bin(p, K_MUL, cst(L, t, alpha), kx_un(p, K_EXP, x)),
                           cst(L, t, alpha));
        Expr *e = kx_select(p, kx_bin(p, K_GT, x, cst(L, t, 0)), x, neg);
        return kx_bin(p, K_MUL, cst(L, t, gamma), e);
    }
    case OP_HardSigmoid:
        return hard_sigmoid(L, x, ir_attr_float(n, "alpha", 0.2f), ir_attr_float(n, "beta", 0.5f));
    case OP_HardSwish: return kx_bin(p, K_MUL, x, hard_sigmoid(L, x, 1.0 / 6.0, 0.5));
    case OP_Softplus: {
        /* log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)): no overflow for large x */
        Expr *e = kx_un(p, K_EXP, kx_un(p, K_NEG, kx_un(p, K_ABS, x)));
        e = kx_un(p, K_LOG, kx_bin(p, K_ADD, cst(L, t, 1), e));
        return kx_bin(p, K_ADD, kx_bin(p, K_MAX, x, cst(L, t, 0)), e);
    }
    case OP_Softsign:
        return kx_bin(p, K_DIV, x, kx_bin(p, K_ADD, cst(L, t, 1), kx_un(p, K_ABS, x)));
    case OP_Round: return kx_un(p, K_ROUND, x);
    case OP_Sin: return kx_un(p, K_SIN, x);
    case OP_Cos: return kx_un(p, K_COS, x);
    case OP_Tan: return kx_un(p, K_TAN, x);
    case OP_Asin: return kx_un(p, K_ASIN, x);
    case OP_Acos: return kx_un(p, K_ACOS, x);
    case OP_Atan: return kx_un(p, K_ATAN, x);
    case OP_Sinh: return kx_un(p, K_SINH, x);
    case OP_Cosh: return kx_un(p, K_COSH, x);
    case OP_Asinh: return kx_un(p, K_ASINH, x);
    case OP_Acosh: return kx_un(p, K_ACOSH, x);
    case OP_Atanh: return kx_un(p, K_ATANH, x);
    case OP_IsNaN: return kx_bin(p, K_NE, x, x);
    case OP_IsInf: {
        bool neg = ir_attr_int(n, "detect_negative", 1), pos = ir_attr_int(n, "detect_positive", 1);
        if (neg && pos) return kx_bin(p, K_EQ, kx_un(p, K_ABS, x), cst(L, t, INFINITY));
        if (neg || pos) return kx_bin(p, K_EQ, x, cst(L, t, neg ? -INFINITY : INFINITY));
        return cst(L, DT_BOOL, 0);
    }
    case OP_Mish: {
        /* x tanh(softplus(x)) with softplus = max(x, 0) + log1p(exp(-|x|)); log1p as
         * log(u) * e / (u - 1), u = 1 + e (Goldberg), so that mish keeps its relative
         * precision for negative x, where softplus is tiny */
        Expr *e = kx_un(p, K_EXP, kx_un(p, K_NEG, kx_un(p, K_ABS, x)));
        Expr *u = kx_bin(p, K_ADD, cst(L, t, 1), e);
        Expr *l = kx_bin(p, K_MUL, kx_un(p, K_LOG, u),
                         kx_bin(p, K_DIV, e, kx_bin(p, K_SUB, u, cst(L, t, 1))));
        l = kx_select(p, kx_bin(p, K_EQ, u, cst(L, t, 1)), e, l);
        Expr *sp = kx_bin(p, K_ADD, kx_bin(p, K_MAX, x, cst(L, t, 0)), l);
        return kx_bin(p, K_MUL, x, kx_un(p, K_TANH, sp));
    }
    case OP_Gelu: {
        /* x/2 (1 + erf(x/sqrt 2)); approximate="tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const char *approx = ir_attr_str(n, "approximate", "none");
        Expr *h = kx_bin(p, K_MUL, cst(L, t, 0.5), x), *e;
        if (!strcmp(approx, "tanh")) {
            Expr *x3 = kx_bin(p, K_MUL, kx_bin(p, K_MUL, x, x), x);
            e = kx_bin(p, K_ADD, x, kx_bin(p, K_MUL, cst(L, t, 0.044715), x3));
            e = kx_un(p, K_TANH, kx_bin(p, K_MUL, cst(L, t, 0.7978845608028654), e));
        } else {
            e = kx_un(p, K_ERF, kx_bin(p, K_MUL, x, cst(L, t, 0.7071067811865476)));
        }
        return kx_bin(p, K_MUL, h, kx_bin(p, K_ADD, cst(L, t, 1), e));
    }
    case OP_Swish:                  /* x sigmoid(alpha x) */
        return kx_bin(p, K_MUL, x, kx_un(p, K_SIGMOID,
                                        kx_bin(p, K_MUL, cst(L, t, ir_attr_float(n, "alpha", 1.0f)), x)));
    case OP_Celu: {
        /* max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */
        double alpha = ir_attr_float(n, "alpha", 1.0f);
        Expr *e = kx_un(p, K_EXP, kx_bin(p, K_DIV, x, cst(L, t, alpha)));
        e = kx_bin(p, K_MUL, cst(L, t, alpha), kx_bin(p, K_SUB, e, cst(L, t, 1)));
        return kx_bin(p, K_ADD, kx_bin(p, K_MAX, x, cst(L, t, 0)), kx_bin(p, K_MIN, e, cst(L, t, 0)));
    }
    case OP_ThresholdedRelu: {
        Expr *alpha = cst(L, t, ir_attr_float(n, "alpha", 1.0f));
        return kx_select(p, kx_bin(p, K_GT, x, alpha), x, cst(L, t, 0));
    }
    case OP_Shrink: {
        double lambd = ir_attr_float(n, "lambd", 0.5f), bias = ir_attr_float(n, "bias", 0);
        Expr *below = kx_bin(p, K_ADD, x, cst(L, t, bias));
        Expr *above = kx_bin(p, K_SUB, x, cst(L, t, bias));
        Expr *e = kx_select(p, kx_bin(p, K_GT, x, cst(L, t, lambd)), above, cst(L, t, 0));
        return kx_select(p, kx_bin(p, K_LT, x, cst(L, t, -lambd)), below, e);
    }
    default: die("lower_unary: %s", n->op_type);
    }
}

void lower_unary(Lower *L, Node *n) {
    if (n->in[0]->dtype == DT_STRING || n->out[0]->dtype == DT_STRING) {
        lower_cast_string(L, n);
        return;
    }
    Buf *in = lower_in(L, n, 0);
    lower_map(L, n, lower_out(L, n, 0), 1, &in, map_unary, NULL);
}

static KOp binary_kop(Op op) {
    switch (op) {
    case OP_Add: return K_ADD;
    case OP_Sub: return K_SUB;
    case OP_Mul: return K_MUL;
    case OP_Div: return K_DIV;
    case OP_Pow: return K_POW;
    case OP_And: return K_AND;
    case OP_Or: return K_OR;
    case OP_Equal: return K_EQ;
    case OP_Less: return K_LT;
    case OP_Greater: return K_GT;
    case OP_LessOrEqual: return K_LE;
    case OP_GreaterOrEqual: return K_GE;
    case OP_Max: return K_MAX;
    case OP_Min: return K_MIN;
    case OP_Sum: case OP_Mean: return K_ADD;
    default: die("no scalar operator for %s", op_info[op].name);
    }
}

/* Pow of a float base by a constant exponent of 2 in every element: x * x, which rounds once,
 * as a correctly rounded pow does, and as numpy computes x ** 2 (the LayerNorms that
 * ConvNeXt and others export as Sub, Pow, ReduceMean: 41 Pow kernels of ConvNeXt-Small ran
 * at ~4 GB/s, 4.7% of the model, in the general pow's double-float logarithm). */
static bool pow_square(const Node *n) {
    const Value *y = n->in[1];
    if (!dtype_is_float(n->in[0]->dtype) || !y->data || ir_numel(y) < 1) return false;
    for (int64_t i = 0; i < ir_numel(y); i++)
        if (dtype_is_float(y->dtype) ? ir_const_float(y, i) != 2.0 : ir_const_int(y, i) != 2) return false;
    return true;
}

static Expr *map_binary(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    if (n->op == OP_PRelu) {
        Expr *neg = kx_bin(p, K_MUL, v[0], v[1]);
        return kx_select(p, kx_bin(p, K_LT, v[0], cst(L, v[0]->type, 0)), neg, v[0]);
    }
    if (n->op == OP_Pow && pow_square(n)) return kx_bin(p, K_MUL, v[0], v[0]);
    if (n->op == OP_Pow) {
        /* an integer base with a float exponent is raised in float (numpy's rule); the map
         * casts the result back to the base's type */
        DType t = !dtype_is_float(v[0]->type) && dtype_is_float(v[1]->type) ? v[1]->type : v[0]->type;
        return kx_bin(p, K_POW, kx_cast(p, t, v[0]), kx_cast(p, t, v[1]));
    }
    return kx_bin(p, binary_kop(n->op), v[0], v[1]);
}

void lower_binary(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    if (ins[0]->string) {           /* Equal-19 on strings */
        lower_equal_string(L, n);
        return;
    }
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_binary, NULL);
}

/* Max/Min/Sum/Mean fold their operands left to right; Mean divides the sum at the end. */
static Expr *map_variadic(Lower *L, Node *n, Expr **v, void *ctx) {
    Expr *e = v[0];
    KOp op = binary_kop(n->op);
    for (int i = 1; i < n->nin; i++) e = kx_bin(L->p, op, e, v[i]);
    if (n->op == OP_Mean && n->nin > 1) e = kx_bin(L->p, K_DIV, e, cst(L, e->type, n->nin));
    return e;
}

void lower_variadic(Lower *L, Node *n) {
    Buf *ins[16];
    if (n->nin > COUNTOF(ins)) {
        error(ir_where(L->g, n), "%d inputs; at most %d are supported", n->nin, COUNTOF(ins));
        return;
    }
    for (int i = 0; i < n->nin; i++) ins[i] = lower_in(L, n, i);
    lower_map(L, n, lower_out(L, n, 0), n->nin, ins, map_variadic, NULL);
}

static Expr *map_where(Lower *L, Node *n, Expr **v, void *ctx) {
    return kx_select(L->p, v[0], v[1], v[2]);
}

void lower_where(Lower *L, Node *n) {
    Buf *ins[3] = {lower_in(L, n, 0), lower_in(L, n, 1), lower_in(L, n, 2)};
    lower_map(L, n, lower_out(L, n, 0), 3, ins, map_where, NULL);
}

/* Clip: a bound is either a compile-time constant (folded into the expression) or a loaded
 * rank-0 operand; `slot` says where each present bound sits among the map's operands. */
typedef struct ClipBounds {
    Expr *lo, *hi;          /* constant bounds, or NULL */
    int lo_slot, hi_slot;   /* operand index of a loaded bound, or -1 */
} ClipBounds;

static Expr *map_clip(Lower *L, Node *n, Expr **v, void *ctx) {
    ClipBounds *c = ctx;
    Expr *e = v[0];
    Expr *lo = c->lo_slot >= 0 ? v[c->lo_slot] : c->lo;
    Expr *hi = c->hi_slot >= 0 ? v[c->hi_slot] : c->hi;
    if (lo) e = kx_bin(L->p, K_MAX, e, lo);
    if (hi) e = kx_bin(L->p, K_MIN, e, hi);
    return e;
}

/* A constant bound as an expression of type t, keeping all 64 bits of an integer bound. */
static Expr *bound_const(Lower *L, Value *v, DType t) {
    if (dtype_is_float(t)) return cst(L, t, ir_const_float(v, 0));
    Expr *e = cst(L, t, 0);
    e->i = ir_const_int(v, 0);
    return e;
}

void lower_clip(Lower *L, Node *n) {
    Buf *ins[3] = {lower_in(L, n, 0)};
    int nin = 1;
    ClipBounds c = {NULL, NULL, -1, -1};
    DType t = n->in[0]->dtype;
    for (int i = 1; i <= 2 && i < n->nin; i++) {
        Value *b = n->in[i];
        if (!b) continue;
        Expr **k = i == 1 ? &c.lo : &c.hi;
        int *slot = i == 1 ? &c.lo_slot : &c.hi_slot;
        if (b->data) {
            *k = bound_const(L, b, t);
        } else {
            Buf *bb = lower_in(L, n, i);
            if (bb->rank) bb = kir_view_new(L->p, bb, bb->name, 0, NULL); /* a [1] bound */
            *slot = nin;
            ins[nin++] = bb;
        }
    }
    lower_map(L, n, lower_out(L, n, 0), nin, ins, map_clip, &c);
}

/* ---- CastLike, Mod ---- */

void infer_castlike(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (n->in[1]->dtype == DT_STRING || x->dtype == DT_STRING) {
        infer_cast_string(g, n, n->in[1]->dtype);
        return;
    }
    if (!dtype_supported(n->in[1]->dtype)) {
        error(ir_where(g, n), "cast to unsupported type %s", dtype_name(n->in[1]->dtype));
        return;
    }
    ir_set_shape(n->out[0], n->in[1]->dtype, x->rank, x->dims);
}

void infer_mod(Graph *g, Node *n) {
    Value *a = n->in[0], *b = n->in[1];
    int rank;
    int64_t dims[MAX_RANK];
    if (a->dtype != b->dtype) {
        error(ir_where(g, n), "inputs are %s and %s", dtype_name(a->dtype), dtype_name(b->dtype));
        return;
    }
    if (dtype_is_float(a->dtype) && !ir_attr_int(n, "fmod", 0)) {
        error(ir_where(g, n), "fmod=0 on %s inputs (the spec requires fmod=1)", dtype_name(a->dtype));
        return;
    }
    if (a->dtype == DT_BOOL) {
        error(ir_where(g, n), "inputs are bool");
        return;
    }
    if (!broadcast_all(g, n, 0, 2, &rank, dims)) return;
    ir_set_shape(n->out[0], a->dtype, rank, dims);
}

/* fmod=1: C's remainder (dividend's sign); fmod=0: Python's, which takes the divisor's sign.
 * A zero integer divisor is replaced by 1 (ONNX leaves the result undefined; the generated
 * code must not trap). */
static Expr *map_mod(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    Expr *a = v[0], *b = v[1];
    DType t = a->type;
    if (dtype_is_float(t)) return kx_bin(p, K_REM, a, b);
    Expr *zero = kx_const(p, t, 0);
    b = kx_select(p, kx_bin(p, K_EQ, b, zero), kx_const(p, t, 1), b);
    Expr *r = kx_bin(p, K_REM, a, b);
    if (ir_attr_int(n, "fmod", 0) || dtype_is_unsigned(t)) return r;
    Expr *signs_differ = kx_bin(p, K_XOR, kx_bin(p, K_LT, r, zero), kx_bin(p, K_LT, b, zero));
    Expr *fix = kx_bin(p, K_AND, kx_bin(p, K_NE, r, zero), signs_differ);
    return kx_select(p, fix, kx_bin(p, K_ADD, r, b), r);
}

void lower_mod(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_mod, NULL);
}

/* ---- Xor and BitShift ---- */

static Expr *map_xor(Lower *L, Node *n, Expr **v, void *ctx) {
    return kx_bin(L->p, K_XOR, v[0], v[1]);
}

void lower_xor(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_xor, NULL);
}

/* BitwiseAnd, BitwiseOr, BitwiseXor (broadcasting) and BitwiseNot (opset 18): integers of one
 * type */
void infer_bitwise(Graph *g, Node *n) {
    Value *x = n->in[0];
    int rank = x->rank;
    int64_t dims[MAX_RANK];
    if (!same_dtypes(g, n, 0, n->nin)) return;
    if (dtype_is_float(x->dtype) || x->dtype == DT_BOOL) {
        error(ir_where(g, n), "inputs are %s, %s needs integers", dtype_name(x->dtype), n->op_type);
        return;
    }
    if (n->nin == 2 && !broadcast_all(g, n, 0, 2, &rank, dims)) return;
    ir_set_shape(n->out[0], x->dtype, rank, n->nin == 2 ? dims : x->dims);
}

/* NOT x is x XOR all ones: 0 - 1 in x's type (wrapping for the unsigned ones) */
static Expr *map_bitwise(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    DType t = v[0]->type;
    switch (n->op) {
    case OP_BitwiseAnd: return kx_bin(p, K_AND, v[0], v[1]);
    case OP_BitwiseOr: return kx_bin(p, K_OR, v[0], v[1]);
    case OP_BitwiseXor: return kx_bin(p, K_XOR, v[0], v[1]);
    default:
        return kx_bin(p, K_XOR, v[0], kx_bin(p, K_SUB, kx_const(p, t, 0), kx_const(p, t, 1)));
    }
}

void lower_bitwise(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), n->nin > 1 ? lower_in(L, n, 1) : NULL};
    lower_map(L, n, lower_out(L, n, 0), n->nin, ins, map_bitwise, NULL);
}

void infer_bitshift(Graph *g, Node *n) {
    Value *x = n->in[0], *y = n->in[1];
    const char *dir = ir_attr_str(n, "direction", "");
    int rank;
    int64_t dims[MAX_RANK];
    if (x->dtype != y->dtype || !dtype_is_unsigned(x->dtype)) {
        error(ir_where(g, n), "inputs are %s and %s, need the same unsigned type",
              dtype_name(x->dtype), dtype_name(y->dtype));
        return;
    }
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")) {
        error(ir_where(g, n), "direction '%s' must be LEFT or RIGHT", dir);
        return;
    }
    if (!broadcast_all(g, n, 0, 2, &rank, dims)) return;
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

/* There is no shift operator in the kernel IR: x << y is x * 2^y and x >> y is x / 2^y, with
 * 2^y built from the bits of y (a product of selects). Shifts by the width or more give 0. */
static Expr *map_bitshift(Lower *L, Node *n, Expr **v, void *ctx) {
    Program *p = L->p;
    DType t = v[0]->type;
    int bits = (int)dtype_size(t) * 8;
    Expr *y = kx_bin(p, K_MIN, v[1], kx_const(p, t, bits - 1));
    Expr *pow2 = kx_const(p, t, 1);
    for (int b = 0; (1 << b) < bits; b++) {
        Expr *bit = kx_bin(p, K_REM, kx_bin(p, K_DIV, kx_clone(p, y), kx_const(p, t, 1 << b)),
                           kx_const(p, t, 2));
        Expr *f = kx_select(p, kx_bin(p, K_NE, bit, kx_const(p, t, 0)),
                            kx_const(p, t, ldexp(1, 1 << b)), kx_const(p, t, 1));
        pow2 = kx_bin(p, K_MUL, pow2, f);
    }
    bool left = !strcmp(ir_attr_str(n, "direction", ""), "LEFT");
    Expr *r = kx_bin(p, left ? K_MUL : K_DIV, v[0], pow2);
    Expr *big = kx_bin(p, K_GE, kx_clone(p, v[1]), kx_const(p, t, bits));
    return kx_select(p, big, kx_const(p, t, 0), r);
}

void lower_bitshift(Lower *L, Node *n) {
    Buf *ins[2] = {lower_in(L, n, 0), lower_in(L, n, 1)};
    lower_map(L, n, lower_out(L, n, 0), 2, ins, map_bitshift, NULL);
}
