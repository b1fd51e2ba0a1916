/* lower.h - what the lowering rules (passes/ops/, one file per op family) use to turn one
 * graph node into kernels.
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
    Buf **vdims;                    /* by Value id: a dyn graph output's dims output, or NULL */
} Lower;

/* The buffer of a node input (NULL for an absent optional input). Constants become B_CONST. */
Buf *lower_value_buf(Program *p, const Value *v, BufKind k);   /* a graph value's Buf (strings: bytes) */
Buf *lower_in(Lower *L, Node *n, int i);
/* The buffer for output i of n: the graph output's B_OUTPUT buffer or a fresh B_TEMP. */
Buf *lower_out(Lower *L, Node *n, int i);
/* Where the rule of a data-dependent output i of n (Value.dyn, or one whose shape rule found
 * it static from constant inputs) stores its actual dims: int64[rank], written once by the
 * rule. For a graph output it is the dims output run() reports; otherwise a temporary. */
Buf *lower_dims(Lower *L, Node *n, int i);
/* After n's rule (lower_nodes): the run-time dims of n's dyn outputs, when an input is dyn;
 * for a producer of a dyn value (NonZero, ...) that other nodes read, the value re-laid at its
 * capacity's strides, which is how consumers read a dyn value (passes/ops/dynamic.c). */
void dyn_lower_results(Lower *L, Node *n);
/* Before n's rule: a reduction along a data-dependent dim reads its input with the identity
 * past the actual dims; returns the input's own Buf, to put back after the rule, or NULL. */
Buf *dyn_lower_operands(Lower *L, Node *n);
/* Shape or Size of a dyn value: its dims at run time (instead of n's rule); false otherwise. */
bool dyn_lower_shape(Lower *L, Node *n);
/* If's output i, dyn: the branch's value v written into out at out's capacity strides (zero
 * past v's actual dims) and v's actual dims into the output's dims buffer. */
void dyn_lower_branch_output(Lower *L, Node *n, int i, Value *v, Buf *out);
/* TopK with a run-time k, in its kernel k: the picks to make at run time, min(max(k, 0), the
 * axis' length), registering what k reads; *len the axis' run-time length to scan when the
 * input is data-dependent along it, else NULL (both clamped to the capacity). NULL (and *len
 * NULL) for a constant k. */
Expr *dyn_topk_bounds(Lower *L, Node *n, Kernel *k, int axis, Expr **len);
/* An upper bound on every element of integer value v that its computation proves (constants,
 * Shape of a data-dependent value, min(K, count)); false if none is known. */
bool dyn_int_upper(const Value *v, int64_t *hi);
/* Whether n computes its dyn outputs at the capacity's strides from dyn inputs (not packed). */
bool dyn_follows(const Node *n);
/* A dyn graph output computed by a consumer of dyn values: packed into the output `out` and
 * its dims into `dims_out`, as the header contract wants. */
void dyn_pack_output(Lower *L, Value *v, Buf *out, Buf *dims_out);
/* Make output i of n a view of `of` with the output's shape (Reshape, Flatten, ...). If the
 * output is a graph output a copy kernel is emitted instead. */
void lower_view(Lower *L, Node *n, int i, Buf *of);
/* Kernel name for a node: its (sanitised) node name, made unique; lower_name from any base. */
const char *lower_kname(Lower *L, Node *n);
const char *lower_name(Lower *L, const char *base);
/* Lower the live nodes of g (the model's graph or a body) in order, each by its rule. */
void lower_nodes(Lower *L, Graph *g);
/* The buffer holding v (a B_CONST made on first use for a constant). */
Buf *lower_value(Lower *L, Value *v);

/* The prologue of every rule's kernel: a kernel of class c named after n, with the non-NULL
 * ins[0..nin) registered as inputs and then out (unless NULL) as its output, in that order;
 * with vars, fresh loop variables over out's dims in vars[] and (with idx) their expressions
 * in idx[]. Buffers registered later (a second output, a run-time operand) follow; a
 * KP_INOUT output is `out` registered again with KP_IN. KINS(a, b, ...) spells nin, ins. */
Kernel *lower_kernel(Lower *L, Node *n, KernelClass c, int nin, Buf *const *ins, Buf *out,
                     int *vars, Expr **idx);
#define KINS(...) COUNTOF(((Buf *[]){__VA_ARGS__})), (Buf *[]){__VA_ARGS__}
#define KNOINS 0, NULL

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
/* A Transpose kernel out[o...] = in[i...], i[perm[d]] = o[d] (out's dims are in's permuted). */
Kernel *lower_permute(Lower *L, const char *name, Buf *out, Buf *in, const int *perm);
/* Loop nests: take `rank` fresh variables of k into vars[], build the body with kx_var(vars[d]),
 * then wrap it in loops over dims[0..rank) (outermost first). Wrapping returns the outermost
 * loop, or the body itself when rank is 0. */
