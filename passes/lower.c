/* lower.c - the lowering pass: graph IR -> kernel IR.
 *
 * Every graph input, graph output and constant gets a Buf up front; then each live node, in
 * order, is handed to its op's lowering rule (op_info[op].lower, from ir/ops.def), which emits
 * kernels into the Program. Graph outputs that end up not written by any kernel (an output that
 * is also an input, a constant, or a view) get a copy kernel at the end.
 *
 * The helpers here (lower_map, lower_copy, ...) fix the loop shapes that fusion and tiling
 * recognise, so rules should build their kernels through them where they fit. */
#include "lower.h"

#include <string.h>

#include "pipeline.h"

/* The Buf of a graph value; a string tensor is its bytes, one more dim of ir_strlen (ir.h). */
Buf *lower_value_buf(Program *p, const Value *v, BufKind k) {
    if (v->dtype != DT_STRING) return kir_buf_new(p, v->name, v->dtype, v->rank, v->dims, k);
    int64_t dims[MAX_RANK];
    if (v->rank >= MAX_RANK) die("lower: string tensor '%s' of rank %d", v->name, v->rank);
    memcpy(dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
    dims[v->rank] = (int64_t)ir_strlen;
    Buf *b = kir_buf_new(p, v->name, DT_UINT8, v->rank + 1, dims, k);
    b->string = true;
    return b;
}

static Buf *const_buf(Lower *L, Value *v) {
    Buf *b = lower_value_buf(L->p, v, B_CONST);
    b->data = v->data;
    b->nibbles = v->nibbles;
    b->crumbs = v->crumbs;
    return b;
}

Buf *lower_in(Lower *L, Node *n, int i) {
    if (i >= n->nin || !n->in[i]) return NULL;
    Value *v = n->in[i];
    if (!L->vbuf[v->id]) {
        if (!v->data) die("lowering %s: input '%s' has no buffer", n->name, v->name);
        L->vbuf[v->id] = const_buf(L, v);
    }
    return L->vbuf[v->id];
}

Buf *lower_out(Lower *L, Node *n, int i) {
    Value *v = n->out[i];
    if (!v) die("lowering %s: output %d absent", n->name, i);
    if (L->vbuf[v->id] && L->vbuf[v->id]->kind == B_OUTPUT) return L->vbuf[v->id];
    if (L->vbuf[v->id]) die("lowering %s: output '%s' written twice", n->name, v->name);
    return L->vbuf[v->id] = lower_value_buf(L->p, v, B_TEMP);
}

Buf *lower_dims(Lower *L, Node *n, int i) {
    Value *v = n->out[i];
    if (L->vdims[v->id]) return L->vdims[v->id];
    int64_t r = v->rank;
    return L->vdims[v->id] = kir_buf_new(L->p, arena_printf(L->p->arena, "%s.dims", v->name), DT_INT64, 1, &r, B_TEMP);
}

void lower_view(Lower *L, Node *n, int i, Buf *of) {
    Value *v = n->out[i];
    Buf *ob = L->vbuf[v->id];
    if (ob && ob->kind == B_OUTPUT) {
        lower_copy(L, lower_kname(L, n), ob, of);
        return;
    }
    L->vbuf[v->id] = kir_view_new(L->p, of, v->name, v->rank, v->dims);
}

/* A C-identifier-friendly copy of s: anything but letters and digits becomes '_'. */
static char *sanitize(Arena *a, const char *s) {
    char *r = arena_strdup(a, s);
    for (char *c = r; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    return r;
}

const char *lower_name(Lower *L, const char *base) {
    char *s = sanitize(L->p->arena, base);
    for (int i = 0, dup = 1; i < L->p->nkernels; i++)
        if (strcmp(L->p->kernels[i]->name, s) == 0) {   /* taken: try name_2, name_3, ... */
            s = sanitize(L->p->arena, arena_printf(L->p->arena, "%s_%d", base, ++dup));
            i = -1;
        }
    return s;
}

const char *lower_kname(Lower *L, Node *n) { return lower_name(L, n->name); }

void lower_nodes(Lower *L, Graph *g) {
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        bool folded = true;                 /* constant results need no kernel */
        for (int j = 0; j < n->nout; j++)
            if (n->out[j] && !n->out[j]->data) folded = false;
        if (folded) continue;
        int before = L->p->nkernels;
        Buf *unmasked = dyn_lower_operands(L, n);
        if (!dyn_lower_shape(L, n)) op_info[n->op].lower(L, n);
        if (unmasked) L->vbuf[n->in[0]->id] = unmasked;
        dyn_lower_results(L, n);
        /* the kernels this node made (those of a body lowered inside it have their own) */
        for (int k = before; k < L->p->nkernels; k++) {
            if (!L->p->kernels[k]->nnodes) kir_add_nodes(L->p, L->p->kernels[k], (const char *const *)&n->name, 1);
            if (!L->p->kernels[k]->copies) L->p->kernels[k]->copies = n->copies;
        }
    }
}

Buf *lower_value(Lower *L, Value *v) {
    if (!L->vbuf[v->id]) {
        if (!v->data) die("lowering: value '%s' has no buffer", v->name);
        L->vbuf[v->id] = const_buf(L, v);
    }
    return L->vbuf[v->id];
}

void lower_vars(Kernel *k, int rank, int *vars) {
    for (int d = 0; d < rank; d++) vars[d] = kir_var(k);
}

Stmt *lower_wrap(Program *p, int rank, const int64_t *dims, const int *vars, Stmt *body) {
    for (int d = rank - 1; d >= 0; d--) body = ks_loop(p, vars[d], 0, dims[d], 1, body);
    return body;
}

void lower_var_idx(Program *p, int rank, const int *vars, Expr **idx) {
    for (int d = 0; d < rank; d++) idx[d] = kx_var(p, vars[d]);
}

void lower_bcast_idx(Program *p, const Buf *in, int out_rank, Expr **idx, Expr **res) {
    int off = out_rank - in->rank;
    if (off < 0) die("broadcast of rank %d into rank %d", in->rank, out_rank);
    for (int d = 0; d < in->rank; d++)
        res[d] = in->dims[d] == 1 ? kx_index(p, 0) : idx[off + d];
}

/* lower_kernel's prologue for a kernel of any name and op label (lower_permute and
 * lower_copy build kernels that are not a node's own). */
static Kernel *named_kernel(Lower *L, const char *name, const char *op, KernelClass c, int nin, Buf *const *ins,
                            Buf *out, int *vars, Expr **idx) {
    Kernel *k = kir_kernel_new(L->p, name, op, c);
    for (int i = 0; i < nin; i++)
        if (ins[i]) kir_param(L->p, k, ins[i], KP_IN);
    if (out) kir_param(L->p, k, out, KP_OUT);
    if (vars) lower_vars(k, out->rank, vars);
    if (vars && idx) lower_var_idx(L->p, out->rank, vars, idx);
    return k;
}

Kernel *lower_kernel(Lower *L, Node *n, KernelClass c, int nin, Buf *const *ins, Buf *out,
                     int *vars, Expr **idx) {
    return named_kernel(L, lower_kname(L, n), n->op_type, c, nin, ins, out, vars, idx);
}

Kernel *lower_map(Lower *L, Node *n, Buf *out, int nin, Buf **ins, MapFn build, void *ctx) {
    Program *p = L->p;
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *vals[16];
    if (nin > COUNTOF(vals)) die("lower_map: %d inputs", nin);
    Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, nin, ins, out, vars, idx);
    for (int i = 0; i < nin; i++) {
        Expr *bi[MAX_RANK];
        lower_bcast_idx(p, ins[i], out->rank, idx, bi);
        vals[i] = kx_load(p, ins[i], bi);
    }
    Expr *v = build(L, n, vals, ctx);
    if (v->type != out->dtype) v = kx_cast(p, out->dtype, v);
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, v));
    return k;
}

