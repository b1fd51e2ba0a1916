/* movement.c - the data-movement family: Transpose, Concat, Split, Slice, Pad, Expand, Tile,
 * DepthToSpace, SpaceToDepth, ReverseSequence, Trilu, CenterCropPad.
 *
 * These lower to KC_COPY kernels that iterate over the output and load from a computed input
 * position, so each output element is stored exactly once; index arithmetic is arranged so
 * that no load can leave its buffer (Pad splits its loops into padding and interior ranges).
 * Expand is exactly lower_map's broadcast form, an elementwise kernel that fusion can merge.
 * Operands that decide a shape (Slice's starts, Pad's pads, Tile's repeats, Split's sizes)
 * must be compile-time constants; operands that do not (Trilu's k) are loaded by the kernel.
 * Slice's starts may be run-time values when its ends are provably the starts plus constants
 * (a Loop body slicing at its iteration number): the length is then static. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- Expand ---- */

void infer_expand(Graph *g, Node *n) {
    Value *x = n->in[0];
    Value *s = rule_const_ints(g, n, 1, "shape", MAX_RANK);
    if (!s) return;
    int64_t want[MAX_RANK], dims[MAX_RANK];
    int rank = (int)ir_numel(s);
    for (int d = 0; d < rank; d++) want[d] = ir_const_int(s, d);
    if (!ir_broadcast(x->rank, x->dims, rank, want, &rank, dims)) {
        error(ir_where(g, n), "cannot expand %s to %s", rule_dims_str(g, x->rank, x->dims),
              rule_dims_str(g, (int)ir_numel(s), want));
        return;
    }
    ir_set_shape(n->out[0], x->dtype, rank, dims);
}

static Expr *map_same(Lower *L, Node *n, Expr **vals, void *ctx) { return vals[0]; }

void lower_expand(Lower *L, Node *n) {
    Buf *in = lower_in(L, n, 0);
    lower_map(L, n, lower_out(L, n, 0), 1, &in, map_same, NULL);
}

/* ---- Transpose ---- */

/* perm attribute (default: reversed dims), checked to be a permutation. */
static bool get_perm(Graph *g, Node *n, int rank, int *perm) {
    const int64_t *p;
    int np = ir_attr_ints(n, "perm", &p);
    bool seen[MAX_RANK] = {false};
    if (!p) {
        for (int d = 0; d < rank; d++) perm[d] = rank - 1 - d;
        return true;
    }
    if (np != rank) {
        error(ir_where(g, n), "perm has %d entries for rank %d", np, rank);
        return false;
    }
    for (int d = 0; d < rank; d++) {
        if (!rule_axis(g, n, p[d], rank, &perm[d])) return false;
        if (seen[perm[d]]) {
            error(ir_where(g, n), "perm is not a permutation");
            return false;
        }
        seen[perm[d]] = true;
    }
    return true;
}

