/* math.c - the kernel IR's math operators as plain float arithmetic, never libm calls.
 *
 * The generated code must link into firmware without a libm, and the host object must import
 * nothing but memcpy/memset, so exp, log, tanh, sigmoid, erf, pow, floor, ceil, round, float
 * remainder and the (inverse) trigonometric and hyperbolic functions are built here from +, *,
 * /, sqrt, compares, selects and bit tricks on the IEEE representation. Each becomes an internal always-inline helper (one per op and float type,
 * created on first use) so the vectoriser sees straight-line code after inlining.
 *
 * The same algorithms serve float and double with more polynomial terms for double (doubles
 * are used only when the model has double data: Cortex-M4 has no double FPU). Accuracy is
 * about 1-2 ulp for float (sin/cos/tan up to 5 ulp, and only for |x| < 1e5: see
 * reduce_pio2). No llvm.exp/log/pow/floor intrinsics: LLVM lowers some of them to
 * libm calls on some targets. llvm.fabs and llvm.copysign are bit operations everywhere. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Code-building state for one helper: the builder and the float type's parameters. */
typedef struct M {
    Emitter *e;
    LLVMBuilderRef b;
    LLVMTypeRef F, I;               /* float type and the integer of the same width */
    bool dbl;
    int mant, bias;                 /* 23/127 or 52/1023 */
} M;

typedef LLVMValueRef V;

static V fk(M *m, double v) { return LLVMConstReal(m->F, v); }
static V ik(M *m, long long v) {
    if (LLVMGetTypeKind(m->I) != LLVMVectorTypeKind) return LLVMConstInt(m->I, (unsigned long long)v, 1);
    V lanes[MAX_LANES], c = LLVMConstInt(LLVMGetElementType(m->I), (unsigned long long)v, 1);
    unsigned w = LLVMGetVectorSize(m->I);
    for (unsigned i = 0; i < w; i++) lanes[i] = c;
    return LLVMConstVector(lanes, w);
}
static V add(M *m, V a, V b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static V sub(M *m, V a, V b) { return LLVMBuildFSub(m->b, a, b, ""); }
static V mul(M *m, V a, V b) { return LLVMBuildFMul(m->b, a, b, ""); }
static V fdiv(M *m, V a, V b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static V sel(M *m, V c, V a, V b) { return LLVMBuildSelect(m->b, c, a, b, ""); }
static V cmp(M *m, LLVMRealPredicate p, V a, V b) { return LLVMBuildFCmp(m->b, p, a, b, ""); }
static V icmp(M *m, LLVMIntPredicate p, V a, V b) { return LLVMBuildICmp(m->b, p, a, b, ""); }
static V isnan_(M *m, V x) { return cmp(m, LLVMRealUNO, x, x); }
static V and_(M *m, V a, V b) { return LLVMBuildAnd(m->b, a, b, ""); }
static V or_(M *m, V a, V b) { return LLVMBuildOr(m->b, a, b, ""); }
static V bits(M *m, V x) { return LLVMBuildBitCast(m->b, x, m->I, ""); }
static V unbits(M *m, V i) { return LLVMBuildBitCast(m->b, i, m->F, ""); }
static V toint(M *m, V x) { return LLVMBuildFPToSI(m->b, x, m->I, ""); }
static V tofloat(M *m, V i) { return LLVMBuildSIToFP(m->b, i, m->F, ""); }

static V intrinsic(M *m, const char *name, V *args, int n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (!id) die("no intrinsic %s", name);
    LLVMTypeRef tys[1] = {m->F};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(m->e->M, id, tys, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(m->e->C, id, tys, 1);
    return LLVMBuildCall2(m->b, fty, fn, args, (unsigned)n, "");
}
static V fabs_(M *m, V x) { return intrinsic(m, "llvm.fabs", &x, 1); }
static V copysign_(M *m, V mag, V sign) { V a[2] = {mag, sign}; return intrinsic(m, "llvm.copysign", a, 2); }

/* lo <= x <= hi (NaN passes through: ordered compares are false). */
static V clamp(M *m, V x, double lo, double hi) {
    x = sel(m, cmp(m, LLVMRealOLT, x, fk(m, lo)), fk(m, lo), x);
    return sel(m, cmp(m, LLVMRealOGT, x, fk(m, hi)), fk(m, hi), x);
}

static V iclamp(M *m, V n, long long lo, long long hi) {
    n = sel(m, icmp(m, LLVMIntSLT, n, ik(m, lo)), ik(m, lo), n);
    return sel(m, icmp(m, LLVMIntSGT, n, ik(m, hi)), ik(m, hi), n);
}

/* c[0] + x*(c[1] + x*(... c[n-1])). Where the program allows contraction (be_fop), each
 * step r x + c may be one FMA: half the instructions and the latency of the polynomials that
 * exp, tanh, sigmoid, erf and log spend most of theirs in, and a rounding fewer. */
static V horner(M *m, V x, const double *c, int n) {
    V r = fk(m, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) r = be_fop(m->e, add(m, be_fop(m->e, mul(m, r, x)), fk(m, c[i])));
    return r;
}

/* x rounded to the nearest integer (halves away from zero), as an integer; |x| must fit. */
static V iround(M *m, V x) { return toint(m, add(m, x, copysign_(m, fk(m, 0.5), x))); }

/* v * 2^n for any integer n: two exact power-of-two factors, so that results that under- or
 * overflow come out as 0 / inf and subnormal results are still produced. */
static V scale_in(M *m, V v, V n);
static V scale(M *m, V v, V n) { return scale_in(m, v, iclamp(m, n, -(2LL * m->bias - 2), 2LL * m->bias)); }

/* The same for n already within those bounds. */
static V scale_in(M *m, V v, V n) {
    V n1 = LLVMBuildAShr(m->b, n, ik(m, 1), "");
    V n2 = LLVMBuildSub(m->b, n, n1, "");
    V p1 = unbits(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, n1, ik(m, m->bias), ""), ik(m, m->mant), ""));
    V p2 = unbits(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, n2, ik(m, m->bias), ""), ik(m, m->mant), ""));
    return mul(m, mul(m, v, p1), p2);
}

/* ln 2 split so that k*LN2_HI is exact for the k that occur (fdlibm's constants). */
static double ln2_hi(M *m) { return m->dbl ? 6.93147180369123816490e-01 : 0.693145751953125; }
static double ln2_lo(M *m) { return m->dbl ? 1.90821492927058770002e-10 : 1.428606765330187045e-06; }

/* Argument reduction x = k ln2 + r, |r| <= ln2/2 (a little more where x/ln2 rounds to a
 * tie). x must be finite and moderate: |x/ln2| < 2^(mant-1), which every caller's clamp or
 * range keeps (exp_core's is the widest, 1076 in double). k comes from adding 1.5 * 2^mant,
 * whose sum rounds x/ln2 to an integer in its last bits, as an integer subtraction of the
 * sum's bits: one add instead of a rounding add, two conversions and a copysign (and the
 * add is an FMA with the product where contraction is allowed, as are r's two steps, the
 * first of which is exact either way). */
static V reduce(M *m, V x, V *r) {
    double magic = 1.5 * ldexp(1.0, m->mant);
    V t = be_fop(m->e, add(m, be_fop(m->e, mul(m, x, fk(m, 1.0 / M_LN2))), fk(m, magic)));
    V kf = sub(m, t, fk(m, magic));
    V k = LLVMBuildSub(m->b, bits(m, t), bits(m, fk(m, magic)), "");
    V r1 = be_fop(m->e, sub(m, x, be_fop(m->e, mul(m, kf, fk(m, ln2_hi(m))))));
    *r = be_fop(m->e, sub(m, r1, be_fop(m->e, mul(m, kf, fk(m, ln2_lo(m))))));
    return k;
}

