/* rules_extra.c - shape and lowering rules of the remaining ops whose output shapes are static:
 * GridSample (bilinear, nearest and bicubic sampling with zeros/border/reflection padding), the
 * signal windows (HannWindow, HammingWindow, BlackmanWindow), DFT, ReverseSequence, MaxUnpool
 * and the training optimizers of the ai.onnx.preview.training domain (Adagrad, Adam, Momentum).
 *
 * They follow rules_more.c. The windows' values depend on their size only, which decides the
 * output shape and so must be a compile-time constant: their shape rules compute the values
 * outright (as Size's does) and constant folding removes the node. The other ops become one
 * kernel each over their output, computing in the output's float type; sampling ops keep
 * their source coordinates in scalar registers and guard every tap so that no load leaves its
 * buffer (clamped index, value selected away when out of range). */
#include <math.h>
#include <string.h>

#include "lower.h"

/* ---- small helpers ---- */

static Expr *fc(Program *p, DType t, double v) { return kx_const(p, t, v); }
static Expr *add(Program *p, Expr *a, Expr *b) { return kx_bin(p, K_ADD, a, b); }
static Expr *sub(Program *p, Expr *a, Expr *b) { return kx_bin(p, K_SUB, a, b); }
static Expr *mul(Program *p, Expr *a, Expr *b) { return kx_bin(p, K_MUL, a, b); }
static Expr *dvd(Program *p, Expr *a, Expr *b) { return kx_bin(p, K_DIV, a, b); }

/* A one-element operand loaded as a scalar of type t (R and T of the optimizers). */
static Expr *load_scalar(Program *p, Kernel *k, Buf *b, DType t) {
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_cast(p, t, kx_load(p, b, zero));
}

static bool float_input(Graph *g, Node *n, int i) {
    Value *v = n->in[i];
    if (v->dtype != DT_FLOAT && v->dtype != DT_DOUBLE) {
        error(ir_where(g, n), "input '%s' is %s; only float32/float64 are supported", v->name,
              dtype_name(v->dtype));
        return false;
    }
    return true;
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
} GridSample;

