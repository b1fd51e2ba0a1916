/* sched_stream.c - constants streamed from memory, prefetched ahead of their loads (issue 16:
 * the ResNets' and VGG's late 3x3 convs).
 *
 * A model's weights are read once an inference: ResNet-18 holds 46 MB of them, more than this
 * core's caches keep from one run to the next, so each conv's weights come from memory. A conv
 * blocked as schedule.c blocks it reads a block of output channels' weights (512 x 9 x 32
 * floats, 590 KB, in ResNet-18's layer4) front to back for its first row of pixels, then from
 * the L2 for the other rows. That first pass runs at the pace of demand misses, which the
 * hardware prefetchers cover only a few lines ahead: a chain of eight 512 -> 512 3x3 convs on
 * 7x7 maps ran each at 36-46% of the FMA peak where one alone (its 9.4 MB then in the L3) ran
 * at 70%. Every contiguous vector load of such a kernel's largest constant also prefetches the
 * line STREAM_AHEAD bytes on (into the L2: the T1 hint, "locality 1"; a non-temporal hint
 * evicted the rows' reuse and ran 3x slower), so that the stream's misses overlap the FMAs:
 * the chain 18.4-20.5 -> 15.4-16.0 ms (onnxruntime 16.3 in the same session), ResNet-18 27.8
 * -> 24.7-25.2 ms, its layer4 convs 2.6-2.9 -> 2.0-2.1 ms. In the rows that read the block
 * from the L2 the prefetches find their lines there and cost a load slot each, one per 64
 * bytes of weights; kernels whose constants fit the L2 many times over (a 64-channel 3x3
 * conv's 147 KB: no gain) or that have few output channels per weight read do not take them.
 * Only for targets with caches and vectors of 32 bytes or more: a microcontroller has no
 * cache to prefetch into. */
#include "sched_stream.h"
#include "loops.h"

enum {
    STREAM_MIN_BYTES = 256 << 10,   /* ResNet-18's 128-channel 3x3 convs (295 KB) gain 6-12% */
    STREAM_AHEAD = 8 << 10,         /* 2, 8 and 32 KB ahead were within noise of each other; 4 KB
                                       was as good on the chain, 512 B too little */
};

/* Does e load b contiguously along vector variable v (lane stride 1 in its last index, the
 * other indices free of v)? */
static bool unit_load(const Expr *e, const Buf *b, int v) {
    if (!e) return false;
    if (e->kind == E_LOAD && e->buf == b && e->nargs && expr_coef(e->args[e->nargs - 1], v) == 1) {
        bool rest = false;
        for (int d = 0; d < e->nargs - 1; d++) rest |= expr_reads_var(e->args[d], v);
        if (!rest) return true;
    }
    for (int i = 0; i < e->nargs; i++)
        if (unit_load(e->args[i], b, v)) return true;
    return false;
}

/* Is b loaded as whole vectors (along vector loop variable v, -1 outside one) inside a
 * reduction loop somewhere in list s? */
static bool streamed(const Stmt *s, const Buf *b, int v, bool in_red) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP) {
            if (streamed(s->body, b, (s->hints & LH_VECTOR) ? s->var : v, in_red || (s->hints & LH_REDUCTION)))
                return true;
        } else if (s->kind == S_IF) {
            if (streamed(s->then, b, v, in_red) || streamed(s->els, b, v, in_red)) return true;
        } else if (in_red && v >= 0 && unit_load(s->val, b, v)) {
            return true;
        }
    }
    return false;
}

void stream_weights(Program *p, Kernel *k) {
    if (p->vector_bytes < 32 || k->dead || k->kclass != KC_CONTRACTION) return;
    Buf *w = NULL;
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = k->params[i];
        if (b->kind == B_CONST && k->modes[i] == KP_IN && (!w || kir_nbytes(b) > kir_nbytes(w))) w = b;
    }
    if (!w || kir_nbytes(w) < STREAM_MIN_BYTES || !streamed(k->body, w, -1, false)) return;
    k->prefetch = w;
    k->prefetch_ahead = STREAM_AHEAD;
    sched_note(p, k, "prefetch(%%%s,%d)", w->name, STREAM_AHEAD);
}
