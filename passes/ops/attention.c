/* attention.c - the transformer family of opsets 23 to 25: RotaryEmbedding and Attention.
 *
 * RotaryEmbedding rotates pairs of elements of each head by the angle of the token's position:
 * (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2), the pairs being the two halves of the first
 * rotary_embedding_dim elements of a head or, interleaved, elements 2j and 2j + 1; the rest of
 * the head is copied. One kernel, its head loop split into those ranges so that every output
 * element is stored once and no load leaves its row.
 *
 * Attention is one kernel per (batch, query head, query position) row, in three passes over
 * the keys: the scores into a row of scratch with their maximum, their exponentials and sum,
 * then each output element as the probability-weighted sum of the values. Before it, copy
 * kernels build the present key and value (past then new, along the sequence) when there is
 * a past or they are outputs; the row kernel then reads them. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* ---- RotaryEmbedding ---- */

/* The geometry of a RotaryEmbedding node: X is [B, H, S, D] (4-D) or [B, S, H * D] (3-D,
 * num_heads H); rd elements of each head rotate. */
typedef struct Rope {
    bool three;                     /* X is 3-D */
    int64_t b, h, s, d, rd;
} Rope;

static bool rope_params(Graph *g, Node *n, Rope *r) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *x = n->in[0], *cs = n->in[1], *sn = n->in[2], *pos = n->nin > 3 ? n->in[3] : NULL;
    if (x->rank != 3 && x->rank != 4) {
        error(where, "X must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], not rank %d", x->rank);
        return false;
    }
    r->three = x->rank == 3;
    r->b = x->dims[0];
    if (r->three) {
        r->h = ir_attr_int(n, "num_heads", 0);
        r->s = x->dims[1];
        if (r->h < 1 || x->dims[2] % r->h) {
            error(where, "num_heads %lld must be given and divide the hidden size %lld of a 3-D X",
                  (long long)r->h, (long long)x->dims[2]);
            return false;
        }
        r->d = x->dims[2] / r->h;
    } else {
        r->h = x->dims[1];
        r->s = x->dims[2];
        r->d = x->dims[3];
    }
    r->rd = ir_attr_int(n, "rotary_embedding_dim", 0);
    if (!r->rd) r->rd = r->d;
    if (r->rd < 0 || r->rd > r->d || r->rd % 2) {
        error(where, "rotary_embedding_dim %lld must be even and at most the head size %lld",
              (long long)r->rd, (long long)r->d);
        return false;
    }
    if (!dtype_is_float(x->dtype) || cs->dtype != x->dtype || sn->dtype != x->dtype) {
        error(where, "X, cos_cache and sin_cache must be of one float type");
        return false;
    }
    if (!ir_same_shape(cs, sn)) {
        error(where, "cos_cache and sin_cache must have the same shape");
        return false;
    }
    bool ok = pos ? cs->rank == 2 && cs->dims[1] == r->rd / 2 && pos->dtype == DT_INT64 &&
                    pos->rank == 2 && pos->dims[0] == r->b && pos->dims[1] == r->s
                  : cs->rank == 3 && cs->dims[0] == r->b && cs->dims[1] == r->s && cs->dims[2] == r->rd / 2;
    if (!ok || (pos && cs->dims[0] < 1)) {
        error(where, "the caches must be [positions, %lld] with int64 position_ids [%lld, %lld], "
              "or [%lld, %lld, %lld] without", (long long)(r->rd / 2), (long long)r->b,
              (long long)r->s, (long long)r->b, (long long)r->s, (long long)(r->rd / 2));
        return false;
    }
    return true;
}

void infer_rotary(Graph *g, Node *n) {
    Rope r;
    if (!rope_params(g, n, &r)) return;
    ir_set_shape(n->out[0], n->in[0]->dtype, n->in[0]->rank, n->in[0]->dims);
}