static bool gs_params(Graph *g, Node *n, GsMode *mode, GsPad *pad) {
    const char *m = ir_attr_str(n, "mode", "bilinear"), *pm = ir_attr_str(n, "padding_mode", "zeros");
    if (!strcmp(m, "bilinear")) *mode = GS_BILINEAR;
    else if (!strcmp(m, "nearest")) *mode = GS_NEAREST;
    else if (!strcmp(m, "bicubic")) *mode = GS_BICUBIC;
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

void infer_grid_sample(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *grid = n->in[1];
    GsMode mode;
    GsPad pad;
    if (!gs_params(g, n, &mode, &pad) || !float_input(g, n, 0) || !float_input(g, n, 1)) return;
    if (x->rank != 4 || grid->rank != 4 || grid->dims[3] != 2 || grid->dims[0] != x->dims[0]) {
        error(ir_where(g, n), "X '%s' must be [N,C,H,W] and Grid '%s' [N,Ho,Wo,2] (2-D only)",
              x->name, grid->name);
        return;
    }
    int64_t dims[4] = {x->dims[0], x->dims[1], grid->dims[1], grid->dims[2]};
    ir_set_shape(n->out[0], x->dtype, 4, dims);
}

/* The source coordinate of a normalised one in [-1, 1] along a dim of `size` pixels. */
static Expr *gs_unnormalize(GridSample *s, Expr *u, int64_t size) {
    Program *p = s->p;
    Expr *one = fc(p, s->t, 1);
    if (s->align) return mul(p, add(p, u, one), fc(p, s->t, (double)(size - 1) / 2));
    return mul(p, sub(p, mul(p, add(p, u, one), fc(p, s->t, (double)size)), kx_clone(p, one)),
               fc(p, s->t, 0.5));
}

/* Reflect x into [lo, hi] like a mirror at both ends (PyTorch's reflect_coordinates). */
static Expr *gs_reflect(GridSample *s, Expr *x, double lo, double hi) {
    Program *p = s->p;
    DType t = s->t;
    if (hi <= lo) return fc(p, t, 0);
    Expr *span = fc(p, t, hi - lo);
    Expr *d = kx_un(p, K_ABS, sub(p, x, fc(p, t, lo)));
    Expr *flips = kx_un(p, K_FLOOR, dvd(p, d, span));
    Expr *extra = sub(p, kx_clone(p, d), mul(p, kx_clone(p, flips), kx_clone(p, span)));
    Expr *half = kx_un(p, K_FLOOR, mul(p, kx_clone(p, flips), fc(p, t, 0.5)));
    Expr *even = kx_bin(p, K_EQ, kx_clone(p, flips), mul(p, half, fc(p, t, 2)));
    return kx_select(p, even, add(p, fc(p, t, lo), extra), sub(p, fc(p, t, hi), kx_clone(p, extra)));
}

/* The padding mode applied to a coordinate: clipped (border) or reflected then clipped. */
static Expr *gs_pad(GridSample *s, Expr *x, int64_t size) {
    Program *p = s->p;
    if (s->pad == GP_ZEROS) return x;
    if (s->pad == GP_REFLECTION)
        x = s->align ? gs_reflect(s, x, 0, (double)(size - 1))
                     : gs_reflect(s, x, -0.5, (double)size - 0.5);
    Expr *lo = kx_bin(p, K_MAX, x, fc(p, s->t, 0));
    return kx_bin(p, K_MIN, lo, fc(p, s->t, (double)(size - 1)));
}

/* x[n, c, y, x] for integral float coordinates, 0 outside the image. */
static Expr *gs_tap(GridSample *s, Expr *y, Expr *x) {
    Program *p = s->p;
    Expr *co[2] = {y, x}, *ok = NULL, *idx[4] = {s->n, s->c, NULL, NULL};
    for (int d = 0; d < 2; d++) {
        Expr *hi = fc(p, s->t, (double)(s->x->dims[2 + d] - 1));
        Expr *in = kx_bin(p, K_AND, kx_bin(p, K_GE, co[d], fc(p, s->t, 0)),
                          kx_bin(p, K_LE, kx_clone(p, co[d]), hi));
        ok = ok ? kx_bin(p, K_AND, ok, in) : in;
        Expr *cl = kx_bin(p, K_MIN, kx_bin(p, K_MAX, kx_clone(p, co[d]), fc(p, s->t, 0)), kx_clone(p, hi));
        idx[2 + d] = kx_cast(p, DT_INDEX, cl);
    }
    Expr *v = kx_cast(p, s->t, kx_load(p, s->x, idx));
    return kx_select(p, ok, v, fc(p, s->t, 0));
}

/* The cubic convolution weights (A = -0.75) of the taps at floor-1 .. floor+2 for fraction t. */
static void gs_cubic(GridSample *s, Expr *t, Expr **w) {
    Program *p = s->p;
    DType ty = s->t;
    const double A = -0.75;
    Expr *t1 = add(p, t, fc(p, ty, 1));   /* distance of tap 0 */
    Expr *u = sub(p, fc(p, ty, 1), kx_clone(p, t));   /* distance of tap 2 */
    Expr *u1 = add(p, kx_clone(p, u), fc(p, ty, 1));  /* distance of tap 3 */
    Expr *far[2] = {t1, u1}, *near[2] = {kx_clone(p, t), u};
    for (int j = 0; j < 2; j++) {   /* |d| in [1, 2): ((A d - 5A) d + 8A) d - 4A */
        Expr *d = far[j];
        Expr *e = sub(p, mul(p, fc(p, ty, A), d), fc(p, ty, 5 * A));
        e = add(p, mul(p, e, kx_clone(p, d)), fc(p, ty, 8 * A));
        w[j == 0 ? 0 : 3] = sub(p, mul(p, e, kx_clone(p, d)), fc(p, ty, 4 * A));
    }
    for (int j = 0; j < 2; j++) {   /* |d| < 1: ((A + 2) d - (A + 3)) d d + 1 */
        Expr *d = near[j];
        Expr *e = sub(p, mul(p, fc(p, ty, A + 2), d), fc(p, ty, A + 3));
        e = mul(p, mul(p, e, kx_clone(p, d)), kx_clone(p, d));
        w[j == 0 ? 1 : 2] = add(p, e, fc(p, ty, 1));
    }
}

/* The sampled value at source coordinates (registers ry, rx). */
static Expr *gs_sample(GridSample *s, GsMode mode, int ry, int rx) {
    Program *p = s->p;
    Kernel *k = s->k;
    DType t = s->t;
    Expr *y = kx_scalar(p, k, ry), *x = kx_scalar(p, k, rx);
    if (mode == GS_NEAREST) return gs_tap(s, kx_un(p, K_ROUND, y), kx_un(p, K_ROUND, x));
    Expr *y0 = kx_un(p, K_FLOOR, y), *x0 = kx_un(p, K_FLOOR, x);
    Expr *fy = sub(p, kx_clone(p, y), y0), *fx = sub(p, kx_clone(p, x), x0);
    Expr *sum = NULL;
    if (mode == GS_BILINEAR) {
        Expr *wy[2] = {sub(p, fc(p, t, 1), fy), kx_clone(p, fy)};
        Expr *wx[2] = {sub(p, fc(p, t, 1), fx), kx_clone(p, fx)};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                Expr *ty = add(p, kx_clone(p, y0), fc(p, t, i)), *tx = add(p, kx_clone(p, x0), fc(p, t, j));
                Expr *v = mul(p, mul(p, kx_clone(p, wy[i]), kx_clone(p, wx[j])), gs_tap(s, ty, tx));
                sum = sum ? add(p, sum, v) : v;
            }
        return sum;
    }
    /* bicubic: the padding mode applies to each tap, not to the coordinate */
    Expr *wy[4], *wx[4];
    gs_cubic(s, fy, wy);
    gs_cubic(s, fx, wx);
    for (int i = 0; i < 4; i++) {
        Expr *ty = gs_pad(s, add(p, kx_clone(p, y0), fc(p, t, i - 1)), s->x->dims[2]);
        Expr *row = NULL;
        for (int j = 0; j < 4; j++) {
            Expr *tx = gs_pad(s, add(p, kx_clone(p, x0), fc(p, t, j - 1)), s->x->dims[3]);
            Expr *v = mul(p, kx_clone(p, wx[j]), gs_tap(s, kx_clone(p, ty), tx));
            row = row ? add(p, row, v) : v;
        }
        Expr *v = mul(p, kx_clone(p, wy[i]), row);
        sum = sum ? add(p, sum, v) : v;
    }
    return sum;
}

