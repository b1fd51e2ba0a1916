/* rnn.c - the recurrent ops RNN, GRU and LSTM (opset 7..14: forward, reverse and
 * bidirectional, optional bias, constant sequence_lens, initial states, LSTM peepholes and
 * input_forget, GRU linear_before_reset, the activations list with its alpha/beta values,
 * clip, and both layouts). One implementation for the three: they differ in their gate count
 * and in the cell update.
 *
 * The input's part of every gate does not depend on the state, so it is computed for all
 * steps and directions at once, before the recurrence, by one matmul-shaped kernel:
 *     xw[d, t, b, r] = X[t, b, :] . W[d, r, :] + Wb[d, r] + Rb[d, r]
 * (parallel loops outside, the reduction over the input inside, W read transposed so that
 * rows r are contiguous: the contraction schedule vectorises r and blocks t). Rb is added
 * here except to the rows of GRU's candidate gate with linear_before_reset, where the reset
 * gate multiplies it.
 *
 * Each direction is then one kernel (or, with recurrent weights of STEP_BYTES or more on a target
 * with threads, a loop region of kernels: the stepped form below): a time loop outermost, and
 * inside it, for every step t,
 *   1. gs[b, j] = xw[d, t, b, j] + H[b, :] . R[d, j, :], a matrix-vector product whose loop
 *      over the gate row j is a parallel loop around the reduction over the hidden unit k,
 *      with R read transposed [D, H, gates*hidden] (contiguous along j), or in panels of the
 *      vectors the schedule puts side by side when the hidden size allows;
 *   2. GRU only: the candidate gate's recurrent part, which needs the reset gate of every
 *      unit first: rh[b, k] = r[b, k] * H[b, k], then gs[b, 2H + j] = xw + rh[b, :] . Rh[j, :]
 *      (linear_before_reset: rh[b, j] = Rbh[j] + H[b, :] . Rh[j, :], multiplied by r later);
 *   3. the gate nonlinearities and the update of H (and C) and Y[t], a loop over units that
 *      only stores.
 * The state lives in scratch buffers hs (and cs) [batch, hidden], read at step t+1 after being
 * written at step t. So these kernels are not write-once: every scratch buffer is a B_TEMP
 * registered KP_INOUT, which fusion leaves alone and bufferization gives bytes live for this
 * kernel only; the schedule vectorises the loops over j and units because within one run of
 * such a loop its iterations touch distinct elements (passes/loops.c, iterations_independent). Y, Y_h
 * and Y_c are plain KP_OUT (each element stored once with its final value, never read back)
 * when there is one direction; with two, each kernel writes half of them, so both declare them
 * KP_INOUT.
 *
 * clip, when given, bounds the input of every activation (the gates and h(C)); the states
 * themselves are not clipped.
 *
 * sequence_lens must be constant (shapes are static; `check` binds it from the data set). A
 * batch row whose length L is shorter than the sequence keeps its state for t >= L and gets
 * zeros in Y there; in reverse it starts at t = L-1, which the same rule gives for free. */
#include <string.h>
#include <strings.h>

#include "../loops.h"
#include "../lower.h"

/* ---- the node's attributes, checked once ---- */

typedef enum ActKind {
    ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
    ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
} ActKind;

/* ORDER ActKind: name, whether it takes alpha / beta, and their defaults. */
static const struct {
    const char *name;
    bool alpha, beta;
    double dalpha, dbeta;
} act_table[] = {
    {"Relu", 0, 0, 0, 0},         {"Tanh", 0, 0, 0, 0},        {"Sigmoid", 0, 0, 0, 0},
    {"Affine", 1, 1, 1, 0},       {"LeakyRelu", 1, 0, 0.01, 0}, {"ThresholdedRelu", 1, 0, 1, 0},
    {"ScaledTanh", 1, 1, 1, 1},   {"HardSigmoid", 1, 1, 0.2, 0.5}, {"Elu", 1, 0, 1, 0},
    {"Softsign", 0, 0, 0, 0},     {"Softplus", 0, 0, 0, 0},
};

typedef struct Act {
    ActKind kind;
    double alpha, beta;
} Act;

typedef struct Rnn {
    int ngates;                     /* W rows per unit: RNN 1, GRU 3 (z r h), LSTM 4 (i o f c) */
    int nact;                       /* activations per direction: 1, 2 (f g), 3 (f g h) */
    int ndir;                       /* 1 or 2 */
    bool reverse;                   /* the single direction runs backwards */
    bool batch_major;               /* layout 1: X [B,T,I], Y [B,T,D,H], states [B,D,H] */
    int64_t T, B, I, H;
    Act act[2][3];                  /* by direction */
    bool has_clip;
    double clip;
    bool lbr;                       /* GRU linear_before_reset */
    bool input_forget;              /* LSTM: f = 1 - i */
} Rnn;

static void rnn_gates(Op op, Rnn *r) {
    static const ActKind dflt[3] = {ACT_SIGMOID, ACT_TANH, ACT_TANH};
    r->ngates = op == OP_RNN ? 1 : op == OP_GRU ? 3 : 4;
    r->nact = op == OP_RNN ? 1 : op == OP_GRU ? 2 : 3;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 3; i++)
            r->act[d][i] = (Act){op == OP_RNN ? ACT_TANH : dflt[i], 0, 0};
}

