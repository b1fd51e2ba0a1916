/* control.c - If, Loop and Scan: their shape rules infer the bodies, their lowering emits the
 * kernel IR's control regions (kir.h, KernelCtl) around the bodies' own kernels.
 *
 * A body is a subgraph (ir.h) whose nodes were canonicalised, simplified and folded with the
 * rest of the model; its rule here gives the body's inputs their types, infers the body
 * (infer_graph) and checks what ONNX allows but static shapes cannot hold: a loop-carried
 * value whose shape changes between iterations, If branches of different shapes, a scan
 * output sized by a trip count known only at run time without a bound (--max-trip).
 *
 * Lowering maps each body input to a buffer that the enclosing code keeps up to date:
 *   - loop-carried values live in the Loop's (or Scan's) output buffers: copied in from the
 *     initial values before the loop, copied back from the body's outputs at the end of each
 *     iteration (through a temporary when a body output is itself a state, so that a swap of
 *     two carried values reads the old values);
 *   - the iteration number is the loop's counter buffer, written by the control kernel;
 *   - Loop's condition is a bool buffer, the loop's `while` operand;
 *   - a Scan input's slice is a temporary filled from row `counter` of the input at the top
 *     of each iteration; scan outputs are written a row per iteration.
 * The body's nodes are then lowered by their ordinary rules, between the control kernels. */
#include <string.h>

#include "../lower.h"
#include "../pipeline.h"

static Graph *body_attr(const Node *n, const char *name) {
    Attr *a = ir_attr(n, name);
    return a && a->type == A_GRAPH ? a->g : NULL;
}

static Value *opt_in(const Node *n, int i) { return i < n->nin ? n->in[i] : NULL; }

static bool has_shape(const Value *v) {
    if (v->dtype == DT_UNDEF || v->rank < 0) return false;
    for (int d = 0; d < v->rank; d++)
        if (v->dims[d] < 0) return false;
    return true;
}

static const char *type_str(Graph *g, const Value *v) {
    return arena_printf(g->arena, "%s%s", dtype_name(v->dtype), rule_dims_str(g, v->rank, v->dims));
}

static bool same_type(const Value *a, const Value *b) { return a->dtype == b->dtype && ir_same_shape(a, b); }

static void set_input(Value *v, DType t, int rank, const int64_t *dims) {
    ir_set_shape(v, t, rank, dims);
    for (int d = 0; d < MAX_RANK; d++) v->sym[d] = NULL;
}

static bool scalar_of(const Value *v, DType t) { return v->dtype == t && ir_numel(v) == 1; }

/* Infers body b of n; false after a reported error. */
static bool infer_body(Graph *g, Node *n, Graph *b, const char *what, int nouts) {
    if (!b) {
        error(ir_where(g, n), "no %s attribute", what);
        return false;
    }
    if (b->noutputs != nouts) {
        error(ir_where(g, n), "%s has %d outputs, expected %d", what, b->noutputs, nouts);
        return false;
    }
    int before = error_count;
    infer_graph(b);
    if (error_count > before) return false;
    for (int i = 0; i < b->noutputs; i++)
        if (!has_shape(b->outputs[i])) {
            error(ir_where(g, n), "%s output '%s' has no static shape", what, b->outputs[i]->name);
            return false;
        }
    return true;
}

/* ---- If ---- */

/* An If output: the branches' common type; where their dims differ or either is dyn, a dyn
 * value of the larger dims (its capacity), which lower_if writes at the capacity's strides
 * with the taken branch's dims (passes/ops/dynamic.c). */
static void if_output_shape(Value *o, const Value *a, const Value *b) {
    int64_t dims[MAX_RANK];
    unsigned mask = 0;
    for (int d = 0; d < a->rank; d++) {
        dims[d] = MAX(a->dims[d], b->dims[d]);
        bool da = a->dyn && (!a->dynmask || (a->dynmask >> d & 1)), db = b->dyn && (!b->dynmask || (b->dynmask >> d & 1));
        if (a->dims[d] != b->dims[d] || da || db) mask |= 1u << d;
    }
    ir_set_shape(o, a->dtype, a->rank, dims);
    o->dyn = mask != 0;
    o->dynmask = mask;
}

