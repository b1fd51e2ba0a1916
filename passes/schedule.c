/* schedule.c - the schedule pass: which loop primitives (passes/loops.c) each kernel gets,
 * with which factors, by kernel class and target. The primitives do the work and record it in
 * the kernel's schedule line (`; schedule conv: jam(i1,3) split(i7,3) ...` in the text form).
 *
 * Policy. At -O0/-O1 nothing changes. At -O2 and above, W is the number of lanes of the
 * output type in one target vector (p->vector_bytes), and:
 *   - every loop that only accumulates into scalar registers (no store inside) is marked
 *     LH_REDUCTION;
 *   - first, with vectors, the 4-d temporaries around depthwise convolutions and their
 *     neighbours through convs, pools and elementwise kernels are stored NHWC
 *     (channel_last_layouts), and the kernels touching them run with the channels innermost
 *     as vectors (elementwise ones with their loops in the store's order: store_order);
 *   - contractions whose last two parallel loops appear only as the last two indices of
 *     buffers of those extents (a 1x1 convolution) get them coalesced into one (a GEMM's
 *     columns: coalesce_pixels);
 *   - contractions (KC_CONTRACTION): the innermost parallel loop J around a reduction loop
 *     (j of a matmul [i, j, k], the output channel of a conv with weights [C,k..,M], the output
 *     column otherwise) becomes vector loops of W lanes, U of them side by side with their own
 *     accumulators around the reduction loop: split(J, W), jam(tile loop, U), vectorize:
 *         for jo in 0..N/(W*U)*(W*U) step W*U [tile]:
 *             for ji in 0..W [vector]:  r_u = 0                       (u = 0..U-1)
 *                 for k [reduction]: r_u = r_u + a[i,k] * b[k, jo + W*u + ji]
 *                 c[i, jo + W*u + ji] = r_u
 *     then narrower pieces for the rest: the tiles left over jammed as one and unrolled, one
 *     vector of the lanes left (at least 2, split off and unrolled) and the last element as
 *     a scalar loop; in a contraction whose iterations may be redone (kernel_independent),
 *     lanes left that are not a power of two are instead one block with the tiles left
 *     over, grown back to whole vectors (overlap, `[redo N]`). Before that, the innermost enclosing parallel loop L whose copies share
 *     J's loads (no load in a reduction reads both: the row i of a matmul, an output pixel of a
 *     conv) is jammed by MR rows, so that each broadcast a[i+m,k] and each vector of b feeds
 *     several FMAs; MR*U accumulators fill most of the vector registers (6 x 4 vectors with
 *     AVX-512's 32, U = 2 with 16), and the rows left over get one narrower block; a tile
 *     far from the best of the space that passes/sched_tile.c's cost model ranks is
 *     replaced by that one (block_factor). A J not
 *     blocked (a matrix-vector product) gets up to twice as many vectors: more independent
 *     chains, and each packed weight row streamed whole;
 *   - a Gemm/MatMul with constant B has its rows, where they span several loops
 *     ([1, H, W, C] x [C, N]; a batch of one under the rows), coalesced into one loop; with
 *     more columns than a panel, B packed into panels (pack_panels), and where B exceeds the
 *     L2 over few rows the panels outermost (panels_outer);
 *   - with vectors, convs of at least 16 input channels that get the cm layout read a
 *     zero-padded copy of their input (conv_pad), their input channels sunk below the taps
 *     where the input is channel-last (sink_channels; so too, without --fp-strict, for a
 *     conv of several taps that has no padding), and run blocks of 2 vectors of output
 *     channels by a row of pixels, 14 at most with 32 registers (13 where the output is
 *     stored channel-first, by scatters), 5 with 16
 *     (conv_channel_block, conv_pixel_tile), the blocks outermost or, where a model of the
 *     bytes read beyond the L2 says so, inside the rows (block_order_rows);
 *   - a channel-last conv left to the MR x U tiles (a 1x1 on wide rows, or output channels
 *     that are no multiple of the block) has its pixels coalesced into one loop if it is a
 *     1x1 (coalesce_channel_last), and weights beyond half the L2 cut into chunks of output
 *     channels, the chunk loop outermost, where the same model of far bytes says so
 *     (weight_chunks: SqueezeNet's 512 -> 1000 classifier);
 *   - a contraction's parallel loop that some load reads only as v / D (a grouped conv's
 *     output channels) is split by D, so that the channels of one group, which share the
 *     input loads, are blocked like a dense conv's (group_split); where a group's channels
 *     are whole vectors, the split comes first, and each group is then padded, laid out and
 *     blocked as a dense conv (conv_nest passes over the groups' loop); groups of fewer
 *     channels than a vector's lanes run channel-last like the depthwise convs, several groups
 *     a vector (channelwise; passes/sched_group.c);
 *   - in other kernels, with vectors and without --fp-strict, a loop over rows whose body
 *     reduces each row along a loop that becomes a vector reduction (below) is jammed by 4
 *     rows (row_jam: softmax, LayerNorm, reductions over the last axis);
 *   - in every kernel, the innermost loops that only store (elementwise, copies, the last loop
 *     of a softmax) are strip-mined the same way with U = 1;
 *   - last, innermost reduction loops outside vector loops that read an operand contiguously
 *     (softmax's max and sum, LayerNorm's moments, reductions over the last axis, dot products
 *     along K) and run for at least two vectors become vector reductions, `[reduction,
 *     vector]` (kir.h: vreduce), unless --fp-strict. A contraction's J whose reduction
 *     operands are all strided along it (weights [N, K]) is not vectorised, so that its
 *     reduction is: its lanes would all be gathers.
 *   - on a microcontroller (no float vectors), the kernels of a quantized model are scheduled
 *     for code size first (size_first: fewer copies, no border pieces, coalesced elementwise
 *     loops), as their code is what decides whether the model fits its flash.
 *   - without float vectors, a float depthwise conv on rows of a few pixels has its rows
 *     peeled, whole rows jammed, two rows blocked around them and its taps unrolled
 *     (scalar_channelwise).
 * A loop whose iterations cannot be lanes (an if or loop bound that depends on its variable,
 * a register set inside and read after it) stays scalar.
 * Legality, per loop (iterations_independent). Iterations of J (and of L) are independent
 * when the kernel never loads what it stores (no KP_INOUT, no input sharing storage with an
 * output; write-once makes distinct iterations store distinct elements) or, in a kernel with
 * state (a recurrence's h and c), when within one run of the loop each iteration stores its
 * own elements and reads back only those; and every register the body sets is set before it
 * is read and not read after the loop (lanes_ok, body_private);
 * registers are renamed per copy, while registers only read are shared. Each accumulator still
 * sums its terms in the original order (vector reductions aside, which --fp-strict does not
 * make), so at --fp-strict results are bitwise those of the scalar loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loops.h"
#include "pipeline.h"
#include "sched_tile.h"
#include "sched_group.h"
#include "sched_stream.h"
#include "tune.h"

/* The register block of a target without float vectors: SCALAR_COPIES (at most) side by side
 * along J, up to SCALAR_ROWS rows or channels around them while they hold at most SCALAR_ACCS
 * accumulators (scalar_rows). */
enum { MAX_JAM_NODES = 40000, MAX_ROWS = 8, SCALAR_COPIES = 16, SCALAR_ROWS = 4, SCALAR_ACCS = 24 };
/* ... and at most BLOCKED_COPIES side by side where the rows are blocked too (tile_copies). */
enum { BLOCKED_COPIES = 6 };
/* The same for the int32 accumulators of dot4 kernels (int8 convs and dense layers), which
 * live in the 13 or so core registers next to the pointers and the unpacked operands of the
 * backend's smlads: 2 pixels x 3 channels (each input word unpacked once for 3 channels, each
 * weight word for 2 pixels), 4 channels of one pixel where the input words are assembled
 * from bytes (copies_cap; a dense layer). Measured on the firmware's int8 models (QEMU
 * counts, whole runs): 16 x 2 as for floats spilled; 4 pixels x 2 channels cost 3-25% more
 * per conv than 2 x 4, which still spilled: 2 x 3 and 1 x 4 took the KWS model from 8.86M to
 * 8.55M instructions and LeNet from 1.34M to 1.31M; 6 channels of a dense layer spilled. */
enum { INT_COPIES = 2, INT_ROWS = 4, INT_ACCS = 6 };
/* Conv weights from which peel_rows pays: beyond L1, a border pixel at MR = 1 waits on its
 * weight loads (ResNet-18's 37 KB stem ran ~3% slower with it, its 147 KB layer1 ~5% faster). */
enum { ROW_PEEL_BYTES = 64 * 1024 };
/* Taps per output (C x kh x kw) up to which a conv on a map of two vectors' width or more runs
 * its vectors along the width (conv_layout). Along the channels each output vector is a
 * scatter into NCHW (16 stores 12 KiB apart for a 112-wide map) paid once per reduction: with
 * ResNet-18's stem, 147 taps, ~40% of the FMA peak against ~75% along the width; its 3x3
 * convs (576 taps and more) reach 80-90% along the channels and stay so. Without vectors
 * (Cortex-M4) the same choice keeps the channels outside the columns that scalar_tile jams,
 * each input element loaded feeding several channels: models/example's conv (1 input
 * channel, 9 taps) 2.28 instructions per multiply-accumulate against 3.21 channel-innermost. */
enum { WIDTH_TAPS = 256 };

/* ---- vectors ---- */

/* Integer contractions (QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger, and the QDQ
 * groups fuse_qdq turns into them): the size of their widest integer accumulator, whose
 * lanes (not the 8-bit output's) the vectors are made of; 0 for every other kernel. */
static int int_acc_size(const Kernel *k) {
    int esz = 0;
    if (k->kclass != KC_CONTRACTION) return 0;
    for (int r = 0; r < k->nscalars; r++)
        if (!dtype_is_float(k->scalars[r])) esz = MAX(esz, (int)dtype_size(k->scalars[r]));
    return esz;
}

static bool expr_dot4(const Expr *e) {
    if (e->kind == E_BIN && (e->op == K_DOT4 || e->op == K_DOT2)) return true;
    for (int i = 0; i < e->nargs && e->kind != E_LOAD; i++)
        if (expr_dot4(e->args[i])) return true;
    return false;
}

static bool list_dot4(const Stmt *s) {
    for (; s; s = s->next)
        if ((s->val && expr_dot4(s->val)) || list_dot4(s->body) || list_dot4(s->then) || list_dot4(s->els)) return true;
    return false;
}

/* An integer contraction of dot4 words (an int8 conv or dense layer in the dot4 form), whose
 * accumulators a target without float vectors keeps in core registers (INT_COPIES). */
static bool dot4_kernel(const Kernel *k) { return int_acc_size(k) > 0 && list_dot4(k->body); }

/* The operand and output types whose layouts the contraction policy changes: float, any in
 * an integer contraction (8-bit weights, 8-bit or int32 outputs), and the 8-bit inputs and
 * outputs of an integer conv accumulated in float (passes/ops/conv.c, float_exact). */
static bool layout_type(const Kernel *k, DType t) {
    return dtype_is_float(t) || int_acc_size(k) > 0 ||
           (k->kclass == KC_CONTRACTION && (t == DT_UINT8 || t == DT_INT8 || t == DT_UINT16));
}

/* Conv weights in the cm layout [C, taps..., M] of a single tap (a 1x1 conv). */
static bool one_tap(const Buf *w) { return w->rank >= 3 && kir_numel(w) == w->dims[0] * w->dims[w->rank - 1]; }

/* The weights of a convolution nest of rank r: w[m, c, t...] of rank r, or in an integer
 * contraction the dot4 words w4[m, k4] of a matrix product (passes/ops/conv.c), rank 2,
 * with vectors (the channel-last layouts; without them scalar_tile packs those words). */
static bool conv_weights(const Program *p, const Kernel *k, const Buf *w, int r) {
    return w->rank == r || (p->vector_bytes >= 16 && int_acc_size(k) > 0 && w->rank == 2);
}

/* Temporaries the channel-last layouts may permute: float, and the 8-bit activations of
 * integer models. */
static bool activation_type(DType t) { return dtype_is_float(t) || t == DT_UINT8 || t == DT_INT8 || t == DT_UINT16; }

/* ---- microcontrollers: code size first ----
 * On a target without float vectors (vector_bytes 4: Cortex-M4, RV32, the backend's
 * Target.small_code) a quantized model's flash is its 8-bit weights plus its code, and the
 * code of register tiles, their rest pieces and border pieces is what decides whether it
 * fits (issue 9: at most 0.3x the float model's flash; the KWS model's weights, multipliers
 * and biases alone are 0.27x of it). So in the kernels of such a model (an 8-bit operand, as
 * the backend's small_kernel tells them) the policy gives up a little speed for code:
 *   - kernels with no or few multiply-accumulates (a pool, a dense layer of less than
 *     FEW_MACS of the model's products: KWS's last Gemm, 768 of 2.66M) get no register tile;
 *   - the pixels of a dot4 conv are jammed only by a divisor of their number (KWS's first
 *     conv, 125 pixels: 4 channels x 1 pixel instead of 2 x 2 and a rest block of 1 pixel);
 *   - a conv of the plain form (a depthwise conv) keeps its border tests instead of border
 *     pieces, each a copy of the body (conv_layout);
 *   - the loops of an elementwise kernel over contiguous buffers are one loop.
 * Cortex-M4, KWS int8 (QEMU counts, whole run, after the outlined epilogues of
 * backend/kernel.c): 3.7 KB -> 2.7 KB of code (with fuse's unfused residual Adds), 7.66M
 * -> 7.56M instructions (7.40M before the outlined epilogues); the depthwise convs 5.29 ->
 * 5.12 instructions per multiply-accumulate unpeeled (their tests cost less than the
 * peeled pieces' extra epilogue calls), the first conv 2.20 -> 2.37. */
enum { FEW_MACS = 100 };            /* a kernel with less than 1/100 of the model's MACs */

static bool size_first(const Program *p, const Kernel *k) {
    return p->vector_bytes <= 4 && kir_byte_kernel(k);
}

static int64_t kernel_macs(const Kernel *k) {
    int64_t macs, bytes;
    kir_kernel_cost(k, &macs, &bytes);
    return macs;
}

static int lanes(const Program *p, const Kernel *k);

/* A size_first kernel without float vectors whose multiply-accumulates are too few to pay
 * for a register tile (the model has `all`). A band's copy of a layer (band_rows) counts
 * the MACs of all its copies: they run the same code (merged by LLVM's mergefunc). */
static bool few_macs(const Program *p, const Kernel *k, int64_t all) {
    if (!size_first(p, k) || lanes(p, k) >= 2) return false;
    int64_t own = kernel_macs(k) * (k->copies > 1 ? k->copies : 1);
    return own == 0 || own * FEW_MACS < all;
}

/* A size_first elementwise or copy kernel's perfect loop nest coalesced from the inside
 * out while its buffers allow (loop_coalesce): one loop and one counter instead of four. */
static void coalesce_nest(Program *p, Kernel *k) {
    for (;;) {
        Stmt *o = k->body;
        if (!o || o->kind != S_LOOP || o->next) return;
        while (o->body && o->body->kind == S_LOOP && !o->body->next && o->body->body &&
               o->body->body->kind == S_LOOP && !o->body->body->next)
            o = o->body;
        if (!loop_coalesce(p, k, o, false)) return;
    }
}

/* Elements of the output type in one target vector; of the accumulators when wider (an
 * integer convolution sums 8-bit products in int32 registers: int_acc_size). One on a target
 * without float vectors (Cortex-M4, RV32: vector_bytes 4, one float): four 8-bit elements
 * "vectors" there were only four unrolled copies of the kernel body, each converted element
 * by element (the quantized models' pads, pools, (de)quantisations; Cortex-M4: KWS int8
 * -0.5 KB of code, lenet_qop -0.6 KB, mlp -0.5 KB, for 14% more instructions in the small
 * mlp model's elementwise kernels). */
static int lanes(const Program *p, const Kernel *k) {
    int esz = 4;
    for (int i = 0; i < k->nparams; i++)
        if (k->modes[i] & KP_OUT) esz = (int)dtype_size(k->params[i]->dtype);
    esz = MAX(esz, int_acc_size(k));
    if (k->kclass == KC_CONTRACTION)    /* float accumulators of 8-bit outputs: float_exact */
        for (int r = 0; r < k->nscalars; r++) esz = MAX(esz, (int)dtype_size(k->scalars[r]));
    int w = p->vector_bytes > esz ? p->vector_bytes / (esz ? esz : 4) : 1;
    if (p->vector_bytes <= 4) w = 1;
    return MIN(w, MAX_LANES);
}

/* Vector registers of the target: 32 with AVX-512, 16 on the others we vectorise for. */
static int vregs(const Program *p) { return p->vector_bytes >= 64 ? 32 : 16; }
/* The vectors side by side (U) of a register tile with rows blocked around it: 4 with 32
 * vector registers, 2 with 16; a tile of output channels or pixels is lanes x this. */
static int tile_vectors(const Program *p) { return vregs(p) >= 32 ? 4 : 2; }

/* The vectors side by side (U) for loop l: with rows blocked around it, few enough that
 * rows x U accumulators fit the registers; alone (a matrix-vector product), more, so that
 * more independent chains hide the add latency and each weight row is read in one stream. */
static int vector_copies(const Program *p, const Kernel *k, const Stmt *l, bool blocked) {
    int64_t n = l->hi->i - l->lo->i, w = lanes(p, k);
    int cap = tile_vectors(p);
    if (!blocked) cap *= 2;
    return (int)MAX(1, MIN(n / w, cap));
}

/* Vectorises the loops over variable v among the statements from *at up to `stop` and
 * the loops directly inside them. */
static void vectorize_var(Program *p, Kernel *k, Stmt *s, const Stmt *stop, int v) {
    for (; s && s != stop; s = s->next) {
        if (s->kind != S_LOOP) continue;
        if (s->var == v) loop_vectorize(p, k, s);
        else vectorize_var(p, k, s->body, NULL, v);
    }
}

/* Loop *at (lanes_ok) as vectors of w lanes, u of them side by side: split by w, the tile
 * loop jammed by u (the tiles left over jammed again as one, or unrolled when one tile), the
 * lanes left (at least 2) split off as one narrower vector, a last single one kept as a
 * scalar loop. With `redo` (iterations that may be done twice: loop_overlap), lanes left
 * that are not a power of two (which LLVM splits into pieces: a 13-lane stride-2 load became
 * 8 loads and inserts) instead join the tiles left over in one block of whole vectors,
 * started back early enough: the loop is peeled after its whole u-tiles, and the piece
 * grown back to whole vectors (ResNet-18's stem, 109 interior columns: 4 + 3 vectors, the
 * last redoing 3 columns; 13 lanes alone ran ~15% slower). Every vector gets registers of its own (split renames them), so that the
 * scalar loops of the same variable elsewhere (the rest, a conv's border) stay scalar. */
static void vector_tile(Program *p, Kernel *k, Stmt **at, int w, int u, bool redo) {
    Stmt *l = *at;
    int64_t n = trips(l), t = n / w, r = n % w;
    if (redo && t >= 1 && r >= 2 && (r & (r - 1))) {
        int64_t back = t >= u ? t % u * w + r : r;
        loop_peel(p, k, at, 0, back);
        Stmt *tail = l->next;
        vector_tile(p, k, at, w, u, false);
        loop_overlap(p, k, tail, w - r);
        while (*at != tail) at = &(*at)->next;
        vector_tile(p, k, at, w, (int)(back + w - r) / w, false);
        return;
    }
    Stmt *in = loop_split(p, k, at, w);
    if (in) {
        Stmt **o = at;
        if (u > 1 && t >= u) {
            Stmt *main = loop_jam(p, k, o, u);
            o = &main->next;
            t %= u;
        }
        if (t && *o != l && *o != l->next) {
            if (t >= 2 && u > 1) loop_jam(p, k, o, (int)t);
            if (u > 1) loop_unroll(p, k, o);
        }
        vectorize_var(p, k, *at, r ? l : l->next, in->var);
    }
    if (r >= 2) {
        while (*at != l) at = &(*at)->next;
        in = loop_split(p, k, at, r);
        loop_unroll(p, k, at);
        loop_vectorize(p, k, *at);
    }
}

/* ---- contractions: operand layouts and borders ---- */

static bool has_reduction_child(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_LOOP && (s->hints & LH_REDUCTION)) return true;
    return false;
}

/* Links to the perfect nest of parallel loops at the top of the kernel, outermost first;
 * returns their count. */
static int parallel_nest(Kernel *k, Stmt ***links) {
    int n = 0;
    for (Stmt **at = &k->body; *at && !(*at)->next && (*at)->kind == S_LOOP && n < MAX_RANK + 1 &&
                               !((*at)->hints & (LH_REDUCTION | LH_VECTOR)) && const_loop(*at) && (*at)->step == 1;
         at = &(*at)->body)
        links[n++] = at;
    return n;
}

/* parallel_nest through the tile loops of group_split (the groups of a grouped conv, split
 * off before its layout): those are passed over, not listed, so that the nest is the one
 * of a dense conv inside one group. */
static int conv_nest(Kernel *k, Stmt ***links) {
    int n = 0;
    for (Stmt **at = &k->body; *at && !(*at)->next && (*at)->kind == S_LOOP && n < MAX_RANK + 1 &&
                               !((*at)->hints & (LH_REDUCTION | LH_VECTOR)) && const_loop(*at);
         at = &(*at)->body)
        if ((*at)->step == 1)
            links[n++] = at;
        else if (!((*at)->hints & LH_TILE))
            break;
    return n;
}

/* The first store of the list. */
static const Stmt *first_store(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_STORE) return s;
    return NULL;
}

static bool is_var(const Expr *e, int v) { return e->kind == E_VAR && e->var == v; }

/* v, or g + v with g another variable (a channel of a grouped conv after group_split: the
 * group's tile variable plus the channel in it) */
static bool chan_index(const Expr *e, int v) {
    return is_var(e, v) || (e->kind == E_BIN && e->op == K_ADD &&
                            ((is_var(e->args[1], v) && e->args[0]->kind == E_VAR && e->args[0]->var != v) ||
                             (is_var(e->args[0], v) && e->args[1]->kind == E_VAR && e->args[1]->var != v)));
}

/* chan_index, or v * s + r with constants s, r (a ConvTranspose phase storing into its
 * strided output positions: passes/ops/conv.c) */
static bool out_index(const Expr *e, int v) {
    if (chan_index(e, v)) return true;
    if (e->kind == E_BIN && e->op == K_ADD && e->args[1]->kind == E_CONST) e = e->args[0];
    return e->kind == E_BIN && e->op == K_MUL && is_var(e->args[0], v) && e->args[1]->kind == E_CONST;
}

/* A constant operand that can be re-laid out, not written here: a constant or a view of one
 * (the same bytes in another shape, as a ConvTranspose lowered to a vector-matrix product reads
 * its weights; kir_view_new gives a view its root's kind and data). */