void infer_transpose(Graph *g, Node *n) {
    Value *x = n->in[0];
    int perm[MAX_RANK];
    int64_t dims[MAX_RANK];
    if (!get_perm(g, n, x->rank, perm)) return;
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* out[o0..on-1] = in[i] with i[perm[d]] = o[d] (lower_permute). */
void lower_transpose(Lower *L, Node *n) {
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int perm[MAX_RANK];
    if (get_perm(L->g, n, in->rank, perm)) lower_permute(L, lower_kname(L, n), out, in, perm);
}

/* ---- Concat ---- */

void infer_concat(Graph *g, Node *n) {
    Value *x = n->in[0];
    int axis;
    if (!ir_attr(n, "axis")) {
        error(ir_where(g, n), "axis attribute missing");
        return;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, &axis)) return;
    int64_t dims[MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    for (int i = 1; i < n->nin; i++) {
        Value *v = n->in[i];
        bool ok = v->rank == x->rank && v->dtype == x->dtype;
        for (int d = 0; ok && d < x->rank; d++) ok = d == axis || v->dims[d] == x->dims[d];
        if (!ok) {
            error(ir_where(g, n), "input '%s' (%s %s) does not match '%s' (%s %s) on axis %d",
                  v->name, dtype_name(v->dtype), rule_dims_str(g, v->rank, v->dims), x->name,
                  dtype_name(x->dtype), rule_dims_str(g, x->rank, x->dims), axis);
            return;
        }
        dims[axis] += v->dims[axis];
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* One kernel for the whole output: a loop nest per input stores into its own slice, so every
 * output element is written once. Along a spatial axis of a 4-d map (the row bands of a
 * Winograd conv: passes/winograd.c) the inputs' nests share the loops before the axis, so
 * that the kernel moves each channel's plane on its own (a region_mover, passes/schedule.c)
 * and the maps around it can be NHWC; along the channels each input keeps a whole nest (the
 * Concat form passes/schedule.c's concat_user takes). */
void lower_concat(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *out = lower_out(L, n, 0);
    int axis;
    if (!rule_axis(L->g, n, ir_attr_int(n, "axis", 0), out->rank, &axis)) return;
    Kernel *k = lower_kernel(L, n, KC_COPY, KNOINS, out, NULL, NULL);
    int shared = out->rank == 4 && axis >= 2 ? axis : 0, vars[MAX_RANK];
    lower_vars(k, shared, vars);
    int64_t off = 0;
    Stmt *body = NULL;
    for (int i = 0; i < n->nin; i++) {
        Buf *in = lower_in(L, n, i);
        if (kir_numel(in) == 0) continue;
        Expr *iidx[MAX_RANK], *oidx[MAX_RANK];
        kir_param(p, k, in, KP_IN);
        lower_vars(k, in->rank - shared, &vars[shared]);
        lower_var_idx(p, in->rank, vars, iidx);
        lower_var_idx(p, in->rank, vars, oidx);
        oidx[axis] = kx_addc(p, oidx[axis], off);
        Stmt *s = ks_store(p, out, oidx, kx_load(p, in, iidx));
        body = ks_seq(body, lower_wrap(p, in->rank - shared, &in->dims[shared], &vars[shared], s));
        off += in->dims[axis];
    }
    k->body = body && shared ? lower_wrap(p, shared, out->dims, vars, body) : body;
}

/* ---- Slice ---- */

/* Per input dim: first element, step and element count of the slice (ONNX clamping rules).
 * With run-time starts (rt), the element count is static and start[] is not used: the kernel
 * loads starts[slot[d]] for each sliced dim d (slot -1: not sliced). */
typedef struct SliceDims {
    int64_t start[MAX_RANK], step[MAX_RANK], count[MAX_RANK];
    bool rt;
    int slot[MAX_RANK];
} SliceDims;

/* v as base + off[] elementwise, base reached through ops that keep the elements in order
 * (Identity, Unsqueeze, Squeeze, Reshape, Flatten) and Add/Sub of an integer constant. */
static Value *offset_base(Value *v, int64_t k, int64_t *off) {
    for (int64_t i = 0; i < k; i++) off[i] = 0;
    for (Node *p; (p = v->producer);) {
        if ((p->op == OP_Identity || p->op == OP_Unsqueeze || p->op == OP_Squeeze ||
             p->op == OP_Reshape || p->op == OP_Flatten) && ir_numel(p->in[0]) == k) {
            v = p->in[0];
            continue;
        }
        if ((p->op != OP_Add && p->op != OP_Sub) || p->nin != 2) break;
        Value *a = p->in[0], *b = p->in[1];
        Value *c = b->data ? b : p->op == OP_Add && a->data ? a : NULL;
        Value *x = c == b ? a : b;
        if (!c || x->data || dtype_is_float(c->dtype) || ir_numel(x) != k ||
            (ir_numel(c) != 1 && ir_numel(c) != k))
            break;
        for (int64_t i = 0; i < k; i++)
            off[i] += (p->op == OP_Sub ? -1 : 1) * ir_const_int(c, ir_numel(c) == 1 ? 0 : i);
        v = x;
    }
    return v;
}

/* Run-time starts and ends = starts + len[] (len constant): the lengths, or false. */
static bool slice_lengths(Node *n, int64_t *len) {
    Value *starts = n->in[1], *ends = n->in[2];
    int64_t k = ir_numel(starts), os[MAX_RANK], oe[MAX_RANK];
    if (starts->data || dtype_is_float(starts->dtype) || starts->rank > 1 || k > MAX_RANK ||
        ir_numel(ends) != k || offset_base(starts, k, os) != offset_base(ends, k, oe))
        return false;
    for (int64_t i = 0; i < k; i++) len[i] = oe[i] - os[i];
    return true;
}

static bool slice_dims(Graph *g, Node *n, SliceDims *s) {
    Value *x = n->in[0];
    int64_t len[MAX_RANK];
    s->rt = slice_lengths(n, len);
    Value *starts = s->rt ? n->in[1] : rule_const_ints(g, n, 1, "starts", MAX_RANK);
    Value *ends = s->rt ? n->in[2] : rule_const_ints(g, n, 2, "ends", MAX_RANK);
    Value *axes = n->nin > 3 && n->in[3] ? rule_const_ints(g, n, 3, "axes", MAX_RANK) : NULL;
    Value *steps = n->nin > 4 && n->in[4] ? rule_const_ints(g, n, 4, "steps", MAX_RANK) : NULL;
    if (!starts || !ends || (n->nin > 3 && n->in[3] && !axes) || (n->nin > 4 && n->in[4] && !steps))
        return false;
    int64_t k = ir_numel(starts);
    if (ir_numel(ends) != k || (axes && ir_numel(axes) != k) || (steps && ir_numel(steps) != k)) {
        error(ir_where(g, n), "starts, ends, axes and steps differ in length");
        return false;
    }
    bool seen[MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) s->start[d] = 0, s->step[d] = 1, s->count[d] = x->dims[d], s->slot[d] = -1;
    for (int64_t i = 0; i < k; i++) {
        int ax;
        if (!rule_axis(g, n, axes ? ir_const_int(axes, i) : i, x->rank, &ax)) return false;
        if (seen[ax]) {
            error(ir_where(g, n), "axis %d repeated", ax);
            return false;
        }
        seen[ax] = true;
        int64_t dim = x->dims[ax], st = steps ? ir_const_int(steps, i) : 1;
        if (st == 0) {
            error(ir_where(g, n), "step 0 on axis %d", ax);
            return false;
        }
        if (s->rt) {
            /* ends = starts + len: len elements wherever the start falls in range */
            if (st != 1) {
                error(ir_where(g, n), "starts '%s' is not a compile-time constant, and step %lld on "
                      "axis %d is not 1 (unsupported)", starts->name, (long long)st, ax);
                return false;
            }
            s->count[ax] = MAX(0, MIN(len[i], dim));
            s->slot[ax] = (int)i;
            continue;
        }
        int64_t b = ir_const_int(starts, i), e = ir_const_int(ends, i);
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (st > 0) {
            b = MAX(0, MIN(b, dim));
            e = MAX(0, MIN(e, dim));
            s->count[ax] = e > b ? (e - b + st - 1) / st : 0;
        } else {
            b = MAX(-1, MIN(b, dim - 1));
            e = MAX(-1, MIN(e, dim - 1));
            s->count[ax] = b > e ? (b - e - st - 1) / -st : 0;
        }
        s->start[ax] = b;
        s->step[ax] = st;
    }
    return true;
}

void infer_slice(Graph *g, Node *n) {
    SliceDims s;
    if (!slice_dims(g, n, &s)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, s.count);
}

/* A run-time start of a dim: negative counts from the end, then clamped into [0, dim - count]
 * so that all count elements stay inside the dim (ONNX clamps into [0, dim] and gives a
 * shorter slice near the end, which a static count cannot; the README says so). */
static Expr *slice_start(Program *p, Kernel *k, Buf *starts, int slot, int64_t dim, int64_t count) {
    Expr *idx[1] = {kx_index(p, slot)};
    kir_param(p, k, starts, KP_IN);
    Expr *b = kx_cast(p, DT_INT64, kx_load(p, starts, starts->rank ? idx : NULL));
    Expr *neg = kx_bin(p, K_LT, kx_clone(p, b), kx_int(p, DT_INT64, 0));
    b = kx_select(p, neg, kx_bin(p, K_ADD, b, kx_int(p, DT_INT64, dim)), kx_clone(p, b));
    b = kx_bin(p, K_MAX, kx_bin(p, K_MIN, b, kx_int(p, DT_INT64, dim - count)), kx_int(p, DT_INT64, 0));
    return kx_cast(p, DT_INDEX, b);
}

void lower_slice(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    SliceDims s;
    if (!slice_dims(L->g, n, &s)) return;
    int vars[MAX_RANK];
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, s.rt ? KC_GENERIC : KC_COPY, KINS(in), out, vars, oidx);
    Buf *starts = s.rt ? lower_in(L, n, 1) : NULL;
    for (int d = 0; d < in->rank; d++)
        iidx[d] = s.rt ? s.slot[d] < 0 ? oidx[d]
                         : kx_add(p, oidx[d], slice_start(p, k, starts, s.slot[d], in->dims[d], s.count[d]))
                       : kx_addc(p, kx_mul(p, oidx[d], s.step[d]), s.start[d]);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
}

/* ---- Pad ---- */

typedef enum PadMode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } PadMode;

/* Mode and per-dim pads (begin, end; negative crops) of every axis, from pads and the
 * optional axes (input 3, Pad-18) that pads' entries apply to; false after an error. */
static bool pad_params(Graph *g, Node *n, PadMode *mode, int64_t *pb, int64_t *pe) {
    Value *x = n->in[0];
    const char *m = ir_attr_str(n, "mode", "constant");
    if (!strcmp(m, "constant")) *mode = PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) *mode = PAD_REFLECT;
    else if (!strcmp(m, "edge")) *mode = PAD_EDGE;
    else if (!strcmp(m, "wrap")) *mode = PAD_WRAP;    /* Pad-19 */
    else {
        error(ir_where(g, n), "pad mode '%s' is not supported", m);
        return false;
    }
    if (n->nin < 2 || !n->in[1]) {
        error(ir_where(g, n), "pads input missing");
        return false;
    }
    Value *pads = rule_const_ints(g, n, 1, "pads", 2 * MAX_RANK);
    if (!pads) return false;
    Value *axes = n->nin > 3 && n->in[3] ? rule_const_ints(g, n, 3, "axes", MAX_RANK) : NULL;
    if (n->nin > 3 && n->in[3] && !axes) return false;
    int naxes = axes ? (int)ir_numel(axes) : x->rank;
    if (ir_numel(pads) != 2 * naxes) {
        error(ir_where(g, n), "%lld pads for %d axes", (long long)ir_numel(pads), naxes);
        return false;
    }
    for (int d = 0; d < x->rank; d++) pb[d] = pe[d] = 0;
    for (int i = 0; i < naxes; i++) {
        int d = i;
        if (axes && !rule_axis(g, n, ir_const_int(axes, i), x->rank, &d)) return false;
        pb[d] = ir_const_int(pads, i);
        pe[d] = ir_const_int(pads, naxes + i);
    }
    for (int d = 0; d < x->rank; d++) {
        int64_t dim = x->dims[d];
        bool bad = dim + pb[d] + pe[d] < 0;
        if (*mode == PAD_REFLECT) bad |= pb[d] > dim - 1 || pe[d] > dim - 1;
        if (*mode == PAD_EDGE) bad |= (pb[d] > 0 || pe[d] > 0) && dim == 0;
        if (*mode == PAD_WRAP)
            bad |= (pb[d] > 0 || pe[d] > 0) && dim - MAX(-pb[d], 0) - MAX(-pe[d], 0) <= 0;
        if (bad) {
            error(ir_where(g, n), "pads %lld,%lld do not fit axis %d of size %lld in mode %s",
                  (long long)pb[d], (long long)pe[d], d, (long long)dim, m);
            return false;
        }
    }
    return true;
}

void infer_pad(Graph *g, Node *n) {
    Value *x = n->in[0];
    PadMode mode;
    int64_t pb[MAX_RANK], pe[MAX_RANK], dims[MAX_RANK];
    if (!pad_params(g, n, &mode, pb, pe)) return;
    Value *c = n->nin > 2 ? n->in[2] : NULL;
    if (c && (ir_numel(c) != 1 || c->dtype != x->dtype)) {
        error(ir_where(g, n), "constant_value '%s' must be a single %s", c->name,
              dtype_name(x->dtype));
        return;
    }
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[d] + pb[d] + pe[d];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* Constant mode without conditionals: along each dim the output splits into a leading pad
 * range, the interior (which recurses into the next dim) and a trailing pad range; pad ranges
 * fill their whole sub-block with the value, so no load is ever out of range. */
typedef struct PadNest {
    Program *p;
    Kernel *k;
    Buf *in, *out;
    const int64_t *pb, *pe;
    Expr *fill;
} PadNest;

static Stmt *pad_fill(PadNest *c, int d, Expr **oidx, int64_t lo, int64_t hi) {
    int vars[MAX_RANK];
    int rank = c->out->rank;
    lower_vars(c->k, rank - d, vars);
    for (int j = d; j < rank; j++) oidx[j] = kx_var(c->p, vars[j - d]);
    Stmt *s = ks_store(c->p, c->out, oidx, kx_clone(c->p, c->fill));
    for (int j = rank - 1; j > d; j--) s = ks_loop(c->p, vars[j - d], 0, c->out->dims[j], 1, s);
    return ks_loop(c->p, vars[0], lo, hi, 1, s);
}

static Stmt *pad_nest(PadNest *c, int d, Expr **oidx, Expr **iidx) {
    Program *p = c->p;
    if (d == c->out->rank) return ks_store(p, c->out, oidx, kx_load(p, c->in, iidx));
    int64_t n = c->out->dims[d], lo = MAX(c->pb[d], 0), hi = n - MAX(c->pe[d], 0);
    Stmt *s = NULL;
    if (lo > 0) s = ks_seq(s, pad_fill(c, d, oidx, 0, MIN(lo, n)));
    if (hi > lo) {
        int v = kir_var(c->k);
        oidx[d] = kx_var(p, v);
        iidx[d] = kx_addc(p, kx_var(p, v), -c->pb[d]);
        s = ks_seq(s, ks_loop(p, v, lo, hi, 1, pad_nest(c, d + 1, oidx, iidx)));
    }
    if (n > MAX(hi, lo)) s = ks_seq(s, pad_fill(c, d, oidx, MAX(hi, lo), n));
    return s;
}

/* Reflect/edge/wrap: one nest; the source position is folded back into the axis
 * arithmetically (reflect: |t| then (dim-1) - |(dim-1) - t|, valid because pads < dim; edge:
 * clamp; wrap: t mod dim, taken of t + a multiple of dim that is not negative, since K_REM
 * truncates; a negative pad crops first, as the ONNX reference does). */
static Expr *pad_src(Program *p, PadMode mode, Expr *o, int64_t pb, int64_t pe, int64_t dim) {
    Expr *t = kx_addc(p, o, -pb);
    Expr *last = kx_index(p, dim - 1);
    if (mode == PAD_WRAP) {         /* around what is left of the axis after cropping */
        if (pb <= 0 && pe <= 0) return t;
        int64_t lo = MAX(-pb, 0), len = dim - lo - MAX(-pe, 0), b = MAX(pb, 0);
        Expr *w = kx_addc(p, o, rule_ceil_div(b, len) * len - b);
        return kx_addc(p, kx_bin(p, K_REM, w, kx_index(p, len)), lo);
    }
    if (mode == PAD_EDGE) {
        if (pb > 0) t = kx_bin(p, K_MAX, t, kx_index(p, 0));
        if (pe > 0) t = kx_bin(p, K_MIN, t, last);
        return t;
    }
    if (pb > 0) t = kx_un(p, K_ABS, t);
    if (pe > 0) t = kx_bin(p, K_SUB, last, kx_un(p, K_ABS, kx_bin(p, K_SUB, kx_index(p, dim - 1), t)));
    return t;
}

static Expr *pad_value(Lower *L, Node *n, Kernel *k, DType t) {
    Program *p = L->p;
    Value *c = n->nin > 2 ? n->in[2] : NULL;
    if (!c) return kx_const(p, t, 0);
    if (c->data) return rule_scalar_const(p, c, t);
    Buf *b = lower_in(L, n, 2);
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, zero);
}

void lower_pad(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *in = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    PadMode mode;
    int64_t pb[MAX_RANK], pe[MAX_RANK];
    if (!pad_params(L->g, n, &mode, pb, pe)) return;
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(in), out, NULL, NULL);
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    if (mode == PAD_CONSTANT) {
        PadNest c = {p, k, in, out, pb, pe, pad_value(L, n, k, out->dtype)};
        k->body = pad_nest(&c, 0, oidx, iidx);
        return;
    }
    int vars[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, oidx);
    for (int d = 0; d < in->rank; d++)
        iidx[d] = pad_src(p, mode, kx_var(p, vars[d]), pb[d], pe[d], in->dims[d]);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
}