/* e^r - (1 if `minus1`) for |r| <= ln2/2: Taylor terms up to r^7 (float) / r^13 (double),
 * whose truncation error is far below half an ulp. */
static V exp_poly(M *m, V r, bool minus1) {
    double c[16];
    int n = m->dbl ? 14 : 8;
    c[0] = 1;
    for (int i = 1; i < n; i++) c[i] = c[i - 1] / i;
    if (!minus1) return horner(m, r, c, n);
    return mul(m, r, horner(m, r, c + 1, n - 1));      /* r (1 + r/2 + r^2/6 ...) */
}

/* e^x for x not NaN. Beyond the clamps the result is inf or 0 anyway. */
static V exp_core(M *m, V x) {
    x = m->dbl ? clamp(m, x, -746, 710) : clamp(m, x, -104, 89);
    V r, k = reduce(m, x, &r);
    return scale(m, exp_poly(m, r, false), k);
}

/* e^x for x whose result is a normal number (|x| < 87 in float): one exact power-of-two
 * factor, no clamps; the same result as exp_core there. */
static V exp_normal(M *m, V x) {
    V r, k = reduce(m, x, &r);
    V p = unbits(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, k, ik(m, m->bias), ""), ik(m, m->mant), ""));
    return mul(m, exp_poly(m, r, false), p);
}

/* exp_core's work but for the lanes that are NaN or at or below its lower clamp (e^x under
 * half the least subnormal: 0), which compute e^0 and are replaced after: computed there, the
 * scaling's products underflow, and an underflowing multiply takes a microcode assist on x86
 * (a causal mask's -inf scores took a softmax over them from 310 to 590 us). One unordered
 * compare finds both kinds; the results are exp_core's. */
static V m_exp(M *m, V x) {
    double lo = m->dbl ? -746 : -104, hi = m->dbl ? 710 : 89;
    V special = cmp(m, LLVMRealULE, x, fk(m, lo));
    V xc = sel(m, special, fk(m, 0), sel(m, cmp(m, LLVMRealOGT, x, fk(m, hi)), fk(m, hi), x));
    V r, k = reduce(m, xc, &r);
    V e = sel(m, special, fk(m, 0), scale(m, exp_poly(m, r, false), k));
    return sel(m, isnan_(m, x), x, e);
}

/* e^x - 1 for -40 <= x <= 0 (tanh only): (2^k - 1) + 2^k p keeps small results exact. k is
 * then in [-58, 0], within scale_in's bounds for float and double. */
static V expm1_neg(M *m, V x) {
    V r, k = reduce(m, x, &r);
    V p = exp_poly(m, r, true);
    return add(m, scale_in(m, p, k), sub(m, scale_in(m, fk(m, 1), k), fk(m, 1)));
}

/* Split a positive finite x into 2^e * f with f in [sqrt(1/2), sqrt(2)); subnormals too. */
static V decompose(M *m, V x, V *f) {
    double tiny = ldexp(1.0, 1 - m->bias), big = ldexp(1.0, m->mant);
    V sub_ = cmp(m, LLVMRealOLT, x, fk(m, tiny));
    x = sel(m, sub_, mul(m, x, fk(m, big)), x);
    V b = bits(m, x);
    V e = LLVMBuildAnd(m->b, LLVMBuildLShr(m->b, b, ik(m, m->mant), ""), ik(m, 2LL * m->bias + 1), "");
    e = LLVMBuildSub(m->b, e, ik(m, m->bias), "");
    e = LLVMBuildSub(m->b, e, sel(m, sub_, ik(m, m->mant), ik(m, 0)), "");
    long long mask = (long long)((1ULL << m->mant) - 1);
    V mb = LLVMBuildOr(m->b, LLVMBuildAnd(m->b, b, ik(m, mask), ""),
                       ik(m, (long long)m->bias << m->mant), "");
    V fr = unbits(m, mb);                                   /* [1, 2) */
    V hi = cmp(m, LLVMRealOGT, fr, fk(m, M_SQRT2));
    *f = sel(m, hi, mul(m, fr, fk(m, 0.5)), fr);
    return LLVMBuildAdd(m->b, e, sel(m, hi, ik(m, 1), ik(m, 0)), "");
}

static V log_frac_dd(M *m, V f, V *lo);

static V m_log(M *m, V x) {
    V f, e = decompose(m, x, &f);
    V ef = tofloat(m, e);
    V lo, hi = log_frac_dd(m, f, &lo);
    V r = add(m, mul(m, ef, fk(m, ln2_hi(m))), add(m, hi, add(m, lo, mul(m, ef, fk(m, ln2_lo(m))))));
    r = sel(m, cmp(m, LLVMRealOEQ, x, fk(m, INFINITY)), x, r);
    r = sel(m, cmp(m, LLVMRealOEQ, x, fk(m, 0)), fk(m, -INFINITY), r);
    r = sel(m, cmp(m, LLVMRealOLT, x, fk(m, 0)), fk(m, NAN), r);
    return sel(m, isnan_(m, x), x, r);
}

/* With em1 = e^(-2|x|) - 1: small |x|, tanh |x| = -em1 / (2 + em1), no cancellation near 0.
 * Larger, 1 - 2u / (1 + u) with u = e^(-2|x|) = 1 + em1 (exact there: em1 <= -0.71), whose
 * rounding errors shrink with the subtracted term. One exponential and one division serve
 * both (the operands are selected before dividing): ESPCN's Conv+Tanh epilogues, 3.2M
 * values, took 2.5 ms with two of each (AVX-512, Xeon). Beyond T the result rounds to 1. */
static V m_tanh(M *m, V x) {
    double T = m->dbl ? 19.1 : 9.1;
    V a = fabs_(m, x);
    V big = cmp(m, LLVMRealOGE, a, fk(m, T));
    V ac = sel(m, big, fk(m, T), sel(m, isnan_(m, a), fk(m, 0), a));
    V em1 = expm1_neg(m, mul(m, ac, fk(m, -2)));
    V small = cmp(m, LLVMRealOLT, ac, fk(m, 0.625));
    V u = add(m, em1, fk(m, 1));
    V num = sel(m, small, LLVMBuildFNeg(m->b, em1, ""), add(m, u, u));
    V den = sel(m, small, add(m, em1, fk(m, 2)), add(m, u, fk(m, 1)));
    V q = fdiv(m, num, den);
    V t = sel(m, small, q, sub(m, fk(m, 1), q));
    t = sel(m, big, fk(m, 1), t);
    return sel(m, isnan_(m, x), x, copysign_(m, t, x));
}

/* 1/(1+e^-x); for x < 0 written e^x/(1+e^x) so tiny results keep their precision. e^-|x| as
 * exp_core takes it, but with -|x| clamped once from below (a NaN goes to the clamp too, and
 * is put back at the end), so that neither m_exp's NaN selects nor the upper clamp nor
 * scale's clamps of the exponent are needed: k is in [lo/ln2 - 1, 0]. The same results in
 * 5 fewer vector instructions of ~40 (SiLU epilogues of EfficientNet's depthwise convs). */