static bool packable(const Kernel *k, const Buf *b) {
    int i = kir_param_index(k, b);
    return i >= 0 && b->kind == B_CONST && k->modes[i] == KP_IN;
}

/* Loads in reductions: the first of a packable buffer of rank `rank` whose indices are
 * (v, reduction variables...) when `conv`, or {k, j} in either order for a matrix; and
 * whether a load of another buffer reads variable `avoid`. */
typedef struct Operand {
    Buf *b;
    bool transposed;                /* a matrix read as b[j, k] */
    bool other_reads;               /* another buffer's load reads `avoid` */
    int64_t stride;                 /* largest coefficient of `col` in other buffers' indices */
    bool col_last;                  /* another buffer's load reads `col` in its last index */
} Operand;

static void find_operand(const Kernel *k, const Expr *e, const bool *red, int v, int kv, int col, Operand *o) {
    for (int i = 0; i < e->nargs; i++) find_operand(k, e->args[i], red, v, kv, col, o);
    if (e->kind != E_LOAD) return;
    bool mine = false;
    if (packable(k, e->buf) && layout_type(k, e->buf->dtype) && !o->b) {
        if (kv < 0 && e->nargs >= 2 && chan_index(e->args[0], v)) {
            mine = true;
            for (int d = 1; d < e->nargs; d++) mine &= e->args[d]->kind == E_VAR && red[e->args[d]->var];
        } else if (kv >= 0 && e->nargs == 2) {
            mine = (is_var(e->args[0], kv) && is_var(e->args[1], v)) || (is_var(e->args[0], v) && is_var(e->args[1], kv));
            o->transposed = mine && is_var(e->args[0], v);
        }
        if (mine) o->b = e->buf;
    }
    if (mine || e->buf == o->b) return;
    for (int d = 0; d < e->nargs; d++) {
        if (kv < 0 && expr_reads_var(e->args[d], v)) o->other_reads = true;
        o->stride = MAX(o->stride, llabs(expr_coef(e->args[d], col)));
    }
    if (e->nargs && expr_reads_var(e->args[e->nargs - 1], col)) o->col_last = true;
}

/* The loads inside the reduction loops of the list (in_red: the list is in one). */
static void find_operands(const Kernel *k, const Stmt *s, bool *red, bool in_red, int v, int kv, int col, Operand *o) {
    for (; s; s = s->next) {
        bool r = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (s->kind == S_LOOP && r) red[s->var] = true;
        if (s->val && in_red) find_operand(k, s->val, red, v, kv, col, o);
        find_operands(k, s->body, red, r, v, kv, col, o);
        find_operands(k, s->then, red, in_red, v, kv, col, o);
        find_operands(k, s->els, red, in_red, v, kv, col, o);
    }
}

enum { L2_BYTES = 1 << 20 };

/* Where a packed GEMM's panel loop goes, from a model of the bytes it reads from beyond the
 * L2 (as block_order_rows does for convs): with the rows outermost (the default) every block
 * of MR rows streams all of B, from beyond the L2 once B does not fit there; with the panels
 * outermost each panel stays in the L2 over all rows if it fits there next to a block of
 * rows of A (else it too is read once per block), and A is read once per panel, from the
 * L2 if it fits there next to a panel. MR is taken as 6 (the AVX-512 tile; fewer rows per
 * block only favour the panels more). The smaller wins; a tie keeps the rows outermost. A
 * dense layer of ConvNeXt's last stage ([49, 768] x [768, 3072], 9.4 MB of weights) read B
 * 9 times from DRAM with the rows outermost, at ~14% of the FMA peak. The inputs are printed
 * in the schedule line: `panels(b 9437184, rows 49, row 3072, panel 393216)`. */
static bool panels_outer(Program *p, Kernel *k, int64_t bbytes, int64_t rows, int64_t rowbytes, int64_t panel) {
    int64_t abytes = rows * rowbytes, npanels = bbytes / panel, blocks = (rows + 5) / 6;
    int64_t far_rows = abytes + (bbytes <= L2_BYTES ? bbytes : bbytes * blocks);
    int64_t far_panels = (panel + 6 * rowbytes <= L2_BYTES ? bbytes : bbytes * blocks) +
                         (abytes + panel <= L2_BYTES ? abytes : abytes * npanels);
    if (far_panels >= far_rows) return false;
    sched_note(p, k, "panels(b %lld, rows %lld, row %lld, panel %lld)", (long long)bbytes, (long long)rows,
               (long long)rowbytes, (long long)panel);
    return true;
}

/* Gemm/MatMul with a constant B: the column loop J (innermost parallel, around the reduction
 * over k) split into panels of 8 target vectors (at most 64 columns) and B packed as
 * [ceil(N/pw), K, pw], so that the reduction reads one panel front to back where B itself
 * would be read pw columns a row, a row apart (4 KiB at N = 1024: a new page every load,
 * which the prefetchers do not follow). A last partial panel (N = 1000: 7 panels and 104
 * columns) is padded with zeros that no loop reads: the columns left after the split read it
 * at a constant panel index. A B read transposed (b[j, k], Gemm's transB) with at most one
 * panel of columns is packed [K, N] instead, so that its columns become vectors with each
 * a[i, k] broadcast, where they would gather; from 4 vectors of columns, below which the
 * dot products as vector reductions along k (pick_loops) keep more FMA chains going than
 * the few accumulators of a narrow J (transB 1280 -> 1000 at 8 rows 440 -> 125 us, at one row
 * unchanged, ~50 us, bound by reading B; 256 -> 128 at one row 1.1 -> 0.9 us; rough).
 * 64 columns, not 128, with AVX-512: one register tile's width (4 vectors), so that a tile
 * reads its panel front to back, 256 bytes a k, where in a panel of two tiles it read every
 * other 256 bytes and the two tiles' panels evicted each other from the L1 ([197, 128] x
 * [128, 3072] 71 -> 79% of the FMA peak, [197, 768] x [768, 3072] 68 -> 70%, on a Xeon,
 * interleaved; whole transformers within noise); and the AVX2 level's panels (8 of its
 * vectors) are then the same bytes, which a default object keeps once (ViT-B/16's default
 * object 686 -> 346 MB, compiled in 10 s instead of 17). */
static void distribute(Program *p, Kernel *k, Stmt *l);
static void pack_panels(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1], **jat, *j, *red;
    Operand o;
    int n;
    for (bool again = true; again;) {
        n = parallel_nest(k, nest);
        if (n < 1 || p->vector_bytes < 16) return;
        jat = nest[n - 1], j = *jat, red = j->body;
        while (red && !(red->kind == S_LOOP && (red->hints & LH_REDUCTION))) red = red->next;
        if (!red) return;
        o = (Operand){0};
        bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
        find_operands(k, red, rv, false, j->var, red->var, -1, &o);
        if (!o.b || o.b->rank != 2) return;
        /* rows spread over several loops (Swin's [1, 14, 14, 384] x [384, 1536], a
         * sequence-first [197, 1, 768] x [768, 2304]) made one loop where the operands allow
         * it: the rows then come in whole blocks of MR but for the last (14 rows of a map:
         * 6 + 6 + 2 per map row), and panels_outer weighs all of them */
        again = n >= 3 && loop_coalesce(p, k, *nest[n - 3], true);
    }
    int64_t nd = trips(j), esz = (int64_t)dtype_size(o.b->dtype), pw = MIN(8 * p->vector_bytes / esz, 64);
    int jd = o.transposed ? 0 : 1;
    if (pw < 4 || j->lo->i != 0 || o.b->dims[jd] != nd) return;
    /* a B beyond the L2 over a long K: narrower panels (down to 4 vectors, a register tile's
     * width, and 256 bytes a k at least, so that every ISA level of a default object packs
     * the same panels) that fit the L2 next to a block of rows, so that
     * panels_outer can keep one there (ViT's [197, 3072] x [3072, 768]: 1.5 MB panels of 128
     * columns, 768 KB of 64) */
    int64_t kd = o.b->dims[1 - jd];
    while (kir_nbytes(o.b) > L2_BYTES && pw > MAX(4 * p->vector_bytes, 256) / esz && kd * pw * esz > L2_BYTES / 2)
        pw /= 2;
    if (nd <= pw) {
        if (o.transposed && nd * esz >= 4 * p->vector_bytes) {
            PackDim pd[2] = {{1, 0, false}, {0, 0, false}};
            loop_pack(p, k, o.b, "kn", 2, pd);
        }
        return;
    }
    loop_split(p, k, jat, pw);
    PackDim pd[3] = {{jd, pw, false}, {1 - jd, 0, false}, {jd, pw, true}};
    loop_pack(p, k, o.b, arena_printf(p->arena, "panels%lld", (long long)pw), 3, pd);
    /* the rows: the innermost enclosing loop of more than one trip, loops of one trip between
     * passed over (a sequence-first [197, 1, 768] MatMul's batch of one, under the rows: with
     * only that loop looked at, ViT's in-projection streamed its 7 MB of weights from beyond
     * the L2 for every block of rows, at ~55% of the FMA peak) */
    int ri = n - 2;
    while (ri > 0 && trips(*nest[ri]) == 1) ri--;
    if (ri < 0 || (*nest[n - 2])->body != *jat ||
        !panels_outer(p, k, kir_nbytes(o.b), trips(*nest[ri]), trips(red) * esz, pw * esz * trips(red)))
        return;
    /* the columns left after the whole panels (N = 1000, a vocabulary) get row loops of their
     * own, so that the panels' loop nest is perfect */
    if ((*jat)->next)
        for (int l = n - 2; l >= ri; l--) distribute(p, k, *nest[l]);
    for (int l = n - 2; l >= ri; l--) loop_interchange(p, k, *nest[l]);    /* the panels up to ri */
}

/* A 1x1 convolution (stride 1, no padding): its last two output loops (rows, columns) read
 * the input and write the output (and any fused residual) only at [.., oh, ow] of buffers
 * [.., OH, OW]: loop_coalesce makes them one loop p over the OH*OW pixels, so the kernel is a
 * GEMM y[n, m, p] = sum_c w[m, c] x[n, c, p] whose columns p the contraction policy runs as
 * U vectors, the output channels m blocked by MR, each w[m, c] broadcast: contiguous loads and
 * stores where the channel-last form would store each output pixel M floats apart. */
static void pixel_chunks(Program *p, Kernel *k);
static bool has_conds(const Stmt *s);

/* The trips of the reduction loops nested at the top of list s (a conv's C x kh x kw). */
static int64_t reduction_trips(const Stmt *s) {
    int64_t n = 1;
    while (s && !(s->kind == S_LOOP && (s->hints & LH_REDUCTION))) s = s->next;
    for (; s && s->kind == S_LOOP && (s->hints & LH_REDUCTION) && const_loop(s); s = s->body) n = sat_mul(n, trips(s));
    return n;
}

/* Whether a 1x1 conv is better left to conv_layout's channel-innermost form (output channels
 * as vectors, each input pixel broadcast, the weights packed) than coalesced into a GEMM along
 * its pixels: where the pixels of a channel plane are no whole number of vectors, the pixel
 * vectors either leave lanes idle (7x7 = 49 pixels: 4 AVX-512 vectors for 3.06 of work) or
 * start each channel's row off a vector boundary, every load split across two cache lines
 * (35x35, 17x17, 14x14); with a long reduction (WIDTH_TAPS channels or more), the one
 * scattered store per output vector that the channel form pays is small next to it. Measured
 * alone, one thread, AVX-512 (Xeon, onnxcc bench): 2048 -> 512 on 7x7 55 -> 61% of the FMA
 * peak, 512 -> 2048 on 7x7 50 -> 59%, 1024 -> 256 on 14x14 65 -> 75%, 768 -> 192 on 17x17
 * 61 -> 67%; but 32 -> 64 on 35x35 (short reduction) 58 -> 43% and 288 -> 64 on 36x36
 * (whole vectors) 68 -> 48%, which stay coalesced, and so do convs of fewer than 8 vectors of
 * output channels (InceptionV3's 288 -> 64 on 35x35: 54% alone either way, in the model 48 ->
 * 39%). AVX-512 only: with AVX2's 32-byte vectors
 * (a split load one in two, fewer idle lanes) the same six convs ran 5-20% slower so. */
static bool channels_over_pixels(const Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    int w = lanes(p, k);
    if (r < 4 || p->vector_bytes < 64 || int_acc_size(k) || p->fp_strict || !has_reduction_child((*nest[r - 1])->body))
        return false;
    int64_t plane = trips(*nest[r - 2]) * trips(*nest[r - 1]), m = trips(*nest[r - 3]);
    return plane % w != 0 && m >= 8 * w && reduction_trips((*nest[r - 1])->body) >= WIDTH_TAPS;
}

/* A Resize along one dim of an NHWC map (a channel_mover, its channel loop innermost) whose
 * channels are whole vectors keeps its columns apart from the channels (not coalesced into
 * one loop of W x C): only then can pad_in_place have it write its region of the padded
 * Concat after it (a bilinear U-Net's decoder: the coalesced view does not map into the
 * Concat's pixels, which are wider). With
 * the copies gone, its four Resize + Concat pairs went from 5.0 to 3.6 ms (one thread,
 * AVX-512, interleaved); DeepLabV3's pooling branch: 18 -> 11 us. */
static Stmt *channel_mover(Kernel *k, int dim);
static bool resize_vectors(Program *p, Kernel *k, const Stmt *c) {
    return lanes(p, k) >= 2 && channel_mover(k, 3) == c && const_loop(c) && trips(c) % lanes(p, k) == 0;
}

static void coalesce_pixels(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    if (r >= 3 && resize_vectors(p, k, *nest[r - 1])) return;
    if (r >= 3 && has_reduction_child((*nest[r - 1])->body) && loop_coalesce(p, k, *nest[r - 2], false))
        pixel_chunks(p, k);
}

/* The largest buffer the list loads at an index that reads variable v. */
static const Buf *widest_load(const Stmt *s, int v);
static const Buf *widest_in(const Expr *e, int v, const Buf *best) {
    if (e->kind == E_LOAD) {
        bool reads = false;
        for (int d = 0; d < e->nargs; d++) reads |= expr_reads_var(e->args[d], v);
        if (reads && (!best || kir_nbytes(e->buf) > kir_nbytes(best))) best = e->buf;
    }
    for (int i = 0; i < e->nargs; i++) best = widest_in(e->args[i], v, best);
    return best;
}
static const Buf *widest_load(const Stmt *s, int v) {
    const Buf *best = NULL, *b;
    for (; s; s = s->next) {
        if (s->val) best = widest_in(s->val, v, best);
        if ((b = widest_load(s->body, v)) && (!best || kir_nbytes(b) > kir_nbytes(best))) best = b;
        if ((b = widest_load(s->then, v)) && (!best || kir_nbytes(b) > kir_nbytes(best))) best = b;
        if ((b = widest_load(s->els, v)) && (!best || kir_nbytes(b) > kir_nbytes(best))) best = b;
    }
    return best;
}

/* A coalesced 1x1 conv y[n, m, p] = sum_c w[m, c] x[n, c, p] runs its blocks of MR output
 * channels outermost, each streaming all of x: from beyond the L2 once x does not fit there
 * (DenseNet-121's transition and first dense block, 128 to 256 channels on 56x56: 1.6-3.2 MB
 * of input read 22 times, at 27-30% of the FMA peak). Then the pixels are cut in chunks whose
 * input fits in half the L2, the chunk loop outermost (the weights, read once per chunk, are
 * small next to x here: at most 256 x 128 floats), the rest of the pixels a nest of their
 * own. Printed as `pixel_chunks(in X, chunk C)`. */
static void pixel_chunks(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    if (r < 3 || lanes(p, k) < 2 || has_conds(k->body)) return;
    Stmt *m = *nest[r - 2], *px = *nest[r - 1];
    if (!has_reduction_child(px->body) || !const_loop(px) || !const_loop(m)) return;
    const Buf *x = widest_load(px->body, px->var);
    if (!x) return;
    int64_t batch = 1, q = (int64_t)lanes(p, k) * tile_vectors(p);
    for (int d = 0; d < r - 2; d++) batch *= trips(*nest[d]);
    int64_t xbytes = (int64_t)kir_nbytes(x) / MAX(batch, 1), per = xbytes / MAX(trips(px), 1);
    int64_t chunk = per > 0 ? (L2_BYTES / 2) / per / q * q : 0;
    if (xbytes <= L2_BYTES || trips(m) < 4 * MAX_ROWS || chunk < q || chunk >= trips(px)) return;
    sched_note(p, k, "pixel_chunks(in %lld, chunk %lld)", (long long)xbytes, (long long)chunk);
    loop_split(p, k, nest[r - 1], chunk);
    for (int d = r - 2; d >= 0; d--) distribute(p, k, *nest[d]);
    for (int d = r - 2; d >= 1; d--) loop_interchange(p, k, *nest[d]);
}

/* Does e (or an index in it) load some buffer at an index that reads variable v? */
static bool loads_with(const Expr *e, const Buf *b, int v) {
    if (!e) return false;
    if (e->kind == E_LOAD && e->buf == b)
        for (int d = 0; d < e->nargs; d++)
            if (expr_reads_var(e->args[d], v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (loads_with(e->args[i], b, v)) return true;
    return false;
}
static bool list_loads_with(const Stmt *s, const Buf *b, int v) {
    for (; s; s = s->next)
        if (loads_with(s->val, b, v) || list_loads_with(s->body, b, v) || list_loads_with(s->then, b, v) ||
            list_loads_with(s->els, b, v))
            return true;
    return false;
}

/* The first store in list s or, where s is one loop, in its body, and so on down (the
 * store of an output pixel under the spatial loops of a nest). */
static const Stmt *nest_store(const Stmt *s) {
    for (; s; s = s->body) {
        const Stmt *st = first_store(s);
        if (st || s->kind != S_LOOP || s->next) return st;
    }
    return NULL;
}

/* A conv run along the width (vectors of pixels, block_list's tiles of MR output channels
 * around them) has its channel tiles outermost, each streaming the whole input row by row:
 * from beyond the L2 when the input does not fit there (ESPCN's 64 -> 32 3x3 conv on 224x224,
 * 13 MB of input read 6 times: 44% of the FMA peak on a Xeon). Where the input exceeds half
 * the L2, each tile loop (the tiles, and the rest's tile) is put inside the rows: the 3 input
 * rows of an output row (64 x 3 x 226 floats there) then stay in the cache over all the
 * channel tiles. A 3-D conv's tile goes inside its depth and its rows, the loops between it
 * and the width (R(2+1)D-18's 1x3x3 convs of 64 -> 144 channels on 16x56x56, 14 MB of
 * input read 18 times: ~51% of the FMA peak, its temporal 3x1x1s 75%). Printed as
 * interchanges of the tile loop. */
static void rows_outside_tiles(Program *p, Kernel *k, Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind != S_LOOP || (s->hints & (LH_REDUCTION | LH_VECTOR))) continue;
        Stmt *row = s->body;
        if (!(s->hints & LH_TILE)) {
            if (trips(s) == 1) rows_outside_tiles(p, k, s->body);   /* the batch of one */
            continue;
        }
        const Stmt *st = nest_store(row);
        Stmt *t = s;                /* the tile loop, moving down (an interchange swaps headers) */
        for (int d = 2; st && d + 1 < st->buf->rank; d++) {
            if (!row || row->next || row->kind != S_LOOP || (row->hints & (LH_TILE | LH_REDUCTION | LH_VECTOR)) ||
                !const_loop(row) || row->step != 1 || !expr_reads_var(st->idx[d], row->var))
                break;
            if (d == 2) {
                const Buf *x = widest_load(row->body, row->var);
                if (!expr_reads_var(st->idx[1], t->var) || !x ||
                    list_loads_with(row->body, x, t->var) || (int64_t)kir_nbytes(x) <= L2_BYTES / 2)
                    break;
            }
            if (!loop_interchange(p, k, t)) break;
            t = t->body;
            row = t->body;
        }
    }
}

/* The same for a conv whose pixels are coalesced into one loop inside its channel tiles (a
 * conv with taps along an outer dim, which stays a loop of its own: R(2+1)D-18's temporal
 * 3x1x1 convs, 144 -> 64 channels on 16 x 56x56, read for each output frame three input
 * frames, 5.4 MB, once per tile of 6 output channels: 21% of the FMA peak on a Xeon, whose
 * L3 serves one core far slower than its L2). Where one channel tile's pass over the pixels
 * reads more than half the L2 (the reduction's trips per pixel, as elements of the input),
 * the pixels are cut in chunks of whole register tiles whose input fits in half the L2, and
 * the chunk loop put outside the channel tiles (the rest of the pixels a loop of its own):
 * a chunk's input (144 x 3 x 256 floats there) then stays in the L2 over all the channel
 * tiles. Looks for tile loops in list s; printed as split, distribute and interchange. */
static void pixel_tiles_outside(Program *p, Kernel *k, Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind != S_LOOP || (s->hints & (LH_REDUCTION | LH_VECTOR)) || !const_loop(s)) continue;
        if (!(s->hints & LH_TILE)) {
            pixel_tiles_outside(p, k, s->body);
            continue;
        }
        Stmt *px = s->body;
        if (!px || px->next || px->kind != S_LOOP || (px->hints & (LH_TILE | LH_REDUCTION | LH_VECTOR)) ||
            !const_loop(px) || px->step != 1)
            continue;
        const Stmt *st = nest_store(px->body);
        const Buf *x = widest_load(px->body, px->var);
        if (!st || st->buf->rank < 3 || !expr_reads_var(st->idx[1], s->var) ||
            !expr_reads_var(st->idx[st->buf->rank - 1], px->var) || !x || list_loads_with(px->body, x, s->var))
            continue;
        int64_t q = (int64_t)lanes(p, k) * tile_vectors(p);
        int64_t per = sat_mul(reduction_trips(px->body), (int64_t)dtype_size(x->dtype));
        int64_t chunk = per > 0 ? (L2_BYTES / 2) / per / q * q : 0;
        if (sat_mul(per, trips(px)) <= L2_BYTES / 2 || chunk < q || chunk >= trips(px)) continue;
        sched_note(p, k, "pixel_tiles_outside(%lld bytes a pixel, chunk %lld)", (long long)per, (long long)chunk);
        /* the chunk's pixels keep the policy's marks (PICKED: they are the vector loop) */
        unsigned marks = px->hints & ~(unsigned)(LH_TILE | LH_REDUCTION | LH_VECTOR | LH_REDO | LH_PARALLEL);
        Stmt *in = loop_split(p, k, &s->body, chunk);   /* not NULL: chunk < trips(px) */
        in->hints |= marks;
        distribute(p, k, s);
        loop_interchange(p, k, s);
    }
}