/* Y[n, c, h, w] = sample of X[n, c] at Grid[n, h, w] = (x, y), normalised to [-1, 1]. */
void lower_grid_sample(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *grid = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    GsMode mode;
    GsPad pad;
    if (!gs_params(L->g, n, &mode, &pad)) return;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, grid, KP_IN);
    kir_param(p, k, out, KP_OUT);
    int vars[4];
    Expr *idx[4];
    lower_vars(k, 4, vars);
    lower_var_idx(p, 4, vars, idx);
    GridSample s = {p, k, x, out->dtype, pad, ir_attr_int(n, "align_corners", 0) != 0, idx[0], idx[1]};
    int reg[2];     /* y, x */
    Stmt *body = NULL;
    for (int d = 0; d < 2; d++) {
        Expr *gi[4] = {idx[0], idx[2], idx[3], kx_index(p, 1 - d)};
        Expr *c = gs_unnormalize(&s, kx_cast(p, s.t, kx_load(p, grid, gi)), x->dims[2 + d]);
        if (mode != GS_BICUBIC) c = gs_pad(&s, c, x->dims[2 + d]);
        reg[d] = kir_scalar(p, k, s.t);
        body = body ? ks_seq(body, ks_set(p, reg[d], c)) : ks_set(p, reg[d], c);
    }
    ks_seq(body, ks_store(p, out, idx, gs_sample(&s, mode, reg[0], reg[1])));
    k->body = lower_wrap(p, 4, out->dims, vars, body);
}

/* ---- HannWindow, HammingWindow, BlackmanWindow: constants of a constant size ---- */

