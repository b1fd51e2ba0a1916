/* signal.c - the signal-processing family: DFT, STFT, the windows HannWindow, HammingWindow,
 * BlackmanWindow, and MelWeightMatrix.
 *
 * A window's values depend on its size only, which decides the output shape and so must be a
 * compile-time constant: the shape rule computes the values outright (as Size's does) and
 * constant folding removes the node. DFT is one kernel over its output computing in the
 * output's float type. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- HannWindow, HammingWindow, BlackmanWindow: constants of a constant size ---- */

void infer_window(Graph *g, Node *n) {
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
    /* the axis (input 2, canonicalize.c): [-r, -2] or [0, r-2], the last dim is re/im */
    Value *a = n->nin > 2 ? n->in[2] : NULL;
    int64_t axis = -2;
    if (a) {
        if (!a->data || a->dtype != DT_INT64 || ir_numel(a) != 1) {
            error(ir_where(g, n), "axis '%s' must be a compile-time int64 scalar", a->name);
            return false;
        }
        axis = ir_const_int(a, 0);
    }
    if (axis < -x->rank || axis == -1 || axis > x->rank - 2) {
        error(ir_where(g, n), "axis %lld is out of range for rank %d (the last dim holds real "
              "and imaginary parts)", (long long)axis, x->rank);
        return false;
    }
    d->axis = (int)(axis < 0 ? axis + x->rank : axis);
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
    Value *x = n->in[0];
    Dft d;
    if (!rule_float_input(g, n, 0) || !dft_params(g, n, &d)) return;
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
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), out, NULL, NULL);
    lower_vars(k, r - 1, vars);
    j = kir_var(k);
    int re = kir_scalar(p, k, t), im = kir_scalar(p, k, t);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, r - 1, vars, oi);
    for (int i = 0; i < r - 1; i++) xi[i] = i == d.axis ? kx_var(p, j) : oi[i];
    Expr *jk = kx_bin(p, K_REM, kx_bin(p, K_MUL, kx_var(p, j), oi[d.axis]), kx_index(p, d.len));
    Expr *ang = kx_bin(p, K_MUL, kx_cast(p, t, jk), kx_const(p, t, 2 * M_PI / (double)d.len));
    Expr *c = kx_un(p, K_COS, ang), *s = kx_un(p, K_SIN, kx_clone(p, ang));
    if (!inverse) s = kx_un(p, K_NEG, s);
    xi[r - 1] = kx_index(p, 0);
    Expr *xr = kx_cast(p, t, kx_load(p, x, xi)), *xim = kx_const(p, t, 0);
    if (complex) {
        xi[r - 1] = kx_index(p, 1);
        xim = kx_cast(p, t, kx_load(p, x, xi));
    }
    /* (xr + i xim)(c + i s) */
    Expr *dre = kx_bin(p, K_SUB, kx_bin(p, K_MUL, xr, c), kx_bin(p, K_MUL, xim, s));
    Expr *dim = kx_bin(p, K_ADD, kx_bin(p, K_MUL, kx_clone(p, xr), kx_clone(p, s)), kx_bin(p, K_MUL, kx_clone(p, xim), kx_clone(p, c)));
    Stmt *acc = ks_set(p, re, kx_bin(p, K_ADD, kx_scalar(p, k, re), dre));
    ks_seq(acc, ks_set(p, im, kx_bin(p, K_ADD, kx_scalar(p, k, im), dim)));
    int64_t m = d.len < x->dims[d.axis] ? d.len : x->dims[d.axis];
    Stmt *loop = ks_loop(p, j, 0, m, 1, acc);
    loop->hints |= LH_REDUCTION;
    Stmt *body = ks_set(p, re, kx_const(p, t, 0));
    ks_seq(body, ks_set(p, im, kx_const(p, t, 0)));
    ks_seq(body, loop);
    double scale = inverse ? 1.0 / (double)d.len : 1.0;
    int regs[2] = {re, im};
    for (int q = 0; q < 2; q++) {
        oi[r - 1] = kx_index(p, q);
        Expr *v = kx_bin(p, K_MUL, kx_scalar(p, k, regs[q]), kx_const(p, t, scale));
        ks_seq(body, ks_store(p, out, oi, kx_cast(p, out->dtype, v)));
    }
    k->body = lower_wrap(p, r - 1, out->dims, vars, body);
}

