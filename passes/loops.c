/* loops.c - the loop primitives of the schedule pass (see loops.h): split, jam, unroll,
 * vectorize, interchange, peel, and the legality queries they share. They know nothing of
 * kernel classes or targets; passes/schedule.c decides which to apply with which factors. */
#include <stdarg.h>
#include <string.h>

#include "../ir/krange.h"
#include "loops.h"

enum { MAX_JAM = 128 };

void sched_note(Program *p, Kernel *k, const char *fmt, ...) {
    char step[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(step, sizeof step, fmt, ap);
    va_end(ap);
    k->sched = k->sched ? arena_printf(p->arena, "%s %s", k->sched, step) : arena_strdup(p->arena, step);
}

/* ---- small queries ---- */
static bool expr_reads_scalar(const Expr *e) {
    if (e->kind == E_SCALAR) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads_scalar(e->args[i])) return true;
    return false;
}

static int expr_size(const Expr *e) {
    int n = 1;
    for (int i = 0; i < e->nargs; i++) n += expr_size(e->args[i]);
    return n;
}

int stmt_size(const Stmt *s) {
    int n = 0;
    for (; s; s = s->next) {
        n++;
        if (s->val) n += expr_size(s->val);
        if (s->cond) n += expr_size(s->cond);
        n += stmt_size(s->body) + stmt_size(s->then) + stmt_size(s->els);
    }
    return n;
}

bool mark_reductions(Stmt *s) {
    bool stores = false;
    for (; s; s = s->next) switch (s->kind) {
    case S_STORE: stores = true; break;
    case S_SET: break;
    case S_IF: stores |= mark_reductions(s->then); stores |= mark_reductions(s->els); break;
    case S_LOOP:
        if (mark_reductions(s->body)) stores = true;
        else s->hints |= LH_REDUCTION;
        break;
    }
    return stores;
}

/* ---- legality ---- */
bool kernel_independent(const Kernel *k) {
    for (int i = 0; i < k->nparams; i++) {
        if (k->modes[i] == KP_INOUT) return false;
        for (int j = 0; j < k->nparams; j++)
            if (i != j && (k->modes[i] & KP_OUT) && kir_root(k->params[i]) == kir_root(k->params[j]))
                return false;
    }
    return true;
}

/* iterations_independent (loops.h): what l's body stores and loads, for the per-loop test. */
typedef struct Touch {
    const Stmt *l;
    bool *inner;                    /* variables of l and of the loops inside it */
    bool *set;                      /* registers set inside l */
    const Stmt **st;                /* the stores in l's body */
    int nst;
} Touch;

static bool expr_same(const Expr *a, const Expr *b) {
    if (a->kind != b->kind || a->op != b->op || a->type != b->type || a->f != b->f ||
        a->i != b->i || a->var != b->var || a->buf != b->buf || a->nargs != b->nargs)
        return false;
    for (int i = 0; i < a->nargs; i++)
        if (!expr_same(a->args[i], b->args[i])) return false;
    return true;
}

static bool uniform_in(const Touch *t, const Expr *e) {
    if (e->kind == E_VAR && t->inner[e->var]) return false;
    if (e->kind == E_SCALAR && t->set[e->var]) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!uniform_in(t, e->args[i])) return false;
    return true;
}

static bool injective_in(const Touch *t, const Expr *e) {
    if (e->kind == E_VAR) return e->var == t->l->var;
    if (e->kind != E_BIN) return false;
    const Expr *a = e->args[0], *b = e->args[1];
    if (e->op == K_ADD || e->op == K_SUB)
        return (injective_in(t, a) && uniform_in(t, b)) ||
               (uniform_in(t, a) && injective_in(t, b));
    if (e->op == K_MUL)
        return (injective_in(t, a) && b->kind == E_CONST && b->i) ||
               (injective_in(t, b) && a->kind == E_CONST && a->i);
    return false;
}

static int count_stores(const Stmt *s) {
    int n = 0;
    for (; s; s = s->next)
        n += (s->kind == S_STORE) + count_stores(s->body) + count_stores(s->then) +
             count_stores(s->els);
    return n;
}

static void touch_scan(Touch *t, const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP) t->inner[s->var] = true;
        if (s->kind == S_SET) t->set[s->var] = true;
        if (s->kind == S_STORE) t->st[t->nst++] = s;
        touch_scan(t, s->body);
        touch_scan(t, s->then);
        touch_scan(t, s->els);
    }
}

/* The store of l's body to b's storage, NULL if none. */
static const Stmt *store_of(const Touch *t, const Buf *b) {
    for (int i = 0; i < t->nst; i++)
        if (kir_root(t->st[i]->buf) == kir_root((Buf *)b)) return t->st[i];
    return NULL;
}

static bool same_access(const Stmt *st, const Buf *b, Expr *const *idx) {
    if (st->buf != b) return false;
    for (int d = 0; d < b->rank; d++)
        if (!expr_same(st->idx[d], idx[d])) return false;
    return true;
}

static bool loads_own(const Touch *t, const Expr *e) {
    if (!e) return true;
    if (e->kind == E_LOAD) {
        const Stmt *st = store_of(t, e->buf);
        if (st && !same_access(st, e->buf, e->args)) return false;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!loads_own(t, e->args[i])) return false;
    return true;
}

static bool stmts_load_own(const Touch *t, const Stmt *s) {
    for (; s; s = s->next) {
        if (!loads_own(t, s->val) || !loads_own(t, s->cond) || !loads_own(t, s->lo) ||
            !loads_own(t, s->hi))
            return false;
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++)
            if (!loads_own(t, s->idx[d])) return false;
        if (!stmts_load_own(t, s->body) || !stmts_load_own(t, s->then) ||
            !stmts_load_own(t, s->els))
            return false;
    }
    return true;
}

bool iterations_independent(Program *p, const Kernel *k, const Stmt *l) {
    if (kernel_independent(k)) return true;
    Touch t = {l, ARENA_ARRAY(p->arena, bool, k->nvars + 1),
               ARENA_ARRAY(p->arena, bool, k->nscalars + 1),
               ARENA_ARRAY(p->arena, const Stmt *, count_stores(l->body) + 1), 0};
    t.inner[l->var] = true;
    touch_scan(&t, l->body);
    for (int i = 0; i < t.nst; i++) {
        const Stmt *s = t.st[i];
        if (!same_access(store_of(&t, s->buf), s->buf, s->idx)) return false;
        bool inj = false;
        for (int d = 0; d < s->buf->rank && !inj; d++) inj = injective_in(&t, s->idx[d]);
        if (!inj) return false;
    }
    return stmts_load_own(&t, l->body);
}


static bool reads_defined(const Expr *e, const bool *def) {
    if (e->kind == E_SCALAR && !def[e->var]) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!reads_defined(e->args[i], def)) return false;
    return true;
}

/* Every register read in the list is set earlier in the same list or an enclosing one; a
 * set inside a nested list counts only for the rest of that list (conservative). */
static bool private_regs(Arena *a, const Stmt *s, const bool *outer, int n) {
    bool *def = ARENA_ARRAY(a, bool, n + 1);
    for (int i = 0; i < n; i++) def[i] = outer[i];
    for (; s; s = s->next) {
        if (s->lo && (!reads_defined(s->lo, def) || !reads_defined(s->hi, def))) return false;
        if (s->val && !reads_defined(s->val, def)) return false;
        if (s->cond && !reads_defined(s->cond, def)) return false;
        if (s->kind == S_STORE)
            for (int d = 0; d < s->buf->rank; d++)
                if (!reads_defined(s->idx[d], def)) return false;
        if (s->kind == S_SET) def[s->var] = true;
        if (!private_regs(a, s->body, def, n) || !private_regs(a, s->then, def, n) ||
            !private_regs(a, s->els, def, n))
            return false;
    }
    return true;
}

bool body_private(Program *p, const Kernel *k, const Stmt *l) {
    bool *none = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    return private_regs(p->arena, l->body, none, k->nscalars);
}