void lower_vars(Kernel *k, int rank, int *vars);
Stmt *lower_wrap(Program *p, int rank, const int64_t *dims, const int *vars, Stmt *body);
/* Index list of plain variables: idx[d] = kx_var(vars[d]). */
void lower_var_idx(Program *p, int rank, const int *vars, Expr **idx);

/* Cast and CastLike to or from strings (passes/ops/text.c), called by elementwise.c's rules
 * when the input or the target type is a string. */
void infer_cast_string(Graph *g, Node *n, DType to);
void lower_cast_string(Lower *L, Node *n);
void lower_equal_string(Lower *L, Node *n);    /* Equal of two string tensors (opset 19) */

/* Shared by the rules (passes/ops/helpers.c). */
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
 * (helpers.c). Reports a malformed node (when g is given) and returns false. */
bool rule_window(Graph *g, Node *n, const Value *x, const int64_t *ks, bool ceil_mode, Window *w);
/* G of Winograd's F(m x m, 3x3), m = 2 or 4: m + 2 rows (passes/ops/winograd.c). */
const double (*winograd_g(int m))[3];
/* Axis in [-rank, rank) made non-negative into *out; false after an error (g NULL: silent). */
bool rule_axis(Graph *g, Node *n, int64_t axis, int rank, int *out);
/* Input i as a constant 1-D integer tensor of at most `max` elements; NULL after an error. */
Value *rule_const_ints(Graph *g, Node *n, int i, const char *what, int64_t max);
/* Which dims a Reduce* node reduces (canonical form: constant axes input 1 or none) into mask;
 * 0 for no reduction (empty axes with noop_with_empty_axes), -1 after a reported error. */
int rule_reduce_mask(Graph *g, Node *n, bool *mask);

/* Shared by several families (passes/ops/helpers.c). */
/* The reduction a rule_emit_reduce kernel computes (its init, step and finish: the table in
 * helpers.c); rule_red_kind gives a Reduce* or global pool node's. */
typedef enum RedKind {
    R_SUM, R_MEAN, R_MAX, R_MIN,        /* over no dims: the identity (lower_reduce: a view) */
    R_PROD, R_L1, R_L2, R_SUMSQUARE, R_LOGSUM, R_LOGSUMEXP, R_LP
} RedKind;
RedKind rule_red_kind(const Node *n);

/* A shape as "[2,3,4]" (for messages). */
const char *rule_dims_str(Graph *g, int rank, const int64_t *dims);
/* Whether v broadcasts one way to the shape dims[0..rank) (numpy's rule; only v's dims are
 * stretched): Gemm's C, PRelu's slope, LayerNormalization's scale and bias. */
bool rule_broadcasts_to(const Value *v, int rank, const int64_t *dims);

/* A constant scalar as an expression of type t, keeping all 64 bits of an integer. */
Expr *rule_scalar_const(Program *p, const Value *v, DType t);

/* The smallest / largest value of a dtype: the identity of max / min. Integers use their
 * range so that pools over int8/uint8 work; int64's largest is not exact in a double, so
 * min-reductions start from a loaded element instead (see rule_emit_reduce). */
double rule_dtype_lowest(DType t);

int64_t rule_ceil_div(int64_t a, int64_t b);

/* Input coordinate of tap t at output position o along spatial dim i, and the condition
 * that it lies inside the input (*cond = NULL when no position can leave it). */
Expr *rule_tap_index(Program *p, const Window *w, int i, Expr *o, Expr *t, Expr **cond);

/* Wrap the per-tap statement in the tap loops (spatial dim 0 outermost), each dim's bounds
 * check just inside its own loop so that a row out of bounds is skipped whole. */
Stmt *rule_wrap_taps(Program *p, const Window *w, const int *tv, Expr **conds, Stmt *body);

/* out[o...] = reduction `kind` over the dims of `in` marked in `mask`; out has in's rank with
 * the reduced dims 1 (keepdims) or dropped. One kernel: parallel loops over out, the
 * reduction loops inside accumulating into a scalar register (KC_CONTRACTION; LogSumExp,
 * which takes the max in a first pass, KC_GENERIC). */
void rule_emit_reduce(Lower *L, Node *n, Buf *in, Buf *out, const bool *mask, bool keepdims,
                      RedKind kind);

/* One pass of a reduction: acc = init, then acc = acc op term in loops over the dims marked in
 * mask (vars from rule_sel_vars, term built on their index). */
Stmt *rule_red_pass(Program *p, Kernel *k, int rank, const int64_t *dims, const bool *mask,
                    const int *vars, int acc, Expr *init, KOp op, Expr *term);

