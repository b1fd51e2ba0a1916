/* resample.c - the resampling family: Resize (Upsample is rewritten into Resize by
 * canonicalize.c), GridSample (linear, nearest and cubic sampling in 1 to 3 spatial dims with
 * zeros/border/reflection padding), AffineGrid (the sampling grids GridSample takes, opset 20)
 * and RoiAlign (bilinear samples averaged per bin).
 *
 * Resize computes its sampling positions at compile time (every size is static) into small
 * constant tables, so that the kernel is a gather or a short weighted sum whatever the
 * interpolation and coordinate mode; from -O1, a nearest Resize whose tables repeat each
 * element an integral number of times along some dims reads plainly instead (resize_repeat),
 * and one interpolating along several dims is one kernel per dim (resize_separable).
 * GridSample's coordinates are data: it keeps them in
 * scalar registers and guards every tap so that no load leaves its buffer (clamped index,
 * value selected away when out of range). */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* A constant buffer of `count` elements of type t made from v (copied into the arena). */
static Buf *const_table(Lower *L, const char *name, DType t, int rank, const int64_t *dims,
                        const void *v) {
    Buf *b = kir_buf_new(L->p, name, t, rank, dims, B_CONST);
    size_t sz = dtype_size(t) * (size_t)kir_numel(b);
    void *d = arena_alloc(L->p->arena, sz + 1);
    memcpy(d, v, sz);
    b->data = d;
    return b;
}

/* ---- Resize ---- */

typedef enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC } ResizeMode;

typedef struct ResizeSpec {
    ResizeMode mode;
    const char *coord, *nearest;
    double scale[MAX_RANK], roi_lo[MAX_RANK], roi_hi[MAX_RANK], cubic_a, extrap;
    int64_t out[MAX_RANK];
    bool exclude_outside;
    bool antialias;                 /* Resize-18: linear/cubic filters stretched by 1/scale
                                       when downscaling (nearest ignores it) */
} ResizeSpec;

/* Reads the node's attributes and its constant scales/sizes/roi (inputs X, roi, scales,
 * sizes). */
static bool resize_spec(Graph *g, Node *n, ResizeSpec *rs) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0], *roi = NULL, *sc = NULL, *sz = NULL;
    int r = x->rank;
    const char *mode = ir_attr_str(n, "mode", "nearest");
    rs->mode = !strcmp(mode, "nearest") ? RZ_NEAREST : !strcmp(mode, "cubic") ? RZ_CUBIC
             : RZ_LINEAR;
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear") &&
        strcmp(mode, "cubic")) {
        error(where, "unknown mode '%s'", mode);
        return false;
    }
    rs->cubic_a = ir_attr_float(n, "cubic_coeff_a", -0.75f);
    rs->extrap = ir_attr_float(n, "extrapolation_value", 0);
    rs->exclude_outside = ir_attr_int(n, "exclude_outside", 0) != 0;
    rs->coord = ir_attr_str(n, "coordinate_transformation_mode", "half_pixel");
    rs->nearest = ir_attr_str(n, "nearest_mode", "round_prefer_floor");
    roi = n->nin > 1 ? n->in[1] : NULL;
    sc = n->nin > 2 && n->in[2] && ir_numel(n->in[2]) ? n->in[2] : NULL;
    sz = n->nin > 3 && n->in[3] && ir_numel(n->in[3]) ? n->in[3] : NULL;
    rs->antialias = ir_attr_int(n, "antialias", 0) != 0 && rs->mode != RZ_NEAREST;
    /* Resize-18's axes: scales, sizes and roi name these dims only, the others keep theirs */
    int ax[MAX_RANK], na = r;
    const int64_t *axv;
    bool named[MAX_RANK] = {false};
    if (ir_attr(n, "axes")) {
        na = ir_attr_ints(n, "axes", &axv);
        if (na > r) {
            error(where, "%d axes for rank %d", na, r);
            return false;
        }
        for (int i = 0; i < na; i++) {
            if (!rule_axis(g, n, axv[i], r, &ax[i])) return false;
            if (named[ax[i]]) {
                error(where, "axis %d is named twice", ax[i]);
                return false;
            }
            named[ax[i]] = true;
        }
    } else {
        for (int i = 0; i < r; i++) ax[i] = i, named[i] = true;
    }
    if (!!sc == !!sz || (sc && (!sc->data || ir_numel(sc) != na)) ||
        (sz && (!sz->data || ir_numel(sz) != na))) {
        error(where, "need exactly one of scales and sizes, constant, with %d entries", na);
        return false;
    }
    bool crop = !strcmp(rs->coord, "tf_crop_and_resize");
    if (crop && (!roi || !roi->data || ir_numel(roi) != 2 * na)) {
        error(where, "tf_crop_and_resize needs a constant roi with %d entries", 2 * na);
        return false;
    }
    for (int d = 0; d < r; d++) {
        rs->scale[d] = 1;
        rs->out[d] = x->dims[d];
        rs->roi_lo[d] = 0;
        rs->roi_hi[d] = 1;
    }
    for (int i = 0; i < na; i++) {
        int d = ax[i];
        if (crop) {
            rs->roi_lo[d] = ir_const_float(roi, i);
            rs->roi_hi[d] = ir_const_float(roi, na + i);
        }
        if (sc) {
            rs->scale[d] = (double)(float)ir_const_float(sc, i);
            rs->out[d] = (int64_t)floor(rs->scale[d] * (double)x->dims[d]);
        } else {
            rs->out[d] = ir_const_int(sz, i);
            rs->scale[d] = (double)rs->out[d] / (double)x->dims[d];
        }
    }
    /* keep_aspect_ratio_policy (sizes only): one scale for the named axes, the smallest
     * (not_larger) or the largest (not_smaller), and sizes rounded half up from it */
    const char *keep = ir_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(keep, "stretch") && strcmp(keep, "not_larger") && strcmp(keep, "not_smaller")) {
        error(where, "unknown keep_aspect_ratio_policy '%s'", keep);
        return false;
    }
    if (sz && strcmp(keep, "stretch")) {
        double k = rs->scale[ax[0]];
        for (int i = 1; i < na; i++)
            k = !strcmp(keep, "not_larger") ? fmin(k, rs->scale[ax[i]]) : fmax(k, rs->scale[ax[i]]);
        for (int i = 0; i < na; i++) {
            rs->scale[ax[i]] = k;
            rs->out[ax[i]] = (int64_t)(k * (double)x->dims[ax[i]] + 0.5);
        }
    }
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric",
                                         "pytorch_half_pixel", "align_corners", "asymmetric",
                                         "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    bool okc = false, okn = false;
    for (int i = 0; i < COUNTOF(coords); i++) okc = okc || !strcmp(rs->coord, coords[i]);
    for (int i = 0; i < COUNTOF(nearests); i++) okn = okn || !strcmp(rs->nearest, nearests[i]);
    if (!okc || !okn) {
        error(where, "unsupported coordinate_transformation_mode '%s' or nearest_mode '%s'",
              rs->coord, rs->nearest);
        return false;
    }
    for (int d = 0; d < r; d++)
        if (rs->scale[d] <= 0 || rs->out[d] < 1) {
            error(where, "scale of dim %d gives an empty output", d);
            return false;
        }
    if (rs->mode != RZ_NEAREST && !dtype_is_float(x->dtype)) {
        error(where, "%s interpolation needs a float input", mode);
        return false;
    }
    return true;
}