/* ---- Trilu and EyeLike: values chosen by the position ---- */

void infer_trilu(Graph *g, Node *n) {
    Value *x = n->in[0];
    if (x->rank < 2) {
        error(ir_where(g, n), "input '%s' has rank %d; Trilu needs at least 2", x->name, x->rank);
        return;
    }
    if (n->nin > 1 && n->in[1] && !rule_int_scalar(g, n, 1, "k")) return;
    ir_set_shape(n->out[0], x->dtype, x->rank, x->dims);
}

/* out = x where column - row >= k (upper) or <= k (lower), else 0. The loop variables of the
 * last two dims take part in the expression, which fusion substitutes like any other. */
void lower_trilu(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int vars[MAX_RANK], r = out->rank;
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, KINS(x), out, vars, idx);
    Expr *kk = n->nin > 1 && n->in[1] ? rule_index_operand(L, n, k, 1) : kx_index(p, 0);
    Expr *diag = kx_bin(p, K_SUB, idx[r - 1], idx[r - 2]);
    Expr *keep = kx_bin(p, ir_attr_int(n, "upper", 1) ? K_GE : K_LE, diag, kk);
    Expr *v = kx_select(p, keep, kx_load(p, x, idx), kx_const(p, out->dtype, 0));
    k->body = lower_wrap(p, r, out->dims, vars, ks_store(p, out, idx, v));
}