static V m_sigmoid(M *m, V x) {
    double lo = m->dbl ? -746 : -104;
    V a = LLVMBuildFNeg(m->b, fabs_(m, x), "");
    a = sel(m, cmp(m, LLVMRealULT, a, fk(m, lo)), fk(m, lo), a);
    V r, k = reduce(m, a, &r);
    V s = scale_in(m, exp_poly(m, r, false), k);
    V q = fdiv(m, fk(m, 1), add(m, fk(m, 1), s));
    q = sel(m, cmp(m, LLVMRealOLT, x, fk(m, 0)), mul(m, s, q), q);
    return sel(m, isnan_(m, x), x, q);
}

/* erfc(x) e^(x^2) on [1, 6] as a Chebyshev series in t = 1/x (double only): least-squares
 * fit at 400 Chebyshev nodes against the C library's erfc (numpy chebfit; relative error
 * 5e-14, degree 20). */
static const double erfc_cheb_d[] = {
    0.27477468589795534, 0.16699329119310416, -0.014778434908201068, 0.00046076600437372251,
    0.00017657967835421926, -5.0269840642281164e-05, 7.427013355753947e-06,
    -3.5188112161268248e-07, -1.7150112855684016e-07, 6.7066230891282928e-08,
    -1.4316589060399244e-08, 1.7595569876348252e-09, 7.4521431824366929e-11,
    -1.1543767625116935e-10, 3.8873911334089215e-11, -8.5046697742552626e-12,
    1.1275933010529237e-12, 4.3473897565380242e-14, -8.391359145435409e-14,
    3.2222222483337668e-14, -7.9054155294727788e-15,
};

/* log erfc(x) on [1, 4] as a polynomial in x (float only): least-squares fit of degree 9 at
 * 2000 Chebyshev nodes against the C library's erfc (numpy polyfit; absolute error 6.5e-9,
 * so erf = 1 - e^P(x) is within 0.55 ulp of erf in float, Horner in float included). One
 * exp and nine FMAs, where the series in 1/x takes a division and twice the operations: the
 * GELU epilogue of a transformer's or ConvNeXt's MLP MatMul is mostly this function. */
static const double log_erfc_f[] = {
    0.00040050048709057423, -1.1306044693276232, -0.6310888681498679, -0.11090741687742557,
    0.026999497009764846, -0.0050210447112956766, 0.0006733375363303899,
    -6.0068793431564145e-05, 3.0952043975626164e-06, -6.582856789038525e-08,
};

/* Clenshaw's recurrence for sum c[i] T_i(u). */
static V chebyshev(M *m, V u, const double *c, int n) {
    V b1 = fk(m, 0), b2 = fk(m, 0), u2 = add(m, u, u);
    for (int i = n - 1; i >= 1; i--) {
        V b0 = add(m, sub(m, mul(m, u2, b1), b2), fk(m, c[i]));
        b2 = b1;
        b1 = b0;
    }
    return add(m, sub(m, mul(m, u, b1), b2), fk(m, c[0]));
}

/* |x| < 1: the Taylor series x * sum (-1)^n x^2n / (n! (2n+1)) * 2/sqrt(pi).
 * 1 <= |x| < X: 1 - erfc(x), erfc(x) = e^(-x^2) * (fitted erfc(x) e^(x^2)) in double,
 * e^(fitted log erfc(x)) in float.  Beyond X erf rounds to +-1. */
static V m_erf(M *m, V x) {
    double X = m->dbl ? 6 : 4;
    V a = fabs_(m, x);
    double c[20];
    int n = m->dbl ? 18 : 11;
    double fact = 1;
    for (int i = 0; i < n; i++) {
        if (i) fact *= i;
        c[i] = (i % 2 ? -1 : 1) * M_2_SQRTPI / (fact * (2 * i + 1));
    }
    V small = mul(m, x, horner(m, mul(m, x, x), c, n));

    V as = sel(m, isnan_(m, a), fk(m, 1), clamp(m, a, 1, X));
    V erfc;
    if (m->dbl) {
        V t = fdiv(m, fk(m, 1), as);
        double t0 = 1 / X, A = 2 / (1 - t0), Bc = -2 * t0 / (1 - t0) - 1;
        V u = add(m, mul(m, t, fk(m, A)), fk(m, Bc));
        V g = chebyshev(m, u, erfc_cheb_d, COUNTOF(erfc_cheb_d));
        erfc = mul(m, exp_core(m, LLVMBuildFNeg(m->b, mul(m, as, as), "")), g);
    } else {
        erfc = exp_normal(m, horner(m, as, log_erfc_f, COUNTOF(log_erfc_f)));  /* -17.7..-1.8 */
    }
    V large = copysign_(m, sub(m, fk(m, 1), erfc), x);

    V r = sel(m, cmp(m, LLVMRealOLT, a, fk(m, 1)), small, large);
    r = sel(m, cmp(m, LLVMRealOGE, a, fk(m, X)), copysign_(m, fk(m, 1), x), r);
    return sel(m, isnan_(m, x), x, r);
}

/* 1 + erf(x), GELU's factor x/2 (1 + erf(x / sqrt 2)) (the backend's peephole for `erf(y) + 1`,
 * kernel.c erf_plus_one): in float erfc(-x) for x < 0 and 2 - erfc(x) for x >= 0, with
 * erfc(a) = e^P(a) on [0, 4] (P a degree-11 least-squares fit of log erfc at 4000 Chebyshev
 * nodes, numpy; absolute error 2.5e-8, so erfc within 4e-6 of itself, Horner in float
 * included), erfc(4) up to 6 and 0 beyond. One polynomial and one exponential where erf and an
 * add took two polynomials, the exponential and the selects between them (ConvNeXt's GELU
 * MatMuls on 96 channels: ConvNeXt-T 1.02x); for x < 0 it is also the closer: 1 + erf(x) rounded after
 * erf(x) near -1 keeps only its few bits left. Double keeps 1 + erf. */
static const double log_erfc_0_4[] = {
    2.2821957657015446e-08, -1.1283807582400496, -0.63660177837493082, -0.10284938670615804,
    0.019285131409792183, 5.5133035978092429e-05, -0.0016677080037830849, 0.00069616846027152808,
    -0.00016453307903778664, 2.4214321529578758e-05, -2.068687101981889e-06, 7.8575228683861149e-08,
};

static V m_erf1p(M *m, V x) {
    if (m->dbl) return add(m, fk(m, 1), m_erf(m, x));
    V a = fabs_(m, x);
    V e = exp_normal(m, horner(m, clamp(m, a, 0, 4), log_erfc_0_4, COUNTOF(log_erfc_0_4)));   /* -17.7..0 */
    e = sel(m, cmp(m, LLVMRealOGE, a, fk(m, 6)), fk(m, 0), e);
    V r = sel(m, cmp(m, LLVMRealOLT, x, fk(m, 0)), e, sub(m, fk(m, 2), e));
    return sel(m, isnan_(m, x), x, r);
}

/* ---- rounding: via float->int->float, since llvm.floor is a libm call on Cortex-M ---- */

/* Values with |x| >= 2^mant are integral already (and NaN passes through). */
static V is_small(M *m, V x) { return cmp(m, LLVMRealOLT, fabs_(m, x), fk(m, ldexp(1.0, m->mant))); }
static V trunc_int(M *m, V x, V small) { return toint(m, sel(m, small, x, fk(m, 0))); }

static V m_trunc(M *m, V x) {
    V small = is_small(m, x);
    return sel(m, small, copysign_(m, tofloat(m, trunc_int(m, x, small)), x), x);
}