void infer_window(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *sz = n->in[0], *o = n->out[0];
    DType t = (DType)ir_attr_int(n, "output_datatype", DT_FLOAT);
    if (!sz->data || dtype_is_float(sz->dtype) || ir_numel(sz) != 1) {
        error(ir_where(g, n), "size '%s' must be a compile-time constant integer scalar "
              "(it decides the output shape)", sz->name);
        return;
    }
    if (t != DT_FLOAT && t != DT_DOUBLE) {
        error(ir_where(g, n), "unsupported output_datatype %s", dtype_name(t));
        return;
    }
    int64_t size = ir_const_int(sz, 0);
    if (size < 0) {
        error(ir_where(g, n), "negative size %lld", (long long)size);
        return;
    }
    /* periodic: as if one longer, the last sample dropped */
    double N = (double)(ir_attr_int(n, "periodic", 1) ? size : size - 1);
    double *w = ARENA_ARRAY(g->arena, double, size + 1);
    for (int64_t i = 0; i < size; i++) {
        double a = N > 0 ? 2 * M_PI * (double)i / N : 0;
        if (n->op == OP_HannWindow) w[i] = 0.5 - 0.5 * cos(a);
        else if (n->op == OP_HammingWindow) w[i] = 25.0 / 46 - (21.0 / 46) * cos(a);
        else w[i] = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
    }
    ir_set_shape(o, t, 1, &size);
    if (t == DT_DOUBLE) {
        o->data = w;
        return;
    }
    float *f = ARENA_ARRAY(g->arena, float, size + 1);
    for (int64_t i = 0; i < size; i++) f[i] = (float)w[i];
    o->data = f;
}

/* ---- training optimizers (domain ai.onnx.preview.training) ---- */

/* Inputs R, T, then `groups` lists of n tensors (X, G, then the states); outputs X_new and the
 * new states, n each. Every tensor of a position i has X_i's shape. */
static int optimizer_groups(Op op) { return op == OP_Adam ? 4 : 3; }

void infer_optimizer(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    int groups = optimizer_groups(n->op), cnt = (n->nin - 2) / groups;
    if (cnt < 1 || n->nin != 2 + groups * cnt || n->nout != (groups - 1) * cnt) {
        error(ir_where(g, n), "%d inputs and %d outputs do not make %d groups of tensors",
              n->nin, n->nout, groups);
        return;
    }
    if (!float_input(g, n, 0) || ir_numel(n->in[0]) != 1 || ir_numel(n->in[1]) != 1) {
        error(ir_where(g, n), "R and T must be scalars");
        return;
    }
    for (int i = 0; i < cnt; i++) {
        Value *x = n->in[2 + i];
        if (!float_input(g, n, 2 + i)) return;
        for (int j = 1; j < groups; j++)
            if (!ir_same_shape(n->in[2 + j * cnt + i], x)) {
                error(ir_where(g, n), "'%s' and '%s' differ in shape", x->name,
                      n->in[2 + j * cnt + i]->name);
                return;
            }
        for (int j = 0; j < groups - 1; j++)
            if (n->out[j * cnt + i]) ir_set_shape(n->out[j * cnt + i], x->dtype, x->rank, x->dims);
    }
}

typedef struct Optim {
    Program *p;
    DType t;
    Expr *r, *tt;                   /* learning rate and step count (as t) */
    Expr *x, *g, *v, *h;            /* operands at the current element (v, h as present) */
    Expr *res[3];                   /* X_new, then the new states */
} Optim;

static Expr *attr_c(Optim *o, Node *n, const char *name, double dflt) {
    return fc(o->p, o->t, ir_attr_float(n, name, (float)dflt));
}

