/* tile.c - loop restructuring for the target: explicit vector loops and register blocking.
 *
 * Policy. At -O0/-O1 nothing changes. At -O2 and above, W is the number of lanes of the
 * output type in one target vector (p->vector_bytes), and:
 *   - every loop that only accumulates into scalar registers (no store inside) is marked
 *     LH_REDUCTION;
 *   - contractions (KC_CONTRACTION): the innermost parallel loop J around a reduction loop
 *     (j of a matmul [i, j, k], the output channel of a conv with weights [C,k..,M], the output
 *     column otherwise) becomes vector loops of W lanes (LH_VECTOR), U of them side by side
 *     with their own accumulators, jammed around the reduction loop:
 *         for jo in 0..N/(W*U)*(W*U) step W*U [tile]:
 *             for ji in 0..W [vector]:  r_u = 0                       (u = 0..U-1)
 *                 for k [reduction]: r_u = r_u + a[i,k] * b[k, jo + W*u + ji]
 *                 c[i, jo + W*u + ji] = r_u
 *     then narrower pieces for the rest: vectors of W lanes, one vector of the lanes left
 *     (at least 2) and the last element as a scalar loop. Before that, the innermost
 *     enclosing parallel loop L whose copies share the vectorised loop's loads (no load in a
 *     reduction reads both: the row i of a matmul, an output pixel of a conv) is jammed by MR
 *     rows, so that each broadcast a[i+m,k] and each vector of b feeds several FMAs; MR*U
 *     accumulators fill most of the vector registers (6 x 4 vectors with AVX-512's 32, U = 2
 *     with 16), and the rows left over get one narrower block. A J not blocked (a
 *     matrix-vector product) gets up to twice as many vectors: more independent chains, and
 *     each packed weight row streamed whole;
 *   - in every kernel, the innermost loops that only store (elementwise, copies, the last loop
 *     of a softmax) are strip-mined the same way with U = 1.
 * A loop whose iterations cannot be lanes (an if or loop bound that depends on its variable,
 * a register set inside and read after it) stays scalar.
 * Legality, per loop (iterations_independent). Iterations of J (and of L) are independent
 * when the kernel never loads what it stores (no KP_INOUT, no input sharing storage with an
 * output; write-once makes distinct iterations store distinct elements) or, in a kernel with
 * state (a recurrence's h and c), when within one run of the loop each iteration stores its
 * own elements and reads back only those; and every register the body sets is set before it
 * is read and not read after the loop (checked below); registers are renamed per copy, while
 * registers only read are shared. Each accumulator still sums its terms in the original
 * order, so at --fp-strict results are bitwise those of the scalar loops. */
#include "pipeline.h"

enum { MAX_JAM = 128, MAX_JAM_NODES = 40000, MAX_ROWS = 8 };

/* ---- small queries ---- */
static bool expr_reads_var(const Expr *e, int var) {
    if (e->kind == E_VAR && e->var == var) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads_var(e->args[i], var)) return true;
    return false;
}

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

static int stmt_size(const Stmt *s) {
    int n = 0;
    for (; s; s = s->next) {
        n++;
        if (s->val) n += expr_size(s->val);
        if (s->cond) n += expr_size(s->cond);
        n += stmt_size(s->body) + stmt_size(s->then) + stmt_size(s->els);
    }
    return n;
}

