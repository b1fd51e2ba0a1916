/* kverify.c - the structural checker of the kernel IR (kir_verify).
 *
 * The pipeline runs it after lowering and after every kernel pass (unless --no-verify), so a pass that breaks an invariant of kir.h is named at once instead of showing
 * up as wrong numbers in generated code. It checks what can be seen without running the
 * program: parameter modes of every load and store, index counts and types, loop-variable
 * scoping, scalar register numbers and types, operand types, and - once bufferize has run -
 * that no two temporaries that are live at the same time share arena bytes. */
#include "kir.h"

#include <string.h>

typedef struct Check {
    Program *p;
    Kernel *k;
    const char *after;
    bool *in_scope;                 /* loop variables whose loop encloses the current point */
    const Stmt *vloop;              /* the enclosing vector loop, or NULL */
    bool *vreg;                     /* registers set in some vector loop of the kernel */
} Check;


static _Noreturn void fail(Check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void fail(Check *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die("kernel verifier after %s: kernel %s: %s", c->after, c->k ? c->k->name : "-", msg);
}

static int param_mode(const Kernel *k, const Buf *b) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == b) return k->modes[i];
    return 0;
}

static void check_expr(Check *c, const Expr *e);

static void check_index(Check *c, const Buf *b, Expr *const *idx, int n, const char *what) {
    if (n != b->rank) fail(c, "%s of %%%s with %d indices (rank %d)", what, b->name, n, b->rank);
    for (int d = 0; d < n; d++) {
        if (!idx || !idx[d]) fail(c, "%s of %%%s: index %d missing", what, b->name, d);
        if (idx[d]->type != DT_INDEX)
            fail(c, "%s of %%%s: index %d has type %s", what, b->name, d, dtype_name(idx[d]->type));
        check_expr(c, idx[d]);
    }
}

static void check_un(Check *c, const Expr *e) {
    DType a = e->args[0]->type;
    if (e->op == K_CAST) return;
    if (e->op == K_BITCAST) {
        if (dtype_size(e->type) != dtype_size(a) || e->type == DT_BOOL || a == DT_BOOL ||
            dtype_is_minifloat(e->type) || dtype_is_minifloat(a))
            fail(c, "bitcast: %s to %s", dtype_name(a), dtype_name(e->type));
        return;
    }
    if (e->op == K_NOT) {
        if (e->type != DT_BOOL && e->type != a) fail(c, "not: bad types");
        return;
    }
    if (kop_arity[e->op] != 1) fail(c, "unary expression with binary operator %s", kop_name[e->op]);
    if (e->type != a)
        fail(c, "%s of %s gives %s", kop_name[e->op], dtype_name(a), dtype_name(e->type));
}

static void check_bin(Check *c, const Expr *e) {
    DType a = e->args[0]->type, b = e->args[1]->type;
    if (kop_arity[e->op] != 2) fail(c, "binary expression with unary operator %s", kop_name[e->op]);
    if (a != b) fail(c, "%s of %s and %s", kop_name[e->op], dtype_name(a), dtype_name(b));
    DType want = kop_flags[e->op] & KF_CMP ? DT_BOOL : a;
    if (e->type != want)
        fail(c, "%s gives %s, expected %s", kop_name[e->op], dtype_name(e->type), dtype_name(want));
}

static void check_expr(Check *c, const Expr *e) {
    static const int arity[] = {[E_CONST] = 0, [E_VAR] = 0, [E_SCALAR] = 0, [E_UN] = 1,
                                [E_BIN] = 2, [E_SELECT] = 3};
    if (!e) fail(c, "missing expression");
    if (e->kind != E_LOAD && e->nargs != arity[e->kind])
        fail(c, "expression kind %d with %d operands", e->kind, e->nargs);
    for (int i = 0; e->kind != E_LOAD && i < e->nargs; i++) check_expr(c, e->args[i]);
    switch (e->kind) {
    case E_CONST: break;
    case E_VAR:
        if (e->type != DT_INDEX) fail(c, "loop variable i%d of type %s", e->var, dtype_name(e->type));
        if (e->var < 0 || e->var >= c->k->nvars) fail(c, "loop variable i%d out of range", e->var);
        if (!c->in_scope[e->var]) fail(c, "loop variable i%d used outside its loop", e->var);
        break;
    case E_SCALAR:
        if (e->var < 0 || e->var >= c->k->nscalars) fail(c, "scalar register r%d out of range", e->var);
        if (e->type != c->k->scalars[e->var])
            fail(c, "read of r%d as %s (declared %s)", e->var, dtype_name(e->type),
                 dtype_name(c->k->scalars[e->var]));
        break;
    case E_LOAD:
        if (!(param_mode(c->k, e->buf) & KP_IN))
            fail(c, "load of %%%s, which is not an in/inout parameter", e->buf->name);
        if (e->type != e->buf->dtype)
            fail(c, "load of %%%s as %s", e->buf->name, dtype_name(e->type));
        check_index(c, e->buf, e->args, e->nargs, "load");
        break;
    case E_UN: check_un(c, e); break;
    case E_BIN: check_bin(c, e); break;
    case E_SELECT:
        if (e->args[0]->type != DT_BOOL) fail(c, "select on %s", dtype_name(e->args[0]->type));
        if (e->args[1]->type != e->type || e->args[2]->type != e->type)
            fail(c, "select of %s and %s as %s", dtype_name(e->args[1]->type),
                 dtype_name(e->args[2]->type), dtype_name(e->type));
        break;
    }
}