void infer_resize(Graph *g, Node *n) {
    ResizeSpec rs;
    if (!resize_spec(g, n, &rs)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, rs.out);
}

/* Input coordinate of output position o along one dim (the onnx reference's formulas; the
 * "output width" in them is scale * input width, not the rounded output size). Sets *outside
 * for tf_crop_and_resize positions outside the input. */
static double resize_coord(const ResizeSpec *rs, int d, int64_t o, int64_t in, bool *outside) {
    double s = rs->scale[d], ow = s * (double)in, x = (double)o, xo;
    const char *c = rs->coord;
    *outside = false;
    if (!strcmp(c, "align_corners")) xo = ow == 1 ? 0 : x * (double)(in - 1) / (ow - 1);
    else if (!strcmp(c, "asymmetric")) xo = x / s;
    else if (!strcmp(c, "pytorch_half_pixel")) xo = ow == 1 ? -0.5 : (x + 0.5) / s - 0.5;
    else if (!strcmp(c, "tf_half_pixel_for_nn")) xo = (x + 0.5) / s;
    else if (!strcmp(c, "half_pixel_symmetric")) {      /* Resize-19 */
        double adjustment = (double)rs->out[d] / ow, center = (double)in / 2;
        xo = center * (1 - adjustment) + (x + 0.5) / s - 0.5;
    }
    else if (!strcmp(c, "tf_crop_and_resize")) {
        double lo = rs->roi_lo[d], hi = rs->roi_hi[d];
        double n1 = (double)(in - 1);   /* the reference's order of operations, exactly */
        xo = (ow == 1 ? (hi - lo) * n1 / 2 : x * (hi - lo) * n1 / (ow - 1)) + lo * n1;
        *outside = xo < 0 || xo > (double)(in - 1);
    } else xo = (x + 0.5) / s - 0.5;
    return xo;
}

/* Interpolation weights of the taps around a coordinate with fractional part ratio in (0, 1]
 * (the left neighbour is ceil(x) - 1, so an integral x has ratio 1). */