/* ---- Tile ---- */

void infer_tile(Graph *g, Node *n) {
    Value *x = n->in[0];
    Value *rep = rule_const_ints(g, n, 1, "repeats", MAX_RANK);
    if (!rep) return;
    if (ir_numel(rep) != x->rank) {
        error(ir_where(g, n), "%lld repeats for rank %d", (long long)ir_numel(rep), x->rank);
        return;
    }
    int64_t dims[MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        int64_t r = ir_const_int(rep, d);
        if (r < 0) {
            error(ir_where(g, n), "negative repeat %lld", (long long)r);
            return;
        }
        dims[d] = x->dims[d] * r;
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* out[o...] = x[o % dims...] (no remainder where the dim is not repeated). */
void lower_tile(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), out, vars, idx);
    for (int d = 0; d < x->rank; d++)
        xi[d] = out->dims[d] == x->dims[d] ? idx[d] : kx_bin(p, K_REM, idx[d], kx_index(p, x->dims[d]));
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- Split ---- */

/* The sizes of the parts along the axis: the `split` attribute (opset < 13) or constant input,
 * else num_outputs (opset 18: the last part may be smaller) or the output count (even parts). */
static bool split_sizes(Graph *g, Node *n, int *axis, int64_t *sizes) {
    Value *x = n->in[0];
    const int64_t *attr;
    int na = ir_attr_ints(n, "split", &attr);
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 0), x->rank, axis)) return false;
    int64_t dim = x->dims[*axis], sum = 0;
    if (attr || (n->nin > 1 && n->in[1])) {
        Value *s = attr ? NULL : rule_const_ints(g, n, 1, "split", n->nout);
        if (!attr && !s) return false;
        int count = attr ? na : (int)ir_numel(s);
        if (count != n->nout) {
            if (g) error(ir_where(g, n), "%d split sizes for %d outputs", count, n->nout);
            return false;
        }
        for (int i = 0; i < count; i++) sum += sizes[i] = attr ? attr[i] : ir_const_int(s, i);
    } else {
        int64_t parts = ir_attr_int(n, "num_outputs", n->nout);
        int64_t chunk = parts > 0 ? (dim + parts - 1) / parts : 0;
        if (parts != n->nout || (!ir_attr(n, "num_outputs") && dim % parts)) {
            if (g) error(ir_where(g, n), "cannot split size %lld into %d equal parts",
                         (long long)dim, n->nout);
            return false;
        }
        for (int i = 0; i < n->nout; i++) sum += sizes[i] = MAX(0, MIN(chunk, dim - chunk * i));
    }
    for (int i = 0; i < n->nout; i++)
        if (sizes[i] < 0) sum = -1;
    if (sum != dim) {
        if (g) error(ir_where(g, n), "split sizes do not add up to the axis size %lld", (long long)dim);
        return false;
    }
    return true;
}