/* Marks reduction loops; returns whether the list stores anything. */
static bool mark_reductions(Stmt *s) {
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
static bool kernel_independent(const Kernel *k) {
    for (int i = 0; i < k->nparams; i++) {
        if (k->modes[i] == KP_INOUT) return false;
        for (int j = 0; j < k->nparams; j++)
            if (i != j && (k->modes[i] & KP_OUT) && kir_root(k->params[i]) == kir_root(k->params[j]))
                return false;
    }
    return true;
}

/* Can the iterations of loop l, within one run of l, go in any order as far as memory is
 * concerned (vector lanes, jammed copies)? Yes if the kernel never loads what it stores
 * (kernel_independent), or, for a kernel with state, if every buffer l's body stores is
 * stored through one Buf at one index, of which some dimension is l's variable up to a
 * uniform term (v, v + u, u - v, c*v: u reading no variable of l or of a loop inside it and
 * no register set inside), so distinct iterations store distinct elements; and is loaded in
 * l's body, if at all, only through that Buf at that same index (each iteration reads back
 * its own element). Views of one storage count as the same buffer. */
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

static bool iterations_independent(Program *p, const Kernel *k, const Stmt *l) {
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

typedef struct Regs {
    bool *def;                      /* set before this point in the current list */
    int n;
} Regs;

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

/* Is register r read in e? */
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

/* Can the iterations of loop l run as the lanes of a vector (kir.h, LH_VECTOR)? Its
 * registers are private (set before read, not read after the loop) and no loop bound or if
 * condition inside depends on l's variable or on a register set inside. */
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

static bool lanes_ok(Program *p, const Kernel *k, const Stmt *l) {
    bool *none = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    bool *set = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    bool *uniform = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    sets_in(l->body, set);
    for (int r = 0; r < k->nscalars; r++) uniform[r] = !set[r];    /* read-only: live-ins */
    return l->kind == S_LOOP && l->step == 1 && l->lo->kind == E_CONST && l->hi->kind == E_CONST &&
           iterations_independent(p, k, l) && private_regs(p->arena, l->body, uniform, k->nscalars) &&
           !leaks(p->arena, k->body, l, set, none, k->nscalars) &&
           headers_uniform(l->body, l->var, set);
}

/* ---- unroll-and-jam ----
 * Copies of a loop body side by side, each with its own registers and its own value of some
 * loop variables (sub[c][v]: the expression variable v stands for in copy c); loops and ifs
 * whose header reads none of them are kept once with their bodies jammed. */
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

/* A jam of u copies of body's registers; `fresh`: copy 0 gets new registers too. */
static Jam jam_new(Program *p, Kernel *k, const Stmt *body, int u, bool fresh) {
    Jam m = {p, k, u, {0}, {0}};
    int nregs = k->nscalars;
    bool *used = ARENA_ARRAY(p->arena, bool, nregs + 1);
    sets_in(body, used);            /* registers only read are the same in every copy */
    for (int c = 0; c < u; c++) {
        m.sub[c] = ARENA_ARRAY(p->arena, Expr *, k->nvars + 1);
        m.reg[c] = ARENA_ARRAY(p->arena, int, nregs + 1);
        for (int r = 0; r < nregs; r++)
            m.reg[c][r] = (c || fresh) && used[r] ? kir_scalar(p, k, k->scalars[r]) : r;
    }
    return m;
}

/* Replace loop l by a loop jammed by u over the largest multiple of u and, if that leaves
 * some, the rest (l itself, shortened); returns the first of them. l's body must keep its
 * registers private (private_regs). */
static Stmt *jam_loop(Program *p, Kernel *k, Stmt *l, int u) {
    Jam m = jam_new(p, k, l->body, u, false);
    int jt = kir_var(k);
    for (int c = 0; c < u; c++) m.sub[c][l->var] = kx_addc(p, kx_var(p, jt), c);
    int64_t lo = l->lo->i, hi = l->hi->i, mid = lo + (hi - lo) / u * u;
    Stmt *main = ks_loop(p, jt, lo, mid, u, jam(&m, l->body));
    main->hints = LH_TILE;
    if (mid < hi) {
        l->lo = kx_index(p, mid);
        main->next = l;
    } else {
        main->next = l->next;
    }
    return main;
}

/* ---- vectors ---- */

/* Elements of the output type in one target vector. */
static int lanes(const Program *p, const Kernel *k) {
    int esz = 4;
    for (int i = 0; i < k->nparams; i++)
        if (k->modes[i] & KP_OUT) esz = (int)dtype_size(k->params[i]->dtype);
    int w = p->vector_bytes > esz ? p->vector_bytes / (esz ? esz : 4) : 1;
    return MIN(w, MAX_LANES);
}

/* Vector registers of the target: 32 with AVX-512, 16 on the others we vectorise for. */
static int vregs(const Program *p) { return p->vector_bytes >= 64 ? 32 : 16; }

/* The vectors side by side (U) for loop l: with rows blocked around it, few enough that
 * rows x U accumulators fit the registers; alone (a matrix-vector product), more, so that
 * more independent chains hide the add latency and each weight row is read in one stream. */
static int vector_copies(const Program *p, const Kernel *k, const Stmt *l, bool blocked) {
    int64_t n = l->hi->i - l->lo->i, w = lanes(p, k);
    int cap = vregs(p) >= 32 ? 4 : 2;
    if (!blocked) cap *= 2;
    return (int)MAX(1, MIN(n / w, cap));
}

/* for ji in 0..w [vector] { u copies of l's body with l's variable := base + w*c + ji }:
 * `base` is a fresh loop variable (the caller wraps a loop over it) or, when base_var < 0,
 * the constant `start`. */
static Stmt *vector_piece(Program *p, Kernel *k, const Stmt *l, int w, int u, int base_var, int64_t start) {
    Jam m = jam_new(p, k, l->body, u, true);
    int ji = kir_var(k);
    for (int c = 0; c < u; c++) {
        Expr *base = base_var >= 0 ? kx_addc(p, kx_var(p, base_var), (int64_t)w * c)
                                   : kx_index(p, start + (int64_t)w * c);
        m.sub[c][l->var] = kx_add(p, base, kx_var(p, ji));
    }
    Stmt *v = ks_loop(p, ji, 0, w, 1, jam(&m, l->body));
    v->hints = LH_VECTOR;
    return v;
}

/* Replace loop l (lanes_ok) by vector loops of w lanes, u vectors side by side; the rest
 * by narrower pieces: vectors of w lanes, then one of the remaining lanes (when at least
 * 2), then the last element as l itself. Returns the first statement; the last one's next
 * is l->next. */
static Stmt *vectorize_loop(Program *p, Kernel *k, Stmt *l, int w, int u) {
    int64_t lo = l->lo->i, hi = l->hi->i, n = hi - lo, mid = lo + n / ((int64_t)w * u) * w * u;
    Stmt *head = NULL;
    if (mid > lo) {
        int jo = kir_var(k);
        Stmt *outer = ks_loop(p, jo, lo, mid, (int64_t)w * u, vector_piece(p, k, l, w, u, jo, 0));
        outer->hints = LH_TILE;
        head = ks_seq(head, outer);
    }
    while (hi - mid >= w) {
        int uu = (int)MIN(u, (hi - mid) / w);
        head = ks_seq(head, vector_piece(p, k, l, w, uu, -1, mid));
        mid += (int64_t)w * uu;
    }
    if (hi - mid >= 2) {
        head = ks_seq(head, vector_piece(p, k, l, (int)(hi - mid), 1, -1, mid));
        mid = hi;
    }
    Stmt *next = l->next;
    if (mid < hi) {
        l->lo = kx_index(p, mid);
        l->next = NULL;
        head = ks_seq(head, l);
    }
    Stmt *last = head;
    while (last->next) last = last->next;
    last->next = next;
    return head;
}

/* ---- contractions: vectors along a parallel loop, blocked by an outer one ---- */

static bool has_reduction_child(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_LOOP && (s->hints & LH_REDUCTION)) return true;
    return false;
}

static bool jammable(const Stmt *s) {
    return s->kind == S_LOOP && !(s->hints & (LH_REDUCTION | LH_TILE | LH_VECTOR)) && s->step == 1 &&
           s->lo->kind == E_CONST && s->hi->kind == E_CONST && has_reduction_child(s->body);
}

static bool has_jammable(const Stmt *s) {
    for (; s; s = s->next)
        if (jammable(s) || has_jammable(s->body) || has_jammable(s->then) || has_jammable(s->els))
            return true;
    return false;
}

/* Tile's own mark, in `hints` while it runs, of the loops it will vectorise (a loop variable
 * may have several loops: a convolution's border and interior pieces). */
enum { PICKED = 1u << 30, BLOCKED = 1u << 29 };

/* Picks the innermost jammable loops. */
static void pick_loops(Stmt *s) {
    for (; s; s = s->next) {
        if (jammable(s) && !has_jammable(s->body)) s->hints |= PICKED;
        pick_loops(s->body);
        pick_loops(s->then);
        pick_loops(s->els);
    }
}

static void mark_blocked(Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) s->hints |= BLOCKED;
        mark_blocked(s->body);
        mark_blocked(s->then);
        mark_blocked(s->els);
    }
}

