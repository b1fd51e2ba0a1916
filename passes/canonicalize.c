/* canonicalize.c - one form per op, whatever the model's opset (docs/canonical-forms.md).
 *
 * ONNX moved many attributes into inputs over the years (Clip's min/max, Pad's pads, the axes of
 * Squeeze/Unsqueeze, the Reduce ops and Slice) and changed defaults (Softmax's axis). Rewriting every old
 * form into the newest one here is the single place where opset versions matter; shape rules
 * and lowering rules then handle one version only. Optional inputs are padded with NULL up to
 * the op's full input list so that rules can index them without counting.
 *
 * Constant nodes disappear here: their output value becomes a constant (data set, no producer),
 * which is what every later pass expects of weights. Runs before shape inference, so nothing
 * here may rely on the dtype or shape of a computed value. */
#include <math.h>
#include <string.h>

#include "pipeline.h"

/* ---- helpers ---- */

static Value *const_ints(Graph *g, Node *n, const char *what, const int64_t *v, int count) {
    return ir_const_ints(g, arena_printf(g->arena, "%s_%s", n->name, what), v, count);
}

/* A scalar of the dtype of n's first input when that is already known (graph inputs and
 * constants), else float32: the old attribute forms existed for float tensors only. */
static Value *const_scalar(Graph *g, Node *n, const char *what, double x) {
    DType t = n->in[0] && n->in[0]->dtype == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT;
    Value *v = ir_const_new(g, arena_printf(g->arena, "%s_%s", n->name, what), t, 0, NULL, NULL);
    if (t == DT_DOUBLE) *(double *)v->data = x;
    else *(float *)v->data = (float)x;
    return v;
}

/* Make n have exactly `nin` inputs: new slots are absent (NULL), extra ones must be: a model
 * giving more inputs than its op's version reads (an opset-2 Pad with four, which the op
 * table's count for Pad-18 lets through) is refused. */
static void set_nin(Graph *g, Node *n, int nin) {
    if (nin <= n->nin) {
        for (int i = nin; i < n->nin; i++)
            if (n->in[i]) {
                error(ir_where(g, n), "%s-%d does not read input %d, which is given", n->op_type, n->opset, i);
                break;
            }
        n->nin = nin;
        return;
    }
    Value **in = ARENA_ARRAY(g->arena, Value *, nin + 1);
    for (int i = 0; i < n->nin; i++) in[i] = n->in[i];
    n->in = in;
    n->nin = nin;
}

/* Move an ints attribute into input `slot` (absent attribute: the input stays absent). */
static void ints_attr_to_input(Graph *g, Node *n, const char *attr, int slot) {
    const int64_t *v;
    int count = ir_attr_ints(n, attr, &v);
    if (slot >= n->nin) set_nin(g, n, slot + 1);
    else if (v && n->in[slot])
        error(ir_where(g, n), "%s-%d takes %s as an attribute, and input %d is given too", n->op_type, n->opset, attr,
              slot);
    if (v) n->in[slot] = const_ints(g, n, attr, v, count);
    ir_attr_remove(n, attr);
}

static bool old(const Node *n, int before) { return n->opset < before; }

/* ---- one function per op family ---- */

static void canon_clip(Graph *g, Node *n) {
    if (old(n, 11)) {
        Attr *mn = ir_attr(n, "min"), *mx = ir_attr(n, "max");
        set_nin(g, n, 3);
        if (mn) n->in[1] = const_scalar(g, n, "min", ir_attr_float(n, "min", -INFINITY));
        if (mx) n->in[2] = const_scalar(g, n, "max", ir_attr_float(n, "max", INFINITY));
        ir_attr_remove(n, "min");
        ir_attr_remove(n, "max");
    }
    set_nin(g, n, 3);
}

static void canon_pad(Graph *g, Node *n) {
    if (old(n, 11)) {
        float value = ir_attr_float(n, "value", 0);
        ints_attr_to_input(g, n, "pads", 1);
        set_nin(g, n, 3);
        if (value != 0) n->in[2] = const_scalar(g, n, "value", value);
        ir_attr_remove(n, "value");
    }
    if (!n->in[1]) error(ir_where(g, n), "Pad without pads");
    set_nin(g, n, 4);               /* Pad-18's axes: input 3 */
    if (!ir_attr(n, "mode")) ir_attr_set(g, n, "mode", A_STRING)->s = "constant";
}

static void canon_squeeze(Graph *g, Node *n) {
    if (old(n, 13)) ints_attr_to_input(g, n, "axes", 1);
    set_nin(g, n, 2);
    if (n->op == OP_Unsqueeze && !n->in[1]) error(ir_where(g, n), "Unsqueeze without axes");
}

