/* kernel.c - one kernel of the kernel IR as one internal LLVM function.
 *
 * The function takes a pointer per kernel param (in params[] order). Loop variables and scalar
 * registers live in allocas of the entry block; mem2reg in the -O pipeline turns them into
 * SSA values, and at -O0 they simply stay in memory. Loops are preheader/header/body/latch
 * with a constant step, which is the shape LLVM's loop passes expect. Index expressions are
 * linearised with the row-major strides of the buffer being accessed (a view's own dims);
 * index arithmetic is nsw because the IR guarantees in-range indices, which lets SCEV see
 * through it when vectorising.
 *
 * float16 and bfloat16 live in memory as i16 bit patterns and in registers as float (kir.h);
 * loads, stores and casts convert with integer arithmetic on the bits (half_to_float,
 * float_to_half below), never with LLVM's `half`/`bfloat` types, whose fpext/fptrunc become
 * compiler-rt calls (__extendhfsf2, __truncsfhf2) on x86 without F16C and on Cortex-M4. */
#include <string.h>

#include "internal.h"

LLVMTypeRef be_mem_type(Emitter *e, DType t) {
    switch (t) {
    case DT_FLOAT: return e->f32;
    case DT_DOUBLE: return e->f64;
    case DT_BOOL: case DT_INT8: case DT_UINT8: return e->i8;
    case DT_INT16: case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: return e->i16;
    case DT_INT32: case DT_UINT32: return e->i32;
    case DT_INT64: case DT_UINT64: return e->i64;
    case DT_INDEX: return e->idx;
    default: die("backend: unsupported dtype %d", t);
    }
}

LLVMTypeRef be_reg_type(Emitter *e, DType t) {
    if (t == DT_FLOAT16 || t == DT_BFLOAT16) return e->f32;
    return t == DT_BOOL ? e->i1 : be_mem_type(e, t);
}

static bool is_half(DType t) { return t == DT_FLOAT16 || t == DT_BFLOAT16; }
static bool is_float(DType t) { return t == DT_FLOAT || t == DT_DOUBLE || is_half(t); }
static bool is_unsigned(DType t) {
    return t == DT_UINT8 || t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64 || t == DT_BOOL;
}
static unsigned elem_align(Emitter *e, DType t) {
    return (unsigned)(t == DT_INDEX ? (unsigned)e->t->ptr_bits / 8 : dtype_size(t));
}

/* ---- float16 and bfloat16 ----
 * Branch-free (selects only) so that loops over half data still vectorise. ir/kinterp.c does
 * the same arithmetic in C; tests compare both with numpy. */

static LLVMValueRef k32(Emitter *e, unsigned long long v) { return LLVMConstInt(e->i32, v, 0); }

/* i16 bit pattern -> float, exact. float16: normal numbers rebias the exponent (127 - 15 =
 * 112), inf/NaN keep their payload, subnormals are m * 2^-24 (an exact int-to-float and
 * multiply: both single instructions on every target). */
static LLVMValueRef half_to_float(Emitter *e, DType t, LLVMValueRef h) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef x = LLVMBuildZExt(B, h, e->i32, "");
    if (t == DT_BFLOAT16) return LLVMBuildBitCast(B, LLVMBuildShl(B, x, k32(e, 16), ""), e->f32, "");
    LLVMValueRef sign = LLVMBuildShl(B, LLVMBuildAnd(B, x, k32(e, 0x8000), ""), k32(e, 16), "");
    LLVMValueRef mag = LLVMBuildAnd(B, x, k32(e, 0x7fff), "");
    LLVMValueRef ex = LLVMBuildLShr(B, mag, k32(e, 10), "");
    LLVMValueRef m = LLVMBuildAnd(B, x, k32(e, 0x3ff), "");
    LLVMValueRef norm = LLVMBuildAdd(B, LLVMBuildShl(B, mag, k32(e, 13), ""), k32(e, 112u << 23), "");
    LLVMValueRef infnan = LLVMBuildOr(B, LLVMBuildShl(B, m, k32(e, 13), ""), k32(e, 0x7f800000), "");
    LLVMValueRef sub = LLVMBuildFMul(B, LLVMBuildSIToFP(B, m, e->f32, ""),
                                     LLVMConstReal(e->f32, 1.0 / 16777216.0), "");
    sub = LLVMBuildBitCast(B, sub, e->i32, "");
    LLVMValueRef r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ex, k32(e, 31), ""), infnan, norm, "");
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ex, k32(e, 0), ""), sub, r, "");
    return LLVMBuildBitCast(B, LLVMBuildOr(B, r, sign, ""), e->f32, "");
}

