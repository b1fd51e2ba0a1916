/* loss.c - the the loss ops: NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (opsets 12 and 13, which differ only in the types they accept).
 *
 * Both read log-probabilities lp[N, C, d1..dk] and class labels t[N, d1..dk] (an integer graph
 * input read at run time) and compute per sample
 *     w = t == ignore_index ? 0 : (weight ? weight[t] : 1),   loss = w * -lp[n, t, d...]
 * (an ignored sample's loss is 0 whatever lp holds there), then reduce: `none` keeps the
 * per-sample losses, `sum` adds them, `mean` divides the sum by the sum of w (by the sample
 * count when there is neither a weight nor an ignore_index: then every w is 1).
 * SoftmaxCrossEntropyLoss first computes lp = LogSoftmax(scores) along dim 1 into its optional
 * second output (or a temporary), in the three-pass form of normalize.c's lower_softmax.
 *
 * Labels are data: a label out of [0, C) that is not ignore_index is undefined in ONNX, and we
 * clamp it into range so that no load ever leaves lp or weight. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- small helpers ---- */

static bool is_int_dtype(DType t) {
    return t == DT_INT8 || t == DT_INT16 || t == DT_INT32 || t == DT_INT64 || t == DT_UINT8 ||
           t == DT_UINT16 || t == DT_UINT32 || t == DT_UINT64;
}

/* ---- shape rules ---- */

typedef enum Reduction { RD_NONE, RD_SUM, RD_MEAN, RD_BAD } Reduction;

static Reduction reduction_of(const Node *n) {
    const char *r = ir_attr_str(n, "reduction", "mean");
    return !strcmp(r, "none") ? RD_NONE : !strcmp(r, "sum") ? RD_SUM
         : !strcmp(r, "mean") ? RD_MEAN : RD_BAD;
}

static Value *weight_of(const Node *n) { return n->nin > 2 ? n->in[2] : NULL; }

/* Checks shared by both ops; sets output 0 (the loss). */
static bool infer_loss(Graph *g, Node *n) {
    Value *x = n->in[0], *t = n->in[1], *w = weight_of(n);
    Reduction rd = reduction_of(n);
    if (rd == RD_BAD) {
        error(ir_where(g, n), "unknown reduction '%s'", ir_attr_str(n, "reduction", ""));
        return false;
    }
    if (!dtype_is_float(x->dtype)) {
        error(ir_where(g, n), "input 0 must be a float tensor, not %s", dtype_name(x->dtype));
        return false;
    }
    if (x->rank < 2) {
        error(ir_where(g, n), "input 0 must have rank >= 2 (N, C, d1...), not %d", x->rank);
        return false;
    }
    if (!is_int_dtype(t->dtype)) {
        error(ir_where(g, n), "labels must be an integer tensor, not %s", dtype_name(t->dtype));
        return false;
    }
    bool ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
    for (int d = 1; ok && d < t->rank; d++) ok = t->dims[d] == x->dims[d + 1];
    if (!ok) {
        error(ir_where(g, n), "labels must have input 0's shape without dim 1");
        return false;
    }
    if (w && (w->rank != 1 || w->dims[0] != x->dims[1] || w->dtype != x->dtype)) {
        error(ir_where(g, n), "weight must be a %s vector of %lld classes", dtype_name(x->dtype),
              (long long)x->dims[1]);
        return false;
    }
    if (rd == RD_NONE) ir_set_shape(n->out[0], x->dtype, t->rank, t->dims);
    else ir_set_shape(n->out[0], x->dtype, 0, NULL);
    return true;
}

void infer_nll_loss(Graph *g, Node *n) { infer_loss(g, n); }

void infer_sce_loss(Graph *g, Node *n) {
    if (!infer_loss(g, n)) return;
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], n->in[0]->dtype, n->in[0]->rank, n->in[0]->dims);
}

/* ---- the loss over log-probabilities ---- */

typedef struct Loss {
    Buf *lp, *t, *w;                /* log-probabilities, labels, weight (or NULL) */
    bool has_ii;
    int64_t ii;                     /* ignore_index when has_ii */
} Loss;

/* Whether the sample at label index ti counts (NULL: always). */
static Expr *counted(Program *p, const Loss *s, Expr **ti) {
    if (!s->has_ii) return NULL;
    return kx_bin(p, K_NE, kx_load(p, s->t, ti), kx_int(p, s->t->dtype, s->ii));
}

/* The sample's class as an index, clamped into [0, C). */
static Expr *class_of(Program *p, const Loss *s, Expr **ti) {
    Expr *c = kx_cast(p, DT_INDEX, kx_load(p, s->t, ti));
    c = kx_bin(p, K_MAX, c, kx_index(p, 0));
    return kx_bin(p, K_MIN, c, kx_index(p, s->lp->dims[1] - 1));
}

/* weight[class] (1 without a weight), or 0 for an ignored sample. */
static Expr *sample_weight(Program *p, const Loss *s, Expr **ti) {
    DType dt = s->lp->dtype;
    Expr *wi[1] = {NULL};
    Expr *w = kx_const(p, dt, 1);
    if (s->w) {
        wi[0] = class_of(p, s, ti);
        w = kx_load(p, s->w, wi);
    }
    Expr *c = counted(p, s, ti);
    return c ? kx_select(p, c, w, kx_const(p, dt, 0)) : w;
}