/* The variables of the picked loops in a list. */
static void picked_vars(const Stmt *s, bool *vv) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) vv[s->var] = true;
        picked_vars(s->body, vv);
        picked_vars(s->then, vv);
        picked_vars(s->els, vv);
    }
}

static bool reads_any(const Expr *e, const bool *vars) {
    if (e->kind == E_VAR && vars[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_any(e->args[i], vars)) return true;
    return false;
}

/* Does a load in e read both v and a vectorised variable? */
static bool expr_ties(const Expr *e, int v, const bool *tv) {
    if (e->kind == E_LOAD && reads_any(e, tv) && expr_reads_var(e, v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_ties(e->args[i], v, tv)) return true;
    return false;
}

/* Does a load inside a reduction loop of the list tie v to a vectorised variable? Such a
 * load (x[.., oh + kh, ow + kw] for v = oh) differs between copies of v's loop, so jamming v
 * would not share it; loads outside the reductions (a fused residual) run once per output
 * and do not matter. */
static bool stmt_ties(const Stmt *s, int v, const bool *tv, bool in_red) {
    for (; s; s = s->next) {
        if (in_red && s->val && expr_ties(s->val, v, tv)) return true;
        if (in_red && s->cond && expr_ties(s->cond, v, tv)) return true;
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (stmt_ties(s->body, v, tv, red) || stmt_ties(s->then, v, tv, in_red) ||
            stmt_ties(s->els, v, tv, in_red))
            return true;
    }
    return false;
}

/* The first picked loop in a list. */
static const Stmt *inner_vector(const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) return s;
        const Stmt *r = inner_vector(s->body);
        if (!r) r = inner_vector(s->then);
        if (!r) r = inner_vector(s->els);
        if (r) return r;
    }
    return NULL;
}

