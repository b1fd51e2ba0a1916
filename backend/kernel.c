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
 * A vector loop (LH_VECTOR, kir.h) is emitted as its body once, on <W x T> values (vloop):
 * expressions that do not depend on the lane stay scalars and are splatted where they meet
 * vectors; a load or store whose linear index has lane coefficient 1 is one contiguous vector
 * access, coefficient 0 a scalar one, a load with a small stride (2..4, or -4..-2) contiguous
 * vector loads and shuffles, a load whose lanes lie at constant offsets from lane 0 within
 * 2 vectors (a grouped conv's input: window_load) a load of that span and a shuffle, a store
 * with a stride of 2..4 shuffles and masked contiguous stores, anything else a masked
 * gather/scatter. Indices are first rid of
 * the divisions and remainders that the loops' constant ranges prove away (ir/krange.h). Loops and ifs
 * inside it have uniform headers and stay ordinary control flow carrying vector registers.
 * At -O2 and above float add/sub/mul carry the `contract` flag (FMA) unless --fp-strict.
 *
 * float16 and bfloat16 live in memory as i16 bit patterns and in registers as float (kir.h);
 * loads, stores and casts convert with integer arithmetic on the bits (half_to_float,
 * float_to_half below), never with LLVM's `half`/`bfloat` types, whose fpext/fptrunc become
 * compiler-rt calls (__extendhfsf2, __truncsfhf2) on x86 without F16C and on Cortex-M4. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "internal.h"

LLVMTypeRef be_mem_type(Emitter *e, DType t) {
    switch (t) {
    case DT_FLOAT: return e->f32;
    case DT_DOUBLE: return e->f64;
    case DT_BOOL: case DT_INT8: case DT_UINT8: return e->i8;
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ: return e->i8;
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0: return e->i8;
    case DT_INT16: case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: return e->i16;
    case DT_INT32: case DT_UINT32: return e->i32;
    case DT_INT64: case DT_UINT64: return e->i64;
    case DT_INDEX: return e->idx;
    default: die("backend: unsupported dtype %d", t);
    }
}

LLVMTypeRef be_reg_type(Emitter *e, DType t) {
    if (t == DT_FLOAT16 || t == DT_BFLOAT16 || dtype_is_minifloat(t)) return e->f32;
    return t == DT_BOOL ? e->i1 : be_mem_type(e, t);
}

static bool is_half(DType t) { return t == DT_FLOAT16 || t == DT_BFLOAT16; }
static bool is_float(DType t) { return t == DT_FLOAT || t == DT_DOUBLE || is_half(t) || dtype_is_minifloat(t); }
static bool is_unsigned(DType t) {
    return t == DT_UINT8 || t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64 || t == DT_BOOL;
}
static unsigned elem_align(Emitter *e, DType t) {
    return (unsigned)(t == DT_INDEX ? (unsigned)e->t->ptr_bits / 8 : dtype_size(t));
}

/* ---- float16 and bfloat16 ----
 * Branch-free (selects only) so that loops over half data still vectorise. ir/kinterp.c does
 * the same arithmetic in C; tests compare both with numpy. */

/* ---- vector types: w lanes, or a scalar when w is 0 ---- */

static LLVMTypeRef wide(LLVMTypeRef t, unsigned w) { return w ? LLVMVectorType(t, w) : t; }
static unsigned width_of(LLVMValueRef v) {
    LLVMTypeRef t = LLVMTypeOf(v);
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetVectorSize(t) : 0;
}
/* The scalar type t with as many lanes as v has. */
static LLVMTypeRef like(LLVMValueRef v, LLVMTypeRef t) { return wide(t, width_of(v)); }

static LLVMValueRef splat_const(LLVMValueRef c, unsigned w) {
    LLVMValueRef lanes[MAX_LANES];
    for (unsigned i = 0; i < w; i++) lanes[i] = c;
    return w ? LLVMConstVector(lanes, w) : c;
}

/* An integer constant of type ty (a scalar or a vector of integers). */
static LLVMValueRef kint(LLVMTypeRef ty, unsigned long long v) {
    if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind) return LLVMConstInt(ty, v, 0);
    return splat_const(LLVMConstInt(LLVMGetElementType(ty), v, 0), LLVMGetVectorSize(ty));
}

static LLVMValueRef splat(Emitter *e, LLVMValueRef s, unsigned w) {
    if (!w) return s;
    if (LLVMIsConstant(s)) return splat_const(s, w);
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), w);
    LLVMValueRef v = LLVMBuildInsertElement(e->B, LLVMGetPoison(vt), s, LLVMConstInt(e->i32, 0, 0), "");
    return LLVMBuildShuffleVector(e->B, v, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(e->i32, w)), "");
}

#define k32(v) kint(I, (v))

/* ---- float8 (ir/float8.c) ----
 * A byte -> float through a 256-entry table of f8_decode's values (one per type and module:
 * exact, and a load, or a gather in vector code, where the bit arithmetic of four formats
 * with subnormals, NaNs and no -0 would be a dozen instructions); float -> byte as
 * f8_encode's integer steps, which vectorise. float4e2m1 and float8e8m0, whose bits map to
 * a float's in a few operations, decode with them instead (MXFP4 weights in a product's
 * inner loop). */
static LLVMValueRef f8_to_float(Emitter *e, DType t, LLVMValueRef b) {
    LLVMBuilderRef B = e->B;
    if (t == DT_FLOAT4E2M1 || t == DT_FLOAT8E8M0) {
        /* the bits of the float, in 32-bit lanes (a gather from the table in an MXFP4
         * product's inner loop made it 2.8x slower than the float one):
         * e2m1 s.ee.m: ee 0: 0.5 m; else 2^(ee - 1) (1 + m / 2), i.e. exponent field
         * ee + 126 and m at the mantissa's top bit; e8m0 c: exponent field c, but 0 is 2^-127
         * (a subnormal) and 0xff NaN */
        LLVMTypeRef I = like(b, e->i32), F = like(b, e->f32);
        LLVMValueRef c = LLVMTypeOf(b) == I ? b : LLVMBuildZExt(B, b, I, ""), r;   /* codes in 8 or 32 bits */
        if (t == DT_FLOAT8E8M0) {
            r = LLVMBuildShl(B, c, k32(23), "");
            r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, c, k32(0), ""), k32(0x00400000), r, "");
            r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, c, k32(0xff), ""), k32(0x7fc00000), r, "");
        } else {
            LLVMValueRef ex = LLVMBuildAnd(B, LLVMBuildLShr(B, c, k32(1), ""), k32(3), "");
            LLVMValueRef m = LLVMBuildAnd(B, c, k32(1), "");
            LLVMValueRef norm = LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildAdd(B, ex, k32(126), ""), k32(23), ""),
                                            LLVMBuildShl(B, m, k32(22), ""), "");
            LLVMValueRef sub = LLVMBuildMul(B, m, k32(0x3f000000), "");
            r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ex, k32(0), ""), sub, norm, "");
            r = LLVMBuildOr(B, r, LLVMBuildShl(B, LLVMBuildAnd(B, c, k32(8), ""), k32(28), ""), "");
        }
        return LLVMBuildBitCast(B, r, F, "");
    }
    char name[32];
    snprintf(name, sizeof name, "f8.%s", dtype_name(t));
    LLVMValueRef tab = LLVMGetNamedGlobal(e->M, name);
    if (!tab) {
        LLVMValueRef v[256];
        for (int i = 0; i < 256; i++) v[i] = LLVMConstReal(e->f32, f8_decode(t, (uint8_t)i));
        LLVMValueRef init = LLVMConstArray(e->f32, v, 256);
        tab = LLVMAddGlobal(e->M, LLVMTypeOf(init), name);
        LLVMSetInitializer(tab, init);
        LLVMSetGlobalConstant(tab, 1);
        LLVMSetLinkage(tab, LLVMPrivateLinkage);
        LLVMSetUnnamedAddress(tab, LLVMGlobalUnnamedAddr);
        LLVMSetAlignment(tab, 64);
    }
    LLVMValueRef ix = LLVMBuildZExt(B, b, like(b, e->i32), "");
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(B, e->f32, tab, &ix, 1, "");
    unsigned w = width_of(b);
    if (!w) return LLVMBuildLoad2(B, e->f32, ptr, "");
    LLVMValueRef all[MAX_LANES];
    for (unsigned i = 0; i < w; i++) all[i] = LLVMConstInt(e->i1, 1, 0);
    LLVMTypeRef tys[2] = {LLVMVectorType(e->f32, w), LLVMTypeOf(ptr)};
    LLVMValueRef args[4] = {ptr, LLVMConstInt(e->i32, 4, 0), LLVMConstVector(all, w), LLVMGetPoison(tys[0])};
    unsigned id = LLVMLookupIntrinsicID("llvm.masked.gather", 18);
    return LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, tys, 2), LLVMGetIntrinsicDeclaration(e->M, id, tys, 2),
                          args, 4, "");
}

static LLVMValueRef f8_to_bits(Emitter *e, DType t, LLVMValueRef v) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef I = like(v, e->i32), F = like(v, e->f32);
    if (t == DT_FLOAT8E8M0) {   /* e8m0_encode, rounding up, saturated: the exponent field,
                                   plus one if a fraction and below 0xfe; 0xff stays */
        LLVMValueRef u = LLVMBuildBitCast(B, v, I, "");
        LLVMValueRef ex = LLVMBuildAnd(B, LLVMBuildLShr(B, u, k32(23), ""), k32(0xff), "");
        LLVMValueRef frac = LLVMBuildICmp(B, LLVMIntNE, LLVMBuildAnd(B, u, k32(0x7fffff), ""), k32(0), "");
        LLVMValueRef up = LLVMBuildAnd(B, frac, LLVMBuildICmp(B, LLVMIntULT, ex, k32(0xfe), ""), "");
        /* but 2^-127, code 0's value, stays code 0 (e8m0_encode) */
        LLVMValueRef min = LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildAnd(B, u, k32(0x7fffffff), ""), k32(0x00400000), "");
        up = LLVMBuildAnd(B, up, LLVMBuildNot(B, min, ""), "");
        return LLVMBuildTrunc(B, LLVMBuildAdd(B, ex, LLVMBuildZExt(B, up, I, ""), ""), like(v, e->i8), "");
    }
    F8Format f = f8_format(t);
    int emin = 1 - f.bias;
    unsigned sh = 23 - (unsigned)f.mbits, cb = (unsigned)(127 + emin - f.mbits + 23) << 23;
    LLVMValueRef u = LLVMBuildBitCast(B, v, I, "");
    LLVMValueRef sign = LLVMBuildAnd(B, LLVMBuildLShr(B, u, k32(31 - (unsigned)f.sbit), ""), k32(1u << f.sbit), "");
    LLVMValueRef a = LLVMBuildAnd(B, u, k32(0x7fffffff), "");
    LLVMValueRef s = LLVMBuildFAdd(B, LLVMBuildBitCast(B, a, F, ""), LLVMBuildBitCast(B, k32(cb), F, ""), "");
    LLVMValueRef ms = LLVMBuildSub(B, LLVMBuildBitCast(B, s, I, ""), k32(cb), "");
    LLVMValueRef r = LLVMBuildAdd(B, LLVMBuildAdd(B, a, k32((1u << (sh - 1)) - 1), ""),
                                  LLVMBuildAnd(B, LLVMBuildLShr(B, a, k32(sh), ""), k32(1), ""), "");
    LLVMValueRef mn = LLVMBuildSub(B, LLVMBuildLShr(B, r, k32(sh), ""), k32((unsigned)(127 - f.bias) << f.mbits), "");
    LLVMValueRef mag = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntULT, a, k32((unsigned)(127 + emin) << 23), ""), ms, mn, "");
    mag = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGT, mag, k32(f.maxmag), ""), k32(f.maxmag), mag, "");
    if (f.inf) mag = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, a, k32(0x7f800000), ""), k32(0x7c), mag, "");
    if (f.uz) sign = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, mag, k32(0), ""), k32(0), sign, "");
    LLVMValueRef nan = f.uz || f.nonan ? k32(f.nan) : LLVMBuildOr(B, sign, k32(f.nan), "");
    LLVMValueRef res = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGT, a, k32(0x7f800000), ""), nan,
                                       LLVMBuildOr(B, sign, mag, ""), "");
    return LLVMBuildTrunc(B, res, like(v, e->i8), "");
}

/* i16 bit pattern -> float, exact. float16: normal numbers rebias the exponent (127 - 15 =
 * 112), inf/NaN keep their payload, subnormals are m * 2^-24 (an exact int-to-float and
 * multiply: both single instructions on every target). */
static LLVMValueRef half_to_float(Emitter *e, DType t, LLVMValueRef h) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef I = like(h, e->i32), F = like(h, e->f32);
    LLVMValueRef x = LLVMBuildZExt(B, h, I, "");
    if (t == DT_BFLOAT16) return LLVMBuildBitCast(B, LLVMBuildShl(B, x, k32(16), ""), F, "");
    LLVMValueRef sign = LLVMBuildShl(B, LLVMBuildAnd(B, x, k32(0x8000), ""), k32(16), "");
    LLVMValueRef mag = LLVMBuildAnd(B, x, k32(0x7fff), "");
    LLVMValueRef ex = LLVMBuildLShr(B, mag, k32(10), "");
    LLVMValueRef m = LLVMBuildAnd(B, x, k32(0x3ff), "");
    LLVMValueRef norm = LLVMBuildAdd(B, LLVMBuildShl(B, mag, k32(13), ""), k32(112u << 23), "");
    LLVMValueRef infnan = LLVMBuildOr(B, LLVMBuildShl(B, m, k32(13), ""), k32(0x7f800000), "");
    LLVMValueRef sub = LLVMBuildFMul(B, LLVMBuildSIToFP(B, m, F, ""),
                                     LLVMConstReal(F, 1.0 / 16777216.0), "");
    sub = LLVMBuildBitCast(B, sub, I, "");
    LLVMValueRef r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ex, k32(31), ""), infnan, norm, "");
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, ex, k32(0), ""), sub, r, "");
    return LLVMBuildBitCast(B, LLVMBuildOr(B, r, sign, ""), F, "");
}

/* (a + half - 1 + lsb) >> s: a >> s rounded to nearest, ties to even; half = 1 << (s-1). */
static LLVMValueRef shr_even(Emitter *e, LLVMValueRef a, LLVMValueRef s, LLVMValueRef half) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef I = LLVMTypeOf(a);
    LLVMValueRef lsb = LLVMBuildAnd(B, LLVMBuildLShr(B, a, s, ""), k32(1), "");
    LLVMValueRef sum = LLVMBuildAdd(B, LLVMBuildAdd(B, a, LLVMBuildSub(B, half, k32(1), ""), ""), lsb, "");
    return LLVMBuildLShr(B, sum, s, "");
}

/* float -> i16 bit pattern, rounding to nearest even: NaN stays a quiet NaN with sign and top
 * payload bits, |x| >= 65520 gives inf, results below 2^-14 are float16 subnormals (the
 * mantissa with its implicit bit shifted right by 126 - exponent, at most 25: everything
 * smaller rounds to zero then). */
static LLVMValueRef float_to_half(Emitter *e, DType t, LLVMValueRef f) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef I = like(f, e->i32), I16 = like(f, e->i16);
    LLVMValueRef x = LLVMBuildBitCast(B, f, I, "");
    LLVMValueRef a = LLVMBuildAnd(B, x, k32(0x7fffffff), "");
    LLVMValueRef isnan = LLVMBuildICmp(B, LLVMIntUGT, a, k32(0x7f800000), "");
    LLVMValueRef r;
    if (t == DT_BFLOAT16) {
        LLVMValueRef nan = LLVMBuildOr(B, LLVMBuildLShr(B, x, k32(16), ""), k32(0x40), "");
        r = LLVMBuildSelect(B, isnan, nan, shr_even(e, x, k32(16), k32(0x8000)), "");
        return LLVMBuildTrunc(B, r, I16, "");
    }
    LLVMValueRef sign = LLVMBuildAnd(B, LLVMBuildLShr(B, x, k32(16), ""), k32(0x8000), "");
    LLVMValueRef nan = LLVMBuildOr(B, LLVMBuildAnd(B, LLVMBuildLShr(B, a, k32(13), ""),
                                                   k32(0x3ff), ""), k32(0x7e00), "");
    LLVMValueRef norm = LLVMBuildSub(B, shr_even(e, a, k32(13), k32(0x1000)), k32(112u << 10), "");
    /* shift 126 - exponent, clamped to 25; the clamp also keeps the shift in range (no poison)
     * where the normal path is taken */
    LLVMValueRef ex = LLVMBuildLShr(B, a, k32(23), "");
    LLVMValueRef s = LLVMBuildSub(B, k32(126), ex, "");
    s = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGT, s, k32(25), ""), k32(25), s, "");
    LLVMValueRef m = LLVMBuildOr(B, LLVMBuildAnd(B, a, k32(0x7fffff), ""), k32(0x800000), "");
    LLVMValueRef half = LLVMBuildShl(B, k32(1), LLVMBuildSub(B, s, k32(1), ""), "");
    LLVMValueRef sub = shr_even(e, m, s, half);
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntULT, a, k32(0x38800000), ""), sub, norm, "");
    LLVMValueRef big = LLVMBuildSelect(B, isnan, nan, k32(0x7c00), "");
    r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntUGE, a, k32(0x477ff000), ""), big, r, "");
    return LLVMBuildTrunc(B, LLVMBuildOr(B, r, sign, ""), I16, "");
}

/* ---- expressions ----
 * expr(e, x, w) emits x as a scalar (w = 0) or, inside a vector loop, as a vector of w lanes.
 * An expression that does not depend on the lane (no lane variable, no lane-private
 * register) is emitted as a scalar and splatted where a vector is needed. */

static LLVMValueRef expr(Emitter *e, Expr *x, unsigned w);
static bool folded(const Emitter *e, const Expr *x);
static LLVMValueRef folded_value(Emitter *e, const Expr *x);

static bool varying(const Emitter *e, const Expr *x) {
    if (!e->vw) return false;
    if (x->kind == E_VAR && x->var == e->lanevar) return true;
    if (x->kind == E_SCALAR && e->vreg[x->var]) return true;
    for (int i = 0; i < x->nargs; i++)
        if (varying(e, x->args[i])) return true;
    return false;
}

/* Fast-math flags of a float add/sub/mul: contraction into FMAs unless strict. */
LLVMValueRef be_fop(Emitter *e, LLVMValueRef v) {
    if (e->contract && LLVMIsAInstruction(v)) LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
    return v;
}

static LLVMValueRef param_ptr(Emitter *e, Buf *b) {
    for (int i = 0; i < e->k->nparams; i++)
        if (e->k->params[i] == b) return e->pval[i];
    die("kernel %s: buffer %s is not a param", e->k->name, b->name);
}

/* &b[idx...] with b's row-major strides; w lanes give a vector of pointers. */
static LLVMValueRef elem_ptr(Emitter *e, Buf *b, Expr **idx, unsigned w) {
    LLVMTypeRef it = wide(e->idx, w);
    LLVMValueRef lin = kint(it, 0);
    for (int d = 0; d < b->rank; d++) {
        LLVMValueRef i = expr(e, idx[d], w);
        lin = d == 0 ? i : LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, lin,
                               kint(it, (unsigned long long)b->dims[d]), ""), i, "");
    }
    return LLVMBuildInBoundsGEP2(e->B, be_mem_type(e, b->dtype), param_ptr(e, b), &lin, 1, "");
}

enum { NOT_AFFINE = -1 - 0x7fffffff };