/* ---- MelWeightMatrix: a constant of constant operands ---- */
/* The triangular filters of ONNX's definition (its reference code, step by step: mel points
 * equally spaced over num_mel_bins + 2 intervals, mapped back to Hz and to FFT bins by floor
 * division, each filter rising from its left point to its centre and falling to its right;
 * the falling edge overwrites the centre). */
void infer_melweight(Graph *g, Node *n) {
    for (int i = 0; i < 5; i++) {
        Value *v = n->in[i];
        if (!v->data || ir_numel(v) != 1 || (i < 3 && dtype_is_float(v->dtype))) {
            error(ir_where(g, n), "input %d '%s' must be a compile-time constant %s scalar", i, v->name,
                  i < 3 ? "integer" : "float");
            return;
        }
    }
    int64_t mels = ir_const_int(n->in[0], 0), len = ir_const_int(n->in[1], 0), rate = ir_const_int(n->in[2], 0);
    double lo = ir_const_float(n->in[3], 0), hi = ir_const_float(n->in[4], 0);
    DType t = (DType)ir_attr_int(n, "output_datatype", DT_FLOAT);
    if (mels < 1 || len < 1 || rate < 1 || mels > 1 << 16 || len > 1 << 24 || (t != DT_FLOAT && t != DT_DOUBLE)) {
        error(ir_where(g, n), "bad num_mel_bins %lld, dft_length %lld, sample_rate %lld or output_datatype %d",
              (long long)mels, (long long)len, (long long)rate, (int)t);
        return;
    }
    int64_t bins = len / 2 + 1, d[2] = {bins, mels};
    int64_t *f = ARENA_ARRAY(g->arena, int64_t, mels + 2);
    double lm = 2595 * log10(1 + lo / 700), hm = 2595 * log10(1 + hi / 700), step = (hm - lm) / (double)(mels + 2);
    for (int64_t i = 0; i < mels + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + lm) / 2595) - 1);
        f[i] = (int64_t)floor((double)(len + 1) * hz / (double)rate);
    }
    double *w = ARENA_ARRAY(g->arena, double, bins * mels);
    for (int64_t i = 0; i < mels; i++) {
        int64_t l = f[i], c = f[i + 1], r = f[i + 2];
        if (c == l) {
            if (c >= 0 && c < bins) w[c * mels + i] = 1;
        } else {
            for (int64_t j = l; j <= c; j++)
                if (j >= 0 && j < bins) w[j * mels + i] = (double)(j - l) / (double)(c - l);
        }
        for (int64_t j = c; j < r; j++)
            if (j >= 0 && j < bins) w[j * mels + i] = (double)(r - j) / (double)(r - c);
    }
    Value *o = n->out[0];
    ir_set_shape(o, t, 2, d);
    if (t == DT_DOUBLE) {
        o->data = w;
        return;
    }
    float *fl = ARENA_ARRAY(g->arena, float, bins * mels + 1);
    for (int64_t i = 0; i < bins * mels; i++) fl[i] = (float)w[i];
    o->data = fl;
}

/* ---- STFT ---- */
/* out[b, f, k] = sum over n < frame_length of x[b, f * step + n] * window[n] * e^(-2 pi i nk / L),
 * for k up to L/2 (onesided) or L; frame_step and frame_length decide the shape and must be
 * compile-time constants. Computed in double like DFT. */
typedef struct Stft { int64_t step, len, frames, bins; } Stft;

static bool stft_params(Graph *g, Node *n, Stft *s) {
    Value *x = n->in[0], *st = n->in[1], *win = rule_opt_in(n, 2), *fl = rule_opt_in(n, 3);
    if (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2)) {
        if (g) error(ir_where(g, n), "signal '%s' must be [batch, length, 1 or 2]", x->name);
        return false;
    }
    if (!st->data || dtype_is_float(st->dtype) || ir_numel(st) != 1 || ir_const_int(st, 0) < 1) {
        if (g) error(ir_where(g, n), "frame_step '%s' must be a positive compile-time constant", st->name);
        return false;
    }
    s->step = ir_const_int(st, 0);
    if (fl) {
        if (!fl->data || dtype_is_float(fl->dtype) || ir_numel(fl) != 1 || ir_const_int(fl, 0) < 1) {
            if (g) error(ir_where(g, n), "frame_length '%s' must be a positive compile-time constant", fl->name);
            return false;
        }
        s->len = ir_const_int(fl, 0);
    } else if (win && win->rank == 1) {
        s->len = win->dims[0];
    } else {
        if (g) error(ir_where(g, n), "neither a frame_length nor a 1-D window");
        return false;
    }
    if ((win && (win->rank != 1 || win->dims[0] != s->len)) || s->len > x->dims[1]) {
        if (g) error(ir_where(g, n), "window or frame_length does not fit the signal");
        return false;
    }
    s->frames = (x->dims[1] - s->len) / s->step + 1;
    s->bins = ir_attr_int(n, "onesided", 1) ? s->len / 2 + 1 : s->len;
    return true;
}

