/* fuse.c - loop-level fusion: an elementwise kernel is folded into the kernel that produces
 * its input, so the intermediate buffer disappears and the value never leaves registers
 * (Conv -> Add -> Relu becomes one loop nest storing max(acc + bias, 0)).
 *
 * Runs right after lowering, before tiling and bufferization. The rule, for a consumer C of
 * class KC_ELEMENTWISE reading a temporary B written by a producer P:
 *   - B is a root temporary with no views, read by C alone and written by P alone (KP_OUT,
 *     so by the write-once invariant every element of B is stored exactly once), or by
 *     several kernels P1..Pn, each KP_OUT (each then stores its own elements: the stride
 *     phases of a ConvTranspose storing into their strided positions), C fusing into each;
 *   - C's output has B's shape and C reads B only at its own loop index [v0..vn-1];
 *   - nothing between P and C (P included) writes what C reads or touches C's output, and
 *     no control kernel (a loop or branch boundary) stands between them.
 * Then every `STORE B[idx] = val` in P becomes `STORE Cout[idx] = C's expression` with the
 * loads of B replaced by val and C's loop variables by idx, so C's other operands (a bias, a
 * residual) are read at their broadcast index of idx. P inherits C's parameters and C dies.
 * Because fusion only moves C's work to the moment P produces each element, and nothing
 * that runs in between can see the difference, the result is unchanged. Chains fuse by
 * repeating until nothing changes. */
#include <string.h>

#include "pipeline.h"

/* The canonical elementwise form (see KC_ELEMENTWISE): nested loops 0..dims[d] step 1, one
 * store out[v0..vn-1] = val in the innermost. */
typedef struct EwForm {
    Stmt *store;
    int rank;
    int vars[MAX_RANK];
} EwForm;

static bool is_const(const Expr *e, int64_t v) {
    return e->kind == E_CONST && e->type == DT_INDEX && e->i == v;
}

static bool match_elementwise(const Kernel *k, EwForm *m) {
    const Stmt *s = k->body;
    m->rank = 0;
    for (; s && s->kind == S_LOOP; s = s->body) {
        if (s->next || s->step != 1 || !is_const(s->lo, 0) || s->hi->kind != E_CONST ||
            m->rank == MAX_RANK)
            return false;
        m->vars[m->rank++] = s->var;
    }
    if (!s || s->kind != S_STORE || s->next || s->buf->rank != m->rank) return false;
    /* Loops were walked outermost first; their extents must be the output's dims. */
    const Stmt *l = k->body;
    for (int d = 0; d < m->rank; d++, l = l->body) {
        const Expr *ix = s->idx[d];
        if (l->hi->i != s->buf->dims[d] || ix->kind != E_VAR || ix->var != m->vars[d]) return false;
    }
    m->store = (Stmt *)s;
    return true;
}

static int mode_of(const Kernel *k, const Buf *b) {
    int i = kir_param_index(k, b);
    return i < 0 ? 0 : k->modes[i];
}

/* Does k touch storage `root` with any of the modes in mask? */
static bool touches(const Kernel *k, const Buf *root, int mask) {
    for (int i = 0; i < k->nparams; i++)
        if (kir_root(k->params[i]) == root && (k->modes[i] & mask)) return true;
    return false;
}

static bool has_view(const Program *p, const Buf *b) {
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i] != b && kir_root(p->bufs[i]) == b) return true;
    return false;
}

/* Is ix the loop variable var (of a loop 0..dim)? Broadcast indexing writes 0 for a dim of
 * size 1, which is the same thing. */
static bool at_loop_index(const Expr *ix, int var, int64_t dim) {
    return (ix->kind == E_VAR && ix->var == var) || (dim == 1 && is_const(ix, 0));
}

/* Counts the loads of b in e; -1 if one is not at the identity index or e reads a scalar. */
static int identity_loads(const Expr *e, const Buf *b, const EwForm *m) {
    if (e->kind == E_SCALAR) return -1;
    if (e->kind == E_LOAD && e->buf == b) {
        for (int d = 0; d < m->rank; d++)
            if (!at_loop_index(e->args[d], m->vars[d], b->dims[d])) return -1;
        return 1;
    }
    int n = 0;
    for (int i = 0; i < e->nargs; i++) {
        int c = identity_loads(e->args[i], b, m);
        if (c < 0) return -1;
        n += c;
    }
    return n;
}