/* The index of head element `e` of X/Y at batch b, head h, position s. */
static void rope_idx(Program *p, const Rope *r, Expr *b, Expr *h, Expr *s, Expr *e, Expr **idx) {
    idx[0] = kx_clone(p, b);
    if (r->three) {
        idx[1] = kx_clone(p, s);
        idx[2] = kx_add(p, kx_mul(p, kx_clone(p, h), r->d), e);
    } else {
        idx[1] = kx_clone(p, h);
        idx[2] = kx_clone(p, s);
        idx[3] = e;
    }
}

/* for b, h, s: the cache row (position_ids[b, s] clamped into the cache, or [b, s]), then
 *   pairs j < rd/2: (x1, x2) at (j, j + rd/2), or (2j, 2j + 1) interleaved:
 *     y1 = cos[row, j] x1 - sin[row, j] x2;  y2 = sin[row, j] x1 + cos[row, j] x2
 *   the elements from rd on copied. */
void lower_rotary(Lower *L, Node *n) {
    Program *p = L->p;
    Rope r;
    if (!rope_params(NULL, n, &r)) die("lower_rotary %s: unchecked", n->name);
    Buf *x = lower_in(L, n, 0), *cs = lower_in(L, n, 1), *sn = lower_in(L, n, 2);
    Buf *pos = lower_in(L, n, 3), *y = lower_out(L, n, 0);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x, cs, sn, pos), y, NULL, NULL);
    DType t = y->dtype;
    int vb = kir_var(k), vh = kir_var(k), vs = kir_var(k), vj = kir_var(k), ve = kir_var(k);
    Expr *b = kx_var(p, vb), *h = kx_var(p, vh), *s = kx_var(p, vs), *j = kx_var(p, vj);
    Expr *ci[3];
    int nci = 0;
    if (pos) {
        Expr *pi[2] = {kx_clone(p, b), kx_clone(p, s)};
        Expr *row = kx_cast(p, DT_INDEX, kx_load(p, pos, pi));
        row = kx_bin(p, K_MIN, kx_bin(p, K_MAX, row, kx_index(p, 0)), kx_index(p, cs->dims[0] - 1));
        ci[nci++] = row;
    } else {
        ci[nci++] = kx_clone(p, b);
        ci[nci++] = kx_clone(p, s);
    }
    ci[nci++] = kx_clone(p, j);
    Expr *c = kx_load(p, cs, ci), *sv = kx_load(p, sn, ci);
    bool inter = ir_attr_int(n, "interleaved", 0) != 0;
    int64_t half = r.rd / 2;
    Expr *e1 = inter ? kx_mul(p, kx_clone(p, j), 2) : kx_clone(p, j);
    Expr *e2 = inter ? kx_addc(p, kx_mul(p, kx_clone(p, j), 2), 1) : kx_addc(p, kx_clone(p, j), half);
    Expr *i1[4], *i2[4], *o1[4], *o2[4];
    rope_idx(p, &r, b, h, s, e1, i1);
    rope_idx(p, &r, b, h, s, e2, i2);
    rope_idx(p, &r, b, h, s, kx_clone(p, e1), o1);
    rope_idx(p, &r, b, h, s, kx_clone(p, e2), o2);
    Expr *x1 = kx_load(p, x, i1), *x2 = kx_load(p, x, i2);
    Expr *y1 = kx_bin(p, K_SUB, kx_bin(p, K_MUL, c, x1), kx_bin(p, K_MUL, sv, x2));
    Expr *y2 = kx_bin(p, K_ADD, kx_bin(p, K_MUL, kx_clone(p, sv), kx_clone(p, x1)),
                      kx_bin(p, K_MUL, kx_clone(p, c), kx_clone(p, x2)));
    (void)t;
    Stmt *pairs = ks_loop(p, vj, 0, half, 1, ks_seq(ks_store(p, y, o1, y1), ks_store(p, y, o2, y2)));
    Stmt *body = pairs;
    if (r.rd < r.d) {
        Expr *ic[4], *oc[4];
        rope_idx(p, &r, b, h, s, kx_var(p, ve), ic);
        rope_idx(p, &r, b, h, s, kx_var(p, ve), oc);
        ks_seq(body, ks_loop(p, ve, r.rd, r.d, 1, ks_store(p, y, oc, kx_load(p, x, ic))));
    }
    body = ks_loop(p, vs, 0, r.s, 1, body);
    body = ks_loop(p, vh, 0, r.h, 1, body);
    k->body = ks_loop(p, vb, 0, r.b, 1, body);
}