static bool expr_reads_reg(const Expr *e, const bool *regs) {
    if (e->kind == E_SCALAR && regs[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads_reg(e->args[i], regs)) return true;
    return false;
}

static bool reads_undefined(const Expr *e, const bool *regs, const bool *def) {
    if (e->kind == E_SCALAR && regs[e->var] && !def[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_undefined(e->args[i], regs, def)) return true;
    return false;
}

/* Could a read of a register of regs outside statement `skip` see a value set inside it?
 * Such reads must follow a set of the register on their own path (the rule of private_regs,
 * with `skip` setting nothing). */
static bool leaks(Arena *a, const Stmt *s, const Stmt *skip, const bool *regs, const bool *outer, int n) {
    bool *def = ARENA_ARRAY(a, bool, n + 1);
    for (int i = 0; i < n; i++) def[i] = outer[i];
    for (; s; s = s->next) {
        if (s == skip) continue;
        if ((s->val && reads_undefined(s->val, regs, def)) || (s->cond && reads_undefined(s->cond, regs, def)))
            return true;
        if (s->kind == S_LOOP && (reads_undefined(s->lo, regs, def) || reads_undefined(s->hi, regs, def)))
            return true;
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++)
            if (reads_undefined(s->idx[d], regs, def)) return true;
        if (s->kind == S_SET) def[s->var] = true;
        if (leaks(a, s->body, skip, regs, def, n) || leaks(a, s->then, skip, regs, def, n) ||
            leaks(a, s->els, skip, regs, def, n))
            return true;
    }
    return false;
}

static void sets_in(const Stmt *s, bool *set) {
    for (; s; s = s->next) {
        if (s->kind == S_SET) set[s->var] = true;
        sets_in(s->body, set);
        sets_in(s->then, set);
        sets_in(s->els, set);
    }
}

static bool headers_uniform(const Stmt *s, int var, const bool *set) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (expr_reads_var(s->lo, var) || expr_reads_var(s->hi, var) ||
                                  expr_reads_reg(s->lo, set) || expr_reads_reg(s->hi, set)))
            return false;
        if (s->kind == S_IF && (expr_reads_var(s->cond, var) || expr_reads_reg(s->cond, set)))
            return false;
        if ((s->kind == S_LOOP && (s->hints & LH_VECTOR)) || !headers_uniform(s->body, var, set) ||
            !headers_uniform(s->then, var, set) || !headers_uniform(s->els, var, set))
            return false;
    }
    return true;
}

/* lanes_ok but for the memory test, which is the caller's of loop_vectorize. */
static bool lanes_regs_ok(Program *p, const Kernel *k, const Stmt *l) {
    bool *none = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    bool *set = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    bool *uniform = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    sets_in(l->body, set);
    for (int r = 0; r < k->nscalars; r++) uniform[r] = !set[r];    /* read-only: live-ins */
    return l->kind == S_LOOP && l->step == 1 && const_loop(l) &&
           private_regs(p->arena, l->body, uniform, k->nscalars) &&
           !leaks(p->arena, k->body, l, set, none, k->nscalars) &&
           headers_uniform(l->body, l->var, set);
}

bool lanes_ok(Program *p, const Kernel *k, const Stmt *l) {
    return lanes_regs_ok(p, k, l) && iterations_independent(p, k, l);
}

/* ---- copies of a loop body ----
 * Copies side by side, each with its own registers and its own value of some loop variables
 * (sub[c][v]: the expression variable v stands for in copy c); loops and ifs whose header
 * reads none of them are kept once with their bodies jammed. */
typedef struct Jam {
    Program *p;
    Kernel *k;
    int u;                          /* copies */
    Expr **sub[MAX_JAM];            /* per copy: variable -> expression, NULL: unchanged */
    int *reg[MAX_JAM];              /* per copy: register renaming */
} Jam;

static Expr *copy_expr(const Jam *m, const Expr *e, int c) {
    if (e->kind == E_VAR && m->sub[c][e->var]) return kx_clone(m->p, m->sub[c][e->var]);
    Expr *x = ARENA_NEW(m->p->arena, Expr);
    *x = *e;
    if (e->kind == E_SCALAR) x->var = m->reg[c][e->var];
    if (e->nargs) x->args = ARENA_ARRAY(m->p->arena, Expr *, e->nargs);
    for (int i = 0; i < e->nargs; i++) x->args[i] = copy_expr(m, e->args[i], c);
    return x;
}

/* Copy c of a statement list (variables substituted, registers renamed). */
static Stmt *copy_stmts(const Jam *m, const Stmt *s, int c) {
    Stmt *head = NULL;
    for (; s; s = s->next) {
        Stmt *x = ARENA_NEW(m->p->arena, Stmt);
        *x = *s;
        x->next = NULL;
        if (s->lo) x->lo = copy_expr(m, s->lo, c);
        if (s->hi) x->hi = copy_expr(m, s->hi, c);
        if (s->val) x->val = copy_expr(m, s->val, c);
        if (s->cond) x->cond = copy_expr(m, s->cond, c);
        if (s->kind == S_SET) x->var = m->reg[c][s->var];
        if (s->kind == S_STORE) {
            x->idx = ARENA_ARRAY(m->p->arena, Expr *, s->buf->rank + 1);
            for (int d = 0; d < s->buf->rank; d++) x->idx[d] = copy_expr(m, s->idx[d], c);
        }
        x->body = copy_stmts(m, s->body, c);
        x->then = copy_stmts(m, s->then, c);
        x->els = copy_stmts(m, s->els, c);
        head = ks_seq(head, x);
    }
    return head;
}