static int resize_coeffs(const ResizeSpec *rs, double xo, double ratio, double *cf) {
    double a = rs->cubic_a;
    switch (rs->mode) {
    case RZ_NEAREST: {
        const char *m = rs->nearest;
        bool hi = xo == floor(xo) ? true : !strcmp(m, "round_prefer_floor") ? ratio > 0.5
                : !strcmp(m, "round_prefer_ceil") ? ratio >= 0.5 : !strcmp(m, "ceil");
        cf[0] = !hi, cf[1] = hi;
        return 2;
    }
    case RZ_LINEAR: cf[0] = 1 - ratio, cf[1] = ratio; return 2;
    case RZ_CUBIC: {
        double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        cf[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
        cf[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
        cf[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        cf[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
        return 4;
    }
    }
    return 0;
}

/* The number of taps of an antialiased filter at scale s (the reference's footprint: even,
 * 2 or 4 when not downscaling) */
static int antialias_taps(const ResizeSpec *rs, double s) {
    s = fmin(s, 1);
    int64_t start = rs->mode == RZ_CUBIC ? (int64_t)floor(-2 / s) + 1 : (int64_t)floor(-1 / s) + 1;
    return (int)(2 - 2 * start);
}

/* Antialiased weights of taps i = -(nt/2 - 1) .. nt/2 (around the left neighbour): the
 * triangle (linear) or Keys cubic kernel at (i - ratio) * min(s, 1), normalised to sum 1. */
static void antialias_coeffs(const ResizeSpec *rs, double s, double ratio, int nt, double *cf) {
    double a = rs->cubic_a, sum = 0;
    s = fmin(s, 1);
    for (int j = 0; j < nt; j++) {
        double x = fabs(((double)(j - (nt / 2 - 1)) - ratio) * s), c;
        if (rs->mode == RZ_LINEAR) c = fmax(0, fmin(1, 1 - x));
        else if (x <= 1) c = ((a + 2) * x - (a + 3)) * x * x + 1;
        else if (x < 2) c = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
        else c = 0;
        cf[j] = c;
        sum += c;
    }
    for (int j = 0; j < nt; j++) cf[j] /= sum;
}

/* One dim's sampling table: for every output position, `taps` input indices (clamped into
 * the input, as the reference's edge padding does) and their weights. A dim where each
 * position takes a single input with weight 1 (nearest; unscaled dims) gets taps = 1. */
typedef struct ResizeDim {
    int taps;
    int64_t *idx;               /* [out][taps] */
    float *wt;                  /* [out][taps] */
    uint8_t *outside;           /* [out], NULL when no position is outside */
    bool identity;              /* taps == 1 and idx[o] == o */
} ResizeDim;

static void resize_table(Arena *a, const ResizeSpec *rs, int d, int64_t in, ResizeDim *rd) {
    int64_t out = rs->out[d];
    int nt = rs->antialias ? antialias_taps(rs, rs->scale[d]) : rs->mode == RZ_CUBIC ? 4 : 2;
    double *cf = ARENA_ARRAY(a, double, nt);
    rd->idx = ARENA_ARRAY(a, int64_t, out * nt);
    rd->wt = ARENA_ARRAY(a, float, out * nt);
    rd->outside = NULL;
    bool single = true;
    for (int64_t o = 0; o < out; o++) {
        bool outside;
        double xo = resize_coord(rs, d, o, in, &outside), base = ceil(xo) - 1, sum = 0;
        if (outside) {
            if (!rd->outside) rd->outside = ARENA_ARRAY(a, uint8_t, out);
            rd->outside[o] = 1;
        }
        if (rs->antialias) antialias_coeffs(rs, rs->scale[d], xo - base, nt, cf);
        else resize_coeffs(rs, xo, xo - base, cf);
        int nz = 0;
        for (int j = 0; j < nt; j++) {
            int64_t ix = (int64_t)base + j - (nt / 2 - 1);
            if (rs->exclude_outside && (ix < 0 || ix >= in)) cf[j] = 0;
            sum += cf[j];
            rd->idx[o * nt + j] = MIN(MAX(ix, 0), in - 1);
            nz += cf[j] != 0;
        }
        for (int j = 0; j < nt; j++) {
            if (rs->exclude_outside && sum != 0) cf[j] /= sum;
            rd->wt[o * nt + j] = (float)cf[j];
            if (nz == 1 && cf[j] != 0 && cf[j] != 1) single = false;
        }
        if (nz != 1) single = false;
    }
    rd->taps = nt;
    rd->identity = false;
    if (!single) return;
    rd->taps = 1;
    rd->identity = out == in;
    for (int64_t o = 0; o < out; o++) {
        int j = 0;
        while (rd->wt[o * nt + j] == 0) j++;
        rd->idx[o] = rd->idx[o * nt + j];
        rd->identity = rd->identity && rd->idx[o] == o;
    }
}

/* The factor f >= 2 of a dim that repeats each input element f times (nearest, an integral
 * scale, whatever the coordinate mode: idx[o] = o / f), else 0. */
static int64_t replicated(const ResizeDim *t, int64_t in, int64_t out) {
    if (t->taps != 1 || t->outside || t->identity || in < 1 || out % in || out / in < 2) return 0;
    for (int64_t o = 0; o < out; o++)
        if (t->idx[o] != o / (out / in)) return 0;
    return out / in;
}

/* Most stores side by side in one body (the repeats along the last dim): the strides the
 * backend stores as shuffles and masked contiguous stores; beyond, each vector was a
 * scatter, and nearest x8 of 16 channels from 16x16 ran ~85 us against ~69 through the
 * table (znver5). */
enum { MAX_REPEATS = 4 };

/* A nearest Resize where some dims repeat each element f times (replicated) and the others
 * are read through their tables: the repeated dims become a loop over the input q and one
 * over the f copies, y[.., q*f + j, ..] = x[.., q, ..], the last dim's copies as f stores side
 * by side (up to MAX_REPEATS; more go through the table), so that the loads are plain
 * (vectors along q, where the tables made each lane a gather) and each line of y is written
 * whole. An elementwise consumer (an FPN's top-down Add) still fuses into every store. 64
 * channels 32x32 -> 64x64: ~78 -> ~14 us, with a fused Add ~80 -> ~25 us; 16 channels x4
 * ~70 -> ~25 us (znver5, onnxcc bench, loaded machine). Returns false (nothing emitted) if no
 * dim repeats. */
static bool resize_repeat(Lower *L, Node *n, Buf *x, Buf *y, const ResizeDim *rd) {
    Program *p = L->p;
    int r = x->rank, nl = 0, v[2 * MAX_RANK];
    int64_t f[MAX_RANK], dims[2 * MAX_RANK];
    bool any = false;
    for (int d = 0; d < r; d++) {
        f[d] = replicated(&rd[d], x->dims[d], y->dims[d]);
        if (d == r - 1 && f[d] > MAX_REPEATS) f[d] = 0;    /* through its table */
        any |= f[d] > 0;
        if (rd[d].taps != 1 || rd[d].outside) return false;
    }
    if (!any) return false;
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(x), y, NULL, NULL);
    Expr *xi[MAX_RANK], *q[MAX_RANK], *j[MAX_RANK];
    for (int d = 0; d < r; d++) {
        v[nl] = kir_var(k);
        dims[nl++] = f[d] ? x->dims[d] : y->dims[d];
        q[d] = kx_var(p, v[nl - 1]);
        j[d] = NULL;
        if (f[d] && d < r - 1) {
            v[nl] = kir_var(k);
            dims[nl++] = f[d];
            j[d] = kx_var(p, v[nl - 1]);
        }
        if (f[d] || rd[d].identity) {
            xi[d] = kx_clone(p, q[d]);
            continue;
        }
        int64_t td[2] = {y->dims[d], 1};
        Buf *ib = const_table(L, arena_printf(p->arena, "%s_idx%d", y->name, d), DT_INT64, 2, td, rd[d].idx);
        kir_param(p, k, ib, KP_IN);
        xi[d] = kx_cast(p, DT_INDEX, kx_load(p, ib, (Expr *[]){kx_clone(p, q[d]), kx_index(p, 0)}));
    }
    Stmt *body = NULL;
    for (int64_t c = 0; c < (f[r - 1] ? f[r - 1] : 1); c++) {
        Expr *yi[MAX_RANK], *li[MAX_RANK];
        for (int d = 0; d < r; d++) {
            li[d] = kx_clone(p, xi[d]);
            yi[d] = kx_clone(p, q[d]);
            if (f[d]) yi[d] = kx_add(p, kx_mul(p, yi[d], f[d]), d < r - 1 ? kx_clone(p, j[d]) : kx_index(p, c));
        }
        body = ks_seq(body, ks_store(p, y, yi, kx_load(p, x, li)));
    }
    k->body = lower_wrap(p, nl, dims, v, body);
    return true;
}

/* One Resize kernel y[o...] = sum over the taps of the dims of `use` that interpolate of
 * prod_d wt_d[o_d, t_d] * x[i...], i_d = idx_d[o_d, t_d] for the dims of `use`, o_d for the
 * others (x and y agree there). With no interpolating dim it is a gather (KC_COPY);
 * tf_crop_and_resize positions outside the input get extrapolation_value. */
static void resize_kernel(Lower *L, Node *n, const ResizeSpec *rs, const ResizeDim *rd, const bool *use, Buf *x, Buf *y) {
    Program *p = L->p;
    int r = x->rank, ov[MAX_RANK], tv[MAX_RANK];
    bool interp = false;
    for (int d = 0; d < r; d++) interp = interp || (use[d] && rd[d].taps > 1);
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *w = NULL, *outside = NULL;
    Kernel *k = lower_kernel(L, n, interp ? KC_CONTRACTION : KC_COPY, KINS(x), y, ov, oi);
    for (int d = 0; d < r; d++) {
        const ResizeDim *t = &rd[d];
        int64_t td[2] = {y->dims[d], t->taps};
        const char *nm = arena_printf(p->arena, "%s_idx%d", y->name, d);
        if (!use[d]) {
            xi[d] = oi[d];
            continue;
        }
        if (t->taps > 1) tv[d] = kir_var(k);
        if (t->outside) {
            Buf *ob = const_table(L, arena_printf(p->arena, "%s_out%d", y->name, d), DT_BOOL, 1,
                                  td, t->outside);
            kir_param(p, k, ob, KP_IN);
            Expr *ol = kx_load(p, ob, &oi[d]);
            outside = outside ? kx_bin(p, K_OR, outside, ol) : ol;
        }
        if (t->identity) {
            xi[d] = oi[d];
            continue;
        }
        Buf *ib = const_table(L, nm, DT_INT64, 2, td, t->idx);
        Expr *ti[2] = {oi[d], t->taps > 1 ? kx_var(p, tv[d]) : kx_index(p, 0)};
        kir_param(p, k, ib, KP_IN);
        xi[d] = kx_cast(p, DT_INDEX, kx_load(p, ib, ti));
        if (t->taps == 1) continue;
        Buf *wb = const_table(L, arena_printf(p->arena, "%s_wt%d", y->name, d), DT_FLOAT, 2, td,
                              t->wt);
        kir_param(p, k, wb, KP_IN);
        Expr *wv = kx_load(p, wb, ti);
        if (y->dtype != DT_FLOAT) wv = kx_cast(p, y->dtype, wv);
        w = w ? kx_bin(p, K_MUL, w, wv) : wv;
    }
    Expr *xv = kx_load(p, x, xi);
    Stmt *body;
    if (!interp) {
        if (outside) xv = kx_select(p, outside, kx_const(p, y->dtype, rs->extrap), xv);
        k->body = lower_wrap(p, r, y->dims, ov, ks_store(p, y, oi, xv));
        return;
    }
    int acc = kir_scalar(p, k, y->dtype);
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, w, xv)));
    for (int d = r - 1; d >= 0; d--)
        if (use[d] && rd[d].taps > 1) upd = ks_red_loop(p, tv[d], rd[d].taps, upd);
    body = ks_seq(ks_set(p, acc, kx_const(p, y->dtype, 0)), upd);
    Expr *v = kx_scalar(p, k, acc);
    if (outside) v = kx_select(p, outside, kx_const(p, y->dtype, rs->extrap), v);
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, r, y->dims, ov, body);
}