/* The update rules, as the ONNX reference implementations write them. */
static void optimizer_step(Optim *o, Node *n) {
    Program *p = o->p;
    DType t = o->t;
    Expr *one = fc(p, t, 1);
    Expr *greg = add(p, mul(p, attr_c(o, n, "norm_coefficient", 0), o->x), o->g);
    Expr *started = kx_bin(p, K_GT, o->tt, fc(p, t, 0));
    if (n->op == OP_Adagrad) {
        Expr *r = dvd(p, o->r, add(p, one, mul(p, kx_clone(p, o->tt), attr_c(o, n, "decay_factor", 0))));
        Expr *hn = add(p, o->h, mul(p, greg, kx_clone(p, greg)));
        Expr *hs = add(p, kx_un(p, K_SQRT, kx_clone(p, hn)), attr_c(o, n, "epsilon", 0));
        o->res[0] = sub(p, kx_clone(p, o->x), dvd(p, mul(p, r, kx_clone(p, greg)), hs));
        o->res[1] = hn;
    } else if (n->op == OP_Momentum) {
        Expr *alpha = attr_c(o, n, "alpha", 0);
        Expr *beta = kx_select(p, started, attr_c(o, n, "beta", 0), fc(p, t, 1));
        Expr *vn = add(p, mul(p, alpha, o->v), mul(p, beta, greg));
        Expr *step = kx_clone(p, vn);
        if (!strcmp(ir_attr_str(n, "mode", "standard"), "nesterov"))
            step = add(p, kx_clone(p, greg), mul(p, kx_clone(p, alpha), step));
        o->res[0] = sub(p, kx_clone(p, o->x), mul(p, o->r, step));
        o->res[1] = vn;
    } else {        /* Adam */
        Expr *alpha = attr_c(o, n, "alpha", 0.9), *beta = attr_c(o, n, "beta", 0.999);
        Expr *vn = add(p, mul(p, alpha, o->v), mul(p, sub(p, one, kx_clone(p, alpha)), greg));
        Expr *g2 = mul(p, kx_clone(p, greg), kx_clone(p, greg));
        Expr *hn = add(p, mul(p, beta, o->h), mul(p, sub(p, kx_clone(p, one), kx_clone(p, beta)), g2));
        Expr *hs = add(p, kx_un(p, K_SQRT, kx_clone(p, hn)), attr_c(o, n, "epsilon", 1e-6));
        Expr *bt = sub(p, kx_clone(p, one), kx_bin(p, K_POW, kx_clone(p, beta), kx_clone(p, o->tt)));
        Expr *at = sub(p, kx_clone(p, one), kx_bin(p, K_POW, kx_clone(p, alpha), kx_clone(p, o->tt)));
        Expr *radj = kx_select(p, started, dvd(p, mul(p, o->r, kx_un(p, K_SQRT, bt)), at), kx_clone(p, o->r));
        Expr *xn = sub(p, kx_clone(p, o->x), mul(p, radj, dvd(p, kx_clone(p, vn), hs)));
        o->res[0] = mul(p, sub(p, kx_clone(p, one), attr_c(o, n, "norm_coefficient_post", 0)), xn);
        o->res[1] = vn;
        o->res[2] = hn;
    }
}

/* One kernel per tensor position i: loops over X_i, storing X_new_i and the new states. */
void lower_optimizer(Lower *L, Node *n) {
    Program *p = L->p;
    int groups = optimizer_groups(n->op), cnt = (n->nin - 2) / groups;
    for (int i = 0; i < cnt; i++) {
        Buf *x = lower_in(L, n, 2 + i);
        Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
        int vars[MAX_RANK];
        Expr *idx[MAX_RANK], *opnd[4];
        lower_vars(k, x->rank, vars);
        lower_var_idx(p, x->rank, vars, idx);
        Optim o = {.p = p, .t = x->dtype};
        o.r = load_scalar(p, k, lower_in(L, n, 0), o.t);
        o.tt = load_scalar(p, k, lower_in(L, n, 1), o.t);
        for (int j = 0; j < groups; j++) {
            Buf *b = lower_in(L, n, 2 + j * cnt + i);
            kir_param(p, k, b, KP_IN);
            opnd[j] = kx_load(p, b, idx);
        }
        o.x = opnd[0], o.g = opnd[1], o.v = opnd[2], o.h = groups > 3 ? opnd[3] : opnd[2];
        optimizer_step(&o, n);
        Stmt *body = NULL;
        for (int j = 0; j < groups - 1; j++) {
            if (!n->out[j * cnt + i]) continue;
            Buf *b = lower_out(L, n, j * cnt + i);
            kir_param(p, k, b, KP_OUT);
            Stmt *s = ks_store(p, b, idx, o.res[j]);
            body = body ? ks_seq(body, s) : s;
        }
        if (body) k->body = lower_wrap(p, x->rank, x->dims, vars, body);
        else k->dead = true;
    }
}

/* ---- DFT ---- */

typedef struct Dft {
    int axis;
    int64_t len;                    /* the transform's length (dft_length or the axis dim) */
} Dft;

static bool dft_params(Graph *g, Node *n, Dft *d) {
    Value *x = n->in[0];
    if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2)) {
        error(ir_where(g, n), "input '%s' must end in a dim of 1 (real) or 2 (complex)", x->name);
        return false;
    }
    if (!rule_axis(g, n, ir_attr_int(n, "axis", 1), x->rank - 1, &d->axis)) return false;
    d->len = x->dims[d->axis];
    if (n->nin > 1 && n->in[1]) {
        Value *l = n->in[1];
        if (!l->data || dtype_is_float(l->dtype) || ir_numel(l) != 1 || ir_const_int(l, 0) < 1) {
            error(ir_where(g, n), "dft_length '%s' must be a positive compile-time constant", l->name);
            return false;
        }
        d->len = ir_const_int(l, 0);
    }
    return true;
}