static V m_floor(M *m, V x) {
    V small = is_small(m, x);
    V t = tofloat(m, trunc_int(m, x, small));
    t = sel(m, cmp(m, LLVMRealOGT, t, x), sub(m, t, fk(m, 1)), t);
    return sel(m, small, copysign_(m, t, x), x);
}

static V m_ceil(M *m, V x) {
    V small = is_small(m, x);
    V t = tofloat(m, trunc_int(m, x, small));
    t = sel(m, cmp(m, LLVMRealOLT, t, x), add(m, t, fk(m, 1)), t);
    return sel(m, small, copysign_(m, t, x), x);
}

/* Half to even: for |x| < 2^mant, |x| + 2^mant lies where the float spacing is 1, so the
 * addition itself rounds |x| to an integer, half to even (the default rounding mode), and
 * subtracting 2^mant again is exact. Six operations where a float->int->float round trip
 * with its tie test took fifteen (the requantisation of every integer kernel rounds). */
static V m_round(M *m, V x) {
    if (m->e->t->round_insn) return intrinsic(m, "llvm.roundeven", &x, 1);
    V big = fk(m, ldexp(1.0, m->mant)), ax = fabs_(m, x);
    V t = sub(m, add(m, ax, big), big);
    return sel(m, cmp(m, LLVMRealOLT, ax, big), copysign_(m, t, x), x);
}

static V two_prod(M *m, V a, V b, V *err);

/* C fmod: |x| - q|y| with q = trunc(|x/y|), the product kept exact (Dekker) and q corrected
 * by one if the division rounded across an integer. Exact while q < 2^mant. */
static V m_rem(M *m, V x, V y) {
    V ax = fabs_(m, x), ay = fabs_(m, y), inf = fk(m, INFINITY);
    V ok = and_(m, and_(m, cmp(m, LLVMRealOLT, ax, inf), cmp(m, LLVMRealOLT, ay, inf)),
                cmp(m, LLVMRealOGT, ay, fk(m, 0)));
    ay = sel(m, ok, ay, fk(m, 1));
    ax = sel(m, ok, ax, fk(m, 0));
    V q = m_trunc(m, fdiv(m, ax, ay));
    q = clamp(m, q, 0, ldexp(1.0, m->mant + 1));
    V err, p = two_prod(m, q, ay, &err);
    V r = sub(m, sub(m, ax, p), err);
    r = sel(m, cmp(m, LLVMRealOLT, r, fk(m, 0)), add(m, r, ay), r);
    r = sel(m, cmp(m, LLVMRealOGE, r, ay), sub(m, r, ay), r);
    r = copysign_(m, r, x);
    V yinf = and_(m, cmp(m, LLVMRealOEQ, fabs_(m, y), inf), cmp(m, LLVMRealOLT, fabs_(m, x), inf));
    return sel(m, ok, r, sel(m, yinf, x, fk(m, NAN)));
}

/* ---- pow ---- */

/* ---- pow: e^(y ln x) with y ln x carried in two floats (hi + lo), so that large results
 * keep their precision (a plain exp(y*log(x)) loses |y ln x| ulps) ---- */

/* The high half of a (Veltkamp's split): a - hi(a) is exact and both halves multiply
 * exactly with any other half. */
static V split_hi(M *m, V a) {
    V c = mul(m, a, fk(m, m->dbl ? 134217729.0 : 4097.0));
    return sub(m, c, sub(m, c, a));
}

/* a*b = p + *err exactly (Dekker). */
static V two_prod(M *m, V a, V b, V *err) {
    V p = mul(m, a, b);
    V ah = split_hi(m, a), al = sub(m, a, ah), bh = split_hi(m, b), bl = sub(m, b, bh);
    *err = add(m, add(m, add(m, sub(m, mul(m, ah, bh), p), mul(m, ah, bl)), mul(m, al, bh)), mul(m, al, bl));
    return p;
}

/* a+b = s + *err exactly (Knuth). */
static V two_sum(M *m, V a, V b, V *err) {
    V s = add(m, a, b), bb = sub(m, s, a);
    *err = add(m, sub(m, a, sub(m, s, bb)), sub(m, b, bb));
    return s;
}

/* ln f = hi + *lo for f in [sqrt(1/2), sqrt(2)): with d = f-1, s = d/(2+d),
 * ln f = d - d^2/2 + s (d^2/2 + R(s^2)) (fdlibm's form); d^2/2 is kept exact. */
static V log_frac_dd(M *m, V f, V *lo) {
    V d = sub(m, f, fk(m, 1));
    V s = fdiv(m, d, add(m, d, fk(m, 2)));
    V z = mul(m, s, s);
    double c[12];
    int n = m->dbl ? 10 : 4;                /* R = z (2/3 + 2z/5 + 2z^2/7 ...) */
    for (int i = 0; i < n; i++) c[i] = 2.0 / (2 * i + 3);
    V R = mul(m, z, horner(m, z, c, n));
    V hl, hh = two_prod(m, d, d, &hl);
    hh = mul(m, hh, fk(m, 0.5));
    hl = mul(m, hl, fk(m, 0.5));
    V t3 = mul(m, s, add(m, hh, R));
    V hi = sub(m, d, hh);
    *lo = add(m, sub(m, sub(m, sub(m, d, hi), hh), hl), t3);
    return hi;
}

/* |x|^y for positive finite x and finite |y| <= 2^60. */
static V pow_core(M *m, V ax, V y) {
    V f, e = decompose(m, ax, &f);
    V ef = tofloat(m, e);
    V llo, lhi = log_frac_dd(m, f, &llo);
    V serr, hi = two_sum(m, mul(m, ef, fk(m, ln2_hi(m))), lhi, &serr);   /* e*LN2_HI is exact */
    V lo = add(m, add(m, serr, llo), mul(m, ef, fk(m, ln2_lo(m))));
    V perr, zh = two_prod(m, y, hi, &perr);
    V zl = add(m, perr, mul(m, y, lo));
    V zerr;
    zh = two_sum(m, zh, zl, &zerr);
    zl = zerr;
    /* beyond these the result is inf or 0 whatever zl is */
    double lim_lo = m->dbl ? -760 : -110, lim_hi = m->dbl ? 720 : 100;
    V out = or_(m, cmp(m, LLVMRealOLT, zh, fk(m, lim_lo)), cmp(m, LLVMRealOGT, zh, fk(m, lim_hi)));
    zh = clamp(m, zh, lim_lo, lim_hi);
    zl = sel(m, out, fk(m, 0), zl);
    V k = iround(m, mul(m, zh, fk(m, 1.0 / M_LN2)));
    V kf = tofloat(m, k);
    V r = add(m, sub(m, zh, mul(m, kf, fk(m, ln2_hi(m)))), sub(m, zl, mul(m, kf, fk(m, ln2_lo(m)))));
    return scale(m, exp_poly(m, r, false), k);
}

