/* pad_in_place.c - a zero-padded copy made without the copy: its input's writers store into
 * the padded buffer's interior, and the copy kernel keeps only the stores of its border; and a
 * Concat likewise, each input written into its region of the output (below).
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
 *     dtype and rank, no views of either (but views of x that view_shifts maps into xp), every
 *     store to xp of a load of x at an offset that is the same for every store and is a
 *     padding (before >= 0, x fits inside xp), or of one constant;
 *   - kernels write x only before the copy; several may (a Concat whose inputs went in
 *     place is written by their writers, each into its region: a U-Net decoder's Resize and
 *     skip conv; a copy of a copy, by the first copy's border kernel and the interior's
 *     writer). Every store to x becomes one to xp, so xp holds what x held when the copy ran
 *     (a bilinear U-Net's four Concats before 3x3 convs: padded copies of 0.2-1.8 ms, 2.9 ms of
 *     96 in all at one thread, Xeon, became border kernels of 4-20 us);
 *   - no control kernel (If, Loop, Scan) lies between the first and the last kernel that
 *     touches x or xp, so that a loop cannot rewrite x after the copy was taken.
 *
 * A Concat is the same kind of copy with several inputs, each stored at its own offset along
 * the concatenated dim (cat[i] = x_j[i - before_j]): each input that meets the conditions
 * above is written by its writer into its region of the output, and the Concat keeps the
 * stores of the others (none left: the kernel is dropped). SqueezeNet's fire modules, Inception
 * and GoogLeNet blocks concatenate conv outputs this way: their Concat kernels ran at 20-40
 * GB/s, 7% of SqueezeNet 1.0's time on one thread. A value read by several Concats goes in
 * place into the first; the later ones copy it from there (DenseNet's Concats are fused with
 * the BatchNormalization and Relu after them, generic kernels this pass leaves alone). A
 * writer storing through a view of x that keeps the last dim (a 1x1 conv's coalesced pixels)
 * stores through a view of the output (view_shifts). Views of a Concat's output are read
 * after it as before. In a program cut in row bands only Concats along the last dim go
 * (pad_copy). */
#include <string.h>

#include "loops.h"
#include "pipeline.h"

enum { MAX_PARTS = 64 };

/* A copy kernel's inputs (a Pad's one, a Concat's several), each at one offset into xp. */
typedef struct Part {
    Buf *x;
    int64_t before[MAX_RANK];
    bool ok, in_place;
} Part;

typedef struct PadCopy {
    Buf *xp;
    Part parts[MAX_PARTS];
    int nparts;
    bool have_fill, ok, concat;
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
        if (v->kind != E_LOAD || v->buf == pc->xp || v->buf->rank != pc->xp->rank) {
            pc->ok = false;
            return;
        }
        Part *pt = NULL;
        for (int j = 0; j < pc->nparts; j++)
            if (pc->parts[j].x == v->buf) pt = &pc->parts[j];
        bool seen = pt != NULL;
        if (!pt) {
            if (pc->nparts == MAX_PARTS) {
                pc->ok = false;
                return;
            }
            pt = &pc->parts[pc->nparts++];
            *pt = (Part){v->buf, {0}, true, false};
        }
        for (int d = 0; d < pt->x->rank; d++) {
            int64_t o;
            /* the load shifted (a Pad's x[i - before]) or the store (a Concat's cat[i + off]) */
            bool at = offset_of(v->args[d], s->idx[d], &o);
            if (!at && offset_of(s->idx[d], v->args[d], &o)) at = true, o = -o;
            if (!at || (seen && pt->before[d] != -o)) {
                pt->ok = false;     /* read at two offsets (a value concatenated twice) */
                break;
            }
            pt->before[d] = -o;
        }
    }
}

/* Whether part x of the copy into xp is a value that can go in place: a temporary of xp's
 * type and rank, no view, lying inside xp at its offset. */
static bool part_fits(const Buf *xp, const Part *pt) {
    const Buf *x = pt->x;
    if (!pt->ok || x->kind != B_TEMP || x->alias || x->string || x->nibbles || x->dtype != xp->dtype)
        return false;
    for (int d = 0; d < x->rank; d++)
        if (pt->before[d] < 0 || x->dims[d] + pt->before[d] > xp->dims[d]) return false;
    return true;
}

