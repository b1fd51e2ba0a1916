/* dead_taps.c - graph pass: drop the taps of a Conv that only ever read padding.
 *
 * Along a spatial dim of input size `in`, stride s, dilation d and begin padding pb, tap t of
 * output q reads input q*s + t*d - pb. A tap is dead when that position lies outside [0, in)
 * for every output q: it multiplies only the zeros of the padding. DeepLabV3's ASPP convs
 * (3x3, dilations 12, 24 and 36 on a 14x14 map) are the case: at dilation 24 and 36 only the
 * centre tap ever reads the image, so they are 1x1 convs that computed nine times the work on
 * a padded copy 4-6x the size of the map (two thirds of the model's time on AVX-512).
 *
 * The dead taps at either end of a dim are cut off: the weights are sliced to the live ones
 * [a, b], the begin padding becomes pb - a*d and the end padding what keeps the output size,
 * and a dim left with one tap gets dilation 1 (so a conv whose dims all end with one tap, no
 * padding and stride 1 is an ordinary 1x1 conv for the schedule). Dead taps between live ones
 * (a stride larger than the input) stay. The result is the same sum without terms that are
 * exactly zero (lowering's guarded taps never read the padding either, so a weight that is
 * not finite gives what it gives at -O0, and loop_pad pads only finite weights). Float Convs with constant weights and
 * explicit padding (auto_pad NOTSET) only; anything else is left for lowering as it is.
 * Taps live for some outputs only split the conv into regions or a sum of taps (below). */
#include <string.h>

#include "pipeline.h"

enum { MAX_SP = MAX_RANK - 2 };


/* The end padding that gives `out` outputs with begin padding nb and k taps (*ne; NULL: only
 * asked whether there is one): the least that reaches the last output's window, when that
 * is >= 0 and the output size formula gives out with it. */
static bool conv_pads(int64_t in, int64_t out, int64_t s, int64_t d, int64_t nb, int64_t k, int64_t *ne) {
    int64_t ext = (k - 1) * d + 1, e = MAX(0, (out - 1) * s + ext - in - nb);
    if (nb < 0 || in + nb + e - ext < 0 || (in + nb + e - ext) / s + 1 != out) return false;
    if (ne) *ne = e;
    return true;
}

/* w [M, C, k...] with spatial dim i cut to taps [lo[i], hi[i]], a new constant "<w>_<tag>". */
static Value *slice_taps(Graph *g, const Value *w, const int64_t *lo, const int64_t *hi, const char *tag) {
    int nsp = w->rank - 2;
    int64_t dims[MAX_RANK], inner = 1;
    dims[0] = w->dims[0], dims[1] = w->dims[1];
    for (int i = 0; i < nsp; i++) inner *= dims[2 + i] = hi[i] - lo[i] + 1;
    Value *nw = ir_const_new(g, arena_printf(g->arena, "%s_%s", w->name, tag), DT_FLOAT, w->rank, dims, NULL);
    float *o = nw->data;
    const float *f = w->data;
    for (int64_t e = 0, n = ir_numel(nw); e < n; e++) {
        /* element e of the new weights: the same [m, c] block, taps shifted by lo */
        int64_t r = e % inner, src = 0, mul = 1;
        for (int i = nsp - 1; i >= 0; i--) {
            src += (r % dims[2 + i] + lo[i]) * mul;
            r /= dims[2 + i];
            mul *= w->dims[2 + i];
        }
        o[e] = f[e / inner * mul + src];
    }
    return nw;
}

/* A Conv's spatial geometry, read as lowering reads it; false for anything this pass leaves
 * alone (not float, run-time weights, auto_pad, odd or huge numbers: lowering says what is
 * wrong with those). */
typedef struct Geom {
    int nsp;
    int64_t k[MAX_SP], in[MAX_SP], out[MAX_SP], s[MAX_SP], d[MAX_SP], pb[MAX_SP];
} Geom;

