/* krange.c - ranges of loop variables and the division-free rewriting of block indices they
 * allow (krange.h). Index expressions are taken apart into affine forms over loop variables;
 * anything else (loads, registers, min/max) is left as it is. Magnitudes are kept small enough
 * (2^28 per coefficient and value) that the sums below cannot overflow. */
#include "krange.h"

enum { MAX_TERMS = KR_MAX_TERMS };
#define BIG ((int64_t)1 << 28)

typedef KAff Aff;

static bool small(int64_t x) { return x > -BIG && x < BIG; }

KRange kr_loop(const Stmt *s) {
    KRange r = {0, 0, 1, false};
    if (s->lo->kind != E_CONST || s->hi->kind != E_CONST || s->step <= 0 || s->hi->i <= s->lo->i) return r;
    r.lo = s->lo->i;
    r.hi = s->lo->i + (s->hi->i - 1 - s->lo->i) / s->step * s->step;
    r.step = s->step;
    r.known = small(r.lo) && small(r.hi) && small(r.step);
    return r;
}

bool kr_affine(const Expr *e, int64_t mul, Aff *a) {
    if (e->type != DT_INDEX || !small(mul)) return false;
    switch (e->kind) {
    case E_CONST:
        if (!small(e->i)) return false;
        a->c += mul * e->i;
        return small(a->c);
    case E_VAR:
        for (int i = 0; i < a->n; i++)
            if (a->var[i] == e->var) {
                a->coef[i] += mul;
                return small(a->coef[i]);
            }
        if (a->n == MAX_TERMS) return false;
        a->var[a->n] = e->var;
        a->coef[a->n++] = mul;
        return true;
    case E_UN: return e->op == K_NEG && kr_affine(e->args[0], -mul, a);
    case E_BIN:
        if (e->op == K_ADD) return kr_affine(e->args[0], mul, a) && kr_affine(e->args[1], mul, a);
        if (e->op == K_SUB) return kr_affine(e->args[0], mul, a) && kr_affine(e->args[1], -mul, a);
        if (e->op == K_MUL && e->args[1]->kind == E_CONST && small(e->args[1]->i))
            return kr_affine(e->args[0], mul * e->args[1]->i, a);
        if (e->op == K_MUL && e->args[0]->kind == E_CONST && small(e->args[0]->i))
            return kr_affine(e->args[1], mul * e->args[0]->i, a);
        return false;
    default: return false;
    }
}

/* The smallest and largest value of f without its constant; false if unknown. */
static bool aff_bounds(const KRange *r, const Aff *f, int64_t *mn, int64_t *mx) {
    *mn = *mx = 0;
    for (int i = 0; i < f->n; i++) {
        if (!f->coef[i]) continue;
        const KRange *v = &r[f->var[i]];
        if (!v->known) return false;
        int64_t x = f->coef[i] * v->lo, y = f->coef[i] * v->hi;
        *mn += MIN(x, y);
        *mx += MAX(x, y);
    }
    return true;
}

bool kr_aff_bounds(const KRange *r, const Aff *f, int64_t *mn, int64_t *mx) {
    if (!aff_bounds(r, f, mn, mx)) return false;
    *mn += f->c;
    *mx += f->c;
    return true;
}

bool kr_bounds(const KRange *r, const Expr *e, int64_t *mn, int64_t *mx) {
    Aff f = {0};
    return kr_affine(e, 1, &f) && kr_aff_bounds(r, &f, mn, mx);
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The terms of f picked by take, times mul / div (exact where used), plus c. */
static Expr *aff_expr(Program *p, const Aff *f, const bool *take, int64_t div, int64_t c) {
    Expr *e = NULL;
    for (int i = 0; i < f->n; i++) {
        if (!take[i] || !f->coef[i]) continue;
        Expr *t = f->coef[i] % div == 0 ? kx_mul(p, kx_var(p, f->var[i]), f->coef[i] / div)
                                        : kx_bin(p, K_DIV, kx_mul(p, kx_var(p, f->var[i]), f->coef[i]), kx_index(p, div));
        e = e ? kx_add(p, e, t) : t;
    }
    return e ? kx_addc(p, e, c) : kx_index(p, c);
}

/* a / b or a % b (rem) for b > 1 without the division, or NULL. With a = b*Q + R: Q takes
 * the terms that are multiples of b at every point (a coefficient divisible by b, or a
 * variable whose every value times its coefficient is), R the others plus the part of the
 * constant that puts R's range inside [0, b). Then, a being >= 0, C's truncating a / b is Q
 * and a % b is R. */
static Expr *divide(Program *p, const KRange *r, const Expr *a, int64_t b, bool rem) {
    Aff f = {0};
    int64_t mn, mx;
    if (!kr_affine(a, 1, &f) || !aff_bounds(r, &f, &mn, &mx) || mn + f.c < 0) return NULL;
    bool aligned[MAX_TERMS], rest[MAX_TERMS];
    Aff fr = {0};
    for (int i = 0; i < f.n; i++) {
        const KRange *v = &r[f.var[i]];
        aligned[i] = f.coef[i] % b == 0 || (v->known && f.coef[i] * v->lo % b == 0 && f.coef[i] * v->step % b == 0);
        rest[i] = !aligned[i];
        if (rest[i]) fr.var[fr.n] = f.var[i], fr.coef[fr.n++] = f.coef[i];
    }
    if (!aff_bounds(r, &fr, &mn, &mx)) return NULL;
    int64_t cr = -mn + ((f.c + mn) % b + b) % b;       /* == f.c mod b, the least >= -mn */
    if (cr + mx >= b) return NULL;
    if (rem) return aff_expr(p, &f, rest, 1, cr);
    return aff_expr(p, &f, aligned, b, floor_div(f.c - cr, b));
}

Expr *kr_simplify(Program *p, const KRange *r, Expr *e) {
    Expr **args = e->args;
    for (int i = 0; i < e->nargs; i++) {
        Expr *x = kr_simplify(p, r, e->args[i]);
        if (x == e->args[i]) continue;
        if (args == e->args) {
            args = ARENA_ARRAY(p->arena, Expr *, e->nargs);
            for (int j = 0; j < e->nargs; j++) args[j] = e->args[j];
        }
        args[i] = x;
    }
    if (e->kind == E_BIN && (e->op == K_DIV || e->op == K_REM) && e->type == DT_INDEX &&
        args[1]->kind == E_CONST && args[1]->i > 0) {
        int64_t b = args[1]->i;
        bool rem = e->op == K_REM;
        if (b == 1) return rem ? kx_index(p, 0) : args[0];
        Expr *x = divide(p, r, args[0], b, rem);
        if (x) return x;
    }
    /* (a / b) * (b * m) is a * m where a's remainder by b is 0 at every point (a grouped
     * conv's group base after split: i / 32 * 32 with i stepping by 32 is i) */
    if (e->kind == E_BIN && e->op == K_MUL && e->type == DT_INDEX && args[1]->kind == E_CONST &&
        args[0]->kind == E_BIN && args[0]->op == K_DIV && args[0]->args[1]->kind == E_CONST && args[0]->args[1]->i > 1 &&
        args[1]->i % args[0]->args[1]->i == 0) {
        Expr *rest = divide(p, r, args[0]->args[0], args[0]->args[1]->i, true);
        if (rest && rest->kind == E_CONST && rest->i == 0)
            return kx_mul(p, args[0]->args[0], args[1]->i / args[0]->args[1]->i);
    }
    if (args == e->args) return e;
    Expr *c = ARENA_NEW(p->arena, Expr);
    *c = *e;
    c->args = args;
    return c;
}
