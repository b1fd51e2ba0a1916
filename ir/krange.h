/* krange.h - what is known of a kernel's loop variables at a point of its body (each one's
 * first value, last value and step) and the index simplification that allows: divisions and
 * remainders by constants whose dividend stays within one block, or splits into a multiple of
 * the divisor and a rest in [0, divisor), are rewritten without them. Used by the backend so
 * that indices like ((a * 128 + v) / 128, (a * 128 + v) % 128) are seen affine in the lane
 * (contiguous vector accesses instead of gathers). */
#ifndef ONNXCC_KRANGE_H
#define ONNXCC_KRANGE_H
#include "kir.h"

/* Loop variable v takes the values lo, lo + step, ..., hi (hi is the last value, not the
 * bound) when known; an array indexed by variable number. */
typedef struct KRange {
    int64_t lo, hi, step;
    bool known;
} KRange;

/* The range of loop s's variable (unknown unless its bounds are constants and it runs). */
KRange kr_loop(const Stmt *s);
/* The smallest and largest value of index expression e over the ranges r; false unless e is
 * affine in known variables. */
bool kr_bounds(const KRange *r, const Expr *e, int64_t *mn, int64_t *mx);
/* e with its integer divisions and remainders by positive constants removed where the ranges
 * r prove them (dividends >= 0): a new tree, or e itself when nothing changes. */
Expr *kr_simplify(Program *p, const KRange *r, Expr *e);

#endif