static void canon_reduce(Graph *g, Node *n) {
    if (old(n, n->op == OP_ReduceSum ? 13 : 18)) ints_attr_to_input(g, n, "axes", 1);
    set_nin(g, n, 2);
    if (!ir_attr(n, "keepdims")) ir_attr_set_int(g, n, "keepdims", 1);
    if (!ir_attr(n, "noop_with_empty_axes")) ir_attr_set_int(g, n, "noop_with_empty_axes", 0);
}

static void canon_slice(Graph *g, Node *n) {
    if (old(n, 10)) {
        ints_attr_to_input(g, n, "starts", 1);
        ints_attr_to_input(g, n, "ends", 2);
        ints_attr_to_input(g, n, "axes", 3);
    }
    set_nin(g, n, 5);
    if (!n->in[1] || !n->in[2]) error(ir_where(g, n), "Slice without starts or ends");
}

/* The axis is made non-negative by infer_shapes, the first point where the input's rank is
 * known (see fix_softmax_axis there). */
static void canon_softmax(Graph *g, Node *n) {
    if (!ir_attr(n, "axis")) ir_attr_set_int(g, n, "axis", old(n, 13) ? 1 : -1);
    ir_attr_set_int(g, n, "legacy", old(n, 13));
}

/* Inference ignores the ratio: a Dropout whose training_mode is absent or a constant false
 * keeps only its data input. So does one whose ratio is a constant 0, in training mode too:
 * every uniform number in [0, 1) is >= 0, so each element is kept, scaled by 1 / (1 - 0), and
 * the mask is all true, as in inference (torchvision's Swin-T exports its attention dropouts
 * as training_mode true, ratio 0: 24 kernels drawing Philox numbers, 5% of its run).
 * Otherwise (training mode, possibly chosen at run time) it keeps ratio and training_mode
 * (passes/ops/shape.c: lower_dropout). A Constant that feeds training_mode or ratio has
 * already been turned into data: it comes earlier in the node order. */
static void canon_dropout(Graph *g, Node *n) {
    Value *ratio = n->nin > 1 ? n->in[1] : NULL, *train = n->nin > 2 ? n->in[2] : NULL;
    if (train && (train->dtype != DT_BOOL || ir_numel(train) != 1)) {
        error(ir_where(g, n), "training_mode must be a single bool");
        return;
    }
    bool keep_all = ratio && ratio->data && ir_numel(ratio) == 1 && dtype_is_float(ratio->dtype) &&
                    ir_const_float(ratio, 0) == 0.0;
    if (train && (!train->data || *(const uint8_t *)train->data) && !keep_all) return;
    n->nin = 1;
}

static bool value_used(const Value *v) { return v && v->nuses > 0; }

/* Training mode (opset 14+: batch statistics, running statistics as outputs 1 and 2) keeps
 * its outputs; older exporters' unused extra outputs are dropped. */
static void canon_batchnorm(Graph *g, Node *n) {
    if (ir_attr_int(n, "training_mode", 0)) return;
    if (n->nout > 1 && (value_used(n->out[1]) || (n->nout > 2 && value_used(n->out[2])))) {
        error(ir_where(g, n), "running statistics outputs (opsets 6 to 9, training) are not supported");
        return;
    }
    if (ir_attr_int(n, "spatial", 1) == 0)
        error(ir_where(g, n), "spatial=0 is not supported");
    n->nout = 1;                    /* unused running mean/var outputs of old exporters */
    ir_attr_remove(n, "spatial");
}

/* Give input `slot` of n `ones` trailing size-1 dims: a constant is re-shaped in place of the
 * input, anything else goes through an Unsqueeze inserted before n (in canonical form). */
static void append_ones(Graph *g, Node *n, int slot, int ones) {
    Value *b = n->in[slot];
    int64_t dims[MAX_RANK], axes[MAX_RANK];
    if (b->rank + ones > MAX_RANK) {
        error(ir_where(g, n), "broadcast of '%s' needs rank %d", b->name, b->rank + ones);
        return;
    }
    for (int d = 0; d < b->rank + ones; d++) dims[d] = d < b->rank ? b->dims[d] : 1;
    for (int i = 0; i < ones; i++) axes[i] = b->rank + i;
    const char *name = arena_printf(g->arena, "%s_%s_aligned", n->name, b->name);
    if (b->data) {
        n->in[slot] = ir_const_new(g, name, b->dtype, b->rank + ones, dims, b->data);
        return;
    }
    Node *u = ir_node_insert_before(g, n, OP_Unsqueeze, arena_printf(g->arena, "%s_align", n->name), 2, 1);
    u->in[0] = b;
    u->in[1] = const_ints(g, n, "align_axes", axes, ones);
    u->out[0] = ir_value_new(g, name);
    u->out[0]->producer = u;
    n->in[slot] = u->out[0];
}