/* (a + half - 1 + lsb) >> s: a >> s rounded to nearest, ties to even; half = 1 << (s-1). */
static LLVMValueRef shr_even(Emitter *e, LLVMValueRef a, LLVMValueRef s, LLVMValueRef half) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef lsb = LLVMBuildAnd(B, LLVMBuildLShr(B, a, s, ""), k32(e, 1), "");
    LLVMValueRef sum = LLVMBuildAdd(B, LLVMBuildAdd(B, a, LLVMBuildSub(B, half, k32(e, 1), ""), ""), lsb, "");
    return LLVMBuildLShr(B, sum, s, "");
}

/* float -> i16 bit pattern, rounding to nearest even: NaN stays a quiet NaN with sign and top
 * payload bits, |x| >= 65520 gives inf, results below 2^-14 are float16 subnormals (the
 * mantissa with its implicit bit shifted right by 126 - exponent, at most 25: everything
 * smaller rounds to zero then). */
static LLVMValueRef float_to_half(Emitter *e, DType t, LLVMValueRef f) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef x = LLVMBuildBitCast(B, f, e->i32, "");
    LLVMValueRef a = LLVMBuildAnd(B, x, k32(e, 0x7fffffff), "");
    LLVMValueRef isnan = LLVMBuildICmp(B, LLVMIntUGT, a, k32(e, 0x7f800000), "");
    LLVMValueRef r;
    if (t == DT_BFLOAT16) {
        LLVMValueRef nan = LLVMBuildOr(B, LLVMBuildLShr(B, x, k32(e, 16), ""), k32(e, 0x40), "");
        r = LLVMBuildSelect(B, isnan, nan, shr_even(e, x, k32(e, 16), k32(e, 0x8000)), "");
        return LLVMBuildTrunc(B, r, e->i16, "");
    }
    LLVMValueRef sign = LLVMBuildAnd(B, LLVMBuildLShr(B, x, k32(e, 16), ""), k32(e, 0x8000), "");
    LLVMValueRef nan = LLVMBuildOr(B, LLVMBuildAnd(B, LLVMBuildLShr(B, a, k32(e, 13), ""),
                                                   k32(e, 0x3ff), ""), k32(e, 0x7e00), "");
    LLVMValueRef norm = LLVMBuildSub(B, shr_even(e, a, k32(e, 13), k32(e, 0x1000)), k32(e, 112u << 10), "");
    /* shift 126 - exponent, clamped to 25; the clamp also keeps the shift in range (no poison)
     * where the normal path is taken */
    LLVMValueRef ex = LLVMBuildLShr(B, a, k32(e, 23), "");
    LLVMValueRef s = LLVMBuildSub(B, k32(e, 126), ex, "");
    s = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGT, s, k32(e, 25), ""), k32(e, 25), s, "");
    LLVMValueRef m = LLVMBuildOr(B, LLVMBuildAnd(B, a, k32(e, 0x7fffff), ""), k32(e, 0x800000), "");
    LLVMValueRef half = LLVMBuildShl(B, k32(e, 1), LLVMBuildSub(B, s, k32(e, 1), ""), "");
    LLVMValueRef sub = shr_even(e, m, s, half);
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntULT, a, k32(e, 0x38800000), ""), sub, norm, "");
    LLVMValueRef big = LLVMBuildSelect(B, isnan, nan, k32(e, 0x7c00), "");
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, a, k32(e, 0x477ff000), ""), big, r, "");
    return LLVMBuildTrunc(B, LLVMBuildOr(B, r, sign, ""), e->i16, "");
}