/* Can C's output be computed where P stores B? (the rule in the header comment) Returns the
 * number of producers, written to pks: several when each writes its own part of B (the stride
 * phases of a ConvTranspose, each storing into its strided positions of B: passes/ops/conv.c;
 * write-once makes the parts disjoint and together whole), at most MAX_PRODUCERS. */
enum { MAX_PRODUCERS = 64 };

static int producers(Program *p, Kernel *c, Buf *b, const EwForm *m, Kernel **pks) {
    Buf *out = m->store->buf;
    if (mode_of(c, b) != KP_IN || b->kind != B_TEMP || b->alias || has_view(p, b)) return 0;
    if (b->rank != out->rank || memcmp(b->dims, out->dims, sizeof(int64_t) * (size_t)b->rank))
        return 0;
    if (identity_loads(m->store->val, b, m) < 1) return 0;
    int n = 0;
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k == c || k->dead || !mode_of(k, b)) continue;
        if (n == MAX_PRODUCERS || mode_of(k, b) != KP_OUT || k->id > c->id) return 0;
        pks[n++] = k;
    }
    if (!n) return 0;
    Buf *oroot = kir_root(out);
    for (int i = pks[0]->id; i < c->id; i++) {
        Kernel *k = p->kernels[i];
        if (k->ctl) return 0;       /* another region: C would move into or out of a loop/branch */
        if (k->dead) continue;
        if (touches(k, oroot, KP_INOUT)) return 0;
        for (int j = 0; j < c->nparams; j++)
            if (c->params[j] != b && (c->modes[j] & KP_IN) &&
                touches(k, kir_root(c->params[j]), KP_OUT))
                return 0;
    }
    return n;
}

typedef struct Fusion {
    Program *p;
    Kernel *pk;
    Buf *b, *out;
    const EwForm *m;
    int uses;                       /* loads of b in C's expression */
} Fusion;

/* C's expression with b read as val and C's loop variables as P's store index. */
static Expr *subst(const Fusion *f, const Expr *e, const Expr *val, Expr *const *idx) {
    if (e->kind == E_LOAD && e->buf == f->b) return kx_clone(f->p, val);
    if (e->kind == E_VAR) {
        for (int d = 0; d < f->m->rank; d++)
            if (f->m->vars[d] == e->var) return kx_clone(f->p, idx[d]);
        die("fuse: consumer variable i%d is not a loop of its nest", e->var);
    }
    Expr *c = ARENA_NEW(f->p->arena, Expr);
    *c = *e;
    if (e->nargs) c->args = ARENA_ARRAY(f->p->arena, Expr *, e->nargs);
    for (int i = 0; i < e->nargs; i++) c->args[i] = subst(f, e->args[i], val, idx);
    return c;
}

static bool cheap(const Expr *e) {
    return e->kind == E_CONST || e->kind == E_VAR || e->kind == E_SCALAR || e->kind == E_LOAD;
}

/* Rewrites P's stores of b; returns whether a scalar register had to hold a value. */
static bool rewrite(const Fusion *f, Stmt *s) {
    bool reg = false;
    for (; s; s = s->next) switch (s->kind) {
    case S_LOOP: reg |= rewrite(f, s->body); break;
    case S_IF: reg |= rewrite(f, s->then); reg |= rewrite(f, s->els); break;
    case S_SET: break;
    case S_STORE: {
        if (s->buf != f->b) break;
        Expr *val = s->val;
        /* A 16-bit float store rounds; the forwarded value must round the same way. */
        if (f->b->dtype == DT_FLOAT16 || f->b->dtype == DT_BFLOAT16 || dtype_is_minifloat(f->b->dtype))
            val = s->val = kx_cast(f->p, f->b->dtype, kx_cast(f->p, DT_FLOAT, val));
        /* A costly value read several times by C is computed once into a register. */
        if (f->uses > 1 && !cheap(val)) {
            int r = kir_scalar(f->p, f->pk, f->b->dtype);
            Expr *v = subst(f, f->m->store->val, kx_scalar(f->p, f->pk, r), s->idx);
            Stmt *st = ks_store(f->p, f->out, s->idx, v);
            st->next = s->next;
            s->kind = S_SET;
            s->var = r;
            s->buf = NULL;
            s->idx = NULL;
            s->next = st;
            s = st;
            reg = true;
            break;
        }
        s->val = subst(f, f->m->store->val, val, s->idx);
        s->buf = f->out;
        break;
    }
    }
    return reg;
}

static void drop_param(Kernel *k, const Buf *b) {
    int n = 0;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] != b) { k->params[n] = k->params[i]; k->modes[n] = k->modes[i]; n++; }
    k->nparams = n;
}

