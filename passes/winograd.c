/* winograd.c - graph pass: a 3x3 conv of stride 1 over many channels in Winograd's form
 * F(m x m, 3x3), tiles of m = 4 or 2 outputs a side: an input transform, (m + 2)^2 1x1 convs
 * and an output transform.
 *
 * A direct 3x3 conv does 9 multiply-adds per output, input channel and output channel. In
 * F(4x4, 3x3) each 4x4 tile of outputs comes from a 6x6 tile of inputs through 36 products,
 * 2.25 per output (4x fewer); in F(2x2, 3x3) each 2x2 tile from a 4x4 one through 16, 4 per
 * output (passes/ops/winograd.c has the algebra). The products, summed over the input
 * channels, are r^2 (r = m + 2) 1x1 convs over the map of tiles, with the kernel's transforms
 * U_ab = (G g G^T)[a][b] as their constant weights; the transforms of the input and of the
 * products (WinogradInput, WinogradOutput) are additions and multiplications by small
 * constants. So the conv becomes
 *     [Pad] -> WinogradInput -> r^2 x Conv 1x1 -> WinogradOutput
 * and every part is something the schedule already runs well: the 1x1 convs are GEMMs over
 * the tiles, the transforms channel_movers that go NHWC with the convs around them, or stay
 * NCHW with them (passes/schedule.c). The conv's bias is the 1x1 conv of M_11's (which
 * reaches every output once); the conv's consumers (a Relu, a residual Add) fuse into
 * WinogradOutput's stores.
 *
 * The price is memory: the V_ab and M_ab hold 2.25x (F(4x4)) or 4x (F(2x2)) the input and the
 * output, each written once and read once, and the U_ab are 4x or 16/9 of the conv's weights.
 * Where the channels are few that traffic costs more than the multiply-adds saved, and on
 * small maps the U_ab serve few tiles; `candidate` weighs them (below). The sums are
 * reassociated and the U_ab rounded to float (from double), so the results differ from the
 * direct conv's by rounding (more with F(4x4), whose transforms scale by up to 8 and 1/24:
 * below): not with --fp-strict. Float 2-D convs with constant weights, at -O2
 * and above, on targets with vectors of 16 bytes or more. Not under --max-arena: a larger
 * arena is what it costs. Large maps run in row bands (`bands` below). */
#include <string.h>

#include "lower.h"
#include "pipeline.h"

/* Beyond WHOLE_V_BYTES of V_ab the conv runs in row bands of tiles of about BAND_V_BYTES each
 * (rewrite_bands), each band's V_ab and M_ab written and read back while they are in the
 * caches, where the whole map's went to memory and back; it ran direct there before. A
 * TAESD-like decoder's 64 -> 64 convs at 256x256 (V_ab 67 MB): the model 263 -> 185 ms, VGG-16
 * (64 -> 64 at 224x224) 178 -> 160 ms (one thread, --cpu native, Zen 4). Band budgets of 1,
 * 2, 4, 8 and 16 MB gave the decoder 199, 195, 190-196, 204-208 and 236 ms (its maps NCHW
 * then). Under WHOLE_V_BYTES, bands lost 2-12% at two threads (MaxViT's stem, VGG-11's
 * 64 -> 128 at 112x112, a VAE decoder's 128x128 convs; all with F(2x2)). Each band reads all
 * r^2 U_ab again, so only where they are at most an eighth of a band's V_ab (C x M up to 8192
 * with F(2x2), 3640 with F(4x4); a conv with more takes F(2x2)'s bands, if it can): with an FCN
 * head's 2048 -> 512 conv (67 MB of U_ab) or a U-Net decoder's 384 -> 128 (3 MB) re-read per
 * band those models lost 2-3%. The bands are kernels of their own: the decoder compiles in
 * 7.7 s (2.2 s with its convs direct). */
enum { WHOLE_V_BYTES = 32 << 20, BAND_V_BYTES = 4 << 20 };