/* ---- vector reductions (LH_REDUCTION | LH_VECTOR in kir.h) ---- */

static bool reads_reg(const Expr *e, int r) {
    if (e->kind == E_SCALAR && e->var == r) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_reg(e->args[i], r)) return true;
    return false;
}

/* The first accumulator e reads, or -1. */
static int reads_acc(const Expr *e, const KOp *acc, int n) {
    if (e->kind == E_SCALAR && e->var >= 0 && e->var < n && acc[e->var] != K_COUNT) return e->var;
    for (int i = 0; i < e->nargs; i++) {
        int r = reads_acc(e->args[i], acc, n);
        if (r >= 0) return r;
    }
    return -1;
}

/* For s = `r = r OP e` or `r = e OP r` with OP associative: OP, and e in *rest; else K_COUNT. */
static KOp update_op(const Stmt *s, const Expr **rest) {
    const Expr *v = s->val;
    if (v->kind != E_BIN || (v->op != K_ADD && v->op != K_MUL && v->op != K_MIN && v->op != K_MAX))
        return K_COUNT;
    for (int i = 0; i < 2; i++)
        if (v->args[i]->kind == E_SCALAR && v->args[i]->var == s->var && !reads_reg(v->args[1 - i], s->var)) {
            *rest = v->args[1 - i];
            return v->op;
        }
    return K_COUNT;
}

/* Finds the accumulators: registers set from their own value. */
static bool find_accs(const Kernel *k, const Stmt *s, KOp *acc, char *why, size_t nwhy) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            snprintf(why, nwhy, "a store to %%%s in the body", s->buf->name);
            return false;
        }
        if (s->kind == S_SET && s->var >= 0 && s->var < k->nscalars && s->val && reads_reg(s->val, s->var)) {
            const Expr *rest;
            KOp op = update_op(s, &rest);
            DType t = k->scalars[s->var];
            if (op == K_COUNT) {
                snprintf(why, nwhy, "r%d is set from itself otherwise than r = r op e, op add, mul, min or max", s->var);
                return false;
            }
            if (acc[s->var] != K_COUNT && acc[s->var] != op) {
                snprintf(why, nwhy, "r%d is updated with both %s and %s", s->var, kop_name[acc[s->var]], kop_name[op]);
                return false;
            }
            if (t == DT_BOOL || t == DT_INDEX) {
                snprintf(why, nwhy, "accumulator r%d of type %s", s->var, dtype_name(t));
                return false;
            }
            acc[s->var] = op;
        }
        if (!find_accs(k, s->body, acc, why, nwhy) || !find_accs(k, s->then, acc, why, nwhy) ||
            !find_accs(k, s->els, acc, why, nwhy))
            return false;
    }
    return true;
}

/* Every set of an accumulator is an update, and nothing else reads one. */
static bool acc_uses(const Kernel *k, const Stmt *s, const KOp *acc, char *why, size_t nwhy) {
    for (; s; s = s->next) {
        const Expr *es[3] = {s->val, s->cond, s->kind == S_LOOP ? s->hi : NULL};
        if (s->kind == S_LOOP) es[1] = s->lo;
        if (s->kind == S_SET && s->var >= 0 && s->var < k->nscalars && acc[s->var] != K_COUNT) {
            const Expr *rest = NULL;
            if (update_op(s, &rest) != acc[s->var]) {
                snprintf(why, nwhy, "accumulator r%d set otherwise than by r = r %s e", s->var,
                         kop_name[acc[s->var]]);
                return false;
            }
            es[0] = rest;
        }
        for (int i = 0; i < 3; i++) {
            int r = es[i] ? reads_acc(es[i], acc, k->nscalars) : -1;
            if (r >= 0) {
                snprintf(why, nwhy, "accumulator r%d read outside its updates", r);
                return false;
            }
        }
        if (!acc_uses(k, s->body, acc, why, nwhy) || !acc_uses(k, s->then, acc, why, nwhy) ||
            !acc_uses(k, s->els, acc, why, nwhy))
            return false;
    }
    return true;
}