static bool geometry(const Node *n, Geom *G) {
    const Value *x = n->in[0], *w = n->in[1], *y = n->out[0];
    if (x->dtype != DT_FLOAT || w->dtype != DT_FLOAT || !w->data || x->rank < 3 || x->rank != w->rank ||
        y->rank != x->rank || x->rank - 2 > MAX_SP)
        return false;
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "")) return false;
    int nsp = G->nsp = x->rank - 2;
    const int64_t *st, *dl, *pd, *ks;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd), nks = ir_attr_ints(n, "kernel_shape", &ks);
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp) || (nks && nks != nsp)) return false;
    for (int i = 0; i < nsp; i++) {
        int64_t k = G->k[i] = w->dims[2 + i], in = G->in[i] = x->dims[2 + i], out = G->out[i] = y->dims[2 + i];
        int64_t s = G->s[i] = nst ? st[i] : 1, d = G->d[i] = ndl ? dl[i] : 1;
        int64_t pb = G->pb[i] = npd ? pd[i] : 0, pe = npd ? pd[nsp + i] : 0;
        if ((nks && ks[i] != k) || k < 1 || in < 1 || out < 1 || s < 1 || d < 1 || pb < 0 || pe < 0 ||
            MAX(MAX(k, in), MAX(MAX(s, d), MAX(pb, pe))) > (INT64_C(1) << 30))
            return false;
    }
    return true;
}

/* The outputs q of dim i whose tap t reads the input (0 <= q*s + t*d - pb < in): [*L, *R],
 * empty when *L > *R. */
static void tap_outputs(const Geom *G, int i, int64_t t, int64_t *L, int64_t *R) {
    int64_t first = t * G->d[i] - G->pb[i], last = G->in[i] - 1 - first;
    *L = first >= 0 ? 0 : (-first + G->s[i] - 1) / G->s[i];
    *R = last < 0 ? -1 : MIN(last / G->s[i], G->out[i] - 1);
}

static bool tap_live(const Geom *G, int i, int64_t t) {
    int64_t L, R;
    tap_outputs(G, i, t, &L, &R);
    return L <= R;
}

static void cut(Graph *g, Node *n) {
    Geom G;
    if (!geometry(n, &G)) return;
    const Value *w = n->in[1];
    int nsp = G.nsp;
    int64_t lo[MAX_SP], hi[MAX_SP];
    bool any = false;
    for (int i = 0; i < nsp; i++) {
        int64_t k = G.k[i];
        lo[i] = 0, hi[i] = k - 1;
        while (lo[i] < k && !tap_live(&G, i, lo[i])) lo[i]++;
        if (lo[i] == k) return;     /* no tap reads the input: leave it (the bias alone) */
        while (!tap_live(&G, i, hi[i])) hi[i]--;
        if (!conv_pads(G.in[i], G.out[i], G.s[i], G.d[i], G.pb[i] - lo[i] * G.d[i], hi[i] - lo[i] + 1, NULL))
            lo[i] = 0, hi[i] = k - 1;   /* would need a crop: keep the dim */
        any |= lo[i] > 0 || hi[i] < k - 1;
    }
    if (!any) return;
    int64_t nd[MAX_SP], npads[2 * MAX_SP], nks[MAX_SP];
    for (int i = 0; i < nsp; i++) {
        nks[i] = hi[i] - lo[i] + 1;
        npads[i] = G.pb[i] - lo[i] * G.d[i];
        conv_pads(G.in[i], G.out[i], G.s[i], G.d[i], npads[i], nks[i], &npads[nsp + i]);
        nd[i] = nks[i] == 1 ? 1 : G.d[i];
    }
    n->in[1] = slice_taps(g, w, lo, hi, "live");
    ir_attr_set_ints(g, n, "kernel_shape", nks, nsp);
    ir_attr_set_ints(g, n, "pads", npads, 2 * nsp);
    ir_attr_set_ints(g, n, "dilations", nd, nsp);
}