/* The activations attribute: nact names per direction (one set is reused for both directions
 * if only one is given); alpha and beta values are consumed in order by the functions that
 * take them, as onnxruntime does, the defaults filling in when the lists run out. */
static bool rnn_acts(const char *where, const Node *n, Rnn *r) {
    Attr *a = ir_attr(n, "activations");
    Attr *al = ir_attr(n, "activation_alpha"), *be = ir_attr(n, "activation_beta");
    if (!a || a->type != A_STRINGS || !a->n) return true;
    if (a->n != r->nact && a->n != r->nact * r->ndir) {
        error(where, "%d activations given, expected %d", a->n, r->nact * r->ndir);
        return false;
    }
    int ia = 0, ib = 0;
    for (int d = 0; d < r->ndir; d++)
        for (int i = 0; i < r->nact; i++) {
            const char *s = a->strings[(d * r->nact + i) % a->n];
            int k = 0;
            while (k < COUNTOF(act_table) && strcasecmp(act_table[k].name, s)) k++;
            if (k == COUNTOF(act_table)) {
                error(where, "unsupported activation '%s'", s);
                return false;
            }
            Act *x = &r->act[d][i];
            x->kind = (ActKind)k;
            x->alpha = act_table[k].dalpha;
            x->beta = act_table[k].dbeta;
            if (act_table[k].alpha && al && al->type == A_FLOATS && ia < al->n)
                x->alpha = al->floats[ia++];
            if (act_table[k].beta && be && be->type == A_FLOATS && ib < be->n)
                x->beta = be->floats[ib++];
        }
    return true;
}

static bool has_dims(const Value *v, int rank, int64_t d0, int64_t d1, int64_t d2) {
    const int64_t d[3] = {d0, d1, d2};
    if (v->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (v->dims[i] != d[i]) return false;
    return true;
}

/* Reads and checks the node (errors reported with g's location when g is given). */
static bool rnn_parse(Graph *g, Node *n, Rnn *r) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0], *w = n->in[1], *rw = n->in[2];
    memset(r, 0, sizeof *r);
    rnn_gates(n->op, r);
    const char *dir = ir_attr_str(n, "direction", "forward");
    if (!strcmp(dir, "bidirectional")) r->ndir = 2;
    else if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) r->ndir = 1;
    else {
        error(where, "unknown direction '%s'", dir);
        return false;
    }
    r->reverse = !strcmp(dir, "reverse");
    int64_t layout = ir_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1) {
        error(where, "layout must be 0 or 1");
        return false;
    }
    r->batch_major = layout == 1;
    if (x->rank != 3 || w->rank != 3 || rw->rank != 3) {
        error(where, "X, W and R must have rank 3");
        return false;
    }
    if (!dtype_is_float(x->dtype) || w->dtype != x->dtype || rw->dtype != x->dtype) {
        error(where, "X, W and R must have one floating-point dtype");
        return false;
    }
    r->T = x->dims[r->batch_major ? 1 : 0];
    r->B = x->dims[r->batch_major ? 0 : 1];
    r->I = x->dims[2];
    r->H = ir_attr_int(n, "hidden_size", rw->dims[2]);
    if (r->H != rw->dims[2] || r->H < 1 || r->H > INT64_MAX / r->ngates) {
        error(where, "hidden_size %lld must be R's last dim, %lld", (long long)r->H, (long long)rw->dims[2]);
        return false;
    }
    int64_t D = r->ndir, GH = r->ngates * r->H;
    if ( !has_dims(w, 3, D, GH, r->I) || !has_dims(rw, 3, D, GH, r->H)) {
        error(where, "W must be [%lld, %lld, %lld] and R [%lld, %lld, %lld]", (long long)D,
              (long long)GH, (long long)r->I, (long long)D, (long long)GH, (long long)r->H);
        return false;
    }
    Value *b = n->nin > 3 ? n->in[3] : NULL, *sl = n->nin > 4 ? n->in[4] : NULL;
    if (b && (!has_dims(b, 2, D, 2 * GH, 0) || b->dtype != x->dtype)) {
        error(where, "B must be [%lld, %lld]", (long long)D, (long long)(2 * GH));
        return false;
    }
    for (int i = 5; i < n->nin && i < 7; i++) {
        Value *s = n->in[i];
        int64_t d0 = r->batch_major ? r->B : D, d1 = r->batch_major ? D : r->B;
        if (s && (!has_dims(s, 3, d0, d1, r->H) || s->dtype != x->dtype)) {
            error(where, "initial state '%s' must be [%lld, %lld, %lld]", s->name, (long long)d0,
                  (long long)d1, (long long)r->H);
            return false;
        }
    }
    Value *pp = n->nin > 7 ? n->in[7] : NULL;
    if (pp && (!has_dims(pp, 2, D, 3 * r->H, 0) || pp->dtype != x->dtype)) {
        error(where, "P must be [%lld, %lld]", (long long)D, (long long)(3 * r->H));
        return false;
    }
    if (sl) {
        if (sl->rank != 1 || sl->dims[0] != r->B ||
            (sl->dtype != DT_INT32 && sl->dtype != DT_INT64)) {
            error(where, "sequence_lens must be an integer tensor of shape [%lld]",
                  (long long)r->B);
            return false;
        }
        if (!sl->data) {
            error(where, "sequence_lens must be a compile-time constant (see --bind)");
            return false;
        }
        for (int64_t i = 0; i < r->B; i++)
            if (ir_const_int(sl, i) < 0 || ir_const_int(sl, i) > r->T) {
                error(where, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)i,
                      (long long)ir_const_int(sl, i), (long long)r->T);
                return false;
            }
    }
    Attr *clip = ir_attr(n, "clip");
    r->has_clip = clip != NULL;
    r->clip = clip ? clip->f : 0;
    r->lbr = ir_attr_int(n, "linear_before_reset", 0) != 0;
    r->input_forget = ir_attr_int(n, "input_forget", 0) != 0;
    return rnn_acts(where, n, r);
}