static V m_pow(M *m, V x, V y) {
    V inf = fk(m, INFINITY), zero = fk(m, 0), one = fk(m, 1);
    V ax = fabs_(m, x), ay = fabs_(m, y);
    V ax_ok = and_(m, cmp(m, LLVMRealOLT, ax, inf), cmp(m, LLVMRealOGT, ax, zero));
    V y_ok = cmp(m, LLVMRealOLT, ay, inf);
    V ys = sel(m, y_ok, clamp(m, y, -ldexp(1, 60), ldexp(1, 60)), zero);
    V r = pow_core(m, sel(m, ax_ok, ax, one), ys);

    V ypos = cmp(m, LLVMRealOGT, y, zero), yneg = cmp(m, LLVMRealOLT, y, zero);
    /* x = +-0, +-inf; y = +-inf */
    r = sel(m, cmp(m, LLVMRealOEQ, ax, zero), sel(m, yneg, inf, zero), r);
    r = sel(m, cmp(m, LLVMRealOEQ, ax, inf), sel(m, yneg, zero, inf), r);
    V big = cmp(m, LLVMRealOGT, ax, one);
    V yinf = sel(m, cmp(m, LLVMRealOEQ, ax, one), one,
                 sel(m, LLVMBuildICmp(m->b, LLVMIntEQ, big, ypos, ""), inf, zero));
    r = sel(m, cmp(m, LLVMRealOEQ, ay, inf), yinf, r);
    /* negative x: the sign follows y's parity; non-integral y gives NaN */
    V yint = cmp(m, LLVMRealOEQ, m_floor(m, y), y);
    double two_m = ldexp(1.0, m->mant + 1);          /* beyond it every float is even */
    V ysmall = cmp(m, LLVMRealOLT, ay, fk(m, two_m));
    V yi = toint(m, sel(m, ysmall, y, zero));
    V odd = and_(m, and_(m, yint, ysmall), icmp(m, LLVMIntNE, and_(m, yi, ik(m, 1)), ik(m, 0)));
    V xneg = icmp(m, LLVMIntSLT, bits(m, x), ik(m, 0));
    r = sel(m, and_(m, xneg, odd), LLVMBuildFNeg(m->b, r, ""), r);
    V finite_neg = and_(m, cmp(m, LLVMRealOLT, x, zero), cmp(m, LLVMRealOGT, x, fk(m, -INFINITY)));
    r = sel(m, and_(m, finite_neg, LLVMBuildNot(m->b, yint, "")), fk(m, NAN), r);
    r = sel(m, or_(m, isnan_(m, x), isnan_(m, y)), add(m, x, y), r);
    (void)ypos;
    r = sel(m, cmp(m, LLVMRealOEQ, y, zero), one, r);
    return sel(m, cmp(m, LLVMRealOEQ, x, one), one, r);
}

/* ---- trigonometric: Cody-Waite reduction to |r| <= pi/4 and a polynomial there ---- */

/* pi/2 in parts; all but the last have few enough bits (8 for float, 33 for double) that k
 * times each is exact while |k| < 2^16 (float) / 2^20 (double), and so is each subtraction but
 * the last ones, where the partial result is already small. x - k pi/2 then comes out with an
 * absolute error near 2^-54 (float) / 2^-100 (double) times k, a few ulp of r even where x is
 * close to a multiple of pi/2. That covers |x| < 1e5 (float) / 1.6e6 (double); beyond, the
 * products round and the error grows with |x| (no Payne-Hanek reduction): the results stay
 * finite and within [-1, 1] but are inaccurate. */
static const double pio2_f[] = {1.5703125, 4.84466552734375e-04, -6.407499313354492e-07,
                                9.89530235528946e-10, 2.5633440682570896e-12};
static const double pio2_d[] = {1.57079632673412561417e+00, 6.07710050630396597660e-11,
                                2.02226624871116645580e-21, 8.47842766036889956997e-32};

/* x = k pi/2 + *r for finite x; returns k (k mod 4 is the quadrant). */
static V reduce_pio2(M *m, V x, V *r) {
    double lim = ldexp(1.0, m->dbl ? 40 : 29);      /* keeps k in range of the integer type */
    V k = iround(m, mul(m, clamp(m, x, -lim, lim), fk(m, M_2_PI)));
    V kf = tofloat(m, k);
    const double *c = m->dbl ? pio2_d : pio2_f;
    int n = m->dbl ? COUNTOF(pio2_d) : COUNTOF(pio2_f);
    V y = x;
    for (int i = 0; i < n; i++) y = sub(m, y, mul(m, kf, fk(m, c[i])));
    *r = clamp(m, y, -1, 1);                        /* only out of range: keeps it finite */
    return k;
}

/* sin r and cos r for |r| <= pi/4 (a bit more is fine): fdlibm's minimax polynomials for
 * double, Cephes' for float. */
static V sin_poly(M *m, V r) {
    static const double cf[] = {-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4};
    static const double cd[] = {-1.66666666666666324348e-01, 8.33333333332248946124e-03,
                                -1.98412698298579493134e-04, 2.75573137070700676789e-06,
                                -2.50507602534068634195e-08, 1.58969099521155010221e-10};
    V z = mul(m, r, r);
    V p = m->dbl ? horner(m, z, cd, COUNTOF(cd)) : horner(m, z, cf, COUNTOF(cf));
    return add(m, r, mul(m, mul(m, r, z), p));
}

static V cos_poly(M *m, V r) {
    static const double cf[] = {4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5};
    static const double cd[] = {4.16666666666666019037e-02, -1.38888888888741095749e-03,
                                2.48015872894767294178e-05, -2.75573143513906633035e-07,
                                2.08757232129817482790e-09, -1.13596475577881948265e-11};
    V z = mul(m, r, r);
    V p = m->dbl ? horner(m, z, cd, COUNTOF(cd)) : horner(m, z, cf, COUNTOF(cf));
    return add(m, sub(m, fk(m, 1), mul(m, z, fk(m, 0.5))), mul(m, mul(m, z, z), p));
}

static V is_finite(M *m, V x) { return cmp(m, LLVMRealOLT, fabs_(m, x), fk(m, INFINITY)); }

/* sin x (shift 0) or cos x = sin(x + pi/2) (shift 1): the quadrant picks +-sin r or +-cos r.
 * inf and NaN give NaN (x - x). */
static V sincos_(M *m, V x, int shift) {
    V fin = is_finite(m, x);
    V r, k = reduce_pio2(m, sel(m, fin, x, fk(m, 0)), &r);
    V q = LLVMBuildAdd(m->b, k, ik(m, shift), "");
    V s = sin_poly(m, r), c = cos_poly(m, r);
    V odd = icmp(m, LLVMIntNE, and_(m, q, ik(m, 1)), ik(m, 0));
    V neg = icmp(m, LLVMIntNE, and_(m, q, ik(m, 2)), ik(m, 0));
    V v = sel(m, odd, c, s);
    v = sel(m, neg, LLVMBuildFNeg(m->b, v, ""), v);
    v = clamp(m, v, -1, 1);                        /* beyond the reduction's range */
    return sel(m, fin, v, sub(m, x, x));
}

/* sin and tan of +-0 are that zero (the reduction may have lost the sign). */
static V keep_zero(M *m, V x, V v) { return sel(m, cmp(m, LLVMRealOEQ, x, fk(m, 0)), x, v); }

static V m_sin(M *m, V x) { return keep_zero(m, x, sincos_(m, x, 0)); }
static V m_cos(M *m, V x) { return sincos_(m, x, 1); }

/* tan r = sin r / cos r; in odd quadrants tan x = -cos r / sin r. */
static V m_tan(M *m, V x) {
    V fin = is_finite(m, x);
    V r, k = reduce_pio2(m, sel(m, fin, x, fk(m, 0)), &r);
    V s = sin_poly(m, r), c = cos_poly(m, r);
    V odd = icmp(m, LLVMIntNE, and_(m, k, ik(m, 1)), ik(m, 0));
    V v = sel(m, odd, fdiv(m, LLVMBuildFNeg(m->b, c, ""), s), fdiv(m, s, c));
    return keep_zero(m, x, sel(m, fin, v, sub(m, x, x)));
}