/* ---- live regions ----
 * Taps that read the input for some outputs only (dilation 12 on a 14x14 map: the outer taps
 * reach it from the two rows and columns at each edge) are not cut above. Along each dim the
 * outputs fall into spans over which the same taps read the input (a tap reads it for one
 * range of outputs, so the spans are cut where a tap's range starts or ends); a region, one
 * span of each dim, is then a conv of its own: the input slice its taps read, the weights of
 * those taps, no padding. The regions' outputs are joined by Concats, the last dim first, and
 * the last Concat writes the conv's output. Taken when the regions cost at most 5/8 of
 * the conv's, counting multiply-adds and weights read (WEIGHT_MACS): DeepLabV3's dilation-12
 * conv does 324 of its 1764 taps x pixels per channel pair, the 10x10 interior a 1x1 conv,
 * and reads 25 of its 9 taps' weights (the 2x2 corners read 4 taps for 4 pixels each): cost
 * 824 against 1944; measured 7.0 -> 4.3 ms on one AVX-512 core. The regions' weights are
 * copies (DeepLabV3's 8.8 MB become 24.6 MB of flash). The tap sums below cost less there
 * (504) and are taken instead, but at --fp-strict, and where the input channels are few
 * (their Pads and Adds then weigh more). */
enum { MAX_SPANS = 3, MAX_REGIONS = 27, MAX_TAPS = 16 };
/* A weight streamed from memory costs about as much as this many multiply-adds (10 GB/s
 * against 50 G multiply-adds/s, AVX-512 at half its peak): a region of few pixels is bound by
 * its weights, which each region reads a copy of. */
enum { WEIGHT_MACS = 20 };

typedef struct Span { int64_t q0, q1, a, b; } Span;     /* outputs [q0, q1) read by taps [a, b] */

/* The spans of dim i (their count), or -1: more than MAX_SPANS, an output that reads no
 * input, or a span whose taps are not one range (a stride beyond the dilation). */
static int spans(const Geom *G, int i, Span *sp) {
    int64_t k = G->k[i], L[MAX_TAPS], R[MAX_TAPS], cuts[2 * MAX_TAPS + 2];
    int nc = 0, n = 0;
    if (k > MAX_TAPS) return -1;
    cuts[nc++] = 0, cuts[nc++] = G->out[i];
    for (int64_t t = 0; t < k; t++) {
        tap_outputs(G, i, t, &L[t], &R[t]);
        if (L[t] <= R[t]) cuts[nc++] = L[t], cuts[nc++] = R[t] + 1;
    }
    for (int x = 1; x < nc; x++)            /* sorted */
        for (int y = x; y > 0 && cuts[y - 1] > cuts[y]; y--) {
            int64_t c = cuts[y];
            cuts[y] = cuts[y - 1], cuts[y - 1] = c;
        }
    for (int x = 0; x + 1 < nc; x++) {
        int64_t q0 = cuts[x], q1 = cuts[x + 1], a = -1, b = -1;
        if (q0 == q1) continue;
        for (int64_t t = 0; t < k; t++)
            if (L[t] <= q0 && q1 - 1 <= R[t]) b = t, a = a < 0 ? t : a;
        if (a < 0 || n == MAX_SPANS) return -1;
        for (int64_t t = a; t <= b; t++)
            if (!(L[t] <= q0 && q1 - 1 <= R[t])) return -1;
        sp[n++] = (Span){q0, q1, a, b};
    }
    return n;
}

typedef struct Split {
    Graph *g;
    Node *n;
    const Geom *G;
    Span sp[MAX_SP][MAX_SPANS];
    int ns[MAX_SP], pick[MAX_SP], count;
} Split;

/* A conv of the original's attributes over the input window [st, en) of every spatial dim
 * (a Slice unless that is all of it), without padding, with the taps [lo, hi] of its
 * weights, kernel ks and dilations dl; the bias when nin says so. Its output has `size`
 * along each spatial dim. */
