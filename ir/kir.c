/* kir.c - constructors for the kernel IR (see kir.h). They fold the trivial index arithmetic
 * (x*1, x+0, constants) so that lowering rules can build indices without care. */
#include "kir.h"

#include <string.h>

const char *const kop_name[K_COUNT] = {
#define X(n, arity, flags) #n,
    KOPS(X)
#undef X
};
const unsigned char kop_arity[K_COUNT] = {
#define X(n, arity, flags) arity,
    KOPS(X)
#undef X
};
const unsigned char kop_flags[K_COUNT] = {
#define X(n, arity, flags) flags,
    KOPS(X)
#undef X
};

Program *kir_program_new(Arena *a, const char *name) {
    Program *p = ARENA_NEW(a, Program);
    p->arena = a;
    p->name = arena_strdup(a, name);
    p->arena_align = 16;
    p->vector_bytes = 16;
    p->opt_level = 2;
    p->flash_size = p->stack_size = -1;
    return p;
}

static bool name_taken(const Program *p, const char *name) {
    for (int i = 0; i < p->nbufs; i++)
        if (strcmp(p->bufs[i]->name, name) == 0) return true;
    return false;
}

/* Buffer names are unique in a program so that the text form can refer to buffers by name: a
 * view named like what it views (lowering does that) becomes "name.2", and so on. */
static char *unique_name(Program *p, const char *name) {
    if (!name_taken(p, name)) return arena_strdup(p->arena, name);
    for (int n = 2;; n++) {
        char *s = arena_printf(p->arena, "%s.%d", name, n);
        if (!name_taken(p, s)) return s;
    }
}

Buf *kir_buf_new(Program *p, const char *name, DType t, int rank, const int64_t *dims, BufKind k) {
    p->bufs = arena_grow(p->arena, p->bufs, p->nbufs, &p->capbufs, p->nbufs + 1, sizeof(Buf *));
    Buf *b = ARENA_NEW(p->arena, Buf);
    b->id = p->nbufs;
    b->name = unique_name(p, name);
    b->dtype = t;
    b->rank = rank;
    if (rank < 0 || rank > MAX_RANK) die("buffer %s: rank %d", name, rank);
    if (rank) memcpy(b->dims, dims, sizeof(int64_t) * (size_t)rank);
    b->kind = k;
    b->offset = -1;
    b->first = b->last = -1;
    p->bufs[p->nbufs++] = b;
    return b;
}

Buf *kir_view_new(Program *p, Buf *of, const char *name, int rank, const int64_t *dims) {
    Buf *b = kir_buf_new(p, name, of->dtype, rank, dims, of->kind);
    b->alias = of;
    b->io_index = of->io_index;
    b->data = of->data;
    if (kir_numel(b) != kir_numel(of)) die("view %s of %s: sizes differ", name, of->name);
    return b;
}

int kir_io_rank(const Buf *b) { return b->rank - b->string; }

size_t kir_io_nbytes(const Buf *b) {
    int bits = kir_pack_bits(b);
    return bits ? ((size_t)kir_numel(b) * (size_t)bits + 7) / 8 : kir_nbytes(b);
}

int kir_io_dtype(const Buf *b) { return b->string ? DT_STRING : dtype_onnx(b->dtype, kir_pack_bits(b)); }

void kir_nibbles_pack(uint8_t *packed, const uint8_t *v, size_t n, int bits) {
    size_t per = 8 / (size_t)bits;
    unsigned mask = (1u << bits) - 1;
    memset(packed, 0, (n + per - 1) / per);
    for (size_t i = 0; i < n; i++) packed[i / per] |= (uint8_t)((v[i] & mask) << (bits * (int)(i % per)));
}

void kir_nibbles_unpack(uint8_t *v, const uint8_t *packed, size_t n, bool sign, int bits) {
    size_t per = 8 / (size_t)bits;
    unsigned mask = (1u << bits) - 1, half = 1u << (bits - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned x = (packed[i / per] >> (bits * (int)(i % per))) & mask;
        v[i] = (uint8_t)(sign && x >= half ? x + (0x100 - (1u << bits)) : x);
    }
}

int kir_dims_output(const Program *p, const Buf *b) {
    for (int i = 0; i < p->noutputs; i++)
        if (p->outputs[i]->dims_of == b) return i;
    return -1;
}