void infer_if(Graph *g, Node *n) {
    Value *c = n->in[0];
    if (!scalar_of(c, DT_BOOL)) {
        error(ir_where(g, n), "the condition must be one bool, not %s", type_str(g, c));
        return;
    }
    Graph *t = body_attr(n, "then_branch"), *e = body_attr(n, "else_branch");
    if (c->data) {                  /* only the branch taken matters; the other may not fit */
        bool taken = ir_const_int(c, 0) != 0;
        Graph *b = taken ? t : e, *other = taken ? e : t;
        if (other) {                /* never runs: nothing of it is inferred, checked or lowered */
            other->nnodes = 0;
            other->noutputs = 0;
        }
        if (!infer_body(g, n, b, taken ? "then_branch" : "else_branch", n->nout) ||
            !rule_flatten_branches(g, n, &b, 1)) return;
        for (int i = 0; i < n->nout; i++)
            if (n->out[i]) ir_set_shape(n->out[i], b->outputs[i]->dtype, b->outputs[i]->rank, b->outputs[i]->dims);
        return;
    }
    bool ok = infer_body(g, n, t, "then_branch", n->nout);
    if (!infer_body(g, n, e, "else_branch", n->nout) || !ok) return;
    Graph *bs[2] = {t, e};
    if (!rule_flatten_branches(g, n, bs, 2)) return;   /* sequences, optionals (sequence.c) */
    for (int i = 0; i < n->nout; i++) {
        Value *a = t->outputs[i], *b = e->outputs[i];
        if (!same_type(a, b) && (a->dtype != b->dtype || a->rank != b->rank || a->kind || b->kind ||
                                 a->dtype == DT_STRING)) {
            error(ir_where(g, n), "the branches give output %d different static types: %s from "
                  "then_branch, %s from else_branch (an output whose shape depends on the condition "
                  "is supported when only its dims differ)", i, type_str(g, a), type_str(g, b));
            continue;
        }
        if (n->out[i]) if_output_shape(n->out[i], a, b);
    }
}

static void copy_outputs(Lower *L, Node *n, Graph *b, Buf **outs) {
    for (int i = 0; i < n->nout; i++)
        if (outs[i] && n->out[i]->dyn) dyn_lower_branch_output(L, n, i, b->outputs[i], outs[i]);
        else if (outs[i]) lower_copy(L, lower_name(L, arena_printf(L->p->arena, "%s_out%d", n->name, i)), outs[i],
                                lower_value(L, b->outputs[i]));
}

void lower_if(Lower *L, Node *n) {
    Program *p = L->p;
    Graph *t = body_attr(n, "then_branch"), *e = body_attr(n, "else_branch");
    Buf **outs = ARENA_ARRAY(p->arena, Buf *, n->nout + 1);
    for (int i = 0; i < n->nout; i++)
        if (n->out[i]) outs[i] = lower_out(L, n, i);
    if (n->in[0]->data) {           /* decided at compile time: the taken branch inline */
        Graph *b = ir_const_int(n->in[0], 0) ? t : e;
        lower_nodes(L, b);
        copy_outputs(L, n, b, outs);
        return;
    }
    kir_ctl_new(p, lower_kname(L, n), KCTL_IF, NULL, NULL, -1, lower_in(L, n, 0), -1);
    lower_nodes(L, t);
    copy_outputs(L, n, t, outs);
    kir_ctl_new(p, lower_name(L, arena_printf(p->arena, "%s_else", n->name)), KCTL_ELSE, NULL, NULL, -1, NULL, -1);
    lower_nodes(L, e);
    copy_outputs(L, n, e, outs);
    kir_ctl_new(p, lower_name(L, arena_printf(p->arena, "%s_end", n->name)), KCTL_END, NULL, NULL, -1, NULL, -1);
}