/* Opset < 7 binary ops broadcast one way, when asked (broadcast=1): B lines up with A from
 * dim `axis` on, or with A's last dims when axis is absent, which is numpy's rule. With an
 * axis B gets trailing 1-dims so that numpy's right alignment places it the same way; that
 * needs the ranks, which before shape inference only graph inputs and constants have.
 * PRelu < 7 had no attributes but, as exported by PyTorch, a 1-D slope of several values is
 * per channel (dim 1). */
static void canon_old_broadcast(Graph *g, Node *n) {
    if (!old(n, 7)) return;
    bool bcast = ir_attr_int(n, "broadcast", 0) != 0, has_axis = ir_attr(n, "axis") != NULL;
    int64_t axis = ir_attr_int(n, "axis", 0);
    ir_attr_remove(n, "broadcast");
    ir_attr_remove(n, "axis");
    ir_attr_remove(n, "consumed_inputs");
    Value *a = n->in[0], *b = n->in[1];
    if (n->op == OP_PRelu && b->rank == 1 && b->dims[0] > 1 && a->rank > 2) {
        append_ones(g, n, 1, a->rank - 2);
        return;
    }
    if (!bcast || !has_axis) return;
    if (a->rank < 0 || b->rank < 0) {
        error(ir_where(g, n), "broadcast with an axis needs inputs of known rank (graph "
                              "inputs or constants); unsupported here");
        return;
    }
    if (axis < 0) axis += a->rank;
    int ones = a->rank - (int)axis - b->rank;
    if (axis < 0 || ones < 0) {
        error(ir_where(g, n), "axis %lld does not fit ranks %d and %d", (long long)axis,
              a->rank, b->rank);
        return;
    }
    if (ones > 0) append_ones(g, n, 1, ones);
}

/* Gemm < 7: C broadcast only with broadcast=1, else it had the full shape; either way numpy's
 * rule gives the same result. */
static void canon_old_gemm(Graph *g, Node *n) {
    ir_attr_remove(n, "broadcast");
}

/* Upsample (opsets 7-9) is Resize with asymmetric coordinates and nearest rounding down: its
 * scales (input 1, or the `scales` attribute of opset 7) become Resize's input 2, and the node
 * a Resize (checked and lowered by Resize's rules). */
static void canon_upsample(Graph *g, Node *n) {
    Attr *a = ir_attr(n, "scales");
    Value *sc = n->nin > 1 ? n->in[1] : NULL;
    if (!sc && a && a->type == A_FLOATS) {
        int64_t dims[1] = {a->n};
        sc = ir_const_new(g, arena_printf(g->arena, "%s_scales", n->name), DT_FLOAT, 1, dims,
                          a->floats);
    }
    if (!sc) {
        error(ir_where(g, n), "Upsample without scales");
        return;
    }
    ir_attr_remove(n, "scales");
    set_nin(g, n, 4);
    n->in[1] = NULL;
    n->in[2] = sc;
    n->op = OP_Resize;
    n->op_type = "Resize";
    ir_attr_set(g, n, "coordinate_transformation_mode", A_STRING)->s = "asymmetric";
    ir_attr_set(g, n, "nearest_mode", A_STRING)->s = "floor";
}

/* DFT-20 took the axis (default 1 before, -2 now: the same axis of the [batch, signal, 1|2]
 * inputs of DFT-17) from an attribute into input 2. */
static void canon_dft(Graph *g, Node *n) {
    set_nin(g, n, 3);
    if (old(n, 20)) {
        int64_t axis = ir_attr_int(n, "axis", 1);
        n->in[2] = ir_const_new(g, arena_printf(g->arena, "%s_axis", n->name), DT_INT64, 0, NULL, &axis);
        ir_attr_remove(n, "axis");
    }
}

/* GridSample-20 renamed its modes bilinear and bicubic into linear and cubic (n-linear and
 * n-cubic for any number of spatial dims). */
static void canon_grid_sample(Graph *g, Node *n) {
    Attr *a = ir_attr(n, "mode");
    if (!old(n, 20) || !a || a->type != A_STRING) return;
    if (!strcmp(a->s, "bilinear")) a->s = "linear";
    else if (!strcmp(a->s, "bicubic")) a->s = "cubic";
    else if (strcmp(a->s, "nearest")) error(ir_where(g, n), "unknown mode '%s'", a->s);
}