void infer_rnn(Graph *g, Node *n) {
    Rnn r;
    if (!rnn_parse(g, n, &r)) return;
    DType t = n->in[0]->dtype;
    int64_t D = r.ndir;
    int64_t y[4] = {r.T, D, r.B, r.H}, yb[4] = {r.B, r.T, D, r.H};
    int64_t s[3] = {D, r.B, r.H}, sb[3] = {r.B, D, r.H};
    if (n->nout > 0 && n->out[0]) ir_set_shape(n->out[0], t, 4, r.batch_major ? yb : y);
    for (int i = 1; i < n->nout; i++)
        if (n->out[i]) ir_set_shape(n->out[i], t, 3, r.batch_major ? sb : s);
}

/* ---- lowering ---- */

/* W or R [D, rows, cols] as [D, cols, rows]: re-laid out at compile time when constant (as in
 * exported models), else by a copy kernel before the recurrence. */
static Buf *transposed(Lower *L, Node *n, Buf *w) {
    Program *p = L->p;
    int64_t td[3] = {w->dims[0], w->dims[2], w->dims[1]};
    static const PackDim swap[3] = {{0, 0, false}, {2, 0, false}, {1, 0, false}};
    if (w->kind == B_CONST && w->data && !w->alias)
        return pack_const(p, w, arena_printf(p->arena, "%s_t", w->name), 3, swap);
    Buf *t = kir_buf_new(p, arena_printf(p->arena, "%s_t", w->name), w->dtype, 3, td, B_TEMP);
    int v[3];
    Expr *idx[3];
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(w), t, v, idx);
    Expr *wi[3] = {idx[0], idx[2], idx[1]};
    k->body = lower_wrap(p, 3, td, v, ks_store(p, t, idx, kx_load(p, w, wi)));
    return t;
}

/* The input projection xw [D, T, B, gates*hidden] for every direction and step (header
 * comment); Rb is added to the rows below nrb. */
static Buf *project(Lower *L, Node *n, const Rnn *r, Buf *x, Buf *wt, Buf *bias, int64_t nrb) {
    Program *p = L->p;
    DType t = x->dtype;
    int64_t GH = r->ngates * r->H, dims[4] = {r->ndir, r->T, r->B, GH};
    Kernel *k = lower_kernel(L, n, KC_CONTRACTION, KINS(x, wt, bias), NULL, NULL, NULL);
    Buf *xw = kir_buf_new(p, arena_printf(p->arena, "%s.xw", k->name), t, 4, dims, B_TEMP);
    kir_param(p, k, xw, KP_OUT);
    int dv = kir_var(k), tv = kir_var(k), bv = kir_var(k);
    Expr *d = kx_var(p, dv), *tt = kx_var(p, tv), *b = kx_var(p, bv);
    Stmt *rows = NULL;
    const int64_t lo[2] = {0, nrb}, hi[2] = {nrb, GH};
    for (int s = 0; s < 2; s++) {
        if (lo[s] == hi[s]) continue;
        int rv = kir_var(k), iv = kir_var(k), acc = kir_scalar(p, k, t);
        Expr *row = kx_var(p, rv), *i = kx_var(p, iv);
        Expr *init = kx_const(p, t, 0);
        if (bias) {
            init = kx_load(p, bias, (Expr *[]){d, row});
            if (s == 0)
                init = kx_bin(p, K_ADD, init, kx_load(p, bias, (Expr *[]){d, kx_addc(p, row, GH)}));
        }
        Expr *xv = kx_load(p, x, r->batch_major ? (Expr *[]){b, tt, i} : (Expr *[]){tt, b, i});
        Expr *prod = kx_bin(p, K_MUL, xv, kx_load(p, wt, (Expr *[]){d, i, row}));
        Stmt *body = ks_set(p, acc, init);
        Expr *sum = kx_bin(p, K_ADD, kx_scalar(p, k, acc), prod);
        ks_seq(body, ks_red_loop(p, iv, r->I, ks_set(p, acc, sum)));
        ks_seq(body, ks_store(p, xw, (Expr *[]){d, tt, b, row}, kx_scalar(p, k, acc)));
        rows = ks_seq(rows, ks_loop(p, rv, lo[s], hi[s], 1, body));
    }
    Stmt *bl = ks_loop(p, bv, 0, r->B, 1, rows);
    k->body = ks_loop(p, dv, 0, r->ndir, 1, ks_loop(p, tv, 0, r->T, 1, bl));
    return xw;
}

