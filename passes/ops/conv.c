/* conv.c - the convolution family: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv,
 * and Col2Im (the sum of sliding blocks that ConvTranspose's im2col view makes).
 *
 * All of them take their spatial geometry (output size, strides, dilations, pads, auto_pad)
 * from the shared Window (rule_window in helpers.c), as the pools do. Kernels iterate over
 * the output with the taps as reduction loops inside, accumulating into scalar registers, and
 * store each output element once. Windowed ops never load outside their input: each padded
 * tap is guarded by an `if` placed at the level of its own loop. ConvTranspose becomes the
 * stride-1 Convs of its stride phases (sub-pixel convolution), built by the same conv_nest as
 * a Conv so that they get its schedules, and a kernel interleaving their results (on targets
 * without float vectors, the phases store into their strided positions of the output
 * themselves: direct_phases). Every node
 * reaching these rules is in the canonical form of docs/canonical-forms.md. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- Conv ---- */

/* The kernel's spatial shape: the attribute when present (checked against the weights),
 * else the weights' trailing dims. */
static bool conv_kernel_shape(Graph *g, Node *n, const Value *wt, int64_t *ks) {
    const int64_t *a;
    int na = ir_attr_ints(n, "kernel_shape", &a);
    for (int i = 0; i < wt->rank - 2; i++) {
        ks[i] = wt->dims[2 + i];
        if (na && (na != wt->rank - 2 || a[i] != ks[i])) {
            if (g) error(ir_where(g, n), "kernel_shape does not match the weights");
            return false;
        }
    }
    return true;
}

void infer_conv(Graph *g, Node *n) {
    Value *x = n->in[0], *wt = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
    int64_t grp = ir_attr_int(n, "group", 1), ks[MAX_RANK], dims[MAX_RANK];
    Window w;
    if (!rule_same_type(g, n, 1, 2)) return;
    if (x->rank < 3 || wt->rank != x->rank) {
        error(ir_where(g, n), "input rank %d and weight rank %d: need equal ranks >= 3", x->rank,
              wt->rank);
        return;
    }
    if (grp < 1 || x->dims[1] != wt->dims[1] * grp || wt->dims[0] % grp) {
        error(ir_where(g, n), "channels do not match: input %lld, weights %lld x %lld groups",
              (long long)x->dims[1], (long long)wt->dims[1], (long long)grp);
        return;
    }
    if (b && (b->rank != 1 || b->dims[0] != wt->dims[0])) {
        error(ir_where(g, n), "bias must have shape [%lld]", (long long)wt->dims[0]);
        return;
    }
    if (!conv_kernel_shape(g, n, wt, ks) || !rule_window(g, n, x, ks, false, &w)) return;
    dims[0] = x->dims[0];
    dims[1] = wt->dims[0];
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* The stride phases of a ConvTranspose (sub-pixel convolution). Along a spatial dim of stride
 * s, the outputs o = q*s + r of one phase r receive input i = (o + pb - t*d) / s from the taps t
 * where that division is exact: with g = gcd(s, d), the taps t0, t0 + s/g, t0 + 2s/g, ...
 * (none when t0 would be k or beyond), reading i = q + base - j*(d/g) for the j-th of them,
 * base = (r + pb - t0*d) / s. Taken in reverse order (j' = nt-1-j) that is a plain stride-1
 * convolution of x with dilation d/g, nt taps and begin padding (nt-1)*(d/g) - base, over the
 * ceil((out - r) / s) outputs of the phase. A phase with no taps along some dim receives only
 * the bias. */
typedef struct Phase {
    int64_t r[MAX_RANK];                /* the phase: outputs o = q*s + r */
    int64_t t0[MAX_RANK], step[MAX_RANK]; /* phase tap j' is original tap t0 + (k'-1-j')*step */
    Window w;                           /* the phase as a stride-1 conv of x (w.k 0: no taps) */
} Phase;

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* Phase ph (phase index r[i] along each dim) of the ConvTranspose of geometry tw. */
static void phase_init(const Window *tw, const int64_t *r, Phase *ph) {
    Window *w = &ph->w;
    *w = (Window){.nsp = tw->nsp};
    for (int i = 0; i < tw->nsp; i++) {
        int64_t s = tw->s[i], d = tw->d[i], k = tw->k[i], g = gcd(s, d), t0 = 0;
        while (t0 < MIN(k, s / g) && (r[i] + tw->pb[i] - t0 * d) % s) t0++;
        int64_t nt = t0 < MIN(k, s / g) ? (k - 1 - t0) / (s / g) + 1 : 0;
        ph->r[i] = r[i];
        ph->t0[i] = t0;
        ph->step[i] = s / g;
        w->in[i] = tw->in[i];
        w->out[i] = tw->out[i] > r[i] ? (tw->out[i] - r[i] + s - 1) / s : 0;
        w->k[i] = nt;
        w->s[i] = 1;
        w->d[i] = d / g;
        w->pb[i] = nt ? (nt - 1) * (d / g) - (r[i] + tw->pb[i] - t0 * d) / s : 0;
    }
}

/* Whether the phase has outputs, and taps along every dim. */
static bool phase_outputs(const Phase *ph) {
    for (int i = 0; i < ph->w.nsp; i++)
        if (!ph->w.out[i]) return false;
    return true;
}

static bool phase_taps(const Phase *ph) {
    for (int i = 0; i < ph->w.nsp; i++)
        if (!ph->w.k[i]) return false;
    return true;
}

/* The index of phase tap `tap` in the ConvTranspose's weights [C, M/group, k...], for output
 * channel m reading input channel ch. */
static void phase_weight(Program *p, const Phase *ph, Expr *m, Expr *ch, int64_t grp, int64_t mg,
                         Expr *const *tap, Expr **wi) {
    wi[0] = ch;
    wi[1] = grp == 1 ? m : kx_bin(p, K_REM, m, kx_index(p, mg));
    for (int i = 0; i < ph->w.nsp; i++)
        wi[2 + i] = kx_bin(p, K_SUB, kx_index(p, ph->t0[i] + (ph->w.k[i] - 1) * ph->step[i]),
                           kx_mul(p, tap[i], ph->step[i]));
}

/* y[n, m, o...] = bias[m] + sum over c < C/group and taps t of
 *                 x[n, (m / (M/group)) * C/group + c, o*s + t*d - pb] * w[m, c, t]
 * as a plain nest: loops n, m, o... parallel, c and the taps reductions, each padded tap
 * guarded by an if at the level of its own loop. The schedule pass (passes/schedule.c) picks
 * the layout of the weights and the loop order for the target and peels the borders of the
 * last spatial dim off, so that the interior columns have no branch. With a ConvTranspose
 * phase `ph` (above), wt is the ConvTranspose's own weights [C, M/group, k...], read at the
 * phase's taps (run-time weights, which cannot be sliced at compile time). */
static void conv_nest(Lower *L, Node *n, Buf *x, Buf *wt, Buf *b, Buf *y, const Window *w, int64_t grp,
                      int64_t cg, int64_t mg, const Phase *ph, const Window *tw, const Phase *oph) {
    /* with tw (the ConvTranspose's geometry) and oph, the phase's outputs o are stored at
     * y[.., o*s + r, ..] (direct_phases below) */
    Program *p = L->p;
    int ov[MAX_RANK], tv[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x, wt, b), y, ov, NULL);
    int cv = kir_var(k), acc = kir_scalar(p, k, y->dtype);
    lower_vars(k, w->nsp, tv);
    Expr *xi[MAX_RANK], *wi[MAX_RANK], *oi[MAX_RANK], *conds[MAX_RANK], *ti[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    Expr *m = oi[1], *c = kx_var(p, cv);
    xi[0] = oi[0];
    xi[1] = grp == 1 ? c : kx_add(p, kx_mul(p, mg == 1 ? m : kx_bin(p, K_DIV, m, kx_index(p, mg)), cg), c);
    for (int i = 0; i < w->nsp; i++) {
        ti[i] = kx_var(p, tv[i]);
        xi[2 + i] = rule_tap_index(p, w, i, oi[2 + i], ti[i], &conds[i]);
    }
    if (ph) {
        phase_weight(p, ph, m, xi[1], grp, mg, ti, wi);
    } else {
        wi[0] = m;
        wi[1] = c;
        for (int i = 0; i < w->nsp; i++) wi[2 + i] = ti[i];
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, x, xi), kx_load(p, wt, wi));
    Stmt *taps = rule_wrap_taps(p, w, tv, conds, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod)));
    Stmt *body = ks_set(p, acc, b ? kx_load(p, b, &m) : kx_const(p, y->dtype, 0));
    ks_seq(body, ks_red_loop(p, cv, cg, taps));
    Expr *yi[MAX_RANK];
    int64_t dims[MAX_RANK] = {y->dims[0], y->dims[1]};
    for (int d = 0; d < y->rank; d++)
        yi[d] = d < 2 || !tw ? oi[d] : kx_addc(p, kx_mul(p, kx_clone(p, oi[d]), tw->s[d - 2]), oph->r[d - 2]);
    for (int i = 0; i < w->nsp; i++) dims[2 + i] = tw ? w->out[i] : y->dims[2 + i];
    ks_seq(body, ks_store(p, y, yi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, y->rank, dims, ov, body);
}

void lower_conv(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *wt = lower_in(L, n, 1), *b = lower_in(L, n, 2);
    int64_t ks[MAX_RANK], grp = ir_attr_int(n, "group", 1);
    Window w;
    if (!conv_kernel_shape(NULL, n, n->in[1], ks) || !rule_window(NULL, n, n->in[0], ks, false, &w))
        die("lower_conv %s: node not checked by infer_conv", n->name);
    conv_nest(L, n, x, wt, b, lower_out(L, n, 0), &w, grp, wt->dims[1], wt->dims[0] / grp, NULL, NULL, NULL);
}

/* ---- ConvTranspose ---- */

/* a / b rounded down, b > 0, without overflow for any a (-a + b - 1 overflowed for a near
 * -2^63: a ConvTranspose of INT64_MAX-sized padding, structure-aware fuzzing under UBSan) */
static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0); }

/* Geometry of a ConvTranspose: output size and begin padding per spatial dim, from the
 * weights' kernel shape, strides, dilations, pads, output_padding, output_shape and auto_pad.
 * With output_shape (or SAME auto_pad) the total padding may be negative: the output then
 * extends past the last input contribution (those positions get the bias only). */