/* The coefficient of the lane in index expression x, or NOT_AFFINE. */
static int64_t coef(const Emitter *e, const Expr *x) {
    if (!varying(e, x)) return 0;
    if (x->kind == E_VAR) return 1;
    if (x->kind != E_BIN) return NOT_AFFINE;
    int64_t a = coef(e, x->args[0]), b = coef(e, x->args[1]);
    if (a == NOT_AFFINE || b == NOT_AFFINE) return NOT_AFFINE;
    switch (x->op) {
    case K_ADD: return a + b;
    case K_SUB: return a - b;
    case K_MUL:
        if (x->args[1]->kind == E_CONST && llabs(x->args[1]->i) < 0x10000) return a * x->args[1]->i;
        if (x->args[0]->kind == E_CONST && llabs(x->args[0]->i) < 0x10000) return b * x->args[0]->i;
        return NOT_AFFINE;
    default: return NOT_AFFINE;
    }
}

/* The lane's coefficient in the linear element index of b[idx...] (0: the same element for
 * every lane, 1: consecutive elements), or NOT_AFFINE. */
static int64_t lane_coef(const Emitter *e, const Buf *b, Expr *const *idx) {
    int64_t c = 0;
    for (int d = 0; d < b->rank; d++) {
        int64_t cd = coef(e, idx[d]);
        if (cd == NOT_AFFINE || llabs(c) > 0x10000000 / (b->dims[d] ? b->dims[d] : 1)) return NOT_AFFINE;
        c = c * b->dims[d] + cd;
    }
    return c;
}

/* Pointers to the w lanes' elements: lane 0's address plus c elements per lane, or the
 * index computed lane by lane when it is not affine. */
static LLVMValueRef lane_ptrs(Emitter *e, Buf *b, Expr **idx, int64_t c, unsigned w) {
    if (c == NOT_AFFINE) return elem_ptr(e, b, idx, w);
    LLVMValueRef off[MAX_LANES];
    for (unsigned i = 0; i < w; i++) off[i] = LLVMConstInt(e->idx, (unsigned long long)(c * (int64_t)i), 1);
    LLVMValueRef offs = LLVMConstVector(off, w);
    return LLVMBuildInBoundsGEP2(e->B, be_mem_type(e, b->dtype), elem_ptr(e, b, idx, 0), &offs, 1, "");
}

static LLVMValueRef call_intrinsic(Emitter *e, const char *name, LLVMTypeRef *tys, unsigned ntys,
                                   LLVMValueRef *args, unsigned nargs) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) die("no intrinsic %s", name);
    return LLVMBuildCall2(e->B, LLVMIntrinsicGetType(e->C, id, tys, ntys),
                          LLVMGetIntrinsicDeclaration(e->M, id, tys, ntys), args, nargs, "");
}

static LLVMValueRef all_lanes(Emitter *e, unsigned w) { return splat_const(LLVMConstInt(e->i1, 1, 0), w); }

static LLVMValueRef konst(Emitter *e, Expr *x) {
    if (is_float(x->type)) return LLVMConstReal(be_reg_type(e, x->type), x->f);
    if (x->type == DT_BOOL) return LLVMConstInt(e->i1, x->i != 0, 0);
    return LLVMConstInt(be_reg_type(e, x->type), (unsigned long long)x->i, 1);
}

/* The indices of an access with the divisions and remainders the loop ranges prove away
 * (krange.h): a copy built with div/mod of a flat index, e.g. [(a*128 + v) / 128,
 * (a*128 + v) % 128], becomes affine in the lane. */
static Expr **simple_idx(Emitter *e, const Buf *b, Expr **idx) {
    Expr **s = idx;
    for (int d = 0; d < b->rank; d++) {
        Expr *x = kr_simplify(e->p, e->ranges, idx[d]);
        if (x == idx[d]) continue;
        if (s == idx) {
            s = ARENA_ARRAY(e->p->arena, Expr *, b->rank);
            memcpy(s, idx, sizeof(Expr *) * (size_t)b->rank);
        }
        s[d] = x;
    }
    return s;
}

/* Strides whose loads are contiguous vector loads and a shuffle rather than a gather. */
enum { MAX_SHUFFLE_STRIDE = 4, MAX_INTERLEAVE = 8 };

/* Lanes of v0 and v1 (of n lanes each) picked by mask, as a vector of m lanes. */
static LLVMValueRef pick(Emitter *e, LLVMValueRef v0, LLVMValueRef v1, const unsigned *mask, unsigned m) {
    LLVMValueRef k[2 * MAX_SHUFFLE_STRIDE * MAX_LANES];
    for (unsigned i = 0; i < m; i++) k[i] = LLVMConstInt(e->i32, mask[i], 0);
    return LLVMBuildShuffleVector(e->B, v0, v1, LLVMConstVector(k, m), "");
}

/* The w lanes of a load with lane coefficient c, 2 <= |c| <= MAX_SHUFFLE_STRIDE, from
 * ceil(n / w) contiguous vectors over the n = |c|*(w-1) + 1 elements between the first and
 * the last lane's, then shuffles. Every lane's element is inside the buffer (kir.h), so the
 * whole span is: the pieces start at multiples of w from the lowest lane's element, the last
 * one moved back to end exactly at the highest, and never read past either end. */
static LLVMValueRef strided_load(Emitter *e, Buf *b, Expr **idx, int64_t c, unsigned w) {
    LLVMTypeRef mt = be_mem_type(e, b->dtype), vt = LLVMVectorType(mt, w);
    unsigned align = elem_align(e, b->dtype), s = (unsigned)llabs(c), n = s * (w - 1) + 1, np = (n + w - 1) / w;
    LLVMValueRef base = elem_ptr(e, b, idx, 0), piece[2 * MAX_SHUFFLE_STRIDE] = {0};
    if (c < 0) {
        LLVMValueRef back = LLVMConstInt(e->idx, (unsigned long long)-(int64_t)(n - 1), 1);
        base = LLVMBuildInBoundsGEP2(e->B, mt, base, &back, 1, "");
    }
    unsigned start[2 * MAX_SHUFFLE_STRIDE], mask[2 * MAX_SHUFFLE_STRIDE * MAX_LANES];
    for (unsigned j = 0; j < np; j++) {
        start[j] = MIN(j * w, n - w);
        LLVMValueRef off = LLVMConstInt(e->idx, start[j], 0);
        piece[j] = LLVMBuildLoad2(e->B, vt, LLVMBuildInBoundsGEP2(e->B, mt, base, &off, 1, ""), "");
        LLVMSetAlignment(piece[j], align);
    }
    /* Concatenate the pieces pairwise (padding with poison) until two vectors of m lanes are
     * left, each piece j at lanes j*w of the pair; then one shuffle picks the w lanes. */
    unsigned m = w, np2 = np;
    while (np2 > 2) {
        for (unsigned i = 0; i < 2 * m; i++) mask[i] = i;
        for (unsigned j = 0; j < np2; j += 2)
            piece[j / 2] = pick(e, piece[j], j + 1 < np2 ? piece[j + 1] : LLVMGetPoison(LLVMTypeOf(piece[j])), mask, 2 * m);
        np2 = (np2 + 1) / 2;
        m *= 2;
    }
    if (np2 == 1) piece[1] = LLVMGetPoison(LLVMTypeOf(piece[0]));
    for (unsigned i = 0; i < w; i++) {
        unsigned pos = c > 0 ? s * i : s * (w - 1 - i), j = MIN(pos / w, np - 1);
        mask[i] = j * w + pos - start[j];
    }
    return pick(e, piece[0], piece[1], mask, w);
}

/* ---- 4-bit constants (kir.h, Buf.nibbles): value i in byte i / 2, low nibble first ----
 * The value is the nibble moved to the top of its byte and shifted back arithmetically
 * (int4) or logically (uint4): a byte in an 8-bit register, as the int8 buffer it stands for
 * would load. Lanes at consecutive elements (a panel of packed weights) load w bytes (the
 * object pads each such constant with NIBBLE_PAD bytes, so the bytes past its end that a
 * vector reads exist) and pick each lane's byte and nibble with a shuffle, two patterns
 * selected by whether lane 0's element is odd; other lanes gather their bytes.
 * 2-bit values (Buf.crumbs: int2/uint2, value i in bits 2 (i % 4) of byte i / 4) the same
 * way, each lane's byte loaded or gathered on its own. */
static LLVMValueRef nibble_bits(Emitter *e, bool sign, LLVMValueRef byte, LLVMValueRef up, unsigned bits) {
    LLVMTypeRef t = LLVMTypeOf(byte);
    LLVMValueRef top = kint(t, 8 - bits);
    if (sign) return LLVMBuildAShr(e->B, LLVMBuildShl(e->B, byte, up, ""), top, "");
    return LLVMBuildAnd(e->B, LLVMBuildLShr(e->B, byte, LLVMBuildSub(e->B, top, up, ""), ""), kint(t, (1u << bits) - 1), "");
}

/* Is lane 0's linear element index of b[idx] even wherever it is evaluated (a row of even
 * length read from a column that loops in steps of 2): then its vector needs no select. */
static bool lane0_even(const Emitter *e, const Buf *b, Expr **idx) {
    KAff a = {0};
    int64_t stride = 1;
    for (int d = b->rank - 1; d >= 0; d--) {
        if (!kr_affine(idx[d], stride, &a)) return false;
        stride *= b->dims[d];
    }
    if (a.c % 2) return false;
    for (int i = 0; i < a.n; i++) {
        if (a.coef[i] % 2 == 0) continue;
        if (a.var[i] == e->lanevar) {
            if (e->lanebase || e->lanelo % 2) return false;
            continue;
        }
        const KRange *r = &e->ranges[a.var[i]];
        if (!r->known || r->lo % 2 || (r->step % 2 && r->hi - r->lo > 1)) return false;
    }
    return true;
}

/* The row-major position of b[idx], as a scalar (lw 0) or in lw lanes. */
static LLVMValueRef linear_index(Emitter *e, Buf *b, Expr **idx, unsigned lw) {
    LLVMTypeRef it = wide(e->idx, lw);
    LLVMValueRef lin = kint(it, 0);
    for (int d = 0; d < b->rank; d++) {
        LLVMValueRef i = expr(e, idx[d], lw);
        lin = d == 0 ? i : LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, lin, kint(it, (unsigned long long)b->dims[d]), ""), i, "");
    }
    return lin;
}

static LLVMValueRef nibble_load(Emitter *e, Buf *b, Expr **idx, unsigned w, int64_t c) {
    LLVMBuilderRef B = e->B;
    bool sign = b->dtype == DT_INT8;
    LLVMValueRef base = param_ptr(e, b);
    /* the bytes past the end that a contiguous vector reads exist only after a constant
     * (NIBBLE_PAD): a caller's input or output is read byte by byte */
    unsigned bits = (unsigned)kir_pack_bits(kir_root(b)), lg = bits == 4 ? 1 : 2;
    /* from an even element, w lanes read exactly w / 2 bytes: a caller's buffer has them */
    bool whole = c == 1 && bits == 4 && w >= 2 && w % 2 == 0 && kir_root(b)->kind != B_CONST && lane0_even(e, b, idx);
    if (c == 1 && !whole && (kir_root(b)->kind != B_CONST || bits != 4)) c = 2;
    unsigned lw = c == 1 ? 0 : w;   /* the index as a scalar (lane 0's) or a vector */
    LLVMTypeRef it = wide(e->idx, lw);
    LLVMValueRef lin = linear_index(e, b, idx, lw);
    LLVMValueRef at = LLVMBuildLShr(B, lin, kint(it, lg), "");
    LLVMValueRef odd = LLVMBuildAnd(B, lin, kint(it, (1u << lg) - 1), "");   /* the position in the byte */
    if (c != 1) {
        /* how far up the value moves to the top of its byte: 8 - bits - bits * position */
        LLVMValueRef up = LLVMBuildTrunc(B, LLVMBuildSub(B, kint(it, 8 - bits), LLVMBuildMul(B, odd, kint(it, bits), ""), ""),
                                         wide(e->i8, w), "");
        LLVMValueRef byte;
        if (!w) {
            byte = LLVMBuildLoad2(B, e->i8, LLVMBuildInBoundsGEP2(B, e->i8, base, &at, 1, ""), "");
            LLVMSetAlignment(byte, 1);
        } else {
            LLVMValueRef ptrs = LLVMBuildInBoundsGEP2(B, e->i8, base, &at, 1, "");
            LLVMTypeRef tys[2] = {LLVMVectorType(e->i8, w), LLVMTypeOf(ptrs)};
            LLVMValueRef args[4] = {ptrs, LLVMConstInt(e->i32, 1, 0), all_lanes(e, w), LLVMGetPoison(tys[0])};
            byte = call_intrinsic(e, "llvm.masked.gather", tys, 2, args, 4);
        }
        return nibble_bits(e, sign, byte, up, bits);
    }
    LLVMTypeRef vt = LLVMVectorType(e->i8, w);
    LLVMValueRef bytes = LLVMBuildLoad2(B, whole ? LLVMVectorType(e->i8, w / 2) : vt, LLVMBuildInBoundsGEP2(B, e->i8, base, &at, 1, ""), "");
    LLVMSetAlignment(bytes, 1);
    LLVMValueRef me[MAX_LANES], mo[MAX_LANES], ue[MAX_LANES], uo[MAX_LANES];
    for (unsigned i = 0; i < w; i++) {
        me[i] = LLVMConstInt(e->i32, i / 2, 0);
        mo[i] = LLVMConstInt(e->i32, (i + 1) / 2, 0);
        ue[i] = LLVMConstInt(e->i8, i % 2 ? 0 : 4, 0);
        uo[i] = LLVMConstInt(e->i8, i % 2 ? 4 : 0, 0);
    }
    LLVMValueRef isodd = whole || lane0_even(e, b, idx) ? LLVMConstInt(e->i1, 0, 0) : LLVMBuildICmp(B, LLVMIntNE, odd, kint(it, 0), "");
    LLVMValueRef even_b = LLVMBuildShuffleVector(B, bytes, LLVMGetPoison(LLVMTypeOf(bytes)), LLVMConstVector(me, w), "");
    LLVMValueRef odd_b = whole ? even_b : LLVMBuildShuffleVector(B, bytes, LLVMGetPoison(vt), LLVMConstVector(mo, w), "");
    LLVMValueRef byte = LLVMBuildSelect(B, isodd, odd_b, even_b, "");
    LLVMValueRef up = LLVMBuildSelect(B, isodd, LLVMConstVector(uo, w), LLVMConstVector(ue, w), "");
    /* in 32-bit lanes, where x86 has shifts by a vector (AVX2's vpsllvd/vpsravd; bytes have
     * none, and LLVM's emulation cost the int4 product 20%): the cast to int32 that the
     * dequantization applies next then folds away */
    LLVMTypeRef v32 = LLVMVectorType(e->i32, w);
    LLVMValueRef x = LLVMBuildZExt(B, byte, v32, ""), u = LLVMBuildZExt(B, up, v32, "");
    if (sign) x = LLVMBuildAShr(B, LLVMBuildShl(B, x, LLVMBuildAdd(B, u, kint(v32, 24), ""), ""), kint(v32, 28), "");
    else x = LLVMBuildAnd(B, LLVMBuildLShr(B, x, LLVMBuildSub(B, kint(v32, 4), u, ""), ""), kint(v32, 15), "");
    if (b->dtype == DT_FLOAT4E2M1) return f8_to_float(e, b->dtype, x);   /* decoded in 32-bit lanes */
    return LLVMBuildTrunc(B, x, vt, "");
}

/* A store into a 4-bit output (Buf.nibbles; 2-bit, crumbs): each lane replaces its nibble of
 * its byte, read, masked and written back, lane after lane (a later lane at the same element
 * wins, as in a scalar loop). The bits past the last element have no value: storing the last
 * element clears them, so that the unused high bits of the last byte are zero. v holds the
 * value (8-bit, or w lanes of it when c is not 0). */
static void nibble_store(Emitter *e, Buf *b, Expr **idx, LLVMValueRef v, unsigned w, int64_t c) {
    LLVMBuilderRef B = e->B;
    unsigned lw = c == 0 ? 0 : w;
    unsigned bits = (unsigned)kir_pack_bits(kir_root(b)), lg = bits == 4 ? 1 : 2, mask = (1u << bits) - 1;
    if (c == 1 && bits == 4 && w >= 2 && w % 2 == 0 && lane0_even(e, b, idx)) {
        /* consecutive lanes from an even element own their w / 2 bytes whole: the pairs are
         * packed in registers and stored at once (7x faster than a byte per lane on a
         * [256, 1024] QuantizeLinear to int4); the last element of an odd count, which no
         * such vector holds, takes the path below */
        LLVMValueRef ev[MAX_LANES], od[MAX_LANES];
        for (unsigned i = 0; i < w / 2; i++) {
            ev[i] = LLVMConstInt(e->i32, 2 * i, 0);
            od[i] = LLVMConstInt(e->i32, 2 * i + 1, 0);
        }
        LLVMTypeRef ht = LLVMVectorType(e->i8, w / 2);
        LLVMValueRef lo = LLVMBuildShuffleVector(B, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(ev, w / 2), "");
        LLVMValueRef hi = LLVMBuildShuffleVector(B, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(od, w / 2), "");
        LLVMValueRef pair = LLVMBuildOr(B, LLVMBuildAnd(B, lo, kint(ht, 15), ""), LLVMBuildShl(B, hi, kint(ht, 4), ""), "");
        LLVMValueRef at = LLVMBuildLShr(B, linear_index(e, b, idx, 0), kint(e->idx, 1), "");
        LLVMValueRef st = LLVMBuildStore(B, pair, LLVMBuildInBoundsGEP2(B, e->i8, param_ptr(e, b), &at, 1, ""));
        LLVMSetAlignment(st, 1);
        return;
    }
    LLVMValueRef base = param_ptr(e, b), lin = linear_index(e, b, idx, lw);
    int64_t n = kir_numel(kir_root(b)), per = 8 / bits;
    for (unsigned l = 0; l < (lw ? lw : 1); l++) {
        LLVMValueRef li = lw ? LLVMBuildExtractElement(B, lin, LLVMConstInt(e->i32, l, 0), "") : lin;
        LLVMValueRef vi = lw ? LLVMBuildExtractElement(B, v, LLVMConstInt(e->i32, l, 0), "") : v;
        LLVMValueRef at = LLVMBuildLShr(B, li, kint(e->idx, lg), "");
        /* the value's lowest bit in its byte: bits * position */
        LLVMValueRef up = LLVMBuildTrunc(B, LLVMBuildMul(B, LLVMBuildAnd(B, li, kint(e->idx, (1u << lg) - 1), ""), kint(e->idx, bits), ""), e->i8, "");
        LLVMValueRef ptr = LLVMBuildInBoundsGEP2(B, e->i8, base, &at, 1, "");
        LLVMValueRef old = LLVMBuildLoad2(B, e->i8, ptr, "");
        LLVMSetAlignment(old, 1);
        LLVMValueRef keep = LLVMBuildNot(B, LLVMBuildShl(B, kint(e->i8, mask), up, ""), "");
        if (n % per)    /* the last element: the bits above it are cleared, the ones below kept */
            keep = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, li, kint(e->idx, (unsigned long long)(n - 1)), ""),
                                   LLVMBuildSub(B, LLVMBuildShl(B, kint(e->i8, 1), up, ""), kint(e->i8, 1), ""), keep, "");
        LLVMValueRef nib = LLVMBuildShl(B, LLVMBuildAnd(B, vi, kint(e->i8, mask), ""), up, "");
        LLVMValueRef st = LLVMBuildStore(B, LLVMBuildOr(B, LLVMBuildAnd(B, old, keep, ""), nib, ""), ptr);
        LLVMSetAlignment(st, 1);
    }
}

static LLVMValueRef run_load(Emitter *e, const Expr *x);