/* One direction's recurrent kernel under construction. */
typedef struct Cell {
    Program *p;
    Kernel *k;
    const Rnn *r;
    Op op;
    int d;                          /* direction index in xw, R, B, P, Y, Y_h */
    bool reverse;                   /* this kernel runs t = T-1 .. 0 */
    DType t;
    Buf *xw, *rt;                   /* the input projection; R transposed [D, H, gates*H] */
    int64_t pw;                     /* > 0: rt is R in panels [D, gates*H/pw, H, pw] */
    Buf *bias, *sl, *h0, *c0, *peep;    /* inputs, NULL when absent or unused */
    Buf *y, *yh, *yc;               /* outputs, NULL when absent */
    Buf *hs, *cs, *gs, *rh;         /* KP_INOUT scratch (see the header comment) */
    int svar;                       /* the time loop's variable: step s, t = s or T-1-s */
    Buf *counter;                   /* stepped form: the step s, the region's counter */
    bool xw_late;                   /* stepped GRU with linear_before_reset: xw added in step 3 */
    int bv, jv;                     /* step 3's loop variables: batch row b, hidden unit j */
} Cell;

static Expr *fc(Cell *c, double v) { return kx_const(c->p, c->t, v); }
static Expr *rd(Cell *c, int reg) { return kx_scalar(c->p, c->k, reg); }
static Expr *add(Cell *c, Expr *a, Expr *b) { return kx_bin(c->p, K_ADD, a, b); }
static Expr *mul(Cell *c, Expr *a, Expr *b) { return kx_bin(c->p, K_MUL, a, b); }
static Expr *var(Cell *c, int v) { return kx_var(c->p, v); }

static Expr *ld2(Cell *c, Buf *b, Expr *i0, Expr *i1) {
    Expr *idx[2] = {i0, i1};
    return kx_load(c->p, b, idx);
}

static Stmt *st2(Cell *c, Buf *b, Expr *i0, Expr *i1, Expr *v) {
    Expr *idx[2] = {i0, i1};
    return ks_store(c->p, b, idx, v);
}

static Expr *time_idx(Cell *c) {
    Expr *s = c->counter ? kx_cast(c->p, DT_INDEX, rule_load_first(c->p, c->k, c->counter)) : var(c, c->svar);
    return c->reverse ? kx_addc(c->p, kx_mul(c->p, s, -1), c->r->T - 1) : s;
}

/* xw[d, t, b, j] at this step. */
static Expr *ld_xw(Cell *c, Expr *b, Expr *j) {
    Expr *idx[4] = {kx_index(c->p, c->d), time_idx(c), b, j};
    return kx_load(c->p, c->xw, idx);
}

/* Index of a state-shaped tensor (initial_h/c, Y_h, Y_c) at direction d, batch b, unit j. */
static void state_idx(Cell *c, Expr *b, Expr *j, Expr **idx) {
    Expr *d = kx_index(c->p, c->d);
    idx[0] = c->r->batch_major ? b : d;
    idx[1] = c->r->batch_major ? d : b;
    idx[2] = j;
}

static Stmt *loop(Cell *c, int v, int64_t lo, int64_t hi, Stmt *body) {
    return ks_loop(c->p, v, lo, hi, 1, body);
}

/* for b < B, j < H: body(b, j), the variables given to `body` through bv, jv. */
static Stmt *units(Cell *c, int bv, int jv, Stmt *body) {
    return loop(c, bv, 0, c->r->B, loop(c, jv, 0, c->r->H, body));
}

static Expr *clip(Cell *c, Expr *x) {
    if (!c->r->has_clip) return x;
    x = kx_bin(c->p, K_MAX, x, fc(c, -c->r->clip));
    return kx_bin(c->p, K_MIN, x, fc(c, c->r->clip));
}

/* Activation i of this direction applied to register `reg`, which holds the (clipped) input:
 * reads of a register rather than one shared tree, since expressions are trees. */
static Expr *act(Cell *c, int i, int reg) {
    const Act *a = &c->r->act[c->d][i];
    Program *p = c->p;
    Expr *zero = fc(c, 0);
    switch (a->kind) {
    case ACT_RELU: return kx_bin(p, K_MAX, rd(c, reg), zero);
    case ACT_TANH: return kx_un(p, K_TANH, rd(c, reg));
    case ACT_SIGMOID: return kx_un(p, K_SIGMOID, rd(c, reg));
    case ACT_AFFINE: return add(c, mul(c, fc(c, a->alpha), rd(c, reg)), fc(c, a->beta));
    case ACT_LEAKYRELU:
        return kx_select(p, kx_bin(p, K_LT, rd(c, reg), zero), mul(c, fc(c, a->alpha), rd(c, reg)),
                         rd(c, reg));
    case ACT_THRESHOLDEDRELU:
        return kx_select(p, kx_bin(p, K_GT, rd(c, reg), fc(c, a->alpha)), rd(c, reg), zero);
    case ACT_SCALEDTANH:
        return mul(c, fc(c, a->alpha), kx_un(p, K_TANH, mul(c, fc(c, a->beta), rd(c, reg))));
    case ACT_HARDSIGMOID: {
        Expr *v = add(c, mul(c, fc(c, a->alpha), rd(c, reg)), fc(c, a->beta));
        return kx_bin(p, K_MAX, kx_bin(p, K_MIN, v, fc(c, 1)), zero);
    }
    case ACT_ELU: {
        Expr *e = mul(c, fc(c, a->alpha), kx_bin(p, K_SUB, kx_un(p, K_EXP, rd(c, reg)), fc(c, 1)));
        return kx_select(p, kx_bin(p, K_LT, rd(c, reg), zero), e, rd(c, reg));
    }
    case ACT_SOFTSIGN:
        return kx_bin(p, K_DIV, rd(c, reg), add(c, fc(c, 1), kx_un(p, K_ABS, rd(c, reg))));
    case ACT_SOFTPLUS: return kx_un(p, K_LOG, add(c, kx_un(p, K_EXP, rd(c, reg)), fc(c, 1)));
    }
    die("rnn: activation %d", a->kind);
}

