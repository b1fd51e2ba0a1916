/* winograd.c - graph pass: a 3x3 conv of stride 1 over many channels as Winograd's
 * F(2x2, 3x3): an input transform, sixteen 1x1 convs and an output transform.
 *
 * A direct 3x3 conv does 9 multiply-adds per output, input channel and output channel. In
 * F(2x2, 3x3) each 2x2 tile of outputs comes from a 4x4 tile of inputs through 16 products,
 * 4 per output: 2.25x fewer (passes/ops/winograd.c has the algebra). The products, summed
 * over the input channels, are sixteen 1x1 convs over the map of tiles, with the kernel's
 * transforms U_ab = (G g G^T)[a][b] as their constant weights; the transforms of the input
 * and of the products (WinogradInput, WinogradOutput) are additions only. So the conv becomes
 *     [Pad] -> WinogradInput -> 16 x Conv 1x1 -> WinogradOutput
 * and every part is something the schedule already runs well: the 1x1 convs are GEMMs over
 * the tiles, the transforms channel_movers that go NHWC with the convs around them
 * (passes/schedule.c). The conv's bias is the 1x1 conv of M_11's (which reaches every output
 * once); the conv's consumers (a Relu, a residual Add) fuse into WinogradOutput's stores.
 *
 * The price is memory: the sixteen V_ab and M_ab hold 4x the input and 4x the output, each
 * written once and read once, and the U_ab are 16/9 of the conv's weights. Where the
 * channels are few that traffic costs more than the multiply-adds saved; `worth` weighs the
 * two (below). The sums are reassociated and the U_ab rounded to float (from double), so
 * the results differ from the direct conv's by rounding: not with --fp-strict. Float 2-D
 * convs of one group with constant weights, at -O2 and above, on targets with vectors of 16
 * bytes or more. Not under --max-arena: a larger arena is what it costs. Large maps of few
 * channels run in row bands (`bands` below). */
#include <string.h>

#include "lower.h"
#include "pipeline.h"