static void fuse_into(Program *p, Kernel *pk, Kernel *c, Buf *b, const EwForm *m) {
    Fusion f = {p, pk, b, m->store->buf, m, identity_loads(m->store->val, b, m)};
    bool reg = rewrite(&f, pk->body);
    drop_param(pk, b);
    for (int i = 0; i < c->nparams; i++)
        if (c->params[i] != b && c->params[i] != f.out) kir_param(p, pk, c->params[i], KP_IN);
    kir_param(p, pk, f.out, KP_OUT);
    pk->ops = arena_printf(p->arena, "%s+%s", pk->ops, c->ops);
    kir_add_nodes(p, pk, c->nodes, c->nnodes);
    if (pk->kclass == KC_COPY || (pk->kclass == KC_ELEMENTWISE && reg)) pk->kclass = KC_GENERIC;
}

static bool fuse_one(Program *p, Kernel *c) {
    EwForm m;
    if (c->dead || c->kclass != KC_ELEMENTWISE || !match_elementwise(c, &m)) return false;
    if (mode_of(c, m.store->buf) != KP_OUT) return false;
    for (int i = 0; i < c->nparams; i++) {
        Kernel *pks[MAX_PRODUCERS];
        int n = producers(p, c, c->params[i], &m, pks);
        if (n) {
            for (int j = 0; j < n; j++) fuse_into(p, pks[j], c, c->params[i], &m);
            c->dead = true;
            c->body = NULL;
            return true;
        }
    }
    return false;
}

/* ---- the other direction: an elementwise producer inlined into its one reader ----
 * An elementwise kernel E whose output T is read by one later contraction, or elementwise
 * or generic kernel with one load of it, K alone, of T's shape, never inside one of K's reduction loops (so each element is
 * still computed once: a dequantised residual that a convolution adds in its epilogue; a
 * dequantised activation that a broadcasting Add reads after the pool of the same
 * activation, which stands between them, as in tests/int8/ops: no float copy of it in the
 * arena): K reads E's inputs instead, E's expression at each load's index. The rule above
 * cannot take it when K is not elementwise or another kernel between them writes what K
 * reads, and when E's input has other readers it cannot go into E's producer either. Legal when nothing between E and K writes E's inputs, no control kernel
 * stands between them, and T has no views. */

static bool expr_loads(const Expr *e, const Buf *b) {
    if (e->kind == E_LOAD && e->buf == b) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_loads(e->args[i], b)) return true;
    return false;
}

static int expr_count(const Expr *e, const Buf *b) {
    int n = e->kind == E_LOAD && e->buf == b;
    for (int i = 0; i < e->nargs; i++) n += expr_count(e->args[i], b);
    return n;
}

/* The loads of b in the list's expressions (each counted where it is written, not run). */
static int count_loads(const Stmt *s, const Buf *b) {
    int n = 0;
    for (; s; s = s->next) {
        if (s->val) n += expr_count(s->val, b);
        if (s->cond) n += expr_count(s->cond, b);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) n += expr_count(s->idx[d], b);
        n += count_loads(s->body, b) + count_loads(s->then, b) + count_loads(s->els, b);
    }
    return n;
}

/* Are all loads of b in the list outside reduction loops (in_red: the list is in one)? */
static bool loads_outside(const Stmt *s, const Buf *b, bool in_red) {
    for (; s; s = s->next) {
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (in_red && ((s->val && expr_loads(s->val, b)) || (s->cond && expr_loads(s->cond, b)))) return false;
        if (!loads_outside(s->body, b, red) || !loads_outside(s->then, b, in_red) ||
            !loads_outside(s->els, b, in_red))
            return false;
    }
    return true;
}

static Expr *inline_loads(const Fusion *f, Expr *e) {
    if (e->kind == E_LOAD && e->buf == f->b) return subst(f, f->m->store->val, NULL, e->args);
    for (int i = 0; i < e->nargs; i++) e->args[i] = inline_loads(f, e->args[i]);
    return e;
}

static void inline_stmts(const Fusion *f, Stmt *s) {
    for (; s; s = s->next) {
        if (s->val) s->val = inline_loads(f, s->val);
        if (s->cond) s->cond = inline_loads(f, s->cond);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++) s->idx[d] = inline_loads(f, s->idx[d]);
        inline_stmts(f, s->body);
        inline_stmts(f, s->then);
        inline_stmts(f, s->els);
    }
}

