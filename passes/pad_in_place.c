/* pad_in_place.c - a zero-padded copy made without the copy: its input's writers store into
 * the padded buffer's interior, and the copy kernel keeps only the stores of its border.
 *
 * A kernel pass after schedule. The schedule gives a conv that reads padding a padded copy of
 * its input (`pad(%x,...)`, loops.c loop_pad), and an ONNX Pad lowers to the same kind of
 * kernel: every store is xp[i] = x[i - before] or xp[i] = c. Copying costs little on one core
 * (1% of ResNet-18), but with threads the copy reads what both cores just wrote, half of it
 * from the other core's cache, and ran 3-6x slower than on one core (7% of ResNet-18 on two).
 * So where x is a temporary that only whole-tensor loads and stores touch, every load and
 * store of x, in every kernel, becomes one of xp at the index shifted by `before`, and the
 * copy kernel loses the stores that read x: what is left writes the border, with the
 * schedule's vectors. x is then touched by no kernel (bufferize prints it `unused`).
 *
 * Conditions, each kept simple rather than clever:
 *   - the copy: a KC_COPY kernel "Pad" with one input x and one output xp, temporaries of one
 *     dtype and rank, no views of either, every store to xp of a load of x at an offset that
 *     is the same for every store and is a padding (before >= 0, x fits inside xp), or of one
 *     constant;
 *   - one kernel writes x, before the copy (a copy of a copy is left alone: its input has
 *     two writers then, the first copy's border kernel and the interior's writer);
 *   - no control kernel (If, Loop, Scan) lies between the first and the last kernel that
 *     touches x or xp, so that a loop cannot rewrite x after the copy was taken. */
#include <string.h>

#include "loops.h"
#include "pipeline.h"

typedef struct PadCopy {
    Buf *x, *xp;
    int64_t before[MAX_RANK];
    bool have_off, have_fill, ok;
    const Expr *fill;
} PadCopy;

/* The constant o with a == i + o, or false. */
static bool offset_of(const Expr *a, const Expr *i, int64_t *o) {
    if (kx_equal(a, i)) return *o = 0, true;
    if (a->kind != E_BIN || (a->op != K_ADD && a->op != K_SUB)) return false;
    const Expr *c = a->args[1], *v = a->args[0];
    if (a->op == K_ADD && c->kind != E_CONST) c = a->args[0], v = a->args[1];
    if (c->kind != E_CONST || c->type != DT_INDEX || !kx_equal(v, i)) return false;
    *o = a->op == K_SUB ? -c->i : c->i;
    return true;
}

static bool same_const(const Expr *a, const Expr *b) {
    return a->type == b->type && !memcmp(&a->f, &b->f, sizeof a->f) && a->i == b->i;
}

static void match_stmts(PadCopy *pc, const Stmt *s) {
    for (; s && pc->ok; s = s->next) {
        if (s->kind == S_LOOP) {
            match_stmts(pc, s->body);
            continue;
        }
        if (s->kind != S_STORE || s->buf != pc->xp) {
            pc->ok = false;
            return;
        }
        const Expr *v = s->val;
        if (v->kind == E_CONST) {
            if (pc->have_fill && !same_const(pc->fill, v)) pc->ok = false;
            pc->fill = v, pc->have_fill = true;
            continue;
        }
        if (v->kind != E_LOAD || v->buf != pc->x) {
            pc->ok = false;
            return;
        }
        for (int d = 0; d < pc->x->rank; d++) {
            int64_t o;
            if (!offset_of(v->args[d], s->idx[d], &o) || (pc->have_off && pc->before[d] != -o)) {
                pc->ok = false;
                return;
            }
            pc->before[d] = -o;
        }
        pc->have_off = true;
    }
}

/* Whether c is a padded copy (above); fills pc. */
static bool pad_copy(Kernel *c, PadCopy *pc) {
    memset(pc, 0, sizeof *pc);
    if (c->ctl || c->kclass != KC_COPY || strcmp(c->ops, "Pad") || c->nparams != 2) return false;
    for (int i = 0; i < 2; i++) {
        if (c->modes[i] == KP_IN) pc->x = c->params[i];
        if (c->modes[i] == KP_OUT) pc->xp = c->params[i];
    }
    Buf *x = pc->x, *xp = pc->xp;
    if (!x || !xp || x == xp || x->kind != B_TEMP || xp->kind != B_TEMP || x->alias || xp->alias ||
        x->string || xp->string || x->dtype != xp->dtype || x->rank != xp->rank)
        return false;
    pc->ok = true;
    match_stmts(pc, c->body);
    if (!pc->ok || !pc->have_off) return false;
    for (int d = 0; d < x->rank; d++)
        if (pc->before[d] < 0 || x->dims[d] + pc->before[d] > xp->dims[d]) return false;
    return true;
}

