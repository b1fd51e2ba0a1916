/* ir.h - the graph IR: ONNX-level values (tensors with a dtype and a static shape) and nodes
 * (one ONNX operator each, with its attributes).
 *
 * The frontend builds it from the protobuf; graph passes (shape inference, constant folding,
 * canonicalisation, graph-level fusion) rewrite it; lowering (passes/lower.c) turns it into the
 * loop-level kernel IR of kir.h, after which it is no longer used.
 *
 * Conventions every pass relies on (checked by ir_verify):
 * - g->nodes is in topological order; a node with dead=1 is ignored by everyone and dropped by
 *   ir_compact().
 * - Value.producer is the node writing the value, NULL for graph inputs and constants.
 * - A constant value (initializer, Constant output, folded result) has data != NULL holding
 *   numel(v) elements of its dtype, packed, native byte order.
 * - An optional input that is absent is NULL in Node.in[].
 * - After shape inference every live value has dtype != DT_UNDEF and rank >= 0 and all dims
 *   >= 0 (static shapes: symbolic dims are fixed by --shape or reported as errors). A value
 *   marked dyn holds a data-dependent shape within those dims (its capacity; dynmask says
 *   which dims vary), laid out at the capacity's strides when another node reads it. */
#ifndef ONNXCC_IR_H
#define ONNXCC_IR_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* ONNX TensorProto.DataType numbers. DT_INDEX is ours: the target's pointer-sized integer used
 * for loop variables and index arithmetic in the kernel IR; it never appears in a graph. */
typedef enum DType {
    DT_UNDEF = 0, DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4, DT_INT16 = 5,
    DT_INT32 = 6, DT_INT64 = 7, DT_STRING = 8, DT_BOOL = 9, DT_FLOAT16 = 10, DT_DOUBLE = 11,
    DT_UINT32 = 12, DT_UINT64 = 13, DT_BFLOAT16 = 16,
    DT_FLOAT8E4M3FN = 17, DT_FLOAT8E4M3FNUZ = 18, DT_FLOAT8E5M2 = 19, DT_FLOAT8E5M2FNUZ = 20,
    /* ONNX numbers only, never a Value's or a Buf's dtype: an int4/uint4 tensor is int8/uint8
     * marked `nibbles` (Value.nibbles, Buf.nibbles) */
    DT_UINT4 = 21, DT_INT4 = 22,
    /* float4e2m1 (opset 23): a code a byte (in the low nibble) in the arena, like the float8
     * types; two a byte, as int4 (`nibbles`), in constants, graph inputs and outputs */
    DT_FLOAT4E2M1 = 23,
    /* float8e8m0 (opset 24): an unsigned power of two 2^(code - 127), 0xff NaN; a code a byte,
     * held as float32 like the float8 types (ir/float8.c) */
    DT_FLOAT8E8M0 = 24,
    /* ONNX numbers only, as int4: int8/uint8 marked `nibbles` and `crumbs`, four a byte */
    DT_UINT2 = 25, DT_INT2 = 26,
    DT_INDEX = 100,
} DType;
size_t dtype_size(DType t);        /* bytes per element in memory; 0 for unsupported;
                                      DT_STRING: ir_strlen */
/* Strings (README "Strings"): every element of a string tensor is char[ir_strlen], the bytes
 * of the string NUL-padded (a string of exactly ir_strlen bytes has no NUL). One capacity per
 * compilation, from --max-strlen; in the kernel IR a string tensor is a uint8 Buf with one
 * more dimension of ir_strlen bytes (Buf.string). */
extern size_t ir_strlen;
#define IR_STRLEN_DEFAULT 32
const char *dtype_name(DType t);   /* "float32", "int64", ... */
bool dtype_is_float(DType t);
bool dtype_is_unsigned(DType t);
bool dtype_supported(DType t);     /* can onnxcc compute with it (float32, int64, int32, bool, ...) */
bool dtype_known(DType t);         /* supported, or a string (which only some ops take: OPF_STRINGS) */
/* The 4-bit types (ONNX 21 uint4, 22 int4, 23 float4e2m1) are stored two a byte at the
 * interface (`nibbles`), the 2-bit ones (25 uint2, 26 int2) four a byte (`nibbles` and
 * `crumbs`); the integers are computed as the 8-bit ones. dtype_nibbles gives the DType of a
 * packed ONNX number (int8, uint8, float4e2m1; DT_UNDEF for the others), dtype_pack_bits its
 * bits (4, 2; 0 for the others), dtype_onnx the ONNX number of a value or buffer of dtype t
 * packed `bits` to a value (t itself when 0). */