/* (lower.h) Loops in output order, so stores are contiguous and loads strided. */
Kernel *lower_permute(Lower *L, const char *name, Buf *out, Buf *in, const int *perm) {
    Program *p = L->p;
    int vars[MAX_RANK];
    Expr *oidx[MAX_RANK], *iidx[MAX_RANK];
    Kernel *k = named_kernel(L, name, "Transpose", KC_COPY, KINS(in), out, vars, oidx);
    for (int d = 0; d < out->rank; d++) iidx[perm[d]] = oidx[d];
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, oidx, kx_load(p, in, iidx)));
    return k;
}

/* Copy by row-major position: iterate over out's dims, and turn the linear position into
 * in's coordinates (divisions by constants, which LLVM strength-reduces). When the shapes are
 * equal it is a plain elementwise map. */
Kernel *lower_copy(Lower *L, const char *name, Buf *out, Buf *in) {
    Program *p = L->p;
    if (kir_numel(out) != kir_numel(in)) die("copy of %s into %s: sizes differ", in->name, out->name);
    bool same = out->rank == in->rank && !memcmp(out->dims, in->dims, sizeof(int64_t) * (size_t)in->rank);
    int vars[MAX_RANK];
    Expr *idx[MAX_RANK], *iidx[MAX_RANK];
    Kernel *k = named_kernel(L, name, "Copy", same ? KC_ELEMENTWISE : KC_COPY, KINS(in), out, vars, idx);
    if (same) {
        for (int d = 0; d < in->rank; d++) iidx[d] = idx[d];
    } else {
        Expr *lin = kx_index(p, 0);
        for (int d = 0; d < out->rank; d++) lin = kx_add(p, kx_mul(p, lin, out->dims[d]), idx[d]);
        for (int d = in->rank - 1; d >= 0; d--) {
            Expr *dim = kx_index(p, in->dims[d]);
            iidx[d] = d == 0 ? lin : kx_bin(p, K_REM, lin, dim);
            if (d) lin = kx_bin(p, K_DIV, lin, dim);
        }
    }
    k->body = lower_wrap(p, out->rank, out->dims, vars, ks_store(p, out, idx, kx_load(p, in, iidx)));
    return k;
}