/* A convolution y[n, m, o...] (loops n, m, o... perfectly nested, the taps and channels
 * reductions inside, padded taps guarded by ifs):
 *   - with a constant one-group weight w[m, c, t...] and at least 8 output channels, the
 *     weights may be packed as [C, t..., M] and the channel loop sunk below the spatial ones
 *     (output channels innermost: vectors across channels, contiguous weight loads, each
 *     input element broadcast): everywhere when the conv is strided along its last dim
 *     (vectors along the width would gather every s-th input element) or has at least two
 *     target vectors of channels; else only in the border columns (whose per-tap tests keep
 *     them scalar along the width) when the target has vectors, the interior running along
 *     the width (16 channels at stride 1 run faster so). On AVX-512: stride-2 3x3 convs 2-6x
 *     faster, 32 -> 32 channels at 64x64 1.5x;
 *   - except with few taps per output (WIDTH_TAPS: a network's stem, 3 channels x 7x7) on a
 *     map of two target vectors' width or more read at a stride the backend loads as whole
 *     vectors: then only the border columns run channel-innermost and the interior along
 *     the width (contiguous stores, the output channels blocked around broadcast weights);
 *     the rows are distributed over the column pieces and each border column loop put
 *     outside its rows, so that block_list jams rows there (MR rows share each weight
 *     vector), where a border column alone ran at MR = 1;
 *   - the last spatial loop is peeled into a left border, an interior whose windows lie
 *     inside the input (no column test left) and a right border: the interior is the loop
 *     that becomes vectors, which needs a body without branches on its variable (with a
 *     guard per column LLVM 19 still vectorised a bare conv, but not one with a fused Relu:
 *     2x slower at 16 channels, 128x128). */
/* Peels loop *at at its interior (no-op if it has none or no border); returns the number of
 * pieces left at *at and the interior piece in *mid (NULL if none). */
static int peel_interior(Program *p, Kernel *k, Stmt **at, Stmt **mid) {
    int64_t front, back;
    *mid = *at;
    if (!loop_interior(p, k, *at, &front, &back) || (!front && !back)) return 1;
    *mid = loop_peel(p, k, at, front, back);
    return (front > 0) + (*mid != NULL) + (back > 0);
}

/* Splits loop l, whose body is several statements, into one loop per statement. */
static void distribute(Program *p, Kernel *k, Stmt *l) {
    Stmt *rest = l->body->next, *next = l->next, *last = l;
    if (!rest) return;
    sched_note(p, k, "distribute(i%d)", l->var);
    l->body->next = NULL;
    while (rest) {
        Stmt *x = ARENA_NEW(p->arena, Stmt);
        *x = *l;
        x->body = rest;
        rest = rest->next;
        x->body->next = NULL;
        last->next = x;
        last = x;
    }
    last->next = next;
}

/* A channel-last conv's rows and columns (*at: the row loop, the column loop its body) peeled
 * at their interiors: rows first, then the columns of each row piece; the interior rows are
 * then distributed over their column pieces, so that a border column of the interior rows is
 * a loop over the rows with no row test, which block_list jams (MR rows share each weight
 * load) where each border pixel alone ran at MR = 1, one FMA per weight vector loaded. */
static void peel_rows(Program *p, Kernel *k, Stmt **at) {
    Stmt *rmid;
    int n = peel_interior(p, k, at, &rmid);
    for (Stmt *x = *at; n-- > 0; x = x->next) {
        Stmt *cmid;
        if (x->body && x->body->kind == S_LOOP && !x->body->next) peel_interior(p, k, &x->body, &cmid);
    }
    if (rmid && rmid->body) distribute(p, k, rmid);
}

/* The policy's own marks in `hints`, cleared before the pass ends: PICKED, the loops it will
 * vectorise (a loop variable may have several loops: a convolution's border and interior
 * pieces), BLOCKED, those with rows blocked around them, and SHARED, the loops whose copies
 * may be blocked around them although the input they read ties them to the vectors (a
 * depthwise conv's columns: the copies still share every weight vector; without vectors,
 * its rows around the jammed columns, which share weights and input rows: block_factor
 * then takes DW_ROWS). */
enum { PICKED = 1u << 30, BLOCKED = 1u << 29, SHARED = 1u << 28 };
/* ... and, in the 4 bits at TILE_U_SHIFT of a picked loop, the vectors side by side that
 * block_factor's cost model chose for it (0: vector_copies decides). */
enum { TILE_U_SHIFT = 24, TILE_U_MASK = 15u << TILE_U_SHIFT };

/* ---- channel-last activations around depthwise convolutions ----
 * A depthwise conv along its output width vectorises poorly on narrow maps (a DS-CNN's 25x5,
 * MobileNet's 7x7: rows shorter than a vector, every lane near a border), and across its
 * channels in NCHW it would gather every input and scatter every output (measured 2.2x
 * slower). So the 4-d temporaries it reads and writes are stored channel-last (NHWC,
 * buf_permute): each tap is then one contiguous vector load per block of channels, with
 * weights packed [1, kh, kw, M] and the border tests on rows and columns (uniform across
 * the lanes) peeled away. The convs that produce and consume those temporaries (1x1
 * expansions and projections, a stem) then run channel-innermost too (conv_layout's cm form:
 * pixels blocked, each input element broadcast, weight vectors contiguous), which an NHWC
 * operand requires anyway. Reorders are never needed: every kernel reads the new order
 * directly. */

/* Is the store y[n, h.., w, m] in the nest n, m, h.., w (a conv's output channel-last)? */
static bool store_channel_last(const Stmt *st, Stmt **const *nest, int r) {
    if (r < 3 || st->buf->rank != r || !is_var(st->idx[0], (*nest[0])->var) || !chan_index(st->idx[r - 1], (*nest[1])->var))
        return false;
    for (int d = 1; d < r - 1; d++)
        if (!is_var(st->idx[d], (*nest[d + 1])->var)) return false;
    return true;
}

/* The first load in e, other than of `w`, whose channel index (1, or the last when
 * channel-last) reads variable m. */
static const Expr *channel_load(const Expr *e, const Buf *w, int m, bool last) {
    if (e->kind == E_LOAD && e->buf != w && e->nargs >= 3 && expr_reads_var(e->args[last ? e->nargs - 1 : 1], m))
        return e;
    for (int i = 0; i < e->nargs; i++) {
        const Expr *x = channel_load(e->args[i], w, m, last);
        if (x) return x;
    }
    return NULL;
}

static const Expr *channel_load_in(const Stmt *s, const Buf *w, int m, bool last) {
    for (; s; s = s->next) {
        const Expr *x = s->val ? channel_load(s->val, w, m, last) : NULL;
        if (!x) x = channel_load_in(s->body, w, m, last);
        if (!x) x = channel_load_in(s->then, w, m, last);
        if (!x) x = channel_load_in(s->els, w, m, last);
        if (x) return x;
    }
    return NULL;
}

static bool expr_loads_only(const Expr *e, const Buf *b) {
    if (e->kind == E_LOAD && e->buf != b) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!expr_loads_only(e->args[i], b)) return false;
    return true;
}

static bool loads_only(const Stmt *s, const Buf *b) {
    for (; s; s = s->next)
        if ((s->val && !expr_loads_only(s->val, b)) || (s->cond && !expr_loads_only(s->cond, b)) ||
            !loads_only(s->body, b) || !loads_only(s->then, b) || !loads_only(s->els, b))
            return false;
    return true;
}

/* A channel-wise window kernel (nest n, m, h, w around reductions over a window; the input
 * read at channel m + c, c a reduction of one iteration): a depthwise convolution (constant
 * float weights w[m, c, kh, kw] with one input channel per group, returned in *w) or a pool
 * (no other operand, *w NULL); the input load in *x. `last`: the input and output
 * channel-last. Also a grouped conv of fewer output channels a group than a vector's lanes
 * (input channel m / Mg * Cg + c: passes/sched_group.c), which runs the same way, several
 * groups a vector. */
static bool channelwise(Program *p, Kernel *k, bool last, const Expr **x, Buf **w) {
    Stmt **nest[MAX_RANK + 1];
    if (k->kclass != KC_CONTRACTION || parallel_nest(k, nest) != 4) return false;
    Stmt *m = *nest[1], *col = *nest[3];
    const Stmt *st = first_store(col->body);
    if (!st || !layout_type(k, st->buf->dtype) || st->buf->rank != 4) return false;
    for (int d = 0; d < 4 && !last; d++)
        if (!is_var(st->idx[d], (*nest[d])->var)) return false;
    if (last && !store_channel_last(st, nest, 4)) return false;
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    find_operands(k, col->body, rv, false, m->var, -1, col->var, &o);
    if (o.b && (o.b->rank != 4 || !o.other_reads)) return false;
    *w = o.b;
    *x = channel_load_in(col->body, o.b, m->var, last);
    if (!*x || (*x)->buf->rank != 4) return false;
    /* depthwise (input channel m), or few channels a group (passes/sched_group.c) */
    const Expr *chan = (*x)->args[last ? 3 : 1];
    bool depthwise = expr_coef(chan, m->var) == 1 && (!o.b || o.b->dims[1] == 1);
    return (depthwise || group_narrow(chan, m->var, o.b, lanes(p, k))) && (o.b || loads_only(col->body, (*x)->buf));
}

/* An elementwise kernel over a 4-d output in its canonical nest (n, c, h, w, one store
 * y[n, c, h, w]): with its 4-d operands all NHWC or all NCHW (the consistency loop of
 * channel_last_layouts) it runs with its loops in the store's order (store_order), reading
 * and writing each operand contiguously; a [N, C, 1, 1] operand (a squeeze-excite scale)
 * reads the same in both orders. So the kernels between a depthwise conv and its projection
 * in a squeeze-excite block (the Mul by the block's scale) no longer keep the whole block in
 * NCHW, where the depthwise conv ran along the width at 2-4% of the FMA peak (EfficientNet). */
static bool elementwise_user(Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    if (k->kclass != KC_ELEMENTWISE || !kernel_independent(k) || parallel_nest(k, nest) != 4) return false;
    const Stmt *st = first_store((*nest[3])->body);
    if (!st || st->buf->rank != 4) return false;
    for (int d = 0; d < 4; d++)
        if (!is_var(st->idx[d], (*nest[d])->var)) return false;
    return true;
}

/* Whether every load in e reads channel variable c only in a 4-d activation's channel (its
 * index `dim`: c itself, or affine in c and other loops, a DepthToSpace's block offset
 * (i*b + j)*C' + c or c*b*b + i*b + j, in a map of its own, not a view of a 5-d channel
 * shuffle: concat_user's Slice), and nothing else at all (no other index, no other buffer).
 * An ESPCN's closing DepthToSpace, no such reader while it read c alone, kept the convs
 * before it NCHW. */
static bool reads_c_as_channel(const Expr *e, int c, int dim) {
    if (e->kind == E_LOAD && e->buf->rank == 4 && activation_type(e->buf->dtype)) {
        for (int d = 0; d < 4; d++)
            if (d == dim ? !is_var(e->args[d], c) && (expr_coef(e->args[d], c) <= 0 || kir_root(e->buf)->rank != 4)
                         : expr_reads_var(e->args[d], c))
                return false;
        return true;
    }
    if (e->kind == E_LOAD) return !expr_reads_var(e, c);
    for (int i = 0; i < e->nargs; i++)
        if (!reads_c_as_channel(e->args[i], c, dim)) return false;
    return true;
}

/* The statements in list s, inside channel loop c, as a channel_mover needs them: stores of 4-d
 * activations at c as their channel, and in a contraction scalar sets and reduction loops
 * around them (a linear Resize: two taps per output, their indices and weights from tables). */
static bool mover_stmts(const Stmt *s, int c, int dim, bool contraction) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            if (s->buf->rank != 4 || !activation_type(s->buf->dtype) || !s->val || !reads_c_as_channel(s->val, c, dim))
                return false;
            for (int d = 0; d < 4; d++)
                if (d == dim ? !is_var(s->idx[d], c) : expr_reads_var(s->idx[d], c)) return false;
        } else if (s->kind == S_SET) {
            if (!contraction || !reads_c_as_channel(s->val, c, dim)) return false;
        } else if (s->kind == S_LOOP) {
            if (!contraction || !(s->hints & LH_REDUCTION) || !const_loop(s) || !mover_stmts(s->body, c, dim, true))
                return false;
        } else {
            return false;
        }
    }
    return true;
}

/* A kernel that moves each channel's plane on its own, whatever it does within the plane (a
 * nearest Resize or Upsample: y[n, c, 2h + i, 2w] = x[n, c, h, w] in a nest of five loops; a
 * linear Resize along one dim, a contraction over two taps whose indices and weights come
 * from tables): a perfect nest of independent loops around mover_stmts, each of its 4-d
 * activations read and written at one loop variable c as its channel (index `dim`: 1 in
 * NCHW, 3 once NHWC) and at expressions free of c elsewhere, other buffers not at c. Like an
 * elementwise kernel it can take NHWC for all its 4-d operands at once; then channel_inner
 * runs c innermost (of the parallel loops), each statement along a contiguous run of
 * channels. Returns c's loop, or NULL. A nearest Resize that was no such user kept a
 * YOLOv5-style neck NCHW (its top-down Resize -> Concat chain), and with it, through the
 * Concats, the backbone's 160x160 and 80x80 stages, whose convs ran at 38-60% of the FMA
 * peak; a linear one, a U-Net decoder's. */
static Stmt *channel_mover(Kernel *k, int dim) {
    Stmt **nest[MAX_RANK + 1];
    if (k->dead || k->kclass == KC_ELEMENTWISE || !kernel_independent(k)) return NULL;
    int r = parallel_nest(k, nest);
    if (r < 4) return NULL;
    const Stmt *st = first_store((*nest[r - 1])->body);
    if (!st || st->buf->rank != 4) return NULL;
    Stmt *cl = NULL;
    for (int d = 0; d < r && !cl; d++)
        if (is_var(st->idx[dim], (*nest[d])->var)) cl = *nest[d];
    return cl && mover_stmts((*nest[r - 1])->body, cl->var, dim, k->kclass == KC_CONTRACTION) ? cl : NULL;
}

/* Whether the statements of list s, inside channel loop c, are regions of a plane: loops of
 * constant bounds (not reductions) down to stores as mover_stmts takes them (a list of them
 * at the end of a nest: an odd Winograd output's region of whole tiles stores four). */
static bool region_stmts(const Stmt *s, int c, int dim) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) return mover_stmts(s, c, dim, false);      /* stores ending a nest */
        if (s->kind != S_LOOP || !const_loop(s) || (s->hints & (LH_REDUCTION | LH_VECTOR)) || !s->body ||
            !region_stmts(s->body, c, dim))
            return false;
    }
    return true;
}

/* A kernel that moves each channel's plane on its own in regions: below its batch and channel
 * loops, a list of loop nests, not all perfect, each down to one store as channel_mover's
 * (an ONNX Pad: its zero border rows, then rows of a zero border and the copy; dead_taps'
 * Pad+Add of a dilated conv's tap pieces, a DeepLabV3 ASPP branch's, which with its NCHW
 * planes kept the branches, their Concat and the 1280 -> 256 projection after it NCHW: the
 * projection at 40-45% of the FMA peak reading channel-major pixels). Like a channel_mover
 * it takes NHWC for all its 4-d operands at once; channel_inner then distributes its
 * channel loop over the regions and sinks it innermost in each. Returns the channel loop. */
static Stmt *region_mover(Kernel *k, int dim) {
    if (k->dead || (k->kclass != KC_COPY && k->kclass != KC_GENERIC) || !kernel_independent(k)) return NULL;
    Stmt *s = k->body;
    for (int d = 0; d < 2; d++, s = s->body)
        if (!s || s->kind != S_LOOP || s->next || !const_loop(s) || !s->body) return NULL;
    Stmt *c = k->body->body;
    return region_stmts(c->body, c->var, dim) ? c : NULL;
}

/* A kernel that moves channel planes whole or in regions (channel_mover, region_mover). */
static bool plane_mover(Kernel *k, int dim) { return channel_mover(k, dim) || region_mover(k, dim); }

/* Channel loop c (of a region_mover) distributed over its statements, then sunk innermost in
 * each, through the loops below it (distributed again at each list). */
static void sink_channel(Program *p, Kernel *k, Stmt *c) {
    Stmt *after = c->next;
    if (c->body->kind != S_STORE) distribute(p, k, c);  /* the stores of one region stay together */
    for (Stmt *x = c; x && x != after; x = x->next)
        if (x->body->kind == S_LOOP && loop_interchange(p, k, x)) sink_channel(p, k, x->body);
}

static bool reads_all_as_channel(const Stmt *s, int c) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            if (s->buf->rank != 4 || !is_var(s->idx[1], c)) return false;
            for (int d = 0; d < 4; d++)
                if (d != 1 && expr_reads_var(s->idx[d], c)) return false;
        }
        if ((s->val && !reads_c_as_channel(s->val, c, 3)) || (s->cond && expr_reads_var(s->cond, c)) ||
            !reads_all_as_channel(s->body, c) || !reads_all_as_channel(s->then, c) || !reads_all_as_channel(s->els, c))
            return false;
    }
    return true;
}

/* A kernel reading NHWC maps and writing one NCHW (a narrowing_pool): nest n, c, h, w
 * around one store y[n, c, h, w], every 4-d activation read at c as its channel (index 3)
 * alone. Returns c's loop, which channel_inner sinks innermost: channel vectors loaded
 * contiguously, each stored as a scatter over the small planes. */
static Stmt *planes_from_nhwc(Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    if (k->dead || k->kclass != KC_CONTRACTION || !kernel_independent(k) || parallel_nest(k, nest) != 4) return NULL;
    Stmt *cl = *nest[1];
    return first_store((*nest[3])->body) && reads_all_as_channel((*nest[3])->body, cl->var) ? cl : NULL;
}

/* A channel_mover whose operands are NHWC (the channel their last index) with its channel loop
 * sunk innermost, through the perfect nest below it; a no-op on an NCHW one. It runs before
 * the rest of a kernel's schedule, which then vectorises the channels (a linear Resize's
 * contraction too: contiguous loads, no gathers of the width's taps). A region_mover's in
 * each of its regions; a planes_from_nhwc kernel's likewise, its stores then scatters. */
static void channel_inner(Program *p, Kernel *k) {
    Stmt *c = channel_mover(k, 3);
    if (!c) c = planes_from_nhwc(k);
    if (!c && (c = region_mover(k, 3))) {
        sink_channel(p, k, c);
        return;
    }
    for (; c && c->body && c->body->kind == S_LOOP && !c->body->next; c = c->body)   /* headers swap */
        if (!loop_interchange(p, k, c)) return;
}

/* The variable of a loop index `v` or `v + c`, else -1. */
static int index_var(const Expr *e) {
    if (e->kind == E_VAR) return e->var;
    if (e->kind == E_BIN && e->op == K_ADD && e->args[0]->kind == E_VAR && e->args[1]->kind == E_CONST)
        return e->args[0]->var;
    return -1;
}

/* The four loops of a perfect nest from s around one store (nest[0] outermost), or false. */
static bool copy_nest(Stmt *s, Stmt **nest) {
    for (int d = 0; d < 4; d++, s = s->body) {
        if (!s || s->kind != S_LOOP || (d < 3 && (!s->body || s->body->next))) return false;
        nest[d] = s;
    }
    return s && s->kind == S_STORE && !s->next;
}

/* A Concat of 4-d maps (and what fuse joined to it, elementwise): a list of perfect nests
 * n, c, h, w, each around one store y[n, c + off, h, w] = f(x[n, c, h, w], ...), every 4-d
 * operand read at the nest's loops in order; or a Slice of channels, x read at
 * [n, c + off, h, w] where x is a 4-d map of its own (not a view of a 5-d shuffle: its
 * order stays, the copy would transpose). split_channels' chunks of FCN-ResNet50's head read
 * their inputs so, which kept the backbone's output NCHW. Like an elementwise kernel, it can take NHWC for
 * all its 4-d operands at once (the consistency loop of channel_last_layouts), each nest then
 * run in the store's order (concat_order). Without it a Concat kept every map it touches NCHW:
 * SqueezeNet's fire modules, GoogLeNet's and Inception's blocks, DenseNet's dense layers.
 * Other loads may read constants per channel at the store's channel index (or constants) only:
 * DenseNet's Concat with the BatchNormalization and Relu after it fused (a generic kernel),
 * whose per-channel scale and shift are [C, 1, 1] constants read at [c + off, 0, 0]; such a
 * kernel kept all of DenseNet-121 NCHW (47.5 -> 43.5 ms at one thread, Xeon, --cpu native;
 * onnxruntime ~44.9). */
static bool concat_operands(const Expr *e, const Stmt **nest, const Expr *chan) {
    if (e->kind == E_LOAD && e->buf->rank == 4) {
        for (int d = 0; d < 4; d++)
            if (!is_var(e->args[d], nest[d]->var) && (d != 1 || index_var(e->args[d]) != nest[d]->var || kir_root(e->buf)->rank != 4))
                return false;
        return true;
    }
    if (e->kind == E_LOAD && e->buf->kind == B_CONST) {    /* per channel: a fused BatchNorm */
        for (int d = 0; d < e->nargs; d++)
            if (e->args[d]->kind != E_CONST && !kx_equal(e->args[d], chan)) return false;
        return true;
    }
    if (e->kind == E_LOAD) return e->buf->rank == 0;
    for (int i = 0; i < e->nargs; i++)
        if (!concat_operands(e->args[i], nest, chan)) return false;
    return e->kind != E_SCALAR;
}

static bool concat_user(Kernel *k) {
    if (k->dead || (k->kclass != KC_COPY && k->kclass != KC_GENERIC) || !k->body || !kernel_independent(k)) return false;
    Buf *out = NULL;
    for (Stmt *s = k->body; s; s = s->next) {
        Stmt *nest[4];
        if (!copy_nest(s, nest)) return false;
        const Stmt *st = nest[3]->body;
        if (st->buf->rank != 4 || (out && st->buf != out) || !activation_type(st->buf->dtype)) return false;
        out = st->buf;
        for (int d = 0; d < 4; d++)
            if (index_var(st->idx[d]) != nest[d]->var || (d != 1 && !is_var(st->idx[d], nest[d]->var)) ||
                !const_loop(nest[d]) || nest[d]->lo->i != 0 || nest[d]->step != 1)
                return false;
        if (!concat_operands(st->val, (const Stmt **)nest, st->idx[1])) return false;
    }
    return out != NULL;
}

/* Whether every 4-d load in e reads its dims at the variables of y's indices, in y's order. */
static bool loads_in_order(const Expr *e, const Stmt *st) {
    if (e->kind == E_LOAD && e->buf->rank == 4) {
        for (int d = 0; d < 4; d++)
            if (index_var(e->args[d]) < 0 || index_var(e->args[d]) != index_var(st->idx[d])) return false;
        return true;
    }
    for (int i = 0; i < e->nargs; i++)
        if (!loads_in_order(e->args[i], st)) return false;
    return true;
}

/* A concat_user whose operands channel_last_layouts made NHWC (indices y[n, h, w, c + off],
 * x[n, h, w, c] inside loops n, c, h, w): each nest run in its store's order, as store_order
 * runs an elementwise kernel's, so that c is innermost and every operand streams. */