DType dtype_nibbles(int onnx);
int dtype_pack_bits(int onnx);
int dtype_onnx(DType t, int bits);
/* The 8-bit floats (ir/float8.c): stored as bytes, held as float32 in registers and
 * computed in float32 like the 16-bit floats. dtype_is_minifloat: those, float4e2m1 and
 * float8e8m0, which are handled the same way, a code a byte (float4e2m1's sign at bit 3,
 * F8Format.sbit; float8e8m0 has no F8Format: e8m0_encode). */
bool dtype_is_float8(DType t);
bool dtype_is_minifloat(DType t);
typedef struct F8Format {
    int mbits, bias;
    unsigned maxmag, nan;           /* the largest finite magnitude's bits; NaN's (with sign
                                       unless uz) */
    bool uz, inf;                   /* no -0 (0x80 is NaN); has infinities (e5m2) */
    float overflow;                 /* |x| from which (or, !overflow_ge, past which) rounding
                                       passes the largest finite value */
    bool overflow_ge;
    int sbit;                       /* the sign's bit: 7, or 3 for float4e2m1 */
    bool nonan;                     /* float4e2m1: no NaN, which is encoded as +max (`nan`) */
} F8Format;
F8Format f8_format(DType t);
float f8_decode(DType t, uint8_t b);
uint8_t f8_encode(DType t, float x);
/* float8e8m0 from float: the float32 exponent field, raised by one when round_mode asks
 * (E8M0_UP: any fraction, the default; E8M0_NEAREST: a fraction of a half or more (at the
 * smallest exponent, more than a half); E8M0_DOWN: never), unless `saturate` and already the
 * largest (0xfe); infinities and NaN are NaN (0xff), the sign is ignored (as onnx's
 * reference numpy_helper.to_float8e8m0). A store and K_CAST use E8M0_UP and saturate. */
enum { E8M0_UP, E8M0_DOWN, E8M0_NEAREST };
uint8_t e8m0_encode(float x, bool saturate, int round_mode);

#define MAX_RANK 8

/* Size limits (README "Limits"): no tensor and no arena may span more bytes than the target
 * can address with room to spare: 2^31 - 1 bytes on 32-bit targets, 2^40 (1 TiB) on 64-bit
 * ones. With every size below 2^40, products of two sizes and sums of many cannot overflow
 * int64_t. Checked for every value by infer_shapes, for the arena by the backend. */
#define IR_MAX_BYTES_32 ((int64_t)INT32_MAX)
#define IR_MAX_BYTES_64 ((int64_t)1 << 40)

/* Every op onnxcc knows, from ir/ops.def. */
typedef enum Op {
#define OP(name, ...) OP_##name,
#include "ops.def"
#undef OP
    OP_COUNT,
    OP_UNKNOWN = OP_COUNT,  /* a node whose op_type is not in the table (reported by frontend) */
} Op;

enum {                              /* OpInfo.flags */
    OPF_VIEW = 1 << 0,              /* output is a re-shaped view of input 0 (no data moves);
                                       simplify drops it when the shape does not change */
    OPF_STRINGS = 1 << 1,           /* takes string tensors (any other op reading one is an error) */
    OPF_INTERNAL = 1 << 2,          /* made by a pass only (fuse_qdq's integer ops); a model
                                       that names it is refused as an unknown operator */
};
#define OPIN(i) (1u << (i))         /* OpInfo.shape_in: input i decides output shapes */

typedef struct Graph Graph;
typedef struct Node Node;
typedef struct Value Value;
struct Lower;                       /* passes/lower.h */

typedef struct OpInfo {
    const char *name;
    int since;                      /* oldest opset of the default domain accepted */
    int min_in, max_in, min_out, max_out;
    unsigned flags;
    unsigned shape_in;              /* OPIN(i) set: input i must be constant (decides shapes) */
    void (*infer)(Graph *g, Node *n);       /* sets dtype/shape of n->out[] (shape rules) */
    void (*lower)(struct Lower *L, Node *n); /* emits kernels for n (lowering rules) */
} OpInfo;
extern const OpInfo op_info[OP_COUNT];
Op op_lookup(const char *domain, const char *op_type);   /* OP_UNKNOWN if not in the table */
#define OP_INF 1000                 /* "any number" in min/max columns */
/* The opsets a model may import (README): 1 to OPSET_NEWEST of the default domain, version
 * 1 of ai.onnx.preview.training; the frontend refuses others (other domains only matter if a
 * node uses them, and no op of theirs is known). */
