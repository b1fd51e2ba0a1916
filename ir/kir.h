/* kir.h - the loop-level kernel IR that lowering produces and the backend turns into LLVM IR.
 *
 * A Program is a list of Kernels run in order over Bufs. A Buf is a typed n-d array with one
 * storage: a graph input, a graph output, a constant (weights, in the object's rodata) or a
 * temporary that bufferization places in the caller's arena. A Buf may be a view (`alias`) of
 * another Buf's storage with another shape (Reshape, Flatten, ...).
 *
 * A Kernel is a statement tree: loops with constant bounds, stores of an expression into a Buf
 * element, assignments to kernel-local scalar registers (accumulators), and conditionals.
 * Expressions are pure trees: constants, loop variables, scalar reads, loads, unary/binary
 * operators, select. Indices are multi-dimensional (one expression per dimension of the Buf);
 * the backend linearises them with the Buf's row-major strides.
 *
 * Invariants (kir_verify checks the structural ones):
 * - Every param a kernel touches is in its params[] with its mode (in, out, inout); a buffer
 *   is written only by kernels that have it as out/inout.
 * - "Write once": a kernel stores every element of each of its KP_OUT params exactly once, the
 *   final value, and never loads a KP_OUT param. This is what makes fusion legal (passes/fuse.c).
 *   A kernel that must read back what it wrote declares the buffer KP_INOUT.
 * - Loop variables are numbered per kernel (0..nvars-1); a variable is used only inside its loop.
 * - Scalar registers are numbered per kernel (0..nscalars-1), typed, set before being read.
 * - Index expressions have type DT_INDEX; a load/store has exactly buf->rank indices, each
 *   within [0, dims[d]) at run time. Lowering guards padded/out-of-range reads with selects or
 *   ifs so that no load ever leaves its buffer. */
#ifndef ONNXCC_KIR_H
#define ONNXCC_KIR_H
#include "ir.h"

typedef enum BufKind { B_TEMP, B_INPUT, B_OUTPUT, B_CONST } BufKind;

typedef struct Buf {
    int id;
    char *name;                     /* the graph value it came from; unique in the program
                                       (kir_buf_new appends .2, .3, ... if taken) */
    DType dtype;
    int rank;
    int64_t dims[MAX_RANK];
    BufKind kind;
    int io_index;                   /* B_INPUT/B_OUTPUT: position in the run() arrays */
    const void *data;               /* B_CONST: contents */
    struct Buf *alias;              /* non-NULL: a view of alias's storage (root via kir_root) */
    bool string;                    /* a string tensor (ir.h): uint8, its last dim is the
                                       capacity ir_strlen, the others the ONNX shape (text:
                                       "string" after an input's or output's position) */
    struct Buf *dims_of;            /* B_OUTPUT int64[rank of dims_of]: run() writes here the
                                       actual dims of output dims_of, a data-dependent shape
                                       whose dims above are its capacity (text: "dims of %x") */
    bool nibbles;                   /* an int8/uint8 B_CONST, B_INPUT or B_OUTPUT whose values fit
                                       in 4 bits (an int4/uint4 tensor): stored two a byte, low
                                       nibble first (a constant's data holds a value a byte, the
                                       object packs it); loads sign- or zero-extend them, stores
                                       replace their nibble (backend/kernel.c, nibble_load and
                                       nibble_store), so no two threads may store into one
                                       (parallelize.c). The caller's buffer is kir_io_nbytes. */
    bool crumbs;                    /* with nibbles: int2/uint2, four values a byte, lowest bits
                                       first (text: "crumbs" instead of "nibbles") */
    int64_t offset;                 /* B_TEMP roots: byte offset in the arena (bufferize); -1 before */
    int first, last;                /* B_TEMP roots: live range in kernel indices (bufferize) */
} Buf;

typedef enum ExprKind {
    E_CONST,    /* type DT_FLOAT/...: value in f (floats) or i (integers, bool, index) */
    E_VAR,      /* loop variable `var` (DT_INDEX) */
    E_SCALAR,   /* scalar register `var` */
    E_LOAD,     /* buf[args[0..rank)] */
    E_UN,       /* op(args[0]) */
    E_BIN,      /* op(args[0], args[1]) */
    E_SELECT,   /* args[0] (bool) ? args[1] : args[2] */
} ExprKind;