/* A Resize interpolating along several dims, from -O1: one kernel per such dim, from the last
 * to the first, each a temporary of the dims done so far (the first kernel also takes the
 * nearest and unscaled dims): along the last dim the taps are gathers, done on the input's
 * rows (half of the output's when upsampling 2x), and along the others each output row is
 * the weighted sum of a few whole rows, its table entries read once per row and the rows as
 * plain vectors. The per-element form loaded two tables per tap and dim and gathered every
 * tap: 64 channels 32x32 -> 64x64 bilinear ~350 -> ~90 us (znver5, onnxcc bench, loaded
 * machine). The sums are per dim, as the ONNX reference's interpolate_nd computes them. Not
 * with tf_crop_and_resize's outside positions (each kernel would need every dim's). */
static bool resize_separable(Lower *L, Node *n, const ResizeSpec *rs, const ResizeDim *rd, Buf *x, Buf *y) {
    Program *p = L->p;
    int r = x->rank, ni = 0, dims_i[MAX_RANK];
    for (int d = r - 1; d >= 0; d--) {
        if (rd[d].outside) return false;
        if (rd[d].taps > 1) dims_i[ni++] = d;
    }
    if (ni < 2) return false;
    Buf *cur = x;
    int64_t dims[MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    bool done[MAX_RANK] = {false};
    for (int i = 0; i < ni; i++) {
        bool use[MAX_RANK] = {false};
        use[dims_i[i]] = true;
        for (int d = 0; d < r && i == 0; d++) use[d] |= rd[d].taps == 1;
        for (int d = 0; d < r; d++)
            if (use[d]) done[d] = true;
        for (int d = 0; d < r; d++) dims[d] = done[d] ? y->dims[d] : x->dims[d];
        Buf *out = i == ni - 1 ? y
                   : kir_buf_new(p, arena_printf(p->arena, "%s.dim%d", y->name, dims_i[i]), y->dtype, r, dims, B_TEMP);
        resize_kernel(L, n, rs, rd, use, cur, out);
        cur = out;
    }
    return true;
}

void lower_resize(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    ResizeSpec rs;
    ResizeDim rd[MAX_RANK];
    bool interp = false, use[MAX_RANK];
    if (!resize_spec(NULL, n, &rs)) die("lower_resize %s: node not checked", n->name);
    for (int d = 0; d < x->rank; d++) {
        resize_table(L->p->arena, &rs, d, x->dims[d], &rd[d]);
        interp = interp || rd[d].taps > 1;
        use[d] = true;
    }
    if (!interp && L->p->opt_level >= 1 && resize_repeat(L, n, x, y, rd)) return;
    if (interp && L->p->opt_level >= 1 && resize_separable(L, n, &rs, rd, x, y)) return;
    resize_kernel(L, n, &rs, rd, use, x, y);
}

/* ---- GridSample ---- */

typedef enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } GsMode;
typedef enum { GP_ZEROS, GP_BORDER, GP_REFLECTION } GsPad;

typedef struct GridSample {
    Program *p;
    Kernel *k;
    Buf *x;
    DType t;
    GsPad pad;
    bool align;
    Expr *n, *c;                    /* batch and channel index of the output element */
    int nsp;                        /* spatial dims: 1 to 3 (GridSample-20; 2 before) */
} GridSample;

static bool gs_params(Graph *g, Node *n, GsMode *mode, GsPad *pad) {
    /* GridSample-20's names (canonicalize.c renames bilinear and bicubic) */
    const char *m = ir_attr_str(n, "mode", "linear"), *pm = ir_attr_str(n, "padding_mode", "zeros");
    if (!strcmp(m, "linear")) *mode = GS_BILINEAR;
    else if (!strcmp(m, "nearest")) *mode = GS_NEAREST;
    else if (!strcmp(m, "cubic")) *mode = GS_BICUBIC;
    else {
        error(ir_where(g, n), "unsupported mode '%s'", m);
        return false;
    }
    if (!strcmp(pm, "zeros")) *pad = GP_ZEROS;
    else if (!strcmp(pm, "border")) *pad = GP_BORDER;
    else if (!strcmp(pm, "reflection")) *pad = GP_REFLECTION;
    else {
        error(ir_where(g, n), "unsupported padding_mode '%s'", pm);
        return false;
    }
    return true;
}