/* Whether c is a padded copy or a Concat (above); fills pc's parts. */
static bool pad_copy(const Program *p, Kernel *c, PadCopy *pc) {
    memset(pc, 0, sizeof *pc);
    bool pad = !strcmp(c->ops, "Pad"), concat = !strcmp(c->ops, "Concat");
    if (c->ctl || c->kclass != KC_COPY || !(pad || concat) || c->nparams < 2) return false;
    int nout = 0;
    for (int i = 0; i < c->nparams; i++)
        if (c->modes[i] != KP_IN) pc->xp = c->params[i], nout++;
    Buf *xp = pc->xp;
    if (nout != 1 || xp->kind != B_TEMP || xp->alias || xp->string || xp->nibbles) return false;
    pc->ok = true;
    pc->concat = concat;
    match_stmts(pc, c->body);
    if (!pc->ok || !pc->nparts || (pad && (pc->nparts != 1 || c->nparams != 2)) || (concat && pc->have_fill))
        return false;
    /* in a program cut in row bands (Program.banded), a Concat along the last dim only
     * (channels of NHWC maps): a join along the rows (band_rows' carried rows and new band of
     * a ring buffer) would keep the joined map live from its first part's writer on, over the
     * buffers the bands were cut to keep small */
    for (int j = 0; j < pc->nparts && concat && p->banded; j++)
        for (int d = 0; d < xp->rank - 1; d++)
            if (pc->parts[j].before[d]) return false;
    for (int j = 0; j < pc->nparts; j++) pc->parts[j].ok = part_fits(xp, &pc->parts[j]);
    return true;
}

static bool has_param(const Kernel *k, const Buf *b, ParamMode *m) {
    int i = kir_param_index(k, b);
    if (i >= 0) *m = k->modes[i];
    return i >= 0;
}

/* Whether view v of part x can become a view of xp: x lies in xp at an offset along the last
 * dim only, x and xp alike in the other dims, and v keeps the last dim (a 1x1 conv's
 * coalesced pixels, [N, H*W, C] of NHWC [N, H, W, C]); then v[..., c] is xp's view of v's
 * leading dims at [..., c + offset]. */
static bool view_shifts(const Buf *xp, const Part *pt, const Buf *v) {
    const Buf *x = pt->x;
    int r = x->rank;
    if (v->alias != x || v->rank < 1 || v->dims[v->rank - 1] != x->dims[r - 1] || v->dims_of) return false;
    for (int d = 0; d < r - 1; d++)
        if (pt->before[d] || x->dims[d] != xp->dims[d]) return false;
    return true;
}

/* Kernel k's mode on x or on a view of it. */
static bool touches_x(const Kernel *k, const Buf *x, ParamMode *m) {
    bool t = false;
    *m = 0;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == x || k->params[i]->alias == x) t = true, *m |= k->modes[i];
    return t;
}

/* Whether part pt can go in place keeping every kernel's meaning (the conditions above). */
static bool elidable(const Program *p, int ci, const PadCopy *pc, const Part *pt) {
    const Buf *x = pt->x;
    for (int i = 0; i < p->nbufs; i++) {
        const Buf *b = p->bufs[i];
        /* views of a Concat's output are read after it as before (the same memory); a padded
         * copy with views is left alone (band_rows' carried rows) */
        if ((b->alias == x && !view_shifts(pc->xp, pt, b)) || (b->alias == pc->xp && !pc->concat) ||
            b->dims_of == x || b->dims_of == pc->xp)
            return false;
        if (b->alias && b->alias->alias == x) return false;     /* a view of a view */
    }
    int first = -1, last = -1, writers = 0;
    for (int ki = 0; ki < p->nkernels; ki++) {
        const Kernel *k = p->kernels[ki];
        ParamMode mx = 0, mp = 0;
        bool tx = touches_x(k, x, &mx), tp = has_param(k, pc->xp, &mp);
        if (!tx && !tp) continue;
        if (first < 0) first = ki;
        last = ki;
        if (ki == ci) continue;
        if (tx && (mx & KP_OUT) && ki > ci) return false;      /* x written after the copy */
        if (tp && (mp != KP_IN || ki < ci)) return false;       /* xp: the copy's alone */
        if (tx && tp && mx != KP_IN) return false;
        writers += tx && (mx & KP_OUT);
    }
    if (writers < 1) return false;
    for (int ki = first; ki <= last; ki++)
        if (p->kernels[ki]->ctl) return false;
    return true;
}

/* Accesses of `from` made accesses of `to`, indices shifted by `before` (to's rank = from's). */
typedef struct Shift {
    Buf *from, *to;
    int64_t before[MAX_RANK];
} Shift;

static void shift_expr(Program *p, Expr *e, const Shift *sh) {
    for (int i = 0; i < e->nargs; i++) shift_expr(p, e->args[i], sh);
    if (e->kind == E_LOAD && e->buf == sh->from) {
        e->buf = sh->to;
        for (int d = 0; d < sh->from->rank; d++) e->args[d] = kx_addc(p, e->args[d], sh->before[d]);
    }
}