void infer_split(Graph *g, Node *n) {
    Value *x = n->in[0];
    int axis;
    int64_t *sizes = ARENA_ARRAY(g->arena, int64_t, n->nout + 1);
    if (!split_sizes(g, n, &axis, sizes)) return;
    for (int i = 0; i < n->nout; i++) {
        if (!n->out[i]) continue;
        int64_t dims[MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        ir_set_shape(n->out[i], x->dtype, x->rank, dims);
    }
}

/* One copy kernel per part: out_i[o...] = x[o... shifted by the offset along the axis]. */
void lower_split(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0);
    int axis;
    int64_t *sizes = ARENA_ARRAY(p->arena, int64_t, n->nout + 1), off = 0;
    if (!split_sizes(NULL, n, &axis, sizes)) die("lower_split %s: not checked by infer_split", n->name);
    for (int i = 0; i < n->nout; off += sizes[i++]) {
        if (!n->out[i] || n->out[i]->data) continue;
        Buf *out = lower_out(L, n, i);
        int vars[MAX_RANK];
        Expr *idx[MAX_RANK], *xi[MAX_RANK];
        Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), out, vars, idx);
        for (int d = 0; d < x->rank; d++) xi[d] = d == axis ? kx_addc(p, idx[d], off) : idx[d];
        k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
    }
}