/* ---- AffineGrid ---- */

/* theta [N, r, r + 1] (r = 2 or 3) and the constant size [N, C, (D,) H, W]; false after an
 * error (g NULL: no message). */
static bool affine_grid_params(Graph *g, Node *n, int *r, int64_t *sp) {
    Value *th = n->in[0], *sz = n->in[1];
    if (!sz->data || sz->dtype != DT_INT64 || sz->rank != 1 || (ir_numel(sz) != 4 && ir_numel(sz) != 5)) {
        if (g) error(ir_where(g, n), "size '%s' must be a constant int64 [N, C, H, W] or [N, C, D, H, W]", sz->name);
        return false;
    }
    *r = (int)ir_numel(sz) - 2;
    for (int i = 0; i < *r; i++) sp[i] = ir_const_int(sz, 2 + i);
    bool ok = dtype_is_float(th->dtype) && th->rank == 3 && th->dims[0] == ir_const_int(sz, 0) &&
              th->dims[1] == *r && th->dims[2] == *r + 1;
    for (int i = 0; i < *r; i++) ok = ok && sp[i] > 0;
    if (!ok) {
        if (g) error(ir_where(g, n), "theta '%s' must be a float [%lld, %d, %d] and the sizes positive",
                     th->name, (long long)ir_const_int(sz, 0), *r, *r + 1);
        return false;
    }
    return true;
}

void infer_affine_grid(Graph *g, Node *n) {
    int r;
    int64_t sp[3], dims[5];
    if (!affine_grid_params(g, n, &r, sp)) return;
    dims[0] = n->in[0]->dims[0];
    for (int i = 0; i < r; i++) dims[1 + i] = sp[i];
    dims[1 + r] = r;
    ir_set_shape(n->out[0], n->in[0]->dtype, r + 2, dims);
}

/* grid[n, s..., i] = theta[n, i, r] + sum over k of theta[n, i, k] * base_k, base_0 the x
 * coordinate (along the last spatial dim), base_1 y, base_2 z: evenly spaced over [-1, 1],
 * through the corner pixels' centres (align_corners) or their outer edges. A size of 1 gives
 * 0 either way, as PyTorch's affine_grid (which the op follows) and onnxruntime; the ONNX
 * reference's arange gives -1 with align_corners. */
void lower_affine_grid(Lower *L, Node *n) {
    Program *p = L->p;
    int r;
    int64_t sp[3];
    if (!affine_grid_params(NULL, n, &r, sp)) die("lower_affine_grid %s: unchecked", n->name);
    Buf *th = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    DType t = dtype_size(y->dtype) == 2 ? DT_FLOAT : y->dtype;
    bool align = ir_attr_int(n, "align_corners", 0) != 0;
    int ov[MAX_RANK];
    Expr *oi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(th), y, ov, oi);
    Expr *ti[3] = {kx_clone(p, oi[0]), kx_clone(p, oi[r + 1]), kx_index(p, r)};
    Expr *acc = kx_load(p, th, ti);
    if (acc->type != t) acc = kx_cast(p, t, acc);
    for (int c = 0; c < r; c++) {
        int d = r - 1 - c;          /* the spatial dim of coordinate c */
        Expr *pos = kx_cast(p, t, kx_clone(p, oi[1 + d])), *base;
        if (align)
            base = sp[d] == 1 ? kx_const(p, t, 0)
                 : kx_bin(p, K_ADD, kx_const(p, t, -1), kx_bin(p, K_MUL, pos, kx_const(p, t, 2.0 / (double)(sp[d] - 1))));
        else
            base = kx_bin(p, K_ADD, kx_const(p, t, 1.0 / (double)sp[d] - 1),
                          kx_bin(p, K_MUL, pos, kx_const(p, t, 2.0 / (double)sp[d])));
        Expr *tc[3] = {kx_clone(p, oi[0]), kx_clone(p, oi[r + 1]), kx_index(p, c)};
        Expr *w = kx_load(p, th, tc);
        if (w->type != t) w = kx_cast(p, t, w);
        acc = kx_bin(p, K_ADD, acc, kx_bin(p, K_MUL, w, base));
    }
    if (acc->type != y->dtype) acc = kx_cast(p, y->dtype, acc);
    k->body = lower_wrap(p, y->rank, y->dims, ov, ks_store(p, y, oi, acc));
}

void infer_grid_sample(Graph *g, Node *n) {
    Value *x = n->in[0], *grid = n->in[1];
    GsMode mode;
    GsPad pad;
    if (!gs_params(g, n, &mode, &pad) || !rule_float_input(g, n, 0) || !rule_float_input(g, n, 1)) return;
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > 3 || grid->rank != x->rank || grid->dims[nsp + 1] != nsp ||
        grid->dims[0] != x->dims[0]) {
        error(ir_where(g, n), "X '%s' must be [N, C, D1..Dr] and Grid '%s' [N, O1..Or, r], r 1 to 3",
              x->name, grid->name);
        return;
    }
    int64_t dims[MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int d = 0; d < nsp; d++) dims[2 + d] = grid->dims[1 + d];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* The source coordinate of a normalised one in [-1, 1] along a dim of `size` pixels. */
static Expr *gs_unnormalize(GridSample *s, Expr *u, int64_t size) {
    Program *p = s->p;
    Expr *one = kx_const(p, s->t, 1);
    if (s->align) return kx_bin(p, K_MUL, kx_bin(p, K_ADD, u, one), kx_const(p, s->t, (double)(size - 1) / 2));
    return kx_bin(p, K_MUL, kx_bin(p, K_SUB, kx_bin(p, K_MUL, kx_bin(p, K_ADD, u, one), kx_const(p, s->t, (double)size)), kx_clone(p, one)),
               kx_const(p, s->t, 0.5));
}