/* ---- loads whose lanes read constant offsets from lane 0 ----
 * A grouped conv of few channels a group runs its output channels as lanes, several groups a
 * vector (passes/sched_group.c): lane j reads input channel (m0 + j) / Mg * Cg + c, which is
 * not affine in the lane, but is lane 0's channel plus j / Mg * Cg wherever m0 is a multiple
 * of Mg, as the loops' ranges prove. Such a load reads the elements its lanes span as one
 * short vector and permutes them with a constant shuffle (a permute or broadcasts, which
 * LLVM picks), where a gather ran ~15x slower. */

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The remainder by d > 1 of index expression x at lane 0, the same at every point of the
 * loops around (an affine x whose other variables step by multiples of d), in [0, d); and x
 * is >= 0 at every lane (C's division is then the floor). */
static bool lane0_residue(const Emitter *e, const Expr *x, int64_t d, int64_t *r) {
    KAff f = {0};
    int64_t mn, mx;
    if (!kr_affine(x, 1, &f) || !kr_aff_bounds(e->ranges, &f, &mn, &mx) || mn < 0) return false;
    int64_t s = f.c % d;
    for (int i = 0; i < f.n; i++) {
        const KRange *v = &e->ranges[f.var[i]];
        int64_t at = f.var[i] == e->lanevar ? e->lanelo : v->lo;
        if (f.var[i] != e->lanevar && (!v->known || (f.coef[i] * v->step) % d)) return false;
        s = (s + (f.coef[i] % d) * (at % d)) % d;
    }
    *r = (s % d + d) % d;
    return true;
}

/* x at lane j minus x at lane 0, a constant, in *dl; false if it is not provably one. */
static bool lane_delta(const Emitter *e, const Expr *x, int64_t j, int64_t *dl) {
    int64_t a, b;
    if (!varying(e, x)) return *dl = 0, true;
    if (x->type != DT_INDEX) return false;
    if (x->kind == E_VAR) return *dl = j, true;     /* varying: the lane variable */
    if (x->kind == E_UN && x->op == K_NEG && lane_delta(e, x->args[0], j, &a)) return *dl = -a, true;
    if (x->kind != E_BIN) return false;
    switch (x->op) {
    case K_ADD: case K_SUB:
        if (!lane_delta(e, x->args[0], j, &a) || !lane_delta(e, x->args[1], j, &b)) return false;
        *dl = x->op == K_ADD ? a + b : a - b;
        return llabs(*dl) < 0x1000000;
    case K_MUL:
        for (int i = 0; i < 2; i++) {
            const Expr *c = x->args[i];
            if (c->kind == E_CONST && llabs(c->i) < 0x10000 && lane_delta(e, x->args[1 - i], j, &a))
                return *dl = a * c->i, llabs(*dl) < 0x1000000;
        }
        return false;
    case K_DIV: case K_REM: {
        int64_t d = x->args[1]->kind == E_CONST ? x->args[1]->i : 0, r;
        if (d <= 1 || !lane_delta(e, x->args[0], j, &a) || !lane0_residue(e, x->args[0], d, &r)) return false;
        int64_t q = floor_div(r + a, d);
        *dl = x->op == K_DIV ? q : r + a - q * d - r;
        return true;
    }
    default: return false;
    }
}

/* The w lanes of b[idx...] as a load of the elements they span (at most 2w) and a shuffle,
 * or NULL if their offsets from lane 0 are not constants (then a gather). The elements
 * between two lanes' are inside the buffer as theirs are (kir.h). */
static LLVMValueRef window_load(Emitter *e, Buf *b, Expr **idx, unsigned w) {
    if (e->lanebase || !e->ranges) return NULL;
    int64_t off[MAX_LANES], lo = 0, hi = 0;
    for (unsigned j = 0; j < w; j++) {
        int64_t lin = 0;
        for (int d = 0; d < b->rank; d++) {
            int64_t dd;
            if (!lane_delta(e, idx[d], j, &dd)) return NULL;
            lin = lin * b->dims[d] + dd;
            if (llabs(lin) > 0x1000000) return NULL;
        }
        off[j] = lin, lo = MIN(lo, lin), hi = MAX(hi, lin);
    }
    if (hi - lo + 1 > 2 * (int64_t)w) return NULL;
    unsigned span = (unsigned)(hi - lo + 1);
    LLVMTypeRef mt = be_mem_type(e, b->dtype);
    LLVMValueRef base = elem_ptr(e, b, idx, 0), m[MAX_LANES];
    bool two = true;                /* the lanes read two elements at most: lo and hi */
    for (unsigned j = 0; j < w; j++) two &= off[j] == lo || off[j] == hi;
    if (two) {
        /* two broadcasts and a blend: one shuffle op a vector where the loaded window and
         * its permute took two (AVX-512, 2 groups of 8 a vector: the insert of the 9th
         * element, then the permute); the masked load and permute below ran such convs at
         * 27-42% of the FMA peak against 36-51% so */
        LLVMValueRef v[2];
        for (int i = 0; i < 2; i++) {
            LLVMValueRef at = LLVMConstInt(e->idx, (unsigned long long)(i ? hi : lo), 1);
            v[i] = LLVMBuildLoad2(e->B, mt, LLVMBuildInBoundsGEP2(e->B, mt, base, &at, 1, ""), "");
            LLVMSetAlignment(v[i], elem_align(e, b->dtype));
            v[i] = splat(e, v[i], w);
        }
        for (unsigned j = 0; j < w; j++) m[j] = LLVMConstInt(e->i32, off[j] == lo ? j : w + j, 0);
        return LLVMBuildShuffleVector(e->B, v[0], v[1], LLVMConstVector(m, w), "");
    }
    /* a whole vector (or two) loaded under a mask of the span's lanes: one load and one
     * permute, where a load of the span alone (13 elements for 4 groups of 4) became
     * broadcasts and two inserts (AVX-512); masked-off lanes never fault */
    LLVMValueRef at = LLVMConstInt(e->idx, (unsigned long long)lo, 1), on[2 * MAX_LANES];
    if (lo) base = LLVMBuildInBoundsGEP2(e->B, mt, base, &at, 1, "");
    unsigned n = span <= w ? w : 2 * w;
    for (unsigned j = 0; j < n; j++) on[j] = LLVMConstInt(e->i1, j < span, 0);
    LLVMTypeRef tys[2] = {LLVMVectorType(mt, n), LLVMTypeOf(base)};
    LLVMValueRef args[4] = {base, LLVMConstInt(e->i32, elem_align(e, b->dtype), 0), LLVMConstVector(on, n),
                            LLVMGetPoison(tys[0])};
    LLVMValueRef v = call_intrinsic(e, "llvm.masked.load", tys, 2, args, 4);
    for (unsigned j = 0; j < w; j++) m[j] = LLVMConstInt(e->i32, (unsigned long long)(off[j] - lo), 0);
    return LLVMBuildShuffleVector(e->B, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(m, w), "");
}


static void prefetch_line(Emitter *e, LLVMValueRef ptr) {
    LLVMValueRef args[4] = {ptr, LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, 1, 0), LLVMConstInt(e->i32, 1, 0)};
    LLVMTypeRef pt = e->ptr;
    call_intrinsic(e, "llvm.prefetch", &pt, 1, args, 4);
}

/* The line e->k->prefetch_ahead bytes past `at`, the address of load x of b[idx...], fetched
 * into the L2 (passes/sched_stream.c), once for each load of the basic block: the loads that
 * the same vector feeds several FMAs through are one. With k->prefetch_row, the block's first
 * load also fetches the next block's element (idx[0] + 1) * B + r * B / R + o / R, where B is
 * a block's elements, o the load's offset in its block and r the row: row r's steps walk
 * slice r of the next block. Past the buffer's end a prefetch fetches a line that nothing
 * reads: it never faults. */
static void prefetch_ahead(Emitter *e, const Expr *x, Buf *b, Expr **idx, LLVMValueRef at) {
    LLVMBasicBlockRef bb = LLVMGetInsertBlock(e->B);
    if (bb != e->prefetch_bb) e->prefetch_bb = bb, e->nprefetched = 0;
    for (int i = 0; i < e->nprefetched; i++)
        if (kx_equal(e->prefetched[i], x)) return;
    if (e->nprefetched == (int)(sizeof e->prefetched / sizeof *e->prefetched)) return;
    e->prefetched[e->nprefetched++] = x;
    LLVMValueRef ahead = LLVMConstInt(e->idx, (unsigned long long)e->k->prefetch_ahead, 0);
    prefetch_line(e, LLVMBuildGEP2(e->B, e->i8, at, &ahead, 1, ""));
    if (!e->k->prefetch_row || e->nprefetched > 1) return;
    int64_t bel = 1;
    for (int d = 1; d < b->rank; d++) bel *= b->dims[d];
    LLVMValueRef rows = kint(e->idx, (unsigned long long)e->k->prefetch_rows);
    LLVMValueRef r = expr(e, e->k->prefetch_row, 0), blk = kint(e->idx, (unsigned long long)bel);
    LLVMValueRef i0 = expr(e, idx[0], 0);
    LLVMValueRef o = LLVMBuildNSWSub(e->B, linear_index(e, b, idx, 0), LLVMBuildNSWMul(e->B, i0, blk, ""), "");
    LLVMValueRef el = LLVMBuildMul(e->B, LLVMBuildAdd(e->B, i0, kint(e->idx, 1), ""), blk, "");
    el = LLVMBuildAdd(e->B, el, LLVMBuildSDiv(e->B, LLVMBuildMul(e->B, r, blk, ""), rows, ""), "");
    el = LLVMBuildAdd(e->B, el, LLVMBuildSDiv(e->B, o, rows, ""), "");
    prefetch_line(e, LLVMBuildGEP2(e->B, be_mem_type(e, b->dtype), param_ptr(e, b), &el, 1, ""));
}

static LLVMValueRef load(Emitter *e, Expr *x, unsigned w) {
    Buf *b = x->buf;
    if (kir_root(b)->nibbles) {
        Expr **idx = simple_idx(e, b, x->args);
        int64_t c = w ? lane_coef(e, b, idx) : 0;
        LLVMValueRef v = nibble_load(e, b, idx, c == 0 ? 0 : w, c);
        if (b->dtype == DT_FLOAT4E2M1 && LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMFloatTypeKind &&
            !(LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind &&
              LLVMGetTypeKind(LLVMGetElementType(LLVMTypeOf(v))) == LLVMFloatTypeKind))
            v = f8_to_float(e, b->dtype, v);    /* its code (unless nibble_load decoded it) */
        return c == 0 ? splat(e, v, w) : v;
    }
    LLVMValueRef r = !w && e->nruns ? run_load(e, x) : NULL;
    if (r) return r;
    LLVMTypeRef mt = be_mem_type(e, b->dtype);
    unsigned align = elem_align(e, b->dtype);
    Expr **idx = simple_idx(e, b, x->args);
    int64_t c = w ? lane_coef(e, b, idx) : 0;
    LLVMValueRef v;
    if (c == 0) {
        v = LLVMBuildLoad2(e->B, mt, elem_ptr(e, b, idx, 0), "");
        LLVMSetAlignment(v, align);
    } else if (c == 1) {
        LLVMValueRef at = elem_ptr(e, b, idx, 0);
        v = LLVMBuildLoad2(e->B, LLVMVectorType(mt, w), at, "");
        LLVMSetAlignment(v, align);
        if (b == e->k->prefetch) prefetch_ahead(e, x, b, idx, at);
    } else if (c != NOT_AFFINE && llabs(c) <= MAX_SHUFFLE_STRIDE) {
        v = strided_load(e, b, idx, c, w);
    } else if (c != NOT_AFFINE || !(v = window_load(e, b, idx, w))) {
        LLVMValueRef ptrs = lane_ptrs(e, b, idx, c, w);
        LLVMTypeRef tys[2] = {LLVMVectorType(mt, w), LLVMTypeOf(ptrs)};
        LLVMValueRef args[4] = {ptrs, LLVMConstInt(e->i32, align, 0), all_lanes(e, w), LLVMGetPoison(tys[0])};
        v = call_intrinsic(e, "llvm.masked.gather", tys, 2, args, 4);
    }
    if (is_half(b->dtype)) v = half_to_float(e, b->dtype, v);
    if (dtype_is_minifloat(b->dtype)) v = f8_to_float(e, b->dtype, v);
    if (b->dtype == DT_BOOL) v = LLVMBuildICmp(e->B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    return c == 0 ? splat(e, v, w) : v;
}

static LLVMValueRef cast(Emitter *e, LLVMValueRef v, DType from, DType to) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef ty = like(v, be_reg_type(e, to));
    if (from == to) return v;
    if (dtype_is_minifloat(to)) {  /* rounded and saturated as a store would (kir.h) */
        v = cast(e, v, from, DT_FLOAT);
        return f8_to_float(e, to, f8_to_bits(e, to, v));
    }
    if (dtype_is_minifloat(from)) {
        if (to == DT_FLOAT) return v;
        from = DT_FLOAT;
    }
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
        unsigned bits = LLVMGetIntTypeWidth(be_reg_type(e, to));
        if (bits < 32) return LLVMBuildTrunc(B, LLVMBuildFPToSI(B, v, like(v, e->i32), ""), ty, "");
        if (to == DT_INDEX) {   /* an address: NaN or a huge coordinate must not be poison */
            LLVMTypeRef tys[2] = {ty, LLVMTypeOf(v)};
            return call_intrinsic(e, "llvm.fptosi.sat", tys, 2, &v, 1);
        }
        return is_unsigned(to) ? LLVMBuildFPToUI(B, v, ty, "") : LLVMBuildFPToSI(B, v, ty, "");
    }
    return LLVMBuildIntCast2(B, v, ty, !is_unsigned(from), "");
}

/* The float constant v is, or every lane of v is (a splatted constant); NULL if neither. */
static LLVMValueRef const_fp(LLVMValueRef v) {
    if (LLVMIsAConstantFP(v)) return v;
    unsigned w = width_of(v);
    if (!w || !LLVMIsConstant(v)) return NULL;
    LLVMValueRef c = LLVMGetAggregateElement(v, 0);
    for (unsigned i = 1; c && i < w; i++)
        if (LLVMGetAggregateElement(v, i) != c) return NULL;
    return c && LLVMIsAConstantFP(c) ? c : NULL;
}

/* min/max; on floats NaN in either operand gives NaN. */
static LLVMValueRef minmax(Emitter *e, bool max, DType t, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef ca = is_float(t) ? const_fp(a) : NULL, cb = is_float(t) ? const_fp(b) : NULL;
    if (ca || cb) {
        /* against a constant c that is not NaN (a Relu's 0, a Clip's 6, also splatted in
         * vector code), x wins when unordered: `x < c ? c : x` (max) is x86's maxps(c, x),
         * one instruction where the general form takes three (a compare, a select and an
         * add for NaN; on Cortex-M4, 11 instructions a Relu instead of 4). It gives x where
         * x == c, which is c's bits unless both are zeros: max(-0.0, 0) is then -0.0 where
         * the interpreter says +0.0, a difference of zero's sign that -O2 allows (as it
         * allows FMA contraction); exact arithmetic (-O0/-O1, --fp-strict) keeps
         * `x > c ? x : c`, a compare and a select (MobileNetV2's Clip: 6 -> 2 vector
         * instructions at -O2, 6 -> 3 exact) */
        LLVMValueRef c = cb ? b : a, x = cb ? a : b, cs = cb ? cb : ca;
        LLVMBool lossy;
        double cv = LLVMConstRealGetDouble(cs, &lossy);
        if (!isnan(cv) && (cv != 0 || e->contract))
            return LLVMBuildSelect(B, LLVMBuildFCmp(B, max ? LLVMRealOLT : LLVMRealOGT, x, c, ""), c, x, "");
        if (!isnan(cv))
            return LLVMBuildSelect(B, LLVMBuildFCmp(B, max ? LLVMRealUGT : LLVMRealULT, x, c, ""), x, c, "");
    }
    if (is_float(t)) {
        LLVMValueRef lt = LLVMBuildFCmp(B, max ? LLVMRealOGT : LLVMRealOLT, a, b, "");
        LLVMValueRef r = LLVMBuildSelect(B, lt, a, b, "");
        LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, a, b, "");
        return LLVMBuildSelect(B, nan, LLVMBuildFAdd(B, a, b, ""), r, "");
    }
    LLVMIntPredicate p = is_unsigned(t) ? (max ? LLVMIntUGT : LLVMIntULT) : (max ? LLVMIntSGT : LLVMIntSLT);
    return LLVMBuildSelect(B, LLVMBuildICmp(B, p, a, b, ""), a, b, "");
}

/* cast<int32>(round(v)), v a float32 scalar, as the target's rounding conversion
 * (Target.cvt_rne); NULL where it has none, and for vectors (an Arm core with NEON has no
 * vector vcvtr: lane by lane would cost more than m_round on the vector). In range, as a
 * rule's cast must be (rule_quantize clamps first): the instruction's saturation is never
 * reached. */
/* Whether float expression x only takes integer values of magnitude below 2^24 (so that
 * each is exact, and converts to int32 exactly): a constant, a cast of an integer of at
 * most 16 bits, or a sum, difference or product of such with a bound still below 2^24. */
static bool small_integral(const Expr *x, double *bound) {
    double a, b;
    if (x->type != DT_FLOAT) return false;
    if (x->kind == E_CONST) {
        *bound = fabs(x->f);
        return x->f == floor(x->f) && *bound < 16777216.0;
    }
    if (x->kind == E_UN && x->op == K_CAST) {
        DType t = x->args[0]->type;
        *bound = t == DT_INT16 || t == DT_UINT16 ? 65535.0 : 255.0;
        return t == DT_INT8 || t == DT_UINT8 || t == DT_INT16 || t == DT_UINT16 || t == DT_BOOL;
    }
    if (x->kind != E_BIN || (x->op != K_ADD && x->op != K_SUB && x->op != K_MUL) ||
        !small_integral(x->args[0], &a) || !small_integral(x->args[1], &b))
        return false;
    *bound = x->op == K_MUL ? a * b : a + b;
    return *bound < 16777216.0;
}

/* Whether x is rule_quantize_in's clamp, select(c > hi, hi, c) of c = select(v < lo, lo, v),
 * with integral bounds lo and hi (small_integral): sets *v, *lo, *hi. */
static bool int_clamp(Expr *x, Expr **v, Expr **lo, Expr **hi) {
    double b;
    if (x->kind != E_SELECT || x->args[0]->kind != E_BIN || x->args[0]->op != K_GT) return false;
    Expr *c = x->args[0]->args[0], *h = x->args[0]->args[1];
    if (!kx_equal(c, x->args[2]) || !kx_equal(h, x->args[1]) || !small_integral(h, &b)) return false;
    if (c->kind != E_SELECT || c->args[0]->kind != E_BIN || c->args[0]->op != K_LT) return false;
    Expr *u = c->args[0]->args[0], *l = c->args[0]->args[1];
    if (!kx_equal(u, c->args[2]) || !kx_equal(l, c->args[1]) || !small_integral(l, &b)) return false;
    *v = u, *lo = l, *hi = h;
    return true;
}

/* cast<int32>(round(v)), v a float32 scalar, as the target's rounding conversion
 * (Target.cvt_rne); NULL where it has none, and for vectors (an Arm core with NEON has no
 * vector vcvtr: lane by lane would cost more than m_round on the vector). In range, as a
 * rule's cast must be (rule_quantize clamps first): the instruction's saturation is never
 * reached. Where v is rule_quantize's float clamp with integral bounds (int_clamp), the
 * clamp moves after the conversion, onto the integer: round(clamp(v, lo, hi)) =
 * clamp(round(v), lo, hi) as rounding is monotonic and keeps integers, and both
 * instructions saturate a float past int32's range (Arm VFP, RISC-V F), so that the
 * clamped integer is the same for every v but NaN. On Cortex-M4 the float compares took
 * eight instructions with their constants (vcmp, vmrs, it, vmov twice); the integer clamp
 * with a zero point 0 is one usat, otherwise two compares (KWS int8 2.82 -> 2.5x
 * instructions per multiply-accumulate). */
