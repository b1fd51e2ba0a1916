/* bufferize.c - arena planning: a byte offset for every temporary, so that the generated code
 * runs in one caller-provided block of p->arena_size bytes and never allocates.
 *
 * The last kernel pass. A temporary (a B_TEMP root; views share their root's bytes) is live
 * from the first kernel that touches it to the last one, through any view. Temporaries whose
 * live ranges intersect get disjoint bytes; the others may share. Placement is greedy: the
 * largest first, each at the lowest offset (a multiple of p->arena_align) that overlaps no
 * already placed temporary live at the same time - simple, deterministic and close to optimal
 * for the chain-like programs that neural networks are. It is done in three orders (by size,
 * by first kernel, by length of life) and the smallest arena kept: no one order is best for
 * every network (a MobileNetV2's inverted residuals pack better by first kernel).
 *
 * In place: an elementwise kernel whose input temporary dies at that kernel and has the
 * output's size and dtype writes its output over the input (same offset). That is legal
 * because the kernel reads each element at its own loop index and writes the same index right
 * after, so no element is overwritten before it has been read. So does any other kernel that
 * reads such an input only in the stores of its output, at their own index (a conv's fused
 * residual Add). Such pairs (and chains of them) are placed as one group. The backend must not
 * assume out/in parameters never alias.
 *
 * The lower bound (Program.arena_lower_bound): the most bytes of groups live at any one kernel,
 * which no placement can go below; the greedy placement's arena_size is judged against it. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

typedef struct Group {
    Buf *lead;
    int first, last;
    int64_t size, offset;
} Group;

static bool is_temp_root(const Buf *b) { return b->kind == B_TEMP && !b->alias; }

/* A loop region runs its kernels again and again: a temporary touched anywhere in it (a
 * body value, a loop-carried value, an outer value the body reads) must keep its bytes from
 * the loop's first kernel to its last, or the next iteration would find them reused. */
static void widen_to_loops(Program *p) {
    for (int lo = 0; lo < p->nkernels; lo++) {
        if (p->kernels[lo]->ctl != KCTL_LOOP) continue;
        int hi = kir_ctl_match(p, lo);
        for (int ki = lo; ki <= hi; ki++) {
            Kernel *k = p->kernels[ki];
            for (int i = 0; i < k->nparams; i++) {
                Buf *r = kir_root(k->params[i]);
                if (!is_temp_root(r)) continue;
                r->first = MIN(r->first, lo);
                r->last = MAX(r->last, hi);
            }
        }
    }
}

/* A run of joined kernels (Kernel.joined) runs at once, in any order: a temporary touched by
 * one of them keeps its bytes over the whole run. */
static void widen_to_joined(Program *p) {
    for (int lo = 0; lo < p->nkernels; lo++) {
        if (p->kernels[lo]->dead) continue;
        int end = kir_joined_end(p, lo);
        for (int ki = lo; ki < end; ki++) {
            Kernel *k = p->kernels[ki];
            for (int i = 0; i < k->nparams; i++) {
                Buf *r = kir_root(k->params[i]);
                if (!is_temp_root(r) || r->first < 0) continue;
                r->first = MIN(r->first, lo);
                r->last = MAX(r->last, end - 1);
            }
        }
        lo = end - 1;
    }
}

static void live_ranges(Program *p) {
    for (int i = 0; i < p->nbufs; i++) p->bufs[i]->first = p->bufs[i]->last = -1;
    for (int ki = 0; ki < p->nkernels; ki++) {
        Kernel *k = p->kernels[ki];
        for (int i = 0; i < k->nparams; i++) {
            Buf *r = kir_root(k->params[i]);
            if (!is_temp_root(r)) continue;
            if (r->first < 0) r->first = ki;
            r->last = ki;
        }
    }
    widen_to_loops(p);
    widen_to_joined(p);
}

/* ---- in-place pairs ---- */
static bool is_zero(const Expr *e) { return e->kind == E_CONST && e->type == DT_INDEX && !e->i; }

/* The store of an elementwise kernel in its canonical form, or NULL; vars[] its loop index. */
static Stmt *elementwise_store(const Kernel *k, int *vars) {
    int n = 0;
    const Stmt *s = k->body;
    for (; s && s->kind == S_LOOP; s = s->body) {
        if (s->next || s->step != 1 || !is_zero(s->lo) || n == MAX_RANK) return NULL;
        vars[n++] = s->var;
    }
    if (!s || s->kind != S_STORE || s->next || s->buf->rank != n) return NULL;
    for (int d = 0; d < n; d++)
        if (s->idx[d]->kind != E_VAR || s->idx[d]->var != vars[d]) return NULL;
    return (Stmt *)s;
}