static bool twindow_init(Graph *g, Node *n, Window *w) {
    const char *where = g ? ir_where(g, n) : n->name;
    const Value *x = n->in[0], *wt = n->in[1];
    const int64_t *st, *dl, *pd, *op, *os, *ks;
    int nsp = x->rank - 2;
    int nst = ir_attr_ints(n, "strides", &st), ndl = ir_attr_ints(n, "dilations", &dl);
    int npd = ir_attr_ints(n, "pads", &pd), nop = ir_attr_ints(n, "output_padding", &op);
    int nos = ir_attr_ints(n, "output_shape", &os), nks = ir_attr_ints(n, "kernel_shape", &ks);
    const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    if ((nst && nst != nsp) || (ndl && ndl != nsp) || (npd && npd != 2 * nsp) ||
        (nop && nop != nsp) || (nos && nos != nsp && nos != nsp + 2) || (nks && nks != nsp)) {
        error(where, "strides/dilations/pads/output_padding/output_shape do not match %d "
                     "spatial dims", nsp);
        return false;
    }
    if (!same && strcmp(ap, "VALID") && strcmp(ap, "NOTSET") && *ap) {
        error(where, "unknown auto_pad '%s'", ap);
        return false;
    }
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        w->in[i] = x->dims[2 + i];
        w->k[i] = wt->dims[2 + i];
        w->s[i] = nst ? st[i] : 1;
        w->d[i] = ndl ? dl[i] : 1;
        if ((nks && ks[i] != w->k[i]) || w->s[i] < 1 || w->d[i] < 1) {
            error(where, "kernel_shape must match the weights, strides and dilations be positive");
            return false;
        }
        /* each step checked: the attributes are the model's (the fuzzer's strides of 2^63 - 1) */
        int64_t opad = nop ? op[i] : 0, ext, full, t;
        bool ovf = __builtin_mul_overflow(w->k[i] - 1, w->d[i], &ext) || __builtin_add_overflow(ext, 1, &ext) ||
                   __builtin_mul_overflow(w->s[i], w->in[i] - 1, &full) || __builtin_add_overflow(full, opad, &full) ||
                   __builtin_add_overflow(full, ext, &full);
        if (!ovf && (nos || same)) {
            int64_t o = 0, total = 0;
            ovf = nos ? (o = os[nos - nsp + i], false) : __builtin_mul_overflow(w->in[i], w->s[i], &o);
            ovf = ovf || __builtin_sub_overflow(full, o, &total);
            bool upper = nos ? strcmp(ap, "SAME_UPPER") == 0 : ap[5] == 'U';
            w->out[i] = o;
            w->pb[i] = upper ? floor_div(total, 2) : total - floor_div(total, 2);
        } else if (!ovf) {
            bool explicit_pads = npd && strcmp(ap, "VALID");
            int64_t pb = explicit_pads ? pd[i] : 0, pe = explicit_pads ? pd[nsp + i] : 0;
            ovf = __builtin_sub_overflow(full, pb, &t) || __builtin_sub_overflow(t, pe, &t);
            w->out[i] = t;
            w->pb[i] = pb;
        }
        if (ovf) {
            error(where, "the output size of spatial dim %d overflows 64 bits (strides, dilations, pads, "
                         "output_padding or output_shape out of range)", i);
            return false;
        }
        if (w->out[i] < 1) {
            error(where, "output size of spatial dim %d is %lld", i, (long long)w->out[i]);
            return false;
        }
    }
    return true;
}

void infer_convtranspose(Graph *g, Node *n) {
    Value *x = n->in[0], *wt = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
    int64_t grp = ir_attr_int(n, "group", 1), dims[MAX_RANK];
    Window w;
    if (!rule_same_type(g, n, 1, 2)) return;
    if (x->rank < 3 || wt->rank != x->rank) {
        error(ir_where(g, n), "input rank %d and weight rank %d: need equal ranks >= 3", x->rank,
              wt->rank);
        return;
    }
    if (grp < 1 || x->dims[1] != wt->dims[0] || wt->dims[0] % grp) {
        error(ir_where(g, n), "channels do not match: input %lld, weights %lld, %lld groups",
              (long long)x->dims[1], (long long)wt->dims[0], (long long)grp);
        return;
    }
    if (b && (b->rank != 1 || b->dims[0] != wt->dims[1] * grp)) {
        error(ir_where(g, n), "bias must have shape [%lld]", (long long)(wt->dims[1] * grp));
        return;
    }
    if (!twindow_init(g, n, &w)) return;
    dims[0] = x->dims[0];
    dims[1] = wt->dims[1] * grp;
    for (int i = 0; i < w.nsp; i++) dims[2 + i] = w.out[i];
    ir_set_shape(n->out[0], x->dtype, x->rank, dims);
}

/* The phase's weights as a constant of a Conv's layout [M, C/group, k'...]: element
 * [m, c, j'...] is wt[(m / (M/group)) * C/group + c, m % (M/group), t0 + (k'-1-j')*step...],
 * so that the schedule packs them as it packs any conv's. */
static Buf *phase_weights(Lower *L, Node *n, const Buf *wt, const Phase *ph, int64_t grp) {
    int nsp = ph->w.nsp, rank = nsp + 2;
    int64_t mg = wt->dims[1], cg = wt->dims[0] / grp, dims[MAX_RANK], idx[MAX_RANK] = {0};
    size_t esz = dtype_size(wt->dtype);
    dims[0] = mg * grp;
    dims[1] = cg;
    for (int i = 0; i < nsp; i++) dims[2 + i] = ph->w.k[i];
    Buf *b = kir_buf_new(L->p, arena_printf(L->p->arena, "%s.phase", wt->name), wt->dtype, rank, dims, B_CONST);
    int64_t ne = kir_numel(b);
    char *data = arena_alloc(L->p->arena, (size_t)ne * esz);
    for (int64_t e = 0; e < ne; e++) {
        int64_t src = (idx[0] / mg) * cg + idx[1];          /* row-major offset into wt */
        src = src * mg + idx[0] % mg;
        for (int i = 0; i < nsp; i++)
            src = src * wt->dims[2 + i] + ph->t0[i] + (ph->w.k[i] - 1 - idx[2 + i]) * ph->step[i];
        memcpy(data + e * esz, (const char *)wt->data + src * esz, esz);
        for (int d = rank - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    b->data = data;
    return b;
}

/* The kernel that interleaves the phases' results into y: for each phase with outputs,
 * y[n, m, q*s + r...] = its result at [n, m, q...] (the bias, or 0, for a phase with no
 * taps). Every element of y is stored once, so an elementwise consumer (BatchNormalization,
 * an activation, a residual Add) fuses into it (passes/fuse.c). The phases that differ only
 * along the last dim share one nest when they have as many outputs there, their stores side
 * by side: each line of y is then written whole while it is in L1 (nest by nest, the lines
 * of an output larger than the L2 were read for ownership and written back once per phase),
 * and the backend's strided vector stores of one iteration fill whole vectors. The nests share
 * one batch and one channel loop around them, so that the kernel moves each channel's plane on
 * its own (a region_mover, passes/schedule.c) and can read and write NHWC: with a nest of
 * its own per row phase it could not, and kept the phases' buffers NCHW, each of their convs
 * scattering its vectors of output channels over the planes (LinkNet's 64 -> 64 on 16x16 at
 * 53-57% of the FMA peak, 93% once NHWC). */
/* Whether the interleaving kernel writes phase ph: it has outputs, and its conv did not store
 * them into y itself (res y: direct_phases). */
static bool todo(const Phase *ph, const Buf *res, const Buf *y) { return phase_outputs(ph) && res != y; }

/* With `merged` (merged_phases below), every phase's result is in res[0], phase ph at
 * channels ph*M .. ph*M + M-1 and without the bias, which is added here. */
static void interleave(Lower *L, Node *n, const Window *tw, const Phase *phs, Buf **res, int nph,
                       Buf *b, Buf *y, bool merged) {
    Program *p = L->p;
    Buf **ins = ARENA_ARRAY(p->arena, Buf *, nph + 1);
    int nin = 0, last = tw->nsp - 1, left = 0;
    for (int i = 0; i < nph; i++) {
        if (res[i] && res[i] != y && (!merged || !nin)) ins[nin++] = res[i];
        left += todo(&phs[i], res[i], y);
    }
    if (!left) return;
    if (b) ins[nin++] = b;
    Kernel *k = lower_kernel(L, n, KC_COPY, nin, ins, y, NULL, NULL);
    Stmt *body = NULL;
    int64_t sl = tw->s[last];
    int nc[2];
    lower_vars(k, 2, nc);
    for (int ph = 0; ph < nph;) {
        /* phases ph .. ph+cnt-1 in one nest: a run along the last dim with equal extents */
        int cnt = 1;
        if (ph % sl == 0)
            while (cnt < sl && todo(&phs[ph], res[ph], y) && todo(&phs[ph + cnt], res[ph + cnt], y) &&
                   phs[ph + cnt].w.out[last] == phs[ph].w.out[last])
                cnt++;
        if (cnt < sl) cnt = 1;
        if (!todo(&phs[ph], res[ph], y)) {
            ph++;
            continue;
        }
        int v[MAX_RANK] = {nc[0], nc[1]};
        int64_t dims[MAX_RANK] = {y->dims[0], y->dims[1]};
        Expr *qi[MAX_RANK];
        lower_vars(k, tw->nsp, &v[2]);
        lower_var_idx(p, y->rank, v, qi);
        for (int i = 0; i < tw->nsp; i++) dims[2 + i] = phs[ph].w.out[i];
        Stmt *stores = NULL;
        for (int c = ph; c < ph + cnt; c++) {
            Expr *yi[MAX_RANK], *li[MAX_RANK];
            for (int d = 0; d < y->rank; d++) li[d] = kx_clone(p, qi[d]);
            yi[0] = kx_clone(p, qi[0]);
            yi[1] = kx_clone(p, qi[1]);
            for (int i = 0; i < tw->nsp; i++)
                yi[2 + i] = kx_addc(p, kx_mul(p, kx_clone(p, qi[2 + i]), tw->s[i]), phs[c].r[i]);
            if (merged) li[1] = kx_addc(p, li[1], c * y->dims[1]);
            Expr *val = res[c] ? kx_load(p, res[c], li) : b ? kx_load(p, b, &li[1]) : kx_const(p, y->dtype, 0);
            if (merged && b) val = kx_bin(p, K_ADD, val, kx_load(p, b, &yi[1]));
            Stmt *st = ks_store(p, y, yi, val);
            stores = stores ? ks_seq(stores, st) : st;
        }
        Stmt *nest = lower_wrap(p, tw->nsp, &dims[2], &v[2], stores);
        body = body ? ks_seq(body, nest) : nest;
        ph += cnt;
    }
    k->body = lower_wrap(p, 2, y->dims, nc, body);
}

/* The gather form, for a ConvTranspose of more than MAX_PHASES phases (a stride beyond the
 * output or the kernel, as only a malformed or fuzzed model has) or an empty kernel: each
 * output element sums its own contributions, so it is written once:
 *   y[n, m, o...] = bias[m] + sum over c < C/group and taps t of
 *       x[n, g*C/group + c, i] * w[g*C/group + c, m % (M/group), t],   g = m / (M/group)
 *   where i = (o + pb - t*d) / s, for the taps where that division is exact and i is in
 *   [0, in). Each spatial dim's test sits just inside its own tap loop. */
enum { MAX_PHASES = 64 };

static void gather_form(Lower *L, Node *n, Buf *x, Buf *wt, Buf *b, Buf *y, const Window *tw) {
    Program *p = L->p;
    int64_t grp = ir_attr_int(n, "group", 1), cg = x->dims[1] / grp, mg = wt->dims[1];
    Window w = *tw;
    int ov[MAX_RANK], tv[MAX_RANK], cv, acc;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x, wt, b), y, ov, NULL);
    cv = kir_var(k);
    lower_vars(k, w.nsp, tv);
    acc = kir_scalar(p, k, y->dtype);

    Expr *xi[MAX_RANK], *wi[MAX_RANK], *oi[MAX_RANK], *conds[MAX_RANK];
    Expr *m = kx_var(p, ov[1]), *c = kx_var(p, cv);
    lower_var_idx(p, y->rank, ov, oi);
    Expr *ch = grp == 1 ? c : kx_add(p, kx_mul(p, kx_bin(p, K_DIV, m, kx_index(p, mg)), cg), c);
    xi[0] = oi[0];
    xi[1] = ch;
    wi[0] = ch;
    wi[1] = grp == 1 ? m : kx_bin(p, K_REM, m, kx_index(p, mg));
    for (int i = 0; i < w.nsp; i++) {
        Expr *t = kx_var(p, tv[i]);
        Expr *num = kx_bin(p, K_SUB, kx_addc(p, oi[2 + i], w.pb[i]), kx_mul(p, t, w.d[i]));
        Expr *cond = kx_bin(p, K_GE, num, kx_index(p, 0));
        if (w.s[i] > 1)
            cond = kx_and(p, cond, kx_bin(p, K_EQ, kx_bin(p, K_REM, num, kx_index(p, w.s[i])),
                                        kx_index(p, 0)));
        xi[2 + i] = w.s[i] > 1 ? kx_bin(p, K_DIV, num, kx_index(p, w.s[i])) : num;
        conds[i] = kx_and(p, cond, kx_bin(p, K_LT, xi[2 + i], kx_index(p, w.in[i])));
        wi[2 + i] = t;
    }
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, x, xi), kx_load(p, wt, wi));
    Stmt *taps = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod));
    for (int i = w.nsp - 1; i >= 0; i--)
        taps = ks_red_loop(p, tv[i], w.k[i], ks_if(p, conds[i], taps, NULL));
    Expr *init = b ? kx_load(p, b, &m) : kx_const(p, y->dtype, 0);
    Stmt *body = ks_set(p, acc, init);
    ks_seq(body, ks_red_loop(p, cv, cg, taps));
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* Whether each phase's conv stores into its own strided positions of y (y[.., q*s + r, ..])
 * instead of a temporary that the interleaving kernel copies into y: on targets without float
 * vectors (Cortex-M4, RV32), where a strided store costs what a contiguous one does. The
 * elementwise consumers then fuse into every phase (passes/fuse.c), and the phases'
 * temporaries leave the arena. The M4 decoder of tests/firmware (QEMU instruction counts):
 * 518,350 -> 490,733 instructions (2.04 -> 1.93 per MAC; the k2 s2 8-channel layer
 * 2.60 -> 2.33), arena 40,960 -> 8,192 B, but .text 11,250 -> 22,074 B: phases that differ
 * only in r no longer share one function. With vectors, the phase convs run along the
 * width, where a strided store is a scatter; the interleaving kernel's stores of the phases
 * side by side fill whole vectors (measured on AVX-512, loaded machine: mixed, the FPN
 * head's k2 s2 ConvTranspose slower, a U-Net's 48 -> 24 at 96x96 faster). */
