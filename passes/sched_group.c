/* sched_group.c - grouped convolutions of few output channels a group (issue 16: fast on
 * models nobody tuned for).
 *
 * A grouped conv y[m] = sum over c < Cg, taps of x[m / Mg * Cg + c] * w[m, c, taps] whose
 * groups hold fewer output channels Mg than a vector has lanes (ResNeXt-50's 4 and 8 a group,
 * RegNet's 8, with AVX-512's 16 lanes) cannot block a group's channels around vectors as
 * group_split does for whole-vector groups (passes/schedule.c), and along the width it ran 8
 * accumulators of one vector of pixels with scalar border columns, at 11-37% of the FMA peak
 * (RegNetY-400MF; 7x7 maps fill less than half a vector). Here such a conv joins the
 * depthwise convs (schedule.c's channelwise): its input and output are stored channel-last
 * (channel_last_layouts), its weights packed [Cg, kh, kw, M] (cm), and its output channels
 * are the vector lanes, W / Mg groups side by side in one vector, pixels blocked around
 * them. Lane j of a vector starting at channel m0 (a multiple of Mg) needs input channel
 * (m0 + j) / Mg * Cg + c: the lanes' offsets from lane 0 are constants (j / Mg * Cg), so the
 * backend loads the few elements they span and permutes them in registers
 * (backend/kernel.c, window_load) instead of gathering; the taps of neighbouring pixels
 * share those loads and permutes. The recognition is here; the layout and blocking are the
 * depthwise convs'. */
#include "sched_group.h"
#include "loops.h"

/* v / d * s for constants d > 1, s > 0: d, else 0. */
static int64_t scaled_div(const Expr *e, int v, int64_t s) {
    if (e->kind != E_BIN || e->op != K_MUL || e->args[1]->kind != E_CONST || e->args[1]->i != s) return 0;
    const Expr *d = e->args[0];
    if (d->kind != E_BIN || d->op != K_DIV || d->args[0]->kind != E_VAR || d->args[0]->var != v ||
        d->args[1]->kind != E_CONST || d->args[1]->i <= 1)
        return 0;
    return d->args[1]->i;
}

int64_t group_narrow(const Expr *chan, int m, const Buf *w, int lanes) {
    if (!w || w->rank != 4 || w->dtype != DT_FLOAT || w->dims[1] < 2 || lanes < 2) return 0;
    if (chan->kind != E_BIN || chan->op != K_ADD) return 0;
    for (int i = 0; i < 2; i++) {
        const Expr *c = chan->args[1 - i];
        int64_t mg = scaled_div(chan->args[i], m, w->dims[1]);
        if (mg && c->kind == E_VAR && c->var != m && mg < lanes && lanes % mg == 0 && w->dims[0] % mg == 0)
            return mg;
    }
    return 0;
}

/* Taps along the width unrolled up to this many (a 7x7 conv's too). */
enum { MAX_TAPS_UNROLLED = 7 };

static bool has_loop(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_LOOP || has_loop(s->then) || has_loop(s->els)) return true;
    return false;
}

/* A reduction over the group's input channels c around the taps' rows kh: kh taken outside
 * c, so that the c steps of one row of taps read one input row, which stays in L1 from one c
 * to the next. With c outside, each c step read the three rows of the tile's pixels again:
 * at 256 channels (1 KiB a pixel, 2 KiB at stride 2) those lines fall in 4 of L1's 64 sets,
 * which three rows of a 12-pixel tile overflowed. Reassociates the sums (not --fp-strict). */
static void rows_outer(Program *p, Kernel *k, Stmt *s) {
    Stmt *t = s->body;
    if (p->fp_strict || !t || t->next || t->kind != S_LOOP || !(t->hints & LH_REDUCTION) || !has_loop(t->body) ||
        !const_loop(s) || !const_loop(t))
        return;
    loop_interchange(p, k, s);
}

static void unroll_taps(Program *p, Kernel *k, Stmt **at, bool in_vector) {
    for (; *at; at = &(*at)->next) {
        Stmt *s = *at;
        if (in_vector && s->kind == S_LOOP && (s->hints & LH_REDUCTION)) rows_outer(p, k, s);
        s = *at;
        if (s->kind == S_IF) {
            unroll_taps(p, k, &s->then, in_vector);
            unroll_taps(p, k, &s->els, in_vector);
            continue;
        }
        if (s->kind != S_LOOP) continue;
        if (in_vector && (s->hints & LH_REDUCTION) && !(s->hints & LH_VECTOR) && const_loop(s) && s->step == 1 &&
            trips(s) <= MAX_TAPS_UNROLLED && !has_loop(s->body)) {
            loop_unroll(p, k, at);
            continue;
        }
        unroll_taps(p, k, &s->body, in_vector || (s->hints & LH_VECTOR));
    }
}

void group_unroll_taps(Program *p, Kernel *k) { unroll_taps(p, k, &k->body, false); }

static bool reads_group(const Expr *e, int v, int lanes) {
    if (e->kind == E_BIN && e->op == K_ADD)
        for (int i = 0; i < 2; i++) {
            const Expr *m = e->args[i];
            int64_t mg = m->kind == E_BIN && m->op == K_MUL && m->args[1]->kind == E_CONST ? scaled_div(m, v, m->args[1]->i) : 0;
            if (mg && mg < lanes && lanes % mg == 0 && e->args[1 - i]->kind == E_VAR) return true;
        }
    for (int i = 0; i < e->nargs; i++)
        if (reads_group(e->args[i], v, lanes)) return true;
    return false;
}

static bool list_reads_group(const Stmt *s, int v, int lanes) {
    for (; s; s = s->next)
        if ((s->val && reads_group(s->val, v, lanes)) || list_reads_group(s->body, v, lanes) ||
            list_reads_group(s->then, v, lanes) || list_reads_group(s->els, v, lanes))
            return true;
    return false;
}

/* 14 pixels with 32 registers, 7 with 16: against 12 and 5, a 104-channel conv of 8 a group
 * on 28x28 ran at 51% of the FMA peak instead of 46% (AVX-512; its 26 interior columns as 14
 * + 12), a 128-channel one of 4 a group on 56x56 for AVX2 at 63% instead of 59% (8 pixels:
 * 65%, 10: 60%; onnxcc bench, one thread). */
int64_t group_rows(const Stmt *j, int lanes, int vregs) {
    if (!j || lanes < 2 || !list_reads_group(j->body, j->var, lanes)) return 0;
    return vregs >= 32 ? 14 : 7;
}