/* The row bands to run the conv in (1: whole; tests: three with --winograd-bands), its r^2 U_ab
 * of c x m, tile_rows rows of tiles and v_bytes of V_ab. */
static int64_t bands(const Options *o, int64_t c, int64_t m, int r, int64_t tile_rows, int64_t v_bytes) {
    if (o->winograd_bands) return MIN(3, tile_rows);
    int64_t u_bytes = r * r * c * m * (int64_t)sizeof(float);
    if (v_bytes <= WHOLE_V_BYTES || 8 * u_bytes > BAND_V_BYTES) return 1;
    return MIN((v_bytes + BAND_V_BYTES - 1) / BAND_V_BYTES, tile_rows);
}

/* Which convs take the form, and which form. Measured per conv on a Zen 4 core (AVX-512, one
 * thread: its transforms and products against the direct conv, onnxcc bench --top 0), F(4x4)
 * against F(2x2):
 *   - 64 channels on 56x56 (ResNet-18) 2.0 -> 1.07 ms (F(2x2)) -> 0.61 ms (F(4x4)); 128 on
 *     28x28 1.57x over F(2x2), 256 on 14x14 (16 tiles of 4x4) 1.29x; VGG-16's 1.3-1.8x; at
 *     no conv that both forms took was F(4x4) slower (GoogLeNet's 14x14 convs of 112-144
 *     channels: even);
 *   - fewer channels: with F(2x2) 32 -> 32 at 160x160 (YOLOv5s) had run at 0.72x of the direct
 *     conv and convs below 64 channels were left direct; with F(4x4), whose V_ab and M_ab are
 *     half as large, a rule of at least 32 channels on both sides made DenseNet-121 (128 -> 32)
 *     1.34x, Inception-v3 1.15x, SqueezeNet 1.23x, the bench U-Net 1.33x and an
 *     EfficientNet-V2-S 1.12x faster (whole models, one thread; 1.12-1.20x at two), and lost
 *     nowhere over 47 models; at least 16 channels gained another 1.3x on the U-Net and an FPN
 *     at one thread but lost up to 26% at two, so 32;
 *   - the 32 tiles of 2x2 (maps of about 11x11) stay the least: on 7x7 maps the products
 *     stream their weights for few pixels (512 -> 512 at 7x7: 0.89-1.07x with F(2x2));
 *     F(4x4) takes maps of 16 tiles of 4x4 (13x13) or more, smaller ones F(2x2);
 *   - each product was at least 2M multiply-adds while parallelize split only kernels of
 *     that much (sixteen kernels left on one thread lost at two threads); it now splits from
 *     256K (parallelize.c, MIN_MACS) and the products need no bound of their own.
 * A grouped conv's products are grouped 1x1 convs (each U_ab [M, C/G, 1, 1]), the transforms
 * the same. RegNetX-3.2GF's convs of 48 channels a group, whose direct form ran at ~97% of
 * the FMA peak: 2.9x on 56x56 (F(4x4)), 2.8x on 28x28, 2.0x on 14x14 (9 groups, 16 tiles), the
 * model 1.20x (one thread, native, Zen 4). ResNeXt-101 32x8d's 32 a group on 14x14 (32 groups)
 * ran as fast as direct (its input transform of 1024 channels at 42% of the FMA peak, its
 * products of K = 32 at 44%): groups take the form from 48 channels on both sides.
 * Accuracy: against float64, max abs error of a 64 -> 64 conv on 16x16: direct 3.8e-6,
 * F(2x2) 1.5e-6; wino_odd_b2 (tests/convs, two 160-channel convs) 2.0e-6 with F(2x2), 2.2e-5
 * with F(4x4); the bench models match onnxruntime within 1e-5 (make bench's diff column). */
enum { MIN_CHANNELS = 32, MIN_GROUP_CHANNELS = 48, MIN_TILES2 = 32, MIN_TILES4 = 16 };