/* ---- rows of a scanned buffer ---- */

/* Where a slice sits in a bigger buffer: dim `axis` of the big one at the loop's counter, or
 * at n-1-counter when reversed. */
typedef struct Pos {
    int axis;
    Buf *counter;
    int64_t n;
    bool reverse;
} Pos;

/* small[j...] = big[j... with the positions inserted] (into_big: the other way round, a
 * partial write of big, which the kernel therefore has as inout). Positions by ascending axis. */
static void copy_slice(Lower *L, const char *name, Buf *big, Buf *small, const Pos *pos, int npos,
                       bool into_big) {
    Program *p = L->p;
    Kernel *k = kir_kernel_new(p, lower_name(L, name), "Slice", into_big ? KC_GENERIC : KC_COPY);
    if (into_big) {
        kir_param(p, k, small, KP_IN);
        kir_param(p, k, big, KP_INOUT);
    } else {
        kir_param(p, k, big, KP_IN);
        kir_param(p, k, small, KP_OUT);
    }
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *bidx[MAX_RANK];
    lower_vars(k, small->rank, vars);
    lower_var_idx(p, small->rank, vars, idx);
    for (int d = 0, j = 0, q = 0; d < big->rank; d++) {
        if (q < npos && pos[q].axis == d) {
            Expr *c = kx_cast(p, DT_INDEX, rule_load_first(p, k, pos[q].counter));
            bidx[d] = pos[q].reverse ? kx_bin(p, K_SUB, kx_index(p, pos[q].n - 1), c) : c;
            q++;
        } else {
            bidx[d] = idx[j++];
        }
    }
    Stmt *st = into_big ? ks_store(p, big, bidx, kx_load(p, small, idx)) : ks_store(p, small, idx, kx_load(p, big, bidx));
    k->body = lower_wrap(p, small->rank, small->dims, vars, st);
}

/* b = v everywhere (scan outputs of a loop that may stop early, a condition that starts true). */
static void fill(Lower *L, const char *name, Buf *b, double v) {
    Program *p = L->p;
    Kernel *k = kir_kernel_new(p, lower_name(L, name), "Loop", KC_ELEMENTWISE);
    kir_param(p, k, b, KP_OUT);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK];
    lower_vars(k, b->rank, vars);
    lower_var_idx(p, b->rank, vars, idx);
    k->body = lower_wrap(p, b->rank, b->dims, vars, ks_store(p, b, idx, kx_const(p, b->dtype, v)));
}

static Buf *temp_like(Lower *L, const Value *v) {
    return kir_buf_new(L->p, v->name, v->dtype, v->rank, v->dims, B_TEMP);
}

/* End of an iteration: states[i] = value of body output outs[i] (NULL: no state). A value
 * that is itself one of the states is copied aside first, so that every copy reads the values
 * of this iteration. */
static void update_states(Lower *L, const char *name, Buf **states, Value **outs, int n) {
    Arena *a = L->p->arena;
    Buf **src = ARENA_ARRAY(a, Buf *, n + 1);
    for (int i = 0; i < n; i++) {
        if (!states[i]) continue;
        src[i] = lower_value(L, outs[i]);
        if (kir_root(src[i]) == kir_root(states[i])) {
            src[i] = NULL;          /* passed through unchanged */
            continue;
        }
        for (int j = 0; j < n; j++)
            if (states[j] && kir_root(src[i]) == kir_root(states[j])) {
                Buf *t = temp_like(L, outs[i]);
                lower_copy(L, lower_name(L, arena_printf(a, "%s_keep", name)), t, src[i]);
                src[i] = t;
                break;
            }
    }
    for (int i = 0; i < n; i++)
        if (states[i] && src[i]) lower_copy(L, lower_name(L, arena_printf(a, "%s_next", name)), states[i], src[i]);
}