static bool reads_subst(const Jam *m, const Expr *e) {
    if (e->kind == E_VAR && m->sub[0][e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_subst(m, e->args[i])) return true;
    return false;
}

/* A loop or if whose header does not depend on the copy is shared by all copies. */
static bool shared_header(const Jam *m, const Stmt *s) {
    if (s->kind == S_LOOP)
        return !reads_subst(m, s->lo) && !reads_subst(m, s->hi) &&
               !expr_reads_scalar(s->lo) && !expr_reads_scalar(s->hi);
    if (s->kind == S_IF) return !reads_subst(m, s->cond) && !expr_reads_scalar(s->cond);
    return false;
}

static Stmt *jam(const Jam *m, const Stmt *s) {
    Stmt *head = NULL;
    for (; s; s = s->next) {
        if (shared_header(m, s)) {
            Stmt *x = ARENA_NEW(m->p->arena, Stmt);
            *x = *s;
            x->next = NULL;
            x->body = jam(m, s->body);
            x->then = jam(m, s->then);
            x->els = jam(m, s->els);
            head = ks_seq(head, x);
            continue;
        }
        /* One statement, copied U times in order. */
        Stmt one = *s;
        one.next = NULL;
        for (int c = 0; c < m->u; c++) head = ks_seq(head, copy_stmts(m, &one, c));
    }
    return head;
}

/* u copies of body's registers: copy 0 keeps them unless `fresh`, the others get new ones. */
static Jam jam_new(Program *p, Kernel *k, const Stmt *body, int u, bool fresh) {
    if (u > MAX_JAM) die("jam by %d", u);
    Jam m = {p, k, u, {0}, {0}};
    int nregs = k->nscalars;
    bool *used = ARENA_ARRAY(p->arena, bool, nregs + 1);
    sets_in(body, used);            /* registers only read are the same in every copy */
    for (int c = 0; c < u; c++) {
        m.sub[c] = ARENA_ARRAY(p->arena, Expr *, k->nvars + 1);
        m.reg[c] = ARENA_ARRAY(p->arena, int, nregs + 1);
        for (int r = 0; r < nregs; r++) m.reg[c][r] = (c || fresh) && used[r] ? kir_scalar(p, k, k->scalars[r]) : r;
    }
    return m;
}

/* Puts the list `with` in place of *at, linking its end to `next`. */
static void replace(Stmt **at, Stmt *with, Stmt *next) {
    Stmt *t = with;
    while (t->next) t = t->next;
    t->next = next;
    *at = with;
}

/* ---- primitives ---- */
Stmt *loop_split(Program *p, Kernel *k, Stmt **at, int64_t f) {
    Stmt *l = *at;
    if (!const_loop(l) || l->step != 1) die("split of a loop without constant bounds and step 1");
    int64_t lo = l->lo->i, hi = l->hi->i, mid = lo + (hi - lo) / f * f;
    if (mid == lo) return NULL;
    sched_note(p, k, "split(i%d,%lld)", l->var, (long long)f);
    Jam m = jam_new(p, k, l->body, 1, true);
    int o = kir_var(k), ii = kir_var(k);
    m.sub[0][l->var] = kx_add(p, kx_var(p, o), kx_var(p, ii));
    Stmt *in = ks_loop(p, ii, 0, f, 1, copy_stmts(&m, l->body, 0));
    Stmt *out = ks_loop(p, o, lo, mid, f, in);
    out->hints = LH_TILE | (l->hints & LH_REDO);     /* the values redone come first */
    out->redo = l->redo;
    l->hints &= ~(unsigned)LH_REDO;
    l->redo = 0;
    if (mid < hi) {
        l->lo = kx_index(p, mid);
        out->next = l;
    } else {
        out->next = l->next;
    }
    *at = out;
    return in;
}

Stmt *loop_jam(Program *p, Kernel *k, Stmt **at, int u) {
    Stmt *l = *at;
    if (!const_loop(l) || u < 2 || trips(l) < u) die("jam of loop i%d by %d", l->var, u);
    sched_note(p, k, "jam(i%d,%d)", l->var, u);
    Jam m = jam_new(p, k, l->body, u, false);
    int jt = kir_var(k);
    for (int c = 0; c < u; c++) m.sub[c][l->var] = kx_addc(p, kx_var(p, jt), c * l->step);
    int64_t lo = l->lo->i, n = trips(l), mid = lo + n / u * u * l->step;
    Stmt *main = ks_loop(p, jt, lo, mid, u * l->step, jam(&m, l->body));
    main->hints = LH_TILE | (l->hints & LH_REDO);
    main->redo = l->redo;
    l->hints &= ~(unsigned)LH_REDO;
    l->redo = 0;
    if (n % u) {
        l->lo = kx_index(p, mid);
        main->next = l;
    } else {
        main->next = l->next;
    }
    *at = main;
    return main;
}

void loop_unroll(Program *p, Kernel *k, Stmt **at) {
    Stmt *l = *at;
    if (!const_loop(l) || (l->hints & LH_REDO)) die("unroll of loop i%d", l->var);
    sched_note(p, k, "unroll(i%d)", l->var);
    Jam m = jam_new(p, k, l->body, 1, false);
    Stmt *head = NULL;
    for (int64_t v = l->lo->i; v < l->hi->i; v += l->step) {
        m.sub[0][l->var] = kx_index(p, v);
        head = ks_seq(head, copy_stmts(&m, l->body, 0));
    }
    if (head) replace(at, head, l->next);
    else *at = l->next;
}

bool loop_vectorize(Program *p, Kernel *k, Stmt *l) {
    int64_t n = const_loop(l) ? l->hi->i - l->lo->i : 0;
    if (n < 2 || n > MAX_LANES || !lanes_regs_ok(p, k, l)) return false;
    sched_note(p, k, "vectorize(i%d)", l->var);
    l->hints |= LH_VECTOR;
    return true;
}

int reduction_acc_size(Program *p, const Kernel *k, const Stmt *l) {
    if (l->kind != S_LOOP || !(l->hints & LH_REDUCTION) || !const_loop(l) || l->step != 1)
        return 0;
    for (const Stmt *s = l->body; s; s = s->next)
        if (s->kind != S_SET) return 0;
    KOp *acc = ARENA_ARRAY(p->arena, KOp, k->nscalars + 1);
    if (!kir_reduction_form(k, l->body, acc, NULL, 0)) return 0;
    int esz = 1;
    for (int r = 0; r < k->nscalars; r++)
        if (acc[r] != K_COUNT)
            esz = MAX(esz, (int)MAX(dtype_size(k->scalars[r]), dtype_is_float(k->scalars[r]) ? 4 : 1));
    return esz;
}

void loop_vectorize_reduction(Program *p, Kernel *k, Stmt *l) {
    sched_note(p, k, "vreduce(i%d)", l->var);
    l->hints |= LH_VECTOR;
}

const Expr *expr_lane_load(const Expr *e, const Buf *b, int var, int max) {
    if (!e) return NULL;
    int64_t c = e->kind == E_LOAD && e->nargs && (!b || e->buf == b) ? expr_coef(e->args[e->nargs - 1], var) : 0;
    if (c != 0 && c >= -max && c <= max) {
        bool rest = false;
        for (int d = 0; d < e->nargs - 1; d++) rest |= expr_reads_var(e->args[d], var);
        if (!rest && (max > 1 || c == 1)) return e;
    }
    for (int i = 0; i < e->nargs; i++) {
        const Expr *l = expr_lane_load(e->args[i], b, var, max);
        if (l) return l;
    }
    return NULL;
}

bool expr_lane_stride(const Expr *e, int var, int max) { return expr_lane_load(e, NULL, var, max) != NULL; }

void loop_overlap(Program *p, Kernel *k, Stmt *l, int64_t n) {
    if (!const_loop(l) || l->step != 1 || n < 0) die("overlap of loop i%d by %lld", l->var, (long long)n);
    sched_note(p, k, "overlap(i%d,%lld)", l->var, (long long)n);
    l->lo = kx_index(p, l->lo->i - n);
    l->hints |= LH_REDO;
    l->redo = n;
}

bool loop_interchange(Program *p, Kernel *k, Stmt *outer) {
    Stmt *in = outer->body;
    if (outer->kind != S_LOOP || !in || in->kind != S_LOOP || in->next || !const_loop(outer) || !const_loop(in))
        return false;
    sched_note(p, k, "interchange(i%d,i%d)", outer->var, in->var);
    Stmt t = *outer;
    outer->var = in->var, outer->lo = in->lo, outer->hi = in->hi, outer->step = in->step, outer->hints = in->hints;
    in->var = t.var, in->lo = t.lo, in->hi = t.hi, in->step = t.step, in->hints = t.hints;
    return true;
}

/* ---- interval analysis of index conditions ---- */

/* What is known of the loop variables at a point: each one's first and last value and its
 * step (ir/krange.h), by variable number. */
typedef struct Ranges {
    KRange *v;
} Ranges;

static Ranges ranges_new(Program *p, const Kernel *k) {
    return (Ranges){ARENA_ARRAY(p->arena, KRange, k->nvars + 1)};
}

/* Enters loop s: its variable's range; *saved keeps what was known before (range_leave). */
static void range_enter(Ranges *r, const Stmt *s, KRange *saved) {
    *saved = r->v[s->var];
    r->v[s->var] = kr_loop(s);
}

static void range_leave(Ranges *r, const Stmt *s, const KRange *saved) { r->v[s->var] = *saved; }

int64_t expr_coef(const Expr *e, int var) {
    KAff f = {0};
    if (!kr_affine(e, 1, &f)) return 0;
    for (int i = 0; i < f.n; i++)
        if (f.var[i] == var) return f.coef[i];
    return 0;
}

/* The smallest and largest value of a - b; false if unknown. */
static bool diff_range(const Ranges *r, const Expr *a, const Expr *b, int64_t *mn, int64_t *mx) {
    KAff f = {0};
    return kr_affine(a, 1, &f) && kr_affine(b, -1, &f) && kr_aff_bounds(r->v, &f, mn, mx);
}

/* 1: true at every point of the ranges, 0: false at every point, -1: unknown. */
static int truth(const Ranges *r, const Expr *e) {
    if (e->kind == E_CONST && e->type == DT_BOOL) return e->i != 0;
    if (e->kind == E_UN && e->op == K_NOT) {
        int t = truth(r, e->args[0]);
        return t < 0 ? t : !t;
    }
    if (e->kind != E_BIN) return -1;
    if (e->op == K_AND || e->op == K_OR) {
        if (e->type != DT_BOOL) return -1;
        int a = truth(r, e->args[0]), b = truth(r, e->args[1]);
        if (e->op == K_AND) return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : -1;
        return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : -1;
    }
    int64_t mn, mx;
    if (!(kop_flags[e->op] & KF_CMP) || !diff_range(r, e->args[0], e->args[1], &mn, &mx)) return -1;
    switch (e->op) {
    case K_LT: return mx < 0 ? 1 : mn >= 0 ? 0 : -1;
    case K_LE: return mx <= 0 ? 1 : mn > 0 ? 0 : -1;
    case K_GT: return mn > 0 ? 1 : mx <= 0 ? 0 : -1;
    case K_GE: return mn >= 0 ? 1 : mx < 0 ? 0 : -1;
    case K_EQ: return mn == 0 && mx == 0 ? 1 : mn > 0 || mx < 0 ? 0 : -1;
    case K_NE: return mn == 0 && mx == 0 ? 0 : mn > 0 || mx < 0 ? 1 : -1;
    default: return -1;
    }
}

/* e with provable selects resolved and the provably true terms of its conjunctions dropped. */
static Expr *resolve_expr(Program *p, const Ranges *r, Expr *e) {
    if (e->kind == E_SELECT) {
        int t = truth(r, e->args[0]);
        if (t >= 0) return resolve_expr(p, r, e->args[t ? 1 : 2]);
    }
    if (e->kind == E_BIN && e->op == K_AND && e->type == DT_BOOL) {
        if (truth(r, e->args[0]) == 1) return resolve_expr(p, r, e->args[1]);
        if (truth(r, e->args[1]) == 1) return resolve_expr(p, r, e->args[0]);
    }
    for (int i = 0; i < e->nargs; i++) e->args[i] = resolve_expr(p, r, e->args[i]);
    return e;
}

static void resolve_list(Program *p, Ranges *r, Stmt **at) {
    while (*at) {
        Stmt *s = *at;
        if (s->val) s->val = resolve_expr(p, r, s->val);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) s->idx[d] = resolve_expr(p, r, s->idx[d]);
        if (s->kind == S_IF) {
            int t = truth(r, s->cond);
            if (t >= 0) {
                Stmt *with = t ? s->then : s->els;
                if (with) replace(at, with, s->next);
                else *at = s->next;
                continue;           /* the spliced statements are looked at next */
            }
            s->cond = resolve_expr(p, r, s->cond);
            resolve_list(p, r, &s->then);
            resolve_list(p, r, &s->els);
        } else if (s->kind == S_LOOP) {
            KRange saved;
            range_enter(r, s, &saved);
            resolve_list(p, r, &s->body);
            range_leave(r, s, &saved);
        }
        at = &s->next;
    }
}

