/* tile.c - loop restructuring for the target: loop hints everywhere, register blocking
 * (unroll-and-jam) of contractions.
 *
 * Policy. At -O0/-O1 nothing changes. At -O2 and above:
 *   - every loop that only accumulates into scalar registers (no store inside) is marked
 *     LH_REDUCTION; the innermost loop of an elementwise or copy kernel is marked LH_VECTORIZE;
 *   - in a KC_CONTRACTION kernel, the innermost parallel loop J around a reduction loop (j of
 *     a matmul [i, j, k], the output column of a convolution) is unrolled by U and jammed:
 *     U copies of J's body run side by side, each with its own accumulator registers, inside
 *     one reduction loop. A matmul becomes
 *         for jt in 0..N/U*U step U [tile]:  r0..rU-1 = 0
 *             for k [reduction]: r_u = r_u + a[i,k] * b[k,jt+u]   (u = 0..U-1)
 *             c[i,jt+u] = r_u
 *         for j in N/U*U..N: <the original body>          (tail, when U does not divide N)
 *     which LLVM's SLP vectorizer turns into vector accumulators kept in registers, with each
 *     a[i,k] loaded once per U outputs. U = 8 vector lanes of the output type (at least 4,
 *     at most 128 and at most J's extent); what is left is jammed again as one tile (126
 *     columns at U = 128 run as one tile, 30 at U = 16 as 16 + 14). One wide tile rather than
 *     power-of-two pieces matters: each accumulator is a chain of dependent adds, so a loop
 *     with one or two vector accumulators is bound by the add latency, and a 126-wide conv
 *     row cut into 64 + 32 + 16 + 8 + 4 + 2 took about six times as long as its 64-wide part
 *     (16 -> 16 channels at 128x128 on AVX-512: 1.7 -> 1.05 ms);
 *   - register blocking: then the innermost loop L enclosing the tile whose copies can share
 *     the tile's loads (no load in a reduction reads both L's and a tile variable: the
 *     output channel of a convolution, the row i of a matmul, the output column of a
 *     convolution run with the output channel innermost) is jammed the same way by
 *     BLOCK_COPIES, so each loaded input feeds several accumulators. This is done only where
 *     the tile's loads are strided (a stride-2 convolution, whose loads LLVM gathers) or the
 *     tile is narrow (at most NARROW_TILE vectors: too few chains to hide the add latency).
 *     With a wide tile of unit-stride loads LLVM 19's SLP vectorizer gives up on the blocked
 *     body, which then runs 2-5x slower. On AVX-512, 2 copies beat 4, 8 and 16 once a Relu
 *     is fused, and beat 4 and 8 for narrow tiles too (a 512x256 by 256x16 matmul: 60 -> 36
 *     us; a 16 -> 32 channel stride-2 conv, channels innermost: 0.95 -> 0.51 ms).
 * Legality. Each accumulator still sums its terms in the original order, so results are
 * bitwise identical. Iterations of J are independent because the kernel never loads what it
 * stores (no KP_INOUT, no input sharing storage with an output; write-once makes distinct
 * iterations store distinct elements) and every register J's body touches is set in the
 * body before it is read (checked below); registers are renamed per copy. The same holds
 * for the blocked loop L. A statement that depends on j (an if on a padded coordinate, a
 * store) is copied U times in place; a loop or an if that does not is kept once with its
 * body jammed. */
#include "pipeline.h"

enum { MAX_JAM = 128, MAX_JAM_NODES = 40000, BLOCK_COPIES = 2, NARROW_TILE = 2 };

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

/* Innermost loops of elementwise/copy nests are the ones to vectorize. */
static void mark_vectorize(Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind != S_LOOP) continue;
        bool inner = true;
        for (Stmt *b = s->body; b; b = b->next)
            if (b->kind == S_LOOP || b->kind == S_IF) inner = false;
        if (inner) s->hints |= LH_VECTORIZE;
        else mark_vectorize(s->body);
    }
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