/* ---- expressions ---- */

static LLVMValueRef expr(Emitter *e, Expr *x);

static LLVMValueRef param_ptr(Emitter *e, Buf *b) {
    for (int i = 0; i < e->k->nparams; i++)
        if (e->k->params[i] == b) return LLVMGetParam(e->fn, (unsigned)i);
    die("kernel %s: buffer %s is not a param", e->k->name, b->name);
}

/* &b[idx...] with b's row-major strides. */
static LLVMValueRef elem_ptr(Emitter *e, Buf *b, Expr **idx) {
    LLVMValueRef lin = LLVMConstInt(e->idx, 0, 0);
    for (int d = 0; d < b->rank; d++) {
        LLVMValueRef i = expr(e, idx[d]);
        lin = d == 0 ? i : LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, lin,
                               LLVMConstInt(e->idx, (unsigned long long)b->dims[d], 0), ""), i, "");
    }
    return LLVMBuildInBoundsGEP2(e->B, be_mem_type(e, b->dtype), param_ptr(e, b), &lin, 1, "");
}

static LLVMValueRef konst(Emitter *e, Expr *x) {
    if (is_float(x->type)) return LLVMConstReal(be_reg_type(e, x->type), x->f);
    if (x->type == DT_BOOL) return LLVMConstInt(e->i1, x->i != 0, 0);
    return LLVMConstInt(be_reg_type(e, x->type), (unsigned long long)x->i, 1);
}

static LLVMValueRef load(Emitter *e, Expr *x) {
    LLVMTypeRef mt = be_mem_type(e, x->buf->dtype);
    LLVMValueRef v = LLVMBuildLoad2(e->B, mt, elem_ptr(e, x->buf, x->args), "");
    LLVMSetAlignment(v, elem_align(e, x->buf->dtype));
    if (is_half(x->buf->dtype)) return half_to_float(e, x->buf->dtype, v);
    if (x->buf->dtype == DT_BOOL) v = LLVMBuildICmp(e->B, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "");
    return v;
}

static LLVMValueRef cast(Emitter *e, LLVMValueRef v, DType from, DType to) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef ty = be_reg_type(e, to);
    if (from == to) return v;
    if (is_half(to)) {      /* round the float to the half's precision; the register stays float */
        v = cast(e, v, from, DT_FLOAT);
        return half_to_float(e, to, float_to_half(e, to, v));
    }
    if (is_half(from)) {    /* already an exact float */
        if (to == DT_FLOAT) return v;
        from = DT_FLOAT;
    }
    if (to == DT_BOOL) {
        if (is_float(from)) return LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    if (is_float(from) && is_float(to)) return LLVMBuildFPCast(B, v, ty, "");
    if (is_float(to))
        return is_unsigned(from) ? LLVMBuildUIToFP(B, v, ty, "") : LLVMBuildSIToFP(B, v, ty, "");
    if (is_float(from)) {
        /* Narrow targets through i32 so that negative values wrap instead of being poison. */
        unsigned w = LLVMGetIntTypeWidth(ty);
        if (w < 32) return LLVMBuildTrunc(B, LLVMBuildFPToSI(B, v, e->i32, ""), ty, "");
        return is_unsigned(to) ? LLVMBuildFPToUI(B, v, ty, "") : LLVMBuildFPToSI(B, v, ty, "");
    }
    return LLVMBuildIntCast2(B, v, ty, !is_unsigned(from), "");
}

/* min/max; on floats NaN in either operand gives NaN. */
static LLVMValueRef minmax(Emitter *e, bool max, DType t, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = e->B;
    if (is_float(t)) {
        LLVMValueRef lt = LLVMBuildFCmp(B, max ? LLVMRealOGT : LLVMRealOLT, a, b, "");
        LLVMValueRef r = LLVMBuildSelect(B, lt, a, b, "");
        LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, a, b, "");
        return LLVMBuildSelect(B, nan, LLVMBuildFAdd(B, a, b, ""), r, "");
    }
    LLVMIntPredicate p = is_unsigned(t) ? (max ? LLVMIntUGT : LLVMIntULT) : (max ? LLVMIntSGT : LLVMIntSLT);
    return LLVMBuildSelect(B, LLVMBuildICmp(B, p, a, b, ""), a, b, "");
}