/* ---- Attention ---- */

/* The geometry of an Attention node: Q [B, Hq, S, dk] or [B, S, Hq * dk], K [B, Hkv, L, dk]
 * and V [B, Hkv, L, dv] or 3-D likewise; P past positions, T = P + L keys in all. */
typedef struct Attn {
    bool three;
    int64_t b, hq, hkv, s, l, p, t, dk, dv;
} Attn;

static bool attn_params(Graph *g, Node *n, Attn *a) {
    const char *where = g ? ir_where(g, n) : n->name;
    Value *q = n->in[0], *k = n->in[1], *v = n->in[2];
    Value *mask = rule_opt_in(n, 3), *pk = rule_opt_in(n, 4), *pv = rule_opt_in(n, 5);
    Value *nonpad = rule_opt_in(n, 6);
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4)) {
        error(where, "Q, K and V must all be 3-D or all 4-D");
        return false;
    }
    if (!dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype) {
        error(where, "Q, K and V must be of one float type");
        return false;
    }
    a->three = q->rank == 3;
    a->b = q->dims[0];
    if (a->three) {
        a->hq = ir_attr_int(n, "q_num_heads", 0);
        a->hkv = ir_attr_int(n, "kv_num_heads", 0);
        if (a->hq < 1 || a->hkv < 1 || q->dims[2] % a->hq || k->dims[2] % a->hkv || v->dims[2] % a->hkv) {
            error(where, "3-D inputs need q_num_heads and kv_num_heads that divide their hidden sizes");
            return false;
        }
        a->s = q->dims[1];
        a->l = k->dims[1];
        a->dk = q->dims[2] / a->hq;
        a->dv = v->dims[2] / a->hkv;
        if (k->dims[2] / a->hkv != a->dk || v->dims[1] != a->l) {
            error(where, "K does not match Q's head size or V K's sequence");
            return false;
        }
    } else {
        a->hq = q->dims[1];
        a->hkv = k->dims[1];
        a->s = q->dims[2];
        a->l = k->dims[2];
        a->dk = q->dims[3];
        a->dv = v->dims[3];
        if (k->dims[3] != a->dk || v->dims[1] != a->hkv || v->dims[2] != a->l) {
            error(where, "K [B, Hkv, L, %lld] and V [B, Hkv, L, dv] do not fit Q", (long long)a->dk);
            return false;
        }
    }
    if (k->dims[0] != a->b || v->dims[0] != a->b || a->hq % a->hkv) {
        error(where, "the batches differ or %lld query heads are no multiple of %lld key/value heads",
              (long long)a->hq, (long long)a->hkv);
        return false;
    }
    a->p = 0;
    if (!!pk != !!pv) {
        error(where, "past_key and past_value go together");
        return false;
    }
    if (pk) {
        a->p = pk->dims[2];
        if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != a->b || pk->dims[1] != a->hkv ||
            pk->dims[3] != a->dk || pv->dims[0] != a->b || pv->dims[1] != a->hkv ||
            pv->dims[2] != a->p || pv->dims[3] != a->dv || pk->dtype != q->dtype || pv->dtype != q->dtype) {
            error(where, "past_key/past_value must be [%lld, %lld, P, %lld/%lld] of Q's type",
                  (long long)a->b, (long long)a->hkv, (long long)a->dk, (long long)a->dv);
            return false;
        }
    }
    a->t = a->p + a->l;
    if (mask) {
        int64_t want[4] = {a->b, a->hq, a->s, a->t}, m[4];
        bool ok = mask->rank >= 1 && mask->rank <= 4 && (mask->dtype == DT_BOOL || mask->dtype == q->dtype);
        for (int d = 0; ok && d < mask->rank; d++) {
            m[d] = mask->dims[d];
            int w = 4 - mask->rank + d;
            ok = d == mask->rank - 1 ? m[d] >= 1 && m[d] <= want[w] : m[d] == 1 || m[d] == want[w];
        }
        if (!ok) {
            error(where, "attn_mask '%s' must be bool or Q's type and broadcast to [%lld, %lld, %lld, <= %lld]",
                  mask->name, (long long)a->b, (long long)a->hq, (long long)a->s, (long long)a->t);
            return false;
        }
    }
    if (nonpad && (pk || nonpad->dtype != DT_INT64 || nonpad->rank != 1 || nonpad->dims[0] != a->b)) {
        error(where, "nonpad_kv_seqlen must be int64 [%lld], without a past", (long long)a->b);
        return false;
    }
    int64_t mode = ir_attr_int(n, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) {
        error(where, "qk_matmul_output_mode %lld is not 0 to 3", (long long)mode);
        return false;
    }
    return true;
}