static bool has_param(const Kernel *k, const Buf *b, ParamMode *m) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == b) return *m = k->modes[i], true;
    return false;
}

/* Whether the rewrite keeps every kernel's meaning (the conditions above). */
static bool elidable(const Program *p, int ci, const PadCopy *pc) {
    for (int i = 0; i < p->nbufs; i++) {
        const Buf *b = p->bufs[i];
        if (b->alias == pc->x || b->alias == pc->xp || b->dims_of == pc->x || b->dims_of == pc->xp) return false;
    }
    int first = -1, last = -1, writers = 0;
    for (int ki = 0; ki < p->nkernels; ki++) {
        const Kernel *k = p->kernels[ki];
        ParamMode mx = 0, mp = 0;
        bool tx = has_param(k, pc->x, &mx), tp = has_param(k, pc->xp, &mp);
        if (!tx && !tp) continue;
        if (first < 0) first = ki;
        last = ki;
        if (ki == ci) continue;
        if (tx && (mx & KP_OUT) && ki > ci) return false;      /* x written after the copy */
        if (tp && (mp != KP_IN || ki < ci)) return false;       /* xp: the copy's alone */
        if (tx && tp && mx != KP_IN) return false;
        writers += tx && (mx & KP_OUT);
    }
    if (writers != 1) return false;
    for (int ki = first; ki <= last; ki++)
        if (p->kernels[ki]->ctl) return false;
    return true;
}

static void shift_expr(Program *p, Expr *e, const PadCopy *pc) {
    for (int i = 0; i < e->nargs; i++) shift_expr(p, e->args[i], pc);
    if (e->kind == E_LOAD && e->buf == pc->x) {
        e->buf = pc->xp;
        for (int d = 0; d < pc->x->rank; d++) e->args[d] = kx_addc(p, e->args[d], pc->before[d]);
    }
}

static void shift_stmts(Program *p, Stmt *s, const PadCopy *pc) {
    for (; s; s = s->next) {
        if (s->lo) shift_expr(p, s->lo, pc);
        if (s->hi) shift_expr(p, s->hi, pc);
        if (s->cond) shift_expr(p, s->cond, pc);
        if (s->val) shift_expr(p, s->val, pc);
        if (s->kind == S_STORE) {
            for (int d = 0; d < s->buf->rank; d++) shift_expr(p, s->idx[d], pc);
            if (s->buf == pc->x) {
                s->buf = pc->xp;
                for (int d = 0; d < pc->x->rank; d++) s->idx[d] = kx_addc(p, s->idx[d], pc->before[d]);
            }
        }
        shift_stmts(p, s->body, pc);
        shift_stmts(p, s->then, pc);
        shift_stmts(p, s->els, pc);
    }
}

/* The list s without the stores that read x and the loops left empty. */
static Stmt *border_only(Stmt *s, const Buf *x) {
    Stmt *head = NULL, **tail = &head;
    for (Stmt *next; s; s = next) {
        next = s->next;
        if (s->kind == S_LOOP) s->body = border_only(s->body, x);
        if ((s->kind == S_STORE && s->val->kind == E_LOAD && s->val->buf == x) || (s->kind == S_LOOP && !s->body))
            continue;
        s->next = NULL;
        *tail = s;
        tail = &s->next;
    }
    return head;
}

static void drop_param(Kernel *k, int i) {
    for (; i + 1 < k->nparams; i++) k->params[i] = k->params[i + 1], k->modes[i] = k->modes[i + 1];
    k->nparams--;
}

void pad_in_place(Program *p) {
    for (int ci = 0; ci < p->nkernels; ci++) {
        Kernel *c = p->kernels[ci];
        PadCopy pc;
        if (!pad_copy(c, &pc) || !elidable(p, ci, &pc)) continue;
        for (int ki = 0; ki < p->nkernels; ki++) {
            Kernel *k = p->kernels[ki];
            ParamMode m;
            if (k == c || !has_param(k, pc.x, &m)) continue;
            shift_stmts(p, k->body, &pc);
            for (int i = 0; i < k->nparams; i++) {
                if (k->params[i] != pc.x) continue;
                ParamMode mp;
                if (has_param(k, pc.xp, &mp)) drop_param(k, i);     /* both read: one param */
                else k->params[i] = pc.xp;
                break;
            }
            sched_note(p, k, "in_place(%%%s,%%%s)", pc.x->name, pc.xp->name);
        }
        c->body = border_only(c->body, pc.x);
        for (int i = 0; i < c->nparams; i++)
            if (c->params[i] == pc.x) drop_param(c, i);
        sched_note(p, c, "border(%%%s)", pc.xp->name);
    }
}
