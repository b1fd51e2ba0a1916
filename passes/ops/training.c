/* training.c - the training optimizers of the ai.onnx.preview.training domain: Adagrad, Adam,
 * Momentum. Each is one elementwise-shaped kernel per optimised tensor, computing in the
 * tensor's float type. */
#include <math.h>
#include <string.h>

#include "../lower.h"

/* A one-element operand loaded as a scalar of type t (R and T of the optimizers). */
static Expr *load_scalar(Program *p, Kernel *k, Buf *b, DType t) {
    Expr *zero[MAX_RANK];
    for (int d = 0; d < b->rank; d++) zero[d] = kx_index(p, 0);
    kir_param(p, k, b, KP_IN);
    return kx_cast(p, t, kx_load(p, b, zero));
}

/* ---- training optimizers (domain ai.onnx.preview.training) ---- */

/* Inputs R, T, then `groups` lists of n tensors (X, G, then the states); outputs X_new and the
 * new states, n each. Every tensor of a position i has X_i's shape. */
static int optimizer_groups(Op op) { return op == OP_Adam ? 4 : 3; }

void infer_optimizer(Graph *g, Node *n) {
    int groups = optimizer_groups(n->op), cnt = (n->nin - 2) / groups;
    if (cnt < 1 || n->nin != 2 + groups * cnt || n->nout != (groups - 1) * cnt) {
        error(ir_where(g, n), "%d inputs and %d outputs do not make %d groups of tensors",
              n->nin, n->nout, groups);
        return;
    }
    if (!rule_float_input(g, n, 0) || ir_numel(n->in[0]) != 1 || ir_numel(n->in[1]) != 1) {
        error(ir_where(g, n), "R and T must be scalars");
        return;
    }
    for (int i = 0; i < cnt; i++) {
        Value *x = n->in[2 + i];
        if (!rule_float_input(g, n, 2 + i)) return;
        for (int j = 1; j < groups; j++)
            if (!ir_same_shape(n->in[2 + j * cnt + i], x) || n->in[2 + j * cnt + i]->dtype != x->dtype) {
                error(ir_where(g, n), "'%s' and '%s' differ in shape or type", x->name,
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
    return kx_const(o->p, o->t, ir_attr_float(n, name, (float)dflt));
}

/* The update rules, as the ONNX reference implementations write them. */
static void optimizer_step(Optim *o, Node *n) {
    Program *p = o->p;
    DType t = o->t;
    Expr *one = kx_const(p, t, 1);
    Expr *greg = kx_bin(p, K_ADD, kx_bin(p, K_MUL, attr_c(o, n, "norm_coefficient", 0), o->x), o->g);
    Expr *started = kx_bin(p, K_GT, o->tt, kx_const(p, t, 0));
    if (n->op == OP_Adagrad) {
        Expr *r = kx_bin(p, K_DIV, o->r, kx_bin(p, K_ADD, one, kx_bin(p, K_MUL, kx_clone(p, o->tt), attr_c(o, n, "decay_factor", 0))));
        Expr *hn = kx_bin(p, K_ADD, o->h, kx_bin(p, K_MUL, greg, kx_clone(p, greg)));
        Expr *hs = kx_bin(p, K_ADD, kx_un(p, K_SQRT, kx_clone(p, hn)), attr_c(o, n, "epsilon", 0));
        o->res[0] = kx_bin(p, K_SUB, kx_clone(p, o->x), kx_bin(p, K_DIV, kx_bin(p, K_MUL, r, kx_clone(p, greg)), hs));
        o->res[1] = hn;
    } else if (n->op == OP_Momentum) {
        Expr *alpha = attr_c(o, n, "alpha", 0);
        Expr *beta = kx_select(p, started, attr_c(o, n, "beta", 0), kx_const(p, t, 1));
        Expr *vn = kx_bin(p, K_ADD, kx_bin(p, K_MUL, alpha, o->v), kx_bin(p, K_MUL, beta, greg));
        Expr *step = kx_clone(p, vn);
        if (!strcmp(ir_attr_str(n, "mode", "standard"), "nesterov"))
            step = kx_bin(p, K_ADD, kx_clone(p, greg), kx_bin(p, K_MUL, kx_clone(p, alpha), step));
        o->res[0] = kx_bin(p, K_SUB, kx_clone(p, o->x), kx_bin(p, K_MUL, o->r, step));
        o->res[1] = vn;
    } else {        /* Adam */
        Expr *alpha = attr_c(o, n, "alpha", 0.9), *beta = attr_c(o, n, "beta", 0.999);
        Expr *vn = kx_bin(p, K_ADD, kx_bin(p, K_MUL, alpha, o->v), kx_bin(p, K_MUL, kx_bin(p, K_SUB, one, kx_clone(p, alpha)), greg));
        Expr *g2 = kx_bin(p, K_MUL, kx_clone(p, greg), kx_clone(p, greg));
        Expr *hn = kx_bin(p, K_ADD, kx_bin(p, K_MUL, beta, o->h), kx_bin(p, K_MUL, kx_bin(p, K_SUB, kx_clone(p, one), kx_clone(p, beta)), g2));
        Expr *hs = kx_bin(p, K_ADD, kx_un(p, K_SQRT, kx_clone(p, hn)), attr_c(o, n, "epsilon", 1e-6));
        Expr *bt = kx_bin(p, K_SUB, kx_clone(p, one), kx_bin(p, K_POW, kx_clone(p, beta), kx_clone(p, o->tt)));
        Expr *at = kx_bin(p, K_SUB, kx_clone(p, one), kx_bin(p, K_POW, kx_clone(p, alpha), kx_clone(p, o->tt)));
        Expr *radj = kx_select(p, started, kx_bin(p, K_DIV, kx_bin(p, K_MUL, o->r, kx_un(p, K_SQRT, bt)), at), kx_clone(p, o->r));
        Expr *xn = kx_bin(p, K_SUB, kx_clone(p, o->x), kx_bin(p, K_MUL, radj, kx_bin(p, K_DIV, kx_clone(p, vn), hs)));
        o->res[0] = kx_bin(p, K_MUL, kx_bin(p, K_SUB, kx_clone(p, one), attr_c(o, n, "norm_coefficient_post", 0)), xn);
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