void resolve_conditions(Program *p, Kernel *k) {
    Ranges r = ranges_new(p, k);
    resolve_list(p, &r, &k->body);
}

/* ---- divisions of indices ---- */

static bool has_div(const Expr *e) {
    if (e->kind == E_BIN && (e->op == K_DIV || e->op == K_REM) && e->type == DT_INDEX) return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_div(e->args[i])) return true;
    return false;
}

/* e with the load indices inside it simplified by the ranges. */
static Expr *div_expr(Program *p, const Ranges *r, Expr *e) {
    if (e->kind == E_LOAD)
        for (int d = 0; d < e->nargs; d++)
            if (has_div(e->args[d])) e->args[d] = kr_simplify(p, r->v, e->args[d]);
    for (int i = 0; i < e->nargs; i++) e->args[i] = div_expr(p, r, e->args[i]);
    return e;
}

static void div_list(Program *p, Ranges *r, Stmt *s) {
    for (; s; s = s->next) {
        if (s->val) s->val = div_expr(p, r, s->val);
        if (s->cond) s->cond = div_expr(p, r, s->cond);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++)
            if (has_div(s->idx[d])) s->idx[d] = kr_simplify(p, r->v, s->idx[d]);
        div_list(p, r, s->then);
        div_list(p, r, s->els);
        if (s->kind == S_LOOP) {
            KRange saved;
            range_enter(r, s, &saved);
            div_list(p, r, s->body);
            range_leave(r, s, &saved);
        }
    }
}

void simplify_divisions(Program *p, Kernel *k) {
    Ranges r = ranges_new(p, k);
    div_list(p, &r, k->body);
}

Stmt *loop_peel(Program *p, Kernel *k, Stmt **at, int64_t front, int64_t back) {
    Stmt *l = *at;
    if (!const_loop(l) || l->step != 1 || front < 0 || back < 0 || front + back > trips(l))
        die("peel of loop i%d by %lld, %lld", l->var, (long long)front, (long long)back);
    sched_note(p, k, "peel(i%d,%lld,%lld)", l->var, (long long)front, (long long)back);
    int64_t lo = l->lo->i, hi = l->hi->i;
    Stmt *next = l->next, *head = NULL, *mid = l;
    l->next = NULL;
    if (front) {
        Stmt *f = ks_clone(p, l);
        f->hi = kx_index(p, lo + front);
        head = ks_seq(head, f);
    }
    if (back) {
        Stmt *b = ks_clone(p, l);
        b->lo = kx_index(p, hi - back);
        l->next = b;
    }
    l->lo = kx_index(p, lo + front);
    l->hi = kx_index(p, hi - back);
    if (lo + front == hi - back) {      /* no middle */
        mid = NULL;
        head = ks_seq(head, l->next);
    } else {
        head = ks_seq(head, l);
    }
    if (head) replace(at, head, next);
    else *at = next;
    resolve_conditions(p, k);
    return mid;
}

/* ---- pack ---- */

/* e / b (inner: e % b) for an index e >= 0, without the division where the ranges allow
 * (kr_simplify: a constant quotient when e stays within one block, else the terms that are
 * multiples of b at every point - a tile loop's variable stepping by b - divided term by term
 * and the rest, in [0, b), as the remainder); else the division. */
static Expr *block_index(Program *p, const Ranges *r, const Expr *e, int64_t b, bool inner) {
    return kr_simplify(p, r->v, kx_bin(p, inner ? K_REM : K_DIV, kx_clone(p, e), kx_index(p, b)));
}

typedef struct Pack {
    Buf *from, *to;
    int rank;
    const PackDim *pd;
} Pack;

static void pack_expr(Program *p, const Ranges *r, const Pack *pk, Expr *e) {
    for (int i = 0; i < e->nargs; i++) pack_expr(p, r, pk, e->args[i]);
    if (e->kind != E_LOAD || e->buf != pk->from) return;
    Expr **a = ARENA_ARRAY(p->arena, Expr *, pk->rank);
    for (int d = 0; d < pk->rank; d++) {
        const PackDim *x = &pk->pd[d];
        a[d] = x->block ? block_index(p, r, e->args[x->src], x->block, x->inner) : e->args[x->src];
    }
    e->buf = pk->to;
    e->args = a;
    e->nargs = pk->rank;
}

static void pack_list(Program *p, Ranges *r, const Pack *pk, Stmt *s) {
    for (; s; s = s->next) {
        if (s->val) pack_expr(p, r, pk, s->val);
        if (s->cond) pack_expr(p, r, pk, s->cond);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) pack_expr(p, r, pk, s->idx[d]);
        if (s->kind == S_LOOP) {
            KRange saved;
            pack_expr(p, r, pk, s->lo);
            pack_expr(p, r, pk, s->hi);
            range_enter(r, s, &saved);
            pack_list(p, r, pk, s->body);
            range_leave(r, s, &saved);
        }
        pack_list(p, r, pk, s->then);
        pack_list(p, r, pk, s->els);
    }
}