static bool direct_phases(const Program *p) { return p->vector_bytes <= 4; }

/* Whether the phases can run as one conv of nph*M output channels (phase ph at channels
 * ph*M ..): constant weights, one group, and every phase with outputs, taps and the same
 * window, as a kernel equal to its stride without padding has (the k2 s2 upsampling of
 * U-Nets, FPN and text-detection heads: four 1x1 convs). The input is then read once instead
 * of once per phase, and a conv of few output channels (a 64 -> 1 head) gets 4x as many to
 * block in registers (DBNet-like head's 64 -> 1 k2 s2, loaded machine: phases 4 x ~110 us at
 * 10-13% of peak -> one conv; the 64 -> 64 one 4 x ~300 -> ...). */
static bool merged_phases(const Phase *phs, int64_t nph, bool constw, int64_t grp) {
    if (!constw || grp != 1 || nph < 2) return false;
    for (int64_t ph = 0; ph < nph; ph++) {
        const Window *a = &phs[ph].w, *b = &phs[0].w;
        if (!phase_outputs(&phs[ph]) || !phase_taps(&phs[ph])) return false;
        for (int i = 0; i < a->nsp; i++)
            if (a->k[i] != b->k[i] || a->pb[i] != b->pb[i] || a->out[i] != b->out[i] || a->d[i] != b->d[i])
                return false;
    }
    return true;
}

/* The weights of merged_phases' conv: the phases' (phase_weights) one after another. */
static Buf *merged_weights(Lower *L, Node *n, const Buf *wt, const Phase *phs, int64_t nph) {
    Buf *one = phase_weights(L, n, wt, &phs[0], 1);
    int64_t dims[MAX_RANK], ne = kir_numel(one);
    size_t esz = dtype_size(wt->dtype);
    memcpy(dims, one->dims, sizeof(int64_t) * (size_t)one->rank);
    dims[0] *= nph;
    Buf *all = kir_buf_new(L->p, arena_printf(L->p->arena, "%s.phases", wt->name), wt->dtype, one->rank, dims, B_CONST);
    char *data = arena_alloc(L->p->arena, (size_t)(ne * nph) * esz);
    for (int64_t ph = 0; ph < nph; ph++) {
        Buf *w = ph ? phase_weights(L, n, wt, &phs[ph], 1) : one;
        memcpy(data + (size_t)(ph * ne) * esz, w->data, (size_t)ne * esz);
    }
    all->data = data;
    return all;
}

/* A ConvTranspose of a 1x1 input (1 along every spatial dim), without padding, dilation or
 * groups, whose output is its kernel (a DCGAN generator's first layer: 100 channels of 1x1 to
 * 512 of 4x4): y[n, m, t...] = b[m] + sum_c x[n, c] * w[c, m, t...], a Gemm of x as [N, C]
 * by w as [C, M*K] (K the taps), y's row-major order being w's. As one phase it was a K-tap
 * conv of x padded to 2k-1, each output reading all K taps of which one is not padding: K
 * times the multiply-adds and a weight stream read K times (DCGAN's: 250 us at ~6 GFLOP/s
 * of useful work). Here the Gemm reads each weight once (the schedule's matrix-vector path).
 * The bias, if constant, is expanded along the taps into the accumulator's start; y is a
 * view of the Gemm's [N, M*K] result (a graph output gets a copy, lower_view). */
static bool dense_form(const Program *p, const Window *tw, const Buf *x, const Buf *wt, const Buf *b, int64_t grp) {
    if (direct_phases(p) || grp != 1 || wt->dtype != DT_FLOAT || x->dtype != DT_FLOAT || (b && (b->kind != B_CONST || !b->data || b->alias)))
        return false;
    for (int i = 0; i < tw->nsp; i++)
        if (tw->in[i] != 1 || tw->pb[i] != 0 || tw->d[i] != 1 || tw->out[i] != tw->k[i]) return false;
    return true;
}

static void lower_dense_form(Lower *L, Node *n, Buf *x, Buf *wt, Buf *b) {
    Program *p = L->p;
    int64_t nb = x->dims[0], c = x->dims[1], j = kir_numel(wt) / c, taps = j / wt->dims[1];
    int64_t xd[2] = {nb, c}, wd[2] = {c, j}, yd[2] = {nb, j};
    Buf *x2 = kir_view_new(p, x, arena_printf(p->arena, "%s.rows", x->name), 2, xd);
    Buf *w2 = kir_view_new(p, wt, arena_printf(p->arena, "%s.mat", wt->name), 2, wd);
    Buf *y2 = kir_buf_new(p, arena_printf(p->arena, "%s.mat", n->out[0]->name), DT_FLOAT, 2, yd, B_TEMP);
    Buf *b2 = NULL;
    if (b) {
        b2 = kir_buf_new(p, arena_printf(p->arena, "%s.taps", b->name), DT_FLOAT, 1, &j, B_CONST);
        float *bd = arena_alloc(p->arena, (size_t)j * sizeof(float));
        for (int64_t e = 0; e < j; e++) bd[e] = ((const float *)b->data)[e / taps];
        b2->data = bd;
    }
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, b2 ? 3 : 2, (Buf *[]){x2, w2, b2}, y2, NULL, NULL);
    int ov[2], kv, acc;
    lower_vars(k, 2, ov);
    kv = kir_var(k);
    acc = kir_scalar(p, k, DT_FLOAT);
    Expr *oi[2], *kx = kx_var(p, kv);
    lower_var_idx(p, 2, ov, oi);
    Expr *prod = kx_bin(p, K_MUL, kx_load(p, x2, (Expr *[]){oi[0], kx}), kx_load(p, w2, (Expr *[]){kx, oi[1]}));
    Stmt *body = ks_set(p, acc, b2 ? kx_load(p, b2, (Expr *[]){oi[1]}) : kx_const(p, DT_FLOAT, 0));
    ks_seq(body, ks_red_loop(p, kv, c, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod))));
    ks_seq(body, ks_store(p, y2, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, 2, yd, ov, body);
    lower_view(L, n, 0, y2);
}

/* ConvTranspose as the stride-1 convolutions of its phases (Phase above), each a conv_nest
 * kernel with the bias in its accumulator, and one kernel interleaving their results into y
 * (none with stride 1 everywhere: the one phase is y; with direct_phases, only the phases
 * without taps, whose outputs are the bias, are left to it); beyond MAX_PHASES the gather form
 * above. Constant weights are sliced per phase
 * at compile time into a Conv's layout; the phases then get every schedule of a Conv. */
void lower_convtranspose(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *wt = lower_in(L, n, 1), *b = lower_in(L, n, 2);
    int64_t grp = ir_attr_int(n, "group", 1), cg = x->dims[1] / grp, mg = wt->dims[1], nph = 1;
    Window tw;
    if (!twindow_init(NULL, n, &tw)) die("lower_convtranspose %s: node not checked", n->name);
    if (dense_form(p, &tw, x, wt, b, grp)) {
        lower_dense_form(L, n, x, wt, b);
        return;
    }
    Buf *y = lower_out(L, n, 0);
    for (int i = 0; i < tw.nsp; i++) {
        if (tw.s[i] > MAX_PHASES || (nph *= tw.s[i]) > MAX_PHASES || !tw.k[i]) {  /* no overflow */
            gather_form(L, n, x, wt, b, y, &tw);
            return;
        }
    }
    bool constw = wt->kind == B_CONST && !wt->alias && wt->data;
    bool direct = direct_phases(p);
    Phase *phs = ARENA_ARRAY(p->arena, Phase, nph);
    Buf **res = ARENA_ARRAY(p->arena, Buf *, nph);
    for (int64_t ph = 0; ph < nph; ph++) {
        int64_t r[MAX_RANK], rest = ph;
        for (int i = tw.nsp - 1; i >= 0; i--) {
            r[i] = rest % tw.s[i];
            rest /= tw.s[i];
        }
        phase_init(&tw, r, &phs[ph]);
    }
    if (!direct && merged_phases(phs, nph, constw, grp)) {
        int64_t dims[MAX_RANK] = {y->dims[0], y->dims[1] * nph};
        for (int i = 0; i < tw.nsp; i++) dims[2 + i] = phs[0].w.out[i];
        Buf *all = kir_buf_new(p, arena_printf(p->arena, "%s.phases", y->name), y->dtype, y->rank, dims, B_TEMP);
        conv_nest(L, n, x, merged_weights(L, n, wt, phs, nph), NULL, all, &phs[0].w, 1, cg, mg * nph, NULL, NULL, NULL);
        for (int64_t ph = 0; ph < nph; ph++) res[ph] = all;
        interleave(L, n, &tw, phs, res, (int)nph, b, y, true);
        return;
    }
    for (int64_t ph = 0; ph < nph; ph++) {
        if (!phase_outputs(&phs[ph]) || !phase_taps(&phs[ph])) continue;
        int64_t dims[MAX_RANK] = {y->dims[0], y->dims[1]};
        for (int i = 0; i < tw.nsp; i++) dims[2 + i] = phs[ph].w.out[i];
        res[ph] = direct || nph == 1 ? y
                           : kir_buf_new(p, arena_printf(p->arena, "%s.phase", y->name), y->dtype, y->rank, dims, B_TEMP);
        Buf *w = constw ? phase_weights(L, n, wt, &phs[ph], grp) : wt;
        conv_nest(L, n, x, w, b, res[ph], &phs[ph].w, grp, cg, mg, constw ? NULL : &phs[ph],
                  direct && nph > 1 ? &tw : NULL, &phs[ph]);
    }
    if (nph > 1) interleave(L, n, &tw, phs, res, (int)nph, b, y, false);
}