/* Every load of storage `root` in e is at the loop index of a buffer shaped like out. */
static bool reads_in_step(const Expr *e, const Buf *root, const Buf *out, const int *vars) {
    if (e->kind == E_LOAD && kir_root(e->buf) == root) {
        if (e->buf->rank != out->rank ||
            memcmp(e->buf->dims, out->dims, sizeof(int64_t) * (size_t)out->rank))
            return false;
        for (int d = 0; d < out->rank; d++) {
            const Expr *ix = e->args[d];
            bool step = (ix->kind == E_VAR && ix->var == vars[d]) || (out->dims[d] == 1 && is_zero(ix));
            if (!step) return false;
        }
        return true;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!reads_in_step(e->args[i], root, out, vars)) return false;
    return true;
}

static int find(int *lead, int i) {
    while (lead[i] != i) i = lead[i] = lead[lead[i]];
    return i;
}

/* ---- in place beyond elementwise kernels ----
 * Any kernel (a conv with a fused residual Add, a requantisation) may write its output over an
 * input that dies there when every load of the input is in the value of a store to the output
 * at that store's own index, through a buffer of the store's shape: each element is read just
 * before the same element is written, and never after. Not where a loop redoes values (a rest
 * grown back into a whole vector reads again what it overwrote). */
static bool expr_reads(const Expr *e, const Buf *root) {
    if (e->kind == E_LOAD && kir_root(e->buf) == root) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads(e->args[i], root)) return true;
    return false;
}

/* Every load of `root` in e at index idx of a buffer shaped like out. */
static bool reads_at(const Expr *e, const Buf *root, const Buf *out, Expr *const *idx) {
    if (e->kind == E_LOAD && kir_root(e->buf) == root) {
        if (e->buf->rank != out->rank || memcmp(e->buf->dims, out->dims, sizeof(int64_t) * (size_t)out->rank))
            return false;
        for (int d = 0; d < out->rank; d++)      /* a dimension of 1: 0 whatever is written */
            if (out->dims[d] != 1 && !kx_equal(e->args[d], idx[d])) return false;
        return true;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!reads_at(e->args[i], root, out, idx)) return false;
    return true;
}

/* Whether, in s, `in` is read only by stores to `out` at their own index (above). */
static bool overwrites(const Stmt *s, const Buf *in, const Buf *out) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && ((s->hints & LH_REDO) || expr_reads(s->lo, in) || expr_reads(s->hi, in))) return false;
        if (s->kind == S_SET && expr_reads(s->val, in)) return false;
        if (s->kind == S_IF && expr_reads(s->cond, in)) return false;
        if (s->kind == S_STORE) {
            for (int d = 0; d < s->buf->rank; d++)
                if (expr_reads(s->idx[d], in)) return false;
            if (kir_root(s->buf) == out ? !reads_at(s->val, in, s->buf, s->idx) : expr_reads(s->val, in)) return false;
        }
        if (!overwrites(s->body, in, out) || !overwrites(s->then, in, out) || !overwrites(s->els, in, out))
            return false;
    }
    return true;
}

/* The one root temporary kernel k stores, or NULL. */
static Buf *only_output(const Kernel *k) {
    Buf *o = NULL;
    for (int i = 0; i < k->nparams; i++) {
        if (!(k->modes[i] & KP_OUT)) continue;
        if (o && kir_root(k->params[i]) != o) return NULL;
        o = kir_root(k->params[i]);
    }
    return o;
}

/* Joins each in-place output to the group of the input it overwrites. */
static void inplace_groups(Program *p, int *lead, int *glast) {
    int vars[MAX_RANK];
    for (int ki = 0; ki < p->nkernels; ki++) {
        Kernel *k = p->kernels[ki];
        if (k->ctl) continue;
        Stmt *st = k->kclass == KC_ELEMENTWISE ? elementwise_store(k, vars) : NULL;
        Buf *o = st ? kir_root(st->buf) : only_output(k);
        if (!o || !is_temp_root(o) || o->first != ki || find(lead, o->id) != o->id) continue;
        for (int i = 0; i < k->nparams; i++) {
            Buf *in = kir_root(k->params[i]);
            if (k->modes[i] != KP_IN || !is_temp_root(in) || in == o) continue;
            int g = find(lead, in->id);
            if (in->dtype != o->dtype || kir_nbytes(in) != kir_nbytes(o) || glast[g] != ki ||
                !(st ? reads_in_step(st->val, in, st->buf, vars) : overwrites(k->body, in, o)))
                continue;
            lead[o->id] = g;
            glast[g] = o->last;
            break;
        }
    }
}