static LLVMValueRef unary(Emitter *e, Expr *x) {
    LLVMBuilderRef B = e->B;
    DType t = x->args[0]->type;
    LLVMValueRef a = expr(e, x->args[0]);
    LLVMTypeRef ty = LLVMTypeOf(a);
    bool f = is_float(t);
    LLVMValueRef zero = LLVMConstNull(ty);
    if (f && be_math_op(x->op)) return be_math(e, x->op, t, a, NULL);
    switch (x->op) {
    case K_NEG: return f ? LLVMBuildFNeg(B, a, "") : LLVMBuildNeg(B, a, "");
    case K_ABS:
        if (f) {
            unsigned id = LLVMLookupIntrinsicID("llvm.fabs", 9);
            return LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, &ty, 1),
                                  LLVMGetIntrinsicDeclaration(e->M, id, &ty, 1), &a, 1, "");
        }
        if (is_unsigned(t)) return a;
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, zero, ""), LLVMBuildNeg(B, a, ""), a, "");
    case K_NOT: return LLVMBuildNot(B, a, "");
    case K_CAST: return cast(e, a, t, x->type);
    case K_SQRT: {
        if (!f) die("sqrt of dtype %d", t);
        unsigned id = LLVMLookupIntrinsicID("llvm.sqrt", 9);
        return LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, &ty, 1),
                              LLVMGetIntrinsicDeclaration(e->M, id, &ty, 1), &a, 1, "");
    }
    case K_FLOOR: case K_CEIL: case K_ROUND: return a;          /* integers */
    case K_RECIP:
        return f ? LLVMBuildFDiv(B, LLVMConstReal(ty, 1), a, "") : LLVMBuildSDiv(B, LLVMConstInt(ty, 1, 0), a, "");
    case K_SIGN: {
        LLVMValueRef one = f ? LLVMConstReal(ty, 1) : LLVMConstInt(ty, 1, 0);
        LLVMValueRef mone = f ? LLVMConstReal(ty, -1) : LLVMConstInt(ty, (unsigned long long)-1, 1);
        LLVMValueRef pos = f ? LLVMBuildFCmp(B, LLVMRealOGT, a, zero, "")
                             : LLVMBuildICmp(B, is_unsigned(t) ? LLVMIntUGT : LLVMIntSGT, a, zero, "");
        LLVMValueRef neg = f ? LLVMBuildFCmp(B, LLVMRealOLT, a, zero, "")
                             : LLVMBuildICmp(B, is_unsigned(t) ? LLVMIntULT : LLVMIntSLT, a, zero, "");
        /* floats keep 0, -0 and NaN as they are */
        return LLVMBuildSelect(B, pos, one, LLVMBuildSelect(B, neg, mone, f ? a : zero, ""), "");
    }
    default: die("unary %s on dtype %d", kop_name[x->op], t);
    }
}

static LLVMValueRef compare(Emitter *e, KOp op, DType t, LLVMValueRef a, LLVMValueRef b) {
    static const LLVMRealPredicate fp[] = {LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE,
                                           LLVMRealOEQ, LLVMRealUNE};
    static const LLVMIntPredicate sp[] = {LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE, LLVMIntEQ, LLVMIntNE};
    static const LLVMIntPredicate up[] = {LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE, LLVMIntEQ, LLVMIntNE};
    int i = (int)op - (int)K_LT;        /* ORDER K_LT K_LE K_GT K_GE K_EQ K_NE */
    if (is_float(t)) return LLVMBuildFCmp(e->B, fp[i], a, b, "");
    return LLVMBuildICmp(e->B, is_unsigned(t) ? up[i] : sp[i], a, b, "");
}