/* (kir.h) */
bool kir_reduction_form(const Kernel *k, const Stmt *body, KOp *acc, char *why, size_t nwhy) {
    char none[1];
    if (!why) why = none, nwhy = sizeof none;
    for (int r = 0; r < k->nscalars; r++) acc[r] = K_COUNT;
    if (!find_accs(k, body, acc, why, nwhy) || !acc_uses(k, body, acc, why, nwhy)) return false;
    for (int r = 0; r < k->nscalars; r++)
        if (acc[r] != K_COUNT) return true;
    snprintf(why, nwhy, "no accumulator");
    return false;
}

/* ---- vector loops (LH_VECTOR in kir.h) ---- */

static bool reg_ok(const Check *c, int r) { return r >= 0 && r < c->k->nscalars; }

/* Does e depend on the lane: read the vector loop's variable or a lane-private register? */
static bool lane_dependent(const Check *c, const Expr *e) {
    if (e->kind == E_VAR && e->var == c->vloop->var) return true;
    if (e->kind == E_SCALAR && reg_ok(c, e->var) && c->vreg[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (lane_dependent(c, e->args[i])) return true;
    return false;
}

static void vector_sets(const Kernel *k, const Stmt *s, bool *set) {
    for (; s; s = s->next) {
        if (s->kind == S_SET && s->var >= 0 && s->var < k->nscalars) set[s->var] = true;
        vector_sets(k, s->body, set);
        vector_sets(k, s->then, set);
        vector_sets(k, s->els, set);
    }
}

static bool is_vector_reduction(const Stmt *s) {
    return s->kind == S_LOOP && (s->hints & (LH_VECTOR | LH_REDUCTION)) == (LH_VECTOR | LH_REDUCTION);
}

/* Marks the registers set in vector loops of the list (in vreg): lane-private, except the
 * accumulators of vector reductions. */
static void vector_regs(Check *c, const Stmt *s, bool *vreg) {
    const Kernel *k = c->k;
    for (; s; s = s->next) {
        if (is_vector_reduction(s)) {
            bool *set = ARENA_ARRAY(c->p->arena, bool, k->nscalars + 1);
            KOp *acc = ARENA_ARRAY(c->p->arena, KOp, k->nscalars + 1);
            vector_sets(k, s->body, set);
            kir_reduction_form(k, s->body, acc, NULL, 0);  /* checked in check_vector_loop */
            for (int r = 0; r < k->nscalars; r++) vreg[r] |= set[r] && acc[r] == K_COUNT;
        } else if (s->kind == S_LOOP && (s->hints & LH_VECTOR)) vector_sets(k, s->body, vreg);
        else {
            vector_regs(c, s->body, vreg);
            vector_regs(c, s->then, vreg);
            vector_regs(c, s->els, vreg);
        }
    }
}

/* A lane-private register read where no set of the same lane reaches it. */
static int undefined_read(const Check *c, const Expr *e, const bool *def) {
    if (e->kind == E_SCALAR && reg_ok(c, e->var) && c->vreg[e->var] && !def[e->var]) return e->var;
    for (int i = 0; i < e->nargs; i++) {
        int r = undefined_read(c, e->args[i], def);
        if (r >= 0) return r;
    }
    return -1;
}

/* Set-before-read of the lane-private registers in a vector loop's body: def[] holds the
 * registers set on every path to the current point. A set inside a nested loop counts only
 * in that loop's body; one inside an if counts after it when both branches make it. Returns
 * the first register read before being set, or -1. */
static int private_defs(const Check *c, const Stmt *s, bool *def) {
    int n = c->k->nscalars, r = -1;
    for (; s && r < 0; s = s->next) {
        const Expr *es[3] = {s->val, s->cond, s->kind == S_LOOP ? s->hi : NULL};
        for (int i = 0; i < 3 && r < 0; i++)
            if (es[i]) r = undefined_read(c, es[i], def);
        if (s->kind == S_LOOP && r < 0) r = undefined_read(c, s->lo, def);
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank && r < 0; d++)
            r = undefined_read(c, s->idx[d], def);
        if (r >= 0) break;
        bool *a = ARENA_ARRAY(c->p->arena, bool, n + 1), *b = ARENA_ARRAY(c->p->arena, bool, n + 1);
        memcpy(a, def, sizeof(bool) * (size_t)n);
        memcpy(b, def, sizeof(bool) * (size_t)n);
        switch (s->kind) {
        case S_SET: def[s->var] = true; break;
        case S_LOOP: r = private_defs(c, s->body, a); break;
        case S_IF:
            r = private_defs(c, s->then, a);
            if (r < 0) r = private_defs(c, s->els, b);
            for (int i = 0; i < n; i++) def[i] |= a[i] && b[i];
            break;
        case S_STORE: break;
        }
    }
    return r;
}

static void check_vector_loop(Check *c, const Stmt *s) {
    if (c->vloop) fail(c, "vector loop over i%d nested in vector loop over i%d", s->var, c->vloop->var);
    if (s->lo->kind != E_CONST || s->hi->kind != E_CONST || s->step != 1)
        fail(c, "vector loop over i%d without constant bounds and step 1", s->var);
    int64_t w = s->hi->i - s->lo->i;
    if (is_vector_reduction(s)) {
        KOp *acc = ARENA_ARRAY(c->p->arena, KOp, c->k->nscalars + 1);
        char why[160];
        if (!kir_reduction_form(c->k, s->body, acc, why, sizeof why))
            fail(c, "vector reduction over i%d: %s", s->var, why);
    } else if (w < 2 || w > MAX_LANES) {
        fail(c, "vector loop over i%d with %lld lanes", s->var, (long long)w);
    }
    c->vloop = s;
    bool *def = ARENA_ARRAY(c->p->arena, bool, c->k->nscalars + 1);
    int r = private_defs(c, s->body, def);
    if (r >= 0) fail(c, "vector loop over i%d reads r%d before setting it", s->var, r);
}

/* Lane-private registers are not read outside vector loops (their values do not outlive
 * the lanes). */
static void check_vreg_reads(Check *c, const Stmt *s) {
    bool *none = ARENA_ARRAY(c->p->arena, bool, c->k->nscalars + 1);
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & LH_VECTOR)) continue;
        const Expr *es[4] = {s->val, s->cond, s->kind == S_LOOP ? s->lo : NULL, s->kind == S_LOOP ? s->hi : NULL};
        for (int i = 0; i < 4; i++)
            if (es[i] && undefined_read(c, es[i], none) >= 0)
                fail(c, "r%d, set in a vector loop, read outside vector loops", undefined_read(c, es[i], none));
        for (int d = 0; s->kind == S_STORE && d < s->buf->rank; d++)
            if (undefined_read(c, s->idx[d], none) >= 0)
                fail(c, "r%d, set in a vector loop, read outside vector loops", undefined_read(c, s->idx[d], none));
        check_vreg_reads(c, s->body);
        check_vreg_reads(c, s->then);
        check_vreg_reads(c, s->els);
    }
}