Buf *kir_root(Buf *b) {
    while (b->alias) b = b->alias;
    return b;
}

int64_t kir_numel(const Buf *b) {
    int64_t n = 1;
    for (int d = 0; d < b->rank; d++) n = sz_mul(n, b->dims[d]);
    return n;
}

size_t kir_nbytes(const Buf *b) { return (size_t)kir_numel(b) * dtype_size(b->dtype); }

Kernel *kir_kernel_new(Program *p, const char *name, const char *ops, KernelClass c) {
    p->kernels = arena_grow(p->arena, p->kernels, p->nkernels, &p->capkernels, p->nkernels + 1,
                            sizeof(Kernel *));
    Kernel *k = ARENA_NEW(p->arena, Kernel);
    k->id = p->nkernels;
    k->name = arena_strdup(p->arena, name);
    k->ops = arena_strdup(p->arena, ops);
    k->kclass = c;
    p->kernels[p->nkernels++] = k;
    return k;
}

void kir_add_nodes(Program *p, Kernel *k, const char *const *names, int n) {
    if (n <= 0) return;
    const char **all = ARENA_ARRAY(p->arena, const char *, k->nnodes + n);
    for (int i = 0; i < k->nnodes; i++) all[i] = k->nodes[i];
    for (int i = 0; i < n; i++) all[k->nnodes + i] = names[i];
    k->nodes = all;
    k->nnodes += n;
}

int kir_param_index(const Kernel *k, const Buf *b) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == b) return i;
    return -1;
}

void kir_param(Program *p, Kernel *k, Buf *b, ParamMode m) {
    int i = kir_param_index(k, b);
    if (i >= 0) {
        k->modes[i] |= m;
        return;
    }
    int cap = k->capparams;
    k->params = arena_grow(p->arena, k->params, k->nparams, &k->capparams, k->nparams + 1, sizeof(Buf *));
    k->modes = arena_grow(p->arena, k->modes, k->nparams, &cap, k->nparams + 1, sizeof(ParamMode));
    k->params[k->nparams] = b;
    k->modes[k->nparams++] = m;
}

int kir_var(Kernel *k) { return k->nvars++; }

int kir_scalar(Program *p, Kernel *k, DType t) {
    k->scalars = arena_grow(p->arena, k->scalars, k->nscalars, &k->capscalars, k->nscalars + 1, sizeof(DType));
    k->scalars[k->nscalars] = t;
    return k->nscalars++;
}

void kir_compact(Program *p) {
    int n = 0;
    for (int i = 0; i < p->nkernels; i++)
        if (!p->kernels[i]->dead) { p->kernels[n] = p->kernels[i]; p->kernels[n]->id = n; n++; }
    p->nkernels = n;
}

Kernel *kir_ctl_new(Program *p, const char *name, KernelCtl c, Buf *counter, Buf *trip,
                    int64_t ntrip, Buf *cond, int64_t max) {
    static const char *const ops[] = {"", "Loop", "If", "Else", "End"};
    Kernel *k = kir_kernel_new(p, name, ops[c], KC_GENERIC);
    k->ctl = c;
    k->counter = counter;
    k->trip = trip;
    k->cond = cond;
    k->ntrip = trip ? -1 : ntrip;
    k->max = max;
    if (counter) kir_param(p, k, counter, KP_INOUT);
    if (trip) kir_param(p, k, trip, KP_IN);
    if (cond) kir_param(p, k, cond, KP_IN);
    return k;
}

int64_t kir_runs(const Program *p, int i) {
    int64_t n = 1;
    int depth = 0;                  /* regions closed between kernel j and kernel i */
    for (int j = i - 1; j >= 0; j--) {
        const Kernel *k = p->kernels[j];
        if (k->dead || !k->ctl || k->ctl == KCTL_ELSE) continue;
        if (k->ctl == KCTL_END) depth++;
        else if (depth > 0) depth--;
        else if (k->ctl == KCTL_LOOP && k->ntrip > 0) n = sat_mul(n, k->ntrip);
    }
    return n;
}

