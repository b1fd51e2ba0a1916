/* attention.c - the transformer family of opset 23: RotaryEmbedding.
 *
 * RotaryEmbedding rotates pairs of elements of each head by the angle of the token's position:
 * (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2), the pairs being the two halves of the first
 * rotary_embedding_dim elements of a head or, interleaved, elements 2j and 2j + 1; the rest of
 * the head is copied. One kernel, its head loop split into those ranges so that every output
 * element is stored once and no load leaves its row. */
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