/* reg = act_i(clip(pre)) as two statements. */
static Stmt *set_act(Cell *c, int i, int reg, Expr *pre) {
    Stmt *s = ks_set(c->p, reg, clip(c, pre));
    return ks_seq(s, ks_set(c->p, reg, act(c, i, reg)));
}

static int new_reg(Cell *c) { return kir_scalar(c->p, c->k, c->t); }

/* Steps 1 and 2's matrix-vector products, for every batch row b and j < n:
 *     out[b, off + j] = init + v[b, :] . R[d, roff + j, :]
 * with init = xw[d, t, b, roff + j] (from_xw) or Rb[d, roff + j] (GRU's linear_before_reset)
 * and off = roff unless out is rh. With R in panels (pw > 0; roff and n are multiples of H, so
 * of pw) j is split into the panel jb and the column jj in it. */
static Stmt *matvec(Cell *c, Buf *out, Buf *v, int64_t roff, int64_t n, bool from_xw) {
    Program *p = c->p;
    int bv = kir_var(c->k), jv = kir_var(c->k), kv = kir_var(c->k), acc = new_reg(c);
    int pv = c->pw ? kir_var(c->k) : -1;    /* panels: j = jb * pw + jj (jv = jb, pv = jj) */
    Expr *j = c->pw ? kx_add(p, kx_mul(p, var(c, jv), c->pw), var(c, pv)) : var(c, jv);
    Expr *b = var(c, bv), *row = kx_addc(p, j, roff), *k = var(c, kv);
    int64_t GH = c->r->ngates * c->r->H;
    Expr *d = kx_index(p, c->d);
    Expr *init = from_xw ? ld_xw(c, b, row)
               : c->bias ? ld2(c, c->bias, d, kx_addc(p, row, GH))
                         : fc(c, 0);
    Expr *rt = c->pw ? kx_load(p, c->rt, (Expr *[]){d, kx_addc(p, var(c, jv), roff / c->pw), k,
                                                    var(c, pv)})
                     : kx_load(p, c->rt, (Expr *[]){d, k, row});
    Stmt *body = ks_set(p, acc, init);
    Expr *sum = add(c, rd(c, acc), mul(c, ld2(c, v, b, k), rt));
    ks_seq(body, ks_red_loop(p, kv, c->r->H, ks_set(p, acc, sum)));
    ks_seq(body, st2(c, out, b, out == c->rh ? j : row, rd(c, acc)));
    if (c->pw) body = loop(c, pv, 0, c->pw, body);
    return loop(c, bv, 0, c->r->B, loop(c, jv, 0, c->pw ? n / c->pw : n, body));
}

/* Step 2 (GRU without linear_before_reset), first half: rh[b, k] = f(gs[b, H + k]) * H[b, k]. */
static Stmt *gru_reset(Cell *c) {
    Program *p = c->p;
    int bv = kir_var(c->k), kv = kir_var(c->k), g = new_reg(c);
    Expr *b = var(c, bv), *k = var(c, kv);
    Stmt *body = set_act(c, 0, g, ld2(c, c->gs, b, kx_addc(p, k, c->r->H)));
    ks_seq(body, st2(c, c->rh, b, k, mul(c, rd(c, g), ld2(c, c->hs, b, k))));
    return units(c, bv, kv, body);
}

static Expr *ub(Cell *c) { return var(c, c->bv); }
static Expr *uj(Cell *c) { return var(c, c->jv); }