static LLVMValueRef round_cvt(Emitter *e, Expr *x, unsigned w) {
    const Expr *r = x->args[0];
    if (e->t->pmaddwd_bytes && x->type == DT_INT32 && r->kind == E_UN && r->op == K_ROUND && r->type == DT_FLOAT &&
        (w == 0 || w == 4 || w == 8 || w == 16)) {
        /* x86 (SSE2 and up): llvm.lrint, one cvtps2dq / cvtss2si in the default rounding mode
         * (nearest even, which the generated code assumes throughout), where roundeven and a
         * truncating conversion were two instructions (vroundps, vcvttps2dq) in every
         * requantising store of an int8 kernel. In range as above; the clamp stays float
         * (cvtps2dq gives INT_MIN past int32's range on either side, no saturation). */
        LLVMValueRef v = expr(e, r->args[0], w);
        LLVMTypeRef tys[2] = {w ? LLVMVectorType(e->i32, w) : e->i32, LLVMTypeOf(v)};
        return call_intrinsic(e, "llvm.lrint", tys, 2, &v, 1);
    }
    if (!e->t->cvt_rne || w || x->type != DT_INT32 || r->kind != E_UN || r->op != K_ROUND || r->type != DT_FLOAT)
        return NULL;
    Expr *cv = r->args[0], *lo = NULL, *hi = NULL;
    bool clamp = int_clamp(r->args[0], &cv, &lo, &hi);
    LLVMValueRef v = expr(e, cv, w);
    const char *text = e->t->cvt_rne, *cons = e->t->cvt_rne_cons;
    bool freg = cons[1] == 't';
    LLVMTypeRef ft = LLVMFunctionType(freg ? e->f32 : e->i32, &e->f32, 1, 0);
    LLVMValueRef asm_ = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons), 0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef c = LLVMBuildCall2(e->B, ft, asm_, &v, 1, "");
    c = freg ? LLVMBuildBitCast(e->B, c, e->i32, "") : c;
    if (!clamp) return c;
    LLVMValueRef l = LLVMBuildFPToSI(e->B, expr(e, lo, 0), e->i32, "");
    LLVMValueRef h = LLVMBuildFPToSI(e->B, expr(e, hi, 0), e->i32, "");
    c = LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, c, l, ""), l, c, "");
    return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSGT, c, h, ""), h, c, "");
}

/* Whether float expression x can never be NaN: built by +, -, * from constants, casts of
 * integers and loads of constant float tables whose entries are all finite (the requantising
 * ratios). A float register, a run-time float input or a division may be NaN. (A sum of
 * two infinite products, inf - inf, would need a ratio above 2^97: not a quantizer's.) */
static bool never_nan(const Expr *x) {
    if (!is_float(x->type)) return true;
    switch (x->kind) {
    case E_CONST: return !isnan(x->f);
    case E_LOAD: {
        const Buf *b = x->buf;
        if (b->kind != B_CONST || b->dtype != DT_FLOAT || !b->data) return false;
        const float *d = b->data;
        for (int64_t i = 0, n = kir_numel(b); i < n; i++)
            if (!isfinite(d[i])) return false;
        return true;
    }
    case E_UN: return x->op == K_CAST && !is_float(x->args[0]->type);
    case E_BIN:
        return (x->op == K_ADD || x->op == K_SUB || x->op == K_MUL) && never_nan(x->args[0]) && never_nan(x->args[1]);
    default: return false;
    }
}

/* The zero point z of rule_quantize's `cast<int32>(round(c)) + cast<int32>(z)` as the float
 * expression of its clamp bounds (`lo - cast<float32>(z)`, or a constant z itself). */
static bool same_zp(const Expr *fz, const Expr *iz) {
    const Expr *f = fz->kind == E_UN && fz->op == K_CAST ? fz->args[0] : fz;
    return kx_equal((Expr *)f, (Expr *)iz);
}

typedef struct Requant {
    Expr *c;                        /* the clamp select(c1 > hi, hi, c1) */
    Expr *v, *lo, *hi;              /* c1 = select(v < lo, lo, v) */
    Expr *z, *zv;                   /* cast<int32>(zv), the zero point; NULL without */
} Requant;

/* Whether x is rule_quantize_in's cast<int8|uint8>(cast<int32>(round(clamp)) [+ cast<int32>(zv)]),
 * zv a byte or an integral float constant of |zv| <= 255. */
static bool requant_parts(Expr *x, Requant *q_) {
    if ((x->type != DT_INT8 && x->type != DT_UINT8) || x->kind != E_UN || x->op != K_CAST ||
        x->args[0]->type != DT_INT32)
        return false;
    Expr *r = x->args[0], *q = r, *z = NULL;
    if (r->kind == E_BIN && r->op == K_ADD) q = r->args[0], z = r->args[1];
    if (q->kind != E_UN || q->op != K_CAST || q->args[0]->kind != E_UN || q->args[0]->op != K_ROUND ||
        q->args[0]->type != DT_FLOAT)
        return false;
    Expr *c = q->args[0]->args[0];
    /* c = select(c1 > hi, hi, c1), c1 = select(v < lo, lo, v) */
    if (c->kind != E_SELECT || c->args[0]->kind != E_BIN || c->args[0]->op != K_GT ||
        !kx_equal(c->args[0]->args[0], c->args[2]) || !kx_equal(c->args[0]->args[1], c->args[1]))
        return false;
    Expr *c1 = c->args[2], *hi = c->args[1];
    if (c1->kind != E_SELECT || c1->args[0]->kind != E_BIN || c1->args[0]->op != K_LT ||
        !kx_equal(c1->args[0]->args[0], c1->args[2]) || !kx_equal(c1->args[0]->args[1], c1->args[1]))
        return false;
    Expr *v = c1->args[2], *lo = c1->args[1], *zv = NULL;
    if (z) {            /* the zero point: a byte, or an integral float constant of |z| <= 255 */
        if (z->kind != E_UN || z->op != K_CAST) return false;
        zv = z->args[0];
        bool byte = zv->type == DT_INT8 || zv->type == DT_UINT8;
        if (!byte && !(zv->kind == E_CONST && is_float(zv->type) && zv->f == floor(zv->f) && fabs(zv->f) <= 255))
            return false;
    }
    *q_ = (Requant){c, v, lo, hi, z, zv};
    return true;
}

/* cast<float32>(R) [- y], R a requantisation (requant_parts) converted back to float for a
 * fused consumer (a pointwise conv's output read by the next depthwise conv in float, less the
 * zero point y: float_exact in docs/int8.md),
 * stored on x86 vectors: clamp(v) + 1.5 * 2^23 - (1.5 * 2^23 - z), two float additions,
 * where cvtps2dq, the integer add of z, an `and 0xff` and cvtdq2ps were four instructions.
 * The clamped value has |c| <= 510 < 2^22, so c + 1.5 * 2^23 lies in [2^23, 2^24), where
 * floats are the integers: the adder rounds c to nearest, ties to even (1.5 * 2^23 is even, so
 * the sum's parity is round(c)'s), and the subtraction of the integer 1.5 * 2^23 - z is
 * exact. Where y is the zero point z, round(c) + z - z is (c + M) - M, one subtraction less.
 * A NaN v gave float(z) and would give NaN: only where v cannot be NaN (never_nan). */
static LLVMValueRef magic_requant(Emitter *e, Expr *x, unsigned w) {
    Requant q;
    Expr *sub = NULL;
    if (x->kind == E_BIN && x->op == K_SUB && x->type == DT_FLOAT) sub = x->args[1], x = x->args[0];
    if (!e->t->pmaddwd_bytes || e->t->pmaddwd_bytes > 32 || !w || x->kind != E_UN || x->op != K_CAST ||
        x->type != DT_FLOAT || !requant_parts(x->args[0], &q) || !never_nan(q.v))
        return NULL;
    LLVMBuilderRef B = e->B;
    LLVMValueRef f = expr(e, q.c, w);
    LLVMTypeRef ft = LLVMTypeOf(f);
    LLVMValueRef m = LLVMConstReal(ft, 12582912.0);
    LLVMValueRef mz = m;
    if (sub && q.z && same_zp(sub, q.zv)) {
        sub = NULL;     /* float(round(c) + z) - float(z) = round(c): (c + M) - M */
    } else if (q.z) {
        mz = LLVMBuildFSub(B, m, LLVMBuildSIToFP(B, expr(e, q.z, w), ft, ""), "");
    }
    LLVMValueRef r = LLVMBuildFSub(B, LLVMBuildFAdd(B, f, m, ""), mz, "");
    return sub ? LLVMBuildFSub(B, r, expr(e, sub, w), "") : r;
}

/* cast<int8|uint8>(cast<int32>(round(clamp(v, lo - z, hi - z))) + cast<int32>(z)), rule_quantize_in's
 * requantisation, stored (store; the bytes converted back to float are magic_requant's, and
 * within an expression, e.g. a fused QLinearAdd's operand, an add and an `and 0xff` are
 * cheaper than the packs and a zero extension), on 4, 8 or 16 lanes of x86 without AVX-512 (the x86-64-v3 level): the
 * int32 results pass through the saturating packs, packssdw to int16, a saturating 16-bit
 * add of the zero point, packsswb / packuswb to the bytes, instead of a 32-bit add and a
 * truncation that LLVM builds from two pshufb, an extract and an unpack for every 8 lanes.
 * In [lo, hi] every step is exact (|z| <= 255 fits int16, and so does the sum). Where lo is
 * the type's minimum (-128, or 0 for uint8: every requantisation but a fused Relu's), the
 * packs are the lower clamp too, and the float `max` is left out: cvtps2dq gives INT_MIN
 * below int32's range, packssdw -32768, the saturating add stays at most -32768 + 255, and
 * the byte pack saturates that to lo, which is round(v) + z clamped as the float clamp did.
 * The upper clamp stays in float (cvtps2dq gives INT_MIN above int32's range too). A NaN v
 * would come out as lo where the float clamp and the truncation gave the byte of z, so the
 * lower clamp is only left out where v cannot be NaN (never_nan). Rounding is cvtps2dq's,
 * nearest even, as round_cvt's: exact for every float, where adding and subtracting 1.5 *
 * 2^23 rounds exactly only below 2^22 and costs the same two instructions with the add. */
static LLVMValueRef pack_requant(Emitter *e, Expr *x, unsigned w) {
    Requant q;
    if (!e->t->pmaddwd_bytes || e->t->pmaddwd_bytes > 32 || (w != 4 && w != 8 && w != 16) || !requant_parts(x, &q))
        return NULL;
    Expr *c = q.c, *v = q.v, *lo = q.lo, *hi = q.hi, *z = q.z, *zv = q.zv;
    /* lo is the type's minimum less z: then the packs saturate below */
    double tmin = x->type == DT_INT8 ? -128 : 0;
    bool free_lo = never_nan(v) &&
        (z ? lo->kind == E_BIN && lo->op == K_SUB && lo->args[0]->kind == E_CONST && lo->args[0]->f == tmin &&
                 same_zp(lo->args[1], zv)
           : lo->kind == E_CONST && lo->f == tmin);
    LLVMBuilderRef B = e->B;
    LLVMValueRef f;
    if (free_lo) {
        LLVMValueRef fv = expr(e, v, w), fh = expr(e, hi, w);
        f = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, fv, fh, ""), fh, fv, "");
    } else {
        f = expr(e, c, w);
    }
    LLVMTypeRef tys[2] = {LLVMVectorType(e->i32, w), LLVMTypeOf(f)};
    LLVMValueRef i = call_intrinsic(e, "llvm.lrint", tys, 2, &f, 1);
    LLVMValueRef zi = z ? expr(e, z, w) : NULL;
    /* quarters of 4 int32 lanes, packed in pairs: the 16-bit lanes keep the int32 order */
    LLVMTypeRef v8 = LLVMVectorType(e->i16, 8);
    LLVMValueRef h16[2], b8;
    for (unsigned h = 0; h < (w + 7) / 8; h++) {
        LLVMValueRef a[2], za[2];
        for (unsigned j = 0; j < 2; j++) {
            unsigned base = w == 4 ? 0 : 8 * h + 4 * j;
            LLVMValueRef idx[4];
            for (unsigned l = 0; l < 4; l++) idx[l] = LLVMConstInt(e->i32, base + l, 0);
            LLVMValueRef m = LLVMConstVector(idx, 4);
            a[j] = LLVMBuildShuffleVector(B, i, LLVMGetPoison(LLVMTypeOf(i)), m, "");
            if (zi) za[j] = LLVMBuildShuffleVector(B, zi, LLVMGetPoison(LLVMTypeOf(zi)), m, "");
        }
        h16[h] = call_intrinsic(e, "llvm.x86.sse2.packssdw.128", NULL, 0, a, 2);
        if (zi) {
            LLVMValueRef zz = call_intrinsic(e, "llvm.x86.sse2.packssdw.128", NULL, 0, za, 2);
            LLVMValueRef s[2] = {h16[h], zz};
            h16[h] = call_intrinsic(e, "llvm.sadd.sat", &v8, 1, s, 2);
        }
    }
    if (w < 16) h16[1] = h16[0];
    const char *bw = x->type == DT_INT8 ? "llvm.x86.sse2.packsswb.128" : "llvm.x86.sse2.packuswb.128";
    b8 = call_intrinsic(e, bw, NULL, 0, h16, 2);
    if (w == 16) return b8;
    LLVMValueRef idx[8];
    for (unsigned l = 0; l < w; l++) idx[l] = LLVMConstInt(e->i32, l, 0);
    return LLVMBuildShuffleVector(B, b8, LLVMGetPoison(LLVMTypeOf(b8)), LLVMConstVector(idx, w), "");
}

static LLVMValueRef unary(Emitter *e, Expr *x, unsigned w) {
    LLVMBuilderRef B = e->B;
    DType t = x->args[0]->type;
    LLVMValueRef rc = x->op == K_CAST ? round_cvt(e, x, w) : NULL;
    if (rc) return rc;
    LLVMValueRef a = expr(e, x->args[0], w);
    LLVMTypeRef ty = LLVMTypeOf(a);
    bool f = is_float(t);
    LLVMValueRef zero = LLVMConstNull(ty);
    if (f && be_math_op(x->op)) return be_math(e, x->op, t, a, NULL);
    switch (x->op) {
    case K_NEG: return f ? LLVMBuildFNeg(B, a, "") : LLVMBuildNeg(B, a, "");
    case K_ABS:
        if (f) return call_intrinsic(e, "llvm.fabs", &ty, 1, &a, 1);
        if (is_unsigned(t)) return a;
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, a, zero, ""), LLVMBuildNeg(B, a, ""), a, "");
    case K_NOT: return LLVMBuildNot(B, a, "");
    case K_CAST: return cast(e, a, t, x->type);
    case K_BITCAST:             /* register -> memory form -> register (kir.h) */
        if (is_half(t)) a = float_to_half(e, t, a);
        a = LLVMBuildBitCast(B, a, like(a, be_mem_type(e, x->type)), "");
        return is_half(x->type) ? half_to_float(e, x->type, a) : a;
    case K_SQRT:
        if (!f) die("sqrt of dtype %d", t);
        return call_intrinsic(e, "llvm.sqrt", &ty, 1, &a, 1);
    case K_FLOOR: case K_CEIL: case K_ROUND: return a;          /* integers */
    case K_RECIP:
        return f ? LLVMBuildFDiv(B, LLVMConstReal(ty, 1), a, "") : LLVMBuildSDiv(B, kint(ty, 1), a, "");
    case K_SIGN: {
        LLVMValueRef one = f ? LLVMConstReal(ty, 1) : kint(ty, 1);
        LLVMValueRef mone = f ? LLVMConstReal(ty, -1) : LLVMConstAllOnes(ty);
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

/* a*b + c as llvm.fma where the target wants it written so (Target.fma_bits); NULL where not. */
static LLVMValueRef fused(Emitter *e, Expr *x, unsigned w) {
    DType t = x->type;
    int bits = t == DT_DOUBLE ? 64 : 32;
    if (x->op != K_ADD || !e->contract || !is_float(t) || e->t->fma_bits < bits) return NULL;
    int mi = x->args[1]->kind == E_BIN && x->args[1]->op == K_MUL ? 1
           : x->args[0]->kind == E_BIN && x->args[0]->op == K_MUL ? 0 : -1;
    if (mi < 0) return NULL;
    Expr *m = x->args[mi];
    LLVMValueRef ab[3] = {expr(e, m->args[0], w), expr(e, m->args[1], w), expr(e, x->args[1 - mi], w)};
    LLVMTypeRef ty = LLVMTypeOf(ab[0]);
    unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->M, id, &ty, 1);
    return LLVMBuildCall2(e->B, LLVMIntrinsicGetType(e->C, id, &ty, 1), fn, ab, 3, "");
}

/* r + dot4(a, b) as one vpdpbusd on vectors of 4, 8 or 16 int32 lanes where the target has
 * AVX-512 VNNI; NULL where not. The intrinsics' operand types changed between LLVM versions
 * (<16 x i32> or <64 x i8>), so the operands are bitcast to whatever the declaration takes. */
static LLVMValueRef vnni_dot(Emitter *e, Expr *x, unsigned w) {
    static const char *const names[] = {"llvm.x86.avx512.vpdpbusd.128", "llvm.x86.avx512.vpdpbusd.256",
                                        "llvm.x86.avx512.vpdpbusd.512"};
    if (x->op != K_ADD || !e->t->vnni || w < 2 || w > 16) return NULL;
    int di = x->args[1]->kind == E_BIN && x->args[1]->op == K_DOT4 ? 1
           : x->args[0]->kind == E_BIN && x->args[0]->op == K_DOT4 ? 0 : -1;
    if (di < 0) return NULL;
    Expr *d = x->args[di];
    LLVMValueRef args[3] = {expr(e, x->args[1 - di], w), expr(e, d->args[0], w), expr(e, d->args[1], w)};
    /* other widths (a 13-lane rest) run in the next wider instruction, the extra lanes
     * undefined and dropped */
    unsigned n = w <= 4 ? 4 : w <= 8 ? 8 : 16;
    const char *name = names[n == 4 ? 0 : n == 8 ? 1 : 2];
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) return NULL;
    LLVMTypeRef ft = LLVMIntrinsicGetType(e->C, id, NULL, 0), pt[3];
    LLVMGetParamTypes(ft, pt);
    LLVMValueRef m[MAX_LANES];
    for (unsigned i = 0; i < n; i++) m[i] = i < w ? LLVMConstInt(e->i32, i, 0) : LLVMGetPoison(e->i32);
    for (int i = 0; i < 3 && n != w; i++)
        args[i] = LLVMBuildShuffleVector(e->B, args[i], LLVMGetPoison(LLVMTypeOf(args[i])), LLVMConstVector(m, n), "");
    for (int i = 0; i < 3; i++) args[i] = LLVMBuildBitCast(e->B, args[i], pt[i], "");
    LLVMValueRef r = LLVMBuildBitCast(e->B, LLVMBuildCall2(e->B, ft, LLVMGetIntrinsicDeclaration(e->M, id, NULL, 0), args, 3, ""),
                                      wide(e->i32, n), "");
    if (n == w) return r;
    for (unsigned i = 0; i < w; i++) m[i] = LLVMConstInt(e->i32, i, 0);
    return LLVMBuildShuffleVector(e->B, r, LLVMGetPoison(LLVMTypeOf(r)), LLVMConstVector(m, w), "");
}

/* A call of a non-overloaded target intrinsic (llvm.arm.*) on i32 operands. */
static LLVMValueRef arm_op(Emitter *e, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) die("backend: LLVM has no %s", name);
    return LLVMBuildCall2(e->B, LLVMIntrinsicGetType(e->C, id, NULL, 0), LLVMGetIntrinsicDeclaration(e->M, id, NULL, 0),
                          args, n, "");
}

/* acc + dot4(a, b) (acc NULL: dot4(a, b)) on one int32 with the Arm DSP extension, as CMSIS-NN
 * computes int8 dot products: [us]xtb16 spreads bytes 0 and 2 of a word (then, rotated by 8,
 * bytes 1 and 3) over two 16-bit halves, zero-extending a's and sign-extending b's, and each
 * smlad adds both halves' products to the accumulator. The halves hold 0..255 and -128..127,
 * so the signed 16-bit products are exact, and the 32-bit sum wraps as the add it replaces:
 * the result is bit for bit that of dot4. The unpacking of a word shared by several
 * accumulators (an input word of a jammed tile) is emitted once, LLVM's CSE merging the calls;
 * ARM's instruction selection folds the rotation into the extend's `ror #8`. */