/* Reflect x into [lo, hi] like a mirror at both ends (PyTorch's reflect_coordinates). */
static Expr *gs_reflect(GridSample *s, Expr *x, double lo, double hi) {
    Program *p = s->p;
    DType t = s->t;
    if (hi <= lo) return kx_const(p, t, 0);
    Expr *span = kx_const(p, t, hi - lo);
    Expr *d = kx_un(p, K_ABS, kx_bin(p, K_SUB, x, kx_const(p, t, lo)));
    Expr *flips = kx_un(p, K_FLOOR, kx_bin(p, K_DIV, d, span));
    Expr *extra = kx_bin(p, K_SUB, kx_clone(p, d), kx_bin(p, K_MUL, kx_clone(p, flips), kx_clone(p, span)));
    Expr *half = kx_un(p, K_FLOOR, kx_bin(p, K_MUL, kx_clone(p, flips), kx_const(p, t, 0.5)));
    Expr *even = kx_bin(p, K_EQ, kx_clone(p, flips), kx_bin(p, K_MUL, half, kx_const(p, t, 2)));
    return kx_select(p, even, kx_bin(p, K_ADD, kx_const(p, t, lo), extra), kx_bin(p, K_SUB, kx_const(p, t, hi), kx_clone(p, extra)));
}

/* The padding mode applied to a coordinate: clipped (border) or reflected then clipped. */
static Expr *gs_pad(GridSample *s, Expr *x, int64_t size) {
    Program *p = s->p;
    if (s->pad == GP_ZEROS) return x;
    if (s->pad == GP_REFLECTION)
        x = s->align ? gs_reflect(s, x, 0, (double)(size - 1))
                     : gs_reflect(s, x, -0.5, (double)size - 0.5);
    Expr *lo = kx_bin(p, K_MAX, x, kx_const(p, s->t, 0));
    return kx_bin(p, K_MIN, lo, kx_const(p, s->t, (double)(size - 1)));
}

/* x[n, c, co...] for integral float coordinates (one per spatial dim), 0 outside the input. */
static Expr *gs_tap(GridSample *s, Expr **co) {
    Program *p = s->p;
    Expr *ok = NULL, *idx[MAX_RANK] = {kx_clone(p, s->n), kx_clone(p, s->c)};
    for (int d = 0; d < s->nsp; d++) {
        Expr *hi = kx_const(p, s->t, (double)(s->x->dims[2 + d] - 1));
        Expr *in = kx_bin(p, K_AND, kx_bin(p, K_GE, co[d], kx_const(p, s->t, 0)),
                          kx_bin(p, K_LE, kx_clone(p, co[d]), hi));
        ok = ok ? kx_bin(p, K_AND, ok, in) : in;
        Expr *cl = kx_bin(p, K_MIN, kx_bin(p, K_MAX, kx_clone(p, co[d]), kx_const(p, s->t, 0)), kx_clone(p, hi));
        idx[2 + d] = kx_cast(p, DT_INDEX, cl);
    }
    Expr *v = kx_cast(p, s->t, kx_load(p, s->x, idx));
    return kx_select(p, ok, v, kx_const(p, s->t, 0));
}

/* The cubic convolution weights (A = -0.75) of the taps at floor-1 .. floor+2 for fraction t. */
static void gs_cubic(GridSample *s, Expr *t, Expr **w) {
    Program *p = s->p;
    DType ty = s->t;
    const double A = -0.75;
    Expr *t1 = kx_bin(p, K_ADD, t, kx_const(p, ty, 1));   /* distance of tap 0 */
    Expr *u = kx_bin(p, K_SUB, kx_const(p, ty, 1), kx_clone(p, t));   /* distance of tap 2 */
    Expr *u1 = kx_bin(p, K_ADD, kx_clone(p, u), kx_const(p, ty, 1));  /* distance of tap 3 */
    Expr *far[2] = {t1, u1}, *near[2] = {kx_clone(p, t), u};
    for (int j = 0; j < 2; j++) {   /* |d| in [1, 2): ((A d - 5A) d + 8A) d - 4A */
        Expr *d = far[j];
        Expr *e = kx_bin(p, K_SUB, kx_bin(p, K_MUL, kx_const(p, ty, A), d), kx_const(p, ty, 5 * A));
        e = kx_bin(p, K_ADD, kx_bin(p, K_MUL, e, kx_clone(p, d)), kx_const(p, ty, 8 * A));
        w[j == 0 ? 0 : 3] = kx_bin(p, K_SUB, kx_bin(p, K_MUL, e, kx_clone(p, d)), kx_const(p, ty, 4 * A));
    }
    for (int j = 0; j < 2; j++) {   /* |d| < 1: ((A + 2) d - (A + 3)) d d + 1 */
        Expr *d = near[j];
        Expr *e = kx_bin(p, K_SUB, kx_bin(p, K_MUL, kx_const(p, ty, A + 2), d), kx_const(p, ty, A + 3));
        e = kx_bin(p, K_MUL, kx_bin(p, K_MUL, e, kx_clone(p, d)), kx_clone(p, d));
        w[j == 0 ? 1 : 2] = kx_bin(p, K_ADD, e, kx_const(p, ty, 1));
    }
}

/* The sampled value at the source coordinates in registers reg[0..nsp) (outermost spatial
 * dim first): the nearest tap, or the sum over the 2^r (linear) or 4^r (cubic) taps around
 * them of the product of the per-dim weights and the tap. */
static Expr *gs_sample(GridSample *s, GsMode mode, const int *reg) {
    Program *p = s->p;
    Kernel *k = s->k;
    DType t = s->t;
    int r = s->nsp, nt = mode == GS_BICUBIC ? 4 : 2, combos = 1;
    Expr *c0[3], *w[3][4], *co[3];
    if (mode == GS_NEAREST) {
        for (int d = 0; d < r; d++) co[d] = kx_un(p, K_ROUND, kx_scalar(p, k, reg[d]));
        return gs_tap(s, co);
    }
    for (int d = 0; d < r; d++) {
        Expr *c = kx_scalar(p, k, reg[d]);
        c0[d] = kx_un(p, K_FLOOR, c);
        Expr *f = kx_bin(p, K_SUB, kx_clone(p, c), kx_clone(p, c0[d]));
        if (mode == GS_BILINEAR) {
            w[d][0] = kx_bin(p, K_SUB, kx_const(p, t, 1), f);
            w[d][1] = kx_clone(p, f);
        } else {
            gs_cubic(s, f, w[d]);
        }
        combos *= nt;
    }
    Expr *sum = NULL;
    for (int m = 0; m < combos; m++) {
        Expr *wt = NULL;
        for (int d = 0, rest = m; d < r; d++, rest /= nt) {
            int j = rest % nt;
            /* cubic: taps floor-1 .. floor+2, the padding mode applied to each */
            Expr *tc = kx_bin(p, K_ADD, kx_clone(p, c0[d]), kx_const(p, t, mode == GS_BICUBIC ? j - 1 : j));
            co[d] = mode == GS_BICUBIC ? gs_pad(s, tc, s->x->dims[2 + d]) : tc;
            wt = wt ? kx_bin(p, K_MUL, wt, kx_clone(p, w[d][j])) : kx_clone(p, w[d][j]);
        }
        Expr *v = kx_bin(p, K_MUL, wt, gs_tap(s, co));
        sum = sum ? kx_bin(p, K_ADD, sum, v) : v;
    }
    return sum;
}