/* Step 3: the new state of unit (b, j) into register hn (and cn), by cell type. */
static Stmt *cell_update(Cell *c, int hn, int cn) {
    Program *p = c->p;
    int64_t H = c->r->H;
#define GS(off) ld2(c, c->gs, ub(c), kx_addc(p, uj(c), (off)))
    if (c->op == OP_RNN) return set_act(c, 0, hn, GS(0));
    if (c->op == OP_GRU) {
        int z = new_reg(c), hh = new_reg(c);
        /* stepped: the gates' input parts are added here; Rbh . H[t-1] + Rbh is gs's third */
#define GX(off) (c->xw_late ? add(c, ld_xw(c, ub(c), kx_addc(p, uj(c), (off))), GS(off)) : GS(off))
        Stmt *s = set_act(c, 0, z, GX(0));
        if (c->r->lbr) {
            int rr = new_reg(c);
            ks_seq(s, set_act(c, 0, rr, GX(H)));
            Expr *rec = mul(c, rd(c, rr), c->xw_late ? GS(2 * H) : ld2(c, c->rh, ub(c), uj(c)));
#undef GX
            ks_seq(s, set_act(c, 1, hh, add(c, ld_xw(c, ub(c), kx_addc(p, uj(c), 2 * H)), rec)));
        } else {
            ks_seq(s, set_act(c, 1, hh, GS(2 * H)));
        }
        Expr *keep = mul(c, rd(c, z), ld2(c, c->hs, ub(c), uj(c)));
        Expr *nw = mul(c, kx_bin(p, K_SUB, fc(c, 1), rd(c, z)), rd(c, hh));
        return ks_seq(s, ks_set(p, hn, add(c, nw, keep)));
    }
    /* LSTM, gates i o f c; peepholes P = [Pi Po Pf] act on C[t-1] (i, f) and C[t] (o). */
    int cp = new_reg(c), ig = new_reg(c), fg = new_reg(c), cg = new_reg(c), og = new_reg(c);
#define PEEP(pre, off, reg)                                                                 \
    (c->peep ? add(c, pre, mul(c, ld2(c, c->peep, kx_index(p, c->d), kx_addc(p, uj(c), (off))), \
                               rd(c, reg)))                                                    \
             : pre)
    Stmt *s = ks_set(p, cp, ld2(c, c->cs, ub(c), uj(c)));
    ks_seq(s, set_act(c, 0, ig, PEEP(GS(0), 0, cp)));
    if (c->r->input_forget) ks_seq(s, ks_set(p, fg, kx_bin(p, K_SUB, fc(c, 1), rd(c, ig))));
    else ks_seq(s, set_act(c, 0, fg, PEEP(GS(2 * H), 2 * H, cp)));
    ks_seq(s, set_act(c, 1, cg, GS(3 * H)));
    ks_seq(s, ks_set(p, cn, add(c, mul(c, rd(c, fg), rd(c, cp)), mul(c, rd(c, ig), rd(c, cg)))));
    ks_seq(s, set_act(c, 0, og, PEEP(GS(H), H, cn)));
    ks_seq(s, set_act(c, 2, hn, rd(c, cn)));
    return ks_seq(s, ks_set(p, hn, mul(c, rd(c, og), rd(c, hn))));
#undef PEEP
#undef GS
}

static Stmt *store_y(Cell *c, Expr *v) {
    Program *p = c->p;
    Expr *d = kx_index(p, c->d), *t = time_idx(c), *b = ub(c), *j = uj(c);
    Expr *idx[4] = {t, d, b, j}, *idxb[4] = {b, t, d, j};
    return ks_store(p, c->y, c->r->batch_major ? idxb : idx, v);
}

/* Step 3 over all units; a batch row past its sequence_lens keeps its state and gets zeros
 * in Y. The guard is outside the loop over units, which thus only stores. */
static Stmt *update(Cell *c) {
    Program *p = c->p;
    c->bv = kir_var(c->k);
    c->jv = kir_var(c->k);
    int hn = new_reg(c), cn = c->op == OP_LSTM ? new_reg(c) : -1;
    Stmt *body = cell_update(c, hn, cn);
    ks_seq(body, st2(c, c->hs, ub(c), uj(c), rd(c, hn)));
    if (cn >= 0) ks_seq(body, st2(c, c->cs, ub(c), uj(c), rd(c, cn)));
    if (c->y) ks_seq(body, store_y(c, rd(c, hn)));
    Stmt *st = loop(c, c->jv, 0, c->r->H, body);
    if (c->sl) {
        Expr *len = kx_cast(p, DT_INDEX, kx_load(p, c->sl, (Expr *[]){ub(c)}));
        Stmt *els = c->y ? loop(c, c->jv, 0, c->r->H, store_y(c, fc(c, 0))) : NULL;
        st = ks_if(p, kx_bin(p, K_LT, time_idx(c), len), st, els);
    }
    return loop(c, c->bv, 0, c->r->B, st);
}

/* Before the time loop: the states from initial_h / initial_c or zero. */
static Stmt *init_state(Cell *c, Buf *state, Buf *init) {
    int bv = kir_var(c->k), jv = kir_var(c->k);
    Expr *v = fc(c, 0);
    if (init) {
        Expr *idx[3];
        state_idx(c, var(c, bv), var(c, jv), idx);
        v = kx_load(c->p, init, idx);
    }
    return units(c, bv, jv, st2(c, state, var(c, bv), var(c, jv), v));
}

/* After the time loop: Y_h / Y_c from the states. */
static Stmt *final_state(Cell *c, Buf *out, Buf *state) {
    int bv = kir_var(c->k), jv = kir_var(c->k);
    Expr *idx[3];
    state_idx(c, var(c, bv), var(c, jv), idx);
    return units(c, bv, jv, ks_store(c->p, out, idx, ld2(c, state, var(c, bv), var(c, jv))));
}

/* A scratch buffer [batch, cols] named after the kernel c->k. */
static Buf *scratch_buf(Cell *c, const char *what, int64_t cols) {
    int64_t dims[2] = {c->r->B, cols};
    return kir_buf_new(c->p, arena_printf(c->p->arena, "%s.%s", c->k->name, what), c->t, 2, dims, B_TEMP);
}

/* The same, a KP_INOUT parameter of c->k (the one-kernel form). */
static Buf *scratch(Cell *c, const char *what, int64_t cols) {
    Buf *b = scratch_buf(c, what, cols);
    kir_param(c->p, c->k, b, KP_INOUT);
    return b;
}