Buf *pack_const(Program *p, const Buf *b, const char *name, int rank, const PackDim *pd) {
    int64_t dims[MAX_RANK];
    if (rank > MAX_RANK || b->kind != B_CONST) die("pack of %s", b->name);    /* a view of one too */
    for (int d = 0; d < rank; d++) {
        int64_t n = b->dims[pd[d].src], B = pd[d].block;
        dims[d] = !B ? n : pd[d].inner ? B : (n + B - 1) / B;
    }
    Buf *nb = kir_buf_new(p, name, b->dtype, rank, dims, B_CONST);
    if (b->data) {          /* row by row of the last dim; positions past the end (padding) are 0 */
        size_t es = dtype_size(b->dtype);
        char *dst = arena_alloc(p->arena, kir_nbytes(nb));     /* zeroed */
        int64_t stride[MAX_RANK], pos[MAX_RANK] = {0}, rows = kir_numel(nb) / MAX(dims[rank - 1], 1);
        int64_t st = 1;
        for (int d = b->rank - 1; d >= 0; d--) stride[d] = st, st *= b->dims[d];
        const PackDim *last = &pd[rank - 1];
        int64_t step = last->block && !last->inner ? last->block : 1;       /* along its src dim */
        char *out = dst;
        for (int64_t row = 0; row < rows; row++) {
            int64_t old[MAX_RANK] = {0};
            for (int d = 0; d < rank - 1; d++) old[pd[d].src] += pd[d].block && !pd[d].inner ? pos[d] * pd[d].block : pos[d];
            bool in = true;
            int64_t off = 0;
            for (int d = 0; d < b->rank; d++) {
                if (d != last->src) in &= old[d] < b->dims[d];
                off += old[d] * stride[d];
            }
            /* the row's elements: src index old[last->src] + i * step while below its extent */
            int64_t n = 0;
            if (in && old[last->src] < b->dims[last->src])
                n = MIN(dims[rank - 1], (b->dims[last->src] - old[last->src] + step - 1) / step);
            const char *src = (const char *)b->data + (size_t)off * es;
            size_t jump = (size_t)(step * stride[last->src]) * es;
            if (jump == es) memcpy(out, src, (size_t)n * es);
            else if (es == 4) for (int64_t i = 0; i < n; i++) memcpy(out + i * 4, src + (size_t)i * jump, 4);
            else for (int64_t i = 0; i < n; i++) memcpy(out + (size_t)i * es, src + (size_t)i * jump, es);
            out += (size_t)dims[rank - 1] * es;
            for (int d = rank - 2; d >= 0 && ++pos[d] == dims[d]; d--) pos[d] = 0;
        }
        nb->data = dst;
    }
    nb->nibbles = b->nibbles;       /* padding is 0, which fits in 4 bits (or 2) */
    nb->crumbs = b->crumbs;
    return nb;
}

Buf *loop_pack(Program *p, Kernel *k, Buf *b, const char *layout, int rank, const PackDim *pd) {
    sched_note(p, k, "pack(%%%s,%s)", b->name, layout);
    Buf *nb = pack_const(p, b, arena_printf(p->arena, "%s_%s", b->name, layout), rank, pd);
    Pack pk = {b, nb, rank, pd};
    Ranges r = ranges_new(p, k);
    pack_list(p, &r, &pk, k->body);
    int j = 0;                          /* b is no longer read: off the parameter list */
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] != b) k->params[j] = k->params[i], k->modes[j++] = k->modes[i];
    k->nparams = j;
    kir_param(p, k, nb, KP_IN);
    return nb;
}

/* ---- borders ---- */

/* Enters the ranges of the loops around l; false if l is not in the list. */
static bool path_to(Ranges *r, const Stmt *s, const Stmt *l) {
    for (; s; s = s->next) {
        if (s == l) return true;
        KRange saved;
        if (s->kind == S_LOOP) range_enter(r, s, &saved);
        if (path_to(r, s->body, l) || path_to(r, s->then, l) || path_to(r, s->els, l)) return true;
        if (s->kind == S_LOOP) range_leave(r, s, &saved);
    }
    return false;
}

static bool expr_conds_true(Ranges *r, const Expr *e, int var) {
    if (e->kind == E_SELECT && expr_reads_var(e->args[0], var) && truth(r, e->args[0]) != 1) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!expr_conds_true(r, e->args[i], var)) return false;
    return true;
}

/* Is every condition in the list that reads var provably true? */
static bool conds_true(Ranges *r, const Stmt *s, int var) {
    for (; s; s = s->next) {
        if (s->kind == S_IF && expr_reads_var(s->cond, var) && truth(r, s->cond) != 1) return false;
        if (s->val && !expr_conds_true(r, s->val, var)) return false;
        KRange saved;
        if (s->kind == S_LOOP) range_enter(r, s, &saved);
        bool ok = conds_true(r, s->body, var) && conds_true(r, s->then, var) && conds_true(r, s->els, var);
        if (s->kind == S_LOOP) range_leave(r, s, &saved);
        if (!ok) return false;
    }
    return true;
}

enum { BORDER_SCAN = 1 << 16 };

bool loop_interior(Program *p, Kernel *k, const Stmt *l, int64_t *front, int64_t *back) {
    Ranges r = ranges_new(p, k);
    if (!const_loop(l) || l->step != 1 || !path_to(&r, k->body, l)) return false;
    /* the first and the last value whose conditions all hold, each looked for from its end of
     * the loop and at most BORDER_SCAN values in (a loop of 587 million columns, fuzzed,
     * took a minute value by value); a border longer than that is not peeled */
    int64_t lo = l->lo->i, hi = l->hi->i, first = -1, last = -1;
    for (int64_t x = lo; x < hi && x - lo < BORDER_SCAN && first < 0; x++) {
        r.v[l->var] = (KRange){x, x, 1, true};
        if (conds_true(&r, l->body, l->var)) first = x;
    }
    for (int64_t x = hi - 1; first >= 0 && x >= first && hi - 1 - x < BORDER_SCAN && last < 0; x--) {
        r.v[l->var] = (KRange){x, x, 1, true};
        if (conds_true(&r, l->body, l->var)) last = x;
    }
    if (first < 0 || last < 0) return false;
    *front = first - lo;
    *back = hi - 1 - last;
    return true;
}

/* ---- coalescing ---- */

/* loop_coalesce's view of the kernel: the two variables, each buffer's accesses (1: some that
 * read neither, 2: some in the exact form, at dims pos and pos + 1, the same in all) and the
 * value of one-iteration loops' variables. */
typedef struct Coal {
    Program *p;
    const Stmt *outer, *inner;
    int64_t *one;                   /* variable -> its value when its loop runs once */
    bool *single;
    int *state;                     /* by Buf id */
    Buf **view;                     /* by Buf id */
    int *pos;                       /* by Buf id: the first of the pair's dims, -1 none yet */
    bool anywhere;                  /* the pair may be any two adjacent dims, else the last */
    bool ok;
    bool shifted;                   /* the outer index may be outer + e (loop_coalesce_shifted) */
} Coal;

/* Is e exactly variable v, counting one-iteration loops' variables as their value? */
static bool exact_var(const Coal *c, const Expr *e, int v) {
    KAff f = {0};
    if (!kr_affine(e, 1, &f)) return false;
    int64_t k = f.c;
    bool seen = false;
    for (int i = 0; i < f.n; i++) {
        if (!f.coef[i]) continue;
        if (f.var[i] == v && f.coef[i] == 1) seen = true;
        else if (c->single[f.var[i]]) k += f.coef[i] * c->one[f.var[i]];
        else return false;
    }
    return seen && k == 0;
}

/* With c->shifted: is e variable v plus terms of other variables (neither of the pair) and a
 * constant, v's coefficient 1: the row a tap reads, h + kh? */
static bool shifted_var(const Coal *c, const Expr *e, int v) {
    KAff f = {0};
    if (!c->shifted || !kr_affine(e, 1, &f)) return false;
    bool seen = false;
    for (int i = 0; i < f.n; i++) {
        if (!f.coef[i]) continue;
        if (f.var[i] == v && f.coef[i] == 1) seen = true;
        else if (f.var[i] == c->outer->var || f.var[i] == c->inner->var) return false;
    }
    return seen;
}