/* ---- Loop ---- */

/* Inputs: M (trip count), cond, N initial values; body: (iteration, cond, N values) ->
 * (cond, N values, K scan outputs); outputs: N final values, K scan outputs. */
static int loop_carried(const Node *n) { return n->nin > 2 ? n->nin - 2 : 0; }

/* The number of rows of the scan outputs: the constant trip count, lowered to --max-trip's
 * bound; -1 if neither is known. */
static int64_t loop_bound(const Node *n) {
    Value *m = opt_in(n, 0);
    int64_t max = ir_attr_int(n, "onnxcc.max_trip", -1);
    if (m && m->data) {
        int64_t t = MAX(ir_const_int(m, 0), 0);
        return max >= 0 && max < t ? max : t;
    }
    return max;
}

/* Whether v is a constant true. */
static bool const_true(const Value *v) { return v && v->data && ir_const_int(v, 0); }

/* Whether every one of the scan outputs' rows is written: a constant trip count within the
 * bound and conditions that are constant true. */
static bool loop_full(const Node *n, const Graph *b, int64_t rows) {
    Value *m = opt_in(n, 0), *cond = opt_in(n, 1);
    int64_t ntrip = m && m->data ? MAX(ir_const_int(m, 0), 0) : -1;
    return ntrip == rows && (!cond || const_true(cond)) && const_true(b->outputs[0]);
}

enum { MAX_SCAN_ROWS = 1 << 24 };   /* more rows than this need --max-trip (INT64_MAX: "forever") */

void infer_loop(Graph *g, Node *n) {
    Graph *b = body_attr(n, "body");
    Value *m = opt_in(n, 0), *cond = opt_in(n, 1);
    int nc = loop_carried(n), nscan = n->nout - nc;
    if (rule_loop_has_containers(n)) {     /* its structure changes per iteration (sequence.c) */
        rule_unroll_loop(g, n);
        return;
    }
    if (m && !(ir_numel(m) == 1 && (m->dtype == DT_INT64 || m->dtype == DT_INT32))) {
        error(ir_where(g, n), "the trip count must be one int64, not %s", type_str(g, m));
        return;
    }
    if (cond && !scalar_of(cond, DT_BOOL)) {
        error(ir_where(g, n), "the condition must be one bool, not %s", type_str(g, cond));
        return;
    }
    if (nscan < 0 || !b || b->ninputs != 2 + nc) {
        error(ir_where(g, n), "the body must take 2 + %d inputs and the node give at least %d outputs", nc, nc);
        return;
    }
    set_input(b->inputs[0], DT_INT64, 0, NULL);
    set_input(b->inputs[1], DT_BOOL, 0, NULL);
    for (int i = 0; i < nc; i++) {
        Value *v = n->in[2 + i];
        if (!v) {
            error(ir_where(g, n), "loop-carried value %d has no initial value", i);
            return;
        }
        set_input(b->inputs[2 + i], v->dtype, v->rank, v->dims);
    }
    if (!infer_body(g, n, b, "body", 1 + nc + nscan)) return;
    if (!scalar_of(b->outputs[0], DT_BOOL)) {
        error(ir_where(g, n), "the body's condition output must be one bool, not %s", type_str(g, b->outputs[0]));
        return;
    }
    for (int i = 0; i < nc; i++) {
        Value *in = b->inputs[2 + i], *out = b->outputs[1 + i];
        if (!in->kind && out->kind) {
            error(ir_where(g, n), "loop-carried value '%s' enters the body as a tensor and leaves it as a %s",
                  in->name, out->kind == VK_SEQ ? "sequence" : "optional");
            return;
        }
        if (!same_type(in, out)) {
            error(ir_where(g, n), "loop-carried value '%s' enters the body as %s and leaves it as %s "
                  "(its shape must not change between iterations)", in->name, type_str(g, in), type_str(g, out));
            return;
        }
        if (n->out[i]) ir_set_shape(n->out[i], in->dtype, in->rank, in->dims);
    }
    int64_t rows = loop_bound(n);
    /* A scan output that is a graph output of the model and nothing else reports the rows a
     * loop that may stop early wrote, through the data-dependent contract (dynamic.c). */
    bool report = nscan > 0 && ir_root(g) == g && !loop_full(n, b, rows);
    if (report) ir_count_uses(g);
    for (int k = 0; k < nscan; k++) {
        Value *o = n->out[nc + k], *s = b->outputs[1 + nc + k];
        if (!o) continue;
        if (s->kind) {
            error(ir_where(g, n), "scan output '%s' is a %s in the body; a scan output takes a tensor an iteration",
                  o->name, s->kind == VK_SEQ ? "sequence" : "optional");
            return;
        }
        if (rows < 0 || (rows > MAX_SCAN_ROWS && ir_attr_int(n, "onnxcc.max_trip", -1) < 0)) {
            error(ir_where(g, n), "scan output '%s' has a row per iteration, and the trip count is %s; "
                  "give the largest number of iterations with --max-trip %s=N", o->name,
                  rows < 0 ? "known only at run time" : "unbounded", n->name);
            return;
        }
        if (s->rank + 1 > MAX_RANK) {
            error(ir_where(g, n), "scan output '%s' would have rank %d; onnxcc supports %d", o->name, s->rank + 1, MAX_RANK);
            return;
        }
        int64_t dims[MAX_RANK];
        dims[0] = rows;
        memcpy(dims + 1, s->dims, sizeof(int64_t) * (size_t)s->rank);
        ir_set_shape(o, s->dtype, s->rank + 1, dims);
        o->dyn = report && o->is_output && o->nuses == 1;
    }
}

