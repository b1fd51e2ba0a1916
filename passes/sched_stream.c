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
 * conv's 147 KB: no gain), that have few output channels per weight read, or whose rows
 * reuse each block so often that its first pass is a small share of the time (a 3x3 conv on
 * a 28x28 map or larger) do not take them.
 * Only for targets with caches and vectors of 32 bytes or more: a microcontroller has no
 * cache to prefetch into. */
#include "sched_stream.h"
#include "loops.h"

enum {
    STREAM_MODEL_BYTES = 2 << 20,   /* constants that stay in this Xeon's 2 MB L2 from one run to
                                       the next: the bench's 940 KB mlp ran 6.1 -> 10.1 us with
                                       prefetches, its LSTM 143 -> 212 */
    STREAM_MIN_REUSE = 2,           /* multiply-adds per weight: a matrix-vector product reads
                                       each weight once, at a load and a prefetch per FMA */
    STREAM_MAX_REUSE = 400,         /* and at most this many: a block's first pass from memory
                                       takes ~24 / reuse of its FMA time (4 B at 12.7 GB/s
                                       against `reuse` multiply-adds at ~70% of the peak), which
                                       beyond ~400 is less than the prefetches cost in the rows
                                       that find the block in the L2. VGG-16's 3x3 convs, one
                                       thread, with against without: on 56x56 maps (3136) 3-7%
                                       slower, on 28x28 (784) 0-5% slower, on 14x14 (196)
                                       13-15% faster; a chain of 256 -> 256 convs on 56x56,
                                       NHWC: 24.3 -> 22.9 ms a conv (onnxruntime 21.4) */
    STREAM_MIN_BYTES = 256 << 10,   /* a 64-channel 3x3 conv's 147 KB: no gain */
    STREAM_AHEAD = 8 << 10,         /* 2, 8 and 32 KB ahead were within noise of each other; 4 KB
                                       was as good on the chain, 512 B too little */
};

enum { MAX_PATH = 32 };

/* The first load of b as whole vectors (along vector loop variable v, -1 outside one) inside
 * a reduction loop in list s, and the loops around it, outermost first (path[0..*n) on
 * return; *n the loops around s on entry), or NULL. */
static const Expr *streamed(const Stmt *s, const Buf *b, int v, bool in_red, const Stmt **path, int *n) {
    for (; s; s = s->next) {
        const Expr *l = NULL;
        if (s->kind == S_LOOP && *n < MAX_PATH) {
            path[(*n)++] = s;
            l = streamed(s->body, b, (s->hints & LH_VECTOR) ? s->var : v, in_red || (s->hints & LH_REDUCTION), path, n);
            if (!l) (*n)--;
        } else if (s->kind == S_IF) {
            l = streamed(s->then, b, v, in_red, path, n);
            if (!l) l = streamed(s->els, b, v, in_red, path, n);
        } else if (in_red && v >= 0) {
            l = expr_lane_load(s->val, b, v, 1);
        }
        if (l) return l;
    }
    return NULL;
}

/* The rows that reread each block of w, the block being w's first index (a conv's block of
 * output channels, a matmul's panel): the loops after the outermost one whose variable that
 * index reads, before the vector and reduction loops, whose variables no index of the load
 * reads. k->prefetch_row numbers their iterations (r = 0..R-1, the last loop fastest), so that
 * row r prefetches slice r of the next block: the block's R passes each fetch 1/R of the next
 * one, where the stream-ahead prefetches alone fetch it all in its first pass at the pace of
 * one core's memory bandwidth (12.7 GB/s streamed here; a 590 KB block in ~50 us, against
 * ~10 us of FMAs a row). Nothing when the blocks are not outermost (a loop inside the rows
 * over more than one block) or there is one block. */
static void spread_rows(Program *p, Kernel *k, const Stmt **path, int n, const Expr *ld) {
    int first = 0;
    while (first < n && !expr_reads_var(ld->args[0], path[first]->var)) first++;
    if (first == n || !const_loop(path[first]) || trips(path[first]) < 2) return;
    Expr *row = NULL;
    int64_t rows = 1;
    for (int i = first + 1; i < n && !(path[i]->hints & (LH_VECTOR | LH_REDUCTION)); i++) {
        const Stmt *l = path[i];
        bool reads = false;
        for (int d = 0; d < ld->nargs; d++) reads |= expr_reads_var(ld->args[d], l->var);
        if (!const_loop(l)) return;
        if (trips(l) < 2) continue;
        if (reads) return;
        Expr *r = kx_addc(p, kx_var(p, l->var), -l->lo->i);
        if (l->step > 1) r = kx_bin(p, K_DIV, r, kx_index(p, l->step));
        row = row ? kx_add(p, kx_mul(p, row, trips(l)), r) : r;
        rows *= trips(l);
    }
    if (!row || rows < 2) return;
    k->prefetch_row = row;
    k->prefetch_rows = rows;
}

/* The bytes of the constants that live kernels read. */
static int64_t model_constants(const Program *p) {
    bool *seen = ARENA_ARRAY(p->arena, bool, p->nbufs);
    int64_t n = 0;
    for (int i = 0; i < p->nkernels; i++) {
        const Kernel *k = p->kernels[i];
        for (int j = 0; j < k->nparams && !k->dead; j++) {
            Buf *b = kir_root(k->params[j]);
            if (b->kind == B_CONST && b->id >= 0 && b->id < p->nbufs && !seen[b->id])
                seen[b->id] = true, n += (int64_t)kir_nbytes(b);
        }
    }
    return n;
}

static void stream_kernel(Program *p, int ki, int64_t model_bytes) {
    Kernel *k = p->kernels[ki];
    if (k->dead || k->kclass != KC_CONTRACTION) return;
    Buf *w = NULL;
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = k->params[i];
        if (b->kind == B_CONST && k->modes[i] == KP_IN && (!w || kir_nbytes(b) > kir_nbytes(w))) w = b;
    }
    if (!w || kir_nbytes(w) < STREAM_MIN_BYTES) return;
    int64_t macs, bytes;
    kir_kernel_cost(k, &macs, &bytes);
    /* A kernel run many times an inference (a recurrence's product, passes/ops/rnn.c's stepped
     * form: each weight once a step) reads its weights from the L2 from the second run on when
     * they fit there, and the prefetches only cost: a GRU's 768 KB 1.16x and a bidirectional
     * LSTM's 1 MB 1.03x faster without them, an LSTM's 4 MB 1.05x with them (one thread, Zen 4). */
    int64_t runs = kir_runs(p, ki);
    if (runs > 1 && (int64_t)kir_nbytes(w) <= STREAM_MODEL_BYTES) return;
    macs = sat_mul(macs, runs);
    if (macs < STREAM_MIN_REUSE * (int64_t)kir_numel(w) || macs > STREAM_MAX_REUSE * (int64_t)kir_numel(w) ||
        model_bytes <= STREAM_MODEL_BYTES)
        return;
    const Stmt *path[MAX_PATH];
    int n = 0;
    const Expr *ld = streamed(k->body, w, -1, false, path, &n);
    if (!ld) return;
    k->prefetch = w;
    k->prefetch_ahead = STREAM_AHEAD;
    spread_rows(p, k, path, n, ld);
    sched_note(p, k, "prefetch(%%%s,%d%s)", w->name, STREAM_AHEAD, k->prefetch_row ? ",rows" : "");
}

void stream_weights(Program *p) {
    if (p->vector_bytes < 32) return;
    int64_t bytes = model_constants(p);
    for (int i = 0; i < p->nkernels; i++) stream_kernel(p, i, bytes);
}