static void expr_regs(const Expr *e, bool *used) {
    if (e->kind == E_SCALAR) used[e->var] = true;
    for (int i = 0; i < e->nargs; i++) expr_regs(e->args[i], used);
}

static void regs_used(const Stmt *s, bool *used) {
    for (; s; s = s->next) {
        if (s->kind == S_SET) used[s->var] = true;
        if (s->val) expr_regs(s->val, used);
        if (s->cond) expr_regs(s->cond, used);
        if (s->lo) { expr_regs(s->lo, used); expr_regs(s->hi, used); }
        if (s->kind == S_STORE)
            for (int d = 0; d < s->buf->rank; d++) expr_regs(s->idx[d], used);
        regs_used(s->body, used);
        regs_used(s->then, used);
        regs_used(s->els, used);
    }
}

/* ---- unroll-and-jam ---- */
typedef struct Jam {
    Program *p;
    Kernel *k;
    int j, jt, u;                   /* original variable, tile variable, copies */
    int *reg[MAX_JAM];              /* per copy: register renaming */
} Jam;

static Expr *copy_expr(const Jam *m, const Expr *e, int c) {
    if (e->kind == E_VAR && e->var == m->j) return kx_addc(m->p, kx_var(m->p, m->jt), c);
    Expr *x = ARENA_NEW(m->p->arena, Expr);
    *x = *e;
    if (e->kind == E_SCALAR) x->var = m->reg[c][e->var];
    if (e->nargs) x->args = ARENA_ARRAY(m->p->arena, Expr *, e->nargs);
    for (int i = 0; i < e->nargs; i++) x->args[i] = copy_expr(m, e->args[i], c);
    return x;
}

/* Copy c of a statement list (j -> jt + c, registers renamed). */
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

/* A loop or if whose header does not depend on the copy is shared by all copies. */
static bool shared_header(const Jam *m, const Stmt *s) {
    if (s->kind == S_LOOP)
        return !expr_reads_var(s->lo, m->j) && !expr_reads_var(s->hi, m->j) &&
               !expr_reads_scalar(s->lo) && !expr_reads_scalar(s->hi);
    if (s->kind == S_IF) return !expr_reads_var(s->cond, m->j) && !expr_reads_scalar(s->cond);
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

/* Elements of the output type in one target vector. */
static int lanes(const Program *p, const Kernel *k) {
    int esz = 4;
    for (int i = 0; i < k->nparams; i++)
        if (k->modes[i] & KP_OUT) esz = (int)dtype_size(k->params[i]->dtype);
    return p->vector_bytes > esz ? p->vector_bytes / (esz ? esz : 4) : 1;
}

static int jam_factor(const Program *p, const Kernel *k, const Stmt *l) {
    int64_t u = MIN(MAX(8 * lanes(p, k), 4), MAX_JAM);
    u = MIN(u, l->hi->i - l->lo->i);
    while (u > 1 && (int64_t)stmt_size(l->body) * u > MAX_JAM_NODES) u /= 2;
    return (int)u;
}

/* Replace loop l by a loop jammed by u over the largest multiple of u and, if that leaves
 * some, the rest (l itself, shortened); returns the first of them. l's body must keep its
 * registers private (private_regs). */
static Stmt *jam_loop(Program *p, Kernel *k, Stmt *l, int u) {
    Jam m = {p, k, l->var, kir_var(k), u, {0}};
    int nregs = k->nscalars;
    bool *used = ARENA_ARRAY(p->arena, bool, nregs + 1);
    regs_used(l->body, used);
    for (int c = 0; c < u; c++) {
        m.reg[c] = ARENA_ARRAY(p->arena, int, nregs + 1);
        for (int r = 0; r < nregs; r++)
            m.reg[c][r] = c && used[r] ? kir_scalar(p, k, k->scalars[r]) : r;
    }
    int64_t lo = l->lo->i, hi = l->hi->i, mid = lo + (hi - lo) / u * u;
    Stmt *main = ks_loop(p, m.jt, lo, mid, u, jam(&m, l->body));
    main->hints = LH_TILE;
    if (mid < hi) {
        l->lo = kx_index(p, mid);
        main->next = l;
    } else {
        main->next = l->next;
    }
    return main;
}

/* Unroll-and-jam l by u; the remainder is jammed again by the largest power of two that fits
 * (at most u/2), and so on, so that a remainder of 30 columns runs as 16 + 8 + 4 + 2 lanes
 * of vector work rather than 30 scalar iterations. */
static Stmt *unroll_jam(Program *p, Kernel *k, Stmt *l, int u) {
    bool *none = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
    if (u < 2 || !private_regs(p->arena, l->body, none, k->nscalars)) return l;
    Stmt *head = jam_loop(p, k, l, u), *last = head;
    while (last->next == l) {
        int64_t rest = l->hi->i - l->lo->i;
        u = (int)MIN(u, rest);
        if (u < 2) break;
        last->next = jam_loop(p, k, l, u);
        last = last->next;
    }
    return head;
}

static bool has_reduction_child(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_LOOP && (s->hints & LH_REDUCTION)) return true;
    return false;
}