/* The dims of scan output i after the loop: the iterations run (the counter), then a row's. */
static void scan_dims(Lower *L, Node *n, int i, Buf *iter) {
    Program *p = L->p;
    Buf *d = lower_dims(L, n, i);
    Value *o = n->out[i];
    Kernel *k = kir_kernel_new(p, lower_name(L, arena_printf(p->arena, "%s_dims", n->name)), "Loop", KC_GENERIC);
    kir_param(p, k, iter, KP_IN);
    kir_param(p, k, d, KP_OUT);
    for (int j = 0; j < o->rank; j++) {
        Expr *idx = kx_index(p, j);
        Expr *v = j ? kx_int(p, DT_INT64, o->dims[j]) : kx_load(p, iter, NULL);
        k->body = ks_seq(k->body, ks_store(p, d, &idx, v));
    }
}

void lower_loop(Lower *L, Node *n) {
    Program *p = L->p;
    Arena *a = p->arena;
    Graph *b = body_attr(n, "body");
    Value *m = opt_in(n, 0), *cond = opt_in(n, 1);
    int nc = loop_carried(n), nscan = n->nout - nc;
    const char *name = lower_kname(L, n);
    /* states: the condition, then the carried values */
    Buf **states = ARENA_ARRAY(a, Buf *, nc + 2);
    Buf *iter = kir_buf_new(p, b->inputs[0]->name, DT_INT64, 0, NULL, B_TEMP);
    L->vbuf[b->inputs[0]->id] = iter;
    states[0] = L->vbuf[b->inputs[1]->id] = kir_buf_new(p, b->inputs[1]->name, DT_BOOL, 0, NULL, B_TEMP);
    if (cond) lower_copy(L, lower_name(L, arena_printf(a, "%s_cond", n->name)), states[0], lower_in(L, n, 1));
    else fill(L, arena_printf(a, "%s_cond", n->name), states[0], 1);
    for (int i = 0; i < nc; i++) {
        Buf *s = n->out[i] ? lower_out(L, n, i) : temp_like(L, b->inputs[2 + i]);
        lower_copy(L, lower_name(L, arena_printf(a, "%s_init", n->name)), s, lower_in(L, n, 2 + i));
        states[1 + i] = L->vbuf[b->inputs[2 + i]->id] = s;
    }
    Buf *trip = m && !m->data ? lower_in(L, n, 0) : NULL;
    int64_t ntrip = m && m->data ? MAX(ir_const_int(m, 0), 0) : -1;
    int64_t rows = -1;
    Buf **scan = ARENA_ARRAY(a, Buf *, nscan + 1);
    for (int k = 0; k < nscan; k++) {
        if (!n->out[nc + k]) continue;
        scan[k] = lower_out(L, n, nc + k);
        rows = scan[k]->dims[0];
    }
    /* The rows past an early exit are zero; a dyn scan output reports how many were written. */
    bool full = loop_full(n, b, rows);
    for (int k = 0; k < nscan && !full; k++)
        if (scan[k]) fill(L, arena_printf(a, "%s_clear", n->name), scan[k], 0);
    /* run() stops with ERR_TRIP past the scan outputs' rows or, without scan outputs, past
     * --max-trip's bound, which promises at most that many iterations either way. */
    int64_t limit = rows >= 0 ? rows : ir_attr_int(n, "onnxcc.max_trip", -1);
    int64_t max = limit >= 0 && (ntrip < 0 || ntrip > limit) ? limit : -1;
    kir_ctl_new(p, name, KCTL_LOOP, iter, trip, ntrip, states[0], max);
    lower_nodes(L, b);
    Pos row = {0, iter, 0, false};
    for (int k = 0; k < nscan; k++)
        if (scan[k]) copy_slice(L, arena_printf(a, "%s_scan%d", n->name, k), scan[k],
                                lower_value(L, b->outputs[1 + nc + k]), &row, 1, true);
    update_states(L, n->name, states, b->outputs, 1 + nc);
    kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_end", n->name)), KCTL_END, NULL, NULL, -1, NULL, -1);
    for (int k = 0; k < nscan; k++)
        if (scan[k] && n->out[nc + k]->dyn) scan_dims(L, n, nc + k, iter);
}