/* ---- inverse trigonometric (fdlibm's algorithms, musl's float coefficients) ---- */

static V sqrt_(M *m, V x) { return intrinsic(m, "llvm.sqrt", &x, 1); }

/* pi/2 = PIO2_HI + PIO2_LO */
static double pio2_hi(M *m) { return m->dbl ? 1.57079632679489655800e+00 : 1.5707962513e+00; }
static double pio2_lo(M *m) { return m->dbl ? 6.12323399573676603587e-17 : 7.5497894159e-08; }

/* asin t = t + t R(t^2) for |t| <= 0.5, with R a rational minimax fit. */
static V asin_R(M *m, V z) {
    static const double pf[] = {1.6666586697e-01, -4.2743422091e-02, -8.6563630030e-03};
    static const double qf[] = {1, -7.0662963390e-01};
    static const double pd[] = {1.66666666666666657415e-01, -3.25565818622400915405e-01,
                                2.01212532134862925881e-01, -4.00555345006794114027e-02,
                                7.91534994289814532176e-04, 3.47933107596021167570e-05};
    static const double qd[] = {1, -2.40339491173441421878e+00, 2.02094576023350569471e+00,
                                -6.88283971605453293030e-01, 7.70381505559019352791e-02};
    V p = m->dbl ? horner(m, z, pd, COUNTOF(pd)) : horner(m, z, pf, COUNTOF(pf));
    V q = m->dbl ? horner(m, z, qd, COUNTOF(qd)) : horner(m, z, qf, COUNTOF(qf));
    return fdiv(m, mul(m, z, p), q);
}

/* |x| < 0.5: x + x R(x^2). Else with z = (1-|x|)/2, s = sqrt z (so that |x| = 1 - 2 s^2):
 * asin |x| = pi/2 - 2 asin s. |x| > 1 gives NaN through sqrt of a negative z. */
static V m_asin(M *m, V x) {
    V a = fabs_(m, x);
    V small = mul(m, x, add(m, fk(m, 1), asin_R(m, mul(m, x, x))));
    V z = mul(m, sub(m, fk(m, 1), a), fk(m, 0.5));
    V s = sqrt_(m, z);
    V t = sub(m, mul(m, fk(m, 2), add(m, s, mul(m, s, asin_R(m, z)))), fk(m, pio2_lo(m)));
    V large = copysign_(m, sub(m, fk(m, pio2_hi(m)), t), x);
    return sel(m, cmp(m, LLVMRealOLT, a, fk(m, 0.5)), small, large);
}

/* acos x = pi/2 - asin x for |x| < 0.5; 2 asin s for x >= 0.5; pi - 2 asin s for x <= -0.5
 * (s as in asin). */
static V m_acos(M *m, V x) {
    V a = fabs_(m, x);
    V small = sub(m, fk(m, pio2_hi(m)),
                  sub(m, x, sub(m, fk(m, pio2_lo(m)), mul(m, x, asin_R(m, mul(m, x, x))))));
    V z = mul(m, sub(m, fk(m, 1), a), fk(m, 0.5));
    V s = sqrt_(m, z);
    V as = add(m, s, mul(m, s, asin_R(m, z)));            /* asin s */
    V pos = mul(m, fk(m, 2), as);
    V neg = mul(m, fk(m, 2), sub(m, fk(m, pio2_hi(m)), sub(m, as, fk(m, pio2_lo(m)))));
    V large = sel(m, cmp(m, LLVMRealOLT, x, fk(m, 0)), neg, pos);
    return sel(m, cmp(m, LLVMRealOLT, a, fk(m, 0.5)), small, large);
}

/* atan |x|: |x| is mapped by t = (a|x| + b) / (c|x| + d) near one of 0, 0.5, 1, 1.5, inf and
 * atan |x| = atan(that point) + atan t, with atan t an odd polynomial (fdlibm's ranges). */
static V m_atan(M *m, V x) {
    static const double hi_f[] = {4.6364760399e-01, 7.8539812565e-01, 9.8279368877e-01, 1.5707962513e+00};
    static const double lo_f[] = {5.0121582440e-09, 3.7748947079e-08, 3.4473217170e-08, 7.5497894159e-08};
    static const double hi_d[] = {4.63647609000806093515e-01, 7.85398163397448278999e-01,
                                  9.82793723247329054082e-01, 1.57079632679489655800e+00};
    static const double lo_d[] = {2.26987774529616870924e-17, 3.06161699786838301793e-17,
                                  1.39033110312309984516e-17, 6.12323399573676603587e-17};
    static const double at_f[] = {3.3333328366e-01, -1.9999158382e-01, 1.4253635705e-01,
                                  -1.0648017377e-01, 6.1687607318e-02};
    static const double at_d[] = {3.33333333333329318027e-01, -1.99999999998764832476e-01,
                                  1.42857142725034663711e-01, -1.11111104054623557880e-01,
                                  9.09088713343650656196e-02, -7.69187620504482999495e-02,
                                  6.66107313738753120669e-02, -5.83357013379057348645e-02,
                                  4.97687799461593236017e-02, -3.65315727442169155270e-02,
                                  1.62858201153657823623e-02};
    /* ranges [0, 7/16), [7/16, 11/16), [11/16, 19/16), [19/16, 39/16), [39/16, inf] */
    static const double bound[] = {7.0 / 16, 11.0 / 16, 19.0 / 16, 39.0 / 16};
    static const double ca[] = {1, 2, 1, 1, 0}, cb[] = {0, -1, -1, -1.5, -1},
                        cc[] = {0, 1, 1, 1.5, 1}, cd[] = {1, 2, 1, 1, 0};
    const double *hi = m->dbl ? hi_d : hi_f, *lo = m->dbl ? lo_d : lo_f;
    V a = sel(m, isnan_(m, x), fk(m, 0), fabs_(m, x));
    a = clamp(m, a, 0, ldexp(1.0, 60));             /* 0 * inf must not happen below */
    V A = fk(m, ca[0]), B = fk(m, cb[0]), C = fk(m, cc[0]), D = fk(m, cd[0]);
    V H = fk(m, 0), L = fk(m, 0);
    for (int i = 0; i < 4; i++) {
        V ge = cmp(m, LLVMRealOGE, a, fk(m, bound[i]));
        A = sel(m, ge, fk(m, ca[i + 1]), A);
        B = sel(m, ge, fk(m, cb[i + 1]), B);
        C = sel(m, ge, fk(m, cc[i + 1]), C);
        D = sel(m, ge, fk(m, cd[i + 1]), D);
        H = sel(m, ge, fk(m, hi[i]), H);
        L = sel(m, ge, fk(m, lo[i]), L);
    }
    V t = fdiv(m, add(m, mul(m, A, a), B), add(m, mul(m, C, a), D));
    V z = mul(m, t, t), w = mul(m, z, z);
    const double *c = m->dbl ? at_d : at_f;
    int n = m->dbl ? COUNTOF(at_d) : COUNTOF(at_f);
    double even[6], odd[6];                      /* split for two shorter Horner chains */
    int ne = 0, no = 0;
    for (int i = 0; i < n; i++) {
        if (i % 2) odd[no++] = c[i];
        else even[ne++] = c[i];
    }
    V s = add(m, mul(m, z, horner(m, w, even, ne)), mul(m, w, horner(m, w, odd, no)));
    V r = sub(m, H, sub(m, sub(m, mul(m, t, s), L), t));
    return sel(m, isnan_(m, x), x, copysign_(m, r, x));
}