/* the one kernel after E that touches T, if it only reads T and no control kernel comes
 * first; NULL otherwise */
static Kernel *one_reader(Program *p, const Kernel *e, Buf *t) {
    Kernel *k = NULL;
    for (int i = e->id + 1; i < p->nkernels; i++) {
        Kernel *x = p->kernels[i];
        if (x->ctl && !k) return NULL;
        if (x->dead || !touches(x, t, KP_INOUT)) continue;
        if (k || mode_of(x, t) != KP_IN) return NULL;
        k = x;
    }
    return k;
}

/* E's expression (m) at each of K's loads of T, E's other operands made K's inputs, E gone;
 * K's ops then name E first (before) or last */
static void inline_into(Program *p, Kernel *k, Kernel *e, Buf *t, EwForm *m, bool before) {
    Fusion f = {p, k, t, t, m, 0};
    inline_stmts(&f, k->body);
    drop_param(k, t);
    for (int i = 0; i < e->nparams; i++)
        if (e->params[i] != t) kir_param(p, k, e->params[i], KP_IN);
    k->ops = before ? arena_printf(p->arena, "%s+%s", e->ops, k->ops) : arena_printf(p->arena, "%s+%s", k->ops, e->ops);
    kir_add_nodes(p, k, e->nodes, e->nnodes);
    e->dead = true;
    e->body = NULL;
}

static bool inline_one(Program *p, Kernel *e) {
    EwForm m;
    if (e->dead || e->kclass != KC_ELEMENTWISE || !match_elementwise(e, &m)) return false;
    Buf *t = m.store->buf;
    if (mode_of(e, t) != KP_OUT || t->kind != B_TEMP || t->alias || has_view(p, t)) return false;
    Kernel *k = one_reader(p, e, t);
    if (!k || !loads_outside(k->body, t, false)) return false;
    if (k->kclass != KC_CONTRACTION && ((k->kclass != KC_ELEMENTWISE && k->kclass != KC_GENERIC) || count_loads(k->body, t) != 1))
        return false;
    bool same = false;              /* one element of T per element of K's output */
    for (int i = 0; i < k->nparams; i++)
        same |= (k->modes[i] & KP_OUT) && k->params[i]->rank == t->rank &&
                !memcmp(k->params[i]->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    if (!same) return false;
    for (int i = e->id + 1; i < k->id; i++)
        for (int j = 0; j < e->nparams; j++)
            if (e->params[j] != t && !p->kernels[i]->dead && touches(p->kernels[i], kir_root(e->params[j]), KP_OUT))
                return false;
    inline_into(p, k, e, t, &m, false);
    return true;
}

/* ---- weights computed from constants, inlined into the loads of their one reader ----
 * An elementwise kernel E of constants alone (the DequantizeLinear of int4 weights that
 * fold_constants keeps: passes/fold_constants.c, keep_nibbles) whose float output T is read by
 * one contraction K, inside its reductions or not: K reads E's constants instead, E's
 * expression at each load's index. An element of T is then computed once per read (once per
 * row of A: a matrix-vector product reads each once), but T is never stored: the weights
 * stream from the object at their 4 bits instead of from the arena at 32, which is what
 * bounds a matrix-vector product. The constants cannot change, so nothing in between
 * matters but control kernels. */
static bool inline_weights(Program *p, Kernel *e) {
    EwForm m;
    if (e->dead || e->ctl || !match_elementwise(e, &m)) return false;
    Buf *t = m.store->buf;
    if (mode_of(e, t) != KP_OUT || t->kind != B_TEMP || t->alias || has_view(p, t) || t->dtype != DT_FLOAT)
        return false;
    bool nibbles = false;
    for (int i = 0; i < e->nparams; i++) {
        Buf *r = kir_root(e->params[i]);
        if (e->params[i] != t && r->kind != B_CONST) return false;
        nibbles |= r->nibbles;
    }
    if (!nibbles) return false;
    Kernel *k = one_reader(p, e, t);
    if (!k || k->kclass != KC_CONTRACTION) return false;
    inline_into(p, k, e, t, &m, true);
    return true;
}

void fuse(Program *p) {
    kir_unjoin(p);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < p->nkernels; i++) changed |= fuse_one(p, p->kernels[i]);
    }
    for (int i = 0; i < p->nkernels; i++) inline_one(p, p->kernels[i]);
    for (int i = 0; i < p->nkernels; i++) inline_weights(p, p->kernels[i]);
    kir_compact(p);
}