static void concat_order(Program *p, Kernel *k) {
    if (k->dead || (k->kclass != KC_COPY && k->kclass != KC_GENERIC) || !k->body) return;
    for (Stmt *s = k->body; s; s = s->next) {
        Stmt *nest[4];
        if (!copy_nest(s, nest)) return;
        const Stmt *st = nest[3]->body;
        if (st->buf->rank != 4 || !loads_in_order(st->val, st)) return;
        for (int d = 0; d < 4; d++)
            if (index_var(st->idx[d]) < 0) return;
    }
    for (Stmt *s = k->body; s; s = s->next) {
        Stmt *nest[4];
        copy_nest(s, nest);
        const Stmt *st = nest[3]->body;
        for (int d = 0; d < 4; d++) {
            int e = d;
            while (e < 4 && index_var(st->idx[d]) != nest[e]->var) e++;
            if (e == 4) return;
            for (; e > d; e--)
                if (!loop_interchange(p, k, nest[e - 1])) return;
        }
    }
}

static int64_t list_divisor(const Stmt *s, int v);

/* A 1x1 conv to fewer output channels than a vector's lanes or than channel_last_user's 8,
 * whichever is more (a segmentation head's classes), over at least two vectors of input
 * channels: it may read an NHWC map, each
 * output a vector reduction over the channels (unroll_reductions, vector_reductions), and
 * write NCHW, having no vector of output channels to scatter. A bilinear U-Net's head to 2
 * classes had kept its last level (32 channels at 256x256) NCHW, its 3x3 convs at 54-60% of
 * the FMA peak, 70-72% in NHWC; the head itself 0.55 -> 1.36 ms, the model 113-118 ->
 * 107-108 ms (one thread, Xeon). With taps (few_taps: a 3x3 conv, padded, its weights packed
 * channel-innermost; finite weights, not --fp-strict) up to a vector's lanes less one output:
 * the channel-innermost form leaves lanes idle there (ESPCN's 32 -> 9 before its
 * DepthToSpace: 9 of 16 lanes, 32% of the FMA peak; as reductions 51%). EDSR's last conv, 64
 * -> 3 channels on 256x256 writing the image NCHW, had kept the whole net NCHW, its 3x3 convs
 * at 70-77% of the peak, 77-80% in NHWC (the model 74 -> 63 ms, one thread, Xeon). Without
 * taps the bound was 8 on every target until LinkNet's head, a 32 -> 2 k2 s2 ConvTranspose
 * run as one 1x1 conv of its 4 phases x 2 classes (merged_phases): 8 outputs, half an
 * AVX-512 vector, so it wrote NCHW from an NCHW input, and every conv before it back to the
 * encoder's 16x16 stage kept its map NCHW (a conv writing NCHW page-sized planes reads no
 * NHWC map): its 3x3 32 -> 32 conv on 256x256 at 79% of the FMA peak, 98% in NHWC, and the
 * decoder's ConvTranspose phases scattering their output channels at 53-67%, 91-98% in
 * NHWC; the model 50.9 -> 47.3 ms (one thread, --cpu native, Zen 4; 1.05x at default flags,
 * two threads), the head itself about as fast either way (0.83-1.06 ms NCHW, 0.92-0.94 ms). */
static bool finite_data(const Buf *b);
static bool has_taps(const Buf *w) { return kir_numel(w) != w->dims[0] * w->dims[1]; }
static bool few_outputs(const Program *p, const Buf *w, int64_t outputs) {
    if (w->rank != 4) return false;
    bool taps = has_taps(w);
    int64_t lanes = p->vector_bytes / (int64_t)dtype_size(w->dtype);
    return outputs < MAX(8, lanes) && w->dims[1] * (int64_t)dtype_size(w->dtype) >= 2 * p->vector_bytes &&
           (!taps || (!p->fp_strict && w->dims[1] > MAX(w->dims[2], w->dims[3]) && finite_data(w)));
}

/* The same from the kernel alone; *nhwc: its input is read channel-last (the channel loop,
 * a reduction, in the last index); *w (if w): the weights. */
static bool few_outputs_k(Program *p, Kernel *k, bool *nhwc, Buf **w) {
    Stmt **nest[MAX_RANK + 1];
    if (k->kclass != KC_CONTRACTION || parallel_nest(k, nest) != 4) return false;
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    find_operands(k, (*nest[3])->body, rv, false, (*nest[1])->var, -1, (*nest[3])->var, &o);
    if (nhwc) *nhwc = !o.col_last;
    if (w) *w = o.b;
    return o.b && few_outputs(p, o.b, trips(*nest[1]));
}

/* A few_outputs conv reading NHWC runs its output channels innermost, jammed: each pixel's
 * channels are loaded once for all outputs (they were read once per output, from beyond the
 * L2 on a 256x256 map: a bilinear U-Net's head to 2 classes). */
static void outputs_inner(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    if (parallel_nest(k, nest) != 4 || !kernel_independent(k)) return;
    if (!loop_interchange(p, k, *nest[1]) || !loop_interchange(p, k, (*nest[1])->body)) return;
    if (parallel_nest(k, nest) != 4) return;
    Stmt *m = *nest[3];
    if (const_loop(m) && trips(m) >= 2 && body_private(p, k, m)) loop_jam(p, k, nest[3], (int)trips(m));
}

/* A few_outputs conv with taps (3x3 to 3 channels, a super-resolution net's last conv writing
 * the image): its input zero-padded (loop_pad), its weights packed [M, kh, kw, C] and its
 * taps unrolled inside the channel loop, so that the channels are the innermost reduction, a
 * vector one, each tap's weights read contiguously along them. */
static Buf *conv_input(const Stmt *s, const Buf *w, int rank, bool in_red);
static bool has_conds(const Stmt *s);
static void unroll_reductions(Program *p, Kernel *k, Stmt **at, int64_t most);
static bool few_taps(Program *p, Kernel *k, Buf *w, Kernel **copy) {
    Stmt **nest[MAX_RANK + 1];
    *copy = NULL;
    if (!has_taps(w) || parallel_nest(k, nest) != 4) return false;
    if (has_conds(k->body)) {
        Buf *x = conv_input((*nest[3])->body, w, 4, false);
        if (!x || !loop_pad(p, k, x, false, copy)) return false;
    }
    PackDim pd[4] = {{0, 0, false}, {2, 0, false}, {3, 0, false}, {1, 0, false}};
    loop_pack(p, k, w, "mtc", 4, pd);
    unroll_reductions(p, k, &k->body, MAX(w->dims[2], w->dims[3]));
    return true;
}

/* After outputs_inner, up to TAPS_PIXELS pixels of a row jammed too (TAPS_ACCS accumulators
 * in all): a 3-output conv's three vector accumulators, each a chain of kh*kw dependent FMAs
 * a vector of channels, kept the FMA units a third busy (EDSR's last conv 2.96 -> 1.9 ms, 32
 * -> 49% of the FMA peak). */
enum { TAPS_PIXELS = 4, TAPS_ACCS = 24 };
static void taps_pixels(Program *p, Kernel *k, int64_t outputs) {
    Stmt **nest[MAX_RANK + 1];
    if (parallel_nest(k, nest) < 3) return;
    Stmt **w = nest[2];
    int u = (int)MAX(1, MIN(TAPS_PIXELS, TAPS_ACCS / outputs));
    if (u > 1 && const_loop(*w) && trips(*w) >= u && body_private(p, k, *w)) loop_jam(p, k, w, u);
}

/* Can kernel k use an NHWC operand without gathering: a convolution-like nest (n, m, h, w
 * around reductions) that conv_layout or channelwise_layout run channel-innermost, or an
 * elementwise kernel (elementwise_user) or a Concat (concat_user)? */
static bool channel_last_user(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    if (!k->dead && (elementwise_user(k) || concat_user(k) || plane_mover(k, 1))) return true;
    if (k->dead || k->kclass != KC_CONTRACTION || !kernel_independent(k) || parallel_nest(k, nest) != 4) return false;
    const Stmt *st = first_store((*nest[3])->body);
    if (!st || st->buf->rank != 4 || !layout_type(k, st->buf->dtype)) return false;
    const Expr *x;
    Buf *w;
    if (channelwise(p, k, false, &x, &w)) return true;
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    find_operands(k, (*nest[3])->body, rv, false, (*nest[1])->var, -1, (*nest[3])->var, &o);
    if (!o.b || !conv_weights(p, k, o.b, 4) || (trips(*nest[1]) < 8 && !few_outputs(p, o.b, trips(*nest[1])))) return false;
    if (!o.other_reads) return true;
    /* a grouped conv of whole vectors a group (input channel m / D * Cg + c, D a multiple of
     * the lanes), or of more than a vector in whole half vectors with AVX-512 (the groups the
     * schedule's second group_split takes: RegNetY's 24 and 56): group_split makes each group
     * a dense conv, which reads NHWC as one does. Left NCHW, RegNetY-8GF's Winograd input
     * transforms ran along 4 tiles a row at 5% of the FMA peak (0.7 ms on 14x14, where the
     * products took 0.46): with NHWC, RegNetY-8GF 98-102 -> 85-90 ms, RegNetY-1.6GF 20-23 ->
     * 17-20, RegNetY-3.2GF 36-41 -> 32-33 (one thread, --cpu native, onnxcc bench alternated) */
    int64_t d = list_divisor((*nest[3])->body, (*nest[1])->var), lw = lanes(p, k);
    return d > 1 && (d % lw == 0 || (lw >= 16 && d % (lw / 2) == 0 && d > lw)) && trips(*nest[1]) % d == 0;
}

static Stmt *innermost_parallel(Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    return *nest[r - 1];
}

static bool has_views(const Program *p, const Buf *b) {
    for (int i = 0; i < p->nbufs; i++)
        if (p->bufs[i]->alias == b) return true;
    return false;
}

static bool touches(const Kernel *k, const Buf *b) {
    for (int i = 0; i < k->nparams; i++)
        if (kir_root(k->params[i]) == b) return true;
    return false;
}

/* The 4-d float temporaries kernel k reads or writes not seen yet, appended to list[*n]
 * (each once: state 3, queued). */
static void kernel_temps(const Kernel *k, char *state, Buf **list, int *n) {
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = kir_root(k->params[i]);
        if (!state[b->id] && b->kind == B_TEMP && b->rank == 4 && activation_type(b->dtype))
            state[b->id] = 3, list[(*n)++] = b;
    }
}

/* Whether each channel plane of an NCHW buffer fills a page or more: then a vector of output
 * channels stored at one pixel touches as many pages (the scatter that made a 112x112
 * expansion 30x slower); on small maps (the DS-CNN's 25x5: 500 bytes a plane) the channels of
 * a pixel share a few lines of L1, and keeping the inputs NHWC costs less than the NCHW
 * depthwise convs it would take (the int8 DS-CNN ran 28 -> 103 us). */
static bool page_planes(const Buf *b) {
    if (b->rank < 3) return false;
    int64_t plane = (int64_t)dtype_size(b->dtype);
    for (int d = 2; d < b->rank; d++) plane *= b->dims[d];
    return plane >= 4096;
}

/* A dense conv (channel_last_user, not channel-wise) with at least two target vectors of
 * output channels: it runs channel-innermost whatever the layout (conv_layout's cm form), and
 * in NCHW each vector of output channels is a scatter, each fused residual vector a gather. */
static bool wide_conv(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    const Expr *x;
    Buf *w;
    if (channelwise(p, k, false, &x, &w) || parallel_nest(k, nest) != 4) return false;
    const Stmt *st = first_store((*nest[3])->body);
    return trips(*nest[1]) * (int64_t)dtype_size(st->buf->dtype) >= 2 * p->vector_bytes;
}

/* ---- kernels that move data between the orders (Transpose, and what fuse joined to it) ----
 * A kernel that is not a contraction, with a perfect nest of 4 independent loops around
 * stores only, whose every index of a 4-d operand is one of the nest's variables (or a
 * constant on a dim of 1): a Transpose, or a Transpose with a fused Mul and residual Add
 * (ConvNeXt's blocks go NCHW -> Transpose -> LayerNorm, MatMuls -> Transpose+Mul+Add -> NCHW
 * around each 7x7 depthwise conv). Making one operand NHWC reorders its indices; where all
 * the 4-d operands then read the loops in one order, store_order runs the nest in that order
 * and every operand streams. So such a kernel can use NHWC for an operand whose indices
 * become those of the others (the NCHW side of a Transpose), and then for every operand read
 * in the same order as that one (the Add's residual with its output). ConvNeXt-Tiny's 7x7
 * depthwise convs, whose output went to a Transpose, so stayed NCHW along the width at 4-15%
 * of the FMA peak. */
typedef struct { Buf *b; int ord[4]; } Access;
enum { MAX_ACCESSES = 16 };

static int nest_var_at(const Expr *e, const int *vars) {
    for (int j = 0; j < 4; j++)
        if (is_var(e, vars[j])) return j;
    return -2;
}

/* Appends the access buf[idx] (a 4-d operand that moves under NHWC) to acc; false if an
 * index is not a nest variable or a constant on a dim of 1, or acc is full. */
static bool add_access(Buf *b, Expr *const *idx, const int *vars, Access *acc, int *n) {
    static const int nhwc[4] = {0, 2, 3, 1};
    if (b->rank != 4 || !permute_moves_data(kir_root(b), nhwc)) return true;
    if (*n >= MAX_ACCESSES || b->alias) return false;
    Access *a = &acc[(*n)++];
    a->b = b;
    for (int d = 0; d < 4; d++) {
        a->ord[d] = idx[d]->kind == E_CONST && b->dims[d] == 1 ? -1 : nest_var_at(idx[d], vars);
        if (a->ord[d] == -2) return false;
    }
    return true;
}

static bool expr_accesses(const Expr *e, const int *vars, Access *acc, int *n) {
    if (e->kind == E_LOAD && !add_access(e->buf, e->args, vars, acc, n)) return false;
    for (int i = 0; i < e->nargs; i++)
        if (!expr_accesses(e->args[i], vars, acc, n)) return false;
    return true;
}

/* The 4-d operand accesses of a permuting kernel into acc; -1 if k is no such kernel. */
static int permuting_accesses(Kernel *k, Access *acc) {
    Stmt **nest[MAX_RANK + 1];
    if (k->dead || k->kclass == KC_CONTRACTION || parallel_nest(k, nest) != 4 || !kernel_independent(k)) return -1;
    int vars[4], n = 0;
    for (int d = 0; d < 4; d++) vars[d] = (*nest[d])->var;
    for (const Stmt *s = (*nest[3])->body; s; s = s->next)
        if (s->kind != S_STORE || s->buf->rank != 4 || !activation_type(s->buf->dtype) ||
            !add_access(s->buf, s->idx, vars, acc, &n) || !expr_accesses(s->val, vars, acc, &n))
            return -1;
    return n;
}

/* Access a's order of the loops once its buffer is NHWC or not (`last`). */
static void access_order(const Access *a, bool last, int *ord) {
    static const int nhwc[4] = {0, 2, 3, 1};
    for (int d = 0; d < 4; d++) ord[d] = a->ord[last ? nhwc[d] : d];
}

static bool same_order(const int *x, const int *y) {
    for (int d = 0; d < 4; d++)
        if (x[d] >= 0 && y[d] >= 0 && x[d] != y[d]) return false;
    return true;
}

/* Can permuting kernel k (n accesses) read or write b as NHWC: b's accesses, reordered,
 * read the loops in the order of every access of another buffer as it is now? */
static bool permutes_to(const Access *acc, int n, const Buf *b) {
    bool seen = false;
    for (int i = 0; i < n; i++) {
        if (kir_root(acc[i].b) != b) continue;
        int oi[4];
        access_order(&acc[i], true, oi);
        for (int j = 0; j < n; j++) {
            int oj[4];
            access_order(&acc[j], false, oj);
            if (kir_root(acc[j].b) != b && same_order(oi, oj)) seen = true;
        }
    }
    return seen;
}

/* Queues the temporaries of permuting kernel k read in the order b is read in (they go NHWC
 * together with b). */
static void permuting_temps(const Access *acc, int n, const Buf *b, char *state, Buf **list, int *nl) {
    for (int i = 0; i < n; i++) {
        if (kir_root(acc[i].b) != b) continue;
        for (int j = 0; j < n; j++) {
            Buf *c = kir_root(acc[j].b);
            if (c != b && !state[c->id] && c->kind == B_TEMP && c->rank == 4 && activation_type(c->dtype) &&
                same_order(acc[i].ord, acc[j].ord))
                state[c->id] = 3, list[(*nl)++] = c;
        }
    }
}

/* Takes the queued temporaries work[0..n) and, from each that every kernel touching it can
 * use NHWC, the temporaries of those kernels; appends those chosen to chosen[*nchosen]. */
static void grow_nhwc(Program *p, const bool *user, char *state, Buf **work, int n, Buf **chosen, int *nchosen) {
    static const int nhwc[4] = {0, 2, 3, 1};
    while (n > 0) {
        Buf *b = work[--n];
        /* one that keeps its memory order ([N, C, 1, 1]: a global pool's output) suits
         * every kernel, its views too */
        bool moves = permute_moves_data(b, nhwc), ok = !b->alias && (!moves || !has_views(p, b));
        Access acc[MAX_ACCESSES];
        for (int i = 0; i < p->nkernels && ok && moves; i++)
            if (!p->kernels[i]->dead && touches(p->kernels[i], b) && !user[i]) {
                int na = permuting_accesses(p->kernels[i], acc);
                ok = na > 0 && permutes_to(acc, na, b);
            }
        state[b->id] = ok ? 2 : 1;
        if (!ok) continue;
        chosen[(*nchosen)++] = b;
        for (int i = 0; i < p->nkernels; i++) {
            if (p->kernels[i]->dead || !touches(p->kernels[i], b)) continue;
            if (user[i]) {
                kernel_temps(p->kernels[i], state, work, &n);
            } else {
                int na = permuting_accesses(p->kernels[i], acc);
                permuting_temps(acc, na, b, state, work, &n);
            }
        }
    }
}

/* A contraction of at least WIDTH_TAPS multiply-adds per output element (its innermost
 * parallel loop's reductions): a scattered store per output vector (16 lanes to as many
 * pages) is small next to its WIDTH_TAPS FMAs or more. */
static bool long_reduction(Kernel *k) {
    return k->kclass == KC_CONTRACTION && reduction_trips(innermost_parallel(k)->body) >= WIDTH_TAPS;
}

/* A pool (a channelwise kernel without weights) whose input is NHWC (state 2) and whose
 * output is not, at most POOL_SCATTER_BYTES and a quarter of its input: it reads NHWC and
 * writes NCHW (planes_from_nhwc: its channel vectors scattered over planes of a few hundred
 * bytes), so the NHWC chain ends after it instead of at the conv before it. Classifier heads
 * conv -> pool -> Flatten -> Gemm had that conv write NCHW, its output channels scattered and
 * its register tiles of 7 pixels: VGG-16's last conv (512 -> 512 on 14x14) 5.9 -> 4.6 ms,
 * AlexNet's 1.04 -> 0.99 ms, their pools 28 -> 24 and 18 -> 8 us (one thread, --cpu native,
 * Xeon, interleaved). */
enum { POOL_SCATTER_BYTES = 256 << 10 };

typedef struct {
    const Buf *in, *out;        /* a narrowing pool's input and output, else NULL */
} PoolSides;

/* The sides of pool k (channelwise, input load x), if its output is small enough to scatter;
 * whether it may then write NCHW depends on the states, which the consistency loop changes. */
static PoolSides narrowing_pool(Kernel *k, const Expr *x) {
    const Buf *in = kir_root(x->buf), *out = kir_root(first_store(innermost_parallel(k)->body)->buf);
    size_t ob = kir_nbytes(out);
    return ob <= POOL_SCATTER_BYTES && ob * 4 <= kir_nbytes(in) ? (PoolSides){in, out} : (PoolSides){NULL, NULL};
}

/* Makes NHWC the temporaries that depthwise convs read or write, then those that wide convs
 * (wide_conv) read or write, and from there, through the kernels touching them, their
 * neighbours (a MobileNet block's expansion input, projection output and residual), as long
 * as every kernel touching one can use that order (channel_last_user): a conv that reads
 * NHWC and writes NCHW scatters its stores, one scatter per vector of output channels, which
 * cost the 16- and 24-channel projections of MobileNetV2 2x. A ResNet is then NHWC from its
 * stem's output to its global pool (ResNet-18 on AVX-512, onnxcc bench: its 3x3 convs at
 * 56x56 and 28x28 from 75-90% of the FMA peak to 92-98%, the stem from 65% to 90%, the 1x1
 * downsamples from 30-40% to 50-60%; rough). All decided on the program as lowered, then all
 * permuted; a channel-wise kernel gets both sides permuted or neither (narrowing_pool
 * aside). Only with vectors of 16 bytes or more: without them a depthwise conv gains nothing
 * from channels side by side. */