/* Scalar operators. Unary ops take and give the operand type unless noted; comparisons give
 * DT_BOOL; K_CAST converts args[0] to the Expr's type. The math ones (K_EXP, K_LOG, K_TANH,
 * K_ERF, K_POW, ...) are expanded into plain arithmetic by the backend (no libm).
 * Semantics shared by the backend and the interpreter (kir_interpret):
 * - Types in expressions: DT_FLOAT, DT_DOUBLE, the integer dtypes, DT_BOOL (a 1-bit truth
 *   value; 1 byte 0/1 in memory), DT_INDEX (signed, pointer-sized: i64 on x86-64, i32 on
 *   Cortex-M). Binary operands have equal types. Unsigned dtypes compare/divide unsigned.
 * - K_DIV/K_REM on integers: C semantics (truncate toward zero; remainder has the dividend's
 *   sign). Division by zero is undefined; rules must not produce it.
 * - K_MIN/K_MAX on floats: if either operand is NaN the result is NaN.
 * - K_ROUND: half to even. K_SIGN: -1, 0 or 1. K_RECIP: 1/x. K_SIGMOID: 1/(1+exp(-x)).
 * - K_SIN..K_ATANH: as C's sinf/sin...; NaN outside the domain (asin, acos: |x| > 1; acosh:
 *   x < 1; atanh: |x| > 1), atanh(+-1) = +-inf.
 * - K_POW: x^y; for x < 0 and integral y the sign follows y's parity; NaN for x < 0 otherwise.
 * - K_CAST: float->int truncates toward zero; anything->bool is (x != 0); bool->number 0/1.
 * - K_BITCAST: the operand's bits in memory read as the Expr's type, of the same size (BitCast;
 *   not bool or float8, whose registers do not hold their bits). Text: bitcast<T>(x).
 * - DT_FLOAT16, DT_BFLOAT16: 2-byte IEEE bit patterns in memory, float32 values in expressions
 *   (so rules treat them like any float type). A load converts exactly; arithmetic is float32
 *   arithmetic with no rounding in between; a store and a K_CAST to them round to the 16-bit
 *   format, to nearest even (bfloat16 too), overflowing to inf, NaN kept NaN (quiet, with its
 *   sign). K_CAST from them to float is exact; other sources go through float first (double
 *   and int64 to a half thus round twice: double->float16 only within 2^-29 of a tie).
 *   Fusing a half store into its load drops that rounding, so fused code may be more precise
 *   than the kernels one by one. The backend converts with integer code on the bits (no
 *   compiler-rt half calls); kir_interpret with the same arithmetic.
 * - The float8 types (DT_FLOAT8E4M3FN ... DT_FLOAT8E5M2FNUZ, ir/float8.c): bytes in memory,
 *   float32 values in expressions, as the halves. A store and a K_CAST to them round to
 *   nearest even and saturate a finite value past the largest to it (an infinity stays one
 *   in e5m2 and saturates in the others); Cast's `saturate` is the rules' (ir/float8.c).
 *   float4e2m1 (DT_FLOAT4E2M1) likewise, a code a byte: rounded to nearest even, saturated
 *   to +-6, infinities too, and NaN to +6 (it has neither). float8e8m0 (DT_FLOAT8E8M0): the
 *   exponent of the float32 rounded up, saturated at 2^127, infinities and NaN NaN, 2^-127
 *   kept (e8m0_encode); Cast's other round_modes are the rules' (rule_e8m0_cast).
 * - K_NOT, K_AND, K_OR, K_XOR: on DT_BOOL (K_AND/OR/XOR also bitwise on integers).
 * - K_DOT4: on DT_INT32 only; each operand holds four bytes (byte j = bits 8j..8j+7), the
 *   sum over j of a's byte j as unsigned times b's byte j as signed, in int32: one lane of
 *   x86's vpdpbusd without the accumulation (the backend folds r + dot4(a, b) into one).
 * - K_DOT2: on DT_INT32 only; each operand holds two signed 16-bit halves (half j = bits
 *   16j..16j+15), the sum of the products of a's half j and b's half j in int32: one lane of
 *   x86's pmaddwd (its one overflow, both pairs -32768 * -32768, wraps as pmaddwd does). The
 *   int8 convs' form on x86 without VNNI (passes/ops/conv.c). */