#define OPSET_NEWEST 26

typedef enum ValueKind { VK_TENSOR = 0, VK_SEQ, VK_OPT } ValueKind;

typedef struct Value {
    int id;                         /* index in g->values */
    char *name;                     /* ONNX name ("" never: the frontend names anonymous ones) */
    DType dtype;
    int rank;                       /* -1: unknown yet */
    int64_t dims[MAX_RANK];         /* -1: unknown yet (see sym) */
    char *sym[MAX_RANK];            /* symbolic dim names from the model, NULL if none */
    void *data;                     /* compile-time constant contents, NULL if not constant */
    Node *producer;
    bool is_input, is_output;       /* graph input (not an initializer) / graph output */
    bool dyn;                       /* data-dependent shape (NonZero, Unique, ...): dims are a
                                       capacity, the actual dims are computed at run time and
                                       travel in an int64 dims buffer (passes/ops/dynamic.c) */
    unsigned dynmask;               /* with dyn: bit d set if dim d is data-dependent (the others
                                       are exact); 0 means every dim is */
    int nuses;                      /* filled by ir_count_uses */
    bool nibbles;                   /* an int4/uint4 tensor stored two values a byte (Buf.nibbles):
                                       a constant read from one (dtype int8/uint8, data one value
                                       a byte, every value in 4 bits), or a graph input or output
                                       declared int4/uint4. Values computed inside the graph are
                                       int8/uint8 unmarked, one a byte in the arena */
    bool crumbs;                    /* with nibbles: int2/uint2, four values a byte */
    /* A sequence or optional (passes/ops/sequence.c) is resolved at compile time: its
     * elements are tensor Values (an optional's may be a sequence), listed in elems; dtype is
     * the element type and rank 0. Nothing is lowered for it: the rules rewrite its consumers
     * to read the elements, so it dies before lowering. */
    ValueKind kind;
    ValueKind elem_kind;            /* an optional's element: VK_TENSOR or VK_SEQ */
    Value **elems;
    int nelems;
} Value;

typedef enum AttrType {
    A_UNDEF = 0, A_FLOAT, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_FLOATS, A_INTS, A_STRINGS,
} AttrType;

typedef struct Attr {
    char *name;
    AttrType type;
    float f;
    int64_t i;
    char *s;                        /* A_STRING (NUL-terminated) */
    Value *t;                       /* A_TENSOR: a constant Value not in g->values */
    Graph *g;                       /* A_GRAPH: a subgraph (If's branches, Loop's and Scan's body) */
    float *floats;                  /* A_FLOATS */
    int64_t *ints;                  /* A_INTS */
    char **strings;                 /* A_STRINGS */
    int n;                          /* element count of floats/ints/strings */
} Attr;

typedef struct Node {
    int id;
    Op op;
    char *name;                     /* ONNX node name, or "<op_type>_<index>" if it had none */
    char *op_type, *domain;         /* as written in the model */
    int opset;                      /* opset version of the node's domain in this model */
    Value **in, **out;
    int nin, nout;
    Attr *attrs;
    int nattrs;
    bool dead;
    int copies;                     /* band_rows: one of this many copies of a layer, each over
                                       other rows of it (0: not a copy); its kernels' copies */
} Node;

struct Graph {
    Arena *arena;                   /* everything of this compilation */
    char *name;                     /* model name used for symbols (C identifier) */
    char *path;                     /* source file, for error messages */
    int opset;                      /* default-domain opset import */
    int64_t max_bytes;              /* size limit of any one tensor (IR_MAX_BYTES_*) */
    Value **values;
    int nvalues, capvalues;
    Node **nodes;
    int nnodes, capnodes;
    Value **inputs, **outputs;      /* graph order; initializers are not inputs */
    int ninputs, noutputs;
    /* A subgraph (an A_GRAPH attribute of `owner`, a node of `parent`) has its own nodes,
     * inputs and outputs, but its values live in the root graph's `values`, so that a Value id
     * is unique in the whole model and a body names an outer value by pointing at it. */
    Graph *parent;
    Node *owner;
};

/* The bits a value is packed to at the interface (Value.nibbles): 4, 2, or 0 (a byte each) */
static inline int ir_pack_bits(const Value *v) { return v->nibbles ? v->crumbs ? 2 : 4 : 0; }

/* ---- building and editing (ir/ir.c) ---- */
Graph *ir_graph_new(Arena *a);
Value *ir_value_new(Graph *g, const char *name);        /* dtype UNDEF, rank -1 */
Value *ir_const_new(Graph *g, const char *name, DType t, int rank, const int64_t *dims,
                    const void *data);                    /* copies data */