static void channel_last_layouts(Program *p) {
    static const int nhwc[4] = {0, 2, 3, 1};
    if (p->vector_bytes < 16) return;
    int n = 0, nchosen = 0;
    Buf **work = ARENA_ARRAY(p->arena, Buf *, p->nbufs + 1), **chosen = ARENA_ARRAY(p->arena, Buf *, p->nbufs + 1);
    char *state = ARENA_ARRAY(p->arena, char, p->nbufs + 1);     /* 1 rejected, 2 chosen, 3 queued */
    bool *user = ARENA_ARRAY(p->arena, bool, p->nkernels + 1);
    PoolSides *pool = ARENA_ARRAY(p->arena, PoolSides, p->nkernels + 1);
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        const Expr *x;
        Buf *w;
        user[i] = channel_last_user(p, k);
        pool[i] = (PoolSides){NULL, NULL};
        if (!user[i] || !channelwise(p, k, false, &x, &w)) continue;
        if (w) kernel_temps(k, state, work, &n);
        else if (k->kclass == KC_CONTRACTION) pool[i] = narrowing_pool(k, x);
    }
    grow_nhwc(p, user, state, work, n, chosen, &nchosen);
    /* then from the wide convs, whatever the depthwise convs did not reach */
    n = 0;
    for (int i = 0; i < p->nkernels; i++)
        if (user[i] && wide_conv(p, p->kernels[i])) kernel_temps(p->kernels[i], state, work, &n);
    grow_nhwc(p, user, state, work, n, chosen, &nchosen);
    /* a channel-wise kernel with one side NHWC and the other not would run along the
     * width, gathering or scattering the NHWC side: neither side then; a conv writing NCHW
     * runs channel-innermost on an NHWC input, scattering each vector of output channels
     * over as many pages (16 -> 96 channels at 112x112: 10 ms where NCHW on both sides
     * takes 0.3), so it reads no NHWC temporary (NCHW in, NHWC out is fine: the input is
     * only broadcast); unless its reduction is long (long_reduction): FCN-ResNet50's last
     * conv, 512 -> 21 channels on 40x40 before a Resize, kept so all of the net NCHW, whose
     * dilated 3x3 convs on 40x40 then ran at 56% of the FMA peak against 67-73% in NHWC
     * (the model 852 -> 741 ms, 1T, --cpu native; onnxruntime ~630) */
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < p->nkernels; i++) {
            const Expr *x;
            Buf *w;
            Kernel *k = p->kernels[i];
            /* a permuting kernel whose operands end in different orders (the last block's
             * Transpose+Add writing a graph output NCHW) reads one of them strided, as the
             * Transpose alone did: no reason to give up the NHWC chain before it */
            if (!user[i] || (pool[i].in && state[pool[i].in->id] == 2 && state[pool[i].out->id] != 2)) continue;
            if (k->kclass == KC_ELEMENTWISE || concat_user(k) || plane_mover(k, 1)) {     /* all its moving 4-d operands alike */
                bool nhwc_side = false, nchw_side = false;
                for (int j = 0; j < k->nparams; j++) {
                    Buf *b = kir_root(k->params[j]);
                    if (b->rank != 4 || !permute_moves_data(b, nhwc)) continue;
                    if (state[b->id] == 2) nhwc_side = true;
                    else nchw_side = true;
                }
                for (int j = 0; j < k->nparams && nhwc_side && nchw_side; j++) {
                    Buf *b = kir_root(k->params[j]);
                    if (state[b->id] == 2) state[b->id] = 1, changed = true;
                }
                continue;
            }
            Buf *out = kir_root(first_store(innermost_parallel(k)->body)->buf);
            if (channelwise(p, k, false, &x, &w)) {
                /* a side whose NHWC order is its memory order ([N, C, 1, 1]: a global
                 * pool's output, a graph output too) reads the same either way */
                Buf *in = kir_root(x->buf);
                /* (nhwc permutes 4 dims: a side of another rank, MaxViT's 6-d windows of a
                 * depthwise conv's neighbour, is not channel-last) */
                bool in_last = state[in->id] == 2 || (in->rank == 4 && !permute_moves_data(in, nhwc));
                bool out_last = state[out->id] == 2 || (out->rank == 4 && !permute_moves_data(out, nhwc));
                if (in_last != out_last && (state[in->id] == 2 || state[out->id] == 2))
                    state[in->id] = state[out->id] = 1, changed = true;
                continue;
            }
            if (long_reduction(k) || few_outputs_k(p, k, NULL, NULL)) continue;
            for (int j = 0; j < k->nparams && state[out->id] != 2 && page_planes(out); j++) {
                Buf *b = kir_root(k->params[j]);
                if (state[b->id] == 2) state[b->id] = 1, changed = true;
            }
        }
    }
    for (int c = 0; c < nchosen; c++)
        if (state[chosen[c]->id] == 2) buf_permute(p, chosen[c], nhwc, "nhwc");
}

/* Marks SHARED the loops over variable v. */
static void mark_columns(Stmt *s, int v) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && s->var == v) s->hints |= SHARED;
        mark_columns(s->body, v);
        mark_columns(s->then, v);
        mark_columns(s->els, v);
    }
}

static void clear_shared(Stmt *s) {
    for (; s; s = s->next) {
        s->hints &= ~(unsigned)SHARED;
        clear_shared(s->body);
        clear_shared(s->then);
        clear_shared(s->els);
    }
}

/* A channel-wise kernel on channel-last operands: the channel loop sunk below the rows and
 * columns (vectors across channels), rows and columns peeled at their interiors (no tap test
 * left inside; the border pixels keep theirs, which do not depend on the channel). A
 * depthwise conv's weights are packed [1, kh, kw, M] (`cm`) and its columns marked SHARED,
 * so that block_list blocks pixels around the channel vectors: each weight vector loaded
 * then feeds several FMAs, where alone every FMA waited on two loads. */
static bool channelwise_layout(Program *p, Kernel *k, bool *grouped) {
    const Expr *x;
    Buf *w;
    if (!channelwise(p, k, true, &x, &w)) return false;
    *grouped = w && w->dims[1] > 1;
    Stmt **nest[MAX_RANK + 1];
    parallel_nest(k, nest);
    PackDim pd[4];
    for (int d = 0; d < 4; d++) pd[d] = (PackDim){(d + 1) % 4, 0, false};
    if (w) loop_pack(p, k, w, "cm", 4, pd);
    for (Stmt *s = *nest[1]; s->body && s->body->kind == S_LOOP && !(s->body->hints & LH_REDUCTION); s = s->body)
        loop_interchange(p, k, s);
    parallel_nest(k, nest);
    peel_rows(p, k, nest[1]);
    if (w) mark_columns(k->body, (*nest[2])->var);
    return true;
}

/* ---- channel-wise convs without float vectors ----
 * Without float vectors (Cortex-M4, RV32: no channel_last_layouts) a depthwise conv stays
 * NCHW, and each output channel reads its own input plane: no copies of the channel loop
 * share a load, so conv_layout's plain form jammed only the interior columns, and the border
 * columns and the row tests around every row of taps stayed. What shares loads there is the
 * pixels: the columns of a row read the same input rows, and kh output rows each input row.
 * So where a row is at most BLOCKED_COPIES pixels (a DS-CNN's 25x5 maps):
 *   - the rows are peeled at their interior (the first and last rows keep their row tests),
 *     the columns not: scalar_tile jams a whole row, whose column tests are constants in
 *     each copy once the taps are unrolled;
 *   - the interior rows are SHARED, so that block_list blocks DW_ROWS of them around the
 *     columns (each input row loaded feeds the taps of both), the rows left over from whole
 *     blocks peeled with the last rows, as one block (no rest block of a single row);
 *   - with at most DW_TAPS taps per output (a 3x3), the tap loops are unrolled after the
 *     tiles (unroll_taps), so that the channel's weights are loads in the row loop's own
 *     body, which LLVM hoists out of it (held in registers across the rows), where inside
 *     the tap loops they were loaded again for every row.
 * The int8 depthwise convs (size_first) keep their tests for code size. The DS-CNN keyword
 * spotters' float twins (tests/firmware kws_f32, dscnn_f32; QEMU counts, --profile), their
 * 3x3 depthwise convs on 25x5, instructions per multiply-accumulate on the M4 (RV32): 3.20
 * (2.80) with the interior columns jammed by 3; a whole row jammed, row tests kept, taps
 * unrolled 2.38, code -56 B; rows peeled too 2.11 (+720 B); 2 rows blocked 1.93 (1.71),
 * +1.5 KB of code (the depthwise kernel, shared by the model's four, 0.6 -> 2.6 KB); 3 rows
 * 1.88, +2 KB; 4 rows spilled (2.58, taps not unrolled). */
enum { DW_ROWS = 2, DW_TAPS = 9 };

static bool scalar_channelwise(Program *p, Kernel *k, bool *unroll) {
    const Expr *x;
    Buf *w;
    Stmt **nest[MAX_RANK + 1];
    if (lanes(p, k) >= 2 || size_first(p, k) || !channelwise(p, k, false, &x, &w) || !w || w->dims[1] != 1)
        return false;
    parallel_nest(k, nest);
    Stmt *col = *nest[3], **rows = nest[2];
    int64_t front, back, n = trips(*rows);
    if (!const_loop(col) || trips(col) > BLOCKED_COPIES) return false;
    *unroll = kir_numel(w) / w->dims[0] <= DW_TAPS;
    if (loop_interior(p, k, *rows, &front, &back) && (front || back)) {
        if (n - front - back > 0) back += (n - front - back) % DW_ROWS;
        loop_peel(p, k, rows, front, back);
    }
    for (Stmt *l = *rows; l && l->kind == S_LOOP && l->var == (*rows)->var; l = l->next) l->hints |= SHARED;
    return true;
}

/* The constant reduction loops of at most `most` iterations in list *at unrolled, the
 * innermost first: all of them (unroll_taps), or those of one iteration, a 1x1 conv's taps,
 * so that the channel loop around them is the innermost reduction, which vector_reductions
 * then runs as vectors (few_outputs). */
static void unroll_reductions(Program *p, Kernel *k, Stmt **at, int64_t most) {
    while (*at) {
        Stmt *s = *at, *next = s->next;
        unroll_reductions(p, k, &s->body, most);
        unroll_reductions(p, k, &s->then, most);
        unroll_reductions(p, k, &s->els, most);
        if (s->kind == S_LOOP && (s->hints & LH_REDUCTION) && const_loop(s) && trips(s) <= most) loop_unroll(p, k, at);
        while (*at != next) at = &(*at)->next;
    }
}

static void unroll_taps(Program *p, Kernel *k, Stmt **at) { unroll_reductions(p, k, at, INT64_MAX); }

static bool has_conds(const Stmt *s);

static Buf *conv_layout(Program *p, Kernel *k, int64_t group) {
    Stmt **nest[MAX_RANK + 1];
    int r = conv_nest(k, nest);
    Buf *packed = NULL;
    if (r < 3) return NULL;
    const Stmt *st = first_store((*nest[r - 1])->body);
    if (!st || st->buf->rank != r || !layout_type(k, st->buf->dtype)) return NULL;
    bool cl = store_channel_last(st, nest, r);
    for (int d = 0; d < r && !cl; d++)
        if (!out_index(st->idx[d], (*nest[d])->var)) return NULL;
    Stmt *m = *nest[1], *col = *nest[r - 1];
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    find_operands(k, col->body, rv, false, m->var, -1, col->var, &o);
    int64_t mg = trips(m), esz = (int64_t)dtype_size(st->buf->dtype);
    bool can = o.b && conv_weights(p, k, o.b, r) && !o.other_reads && mg >= 8;
    /* a channel-last output or input (channel_last_layouts) leaves no contiguous width */
    int64_t taps = can ? kir_numel(o.b) / o.b->dims[0] : 0;
    /* channel planes a multiple of 4 KiB apart put every lane of a channel-innermost store
     * (and the input lines of a tile) in one L1 set: a U-Net's 32 -> 32 and 64 -> 32 3x3 convs
     * on 64x64 maps and 64 -> 64 on 32x32 ran at 28-46% of the FMA peak so, 86-91% along the
     * width (znver5, onnxcc bench); ResNet's and MobileNet's maps (112 .. 7) are not such */
    int64_t plane = esz;
    for (int d = 2; d < r; d++) plane *= st->buf->dims[d];
    bool wide = can && !cl && o.col_last && (taps <= WIDTH_TAPS || plane % 4096 == 0) && o.stride <= STRIDE_LOADS &&
                trips(col) >= 2 * lanes(p, k);
    /* the vectors of a dot4 kernel are its int32 accumulators, whatever bytes it stores: an
     * int8 dense layer of 84 outputs (LeNet's second) fills 2 zmm of them, where its 84 output
     * bytes left it scalar, one emulated dot4 per word (1.8 us of LeNet int8's 6 on AVX-512) */
    int64_t vsz = p->vector_bytes >= 16 && dot4_kernel(k) ? MAX(esz, int_acc_size(k)) : esz;
    bool cm = can && !wide && (o.stride > 1 || vsz * mg >= 2 * p->vector_bytes || cl || !o.col_last || group);
    /* ... where the columns have a border to run so (a ConvTranspose phase whose only test
     * is on its rows has none: its channels innermost would store NCHW lanes a plane apart) */
    int64_t bf = 0, bb = 0;
    bool border_cm = can && !cm && p->vector_bytes >= 16 && has_conds(k->body) &&
                     loop_interior(p, k, col, &bf, &bb) && (bf || bb);
    if (cm || border_cm) {
        PackDim pd[MAX_RANK];
        int wr = o.b->rank;
        for (int d = 0; d < wr; d++) pd[d] = (PackDim){(d + 1) % wr, 0, false};
        packed = loop_pack(p, k, o.b, "cm", wr, pd);
        for (Stmt *x = m; x->body && x->body->kind == S_LOOP && !(x->body->hints & LH_REDUCTION); x = x->body)
            loop_interchange(p, k, x);
        r = conv_nest(k, nest);
        col = *nest[r - 2];
    }
    int64_t front, back;
    Stmt **at = cm || border_cm ? nest[r - 2] : nest[r - 1];
    if (cm && r >= 4 && kir_nbytes(packed) >= ROW_PEEL_BYTES) {
        peel_rows(p, k, nest[r - 3]);
        return packed;
    }
    if (size_first(p, k) || !loop_interior(p, k, col, &front, &back) || (!front && !back)) return cm ? packed : NULL;
    int cv = col->var;
    Stmt *mid = loop_peel(p, k, at, front, back);
    if (border_cm && mid) loop_interchange(p, k, mid);
    if (wide && r >= 4) {
        int row = (*nest[r - 3])->var;
        distribute(p, k, *nest[r - 3]);
        for (Stmt *x = *nest[r - 3]; x && (x->var == row || x->var == cv); x = x->next)
            if (x->body->var == cv) loop_interchange(p, k, x);
    }
    return cm ? packed : NULL;
}

/* Is some load in e of a buffer other than w indexed last by variable v (x[.., c]: an
 * input read channel-last)? */
static bool loads_last(const Expr *e, const Buf *w, int v) {
    if (e->kind == E_LOAD && e->buf != w && e->nargs &&
        (is_var(e->args[e->nargs - 1], v) || expr_coef(e->args[e->nargs - 1], v) == 1))
        return true;
    for (int i = 0; i < e->nargs; i++)
        if (loads_last(e->args[i], w, v)) return true;
    return false;
}

/* A conv reading its input channel-last (x[n, h + kh, w + kw, c]) whose reduction nest is
 * c, kh, kw with nothing but the taps' loops in between: c sunk innermost, so that each
 * pixel of a register tile reads its channels front to back, one cache line per 16 channels.
 * With c outermost each step of c touched a line of every pixel and tap of the tile (14
 * pixels x 3 rows); at 256 or 512 channels those lines lie 1 or 2 KiB apart, in 2 to 4 of
 * L1's 64 sets, which the tile overflowed (ResNet-18's layer3/4 convs ran at 63-76% of the
 * FMA peak in NHWC against 97% for layer1/2's 64 and 128 channels). Needs reassociation
 * (the padded form, which --fp-strict never takes, or any conv of several taps without
 * --fp-strict: one without padding, which has no padded copy, reads its channel-last input
 * the same way; a 1x1 has nothing to sink). Those unpadded convs, Xeon, one thread, in the
 * models: InceptionV3's Conv2d_4a (80 -> 192, 3x3 on 73x73) 8.74 -> 8.18 ms (79% of the FMA
 * peak, as onnxruntime's NCHWc kernel), Mixed_6a's 288 -> 384 3x3 stride 2 4.94 -> 4.19 ms,
 * Conv2d_2a 2.65 -> 2.48; ConvNeXt-T's 2x2 stride-2 downsamples 5-10% faster. So too in
 * each group of a grouped conv split by whole vectors (conv_nest passes the group loop; the
 * input reads the channel as group + c): ResNeXt-50's stride-2 layer3.0 conv2 (16 channels a
 * group, 512 in all, so pixels 4 KiB apart, every tap of a row in one L1 set) 807 -> 334 us,
 * 15 -> 35% of the FMA peak; the model ~2% faster, ResNeXt-101 32x8d 5-12%, RegNetY-400MF
 * and RegNetX-1.6GF within 1%. Returns whether done, for conv_tiles. */
static bool sink_channels(Program *p, Kernel *k, const Buf *w) {
    Stmt **nest[MAX_RANK + 1];
    int r = conv_nest(k, nest);
    if (r < 1 || !w) return false;
    Stmt *c = (*nest[r - 1])->body;
    while (c && !(c->kind == S_LOOP && (c->hints & LH_REDUCTION))) c = c->next;
    if (!c || !c->body || c->body->kind != S_LOOP || c->body->next) return false;
    const Stmt *in = c;
    while (in->kind == S_LOOP && in->body && !in->body->next && in->body->kind == S_LOOP) in = in->body;
    bool last = false;
    for (const Stmt *s = in->body; s; s = s->next)
        last |= s->kind == S_SET && loads_last(s->val, w, c->var);
    if (!last) return false;
    for (Stmt *x = c; x->body && x->body->kind == S_LOOP && !x->body->next; x = x->body)
        if (!loop_interchange(p, k, x)) return false;
    return true;
}

/* Channel-last conv weights w [C, kh, kw, M] regrouped as [M/t, C, kh, kw, t], t the
 * channels of one blocked vector tile: each tile's reduction then streams its weights front
 * to back, where in [.., M] it read t floats every M (2 KiB apart at M = 512, a new page every
 * other tap). ResNet-18 layer4 3x3 convs (9.4 MB of weights) ~10% faster (rough). Done after
 * the vector tiles exist, so that the tile loop's step proves the division away. M need not
 * be a multiple of t: the last tile is padded with zeros that no loop reads (SqueezeNet's
 * 512 -> 1000 1x1 conv on 13x13 read rows 4000 bytes apart, a new page at almost every step
 * of the reduction: the model 5.58 -> 5.14 ms, interleaved, one AVX-512 core). Each ISA level
 * of a default object packs its own panels: cut to the AVX2 baseline's 16 channels so that the
 * levels shared one copy, the AVX-512 level's 32-channel tiles read two panels 16 KB apart,
 * and the default object ran 1.10-1.18x slower than a single AVX-512 level on ResNet-18,
 * GoogLeNet and ShuffleNetV2 (Zen 5, one thread, interleaved; ResNet-18's flash 75 -> 148 MB). */
static void conv_tiles(Program *p, Kernel *k, Buf *w, int64_t t, bool c_last) {
    int r = w->rank;
    if (t <= 0 || w->dims[r - 1] <= t) return;
    PackDim pd[MAX_RANK + 1];
    pd[0] = (PackDim){r - 1, t, false};
    for (int d = 0; d < r - 1; d++) pd[d + 1] = (PackDim){c_last ? (d + 1) % (r - 1) : d, 0, false};
    pd[r] = (PackDim){r - 1, t, true};
    loop_pack(p, k, w, arena_printf(p->arena, "t%lld%s", (long long)t, c_last ? "c" : ""), r + 1, pd);
}

/* ---- contractions: convolutions on a zero-padded input ----
 * On targets with vectors, a conv with at least PAD_CHANNELS input channels whose taps read
 * padding, weights packed [C,t..,M] (cm) and finite, reads a zero-padded copy of its input
 * (loop_pad: a small copy kernel before it) instead of guarding each tap. Every output pixel
 * is then interior: no peeled border pieces, each a narrow register tile of its own (a 7x7
 * map left a 5-wide interior and 1-pixel corners that streamed the weights at one FMA per
 * weight vector loaded), and a tenth of the code: ResNet-18 for AVX2 (16 registers) compiled
 * in ~2.4 s instead of ~4.2 and ran in ~36 ms instead of ~56, for SSE in ~1.4 s instead of
 * ~2.5 at the same speed (CPU time, rough). Then conv_channel_block and conv_pixel_tile shape
 * the register tile: BLOCK_VECTORS vectors of output channels by up to block_pixels
 * pixels. */
enum { PAD_CHANNELS = 16, BLOCK_VECTORS = 2, SMALL_ROW_PIXELS = 12 };

static void mark_blocked(Stmt *s);

static bool has_conds(const Stmt *s) {
    for (; s; s = s->next)
        if (s->kind == S_IF || has_conds(s->body)) return true;
    return false;
}

static bool finite_data(const Buf *b) {
    if (!b->data || b->dtype != DT_FLOAT) return b->dtype == DT_FLOAT;   /* a parsed program: no contents */
    for (int64_t i = 0, n = kir_numel(b); i < n; i++) {
        float f;                    /* contents may sit unaligned in the model's bytes */
        memcpy(&f, (const char *)b->data + i * (int64_t)sizeof f, sizeof f);
        if (!isfinite(f)) return false;
    }
    return true;
}

/* The first load in the list's reductions of a rank-`rank` float buffer other than w. */
static Buf *conv_input(const Stmt *s, const Buf *w, int rank, bool in_red);
static Buf *expr_input(const Expr *e, const Buf *w, int rank) {
    if (e->kind == E_LOAD && e->buf != w && e->buf->rank == rank && dtype_is_float(e->buf->dtype)) return e->buf;
    for (int i = 0; i < e->nargs; i++) {
        Buf *b = expr_input(e->args[i], w, rank);
        if (b) return b;
    }
    return NULL;
}
static Buf *conv_input(const Stmt *s, const Buf *w, int rank, bool in_red) {
    for (; s; s = s->next) {
        Buf *b = in_red && s->val ? expr_input(s->val, w, rank) : NULL;
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (!b) b = conv_input(s->body, w, rank, red);
        if (!b) b = conv_input(s->then, w, rank, in_red);
        if (b) return b;
    }
    return NULL;
}

/* A conv y[n, m, o...] = sum over c, t of x[..] * w[m, c, t...] (the nest conv_layout takes)
 * that will get the cm layout (strided, or at least two vectors of output channels, or the
 * groups of group_split, `group` their output channels: whole vectors): its weights and
 * input; false if not such a conv or below the thresholds above.
 * A group of one vector (ResNeXt-50's layer3: 16 channels a group on 14x14, AVX-512) was left
 * to the width vectors with guarded taps, 8 accumulators of 14 lanes at 33-36% of the FMA
 * peak; padded, cm and one vector by a row of 14 pixels (conv_channel_block), 52-70%
 * (onnxcc bench on a loaded Zen 5, interleaved). */
static bool pad_candidate(Program *p, Kernel *k, int64_t group, Buf **w, Buf **x) {
    Stmt **nest[MAX_RANK + 1];
    int r = conv_nest(k, nest);
    if (r < 3 || lanes(p, k) < 2 || p->fp_strict || !has_conds(k->body)) return false;
    const Stmt *st = first_store((*nest[r - 1])->body), *col = *nest[r - 1], *red = col->body;
    if (!st || st->buf->rank != r || !dtype_is_float(st->buf->dtype)) return false;
    bool cl = store_channel_last(st, nest, r);
    for (int d = 0; d < r && !cl; d++)
        if (!out_index(st->idx[d], (*nest[d])->var)) return false;
    while (red && !(red->kind == S_LOOP && (red->hints & LH_REDUCTION))) red = red->next;
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    find_operands(k, col->body, rv, false, (*nest[1])->var, -1, col->var, &o);
    int64_t mg = trips(*nest[1]), esz = (int64_t)dtype_size(st->buf->dtype);
    if (!red || !const_loop(red) || trips(red) < PAD_CHANNELS || !o.b || o.b->rank != r || o.other_reads ||
        mg < 8 || !(cl || o.stride > 1 || esz * mg >= 2 * p->vector_bytes || group) || !finite_data(o.b))
        return false;
    *w = o.b;
    *x = conv_input(col->body, o.b, r, false);
    return *x != NULL;
}

/* Whether k now reads a padded copy of its input; *copy: the copy kernel made for it, or NULL
 * (none, or an earlier kernel's copy read). */