void infer_stft(Graph *g, Node *n) {
    Stft s;
    if (!rule_float_input(g, n, 0) || !stft_params(g, n, &s)) return;
    int64_t d[4] = {n->in[0]->dims[0], s.frames, s.bins, 2};
    ir_set_shape(n->out[0], n->in[0]->dtype, 4, d);
}

void lower_stft(Lower *L, Node *n) {
    Program *p = L->p;
    Stft s;
    if (!stft_params(NULL, n, &s)) die("lower_stft: %s", n->name);
    Buf *x = lower_in(L, n, 0), *win = lower_in(L, n, 2), *out = lower_out(L, n, 0);
    DType t = DT_DOUBLE;
    bool complex = x->dims[2] == 2;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, win), out, NULL, NULL);
    int vars[3], j = -1;
    lower_vars(k, 3, vars);
    j = kir_var(k);
    int re = kir_scalar(p, k, t), im = kir_scalar(p, k, t);
    Expr *pos = kx_add(p, kx_mul(p, kx_var(p, vars[1]), s.step), kx_var(p, j));
    Expr *jk = kx_bin(p, K_REM, kx_bin(p, K_MUL, kx_var(p, j), kx_var(p, vars[2])), kx_index(p, s.len));
    Expr *ang = kx_bin(p, K_MUL, kx_cast(p, t, jk), kx_const(p, t, 2 * M_PI / (double)s.len));
    Expr *c = kx_un(p, K_COS, ang), *sn = kx_un(p, K_NEG, kx_un(p, K_SIN, kx_clone(p, ang)));
    Expr *xi[3] = {kx_var(p, vars[0]), pos, kx_index(p, 0)};
    Expr *xr = kx_cast(p, t, kx_load(p, x, xi)), *xim = kx_const(p, t, 0);
    if (complex) {
        Expr *xi1[3] = {kx_var(p, vars[0]), kx_clone(p, pos), kx_index(p, 1)};
        xim = kx_cast(p, t, kx_load(p, x, xi1));
    }
    if (win) {
        Expr *wj = kx_var(p, j), *wj2 = kx_var(p, j);
        xr = kx_bin(p, K_MUL, xr, kx_cast(p, t, kx_load(p, win, &wj)));
        xim = kx_bin(p, K_MUL, xim, kx_cast(p, t, kx_load(p, win, &wj2)));
    }
    Expr *dre = kx_bin(p, K_SUB, kx_bin(p, K_MUL, xr, c), kx_bin(p, K_MUL, xim, sn));
    Expr *dim = kx_bin(p, K_ADD, kx_bin(p, K_MUL, kx_clone(p, xr), kx_clone(p, sn)), kx_bin(p, K_MUL, kx_clone(p, xim), kx_clone(p, c)));
    Stmt *acc = ks_set(p, re, kx_bin(p, K_ADD, kx_scalar(p, k, re), dre));
    ks_seq(acc, ks_set(p, im, kx_bin(p, K_ADD, kx_scalar(p, k, im), dim)));
    Stmt *loop = ks_loop(p, j, 0, s.len, 1, acc);
    loop->hints |= LH_REDUCTION;
    Stmt *body = ks_set(p, re, kx_const(p, t, 0));
    ks_seq(body, ks_set(p, im, kx_const(p, t, 0)));
    ks_seq(body, loop);
    int regs[2] = {re, im};
    for (int q = 0; q < 2; q++) {
        Expr *oi[4] = {kx_var(p, vars[0]), kx_var(p, vars[1]), kx_var(p, vars[2]), kx_index(p, q)};
        ks_seq(body, ks_store(p, out, oi, kx_cast(p, out->dtype, kx_scalar(p, k, regs[q]))));
    }
    k->body = lower_wrap(p, 3, out->dims, vars, body);
}