static void lower_direction(Lower *L, Node *n, const Rnn *r, Cell *c) {
    Program *p = L->p;
    Buf *ins[] = {c->xw, c->rt, c->bias, c->sl, c->h0, c->c0, c->peep};
    /* KC_CONTRACTION: the schedule vectorises the products' loops over j */
    c->k = lower_kernel(L, n, KC_CONTRACTION, COUNTOF(ins), ins, NULL, NULL, NULL);
    ParamMode om = r->ndir == 2 ? KP_INOUT : KP_OUT;   /* two kernels write halves */
    Buf *outs[] = {c->y, c->yh, c->yc};
    for (int i = 0; i < COUNTOF(outs); i++)
        if (outs[i]) kir_param(p, c->k, outs[i], om);
    int64_t H = r->H;
    c->hs = scratch(c, "h", H);
    c->cs = n->op == OP_LSTM ? scratch(c, "c", H) : NULL;
    c->gs = scratch(c, "gates", r->ngates * H);
    c->rh = n->op == OP_GRU ? scratch(c, "rh", H) : NULL;

    Stmt *body = init_state(c, c->hs, c->h0);
    if (c->cs) ks_seq(body, init_state(c, c->cs, c->c0));
    c->svar = kir_var(c->k);
    Stmt *step;
    if (n->op != OP_GRU) {
        step = matvec(c, c->gs, c->hs, 0, r->ngates * H, true);
    } else if (r->lbr) {
        step = matvec(c, c->gs, c->hs, 0, 2 * H, true);
        ks_seq(step, matvec(c, c->rh, c->hs, 2 * H, H, false));
    } else {
        step = matvec(c, c->gs, c->hs, 0, 2 * H, true);
        ks_seq(step, gru_reset(c));
        ks_seq(step, matvec(c, c->gs, c->rh, 2 * H, H, true));
    }
    ks_seq(step, update(c));
    ks_seq(body, loop(c, c->svar, 0, r->T, step));
    if (c->yh) ks_seq(body, final_state(c, c->yh, c->hs));
    if (c->yc) ks_seq(body, final_state(c, c->yc, c->cs));
    c->k->body = body;
}

/* ---- the stepped form ----
 * The kernel above runs its steps inside one function, so that only one thread can run them.
 * Where the recurrent weights are large enough for a step's product to be worth cutting into
 * tasks (parallelize.c; STEP_BYTES), each direction is instead a loop region of the kernel IR
 * (kir.h, KCTL_LOOP) whose counter is the step s:
 *     init:   hs (cs) = initial_h (initial_c) or 0
 *     loop s < T:
 *         product: gs[b, j] = xw[d, t, b, j] + H[b, :] . R[d, j, :]   (a contraction)
 *         update:  step 3 of the header comment, reading t from the counter
 *     final:  Y_h (Y_c) from hs (cs)
 * so that the product is a kernel of its own, which parallelize can split over the gate rows
 * while the update (a few hundred units) runs whole between two parallel-fors. GRU with
 * linear_before_reset takes one product over all three gates, gs[b, j] = Rb[d, j] + H[b, :] .
 * R[d, j, :], its input parts (the projection then adding Wb only) added in the update; GRU
 * without it needs the reset gate between two products: a product over the update and reset
 * gates, a kernel rh = r * H, a product over the candidate gate reading rh, then the update. */
enum { STEP_BYTES = 1 << 17 };      /* R of a direction, 128 KB: a GRU of 105 units, an LSTM of 91 */

static bool stepped(const Lower *L, const Node *n, const Rnn *r, const Buf *rw) {
    if (L->p->vector_bytes < 16) return false;     /* a microcontroller: no threads */
    int64_t bytes = r->ngates * r->H * r->H * (int64_t)dtype_size(rw->dtype);
    return bytes >= STEP_BYTES || L->p->split_all;
}

/* A kernel of the stepped form reading `ins`, made c->k (where the Cell's helpers add their
 * loop variables and registers). */
static Kernel *step_kernel(Lower *L, Node *n, Cell *c, KernelClass kc, int nin, Buf *const *ins) {
    c->k = lower_kernel(L, n, kc, nin, ins, NULL, NULL, NULL);
    return c->k;
}