/* Loops over the dims marked `sel` (reduction or not), innermost last, around body. */
Stmt *rule_wrap_dims(Program *p, int rank, const int64_t *dims, const bool *sel, const int *vars,
                       Stmt *body, bool reduction);

/* Fresh variables for the dims marked in sel, written into idx. */
void rule_sel_vars(Program *p, Kernel *k, int rank, const bool *sel, int *vars, Expr **idx);

/* A one-element integer operand (CumSum's axis, Trilu's k), constant or not. */
bool rule_int_scalar(Graph *g, Node *n, int i, const char *what);

/* The DT_INDEX value of a one-element integer operand: folded when constant, else loaded
 * (and the buffer made a parameter of k). */
Expr *rule_index_operand(Lower *L, Node *n, Kernel *k, int i);

/* Element 0 of a one-element buffer (zero points, scales), registered as an input of k. */
Expr *rule_load_first(Program *p, Kernel *k, Buf *b);

bool rule_quant_type(DType t);

/* saturate(round(v) + zp) into t's range, v float32, zp any number type or NULL */
Expr *rule_quantize(Program *p, Expr *v, Expr *zp, DType t);
/* the same, saturated to [lo, hi] within t's range (a Relu or Clip on the quantized value) */
Expr *rule_quantize_in(Program *p, Expr *v, Expr *zp, DType t, double lo, double hi);
/* v (any number) cast to a float8 type t as Cast-19 with `saturate` (ir/float8.c): K_CAST
 * rounds and saturates the finite values; saturating, e5m2's infinities become its largest
 * value too; not, what rounds past the largest value is infinity (e5m2) or NaN. */
Expr *rule_float8_cast(Program *p, Expr *v, DType t, bool saturate);
/* ... to float8e8m0 as Cast-24 with `saturate` and `round_mode` (E8M0_UP, ...: ir.h) */
Expr *rule_e8m0_cast(Program *p, Expr *v, bool saturate, int round_mode);
/* lo <= v <= hi (float v; a NaN passes through) */
Expr *rule_clamp(Program *p, Expr *v, double lo, double hi);

Value *rule_opt_in(const Node *n, int i);
/* A loop of var over [lo, hi), bounds computed at run time (step 1). */
Stmt *rule_loop_range(Program *p, int var, Expr *lo, Expr *hi, Stmt *body);
/* Sort the first m (an index register of k, at most the capacity key->dims[0]) entries of the
 * 1-d buffers key and idx together, stably, so that no entry follows one that `first` (K_GT:
 * descending, K_LT: ascending) puts after it; key2 and idx2 are scratch of the same dims.
 * Only the first min(m, keep) entries are sorted into place (INT64_MAX: all). Registers the
 * four as KP_INOUT params of k. */
Stmt *rule_merge_sort(Program *p, Kernel *k, Buf *key, Buf *idx, Buf *key2, Buf *idx2, int m, KOp first,
                      int64_t keep);
/* sequence.c: out becomes the same sequence or optional as x; the tensors a container
 * stands for (out may be NULL to count them). */
void rule_container_like(Graph *g, Value *out, const Value *x);
int rule_flatten(const Value *v, Value **out);
/* If whose branches return sequences or optionals: they return the tensors instead. */
bool rule_flatten_branches(Graph *g, Node *n, Graph **bs, int nb);
/* A Loop carrying a sequence or optional is unrolled at compile time (its rule calls this). */
bool rule_loop_has_containers(const Node *n);
void rule_unroll_loop(Graph *g, Node *n);

/* An operand element as int32 minus its zero point (zi: the zero point's index when it is
 * per row/column). */
Expr *rule_centered(Program *p, Kernel *k, Buf *b, Expr **bi, Buf *zp, Expr *zi);

bool rule_float_input(Graph *g, Node *n, int i);
/* Inputs first..last (those present) have input 0's dtype, as the op's schema requires (one
 * type variable T for all of them); else an error naming the odd one. */
bool rule_same_type(Graph *g, Node *n, int first, int last);

/* The random generator (helpers.c): Philox-4x32-10 of the counter ctr[0..4) (32-bit values of
 * any integer type, consumed) under the 64-bit key: the code that leaves the four words (as
 * uint64 values < 2^32) in registers w[0..4). Deterministic for a given key and counter. */
Stmt *rule_philox(Program *p, Kernel *k, Expr *const ctr[4], uint64_t key, int w[4]);
/* The Philox words of a random op's element `index` (consumed) in registers w[0..4): counter
 * (index, 0, a hash of n's first output name, 0), key n's seed attribute (0 without one). */
Stmt *rule_random(Program *p, Kernel *k, const Node *n, Expr *index, int w[4]);
/* A float32 uniform in [0, 1) from the Philox word in register `word`. */
Expr *rule_uniform01(Program *p, Kernel *k, int word);

#endif