/* A 1-d int64 constant of the n values v (Slice's starts, Pad's pads, ...). */
Value *ir_const_ints(Graph *g, const char *name, const int64_t *v, int n);
Node *ir_node_new(Graph *g, Op op, const char *name, int nin, int nout); /* appended at end */
/* Insert a node right before `before` (keeps topological order when before is a consumer). */
Node *ir_node_insert_before(Graph *g, Node *before, Op op, const char *name, int nin, int nout);
/* The same with one output, a new value "<name>_out" it produces, at opset 13 or later (the
 * input forms of Slice, Pad and Split that graph passes build). */
Node *ir_node_insert_op(Graph *g, Node *before, Op op, const char *name, int nin);
/* All node inputs and graph outputs, in subgraphs too. */
void ir_replace_uses(Graph *g, Value *from, Value *to);
/* Fills Value.nuses over the whole model (from the root; outputs count, and so does a
 * subgraph's use of an outer value or of its own outputs). */
void ir_count_uses(Graph *g);
void ir_compact(Graph *g);                                /* drops dead nodes, renumbers */
void ir_dce(Graph *g);          /* marks nodes dead whose outputs are all unused (subgraphs too) */
/* Subgraphs. A subgraph of n is created by ir_subgraph_new; ir_subgraphs lists n's (at most
 * `max`) in attribute order; ir_root is the graph holding all values. */
Graph *ir_subgraph_new(Graph *parent, Node *owner);
int ir_subgraphs(const Node *n, Graph **out, int max);
Graph *ir_root(Graph *g);
/* A copy of body's live nodes inserted into g before `before` (a compile-time expansion of
 * a body: passes/ops/sequence.c), body input i standing for ins[i]. Each copied node writes
 * fresh values named after the originals with "_TAG" appended; nested bodies are copied with
 * their owners. Sets outs[i] to what body output i became and returns the copied nodes, in
 * order (*count of them), not yet inferred. */
Node **ir_inline_body(Graph *g, Node *before, const Graph *body, Value **ins, const char *tag, Value **outs,
                      int *count);
/* How graph passes reach bodies: f(sub) for each subgraph of each
 * live node of g, innermost first. */
void ir_each_subgraph(Graph *g, void (*f)(Graph *));

int64_t ir_numel(const Value *v);                          /* product of dims; 1 for rank 0 */
/* Bytes the value would span if no dim were 0 (so that strides are bounded too); saturates
 * at INT64_MAX. A value is too large when this exceeds g->max_bytes. */
int64_t ir_extent(const Value *v);
size_t ir_nbytes(const Value *v);
void ir_set_shape(Value *v, DType t, int rank, const int64_t *dims);
bool ir_same_shape(const Value *a, const Value *b);
/* Broadcast two shapes (numpy rules); dout may be da or db. Returns false if incompatible. */
bool ir_broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *rout, int64_t *dout);

/* Read a constant of any integer dtype as int64 / any float dtype as double. */
int64_t ir_const_int(const Value *v, int64_t i);
double ir_const_float(const Value *v, int64_t i);

/* ---- attributes ---- */
Attr *ir_attr(const Node *n, const char *name);            /* NULL if absent */
int64_t ir_attr_int(const Node *n, const char *name, int64_t dflt);
float ir_attr_float(const Node *n, const char *name, float dflt);
const char *ir_attr_str(const Node *n, const char *name, const char *dflt);
/* ints attribute; returns count (0 if absent) and sets *out (NULL if absent) */
int ir_attr_ints(const Node *n, const char *name, const int64_t **out);
Attr *ir_attr_set(Graph *g, Node *n, const char *name, AttrType t);  /* add or overwrite */
void ir_attr_set_int(Graph *g, Node *n, const char *name, int64_t v);
void ir_attr_set_float(Graph *g, Node *n, const char *name, float v);
void ir_attr_set_ints(Graph *g, Node *n, const char *name, const int64_t *v, int count);
void ir_attr_remove(Node *n, const char *name);

/* "model.onnx: node 'conv1' (Conv, opset 13)" for error messages; arena-allocated. */
const char *ir_where(Graph *g, const Node *n);

/* ---- text form and verifier (ir/print.c, ir/verify.c) ---- */
void ir_print(FILE *f, Graph *g);
/* Check the invariants above; on failure die() naming `after` (the pass that just ran). */
void ir_verify(Graph *g, const char *after);

#endif