/* The tiles of tm x tm outputs over the conv's output maps, all images. */
static int64_t tiles(const Value *x, const Window *w, int tm) {
    return x->dims[0] * ((w->out[0] + tm - 1) / tm) * ((w->out[1] + tm - 1) / tm);
}

/* The geometry of a conv that takes the Winograd form, its tile (*tm outputs a side) and its
 * row bands (*nb), or false. */
static bool candidate(const Options *o, Node *n, Window *w, int *tm, int64_t *nb) {
    if (n->op != OP_Conv || n->nin < 2 || n->nout != 1) return false;
    const Value *x = n->in[0], *wt = n->in[1];
    int64_t groups = ir_attr_int(n, "group", 1);
    if (x->dtype != DT_FLOAT || wt->dtype != DT_FLOAT || !wt->data || x->rank != 4 || wt->rank != 4 ||
        wt->dims[2] != 3 || wt->dims[3] != 3 || groups < 1 || wt->dims[1] * groups != x->dims[1] ||
        wt->dims[0] % groups)
        return false;
    if (n->nin > 2 && n->in[2] && (n->in[2]->dtype != DT_FLOAT || !n->in[2]->data)) return false;
    int64_t ks[2] = {3, 3};
    if (!rule_window(NULL, n, x, ks, false, w)) return false;
    for (int d = 0; d < 2; d++)
        if (w->s[d] != 1 || w->d[d] != 1 || w->out[d] < 3) return false;
    int64_t c = x->dims[1], m = wt->dims[0], cg = c / groups, mg = m / groups;
    int64_t least = groups > 1 ? MIN_GROUP_CHANNELS : MIN_CHANNELS;
    if (cg < least || mg < least || tiles(x, w, 2) < MIN_TILES2) return false;
    /* F(4x4) where it has the tiles, else (or where its V_ab are too large for one piece and
     * its U_ab for bands) F(2x2) */
    for (*tm = tiles(x, w, 4) >= MIN_TILES4 ? 4 : 2; *tm >= 2; *tm -= 2) {
        int r = *tm + 2;
        int64_t rows = (w->out[0] + *tm - 1) / *tm;
        int64_t v_bytes = r * r * c * tiles(x, w, *tm) * (int64_t)sizeof(float);
        *nb = bands(o, cg, m, r, rows, v_bytes);
        if (v_bytes <= WHOLE_V_BYTES || *nb > 1) return true;
    }
    return false;
}

/* U_ab [M, C, 1, 1] = (G g G^T)[a][b] of each 3x3 kernel g of w [M, C, 3, 3], G of tiles
 * of tm outputs. */