static LLVMValueRef dsp_dot(Emitter *e, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef ra = LLVMBuildOr(B, LLVMBuildLShr(B, a, LLVMConstInt(e->i32, 8, 0), ""),
                                  LLVMBuildShl(B, a, LLVMConstInt(e->i32, 24, 0), ""), "");
    LLVMValueRef rb = LLVMBuildOr(B, LLVMBuildLShr(B, b, LLVMConstInt(e->i32, 8, 0), ""),
                                  LLVMBuildShl(B, b, LLVMConstInt(e->i32, 24, 0), ""), "");
    LLVMValueRef x[4] = {arm_op(e, "llvm.arm.uxtb16", &a, 1), arm_op(e, "llvm.arm.sxtb16", &b, 1),
                         arm_op(e, "llvm.arm.uxtb16", &ra, 1), arm_op(e, "llvm.arm.sxtb16", &rb, 1)};
    LLVMValueRef lo[3] = {x[0], x[1], acc};
    LLVMValueRef r = acc ? arm_op(e, "llvm.arm.smlad", lo, 3) : arm_op(e, "llvm.arm.smuad", lo, 2);
    LLVMValueRef hi[3] = {x[2], x[3], r};
    return arm_op(e, "llvm.arm.smlad", hi, 3);
}

/* x as base + constant (base NULL for a constant). */
static const Expr *split_const(const Expr *x, int64_t *c) {
    *c = 0;
    /* every constant added last: a store written in place into a padded buffer
     * (pad_in_place) has its offset added to the index it had, (v*2 + 1) + 1 */
    while (x->kind == E_BIN && x->op == K_ADD && x->args[1]->kind == E_CONST) {
        *c += x->args[1]->i;
        x = x->args[0];
    }
    if (x->kind == E_CONST) {
        *c += x->i;
        return NULL;
    }
    return x;
}

/* Whether index expressions a and b differ by exactly c. */
static bool index_apart(const Expr *a, const Expr *b, int64_t c) {
    int64_t ca, cb;
    const Expr *ba = split_const(a, &ca), *bb = split_const(b, &cb);
    return cb - ca == c && (ba && bb ? kx_equal(ba, bb) : ba == bb);
}

/* The word that passes/ops/conv.c's dot4_word assembles from four bytes of a uint8 buffer,
 * b0 + b1 * 256 + b2 * 65536 + b3 * 16777216, as one 4-byte load when the bytes are adjacent
 * in memory (a dense layer's input, channels-last pixels), where LLVM left two or three loads
 * and the ors. Little-endian targets whose loads may be unaligned only (Cortex-M4: dsp). */
static LLVMValueRef word_load(Emitter *e, const Expr *x) {
    const Expr *t[4];
    for (int j = 3; j >= 1; j--) {
        if (x->kind != E_BIN || x->op != K_ADD || x->type != DT_INT32) return NULL;
        const Expr *m = x->args[1];
        if (m->kind != E_BIN || m->op != K_MUL || m->args[1]->kind != E_CONST || m->args[1]->i != (int64_t)1 << (8 * j))
            return NULL;
        t[j] = m->args[0];
        x = x->args[0];
    }
    t[0] = x;
    for (int j = 0; j < 4; j++) {
        if (t[j]->kind != E_UN || t[j]->op != K_CAST || t[j]->args[0]->kind != E_LOAD) return NULL;
        t[j] = t[j]->args[0];
        if (t[j]->buf != t[0]->buf || t[j]->buf->dtype != DT_UINT8 || kir_root(t[j]->buf)->nibbles) return NULL;
    }
    const Buf *b = t[0]->buf;
    int d = -1;                     /* the dimension the bytes run along: stride 1 */
    for (int i = 0; i < b->rank; i++)
        if (!kx_equal(t[0]->args[i], t[1]->args[i])) d = d < 0 ? i : b->rank;
    if (d < 0 || d >= b->rank) return NULL;
    for (int i = d + 1; i < b->rank; i++)
        if (b->dims[i] != 1) return NULL;
    for (int j = 1; j < 4; j++)
        for (int i = 0; i < b->rank; i++)
            if (i == d ? !index_apart(t[0]->args[i], t[j]->args[i], j) : !kx_equal(t[0]->args[i], t[j]->args[i]))
                return NULL;
    LLVMValueRef v = LLVMBuildLoad2(e->B, e->i32, elem_ptr(e, t[0]->buf, t[0]->args, 0), "");
    LLVMSetAlignment(v, 1);
    return v;
}

/* r + dot4(a, b) as dsp_dot on a scalar where the target has the Arm DSP extension; NULL
 * where not. */
static LLVMValueRef smlad_dot(Emitter *e, Expr *x, unsigned w) {
    if (x->op != K_ADD || !e->t->dsp || w) return NULL;
    int di = x->args[1]->kind == E_BIN && x->args[1]->op == K_DOT4 ? 1
           : x->args[0]->kind == E_BIN && x->args[0]->op == K_DOT4 ? 0 : -1;
    if (di < 0) return NULL;
    Expr *d = x->args[di];
    LLVMValueRef acc = expr(e, x->args[1 - di], 0), a = word_load(e, d->args[0]);
    return dsp_dot(e, acc, a ? a : expr(e, d->args[0], 0), expr(e, d->args[1], 0));
}

/* dot4(a, b) on w int32 lanes with x86's pmaddwd (16-bit products summed in pairs, exactly),
 * where VNNI is missing (AVX2, x86-64-v3): each lane's bytes 0 and 2 of a, zero-extended to 16
 * bits (and 0x00ff), against b's, sign-extended (shl 8, ashr 8), give a0*b0 + a2*b2; bytes 1
 * and 3 (lshr 8; ashr 8) give a1*b1 + a3*b3; their sum is dot4. The products of 0..255 by
 * -128..127 and their pairwise sums fit 32 bits, so the result is bit for bit dot4's
 * (pmaddubsw would be one instruction less, but saturates at 16 bits). The unpacking of an
 * input word shared by a register tile is emitted once (LLVM's CSE). NULL where the lanes
 * are not one of pmaddwd's widths. */
static LLVMValueRef pmadd_dot(Emitter *e, LLVMValueRef a, LLVMValueRef b) {
    static const char *const names[] = {"llvm.x86.sse2.pmadd.wd", "llvm.x86.avx2.pmadd.wd",
                                        "llvm.x86.avx512.pmaddw.d.512"};
    unsigned w = width_of(a);
    if (!e->t->pmaddwd_bytes || e->t->vnni || (w != 4 && w != 8 && w != 16) || 4 * w > (unsigned)e->t->pmaddwd_bytes)
        return NULL;
    const char *name = names[w == 4 ? 0 : w == 8 ? 1 : 2];
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) return NULL;
    LLVMBuilderRef B = e->B;
    LLVMTypeRef h = LLVMVectorType(e->i16, 2 * w);
    LLVMValueRef ah = LLVMBuildBitCast(B, a, h, ""), bh = LLVMBuildBitCast(B, b, h, "");
    LLVMValueRef eight = splat_const(LLVMConstInt(e->i16, 8, 0), 2 * w);
    LLVMValueRef a_even = LLVMBuildAnd(B, ah, splat_const(LLVMConstInt(e->i16, 0xff, 0), 2 * w), "");
    LLVMValueRef a_odd = LLVMBuildLShr(B, ah, eight, "");
    LLVMValueRef b_even = LLVMBuildAShr(B, LLVMBuildShl(B, bh, eight, ""), eight, "");
    LLVMValueRef b_odd = LLVMBuildAShr(B, bh, eight, "");
    LLVMTypeRef ft = LLVMIntrinsicGetType(e->C, id, NULL, 0);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->M, id, NULL, 0);
    LLVMValueRef ev[2] = {a_even, b_even}, od[2] = {a_odd, b_odd};
    LLVMValueRef lo = LLVMBuildCall2(B, ft, fn, ev, 2, ""), hi = LLVMBuildCall2(B, ft, fn, od, 2, "");
    return LLVMBuildAdd(B, lo, hi, "");
}

/* Whether pmaddubsw computes dot4(a, b) exactly for every a when b is loaded from constant
 * buffer `w` (int32 words of four signed bytes): pmaddubsw sums the products of a pair of
 * bytes (0 and 1, 2 and 3) in 16 bits and saturates, so it is exact when each pair's positive
 * weights add up to at most 128 and its negative ones to at least -128 (255 * 128 = 32640
 * fits, 255 * 129 does not). Weights of at most 7 bits (onnxruntime's reduce_range, which it
 * recommends for AVX2) always pass; full-range int8 weights rarely do. Checked once per
 * buffer and remembered for the next statement. */
static bool ubs_exact(Emitter *e, const Expr *w) {
    if (w->kind != E_LOAD || !w->buf || w->buf->kind != B_CONST || w->buf->dtype != DT_INT32 || !w->buf->data) return false;
    const Buf *b = w->buf;
    if (b == e->ubs_buf) return e->ubs_ok;
    int64_t n = 1;
    for (int i = 0; i < b->rank; i++) n *= b->dims[i];
    const uint8_t *p = b->data;
    bool ok = true;
    for (int64_t i = 0; i < 2 * n && ok; i++) {
        int x = (int8_t)p[2 * i], y = (int8_t)p[2 * i + 1];
        int pos = (x > 0 ? x : 0) + (y > 0 ? y : 0), neg = (x < 0 ? -x : 0) + (y < 0 ? -y : 0);
        ok = pos <= 128 && neg <= 128;
    }
    e->ubs_buf = b;
    e->ubs_ok = ok;
    return ok;
}

/* dot4(a, b) as pmaddubsw (a's bytes unsigned times b's signed, summed in pairs in 16 bits)
 * and pmaddwd by ones (the two pairs of a lane summed in 32 bits): two instructions where
 * pmadd_dot takes two pmaddwd, an add and the unpacking. Only where ubs_exact says the 16-bit
 * sums cannot saturate; NULL elsewhere, and where VNNI does it in one. */
static LLVMValueRef ubs_dot(Emitter *e, const Expr *bx, LLVMValueRef a, LLVMValueRef b) {
    static const char *const ub[] = {"llvm.x86.ssse3.pmadd.ub.sw.128", "llvm.x86.avx2.pmadd.ub.sw",
                                     "llvm.x86.avx512.pmaddubs.w.512"};
    static const char *const wd[] = {"llvm.x86.sse2.pmadd.wd", "llvm.x86.avx2.pmadd.wd",
                                     "llvm.x86.avx512.pmaddw.d.512"};
    unsigned w = width_of(a);
    if (!e->t->pmaddwd_bytes || e->t->vnni || !e->t->ssse3 || (w != 4 && w != 8 && w != 16) ||
        4 * w > (unsigned)e->t->pmaddwd_bytes || !ubs_exact(e, bx))
        return NULL;
    int k = w == 4 ? 0 : w == 8 ? 1 : 2;
    unsigned iu = LLVMLookupIntrinsicID(ub[k], strlen(ub[k])), iw = LLVMLookupIntrinsicID(wd[k], strlen(wd[k]));
    if (!iu || !iw) return NULL;
    LLVMBuilderRef B = e->B;
    LLVMTypeRef fu = LLVMIntrinsicGetType(e->C, iu, NULL, 0), fw = LLVMIntrinsicGetType(e->C, iw, NULL, 0), pt[2];
    LLVMGetParamTypes(fu, pt);
    LLVMValueRef ab[2] = {LLVMBuildBitCast(B, a, pt[0], ""), LLVMBuildBitCast(B, b, pt[1], "")};
    LLVMValueRef s = LLVMBuildCall2(B, fu, LLVMGetIntrinsicDeclaration(e->M, iu, NULL, 0), ab, 2, "");
    LLVMValueRef sw[2] = {s, splat_const(LLVMConstInt(e->i16, 1, 0), 2 * w)};
    return LLVMBuildCall2(B, fw, LLVMGetIntrinsicDeclaration(e->M, iw, NULL, 0), sw, 2, "");
}

/* prod holds g products a lane for w lanes (w 0: one scalar lane), lane i's at g i .. g i + g - 1:
 * each lane's sum, the g parts taken by shuffles and added (the dot forms without an
 * instruction for them). */
static LLVMValueRef lane_sums(Emitter *e, LLVMValueRef prod, unsigned w, unsigned g) {
    LLVMBuilderRef B = e->B;
    unsigned n = w ? w : 1;
    LLVMValueRef sum = NULL;
    for (unsigned j = 0; j < g; j++) {
        LLVMValueRef m[MAX_LANES];
        for (unsigned i = 0; i < n; i++) m[i] = LLVMConstInt(e->i32, g * i + j, 0);
        LLVMValueRef part = LLVMBuildShuffleVector(B, prod, LLVMGetPoison(LLVMTypeOf(prod)), LLVMConstVector(m, n), "");
        sum = sum ? LLVMBuildAdd(B, sum, part, "") : part;
    }
    return w ? sum : LLVMBuildExtractElement(B, sum, LLVMConstInt(e->i32, 0, 0), "");
}

/* dot4(a, b) with plain vector arithmetic: the operands' bytes as <4w x i8>, a's widened
 * unsigned and b's signed to i32, multiplied, and each lane's four products summed by
 * shuffles (kir.h). LLVM turns this into pmaddwd-style code where it can. */
static LLVMValueRef dot4(Emitter *e, LLVMValueRef a, LLVMValueRef b) {
    LLVMValueRef pm = pmadd_dot(e, a, b);
    if (pm) return pm;
    LLVMBuilderRef B = e->B;
    unsigned w = width_of(a), n = w ? w : 1;
    LLVMTypeRef bytes = LLVMVectorType(e->i8, 4 * n), words = LLVMVectorType(e->i32, 4 * n);
    LLVMValueRef ab = LLVMBuildZExt(B, LLVMBuildBitCast(B, a, bytes, ""), words, "");
    LLVMValueRef bb = LLVMBuildSExt(B, LLVMBuildBitCast(B, b, bytes, ""), words, "");
    return lane_sums(e, LLVMBuildMul(B, ab, bb, ""), w, 4);
}

/* dot2(a, b) (kir.h): one pmaddwd on 4, 8 or 16 lanes where the target has it, else both
 * operands' halves sign-extended to i32, multiplied and the two products of a lane added
 * (shuffles). */
static LLVMValueRef dot2(Emitter *e, LLVMValueRef a, LLVMValueRef b) {
    static const char *const names[] = {"llvm.x86.sse2.pmadd.wd", "llvm.x86.avx2.pmadd.wd",
                                        "llvm.x86.avx512.pmaddw.d.512"};
    LLVMBuilderRef B = e->B;
    unsigned w = width_of(a), n = w ? w : 1;
    if (w < 4 && e->t->pmaddwd_bytes) {
        /* a scalar or a rest of 2 or 3 lanes (a dense layer of 10 outputs: 8 + 2): the low
         * lanes of one SSE2 pmaddwd, where the shuffles of lane_sums were ~8 instructions */
        unsigned id = LLVMLookupIntrinsicID(names[0], strlen(names[0]));
        LLVMTypeRef v4 = LLVMVectorType(e->i32, 4), h = LLVMVectorType(e->i16, 8);
        LLVMValueRef ab[2], m[4];
        for (int i = 0; i < 2; i++) {
            LLVMValueRef x = i ? b : a;
            if (!w) {
                ab[i] = LLVMBuildInsertElement(B, LLVMGetPoison(v4), x, LLVMConstInt(e->i32, 0, 0), "");
            } else {
                for (unsigned j = 0; j < 4; j++) m[j] = j < w ? LLVMConstInt(e->i32, j, 0) : LLVMGetPoison(e->i32);
                ab[i] = LLVMBuildShuffleVector(B, x, LLVMGetPoison(LLVMTypeOf(x)), LLVMConstVector(m, 4), "");
            }
            ab[i] = LLVMBuildBitCast(B, ab[i], h, "");
        }
        LLVMValueRef r = LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, NULL, 0), LLVMGetIntrinsicDeclaration(e->M, id, NULL, 0),
                                        ab, 2, "");
        if (!w) return LLVMBuildExtractElement(B, r, LLVMConstInt(e->i32, 0, 0), "");
        for (unsigned j = 0; j < w; j++) m[j] = LLVMConstInt(e->i32, j, 0);
        return LLVMBuildShuffleVector(B, r, LLVMGetPoison(v4), LLVMConstVector(m, w), "");
    }
    if ((w == 4 || w == 8 || w == 16) && 4 * w <= (unsigned)e->t->pmaddwd_bytes) {
        const char *name = names[w == 4 ? 0 : w == 8 ? 1 : 2];
        unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
        if (id) {
            LLVMTypeRef h = LLVMVectorType(e->i16, 2 * w);
            LLVMValueRef ab[2] = {LLVMBuildBitCast(B, a, h, ""), LLVMBuildBitCast(B, b, h, "")};
            return LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, NULL, 0), LLVMGetIntrinsicDeclaration(e->M, id, NULL, 0),
                                  ab, 2, "");
        }
    }
    LLVMTypeRef halves = LLVMVectorType(e->i16, 2 * n), words = LLVMVectorType(e->i32, 2 * n);
    return lane_sums(e, LLVMBuildMul(B, LLVMBuildSExt(B, LLVMBuildBitCast(B, a, halves, ""), words, ""),
                                     LLVMBuildSExt(B, LLVMBuildBitCast(B, b, halves, ""), words, ""), ""), w, 2);
}

/* Integer a / b or a % b that cannot trap: ONNX leaves division by zero undefined, and x86's
 * idiv faults on it and on INT_MIN / -1, so a caller's bad data would kill the program. Like
 * the interpreter (ir/kinterp.c): x / 0 = x % 0 = 0, and a / -1 = -a wraps. A constant divisor
 * folds the guards away in the builder. */
static LLVMValueRef idiv(Emitter *e, KOp op, bool u, LLVMValueRef a, LLVMValueRef b) {
    LLVMBuilderRef B = e->B;
    LLVMTypeRef ty = LLVMTypeOf(b);
    LLVMValueRef zero = LLVMConstNull(ty), one = kint(ty, 1);
    LLVMValueRef is0 = LLVMBuildICmp(B, LLVMIntEQ, b, zero, ""), bad = is0, m1 = NULL;
    if (!u) {
        m1 = LLVMBuildICmp(B, LLVMIntEQ, b, LLVMConstAllOnes(ty), "");
        bad = LLVMBuildOr(B, is0, m1, "");
    }
    LLVMValueRef d = LLVMBuildSelect(B, bad, one, b, "");
    LLVMValueRef r = op == K_DIV ? (u ? LLVMBuildUDiv(B, a, d, "") : LLVMBuildSDiv(B, a, d, ""))
                                 : (u ? LLVMBuildURem(B, a, d, "") : LLVMBuildSRem(B, a, d, ""));
    if (m1) r = LLVMBuildSelect(B, m1, op == K_DIV ? LLVMBuildSub(B, zero, a, "") : zero, r, "");
    return LLVMBuildSelect(B, is0, zero, r, "");
}

static bool folded(const Emitter *e, const Expr *x);

/* A float one: the constant, or a load of a one-element constant holding it that the code may
 * fold (folded: not from an --emit-weights blob; a GELU's `+ 1` as exported, a Constant node). */
static bool float_one(const Emitter *e, const Expr *x) {
    if (x->kind == E_CONST) return x->f == 1.0;
    return folded(e, x) && x->buf->dtype == DT_FLOAT && *(const float *)x->buf->data == 1.0f;
}

/* erf(y) + 1 in float (GELU's), outside --fp-strict: y, whose 1 + erf math.c computes in one
 * (m_erf1p); else NULL. */