static bool conv_pad(Program *p, Kernel *k, int64_t group, Kernel **copy) {
    Buf *w, *x;
    *copy = NULL;
    return pad_candidate(p, k, group, &w, &x) && loop_pad(p, k, x, group > 0, copy);
}

/* The pixels of a register tile of BLOCK_VECTORS vectors of output channels: 14 with
 * AVX-512's 32 registers (28 accumulators, the 2 weight vectors and a broadcast), 5 with 16
 * (10 accumulators): LLVM keeps several broadcast input elements live at once, and 6 pixels
 * (12 accumulators) spilled three of them in ResNet-18's 3x3 convs on AVX2, the model 43-51 ms
 * against 36 at 5 or 4 pixels and 63-69 at 7 (thread CPU time, rough). */
static int block_pixels(const Program *p) { return vregs(p) >= 32 ? 14 : 5; }

/* After conv_layout, a conv without borders (padded, or a 1x1) runs BLOCK_VECTORS = 2
 * vectors of output channels by a row of up to block_pixels pixels (28 accumulators on
 * AVX-512, 12 on AVX2): at 7x7 a whole row of 7 on AVX-512, each weight vector feeding 7 FMAs
 * where the peeled form's 1-pixel corners fed 1; two rows of 7 (28 accumulators, 2 rows of
 * input addresses) spilled and ran ~30% slower, 4 vectors x 7 too. The output channels are
 * split in blocks of those 2 vectors, the block loop outermost, so that one block's weights
 * (590 KB for ResNet-18's layer4 3x3 convs on AVX-512, whose 9.4 MB do not fit the L2) are
 * reused from the L2 by every row instead of streamed from L3 or memory once per pixel tile:
 * in the model those convs went from ~1.55 to ~1.1 ms, layer3's from ~1.05 to ~0.96 (thread
 * CPU time, rough). Returns the channels of a block, 0 if not done; conv_pixel_tile then
 * jams the pixels.
 * Not for a channel-last 1x1 conv (one tap) on rows wider than block_pixels / 2: there
 * block_list's MR pixels by U vectors (6 x 4 on AVX-512) run each weight vector over more
 * pixels and walk the output in order, and such weights (MobileNetV2's, up to 221 KB on its
 * 14x14 maps) stay in L2 anyway: its 1x1 convs on 14x14 to 112x112 maps went from 62-77% of
 * the FMA peak to 82-95% (the model ~8% faster; rough). On 7x7 maps a row of 7 pixels still
 * beats 6 and a rest of 1, and its weights (1.6 MB) do not fit the L2. */
/* Where a conv_channel_block kernel's channel block loop goes, from a model of the bytes it
 * reads from beyond the L2 (L2_BYTES; the target does not tell its caches, so the smallest
 * L2 of the x86 machines we tune for, performance-facts.md): with the blocks outermost each
 * block's weights stay in the L2 over all rows, and the input is read once per block, from
 * the L2 if it fits there next to a block's weights, else from beyond; with the rows
 * outermost (the block loop just outside the columns) each band of input rows is read once
 * and stays near while every block runs over it, and all the weights are read once per row,
 * from the L2 if they fit there next to a band of 4 input rows. Both read every byte once
 * at least. The smaller wins; a tie keeps the blocks outermost, unless the output is beyond
 * the L2 and more than 4 times the bytes read: each block's pass then writes a strided slice
 * of every output pixel (a spectrogram's first conv, 1 -> 256 channels on 400x80 with stride
 * 2: 7.9 MB written from 128 KB of input, 0.8-0.9 -> 0.4-0.5 ms with the rows outermost). The
 * inputs of the model are printed in the schedule line: `rows(in 1703936, w 589824,
 * blocks 4, rows 56)`. A 3x3 conv of 128 channels on a 56x56 map (1.7 MB of padded NHWC
 * input, 4 blocks) ran at ~20% of the FMA peak with the blocks outermost, every tile waiting
 * on input lines from L3; ResNet-18's (64 channels at 56x56, 128 at 28x28: inputs within
 * the L2; 512 at 7x7: 9.4 MB of weights) keep the blocks outermost. */
static bool block_order_rows(Program *p, Kernel *k, int64_t wbytes, int64_t xbytes, int64_t ybytes, int64_t blocks,
                             int64_t rows) {
    int64_t wblock = wbytes / blocks;
    int64_t far_blocks = wbytes + xbytes + (xbytes + wblock <= L2_BYTES ? 0 : xbytes * (blocks - 1));
    int64_t far_rows = xbytes + wbytes + (wbytes + 4 * xbytes / rows <= L2_BYTES ? 0 : wbytes * (rows - 1));
    if (far_rows > far_blocks || (far_rows == far_blocks && (ybytes <= L2_BYTES || ybytes <= 4 * far_rows))) return false;
    sched_note(p, k, "rows(in %lld, w %lld, blocks %lld, rows %lld)", (long long)xbytes, (long long)wbytes,
               (long long)blocks, (long long)rows);
    return true;
}

/* A channel-last conv of several taps whose taps span rows only (a Kx1: kw = 1, stride 1, no
 * padding along the width, or a padded copy that has none) reads its input at (h + kh) * W +
 * w, affine in the pixel h * W + w: its rows and columns coalesced into one loop over the
 * pixels (loop_coalesce_shifted), so that conv_pixel_tile cuts the whole map, not each row,
 * into register tiles of block_pixels: a 17x17 map is 20 tiles of 14 pixels and one of 9
 * where each row was 9 + 8 (2 vectors by 9 pixels: 18 accumulators; InceptionV3's 7x1
 * convs of 128 to 192 channels ran at ~69% of the FMA peak; with the weight prefetch of
 * sched_stream.c, 6-10% faster so, its 3x1s on 8x8 ~9%). A 1x1 has its own
 * (coalesce_channel_last). */
static void coalesce_rows(Program *p, Kernel *k, const Buf *w) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    if (r < 4 || one_tap(w) || lanes(p, k) < 2 || has_conds(k->body)) return;
    Stmt *m = *nest[r - 1];
    const Stmt *st = first_store(m->body);
    if (st && is_var(st->idx[st->buf->rank - 1], m->var) && has_reduction_child(m->body))
        loop_coalesce_shifted(p, k, *nest[r - 3]);
}

/* A grouped conv's block is its group (the group loop is already outermost) where that is
 * fewer channels than BLOCK_VECTORS vectors. */
static int64_t conv_channel_block(Program *p, Kernel *k, const Buf *w, int64_t group) {
    Stmt **nest[MAX_RANK + 1];
    int r = conv_nest(k, nest);
    if (r < 3 || lanes(p, k) < 2 || has_conds(k->body)) return 0;
    Stmt *m = *nest[r - 1];
    const Stmt *st = first_store(m->body);
    bool chan_last = st && is_var(st->idx[st->buf->rank - 1], m->var);
    int64_t b = (int64_t)lanes(p, k) * BLOCK_VECTORS;
    if (group && group <= b) b = group;
    if (one_tap(w) && trips(*nest[r - 2]) > block_pixels(p) / 2 && chan_last) return 0;
    /* Output channels a whole number of vectors but not of blocks (AVX-512: 144, 208, 784,
     * 2000) take blocks of one vector, where a row of block_pixels (14 on AVX-512) keeps the
     * FMA units busy. They fell to block_list's tiles, which stream all the weights for every
     * pixel tile: a wav2letter-style 250 -> 2000 Conv1d of 32 taps (64 MB of weights, 201
     * pixels) ran at 76% of the FMA peak, bandwidth-bound at two threads (1.62x); in blocks,
     * 98% (the model 1.17x at one thread, 1.26x at two), GoogLeNet's Winograd products of
     * 208 channels 1.12x the model. With 16 registers (5 accumulators a row) the same blocks
     * lost up to 6% (ShuffleNetV2): AVX2 keeps the old tiles. */
    if (!group && trips(m) % b && trips(m) % lanes(p, k) == 0 && trips(m) > lanes(p, k) && block_pixels(p) >= 8)
        b = lanes(p, k);
    if ((trips(m) <= b && !group) || trips(m) % b || !has_reduction_child(m->body)) return 0;
    Buf *x = conv_input(m->body, w, w->rank, false);
    bool rows_outer = x && r >= 4 &&
                      block_order_rows(p, k, kir_nbytes(w), kir_nbytes(x), st ? kir_nbytes(st->buf) : 0, trips(m) / b,
                                       trips(*nest[1]));
    loop_split(p, k, nest[r - 1], b);
    for (int d = r - 2; d >= (rows_outer ? r - 2 : 1); d--) loop_interchange(p, k, *nest[d]);
    return b;
}

/* A channel-last 1x1 conv (stride 1, no padding) that conv_channel_block leaves to
 * block_list (nest n, h, w, m after conv_layout): its rows and columns coalesced into one
 * loop over the pixels, so that block_list's MR-pixel tiles run along the whole map, not
 * each row apart: a 13x13 map is 28 tiles of 6 and one pixel, not 13 rows of 6 + 6 + 1,
 * whose 1-pixel rests fed one FMA per weight vector loaded.
 * Coalesced pixels are a view of the output, so pad_in_place cannot have such a conv write a
 * padded copy's interior: ResNet-50's 1x1s before each 3x3 keep their copies (Pad kernels of
 * 14-157 us, ~0.55 ms of 56 on one thread, AVX-512). Tried: rows kept apart where a dense
 * padded conv reads the output and the extra tiles' weight bytes (each tile streams all the
 * weights) stay under 4x the output's bytes (its 56x56 1x1s only): the copies went, but the
 * 1x1s ran 0-35 us slower each and the model did not move (min of 4 interleaved runs, 1 and
 * 2 threads: within 0.1%); at 28x28 and 14x14 the convs lost more than the copies cost. */
static void coalesce_channel_last(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    if (r >= 4 && has_reduction_child((*nest[r - 1])->body)) loop_coalesce(p, k, *nest[r - 3], true);
}

/* A channel-last conv that conv_channel_block leaves to block_list (a 1x1 on wide rows, or
 * output channels that are no multiple of its block) runs its output channels innermost: each
 * MR-pixel tile streams all the weights, from beyond the L2 when they do not fit there
 * (SqueezeNet's classifier, 512 -> 1000 channels on 13x13: 2 MB of weights read 26 times,
 * ~47% of the FMA peak where the NCHW form of the same conv ran at ~80%). Where they do not
 * fit in half the L2, the output channels are cut in chunks of whole register tiles whose
 * weights do, the chunk loop outermost, so that each chunk's weights stay in the L2 over all
 * pixels while the input is read once per chunk; the rest of the channels gets its own nest
 * (distributed). Taken when the same model of bytes read beyond the L2 as block_order_rows
 * says so: chunks outermost (w + x per chunk, unless x and a chunk fit the L2 together)
 * against today's (x + w per tile of MR pixels). Printed as `chunks(in X, w W, chunk C)`. */
static void weight_chunks(Program *p, Kernel *k, const Buf *w) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    int64_t wbytes = (int64_t)kir_nbytes(w), q = (int64_t)lanes(p, k) * tile_vectors(p);
    if (r < 3 || lanes(p, k) < 2 || has_conds(k->body) || wbytes <= L2_BYTES / 2) return;
    Stmt *m = *nest[r - 1];
    const Stmt *st = first_store(m->body);
    /* the output channels stored along some dim: channel-last, or NCHW (RegNetY-800MF's
     * 784 -> 784 1x1 on 7x7 reading an NHWC map for an NCHW grouped conv after it: 2.5 MB of
     * weights streamed for each of 9 pixel tiles, 18% of the FMA peak) */
    bool stores_m = false;
    for (int d = 0; st && d < st->buf->rank; d++) stores_m |= is_var(st->idx[d], m->var);
    if (!stores_m || !has_reduction_child(m->body)) return;
    Buf *x = conv_input(m->body, w, w->rank, false);
    if (!x) x = conv_input(m->body, w, w->rank - 1, false);     /* coalesced pixels */
    if (!x) return;
    int64_t per = wbytes / trips(m), chunk = (L2_BYTES / 2) / per / q * q, xbytes = (int64_t)kir_nbytes(x), px = 1;
    for (int d = 1; d < r - 1; d++) px *= trips(*nest[d]);
    /* one register tile's weights over half the L2 but within it (R(2+1)D-18's 256 -> 460
     * 1x3x3 conv on 4x14x14: 590 KB a tile of 64 channels, all 4.2 MB streamed for each of
     * 112 pixel tiles from beyond the L2, 24% of the FMA peak): chunks of one tile. (Its
     * 512 -> 921 conv, 1.2 MB a tile, in chunks of 2 vectors: no faster, 17% either way.) */
    if (chunk < q && q * per <= L2_BYTES) chunk = q;
    if (chunk < q || chunk >= trips(m)) return;
    int64_t nchunks = (trips(m) + chunk - 1) / chunk, tiles = (px + MAX_ROWS - 1) / MAX_ROWS;
    int64_t far_chunks = wbytes + (xbytes + chunk * per <= L2_BYTES ? xbytes : xbytes * nchunks);
    int64_t far_now = xbytes + wbytes * tiles;
    if (far_chunks >= far_now) return;
    sched_note(p, k, "chunks(in %lld, w %lld, chunk %lld)", (long long)xbytes, (long long)wbytes, (long long)chunk);
    loop_split(p, k, nest[r - 1], chunk);
    for (int d = r - 2; d >= 0; d--) distribute(p, k, *nest[d]);
    for (int d = r - 2; d >= 1; d--) loop_interchange(p, k, *nest[d]);
}

/* With a tuning, the pixels of a row block: the file's (clamped to 2 .. the row and px), else in
 * --autotune's build number `variant` the variant-th candidate: the cost model's `def`, then
 * the other blocks of up to px pixels (the register bound) from the cheapest predicted
 * (sched_tile.c's model of a row of w pixels by BLOCK_VECTORS vectors). */
static int64_t tuned_pixels(Program *p, Kernel *k, int64_t w, int64_t def, int64_t px) {
    if (k->tune_kind == TUNE_NONE) {
        /* c[0] the default, then the others by predicted cost (ties: the longer block) */
        int64_t c[TUNE_CANDIDATES] = {def};
        int m = 1, v = p->tuning->variant;
        for (int64_t n = 2; n <= MIN(px, w); n++) {    /* 1 would be no block */
            if (n == def) continue;
            int64_t cost = tile_cost(w, BLOCK_VECTORS, (int)n, BLOCK_VECTORS);
            int at = m;
            while (at > 1 && (cost < tile_cost(w, BLOCK_VECTORS, (int)c[at - 1], BLOCK_VECTORS) ||
                              (cost == tile_cost(w, BLOCK_VECTORS, (int)c[at - 1], BLOCK_VECTORS) && n > c[at - 1])))
                at--;
            if (at >= TUNE_CANDIDATES) continue;
            for (int i = MIN(m, TUNE_CANDIDATES - 1); i > at; i--) c[i] = c[i - 1];
            c[at] = n;
            if (m < TUNE_CANDIDATES) m++;
        }
        k->tune_kind = TUNE_DEFAULT;
        if (v <= 0 || v >= m) return def;
        k->tune_kind = TUNE_PIXELS, k->tune_a = (int)c[v];
    }
    if (k->tune_kind != TUNE_PIXELS) return def;
    int64_t cols = MAX(2, MIN(MIN(k->tune_a, w), px));   /* w >= 2 here */
    sched_note(p, k, "tuned(pixels %lld%s)", (long long)cols, k->tune_file ? ", file" : "");
    return cols;
}

/* The pixels of a conv_channel_block kernel (nest n, channel block, o..., channels): the
 * last spatial loop jammed by a whole row, or the row cut in equal pieces of at most
 * block_pixels (the rest one narrower block). The vector loops inside are marked blocked
 * (block_list leaves them). The nest starts at *from (the kernel's body; a chunk's, from
 * block_chunks, with no row loop to jam) and holds `least` loops or more besides tiles. */
static void conv_pixel_tile(Program *p, Kernel *k, int64_t cb, Stmt **from, int least) {
    Stmt **nest[MAX_RANK + 2];
    int r = 0;
    for (Stmt **at = from; *at && !(*at)->next && (*at)->kind == S_LOOP && r < MAX_RANK + 2; at = &(*at)->body)
        if (!((*at)->hints & LH_TILE)) nest[r++] = at;
    if (r < least) return;
    Stmt **col = nest[r - 2], *c = *col;
    /* an output stored channel-first takes scatters, whose vectors of lane offsets LLVM keeps
     * in registers (hoisted out of the reduction): one pixel fewer (two accumulators), or the
     * 28 accumulators spill in every step of it (RegNetY-800MF's 1x1 convs on 14x14, NHWC in, NCHW out: 39%
     * of the FMA peak where NCHW in and out ran at 72%) */
    const Stmt *st = first_store((*nest[r - 1])->body);
    bool scatter = st && st->buf->rank >= 3 && !expr_reads_var(st->idx[st->buf->rank - 1], (*nest[r - 1])->var);
    int64_t w = trips(c), px = block_pixels(p) - (scatter && vregs(p) >= 32 ? 1 : 0);
    int64_t pieces = (w + px - 1) / px, cols = (w + pieces - 1) / pieces;
    if (w < 2 || !iterations_independent(p, k, c) || !body_private(p, k, c)) return;
    /* Rows cut in pieces of 9 pixels or fewer (15 to 18 wide) by 2 vectors left 18
     * accumulators or fewer: pieces of half the pixels, two rows of them jammed (2 x 6 pixels
     * by 2 vectors for a 17-wide row: 24 accumulators, 20 in the rest of 5). A 160 -> 160 1x7
     * conv on 17x17 (NHWC, AVX-512, one thread, isolated): 640 -> 615 us; with the weight
     * prefetch of sched_stream.c InceptionV3's 1x7s 6-10% faster in the model, its Mixed_6a
     * stride-2 3x3 to 17x17 3.90 -> 3.64 ms; the FPN bench model's stride-2 3x3 to a 16-wide
     * map 254 -> 236 us. Three rows of 9 spilled (1.7 ms); 3 vectors by 9 pixels, without the
     * prefetch 3-6% faster than 2 x 9, with it 5-8% slower than 2 x 9. */
    Stmt **row = r >= 4 && least >= 3 ? nest[r - 3] : NULL;
    bool two_rows = row && !scatter && !p->tuning && vregs(p) >= 32 && pieces >= 2 && cols <= 9 &&
                    cb == (int64_t)lanes(p, k) * BLOCK_VECTORS && trips(*row) >= 2 &&
                    iterations_independent(p, k, *row) && body_private(p, k, *row);
    if (two_rows) {
        pieces = (w + px / 2 - 1) / (px / 2);
        cols = (w + pieces - 1) / pieces;
    }
    if (p->tuning) cols = tuned_pixels(p, k, w, cols, px);
    if (k->tune_cost < 0) k->tune_cost = tile_cost(w, BLOCK_VECTORS, (int)cols, BLOCK_VECTORS);
    Stmt *main = loop_jam(p, k, col, (int)cols);
    mark_blocked(main->body);
    if (main->next == c) {
        if (trips(c) >= 2) c = loop_jam(p, k, &main->next, (int)trips(c));
        mark_blocked(c->body);
        if (two_rows) loop_jam(p, k, row, 2);
        return;
    }
    /* A row of at most SMALL_ROW_PIXELS / 2 pixels, jammed whole, is too few accumulators
     * (4 pixels x 2 vectors: 8 FMAs per weight pair, one chain each, where the core keeps ~16
     * in flight, and each weight line from beyond the L2 feeds 8 FMAs): the rows above it are
     * jammed too, up to SMALL_ROW_PIXELS pixels (24 accumulators; a 4x4 map: 3 rows, then 1),
     * at most block_pixels (5 with 16 registers). The 4x4 phases of a DCGAN generator's second
     * ConvTranspose (2x2 taps over 512 channels) went from ~44% of the FMA peak to ~52-56%;
     * the rest is their 2 MB of weights per phase streaming from beyond the L2 (~15 GB/s). */
    int64_t u = MIN(SMALL_ROW_PIXELS, block_pixels(p)) / w;
    if (row && u >= 2 && trips(*row) >= 2 && iterations_independent(p, k, *row) && body_private(p, k, *row))
        mark_blocked(loop_jam(p, k, row, (int)MIN(u, trips(*row)))->body);
}

/* ---- contractions: a loop read through a division (grouped convolutions) ----
 * A grouped conv reads its input at channel m / Mg * Cg + c (Mg output and Cg input channels
 * per group): the output channels m of one group share every input load, but the index
 * divides m, so block_list, which needs the copies of a loop to read the same input (no load
 * tying it to the vector loop), would not jam m, and conv_layout, which needs an input that
 * does not read m, leaves the plain form. So a parallel loop of the top nest whose variable v
 * some load reads only as v / D (D > 1, dividing the loop's extent) is split by D
 * (group_split): the tile loop steps over the groups, the inner loop over the D channels of
 * one, and the division simplified by the ranges reads the tile variable alone, so that the
 * inner loop is a channel loop like a dense conv's, blocked around the vectors by block_list.
 * RegNetX-400MF's 3x3 convs of 16 channels a group, AVX-512, from 5-12% of the FMA peak. */

/* How e reads variable v: -1 not at all, D > 1 only as v / D (the same D everywhere), 0
 * otherwise. */
static int64_t div_reads(const Expr *e, int v) {
    if (e->kind == E_VAR) return e->var == v ? 0 : -1;
    if (e->kind == E_BIN && e->op == K_DIV && is_var(e->args[0], v) && e->args[1]->kind == E_CONST && e->args[1]->i > 1)
        return e->args[1]->i;
    int64_t d = -1;
    for (int i = 0; i < e->nargs; i++) {
        int64_t a = div_reads(e->args[i], v);
        if (a == 0 || (a > 0 && d > 0 && a != d)) return 0;
        if (a > 0) d = a;
    }
    return d;
}

/* The divisor D of the loads in e that read v only through v / D (0 if none, -1 if two
 * loads disagree). */
static int64_t load_divisor(const Expr *e, int v) {
    int64_t d = 0;
    if (e->kind == E_LOAD) {
        int64_t a = div_reads(e, v);
        if (a > 0) return a;
    }
    for (int i = 0; i < e->nargs; i++) {
        int64_t a = load_divisor(e->args[i], v);
        if (a < 0 || (a > 0 && d > 0 && a != d)) return -1;
        if (a > 0) d = a;
    }
    return d;
}

static int64_t list_divisor(const Stmt *s, int v) {
    int64_t d = 0;
    for (; s; s = s->next) {
        int64_t a[4] = {s->val ? load_divisor(s->val, v) : 0, s->cond ? load_divisor(s->cond, v) : 0,
                        list_divisor(s->body, v), MAX(list_divisor(s->then, v), list_divisor(s->els, v))};
        for (int i = 0; i < 4; i++) {
            if (a[i] < 0 || (a[i] > 0 && d > 0 && a[i] != d)) return -1;
            if (a[i] > 0) d = a[i];
        }
    }
    return d;
}