static const double g_rows[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

/* The least multiply-adds of each 1x1 conv: parallelize's MIN_MACS, below which it runs a
 * kernel on one thread. The direct conv, 9/4 of the work in one kernel, is split; sixteen
 * kernels left whole lost at two threads (SqueezeNet's 32 -> 128 on 14x14, 49 tiles: 0.2M
 * multiply-adds each; the model 0.84x where one thread gained 1.1x). */
enum { PRODUCT_MACS = 1 << 21 };

/* Whether the multiply-adds saved outweigh what the Winograd form adds. Per output pixel the
 * conv does 9 C M multiply-adds and the Winograd form 4 C M; but it writes and reads back
 * 4 C floats (the V_ab) and 4 M floats (the M_ab) more, 32 (C + M) bytes, its 1x1 convs
 * reduce over only C channels and produce M, and their weights are 16/9 of the conv's,
 * each used once per tile. Measured per conv on a Xeon core (AVX-512, one thread: its
 * transforms and 1x1 convs against the direct conv, 26 models):
 *   - 64 -> 64 channels and wider 1.2-1.9x;
 *   - fewer channels on a side: 32 -> 32 at 160x160 (YOLOv5s) 0.72x, 64 -> 32 at 224x224
 *     (ESPCN) 0.85x, 32 -> 64 at 147x147 (Inception-v3) 0.69x; 128 -> 32 at 28x28 (DenseNet)
 *     1.55x and 64 -> 32 on 64x64 (a U-Net) 1.19x, but the latter at two threads, where the
 *     traffic is shared, 0.91x for the model: none;
 *   - the V_ab beyond 32 MiB gained little: 64 -> 64 at 224x224 (VGG-16, 51 MB) 1.03x;
 *   - on maps of fewer than 32 tiles the weights stream from beyond the L2 for few pixels:
 *     512 -> 512 at 7x7 (16 tiles) 0.89-1.07x, 448 -> 384 at 8x8 0.97x; 14x14 (49) 1.9x. */
/* Beyond WHOLE_V_BYTES of V_ab the conv runs in row bands of tiles of about BAND_V_BYTES each
 * (rewrite_bands), each band's V_ab and M_ab written and read back while they are in the
 * caches, where the whole map's went to memory and back; it ran direct there before. A
 * TAESD-like decoder's 64 -> 64 convs at 256x256 (V_ab 67 MB): the model 263 -> 185 ms, VGG-16
 * (64 -> 64 at 224x224) 178 -> 160 ms (one thread, --cpu native, Zen 4). Band budgets of 1,
 * 2, 4, 8 and 16 MB gave the decoder 199, 195, 190-196, 204-208 and 236 ms (its maps NCHW
 * then). Under WHOLE_V_BYTES, bands lost 2-12% at two threads (MaxViT's stem, VGG-11's
 * 64 -> 128 at 112x112, a VAE decoder's 128x128 convs). Each band reads all sixteen U_ab
 * again, so only where they are at most an eighth of a band's V_ab (C x M up to 8192): with
 * an FCN head's 2048 -> 512 conv (67 MB of U_ab) or a U-Net decoder's 384 -> 128 (3 MB) re-read
 * per band those models lost 2-3%. The bands are kernels of their own: the decoder compiles in
 * 7.7 s (2.2 s with its convs direct). */
enum { WHOLE_V_BYTES = 32 << 20, BAND_V_BYTES = 4 << 20 };

/* The row bands to run the conv in (1: whole). */
static int64_t bands(int64_t c, int64_t m, int64_t tile_rows, int64_t v_bytes) {
    int64_t u_bytes = 16 * c * m * (int64_t)sizeof(float);
    if (v_bytes <= WHOLE_V_BYTES || 8 * u_bytes > BAND_V_BYTES) return 1;
    return MIN((v_bytes + BAND_V_BYTES - 1) / BAND_V_BYTES, tile_rows);
}

/* (nb: the conv's bands) */
static bool worth(int64_t c, int64_t m, int64_t tiles, int64_t v_bytes, int64_t nb) {
    return c >= 64 && m >= 64 && tiles >= 32 && (v_bytes <= WHOLE_V_BYTES || nb > 1) && tiles * c * m >= PRODUCT_MACS;
}

/* The geometry of a conv that takes the Winograd form and its row bands (*nb), or false. */
static bool candidate(Node *n, Window *w, int64_t *nb) {
    if (n->op != OP_Conv || n->nin < 2 || n->nout != 1) return false;
    const Value *x = n->in[0], *wt = n->in[1];
    if (x->dtype != DT_FLOAT || wt->dtype != DT_FLOAT || !wt->data || x->rank != 4 || wt->rank != 4 ||
        wt->dims[2] != 3 || wt->dims[3] != 3 || wt->dims[1] != x->dims[1] || ir_attr_int(n, "group", 1) != 1)
        return false;
    if (n->nin > 2 && n->in[2] && (n->in[2]->dtype != DT_FLOAT || !n->in[2]->data)) return false;
    int64_t ks[2] = {3, 3};
    if (!rule_window(NULL, n, x, ks, false, w)) return false;
    for (int d = 0; d < 2; d++)
        if (w->s[d] != 1 || w->d[d] != 1 || w->out[d] < 3) return false;
    int64_t rows = (w->out[0] + 1) / 2, tiles = rows * ((w->out[1] + 1) / 2);
    int64_t v_bytes = 16 * x->dims[0] * x->dims[1] * tiles * (int64_t)sizeof(float);
    *nb = bands(x->dims[1], wt->dims[0], rows, v_bytes);
    return worth(x->dims[1], wt->dims[0], x->dims[0] * tiles, v_bytes, *nb);
}

/* U_ab [M, C, 1, 1] = (G g G^T)[a][b] of each 3x3 kernel g of w [M, C, 3, 3]. */
static Value *weights(Graph *g, const Value *w, int a, int b, const char *name) {
    int64_t m = w->dims[0], c = w->dims[1], dims[4] = {m, c, 1, 1};
    Value *u = ir_const_new(g, name, DT_FLOAT, 4, dims, NULL);
    float *o = u->data;
    const float *f = w->data;
    for (int64_t k = 0; k < m * c; k++) {
        const float *gk = f + 9 * k;
        double s = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) s += g_rows[a][i] * gk[3 * i + j] * g_rows[b][j];
        o[k] = (float)s;
    }
    return u;
}

/* Node `last`, which computes what conv n did, takes n's output y itself (and so y's consumers);
 * n is dead. `what` names the form in the internal error of a shape that differs. */
static void take_output(Node *last, Node *n, const char *what) {
    Value *y = n->out[0], *r = last->out[0];
    if (r->rank != y->rank || memcmp(r->dims, y->dims, sizeof(int64_t) * (size_t)y->rank))
        die("winograd: the %s of %s make another shape", what, n->name);
    last->out[0] = y;
    y->producer = last;
    r->producer = NULL;
    n->dead = true;
}

static void rewrite(Graph *g, Node *n, const Window *w) {
    Value *x = n->in[0];
    bool odd = w->out[0] % 2 || w->out[1] % 2;
    if (w->pb[0] || w->pb[1] || w->pe[0] || w->pe[1] || odd) {
        /* an odd height or width: one more row or column of zeros makes the last tiles whole */
        int64_t pads[8] = {0, 0, w->pb[0], w->pb[1], 0, 0, w->pe[0] + w->out[0] % 2, w->pe[1] + w->out[1] % 2};
        const char *name = arena_printf(g->arena, "%s_wpad", n->name);
        Node *pd = ir_node_insert_op(g, n, OP_Pad, name, 2);
        pd->in[0] = x;
        pd->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_pads", name), pads, 8);
        op_info[OP_Pad].infer(g, pd);
        x = pd->out[0];
    }
    const char *iname = arena_printf(g->arena, "%s_win", n->name);
    Node *in = ir_node_insert_before(g, n, OP_WinogradInput, iname, 1, 16);
    for (int t = 0; t < 16; t++) {
        in->out[t] = ir_value_new(g, arena_printf(g->arena, "%s_v%d%d", iname, t / 4, t % 4));
        in->out[t]->producer = in;
    }
    in->in[0] = x;
    op_info[OP_WinogradInput].infer(g, in);
    Node *out = ir_node_insert_op(g, n, OP_WinogradOutput, arena_printf(g->arena, "%s_wout", n->name), 16);
    for (int t = 0; t < 16; t++) {
        const char *name = arena_printf(g->arena, "%s_w%d%d", n->name, t / 4, t % 4);
        bool bias = t == 5 && n->nin > 2 && n->in[2];
        Node *cv = ir_node_insert_op(g, out, OP_Conv, name, bias ? 3 : 2);
        cv->op_type = n->op_type, cv->domain = n->domain, cv->opset = n->opset;
        cv->in[0] = in->out[t];
        cv->in[1] = weights(g, n->in[1], t / 4, t % 4, arena_printf(g->arena, "%s_u", name));
        if (bias) cv->in[2] = n->in[2];
        op_info[OP_Conv].infer(g, cv);
        out->in[t] = cv->out[0];
    }
    if (odd) ir_attr_set_ints(g, out, "sizes", w->out, 2);
    op_info[OP_WinogradOutput].infer(g, out);
    take_output(out, n, "tiles");
}

