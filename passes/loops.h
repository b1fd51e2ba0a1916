/* loops.h - the loop primitives the schedule pass (passes/schedule.c) composes: split,
 * interchange, peel, unroll, jam, vectorize (passes/loops.c). Each one keeps the kernel's
 * meaning, checks what it needs to (or says what its caller must have checked), and appends
 * itself to the kernel's schedule line (Kernel.sched, `split(i1,16)`, using the variables as
 * kir_print writes them).
 *
 * The structural ones take `at`, the link that holds the loop (&k->body, &prev->next or
 * &parent->body), and replace *at by the statements that take its place; the last of them
 * links to what followed the loop, so the tree stays whole after every call. */
#ifndef ONNXCC_LOOPS_H
#define ONNXCC_LOOPS_H
#include "../ir/kir.h"

/* Appends one step to k's schedule line. */
void sched_note(Program *p, Kernel *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- queries ---- */
int stmt_size(const Stmt *s);                   /* statements and expression nodes */
/* The coefficient of loop variable var in index expression e; 0 if e is not affine. */
int64_t expr_coef(const Expr *e, int var);
/* Marks every loop that only accumulates into registers (stores nothing) LH_REDUCTION;
 * returns whether the list stores anything. */
bool mark_reductions(Stmt *s);
/* No parameter is KP_INOUT and no output shares storage with another parameter: iterations
 * of the kernel's parallel loops never see each other's stores. */
bool kernel_independent(const Kernel *k);
/* Can the iterations of loop l, within one run of l, go in any order as far as memory is
 * concerned (vector lanes, jammed copies)? Yes if the kernel never loads what it stores
 * (kernel_independent), or, for a kernel with state (a recurrence's h and c), if every buffer
 * l's body stores is stored through one Buf at one index, of which some dimension is l's
 * variable up to a uniform term (v, v + u, u - v, c*v: u reading no variable of l or of a
 * loop inside it and no register set inside), so distinct iterations store distinct
 * elements; and is loaded in l's body, if at all, only through that Buf at that same index
 * (each iteration reads back its own element). Views of one storage count as the same
 * buffer. */
bool iterations_independent(Program *p, const Kernel *k, const Stmt *l);
/* Every register read in l's body is set before, in the body (copies of it may then run
 * side by side with renamed registers). */
bool body_private(Program *p, const Kernel *k, const Stmt *l);
/* Can l's iterations be the lanes of a vector (kir.h, LH_VECTOR; what kir_verify checks)?
 * Constant bounds, step 1, independent iterations, private registers not read after l, no loop bound or if condition
 * inside that depends on l's variable or on a register set inside. l must be in k's tree. */
bool lanes_ok(Program *p, const Kernel *k, const Stmt *l);
/* e loads elements at most `max` apart for consecutive values of var somewhere: a load whose
 * last index is affine in var with a coefficient in [-max, max] other than 0 (1 when max is
 * 1), and whose other indices do not read var. max 1: consecutive elements; the backend loads
 * strides up to 4 as whole vectors and a shuffle (STRIDE_LOADS), larger ones gather. */
bool expr_lane_stride(const Expr *e, int var, int max);
/* The first such load in e (of buffer b only, unless b is NULL), or NULL. */
const Expr *expr_lane_load(const Expr *e, const Buf *b, int var, int max);
enum { STRIDE_LOADS = 4 };
/* If l is a reduction loop (LH_REDUCTION, constant bounds, step 1) whose body is register sets
 * that kir_reduction_form accepts, the size in bytes of its widest accumulator (at least 4
 * for floats); else 0. */
int reduction_acc_size(Program *p, const Kernel *k, const Stmt *l);
static inline bool const_loop(const Stmt *l) {
    return l->kind == S_LOOP && l->lo->kind == E_CONST && l->hi->kind == E_CONST;
}
static inline int64_t trips(const Stmt *l) { return (l->hi->i - l->lo->i + l->step - 1) / l->step; }

/* ---- primitives ---- */
/* Strip-mine *at = for v in lo..hi (constant, step 1) by f:
 *     for o in lo..lo+(hi-lo)/f*f step f [tile]:  for ii in 0..f:  body[v := o + ii]
 *     for v in lo+(hi-lo)/f*f..hi: body           (the rest, the loop itself, if any)
 * The registers the body sets get new numbers in the tiles (so that the tiles may become
 * vector loops and the rest stay scalar: kir.h, lane-private registers).
 * Returns the inner loop, or NULL (nothing changed) when the loop is shorter than f. */
Stmt *loop_split(Program *p, Kernel *k, Stmt **at, int64_t f);
/* Unroll-and-jam *at by u: a loop over the largest multiple of u of the iterations, step u,
 * whose body is u copies of the body (variable + c, registers of copies 1.. renamed) jammed
 * statement by statement, loops and ifs whose header does not depend on the copy kept once;
 * the rest stays the loop itself, shortened. The body's registers must be private
 * (body_private) and iterations independent. Returns the jammed loop. */
Stmt *loop_jam(Program *p, Kernel *k, Stmt **at, int u);
/* *at (constant bounds) replaced by one copy of its body per iteration, in order. */
void loop_unroll(Program *p, Kernel *k, Stmt **at);
/* Marks l LH_VECTOR if its registers and headers allow lanes (lanes_ok but for the memory
 * test); returns whether it did. Whether l's iterations are independent in memory is the
 * caller's to know: lanes_ok on the loop that split and jam made l from (they keep that,
 * while the stores of jammed copies defeat iterations_independent's simple test). */
bool loop_vectorize(Program *p, Kernel *k, Stmt *l);
/* Marks l `[reduction, vector]`: the backend then keeps vector accumulators and reassociates
 * the accumulation (kir.h). The caller checked reduction_acc_size(l). */
void loop_vectorize_reduction(Program *p, Kernel *k, Stmt *l);
/* Starts l (constant bounds, step 1) `n` iterations earlier, so that it also redoes the last
 * n iterations of the loops before it over the same variable (a rest loop grown into one
 * whole vector). The caller knows that redoing an iteration stores again what it stored: the
 * kernel never loads what it stores (kernel_independent) and is not made to work in place
 * later (bufferize does so only for elementwise kernels), and l's first n iterations were
 * done before it. */
void loop_overlap(Program *p, Kernel *k, Stmt *l, int64_t n);
/* Swaps outer with the one loop that is its whole body. Both must be parallel loops of
 * independent iterations (the caller knows) with constant bounds; false if they are not
 * perfectly nested. */
bool loop_interchange(Program *p, Kernel *k, Stmt *outer);
/* Cuts *at (constant bounds, step 1) into up to three pieces: its first `front`
 * iterations, the middle and its last `back` iterations; in each piece, ifs and selects whose
 * conditions an interval analysis of affine index expressions over the enclosing loops
 * proves true or false are resolved. Returns the middle piece. */
Stmt *loop_peel(Program *p, Kernel *k, Stmt **at, int64_t front, int64_t back);
/* One dim of a packed buffer: dim `src` of the original, whole (block 0), or cut in blocks of
 * `block`: the block number (index / block), or with `inner` the place in the block. */
typedef struct PackDim {
    int src;
    int64_t block;
    bool inner;
} PackDim;
/* Constant b re-laid out as the PackDims say (a partial last block padded with zeros): a new
 * B_CONST buffer `name`; contents follow b's (none for a parsed program). loop_pack's data
 * half, and what the recurrences (passes/ops/rnn.c) use for the weights of their stateful
 * kernels, which the schedule does not repack. */
Buf *pack_const(Program *p, const Buf *b, const char *name, int rank, const PackDim *pd);
/* A constant buffer b re-laid out for kernel k (a permutation and/or blocking of its dims,
 * e.g. weights [M,C,kh,kw] -> [C,kh,kw,M], a [K,N] matrix -> column panels [N/NR,K,NR]; a
 * partial last block is padded with zeros), k's loads of b rewritten to read it: index /
 * block and index % block are simplified by the loop ranges where they allow (a tile loop
 * stepping by the block), else kept as divisions. b leaves k's parameters; the new buffer is
 * named b's name + "_" + layout. Contents follow b's (none for a parsed program). */
Buf *loop_pack(Program *p, Kernel *k, Buf *b, const char *layout, int rank, const PackDim *pd);
/* The iterations of l (constant bounds, step 1) at which every condition inside that reads
 * l's variable is provably true (a convolution's interior columns, where no tap reads
 * padding): *front iterations before the first and *back after the last. False if there
 * are none, or if either border is longer than BORDER_SCAN (65536) iterations. */
bool loop_interior(Program *p, Kernel *k, const Stmt *l, int64_t *front, int64_t *back);
/* Merges outer (for a in 0..A) and the one loop that is its whole body (for b in 0..B), both
 * plain parallel loops, into one loop over a*B + b (the variable of outer, now 0..A*B), when
 * every access in the body that reads a or b reads them exactly as its last two indices, or
 * with `anywhere` as two adjacent indices (a
 * variable of a loop inside that runs once counts as its value: a 1x1 conv's taps) of a
 * buffer whose dims there are (A, B), at the same dims in every access of that buffer, and a
 * and b appear nowhere else (no condition, no other index): each such buffer, a kernel
 * parameter, is replaced by a view with those two dims merged, read and written at the new
 * variable. A 1x1 convolution's pixels so become one axis: the contiguous columns of a GEMM
 * in NCHW ([N, C, H*W]), the rows of pixels in NHWC ([N, H*W, C]). False, and nothing
 * changed, if not so. */
bool loop_coalesce(Program *p, Kernel *k, Stmt *outer, bool anywhere);
/* loop_coalesce with `anywhere`, where a buffer's index at the outer loop's dim may also be
 * the outer variable plus terms of other variables (h + kh: the rows a Kx1 conv's taps read,
 * the dim then at least a's extent A); the merged index is then a*B + b plus those terms
 * times B. So a conv whose taps span rows only (kw = 1, stride 1, no padding along the width)
 * runs over its pixels as one axis, as a 1x1 does. */
bool loop_coalesce_shifted(Program *p, Kernel *k, Stmt *outer);
/* Would permuting b's dims by perm (as buf_permute) move any element: do its dims of extent
 * other than 1 change their order? ([1, C, 1, 1] -> [1, 1, 1, C] moves none.) */
bool permute_moves_data(const Buf *b, const int *perm);
/* Temporary b (a root B_TEMP, without views unless the permutation moves no element:
 * permute_moves_data) stored in another order: its dim d becomes the
 * original dim perm[d] (e.g. {0, 2, 3, 1}: NCHW -> NHWC), and every access of every kernel
 * has its indices permuted alike, so every kernel still computes the same thing and only
 * the memory order changes (no reorder kernel is needed: each producer and consumer reads and
 * writes the new order directly; whether that is fast is the caller's choice). Each kernel
 * touching b notes `layout(%b,LAYOUT)`. False, and nothing changed, if b is not such a
 * temporary. */
bool buf_permute(Program *p, Buf *b, const int *perm, const char *layout);

/* Reads of input x (a KP_IN parameter of k, loaded at affine indices) redirected to a
 * zero-padded copy: a new B_TEMP xp as large as the index ranges of x's loads over their loops
 * (x[i] is xp[i + before]), written by a new KC_COPY kernel `k_pad` (ops "Pad") inserted just
 * before k, and the ifs dropped whose conditions only say that an index of x is in bounds
 * (e >= 0, e < dim) of a body that stores nothing and only accumulates r = r + (.. * x[..] * ..)
 * with that index: where they were false each such term now adds 0 times the other factors,
 * which the caller knows to be finite (a product with a padded zero is then +-0: results may
 * differ from the guarded ones by the sign of a zero). The copy also covers what the later
 * kernels reading x (before anything writes it again) would need padded, and a later call
 * for one of them reads that copy instead of making another (p->pad_copies). Returns whether
 * k now reads a padded copy; *copy is the new copy kernel, or NULL where k reads an earlier
 * one. False, and nothing changed, if no load leaves x or no guard can go. With skew, an
 * innermost dim of a multiple of 4 KiB gets a vector of 64 bytes more (LOOP_PAD_SKEW), never
 * read: see loop_pad. */
bool loop_pad(Program *p, Kernel *k, Buf *x, bool skew, Kernel **copy);
/* Resolves the provable ifs and selects of a kernel (what peel does on each piece). */
void resolve_conditions(Program *p, Kernel *k);
/* The integer divisions and remainders in the kernel's load and store indices removed where
 * the loop ranges prove them (kr_simplify): after split(i,D), (o + ii) / D is o / D. */
void simplify_divisions(Program *p, Kernel *k);

#endif