static Value *weights(Graph *g, const Value *w, int tm, int a, int b, const char *name) {
    const double(*gr)[3] = winograd_g(tm);
    int64_t m = w->dims[0], c = w->dims[1], dims[4] = {m, c, 1, 1};
    Value *u = ir_const_new(g, name, DT_FLOAT, 4, dims, NULL);
    float *o = u->data;
    const float *f = w->data;
    for (int64_t k = 0; k < m * c; k++) {
        const float *gk = f + 9 * k;
        double s = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) s += gr[a][i] * gk[3 * i + j] * gr[b][j];
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

/* Conv cv made from conv n (a product, a band) has n's groups. */
static void copy_groups(Graph *g, const Node *n, Node *cv) {
    int64_t groups = ir_attr_int(n, "group", 1);
    if (groups > 1) ir_attr_set_int(g, cv, "group", groups);
}

/* The conv as F(tm x tm, 3x3): r^2 products, r = tm + 2. */
static void rewrite(Graph *g, Node *n, const Window *w, int tm) {
    Value *x = n->in[0];
    int r = tm + 2, rr = r * r;
    int64_t cut[2] = {(tm - w->out[0] % tm) % tm, (tm - w->out[1] % tm) % tm};
    bool part = cut[0] || cut[1];
    if (w->pb[0] || w->pb[1] || w->pe[0] || w->pe[1] || part) {
        /* a height or width not a multiple of tm: rows or columns of zeros make the last tiles whole */
        int64_t pads[8] = {0, 0, w->pb[0], w->pb[1], 0, 0, w->pe[0] + cut[0], w->pe[1] + cut[1]};
        const char *name = arena_printf(g->arena, "%s_wpad", n->name);
        Node *pd = ir_node_insert_op(g, n, OP_Pad, name, 2);
        pd->in[0] = x;
        pd->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_pads", name), pads, 8);
        op_info[OP_Pad].infer(g, pd);
        x = pd->out[0];
    }
    const char *iname = arena_printf(g->arena, "%s_win", n->name);
    Node *in = ir_node_insert_before(g, n, OP_WinogradInput, iname, 1, rr);
    for (int t = 0; t < rr; t++) {
        in->out[t] = ir_value_new(g, arena_printf(g->arena, "%s_v%d%d", iname, t / r, t % r));
        in->out[t]->producer = in;
    }
    in->in[0] = x;
    op_info[OP_WinogradInput].infer(g, in);
    Node *out = ir_node_insert_op(g, n, OP_WinogradOutput, arena_printf(g->arena, "%s_wout", n->name), rr);
    for (int t = 0; t < rr; t++) {
        const char *name = arena_printf(g->arena, "%s_w%d%d", n->name, t / r, t % r);
        bool bias = t == r + 1 && n->nin > 2 && n->in[2];
        Node *cv = ir_node_insert_op(g, out, OP_Conv, name, bias ? 3 : 2);
        cv->op_type = n->op_type, cv->domain = n->domain, cv->opset = n->opset;
        cv->in[0] = in->out[t];
        cv->in[1] = weights(g, n->in[1], tm, t / r, t % r, arena_printf(g->arena, "%s_u", name));
        if (bias) cv->in[2] = n->in[2];
        copy_groups(g, n, cv);
        op_info[OP_Conv].infer(g, cv);
        out->in[t] = cv->out[0];
    }
    if (part) ir_attr_set_ints(g, out, "sizes", w->out, 2);
    op_info[OP_WinogradOutput].infer(g, out);
    take_output(out, n, "tiles");
}

/* The conv as row bands: each band of output rows a conv of its slice of the input rows (its
 * halo included), rewritten as above, the bands' outputs concatenated along the height. */
static void rewrite_bands(Graph *g, Node *n, const Window *w, int tm, int nb) {
    Value *x = n->in[0];
    int64_t th = (w->out[0] + tm - 1) / tm, hin = x->dims[2];
    Value **outs = ARENA_ARRAY(g->arena, Value *, nb);
    for (int b = 0; b < nb; b++) {
        int64_t o0 = tm * (b * th / nb), o1 = MIN(tm * ((b + 1) * th / nb), w->out[0]);
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
        copy_groups(g, n, cv);
        op_info[OP_Conv].infer(g, cv);
        Window wb;
        if (!rule_window(NULL, cv, cv->in[0], ks, false, &wb)) die("winograd: band %d of %s", b, n->name);
        outs[b] = cv->out[0];
        rewrite(g, cv, &wb, tm);
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
    int *tms = ARENA_ARRAY(g->arena, int, g->nnodes + 1);
    int nn = 0;
    for (int i = 0; i < g->nnodes; i++)     /* the candidates first: rewrite inserts nodes */
        if (!g->nodes[i]->dead && candidate(o, g->nodes[i], &ws[nn], &tms[nn], &nbs[nn])) ns[nn++] = g->nodes[i];
    for (int i = 0; i < nn; i++) {
        if (nbs[i] > 1) rewrite_bands(g, ns[i], &ws[i], tms[i], (int)nbs[i]);
        else rewrite(g, ns[i], &ws[i], tms[i]);
    }
    ir_compact(g);
}