static Expr *erf_plus_one(const Emitter *e, const Expr *x) {
    if (x->op != K_ADD || x->type != DT_FLOAT || e->p->fp_strict) return NULL;
    for (int i = 0; i < 2; i++) {
        const Expr *f = x->args[i];
        if (f->kind == E_UN && f->op == K_ERF && f->type == DT_FLOAT && float_one(e, x->args[1 - i])) return f->args[0];
    }
    return NULL;
}

static LLVMValueRef binary(Emitter *e, Expr *x, unsigned w) {
    LLVMBuilderRef B = e->B;
    DType t = x->args[0]->type;
    Expr *y = erf_plus_one(e, x);
    if (y) return be_math(e, K_ERF1P, DT_FLOAT, expr(e, y, w), NULL);
    LLVMValueRef fma = fused(e, x, w);
    if (fma) return fma;
    if ((fma = vnni_dot(e, x, w))) return fma;
    if ((fma = smlad_dot(e, x, w))) return fma;
    LLVMValueRef a = expr(e, x->args[0], w), b = expr(e, x->args[1], w);
    bool f = is_float(t), u = is_unsigned(t), ix = t == DT_INDEX;
    if (f && be_math_op(x->op)) return be_math(e, x->op, t, a, b);
    switch (x->op) {
    case K_ADD: return f ? be_fop(e, LLVMBuildFAdd(B, a, b, "")) : ix ? LLVMBuildNSWAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, "");
    case K_SUB: return f ? be_fop(e, LLVMBuildFSub(B, a, b, "")) : ix ? LLVMBuildNSWSub(B, a, b, "") : LLVMBuildSub(B, a, b, "");
    case K_MUL: return f ? be_fop(e, LLVMBuildFMul(B, a, b, "")) : ix ? LLVMBuildNSWMul(B, a, b, "") : LLVMBuildMul(B, a, b, "");
    case K_DIV: return f ? LLVMBuildFDiv(B, a, b, "") : idiv(e, x->op, u, a, b);
    case K_REM: return idiv(e, x->op, u, a, b);
    case K_POW: return be_math(e, K_POW, t, a, b);              /* integers */
    case K_MIN: return minmax(e, false, t, a, b);
    case K_MAX: return minmax(e, true, t, a, b);
    case K_LT: case K_LE: case K_GT: case K_GE: case K_EQ: case K_NE: return compare(e, x->op, t, a, b);
    case K_AND: return LLVMBuildAnd(B, a, b, "");
    case K_OR: return LLVMBuildOr(B, a, b, "");
    case K_XOR: return LLVMBuildXor(B, a, b, "");
    case K_DOT4: {
        LLVMValueRef ud = w ? ubs_dot(e, x->args[1], a, b) : NULL;
        return ud ? ud : e->t->dsp && !w ? dsp_dot(e, NULL, a, b) : dot4(e, a, b);
    }
    case K_DOT2: return dot2(e, a, b);
    default: die("binary %s on dtype %d", kop_name[x->op], t);
    }
}

static LLVMValueRef expr(Emitter *e, Expr *x, unsigned w) {
    for (int i = 0; i < e->noleaf; i++)     /* building an outlined helper: a leaf is a param */
        if (e->oleaf[i] == x) return e->oarg[i];
    if (e->building && folded(e, x)) return folded_value(e, x);
    if (w && !varying(e, x)) return splat(e, expr(e, x, 0), w);
    switch (x->kind) {
    case E_CONST: return konst(e, x);
    case E_VAR:
        if (e->vw && x->var == e->lanevar) {    /* lane i is lo + i; lane 0 in scalar context */
            LLVMValueRef lane[MAX_LANES];
            for (unsigned i = 0; i < (w ? w : 1); i++)
                lane[i] = LLVMConstInt(e->idx, (unsigned long long)(e->lanelo + (int64_t)i), 1);
            LLVMValueRef v = w ? LLVMConstVector(lane, w) : lane[0];
            return e->lanebase ? LLVMBuildNSWAdd(e->B, splat(e, e->lanebase, w), v, "") : v;
        }
        return LLVMBuildLoad2(e->B, e->idx, e->vars[x->var], "");
    case E_SCALAR: {
        LLVMTypeRef rt = be_reg_type(e, e->k->scalars[x->var]);
        if (e->vw && e->vreg[x->var]) {
            if (!w) die("kernel %s: lane-private r%d in a scalar context", e->k->name, x->var);
            return LLVMBuildLoad2(e->B, LLVMVectorType(rt, w), e->vreg[x->var], "");
        }
        return LLVMBuildLoad2(e->B, rt, e->scalars[x->var], "");
    }
    case E_LOAD: return load(e, x, w);
    case E_UN: return unary(e, x, w);
    case E_BIN: return binary(e, x, w);
    case E_SELECT: {
        LLVMValueRef c = expr(e, x->args[0], w), a = expr(e, x->args[1], w), b = expr(e, x->args[2], w);
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

/* An alloca in the entry block (where mem2reg looks for them). */
static LLVMValueRef entry_alloca(Emitter *e, LLVMTypeRef ty) {
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(e->C);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(e->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) LLVMPositionBuilderBefore(ab, first);
    else LLVMPositionBuilderAtEnd(ab, entry);
    LLVMValueRef a = LLVMBuildAlloca(ab, ty, "");
    LLVMDisposeBuilder(ab);
    return a;
}

static void mark_sets(Emitter *e, const Stmt *s, unsigned w) {
    for (; s; s = s->next) {
        if (s->kind == S_SET && !e->vreg[s->var]) {
            int r = s->var;
            if (e->vcache_w[r] != w) {
                e->vcache[r] = entry_alloca(e, LLVMVectorType(be_reg_type(e, e->k->scalars[r]), w));
                e->vcache_w[r] = w;
            }
            e->vreg[r] = e->vcache[r];
        }
        mark_sets(e, s->body, w);
        mark_sets(e, s->then, w);
        mark_sets(e, s->els, w);
    }
}

/* A vector loop (LH_VECTOR): its body once, as straight-line code on w lanes; registers set
 * in it live in vector allocas (kir.h: they are lane-private). */
static void vloop(Emitter *e, Stmt *s) {
    unsigned w = (unsigned)(s->hi->i - s->lo->i);
    if (s->lo->kind != E_CONST || s->hi->kind != E_CONST || w < 2 || w > MAX_LANES || e->vw)
        die("kernel %s: malformed vector loop over i%d", e->k->name, s->var);
    e->vw = w;
    e->lanevar = s->var;
    e->lanelo = s->lo->i;
    KRange saved = e->ranges[s->var];
    e->ranges[s->var] = kr_loop(s);
    mark_sets(e, s->body, w);
    stmts(e, s->body);
    e->ranges[s->var] = saved;
    e->vw = 0;
    for (int r = 0; r < e->k->nscalars; r++) e->vreg[r] = NULL;
}

/* for (var = lo; var < hi; var += step): loop_begin leaves the builder in the body,
 * loop_end closes it. */
typedef struct Loop {
    LLVMValueRef var;
    LLVMBasicBlockRef head, latch, done;
    int64_t step;
    bool keep;                      /* not to be unrolled by LLVM (loop_keep) */
    bool novec;                     /* nor vectorised (a task's part of a parallel group) */
} Loop;

static Loop loop_begin(Emitter *e, int var, LLVMValueRef lo, LLVMValueRef hi, int64_t step) {
    LLVMBuilderRef B = e->B;
    Loop l = {e->vars[var], block(e, "loop"), NULL, NULL, step, false, false};
    LLVMBasicBlockRef body = block(e, "body");
    l.latch = block(e, "latch");
    l.done = block(e, "done");
    LLVMBuildStore(B, lo, l.var);
    LLVMBuildBr(B, l.head);
    LLVMPositionBuilderAtEnd(B, l.head);
    LLVMValueRef v = LLVMBuildLoad2(B, e->idx, l.var, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, v, hi, ""), body, l.done);
    LLVMPositionBuilderAtEnd(B, body);
    return l;
}

static void loop_end(Emitter *e, Loop l) {
    LLVMBuilderRef B = e->B;
    LLVMBuildBr(B, l.latch);
    LLVMPositionBuilderAtEnd(B, l.latch);
    LLVMValueRef v = LLVMBuildLoad2(B, e->idx, l.var, "");
    LLVMBuildStore(B, LLVMBuildNSWAdd(B, v, LLVMConstInt(e->idx, (unsigned long long)l.step, 0), ""), l.var);
    LLVMValueRef br = LLVMBuildBr(B, l.head);
    if (l.keep) {                   /* a loop ID: a node whose first operand is itself */
        LLVMMetadataRef opt = LLVMMDStringInContext2(e->C, "llvm.loop.unroll.disable", 24);
        LLVMMetadataRef vec[2] = {LLVMMDStringInContext2(e->C, "llvm.loop.vectorize.enable", 26),
                                  LLVMValueAsMetadata(LLVMConstInt(e->i1, 0, 0))};
        LLVMMetadataRef ops[3] = {LLVMTemporaryMDNode(e->C, NULL, 0), LLVMMDNodeInContext2(e->C, &opt, 1),
                                  LLVMMDNodeInContext2(e->C, vec, 2)};
        LLVMMetadataRef id = LLVMMDNodeInContext2(e->C, ops, l.novec ? 3 : 2);
        LLVMMetadataReplaceAllUsesWith(ops[0], id);
        LLVMSetMetadata(br, LLVMGetMDKindIDInContext(e->C, "llvm.loop", 9), LLVMMetadataAsValue(e->C, id));
    }
    LLVMPositionBuilderAtEnd(B, l.done);
}

static bool expr_has_dot4(const Expr *x) {
    if (x->kind == E_BIN && x->op == K_DOT4) return true;
    for (int i = 0; i < x->nargs; i++)
        if (expr_has_dot4(x->args[i])) return true;
    return false;
}

/* A reduction of dot4s on the Arm DSP extension (dsp_dot) is left as the schedule blocked
 * it: its accumulators, unpacked operands and pointers fill the M4's 13 core registers, and
 * LLVM's runtime unrolling by two made it spill (int8 dense layers 1.9 -> 1.6 instructions
 * per multiply-accumulate without). */
/* So is a loop of more than one iteration around an outlined epilogue's call (outline): LLVM
 * unrolled lenet_qop's dense layer, 5 blocks of 2 outputs, whole once its epilogues were
 * calls (+1.1 KB, same speed). */
static bool calls_outlined(Emitter *e, const Stmt *s);

static bool loop_keep(Emitter *e, const Stmt *s) {
    bool once = s->lo->kind == E_CONST && s->hi->kind == E_CONST && s->hi->i - s->lo->i <= s->step;
    if (e->outline && !(s->hints & LH_REDUCTION) && !once && calls_outlined(e, s->body)) return true;
    if (!e->t->dsp || !(s->hints & LH_REDUCTION)) return false;
    for (const Stmt *b = s->body; b; b = b->next)
        if (b->kind == S_SET && expr_has_dot4(b->val)) return true;
    return false;
}

static void rloop(Emitter *e, Stmt *s);

/* ---- vldmia (Arm M-profile FPUs) ----
 * In a reduction loop of a target without float vectors the schedule leaves runs of loads
 * b[i..., c], b[i..., c + 1], ... (a dense layer's packed weights [N/U, K, U]: the U weights
 * of one k; a conv's channel or column block), each feeding one accumulator. LLVM loads them
 * with one vldr each; one `vldmia` loads a whole run, which is what a hand-written M4 kernel
 * does. LLVM never forms it itself (its load/store optimiser merges only loads that the
 * register allocator happened to put in consecutive registers), so the run is an inline asm
 * whose outputs are pinned to consecutive registers from s16 on, as many as the loop's
 * accumulators leave free. The asm is emitted at the top of the loop body and reads the same
 * bytes as the loads: results do not change. */
typedef struct LoadRun {
    const Expr *first;              /* the load of element c0 */
    int64_t c0;
    int n, reg;                     /* elements, first register s<reg> */
    LLVMValueRef val;               /* the asm's struct of n floats, once emitted */
} LoadRun;

enum { VLDM_MIN = 3, VLDM_FIRST_REG = 16, VLDM_LAST_REG = 31 };

static void run_emit(Emitter *e, LoadRun *r);

/* Whether index expression x reads only loop variables (not registers or memory), so that
 * it has its value at the top of the loop body. */
static bool loop_index(const Expr *x) {
    if (x->kind == E_SCALAR || x->kind == E_LOAD) return false;
    for (int i = 0; i < x->nargs; i++)
        if (!loop_index(x->args[i])) return false;
    return true;
}

/* Whether load x is b[i..., c] with a constant last index, c returned in *c. */
static bool run_elem(const Expr *x, int64_t *c) {
    if (x->kind != E_LOAD || x->buf->dtype != DT_FLOAT || x->nargs < 1) return false;
    for (int i = 0; i < x->nargs; i++)
        if (!loop_index(x->args[i])) return false;
    const Expr *l = x->args[x->nargs - 1];
    if (l->kind != E_CONST) return false;
    *c = l->i;
    return true;
}

/* Whether loads a and b name the same buffer and the same indices but the last. */
static bool same_row(const Expr *a, const Expr *b) {
    if (a->buf != b->buf) return false;
    for (int i = 0; i + 1 < a->nargs; i++)
        if (!kx_equal(a->args[i], b->args[i])) return false;
    return true;
}

/* The float loads of x (not those inside load indices), once per row and element. */
static void run_loads(const Expr *x, const Expr **ld, int *n, int cap) {
    int64_t c, c2;
    if (run_elem(x, &c)) {
        for (int i = 0; i < *n; i++)
            if (same_row(ld[i], x) && run_elem(ld[i], &c2) && c2 == c) return;
        if (*n < cap) ld[(*n)++] = x;
        return;
    }
    if (x->kind == E_LOAD) return;
    for (int i = 0; i < x->nargs; i++) run_loads(x->args[i], ld, n, cap);
}

/* The runs of loop s's body (statements that only set registers), in order of first use,
 * while their registers fit next to the accumulators. */
static void vldm_groups(Emitter *e, const Stmt *s) {
    enum { CAP = 256 };
    const Expr *ld[CAP];
    int n = 0, naccs = 0;
    bool *acc = ARENA_ARRAY(e->p->arena, bool, e->k->nscalars + 1);
    e->nruns = 0;
    if (!e->t->vldm || e->vw || !(s->hints & LH_REDUCTION)) return;
    for (const Stmt *b = s->body; b; b = b->next) {
        if (b->kind != S_SET) return;
        if (is_float(e->k->scalars[b->var]) && !acc[b->var]) acc[b->var] = true, naccs++;
        run_loads(b->val, ld, &n, CAP);
    }
    /* 32 single registers: the accumulators, one for the value each run's elements meet
     * (the input of a dense layer), one spare */
    int free = MIN(VLDM_LAST_REG - VLDM_FIRST_REG + 1, 32 - naccs - 2), reg = VLDM_FIRST_REG;
    e->runs = ARENA_ARRAY(e->p->arena, LoadRun, n + 1);
    bool *used = ARENA_ARRAY(e->p->arena, bool, n + 1);
    for (int i = 0; i < n; i++) {
        int64_t c0, c;
        if (used[i] || !run_elem(ld[i], &c0)) continue;
        /* the longest run c0, c0 + 1, ... of this row among the loads */
        int len = 1;
        for (bool more = true; more;) {
            more = false;
            for (int j = 0; j < n; j++)
                if (!used[j] && j != i && same_row(ld[j], ld[i]) && run_elem(ld[j], &c) && c == c0 + len) {
                    used[j] = more = true;
                    len++;
                }
        }
        used[i] = true;
        bool first = true;          /* ld[i] must be the lowest element: look below c0 */
        for (int j = 0; j < n && first; j++)
            if (j != i && same_row(ld[j], ld[i]) && run_elem(ld[j], &c) && c == c0 - 1) first = false;
        len = MIN(len, free);
        if (!first || len < VLDM_MIN) continue;
        e->runs[e->nruns] = (LoadRun){ld[i], c0, len, reg, NULL};
        run_emit(e, &e->runs[e->nruns++]);     /* at the top of the body: dominates every use */
        reg += len;
        free -= len;
    }
}

/* The vldmia of run r, at the builder's position. */
static void run_emit(Emitter *e, LoadRun *r) {
    char text[64], cons[16 * 8 + 8], *p = cons;
    snprintf(text, sizeof text, "vldmia $%d, {s%d-s%d}", r->n, r->reg, r->reg + r->n - 1);
    for (int j = 0; j < r->n; j++) p += sprintf(p, "={s%d},", r->reg + j);
    strcpy(p, "r");
    LLVMTypeRef f[16];
    for (int j = 0; j < r->n; j++) f[j] = e->f32;
    LLVMTypeRef st = LLVMStructTypeInContext(e->C, f, (unsigned)r->n, 0);
    LLVMValueRef ptr = elem_ptr(e, r->first->buf, simple_idx(e, r->first->buf, (Expr **)r->first->args), 0);
    LLVMTypeRef ft = LLVMFunctionType(st, &e->ptr, 1, 0);
    LLVMValueRef asm_ = LLVMGetInlineAsm(ft, text, strlen(text), cons, strlen(cons), 0, 0, LLVMInlineAsmDialectATT, 0);
    r->val = LLVMBuildCall2(e->B, ft, asm_, &ptr, 1, "");
}

/* Load x from its run's vldmia, or NULL if in no run. */
static LLVMValueRef run_load(Emitter *e, const Expr *x) {
    int64_t c;
    if (!run_elem(x, &c)) return NULL;
    for (int i = 0; i < e->nruns; i++) {
        LoadRun *r = &e->runs[i];
        if (c >= r->c0 && c < r->c0 + r->n && same_row(r->first, x))
            return LLVMBuildExtractValue(e->B, r->val, (unsigned)(c - r->c0), "");
    }
    return NULL;
}

static void loop(Emitter *e, Stmt *s) {
    if ((s->hints & (LH_VECTOR | LH_REDUCTION)) == (LH_VECTOR | LH_REDUCTION)) {
        rloop(e, s);
        return;
    }
    if ((s->hints & LH_VECTOR) && e->par && (s->hints & LH_PARALLEL)) {
        /* a vector loop of a task's group: one step, run by the task whose range holds its
         * first lane (the cuts never fall inside it: kir_parallel_step) */
        LLVMBuilderRef B = e->B;
        LLVMValueRef lo = LLVMConstInt(e->idx, (unsigned long long)s->lo->i, 1);
        LLVMValueRef in = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLE, e->par_lo, lo, ""),
                                       LLVMBuildICmp(B, LLVMIntSLT, lo, e->par_hi, ""), "");
        LLVMBasicBlockRef run = block(e, "vector"), done = block(e, "vdone");
        LLVMBuildCondBr(B, in, run, done);
        LLVMPositionBuilderAtEnd(B, run);
        vloop(e, s);
        LLVMBuildBr(B, done);
        LLVMPositionBuilderAtEnd(B, done);
        return;
    }
    if (s->hints & LH_VECTOR) {
        vloop(e, s);
        return;
    }
    if (s->step <= 0) die("kernel %s: loop step %lld", e->k->name, (long long)s->step);
    LLVMValueRef lo = expr(e, s->lo, 0), hi = expr(e, s->hi, 0);      /* evaluated once, before */
    if (e->par && (s->hints & LH_PARALLEL)) {     /* a task's part of the group: its range */
        LLVMBuilderRef B = e->B;
        lo = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, e->par_lo, lo, ""), e->par_lo, lo, "");
        hi = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, e->par_hi, hi, ""), e->par_hi, hi, "");
    }
    Loop l = loop_begin(e, s->var, lo, hi, s->step);
    l.keep = loop_keep(e, s);
    /* A parallel group's loop runs over a task's range: unrolled or vectorised by LLVM, an
     * element would take the vector body or the remainder depending on the range, and the two
     * may contract multiply-adds differently; kept as it is, every element runs the same code
     * in every task, so NAME_run_par's outputs are bitwise NAME_run's. */
    if (e->par && (s->hints & LH_PARALLEL)) l.keep = l.novec = true;
    KRange saved = e->ranges[s->var];
    e->ranges[s->var] = kr_loop(s);
    vldm_groups(e, s);
    stmts(e, s->body);
    e->nruns = 0;
    e->ranges[s->var] = saved;
    loop_end(e, l);
}