int kir_ctl_match(const Program *p, int i) {
    int depth = 0;
    for (int j = i + 1; j < p->nkernels; j++) {
        KernelCtl c = p->kernels[j]->ctl;
        if (c == KCTL_LOOP || c == KCTL_IF) depth++;
        else if (c == KCTL_END && depth-- == 0) return j;
        else if (c == KCTL_ELSE && depth == 0 && p->kernels[i]->ctl == KCTL_IF) return j;
    }
    die("control kernel %s has no end", p->kernels[i]->name);
}

/* ---- expressions ---- */
static Expr *mk(Program *p, ExprKind kind, DType t, int nargs) {
    Expr *e = ARENA_NEW(p->arena, Expr);
    e->kind = kind;
    e->type = t;
    e->nargs = nargs;
    if (nargs) e->args = ARENA_ARRAY(p->arena, Expr *, nargs);
    return e;
}

Expr *kx_const(Program *p, DType t, double v) {
    Expr *e = mk(p, E_CONST, t, 0);
    if (dtype_is_float(t)) e->f = v;
    else e->i = sat_i64(v);             /* as the interpreter's casts (kinterp.c) */
    return e;
}

Expr *kx_int(Program *p, DType t, int64_t v) {
    Expr *e = mk(p, E_CONST, t, 0);
    e->i = v;
    return e;
}

Expr *kx_index(Program *p, int64_t v) {
    Expr *e = mk(p, E_CONST, DT_INDEX, 0);
    e->i = v;
    return e;
}

Expr *kx_var(Program *p, int var) {
    Expr *e = mk(p, E_VAR, DT_INDEX, 0);
    e->var = var;
    return e;
}

Expr *kx_scalar(Program *p, Kernel *k, int reg) {
    if (reg < 0 || reg >= k->nscalars) die("scalar register %d of %d", reg, k->nscalars);
    Expr *e = mk(p, E_SCALAR, k->scalars[reg], 0);
    e->var = reg;
    return e;
}

Expr *kx_load(Program *p, Buf *b, Expr **idx) {
    Expr *e = mk(p, E_LOAD, b->dtype, b->rank);
    e->buf = b;
    for (int d = 0; d < b->rank; d++) e->args[d] = idx[d];
    return e;
}

Expr *kx_un(Program *p, KOp op, Expr *a) {
    Expr *e = mk(p, E_UN, op == K_NOT ? DT_BOOL : a->type, 1);
    e->op = op;
    e->args[0] = a;
    return e;
}

/* a as type `to` by op (K_CAST: the value converted, K_BITCAST: its bits), a itself when it
 * has that type */
static Expr *retype(Program *p, KOp op, DType to, Expr *a) {
    if (a->type == to) return a;
    Expr *e = mk(p, E_UN, to, 1);
    e->op = op;
    e->args[0] = a;
    return e;
}

Expr *kx_bitcast(Program *p, DType to, Expr *a) { return retype(p, K_BITCAST, to, a); }

/* every value of `from` converts exactly to `to`, so a conversion there and back is the
 * identity (the 16-bit and 8-bit floats are held as float32 in registers) */
static bool exact_widening(DType from, DType to) {
    static const struct { DType t; int bits; bool sign; } ints[] = {
        {DT_INT8, 8, true}, {DT_UINT8, 8, false}, {DT_INT16, 16, true}, {DT_UINT16, 16, false},
        {DT_INT32, 32, true}, {DT_UINT32, 32, false}, {DT_INT64, 64, true}, {DT_UINT64, 64, false},
    };
    int fb = 0, tb = 0;
    bool fs = false, ts = false;
    if (from == to) return true;
    if (from == DT_BOOL) return to != DT_INDEX;
    if (dtype_is_float(from)) return from != DT_DOUBLE && (to == DT_DOUBLE || (to == DT_FLOAT && from != DT_FLOAT));
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i].t == from) fb = ints[i].bits, fs = ints[i].sign;
        if (ints[i].t == to) tb = ints[i].bits, ts = ints[i].sign;
    }
    if (!fb) return false;
    if (to == DT_FLOAT) return fb <= 16;
    if (to == DT_DOUBLE) return fb <= 32;
    if (!tb) return false;
    return fs ? ts && tb >= fb : (ts ? tb > fb : tb >= fb);
}

/* a cast back to the type a value was exactly widened from is that value itself (a Copy or
 * Split of float8 data moves bytes instead of converting them there and back) */