static Value *part_conv(Split *S, const char *name, const int64_t *st, const int64_t *en, const int64_t *lo,
                        const int64_t *hi, const int64_t *ks, const int64_t *dl, int nin, const int64_t *size) {
    Graph *g = S->g;
    Node *n = S->n;
    int nsp = S->G->nsp;
    int64_t ax[MAX_SP], pads[2 * MAX_SP] = {0};
    bool whole = true;
    for (int i = 0; i < nsp; i++) {
        ax[i] = 2 + i;
        whole &= st[i] == 0 && en[i] == S->G->in[i];
    }
    Value *x = n->in[0];
    if (!whole) {
        Node *sl = ir_node_insert_op(g, n, OP_Slice, arena_printf(g->arena, "%s_in", name), 4);
        sl->in[0] = x;
        sl->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_in_starts", name), st, nsp);
        sl->in[2] = ir_const_ints(g, arena_printf(g->arena, "%s_in_ends", name), en, nsp);
        sl->in[3] = ir_const_ints(g, arena_printf(g->arena, "%s_in_axes", name), ax, nsp);
        op_info[OP_Slice].infer(g, sl);
        x = sl->out[0];
    }
    Node *c = ir_node_insert_op(g, n, OP_Conv, name, nin);
    c->op_type = n->op_type, c->domain = n->domain, c->opset = n->opset;
    c->nattrs = n->nattrs;
    c->attrs = ARENA_ARRAY(g->arena, Attr, n->nattrs + 3);
    if (n->nattrs) memcpy(c->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
    ir_attr_set_ints(g, c, "kernel_shape", ks, nsp);
    ir_attr_set_ints(g, c, "pads", pads, 2 * nsp);
    ir_attr_set_ints(g, c, "dilations", dl, nsp);
    c->in[0] = x;
    c->in[1] = slice_taps(g, n->in[1], lo, hi, name + strlen(n->name) + 1);
    for (int j = 2; j < nin; j++) c->in[j] = n->in[j];
    op_info[OP_Conv].infer(g, c);
    for (int i = 0; i < nsp; i++)
        if (c->out[0]->rank != nsp + 2 || c->out[0]->dims[2 + i] != size[i])
            die("dead_taps: part %s of %s has the wrong size", name, n->name);
    return c->out[0];
}

/* The conv of the region S->pick. */
static Value *region(Split *S) {
    const Geom *G = S->G;
    int64_t lo[MAX_SP], hi[MAX_SP], st[MAX_SP], en[MAX_SP], ks[MAX_SP], dl[MAX_SP], size[MAX_SP];
    for (int i = 0; i < G->nsp; i++) {
        const Span *p = &S->sp[i][S->pick[i]];
        lo[i] = p->a, hi[i] = p->b, size[i] = p->q1 - p->q0;
        st[i] = p->q0 * G->s[i] + p->a * G->d[i] - G->pb[i];
        en[i] = (p->q1 - 1) * G->s[i] + p->b * G->d[i] - G->pb[i] + 1;
        ks[i] = p->b - p->a + 1, dl[i] = ks[i] == 1 ? 1 : G->d[i];
    }
    return part_conv(S, arena_printf(S->g->arena, "%s_r%d", S->n->name, S->count++), st, en, lo, hi, ks, dl,
                     S->n->nin, size);
}

/* The regions of the spans picked before `level`, joined along dims level and after. */
static Value *join(Split *S, int level) {
    if (level == S->G->nsp) return region(S);
    Value *parts[MAX_SPANS];
    int m = S->ns[level];
    for (int j = 0; j < m; j++) {
        S->pick[level] = j;
        parts[j] = join(S, level + 1);
    }
    if (m == 1) return parts[0];
    Node *cat = ir_node_insert_op(S->g, S->n, OP_Concat, arena_printf(S->g->arena, "%s_cat%d", S->n->name, S->count++), m);
    for (int j = 0; j < m; j++) cat->in[j] = parts[j];
    ir_attr_set_int(S->g, cat, "axis", 2 + level);
    op_info[OP_Concat].infer(S->g, cat);
    return cat->out[0];
}

/* ---- tap sums ----
 * The regions read a copy of their taps' weights each, which costs where a map is small and
 * the weights are many: DeepLabV3's dilation-12 conv (960 -> 256 channels on 14x14) reads 25
 * of its 9 taps' 0.98 MB, and its 2x2 corners read four taps each for 4 pixels. As a sum of
 * 1x1 convs, one per live tap over the outputs that tap reads the input for, each tap's
 * weights are read once and the multiply-adds are the same 324 of 1764: the tap that reads
 * the input for every output (the centre) is a conv over the whole map that carries the
 * bias, and each other tap's conv over its window of outputs is padded to the map with zeros
 * and added (Pad + Add, which fuse into one kernel). Cost per channel pair: each tap's pixels
 * plus WEIGHT_MACS, and the Pad and Add of a whole map for each tap but the first (PAD_ADD
 * per output element, spread over the input channels). The sum is reassociated (tap by tap),
 * so not with --fp-strict, which keeps the regions. DeepLabV3's conv, one AVX-512 core
 * (onnxcc bench): regions 3.7 ms, tap sums 2.1 ms (onnxruntime's whole conv: 2.2 ms). */
enum { PAD_ADD = 4 };

typedef struct Tap { int64_t t[MAX_SP], q0[MAX_SP], q1[MAX_SP]; } Tap;

/* The live taps (their count; -1: too many, or none reads the input for every output) with
 * their windows of outputs [q0, q1), the one reading it for all of them first. */
static int live_taps(const Geom *G, Tap *tp, int max) {
    int64_t taps = 1;
    for (int i = 0; i < G->nsp; i++) taps *= G->k[i];
    int n = 1;
    bool base = false;
    for (int64_t e = 0; e < taps; e++) {
        Tap t;
        bool live = true, whole = true;
        int64_t r = e;
        for (int i = G->nsp - 1; i >= 0; r /= G->k[i], i--) {
            int64_t L, R;
            t.t[i] = r % G->k[i];
            tap_outputs(G, i, t.t[i], &L, &R);
            live &= L <= R;
            whole &= L == 0 && R == G->out[i] - 1;
            t.q0[i] = L, t.q1[i] = R + 1;
        }
        if (!live) continue;
        if (whole && !base) {
            tp[0] = t, base = true;
        } else {
            if (n == max) return -1;
            tp[n++] = t;
        }
    }
    return base ? n : -1;
}

/* The 1x1 conv of tap T over its window of outputs (with the bias when `bias`). */
static Value *tap_conv(Split *S, const Tap *T, bool bias) {
    const Geom *G = S->G;
    int64_t st[MAX_SP], en[MAX_SP], ones[MAX_SP], size[MAX_SP];
    for (int i = 0; i < G->nsp; i++) {
        ones[i] = 1, size[i] = T->q1[i] - T->q0[i];
        st[i] = T->q0[i] * G->s[i] + T->t[i] * G->d[i] - G->pb[i];
        en[i] = (T->q1[i] - 1) * G->s[i] + T->t[i] * G->d[i] - G->pb[i] + 1;
    }
    return part_conv(S, arena_printf(S->g->arena, "%s_t%d", S->n->name, S->count++), st, en, T->t, T->t, ones,
                     ones, bias ? S->n->nin : 2, size);
}

/* The sum of the taps' convs, each padded to the map (the first is the whole map). */
static Value *tap_sum(Split *S, const Tap *tp, int ntaps) {
    Graph *g = S->g;
    Node *n = S->n;
    int nsp = S->G->nsp, rank = nsp + 2;
    Value *sum = tap_conv(S, &tp[0], true);
    for (int k = 1; k < ntaps; k++) {
        Value *c = tap_conv(S, &tp[k], false);
        int64_t pads[2 * MAX_RANK] = {0};
        for (int i = 0; i < nsp; i++) {
            pads[2 + i] = tp[k].q0[i];
            pads[rank + 2 + i] = S->G->out[i] - tp[k].q1[i];
        }
        const char *name = arena_printf(g->arena, "%s_p%d", n->name, S->count++);
        Node *pd = ir_node_insert_op(g, n, OP_Pad, name, 2);
        pd->in[0] = c;
        pd->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_pads", name), pads, 2 * rank);
        op_info[OP_Pad].infer(g, pd);
        Node *add = ir_node_insert_op(g, n, OP_Add, arena_printf(g->arena, "%s_sum", name), 2);
        add->in[0] = sum;
        add->in[1] = pd->out[0];
        op_info[OP_Add].infer(g, add);
        sum = add->out[0];
    }
    const Value *y = n->out[0];
    if (sum->rank != y->rank || memcmp(sum->dims, y->dims, sizeof(int64_t) * (size_t)y->rank))
        die("dead_taps: the taps of %s sum to another shape", n->name);
    return sum;
}

/* The conv as regions or as tap sums, whichever costs less, where that is at most 5/8 of the
 * whole conv's cost; `exact`: regions only. The whole conv costs more than its multiply-adds
 * say: it reads a padded copy of its input, 3.4x the map for DeepLabV3-ResNet50's dilation-12
 * conv (2048 -> 256 channels on 28x28), whose tap sums cost 0.52 of it and ran 2.3x faster
 * (a 256-channel one alone: 7.1 -> 3.0 ms; the model 295 -> 272 ms, Xeon, one thread),
 * where half had kept it whole. */
static void split(Graph *g, Node *n, bool exact) {
    Geom G;
    if (!geometry(n, &G)) return;
    Split S = {.g = g, .n = n, .G = &G};
    /* the cost of a conv of P pixels and T taps, per input-output channel pair: T * (P +
     * WEIGHT_MACS), each weight streamed once besides its multiply-adds */
    double full, taps = 1, px = 1;
    for (int i = 0; i < G.nsp; i++) taps *= (double)G.k[i], px *= (double)G.out[i];
    full = taps * (px + WEIGHT_MACS);
    int regions = 1;
    for (int i = 0; i < G.nsp && regions > 0; i++)
        regions = (S.ns[i] = spans(&G, i, S.sp[i])) < 1 ? 0 : regions * S.ns[i];
    double live = full;
    if (regions >= 2 && regions <= MAX_REGIONS) {
        live = 0;
        for (int r = 0; r < regions; r++) {
            double rp = 1, rt = 1;
            for (int i = G.nsp - 1, q = r; i >= 0; q /= S.ns[i], i--) {
                const Span *sp = &S.sp[i][q % S.ns[i]];
                rp *= (double)(sp->q1 - sp->q0), rt *= (double)(sp->b - sp->a + 1);
            }
            live += rt * (rp + WEIGHT_MACS);
        }
    }
    Tap tp[MAX_REGIONS + 1];
    int ntaps = exact ? -1 : live_taps(&G, tp, MAX_REGIONS + 1);
    double sums = full;
    if (ntaps >= 2) {
        sums = (ntaps - 1) * PAD_ADD * px / (double)n->in[0]->dims[1];
        for (int k = 0; k < ntaps; k++) {
            double tpx = 1;
            for (int i = 0; i < G.nsp; i++) tpx *= (double)(tp[k].q1[i] - tp[k].q0[i]);
            sums += tpx + WEIGHT_MACS;
        }
    }
    if (8 * MIN(live, sums) > 5 * full) return;
    Value *y = n->out[0], *top = sums < live ? tap_sum(&S, tp, ntaps) : join(&S, 0);
    Node *last = top->producer;     /* it writes the conv's output */
    last->out[0] = y;
    y->producer = last;
    top->producer = NULL;
    n->dead = true;
}

void dead_taps(Graph *g, const Options *o) {
    int nconv = 0;
    for (int i = 0; i < g->nnodes; i++) nconv += !g->nodes[i]->dead && g->nodes[i]->op == OP_Conv;
    Node **convs = ARENA_ARRAY(g->arena, Node *, nconv + 1);
    nconv = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == OP_Conv && g->nodes[i]->nin >= 2 && g->nodes[i]->nout >= 1)
            convs[nconv++] = g->nodes[i];
    for (int i = 0; i < nconv; i++) {
        cut(g, convs[i]);
        split(g, convs[i], o->fp_strict);
    }
    ir_compact(g);
}