void infer_attention(Graph *g, Node *n) {
    Attn a;
    if (!attn_params(g, n, &a)) return;
    DType t = n->in[0]->dtype;
    int64_t y4[4] = {a.b, a.hq, a.s, a.dv}, y3[3] = {a.b, a.s, a.hq * a.dv};
    ir_set_shape(n->out[0], t, a.three ? 3 : 4, a.three ? y3 : y4);
    int64_t pk[4] = {a.b, a.hkv, a.t, a.dk}, pv[4] = {a.b, a.hkv, a.t, a.dv};
    if (n->nout > 1 && n->out[1]) ir_set_shape(n->out[1], t, 4, pk);
    if (n->nout > 2 && n->out[2]) ir_set_shape(n->out[2], t, 4, pv);
    int64_t qk[4] = {a.b, a.hq, a.s, a.t};
    if (n->nout > 3 && n->out[3]) ir_set_shape(n->out[3], t, 4, qk);
}

/* The index of element e of K/V/Q head h at sequence position s, in the node's own layout. */
static void attn_idx(Program *p, bool three, int64_t hd, Expr *b, Expr *h, Expr *s, Expr *e, Expr **idx) {
    idx[0] = kx_clone(p, b);
    if (three) {
        idx[1] = kx_clone(p, s);
        idx[2] = kx_add(p, kx_mul(p, kx_clone(p, h), hd), e);
    } else {
        idx[1] = kx_clone(p, h);
        idx[2] = kx_clone(p, s);
        idx[3] = e;
    }
}

/* present[b, h, t, e] = t < P ? past[b, h, t, e] : new[b, h, t - P, e] (new in its layout) */
static void attn_present(Lower *L, Node *n, const Attn *a, Buf *past, Buf *nw, Buf *out, int64_t hd) {
    Program *p = L->p;
    Kernel *k = lower_kernel(L, n, KC_COPY, KINS(past, nw), out, NULL, NULL);
    int vb = kir_var(k), vh = kir_var(k), vt = kir_var(k), ve = kir_var(k), vu = kir_var(k);
    Expr *b = kx_var(p, vb), *h = kx_var(p, vh), *e = kx_var(p, ve);
    Stmt *body = NULL;
    if (past) {
        Expr *i[4] = {kx_clone(p, b), kx_clone(p, h), kx_var(p, vt), kx_clone(p, e)};
        Expr *o[4] = {kx_clone(p, b), kx_clone(p, h), kx_var(p, vt), kx_clone(p, e)};
        body = ks_loop(p, vt, 0, a->p, 1, ks_loop(p, ve, 0, hd, 1, ks_store(p, out, o, kx_load(p, past, i))));
    }
    Expr *i[4], *o[4] = {kx_clone(p, b), kx_clone(p, h), kx_addc(p, kx_var(p, vu), a->p), kx_clone(p, e)};
    attn_idx(p, a->three, hd, b, h, kx_var(p, vu), kx_clone(p, e), i);
    body = ks_seq(body, ks_loop(p, vu, 0, a->l, 1, ks_loop(p, ve, 0, hd, 1, ks_store(p, out, o, kx_load(p, nw, i)))));
    k->body = ks_loop(p, vb, 0, a->b, 1, ks_loop(p, vh, 0, a->hkv, 1, body));
}