Expr *kx_cast(Program *p, DType to, Expr *a) {
    if (a->kind == E_UN && a->op == K_CAST && a->args[0]->type == to && exact_widening(to, a->type))
        return a->args[0];
    return retype(p, K_CAST, to, a);
}

Expr *kx_bin(Program *p, KOp op, Expr *a, Expr *b) {
    if (a->type != b->type) die("kx_bin %s: operand types %d and %d", kop_name[op], a->type, b->type);
    Expr *e = mk(p, E_BIN, kop_flags[op] & KF_CMP ? DT_BOOL : a->type, 2);
    e->op = op;
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

Expr *kx_select(Program *p, Expr *c, Expr *a, Expr *b) {
    if (c->type != DT_BOOL || a->type != b->type) die("kx_select: bad operand types");
    Expr *e = mk(p, E_SELECT, a->type, 3);
    e->args[0] = c;
    e->args[1] = a;
    e->args[2] = b;
    return e;
}

static bool is_iconst(const Expr *e, int64_t v) {
    return e->kind == E_CONST && e->type == DT_INDEX && e->i == v;
}

Expr *kx_and(Program *p, Expr *a, Expr *b) {
    if (!a) return b;
    if (!b) return a;
    return kx_bin(p, K_AND, a, b);
}

Expr *kx_add(Program *p, Expr *a, Expr *b) {
    if (a->kind == E_CONST && b->kind == E_CONST) return kx_index(p, a->i + b->i);
    if (is_iconst(a, 0)) return b;
    if (is_iconst(b, 0)) return a;
    return kx_bin(p, K_ADD, a, b);
}

Expr *kx_mul(Program *p, Expr *a, int64_t c) {
    if (a->kind == E_CONST) return kx_index(p, a->i * c);
    if (c == 1) return a;
    if (c == 0) return kx_index(p, 0);
    return kx_bin(p, K_MUL, a, kx_index(p, c));
}

Expr *kx_addc(Program *p, Expr *a, int64_t c) { return kx_add(p, a, kx_index(p, c)); }

/* ---- statements ---- */
static Stmt *mks(Program *p, StmtKind k) {
    Stmt *s = ARENA_NEW(p->arena, Stmt);
    s->kind = k;
    return s;
}

Stmt *ks_loop(Program *p, int var, int64_t lo, int64_t hi, int64_t step, Stmt *body) {
    Stmt *s = mks(p, S_LOOP);
    s->var = var;
    s->lo = kx_index(p, lo);
    s->hi = kx_index(p, hi);
    s->step = step;
    s->body = body;
    return s;
}

Stmt *ks_red_loop(Program *p, int var, int64_t n, Stmt *body) {
    Stmt *s = ks_loop(p, var, 0, n, 1, body);
    s->hints |= LH_REDUCTION;
    return s;
}

Stmt *ks_store(Program *p, Buf *b, Expr **idx, Expr *val) {
    Stmt *s = mks(p, S_STORE);
    s->buf = b;
    s->idx = ARENA_ARRAY(p->arena, Expr *, b->rank + 1);
    for (int d = 0; d < b->rank; d++) s->idx[d] = idx[d];
    if (val->type != b->dtype) die("store of type %d into %s (%d)", val->type, b->name, b->dtype);
    s->val = val;
    return s;
}

Stmt *ks_set(Program *p, int reg, Expr *val) {
    Stmt *s = mks(p, S_SET);
    s->var = reg;
    s->val = val;
    return s;
}

Stmt *ks_if(Program *p, Expr *cond, Stmt *then, Stmt *els) {
    Stmt *s = mks(p, S_IF);
    s->cond = cond;
    s->then = then;
    s->els = els;
    return s;
}

Stmt *ks_seq(Stmt *a, Stmt *b) {
    if (!a) return b;
    Stmt *t = a;
    while (t->next) t = t->next;
    t->next = b;
    return a;
}

Expr *kx_clone(Program *p, const Expr *e) {
    Expr *c = ARENA_NEW(p->arena, Expr);
    *c = *e;
    if (e->nargs) {
        c->args = ARENA_ARRAY(p->arena, Expr *, e->nargs);
        for (int i = 0; i < e->nargs; i++) c->args[i] = kx_clone(p, e->args[i]);
    }
    return c;
}

Stmt *ks_clone(Program *p, const Stmt *s) {
    if (!s) return NULL;
    Stmt *c = ARENA_NEW(p->arena, Stmt);
    *c = *s;
    if (s->lo) c->lo = kx_clone(p, s->lo);
    if (s->hi) c->hi = kx_clone(p, s->hi);
    if (s->val) c->val = kx_clone(p, s->val);
    if (s->cond) c->cond = kx_clone(p, s->cond);
    if (s->idx) {
        c->idx = ARENA_ARRAY(p->arena, Expr *, s->buf->rank + 1);
        for (int d = 0; d < s->buf->rank; d++) c->idx[d] = kx_clone(p, s->idx[d]);
    }
    c->body = ks_clone(p, s->body);
    c->then = ks_clone(p, s->then);
    c->els = ks_clone(p, s->els);
    c->next = ks_clone(p, s->next);
    return c;
}

bool kir_byte_kernel(const Kernel *k) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i]->dtype == DT_UINT8 || k->params[i]->dtype == DT_INT8) return true;
    return false;
}

