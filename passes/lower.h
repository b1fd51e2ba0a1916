/* lower.h - what lowering rules (passes/rules_*.c) use to turn one graph node into kernels.
 *
 * The lowering pass (passes/lower.c) creates a Buf for every graph input, output and constant,
 * walks the nodes in order and calls op_info[n->op].lower(L, n). A rule gets its operands with
 * lower_in(), its result buffers with lower_out(), and emits one or more kernels. Helpers below
 * build the common kernel shapes so that their form is the one fusion and tiling expect. */
#ifndef ONNXCC_LOWER_H
#define ONNXCC_LOWER_H
#include "../ir/kir.h"
#include "rules.h"

typedef struct Lower {
    Graph *g;
    Program *p;
    Buf **vbuf;                     /* by Value id: the Buf holding that value, or NULL */
} Lower;

/* The buffer of a node input (NULL for an absent optional input). Constants become B_CONST. */
Buf *lower_in(Lower *L, Node *n, int i);
/* The buffer for output i of n: the graph output's B_OUTPUT buffer or a fresh B_TEMP. */
Buf *lower_out(Lower *L, Node *n, int i);
/* Make output i of n a view of `of` with the output's shape (Reshape, Flatten, ...). If the
 * output is a graph output a copy kernel is emitted instead. */
void lower_view(Lower *L, Node *n, int i, Buf *of);
/* Kernel name for a node: its (sanitised) node name, made unique. */
const char *lower_kname(Lower *L, Node *n);

/* Elementwise map: out[i...] = f(ins[0][bcast(i)], ..., ins[nin-1][bcast(i)]) with numpy
 * broadcasting of every input to out's shape. `build` gets the loaded operand expressions and
 * returns the value to store (of out's dtype). The result has kclass KC_ELEMENTWISE. */
typedef Expr *(*MapFn)(Lower *L, Node *n, Expr **vals, void *ctx);
Kernel *lower_map(Lower *L, Node *n, Buf *out, int nin, Buf **ins, MapFn build, void *ctx);
/* Broadcast index: the index list for reading `in` when iterating over `out_rank` dims with
 * index expressions idx (right-aligned; size-1 dims read index 0). */
void lower_bcast_idx(Program *p, const Buf *in, int out_rank, Expr **idx, Expr **res);
/* A copy kernel out = in (same numel; shapes may differ: row-major order is kept). */
Kernel *lower_copy(Lower *L, const char *name, Buf *out, Buf *in);
/* Loop nests: take `rank` fresh variables of k into vars[], build the body with kx_var(vars[d]),
 * then wrap it in loops over dims[0..rank) (outermost first). Wrapping returns the outermost
 * loop, or the body itself when rank is 0. */
void lower_vars(Kernel *k, int rank, int *vars);
Stmt *lower_wrap(Program *p, int rank, const int64_t *dims, const int *vars, Stmt *body);
/* Index list of plain variables: idx[d] = kx_var(vars[d]). */
void lower_var_idx(Program *p, int rank, const int *vars, Expr **idx);

/* Shared by the rules (rules_util.c). */
/* MatMul operands as numpy sees them: a 1-D A is a row [1, K] and a 1-D B a column [K, 1],
 * the added dim being dropped from the result; leading dims are broadcast batch dims. */
typedef struct MatShape {
    int nba, nbb, nb;                   /* batch ranks of A, B and the result */
    int64_t m, kd, nn;
    int64_t dims[MAX_RANK];             /* result shape */
    int rank;
} MatShape;
bool rule_matmul_shape(const Value *a, const Value *b, MatShape *s);
/* Window geometry of a conv or pool over the spatial dims of an N,C,spatial... input. */
typedef struct Window {
    int nsp;                            /* spatial dims: input rank - 2 */
    int64_t in[MAX_RANK], out[MAX_RANK];
    int64_t k[MAX_RANK], s[MAX_RANK], d[MAX_RANK];
    int64_t pb[MAX_RANK], pe[MAX_RANK]; /* padding at the begin / end of each spatial dim */
} Window;
/* Fill w from x's shape, the kernel shape ks and the node's strides/dilations/pads/auto_pad
 * (rules_nn.c). Reports a malformed node (when g is given) and returns false. */
bool rule_window(Graph *g, Node *n, const Value *x, const int64_t *ks, bool ceil_mode, Window *w);
/* False when an input's shape is unknown: an earlier shape rule failed and reported it. */
bool rule_inputs_known(const Node *n);
/* Axis in [-rank, rank) made non-negative into *out; false after an error (g NULL: silent). */
bool rule_axis(Graph *g, Node *n, int64_t axis, int rank, int *out);
/* Input i as a constant 1-D integer tensor of at most `max` elements; NULL after an error. */
Value *rule_const_ints(Graph *g, Node *n, int i, const char *what, int64_t max);
/* Which dims a Reduce* node reduces (canonical form: constant axes input 1 or none) into mask;
 * 0 for no reduction (empty axes with noop_with_empty_axes), -1 after a reported error. */
int rule_reduce_mask(Graph *g, Node *n, bool *mask);

#endif