/* For each row (b, h, s), with keys of head h / (Hq / Hkv) (GQA), t < T:
 *   allowed(t) = mask(t) (bool; or a float mask added to the score; false/-inf past the
 *     mask's last dim), t <= s + offset (is_causal), t < nonpad[b] (opset 24),
 *     s + offset - left <= t <= s + offset + right (opset 25 windows, -1: unbounded),
 *     offset = P, or nonpad[b] - S with nonpad_kv_seqlen
 *   score(t) = softcap(scale * q . k_t) (+ float mask) where allowed, else -inf
 *   y[e] = sum_t exp(score(t) - max) v_t[e] / sum_t exp(score(t) - max), 0 for a row with
 *   nothing allowed (the reference's convention) */
void lower_attention(Lower *L, Node *n) {
    Program *p = L->p;
    Attn a;
    if (!attn_params(NULL, n, &a)) die("lower_attention %s: unchecked", n->name);
    Buf *q = lower_in(L, n, 0), *kb = lower_in(L, n, 1), *vb = lower_in(L, n, 2);
    Buf *mask = lower_in(L, n, 3), *pk = lower_in(L, n, 4), *pv = lower_in(L, n, 5);
    Buf *nonpad = lower_in(L, n, 6), *y = lower_out(L, n, 0);
    bool kv4 = !a.three;            /* K and V read in 4-D [B, Hkv, T, d] */
    if (pk || (n->nout > 1 && n->out[1]) || (n->nout > 2 && n->out[2])) {
        int64_t kd[4] = {a.b, a.hkv, a.t, a.dk}, vd[4] = {a.b, a.hkv, a.t, a.dv};
        Buf *ko = n->nout > 1 && n->out[1] ? lower_out(L, n, 1)
                : kir_buf_new(p, arena_printf(p->arena, "%s.key", lower_kname(L, n)), q->dtype, 4, kd, B_TEMP);
        Buf *vo = n->nout > 2 && n->out[2] ? lower_out(L, n, 2)
                : kir_buf_new(p, arena_printf(p->arena, "%s.value", lower_kname(L, n)), q->dtype, 4, vd, B_TEMP);
        attn_present(L, n, &a, pk, kb, ko, a.dk);
        attn_present(L, n, &a, pv, vb, vo, a.dv);
        kb = ko;
        vb = vo;
        kv4 = true;
    }
    DType t = q->dtype == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT;
    int64_t rd[1] = {a.t};
    Buf *row = kir_buf_new(p, arena_printf(p->arena, "%s.scores", lower_kname(L, n)), t, 1, rd, B_TEMP);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(q, kb, vb, mask, nonpad), y, NULL, NULL);
    kir_param(p, k, row, KP_INOUT);
    int vB = kir_var(k), vH = kir_var(k), vS = kir_var(k), vT = kir_var(k), vD = kir_var(k);
    int acc = kir_scalar(p, k, t), mx = kir_scalar(p, k, t), sum = kir_scalar(p, k, t);
    int any = kir_scalar(p, k, DT_BOOL);
    Expr *B = kx_var(p, vB), *H = kx_var(p, vH), *S = kx_var(p, vS);
    Expr *hk = kx_bin(p, K_DIV, kx_clone(p, H), kx_index(p, a.hq / a.hkv));
    #define AS(e) ((e)->type == t ? (e) : kx_cast(p, t, (e)))

    /* pass 1: scores and their maximum */
    Expr *qi[4], *ki[4];
    attn_idx(p, a.three, a.dk, B, H, S, kx_var(p, vD), qi);
    attn_idx(p, !kv4, a.dk, B, hk, kx_var(p, vT), kx_var(p, vD), ki);
    Stmt *dot = ks_loop(p, vD, 0, a.dk, 1,
                        ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
                                               kx_bin(p, K_MUL, AS(kx_load(p, q, qi)), AS(kx_load(p, kb, ki))))));
    dot->hints |= LH_REDUCTION;
    double scale = ir_attr(n, "scale") ? ir_attr_float(n, "scale", 1) : 1 / sqrt((double)a.dk);
    double cap = ir_attr_float(n, "softcap", 0);
    Expr *sc = kx_bin(p, K_MUL, kx_scalar(p, k, acc), kx_const(p, t, scale));
    /* the qk_matmul_output output: the scaled product (mode 0), softcapped (1), with the
     * masks (2), or the probabilities (3, stored after pass 2) */
    Buf *qko = n->nout > 3 && n->out[3] ? lower_out(L, n, 3) : NULL;
    int64_t qkmode = ir_attr_int(n, "qk_matmul_output_mode", 0);
    if (qko) kir_param(p, k, qko, KP_OUT);
    Expr *qkv = qko && qkmode == 0 ? kx_clone(p, sc) : NULL;
    if (cap > 0)
        sc = kx_bin(p, K_MUL, kx_un(p, K_TANH, kx_bin(p, K_DIV, sc, kx_const(p, t, cap))), kx_const(p, t, cap));
    if (qko && qkmode == 1) qkv = kx_clone(p, sc);
    Expr *T = kx_var(p, vT), *allowed = NULL;
    Expr *offset = kx_index(p, a.p);
    if (nonpad) {
        Expr *bi[1] = {kx_clone(p, B)};
        Expr *np = kx_cast(p, DT_INDEX, kx_load(p, nonpad, bi));
        allowed = kx_bin(p, K_LT, kx_clone(p, T), kx_clone(p, np));
        offset = kx_addc(p, np, -a.s);
    }
    Expr *pos = kx_add(p, kx_clone(p, S), offset);      /* the query's place among the keys */
    if (ir_attr_int(n, "is_causal", 0))
        allowed = kx_and(p, allowed, kx_bin(p, K_LE, kx_clone(p, T), kx_clone(p, pos)));
    int64_t left = ir_attr_int(n, "left_window_size", -1), right = ir_attr_int(n, "right_window_size", -1);
    if (left >= 0) allowed = kx_and(p, allowed, kx_bin(p, K_GE, kx_clone(p, T), kx_addc(p, kx_clone(p, pos), -left)));
    if (right >= 0) allowed = kx_and(p, allowed, kx_bin(p, K_LE, kx_clone(p, T), kx_addc(p, kx_clone(p, pos), right)));
    if (mask) {
        int64_t ml = mask->dims[mask->rank - 1];
        Expr *full[4] = {kx_clone(p, B), kx_clone(p, H), kx_clone(p, S),
                         ml < a.t ? kx_bin(p, K_MIN, kx_clone(p, T), kx_index(p, ml - 1)) : kx_clone(p, T)};
        Expr *mi[4];
        lower_bcast_idx(p, mask, 4, full, mi);
        Expr *mv = kx_load(p, mask, mi);
        if (ml < a.t && ml > 1) allowed = kx_and(p, allowed, kx_bin(p, K_LT, kx_clone(p, T), kx_index(p, ml)));
        if (mask->dtype == DT_BOOL) allowed = kx_and(p, allowed, mv);
        else sc = kx_bin(p, K_ADD, sc, AS(mv));
    }
    Expr *ninf = kx_const(p, t, -INFINITY);
    if (allowed) sc = kx_select(p, kx_clone(p, allowed), sc, kx_clone(p, ninf));
    if (qko && qkmode == 2) qkv = kx_clone(p, sc);
    Expr *rt[1] = {kx_clone(p, T)};
    Stmt *per_t = ks_seq(ks_set(p, acc, kx_const(p, t, 0)), dot);
    ks_seq(per_t, ks_store(p, row, rt, sc));
    if (qkv) {
        Expr *qi4[4] = {kx_clone(p, B), kx_clone(p, H), kx_clone(p, S), kx_clone(p, T)};
        ks_seq(per_t, ks_store(p, qko, qi4, qkv->type == qko->dtype ? qkv : kx_cast(p, qko->dtype, qkv)));
    }
    Expr *rt2[1] = {kx_clone(p, T)};
    ks_seq(per_t, ks_set(p, mx, kx_bin(p, K_MAX, kx_scalar(p, k, mx), kx_load(p, row, rt2))));
    if (allowed) ks_seq(per_t, ks_set(p, any, kx_bin(p, K_OR, kx_scalar(p, k, any), kx_clone(p, allowed))));
    Stmt *body = ks_set(p, mx, kx_clone(p, ninf));
    ks_seq(body, ks_set(p, any, kx_const(p, DT_BOOL, allowed ? 0 : 1)));
    ks_seq(body, ks_loop(p, vT, 0, a.t, 1, per_t));

    /* pass 2: exponentials (0 where masked: exp(-inf)) and their sum; a row with nothing
     * allowed takes max 0, so that no exp sees -inf - -inf */
    ks_seq(body, ks_set(p, mx, kx_select(p, kx_scalar(p, k, any), kx_scalar(p, k, mx), kx_const(p, t, 0))));
    Expr *r3[1] = {kx_var(p, vT)}, *r4[1] = {kx_var(p, vT)};
    Expr *ex = kx_un(p, K_EXP, kx_bin(p, K_SUB, kx_load(p, row, r3), kx_scalar(p, k, mx)));
    Stmt *p2 = ks_store(p, row, r4, ex);
    Expr *r5[1] = {kx_var(p, vT)};
    ks_seq(p2, ks_set(p, sum, kx_bin(p, K_ADD, kx_scalar(p, k, sum), kx_load(p, row, r5))));
    ks_seq(body, ks_set(p, sum, kx_const(p, t, 0)));
    ks_seq(body, ks_loop(p, vT, 0, a.t, 1, p2));
    if (qko && qkmode == 3) {
        Expr *r7[1] = {kx_var(p, vT)};
        Expr *pr = kx_select(p, kx_scalar(p, k, any), kx_bin(p, K_DIV, kx_load(p, row, r7), kx_scalar(p, k, sum)),
                             kx_const(p, t, 0));
        Expr *qi4[4] = {kx_clone(p, B), kx_clone(p, H), kx_clone(p, S), kx_var(p, vT)};
        ks_seq(body, ks_loop(p, vT, 0, a.t, 1, ks_store(p, qko, qi4, pr->type == qko->dtype ? pr : kx_cast(p, qko->dtype, pr))));
    }

    /* pass 3: y[e] = sum_t row[t] v_t[e] / sum */
    Expr *vi[4], *r6[1] = {kx_var(p, vT)}, *yi[4];
    attn_idx(p, !kv4, a.dv, B, hk, kx_var(p, vT), kx_var(p, vD), vi);
    Stmt *wsum = ks_loop(p, vT, 0, a.t, 1,
                         ks_set(p, acc, kx_bin(p, K_ADD, kx_scalar(p, k, acc),
                                                kx_bin(p, K_MUL, kx_load(p, row, r6), AS(kx_load(p, vb, vi))))));
    wsum->hints |= LH_REDUCTION;
    attn_idx(p, a.three, a.dv, B, H, S, kx_var(p, vD), yi);
    Expr *yv = kx_select(p, kx_scalar(p, k, any), kx_bin(p, K_DIV, kx_scalar(p, k, acc), kx_scalar(p, k, sum)),
                         kx_const(p, t, 0));
    if (y->dtype != t) yv = kx_cast(p, y->dtype, yv);
    Stmt *pe = ks_seq(ks_set(p, acc, kx_const(p, t, 0)), wsum);
    ks_seq(pe, ks_store(p, y, yi, yv));
    ks_seq(body, ks_loop(p, vD, 0, a.dv, 1, pe));
    #undef AS
    body = ks_loop(p, vS, 0, a.s, 1, body);
    body = ks_loop(p, vH, 0, a.hq, 1, body);
    k->body = ks_loop(p, vB, 0, a.b, 1, body);
}
