/* split_channels.c - graph pass: a Conv whose weights per block of output channels exceed
 * the L2 becomes a sum of Convs over chunks of its input channels.
 *
 * The schedule runs a conv with many taps per output (C x kh x kw) as blocks of two vectors
 * of output channels by a row of pixels, each block streaming its weights C x kh x kw x 2
 * vectors once per row of pixels (passes/schedule.c, conv_channel_block). Past the L2 those
 * come from L3 or memory for every row: FCN-ResNet50's head, a 3x3 conv of 2048 -> 512
 * channels on a 40x40 map, has 2.4 MB of weights per block of 32 channels (AVX-512) and ran
 * at 29% of the FMA peak, half of the model's time. Cut into chunks of input channels whose
 * block weights fit half the L2 (CHUNK_BYTES), each chunk is an ordinary conv of the same
 * geometry over a channel Slice of the input, and the chunks are summed in order: the first
 * with the bias, each next one as a Conv + Add of the sum so far (fuse makes the Add its
 * epilogue, the last one taking the original conv's consumers: a Relu fuses there too). Each
 * chunk's weights then stay in the L2 over all the rows, and the input is read once in all.
 *
 * A MatMul or Gemm with a constant B [K, N] (or [N, K], transB) is cut the same way, along K.
 * The schedule packs B in panels of 256 bytes a k (passes/schedule.c, pack_panels) and streams
 * a whole panel per block of rows; past the L2 even one panel (K above 4096 floats) comes from
 * beyond it for every block, whichever loop is outermost. The Conformer's subsampling linear
 * layer ([99, 4864] x [4864, 256], the conv's channels and frequencies flattened) read its 5
 * MB of weights 17 times, at 30% of the FMA peak. Cut into chunks of K whose panel fits half
 * the L2, each chunk's panels stay in the L2 over all the rows.
 *
 * The sums are reassociated (chunk by chunk instead of one accumulation), so not with
 * --fp-strict; float 2-D and 3-D convs of one group, MatMuls and Gemms, with constant weights,
 * on targets with vectors, at -O2 and above (the level that blocks convs and packs panels). */
#include <string.h>

#include "pipeline.h"

/* The block weights a chunk may have: half of the 1 MiB that the schedule takes for the L2. */
enum { CHUNK_BYTES = 1 << 19 };

/* w [M, C, k...] cut to input channels [c0, c0 + cc): a new constant. */
static Value *weight_chunk(Graph *g, const Value *w, int64_t c0, int64_t cc, const char *name) {
    int64_t dims[MAX_RANK], taps = 1;
    memcpy(dims, w->dims, sizeof(int64_t) * (size_t)w->rank);
    for (int d = 2; d < w->rank; d++) taps *= w->dims[d];
    dims[1] = cc;
    Value *nw = ir_const_new(g, name, DT_FLOAT, w->rank, dims, NULL);
    float *o = nw->data;
    const float *f = w->data;
    for (int64_t m = 0; m < w->dims[0]; m++)
        memcpy(o + m * cc * taps, f + (m * w->dims[1] + c0) * taps, sizeof(float) * (size_t)(cc * taps));
    return nw;
}

/* The chunk of input channels for conv n, or 0 to leave it whole. */
static int64_t chunk_channels(const Node *n, const Options *o) {
    const Value *x = n->in[0], *w = n->in[1];
    if (x->dtype != DT_FLOAT || w->dtype != DT_FLOAT || !w->data || w->rank < 4 || w->rank > 5 ||
        x->rank != w->rank || ir_attr_int(n, "group", 1) != 1 || n->nout != 1)
        return 0;
    int64_t c = w->dims[1], m = w->dims[0], taps = 1, block = 2 * (int64_t)o->vector_bytes;
    for (int d = 2; d < w->rank; d++) taps *= w->dims[d];
    /* a block is two vectors of channels, where there are that many */
    if (c != x->dims[1] || m * 4 < block || c * taps * block <= 2 * CHUNK_BYTES) return 0;
    int64_t best = 0;
    for (int64_t cc = 8; cc < c; cc += 8)   /* the largest that divides C and fits */
        if (c % cc == 0 && cc * taps * block <= CHUNK_BYTES) best = cc;
    return best;
}

/* Whether B of MatMul or Gemm n is [N, K] (Gemm's transB). */
static bool trans_b(const Node *n) { return n->op == OP_Gemm && ir_attr_int(n, "transB", 0); }

/* A MatMul's or Gemm's chunk of K, or 0 to leave it whole: its B constant [K, N] ([N, K]
 * with transB), A not transposed, its rows (A's dims but the last) at least two blocks of a
 * register tile (with one, B is read once anyway). */