static void shift_stmts(Program *p, Stmt *s, const Shift *sh) {
    for (; s; s = s->next) {
        if (s->lo) shift_expr(p, s->lo, sh);
        if (s->hi) shift_expr(p, s->hi, sh);
        if (s->cond) shift_expr(p, s->cond, sh);
        if (s->val) shift_expr(p, s->val, sh);
        if (s->kind == S_STORE) {
            for (int d = 0; d < s->buf->rank; d++) shift_expr(p, s->idx[d], sh);
            if (s->buf == sh->from) {
                s->buf = sh->to;
                for (int d = 0; d < sh->from->rank; d++) s->idx[d] = kx_addc(p, s->idx[d], sh->before[d]);
            }
        }
        shift_stmts(p, s->body, sh);
        shift_stmts(p, s->then, sh);
        shift_stmts(p, s->els, sh);
    }
}

static bool part_in_place(const PadCopy *pc, const Buf *x) {
    for (int j = 0; j < pc->nparts; j++)
        if (pc->parts[j].x == x) return pc->parts[j].in_place;
    return false;
}

/* The list s without the stores that read a part gone in place and the loops left empty. */
static Stmt *border_only(Stmt *s, const PadCopy *pc) {
    Stmt *head = NULL, **tail = &head;
    for (Stmt *next; s; s = next) {
        next = s->next;
        if (s->kind == S_LOOP) s->body = border_only(s->body, pc);
        if ((s->kind == S_STORE && s->val->kind == E_LOAD && part_in_place(pc, s->val->buf)) ||
            (s->kind == S_LOOP && !s->body))
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

/* Every access of from, in every kernel but the copy c, made one of sh->to (x's writer then
 * stores into xp, its other readers read there). */
static void shift_kernels(Program *p, Kernel *c, const Shift *sh) {
    for (int ki = 0; ki < p->nkernels; ki++) {
        Kernel *k = p->kernels[ki];
        ParamMode m;
        if (k == c || !has_param(k, sh->from, &m)) continue;
        shift_stmts(p, k->body, sh);
        for (int i = 0; i < k->nparams; i++) {
            if (k->params[i] != sh->from) continue;
            ParamMode mt;
            if (has_param(k, sh->to, &mt)) {            /* both touched: one param */
                for (int j = 0; j < k->nparams; j++)
                    if (k->params[j] == sh->to) k->modes[j] |= k->modes[i];
                drop_param(k, i);
            } else {
                k->params[i] = sh->to;
            }
            break;
        }
        sched_note(p, k, "in_place(%%%s,%%%s)", sh->from->name, sh->to->name);
    }
}

/* Part pt into its place in xp, its views (view_shifts) into views of xp. */
static void part_to_place(Program *p, Kernel *c, Buf *xp, const Part *pt) {
    int r = pt->x->rank, nb = p->nbufs;
    for (int i = 0; i < nb; i++) {
        Buf *v = p->bufs[i];
        if (v->alias != pt->x) continue;
        int64_t dims[MAX_RANK];
        memcpy(dims, v->dims, sizeof dims);
        dims[v->rank - 1] = xp->dims[r - 1];
        Shift sh = {v, kir_view_new(p, xp, arena_printf(p->arena, "%s.in", v->name), v->rank, dims), {0}};
        sh.before[v->rank - 1] = pt->before[r - 1];
        shift_kernels(p, c, &sh);
    }
    Shift sh = {pt->x, xp, {0}};
    memcpy(sh.before, pt->before, sizeof sh.before);
    shift_kernels(p, c, &sh);
}

void pad_in_place(Program *p) {
    kir_unjoin(p);
    bool dropped = false;
    for (int ci = 0; ci < p->nkernels; ci++) {
        Kernel *c = p->kernels[ci];
        PadCopy pc;
        if (!pad_copy(p, c, &pc)) continue;
        /* which parts go, all decided on the program before any moves (a moved part's
         * writer then writes xp before the copy, which elidable would refuse for the next) */
        int moved = 0;
        for (int j = 0; j < pc.nparts; j++)
            moved += pc.parts[j].in_place = pc.parts[j].ok && elidable(p, ci, &pc, &pc.parts[j]);
        if (!moved) continue;
        for (int j = 0; j < pc.nparts; j++)
            if (pc.parts[j].in_place) part_to_place(p, c, pc.xp, &pc.parts[j]);
        c->body = border_only(c->body, &pc);
        for (int i = c->nparams - 1; i >= 0; i--)
            if (c->modes[i] == KP_IN && part_in_place(&pc, c->params[i])) drop_param(c, i);
        if (c->body) {
            sched_note(p, c, "border(%%%s)", pc.xp->name);
        } else {
            c->dead = true;         /* a Concat all of whose inputs went in place */
            dropped = true;
        }
    }
    if (dropped) kir_compact(p);
}