/* The operator table: X(name, arity, flags). Arity (1 or 2) and the flags are looked up
 * (kop_arity[], kop_flags[]); no code tells operators apart by their position, except that
 * K_LT..K_NE stay contiguous and in this order: backend/kernel.c's compare() indexes its
 * predicate tables by op - K_LT (ORDER K_LT K_LE K_GT K_GE K_EQ K_NE). The text form
 * (ir/kprint.c, ir/kparse.c) writes an operator as its name in lower case unless it has an
 * infix spelling. The trig/hyperbolic ops are kept accurate to a few ulp of libm;
 * K_SIN/K_COS/K_TAN reduce their argument with Cody-Waite, exact for |x| < 1e5 (float) and
 * 1.6e6 (double), and lose accuracy beyond (backend/math.c). */
enum {
    KF_CMP = 1,                     /* a comparison: gives DT_BOOL */
    KF_BITWISE = 2,                 /* bool and integer operands only, never float */
};
#define KOPS(X) \
    X(NEG, 1, 0) X(ABS, 1, 0) X(NOT, 1, 0) X(CAST, 1, 0) X(SQRT, 1, 0) X(EXP, 1, 0) \
    X(LOG, 1, 0) X(TANH, 1, 0) X(SIGMOID, 1, 0) X(ERF, 1, 0) X(FLOOR, 1, 0) X(CEIL, 1, 0) \
    X(ROUND, 1, 0) X(RECIP, 1, 0) X(SIN, 1, 0) X(COS, 1, 0) X(TAN, 1, 0) X(ASIN, 1, 0) \
    X(ACOS, 1, 0) X(ATAN, 1, 0) X(SINH, 1, 0) X(COSH, 1, 0) X(ASINH, 1, 0) X(ACOSH, 1, 0) \
    X(ATANH, 1, 0) X(SIGN, 1, 0) X(BITCAST, 1, 0) \
    X(ADD, 2, 0) X(SUB, 2, 0) X(MUL, 2, 0) X(DIV, 2, 0) X(REM, 2, 0) X(MIN, 2, 0) \
    X(MAX, 2, 0) X(POW, 2, 0) \
    X(LT, 2, KF_CMP) X(LE, 2, KF_CMP) X(GT, 2, KF_CMP) X(GE, 2, KF_CMP) X(EQ, 2, KF_CMP) \
    X(NE, 2, KF_CMP) \
    X(AND, 2, KF_BITWISE) X(OR, 2, KF_BITWISE) X(XOR, 2, KF_BITWISE) X(DOT4, 2, 0) \
    X(DOT2, 2, 0) X(ERF1P, 1, 0)
typedef enum KOp {
#define X(n, arity, flags) K_##n,
    KOPS(X)
#undef X
    K_COUNT
} KOp;
extern const char *const kop_name[K_COUNT];    /* "ADD", "EXP", ... */
extern const unsigned char kop_arity[K_COUNT];  /* operands: 1 or 2 */
extern const unsigned char kop_flags[K_COUNT];  /* KF_* */

typedef struct Buf Buf;
typedef struct Expr {
    ExprKind kind;
    KOp op;
    DType type;
    double f;
    int64_t i;
    int var;                        /* E_VAR: loop variable; E_SCALAR: register */
    Buf *buf;                       /* E_LOAD */
    struct Expr **args;
    int nargs;
} Expr;

typedef enum StmtKind { S_LOOP, S_STORE, S_SET, S_IF } StmtKind;