static void check_stmts(Check *c, const Stmt *s) {
    for (; s; s = s->next) switch (s->kind) {
    case S_LOOP:
        if (s->var < 0 || s->var >= c->k->nvars) fail(c, "loop over i%d out of range", s->var);
        if (c->in_scope[s->var]) fail(c, "loop over i%d nested in a loop over i%d", s->var, s->var);
        check_expr(c, s->lo);
        check_expr(c, s->hi);
        if (s->lo->type != DT_INDEX || s->hi->type != DT_INDEX) fail(c, "loop bounds not index");
        if (s->step <= 0) fail(c, "loop over i%d with step %lld", s->var, (long long)s->step);
        if (c->vloop && (lane_dependent(c, s->lo) || lane_dependent(c, s->hi)))
            fail(c, "bounds of loop over i%d depend on the lane of vector loop over i%d", s->var, c->vloop->var);
        if (s->hints & LH_VECTOR) check_vector_loop(c, s);
        if ((s->hints & LH_REDO) && (s->lo->kind != E_CONST || s->hi->kind != E_CONST || s->redo <= 0 ||
                                     s->redo > s->hi->i - s->lo->i))
            fail(c, "loop over i%d redoes %lld of its values", s->var, (long long)s->redo);
        if ((s->hints & LH_PARALLEL) &&
            (s->lo->kind != E_CONST || s->hi->kind != E_CONST || (s->hints & (LH_REDUCTION | LH_REDO)) ||
             s->tasks < 2 || s->tasks > (int64_t)1 << 20 ||
             (s->next && (s->next->kind != S_LOOP || !(s->next->hints & LH_PARALLEL) ||
                          s->next->tasks != s->tasks))))
            fail(c, "loop over i%d is split into %lld tasks", s->var, (long long)s->tasks);
        c->in_scope[s->var] = true;
        check_stmts(c, s->body);
        c->in_scope[s->var] = false;
        if (s->hints & LH_VECTOR) c->vloop = NULL;
        break;
    case S_STORE:
        if (!(param_mode(c->k, s->buf) & KP_OUT))
            fail(c, "store to %%%s, which is not an out/inout parameter", s->buf->name);
        if (s->buf->kind == B_CONST || s->buf->kind == B_INPUT)
            fail(c, "store to read-only %%%s", s->buf->name);
        check_index(c, s->buf, s->idx, s->buf->rank, "store");
        check_expr(c, s->val);
        if (s->val->type != s->buf->dtype)
            fail(c, "store of %s into %%%s (%s)", dtype_name(s->val->type), s->buf->name,
                 dtype_name(s->buf->dtype));
        break;
    case S_SET:
        if (s->var < 0 || s->var >= c->k->nscalars) fail(c, "set of r%d out of range", s->var);
        check_expr(c, s->val);
        if (s->val->type != c->k->scalars[s->var])
            fail(c, "set of r%d (%s) to %s", s->var, dtype_name(c->k->scalars[s->var]),
                 dtype_name(s->val->type));
        break;
    case S_IF:
        check_expr(c, s->cond);
        if (s->cond->type != DT_BOOL) fail(c, "if on %s", dtype_name(s->cond->type));
        if (c->vloop && lane_dependent(c, s->cond))
            fail(c, "if condition depends on the lane of vector loop over i%d", c->vloop->var);
        check_stmts(c, s->then);
        check_stmts(c, s->els);
        break;
    default: fail(c, "statement kind %d", s->kind);
    }
}