/* ---- ConvInteger, QLinearConv ---- */

/* Input positions: x, x's zero point, w, w's zero point (-1: none). */
typedef struct IntConvIn { int x, xzp, w, wzp; } IntConvIn;

static IntConvIn intconv_in(const Node *n) {
    if (n->op == OP_QLinearConv) return (IntConvIn){0, 2, 3, 5};
    return (IntConvIn){0, 2, 1, 3};
}

static bool intconv_geom(Graph *g, Node *n, Window *c) {
    IntConvIn ix = intconv_in(n);
    Value *x = n->in[ix.x], *w = n->in[ix.w];
    int64_t grp = ir_attr_int(n, "group", 1);
    if (x->rank < 3 || w->rank != x->rank || grp < 1 || x->dims[1] != w->dims[1] * grp ||
        w->dims[0] % grp) {
        error(g ? ir_where(g, n) : n->name, "input, weights and group do not match");
        return false;
    }
    return rule_window(g, n, x, w->dims + 2, false, c);
}

void infer_conv_integer(Graph *g, Node *n) {
    IntConvIn ix = intconv_in(n);
    Value *x = n->in[ix.x], *w = n->in[ix.w];
    Value *xzp = rule_opt_in(n, ix.xzp), *wzp = rule_opt_in(n, ix.wzp);
    Window c;
    int64_t dims[MAX_RANK];
    if (!rule_quant_type(x->dtype) || !rule_quant_type(w->dtype) || (xzp && xzp->dtype != x->dtype) ||
        (wzp && wzp->dtype != w->dtype) || (xzp && ir_numel(xzp) != 1) ||
        (wzp && ir_numel(wzp) != 1 && ir_numel(wzp) != w->dims[0])) {
        error(ir_where(g, n), "needs uint8/int8 x and w, zero points of their types (x's a "
              "scalar, w's per tensor or per output channel)");
        return;
    }
    if (!intconv_geom(g, n, &c)) return;
    DType t = DT_INT32;
    if (n->op == OP_QLinearConv) {
        Value *b = rule_opt_in(n, 8);
        t = n->in[7]->dtype;
        if (!rule_quant_type(t) || (b && (b->dtype != DT_INT32 || ir_numel(b) != w->dims[0]))) {
            error(ir_where(g, n), "needs a uint8/int8 y_zero_point and an int32 bias per channel");
            return;
        }
        /* x_scale, w_scale, y_scale: inputs 1, 4, 6 */
        if (n->in[1]->dtype != DT_FLOAT || n->in[4]->dtype != DT_FLOAT || n->in[6]->dtype != DT_FLOAT) {
            error(ir_where(g, n), "needs float32 x_scale, w_scale and y_scale");
            return;
        }
    }
    dims[0] = x->dims[0];
    dims[1] = w->dims[0];
    for (int i = 0; i < c.nsp; i++) dims[2 + i] = c.out[i];
    ir_set_shape(n->out[0], t, x->rank, dims);
}

/* One element of a per-tensor or per-channel operand (index m). */
static Expr *per_channel(Program *p, Kernel *k, Buf *b, Expr *m) {
    if (kir_numel(b) == 1) return rule_load_first(p, k, b);
    kir_param(p, k, b, KP_IN);
    return kx_load(p, b, &m);
}

/* QLinearConv's multiplier of output channel m: x_scale * w_scale[m] / y_scale in float32
 * steps. With constant scales (always, from fuse_qdq) it is computed here, in the same float32
 * steps, into a table of its own (a scalar when per tensor), so the kernel neither loads three
 * scales nor divides per output vector; the result is the same to the bit. */
static Expr *requant_mult(Lower *L, Kernel *k, Node *n, Expr *m) {
    Program *p = L->p;
    Buf *xs = lower_in(L, n, 1), *ws = lower_in(L, n, 4), *ys = lower_in(L, n, 6);
    bool known = true;
    Buf *bs[3] = {xs, ws, ys};
    for (int i = 0; i < 3; i++)
        known &= bs[i]->kind == B_CONST && !bs[i]->alias && bs[i]->data && bs[i]->dtype == DT_FLOAT;
    if (!known) {
        Expr *mul = kx_bin(p, K_MUL, rule_load_first(p, k, xs), per_channel(p, k, ws, kx_clone(p, m)));
        return kx_bin(p, K_DIV, mul, rule_load_first(p, k, ys));
    }
    int64_t nm = kir_numel(ws);
    float sx = ((const float *)xs->data)[0], sy = ((const float *)ys->data)[0];
    float *d = ARENA_ARRAY(p->arena, float, nm);
    for (int64_t i = 0; i < nm; i++) {
        float t = sx * ((const float *)ws->data)[i];
        d[i] = t / sy;
    }
    if (nm == 1) return kx_const(p, DT_FLOAT, d[0]);
    Buf *b = kir_buf_new(p, arena_printf(p->arena, "%s_mult", ws->name), DT_FLOAT, 1, &nm, B_CONST);
    b->data = d;
    kir_param(p, k, b, KP_IN);
    Expr *mi = kx_clone(p, m);
    return kx_load(p, b, &mi);
}

/* A zero point known to be 0 (a constant of zeros) needs no subtraction. */
static bool zero_const(const Buf *zp) {
    if (!zp || zp->kind != B_CONST || zp->alias || !zp->data) return !zp;
    const uint8_t *d = zp->data;
    for (int64_t i = 0; i < kir_numel(zp); i++)
        if (d[i]) return false;
    return true;
}

/* ---- the dot4 form: 8-bit operands four at a time ----
 * With constant int8 weights whose zero point is 0 (symmetric, as quantizers write them), an
 * integer convolution is a matrix product over K = C/group * taps, four terms at a time:
 *   x4[n, g, k4, p] = the bytes xu[n, g, 4 k4 + j, p], j = 0..3, in one int32 (im2col of
 *                     x, a padded position holding the zero point; xu = x for uint8, x + 128
 *                     for int8, so that every byte is unsigned)
 *   w4[m, k4]       = the int8 weights w[m, 4 k4 + j] likewise (0 beyond K)
 *   acc[n, m, p]    = bias[m] - xzu * sum_k w[m, k] + sum_k4 dot4(x4[n, g(m), k4, p], w4[m, k4])
 * since sum_k (xu - xzu) w = sum_k xu w - xzu sum_k w, the second sum a constant folded into
 * the bias. dot4 is one lane of vpdpbusd (kir.h): on AVX-512 VNNI each instruction does 64
 * multiply-accumulates; elsewhere it is four multiplies. The pack costs one pass over K x P
 * bytes, against M times as many multiply-accumulates. */

static bool dot4_form(const Node *n, const Buf *x, const Buf *w, const Buf *xzp, const Buf *wzp, const Buf *b) {
    (void)n;
    return w->kind == B_CONST && !w->alias && w->data && w->dtype == DT_INT8 && zero_const(wzp) &&
           (!xzp || (xzp->kind == B_CONST && xzp->data && kir_numel(xzp) == 1)) &&
           (!b || (b->kind == B_CONST && b->data && !b->alias)) && rule_quant_type(x->dtype);
}

/* x with the window's padding made real, as unsigned bytes xu (the zero point xzu in the
 * padding), and in *pc the window over it (no padding left); x itself when it has no
 * padding and is uint8. */
static Buf *dot4_pad(Lower *L, Node *n, Buf *x, const Window *c, int64_t xzu, Window *pc) {
    Program *p = L->p;
    bool pads = false;
    *pc = *c;
    int64_t dims[MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < c->nsp; i++) {
        pads |= c->pb[i] || c->pe[i];
        pc->in[i] = c->in[i] + c->pb[i] + c->pe[i];
        pc->pb[i] = pc->pe[i] = 0;
        dims[2 + i] = pc->in[i];
    }
    if (!pads && x->dtype == DT_UINT8) return x;
    Buf *xp = kir_buf_new(p, arena_printf(p->arena, "%s_padded", x->name), DT_UINT8, x->rank, dims, B_TEMP);
    int v[MAX_RANK];
    Expr *oi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), xp, v, oi);
    k->name = arena_printf(p->arena, "%s_pad", k->name);
    /* The last axis in up to three loops, its padding before, the input's columns, its
     * padding after, so that the columns are one contiguous copy: with a test and a clamped
     * index per byte the loads were gathers (LeNet int8's 32x32 pad 0.37 us of 8.6 on
     * x86-64-v3). The other axes keep the test and the clamp, once per row. */
    int last = c->nsp - 1, lv[3] = {v[2 + last], kir_var(k), kir_var(k)};
    int64_t cut[4] = {0, c->pb[last], c->pb[last] + c->in[last], pc->in[last]};
    Stmt *row = NULL;
    for (int piece = 0; piece < 3; piece++) {
        if (cut[piece + 1] <= cut[piece]) continue;
        Expr *xi[MAX_RANK], *yi[MAX_RANK], *in = NULL;
        for (int d = 0; d < xp->rank; d++) yi[d] = kx_var(p, d == 2 + last ? lv[piece] : v[d]);
        xi[0] = kx_var(p, v[0]);
        xi[1] = kx_var(p, v[1]);
        for (int i = 0; i < last; i++) {
            Expr *ix = kx_addc(p, kx_var(p, v[2 + i]), -c->pb[i]);
            if (c->pb[i]) in = kx_and(p, in, kx_bin(p, K_GE, kx_clone(p, ix), kx_index(p, 0)));
            if (c->pe[i]) in = kx_and(p, in, kx_bin(p, K_LT, kx_clone(p, ix), kx_index(p, c->in[i])));
            if (c->pb[i] || c->pe[i])
                ix = kx_bin(p, K_MIN, kx_bin(p, K_MAX, ix, kx_index(p, 0)), kx_index(p, c->in[i] - 1));
            xi[2 + i] = ix;
        }
        xi[2 + last] = kx_addc(p, kx_var(p, lv[piece]), -c->pb[last]);
        Expr *byte = kx_const(p, DT_INT32, (double)xzu);
        if (piece == 1) {
            byte = kx_cast(p, DT_INT32, kx_load(p, x, xi));
            if (x->dtype == DT_INT8) byte = kx_bin(p, K_ADD, byte, kx_const(p, DT_INT32, 128));
            if (in) byte = kx_select(p, in, byte, kx_const(p, DT_INT32, (double)xzu));
        }
        row = ks_seq(row, ks_loop(p, lv[piece], cut[piece], cut[piece + 1], 1, ks_store(p, xp, yi, kx_cast(p, DT_UINT8, byte))));
    }
    k->body = lower_wrap(p, xp->rank - 1, xp->dims, v, row);
    return xp;
}