/* ---- DepthToSpace and SpaceToDepth ---- */

static bool block_shape(Graph *g, Node *n, int64_t *b) {
    Value *x = n->in[0];
    *b = ir_attr_int(n, "blocksize", 0);
    if (x->rank != 4 || *b <= 0) {
        error(ir_where(g, n), "needs a rank-4 input and a positive blocksize");
        return false;
    }
    if (*b > 65536) {               /* b * b must divide the channels or b the map: never so large */
        error(ir_where(g, n), "blocksize %lld is over 65536", (long long)*b);
        return false;
    }
    const char *mode = ir_attr_str(n, "mode", "DCR");
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) {
        error(ir_where(g, n), "mode '%s' is not DCR or CRD", mode);
        return false;
    }
    return true;
}

void infer_depth_to_space(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t b;
    if (!block_shape(g, n, &b)) return;
    if (x->dims[1] % (b * b)) {
        error(ir_where(g, n), "channels %lld not divisible by blocksize^2", (long long)x->dims[1]);
        return;
    }
    int64_t dims[4] = {x->dims[0], x->dims[1] / (b * b), x->dims[2] * b, x->dims[3] * b};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* The channel of block offset (i, j) for output channel c: (i*b + j) * C' + c (DCR) or
 * c * b*b + i*b + j (CRD). */
static Expr *d2s_channel(Program *p, bool dcr, Expr *i, Expr *j, Expr *c, int64_t b, int64_t cs) {
    Expr *blk = kx_add(p, kx_mul(p, i, b), j);
    return dcr ? kx_add(p, kx_mul(p, blk, cs), c) : kx_add(p, kx_mul(p, c, b * b), blk);
}

/* Blocks up to this size, from -O1, are written as rows of stores side by side: loops over
 * the input n, c, h, the block row i and w, and for each block column j
 *   out[n, c, h*b + i, w*b + j] = in[n, ch(i, j, c), h, w]
 * so that the loads are plain (vectors along w) and each line of out is written whole in one
 * iteration, the backend's stride-b stores being shuffles and masked stores (b <= 4), where the
 * output-order form below gathered every lane (y / b, y % b): [1, 64, 64, 64], b = 2, ~81 ->
 * ~20 us (znver5, onnxcc bench, loaded machine). */
enum { D2S_SIDE = 4 };

/* out[n, c, y, x] = in[n, ch, y / b, x / b] with the block offset (y % b, x % b) in the channel:
 * ch = (y%b * b + x%b) * C' + c (DCR) or c * b*b + y%b * b + x%b (CRD). */
void lower_depth_to_space(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int64_t b = ir_attr_int(n, "blocksize", 1), c = out->dims[1];
    bool dcr = !strcmp(ir_attr_str(n, "mode", "DCR"), "DCR");
    int vars[5];
    Expr *idx[4], *bk = kx_index(p, b);
    if (p->opt_level >= 1 && b >= 2 && b <= D2S_SIDE) {
        Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), out, NULL, NULL);
        int64_t dims[5] = {x->dims[0], c, x->dims[2], b, x->dims[3]};
        lower_vars(k, 5, vars);
        Stmt *body = NULL;
        for (int64_t j = 0; j < b; j++) {
            Expr *v[5];
            lower_var_idx(p, 5, vars, v);
            Expr *oi[4] = {v[0], v[1], kx_add(p, kx_mul(p, v[2], b), v[3]), kx_addc(p, kx_mul(p, v[4], b), j)};
            Expr *w[5];
            lower_var_idx(p, 5, vars, w);
            Expr *ii[4] = {w[0], d2s_channel(p, dcr, w[3], kx_index(p, j), w[1], b, c), w[2], w[4]};
            body = ks_seq(body, ks_store(p, out, oi, kx_load(p, x, ii)));
        }
        k->body = lower_wrap(p, 5, dims, vars, body);
        return;
    }
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), out, vars, idx);
    Expr *yi = kx_bin(p, K_REM, idx[2], bk), *xi = kx_bin(p, K_REM, idx[3], bk);
    Expr *ch = d2s_channel(p, dcr, yi, xi, idx[1], b, c);
    Expr *ii[4] = {idx[0], ch, kx_bin(p, K_DIV, idx[2], bk), kx_bin(p, K_DIV, idx[3], bk)};
    k->body = lower_wrap(p, 4, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, ii)));
}