/* ---- hyperbolic and their inverses ---- */

/* e^(a/2) for a >= 0 not NaN; squared it gives e^a past the point where e^a overflows but
 * e^a / 2 does not. */
static V exp_half(M *m, V a) { return exp_core(m, mul(m, a, fk(m, 0.5))); }

/* sinh: |x| < 1: the Taylor series (odd powers to x^13 / x^21); below 22: (e - 1/e)/2 with
 * e = e^|x| (the subtraction loses at most a factor 1.16); beyond: e^|x|/2 = (w/2) w with
 * w = e^(|x|/2). */
static V m_sinh(M *m, V x) {
    V a = sel(m, isnan_(m, x), fk(m, 0), fabs_(m, x));
    double c[12];
    int n = m->dbl ? 10 : 6;
    double fact = 1;
    for (int i = 0; i < n; i++) {
        if (i) fact *= (2.0 * i) * (2.0 * i + 1);
        c[i] = 1 / fact;
    }
    V small = mul(m, a, horner(m, mul(m, a, a), c, n));
    V e = exp_core(m, clamp(m, a, 0, 22));
    V mid = mul(m, sub(m, e, fdiv(m, fk(m, 1), e)), fk(m, 0.5));
    V w = exp_half(m, a);
    V big = mul(m, mul(m, w, fk(m, 0.5)), w);
    V r = sel(m, cmp(m, LLVMRealOLT, a, fk(m, 1)), small,
              sel(m, cmp(m, LLVMRealOLT, a, fk(m, 22)), mid, big));
    return sel(m, isnan_(m, x), x, copysign_(m, r, x));
}

/* cosh = (e + 1/e)/2 (no cancellation); beyond 22 as sinh. */
static V m_cosh(M *m, V x) {
    V a = sel(m, isnan_(m, x), fk(m, 0), fabs_(m, x));
    V e = exp_core(m, clamp(m, a, 0, 22));
    V mid = mul(m, add(m, e, fdiv(m, fk(m, 1), e)), fk(m, 0.5));
    V w = exp_half(m, a);
    V big = mul(m, mul(m, w, fk(m, 0.5)), w);
    V r = sel(m, cmp(m, LLVMRealOLT, a, fk(m, 22)), mid, big);
    return sel(m, isnan_(m, x), x, r);
}

/* ln(1 + y) for y >= 0 (or NaN, or y < -1 giving NaN): u = 1 + y rounds, and the rounding
 * error y - (u - 1) (exact) corrects ln u to first order. */
static V log1p_(M *m, V y) {
    V u = add(m, fk(m, 1), y);
    V c = fdiv(m, sub(m, y, sub(m, u, fk(m, 1))), u);
    V r = add(m, m_log(m, u), c);
    return sel(m, cmp(m, LLVMRealOEQ, u, fk(m, INFINITY)), u, r);
}

/* Above this ln(2a) is the answer to within the precision. */
static double big_arg(M *m) { return ldexp(1.0, m->dbl ? 28 : 13); }

/* asinh |x| = ln(|x| + sqrt(x^2 + 1)), rearranged per range against cancellation and
 * overflow (fdlibm): log1p(a + a^2/(1 + sqrt(1 + a^2))) up to 2, then
 * ln(2a + 1/(sqrt(a^2 + 1) + a)), then ln a + ln 2. */
static V m_asinh(M *m, V x) {
    V a = fabs_(m, x);
    V a2 = mul(m, a, a);
    V q = sqrt_(m, add(m, a2, fk(m, 1)));
    V small = log1p_(m, add(m, a, fdiv(m, a2, add(m, fk(m, 1), q))));
    V mid = m_log(m, add(m, add(m, a, a), fdiv(m, fk(m, 1), add(m, q, a))));
    V big = add(m, m_log(m, a), fk(m, M_LN2));
    V r = sel(m, cmp(m, LLVMRealOLE, a, fk(m, 2)), small,
              sel(m, cmp(m, LLVMRealOLE, a, fk(m, big_arg(m))), mid, big));
    return sel(m, isnan_(m, x), x, copysign_(m, r, x));
}

/* acosh x = ln(x + sqrt(x^2 - 1)): log1p(t + sqrt(2t + t^2)) with t = x - 1 up to 2, then
 * ln(2x - 1/(x + sqrt(x^2 - 1))), then ln x + ln 2. x < 1 gives NaN. */
static V m_acosh(M *m, V x) {
    V t = sub(m, x, fk(m, 1));
    V small = log1p_(m, add(m, t, sqrt_(m, add(m, add(m, t, t), mul(m, t, t)))));
    V q = sqrt_(m, sub(m, mul(m, x, x), fk(m, 1)));
    V mid = m_log(m, sub(m, add(m, x, x), fdiv(m, fk(m, 1), add(m, x, q))));
    V big = add(m, m_log(m, x), fk(m, M_LN2));
    V r = sel(m, cmp(m, LLVMRealOLE, x, fk(m, 2)), small,
              sel(m, cmp(m, LLVMRealOLE, x, fk(m, big_arg(m))), mid, big));
    r = sel(m, cmp(m, LLVMRealOLT, x, fk(m, 1)), fk(m, NAN), r);
    return sel(m, isnan_(m, x), x, r);
}

/* atanh |x| = log1p(2|x| / (1 - |x|)) / 2, written log1p(2a + 2a^2/(1 - a)) / 2 below 0.5 to
 * keep small results exact (fdlibm). |x| = 1 gives inf, |x| > 1 NaN. */
static V m_atanh(M *m, V x) {
    V a = fabs_(m, x);
    V one_a = sub(m, fk(m, 1), a);
    V a2 = add(m, a, a);
    V small = log1p_(m, add(m, a2, fdiv(m, mul(m, a2, a), one_a)));
    V large = log1p_(m, fdiv(m, a2, one_a));
    V r = mul(m, sel(m, cmp(m, LLVMRealOLT, a, fk(m, 0.5)), small, large), fk(m, 0.5));
    r = sel(m, cmp(m, LLVMRealOGT, a, fk(m, 1)), fk(m, NAN), r);
    return sel(m, isnan_(m, x), x, copysign_(m, r, x));
}

/* ---- the helpers ---- */

bool be_math_op(KOp op) {
    switch (op) {
    case K_EXP: case K_LOG: case K_TANH: case K_SIGMOID: case K_ERF: case K_ERF1P:
    case K_FLOOR: case K_CEIL: case K_ROUND: case K_POW: case K_REM:
    case K_SIN: case K_COS: case K_TAN: case K_ASIN: case K_ACOS: case K_ATAN:
    case K_SINH: case K_COSH: case K_ASINH: case K_ACOSH: case K_ATANH:
        return true;
    default:
        return false;
    }
}