/* The packed activations x4[n, g, k4, p], as a view [N, G, K4, o...] (returned):
 * word (k4, o) holds the bytes of k = 4 k4 + j, (channel, taps) = divmod(k, taps), read from
 * (per = 2, the dot2 form: x2[n, g, k2, p], the 16-bit halves of word k2 holding the bytes of
 * k = 2 k2 + j, zero-extended)
 * the padded input; k4 and so the division are the same for a whole row of o, whose loads
 * are then contiguous (stride 1) or strided by the conv's stride. Past K the last k is read
 * again: its weight byte is 0. */
static Buf *dot4_pack(Lower *L, Node *n, Buf *x, const Window *c, int64_t grp, int64_t cg, int64_t K,
                      int64_t xzu, int per) {
    Program *p = L->p;
    Window pc;
    Buf *xp = dot4_pad(L, n, x, c, xzu, &pc);
    int64_t K4 = (K + per - 1) / per, T = K / cg, P = 1, dims[MAX_RANK];
    for (int i = 0; i < c->nsp; i++) P *= c->out[i];
    int64_t fd[4] = {x->dims[0], grp, K4, P};
    Buf *flat = kir_buf_new(p, arena_printf(p->arena, "%s_x%d", x->name, per), DT_INT32, 4, fd, B_TEMP);
    dims[0] = x->dims[0];
    dims[1] = grp;
    dims[2] = K4;
    for (int i = 0; i < c->nsp; i++) dims[3 + i] = c->out[i];
    Buf *x4 = kir_view_new(p, flat, flat->name, 3 + c->nsp, dims);
    int v[MAX_RANK];
    Expr *oi[MAX_RANK], *word = NULL;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(xp), x4, v, oi);
    k->name = arena_printf(p->arena, "%s_pack", k->name);
    for (int j = 0; j < per; j++) {
        Expr *kk = kx_addc(p, kx_mul(p, kx_var(p, v[2]), per), j), *xi[MAX_RANK];
        if (per * (K4 - 1) + j >= K) kk = kx_bin(p, K_MIN, kk, kx_index(p, K - 1));
        Expr *ch = T == 1 ? kk : kx_bin(p, K_DIV, kx_clone(p, kk), kx_index(p, T));
        xi[0] = kx_var(p, v[0]);
        xi[1] = grp == 1 ? ch : kx_add(p, kx_mul(p, kx_var(p, v[1]), cg), ch);
        int64_t inner = T;
        for (int i = 0; i < c->nsp; i++) {
            inner /= c->k[i];
            Expr *t = T == 1 ? kx_index(p, 0)
                             : kx_bin(p, K_REM, kx_bin(p, K_DIV, kx_clone(p, kk), kx_index(p, inner)), kx_index(p, c->k[i]));
            Expr *cond;
            xi[2 + i] = rule_tap_index(p, &pc, i, kx_var(p, v[3 + i]), t, &cond);
        }
        Expr *byte = kx_cast(p, DT_INT32, kx_load(p, xp, xi));
        if (xp->dtype == DT_INT8) byte = kx_bin(p, K_ADD, byte, kx_const(p, DT_INT32, 128));
        if (j) byte = kx_bin(p, K_MUL, byte, kx_const(p, DT_INT32, (double)(1 << (32 / per * j))));
        word = word ? kx_bin(p, K_ADD, word, byte) : byte;
    }
    k->body = lower_wrap(p, x4->rank, x4->dims, v, ks_store(p, x4, oi, word));
    return x4;
}

/* A 1x1 convolution (stride 1, no padding, one group) needs no im2col: word k4 of pixel
 * o... is the four bytes x[n, 4 k4 + j, o...] (the last channel again past K: its weight
 * byte is 0), read by the product kernel itself. Channels-innermost (NHWC, chosen by the
 * schedule around depthwise convs) the four bytes are adjacent and the word is one load;
 * and there is no x4 buffer in the arena. */
static bool dot4_direct(const Buf *x, const Window *c, int64_t grp) {
    if (grp != 1) return false;
    for (int i = 0; i < c->nsp; i++)
        if (c->k[i] != 1 || c->s[i] != 1 || c->pb[i] || c->pe[i]) return false;
    return x->dtype == DT_UINT8 || x->dtype == DT_INT8;
}

/* The bytes of the x4 buffer dot4_pack makes (4 per word, K4 words per output position).
 * Under --max-arena's ram_first a conv whose x4 would be larger than its output and than
 * Program.x4_max takes the plain form below instead, which reads x in place (LeNet int8's
 * first conv: 21952 B of x4 for a 4704 B output, 3.65 -> ~6 instructions per MAC on the
 * M4). cli/main.c lowers the program again with x4_max just below the largest such buffer
 * (Program.x4_largest) until the arena fits: one conv at a time, the largest first. */
static int64_t dot4_x4_bytes(const Buf *x, const Buf *w, const Window *c, int64_t grp, int per) {
    int64_t K = kir_numel(w) / w->dims[0], P = 1;
    for (int i = 0; i < c->nsp; i++) P *= c->out[i];
    return x->dims[0] * grp * ((K + per - 1) / per) * P * 4;
}

/* ---- the dot2 form: pairs of 16-bit terms (x86 without VNNI) ----
 * AVX2 has no exact dot4: pmaddubsw saturates its 16-bit pair sums, and dot4 through pmaddwd
 * (backend/kernel.c, pmadd_dot) unpacks both operands' bytes into 16-bit halves at every
 * product, ~3 vector instructions of unpacking for each 2 pmaddwd. The dot2 form does the
 * unpacking once, out of the loop: the weights at compile time, as words of two int16
 * w2[m, k2] = (w[m, 2 k2], w[m, 2 k2 + 1]), the activations in the pack kernel, as words of
 * two zero-extended bytes x2[n, g, k2, p] = (xu[.., 2 k2, p], xu[.., 2 k2 + 1, p]) (a 1x1
 * conv packs too: its input is read once for M outputs), and each product is one pmaddwd
 * (K_DOT2) and one add: 16 multiply-accumulates per pair of ymm instructions, exact (|255 *
 * -128| * 2 fits 16-bit products' 32-bit sums), against the 8 of a float FMA. The zero point
 * and the padding are the dot4 form's (b'[m], xzu). Weights whose pairs cannot saturate
 * pmaddubsw (Program.ubs, the same test as the backend's ubs_exact: 7-bit weights) keep
 * dot4, which the backend emits as pmaddubsw and a pmaddwd by ones on 4 terms. */
static bool dot2_wanted(const Program *p, const Buf *w) {
    if (!p->dot2) return false;
    if (!p->ubs) return true;
    const int8_t *wd = w->data;
    int64_t M = w->dims[0], K = kir_numel(w) / M;
    for (int64_t i = 0; i < M * ((K + 1) / 2); i++) {
        int64_t m = i / ((K + 1) / 2), k = 2 * (i % ((K + 1) / 2));
        int x = wd[m * K + k], y = k + 1 < K ? wd[m * K + k + 1] : 0;
        int pos = (x > 0 ? x : 0) + (y > 0 ? y : 0), neg = (x < 0 ? -x : 0) + (y < 0 ? -y : 0);
        if (pos > 128 || neg > 128) return true;
    }
    return false;
}


static Expr *dot4_word(Program *p, Buf *x, Expr *n, Expr *k4, Expr **sp, int nsp, int64_t K, int per) {
    Expr *word = NULL, *xi[MAX_RANK];
    for (int j = 0; j < per; j++) {
        Expr *ch = kx_addc(p, kx_mul(p, kx_clone(p, k4), per), j);
        if (per * ((K + per - 1) / per - 1) + j >= K) ch = kx_bin(p, K_MIN, ch, kx_index(p, K - 1));
        xi[0] = kx_clone(p, n);
        xi[1] = ch;
        for (int i = 0; i < nsp; i++) xi[2 + i] = kx_clone(p, sp[i]);
        Expr *byte = kx_cast(p, DT_INT32, kx_load(p, x, xi));
        if (x->dtype == DT_INT8) byte = kx_bin(p, K_ADD, byte, kx_const(p, DT_INT32, 128));
        if (j) byte = kx_bin(p, K_MUL, byte, kx_const(p, DT_INT32, (double)(1 << (32 / per * j))));
        word = word ? kx_bin(p, K_ADD, word, byte) : byte;
    }
    return word;
}

static Buf *int32_const(Lower *L, const char *name, int rank, const int64_t *dims, int32_t *data) {
    Buf *b = kir_buf_new(L->p, name, DT_INT32, rank, dims, B_CONST);
    b->data = data;
    return b;
}

/* A constant int32 table (the biases) in the narrowest of int8, int16 and int32 that holds
 * each of its values exactly, decided here at compile time; its loads are cast back to int32
 * (per_channel, narrow_load). Most biases of a quantized model fit 16 bits (the KWS model's
 * do, but for its first conv: 1.1 KB less flash on Cortex-M4). Only on targets without
 * vectors (microcontrollers), where a load sign-extends for free: on x86 the widening of a
 * vector of them cost more code than the bytes it saved (LeNet: +0.9 KB of code, -0.5 KB). */
static Buf *narrow_table(Lower *L, Buf *b) {
    if (!b || L->p->vector_bytes >= 16 || b->kind != B_CONST || b->alias || !b->data || b->dtype != DT_INT32 ||
        kir_numel(b) < 2)
        return b;
    const int32_t *d = b->data;
    int32_t lo = 0, hi = 0;
    for (int64_t i = 0; i < kir_numel(b); i++) lo = MIN(lo, d[i]), hi = MAX(hi, d[i]);
    DType t = lo >= INT8_MIN && hi <= INT8_MAX ? DT_INT8 : lo >= INT16_MIN && hi <= INT16_MAX ? DT_INT16 : DT_INT32;
    if (t == DT_INT32) return b;
    Buf *nb = kir_buf_new(L->p, arena_printf(L->p->arena, "%s_%s", b->name, t == DT_INT8 ? "i8" : "i16"), t,
                          b->rank, b->dims, B_CONST);
    void *nd = ARENA_ARRAY(L->p->arena, int16_t, kir_numel(b));
    for (int64_t i = 0; i < kir_numel(b); i++) {
        if (t == DT_INT8) ((int8_t *)nd)[i] = (int8_t)d[i];
        else ((int16_t *)nd)[i] = (int16_t)d[i];
    }
    nb->data = nd;
    return nb;
}