static void lower_stepped(Lower *L, Node *n, const Rnn *r, Cell *c) {
    Program *p = L->p;
    Arena *a = p->arena;
    ParamMode om = r->ndir == 2 ? KP_INOUT : KP_OUT;   /* two directions write halves */
    int64_t GH = r->ngates * r->H;
    bool gru = n->op == OP_GRU, lbr = gru && r->lbr;

    Kernel *k = step_kernel(L, n, c, KC_GENERIC, KINS(c->h0, c->c0));
    c->hs = scratch_buf(c, "h", r->H);
    c->cs = n->op == OP_LSTM ? scratch_buf(c, "c", r->H) : NULL;
    c->gs = scratch_buf(c, "gates", GH);
    c->rh = gru && !lbr ? scratch_buf(c, "rh", r->H) : NULL;
    kir_param(p, k, c->hs, KP_INOUT);
    Stmt *body = init_state(c, c->hs, c->h0);
    if (c->cs) {
        kir_param(p, k, c->cs, KP_INOUT);
        ks_seq(body, init_state(c, c->cs, c->c0));
    }
    k->body = body;

    Buf *step = kir_buf_new(p, arena_printf(a, "%s.step", k->name), DT_INT64, 0, NULL, B_TEMP);
    kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_steps", k->name)), KCTL_LOOP, step, NULL, r->T, NULL, -1);
    c->counter = step;

    c->xw_late = lbr;
    int64_t rows = gru && !lbr ? 2 * r->H : GH;     /* the first product's gate rows */
    k = step_kernel(L, n, c, KC_CONTRACTION, KINS(lbr ? NULL : c->xw, c->rt, c->hs, lbr ? c->bias : NULL));
    kir_param(p, k, c->gs, KP_INOUT);
    k->body = matvec(c, c->gs, c->hs, 0, rows, !lbr);
    if (rows < GH) {                /* GRU: rh = r * H, then the candidate gate's product */
        k = step_kernel(L, n, c, KC_GENERIC, KINS(c->gs, c->hs));
        kir_param(p, k, c->rh, KP_INOUT);
        k->body = gru_reset(c);
        k = step_kernel(L, n, c, KC_CONTRACTION, KINS(c->xw, c->rt, c->rh));
        kir_param(p, k, c->gs, KP_INOUT);
        k->body = matvec(c, c->gs, c->rh, rows, GH - rows, true);
    }

    k = step_kernel(L, n, c, KC_GENERIC, KINS(c->gs, lbr ? c->xw : NULL, c->sl, c->peep));
    kir_param(p, k, c->hs, KP_INOUT);
    if (c->cs) kir_param(p, k, c->cs, KP_INOUT);
    if (c->y) kir_param(p, k, c->y, om);
    k->body = update(c);
    kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_end", k->name)), KCTL_END, NULL, NULL, -1, NULL, -1);
    c->counter = NULL;
    c->xw_late = false;

    if (!c->yh && !c->yc) return;
    k = step_kernel(L, n, c, KC_GENERIC, KINS(c->hs, c->cs));
    if (c->yh) kir_param(p, k, c->yh, om);
    if (c->yc) kir_param(p, k, c->yc, om);
    body = NULL;
    if (c->yh) body = final_state(c, c->yh, c->hs);
    if (c->yc) body = ks_seq(body, final_state(c, c->yc, c->cs));
    k->body = body;
}

void lower_rnn(Lower *L, Node *n) {
    Rnn r;
    if (!rnn_parse(NULL, n, &r)) die("lower_rnn %s: node not checked by infer_rnn", n->name);
    Cell c = {.p = L->p, .r = &r, .op = n->op, .t = n->in[0]->dtype};
    Buf *bias = lower_in(L, n, 3);
    /* GRU's candidate gate with linear_before_reset adds Rbh in the recurrence */
    Buf *rw = lower_in(L, n, 2);
    bool step = stepped(L, n, &r, rw);
    int64_t GH = r.ngates * r.H, nrb = n->op == OP_GRU && r.lbr ? step ? 0 : 2 * r.H : GH;
    c.xw = project(L, n, &r, lower_in(L, n, 0), transposed(L, n, lower_in(L, n, 1)), bias, nrb);
    /* Constant R with hidden a multiple of the vectors the schedule puts side by side (as in
     * matmul.c's panels): R in panels [D, gates*H/pw, H, pw], so that the product streams
     * each panel front to back, where R transposed is read pw columns a row, rows 4*GH
     * bytes apart (LSTM hidden 128: recurrence 159 -> 117 us). */
    int64_t pw = MIN(8 * L->p->vector_bytes / (int64_t)dtype_size(rw->dtype), 128);
    if (L->p->vector_bytes >= 16 && pw >= 4 && rw->kind == B_CONST && rw->data && !rw->alias &&
        r.H % pw == 0) {
        /* [D, GH, H] -> [D, GH/pw, H, pw] */
        PackDim pd[4] = {{0, 0, false}, {1, pw, false}, {2, 0, false}, {1, pw, true}};
        c.rt = pack_const(L->p, rw, arena_printf(L->p->arena, "%s_panels", rw->name), 4, pd);
        c.pw = pw;
    } else {
        c.rt = transposed(L, n, rw);
    }
    c.bias = nrb < GH ? bias : NULL;
    c.h0 = lower_in(L, n, 5);
    c.c0 = lower_in(L, n, 6);
    c.peep = lower_in(L, n, 7);
    /* Rows of full length need no guard; if all are, sequence_lens is not read at all. */
    Value *sl = n->nin > 4 ? n->in[4] : NULL;
    for (int64_t i = 0; sl && i < r.B; i++)
        if (ir_const_int(sl, i) < r.T) c.sl = lower_in(L, n, 4);
    for (int i = 0; i < 3; i++) {
        Buf *o = i < n->nout && n->out[i] ? lower_out(L, n, i) : NULL;
        if (i == 0) c.y = o;
        else if (i == 1) c.yh = o;
        else c.yc = o;
    }
    for (int d = 0; d < r.ndir; d++) {
        c.d = d;
        c.reverse = r.ndir == 2 ? d == 1 : r.reverse;
        if (step) lower_stepped(L, n, &r, &c);
        else lower_direction(L, n, &r, &c);
    }
}