/* GroupNormalization-18 had one scale and bias per group; 21 one per channel. The
 * per-group form is kept as an attribute for the rule, which repeats each value over the
 * channels of its group (passes/ops/normalize.c). */
static void canon_group_norm(Graph *g, Node *n) {
    ir_attr_set_int(g, n, "per_group", old(n, 21));
}

/* A Constant node's output becomes a constant value; the node dies. */
static void canon_constant(Graph *g, Node *n) {
    Value *out = n->out[0];
    Attr *a = n->nattrs == 1 ? &n->attrs[0] : NULL;
    const char *name = a ? a->name : "";
    if (a && a->type == A_TENSOR && strcmp(name, "value") == 0) {
        if (!dtype_known(a->t->dtype)) {
            error(ir_where(g, n), "constant of type %s is not supported", dtype_name(a->t->dtype));
            return;
        }
        ir_set_shape(out, a->t->dtype, a->t->rank, a->t->dims);
        out->data = a->t->data;
    } else if (a && a->type == A_FLOAT && strcmp(name, "value_float") == 0) {
        ir_set_shape(out, DT_FLOAT, 0, NULL);
        out->data = arena_alloc(g->arena, sizeof(float));
        *(float *)out->data = a->f;
    } else if (a && a->type == A_INT && strcmp(name, "value_int") == 0) {
        ir_set_shape(out, DT_INT64, 0, NULL);
        out->data = arena_alloc(g->arena, sizeof(int64_t));
        *(int64_t *)out->data = a->i;
    } else if (a && a->type == A_FLOATS && strcmp(name, "value_floats") == 0) {
        int64_t dims[1] = {a->n};
        ir_set_shape(out, DT_FLOAT, 1, dims);
        out->data = arena_alloc(g->arena, sizeof(float) * (size_t)(a->n + 1));
        memcpy(out->data, a->floats, sizeof(float) * (size_t)a->n);
    } else if (a && a->type == A_INTS && strcmp(name, "value_ints") == 0) {
        int64_t dims[1] = {a->n};
        ir_set_shape(out, DT_INT64, 1, dims);
        out->data = arena_alloc(g->arena, sizeof(int64_t) * (size_t)(a->n + 1));
        memcpy(out->data, a->ints, sizeof(int64_t) * (size_t)a->n);
    } else {
        error(ir_where(g, n), "Constant with attribute '%s' is not supported (value, value_float, "
                              "value_floats, value_int, value_ints are)", a ? name : "(none)");
        return;
    }
    out->producer = NULL;
    n->dead = true;
}

static void canonicalize_graph(Graph *g) {
    ir_count_uses(g);
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        switch (n->op) {
        case OP_Clip: canon_clip(g, n); break;
        case OP_Pad: canon_pad(g, n); break;
        case OP_Squeeze: case OP_Unsqueeze: canon_squeeze(g, n); break;
        case OP_ReduceMax: case OP_ReduceMean: case OP_ReduceMin: case OP_ReduceSum:
        case OP_ReduceL1: case OP_ReduceL2: case OP_ReduceLogSum: case OP_ReduceLogSumExp:
        case OP_ReduceProd: case OP_ReduceSumSquare:
            canon_reduce(g, n);
            break;
        case OP_Slice: canon_slice(g, n); break;
        case OP_Softmax: case OP_LogSoftmax: canon_softmax(g, n); break;
        case OP_Dropout: canon_dropout(g, n); break;
        case OP_BatchNormalization: canon_batchnorm(g, n); break;
        case OP_Constant: canon_constant(g, n); break;
        case OP_Add: case OP_Sub: case OP_Mul: case OP_Div: case OP_Pow: case OP_PRelu:
        case OP_And: case OP_Or: case OP_Equal: case OP_Greater: case OP_Less:
            canon_old_broadcast(g, n);
            break;
        case OP_Gemm: canon_old_gemm(g, n); break;
        case OP_Hardmax: canon_softmax(g, n); break;
        case OP_Upsample: canon_upsample(g, n); break;
        case OP_DFT: canon_dft(g, n); break;
        case OP_GridSample: canon_grid_sample(g, n); break;
        case OP_GroupNormalization: canon_group_norm(g, n); break;
        default: break;
        }
    }
    ir_compact(g);
}

void canonicalize(Graph *g) {
    ir_each_subgraph(g, canonicalize_graph);    /* bodies of If/Loop/Scan alike */
    canonicalize_graph(g);
    exit_if_errors();
}