/* b[idx] as int32 (b a table narrow_table may have narrowed) */
static Expr *narrow_load(Program *p, Buf *b, Expr **idx) {
    Expr *v = kx_load(p, b, idx);
    return b->dtype == DT_INT32 ? v : kx_cast(p, DT_INT32, v);
}

/* The dot2 form's weights: w2[m, k2], the int8 pair (w[m, 2 k2], w[m, 2 k2 + 1]) as the two
 * int16 halves of one int32 word (0 past K), widened here at compile time: each product is
 * then one pmaddwd on the loaded words. Stored as bytes and widened in the loop (one
 * vpmovsxbw per vector of them, a shuffle-port instruction for every 5 pmaddwd of KWS's
 * pointwise convs) the weights took half the flash and ~10% more time. */
static Buf *dot2_weights(Lower *L, const Buf *w, int64_t M, int64_t K) {
    Program *p = L->p;
    int64_t K2 = (K + 1) / 2, dims[2] = {M, K2};
    const int8_t *wd = w->data;
    int32_t *w2 = ARENA_ARRAY(p->arena, int32_t, M * K2);
    for (int64_t m = 0; m < M; m++)
        for (int64_t kk = 0; kk < K; kk++)
            w2[m * K2 + kk / 2] = (int32_t)((uint32_t)w2[m * K2 + kk / 2] | (uint32_t)(uint16_t)(int16_t)wd[m * K + kk] << (16 * (kk % 2)));
    return int32_const(L, arena_printf(p->arena, "%s_w2", w->name), 2, dims, w2);
}

/* x16 = int16(xu), an elementwise kernel before a 1x1 conv of the dot2 form: the conv then
 * reads each pair word x2[k2] = (x16[2 k2], x16[2 k2 + 1]) as one 32-bit load where the
 * channels are innermost (NHWC), broadcast to its vector of output channels; assembled from
 * two bytes it was two loads, a shift, an or and a move to a vector register per word, as
 * many instructions as the products it fed (KWS's pointwise convs: no faster than dot4). */
static Buf *dot2_input(Lower *L, Node *n, Buf *x) {
    Program *p = L->p;
    Buf *xw = kir_buf_new(p, arena_printf(p->arena, "%s_x16", x->name), DT_UINT16, x->rank, x->dims, B_TEMP);
    int v[MAX_RANK];
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, KINS(x), xw, v, oi);
    k->name = arena_printf(p->arena, "%s_x16", k->name);
    for (int i = 0; i < x->rank; i++) xi[i] = kx_var(p, v[i]);
    Expr *e = kx_cast(p, DT_INT32, kx_load(p, x, xi));
    if (x->dtype == DT_INT8) e = kx_bin(p, K_ADD, e, kx_const(p, DT_INT32, 128));
    k->body = lower_wrap(p, xw->rank, xw->dims, v, ks_store(p, xw, oi, kx_cast(p, DT_UINT16, e)));
    return xw;
}

/* y[n, m, o...] = requantise(b'[m] + sum_k4 dot4(x4[n, m / (M/group), k4, o...], w4[m, k4])):
 * over y's own shape, so that fuse can merge an elementwise consumer (a residual Add), and
 * the schedule coalesces the output rows and columns into one loop as in a 1x1 conv. */
static void lower_conv_dot4(Lower *L, Node *n, Buf *x, Buf *w, Buf *xzp, Buf *b, Buf *y, const Window *c) {
    Program *p = L->p;
    int64_t grp = ir_attr_int(n, "group", 1), cg = w->dims[1], M = w->dims[0], mg = M / grp;
    int64_t K = kir_numel(w) / M, K4 = (K + 3) / 4;
    int64_t xz = xzp ? (xzp->dtype == DT_INT8 ? ((const int8_t *)xzp->data)[0] : ((const uint8_t *)xzp->data)[0]) : 0;
    int64_t xzu = x->dtype == DT_INT8 ? xz + 128 : xz;
    const int8_t *wd = w->data;
    int32_t *w4 = ARENA_ARRAY(p->arena, int32_t, M * K4), *bd = ARENA_ARRAY(p->arena, int32_t, M);
    for (int64_t m = 0; m < M; m++) {
        int64_t sum = 0;
        for (int64_t kk = 0; kk < K; kk++) {
            sum += wd[m * K + kk];
            w4[m * K4 + kk / 4] = (int32_t)((uint32_t)w4[m * K4 + kk / 4] | (uint32_t)(uint8_t)wd[m * K + kk] << (8 * (kk % 4)));
        }
        bd[m] = (int32_t)((b ? ((const int32_t *)b->data)[m] : 0) - xzu * sum);
    }
    int64_t wdims[2] = {M, K4};
    bool two = dot2_wanted(p, w);
    Buf *wb = two ? dot2_weights(L, w, M, K) : int32_const(L, arena_printf(p->arena, "%s_w4", w->name), 2, wdims, w4);
    Buf *bb = narrow_table(L, int32_const(L, arena_printf(p->arena, "%s_b4", w->name), 1, &M, bd));
    bool direct = dot4_direct(x, c, grp);
    Buf *x4 = direct ? (two ? dot2_input(L, n, x) : x) : dot4_pack(L, n, x, c, grp, cg, K, xzu, two ? 2 : 4);
    if (two) K4 = (K + 1) / 2;
    int ov[MAX_RANK], kv, acc;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x4, wb, bb), y, ov, NULL);
    kv = kir_var(k);
    acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    xi[0] = kx_clone(p, oi[0]);
    xi[1] = grp == 1 ? kx_index(p, 0) : kx_bin(p, K_DIV, kx_clone(p, oi[1]), kx_index(p, mg));
    xi[2] = kx_var(p, kv);
    for (int i = 0; i < c->nsp; i++) xi[3 + i] = kx_clone(p, oi[2 + i]);
    Expr *wi[2] = {kx_clone(p, oi[1]), kx_var(p, kv)};
    Expr *xw = direct ? dot4_word(p, x4, oi[0], xi[2], oi + 2, c->nsp, K, two ? 2 : 4) : kx_load(p, x4, xi);
    Expr *dot = kx_bin(p, two ? K_DOT2 : K_DOT4, xw, kx_load(p, wb, wi));
    Stmt *body = ks_set(p, acc, narrow_load(p, bb, (Expr *[]){kx_clone(p, oi[1])}));
    ks_seq(body, ks_red_loop(p, kv, K4, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), dot))));
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_QLinearConv)
        v = rule_quantize(p, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v), requant_mult(L, k, n, oi[1])),
                          rule_load_first(p, k, lower_in(L, n, 7)), y->dtype);
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- integer convolutions accumulated in float32, exactly ----
 * Products of 8-bit operands minus their zero points are integers of at most 255 * 255 in
 * magnitude, and float32 holds every integer below 2^24 exactly. Where the constant weights,
 * the zero points and the constant bias bound every partial sum below 2^24 (K terms of
 * |x - xzp| <= xmax times |w - wzp| <= wmax, plus |bias|), the sum in float32 is the int32
 * sum to the bit, whatever the order of the additions and with or without FMAs. On a vector
 * target that is the float conv's code: the weights become a float table (w - wzp) at compile
 * time, each input byte one conversion, each multiply-add one FMA, where the int32 form takes
 * two widenings and a pmaddwd or pmulld and an add per vector. Depthwise convs (K = taps: 9
 * for 3x3, 49 for 7x7) always qualify; the dot4 form takes the others. Scalar targets
 * (Cortex-M4's smlad, RV32) keep int32. Returns the float table, or NULL where it does not
 * apply; *bias the bias as a float table (NULL: none). */
static Buf *float_exact(Lower *L, Buf *x, Buf *w, Buf *xzp, Buf *wzp, Buf *b, int64_t K, Buf **bias) {
    Program *p = L->p;
    *bias = NULL;
    bool wconst = w->kind == B_CONST && !w->alias && w->data && (w->dtype == DT_INT8 || w->dtype == DT_UINT8);
    bool zconst = !wzp || (wzp->kind == B_CONST && !wzp->alias && wzp->data && wzp->dtype == w->dtype);
    bool xzconst = !xzp || (xzp->kind == B_CONST && !xzp->alias && xzp->data && kir_numel(xzp) == 1);
    bool bconst = !b || (b->kind == B_CONST && !b->alias && b->data && b->dtype == DT_INT32);
    if (p->vector_bytes < 16 || !wconst || !zconst || !xzconst || !bconst || (x->dtype != DT_UINT8 && x->dtype != DT_INT8))
        return NULL;
    int64_t nw = kir_numel(w), nm = w->dims[0], per = nw / nm, nz = wzp ? kir_numel(wzp) : 0;
    if (wzp && nz != 1 && nz != nm) return NULL;
    bool u = w->dtype == DT_UINT8;
    int64_t wmax = 0, xmax, bmax = 0, xz = 0;
    float *d = ARENA_ARRAY(p->arena, float, nw);
    for (int64_t i = 0; i < nw; i++) {
        int64_t z = !wzp ? 0 : u ? ((const uint8_t *)wzp->data)[nz == 1 ? 0 : i / per] : ((const int8_t *)wzp->data)[nz == 1 ? 0 : i / per];
        int64_t v = (u ? ((const uint8_t *)w->data)[i] : ((const int8_t *)w->data)[i]) - z;
        wmax = MAX(wmax, v < 0 ? -v : v);
        d[i] = (float)v;
    }
    if (xzp) xz = x->dtype == DT_UINT8 ? ((const uint8_t *)xzp->data)[0] : ((const int8_t *)xzp->data)[0];
    xmax = x->dtype == DT_UINT8 ? MAX(xz, 255 - xz) : MAX(xz + 128, 127 - xz);
    for (int64_t i = 0; b && i < kir_numel(b); i++) {
        int64_t v = ((const int32_t *)b->data)[i];
        bmax = MAX(bmax, v < 0 ? -v : v);
    }
    if (K <= 0 || K > ((int64_t)1 << 24) || bmax + K * xmax * wmax >= ((int64_t)1 << 24)) return NULL;
    Buf *wf = kir_buf_new(p, arena_printf(p->arena, "%s_f", w->name), DT_FLOAT, w->rank, w->dims, B_CONST);
    wf->data = d;
    if (b && kir_numel(b) > 0) {
        int64_t nb = kir_numel(b);
        float *bd = ARENA_ARRAY(p->arena, float, nb);
        for (int64_t i = 0; i < nb; i++) bd[i] = (float)((const int32_t *)b->data)[i];
        *bias = kir_buf_new(p, arena_printf(p->arena, "%s_f", b->name), DT_FLOAT, b->rank, b->dims, B_CONST);
        (*bias)->data = bd;
    }
    return wf;
}

/* xf = float(x) - float(xzp) (xzp NULL: 0), an elementwise kernel before the conv's, which
 * reads each input pixel once per tap: exact small integers in float32 (float_exact). */
static Buf *float_input(Lower *L, Node *n, Buf *x, Buf *xzp) {
    Program *p = L->p;
    Buf *xf = kir_buf_new(p, arena_printf(p->arena, "%s_f", x->name), DT_FLOAT, x->rank, x->dims, B_TEMP);
    int v[MAX_RANK];
    Expr *oi[MAX_RANK], *xi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, KINS(x), xf, v, oi);
    k->name = arena_printf(p->arena, "%s_xf", k->name);
    for (int i = 0; i < x->rank; i++) xi[i] = kx_var(p, v[i]);
    Expr *e = kx_cast(p, DT_FLOAT, kx_load(p, x, xi));
    if (xzp) {
        kir_param(p, k, xzp, KP_IN);
        e = kx_bin(p, K_SUB, e, kx_cast(p, DT_FLOAT, rule_load_first(p, k, xzp)));
    }
    k->body = lower_wrap(p, xf->rank, xf->dims, v, ks_store(p, xf, oi, e));
    return xf;
}