static void check_params(Check *c) {
    Kernel *k = c->k;
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = k->params[i];
        if (!b || b->id < 0 || b->id >= c->p->nbufs || c->p->bufs[b->id] != b)
            fail(c, "parameter %d is not a buffer of the program", i);
        if (k->modes[i] < KP_IN || k->modes[i] > KP_INOUT) fail(c, "parameter %%%s: mode %d", b->name, k->modes[i]);
        for (int j = 0; j < i; j++)
            if (k->params[j] == b) fail(c, "parameter %%%s listed twice", b->name);
    }
    if (k->prefetch && (!(param_mode(k, k->prefetch) & KP_IN) || k->prefetch_ahead <= 0))
        fail(c, "prefetch of %%%s: not an in-parameter, or %lld bytes ahead", k->prefetch->name,
             (long long)k->prefetch_ahead);
    if (k->prefetch_row && (!k->prefetch || k->prefetch_row->type != DT_INDEX || k->prefetch_rows < 2))
        fail(c, "prefetch rows: not an index expression, or %lld rows", (long long)k->prefetch_rows);
}

/* Temporaries whose live ranges intersect must not share bytes - except the in-place pair of
 * bufferize: equal placement, one dying at the very kernel where the other is born. */
static void check_arena(Check *c) {
    Program *p = c->p;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *a = p->bufs[i];
        if (a->kind != B_TEMP || a->alias || a->first < 0 || !kir_nbytes(a)) continue;
        if (a->offset < 0) return;                  /* bufferize has not run */
        if (a->offset % (p->arena_align ? p->arena_align : 1) ||
            a->offset + (int64_t)kir_nbytes(a) > p->arena_size)
            fail(c, "%%%s placed at %lld outside the arena or misaligned", a->name, (long long)a->offset);
        for (int j = 0; j < i; j++) {
            Buf *b = p->bufs[j];
            if (b->kind != B_TEMP || b->alias || b->first < 0 || !kir_nbytes(b)) continue;
            bool live = a->first <= b->last && b->first <= a->last;
            bool bytes = a->offset < b->offset + (int64_t)kir_nbytes(b) &&
                         b->offset < a->offset + (int64_t)kir_nbytes(a);
            bool inplace = a->offset == b->offset && kir_nbytes(a) == kir_nbytes(b) &&
                           (a->first == b->last || b->first == a->last);
            if (live && bytes && !inplace)
                fail(c, "%%%s and %%%s are live together and overlap in the arena", a->name, b->name);
        }
    }
}