typedef struct Stmt {
    StmtKind kind;
    struct Stmt *next;              /* statement list */
    /* S_LOOP: for (var = lo; var < hi; var += step) body */
    int var;
    Expr *lo, *hi;                  /* DT_INDEX; constants unless a pass made a tail bound */
    int64_t step;
    struct Stmt *body;
    unsigned hints;                 /* LH_* */
    int64_t redo;                   /* LH_REDO: values of var from lo done before (below) */
    int64_t tasks;                  /* LH_PARALLEL: how many tasks share the loop's steps */
    /* S_STORE: buf[idx[0..rank)] = val */
    Buf *buf;
    Expr **idx;
    Expr *val;                      /* also S_SET: scalar register `var` = val */
    /* S_IF: if (cond) then else els */
    Expr *cond;
    struct Stmt *then, *els;
} Stmt;

/* LH_VECTOR: the loop is one vector of hi - lo lanes (constant bounds, step 1, 2..64 lanes),
 * which the backend emits as straight-line vector code. Its meaning is the scalar loop's:
 * iterations are independent, registers set in the body are lane-private (set before read on
 * every path of the body, never read outside vector loops), registers only read are uniform.
 * Loop bounds and if conditions inside it must not depend on the lane (kverify.c). */
/* LH_REDUCTION | LH_VECTOR (`[reduction, vector]`): a vector reduction. Constant bounds, step
 * 1, any extent. Its body stores nothing and updates one or more accumulator registers only
 * as `r = r OP e` or `r = e OP r`, OP one of ADD, MUL, MIN, MAX (the same for every update of
 * r), on a float or integer register (not bool or index), with e reading no accumulator; it
 * reads accumulators nowhere else. Other registers set in the body are lane-private and
 * loops and ifs inside have uniform headers, as in LH_VECTOR loops. Meaning: the scalar
 * loop's, except that each accumulation may be reassociated - the backend keeps partial
 * results in vector lanes and combines them after the loop (float sums then round
 * differently, as FMA contraction does; float MIN/MAX may pick the other zero of -0/+0),
 * while kir_interpret runs it in order. At -O0/-O1 and with --fp-strict the backend emits
 * float accumulations as the scalar loop. kir_reduction_form checks the body. */
/* LH_REDO (`[redo N]`): the loop's first N values of its variable (lo .. lo+N-1) store again
 * what loops before it stored already, the same values (a rest grown back into a whole vector:
 * passes/loops.h loop_overlap). The loop still runs them; the mark only keeps them out of
 * kir_kernel_cost's count of the work. Constant bounds, 0 < N <= hi - lo. */
/* LH_PARALLEL (`[parallel N]`): on every loop of a statement list of loops only (a group):
 * NAME_run_par may run the group as N tasks at once, task t running, of every loop, the
 * values of its variable from cut t to cut t + 1 (kir_parallel_cuts; passes/parallelize.c says
 * when that is legal). Constant bounds, step > 0, N >= 2, the same N on each loop of the
 * group; not a reduction or redo loop. A vector loop of the group is one step (its lanes run
 * in one task). The meaning is the loops': kir_interpret and
 * NAME_run run them in order. */
/* Loop hints; their words in the text form are kir_hint_name[bit] (ORDER LH). */
enum { LH_TILE = 1, LH_REDUCTION = 2, LH_VECTOR = 4, LH_REDO = 8, LH_PARALLEL = 16 };
enum { MAX_LANES = 64 };

typedef enum ParamMode { KP_IN = 1, KP_OUT = 2, KP_INOUT = 3 } ParamMode;

/* What lowering knows about a kernel's shape of computation: guides fusion and scheduling. */
typedef enum KernelClass {
    KC_GENERIC,     /* anything */
    KC_ELEMENTWISE, /* loops over out dims (vars 0..rank-1 in order, lo 0, step 1), one store
                       out[v0..vn-1] = expr; loads only of params other than out */
    KC_CONTRACTION, /* matmul/conv-like: parallel loops outside, reduction loops inside */
    KC_COPY,        /* pure data movement (transpose, concat, pad, gather, ...) */
} KernelClass;