/* The whole kernel is searched, not only the chain of single loops down from its body: a
 * group below a list of several statements (a kernel of several parts) is found too. */
static const Stmt *first_parallel(const Stmt *s) {
    for (; s; s = s->next) {
        if (s->kind == S_LOOP && (s->hints & LH_PARALLEL)) return s;
        const Stmt *t = first_parallel(s->body);
        if (!t) t = first_parallel(s->then);
        if (!t) t = first_parallel(s->els);
        if (t) return t;
    }
    return NULL;
}

const Stmt *kir_parallel_loop(const Kernel *k) { return first_parallel(k->body); }

static bool writes_touched(const Kernel *w, const Kernel *k) {
    for (int i = 0; i < w->nparams; i++) {
        if (!(w->modes[i] & KP_OUT)) continue;
        const Buf *r = kir_root(w->params[i]);
        for (int j = 0; j < k->nparams; j++)
            if (kir_root(k->params[j]) == r) return true;
    }
    return false;
}

bool kir_independent(const Kernel *a, const Kernel *b) { return !writes_touched(a, b) && !writes_touched(b, a); }

void kir_unjoin(Program *p) {
    for (int i = 0; i < p->nkernels; i++) p->kernels[i]->joined = false;
}

int kir_joined_end(const Program *p, int i) {
    int end = i + 1;
    for (int j = i + 1; j < p->nkernels; j++) {
        if (p->kernels[j]->dead) continue;
        if (!p->kernels[j]->joined) break;
        end = j + 1;
    }
    return end;
}

int64_t kir_parallel_step(const Stmt *s) { return s->hints & LH_VECTOR ? s->hi->i - s->lo->i : s->step; }

/* Down from v to a value on the step grid of every loop of the group strictly around it. */
static int64_t grid_below(const Stmt *first, int64_t v) {
    for (bool moved = true; moved;) {
        moved = false;
        for (const Stmt *s = first; s; s = s->next) {
            int64_t lo = s->lo->i, hi = s->hi->i;
            int64_t step = kir_parallel_step(s);
            if (v <= lo || v >= hi || (v - lo) % step == 0) continue;
            v = lo + (v - lo) / step * step;
            moved = true;
        }
    }
    return v;
}

void kir_parallel_cuts(const Stmt *first, int64_t *cuts) {
    int64_t lo = first->lo->i, hi = first->hi->i, n = first->tasks;
    for (const Stmt *s = first; s; s = s->next) lo = MIN(lo, s->lo->i), hi = MAX(hi, s->hi->i);
    for (int64_t t = 0; t <= n; t++) cuts[t] = t == n ? hi : grid_below(first, lo + (hi - lo) * t / n);
}

bool expr_reads_var(const Expr *e, int var) {
    if (!e) return false;
    if (e->kind == E_VAR && e->var == var) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads_var(e->args[i], var)) return true;
    return false;
}

bool kx_equal(const Expr *a, const Expr *b) {
    if (a->kind != b->kind || a->op != b->op || a->type != b->type || a->f != b->f || a->i != b->i ||
        a->var != b->var || a->buf != b->buf || a->nargs != b->nargs)
        return false;
    for (int i = 0; i < a->nargs; i++)
        if (!kx_equal(a->args[i], b->args[i])) return false;
    return true;
}