void infer_dft(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0];
    Dft d;
    if (!float_input(g, n, 0) || !dft_params(g, n, &d)) return;
    int64_t dims[MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[d.axis] = ir_attr_int(n, "onesided", 0) ? d.len / 2 + 1 : d.len;
    dims[x->rank - 1] = 2;
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* y[.., k, .., :] = sum over j < len of x[.., j, ..] * e^(-+2 pi i jk / len) (1/len and + for
 * the inverse); samples past the input's end are zeros and skipped. The angle is reduced with
 * jk mod len in integers so that cos/sin see arguments below 2 pi. */
void lower_dft(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *out = lower_out(L, n, 0);
    Dft d;
    if (!dft_params(L->g, n, &d)) return;
    DType t = DT_DOUBLE;            /* exact zeros need more than float32 sums give */
    int r = out->rank, vars[MAX_RANK], j;
    bool inverse = ir_attr_int(n, "inverse", 0) != 0, complex = x->dims[r - 1] == 2;
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, out, KP_OUT);
    lower_vars(k, r - 1, vars);
    j = kir_var(k);
    int re = kir_scalar(p, k, t), im = kir_scalar(p, k, t);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, r - 1, vars, oi);
    for (int i = 0; i < r - 1; i++) xi[i] = i == d.axis ? kx_var(p, j) : oi[i];
    Expr *jk = kx_bin(p, K_REM, kx_bin(p, K_MUL, kx_var(p, j), oi[d.axis]), kx_index(p, d.len));
    Expr *ang = mul(p, kx_cast(p, t, jk), fc(p, t, 2 * M_PI / (double)d.len));
    Expr *c = kx_un(p, K_COS, ang), *s = kx_un(p, K_SIN, kx_clone(p, ang));
    if (!inverse) s = kx_un(p, K_NEG, s);
    xi[r - 1] = kx_index(p, 0);
    Expr *xr = kx_cast(p, t, kx_load(p, x, xi)), *xim = fc(p, t, 0);
    if (complex) {
        xi[r - 1] = kx_index(p, 1);
        xim = kx_cast(p, t, kx_load(p, x, xi));
    }
    /* (xr + i xim)(c + i s) */
    Expr *dre = sub(p, mul(p, xr, c), mul(p, xim, s));
    Expr *dim = add(p, mul(p, kx_clone(p, xr), kx_clone(p, s)), mul(p, kx_clone(p, xim), kx_clone(p, c)));
    Stmt *acc = ks_set(p, re, add(p, kx_scalar(p, k, re), dre));
    ks_seq(acc, ks_set(p, im, add(p, kx_scalar(p, k, im), dim)));
    int64_t m = d.len < x->dims[d.axis] ? d.len : x->dims[d.axis];
    Stmt *loop = ks_loop(p, j, 0, m, 1, acc);
    loop->hints |= LH_REDUCTION;
    Stmt *body = ks_set(p, re, fc(p, t, 0));
    ks_seq(body, ks_set(p, im, fc(p, t, 0)));
    ks_seq(body, loop);
    double scale = inverse ? 1.0 / (double)d.len : 1.0;
    int regs[2] = {re, im};
    for (int q = 0; q < 2; q++) {
        oi[r - 1] = kx_index(p, q);
        Expr *v = mul(p, kx_scalar(p, k, regs[q]), fc(p, t, scale));
        ks_seq(body, ks_store(p, out, oi, kx_cast(p, out->dtype, v)));
    }
    k->body = lower_wrap(p, r - 1, out->dims, vars, body);
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
    if (!rule_inputs_known(n)) return;
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
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_COPY);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, len, KP_IN);
    kir_param(p, k, out, KP_OUT);
    Expr *idx[MAX_RANK], *xi[MAX_RANK];
    lower_vars(k, out->rank, vars);
    lower_var_idx(p, out->rank, vars, idx);
    Expr *bi[1] = {idx[b]};
    Expr *l = kx_cast(p, DT_INDEX, kx_load(p, len, bi));
    Expr *rev = kx_addc(p, kx_bin(p, K_SUB, l, idx[t]), -1);
    Expr *src = kx_select(p, kx_bin(p, K_LT, idx[t], kx_clone(p, l)), rev, idx[t]);
    src = kx_bin(p, K_MIN, kx_bin(p, K_MAX, src, kx_index(p, 0)), kx_index(p, x->dims[t] - 1));
    for (int d = 0; d < out->rank; d++) xi[d] = d == t ? src : idx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, x, xi)));
}