/* Y[n, c, o...] = sample of X[n, c] at Grid[n, o...] = (x, y, ...), normalised to [-1, 1]:
 * the grid's first component is along the last spatial dim. */
void lower_grid_sample(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *grid = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    GsMode mode;
    GsPad pad;
    if (!gs_params(L->g, n, &mode, &pad)) return;
    int vars[MAX_RANK], nsp = x->rank - 2;
    Expr *idx[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, grid), out, vars, idx);
    GridSample s = {p, k, x, out->dtype, pad, ir_attr_int(n, "align_corners", 0) != 0, idx[0], idx[1], nsp};
    if (dtype_size(s.t) == 2) s.t = DT_FLOAT;
    int reg[3];     /* outermost spatial dim first */
    Stmt *body = NULL;
    for (int d = 0; d < nsp; d++) {
        Expr *gi[MAX_RANK];
        gi[0] = kx_clone(p, idx[0]);
        for (int j = 0; j < nsp; j++) gi[1 + j] = kx_clone(p, idx[2 + j]);
        gi[1 + nsp] = kx_index(p, nsp - 1 - d);
        Expr *c = gs_unnormalize(&s, kx_cast(p, s.t, kx_load(p, grid, gi)), x->dims[2 + d]);
        if (mode != GS_BICUBIC) c = gs_pad(&s, c, x->dims[2 + d]);
        reg[d] = kir_scalar(p, k, s.t);
        body = body ? ks_seq(body, ks_set(p, reg[d], c)) : ks_set(p, reg[d], c);
    }
    Expr *v = gs_sample(&s, mode, reg);
    if (v->type != out->dtype) v = kx_cast(p, out->dtype, v);
    ks_seq(body, ks_store(p, out, idx, v));
    k->body = lower_wrap(p, out->rank, out->dims, vars, body);
}

/* ---- RoiAlign ---- */
/* Each output bin [r, c, ph, pw] averages a sampling_ratio x sampling_ratio grid of bilinear
 * samples of X[batch_indices[r], c] inside the bin (ONNX opset 16, avg mode). A sample more
 * than one pixel outside the image counts as 0. sampling_ratio 0 (a grid sized from each
 * ROI at run time) would need data-dependent loop counts and is rejected. */

void infer_roi_align(Graph *g, Node *n) {
    Value *x = n->in[0], *rois = n->in[1], *bi = n->in[2];
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0]) {
        error(ir_where(g, n), "X, rois, batch_indices must be [N,C,H,W], [R,4], [R]");
        return;
    }
    if (!rule_float_input(g, n, 0) || !rule_float_input(g, n, 1)) return;
    if (strcmp(ir_attr_str(n, "mode", "avg"), "avg") != 0) {
        error(ir_where(g, n), "mode '%s' is not supported (only avg)", ir_attr_str(n, "mode", "avg"));
        return;
    }
    if (ir_attr_int(n, "sampling_ratio", 0) <= 0) {
        error(ir_where(g, n), "sampling_ratio 0 (a grid sized from each ROI at run time) is not supported; give sampling_ratio > 0");
        return;
    }
    if (ir_attr_int(n, "sampling_ratio", 0) > 1024) {     /* a grid of 2^20 samples per bin at most */
        error(ir_where(g, n), "sampling_ratio %lld is over 1024", (long long)ir_attr_int(n, "sampling_ratio", 0));
        return;
    }
    const char *ctm = ir_attr_str(n, "coordinate_transformation_mode", "half_pixel");
    if (strcmp(ctm, "half_pixel") != 0 && strcmp(ctm, "output_half_pixel") != 0) {
        error(ir_where(g, n), "coordinate_transformation_mode '%s'", ctm);
        return;
    }
    int64_t d[4] = {rois->dims[0], x->dims[1], ir_attr_int(n, "output_height", 1), ir_attr_int(n, "output_width", 1)};
    ir_set_shape(n->out[0], x->dtype, 4, d);
}

void lower_roi_align(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *rois = lower_in(L, n, 1), *bidx = lower_in(L, n, 2), *y = lower_out(L, n, 0);
    int vars[4];
    Expr *idx[4];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, rois, bidx), y, vars, idx);
    int64_t g = ir_attr_int(n, "sampling_ratio", 0), oh = y->dims[2], ow = y->dims[3];
    int64_t h = x->dims[2], w = x->dims[3];
    bool half = strcmp(ir_attr_str(n, "coordinate_transformation_mode", "half_pixel"), "half_pixel") == 0;
    double scale = ir_attr_float(n, "spatial_scale", 1.0f), off = half ? 0.5 : 0;
    DType f = DT_FLOAT;
    Expr *(*C)(Program *, DType, double) = kx_const;