/* w * -lp[n, class, d...], or 0 for an ignored sample (never 0 * lp: lp may be infinite). */
static Expr *sample_loss(Program *p, const Loss *s, Expr **ti) {
    DType dt = s->lp->dtype;
    Expr *xi[MAX_RANK], *wi[1] = {NULL};
    xi[0] = ti[0];
    xi[1] = class_of(p, s, ti);
    for (int d = 1; d < s->t->rank; d++) xi[d + 1] = ti[d];
    Expr *v = kx_un(p, K_NEG, kx_load(p, s->lp, xi));
    if (s->w) {
        wi[0] = class_of(p, s, ti);
        v = kx_bin(p, K_MUL, kx_load(p, s->w, wi), v);
    }
    Expr *c = counted(p, s, ti);
    return c ? kx_select(p, c, v, kx_const(p, dt, 0)) : v;
}

/* out = the per-sample losses (none) or their sum / weighted mean (a scalar). */
static void emit_loss(Lower *L, Node *n, const Loss *s, Buf *out) {
    Program *p = L->p;
    Reduction rd = reduction_of(n);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(s->lp, s->t, s->w), out, NULL, NULL);
    int r = s->t->rank, vars[MAX_RANK];
    Expr *ti[MAX_RANK];
    lower_vars(k, r, vars);
    lower_var_idx(p, r, vars, ti);
    if (rd == RD_NONE) {
        k->body = lower_wrap(p, r, s->t->dims, vars, ks_store(p, out, ti, sample_loss(p, s, ti)));
        return;
    }
    DType dt = out->dtype;
    bool count_only = rd == RD_MEAN && !s->w && !s->has_ii; /* every weight is 1 */
    int acc = kir_scalar(p, k, dt), ws = rd == RD_MEAN ? kir_scalar(p, k, dt) : -1;
    Stmt *upd = ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc), sample_loss(p, s, ti)));
    Stmt *body = ks_set(p, acc, kx_const(p, dt, 0));
    if (ws >= 0) {
        ks_seq(body, ks_set(p, ws, kx_const(p, dt, count_only ? (double)kir_numel(s->t) : 0)));
        if (!count_only)
            ks_seq(upd, ks_set(p, ws, kx_bin(p, K_ADD, kx_scalar(p, k, ws), sample_weight(p, s, ti))));
    }
    for (int d = r - 1; d >= 0; d--) upd = ks_red_loop(p, vars[d], s->t->dims[d], upd);
    ks_seq(body, upd);
    Expr *v = kx_scalar(p, k, acc);
    if (ws >= 0) v = kx_bin(p, K_DIV, v, kx_scalar(p, k, ws));
    ks_seq(body, ks_store(p, out, ti, v));
    k->body = body;
}

static void loss_init(Lower *L, Node *n, Buf *lp, Loss *s) {
    Attr *ii = ir_attr(n, "ignore_index");
    s->lp = lp;
    s->t = lower_in(L, n, 1);
    s->w = lower_in(L, n, 2);
    s->has_ii = ii != NULL;
    s->ii = ii ? ii->i : 0;
}

void lower_nll_loss(Lower *L, Node *n) {
    Loss s;
    loss_init(L, n, lower_in(L, n, 0), &s);
    emit_loss(L, n, &s, lower_out(L, n, 0));
}

/* ---- SoftmaxCrossEntropyLoss ---- */

/* lp = LogSoftmax(x) along dim 1: for each (n, d...), m = max x; s = sum exp(x - m);
 * lp = (x - m) - log s. */
static void emit_log_softmax(Lower *L, Node *n, Buf *x, Buf *lp) {
    Program *p = L->p;
    DType t = lp->dtype;
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), lp, NULL, NULL);
    int r = x->rank, oo[MAX_RANK], no = 0;
    int mx = kir_scalar(p, k, t), sm = kir_scalar(p, k, t), ls = kir_scalar(p, k, t);
    int64_t od[MAX_RANK];
    Expr *idx[MAX_RANK];
    for (int d = 0; d < r; d++)
        if (d != 1) {
            oo[no] = kir_var(k);
            idx[d] = kx_var(p, oo[no]);
            od[no++] = x->dims[d];
        }
    int64_t c = x->dims[1];

    int cv = kir_var(k);
    idx[1] = kx_var(p, cv);
    Stmt *body = ks_set(p, mx, kx_const(p, t, -INFINITY));
    ks_seq(body, ks_red_loop(p, cv, c, ks_set(p, mx, kx_bin(p, K_MAX, kx_scalar(p, k, mx), kx_load(p, x, idx)))));

    cv = kir_var(k);
    idx[1] = kx_var(p, cv);
    Expr *e = kx_un(p, K_EXP, kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)));
    ks_seq(body, ks_set(p, sm, kx_const(p, t, 0)));
    ks_seq(body, ks_red_loop(p, cv, c, ks_set(p, sm, kx_bin(p, K_ADD, kx_scalar(p, k, sm), e))));
    ks_seq(body, ks_set(p, ls, kx_un(p, K_LOG, kx_scalar(p, k, sm))));

    cv = kir_var(k);
    idx[1] = kx_var(p, cv);
    Expr *v = kx_bin(p, K_SUB, kx_bin(p, K_SUB, kx_load(p, x, idx), kx_scalar(p, k, mx)), kx_scalar(p, k, ls));
    ks_seq(body, ks_loop(p, cv, 0, c, 1, ks_store(p, lp, idx, v)));
    k->body = lower_wrap(p, no, od, oo, body);
}

void lower_sce_loss(Lower *L, Node *n) {
    Buf *x = lower_in(L, n, 0), *lp;
    if (n->nout > 1 && n->out[1]) {
        lp = lower_out(L, n, 1);
    } else {
        const char *nm = arena_printf(L->p->arena, "%s_log_prob", n->out[0]->name);
        lp = kir_buf_new(L->p, nm, x->dtype, x->rank, x->dims, B_TEMP);
    }
    emit_log_softmax(L, n, x, lp);
    Loss s;
    loss_init(L, n, lp, &s);
    emit_loss(L, n, &s, lower_out(L, n, 0));
}