Program *lower(Graph *g, const Options *o) {
    Program *p = kir_program_new(g->arena, g->name);
    p->opt_level = o ? o->opt_level : 2;
    p->vector_bytes = o && o->vector_bytes ? o->vector_bytes : 16;
    p->arena_align = o && o->arena_align ? o->arena_align : 16;
    p->dot2 = o && o->dot2;
    p->ubs = o && o->ubs;
    p->split_all = o && o->split_all;
    p->ram_first = o && o->ram_first;
    p->banded = o && o->max_arena > 0;
    p->x4_max = o && o->ram_first ? o->x4_max : INT64_MAX;
    p->tuning = o ? o->tuning : NULL;
    p->tune_target = o && o->tune_target ? o->tune_target : "?";
    Lower L = {g, p, ARENA_ARRAY(g->arena, Buf *, g->nvalues + 1), ARENA_ARRAY(g->arena, Buf *, g->nvalues + 1)};

    p->ninputs = g->ninputs;
    p->inputs = ARENA_ARRAY(g->arena, Buf *, g->ninputs + 1);
    for (int i = 0; i < g->ninputs; i++) {
        Value *v = g->inputs[i];
        Buf *b = lower_value_buf(p, v, B_INPUT);
        b->io_index = i;
        b->nibbles = v->nibbles;    /* int4/uint4: read two values a byte (kir.h) */
        b->crumbs = v->crumbs;      /* int2/uint2: four */
        p->inputs[i] = L.vbuf[v->id] = b;
    }
    p->noutputs = g->noutputs;
    p->outputs = ARENA_ARRAY(g->arena, Buf *, 2 * g->noutputs + 1);   /* room for dims outputs */
    Buf **src = ARENA_ARRAY(g->arena, Buf *, g->noutputs + 1); /* outputs needing a copy */
    ir_count_uses(g);               /* dyn_lower_results asks whether a dyn value is read */
    Buf **pack = ARENA_ARRAY(g->arena, Buf *, g->noutputs + 1);   /* dims outputs to pack into */
    for (int i = 0; i < g->noutputs; i++) {
        Value *v = g->outputs[i];
        Buf *b = lower_value_buf(p, v, B_OUTPUT);
        b->io_index = i;
        b->nibbles = v->nibbles;    /* int4/uint4: stored two values a byte (kir.h) */
        b->crumbs = v->crumbs;      /* int2/uint2: four */
        p->outputs[i] = b;
        if (L.vbuf[v->id]) src[i] = L.vbuf[v->id];          /* also an input or an earlier output */
        else if (v->data) src[i] = const_buf(&L, v);
        else if (!(v->dyn && v->producer && dyn_follows(v->producer))) L.vbuf[v->id] = b;
        /* else: a consumer of dyn values computes it at the capacity's strides; packed below */
    }
    /* A data-dependent output reports its actual dims in an extra output after the tensors
     * (the header contract, runtime/model.h.in). */
    for (int i = 0; i < g->noutputs; i++) {
        Value *v = g->outputs[i];
        if (!v->dyn || L.vdims[v->id] || pack[i]) continue;
        bool packed = L.vbuf[v->id] == p->outputs[i];
        if (!packed && !(v->producer && dyn_follows(v->producer)))
            die("lower: dyn output '%s' is not produced by a node", v->name);
        int64_t r = v->rank;
        Buf *d = kir_buf_new(p, arena_printf(g->arena, "%s.dims", v->name), DT_INT64, 1, &r, B_OUTPUT);
        d->dims_of = p->outputs[i];
        d->io_index = p->noutputs;
        p->outputs[p->noutputs++] = d;
        if (packed) L.vdims[v->id] = d;
        else pack[i] = d;
    }
    lower_nodes(&L, g);
    for (int i = 0; i < g->noutputs; i++)
        if (pack[i]) dyn_pack_output(&L, g->outputs[i], p->outputs[i], pack[i]);
    for (int i = 0; i < g->noutputs; i++)
        if (src[i]) {
            Kernel *k = lower_copy(&L, arena_printf(g->arena, "output_%d", i), p->outputs[i], src[i]);
            (void)k;
        }
    return p;
}

/* Rules shared by many ops that do not move data. */
void lower_identity(Lower *L, Node *n) {
    lower_view(L, n, 0, lower_in(L, n, 0));
    /* Dropout's optional mask output (inference: all true) is materialised when used. */
    if (n->op == OP_Dropout && n->nout > 1 && n->out[1]) {
        Buf *m = lower_out(L, n, 1);
        Program *p = L->p;
        int vars[MAX_RANK];
        Expr *idx[MAX_RANK];
        Kernel *k = lower_kernel(L, n, KC_ELEMENTWISE, KNOINS, m, vars, idx);
        k->body = lower_wrap(p, m->rank, m->dims, vars, ks_store(p, m, idx, kx_const(p, DT_BOOL, 1)));
    }
}
