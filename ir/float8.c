/* float8.c - the four 8-bit float types of ONNX (opset 19): their bit patterns to float and
 * back. One definition for the interpreter (kinterp.c), the constants (ir.c) and the backend,
 * which builds its load table from f8_decode and emits f8_encode's steps as LLVM integer
 * operations (backend/kernel.c, f8_to_bits), so that folding and generated code agree.
 *
 *   type        exponent bias  largest finite  NaN           infinity  -0
 *   e4m3fn      4 bits   7     448 (0x7e)      0x7f, 0xff    none      yes
 *   e4m3fnuz    4 bits   8     240 (0x7f)      0x80          none      no
 *   e5m2        5 bits   15    57344 (0x7b)    0x7d-0x7f...  0x7c      yes
 *   e5m2fnuz    5 bits   16    57344 (0x7f)    0x80          none      no
 *
 * Conversion from float (kir.h's K_CAST and stores) rounds to nearest even and saturates a
 * finite value past the largest one to it; an infinity stays one in e5m2 and saturates in
 * the others. Cast-19's `saturate` asks for more than that and the rules add it with
 * selects (rule_float8_cast): saturating, e5m2's infinities become its largest value too;
 * not saturating, what rounds past the largest value is infinity (e5m2) or NaN.
 *
 * float4e2m1 (opset 23) is the same arithmetic on a 4-bit code, its sign at bit 3: exponent
 * 2 bits, bias 1, mantissa 1 bit, values 0, 0.5, 1, 1.5, 2, 3, 4, 6; no infinity or NaN.
 * Conversion rounds to nearest even and always saturates: past 6 and infinities to +-6, and
 * NaN to +6 (the table of ONNX's float4 document).
 *
 * float8e8m0 (opset 24, the scales of the MX formats): 2^(code - 127), code 0xff NaN; no sign,
 * no zero. Its encoder (e8m0_encode) keeps the float32 exponent and rounds by round_mode, as
 * onnx's reference does, except that 2^-127 itself is code 0 (the reference rounds it up to
 * 2^-126 in mode up: not what a value held in a register may do between two stores). */
#include "ir.h"

#include <math.h>
#include <string.h>

bool dtype_is_float8(DType t) {
    return t == DT_FLOAT8E4M3FN || t == DT_FLOAT8E4M3FNUZ || t == DT_FLOAT8E5M2 || t == DT_FLOAT8E5M2FNUZ;
}

bool dtype_is_minifloat(DType t) { return dtype_is_float8(t) || t == DT_FLOAT4E2M1 || t == DT_FLOAT8E8M0; }

uint8_t e8m0_encode(float x, bool saturate, int round_mode) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t e = (u >> 23) & 0xff, frac = u & 0x7fffff;
    if (e == 0xff) return 0xff;
    /* 2^-127, code 0, is a float32 subnormal (a fraction, no exponent), which rounding up
     * would take to 2^-126: the value a register holds for code 0 must encode to code 0 */
    if ((u & 0x7fffffff) == 0x00400000) return 0;
    bool up = round_mode == E8M0_UP ? frac != 0
            : round_mode == E8M0_NEAREST ? (frac >> 22) && ((frac & 0x3fffff) || e > 0) : false;
    if (saturate && e == 0xfe) up = false;
    return (uint8_t)(e + up);
}

F8Format f8_format(DType t) {
    switch (t) {
    case DT_FLOAT8E4M3FN: return (F8Format){3, 7, 0x7e, 0x7f, false, false, 464.0f, false, 7, false};
    case DT_FLOAT8E4M3FNUZ: return (F8Format){3, 8, 0x7f, 0x80, true, false, 248.0f, true, 7, false};
    case DT_FLOAT8E5M2: return (F8Format){2, 15, 0x7b, 0x7f, false, true, 61440.0f, true, 7, false};
    case DT_FLOAT8E5M2FNUZ: return (F8Format){2, 16, 0x7f, 0x80, true, false, 61440.0f, true, 7, false};
    case DT_FLOAT4E2M1: return (F8Format){1, 1, 0x7, 0x7, false, false, 7.0f, true, 3, true};
    default: die("f8_format of %s", dtype_name(t));
    }
}

float f8_decode(DType t, uint8_t b) {
    if (t == DT_FLOAT8E8M0) return b == 0xff ? __builtin_nanf("") : ldexpf(1.0f, (int)b - 127);
    F8Format f = f8_format(t);
    unsigned ones = (1u << f.sbit) - 1;
    unsigned sign = (b >> f.sbit) & 1, mag = b & ones, e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
    float v;
    if (!f.nonan && (f.uz ? b == 0x80 : (f.inf ? e == (1u << (f.sbit - f.mbits)) - 1 && m : mag == ones)))
        return sign && !f.uz ? -__builtin_nanf("") : __builtin_nanf("");
    if (f.inf && mag == 0x7c) v = __builtin_inff();
    else if (e == 0) v = ldexpf((float)m, 1 - f.bias - f.mbits);
    else v = ldexpf((float)(m | 1u << f.mbits), (int)e - f.bias - f.mbits);
    return sign ? -v : v;
}

/* The steps of backend/kernel.c's f8_to_bits, on one value: rounded to nearest even, a
 * finite value past the largest one saturated to it, an infinity kept by e5m2 and
 * saturated by the others (which have none). */
uint8_t f8_encode(DType t, float x) {
    if (t == DT_FLOAT8E8M0) return e8m0_encode(x, true, E8M0_UP);
    F8Format f = f8_format(t);
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> (31 - f.sbit)) & (1u << f.sbit), a = u & 0x7fffffffu, mag;
    if (a > 0x7f800000u) return (uint8_t)(f.uz || f.nonan ? f.nan : f.nan | sign);
    int emin = 1 - f.bias;
    if (a < (uint32_t)(127 + emin) << 23) {
        /* below the smallest normal: adding 2^(emin - mbits + 23), whose ulp is the
         * subnormal step, rounds to a multiple of it (to nearest even, in float32) */
        uint32_t cb = (uint32_t)(127 + emin - f.mbits + 23) << 23;
        float c, s, ax;
        memcpy(&c, &cb, 4);
        memcpy(&ax, &a, 4);
        s = ax + c;
        uint32_t sb;
        memcpy(&sb, &s, 4);
        mag = sb - cb;
    } else {
        unsigned sh = 23 - (unsigned)f.mbits;
        uint32_t r = a + ((1u << (sh - 1)) - 1) + ((a >> sh) & 1);
        mag = (r >> sh) - ((uint32_t)(127 - f.bias) << f.mbits);
    }
    if (a == 0x7f800000u && f.inf) mag = 0x7c;
    else if (mag > f.maxmag) mag = f.maxmag;
    if (f.uz && mag == 0) sign = 0;
    return (uint8_t)(sign | mag);
}