static bool jammable(const Stmt *s) {
    return s->kind == S_LOOP && !(s->hints & (LH_REDUCTION | LH_TILE)) && s->step == 1 &&
           s->lo->kind == E_CONST && s->hi->kind == E_CONST && has_reduction_child(s->body);
}

/* Walks a statement list, jamming the innermost eligible loops; returns the new list. */
static Stmt *tile_list(Program *p, Kernel *k, Stmt *s) {
    Stmt *head = NULL, *prev = NULL;
    while (s) {
        Stmt *next = s->next;
        s->body = tile_list(p, k, s->body);
        s->then = tile_list(p, k, s->then);
        s->els = tile_list(p, k, s->els);
        bool inner_done = false;     /* a jammed loop inside: leave this one alone */
        for (Stmt *b = s->body; b; b = b->next)
            if (b->kind == S_LOOP && (b->hints & LH_TILE)) inner_done = true;
        Stmt *r = s;
        if (!inner_done && jammable(s)) r = unroll_jam(p, k, s, jam_factor(p, k, s));
        if (prev) prev->next = r;
        else head = r;
        for (prev = r; prev->next != next; prev = prev->next) {}
        s = next;
    }
    return head;
}

/* ---- register blocking: a second jam around the tiled loop ---- */

/* Marks the variables of the LH_TILE loops in a list. */
static void tile_vars(const Stmt *s, bool *tv) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & LH_TILE)) tv[s->var] = true;
        tile_vars(s->body, tv);
        tile_vars(s->then, tv);
        tile_vars(s->els, tv);
    }
}

