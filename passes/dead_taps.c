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
 * explicit padding (auto_pad NOTSET) only; anything else is left for lowering as it is. */
#include <string.h>

#include "pipeline.h"

enum { MAX_SP = MAX_RANK - 2 };

/* Whether tap t of a dim reads the input for some output q in [0, out). */
static bool tap_live(int64_t t, int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb) {
    int64_t first = t * d - pb;                     /* the position of output 0 */
    int64_t q = first >= 0 ? 0 : (-first + s - 1) / s;    /* the first output at >= 0 */
    return q < out && first + q * s < in;
}

/* The end padding that gives `out` outputs with begin padding nb and k taps (*ne; NULL: only
 * asked whether there is one): the least that reaches the last output's window, when that
 * is >= 0 and the output size formula gives out with it. */
static bool conv_pads(int64_t in, int64_t out, int64_t s, int64_t d, int64_t nb, int64_t k, int64_t *ne) {
    int64_t ext = (k - 1) * d + 1, e = MAX(0, (out - 1) * s + ext - in - nb);
    if (nb < 0 || in + nb + e - ext < 0 || (in + nb + e - ext) / s + 1 != out) return false;
    if (ne) *ne = e;
    return true;
}

static void cut(Graph *g, Node *n) {
    Value *x = n->in[0], *w = n->in[1], *y = n->out[0];
    if (x->dtype != DT_FLOAT || w->dtype != DT_FLOAT || !w->data || x->rank < 3 || x->rank != w->rank ||
        y->rank != x->rank || x->rank - 2 > MAX_SP)
        return;
    if (strcmp(ir_attr_str(n, "auto_pad", "NOTSET"), "NOTSET") && strcmp(ir_attr_str(n, "auto_pad", "NOTSET"), ""))
        return;
    int nsp = x->rank - 2;
    const int64_t *st, *dl, *pd, *ks;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd), nks = ir_attr_ints(n, "kernel_shape", &ks);
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp) || (nks && nks != nsp)) return;
    int64_t lo[MAX_SP], hi[MAX_SP], s[MAX_SP], d[MAX_SP], pb[MAX_SP], pe[MAX_SP];
    bool any = false;
    for (int i = 0; i < nsp; i++) {
        int64_t k = w->dims[2 + i], in = x->dims[2 + i], out = y->dims[2 + i];
        s[i] = nst ? st[i] : 1, d[i] = ndl ? dl[i] : 1;
        pb[i] = npd ? pd[i] : 0, pe[i] = npd ? pd[nsp + i] : 0;
        if ((nks && ks[i] != k) || k < 1 || in < 1 || out < 1 || s[i] < 1 || d[i] < 1 || pb[i] < 0 || pe[i] < 0 ||
            MAX(MAX(k, in), MAX(MAX(s[i], d[i]), MAX(pb[i], pe[i]))) > (INT64_C(1) << 30))
            return;                 /* odd or huge geometry: lowering says what is wrong */
        lo[i] = 0, hi[i] = k - 1;
        while (lo[i] < k && !tap_live(lo[i], in, out, s[i], d[i], pb[i])) lo[i]++;
        if (lo[i] == k) return;     /* no tap reads the input: leave it (the bias alone) */
        while (!tap_live(hi[i], in, out, s[i], d[i], pb[i])) hi[i]--;
        if (!conv_pads(in, out, s[i], d[i], pb[i] - lo[i] * d[i], hi[i] - lo[i] + 1, NULL))
            lo[i] = 0, hi[i] = k - 1;   /* would need a crop: keep the dim */
        any |= lo[i] > 0 || hi[i] < k - 1;
    }
    if (!any) return;

    int64_t dims[MAX_RANK], nd[MAX_SP], npads[2 * MAX_SP], nks2[MAX_SP];
    dims[0] = w->dims[0], dims[1] = w->dims[1];
    for (int i = 0; i < nsp; i++) {
        int64_t k = hi[i] - lo[i] + 1, in = x->dims[2 + i], out = y->dims[2 + i];
        dims[2 + i] = nks2[i] = k;
        npads[i] = pb[i] - lo[i] * d[i];
        conv_pads(in, out, s[i], d[i], npads[i], k, &npads[nsp + i]);
        nd[i] = k == 1 ? 1 : d[i];
    }
    Value *nw = ir_const_new(g, arena_printf(g->arena, "%s_live", w->name), DT_FLOAT, w->rank, dims, NULL);
    float *o = nw->data;
    const float *f = w->data;
    int64_t n_out = ir_numel(nw), inner = 1;
    for (int i = 0; i < nsp; i++) inner *= dims[2 + i];
    for (int64_t e = 0; e < n_out; e++) {
        /* element e of the new weights: the same [m, c] block, taps shifted by lo */
        int64_t r = e % inner, src = 0, mul = 1;
        for (int i = nsp - 1; i >= 0; i--) {
            src += (r % dims[2 + i] + lo[i]) * mul;
            r /= dims[2 + i];
            mul *= w->dims[2 + i];
        }
        o[e] = f[e / inner * mul + src];
    }
    n->in[1] = nw;
    ir_attr_set_ints(g, n, "kernel_shape", nks2, nsp);
    ir_attr_set_ints(g, n, "pads", npads, 2 * nsp);
    ir_attr_set_ints(g, n, "dilations", nd, nsp);
}

void dead_taps(Graph *g) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!n->dead && n->op == OP_Conv && n->nin >= 2 && n->nout >= 1) cut(g, n);
    }
}