static int64_t chunk_k(const Node *n, const Options *o) {
    const Value *a = n->in[0], *b = n->in[1];
    bool tb = trans_b(n);
    if (a->dtype != DT_FLOAT || b->dtype != DT_FLOAT || !b->data || b->rank != 2 || a->rank < 2 ||
        a->dims[a->rank - 1] != b->dims[tb] || n->nout != 1 ||
        (n->op == OP_Gemm && (a->rank != 2 || ir_attr_int(n, "transA", 0))))
        return 0;
    int64_t k = b->dims[tb], rows = 1, panel = MIN(8 * (int64_t)o->vector_bytes, 256);
    for (int d = 0; d < a->rank - 1; d++) rows *= a->dims[d];
    if (rows < 12 || b->dims[!tb] * 4 <= panel || k * panel <= 2 * CHUNK_BYTES) return 0;
    int64_t best = 0;
    for (int64_t cc = 8; cc < k; cc += 8)
        if (k % cc == 0 && cc * panel <= CHUNK_BYTES) best = cc;
    return best;
}

/* B [K, N] cut to rows [k0, k0 + kc); B [N, K] (tb) to those columns. */
static Value *b_chunk(Graph *g, const Value *b, bool tb, int64_t k0, int64_t kc, const char *name) {
    int64_t dims[2] = {tb ? b->dims[0] : kc, tb ? kc : b->dims[1]};
    Value *nb = ir_const_new(g, name, DT_FLOAT, 2, dims, NULL);
    float *o = nb->data;
    const float *f = b->data;
    if (!tb)
        memcpy(o, f + k0 * b->dims[1], sizeof(float) * (size_t)(kc * b->dims[1]));
    else
        for (int64_t j = 0; j < b->dims[0]; j++) memcpy(o + j * kc, f + j * b->dims[1] + k0, sizeof(float) * (size_t)kc);
    return nb;
}

static void split(Graph *g, Node *n, int64_t cc) {
    bool dense = n->op != OP_Conv, tb = trans_b(n);
    Value *x = n->in[0], *w = n->in[1], *y = n->out[0], *sum = NULL;
    int64_t c = dense ? w->dims[tb] : w->dims[1], axis = dense ? x->rank - 1 : 1;
    for (int64_t c0 = 0, i = 0; c0 < c; c0 += cc, i++) {
        const char *name = arena_printf(g->arena, "%s_c%lld", n->name, (long long)i);
        Node *sl = ir_node_insert_op(g, n, OP_Slice, arena_printf(g->arena, "%s_in", name), 4);
        int64_t end = c0 + cc;
        sl->in[0] = x;
        sl->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_starts", name), &c0, 1);
        sl->in[2] = ir_const_ints(g, arena_printf(g->arena, "%s_ends", name), &end, 1);
        sl->in[3] = ir_const_ints(g, arena_printf(g->arena, "%s_axes", name), &axis, 1);
        op_info[OP_Slice].infer(g, sl);
        Node *cv = ir_node_insert_op(g, n, n->op, name, i == 0 ? n->nin : 2);
        cv->op_type = n->op_type, cv->domain = n->domain, cv->opset = n->opset;
        cv->nattrs = n->nattrs;
        cv->attrs = ARENA_ARRAY(g->arena, Attr, n->nattrs + 1);
        if (n->nattrs) memcpy(cv->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
        cv->in[0] = sl->out[0];
        const char *wname = arena_printf(g->arena, "%s_%s", w->name, name + strlen(n->name) + 1);
        cv->in[1] = dense ? b_chunk(g, w, tb, c0, cc, wname) : weight_chunk(g, w, c0, cc, wname);
        for (int j = 2; i == 0 && j < n->nin; j++) cv->in[j] = n->in[j];
        op_info[n->op].infer(g, cv);
        if (!sum) {
            sum = cv->out[0];
            continue;
        }
        Node *add = ir_node_insert_op(g, n, OP_Add, arena_printf(g->arena, "%s_sum", name), 2);
        add->in[0] = cv->out[0];
        add->in[1] = sum;
        op_info[OP_Add].infer(g, add);
        sum = add->out[0];
    }
    if (sum->rank != y->rank || memcmp(sum->dims, y->dims, sizeof(int64_t) * (size_t)y->rank))
        die("split_channels: the chunks of %s sum to another shape", n->name);
    Node *last = sum->producer;     /* it writes the conv's output */
    last->out[0] = y;
    y->producer = last;
    sum->producer = NULL;
    n->dead = true;
}

void split_channels(Graph *g, const Options *o) {
    if (o->opt_level < 2 || o->fp_strict || o->vector_bytes < 16) return;
    /* the candidates first: split inserts nodes */
    Node **ns = ARENA_ARRAY(g->arena, Node *, g->nnodes + 1);
    int nn = 0;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!n->dead && (n->op == OP_Conv || n->op == OP_MatMul || n->op == OP_Gemm) && n->nin >= 2) ns[nn++] = n;
    }
    for (int i = 0; i < nn; i++) {
        int64_t cc = ns[i]->op != OP_Conv ? chunk_k(ns[i], o) : chunk_channels(ns[i], o);
        if (cc) split(g, ns[i], cc);
    }
    ir_compact(g);
}