/* ---- vector reductions (LH_REDUCTION | LH_VECTOR, kir.h) ----
 *   for v in lo..hi [reduction, vector]: r = r OP e(v)
 * becomes, for each accumulator r, U vectors of W lanes set to OP's identity; a loop of W*U
 * elements a step runs the body U times on vectors (copy c on elements v + c*W + lane, into
 * its own vectors); the whole vectors left over run straight after it. Then each register's
 * vectors are combined - the U vectors pairwise, then the two halves of the result until
 * one lane is left: a fixed tree, the same order on every run - and that lane is combined
 * with r's value from before the loop. The last n mod W elements run as the scalar loop, in
 * order. W: the lanes of the widest accumulator in one target vector; U: up to 4 chains of
 * vectors in all, so that the adds' latency overlaps. */

/* The identity of accumulation op on type t; -0.0 for float sums (-0 + x is x for every x,
 * where +0 would turn a sum of -0s into +0). */
static LLVMValueRef identity(Emitter *e, KOp op, DType t) {
    LLVMTypeRef ty = be_reg_type(e, t);
    if (is_float(t))
        return LLVMConstReal(ty, op == K_ADD ? -0.0 : op == K_MUL ? 1.0 : op == K_MAX ? -INFINITY : INFINITY);
    unsigned bits = LLVMGetIntTypeWidth(ty);
    unsigned long long top = 1ull << (bits - 1), ones = top | (top - 1);
    switch (op) {
    case K_ADD: return LLVMConstInt(ty, 0, 0);
    case K_MUL: return LLVMConstInt(ty, 1, 0);
    case K_MAX: return LLVMConstInt(ty, is_unsigned(t) ? 0 : top, 0);
    default: return LLVMConstInt(ty, is_unsigned(t) ? ones : top - 1, 0);
    }
}

/* a OP b, scalars or vectors, as binary() computes it. */
static LLVMValueRef accumulate(Emitter *e, KOp op, DType t, LLVMValueRef a, LLVMValueRef b) {
    bool f = is_float(t);
    switch (op) {
    case K_ADD: return f ? LLVMBuildFAdd(e->B, a, b, "") : LLVMBuildAdd(e->B, a, b, "");
    case K_MUL: return f ? LLVMBuildFMul(e->B, a, b, "") : LLVMBuildMul(e->B, a, b, "");
    default: return minmax(e, op == K_MAX, t, a, b);
    }
}

/* Lanes [lo, lo + n) of vector v. */
static LLVMValueRef lanes_of(Emitter *e, LLVMValueRef v, unsigned lo, unsigned n) {
    LLVMValueRef m[MAX_LANES];
    for (unsigned i = 0; i < n; i++) m[i] = LLVMConstInt(e->i32, lo + i, 0);
    return LLVMBuildShuffleVector(e->B, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(m, n), "");
}

/* The body once on the lanes of copy c: accumulator r in its vector accv[r * u + c]. */
static void reduction_copy(Emitter *e, Stmt *s, const KOp *acc, LLVMValueRef *accv, int u, int c) {
    for (int r = 0; r < e->k->nscalars; r++)
        if (acc[r] != K_COUNT) e->vreg[r] = accv[r * u + c];
    stmts(e, s->body);
}

/* Folds register r's u vectors of w lanes into its scalar. */
static void reduction_fold(Emitter *e, int r, KOp op, LLVMValueRef *accv, int u, unsigned w) {
    DType t = e->k->scalars[r];
    LLVMTypeRef vt = LLVMVectorType(be_reg_type(e, t), w);
    LLVMValueRef v[4];
    for (int c = 0; c < u; c++) v[c] = LLVMBuildLoad2(e->B, vt, accv[r * u + c], "");
    for (int m = u; m > 1; m = (m + 1) / 2) {
        for (int c = 0; c < m / 2; c++) v[c] = accumulate(e, op, t, v[2 * c], v[2 * c + 1]);
        if (m % 2) v[m / 2] = v[m - 1];
    }
    LLVMValueRef x = v[0];
    for (unsigned h = w / 2; h >= 1; h /= 2) x = accumulate(e, op, t, lanes_of(e, x, 0, h), lanes_of(e, x, h, h));
    x = LLVMBuildExtractElement(e->B, x, LLVMConstInt(e->i32, 0, 0), "");
    LLVMValueRef before = LLVMBuildLoad2(e->B, be_reg_type(e, t), e->scalars[r], "");
    LLVMBuildStore(e->B, accumulate(e, op, t, before, x), e->scalars[r]);
}

static void rloop(Emitter *e, Stmt *s) {
    Kernel *k = e->k;
    KOp *acc = ARENA_ARRAY(e->p->arena, KOp, k->nscalars + 1);
    if (s->lo->kind != E_CONST || s->hi->kind != E_CONST || s->step != 1 || e->vw ||
        !kir_reduction_form(k, s->body, acc, NULL, 0))
        die("kernel %s: malformed vector reduction over i%d", k->name, s->var);
    int64_t lo = s->lo->i, n = s->hi->i - lo;
    int nacc = 0, esz = 1;
    bool exact = false;
    for (int r = 0; r < k->nscalars; r++)
        if (acc[r] != K_COUNT) {
            DType t = k->scalars[r];
            nacc++;
            esz = MAX(esz, is_half(t) || dtype_is_minifloat(t) ? 4 : (int)dtype_size(t));
            exact |= is_float(t) && !e->contract;     /* -O0/-O1, --fp-strict: in order */
        }
    unsigned w = 1;
    while ((int)w * 2 * esz <= e->p->vector_bytes && w * 2 <= MAX_LANES) w *= 2;
    Stmt scalar = *s;
    scalar.hints &= ~(unsigned)LH_VECTOR;
    if (exact || w < 2 || n < (int64_t)w) {
        loop(e, &scalar);
        return;
    }
    int u = (int)MAX(1, MIN(4 / nacc, n / (int64_t)w));
    int64_t step = (int64_t)w * u, nmain = n / step * step, nvec = n / w * w;
    LLVMValueRef *accv = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nscalars * u + 1);
    for (int r = 0; r < k->nscalars; r++)
        for (int c = 0; acc[r] != K_COUNT && c < u; c++) {
            accv[r * u + c] = entry_alloca(e, LLVMVectorType(be_reg_type(e, k->scalars[r]), w));
            LLVMBuildStore(e->B, splat_const(identity(e, acc[r], k->scalars[r]), w), accv[r * u + c]);
        }
    e->vw = w;
    e->lanevar = s->var;
    KRange saved = e->ranges[s->var];
    e->ranges[s->var] = kr_loop(s);
    mark_sets(e, s->body, w);
    if (nmain > 0) {
        Loop l = loop_begin(e, s->var, LLVMConstInt(e->idx, (unsigned long long)lo, 1),
                            LLVMConstInt(e->idx, (unsigned long long)(lo + nmain), 1), step);
        e->lanebase = LLVMBuildLoad2(e->B, e->idx, e->vars[s->var], "");
        for (int c = 0; c < u; c++) {
            e->lanelo = (int64_t)w * c;
            reduction_copy(e, s, acc, accv, u, c);
        }
        e->lanebase = NULL;
        loop_end(e, l);
    }
    for (int64_t j = nmain; j < nvec; j += w) {
        e->lanelo = lo + j;
        reduction_copy(e, s, acc, accv, u, (int)((j - nmain) / w));
    }
    e->vw = 0;
    e->ranges[s->var] = saved;
    for (int r = 0; r < k->nscalars; r++) e->vreg[r] = NULL;
    for (int r = 0; r < k->nscalars; r++)
        if (acc[r] != K_COUNT) reduction_fold(e, r, acc[r], accv, u, w);
    if (nvec < n) {
        scalar.lo = kx_index(e->p, lo + nvec);
        loop(e, &scalar);
    }
}

/* ---- outlined epilogues ----
 * On a microcontroller (Target.small_code) the product kernels of a quantized model compute
 * each output's requantisation (int32 to float, scale, clamp, round, zero point: ~14
 * instructions, ~56 bytes on Cortex-M4) once per jammed accumulator and per rest piece: the
 * KWS int8 model's code had 31 copies, a third of it. In such a kernel (outlining_kernel) a
 * store's or register's value that rounds a float is a call of an internal helper computing
 * the expression from its leaves - loads, registers and loop variables, evaluated by the
 * caller and passed as arguments - one helper per shape of expression in the module, so
 * that every kernel with the same epilogue shares it. One-element constants (zero points)
 * stay in the helper as constants (folded), as they were folded into the inlined code.
 * The helper evaluates the same operations on the same values (no float multiply is
 * separated from the add it may contract with: they are never leaves), so the results are
 * bitwise the same. The call costs a few instructions per output, not per multiply-
 * accumulate: Cortex-M4, KWS int8 code 4.7 -> 3.7 KB, the pointwise convs' instructions
 * unchanged, the depthwise ones' 5.19 -> 5.29 per multiply-accumulate (5.12 once their
 * border pieces were gone: passes/schedule.c, size_first); more where an output sums few
 * products with many registers live (LeNet's first conv 3.05 -> 3.69). */
typedef struct Outlined {
    char *key;
    LLVMValueRef fn;
} Outlined;

enum { MAX_LEAVES = 8, MAX_LEAF_USES = 48, KEY_BYTES = 2048 };

typedef struct Shape {
    const Expr *leaf[MAX_LEAF_USES];    /* every leaf occurrence */
    int arg[MAX_LEAF_USES];             /* its argument */
    int nuse;
    const Expr *first[MAX_LEAVES];      /* the distinct leaves, one per argument */
    int nargs;
    char key[KEY_BYTES];
    size_t len;
    bool ok, round;
} Shape;

static void key_put(Shape *sh, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void key_put(Shape *sh, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sh->key + sh->len, sizeof sh->key - sh->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof sh->key - sh->len) sh->ok = false;
    else sh->len += (size_t)n;
}

/* A load of a one-element constant (a zero point), which a helper holds as a constant: the
 * code the caller had inlined folded it too (its clamp bounds). Not with --emit-weights,
 * whose blob may be another of the same layout. */
static bool folded(const Emitter *e, const Expr *x) {
    DType t = x->kind == E_LOAD ? x->buf->dtype : DT_FLOAT;
    return x->kind == E_LOAD && x->buf->kind == B_CONST && kir_numel(x->buf) == 1 && x->buf->data &&
           !e->p->weights_external &&
           (t == DT_UINT8 || t == DT_INT8 || t == DT_UINT16 || t == DT_INT16 || t == DT_INT32 || t == DT_FLOAT);
}

static LLVMValueRef folded_value(Emitter *e, const Expr *x) {
    const Buf *b = x->buf;
    const void *d = b->data;
    switch (b->dtype) {
    case DT_UINT8: return LLVMConstInt(e->i8, *(const uint8_t *)d, 0);
    case DT_INT8: return LLVMConstInt(e->i8, (unsigned long long)(int64_t)*(const int8_t *)d, 1);
    case DT_UINT16: return LLVMConstInt(e->i16, *(const uint16_t *)d, 0);
    case DT_INT16: return LLVMConstInt(e->i16, (unsigned long long)(int64_t)*(const int16_t *)d, 1);
    case DT_INT32: return LLVMConstInt(e->i32, (unsigned long long)(int64_t)*(const int32_t *)d, 1);
    case DT_FLOAT: return LLVMConstReal(e->f32, *(const float *)d);
    default: return NULL;
    }
}

/* The key of x's shape (operators, types, constants, folded values; leaves by argument
 * number) and its leaves. */
static void shape_of(Emitter *e, Shape *sh, const Expr *x) {
    if (!sh->ok) return;
    if (folded(e, x)) {
        const Buf *b = x->buf;
        key_put(sh, "k%d:", (int)b->dtype);
        for (size_t i = 0; i < kir_nbytes(b); i++) key_put(sh, "%02x", ((const unsigned char *)b->data)[i]);
        key_put(sh, " ");
        return;
    }
    if (x->kind == E_LOAD || x->kind == E_SCALAR || x->kind == E_VAR) {
        int a = 0;
        while (a < sh->nargs && !kx_equal(sh->first[a], x)) a++;
        if (a == sh->nargs) {
            if (a == MAX_LEAVES) { sh->ok = false; return; }
            sh->first[sh->nargs++] = x;
        }
        if (sh->nuse == MAX_LEAF_USES) { sh->ok = false; return; }
        sh->leaf[sh->nuse] = x;
        sh->arg[sh->nuse++] = a;
        key_put(sh, "a%d:%d ", a, (int)x->type);
        return;
    }
    if (x->kind == E_CONST) {
        key_put(sh, "c%d:%a:%lld ", (int)x->type, x->f, (long long)x->i);
        return;
    }
    if (x->kind == E_BIN && (x->op == K_DOT4 || x->op == K_DOT2)) sh->ok = false;
    sh->round |= x->kind == E_UN && x->op == K_ROUND && is_float(x->type);
    key_put(sh, "(%d.%d:%d ", (int)x->kind, (int)x->op, (int)x->type);
    for (int i = 0; i < x->nargs; i++) shape_of(e, sh, x->args[i]);
    key_put(sh, ") ");
}

static LLVMValueRef make_outlined(Emitter *e, Shape *sh, Expr *x, LLVMTypeRef *pt) {
    char *name = arena_printf(e->p->arena, "%s.epilogue%d", e->p->name, e->noutlined);
    LLVMValueRef fn = LLVMAddFunction(e->M, name, LLVMFunctionType(be_reg_type(e, x->type), pt, (unsigned)sh->nargs, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "noinline");
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "optsize");
    LLVMBasicBlockRef back = LLVMGetInsertBlock(e->B);
    LLVMValueRef kfn = e->fn, args[MAX_LEAF_USES];
    for (int i = 0; i < sh->nuse; i++) args[i] = LLVMGetParam(fn, (unsigned)sh->arg[i]);
    e->fn = fn;
    e->oleaf = sh->leaf;
    e->oarg = args;
    e->noleaf = sh->nuse;
    e->building = true;
    LLVMPositionBuilderAtEnd(e->B, block(e, "entry"));
    LLVMBuildRet(e->B, expr(e, x, 0));
    e->noleaf = 0;
    e->building = false;
    e->fn = kfn;
    LLVMPositionBuilderAtEnd(e->B, back);
    return fn;
}

/* Whether x is computed by a helper (its shape in *sh): in an outlining kernel, outside
 * vector loops, a value that rounds a float and has no dot4, and reads no 8-bit register.
 * Such a register holds an output already requantised (fuse.c's residual Add fused into its
 * conv, whose epilogue is the helper): the Add's requantisation after it stays inline, where
 * a second call per output took 22 instructions against 13 (on Cortex-M4 KWS int8's fused
 * pointwise convs 2.55 -> 2.4x per multiply-accumulate, for ~0.1 KB more code). */
static bool outlinable(Emitter *e, const Expr *x, Shape *sh) {
    if (!e->outline || e->vw) return false;
    sh->nuse = sh->nargs = 0;
    sh->len = 0;
    sh->key[0] = 0;
    sh->ok = true;
    sh->round = false;
    shape_of(e, sh, x);
    for (int i = 0; sh->ok && i < sh->nargs; i++)
        if (sh->first[i]->kind == E_SCALAR && dtype_size(sh->first[i]->type) == 1 && sh->first[i]->type != DT_BOOL) return false;
    return sh->ok && sh->round;
}

/* Whether a statement of list s calls an outlined helper. */
static bool calls_outlined(Emitter *e, const Stmt *s) {
    Shape sh;
    for (; s; s = s->next)
        if (((s->kind == S_STORE || s->kind == S_SET) && outlinable(e, s->val, &sh)) || calls_outlined(e, s->body) ||
            calls_outlined(e, s->then) || calls_outlined(e, s->els))
            return true;
    return false;
}

/* The value of x as a call of its helper (made on first use), or NULL where x stays inline. */
static LLVMValueRef outline(Emitter *e, Expr *x) {
    Shape *sh = ARENA_NEW(e->p->arena, Shape);
    if (!outlinable(e, x, sh)) return NULL;
    LLVMValueRef av[MAX_LEAVES];
    LLVMTypeRef pt[MAX_LEAVES];
    for (int a = 0; a < sh->nargs; a++) {
        av[a] = expr(e, (Expr *)sh->first[a], 0);
        pt[a] = LLVMTypeOf(av[a]);
    }
    LLVMValueRef fn = NULL;
    for (int i = 0; i < e->noutlined && !fn; i++)
        if (!strcmp(e->outlined[i].key, sh->key)) fn = e->outlined[i].fn;
    if (!fn) {
        fn = make_outlined(e, sh, x, pt);
        Outlined *o = ARENA_ARRAY(e->p->arena, Outlined, e->noutlined + 1);
        if (e->noutlined) memcpy(o, e->outlined, sizeof *o * (size_t)e->noutlined);
        o[e->noutlined++] = (Outlined){arena_printf(e->p->arena, "%s", sh->key), fn};
        e->outlined = o;
    }
    return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(fn), fn, av, (unsigned)sh->nargs, "");
}

/* The w lanes of v stored with lane coefficient c, 2 <= c <= MAX_SHUFFLE_STRIDE (the phases
 * of a ConvTranspose interleaved into its output): c masked stores of whole vectors over the
 * c*(w-1) + 1 elements from the first lane's, each lane shuffled to its place and only those
 * places enabled, where a scatter stores lane by lane (the interleaving kernel of a stride-2
 * ConvTranspose ran ~2x faster so). Masked-off places are not accessed, and every piece starts
 * at an element some lane stores, inside the buffer. */
static void strided_store(Emitter *e, Buf *b, Expr **idx, int64_t c, unsigned w, LLVMValueRef v) {
    LLVMTypeRef mt = be_mem_type(e, b->dtype);
    unsigned align = elem_align(e, b->dtype), n = (unsigned)c * (w - 1) + 1;
    LLVMValueRef base = elem_ptr(e, b, idx, 0);
    /* c >= w (a narrow rest vector of a phase's row, 3 or 4 lanes 4 apart): each piece would
     * enable one lane, so w plain stores of one element; the masked stores of such pieces,
     * unrolled by LLVM over a tiny 3-d ConvTranspose's rows (470 of them), took the X86 DAG
     * combiner's store analysis 3.5-4.4 s, the plain stores 0.1 s */
    if ((unsigned)c >= w) {
        for (unsigned i = 0; i < w; i++) {
            LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)c * i, 0);
            LLVMValueRef x = LLVMBuildExtractElement(e->B, v, LLVMConstInt(e->i32, i, 0), "");
            LLVMSetAlignment(LLVMBuildStore(e->B, x, LLVMBuildInBoundsGEP2(e->B, mt, base, &off, 1, "")), align);
        }
        return;
    }
    for (unsigned j = 0; j * w < n; j++) {
        LLVMValueRef k[MAX_LANES], on[MAX_LANES];
        for (unsigned i = 0; i < w; i++) {
            unsigned pos = j * w + i;
            bool mine = pos % c == 0 && pos / c < w;
            k[i] = LLVMConstInt(e->i32, mine ? pos / c : 0, 0);
            on[i] = LLVMConstInt(e->i1, mine, 0);
        }
        LLVMValueRef off = LLVMConstInt(e->idx, j * w, 0);
        LLVMValueRef ptr = LLVMBuildInBoundsGEP2(e->B, mt, base, &off, 1, "");
        LLVMValueRef piece = LLVMBuildShuffleVector(e->B, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(k, w), "");
        LLVMTypeRef tys[2] = {LLVMTypeOf(v), LLVMTypeOf(ptr)};
        LLVMValueRef args[4] = {piece, ptr, LLVMConstInt(e->i32, align, 0), LLVMConstVector(on, w)};
        call_intrinsic(e, "llvm.masked.store", tys, 2, args, 4);
    }
}