/* ---- MaxUnpool ---- */

/* The output dims that kernel_shape, strides and pads imply (MaxPool's input dims). */
static void unpool_dims(const Node *n, const Value *x, int64_t *dims) {
    const int64_t *ks, *st = NULL, *pads = NULL;
    int sp = x->rank - 2;
    ir_attr_ints(n, "kernel_shape", &ks);
    int ns = ir_attr_ints(n, "strides", &st), np = ir_attr_ints(n, "pads", &pads);
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int d = 0; d < sp; d++)
        dims[2 + d] = (x->dims[2 + d] - 1) * (ns ? st[d] : 1) + ks[d] -
                      (np ? pads[d] + pads[sp + d] : 0);
}

void infer_max_unpool(Graph *g, Node *n) {
    if (!rule_inputs_known(n)) return;
    Value *x = n->in[0], *ind = n->in[1];
    const int64_t *ks, *st = NULL, *pads = NULL;
    int sp = x->rank - 2, nk = ir_attr_ints(n, "kernel_shape", &ks);
    int ns = ir_attr_ints(n, "strides", &st), np = ir_attr_ints(n, "pads", &pads);
    if (x->rank < 3 || nk != sp || (ns && ns != sp) || (np && np != 2 * sp) ||
        !ir_same_shape(x, ind) || dtype_is_float(ind->dtype)) {
        error(ir_where(g, n), "needs X [N,C,D...], integer indices of X's shape and kernel_shape, "
              "strides, pads matching its spatial rank");
        return;
    }
    int64_t dims[MAX_RANK];
    unpool_dims(n, x, dims);
    if (n->nin > 2 && n->in[2]) {
        Value *os = rule_const_ints(g, n, 2, "output_shape", MAX_RANK);
        if (!os) return;
        if (ir_numel(os) != x->rank) {
            error(ir_where(g, n), "output_shape '%s' must have %d elements", os->name, x->rank);
            return;
        }
        for (int d = 0; d < x->rank; d++) dims[d] = ir_const_int(os, d);
    }
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* y = 0, then y[unflatten(indices[i])] = x[i] for every element i of x: MaxPool's indices count
 * in the whole (row-major) tensor of the implied dims (unpool_dims). An output_shape larger than
 * those pads at the end of each dim, as the ONNX reference does; coordinates are clamped into
 * the output. */
void lower_max_unpool(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *ind = lower_in(L, n, 1), *out = lower_out(L, n, 0);
    Kernel *k = kir_kernel_new(p, lower_kname(L, n), n->op_type, KC_GENERIC);
    kir_param(p, k, x, KP_IN);
    kir_param(p, k, ind, KP_IN);
    kir_param(p, k, out, KP_INOUT);
    int r = out->rank, ov[MAX_RANK], xv[MAX_RANK];
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_vars(k, r, ov);
    lower_var_idx(p, r, ov, oi);
    k->body = lower_wrap(p, r, out->dims, ov, ks_store(p, out, oi, fc(p, out->dtype, 0)));
    lower_vars(k, r, xv);
    lower_var_idx(p, r, xv, xi);
    int64_t dims[MAX_RANK], stride = 1, total = 1;
    unpool_dims(n, n->in[0], dims);
    for (int d = 0; d < r; d++) total *= dims[d];
    Expr *f = kx_cast(p, DT_INDEX, kx_load(p, ind, xi));
    f = kx_bin(p, K_MIN, kx_bin(p, K_MAX, f, kx_index(p, 0)), kx_index(p, total - 1));
    for (int d = r - 1; d >= 0; d--) {
        Expr *q = stride > 1 ? kx_bin(p, K_DIV, kx_clone(p, f), kx_index(p, stride)) : kx_clone(p, f);
        q = d > 0 ? kx_bin(p, K_REM, q, kx_index(p, dims[d])) : q;
        oi[d] = kx_bin(p, K_MIN, q, kx_index(p, out->dims[d] - 1));
        stride *= dims[d];
    }
    Stmt *s = ks_store(p, out, oi, kx_load(p, x, xi));
    ks_seq(k->body, lower_wrap(p, r, x->dims, xv, s));
}