/* The conv as row bands: each band of output rows a conv of its slice of the input rows (its
 * halo included), rewritten as above, the bands' outputs concatenated along the height. */
static void rewrite_bands(Graph *g, Node *n, const Window *w, int nb) {
    Value *x = n->in[0];
    int64_t th = (w->out[0] + 1) / 2, hin = x->dims[2];
    Value **outs = ARENA_ARRAY(g->arena, Value *, nb);
    for (int b = 0; b < nb; b++) {
        int64_t o0 = 2 * (b * th / nb), o1 = MIN(2 * ((b + 1) * th / nb), w->out[0]);
        int64_t lo = o0 - w->pb[0], hi = o1 + 2 - w->pb[0];
        int64_t pt = lo < 0 ? -lo : 0, pbot = hi > hin ? hi - hin : 0;
        lo = MAX(lo, 0), hi = MIN(hi, hin);
        const char *sname = arena_printf(g->arena, "%s_band%d", n->name, b);
        Node *sl = ir_node_insert_op(g, n, OP_Slice, sname, 4);
        int64_t ax = 2;
        sl->in[0] = x;
        sl->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_starts", sname), &lo, 1);
        sl->in[2] = ir_const_ints(g, arena_printf(g->arena, "%s_ends", sname), &hi, 1);
        sl->in[3] = ir_const_ints(g, arena_printf(g->arena, "%s_axes", sname), &ax, 1);
        op_info[OP_Slice].infer(g, sl);
        Node *cv = ir_node_insert_op(g, n, OP_Conv, arena_printf(g->arena, "%s_conv", sname), n->nin);
        cv->op_type = n->op_type, cv->domain = n->domain, cv->opset = n->opset;
        cv->in[0] = sl->out[0];
        for (int i = 1; i < n->nin; i++) cv->in[i] = n->in[i];
        int64_t ks[2] = {3, 3}, ones[2] = {1, 1}, pads[4] = {pt, w->pb[1], pbot, w->pe[1]};
        ir_attr_set_ints(g, cv, "kernel_shape", ks, 2);
        ir_attr_set_ints(g, cv, "strides", ones, 2);
        ir_attr_set_ints(g, cv, "dilations", ones, 2);
        ir_attr_set_ints(g, cv, "pads", pads, 4);
        op_info[OP_Conv].infer(g, cv);
        Window wb;
        if (!rule_window(NULL, cv, cv->in[0], ks, false, &wb)) die("winograd: band %d of %s", b, n->name);
        outs[b] = cv->out[0];
        rewrite(g, cv, &wb);
    }
    Node *cat = ir_node_insert_op(g, n, OP_Concat, arena_printf(g->arena, "%s_bands", n->name), nb);
    for (int b = 0; b < nb; b++) cat->in[b] = outs[b];
    ir_attr_set_int(g, cat, "axis", 2);
    op_info[OP_Concat].infer(g, cat);
    take_output(cat, n, "bands");
}

void winograd(Graph *g, const Options *o) {
    if (o->opt_level < 2 || o->fp_strict || o->vector_bytes < 16 || o->max_arena) return;
    Node **ns = ARENA_ARRAY(g->arena, Node *, g->nnodes + 1);
    Window *ws = ARENA_ARRAY(g->arena, Window, g->nnodes + 1);
    int64_t *nbs = ARENA_ARRAY(g->arena, int64_t, g->nnodes + 1);
    int nn = 0;
    for (int i = 0; i < g->nnodes; i++)     /* the candidates first: rewrite inserts nodes */
        if (!g->nodes[i]->dead && candidate(g->nodes[i], &ws[nn], &nbs[nn])) ns[nn++] = g->nodes[i];
    for (int i = 0; i < nn; i++) {
        if (nbs[i] > 1) rewrite_bands(g, ns[i], &ws[i], (int)nbs[i]);
        else rewrite(g, ns[i], &ws[i]);
    }
    ir_compact(g);
}