static bool reads_pair(const Coal *c, const Expr *e) {
    return expr_reads_var(e, c->outer->var) || expr_reads_var(e, c->inner->var);
}

static void coal_expr(Coal *c, const Expr *e);

static void coal_access(Coal *c, Buf *b, Expr *const *idx) {
    int n = b->rank;
    bool reads = false;
    for (int d = 0; d < n; d++) reads |= reads_pair(c, idx[d]);
    int at = -1;
    for (int d = c->anywhere ? 0 : n - 2; d >= 0 && d + 1 < n && reads && at < 0; d++)
        if (b->dims[d + 1] == trips(c->inner) && exact_var(c, idx[d + 1], c->inner->var) &&
            ((b->dims[d] == trips(c->outer) && exact_var(c, idx[d], c->outer->var)) ||
             (b->dims[d] >= trips(c->outer) && shifted_var(c, idx[d], c->outer->var))))
            at = d;
    if (!reads) c->state[b->id] |= 1;
    else if (at >= 0 && (c->pos[b->id] < 0 || c->pos[b->id] == at)) c->state[b->id] |= 2, c->pos[b->id] = at;
    else c->ok = false;
    for (int d = 0; d < n; d++)
        if (at < 0 || (d != at && d != at + 1)) coal_expr(c, idx[d]);
}

static void coal_expr(Coal *c, const Expr *e) {
    if (e->kind == E_VAR && (e->var == c->outer->var || e->var == c->inner->var)) c->ok = false;
    else if (e->kind == E_LOAD) coal_access(c, e->buf, e->args);
    else for (int i = 0; i < e->nargs; i++) coal_expr(c, e->args[i]);
}

static void coal_stmts(Coal *c, const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && const_loop(s) && trips(s) == 1) c->single[s->var] = true, c->one[s->var] = s->lo->i;
        if (s->lo) coal_expr(c, s->lo);
        if (s->hi) coal_expr(c, s->hi);
        if (s->cond) coal_expr(c, s->cond);
        if (s->val) coal_expr(c, s->val);
        if (s->kind == S_STORE) coal_access(c, s->buf, s->idx);
        coal_stmts(c, s->body);
        coal_stmts(c, s->then);
        coal_stmts(c, s->els);
    }
}

/* The merged index of a pair read at (o, i): the outer loop's variable, plus, where o is
 * outer + e (shifted), e times the inner extent B ((h + kh) * B + w = hw + kh * B). */
static Expr *coal_index(const Coal *c, const Expr *o) {
    Expr *v = kx_var(c->p, c->outer->var);
    KAff f = {0};
    if (!c->shifted || !kr_affine(o, 1, &f)) return v;
    int64_t b = trips(c->inner);
    Expr *e = v;
    for (int i = 0; i < f.n; i++)
        if (f.coef[i] && f.var[i] != c->outer->var) e = kx_add(c->p, e, kx_mul(c->p, kx_var(c->p, f.var[i]), f.coef[i] * b));
    return f.c ? kx_addc(c->p, e, f.c * b) : e;
}

/* Accesses through the views: the pair of indices becomes the outer loop's variable. */
static void coal_expr_rewrite(const Coal *c, Expr *e) {
    for (int i = 0; i < e->nargs; i++) coal_expr_rewrite(c, e->args[i]);
    if (e->kind == E_LOAD && c->view[e->buf->id]) {
        int at = c->pos[e->buf->id];
        e->buf = c->view[e->buf->id];
        e->args[at] = coal_index(c, e->args[at]);
        for (int d = at + 1; d < e->buf->rank; d++) e->args[d] = e->args[d + 1];
        e->nargs = e->buf->rank;
    }
}

static void coal_rewrite(const Coal *c, Stmt *s) {
    for (; s; s = s->next) {
        if (s->lo) coal_expr_rewrite(c, s->lo);
        if (s->hi) coal_expr_rewrite(c, s->hi);
        if (s->cond) coal_expr_rewrite(c, s->cond);
        if (s->val) coal_expr_rewrite(c, s->val);
        if (s->kind == S_STORE) {
            for (int d = 0; d < s->buf->rank; d++) coal_expr_rewrite(c, s->idx[d]);
            if (c->view[s->buf->id]) {
                int at = c->pos[s->buf->id];
                s->buf = c->view[s->buf->id];
                s->idx[at] = coal_index(c, s->idx[at]);
                for (int d = at + 1; d < s->buf->rank; d++) s->idx[d] = s->idx[d + 1];
            }
        }
        coal_rewrite(c, s->body);
        coal_rewrite(c, s->then);
        coal_rewrite(c, s->els);
    }
}

static bool coalesce(Program *p, Kernel *k, Stmt *outer, bool anywhere, bool shifted) {
    Stmt *in = outer->body;
    if (outer->kind != S_LOOP || !in || in->kind != S_LOOP || in->next || !const_loop(outer) || !const_loop(in) ||
        outer->lo->i || in->lo->i || outer->step != 1 || in->step != 1 || in->hints || outer->hints)
        return false;
    Coal c = {p, outer, in, ARENA_ARRAY(p->arena, int64_t, k->nvars + 1), ARENA_ARRAY(p->arena, bool, k->nvars + 1),
              ARENA_ARRAY(p->arena, int, p->nbufs + 1), ARENA_ARRAY(p->arena, Buf *, p->nbufs + 1),
              ARENA_ARRAY(p->arena, int, p->nbufs + 1), anywhere, true, shifted};
    for (int b = 0; b < p->nbufs; b++) c.pos[b] = -1;
    coal_stmts(&c, in->body);
    int touched = 0;
    for (int b = 0; b < p->nbufs; b++) touched += c.state[b] == 2;
    for (int i = 0; i < k->nparams; i++) {
        if (c.state[k->params[i]->id] == 3) c.ok = false;
        touched -= c.state[k->params[i]->id] == 2;
    }
    if (!c.ok || touched) return false;
    sched_note(p, k, "coalesce%s(i%d,i%d)", shifted ? "_shifted" : "", outer->var, in->var);
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = k->params[i];
        if (c.state[b->id] != 2) continue;
        int64_t dims[MAX_RANK];
        int at = c.pos[b->id];
        memcpy(dims, b->dims, sizeof dims);
        dims[at] *= dims[at + 1];
        for (int d = at + 1; d + 1 < b->rank; d++) dims[d] = dims[d + 1];
        k->params[i] = c.view[b->id] = kir_view_new(p, b, arena_printf(p->arena, "%s.hw", b->name), b->rank - 1, dims);
    }
    coal_rewrite(&c, in->body);
    outer->hi = kx_index(p, trips(outer) * trips(in));
    outer->body = in->body;
    return true;
}

bool loop_coalesce(Program *p, Kernel *k, Stmt *outer, bool anywhere) { return coalesce(p, k, outer, anywhere, false); }

bool loop_coalesce_shifted(Program *p, Kernel *k, Stmt *outer) { return coalesce(p, k, outer, true, true); }

/* ---- layouts of temporaries ---- */

static void permute_access(const int *perm, Expr **idx, int n) {
    Expr *old[MAX_RANK];
    memcpy(old, idx, sizeof(Expr *) * (size_t)n);
    for (int d = 0; d < n; d++) idx[d] = old[perm[d]];
}

/* The accesses through b in e (then in the list s) with their indices permuted; whether
 * there were any. */

static bool permute_expr(Buf *b, const int *perm, Expr *e) {
    bool hit = false;
    for (int i = 0; i < e->nargs; i++) hit |= permute_expr(b, perm, e->args[i]);
    if (e->kind == E_LOAD && e->buf == b) permute_access(perm, e->args, e->nargs), hit = true;
    return hit;
}