static LLVMValueRef binary(Emitter *e, Expr *x) {
    LLVMBuilderRef B = e->B;
    DType t = x->args[0]->type;
    LLVMValueRef a = expr(e, x->args[0]), b = expr(e, x->args[1]);
    bool f = is_float(t), u = is_unsigned(t), ix = t == DT_INDEX;
    if (f && be_math_op(x->op)) return be_math(e, x->op, t, a, b);
    switch (x->op) {
    case K_ADD: return f ? LLVMBuildFAdd(B, a, b, "") : ix ? LLVMBuildNSWAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, "");
    case K_SUB: return f ? LLVMBuildFSub(B, a, b, "") : ix ? LLVMBuildNSWSub(B, a, b, "") : LLVMBuildSub(B, a, b, "");
    case K_MUL: return f ? LLVMBuildFMul(B, a, b, "") : ix ? LLVMBuildNSWMul(B, a, b, "") : LLVMBuildMul(B, a, b, "");
    case K_DIV: return f ? LLVMBuildFDiv(B, a, b, "") : u ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildSDiv(B, a, b, "");
    case K_REM: return u ? LLVMBuildURem(B, a, b, "") : LLVMBuildSRem(B, a, b, "");
    case K_POW: return be_math(e, K_POW, t, a, b);              /* integers */
    case K_MIN: return minmax(e, false, t, a, b);
    case K_MAX: return minmax(e, true, t, a, b);
    case K_LT: case K_LE: case K_GT: case K_GE: case K_EQ: case K_NE: return compare(e, x->op, t, a, b);
    case K_AND: return LLVMBuildAnd(B, a, b, "");
    case K_OR: return LLVMBuildOr(B, a, b, "");
    case K_XOR: return LLVMBuildXor(B, a, b, "");
    default: die("binary %s on dtype %d", kop_name[x->op], t);
    }
}

static LLVMValueRef expr(Emitter *e, Expr *x) {
    switch (x->kind) {
    case E_CONST: return konst(e, x);
    case E_VAR: return LLVMBuildLoad2(e->B, e->idx, e->vars[x->var], "");
    case E_SCALAR: return LLVMBuildLoad2(e->B, be_reg_type(e, e->k->scalars[x->var]), e->scalars[x->var], "");
    case E_LOAD: return load(e, x);
    case E_UN: return unary(e, x);
    case E_BIN: return binary(e, x);
    case E_SELECT: {
        LLVMValueRef c = expr(e, x->args[0]), a = expr(e, x->args[1]), b = expr(e, x->args[2]);
        return LLVMBuildSelect(e->B, c, a, b, "");
    }
    }
    die("expression kind %d", x->kind);
}

/* ---- statements ---- */

static void stmts(Emitter *e, Stmt *s);

static LLVMBasicBlockRef block(Emitter *e, const char *name) {
    return LLVMAppendBasicBlockInContext(e->C, e->fn, name);
}

static void loop(Emitter *e, Stmt *s) {
    LLVMBuilderRef B = e->B;
    if (s->step <= 0) die("kernel %s: loop step %lld", e->k->name, (long long)s->step);
    LLVMValueRef var = e->vars[s->var];
    LLVMValueRef lo = expr(e, s->lo), hi = expr(e, s->hi);      /* evaluated once, before */
    LLVMBuildStore(B, lo, var);
    LLVMBasicBlockRef head = block(e, "loop"), body = block(e, "body"), latch = block(e, "latch"),
                      done = block(e, "done");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    LLVMValueRef v = LLVMBuildLoad2(B, e->idx, var, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, v, hi, ""), body, done);
    LLVMPositionBuilderAtEnd(B, body);
    stmts(e, s->body);
    LLVMBuildBr(B, latch);
    LLVMPositionBuilderAtEnd(B, latch);
    v = LLVMBuildLoad2(B, e->idx, var, "");
    LLVMBuildStore(B, LLVMBuildNSWAdd(B, v, LLVMConstInt(e->idx, (unsigned long long)s->step, 0), ""), var);
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, done);
}