/* Copies of the blocked loop l: rows whose accumulators fill the vector registers next to
 * the U vectors of the inner loop, fewer if l is shorter or the body would grow too big. */
static int block_factor(const Program *p, const Kernel *k, const Stmt *l, const Stmt *inner) {
    int u = vector_copies(p, k, inner, true);
    int64_t v = MIN(MIN((vregs(p) - u - 2) / u, MAX_ROWS), l->hi->i - l->lo->i);
    while (v > 1 && (int64_t)stmt_size(l->body) * v * u > MAX_JAM_NODES) v--;
    return (int)v;
}

/* Jams, around each loop to vectorise, the innermost enclosing parallel loop whose copies
 * can share its loads (the row i of a matmul, an output pixel of a convolution run with
 * the output channel innermost), so that each loaded or broadcast value feeds several
 * accumulators. Returns 0 if the list holds no loop to vectorise, 1 if one not yet blocked,
 * 2 if blocked. */
static int block_list(Program *p, Kernel *k, Stmt **list) {
    int st = 0;
    Stmt *prev = NULL;
    for (Stmt *s = *list; s;) {
        Stmt *next = s->next, *r = s;
        int in = 0;
        if (s->kind == S_LOOP) in = s->hints & PICKED ? 1 : block_list(p, k, &s->body);
        else if (s->kind == S_IF) in = MAX(block_list(p, k, &s->then), block_list(p, k, &s->els));
        bool *vv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
        if (s->kind == S_LOOP) picked_vars(s->body, vv);
        if (in == 1 && s->kind == S_LOOP && !(s->hints & (PICKED | LH_REDUCTION)) && s->step == 1 &&
            s->lo->kind == E_CONST && s->hi->kind == E_CONST && !stmt_ties(s->body, s->var, vv, false)) {
            bool *none = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
            int f = block_factor(p, k, s, inner_vector(s->body));
            if (f >= 2 && iterations_independent(p, k, s) &&
                private_regs(p->arena, s->body, none, k->nscalars)) {
                /* the rows left over get one narrower block */
                r = jam_loop(p, k, s, f);
                mark_blocked(r->body);
                if (r->next == s && s->hi->i - s->lo->i >= 2) {
                    r->next = jam_loop(p, k, s, (int)(s->hi->i - s->lo->i));
                    mark_blocked(r->next->body);
                }
                in = 2;
            }
        }
        if (prev) prev->next = r;
        else *list = r;
        for (prev = r; prev->next != next; prev = prev->next) {}
        st = MAX(st, in);
        s = next;
    }
    return st;
}