/* The least arena any placement can have: the most bytes of groups live at one kernel (the
 * first such kernel into *peak). */
static int64_t lower_bound(const Group *gs, int ng, int nkernels, int *peak) {
    int64_t most = 0;
    *peak = -1;
    for (int t = 0; t < nkernels; t++) {
        int64_t live = 0;
        for (int i = 0; i < ng; i++)
            if (gs[i].first <= t && t <= gs[i].last) live += gs[i].size;
        if (live > most) most = live, *peak = t;
    }
    return most;
}

/* ---- placement ---- */
static int by_size(const void *a, const void *b) {
    const Group *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->lead->id - y->lead->id;
}

/* Other orders the placement tries: by start (then size), by lifetime length (then size). */
static int by_first(const void *a, const void *b) {
    const Group *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return by_size(a, b);
}

static int by_span(const void *a, const void *b) {
    const Group *x = a, *y = b;
    int sx = x->last - x->first, sy = y->last - y->first;
    if (sx != sy) return sx > sy ? -1 : 1;
    return by_size(a, b);
}

static int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/* Lowest aligned offset for g clear of every placed group live at the same time. */
static int64_t first_fit(const Group *gs, int nplaced, const Group *g, int64_t align) {
    int64_t off = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < nplaced; i++) {
            const Group *h = &gs[i];
            if (h->first > g->last || g->first > h->last) continue;
            if (off < h->offset + h->size && h->offset < off + g->size) {
                off = align_up(h->offset + h->size, align);
                moved = true;
            }
        }
    }
    return off;
}

void bufferize(Program *p) {
    int64_t align = p->arena_align > 0 ? p->arena_align : 1;
    live_ranges(p);
    int *lead = calloc((size_t)p->nbufs + 1, sizeof *lead);
    int *glast = calloc((size_t)p->nbufs + 1, sizeof *glast);
    Group *gs = calloc((size_t)p->nbufs + 1, sizeof *gs);
    if (!lead || !glast || !gs) die("out of memory");
    for (int i = 0; i < p->nbufs; i++) { lead[i] = i; glast[i] = p->bufs[i]->last; }
    inplace_groups(p, lead, glast);

    int ng = 0;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (!is_temp_root(b)) continue;
        b->offset = 0;                                  /* unused or empty: no space */
        if (find(lead, i) != i || b->first < 0 || !kir_nbytes(b)) continue;
        gs[ng++] = (Group){b, b->first, glast[i], (int64_t)kir_nbytes(b), 0};
    }
    qsort(gs, (size_t)ng, sizeof *gs, by_size);
    p->arena_lower_bound = lower_bound(gs, ng, p->nkernels, &p->arena_peak);
    /* first fit in each order; the smallest arena wins (the first order on ties) */
    int (*const orders[])(const void *, const void *) = {by_size, by_first, by_span};
    int best = 0;
    int64_t best_size = INT64_MAX;
    for (int o = 0; o <= COUNTOF(orders); o++) {
        int use = o < COUNTOF(orders) ? o : best;     /* the last round redoes the best */
        qsort(gs, (size_t)ng, sizeof *gs, orders[use]);
        p->arena_size = 0;
        for (int i = 0; i < ng; i++) {
            gs[i].offset = first_fit(gs, i, &gs[i], align);
            p->arena_size = MAX(p->arena_size, align_up(gs[i].offset + gs[i].size, align));
        }
        if (o < COUNTOF(orders) && p->arena_size < best_size) best_size = p->arena_size, best = o;
    }
    /* Members of a group take their leader's place. */
    for (int i = 0; i < ng; i++) gs[i].lead->offset = gs[i].offset;
    for (int i = 0; i < p->nbufs; i++) {
        Buf *b = p->bufs[i];
        if (is_temp_root(b) && find(lead, i) != i) b->offset = p->bufs[find(lead, i)]->offset;
    }
    free(lead);
    free(glast);
    free(gs);
}