void infer_space_to_depth(Graph *g, Node *n) {
    Value *x = n->in[0];
    int64_t b;
    if (!block_shape(g, n, &b)) return;
    if (x->dims[2] % b || x->dims[3] % b) {
        error(ir_where(g, n), "spatial dims not divisible by blocksize %lld", (long long)b);
        return;
    }
    int64_t dims[4] = {x->dims[0], x->dims[1] * b * b, x->dims[2] / b, x->dims[3] / b};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* out[n, (bh*b + bw)*C + c, h, w] = in[n, c, h*b + bh, w*b + bw] */
void lower_space_to_depth(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    int64_t b = ir_attr_int(n, "blocksize", 1), c = x->dims[1];
    int vars[4];
    Expr *idx[4], *bk = kx_index(p, b);
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), out, vars, idx);
    Expr *blk = kx_bin(p, K_DIV, idx[1], kx_index(p, c));
    Expr *bh = kx_bin(p, K_DIV, blk, bk), *bw = kx_bin(p, K_REM, blk, bk);
    Expr *ii[4] = {idx[0], kx_bin(p, K_REM, idx[1], kx_index(p, c)), kx_add(p, kx_mul(p, idx[2], b), bh),
                   kx_add(p, kx_mul(p, idx[3], b), bw)};
    k->body = lower_wrap(p, 4, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, ii)));
}

/* ---- ReverseSequence ---- */