/* Vectorises the loops of vv (all their copies after blocking). One that cannot run as
 * vectors (an if on its variable inside) stays a scalar loop. */
static Stmt *vector_list(Program *p, Kernel *k, Stmt *s) {
    Stmt *head = NULL, *prev = NULL;
    while (s) {
        Stmt *next = s->next, *r = s;
        if (s->kind == S_LOOP && (s->hints & PICKED)) {
            int w = lanes(p, k), u = vector_copies(p, k, s, s->hints & BLOCKED);
            s->hints &= ~(unsigned)(PICKED | BLOCKED);
            if (w >= 2 && lanes_ok(p, k, s)) r = vectorize_loop(p, k, s, w, u);
        } else {
            s->body = vector_list(p, k, s->body);
            s->then = vector_list(p, k, s->then);
            s->els = vector_list(p, k, s->els);
        }
        if (prev) prev->next = r;
        else head = r;
        for (prev = r; prev->next != next; prev = prev->next) {}
        s = next;
    }
    return head;
}

/* ---- other kernels: the innermost loops that store ---- */

static bool stores_only(const Stmt *s) {
    bool store = false;
    for (; s; s = s->next) {
        if (s->kind != S_STORE && s->kind != S_SET) return false;
        store |= s->kind == S_STORE;
    }
    return store;
}

static Stmt *strip_list(Program *p, Kernel *k, Stmt *s) {
    Stmt *head = NULL, *prev = NULL;
    while (s) {
        Stmt *next = s->next, *r = s;
        if (s->kind == S_LOOP && !(s->hints & (LH_VECTOR | LH_REDUCTION | LH_TILE)) && stores_only(s->body)) {
            int w = lanes(p, k);
            if (w >= 2 && lanes_ok(p, k, s) && s->hi->i - s->lo->i >= 2) r = vectorize_loop(p, k, s, w, 1);
        } else if (!(s->kind == S_LOOP && (s->hints & LH_VECTOR))) {
            s->body = strip_list(p, k, s->body);
            s->then = strip_list(p, k, s->then);
            s->els = strip_list(p, k, s->els);
        }
        if (prev) prev->next = r;
        else head = r;
        for (prev = r; prev->next != next; prev = prev->next) {}
        s = next;
    }
    return head;
}

void tile(Program *p) {
    if (p->opt_level < 2) return;
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        mark_reductions(k->body);
        if (k->kclass == KC_CONTRACTION) {
            pick_loops(k->body);
            block_list(p, k, &k->body);
            k->body = vector_list(p, k, k->body);
        }
        k->body = strip_list(p, k, k->body);
    }
}
