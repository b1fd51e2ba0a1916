/* krange.h - what is known of a kernel's loop variables at a point of its body (each one's
 * first value, last value and step) and the index simplification that allows: divisions and
 * remainders by constants whose dividend stays within one block, or splits into a multiple of
 * the divisor and a rest in [0, divisor), are rewritten without them. Used by the backend so
 * that indices like ((a * 128 + v) / 128, (a * 128 + v) % 128) are seen affine in the lane
 * (contiguous vector accesses instead of gathers), and by the schedule's interval analysis
 * (passes/loops.c: which conditions a loop piece makes true, the indices of packed buffers). */
#ifndef ONNXCC_KRANGE_H
#define ONNXCC_KRANGE_H
#include "kir.h"

/* Loop variable v takes the values lo, lo + step, ..., hi (hi is the last value, not the
 * bound) when known; an array indexed by variable number. */
typedef struct KRange {
    int64_t lo, hi, step;
    bool known;
} KRange;

/* An affine form over loop variables: c + sum of coef[i] * variable var[i]. */
enum { KR_MAX_TERMS = 16 };
typedef struct KAff {
    int n;
    int var[KR_MAX_TERMS];
    int64_t coef[KR_MAX_TERMS];
    int64_t c;
} KAff;
/* a += mul * e if e is an affine index expression (sums, differences, negations and products
 * with constants of loop variables and constants, magnitudes below 2^28); false if not. */
bool kr_affine(const Expr *e, int64_t mul, KAff *a);
/* The smallest and largest value of f over the ranges r; false if a variable's is unknown. */
bool kr_aff_bounds(const KRange *r, const KAff *f, int64_t *mn, int64_t *mx);

/* The range of loop s's variable (unknown unless its bounds are constants and it runs). */
KRange kr_loop(const Stmt *s);
/* The smallest and largest value of index expression e over the ranges r; false unless e is
 * affine in known variables. */
bool kr_bounds(const KRange *r, const Expr *e, int64_t *mn, int64_t *mx);
/* e with its integer divisions and remainders by positive constants removed where the ranges
 * r prove them (dividends >= 0): a new tree, or e itself when nothing changes. */
Expr *kr_simplify(Program *p, const KRange *r, Expr *e);

#endif