static bool revseq_axes(Graph *g, Node *n, int *batch, int *time) {
    Value *x = n->in[0], *len = n->in[1];
    int64_t b = ir_attr_int(n, "batch_axis", 1), t = ir_attr_int(n, "time_axis", 0);
    if (x->rank < 2 || !((b == 0 && t == 1) || (b == 1 && t == 0))) {
        error(ir_where(g, n), "needs rank >= 2 and batch_axis/time_axis 0 and 1");
        return false;
    }
    if (len->rank != 1 || len->dims[0] != x->dims[b] || dtype_is_float(len->dtype)) {
        error(ir_where(g, n), "sequence_lens '%s' must be 1-D integers, one per batch", len->name);
        return false;
    }
    *batch = (int)b, *time = (int)t;
    return true;
}

void infer_reverse_sequence(Graph *g, Node *n) {
    int b, t;
    if (!revseq_axes(g, n, &b, &t)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, n->in[0]->dims);
}

/* y[.. b, t ..] = x[.. b, len[b] - 1 - t ..] for t < len[b], else x itself; the source time is
 * clamped into the axis so that a bad length cannot read outside x. */
void lower_reverse_sequence(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *len = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    int b, t, vars[MAX_RANK];
    if (!revseq_axes(L->g, n, &b, &t)) return;
    Expr *idx[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x, len), out, vars, idx);
    Expr *bi[1] = {idx[b]};
    Expr *l = kx_cast(p, DT_INDEX, kx_load(p, len, bi));
    Expr *rev = kx_addc(p, kx_bin(p, K_SUB, l, idx[t]), -1);
    Expr *src = kx_select(p, kx_bin(p, K_LT, idx[t], kx_clone(p, l)), rev, idx[t]);
    src = kx_bin(p, K_MIN, kx_bin(p, K_MAX, src, kx_index(p, 0)), kx_index(p, x->dims[t] - 1));
    for (int d = 0; d < out->rank; d++) xi[d] = d == t ? src : idx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- CenterCropPad (opset 18) ----
 * Each named axis is cropped or zero-padded to its new size around its centre: the output's
 * element o comes from o + off, off = floor((dim - size) / 2) when cropping and
 * -floor((size - dim) / 2) when padding (the reference's slices), 0 outside the input. */

static bool ccp_params(Graph *g, Node *n, int64_t *out, int64_t *off) {
    Value *x = n->in[0];
    Value *sh = rule_const_ints(g, n, 1, "shape", MAX_RANK);
    if (!sh) return false;
    const int64_t *axv;
    int na = ir_attr(n, "axes") ? ir_attr_ints(n, "axes", &axv) : x->rank;
    if (ir_numel(sh) != na) {
        error(ir_where(g, n), "shape has %lld entries for %d axes", (long long)ir_numel(sh), na);
        return false;
    }
    for (int d = 0; d < x->rank; d++) out[d] = x->dims[d], off[d] = 0;
    for (int i = 0; i < na; i++) {
        int a = i;
        if (ir_attr(n, "axes") && !rule_axis(g, n, axv[i], x->rank, &a)) return false;
        int64_t size = ir_const_int(sh, i), dim = x->dims[a];
        if (size < 0) {
            error(ir_where(g, n), "size %lld of axis %d is negative", (long long)size, a);
            return false;
        }
        out[a] = size;
        off[a] = size <= dim ? (dim - size) / 2 : -((size - dim) / 2);
    }
    return true;
}

void infer_center_crop_pad(Graph *g, Node *n) {
    int64_t out[MAX_RANK], off[MAX_RANK];
    if (!ccp_params(g, n, out, off)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, out);
}

void lower_center_crop_pad(Lower *L, Node *n) {
    Program *p = L->p;
    int64_t out[MAX_RANK], off[MAX_RANK];
    if (!ccp_params(L->g, n, out, off)) return;
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int ov[MAX_RANK];
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *ok = NULL;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, ov, oi);
    for (int d = 0; d < x->rank; d++) {
        Expr *src = kx_addc(p, kx_clone(p, oi[d]), off[d]);
        if (off[d] < 0 || out[d] + off[d] > x->dims[d]) {     /* padded along d */
            Expr *in = kx_and(p, kx_bin(p, K_GE, kx_clone(p, src), kx_index(p, 0)),
                              kx_bin(p, K_LT, kx_clone(p, src), kx_index(p, x->dims[d])));
            ok = kx_and(p, ok, in);
            src = kx_bin(p, K_MIN, kx_bin(p, K_MAX, src, kx_index(p, 0)), kx_index(p, MAX(x->dims[d] - 1, 0)));
        }
        xi[d] = src;
    }
    bool empty = false;             /* nothing to load from: all padding */
    for (int d = 0; d < x->rank; d++) empty |= x->dims[d] == 0;
    Expr *v = empty ? kx_const(p, y->dtype, 0) : kx_load(p, x, xi);
    if (ok && !empty) v = kx_select(p, ok, v, kx_const(p, y->dtype, 0));
    k->body = lower_wrap(p, y->rank, y->dims, ov, ks_store(p, y, oi, v));
}