/* Control kernels delimit structured regions of the kernel list, the kernel IR's form of If,
 * Loop and Scan: they compute nothing themselves, run() branches and loops around the
 * kernels between them. Regions nest and are balanced (kir_verify):
 *   KCTL_LOOP ... KCTL_END   counter[] = 0;
 *                            while ((no trip || counter[] < trip) && (!cond || cond[])) {
 *                                if (max >= 0 && counter[] >= max) return ERR_TRIP;
 *                                ...; counter[] += 1; }
 *                            trip is the buffer `trip` (read once on entry) or the constant
 *                            `ntrip` (-1: none); `max` bounds arena buffers sized for it
 *                            (scan outputs) when the trip count is known only at run time,
 *                            or is --max-trip's bound on a loop without them.
 *   KCTL_IF [KCTL_ELSE] KCTL_END   if (cond[]) ... else ...
 * counter is an int64 scalar buffer (the body reads the iteration number from it), trip an
 * integer and cond a bool one-element buffer; all are params of the control kernel (counter
 * inout, the others in), so liveness and the verifier see them. Kernels inside a loop region
 * run once per iteration: bufferize keeps every temporary touched there live over the whole
 * region, and fuse never fuses across a control kernel. */
typedef enum KernelCtl { KCTL_NONE, KCTL_LOOP, KCTL_IF, KCTL_ELSE, KCTL_END } KernelCtl;

typedef struct Kernel {
    int id;
    char *name;                     /* e.g. "conv1" (the node name), unique in the program */
    char *ops;                      /* ONNX op(s) it computes, e.g. "Conv+Relu" after fusion */
    const char **nodes;             /* the ONNX nodes it computes (lowering, fuse; for
                                       --report), not in the text form */
    int nnodes;
    KernelClass kclass;
    Buf **params;
    ParamMode *modes;
    int nparams, capparams;
    Stmt *body;
    int nvars;
    DType *scalars;                 /* types of the scalar registers */
    int nscalars, capscalars;
    bool dead;                      /* removed by a pass; dropped by kir_compact */
    int copies;                     /* its node's copies (band_rows): the kernel runs the same code
                                       as that many others, over other rows (0: one of its kind);
                                       not in the text form */
    Buf *prefetch;                  /* an in-param whose contiguous vector loads also prefetch
                                       prefetch_ahead bytes further on (passes/sched_stream.c;
                                       text: "prefetch %b N" after the params), or NULL */
    int64_t prefetch_ahead;
    Expr *prefetch_row;             /* with prefetch: NULL, or the row r in [0, prefetch_rows)
                                       of the loops that reread one block of prefetch (its first
                                       index); the first such load of each basic block then also
                                       prefetches r/R of the next block plus its own offset in
                                       the block / R (text: "next EXPR of R" after N) */
    int64_t prefetch_rows;
    bool joined;                    /* its parallel-for is the kernel before's (the previous live
                                       one; passes/parallelize.c, join_runs): NAME_run_par runs
                                       task t of each kernel of a run of joined kernels in task t
                                       of one parallel-for. Each has an LH_PARALLEL group of the
                                       same task count, and none writes a buffer another of the
                                       run touches (kverify.c); bufferize keeps the run's
                                       temporaries live over the whole run. Text: "joined" after
                                       the params */
    char *sched;                    /* the loop primitives the schedule pass applied, in order
                                       ("split(i1,16) jam(i0,6) ..."), or NULL */
    KernelCtl ctl;                  /* KCTL_NONE for a kernel that computes */
    Buf *counter, *trip, *cond;     /* control kernels (above) */
    int64_t ntrip, max;
    /* the schedule's tunable candidate (passes/tune.h): the kernel's signature (0: none), the
     * candidate taken (TuneKind, 0: none yet), its cost predicted by passes/sched_tile.c's model
     * (of the first loop it tiles; -1: none), and whether a tuning file chose it */
    uint64_t tune_sig;
    int tune_kind, tune_a, tune_b;
    int64_t tune_cost;
    bool tune_file;
} Kernel;