/* Returns D, 0 if no loop was split. Only a D of at least `least` that is a multiple of
 * `multiple`: with the lanes, before conv_layout, so that a group's channels fill whole
 * vectors along the channels (ResNeXt-50's 32 channels a group on a 7x7 map, AVX-512: 2% of
 * the FMA peak along the width, ~80% so, onnxcc bench on a loaded Zen 5; 16 a group on
 * 14x14, 15 -> 37%); then, with 16 lanes, more than a vector in whole half vectors (24, 40
 * channels a group: a vector and a half-vector rest), which the width vectors had run at
 * 17-37% of the FMA peak (RegNetX-1.6GF's 24 a group, 8 outputs jammed on 12-lane width
 * vectors; with the split 46-65%, the model 37.6 -> 30.1 ms against onnxruntime's 37.9;
 * the AVX2 level of a default object took these as 3 vectors of 8 already); fewer channels
 * a group keep the width vectors. */
static int64_t group_split(Program *p, Kernel *k, int64_t multiple, int64_t least) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    for (int i = 0; i < r; i++) {
        Stmt *l = *nest[i];
        int64_t d = list_divisor(l->body, l->var);
        if (d >= least && d % multiple == 0 && l->lo->i == 0 && trips(l) > d && trips(l) % d == 0 &&
            iterations_independent(p, k, l)) {
            loop_split(p, k, nest[i], d);
            simplify_divisions(p, k);
            return d;
        }
    }
    return 0;
}

/* ---- contractions: vectors along a parallel loop, blocked by an outer one ---- */

static bool jammable(const Stmt *s) {
    return s->kind == S_LOOP && !(s->hints & (LH_REDUCTION | LH_TILE | LH_VECTOR)) && s->step == 1 &&
           s->lo->kind == E_CONST && s->hi->kind == E_CONST && has_reduction_child(s->body);
}

static bool has_jammable(const Stmt *s) {
    for (; s; s = s->next)
        if (jammable(s) || has_jammable(s->body) || has_jammable(s->then) || has_jammable(s->els))
            return true;
    return false;
}


/* How the reduction loops in list s load along var: 2 if some operand contiguously or at a
 * small stride the backend loads as whole vectors (STRIDE_LOADS: a stride-2 depthwise conv or
 * pool along its output width), else 1 if some operand depends on var (gathers), else 0. */
static int reduction_stride(const Stmt *s, int var, bool in_red) {
    int st = 0;
    for (; s && st < 2; s = s->next) {
        if (in_red && s->val) st = MAX(st, expr_lane_stride(s->val, var, STRIDE_LOADS) ? 2 : expr_reads_var(s->val, var));
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        st = MAX(st, reduction_stride(s->body, var, red));
        st = MAX(st, MAX(reduction_stride(s->then, var, in_red), reduction_stride(s->els, var, in_red)));
    }
    return st;
}

/* Picks the innermost jammable loops, except, on targets with vectors, those whose reductions
 * read operands along them only with strides other than 1: their lanes would all gather (a
 * matrix-vector product with weights [N, K] that pack_panels left alone, a reduction over
 * the last axis with the rows as the loop), and vectorising the reduction itself does
 * better. Without vectors (scalar_tile) such a loop is still worth jamming: the weights get
 * packed so that the copies read them side by side. */
static void pick_loops(Stmt *s, bool vectors) {
    for (; s; s = s->next) {
        if (jammable(s) && !has_jammable(s->body) && (!vectors || reduction_stride(s->body, s->var, false) != 1))
            s->hints |= PICKED;
        pick_loops(s->body, vectors);
        pick_loops(s->then, vectors);
        pick_loops(s->els, vectors);
    }
}

static void mark_blocked(Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) s->hints |= BLOCKED;
        mark_blocked(s->body);
        mark_blocked(s->then);
        mark_blocked(s->els);
    }
}

/* The variables of the picked loops in a list. */
static void picked_vars(const Stmt *s, bool *vv) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) vv[s->var] = true;
        picked_vars(s->body, vv);
        picked_vars(s->then, vv);
        picked_vars(s->els, vv);
    }
}

static bool reads_any(const Expr *e, const bool *vars) {
    if (e->kind == E_VAR && vars[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (reads_any(e->args[i], vars)) return true;
    return false;
}

/* Does a load in e read both v and a vectorised variable? */
static bool expr_ties(const Expr *e, int v, const bool *tv) {
    if (e->kind == E_LOAD && reads_any(e, tv) && expr_reads_var(e, v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_ties(e->args[i], v, tv)) return true;
    return false;
}

/* Does a load inside a reduction loop of the list tie v to a vectorised variable? Such a
 * load (x[.., oh + kh, ow + kw] for v = oh) differs between copies of v's loop, so jamming v
 * would not share it; loads outside the reductions (a fused residual) run once per output
 * and do not matter. */
static bool stmt_ties(const Stmt *s, int v, const bool *tv, bool in_red) {
    for (; s; s = s->next) {
        if (in_red && s->val && expr_ties(s->val, v, tv)) return true;
        if (in_red && s->cond && expr_ties(s->cond, v, tv)) return true;
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (stmt_ties(s->body, v, tv, red) || stmt_ties(s->then, v, tv, in_red) ||
            stmt_ties(s->els, v, tv, in_red))
            return true;
    }
    return false;
}

/* The first picked loop in a list. */
static const Stmt *inner_vector(const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED)) return s;
        const Stmt *r = inner_vector(s->body);
        if (!r) r = inner_vector(s->then);
        if (!r) r = inner_vector(s->els);
        if (r) return r;
    }
    return NULL;
}

/* Whether a dot4 of the list reads a word assembled from bytes (dot4_word: the input of a
 * 1x1 conv or dense layer) rather than loading it. */
static bool assembled_words(const Expr *e) {
    if (e->kind == E_BIN && e->op == K_DOT4 && (e->args[0]->kind != E_LOAD || e->args[1]->kind != E_LOAD)) return true;
    for (int i = 0; i < e->nargs && e->kind != E_LOAD; i++)
        if (assembled_words(e->args[i])) return true;
    return false;
}

static bool list_assembled(const Stmt *s) {
    for (; s; s = s->next)
        if ((s->val && assembled_words(s->val)) || list_assembled(s->body) || list_assembled(s->then) ||
            list_assembled(s->els))
            return true;
    return false;
}

/* The most copies side by side of the picked loop on a target without float vectors:
 * SCALAR_COPIES, or for a dot4 kernel INT_COPIES pixels, one where each pixel's input word is
 * assembled from bytes (a 1x1 conv on NCHW data: four loads a channel plane apart and three
 * ors), which is then shared by more channels instead. Mixed on the KWS model's pointwise
 * convs (QEMU counts per kernel): those with the residual Add fused went from 3.3-3.5 to
 * 3.05-3.2 instructions per multiply-accumulate, the two without from 2.67 to 3.07 (2 x 4
 * spilled, but less than its share of the epilogue cost); the whole run 3% fewer. An integer
 * contraction of the plain form (int32 products of zero-point-centred bytes: a depthwise conv,
 * QLinearMatMul) gets at most INT_ROWS copies, its accumulators in core registers too:
 * lenet_qop's QLinearMatMul had 10 (spilled, 1.2 KB of code; 2 now: -0.6 KB). */
static int copies_cap(const Kernel *k) {
    if (int_acc_size(k) > 0 && !dot4_kernel(k)) return INT_ROWS;
    if (!dot4_kernel(k)) return SCALAR_COPIES;
    return list_assembled(k->body) ? 1 : INT_COPIES;
}

/* Copies side by side of a loop of n iterations on a target without float vectors: a divisor
 * of n from cap (copies_cap) down to 4, or 2 below SCALAR_COPIES (no rest loop, no padding),
 * else cap or n. */
static int scalar_copies(int64_t n, int cap) {
    for (int d = cap; d >= (cap < SCALAR_COPIES ? 2 : 4); d--)
        if (n % d == 0) return d;
    return (int)MIN(cap, n);
}

/* The copies side by side of kernel k's picked loop of n iterations: scalar_copies, except
 * that a size_first integer kernel avoids a rest block (a second copy of the body and its
 * epilogue): a dot4 kernel gets a divisor of n or none; one of the plain form (a depthwise
 * conv) a divisor up to INT_ACCS accumulators where none up to its cap divides n, else keeps
 * its rest (without its tile, KWS's depthwise convs ran 5.1 -> 11 instructions per
 * multiply-accumulate on the M4). KWS's rows of 5 pixels jammed whole instead of 4 and a
 * rest of 1: flash -144 bytes on the M4, -254 on RV32; whole run 2.85 -> 2.86 instructions
 * per multiply-accumulate on the M4, 4.08 -> 4.15 on RV32 (the depthwise convs 5.12 -> 5.27
 * and 4.74 -> 5.39).
 * A float loop whose enclosing rows are blocked too (`blocked`: a conv's output channels
 * around its pixels) takes at most BLOCKED_COPIES: the rows x copies accumulators, the copies'
 * input values held across the rows and a weight must fit the 32 single registers (LLVM loads
 * all the copies' inputs first). 16 pixels x 2 channels (32 accumulators) and 8 x 3 (24 + 8
 * inputs) spilled on every reduction step: ConvTranspose phases that are 1x1 convs over a
 * 16x16 map (n = 256) ran at 4.14 instructions per multiply-accumulate on the M4 and now at
 * 2.28 as 4 x 4, the 16-output phases of a ConvTranspose1d s8 k16 3.1-3.3 -> 1.62, a dilated
 * k3 Conv1d of 8 channels 3.57 -> 2.04 (models/decoder, QEMU counts, --profile); the sample
 * models' convs (6 or fewer columns already) are unchanged. */
static int tile_copies(const Program *p, const Kernel *k, int64_t n, bool blocked) {
    int cap = copies_cap(k);
    int u = scalar_copies(n, blocked && cap == SCALAR_COPIES ? BLOCKED_COPIES : cap);
    if (!size_first(p, k) || u <= 0 || n % u == 0) return u;
    if (dot4_kernel(k)) return 1;
    if (int_acc_size(k) > 0)
        for (int d = INT_ACCS; d > u; d--)
            if (n % d == 0) return d;
    return u;
}

/* Rows blocked around scalar_copies(n) copies: up to SCALAR_ROWS while rows x copies stay
 * within SCALAR_ACCS accumulators of the 32 single registers, at least 2 (16 x 2 measured
 * best when the convs had 2 rows whatever their copies). A conv with one input channel has 9
 * taps per output: 4 channels x 6 columns (the 8x8 samples) share each input load 4 times,
 * where 2 x 6 left the store, bias and Relu of every output a bigger share: the first convs
 * of models/example and models/cnn from 2.54 and 2.55 to 2.28 and 2.19 instructions per
 * multiply-accumulate (with the one-compare Relu of backend/kernel.c), models/cnn's second
 * conv from 2.06 to 1.92 (QEMU counts, --profile). */
static int scalar_rows(const Program *p, const Kernel *k, int64_t n) {
    int cap = copies_cap(k), u = tile_copies(p, k, n, true);
    if (cap < SCALAR_COPIES) return MIN(INT_ROWS, MAX(2, INT_ACCS / u));
    return MIN(SCALAR_ROWS, MAX(2, SCALAR_ACCS / u));
}

/* Notes u as the vectors side by side of the picked loops in the list (TILE_U_SHIFT). */
static void set_tile_u(Stmt *s, int u) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & PICKED))
            s->hints = (s->hints & ~(unsigned)TILE_U_MASK) | ((unsigned)u << TILE_U_SHIFT);
        set_tile_u(s->body, u);
        set_tile_u(s->then, u);
        set_tile_u(s->els, u);
    }
}

/* With a tuning (--tune-file, --autotune), the register tile of a kernel's blocked loop:
 * the file's (every blocked loop of the kernel takes its rows and vectors, clamped to the
 * loop and the body's size), else in --autotune's build number `variant` the variant-th of
 * the first loop's candidates (tile_rank), which the kernel's other loops then take as a
 * file's; variant 0, fewer candidates or a file's `default` keep the cost model's `def`.
 * The candidate is noted on the kernel (Kernel.tune_kind), for --autotune to write. */
static TileChoice tuned_tile(Program *p, Kernel *k, const TileSpace *sp, TileChoice def, TileChoice today) {
    if (k->tune_kind == TUNE_NONE) {
        TileChoice c[TUNE_CANDIDATES];
        int n = tile_rank(sp, today, c, TUNE_CANDIDATES), v = p->tuning->variant;
        k->tune_kind = TUNE_DEFAULT;
        if (v <= 0 || v >= n) return def;
        k->tune_kind = TUNE_TILE, k->tune_a = c[v].mr, k->tune_b = c[v].u;
    }
    if (k->tune_kind != TUNE_TILE) return def;
    int64_t mr = MIN(MIN(k->tune_a, sp->rows), 64), u = MAX(1, MIN(k->tune_b, MAX(sp->vecs, 1)));
    while (mr > 1 && sp->body_nodes * mr * u > sp->max_nodes) mr--;
    sched_note(p, k, "tuned(tile %lld %lld%s)", (long long)mr, (long long)u, k->tune_file ? ", file" : "");
    return (TileChoice){(int)mr, (int)u, tile_cost(sp->rows, sp->vecs, (int)mr, (int)u)};
}

/* Whether some load of list s that is broadcast (does not read the vector variable vec)
 * reads variable var and the variable of a short reduction loop of s (a conv's taps along
 * the row, which LLVM unrolls whole) in one index: the input pixels broadcast for the rows of
 * a tile then overlap from tap to tap (x[r + t] for row r, tap t), and LLVM keeps the shared
 * values live across the taps. (A depthwise conv's overlapping loads are vectors: 5 rows
 * instead of 6 ran MobileNetV2's 10% slower.) */
static bool expr_taps_of(const Expr *x, int var, const bool *tap, int vec) {
    if (!x) return false;
    if (x->kind == E_LOAD && !expr_reads_var(x, vec))
        for (int d = 0; d < x->nargs; d++)
            if (expr_reads_var(x->args[d], var) && reads_any(x->args[d], tap)) return true;
    for (int i = 0; i < x->nargs; i++)
        if (expr_taps_of(x->args[i], var, tap, vec)) return true;
    return false;
}

static bool taps_overlap(const Stmt *s, int var, bool *tap, int vec) {
    for (; s; s = s->next) {
        bool mine = s->kind == S_LOOP && (s->hints & LH_REDUCTION) && const_loop(s) && trips(s) >= 2 && trips(s) <= 8;
        if (mine) tap[s->var] = true;
        bool hit = expr_taps_of(s->val, var, tap, vec) || taps_overlap(s->body, var, tap, vec) ||
                   taps_overlap(s->then, var, tap, vec) || taps_overlap(s->els, var, tap, vec);
        if (mine) tap[s->var] = false;
        if (hit) return true;
    }
    return false;
}

/* ---- register tiles of a conv that streams its input ----
 * A conv run as vectors of pixels (NCHW, output channels blocked as the tile's rows, each
 * weight broadcast) reads, in one pass of a register tile over its reduction, a line of the
 * input per vector for each input channel and each tap along an outer dim (taps along the
 * vector dim share lines, and do not count). Where that is more than twice the L1 and the
 * input more than half the L2 (so that pixel_tiles_outside cuts it in chunks that each row
 * block reads again from the L2: R(2+1)D-18's temporal 3x1x1 convs, 144 channels x 3 frames
 * x 4 vectors, 110 KB a pass), the tile is one vector wide and MAX_ROWS output channels
 * tall. On a Zen 4 core (one thread, onnxcc bench, interleaved; docs/benchmarks.md) those
 * convs went 16-17 -> 12.5-13.6 ms (layer1) and 5.2-6.1 -> 4.5-5.5 ms (layer2), the model
 * 1.02-1.09x; on a one-node copy of layer1's conv every one-vector tile (4, 7, 8, 14 rows)
 * beat 6x4, and 2-vector tiles of 10-12 rows lost to it. Counting every reduction step as a
 * line, the rule also took HiFi-GAN's and Wave-U-Net's 1-D convs, whose taps run along the
 * width, and made them 1.1-2x and 0.94x slower. The cost model keeps the choice (8x1 is
 * within its margin of 6x4); --autotune still measures the wider tiles. */
enum { STREAM_PASS_BYTES = 64 << 10 };