static void store(Emitter *e, Stmt *s) {
    LLVMValueRef v = expr(e, s->val);
    if (s->buf->dtype == DT_BOOL) v = LLVMBuildZExt(e->B, v, e->i8, "");
    if (is_half(s->buf->dtype)) v = float_to_half(e, s->buf->dtype, v);
    LLVMValueRef st = LLVMBuildStore(e->B, v, elem_ptr(e, s->buf, s->idx));
    LLVMSetAlignment(st, elem_align(e, s->buf->dtype));
}

static void cond(Emitter *e, Stmt *s) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef c = expr(e, s->cond);
    LLVMBasicBlockRef then = block(e, "then"), els = block(e, "else"), join = block(e, "endif");
    LLVMBuildCondBr(B, c, then, els);
    LLVMPositionBuilderAtEnd(B, then);
    stmts(e, s->then);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, els);
    stmts(e, s->els);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
}

static void stmts(Emitter *e, Stmt *s) {
    for (; s; s = s->next) {
        switch (s->kind) {
        case S_LOOP: loop(e, s); break;
        case S_STORE: store(e, s); break;
        case S_SET: LLVMBuildStore(e->B, expr(e, s->val), e->scalars[s->var]); break;
        case S_IF: cond(e, s); break;
        }
    }
}

/* ---- the function ---- */

/* Whether the storage of two params can overlap: same root, or arena ranges that intersect.
 * Distinct inputs, outputs and constants are distinct objects by the run() contract. */
static bool may_overlap(Buf *a, Buf *b) {
    Buf *ra = kir_root(a), *rb = kir_root(b);
    if (ra == rb) return true;
    if (ra->kind != rb->kind) return false;
    if (ra->kind == B_INPUT || ra->kind == B_OUTPUT) return ra->io_index == rb->io_index;
    if (ra->kind != B_TEMP) return false;
    int64_t a0 = ra->offset, a1 = a0 + (int64_t)kir_nbytes(ra);
    int64_t b0 = rb->offset, b1 = b0 + (int64_t)kir_nbytes(rb);
    if (a0 < 0 || b0 < 0) return true;
    return a0 < b1 && b0 < a1;
}

static void param_attrs(Emitter *e, Kernel *k, LLVMValueRef fn) {
    for (int i = 0; i < k->nparams; i++) {
        unsigned at = (unsigned)i + 1;
        be_enum_attr(e, fn, at, "nocapture");
        if (k->modes[i] == KP_IN) be_enum_attr(e, fn, at, "readonly");
        bool alone = true;
        for (int j = 0; j < k->nparams && alone; j++)
            if (j != i && may_overlap(k->params[i], k->params[j])) alone = false;
        if (alone) be_enum_attr(e, fn, at, "noalias");
    }
}

LLVMValueRef be_kernel(Emitter *e, Kernel *k) {
    LLVMTypeRef *pt = ARENA_ARRAY(e->p->arena, LLVMTypeRef, k->nparams + 1);
    for (int i = 0; i < k->nparams; i++) pt[i] = e->ptr;
    LLVMTypeRef fty = LLVMFunctionType(e->voidt, pt, (unsigned)k->nparams, 0);
    char *name = arena_printf(e->p->arena, "%s.k%d.%s", e->p->name, k->id, k->name);
    LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    param_attrs(e, k, fn);
    for (int i = 0; i < k->nparams; i++) {
        const char *pn = k->params[i]->name;
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), pn, strlen(pn));
    }
    e->k = k;
    e->fn = fn;
    LLVMPositionBuilderAtEnd(e->B, block(e, "entry"));
    e->vars = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nvars + 1);
    e->scalars = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nscalars + 1);
    for (int i = 0; i < k->nvars; i++) e->vars[i] = LLVMBuildAlloca(e->B, e->idx, "");
    for (int i = 0; i < k->nscalars; i++)
        e->scalars[i] = LLVMBuildAlloca(e->B, be_reg_type(e, k->scalars[i]), "");
    stmts(e, k->body);
    LLVMBuildRetVoid(e->B);
    e->k = NULL;
    return fn;
}