static bool permute_list(Buf *b, const int *perm, Stmt *s) {
    bool hit = false;
    for (; s; s = s->next) {
        if (s->lo) hit |= permute_expr(b, perm, s->lo);
        if (s->hi) hit |= permute_expr(b, perm, s->hi);
        if (s->cond) hit |= permute_expr(b, perm, s->cond);
        if (s->val) hit |= permute_expr(b, perm, s->val);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) hit |= permute_expr(b, perm, s->idx[d]);
        if (s->kind == S_STORE && s->buf == b) permute_access(perm, s->idx, b->rank), hit = true;
        hit |= permute_list(b, perm, s->body) | permute_list(b, perm, s->then) | permute_list(b, perm, s->els);
    }
    return hit;
}

bool permute_moves_data(const Buf *b, const int *perm) {
    int last = -1;
    for (int d = 0; d < b->rank; d++) {
        if (b->dims[perm[d]] == 1) continue;
        if (perm[d] < last) return true;
        last = perm[d];
    }
    return false;
}

bool buf_permute(Program *p, Buf *b, const int *perm, const char *layout) {
    if (b->kind != B_TEMP || b->alias) return false;
    for (int i = 0; i < p->nbufs && permute_moves_data(b, perm); i++)
        if (p->bufs[i]->alias == b) return false;
    int64_t dims[MAX_RANK];
    for (int d = 0; d < b->rank; d++) dims[d] = b->dims[perm[d]];
    memcpy(b->dims, dims, sizeof(int64_t) * (size_t)b->rank);
    /* only the kernels that have b among their parameters can access it (walking every
     * kernel's body for each buffer made the schedule of a 2,800-kernel model 9.8 s) */
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (!k->dead && kir_param_index(k, b) >= 0 && permute_list(b, perm, k->body))
            sched_note(p, k, "layout(%%%s,%s)", b->name, layout);
    }
    return true;
}

/* ---- padding ---- */

/* loop_pad's view of the kernel: the smallest and largest index of each dim of x's loads. */
typedef struct Pad {
    Program *p;
    const Kernel *k;
    Buf *x, *xp;
    int64_t mn[MAX_RANK], mx[MAX_RANK], before[MAX_RANK];
    bool ok;
} Pad;

static void pad_scan_expr(Pad *pd, const Ranges *r, const Expr *e) {
    for (int i = 0; i < e->nargs; i++) pad_scan_expr(pd, r, e->args[i]);
    if (e->kind != E_LOAD || e->buf != pd->x) return;
    for (int d = 0; d < e->nargs; d++) {
        int64_t mn, mx;
        if (!kr_bounds(r->v, e->args[d], &mn, &mx)) pd->ok = false;
        else pd->mn[d] = MIN(pd->mn[d], mn), pd->mx[d] = MAX(pd->mx[d], mx);
    }
}

/* Loads of x anywhere: their index ranges over the loops around them (ifs do not narrow them:
 * these are the positions a guard keeps the loads from). A store or a loop bound reading x is
 * not padded (ok = false). */
static void pad_scan(Pad *pd, Ranges *r, const Stmt *s) {
    for (; s; s = s->next) {
        if (s->val) pad_scan_expr(pd, r, s->val);
        if (s->cond) pad_scan_expr(pd, r, s->cond);
        if (s->kind == S_STORE && s->buf == pd->x) pd->ok = false;
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) pad_scan_expr(pd, r, s->idx[d]);
        if (s->kind == S_LOOP) {
            KRange saved;
            pad_scan_expr(pd, r, s->lo);
            pad_scan_expr(pd, r, s->hi);
            range_enter(r, s, &saved);
            pad_scan(pd, r, s->body);
            range_leave(r, s, &saved);
        }
        pad_scan(pd, r, s->then);
        pad_scan(pd, r, s->els);
    }
}

/* Is a - b + c - e identically 0 (e an index of x at dim d)? */
static bool aff_same(const Expr *a, const Expr *b, int64_t c, const Expr *e) {
    KAff f = {0};
    if (!kr_affine(a, 1, &f) || !kr_affine(b, -1, &f) || !kr_affine(e, -1, &f)) return false;
    int64_t sum = f.c + c;
    for (int i = 0; i < f.n; i++) {
        int64_t v = 0;
        for (int j = 0; j < f.n; j++)
            if (f.var[j] == f.var[i]) v += f.coef[j];
        if (v) return false;
    }
    return sum == 0;
}

/* Does comparison cond say that index e of dim d is inside x (e >= 0 or e < dims[d])? */
static bool bound_test(const Pad *pd, const Expr *cond, const Expr *e, int d) {
    if (cond->kind != E_BIN) return false;
    if (cond->op == K_GE) return aff_same(cond->args[0], cond->args[1], 0, e);
    if (cond->op == K_LT) return aff_same(cond->args[0], cond->args[1], pd->x->dims[d], e);
    return false;
}

/* The load of x that is a factor of product t, or NULL. */
static const Expr *x_factor(const Pad *pd, const Expr *t) {
    if (t->kind == E_LOAD && t->buf == pd->x) return t;
    if (t->kind != E_BIN || t->op != K_MUL) return NULL;
    const Expr *f = x_factor(pd, t->args[0]);
    return f ? f : x_factor(pd, t->args[1]);
}

/* Does every statement of the list accumulate r = r + (... * x[idx] * ...) with idx at some
 * dim making cond (one comparison) a bounds test of it, and store nothing? Then where cond is
 * false each of them adds a product with a padded zero. */
static bool guards_terms(const Pad *pd, const Expr *cond, const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) return false;
        if (s->kind == S_SET) {
            const Expr *v = s->val, *x;
            if (v->kind != E_BIN || v->op != K_ADD || v->args[0]->kind != E_SCALAR || v->args[0]->var != s->var ||
                !(x = x_factor(pd, v->args[1])))
                return false;
            bool test = false;
            for (int d = 0; d < x->nargs && !test; d++) test = bound_test(pd, cond, x->args[d], d);
            if (!test) return false;
        }
        if (!guards_terms(pd, cond, s->body) || !guards_terms(pd, cond, s->then) || !guards_terms(pd, cond, s->els))
            return false;
    }
    return true;
}

/* Is every comparison of the conjunction cond a bounds test of the terms of list s? */
static bool guard_only(const Pad *pd, const Expr *cond, const Stmt *s) {
    if (cond->kind == E_BIN && cond->op == K_AND && cond->type == DT_BOOL)
        return guard_only(pd, cond->args[0], s) && guard_only(pd, cond->args[1], s);
    return guards_terms(pd, cond, s);
}

/* Drops the guards guard_only accepts (dry: counts them) and redirects x's loads to xp. */
static int pad_rewrite(Pad *pd, Stmt **at, bool dry) {
    int n = 0;
    while (*at) {
        Stmt *s = *at;
        if (s->kind == S_IF && !s->els && s->then && guard_only(pd, s->cond, s->then)) {
            n++;
            if (!dry) {
                replace(at, s->then, s->next);
                continue;           /* the spliced statements are looked at next */
            }
        }
        n += pad_rewrite(pd, &s->body, dry) + pad_rewrite(pd, &s->then, dry) + pad_rewrite(pd, &s->els, dry);
        at = &s->next;
    }
    return n;
}

static Expr *index_plus(Program *p, Expr *e, int64_t c) {
    if (!c) return e;
    if (e->kind == E_BIN && e->op == K_ADD && e->args[1]->kind == E_CONST) {
        int64_t v = e->args[1]->i + c;
        return v ? kx_addc(p, e->args[0], v) : e->args[0];
    }
    return kx_addc(p, e, c);
}

static void pad_loads(Pad *pd, Expr *e) {
    for (int i = 0; i < e->nargs; i++) pad_loads(pd, e->args[i]);
    if (e->kind != E_LOAD || e->buf != pd->x) return;
    e->buf = pd->xp;
    for (int d = 0; d < e->nargs; d++) e->args[d] = index_plus(pd->p, e->args[d], pd->before[d]);
}

static void pad_list(Pad *pd, Stmt *s) {
    for (; s; s = s->next) {
        if (s->val) pad_loads(pd, s->val);
        if (s->cond) pad_loads(pd, s->cond);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) pad_loads(pd, s->idx[d]);
        pad_list(pd, s->body);
        pad_list(pd, s->then);
        pad_list(pd, s->els);
    }
}