static bool loads_last_with(const Expr *e, const Buf *b, int v) {
    if (!e) return false;
    if (e->kind == E_LOAD && e->buf == b && expr_reads_var(e->args[e->nargs - 1], v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (loads_last_with(e->args[i], b, v)) return true;
    return false;
}
static bool list_loads_last_with(const Stmt *s, const Buf *b, int v) {
    for (; s; s = s->next)
        if (loads_last_with(s->val, b, v) || list_loads_last_with(s->body, b, v) ||
            list_loads_last_with(s->then, b, v) || list_loads_last_with(s->els, b, v))
            return true;
    return false;
}

/* The trips of the reduction loops at the top of list s whose variables do not index x's
 * last dim: the lines of x one vector's pass reads. */
static int64_t pass_lines(const Stmt *s, const Buf *x) {
    int64_t n = 1;
    while (s && !(s->kind == S_LOOP && (s->hints & LH_REDUCTION))) s = s->next;
    for (; s && s->kind == S_LOOP && (s->hints & LH_REDUCTION) && const_loop(s); s = s->body)
        if (!list_loads_last_with(s->body, x, s->var)) n = sat_mul(n, trips(s));
    return n;
}

/* Whether l (output channels, to block as rows) around vector loop inner (pixels, the
 * output's last dim) is such a conv, streaming an input that is no constant, and a pass of
 * u vectors reads more than STREAM_PASS_BYTES of its input. */
static bool input_streams(Program *p, Kernel *k, const Stmt *l, const Stmt *inner, int u) {
    if (!inner || k->kclass != KC_CONTRACTION || trips(l) < MAX_ROWS || trips(inner) < 4 * lanes(p, k)) return false;
    const Stmt *st = nest_store(l->body);
    const Buf *x = widest_load(inner->body, inner->var);
    /* (a streamed constant is a matmul's weights, which pack_panels lays out for this) */
    if (!st || !x || x->kind == B_CONST || st->buf->rank < 3 || !expr_reads_var(st->idx[1], l->var) ||
        expr_reads_var(st->idx[1], inner->var) || !expr_reads_var(st->idx[st->buf->rank - 1], inner->var))
        return false;
    int64_t lines = pass_lines(inner->body, x), pass = sat_mul(sat_mul(lines, u), p->vector_bytes);
    int64_t all = sat_mul(sat_mul(reduction_trips(inner->body), (int64_t)dtype_size(x->dtype)), trips(inner));
    if (pass <= STREAM_PASS_BYTES || all <= L2_BYTES / 2) return false;
    sched_note(p, k, "input_streams(%lld bytes a pass)", (long long)pass);
    return true;
}

/* Copies of the blocked loop l: rows whose accumulators fill the vector registers next to
 * the U vectors of the inner loop, fewer if l is shorter or the body would grow too big.
 * Measured and not taken (ResNet-50, AVX-512, one thread, per kernel, 3 interleaved runs):
 * 12 pixels by 2 vectors instead of 6 x 4 on the channel-last 1x1s with 256 or more input
 * and 512 or more output channels (weights packed t32 to match; each weight vector then
 * feeds 12 FMAs, half the bytes per FMA streamed from the L2) ran layer3's 256 -> 1024 on
 * 14x14 5-12% faster and the stride-2 256 -> 512 ~5%, but the model did not move: layer3's
 * 3x3s, unchanged, ran 4-7% slower in the same builds (cause not found). On 56x56 with 64
 * output channels it ran 25-37% slower, on 12 x 2 everywhere the model 1-4% slower; 8 x 3
 * with any packing, 14 x 2 and 4 x 6 slower still. */
static int block_factor(Program *p, Kernel *k, Stmt *l, const Stmt *inner) {
    if (lanes(p, k) < 2) {
        if (l->hints & SHARED) return (int)MIN(DW_ROWS, trips(l));     /* scalar_channelwise */
        int f = (int)MIN(scalar_rows(p, k, trips(inner)), trips(l));
        /* the output channels of a dot4 kernel: a divisor of their number if one >= 2 fits,
         * so that there is no rest block (a second copy of the tile and its requantisations)
         * and the packed weights need no padding rows. Cortex-M4, against 3 channels and a
         * rest of 1 (64 or 16 channels): KWS int8 -0.6 KB of code, 2.84 -> 2.79 instructions
         * per MAC, LeNet -1.1 KB, 2.93 -> 2.83; lenet_qop -0.7 KB, 2.85 -> 2.65 */
        if (dot4_kernel(k))
            for (int d = f; d >= 2; d--)
                if (trips(l) % d == 0) return d;
        return f;
    }
    int u = vector_copies(p, k, inner, true);
    /* With 16 registers, rows whose broadcast inputs overlap from tap to tap keep one register
     * more free: a U-Net's 32 -> 16 3x3 conv on 128x128 (NCHW input, NHWC output) as 6 rows
     * x 2 vectors spilled accumulators in its unrolled taps and ran at 3.0 ms, as 5 x 2 at 1.7
     * (znver3, --autotune's candidates, interleaved) */
    bool *tap = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    bool overlap = vregs(p) <= 16 && inner && taps_overlap(l->body, l->var, tap, inner->var);
    int regs = vregs(p) - overlap;
    int64_t v = MIN(MIN((regs - u - 2) / u, MAX_ROWS), l->hi->i - l->lo->i);
    /* and no rest block of one row where one row fewer divides them (an FPN's 16 x 16 map as
     * 4 x 4 rows, not 5 x 3 + 1) */
    if (overlap && v > 2 && trips(l) % v == 1 && trips(l) % (v - 1) == 0) v--;
    int64_t gr = group_rows(inner, lanes(p, k), vregs(p));
    if (gr) {                       /* few channels a group: passes/sched_group.c */
        set_tile_u(l->body, 1);
        v = MIN(gr, l->hi->i - l->lo->i);
        while (v > 1 && (int64_t)stmt_size(l->body) * v > MAX_JAM_NODES) v--;
        sched_note(p, k, "group_rows(%lld)", (long long)v);
        return (int)v;
    }
    while (v > 1 && (int64_t)stmt_size(l->body) * v * u > MAX_JAM_NODES) v--;
    if (input_streams(p, k, l, inner, u)) {
        u = 1;
        v = MIN(MAX_ROWS, trips(l));
        set_tile_u(l->body, 1);
    }
    /* the register tile: this hand-written choice, or a clearly cheaper one of the space
     * (sched_tile.c) */
    TileSpace sp = {trips(l), trips(inner) / lanes(p, k), regs, MAX_ROWS, tile_vectors(p),
                    stmt_size(l->body), MAX_JAM_NODES};
    TileChoice t = tile_choose(&sp, (TileChoice){(int)v, u, 0});
    if (p->tuning) t = tuned_tile(p, k, &sp, t, (TileChoice){(int)v, u, 0});
    if (k->tune_cost < 0) k->tune_cost = t.cost;
    if (k->tune_kind == TUNE_TILE) {
        if (t.u != u) set_tile_u(l->body, t.u);
    } else if (t.mr != v || t.u != u) {
        sched_note(p, k, "tile(rows %lld, vecs %lld, regs %d: %dx%d %lld < %lldx%d %lld)", (long long)sp.rows,
                   (long long)sp.vecs, sp.regs, t.mr, t.u, (long long)t.cost, (long long)v, u,
                   (long long)tile_cost(sp.rows, sp.vecs, (int)v, u));
        set_tile_u(l->body, t.u);
    }
    return t.mr;
}

/* A 1-D conv blocked by conv_channel_block (nest n, channel blocks, pixels, the block's
 * channels) whose input is beyond the L2: each block's pass over the pixels reads all
 * of it, from beyond the L2, at a stride of a whole input row from one input channel to the
 * next, which the prefetchers do not follow. A wav2vec2-style feature encoder's stride-2
 * 512 -> 512 Conv1d of 3 taps on 6399 columns (13 MB of input, 16 blocks) ran at 46% of the
 * FMA peak, on 799 columns at 82%. As pixel_tiles_outside does for the NCHW form, the pixels
 * of such a conv with an input beyond the L2 are cut in chunks of whole register tiles
 * (block_pixels) whose input fits in half the L2, at least MIN_CHUNKS of them (parallelize
 * cuts the chunk loop: a TCN's 128-channel convs on 1024 columns, 0.5 MB of input, in 3
 * chunks ran 0.84x at two threads, where its blocks had shared well),
 * the chunk loop outside the blocks, so that every block after the first finds the chunk's
 * input in the L2; the rest of the pixels is a nest of its own. Each nest then gets its
 * register tile (conv_pixel_tile). Printed as `block_chunks(B bytes a pixel, chunk C)`. */
enum { MIN_CHUNKS = 4 };             /* tasks enough for two threads (parallelize cuts chunks) */
static bool block_chunks(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = conv_nest(k, nest);
    if (r != 3) return false;       /* n, the pixels and a block's channels (blocks: a tile loop) */
    Stmt *n = *nest[0], *s = n->body;
    if (!s || s->next || s->kind != S_LOOP || !(s->hints & LH_TILE) || !const_loop(s)) return false;
    Stmt *px = s->body;
    if (!px || px->next || px->kind != S_LOOP || (px->hints & (LH_TILE | LH_REDUCTION | LH_VECTOR)) ||
        !const_loop(px) || px->step != 1 || px != *nest[1])
        return false;
    const Stmt *st = nest_store(px->body);
    const Buf *x = widest_load(px->body, px->var);
    if (!st || st->buf->rank != 3 || !x || x->kind == B_CONST || list_loads_with(px->body, x, s->var) ||
        (int64_t)kir_nbytes(x) <= L2_BYTES)
        return false;
    int64_t q = block_pixels(p), per = sat_mul(reduction_trips((*nest[2])->body), (int64_t)dtype_size(x->dtype));
    int64_t chunk = per > 0 ? MIN((L2_BYTES / 2) / per, trips(px) / MIN_CHUNKS) / q * q : 0;
    if (chunk < q) return false;
    sched_note(p, k, "block_chunks(%lld bytes a pixel, chunk %lld)", (long long)per, (long long)chunk);
    unsigned marks = px->hints & ~(unsigned)(LH_TILE | LH_REDUCTION | LH_VECTOR | LH_REDO | LH_PARALLEL);
    Stmt *in = loop_split(p, k, &s->body, chunk);
    in->hints |= marks;
    distribute(p, k, s);
    Stmt *rest = s->next;
    int64_t cb = s->step;
    loop_interchange(p, k, s);      /* n { chunks { blocks { pixels } }, blocks { rest } } */
    conv_pixel_tile(p, k, cb, &n->body->body, 2);
    if (rest) conv_pixel_tile(p, k, cb, &rest->body, 2);
    return true;
}

/* Jams, around each loop to vectorise, the innermost enclosing parallel loop whose copies
 * can share its loads (the row i of a matmul, an output pixel of a convolution run with
 * the output channel innermost), so that each loaded or broadcast value feeds several
 * accumulators. Returns 0 if the list holds no loop to vectorise, 1 if one not yet blocked,
 * 2 if blocked. */
static int block_list(Program *p, Kernel *k, Stmt **at) {
    int st = 0;
    while (*at) {
        Stmt *s = *at, *next = s->next;
        int in = 0;
        if (s->kind == S_LOOP) in = s->hints & PICKED ? (s->hints & BLOCKED ? 2 : 1) : block_list(p, k, &s->body);
        else if (s->kind == S_IF) in = MAX(block_list(p, k, &s->then), block_list(p, k, &s->els));
        bool *vv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
        if (s->kind == S_LOOP) picked_vars(s->body, vv);
        if (in == 1 && s->kind == S_LOOP && !(s->hints & (PICKED | LH_REDUCTION)) && s->step == 1 &&
            const_loop(s) && ((s->hints & SHARED) || !stmt_ties(s->body, s->var, vv, false))) {
            int f = block_factor(p, k, s, inner_vector(s->body));
            if (f >= 2 && iterations_independent(p, k, s) && body_private(p, k, s)) {
                /* the rows left over get one narrower block */
                Stmt *r = loop_jam(p, k, at, f);
                mark_blocked(r->body);
                if (r->next == s && trips(s) >= 2) mark_blocked(loop_jam(p, k, &r->next, (int)trips(s))->body);
                in = 2;
            }
        }
        while (*at != next) at = &(*at)->next;
        st = MAX(st, in);
    }
    return st;
}

/* A conv with at most FEW_CHANNELS output channels (an image generator's last layer to RGB,
 * a vocoder's to one waveform), left in NCHW, vectorised along its columns: block_list jams
 * its channels, all of them, which leaves that few accumulators per vector of columns (3: one
 * FMA chain per channel, each 4 cycles long, ~25% of the FMA peak). The row loop just inside
 * the channel block is jammed too, to FEW_CHANNEL_ACCS accumulators per vector (AVX-512 only:
 * with 16 registers the tile already fills them). */
enum { FEW_CHANNELS = 4, FEW_CHANNEL_ACCS = 8 };
static void few_channel_rows(Program *p, Kernel *k) {
    if (vregs(p) < 32 || lanes(p, k) < 2 || k->kclass != KC_CONTRACTION) return;
    for (Stmt **at = &k->body; *at && !(*at)->next && (*at)->kind == S_LOOP; at = &(*at)->body) {
        Stmt *t = *at, *row = t->body;
        if (!(t->hints & LH_TILE)) continue;
        if (t->step > FEW_CHANNELS || t->step < 2 || !row || row->next || row->kind != S_LOOP ||
            (row->hints & (LH_TILE | LH_REDUCTION)) || !const_loop(row) || row->step != 1 || trips(row) < 2 ||
            !row->body || row->body->kind != S_LOOP || (row->body->hints & LH_REDUCTION))
            return;     /* rows with their columns inside (not a coalesced pixel loop to vectorise) */
        int64_t u = MIN(trips(row), FEW_CHANNEL_ACCS / t->step);
        if (u >= 2 && iterations_independent(p, k, row) && body_private(p, k, row)) loop_jam(p, k, &t->body, (int)u);
        return;
    }
}

/* Without float vectors (Cortex-M4): the picked loop J jammed by U (a divisor of J's extent
 * from SCALAR_COPIES down to 4, so that there is no rest loop and no padding; else
 * SCALAR_COPIES with the rest jammed as one block), so that each load that does not depend on
 * J (the input of a dense layer, an input pixel of a conv run channel-innermost) feeds U
 * accumulators; a constant 2-d operand read b[k, j] or b[j, k] (a dense layer's weights) is
 * packed as [N/U, K, U] when U divides N, so that the U weights of one k are adjacent. With
 * the rows or pixels around J blocked (scalar_rows), up to 32 accumulators of the 32 single
 * registers (LLVM spills what does not fit). Measured on the firmware samples (QEMU
 * instruction counts): with separate vmul + vadd 8 x 2 beat 4 x 2, 4 x 3 and 2 x 4; once
 * the backend wrote vfma, 16 copies took the dense layers from 2.6-2.9 to 2.3-2.6
 * instructions per multiply-accumulate (each k: one load of the input, 16 of weights, 16
 * vfma), and left the convs as they were; with the packed weights of one k loaded by one
 * vldmia (backend/kernel.c, vldm_groups), 1.75-2.1. A dot4 kernel gets INT_COPIES instead. */
static void scalar_tile(Program *p, Kernel *k, Stmt **at, bool blocked) {
    Stmt *j = *at, *red = j->body;
    int64_t n = trips(j);
    int u = tile_copies(p, k, n, blocked);
    if (u < 2 || j->step != 1 || !iterations_independent(p, k, j) || !body_private(p, k, j)) return;
    while (red && !(red->kind == S_LOOP && (red->hints & LH_REDUCTION))) red = red->next;
    Operand o = {0};
    bool *rv = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    if (red) find_operands(k, red, rv, false, j->var, red->var, -1, &o);
    Stmt *main = loop_jam(p, k, at, u);
    if (main->next == j && trips(j) >= 2) loop_jam(p, k, &main->next, (int)trips(j));
    if (o.b && o.b->rank == 2 && u >= 4 && n % u == 0) {
        int jd = o.transposed ? 0 : 1;
        PackDim pd[3] = {{jd, u, false}, {1 - jd, 0, false}, {jd, u, true}};
        loop_pack(p, k, o.b, arena_printf(p->arena, "n%d", u), 3, pd);
    }
}

/* The dot4 weight words w4[m, k4] that a reduction reads with m from loop variable v: the
 * first packable rank-2 operand of a K_DOT4 whose row index reads v. */
static Buf *dot4_weights(const Kernel *k, const Expr *e, int v) {
    if (e->kind == E_BIN && (e->op == K_DOT4 || e->op == K_DOT2))
        for (int i = 0; i < 2; i++) {
            const Expr *w = e->args[i];
            if (w->kind == E_LOAD && w->buf->rank == 2 && packable(k, w->buf) && expr_reads_var(w->args[0], v) &&
                !expr_reads_var(w->args[1], v))
                return w->buf;
        }
    for (int i = 0; i < e->nargs && e->kind != E_LOAD; i++) {
        Buf *b = dot4_weights(k, e->args[i], v);
        if (b) return b;
    }
    return NULL;
}

static Buf *dot4_weights_list(const Kernel *k, const Stmt *s, int v) {
    for (; s; s = s->next) {
        Buf *b = s->val ? dot4_weights(k, s->val, v) : NULL;
        if (!b) b = dot4_weights_list(k, s->body, v);
        if (!b) b = dot4_weights_list(k, s->then, v);
        if (!b) b = dot4_weights_list(k, s->els, v);
        if (b) return b;
    }
    return NULL;
}

/* Without float vectors, an integer contraction whose output channels were jammed by f
 * (block_list: f rows of dot4 words, each word unpacked once and fed to the pixels' smlads):
 * the words packed [M/f, K4, f], so that the f words of one k4 are adjacent and one pointer
 * walks all of them, where f row pointers (and their spills: the M4 has 13 core registers for
 * accumulators, operands and pointers) walked the rows. */
static void int_pack_rows(Program *p, Kernel *k, Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind != S_LOOP) continue;
        Buf *w = (s->hints & LH_TILE) && s->step >= 2 ? dot4_weights_list(k, s->body, s->var) : NULL;
        if (w) {
            PackDim pd[3] = {{0, s->step, false}, {1, 0, false}, {0, s->step, true}};
            loop_pack(p, k, w, arena_printf(p->arena, "m%d", (int)s->step), 3, pd);
            return;
        }
        int_pack_rows(p, k, s->body);
    }
}

/* Vectorises the picked loops (all their copies after blocking). One that cannot run as
 * vectors (an if on its variable inside) stays a scalar loop; on targets without float
 * vectors they get scalar_tile instead. */
static void vector_list(Program *p, Kernel *k, Stmt **at) {
    while (*at) {
        Stmt *s = *at, *next = s->next;
        if (s->kind == S_LOOP && (s->hints & PICKED)) {
            int w = lanes(p, k), u = vector_copies(p, k, s, s->hints & BLOCKED);
            int tu = (int)((s->hints & TILE_U_MASK) >> TILE_U_SHIFT);
            bool blocked = s->hints & BLOCKED;
            if (tu) u = (int)MAX(1, MIN(tu, trips(s) / MAX(w, 1)));
            s->hints &= ~(unsigned)(PICKED | BLOCKED | TILE_U_MASK);
            if (w >= 2 && lanes_ok(p, k, s)) vector_tile(p, k, at, w, u, kernel_independent(k));
            else if (w < 2) scalar_tile(p, k, at, blocked);
        } else {
            vector_list(p, k, &s->body);
            vector_list(p, k, &s->then);
            vector_list(p, k, &s->els);
        }
        while (*at != next) at = &(*at)->next;
    }
}

/* ---- other kernels: the innermost loops that store ---- */

static bool stores_only(const Stmt *s) {
    bool store = false;
    for (; s; s = s->next) {
        if (s->kind != S_STORE && s->kind != S_SET) return false;
        store |= s->kind == S_STORE;
    }
    return store;
}

static void strip_list(Program *p, Kernel *k, Stmt **at) {
    while (*at) {
        Stmt *s = *at, *next = s->next;
        if (s->kind == S_LOOP && !(s->hints & (LH_VECTOR | LH_REDUCTION | LH_TILE)) && stores_only(s->body)) {
            int w = lanes(p, k);
            if (w >= 2 && lanes_ok(p, k, s) && trips(s) >= 2) vector_tile(p, k, at, w, 1, false);
        } else if (!(s->kind == S_LOOP && (s->hints & LH_VECTOR))) {
            strip_list(p, k, &s->body);
            strip_list(p, k, &s->then);
            strip_list(p, k, &s->els);
        }
        while (*at != next) at = &(*at)->next;
    }
}

/* An elementwise kernel's perfect nest reordered so that its loops run in the order of the
 * store's indices: after a layout change (channel_last_layouts) its store reads y[n, h, w, c]
 * inside loops n, c, h, w, and the innermost loop would step C elements at a time through
 * every operand; with c innermost it reads and writes them front to back (strip_list's
 * vectors then are contiguous). A no-op on a canonical kernel. */
static void store_order(Program *p, Kernel *k) {
    Stmt **nest[MAX_RANK + 1];
    int r = parallel_nest(k, nest);
    Access acc[MAX_ACCESSES];
    if ((k->kclass != KC_ELEMENTWISE && (r != 4 || permuting_accesses(k, acc) <= 0)) || r < 2 || !kernel_independent(k))
        return;
    const Stmt *st = first_store((*nest[r - 1])->body);
    if (!st || st->buf->rank != r) return;
    for (int d = 0; d < r; d++) {
        int e = d;
        while (e < r && !is_var(st->idx[d], (*nest[e])->var)) e++;
        if (e == r) return;             /* not a permutation of the nest */
        for (; e > d; e--)
            if (!loop_interchange(p, k, *nest[e - 1])) return;
    }
}

/* ---- vector reductions ----
 * Innermost reduction loops outside vector loops whose accumulations the backend can keep in
 * vector registers, that read some operand contiguously along the loop (else every lane would
 * be a gather) and run for at least two target vectors of the widest accumulator. Reductions
 * inside vector loops (matmul and conv tiles, whose lanes are the columns) stay as they are. */
/* Whether loop s is one that vector_reductions turns into a vector reduction. */
static bool vreducible(Program *p, const Kernel *k, const Stmt *s) {
    if (s->kind != S_LOOP || (s->hints & LH_VECTOR)) return false;
    bool unit = false;
    for (const Stmt *b = s->body; b; b = b->next)
        unit |= b->kind == S_SET && expr_lane_stride(b->val, s->var, 1);
    int esz = unit ? reduction_acc_size(p, k, s) : 0;
    return esz && p->vector_bytes / esz >= 2 && trips(s) >= 2 * (int64_t)(p->vector_bytes / esz);
}

static void vector_reductions(Program *p, Kernel *k, Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & LH_VECTOR)) continue;
        if (vreducible(p, k, s)) {
            loop_vectorize_reduction(p, k, s);
            continue;
        }
        vector_reductions(p, k, s->body);
        vector_reductions(p, k, s->then);
        vector_reductions(p, k, s->els);
    }
}

/* ---- rows of reductions ----
 * A loop over rows whose body reduces each row to use the result on it (softmax's max, then
 * its sum, then the row's stores; LayerNorm's mean and variance; ReduceMean over the last
 * axis) runs one row's chain at a time: each vector reduction ends in a horizontal combine that
 * the next step waits for, and a row of 64 floats is too little work to hide that. ROW_COPIES
 * rows jammed side by side give the core independent chains to interleave. A Softmax over
 * 4 x 64 rows of 64 (the bench transformer's attention): 17.0 -> 13.3 us on a Zen 5 core. */
enum { ROW_COPIES = 4 };

/* ... directly in body, or in a loop of one iteration there (LayerNorm's [N, 1, D] rows) */
static bool reduces_rows(Program *p, const Kernel *k, const Stmt *body) {
    for (const Stmt *s = body; s; s = s->next)
        if (vreducible(p, k, s) || (const_loop(s) && !s->hints && trips(s) == 1 && reduces_rows(p, k, s->body)))
            return true;
    return false;
}

static void row_jam(Program *p, Kernel *k, Stmt **at) {
    while (*at) {
        Stmt *s = *at, *next = s->next;
        if (s->kind == S_LOOP && !(s->hints & (LH_VECTOR | LH_REDUCTION | LH_TILE)) && const_loop(s) &&
            trips(s) >= 2 && reduces_rows(p, k, s->body) && body_private(p, k, s) &&
            iterations_independent(p, k, s)) {
            loop_jam(p, k, at, (int)MIN(trips(s), ROW_COPIES));
        } else if (s->kind == S_LOOP || s->kind == S_IF) {
            row_jam(p, k, &s->body);
            row_jam(p, k, &s->then);
            row_jam(p, k, &s->els);
        }
        while (*at != next) at = &(*at)->next;
    }
}

void schedule(Program *p) {
    kir_unjoin(p);
    if (p->opt_level < 2) return;
    int64_t macs = 0;
    for (int i = 0; i < p->nkernels; i++) {
        /* a kernel's key in tuning files: what it computes before the schedule changes it */
        Kernel *k = p->kernels[i];
        bool tunable = p->tuning && !k->dead && k->ctl == KCTL_NONE && k->kclass == KC_CONTRACTION;
        k->tune_sig = tunable ? tune_signature(k) : 0;
        k->tune_kind = TUNE_NONE, k->tune_cost = -1, k->tune_file = false;
        const TuneEntry *e = tune_find(p->tuning, p->tune_target, k);
        if (e) k->tune_kind = (int)e->kind, k->tune_a = e->a, k->tune_b = e->b, k->tune_file = true;
    }
    for (int i = 0; i < p->nkernels; i++)
        if (!p->kernels[i]->dead) {
            mark_reductions(p->kernels[i]->body);
            macs = sat_add(macs, kernel_macs(p->kernels[i]));
        }
    channel_last_layouts(p);
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        channel_inner(p, k);
        if (k->kclass == KC_CONTRACTION) {
            bool nhwc = false;
            Buf *fw = NULL;
            Kernel *copy = NULL;
            if (few_outputs_k(p, k, &nhwc, &fw) && nhwc) {
                bool taps = few_taps(p, k, fw, &copy);
                unroll_reductions(p, k, &k->body, 1), outputs_inner(p, k);
                if (taps) taps_pixels(p, k, fw->dims[0]);
            }
            /* a 1x1 conv that may prefer its channels as vectors tries conv_layout first */
            bool defer = channels_over_pixels(p, k);
            if (!defer) coalesce_pixels(p, k);
            Buf *cmw = NULL;
            bool pad = false;
            int64_t cb = 0, group = 0;
            bool c_last = false, narrow = false, taps = false;
            if (kernel_independent(k)) {   /* the interchanges there assume so */
                /* a depthwise conv's weights are a few rows of M, its tiles up to 8 vectors */
                if (!channelwise_layout(p, k, &narrow) && !scalar_channelwise(p, k, &taps)) {
                    /* groups of whole vectors of channels: split first, each group then
                     * laid out and blocked as a dense conv (conv_nest passes the groups) */
                    group = lanes(p, k) >= 2 ? group_split(p, k, lanes(p, k), 2) : 0;
                    if (!group && lanes(p, k) >= 16) group = group_split(p, k, lanes(p, k) / 2, lanes(p, k) + 1);
                    if (!copy) pad = conv_pad(p, k, group, &copy);  /* (keeps few_taps' copy) */
                    cmw = conv_layout(p, k, group);
                    if (cmw && (pad || (!p->fp_strict && !one_tap(cmw))))
                        c_last = sink_channels(p, k, cmw);
                    if (cmw && !group) coalesce_rows(p, k, cmw);
                    if (cmw) cb = conv_channel_block(p, k, cmw, group);
                    if (cmw && !cb && !group) coalesce_channel_last(p, k), weight_chunks(p, k, cmw);
                }
                if (!cmw && defer && !group && !pad) coalesce_pixels(p, k), defer = false;
                if (!cmw) pack_panels(p, k);    /* conv_layout chose the weights' layout */
            }
            if (!cmw && !group && kernel_independent(k)) group_split(p, k, 1, 2);
            if (!few_macs(p, k, macs)) {
                pick_loops(k->body, lanes(p, k) >= 2);
                if (cb && !block_chunks(p, k)) conv_pixel_tile(p, k, cb, &k->body, 3);
                block_list(p, k, &k->body);
                if (!cmw && !group) rows_outside_tiles(p, k, k->body), pixel_tiles_outside(p, k, k->body);
                if (!cmw) few_channel_rows(p, k);
            }
            clear_shared(k->body);
            vector_list(p, k, &k->body);
            if (taps) unroll_taps(p, k, &k->body);
            if (narrow) group_unroll_taps(p, k);
            if (lanes(p, k) < 2 && dot4_kernel(k)) int_pack_rows(p, k, k->body);
            /* a group's channels are a tile: each group streams its own weights */
            if (cmw) conv_tiles(p, k, cmw, cb ? cb : group ? group : lanes(p, k) * tile_vectors(p), c_last);
            if (copy) {                     /* the copy kernel, now before k */
                strip_list(p, copy, &copy->body);
                i++;
            }
        }
        store_order(p, k);
        concat_order(p, k);
        if (k->kclass != KC_CONTRACTION && lanes(p, k) >= 2 && !p->fp_strict) row_jam(p, k, &k->body);
        if (k->kclass != KC_CONTRACTION && size_first(p, k)) coalesce_nest(p, k);
        strip_list(p, k, &k->body);
    }
    stream_weights(p);
    for (int i = 0; i < p->nkernels && !p->fp_strict; i++)
        if (!p->kernels[i]->dead) vector_reductions(p, p->kernels[i], p->kernels[i]->body);
}