static bool reads_any(const Expr *e, const bool *vars) {
    if (e->kind == E_VAR && vars[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_any(e->args[i], vars)) return true;
    return false;
}

/* The coefficient of variable v in index expression e, or -1 when e is not affine in v. */
static int64_t var_coef(const Expr *e, int v) {
    switch (e->kind) {
    case E_VAR: return e->var == v;
    case E_CONST: return 0;
    case E_BIN: {
        int64_t a = var_coef(e->args[0], v), b = var_coef(e->args[1], v);
        if (a < 0 || b < 0) return -1;
        if (e->op == K_ADD) return a + b;
        if (e->op == K_MUL && e->args[1]->kind == E_CONST) return a * e->args[1]->i;
        if (e->op == K_MUL && e->args[0]->kind == E_CONST) return b * e->args[0]->i;
        return a || b ? -1 : 0;
    }
    default: return expr_reads_var(e, v) ? -1 : 0;
    }
}

/* Do the loads in e that read a tile variable all read it as their unit-stride last index? */
static bool expr_contiguous(const Expr *e, const bool *tv, int nvars) {
    if (e->kind == E_LOAD && reads_any(e, tv)) {
        for (int d = 0; d < e->nargs; d++)
            for (int v = 0; v < nvars; v++)
                if (tv[v] && expr_reads_var(e, v) && var_coef(e->args[d], v) != (d == e->nargs - 1))
                    return false;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!expr_contiguous(e->args[i], tv, nvars)) return false;
    return true;
}

static bool stmt_contiguous(const Stmt *s, const bool *tv, int nvars, bool in_red) {
    for (; s; s = s->next) {
        if (in_red && s->val && !expr_contiguous(s->val, tv, nvars)) return false;
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (!stmt_contiguous(s->body, tv, nvars, red) || !stmt_contiguous(s->then, tv, nvars, in_red) ||
            !stmt_contiguous(s->els, tv, nvars, in_red))
            return false;
    }
    return true;
}

/* Does a load in e read both v and a tile variable? */
static bool expr_ties(const Expr *e, int v, const bool *tv) {
    if (e->kind == E_LOAD && reads_any(e, tv) && expr_reads_var(e, v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_ties(e->args[i], v, tv)) return true;
    return false;
}

/* Does a load inside a reduction loop of the list tie v to a tile variable? Such a load
 * (x[.., oh + kh, ow + kw] for v = oh) differs between copies of v's loop, so jamming v
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

/* The widest tile (copies of the jammed loop) in a list. */
static int64_t tile_width(const Stmt *s) {
    int64_t w = 0;
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & LH_TILE)) w = MAX(w, s->step);
        w = MAX(w, MAX(tile_width(s->body), MAX(tile_width(s->then), tile_width(s->els))));
    }
    return w;
}

/* Copies of l: BLOCK_COPIES, fewer if l is shorter or the body would grow too big. */
static int block_factor(const Stmt *l) {
    int64_t v = MIN(BLOCK_COPIES, l->hi->i - l->lo->i);
    while (v > 1 && (int64_t)stmt_size(l->body) * v > MAX_JAM_NODES) v /= 2;
    return (int)v;
}

/* Jams, around each tiled loop, the innermost enclosing parallel loop whose copies can share
 * the tile's loads (the output channel of a convolution, the row i of a matmul), so that each
 * vector loaded in the reduction feeds several accumulators. Returns 0 if the list holds no
 * tiled loop, 1 if one not yet blocked, 2 if blocked. */
static int block_list(Program *p, Kernel *k, Stmt **list) {
    int st = 0;
    Stmt *prev = NULL;
    for (Stmt *s = *list; s;) {
        Stmt *next = s->next, *r = s;
        int in = 0;
        if (s->kind == S_LOOP) in = s->hints & LH_TILE ? 1 : block_list(p, k, &s->body);
        else if (s->kind == S_IF) in = MAX(block_list(p, k, &s->then), block_list(p, k, &s->els));
        if (in == 1 && s->kind == S_LOOP && !(s->hints & (LH_REDUCTION | LH_TILE)) &&
            s->step == 1 && s->lo->kind == E_CONST && s->hi->kind == E_CONST) {
            bool *tv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
            tile_vars(s->body, tv);
            bool narrow = tile_width(s->body) <= NARROW_TILE * lanes(p, k);
            if (!stmt_ties(s->body, s->var, tv, false) &&
                (narrow || !stmt_contiguous(s->body, tv, k->nvars, false))) {
                r = unroll_jam(p, k, s, block_factor(s));
                if (r != s) in = 2;
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

void tile(Program *p) {
    if (p->opt_level < 2) return;
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        mark_reductions(k->body);
        if (k->kclass == KC_ELEMENTWISE || k->kclass == KC_COPY) mark_vectorize(k->body);
        if (k->kclass != KC_CONTRACTION || !kernel_independent(k)) continue;
        k->body = tile_list(p, k, k->body);
        block_list(p, k, &k->body);
    }
}