typedef struct Program {
    Arena *arena;
    char *name;                     /* model name: C identifier used for symbols */
    Buf **bufs;
    int nbufs, capbufs;
    Kernel **kernels;
    int nkernels, capkernels;
    Buf **inputs, **outputs;        /* run() order */
    int ninputs, noutputs;
    int64_t arena_size;             /* bufferize */
    int64_t arena_lower_bound;      /* bufferize: the most bytes live at one kernel (no placement does
                                       better); the header's NAME_ARENA_LOWER_BOUND */
    int arena_peak;                 /* bufferize: the kernel where that many are live (-1: none) */
    int arena_align;                /* bytes; set from the target before bufferize */
    int vector_bytes;               /* target's preferred vector width (schedule) */
    bool dot2;                      /* x86 with pmaddwd but no VNNI: int8 convs take the dot2 form
                                       (passes/ops/conv.c) */
    bool ubs;                       /* ... and pmaddubsw (SSSE3): 7-bit weights keep dot4 */
    int opt_level;                  /* -O0..-O3 */
    bool fp_strict;                 /* no FMA contraction even at -O2 (the backend) */
    bool profile;                   /* --profile: run() times each kernel (backend/emit.c) */
    bool tsan;                      /* --sanitize-thread (tests): ThreadSanitizer's checks in the code */
    bool split_all;                 /* --split-all (tests): parallelize ignores the work thresholds */
    bool banded;                    /* lowered under --max-arena's budget, where band_rows may have
                                       cut the graph in row bands (pad_in_place) */
    bool ram_first;                 /* --max-arena found the default arena too big: lowering trades
                                       time for RAM (x4_max) */
    int64_t x4_max;                 /* ram_first: an int8 conv whose im2col words would be larger than
                                       this and than its output reads its input in place instead
                                       (passes/ops/conv.c) */
    int64_t x4_largest;             /* lowering's result: the largest im2col words buffer kept that
                                       is larger than its conv's output (0: none) */
    const struct Tuning *tuning;    /* --tune-file / --autotune (passes/tune.h), or NULL */
    const char *tune_target;        /* the target part of the tuning keys ("TRIPLE:ISA") */
    int64_t flash_size, stack_size; /* of the emitted object, -1 unknown (backend/facts.c) */
    /* where the constant tensors (the weights) go (backend/weights.c): NULL and false keep them
     * in the object's read-only data; weights_section names the section they go to; with
     * weights_external they go to a blob that NAME_run_w() takes through a pointer, laid out
     * as weights[] in order at weight_offset[buffer id] */
    const char *weights_section;
    bool weights_external;
    Buf **weights;
    int nweights;
    int64_t *weight_offset;
    int64_t weights_size;           /* bytes of that section or blob after be_emit; 0: none */
    uint64_t weights_key;           /* the blob's identity (a hash of its layout and bytes) */
    /* the zero-padded copies loop_pad made (passes/loops.c): a later kernel reading the same
     * input inside a copy's extent reads that copy (a ConvTranspose's stride phases) */
    struct LoopPad *pad_copies;
} Program;

typedef struct LoopPad {
    Buf *x, *xp;                    /* x[i] is xp[i + before] */
    int64_t before[MAX_RANK];
    struct Kernel *copy;            /* the kernel writing xp */
    struct LoopPad *next;           /* the copy made before this one, or NULL */
} LoopPad;

/* ---- building (ir/kir.c) ---- */
Program *kir_program_new(Arena *a, const char *name);
Buf *kir_buf_new(Program *p, const char *name, DType t, int rank, const int64_t *dims, BufKind k);
Buf *kir_view_new(Program *p, Buf *of, const char *name, int rank, const int64_t *dims);
Buf *kir_root(Buf *b);                          /* follow alias to the storage owner */
int kir_dims_output(const Program *p, const Buf *b); /* output holding b's run-time dims, or -1 */
int64_t kir_numel(const Buf *b);
/* Whether some parameter of k is 8-bit integer data (int8/uint8): a kernel of a quantized
 * model, or a byte kernel of a string model. */