/* ---- Scan ---- */

/* Scan-8 has a leading sequence_lens input and a batch dim 0 on every state and scanned
 * value, the scan axis being 1; Scan-9 and later have neither and attributes for the axes. */
typedef struct ScanForm {
    int first;                      /* index of the first state input (1 at opset 8) */
    int nstate, nin, nout;          /* states, scanned inputs, scan outputs */
    bool batch;                     /* opset 8 */
    int64_t len;                    /* iterations */
} ScanForm;

static int64_t attr_at(const Node *n, const char *name, int i, int64_t dflt) {
    const int64_t *v;
    int c = ir_attr_ints(n, name, &v);
    return i < c ? v[i] : dflt;
}

/* The scan axis of scanned input i (of rank r), or of scan output i (rank r, out). */
static int scan_axis(const Node *n, const ScanForm *f, int i, int r, bool out) {
    if (f->batch) return 1;
    int64_t ax = attr_at(n, out ? "scan_output_axes" : "scan_input_axes", i, 0);
    return (int)(ax < 0 ? ax + r : ax);
}

static bool scan_reverse(const Node *n, const ScanForm *f, int i, bool out) {
    if (f->batch) return !out && attr_at(n, "directions", i, 0) != 0;
    return attr_at(n, out ? "scan_output_directions" : "scan_input_directions", i, 0) != 0;
}

