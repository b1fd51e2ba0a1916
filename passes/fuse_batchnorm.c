/* fuse_batchnorm.c - graph-level fusion: fold an inference BatchNormalization into the Conv,
 * ConvTranspose, Gemm or MatMul that feeds it.
 *
 * In inference BatchNormalization is y = x * s + t per channel, with s = scale/sqrt(var + eps)
 * and t = B - mean * s. When x comes from a Conv (or Gemm, or MatMul by a constant matrix) with
 * constant weights and the BN is its only consumer, scaling the weights of output channel c by
 * s[c] and setting the bias to bias[c] * s[c] + t[c] gives the same result with one node less
 * and no extra pass over the data. New weights are new constants: the old ones may be shared.
 * Only float32 is handled; anything else is left for the generic BN kernel. */
#include <math.h>
#include <string.h>

#include "pipeline.h"

typedef struct Affine {
    int64_t c;                      /* channels */
    float *s, *t;                   /* y = x * s[c] + t[c] */
} Affine;

static bool is_float_const(const Value *v) { return v && v->data && v->dtype == DT_FLOAT; }

static bool is_graph_output(const Graph *g, const Value *v) {
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

static bool bn_affine(Graph *g, const Node *bn, int64_t c, Affine *a) {
    for (int i = 1; i < 5; i++)
        if (!is_float_const(bn->in[i]) || ir_numel(bn->in[i]) != c) return false;
    const float *gamma = bn->in[1]->data, *beta = bn->in[2]->data;
    const float *mean = bn->in[3]->data, *var = bn->in[4]->data;
    double eps = ir_attr_float(bn, "epsilon", 1e-5f);
    a->c = c;
    a->s = ARENA_ARRAY(g->arena, float, c);
    a->t = ARENA_ARRAY(g->arena, float, c);
    for (int64_t i = 0; i < c; i++) {
        double s = gamma[i] / sqrt((double)var[i] + eps);
        a->s[i] = (float)s;
        a->t[i] = (float)(beta[i] - mean[i] * s);
    }
    return true;
}

static Value *new_const(Graph *g, const Value *like, const char *name, int rank, const int64_t *dims) {
    return ir_const_new(g, arena_printf(g->arena, "%s_bn", name), DT_FLOAT, rank, dims,
                        like ? like->data : NULL);
}

/* bias'[c] = bias[c] * s[c] + t[c] (bias: NULL = 0) */
static Value *fused_bias(Graph *g, const Value *bias, const Affine *a, const char *name) {
    int64_t dims[1] = {a->c};
    Value *v = new_const(g, NULL, name, 1, dims);
    float *o = v->data;
    for (int64_t i = 0; i < a->c; i++)
        o[i] = (bias ? ((const float *)bias->data)[i] * a->s[i] : 0) + a->t[i];
    return v;
}

/* Conv: weights [M, C/group, k...], output channel m is the block W[m]. ConvTranspose:
 * weights [C, M/group, k...], output channel m = (c / (C/group)) * (M/group) + j is the
 * block W[c, j] of each input channel c of its group. */
static bool fuse_conv(Graph *g, Node *conv, Node *bn) {
    Value *w = conv->in[1], *b = conv->nin > 2 ? conv->in[2] : NULL;
    bool tr = conv->op == OP_ConvTranspose;
    int64_t grp = ir_attr_int(conv, "group", 1);
    Affine a;
    if (!is_float_const(w) || (b && !is_float_const(b))) return false;
    if (!bn_affine(g, bn, tr ? w->dims[1] * grp : w->dims[0], &a) || (b && ir_numel(b) != a.c)) return false;
    Value *nw = new_const(g, w, w->name, w->rank, w->dims);
    int64_t rows = w->dims[0] * (tr ? w->dims[1] : 1), block = ir_numel(w) / rows;
    float *wd = nw->data;
    for (int64_t r = 0; r < rows; r++) {
        /* tr: row r is W[c, j], c = r / (M/group), j = r % (M/group) */
        int64_t m = tr ? r / w->dims[1] / (w->dims[0] / grp) * w->dims[1] + r % w->dims[1] : r;
        for (int64_t k = 0; k < block; k++) wd[r * block + k] *= a.s[m];
    }
    Value *nb = fused_bias(g, b, &a, b ? b->name : arena_printf(g->arena, "%s_bias", conv->name));
    if (conv->nin < 3) {
        Value **in = ARENA_ARRAY(g->arena, Value *, 4);
        memcpy(in, conv->in, sizeof(Value *) * (size_t)conv->nin);
        conv->in = in;
        conv->nin = 3;
    }
    conv->in[1] = nw;
    conv->in[2] = nb;
    return true;
}

/* Scale column n of the [M, N] product: row n of B when transB, else column n. */
static Value *scaled_matrix(Graph *g, const Value *w, bool trans, const Affine *a) {
    Value *nw = new_const(g, w, w->name, 2, w->dims);
    float *d = nw->data;
    for (int64_t i = 0; i < w->dims[0]; i++)
        for (int64_t j = 0; j < w->dims[1]; j++) d[i * w->dims[1] + j] *= a->s[trans ? i : j];
    return nw;
}

/* Gemm: y = alpha A B + beta C, so y * s + t = alpha A (B s) + (beta C s + t), new beta 1. C
 * must broadcast to [M, N]; the new C keeps its row count (1 or M). */
static bool fuse_gemm(Graph *g, Node *gemm, Node *bn) {
    Value *w = gemm->in[1], *c = gemm->nin > 2 ? gemm->in[2] : NULL;
    Value *y = gemm->out[0];
    bool trans = ir_attr_int(gemm, "transB", 0) != 0;
    Affine a;
    if (!is_float_const(w) || w->rank != 2 || (c && !is_float_const(c)) || y->rank != 2) return false;
    if (!bn_affine(g, bn, y->dims[1], &a)) return false;
    if (c && (c->rank > 2 || (c->rank >= 1 && c->dims[c->rank - 1] != 1 && c->dims[c->rank - 1] != a.c)))
        return false;
    float beta = ir_attr_float(gemm, "beta", 1);
    int64_t rows = c && c->rank == 2 ? c->dims[0] : 1, dims[2] = {rows, a.c};
    Value *nc = new_const(g, NULL, c ? c->name : arena_printf(g->arena, "%s_bias", gemm->name),
                          rows > 1 ? 2 : 1, rows > 1 ? dims : dims + 1);
    float *o = nc->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t n = 0; n < a.c; n++) {
            float cv = 0;
            if (c) {
                int64_t cols = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
                cv = ((const float *)c->data)[r * cols + (cols == 1 ? 0 : n)];
            }
            o[r * a.c + n] = beta * cv * a.s[n] + a.t[n];
        }
    gemm->in[1] = scaled_matrix(g, w, trans, &a);
    if (gemm->nin < 3) {
        Value **in = ARENA_ARRAY(g->arena, Value *, 4);
        memcpy(in, gemm->in, sizeof(Value *) * (size_t)gemm->nin);
        gemm->in = in;
        gemm->nin = 3;
    }
    gemm->in[2] = nc;
    ir_attr_set_float(g, gemm, "beta", 1);
    return true;
}