bool kir_byte_kernel(const Kernel *k);
size_t kir_nbytes(const Buf *b);
int kir_io_rank(const Buf *b);                  /* rank of the ONNX shape (a string's less one) */
size_t kir_io_nbytes(const Buf *b);             /* bytes of an input or output as the caller
                                                   holds it (4-bit values two a byte) */
int kir_io_dtype(const Buf *b);                 /* its ONNX type number (int4: 22, string: 8) */
/* bits-bit values (4: Buf.nibbles, 2: and crumbs) between one a byte (int8/uint8) and 8/bits a
 * byte, lowest bits first: pack writes (n * bits + 7) / 8 bytes, the unused bits of the last
 * zero; unpack sign-extends when `sign`. */
void kir_nibbles_pack(uint8_t *packed, const uint8_t *v, size_t n, int bits);
void kir_nibbles_unpack(uint8_t *v, const uint8_t *packed, size_t n, bool sign, int bits);
static inline int kir_pack_bits(const Buf *b) { return b->nibbles ? b->crumbs ? 2 : 4 : 0; }
Kernel *kir_kernel_new(Program *p, const char *name, const char *ops, KernelClass c);
void kir_param(Program *p, Kernel *k, Buf *b, ParamMode m); /* add or widen (in+out=inout) */
int kir_param_index(const Kernel *k, const Buf *b);          /* b's place in k->params, or -1 */
/* Appends the n ONNX node names to k->nodes (a fused kernel adds those of the one it took). */
void kir_add_nodes(Program *p, Kernel *k, const char *const *names, int n);
int kir_var(Kernel *k);                         /* a fresh loop variable */
int kir_scalar(Program *p, Kernel *k, DType t); /* a fresh scalar register */
void kir_compact(Program *p);                   /* drop dead kernels, renumber */
/* A control kernel (counter/trip/cond may be NULL where the kind has none; ntrip, max -1). */
Kernel *kir_ctl_new(Program *p, const char *name, KernelCtl c, Buf *counter, Buf *trip,
                    int64_t ntrip, Buf *cond, int64_t max);
/* The index of the KCTL_ELSE (if any, else of the KCTL_END) matching control kernel i. */
int kir_ctl_match(const Program *p, int i);
/* How many times kernel i runs an inference: the product of the constant trip counts of the
 * loop regions around it (one for a region without one: its trips are known only at run time). */
int64_t kir_runs(const Program *p, int i);

Expr *kx_const(Program *p, DType t, double v); /* float or integer constant of type t */
Expr *kx_int(Program *p, DType t, int64_t v);  /* integer constant keeping all 64 bits */
Expr *kx_index(Program *p, int64_t v);          /* DT_INDEX constant */
Expr *kx_var(Program *p, int var);
Expr *kx_scalar(Program *p, Kernel *k, int reg);
Expr *kx_load(Program *p, Buf *b, Expr **idx);  /* idx: b->rank expressions (copied) */
Expr *kx_un(Program *p, KOp op, Expr *a);       /* type of a (bool for K_NOT) */
Expr *kx_cast(Program *p, DType to, Expr *a);
Expr *kx_bitcast(Program *p, DType to, Expr *a);
Expr *kx_bin(Program *p, KOp op, Expr *a, Expr *b); /* comparisons: DT_BOOL */
Expr *kx_select(Program *p, Expr *c, Expr *a, Expr *b);
/* index helpers: a*c + b with constant folding of trivial cases */
Expr *kx_add(Program *p, Expr *a, Expr *b);
Expr *kx_mul(Program *p, Expr *a, int64_t c);
Expr *kx_addc(Program *p, Expr *a, int64_t c);

Stmt *ks_loop(Program *p, int var, int64_t lo, int64_t hi, int64_t step, Stmt *body);
Stmt *ks_store(Program *p, Buf *b, Expr **idx, Expr *val); /* idx copied */
Stmt *ks_set(Program *p, int reg, Expr *val);
Stmt *ks_if(Program *p, Expr *cond, Stmt *then, Stmt *els);
Stmt *ks_seq(Stmt *a, Stmt *b);                 /* append list b to list a; returns head */
/* for (var = 0; var < n; var++) body, marked LH_REDUCTION (the schedule keeps it inside). */
Stmt *ks_red_loop(Program *p, int var, int64_t n, Stmt *body);
/* a && b where either may be NULL (no condition): NULL when both are. */
Expr *kx_and(Program *p, Expr *a, Expr *b);