/* The copy kernel's loops from dim d in: xp[v...] = x[v - before...] inside x, 0 around it;
 * a dim with padding is cut in three loops (the pad before, x's extent, the pad after), so that
 * each element is stored once and no load leaves x. */
static Stmt *pad_nest(Pad *pd, Kernel *c, const int *vars, int d, bool in) {
    Program *p = pd->p;
    Buf *x = pd->x, *xp = pd->xp;
    if (d == xp->rank) {
        Expr *oi[MAX_RANK], *xi[MAX_RANK];
        for (int i = 0; i < xp->rank; i++) {
            oi[i] = kx_var(p, vars[i]);
            xi[i] = kx_addc(p, kx_var(p, vars[i]), -pd->before[i]);
        }
        return ks_store(p, xp, oi, in ? kx_load(p, x, xi) : kx_const(p, x->dtype, 0));
    }
    int64_t b = pd->before[d], e = b + x->dims[d], n = xp->dims[d];
    if (!in || (b == 0 && e == n)) return ks_loop(p, vars[d], 0, n, 1, pad_nest(pd, c, vars, d + 1, in));
    Stmt *head = NULL;
    if (b) head = ks_seq(head, ks_loop(p, vars[d], 0, b, 1, pad_nest(pd, c, vars, d + 1, false)));
    head = ks_seq(head, ks_loop(p, vars[d], b, e, 1, pad_nest(pd, c, vars, d + 1, true)));
    if (e < n) head = ks_seq(head, ks_loop(p, vars[d], e, n, 1, pad_nest(pd, c, vars, d + 1, false)));
    return head;
}

/* Whether kernel c writes x (or may: a control kernel). */
static bool writes(const Kernel *c, Buf *x) {
    if (c->ctl != KCTL_NONE) return true;
    for (int j = 0; j < c->nparams && !c->dead; j++)
        if (kir_root(c->params[j]) == kir_root(x) && c->modes[j] != KP_IN) return true;
    return false;
}

/* Whether a kernel after index a and before b writes x. */
static bool written_between(const Program *p, Buf *x, int a, int b) {
    for (int i = a + 1; i < b; i++)
        if (writes(p->kernels[i], x)) return true;
    return false;
}

/* Scans k's loads of x into pd (pd->mn, pd->mx: their index ranges); whether k could read a
 * padded copy of x (some load leaves x, some guard can go). */
static bool pad_scan_kernel(Pad *pd, Program *p, Kernel *k, Buf *x) {
    *pd = (Pad){p, k, x, NULL, {0}, {0}, {0}, true};
    bool any = false;
    for (int d = 0; d < x->rank; d++) pd->mn[d] = 0, pd->mx[d] = x->dims[d] - 1;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == x && k->modes[i] != KP_IN) pd->ok = false;
    Ranges rg = ranges_new(p, k);
    pad_scan(pd, &rg, k->body);
    for (int d = 0; d < x->rank; d++) any |= pd->mn[d] < 0 || pd->mx[d] >= x->dims[d];
    return pd->ok && any && pad_rewrite(pd, &k->body, true);
}

/* k's loads of x redirected to pd->xp at pd->before, its guards dropped. */
static void pad_redirect(Pad *pd, Kernel *k) {
    pad_rewrite(pd, &k->body, false);
    pad_list(pd, k->body);
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == pd->x) k->params[i] = pd->xp;
}

static int kernel_index(const Program *p, const Kernel *k) {
    for (int i = 0; i < p->nkernels; i++)
        if (p->kernels[i] == k) return i;
    return -1;
}

/* A grouped conv over a channel-last map reads each pixel's slice of one group's channels
 * (32 of 1024 in ResNeXt-101 32x8d's layer3): with pixels 4 KiB apart, every slice of its
 * window falls in the same L1 sets (32 KiB of 8 ways: 4 KiB a way), the 3 rows of 16 padded
 * pixels of a 3x3 window in 8 lines' room. Its padded copy (LOOP_PAD_SKEW bytes more a pixel)
 * spreads them: those convs 67% -> 90-97% of the FMA peak, the model 1.04x at one and two
 * threads (Zen 4, native). 2 KiB apart (512 channels) gained nothing in ResNeXt-50 or -101. */
enum { LOOP_PAD_SKEW = 64, LOOP_PAD_ALIAS = 4096 };

bool loop_pad(Program *p, Kernel *k, Buf *x, bool skew, Kernel **copy) {
    Pad pd;
    int r = x->rank, at = kernel_index(p, k);
    *copy = NULL;
    if (at < 0 || !pad_scan_kernel(&pd, p, k, x)) return false;
    /* an earlier copy of x whose extent holds k's loads, x unchanged since */
    for (const LoopPad *e = p->pad_copies; e; e = e->next) {
        int ci = kernel_index(p, e->copy);
        bool fits = e->x == x && ci >= 0 && ci < at && !written_between(p, x, ci, at);
        for (int d = 0; d < r && fits; d++) fits = pd.mn[d] + e->before[d] >= 0 && pd.mx[d] + e->before[d] < e->xp->dims[d];
        if (!fits) continue;
        sched_note(p, k, "pad(%%%s:%%%s)", x->name, e->xp->name);
        pd.xp = e->xp;
        memcpy(pd.before, e->before, sizeof pd.before);
        pad_redirect(&pd, k);
        return true;
    }
    /* the later readers of x that a copy could serve too, up to a kernel that writes x (one
     * that reads and writes it is no reader pad_scan_kernel takes) */
    for (int i = at + 1; i < p->nkernels && !writes(p->kernels[i], x); i++) {
        Kernel *c = p->kernels[i];
        Pad other;
        bool reads = false;
        for (int j = 0; j < c->nparams; j++) reads |= c->params[j] == x;
        if (c->dead || !reads || !pad_scan_kernel(&other, p, c, x)) continue;
        for (int d = 0; d < r; d++) pd.mn[d] = MIN(pd.mn[d], other.mn[d]), pd.mx[d] = MAX(pd.mx[d], other.mx[d]);
    }

    int64_t dims[MAX_RANK], esize = (int64_t)dtype_size(x->dtype);
    char pads[256] = "";
    for (int d = 0; d < r; d++) {
        pd.before[d] = -pd.mn[d];
        dims[d] = pd.mx[d] + 1 + pd.before[d];
        if (skew && d == r - 1 && r >= 3 && esize && (dims[d] * esize) % LOOP_PAD_ALIAS == 0)
            dims[d] += LOOP_PAD_SKEW / esize;
        snprintf(pads + strlen(pads), sizeof pads - strlen(pads), ",%lld:%lld", (long long)pd.before[d],
                 (long long)(dims[d] - x->dims[d] - pd.before[d]));
    }
    sched_note(p, k, "pad(%%%s%s)", x->name, pads);
    pd.xp = kir_buf_new(p, arena_printf(p->arena, "%s_pad", x->name), x->dtype, r, dims, B_TEMP);
    pad_redirect(&pd, k);

    Kernel *c = kir_kernel_new(p, arena_printf(p->arena, "%s_pad", k->name), "Pad", KC_COPY);
    kir_add_nodes(p, c, k->nodes, k->nnodes);      /* the padding is part of k's nodes' work */
    kir_param(p, c, x, KP_IN);
    kir_param(p, c, pd.xp, KP_OUT);
    int vars[MAX_RANK];
    for (int d = 0; d < r; d++) vars[d] = kir_var(c);
    c->body = pad_nest(&pd, c, vars, 0, true);
    for (int i = p->nkernels - 1; i > at; i--) p->kernels[i] = p->kernels[i - 1];  /* c runs before k */
    p->kernels[at] = c;
    for (int i = 0; i < p->nkernels; i++) p->kernels[i]->id = i;
    LoopPad *e = ARENA_NEW(p->arena, LoopPad);
    *e = (LoopPad){x, pd.xp, {0}, c, p->pad_copies};
    memcpy(e->before, pd.before, sizeof pd.before);
    p->pad_copies = e;
    *copy = c;
    return true;
}