/* MatMul [M, K] x [K, N] by a constant matrix becomes a Gemm with the BN as its bias. */
static bool fuse_matmul(Graph *g, Node *mm, Node *bn) {
    if (mm->in[0]->rank != 2 || mm->out[0]->rank != 2 || !is_float_const(mm->in[1]) ||
        mm->in[1]->rank != 2)
        return false;
    mm->op = OP_Gemm;
    mm->op_type = "Gemm";
    if (fuse_gemm(g, mm, bn)) return true;
    mm->op = OP_MatMul;             /* BN params not usable: leave the MatMul alone */
    mm->op_type = "MatMul";
    return false;
}

static void fuse_one(Graph *g, Node *bn) {
    Value *x = bn->in[0];
    Node *p = x->producer;
    if (!p || p->dead || x->nuses != 1 || is_graph_output(g, x) || p->out[0] != x) return;
    if (x->dtype != DT_FLOAT || x->rank < 2) return;
    bool done = false;
    if (p->op == OP_Conv || p->op == OP_ConvTranspose) done = fuse_conv(g, p, bn);
    else if (p->op == OP_Gemm) done = fuse_gemm(g, p, bn);
    else if (p->op == OP_MatMul) done = fuse_matmul(g, p, bn);
    if (!done) return;
    /* The producer now writes the BN's result directly (it keeps the BN output's name). */
    p->out[0] = bn->out[0];
    bn->out[0]->producer = p;
    x->producer = NULL;
    x->nuses = 0;
    bn->dead = true;
}

void fuse_batchnorm(Graph *g) {
    ir_count_uses(g);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (!n->dead && n->op == OP_BatchNormalization && !ir_attr_int(n, "training_mode", 0)) fuse_one(g, n);
    }
    ir_compact(g);
}