/* Whether x reads buffer b (or a view of its storage). */
static bool reads_buf(const Expr *x, Buf *b) {
    if (x->kind == E_LOAD && kir_root(x->buf) == kir_root(b)) return true;
    for (int i = 0; i < x->nargs; i++)
        if (reads_buf(x->args[i], b)) return true;
    return false;
}

/* In a vector loop, c consecutive stores b[.., v*c + j] = val_j, j = 0 .. c-1, 2 <= c <=
 * MAX_SHUFFLE_STRIDE or c = MAX_INTERLEAVE (the phases of a ConvTranspose side by side in its interleaving kernel,
 * tile rows of a phase conv): together they fill the c*w elements from the first one's, so
 * their values are interleaved by shuffles and written as c whole vectors, where each store
 * alone took c masked stores (a stride-2 ConvTranspose's interleave 4 masked stores per 2
 * vectors). Only float buffers stored as they are, and values that do not read b (the stores
 * then commute with them). Returns how many statements it wrote, 0 where it does not apply. */
/* The c vectors v (c a power of two, w lanes each, w even), taken as c sequences, interleaved
 * into out: out's element pos is v[pos % c]'s lane pos / c. The even and the odd sequences are
 * interleaved first, then each output vector is one two-source shuffle of a vector of each:
 * log2(c) * c shuffles (24 for the 8 phases of a stride-8 ConvTranspose), where one shuffle of
 * all c vectors concatenated left LLVM a permute per source vector and output. */
static void interleave_vectors(Emitter *e, LLVMValueRef *v, unsigned c, unsigned w, LLVMValueRef *out) {
    if (c == 1) {
        out[0] = v[0];
        return;
    }
    LLVMValueRef ev[MAX_INTERLEAVE], od[MAX_INTERLEAVE], E[MAX_INTERLEAVE], O[MAX_INTERLEAVE], k[MAX_LANES];
    for (unsigned j = 0; j < c / 2; j++) ev[j] = v[2 * j], od[j] = v[2 * j + 1];
    interleave_vectors(e, ev, c / 2, w, E);
    interleave_vectors(e, od, c / 2, w, O);
    for (unsigned t = 0; t < c; t++) {
        for (unsigned i = 0; i < w; i++)
            k[i] = LLVMConstInt(e->i32, (i % 2 ? w : 0) + (t % 2) * (w / 2) + i / 2, 0);
        out[t] = LLVMBuildShuffleVector(e->B, E[t / 2], O[t / 2], LLVMConstVector(k, w), "");
    }
}

static int interleaved_stores(Emitter *e, Stmt *s) {
    Buf *b = s->buf;
    unsigned w = e->vw, align = elem_align(e, b->dtype);
    if (!w || (b->dtype != DT_FLOAT && b->dtype != DT_DOUBLE) || b->rank < 1) return 0;
    Expr **i0 = simple_idx(e, b, s->idx);
    int64_t c = lane_coef(e, b, i0);
    int last = b->rank - 1;
    if (c == NOT_AFFINE || c < 2 || (c > MAX_SHUFFLE_STRIDE && (c != MAX_INTERLEAVE || w % 2))) return 0;
    Stmt *st[MAX_INTERLEAVE] = {s};
    for (int j = 1; j < c; j++) {
        Stmt *t = st[j - 1]->next;
        if (!t || t->kind != S_STORE || t->buf != b) return 0;
        Expr **ij = simple_idx(e, b, t->idx);
        if (lane_coef(e, b, ij) != c || !index_apart(i0[last], ij[last], j)) return 0;
        for (int d = 0; d < last; d++)
            if (!kx_equal(i0[d], ij[d])) return 0;
        st[j] = t;
    }
    for (int j = 0; j < c; j++)
        if (reads_buf(st[j]->val, b) || !varying(e, st[j]->val)) return 0;
    LLVMValueRef v[MAX_INTERLEAVE], k[MAX_SHUFFLE_STRIDE * MAX_LANES];
    for (int j = 0; j < c; j++) v[j] = expr(e, st[j]->val, w);
    LLVMTypeRef mt = be_mem_type(e, b->dtype);
    LLVMValueRef base = elem_ptr(e, b, i0, 0);
    if (c > MAX_SHUFFLE_STRIDE) {
        LLVMValueRef out[MAX_INTERLEAVE];
        interleave_vectors(e, v, (unsigned)c, w, out);
        for (unsigned p = 0; p < (unsigned)c; p++) {
            LLVMValueRef off = LLVMConstInt(e->idx, p * w, 0);
            LLVMSetAlignment(LLVMBuildStore(e->B, out[p], LLVMBuildInBoundsGEP2(e->B, mt, base, &off, 1, "")), align);
        }
        return (int)c;
    }
    /* the c vectors concatenated (a power-of-two count, poison past c) */
    for (unsigned i = 0; i < 2 * w; i++) k[i] = LLVMConstInt(e->i32, i, 0);
    LLVMValueRef lo = LLVMBuildShuffleVector(e->B, v[0], v[1], LLVMConstVector(k, 2 * w), ""), cat = lo;
    if (c > 2) {
        LLVMValueRef hi = LLVMBuildShuffleVector(e->B, v[2], c > 3 ? v[3] : LLVMGetPoison(LLVMTypeOf(v[2])),
                                                 LLVMConstVector(k, 2 * w), "");
        for (unsigned i = 0; i < 4 * w; i++) k[i] = LLVMConstInt(e->i32, i, 0);
        cat = LLVMBuildShuffleVector(e->B, lo, hi, LLVMConstVector(k, 4 * w), "");
    }
    for (unsigned p = 0; p < (unsigned)c; p++) {
        for (unsigned i = 0; i < w; i++) {
            unsigned pos = p * w + i;                 /* element pos: vector pos % c, lane pos / c */
            k[i] = LLVMConstInt(e->i32, (pos % (unsigned)c) * w + pos / (unsigned)c, 0);
        }
        LLVMValueRef piece = LLVMBuildShuffleVector(e->B, cat, LLVMGetPoison(LLVMTypeOf(cat)), LLVMConstVector(k, w), "");
        LLVMValueRef off = LLVMConstInt(e->idx, p * w, 0);
        LLVMValueRef sto = LLVMBuildStore(e->B, piece, LLVMBuildInBoundsGEP2(e->B, mt, base, &off, 1, ""));
        LLVMSetAlignment(sto, align);
    }
    return (int)c;
}

/* In a vector loop: a contiguous store, a scatter, or - when every lane stores to the same
 * element - the last lane's value, which is what running the lanes in order leaves. */
static void store(Emitter *e, Stmt *s) {
    Buf *b = s->buf;
    unsigned w = e->vw, align = elem_align(e, b->dtype);
    Expr **idx = simple_idx(e, b, s->idx);
    int64_t c = w ? lane_coef(e, b, idx) : 0;
    LLVMValueRef v = w ? NULL : outline(e, s->val);
    if (!v && c) v = pack_requant(e, s->val, w);
    if (!v && c) v = magic_requant(e, s->val, w);
    if (!v) v = expr(e, s->val, c ? w : 0);
    if (c == 0 && varying(e, s->val))
        v = LLVMBuildExtractElement(e->B, expr(e, s->val, w), LLVMConstInt(e->i32, w - 1, 0), "");
    if (b->dtype == DT_BOOL) v = LLVMBuildZExt(e->B, v, like(v, e->i8), "");
    if (is_half(b->dtype)) v = float_to_half(e, b->dtype, v);
    if (dtype_is_minifloat(b->dtype)) v = f8_to_bits(e, b->dtype, v);
    if (kir_root(b)->nibbles) {
        nibble_store(e, b, idx, v, w, c);
        return;
    }
    if (c == 0 || c == 1) {
        LLVMValueRef st = LLVMBuildStore(e->B, v, elem_ptr(e, b, idx, 0));
        LLVMSetAlignment(st, align);
        return;
    }
    if (c != NOT_AFFINE && c >= 2 && c <= MAX_SHUFFLE_STRIDE) {
        strided_store(e, b, idx, c, w, v);
        return;
    }
    LLVMValueRef ptrs = lane_ptrs(e, b, idx, c, w);
    LLVMTypeRef tys[2] = {LLVMTypeOf(v), LLVMTypeOf(ptrs)};
    LLVMValueRef args[4] = {v, ptrs, LLVMConstInt(e->i32, align, 0), all_lanes(e, w)};
    call_intrinsic(e, "llvm.masked.scatter", tys, 2, args, 4);
}

static void set(Emitter *e, Stmt *s) {
    if (e->vw && e->vreg[s->var]) LLVMBuildStore(e->B, expr(e, s->val, e->vw), e->vreg[s->var]);
    else {
        LLVMValueRef v = outline(e, s->val);
        LLVMBuildStore(e->B, v ? v : expr(e, s->val, 0), e->scalars[s->var]);
    }
}

static void cond(Emitter *e, Stmt *s) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef c = expr(e, s->cond, 0);
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
        case S_STORE: {
            int used = interleaved_stores(e, s);
            if (!used) store(e, s);
            for (int j = 1; j < used; j++) s = s->next;
            break;
        }
        case S_SET: set(e, s); break;
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

/* The attributes of the LLVM params: pos[i] is param i's position (1-based), cpos the
 * constant block's (0: none), which is read-only and apart from everything else. */
static void param_attrs(Emitter *e, Kernel *k, LLVMValueRef fn, const unsigned *pos, unsigned cpos) {
    if (cpos) {
        be_enum_attr(e, fn, cpos, "nocapture");
        be_enum_attr(e, fn, cpos, "readonly");
        be_enum_attr(e, fn, cpos, "noalias");
    }
    for (int i = 0; i < k->nparams; i++) {
        if (be_in_block(e, k->params[i])) continue;
        unsigned at = pos[i];
        be_enum_attr(e, fn, at, "nocapture");
        if (k->modes[i] == KP_IN) be_enum_attr(e, fn, at, "readonly");
        bool alone = true;
        for (int j = 0; j < k->nparams && alone; j++)
            if (j != i && may_overlap(k->params[i], k->params[j])) alone = false;
        if (alone) be_enum_attr(e, fn, at, "noalias");
    }
}

bool be_small_quantized(const Emitter *e, const Kernel *k) {
    return e->t->small_code && e->p->opt_level >= 2 && kir_byte_kernel(k);
}

/* Whether kernel k is compiled for size: on a microcontroller (Target.small_code), a kernel of
 * a quantized model (one with 8-bit integer data; the byte kernels of string models too) that
 * does no multiply-accumulate (pads, im2col, pools, (de)quantisations, Relu: little of the
 * time), kept out of line so that NAME_run, into which the products are inlined, stays -O2
 * (optsize on NAME_run slowed the dense layers by 10-20%: their operands' addresses are
 * constants there). LLVM then does not unroll its loops. Cortex-M4: the KWS
 * int8 model's code 6.7 -> 5.8 KB with 0.3% fewer instructions, lenet_qop's 5.6 -> 4.8 KB and
 * 3% more; the float models' kernels stay as they were (on the sample models this policy
 * cost them 5-10% more instructions for 5-10% less flash). */
static bool small_kernel(Emitter *e, Kernel *k) {
    int64_t macs, bytes;
    kir_kernel_cost(k, &macs, &bytes);
    return macs == 0 && be_small_quantized(e, k);
}

/* Whether kernel k calls its epilogues (outline): on a microcontroller, at -O2 and up, a
 * contraction of a quantized model that multiplies and accumulates (a conv or dense layer,
 * whose register tile repeats the epilogue; an elementwise kernel has one copy, which a call
 * would only slow down: KWS's residual Adds 22 instructions per element inline, 32
 * called). */
static bool outlining_kernel(Emitter *e, Kernel *k) {
    if (k->kclass != KC_CONTRACTION) return false;
    int64_t macs, bytes;
    kir_kernel_cost(k, &macs, &bytes);
    return macs > 0 && be_small_quantized(e, k);
}

/* The function of kernel k: void(ptr param0, ...) and the constant block's pointer; with
 * `par` (the first loop of its LH_PARALLEL group) a part of it, two index parameters more:
 * the range of the group's variable it runs (be_kernel_task). */
static LLVMValueRef kernel_fn(Emitter *e, Kernel *k, const Stmt *par) {
    LLVMTypeRef *pt = ARENA_ARRAY(e->p->arena, LLVMTypeRef, k->nparams + 3);
    unsigned *pos = ARENA_ARRAY(e->p->arena, unsigned, k->nparams + 1), n = 0, cpos = 0;
    for (int i = 0; i < k->nparams; i++)
        if (!be_in_block(e, k->params[i])) pos[i] = ++n;
    if (e->kblock[k->id]) cpos = ++n;
    for (unsigned i = 0; i < n; i++) pt[i] = e->ptr;
    if (par) pt[n] = pt[n + 1] = e->idx;
    LLVMTypeRef fty = LLVMFunctionType(e->voidt, pt, n + (par ? 2 : 0), 0);
    char *name = arena_printf(e->p->arena, "%s.k%d.%s%s", e->p->name, k->id, k->name, par ? ".part" : "");
    LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    if (small_kernel(e, k)) {
        be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "noinline");
        be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "optsize");
    }
    param_attrs(e, k, fn, pos, cpos);
    e->k = k;
    e->fn = fn;
    e->par = par;
    e->par_lo = par ? LLVMGetParam(fn, n) : NULL;
    e->par_hi = par ? LLVMGetParam(fn, n + 1) : NULL;
    LLVMPositionBuilderAtEnd(e->B, block(e, "entry"));
    e->pval = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nparams + 1);
    if (cpos) LLVMSetValueName2(LLVMGetParam(fn, cpos - 1), "consts", 6);
    for (int i = 0; i < k->nparams; i++) {
        const char *pn = k->params[i]->name;
        if (be_in_block(e, k->params[i])) {
            LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)e->block_at[kir_root(k->params[i])->id], 0);
            e->pval[i] = LLVMBuildInBoundsGEP2(e->B, e->i8, LLVMGetParam(fn, cpos - 1), &off, 1, pn);
        } else {
            e->pval[i] = LLVMGetParam(fn, pos[i] - 1);
            LLVMSetValueName2(e->pval[i], pn, strlen(pn));
        }
    }
    e->vars = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nvars + 1);
    e->ranges = ARENA_ARRAY(e->p->arena, KRange, k->nvars + 1);     /* zeroed: unknown */
    e->scalars = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nscalars + 1);
    for (int i = 0; i < k->nvars; i++) e->vars[i] = LLVMBuildAlloca(e->B, e->idx, "");
    for (int i = 0; i < k->nscalars; i++)
        e->scalars[i] = LLVMBuildAlloca(e->B, be_reg_type(e, k->scalars[i]), "");
    e->vreg = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nscalars + 1);
    e->vcache = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nscalars + 1);
    e->vcache_w = ARENA_ARRAY(e->p->arena, unsigned, k->nscalars + 1);
    e->vw = 0;
    e->lanebase = NULL;
    e->contract = e->p->opt_level >= 2 && !e->p->fp_strict;
    e->outline = outlining_kernel(e, k);
    stmts(e, k->body);
    LLVMBuildRetVoid(e->B);
    e->k = NULL;
    e->par = NULL;
    return fn;
}

/* A kernel with a parallel group (kir_parallel_loop): its code once, as the part function
 * (kernel_fn with the group's range as two more parameters, kept out of line with its
 * parameters' alias attributes), called by the kernel function with the group's whole range
 * and by the task function void task(ptr args, i32 t) with the range from cut t to cut t + 1
 * (kir_parallel_cuts, a constant table; args holds the parameters in order). NAME_run and the
 * tasks of NAME_run_par thus run the same code on every element. Returns the kernel function;
 * *task gets the task function. */
static LLVMValueRef kernel_parallel(Emitter *e, Kernel *k, const Stmt *s, LLVMValueRef *task) {
    if (e->kblock[k->id]) die("kernel %s: a constant block and a parallel loop", k->name);
    LLVMValueRef part = kernel_fn(e, k, s);
    be_enum_attr(e, part, LLVMAttributeFunctionIndex, "noinline");
    LLVMTypeRef pty = LLVMGlobalGetValueType(part);
    LLVMBuilderRef B = e->B;
    int64_t n = s->tasks;
    int64_t *cuts = ARENA_ARRAY(e->p->arena, int64_t, n + 1);
    kir_parallel_cuts(s, cuts);
    LLVMValueRef *args = ARENA_ARRAY(e->p->arena, LLVMValueRef, k->nparams + 2);

    /* the kernel: the part over the whole range */
    LLVMTypeRef *pt = ARENA_ARRAY(e->p->arena, LLVMTypeRef, k->nparams + 1);
    for (int i = 0; i < k->nparams; i++) pt[i] = e->ptr;
    LLVMValueRef whole = LLVMAddFunction(e->M, arena_printf(e->p->arena, "%s.k%d.%s", e->p->name, k->id, k->name),
                                         LLVMFunctionType(e->voidt, pt, (unsigned)k->nparams, 0));
    LLVMSetLinkage(whole, LLVMInternalLinkage);
    be_fn_attrs(e, whole);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(e->C, whole, "entry"));
    for (int i = 0; i < k->nparams; i++) args[i] = LLVMGetParam(whole, (unsigned)i);
    args[k->nparams] = LLVMConstInt(e->idx, (unsigned long long)cuts[0], 1);
    args[k->nparams + 1] = LLVMConstInt(e->idx, (unsigned long long)cuts[n], 1);
    LLVMBuildCall2(B, pty, part, args, (unsigned)k->nparams + 2, "");
    LLVMBuildRetVoid(B);

    /* the task */
    LLVMTypeRef at[2] = {e->ptr, e->i32};
    LLVMValueRef fn = LLVMAddFunction(e->M, arena_printf(e->p->arena, "%s.k%d.%s.task", e->p->name, k->id, k->name),
                                      LLVMFunctionType(e->voidt, at, 2, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    LLVMValueRef arr = LLVMGetParam(fn, 0);
    for (int i = 0; i < k->nparams; i++) {
        LLVMValueRef ix = LLVMConstInt(e->idx, (unsigned long long)i, 0);
        args[i] = LLVMBuildLoad2(B, e->ptr, LLVMBuildInBoundsGEP2(B, e->ptr, arr, &ix, 1, ""), k->params[i]->name);
    }
    LLVMValueRef *cv = ARENA_ARRAY(e->p->arena, LLVMValueRef, n + 1);
    for (int64_t i = 0; i <= n; i++) cv[i] = LLVMConstInt(e->idx, (unsigned long long)cuts[i], 1);
    LLVMValueRef tab = LLVMAddGlobal(e->M, LLVMArrayType2(e->idx, (uint64_t)n + 1), "cuts");
    LLVMSetInitializer(tab, LLVMConstArray2(e->idx, cv, (uint64_t)n + 1));
    LLVMSetGlobalConstant(tab, 1);
    LLVMSetLinkage(tab, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(tab, LLVMGlobalUnnamedAddr);
    LLVMValueRef t = LLVMBuildZExt(B, LLVMGetParam(fn, 1), e->idx, "t");
    LLVMValueRef t1 = LLVMBuildNUWAdd(B, t, LLVMConstInt(e->idx, 1, 0), "");
    args[k->nparams] = LLVMBuildLoad2(B, e->idx, LLVMBuildInBoundsGEP2(B, e->idx, tab, &t, 1, ""), "lo");
    args[k->nparams + 1] = LLVMBuildLoad2(B, e->idx, LLVMBuildInBoundsGEP2(B, e->idx, tab, &t1, 1, ""), "hi");
    LLVMBuildCall2(B, pty, part, args, (unsigned)k->nparams + 2, "");
    LLVMBuildRetVoid(B);
    *task = fn;
    return whole;
}

LLVMValueRef be_kernel(Emitter *e, Kernel *k, LLVMValueRef *task) {
    const Stmt *s = task ? kir_parallel_loop(k) : NULL;
    if (task) *task = NULL;
    return s ? kernel_parallel(e, k, s, task) : kernel_fn(e, k, NULL);
}