static V build_body(M *m, KOp op, V a, V b) {
    switch (op) {
    case K_EXP: return m_exp(m, a);
    case K_LOG: return m_log(m, a);
    case K_TANH: return m_tanh(m, a);
    case K_SIGMOID: return m_sigmoid(m, a);
    case K_ERF: return m_erf(m, a);
    case K_ERF1P: return m_erf1p(m, a);
    case K_FLOOR: return m_floor(m, a);
    case K_CEIL: return m_ceil(m, a);
    case K_ROUND: return m_round(m, a);
    case K_POW: return m_pow(m, a, b);
    case K_REM: return m_rem(m, a, b);
    case K_SIN: return m_sin(m, a);
    case K_COS: return m_cos(m, a);
    case K_TAN: return m_tan(m, a);
    case K_ASIN: return m_asin(m, a);
    case K_ACOS: return m_acos(m, a);
    case K_ATAN: return m_atan(m, a);
    case K_SINH: return m_sinh(m, a);
    case K_COSH: return m_cosh(m, a);
    case K_ASINH: return m_asinh(m, a);
    case K_ACOSH: return m_acosh(m, a);
    case K_ATANH: return m_atanh(m, a);
    default: die("no float math for %s", kop_name[op]);
    }
}

static LLVMValueRef make_helper(Emitter *e, KOp op, bool dbl, unsigned w, const char *name) {
    M m = {.e = e, .dbl = dbl};
    m.F = dbl ? e->f64 : e->f32;
    m.I = dbl ? e->i64 : e->i32;
    if (w) {
        m.F = LLVMVectorType(m.F, w);
        m.I = LLVMVectorType(m.I, w);
    }
    m.mant = dbl ? 52 : 23;
    m.bias = dbl ? 1023 : 127;
    int nargs = op == K_POW || op == K_REM ? 2 : 1;
    LLVMTypeRef params[2] = {m.F, m.F};
    LLVMValueRef fn = LLVMAddFunction(e->M, name, LLVMFunctionType(m.F, params, (unsigned)nargs, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "alwaysinline");
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "willreturn");
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "nosync");
    m.b = LLVMCreateBuilderInContext(e->C);
    LLVMPositionBuilderAtEnd(m.b, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    V r = build_body(&m, op, LLVMGetParam(fn, 0), nargs == 2 ? LLVMGetParam(fn, 1) : NULL);
    LLVMBuildRet(m.b, r);
    LLVMDisposeBuilder(m.b);
    return fn;
}

/* Integer x^y by repeated squaring; a negative y gives 0 except for x = 1 and x = -1 (what
 * truncating the real result gives). */
static LLVMValueRef make_int_pow(Emitter *e, LLVMTypeRef ty, bool is_signed, const char *name) {
    LLVMTypeRef params[2] = {ty, ty};
    LLVMValueRef fn = LLVMAddFunction(e->M, name, LLVMFunctionType(ty, params, 2, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_fn_attrs(e, fn);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(e->C);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry"),
                      loop = LLVMAppendBasicBlockInContext(e->C, fn, "loop"),
                      done = LLVMAppendBasicBlockInContext(e->C, fn, "done");
    LLVMValueRef x = LLVMGetParam(fn, 0), y = LLVMGetParam(fn, 1);
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef neg = is_signed ? LLVMBuildICmp(b, LLVMIntSLT, y, zero, "") : LLVMConstInt(e->i1, 0, 0);
    LLVMValueRef e0 = LLVMBuildSelect(b, neg, zero, y, "");
    LLVMBuildBr(b, loop);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef r = LLVMBuildPhi(b, ty, "r"), base = LLVMBuildPhi(b, ty, "b"), ex = LLVMBuildPhi(b, ty, "e");
    LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, ex, one, ""), zero, "");
    LLVMValueRef r1 = LLVMBuildSelect(b, odd, LLVMBuildMul(b, r, base, ""), r, "");
    LLVMValueRef b1 = LLVMBuildMul(b, base, base, "");
    LLVMValueRef e1 = LLVMBuildLShr(b, ex, one, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, e1, zero, ""), loop, done);
    LLVMValueRef rv[2] = {one, r1}, bv[2] = {x, b1}, ev[2] = {e0, e1};
    LLVMBasicBlockRef from[2] = {entry, loop};
    LLVMAddIncoming(r, rv, from, 2);
    LLVMAddIncoming(base, bv, from, 2);
    LLVMAddIncoming(ex, ev, from, 2);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMValueRef yodd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, y, one, ""), zero, "");
    LLVMValueRef mone = LLVMConstAllOnes(ty);
    LLVMValueRef negr = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, one, ""), one,
                        LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, mone, ""),
                                        LLVMBuildSelect(b, yodd, mone, one, ""), zero, ""), "");
    LLVMBuildRet(b, LLVMBuildSelect(b, neg, negr, r1, ""));
    LLVMDisposeBuilder(b);
    return fn;
}

static LLVMValueRef int_pow(Emitter *e, DType t, LLVMValueRef a, LLVMValueRef b) {
    LLVMTypeRef ty = LLVMTypeOf(a);
    bool is_signed = !(t == DT_UINT8 || t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64);
    char name[48];
    snprintf(name, sizeof name, "onnxcc.pow.%si%u", is_signed ? "" : "u", LLVMGetIntTypeWidth(ty));
    LLVMValueRef fn = LLVMGetNamedFunction(e->M, name);
    if (!fn) fn = make_int_pow(e, ty, is_signed, name);
    LLVMValueRef args[2] = {a, b};
    return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(fn), fn, args, 2, "");
}

/* Integer pow on vectors: the scalar helper lane by lane (its loop depends on the exponent). */
static LLVMValueRef int_pow_lanes(Emitter *e, DType t, LLVMValueRef a, LLVMValueRef b) {
    unsigned w = LLVMGetVectorSize(LLVMTypeOf(a));
    LLVMValueRef r = LLVMGetPoison(LLVMTypeOf(a));
    for (unsigned i = 0; i < w; i++) {
        LLVMValueRef ix = LLVMConstInt(e->i32, i, 0);
        LLVMValueRef x = int_pow(e, t, LLVMBuildExtractElement(e->B, a, ix, ""),
                                 LLVMBuildExtractElement(e->B, b, ix, ""));
        r = LLVMBuildInsertElement(e->B, r, x, ix, "");
    }
    return r;
}

LLVMValueRef be_math(Emitter *e, KOp op, DType t, LLVMValueRef a, LLVMValueRef b) {
    if (t == DT_FLOAT16 || t == DT_BFLOAT16 || dtype_is_minifloat(t)) t = DT_FLOAT;   /* held as float (kir.h) */
    LLVMTypeRef ty = LLVMTypeOf(a);
    unsigned w = LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetVectorSize(ty) : 0;
    if (op == K_POW && t != DT_FLOAT && t != DT_DOUBLE && t != DT_BOOL)
        return w ? int_pow_lanes(e, t, a, b) : int_pow(e, t, a, b);
    if (t != DT_FLOAT && t != DT_DOUBLE) die("float math %s on dtype %d", kop_name[op], t);
    bool dbl = t == DT_DOUBLE;
    /* one helper per op, float type and width: onnxcc.EXP.f32, onnxcc.EXP.v16f32, ... */
    char name[64];
    snprintf(name, sizeof name, w ? "onnxcc.%s.v%u%s" : "onnxcc.%s.%.0u%s", kop_name[op], w, dbl ? "f64" : "f32");
    LLVMValueRef fn = w ? LLVMGetNamedFunction(e->M, name) : e->mathfn[op][dbl];
    if (!fn) fn = make_helper(e, op, dbl, w, name);
    if (!w) e->mathfn[op][dbl] = fn;
    LLVMValueRef args[2] = {a, b};
    return LLVMBuildCall2(e->B, LLVMGlobalGetValueType(fn), fn, args, b ? 2 : 1, "");
}