#define RV(j) kx_cast(p, f, kx_load(p, rois, (Expr *[]){kx_var(p, vars[0]), kx_index(p, j)}))
    int b = kir_scalar(p, k, DT_INDEX), y0 = kir_scalar(p, k, f), x0 = kir_scalar(p, k, f);
    int bh = kir_scalar(p, k, f), bw = kir_scalar(p, k, f), acc = kir_scalar(p, k, f);
    int sy = kir_scalar(p, k, f), sx = kir_scalar(p, k, f), fy = kir_scalar(p, k, f), fx = kir_scalar(p, k, f);
    Expr *bb = kx_cast(p, DT_INDEX, kx_load(p, bidx, (Expr *[]){kx_var(p, vars[0])}));
    Stmt *s = ks_set(p, b, kx_bin(p, K_MIN, kx_bin(p, K_MAX, bb, kx_index(p, 0)), kx_index(p, x->dims[0] - 1)));
    ks_seq(s, ks_set(p, x0, kx_bin(p, K_SUB, kx_bin(p, K_MUL, RV(0), C(p, f, scale)), C(p, f, off))));
    ks_seq(s, ks_set(p, y0, kx_bin(p, K_SUB, kx_bin(p, K_MUL, RV(1), C(p, f, scale)), C(p, f, off))));
    Expr *rw = kx_bin(p, K_SUB, kx_bin(p, K_SUB, kx_bin(p, K_MUL, RV(2), C(p, f, scale)), C(p, f, off)), kx_scalar(p, k, x0));
    Expr *rh = kx_bin(p, K_SUB, kx_bin(p, K_SUB, kx_bin(p, K_MUL, RV(3), C(p, f, scale)), C(p, f, off)), kx_scalar(p, k, y0));
    if (!half) {                    /* the old behaviour: rois at least one pixel */
        rw = kx_bin(p, K_MAX, rw, C(p, f, 1));
        rh = kx_bin(p, K_MAX, rh, C(p, f, 1));
    }
    ks_seq(s, ks_set(p, bw, kx_bin(p, K_DIV, rw, C(p, f, (double)ow))));
    ks_seq(s, ks_set(p, bh, kx_bin(p, K_DIV, rh, C(p, f, (double)oh))));
    ks_seq(s, ks_set(p, acc, C(p, f, 0)));
    /* sample (iy, ix) of bin (ph, pw) */
    int iy = kir_var(k), ix = kir_var(k);
    Expr *py = kx_bin(p, K_ADD, kx_bin(p, K_ADD, kx_scalar(p, k, y0), kx_bin(p, K_MUL, kx_cast(p, f, kx_var(p, vars[2])), kx_scalar(p, k, bh))),
                      kx_bin(p, K_DIV, kx_bin(p, K_MUL, kx_bin(p, K_ADD, kx_cast(p, f, kx_var(p, iy)), C(p, f, 0.5)), kx_scalar(p, k, bh)), C(p, f, (double)g)));
    Expr *px = kx_bin(p, K_ADD, kx_bin(p, K_ADD, kx_scalar(p, k, x0), kx_bin(p, K_MUL, kx_cast(p, f, kx_var(p, vars[3])), kx_scalar(p, k, bw))),
                      kx_bin(p, K_DIV, kx_bin(p, K_MUL, kx_bin(p, K_ADD, kx_cast(p, f, kx_var(p, ix)), C(p, f, 0.5)), kx_scalar(p, k, bw)), C(p, f, (double)g)));
    Stmt *smp = ks_set(p, sy, py);
    ks_seq(smp, ks_set(p, sx, px));
    /* inside (NaN is not): -1 <= y <= H, -1 <= x <= W */
    Expr *inside = kx_bin(p, K_AND, kx_bin(p, K_AND, kx_bin(p, K_GE, kx_scalar(p, k, sy), C(p, f, -1)), kx_bin(p, K_LE, kx_scalar(p, k, sy), C(p, f, (double)h))),
                          kx_bin(p, K_AND, kx_bin(p, K_GE, kx_scalar(p, k, sx), C(p, f, -1)), kx_bin(p, K_LE, kx_scalar(p, k, sx), C(p, f, (double)w))));
    /* clamped to [0, dim - 1]: low corner, fraction; at the last row/column both corners coincide */
    Stmt *in = ks_set(p, sy, kx_bin(p, K_MIN, kx_bin(p, K_MAX, kx_scalar(p, k, sy), C(p, f, 0)), C(p, f, (double)(h - 1))));
    ks_seq(in, ks_set(p, sx, kx_bin(p, K_MIN, kx_bin(p, K_MAX, kx_scalar(p, k, sx), C(p, f, 0)), C(p, f, (double)(w - 1)))));
    ks_seq(in, ks_set(p, fy, kx_un(p, K_FLOOR, kx_scalar(p, k, sy))));
    ks_seq(in, ks_set(p, fx, kx_un(p, K_FLOOR, kx_scalar(p, k, sx))));
    Expr *ly = kx_bin(p, K_SUB, kx_scalar(p, k, sy), kx_scalar(p, k, fy));
    Expr *lx = kx_bin(p, K_SUB, kx_scalar(p, k, sx), kx_scalar(p, k, fx));
    Expr *yl = kx_cast(p, DT_INDEX, kx_scalar(p, k, fy)), *xl = kx_cast(p, DT_INDEX, kx_scalar(p, k, fx));
    Expr *yh = kx_bin(p, K_MIN, kx_addc(p, kx_clone(p, yl), 1), kx_index(p, h - 1));
    Expr *xh = kx_bin(p, K_MIN, kx_addc(p, kx_clone(p, xl), 1), kx_index(p, w - 1));
#define XV(yy, xx) kx_cast(p, f, kx_load(p, x, (Expr *[]){kx_scalar(p, k, b), kx_var(p, vars[1]), kx_clone(p, yy), kx_clone(p, xx)}))
    Expr *top = kx_bin(p, K_ADD, kx_bin(p, K_MUL, XV(yl, xl), kx_bin(p, K_SUB, C(p, f, 1), kx_clone(p, lx))), kx_bin(p, K_MUL, XV(yl, xh), kx_clone(p, lx)));
    Expr *bot = kx_bin(p, K_ADD, kx_bin(p, K_MUL, XV(yh, xl), kx_bin(p, K_SUB, C(p, f, 1), kx_clone(p, lx))), kx_bin(p, K_MUL, XV(yh, xh), lx));
    Expr *v = kx_bin(p, K_ADD, kx_bin(p, K_MUL, top, kx_bin(p, K_SUB, C(p, f, 1), kx_clone(p, ly))), kx_bin(p, K_MUL, bot, ly));
    ks_seq(in, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), v)));
    ks_seq(smp, ks_if(p, inside, in, NULL));
    ks_seq(s, ks_loop(p, iy, 0, g, 1, ks_loop(p, ix, 0, g, 1, smp)));
    Expr *res = kx_bin(p, K_DIV, kx_scalar(p, k, acc), C(p, f, (double)(g * g)));
    if (res->type != y->dtype) res = kx_cast(p, y->dtype, res);
    ks_seq(s, ks_store(p, y, idx, res));
    k->body = lower_wrap(p, 4, y->dims, vars, s);
#undef RV
#undef XV
}