static bool scan_form(Graph *g, Node *n, ScanForm *f) {
    Graph *b = body_attr(n, "body");
    f->batch = n->opset < 9;
    f->first = f->batch ? 1 : 0;
    int64_t nsi = ir_attr_int(n, "num_scan_inputs", -1);
    if (nsi < 1 || nsi > n->nin - f->first) {
        error(ir_where(g, n), "num_scan_inputs %lld must be 1 to the node's %d inputs%s", (long long)nsi,
              n->nin - f->first, f->first ? " after sequence_lens" : "");
        return false;
    }
    f->nin = (int)nsi;
    f->nstate = n->nin - f->first - f->nin;
    f->nout = n->nout - f->nstate;
    if (f->batch && n->in[0]) {
        error(ir_where(g, n), "sequence_lens is not supported (every sequence must have the full length)");
        return false;
    }
    if (f->nin < 1 || f->nstate < 0 || f->nout < 0 || !b || b->ninputs != f->nstate + f->nin ||
        b->noutputs != f->nstate + f->nout) {
        error(ir_where(g, n), "inputs, outputs and num_scan_inputs do not match the body");
        return false;
    }
    f->len = -1;
    for (int i = 0; i < f->nin; i++) {
        Value *x = n->in[f->first + f->nstate + i];
        int ax = scan_axis(n, f, i, x ? x->rank : 0, false);
        if (!x || ax < 0 || ax >= x->rank || (f->batch && x->rank < 2)) {
            error(ir_where(g, n), "scanned input %d is absent or has no axis %d", i, ax);
            return false;
        }
        if (f->len >= 0 && x->dims[ax] != f->len) {
            error(ir_where(g, n), "scanned inputs of %lld and %lld rows", (long long)f->len, (long long)x->dims[ax]);
            return false;
        }
        f->len = x->dims[ax];
    }
    return true;
}

/* v's shape without dim `ax` (and without the batch dim 0 first when batch). */
static void drop_dims(const Value *v, bool batch, int ax, int *rank, int64_t *dims) {
    *rank = 0;
    for (int d = 0; d < v->rank; d++)
        if (d != ax && !(batch && d == 0)) dims[(*rank)++] = v->dims[d];
}

void infer_scan(Graph *g, Node *n) {
    ScanForm f;
    if (!scan_form(g, n, &f)) return;
    Graph *b = body_attr(n, "body");
    int64_t batch = -1, dims[MAX_RANK];
    int rank;
    for (int i = 0; i < f.nstate; i++) {
        Value *v = n->in[f.first + i];
        if (!v || (f.batch && (v->rank < 1 || (batch >= 0 && v->dims[0] != batch)))) {
            error(ir_where(g, n), "state %d is absent or has no batch dim", i);
            return;
        }
        if (f.batch) batch = v->dims[0];
        drop_dims(v, f.batch, -1, &rank, dims);
        set_input(b->inputs[i], v->dtype, rank, dims);
    }
    for (int i = 0; i < f.nin; i++) {
        Value *x = n->in[f.first + f.nstate + i];
        if (f.batch && batch >= 0 && x->dims[0] != batch) {
            error(ir_where(g, n), "scanned input %d has another batch size", i);
            return;
        }
        if (f.batch) batch = x->dims[0];
        drop_dims(x, f.batch, scan_axis(n, &f, i, x->rank, false), &rank, dims);
        set_input(b->inputs[f.nstate + i], x->dtype, rank, dims);
    }
    if (!infer_body(g, n, b, "body", f.nstate + f.nout)) return;
    for (int i = 0; i < f.nstate; i++) {
        Value *in = b->inputs[i], *out = b->outputs[i];
        if (!same_type(in, out)) {
            error(ir_where(g, n), "state '%s' enters the body as %s and leaves it as %s", in->name,
                  type_str(g, in), type_str(g, out));
            return;
        }
        if (n->out[i]) ir_set_shape(n->out[i], n->in[f.first + i]->dtype, n->in[f.first + i]->rank, n->in[f.first + i]->dims);
    }
    for (int k = 0; k < f.nout; k++) {
        Value *o = n->out[f.nstate + k], *s = b->outputs[f.nstate + k];
        if (!o) continue;
        if (s->kind != VK_TENSOR) {     /* its rows are stacked into a tensor */
            error(ir_where(g, n), "scan output %d ('%s') is %s, not a tensor", k, s->name,
                  s->kind == VK_SEQ ? "a sequence" : "an optional");
            return;
        }
        int r = s->rank + 1 + f.batch, ax = scan_axis(n, &f, k, r, true);
        if (r > MAX_RANK || ax < 0 || ax >= r) {
            error(ir_where(g, n), "scan output %d: axis %d for rank %d", k, ax, r);
            return;
        }
        for (int d = 0, j = 0; d < r; d++)
            dims[d] = f.batch && d == 0 ? batch : d == ax ? f.len : s->dims[j++];
        ir_set_shape(o, s->dtype, r, dims);
    }
}