static bool one_element(const Buf *b, bool integer) {
    return kir_numel(b) == 1 && (integer ? !dtype_is_float(b->dtype) && b->dtype != DT_BOOL : b->dtype == DT_BOOL);
}

/* A control kernel: its buffers (kir.h, KernelCtl) and the nesting of the regions. `stack`
 * holds the open KCTL_LOOP/KCTL_IF kernels (depth entries). */
static void check_ctl(Check *c, Kernel **stack, int *depth) {
    Kernel *k = c->k;
    if (k->body || k->nscalars || k->nvars) fail(c, "a control kernel with a body");
    switch (k->ctl) {
    case KCTL_LOOP:
        if (!k->counter || k->counter->dtype != DT_INT64 || k->counter->rank != 0 ||
            param_mode(k, k->counter) != KP_INOUT)
            fail(c, "the loop counter must be an int64 scalar inout parameter");
        if (k->trip && (!one_element(k->trip, true) || param_mode(k, k->trip) != KP_IN))
            fail(c, "the trip count must be a one-element integer input");
        if (k->cond && (!one_element(k->cond, false) || param_mode(k, k->cond) != KP_IN))
            fail(c, "the loop condition must be a one-element bool input");
        /* fallthrough */
    case KCTL_IF:
        if (k->ctl == KCTL_IF && (!k->cond || !one_element(k->cond, false)))
            fail(c, "the condition must be a one-element bool buffer");
        if (*depth >= 64) fail(c, "control regions nested too deep");
        stack[(*depth)++] = k;
        break;
    case KCTL_ELSE:
        if (!*depth || stack[*depth - 1]->ctl != KCTL_IF) fail(c, "else outside an if");
        stack[*depth - 1] = k;
        break;
    case KCTL_END:
        if (!*depth) fail(c, "end outside a region");
        (*depth)--;
        break;
    default: fail(c, "control kind %d", k->ctl);
    }
}

/* A joined kernel (Kernel.joined): after a live computing kernel, both split into the same
 * number of tasks, and independent of every kernel of its run before it. */
static void check_joined(Check *c, int i) {
    Program *p = c->p;
    Kernel *k = p->kernels[i];
    int prev = i - 1;
    while (prev >= 0 && p->kernels[prev]->dead) prev--;
    const Stmt *l = kir_parallel_loop(k), *pl = prev >= 0 ? kir_parallel_loop(p->kernels[prev]) : NULL;
    if (prev < 0 || p->kernels[prev]->ctl || !l || !pl || l->tasks != pl->tasks)
        fail(c, "joined, but not after a kernel split into as many tasks");
    for (int j = prev; j >= 0; j--) {
        const Kernel *m = p->kernels[j];
        if (m->dead) continue;
        if (!kir_independent(m, k)) fail(c, "joined to %s, which touches what it writes or writes what it reads", m->name);
        if (!m->joined) break;
    }
}

void kir_verify(Program *p, const char *after) {
    Check c = {p, NULL, after, NULL, NULL, NULL};
    Kernel *stack[64];
    int depth = 0;
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        c.k = k;
        if (k->id != i) fail(&c, "id %d at position %d", k->id, i);
        if (k->dead) continue;
        check_params(&c);
        if (k->ctl) {
            if (k->joined) fail(&c, "a control kernel joined to a parallel-for");
            check_ctl(&c, stack, &depth);
            continue;
        }
        c.in_scope = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
        c.vreg = ARENA_ARRAY(p->arena, bool, k->nscalars + 1);
        c.vloop = NULL;
        vector_regs(&c, k->body, c.vreg);
        check_stmts(&c, k->body);
        check_vreg_reads(&c, k->body);
        if (k->joined) check_joined(&c, i);
    }
    c.k = NULL;
    if (depth) fail(&c, "region of %s not closed", stack[depth - 1]->name);
    for (int i = 0; i < p->ninputs; i++)
        if (kir_root(p->inputs[i])->kind != B_INPUT) fail(&c, "input %d is not an input buffer", i);
    for (int i = 0; i < p->noutputs; i++)
        if (kir_root(p->outputs[i])->kind != B_OUTPUT) fail(&c, "output %d is not an output buffer", i);
    check_arena(&c);
}