/* acc[n, m, o...] = bias[m] + sum over c < C/group and taps t, skipping padding, of
 *   (x[n, group_of(m) * C/group + c, o*s + t*d - pb] - xzp) * (w[m, c, t] - wzp[m])
 * in int32: the nest of lower_conv (the same tap indices and per-dim guards, each at the
 * level of its own tap loop, so that the schedule peels the borders off and the interior has
 * no test), a padded tap contributing (xzp - xzp) * w = 0. ConvInteger stores acc;
 * QLinearConv requantises it: saturate(round(acc * (x_scale * w_scale[m] / y_scale)) + yzp),
 * in float32 (docs/int8.md). */
void lower_conv_integer(Lower *L, Node *n) {
    Program *p = L->p;
    IntConvIn ix = intconv_in(n);
    Buf *x = lower_in(L, n, ix.x), *w = lower_in(L, n, ix.w), *y = lower_out(L, n, 0);
    Buf *xzp = lower_in(L, n, ix.xzp), *wzp = lower_in(L, n, ix.wzp);
    Buf *b = n->op == OP_QLinearConv ? lower_in(L, n, 8) : NULL;
    Window c;
    if (!intconv_geom(NULL, n, &c)) die("lower_conv_integer %s: unchecked", n->name);
    int64_t grp0 = ir_attr_int(n, "group", 1);
    bool depthwise = grp0 > 1 && grp0 == x->dims[1] && grp0 == w->dims[0];
    int64_t grp = ir_attr_int(n, "group", 1), cg = w->dims[1], mg = w->dims[0] / grp;
    if (L->p->opt_level >= 1 && !depthwise && dot4_form(n, x, w, xzp, wzp, b)) {
        int64_t x4 = dot4_direct(x, &c, grp) ? 0 : dot4_x4_bytes(x, w, &c, grp, dot2_wanted(L->p, w) ? 2 : 4);
        bool big = x4 > (int64_t)kir_nbytes(y);
        if (!big || x4 <= L->p->x4_max) {
            if (big && x4 > L->p->x4_largest) L->p->x4_largest = x4;
            lower_conv_dot4(L, n, x, w, xzp, b, y, &c);
            return;
        }
    }
    int ov[MAX_RANK], tv[MAX_RANK], cv, acc;
    int64_t K = cg;
    for (int i = 0; i < c.nsp; i++) K *= w->dims[2 + i];
    Buf *fb = NULL, *wf = float_exact(L, x, w, zero_const(xzp) ? NULL : xzp, wzp, b, K, &fb);
    /* where taps share input pixels (K > C/group), the input converted once, by a kernel of
     * its own before the conv's, not once per tap */
    Buf *xb = wf && K > cg ? float_input(L, n, x, zero_const(xzp) ? NULL : xzp) : NULL;
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(xb ? xb : x, wf ? wf : w), y, ov, NULL);
    cv = kir_var(k);
    lower_vars(k, c.nsp, tv);
    acc = kir_scalar(p, k, DT_INT32);
    Expr *oi[MAX_RANK], *xi[MAX_RANK], *wi[MAX_RANK], *conds[MAX_RANK];
    lower_var_idx(p, y->rank, ov, oi);
    Expr *m = oi[1], *ch = kx_var(p, cv);
    xi[0] = kx_clone(p, oi[0]);
    xi[1] = grp == 1 ? ch
            : kx_add(p, kx_mul(p, mg == 1 ? kx_clone(p, m) : kx_bin(p, K_DIV, kx_clone(p, m), kx_index(p, mg)), cg), ch);
    wi[0] = kx_clone(p, m);
    wi[1] = kx_var(p, cv);
    for (int i = 0; i < c.nsp; i++) {
        wi[2 + i] = kx_var(p, tv[i]);
        xi[2 + i] = rule_tap_index(p, &c, i, kx_clone(p, oi[2 + i]), kx_var(p, tv[i]), &conds[i]);
    }
    if (wf) {
        /* acc = fb[m] + sum xf[...] * wf[m, c, t] in float32, exact, xf = float(x) - float(xzp) */
        k->scalars[acc] = DT_FLOAT;
        Expr *xf;
        if (xb) {
            xf = kx_load(p, xb, xi);
        } else {
            xf = kx_cast(p, DT_FLOAT, kx_load(p, x, xi));
            if (!zero_const(xzp)) {
                kir_param(p, k, xzp, KP_IN);
                xf = kx_bin(p, K_SUB, xf, kx_cast(p, DT_FLOAT, rule_load_first(p, k, xzp)));
            }
        }
        Stmt *taps = rule_wrap_taps(p, &c, tv, conds, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, xf, kx_load(p, wf, wi)))));
        Stmt *body = ks_set(p, acc, fb ? per_channel(p, k, fb, kx_clone(p, m)) : kx_const(p, DT_FLOAT, 0));
        ks_seq(body, ks_red_loop(p, cv, cg, taps));
        Expr *v = kx_scalar(p, k, acc);
        if (n->op == OP_QLinearConv)
            v = rule_quantize(p, kx_bin(p, K_MUL, v, requant_mult(L, k, n, m)), rule_load_first(p, k, lower_in(L, n, 7)), y->dtype);
        else
            v = kx_cast(p, DT_INT32, v);
        ks_seq(body, ks_store(p, y, oi, v));
        k->body = lower_wrap(p, y->rank, y->dims, ov, body);
        return;
    }
    Expr *xv = rule_centered(p, k, x, xi, zero_const(xzp) ? NULL : xzp, NULL);
    Expr *wv = kx_cast(p, DT_INT32, kx_load(p, w, wi));
    if (!zero_const(wzp))
        wv = kx_bin(p, K_SUB, wv, kx_cast(p, DT_INT32, per_channel(p, k, wzp, kx_clone(p, m))));
    Stmt *taps = rule_wrap_taps(p, &c, tv, conds, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_bin(p, K_MUL, xv, wv))));
    b = narrow_table(L, b);
    Expr *bm = b ? per_channel(p, k, b, kx_clone(p, m)) : NULL;
    Stmt *body = ks_set(p, acc, !b ? kx_const(p, DT_INT32, 0) : b->dtype == DT_INT32 ? bm : kx_cast(p, DT_INT32, bm));
    ks_seq(body, ks_red_loop(p, cv, cg, taps));
    Expr *v = kx_scalar(p, k, acc);
    if (n->op == OP_QLinearConv)
        v = rule_quantize(p, kx_bin(p, K_MUL, kx_cast(p, DT_FLOAT, v), requant_mult(L, k, n, m)),
                          rule_load_first(p, k, lower_in(L, n, 7)), y->dtype);
    ks_seq(body, ks_store(p, y, oi, v));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}

/* ---- DeformConv (opsets 19 and 22) ----
 * A 2-D convolution whose taps move by learned offsets: tap (kh, kw) of output (oh, ow)
 * samples input channel c bilinearly at (oh*sh - ph + kh*dh + offset_h, ow*sw - pw + kw*dw +
 * offset_w), each of the four neighbours outside the input counting 0 (the reference's
 * GridSample with align_corners and zeros), times the optional mask; the offsets and mask are
 * per offset group of input channels. One kernel over the output, the taps as reduction loops. */

typedef struct Deform {
    Window w;
    int64_t group, ogroup;
} Deform;

static bool deform_params(Graph *g, Node *n, Deform *dc) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0], *wt = n->in[1], *off = n->in[2], *b = rule_opt_in(n, 3), *m = rule_opt_in(n, 4);
    int64_t ks[MAX_RANK];
    if (x->rank != 4 || wt->rank != 4) {
        error(where, "X and W must be 4-D (onnxcc's DeformConv is 2-D)");
        return false;
    }
    if (!dtype_is_float(x->dtype) || wt->dtype != x->dtype || off->dtype != x->dtype ||
        (b && b->dtype != x->dtype) || (m && m->dtype != x->dtype)) {
        error(where, "X, W, offset, B and mask must be of one float type");
        return false;
    }
    if (!conv_kernel_shape(g, n, wt, ks) || !rule_window(g, n, x, ks, false, &dc->w)) return false;
    dc->group = ir_attr_int(n, "group", 1);
    dc->ogroup = ir_attr_int(n, "offset_group", 1);
    int64_t c = x->dims[1], oc = wt->dims[0], taps = ks[0] * ks[1];
    if (dc->group < 1 || dc->ogroup < 1 || dc->group > MAX(c, 1) || dc->ogroup > MAX(c, 1) || c % dc->group ||
        c % dc->ogroup) {
        error(where, "group %lld and offset_group %lld must divide the %lld channels", (long long)dc->group,
              (long long)dc->ogroup, (long long)c);
        return false;
    }
    int64_t od[4] = {x->dims[0], dc->ogroup * taps * 2, dc->w.out[0], dc->w.out[1]};
    bool ok = c == wt->dims[1] * dc->group && oc % dc->group == 0 && off->rank == 4 &&
              (!b || (b->rank == 1 && b->dims[0] == oc));
    for (int d = 0; ok && d < 4; d++) ok = off->dims[d] == od[d] && (!m || m->dims[d] == (d == 1 ? od[1] / 2 : od[d]));
    if (!ok || (m && m->rank != 4)) {
        error(where, "shapes do not fit: offset must be [%lld, %lld, %lld, %lld], the mask half as "
              "many channels, B [%lld], W [M, C / group, kH, kW] with group dividing M",
              (long long)od[0], (long long)od[1], (long long)od[2], (long long)od[3], (long long)oc);
        return false;
    }
    return true;
}

void infer_deform_conv(Graph *g, Node *n) {
    Deform dc;
    if (!deform_params(g, n, &dc)) return;
    int64_t dims[4] = {n->in[0]->dims[0], n->in[1]->dims[0], dc.w.out[0], dc.w.out[1]};
    ir_set_shape(n->out[0], n->in[0]->dtype, 4, dims);
}