void lower_scan(Lower *L, Node *n) {
    Program *p = L->p;
    Arena *a = p->arena;
    Graph *b = body_attr(n, "body");
    ScanForm f;
    scan_form(L->g, n, &f);
    Buf **states = ARENA_ARRAY(a, Buf *, f.nstate + 1), **finals = ARENA_ARRAY(a, Buf *, f.nstate + 1);
    Buf *bc = NULL;                 /* Scan-8's batch counter */
    for (int i = 0; i < f.nstate; i++)
        finals[i] = n->out[i] ? lower_out(L, n, i) : temp_like(L, n->in[f.first + i]);
    if (f.batch) {
        bc = kir_buf_new(p, arena_printf(a, "%s_batch", n->name), DT_INT64, 0, NULL, B_TEMP);
        kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_batch", n->name)), KCTL_LOOP, bc, NULL,
                    n->in[f.first + f.nstate]->dims[0], NULL, -1);
    }
    Pos bpos = {0, bc, 0, false};
    for (int i = 0; i < f.nstate; i++) {
        Buf *init = lower_in(L, n, f.first + i);
        const char *nm = arena_printf(a, "%s_init", n->name);
        if (f.batch) {
            states[i] = temp_like(L, b->inputs[i]);
            copy_slice(L, nm, init, states[i], &bpos, 1, false);
        } else {
            states[i] = finals[i];
            lower_copy(L, lower_name(L, nm), states[i], init);
        }
        L->vbuf[b->inputs[i]->id] = states[i];
    }
    Buf *t = kir_buf_new(p, arena_printf(a, "%s_iter", n->name), DT_INT64, 0, NULL, B_TEMP);
    kir_ctl_new(p, lower_kname(L, n), KCTL_LOOP, t, NULL, f.len, NULL, -1);
    for (int i = 0; i < f.nin; i++) {
        Buf *x = lower_in(L, n, f.first + f.nstate + i), *s = temp_like(L, b->inputs[f.nstate + i]);
        Pos pos[2] = {bpos, {scan_axis(n, &f, i, x->rank, false), t, f.len, scan_reverse(n, &f, i, false)}};
        copy_slice(L, arena_printf(a, "%s_in%d", n->name, i), x, s, pos + !f.batch, 1 + f.batch, false);
        L->vbuf[b->inputs[f.nstate + i]->id] = s;
    }
    lower_nodes(L, b);
    for (int k = 0; k < f.nout; k++) {
        if (!n->out[f.nstate + k]) continue;
        Buf *o = lower_out(L, n, f.nstate + k);
        Pos pos[2] = {bpos, {scan_axis(n, &f, k, o->rank, true), t, f.len, scan_reverse(n, &f, k, true)}};
        copy_slice(L, arena_printf(a, "%s_scan%d", n->name, k), o, lower_value(L, b->outputs[f.nstate + k]),
                   pos + !f.batch, 1 + f.batch, true);
    }
    update_states(L, n->name, states, b->outputs, f.nstate);
    kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_end", n->name)), KCTL_END, NULL, NULL, -1, NULL, -1);
    if (f.batch) {
        for (int i = 0; i < f.nstate; i++)
            copy_slice(L, arena_printf(a, "%s_final", n->name), finals[i], states[i], &bpos, 1, true);
        kir_ctl_new(p, lower_name(L, arena_printf(a, "%s_batch_end", n->name)), KCTL_END, NULL, NULL, -1, NULL, -1);
    }
}