Expr *kx_clone(Program *p, const Expr *e);
bool kx_equal(const Expr *a, const Expr *b);    /* the same tree: same operators, operands, buffers */
bool expr_reads_var(const Expr *e, int var);   /* does e (may be NULL) read loop variable var? */
Stmt *ks_clone(Program *p, const Stmt *s);

/* ---- text form, verifier, interpreter ---- */
void kir_print(FILE *f, Program *p);
/* Words of the text form, indexed by BufKind, KernelClass, ParamMode and LH_* bit number (the
 * last NULL-terminated); the printer writes them and the parser (ir/kparse.c) reads them. */
extern const char *const kir_bufkind_name[], *const kir_kclass_name[], *const kir_mode_name[],
    *const kir_hint_name[];
/* Read the text kir_print writes (ir/kparse.c). `path` names the text in messages; a mistake
 * in it is a user error at path:line:col. B_CONST buffers come back without contents: the
 * text form does not carry weights, so a parsed program can go through the kernel passes and
 * be printed, not run. */
Program *kir_parse(Arena *a, const char *path, const char *text);
/* Print p, parse the text, print again; die()s naming the pass if the texts differ. */
void kir_roundtrip(Program *p, const char *after);
void kir_verify(Program *p, const char *after);     /* die()s naming the pass on failure */
/* Whether body has the form of a vector reduction's body (LH_REDUCTION | LH_VECTOR above,
 * apart from the lane rules kir_verify checks): acc[r] (k->nscalars entries) gets the
 * operator updating accumulator r, K_COUNT for other registers; if not, why[0..nwhy) says
 * what is wrong (why may be NULL). Loop hints of nested loops are not looked at. */
bool kir_reduction_form(const Kernel *k, const Stmt *body, KOp *acc, char *why, size_t nwhy);
/* Run the program on the host (constant folding; tests). inputs/outputs as in run(). */
void kir_interpret(Program *p, const void *const *inputs, void *const *outputs);

/* ---- cost (ir/kcost.c) ----
 * Multiply-accumulates per run (a float MUL under a float ADD/SUB, times the trip counts of its
 * loops; both sides of an if at the larger one) and the bytes of the kernel's params. */
void kir_kernel_cost(const Kernel *k, int64_t *macs, int64_t *bytes);
/* The same for kernel i of p over an inference: times its runs (kir_runs). */
void kir_kernel_work(const Program *p, int i, int64_t *macs, int64_t *bytes);
/* The first loop of k's LH_PARALLEL group (anywhere in the kernel; passes/parallelize.c marks
 * at most one group), or NULL. The group is that loop and the loops after it in its list. */
const Stmt *kir_parallel_loop(const Kernel *k);
/* Whether kernels a and b may run at once: neither writes a buffer (root) the other touches. */
bool kir_independent(const Kernel *a, const Kernel *b);
/* The end of the run of joined kernels (Kernel.joined) that kernel i heads: the index after
 * its last kernel (i + 1 for a kernel no kernel joins). */
int kir_joined_end(const Program *p, int i);
/* Drops every join: a pass that reshapes kernels (fuse, schedule, pad_in_place) runs before
 * parallelize decides them, on kernel IR text that may hold joins its changes would break. */
void kir_unjoin(Program *p);
/* The tasks' ranges of the group starting at `first`: task t runs, of each of its loops, the
 * values of the variable from cuts[t] to cuts[t + 1] (first->tasks + 1 of them; each cut lies
 * on the step grid of every loop whose range holds it, so no step is ever cut; a task may be
 * empty). */
void kir_parallel_cuts(const Stmt *first, int64_t *cuts);
/* The step of a loop of a parallel group as the cuts see it: a vector loop is one step. */
int64_t kir_parallel_step(const Stmt *s);

#endif