void lower_deform_conv(Lower *L, Node *n) {
    Program *p = L->p;
    Deform dc;
    if (!deform_params(NULL, n, &dc)) die("lower_deform_conv %s: unchecked", n->name);
    Buf *x = lower_in(L, n, 0), *wt = lower_in(L, n, 1), *off = lower_in(L, n, 2);
    Buf *b = lower_in(L, n, 3), *m = lower_in(L, n, 4), *y = lower_out(L, n, 0);
    DType t = x->dtype == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT;
    #define AS(e) ((e)->type == t ? (e) : kx_cast(p, t, (e)))
    int ov[4];
    Expr *oi[4];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, wt, off, b, m), y, ov, oi);
    int vc = kir_var(k), vh = kir_var(k), vw = kir_var(k), acc = kir_scalar(p, k, t);
    int rh = kir_scalar(p, k, t), rw = kir_scalar(p, k, t);
    int64_t cg = wt->dims[1], ocg = y->dims[1] / dc.group, kh = dc.w.k[0], kw = dc.w.k[1];
    int64_t cog = x->dims[1] / dc.ogroup;
    Expr *c = kx_add(p, kx_mul(p, kx_bin(p, K_DIV, kx_clone(p, oi[1]), kx_index(p, ocg)), cg), kx_var(p, vc));
    Expr *og = kx_bin(p, K_DIV, kx_clone(p, c), kx_index(p, cog));
    Expr *tap = kx_add(p, kx_mul(p, kx_var(p, vh), kw), kx_var(p, vw));
    Expr *ch = kx_add(p, kx_mul(p, kx_clone(p, og), kh * kw * 2), kx_mul(p, kx_clone(p, tap), 2));
    Expr *fi[4] = {kx_clone(p, oi[0]), kx_clone(p, ch), kx_clone(p, oi[2]), kx_clone(p, oi[3])};
    Expr *gi[4] = {kx_clone(p, oi[0]), kx_addc(p, ch, 1), kx_clone(p, oi[2]), kx_clone(p, oi[3])};
    Expr *hc = kx_add(p, kx_addc(p, kx_mul(p, kx_clone(p, oi[2]), dc.w.s[0]), -dc.w.pb[0]), kx_mul(p, kx_var(p, vh), dc.w.d[0]));
    Expr *wc = kx_add(p, kx_addc(p, kx_mul(p, kx_clone(p, oi[3]), dc.w.s[1]), -dc.w.pb[1]), kx_mul(p, kx_var(p, vw), dc.w.d[1]));
    Stmt *body = ks_set(p, rh, kx_bin(p, K_ADD, kx_cast(p, t, hc), AS(kx_load(p, off, fi))));
    ks_seq(body, ks_set(p, rw, kx_bin(p, K_ADD, kx_cast(p, t, wc), AS(kx_load(p, off, gi)))));
    Expr *h0 = kx_un(p, K_FLOOR, kx_scalar(p, k, rh)), *w0 = kx_un(p, K_FLOOR, kx_scalar(p, k, rw));
    Expr *fh = kx_bin(p, K_SUB, kx_scalar(p, k, rh), kx_clone(p, h0));
    Expr *fw = kx_bin(p, K_SUB, kx_scalar(p, k, rw), kx_clone(p, w0));
    Expr *sum = NULL;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            Expr *co[2] = {kx_bin(p, K_ADD, kx_clone(p, h0), kx_const(p, t, i)), kx_bin(p, K_ADD, kx_clone(p, w0), kx_const(p, t, j))};
            Expr *ok = NULL, *xi[4] = {kx_clone(p, oi[0]), kx_clone(p, c), NULL, NULL};
            for (int d = 0; d < 2; d++) {
                Expr *hi = kx_const(p, t, (double)(x->dims[2 + d] - 1));
                Expr *in = kx_bin(p, K_AND, kx_bin(p, K_GE, co[d], kx_const(p, t, 0)), kx_bin(p, K_LE, kx_clone(p, co[d]), hi));
                ok = ok ? kx_bin(p, K_AND, ok, in) : in;
                xi[2 + d] = kx_cast(p, DT_INDEX, kx_bin(p, K_MIN, kx_bin(p, K_MAX, kx_clone(p, co[d]), kx_const(p, t, 0)), kx_clone(p, hi)));
            }
            Expr *wy = i ? kx_clone(p, fh) : kx_bin(p, K_SUB, kx_const(p, t, 1), kx_clone(p, fh));
            Expr *wx = j ? kx_clone(p, fw) : kx_bin(p, K_SUB, kx_const(p, t, 1), kx_clone(p, fw));
            Expr *v = kx_select(p, ok, AS(kx_load(p, x, xi)), kx_const(p, t, 0));
            v = kx_bin(p, K_MUL, kx_bin(p, K_MUL, wy, wx), v);
            sum = sum ? kx_bin(p, K_ADD, sum, v) : v;
        }
    Expr *wi[4] = {kx_clone(p, oi[1]), kx_var(p, vc), kx_var(p, vh), kx_var(p, vw)};
    Expr *term = kx_bin(p, K_MUL, AS(kx_load(p, wt, wi)), sum);
    if (m) {
        Expr *mi[4] = {kx_clone(p, oi[0]), kx_add(p, kx_mul(p, kx_clone(p, og), kh * kw), kx_clone(p, tap)),
                       kx_clone(p, oi[2]), kx_clone(p, oi[3])};
        term = kx_bin(p, K_MUL, term, AS(kx_load(p, m, mi)));
    }
    ks_seq(body, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), term)));
    Stmt *loops = ks_red_loop(p, vc, cg, ks_red_loop(p, vh, kh, ks_red_loop(p, vw, kw, body)));
    Expr *init = b ? AS(kx_load(p, b, (Expr *[]){kx_clone(p, oi[1])})) : kx_const(p, t, 0);
    Stmt *all = ks_seq(ks_set(p, acc, init), loops);
    Expr *v = kx_scalar(p, k, acc);
    ks_seq(all, ks_store(p, y, oi, v->type == y->dtype ? v : kx_cast(p, y->dtype, v)));
    #undef AS
    k->body = lower_wrap(p, 4, y->dims, ov, all);
}

/* ---- Col2Im (opset 18) ----
 * Sums the sliding blocks of x [N, C * prod(block), L] back into an image [N, C, image...]:
 * output position y gets, for every tap t of the block, the column of the block that puts
 * tap t on y, if any: p = y + pad - t * dilation divisible by the stride with p / stride
 * inside the grid of blocks. A gather, so each output element is written once. */

typedef struct Col2Im {
    int nsp;
    int64_t img[MAX_RANK], blk[MAX_RANK], nb[MAX_RANK], s[MAX_RANK], d[MAX_RANK], pb[MAX_RANK];
} Col2Im;

static bool col2im_params(Graph *g, Node *n, Col2Im *c) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0];
    Value *im = rule_const_ints(g, n, 1, "image_shape", MAX_RANK - 2), *bk;
    if (!im || !(bk = rule_const_ints(g, n, 2, "block_shape", MAX_RANK - 2))) return false;
    c->nsp = (int)ir_numel(im);
    const int64_t *sv, *dv, *pv;
    int ns = ir_attr_ints(n, "strides", &sv), nd = ir_attr_ints(n, "dilations", &dv), np = ir_attr_ints(n, "pads", &pv);
    if (x->rank != 3 || ir_numel(bk) != c->nsp || c->nsp < 1 || (ns && ns != c->nsp) ||
        (nd && nd != c->nsp) || (np && np != 2 * c->nsp)) {
        error(where, "input must be [N, C*K, L], image_shape and block_shape of one length, and "
              "strides, dilations and pads fit them");
        return false;
    }
    int64_t k = 1, l = 1;
    for (int i = 0; i < c->nsp; i++) {
        c->img[i] = ir_const_int(im, i);
        c->blk[i] = ir_const_int(bk, i);
        c->s[i] = ns ? sv[i] : 1;
        c->d[i] = nd ? dv[i] : 1;
        c->pb[i] = np ? pv[i] : 0;
        int64_t pe = np ? pv[c->nsp + i] : 0;
        if (c->img[i] < 1 || c->blk[i] < 1 || c->s[i] < 1 || c->d[i] < 1 || c->pb[i] < 0 || pe < 0) {
            error(where, "sizes, strides and dilations must be positive and pads not negative");
            return false;
        }
        c->nb[i] = (c->img[i] + c->pb[i] + pe - c->d[i] * (c->blk[i] - 1) - 1) / c->s[i] + 1;
        k *= c->blk[i];
        l *= c->nb[i];
    }
    for (int i = 0; i < c->nsp; i++)
        if (c->nb[i] < 1) l = -1;
    if (x->dims[1] % k || x->dims[2] != l) {
        error(where, "input %s does not hold [N, C * %lld, %lld] blocks", rule_dims_str(g, x->rank, x->dims),
              (long long)k, (long long)l);
        return false;
    }
    return true;
}

void infer_col2im(Graph *g, Node *n) {
    Col2Im c;
    if (!col2im_params(g, n, &c)) return;
    Value *x = n->in[0];
    int64_t dims[MAX_RANK], k = 1;
    for (int i = 0; i < c.nsp; i++) k *= c.blk[i];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1] / k;
    for (int i = 0; i < c.nsp; i++) dims[2 + i] = c.img[i];
    ir_set_shape(n->out[0], x->dtype, c.nsp + 2, dims);
}

void lower_col2im(Lower *L, Node *n) {
    Program *p = L->p;
    Col2Im c;
    if (!col2im_params(NULL, n, &c)) die("lower_col2im %s: unchecked", n->name);
    Buf *x = lower_in(L, n, 0), *y = lower_out(L, n, 0);
    int ov[MAX_RANK], tv[MAX_RANK];
    Expr *oi[MAX_RANK];
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), y, ov, oi);
    int acc = kir_scalar(p, k, y->dtype);
    int64_t kk = 1;
    for (int i = 0; i < c.nsp; i++) kk *= c.blk[i];
    Expr *ch = kx_mul(p, kx_clone(p, oi[1]), kk), *col = kx_index(p, 0), *ok = NULL;
    Expr *tflat = kx_index(p, 0);
    for (int i = 0; i < c.nsp; i++) {
        tv[i] = kir_var(k);
        tflat = kx_add(p, kx_mul(p, tflat, c.blk[i]), kx_var(p, tv[i]));
        Expr *pos = kx_add(p, kx_addc(p, kx_clone(p, oi[2 + i]), c.pb[i]), kx_mul(p, kx_var(p, tv[i]), -c.d[i]));
        Expr *bi = kx_bin(p, K_DIV, kx_clone(p, pos), kx_index(p, c.s[i]));
        ok = kx_and(p, ok, kx_bin(p, K_GE, kx_clone(p, pos), kx_index(p, 0)));
        if (c.s[i] > 1)
            ok = kx_and(p, ok, kx_bin(p, K_EQ, kx_bin(p, K_REM, kx_clone(p, pos), kx_index(p, c.s[i])), kx_index(p, 0)));
        ok = kx_and(p, ok, kx_bin(p, K_LT, kx_clone(p, bi), kx_index(p, c.nb[i])));
        col = kx_add(p, kx_mul(p, col, c.nb[i]), bi);
    }
    Expr *xi[3] = {kx_clone(p, oi[0]), kx_add(p, ch, tflat), col};
    Stmt *upd = ks_if(p, ok, ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), kx_load(p, x, xi))), NULL);
    for (int i = c.nsp - 1; i >= 0; i--) upd = ks_red_loop(p, tv[i], c.blk[i], upd);
    Stmt *body = ks_seq(ks_set(p, acc, kx_const(p, y->dtype, 0)), upd);
    ks_seq(body, ks_store(p, y, oi, kx_scalar(p, k, acc)));
    k->body = lower_wrap(p, y->rank, y->dims, ov, body);
}
