/* band_rows.c - row bands (patch-based inference, as MCUNetV2 describes it): the first,
 * memory-heavy stages of a CNN run band by band of output rows, so that their large
 * activations never exist whole.
 *
 * A prefix of the graph (convolutions, MaxPools and elementwise ops over NCHW maps, reading one outside
 * map X and leaving one map T to the rest of the graph) is copied once per band of T's rows.
 * Walking the prefix backwards gives the rows each band needs of every map (a conv's window
 * widens them: the halo). A band's copy of a node computes only its fresh rows, those no
 * band before computed; the halo rows that the next band's windows read again are carried
 * over (a Slice of this band's rows) and a Concat along H puts them above the next band's
 * fresh rows: a line buffer per map, as TinyEngine keeps, so no row is computed twice. X,
 * read whole, is sliced band by band; convs take the pads that are real at the band's edges
 * only; a Concat along H joins T's bands. Every output element is computed by the same
 * operation on the same inputs as before, so the results are bit-identical. The nodes run
 * band after band, so bufferize's lifetimes keep only one band's rows live at a time (plus
 * the carried rows and the finished bands of T).
 *
 * It runs only under --max-arena (Options.max_arena), when the program lowered without it
 * had an arena over the budget: cli_build then runs this pass and lowers again. Every
 * candidate (a prefix that ends at a single map, a band count) is built without being
 * emitted (build: the same code emits the chosen one), which gives its peak - the bytes live
 * at each node of the banded program, as bufferize's lower bound counts them, without the
 * kernel-level fusions and scratch buffers; then the rest of the graph - and the bytes its
 * Slices and Concats copy. It takes the one that copies least (plus 256 a node copy, for
 * the calls) whose peak, plus 1/16 for what bufferize's packing may lose, fits and is below
 * the peak without bands (the smallest peak when none fits); -v prints it, -v -v every
 * candidate. A copy's Node.copies is the band count: the schedule weighs the copies of a
 * layer as the layer (few_macs), so they keep its register tile, and the middle bands'
 * copies are the same code. Runs after fold_constants (the integer ops of fuse_qdq are what
 * it copies) and before lowering. */
#include <string.h>

#include "pipeline.h"

#define MAX_BANDS 32

typedef struct Rows { int64_t lo, hi; } Rows;

typedef struct Bander {
    Graph *g;
    int *pos;                       /* value id -> index of its producer in g->nodes (-1: none) */
    int *last;                      /* value id -> index of its last reader (nnodes: an output) */
    Rows *need;                     /* value id -> rows a band needs of it */
    /* build's work arrays, for prefixes of up to nnodes nodes in up to MAX_BANDS bands */
    Rows *fresh, *have;
    int64_t *keep, *hi, *live;
    int *lastpt, *hb, *carry, *pieces, *in;
    struct Piece *pc;
    int cap;
} Bander;

static bool is_const(const Value *v) { return v && v->data; }

static bool conv_like(const Node *n) { return n->op == OP_Conv || n->op == OP_QLinearConv; }

/* Ops with a window over H: the convs and MaxPool (whose padding is -inf: a band pads only
 * where the map does, as for a conv). Not ceil_mode, whose last window may hang over. */
static bool windowed(const Node *n) {
    return conv_like(n) || (n->op == OP_MaxPool && n->nout == 1 && !ir_attr_int(n, "ceil_mode", 0));
}

/* Elementwise ops whose non-constant inputs have the output's shape: rows map to rows. */
static bool rowwise(const Node *n) {
    switch (n->op) {
    case OP_QLinearAdd: case OP_QLinearMul: case OP_QLinearClip: case OP_QLinearLookup:
    case OP_Relu: case OP_Clip: case OP_Add: case OP_Mul:
    case OP_QuantizeLinear: case OP_DequantizeLinear: break;
    default: return false;
    }
    bool params = n->op == OP_QLinearLookup || n->op == OP_QuantizeLinear || n->op == OP_DequantizeLinear ||
                  n->op == OP_QLinearClip || n->op == OP_QLinearAdd || n->op == OP_QLinearMul;
    for (int i = 0; i < n->nin; i++) {
        const Value *v = n->in[i];
        if (!v) continue;
        if (is_const(v)) {
            if (!params && ir_numel(v) != 1) return false;
            continue;
        }
        if (!ir_same_shape(v, n->out[0])) return false;
    }
    return true;
}

/* A node a band can copy: one 4-D output, N x C x H x W. */
static bool bandable(const Node *n) {
    if (n->dead || n->nout != 1 || n->out[0]->rank != 4 || n->out[0]->dyn) return false;
    if (windowed(n)) {
        const char *ap = ir_attr_str(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") != 0 || is_const(n->in[0]) || n->in[0]->rank != 4) return false;
        for (int i = 1; i < n->nin; i++)
            if (n->in[i] && !is_const(n->in[i])) return false;
        return true;
    }
    return rowwise(n);
}

typedef struct Geom { int64_t k, s, d, pt, pb; } Geom;

/* The H dimension of a conv's window. */
static Geom geom(const Node *n) {
    const int64_t *p = NULL, *s = NULL, *d = NULL, *ks = NULL;
    int np = ir_attr_ints(n, "pads", &p), ns = ir_attr_ints(n, "strides", &s);
    int nd = ir_attr_ints(n, "dilations", &d), nk = ir_attr_ints(n, "kernel_shape", &ks);
    const Value *w = n->op == OP_MaxPool ? NULL : n->in[n->op == OP_QLinearConv ? 3 : 1];
    Geom g = {nk ? ks[0] : w->dims[2], ns ? s[0] : 1, nd ? d[0] : 1, np == 4 ? p[0] : 0, np == 4 ? p[2] : 0};
    return g;
}

/* The rows of a node's activation input that output rows r need (clipped to the input). */
static Rows in_rows(const Node *n, const Value *in, Rows r) {
    if (!windowed(n)) return r;
    Geom c = geom(n);
    Rows x = {r.lo * c.s - c.pt, (r.hi - 1) * c.s - c.pt + (c.k - 1) * c.d + 1};
    if (x.lo < 0) x.lo = 0;
    if (x.hi > in->dims[2]) x.hi = in->dims[2];
    return x;
}

static int64_t row_bytes(const Value *v) {
    return v->dims[0] * v->dims[1] * v->dims[3] * (int64_t)dtype_size(v->dtype);
}

/* Does the arena hold v (not a constant, a graph input or a graph output)? */
static bool in_arena(const Value *v) { return v && !v->data && !v->is_input && !v->is_output; }

/* The most bytes live at one node of nodes[from..] in the graph as it is, counting what was
 * produced before `from` and read from it on. */
static int64_t peak_from(Bander *b, int from) {
    Graph *g = b->g;
    int64_t peak = 0;
    for (int i = from; i < g->nnodes; i++) {
        if (g->nodes[i]->dead) continue;
        int64_t live = 0;
        for (int v = 0; v < g->nvalues; v++) {
            Value *x = g->values[v];
            if (in_arena(x) && b->pos[v] >= 0 && b->pos[v] <= i && b->last[v] >= i) live += (int64_t)ir_nbytes(x);
        }
        if (live > peak) peak = live;
    }
    return peak;
}

/* Rows of every prefix value (nodes[first..k]) that rows r of T need; X's in need[X]. */
static void back_rows(Bander *b, Node **nodes, int first, int k, Value *X, Value *T, Rows r) {
    for (int i = first; i <= k; i++) b->need[nodes[i]->out[0]->id] = (Rows){0, 0};
    b->need[X->id] = (Rows){0, 0};
    b->need[T->id] = r;
    for (int i = k; i >= first; i--) {
        Node *n = nodes[i];
        Rows o = b->need[n->out[0]->id];
        if (n->dead || o.hi <= o.lo) continue;
        for (int j = 0; j < n->nin; j++) {
            Value *v = n->in[j];
            if (!v || is_const(v)) continue;
            Rows x = in_rows(n, v, o), *u = &b->need[v->id];
            if (u->hi <= u->lo) *u = x;
            else {
                if (x.lo < u->lo) u->lo = x.lo;
                if (x.hi > u->hi) u->hi = x.hi;
            }
        }
    }
}

static Value *new_value(Graph *g, const char *name, const Value *like, Rows r) {
    Value *v = ir_value_new(g, name);
    int64_t d[4] = {like->dims[0], like->dims[1], r.hi - r.lo, like->dims[3]};
    ir_set_shape(v, like->dtype, 4, d);
    return v;
}

/* Rows [want] of v, which holds rows [have] of the original map. */
static Value *slice_rows(Graph *g, Node *before, Value *v, Rows have, Rows want, const char *name) {
    if (have.lo == want.lo && have.hi == want.hi) return v;
    Node *s = ir_node_insert_before(g, before, OP_Slice, name, 4, 1);
    if (s->opset < 13) s->opset = 13;
    s->in[0] = v;
    s->in[1] = ir_const_ints(g, arena_printf(g->arena, "%s_starts", name), &(int64_t){want.lo - have.lo}, 1);
    s->in[2] = ir_const_ints(g, arena_printf(g->arena, "%s_ends", name), &(int64_t){want.hi - have.lo}, 1);
    s->in[3] = ir_const_ints(g, arena_printf(g->arena, "%s_axes", name), &(int64_t){2}, 1);
    s->out[0] = new_value(g, arena_printf(g->arena, "%s_out", name), v, want);
    s->out[0]->producer = s;
    return s->out[0];
}

typedef struct Plan { int first, k, nb; Value *X, *T; int64_t est, cost, copied; int nodes; } Plan;

/* One value of the banded program (build): its Value once emitted, its bytes in the arena,
 * and the steps (one a node) from its producer to its last reader. */
typedef struct Piece { Value *v; int64_t bytes; int def, last; } Piece;

/* The banded program of a plan, built once to be measured (emit false: the peak of its
 * values' lifetimes, the bytes its Slices and Concats copy) and once into the graph. Local
 * map i < no is the output of orig[i], local no is X. */
typedef struct Build {
    Bander *b;
    const Plan *p;
    bool emit;
    Node *at, **orig;
    int no;
    int npc, step;
    int64_t copied;
    int nodes;
} Build;

static int local(Build *w, const Value *v) {
    if (v == w->p->X) return w->no;
    int i = w->b->pos[v->id] - w->p->first;
    if (i < 0 || i >= w->no || w->orig[i]->out[0] != v) die("band_rows: %s is not in the prefix", v->name);
    return i;
}

static int piece(Build *w, Value *v, int64_t bytes) {
    if (w->npc == w->b->cap) die("band_rows: %d values", w->npc);
    w->b->pc[w->npc] = (Piece){v, bytes, w->step, w->step};
    return w->npc++;
}

static void use(Build *w, int h) { w->b->pc[h].last = w->step; }

/* Rows [want] of piece h, which holds rows [have] of the map `like` (a Slice unless the same);
 * `fused`: its reader is elementwise and reads it in place (no bytes of its own). */
static int slice_piece(Build *w, int h, const Value *like, Rows have, Rows want, bool fused, const char *name) {
    if (have.lo == want.lo && have.hi == want.hi) return h;
    if (want.lo < have.lo || want.hi > have.hi) die("band_rows: rows %lld..%lld of %s not held", (long long)want.lo,
                                                    (long long)want.hi, like->name);
    w->step++;
    use(w, h);
    int64_t bytes = fused ? 0 : row_bytes(like) * (want.hi - want.lo);
    w->copied += bytes;
    Value *v = w->emit ? slice_rows(w->b->g, w->at, w->b->pc[h].v, have, want, name) : NULL;
    return piece(w, v, bytes);
}

/* Rows [a.lo, b.hi) of the map `like` from pieces ha (rows a) and hb (rows b, after a). */
static int concat_piece(Build *w, int ha, int hb, const Value *like, Rows a, Rows b, const char *name) {
    w->step++;
    use(w, ha), use(w, hb);
    int64_t bytes = row_bytes(like) * (b.hi - a.lo);
    w->copied += bytes;
    Value *v = NULL;
    if (w->emit) {
        Graph *g = w->b->g;
        Node *c = ir_node_insert_before(g, w->at, OP_Concat, name, 2, 1);
        c->in[0] = w->b->pc[ha].v, c->in[1] = w->b->pc[hb].v;
        ir_attr_set_int(g, c, "axis", 2);
        c->out[0] = v = new_value(g, arena_printf(g->arena, "%s_out", name), like, (Rows){a.lo, b.hi});
        v->producer = c;
    }
    return piece(w, v, bytes);
}

/* Band bi's copy of n, computing output rows o from the pieces in[] of its activation inputs. */
static int node_piece(Build *w, Node *n, const int *in, Rows o, int bi) {
    w->step++;
    w->nodes++;
    for (int j = 0; j < n->nin; j++)
        if (in[j] >= 0) use(w, in[j]);
    Value *y = n->out[0];
    if (!w->emit) return piece(w, NULL, row_bytes(y) * (o.hi - o.lo));
    Graph *g = w->b->g;
    Node *c = ir_node_insert_before(g, w->at, n->op, arena_printf(g->arena, "%s_band%d", n->name, bi), n->nin, 1);
    c->op_type = n->op_type, c->domain = n->domain, c->opset = n->opset;
    c->copies = w->p->nb;
    c->nattrs = n->nattrs;
    c->attrs = ARENA_ARRAY(g->arena, Attr, n->nattrs + 1);
    if (n->nattrs) memcpy(c->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
    for (int j = 0; j < n->nin; j++) c->in[j] = in[j] >= 0 ? w->b->pc[in[j]].v : n->in[j];
    if (windowed(n)) {
        /* pads only where the band meets the map's edge */
        Geom q = geom(n);
        Rows x = in_rows(n, n->in[0], o);
        int64_t pt = x.lo - (o.lo * q.s - q.pt);
        int64_t pb = (o.hi - o.lo - 1) * q.s + (q.k - 1) * q.d + 1 - (x.hi - x.lo) - pt;
        if (pt < 0 || pb < 0 || pt > q.pt || pb > q.pb) die("band_rows: pads %lld %lld of %s", (long long)pt, (long long)pb, n->name);
        const int64_t *pads = NULL;
        int np = ir_attr_ints(n, "pads", &pads);
        int64_t np4[4] = {pt, np == 4 ? pads[1] : 0, pb, np == 4 ? pads[3] : 0};
        ir_attr_set_ints(g, c, "pads", np4, 4);
    }
    c->out[0] = new_value(g, arena_printf(g->arena, "%s_band%d", y->name, bi), y, o);
    c->out[0]->producer = c;
    op_info[c->op].infer(g, c);
    if (c->out[0]->dims[2] != o.hi - o.lo || c->out[0]->dtype != y->dtype)
        die("band_rows: band %d of %s has %lld rows, not %lld", bi, n->name, (long long)c->out[0]->dims[2],
            (long long)(o.hi - o.lo));
    return piece(w, c->out[0], row_bytes(y) * (o.hi - o.lo));
}

/* The banded program: band bi computes, of every map of the prefix, only the rows no band
 * before it computed (fresh); the rows of it that a later band's windows still read (from
 * keep on) are carried into the next band, a Slice of the band's rows, and a Concat puts
 * them above that band's fresh rows: a line buffer per map, each row computed once. X, read
 * whole, is sliced band by band. The peak and the bytes copied go to p (emit false), or the
 * nodes into the graph before w->at, T's bands joined by a Concat that replaces T. */
static void build(Build *w) {
    Bander *b = w->b;
    const Plan *p = w->p;
    int no = w->no, nb = p->nb, tl = local(w, p->T);
    Rows *fresh = b->fresh;                 /* [bi * (no + 1) + i] */
    int64_t *keep = b->keep;
    int64_t H = p->T->dims[2], h = (H + nb - 1) / nb;
    /* fresh rows: those the band needs beyond what the bands before computed */
    for (int i = 0; i < no; i++) b->hi[i] = 0;
    for (int bi = 0; bi < nb; bi++) {
        Rows r = {bi * h, (bi + 1) * h < H ? (bi + 1) * h : H};
        back_rows(b, w->orig, 0, no - 1, p->X, p->T, r);
        for (int i = 0; i < no; i++) {
            int64_t nh = w->orig[i]->dead ? 0 : b->need[w->orig[i]->out[0]->id].hi;
            if (nh < b->hi[i]) nh = b->hi[i];
            fresh[bi * (no + 1) + i] = (Rows){b->hi[i], nh};
            b->hi[i] = nh;
        }
    }
    /* keep: the first row of each map that band bi or a later one reads */
    for (int bi = nb - 1; bi >= 0; bi--) {
        int64_t *kp = &keep[bi * (no + 1)];
        for (int i = 0; i <= no; i++) kp[i] = bi + 1 < nb ? keep[(bi + 1) * (no + 1) + i] : INT64_MAX;
        for (int i = 0; i < no; i++) {
            Node *n = w->orig[i];
            Rows o = fresh[bi * (no + 1) + i];
            if (n->dead || o.hi <= o.lo) continue;
            for (int j = 0; j < n->nin; j++) {
                if (!n->in[j] || is_const(n->in[j])) continue;
                int l = local(w, n->in[j]);
                Rows x = in_rows(n, n->in[j], o);
                if (x.lo < kp[l]) kp[l] = x.lo;
            }
        }
        if (bi * h < kp[tl]) kp[tl] = bi * h;   /* the band's rows of T */
    }
    /* where each map is last read in a band (its producer if never) */
    int *lastpt = b->lastpt;
    for (int i = 0; i < no; i++) lastpt[i] = i;
    for (int i = 0; i < no; i++) {
        Node *n = w->orig[i];
        if (n->dead) continue;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] && !is_const(n->in[j]) && n->in[j] != p->X) lastpt[local(w, n->in[j])] = i;
    }
    w->npc = 0, w->step = 0, w->copied = 0, w->nodes = 0;
    Graph *g = b->g;
    int hx = piece(w, p->X, in_arena(p->X) ? (int64_t)ir_nbytes(p->X) : 0);
    int *hb = b->hb, *carry = b->carry, *pieces = b->pieces;
    Rows *have = b->have;
    for (int i = 0; i < no; i++) carry[i] = -1;
    for (int bi = 0; bi < nb; bi++) {
        Rows r = {bi * h, (bi + 1) * h < H ? (bi + 1) * h : H};
        for (int i = 0; i < no; i++) {
            Node *n = w->orig[i];
            Rows o = fresh[bi * (no + 1) + i];
            int64_t kl = keep[bi * (no + 1) + i];
            hb[i] = -1;
            if (n->dead) continue;
            int y = -1;
            if (o.hi > o.lo) {
                int *in = b->in;
                for (int j = 0; j < n->nin; j++) {
                    Value *v = n->in[j];
                    in[j] = -1;
                    if (!v || is_const(v)) continue;
                    int l = local(w, v);
                    Rows want = in_rows(n, v, o);
                    const char *nm = w->emit ? arena_printf(g->arena, "%s_band%d_in%d", n->name, bi, j) : NULL;
                    if (l == no) in[j] = slice_piece(w, hx, v, (Rows){0, v->dims[2]}, want, rowwise(n) && !in_arena(v), nm);
                    else in[j] = slice_piece(w, hb[l], v, have[l], want, false, nm);
                }
                y = node_piece(w, n, in, o, bi);
            }
            /* the line buffer: rows carried from the band before, then the fresh ones */
            if (carry[i] >= 0 && y >= 0) {
                hb[i] = concat_piece(w, carry[i], y, n->out[0], (Rows){kl, o.lo}, o,
                                     w->emit ? arena_printf(g->arena, "%s_ring%d", n->out[0]->name, bi) : NULL);
                have[i] = (Rows){kl, o.hi};
            } else if (carry[i] >= 0) hb[i] = carry[i], have[i] = (Rows){kl, o.lo};
            else hb[i] = y, have[i] = o;
            carry[i] = -1;
            /* after its last reader: T's rows of the band, the rows the next band reads */
            for (int l = 0; l <= i; l++) {
                if (lastpt[l] != i || w->orig[l]->dead) continue;
                Value *v = w->orig[l]->out[0];
                if (l == tl)
                    pieces[bi] = slice_piece(w, hb[l], v, have[l], r, false,
                                             w->emit ? arena_printf(g->arena, "%s_band%d_rows", v->name, bi) : NULL);
                if (bi + 1 == nb) continue;
                int64_t k1 = keep[(bi + 1) * (no + 1) + l], top = fresh[(bi + 1) * (no + 1) + l].lo;
                if (k1 < top) {
                    if (hb[l] < 0) die("band_rows: no rows of %s to carry", v->name);
                    carry[l] = slice_piece(w, hb[l], v, have[l], (Rows){k1, top}, false,
                                           w->emit ? arena_printf(g->arena, "%s_carry%d", v->name, bi + 1) : NULL);
                }
            }
        }
    }
    /* the Concat of T's bands: T whole */
    w->step++;
    for (int bi = 0; bi < nb; bi++) use(w, pieces[bi]);
    w->copied += (int64_t)ir_nbytes(p->T);
    Value *joined = NULL;
    if (w->emit) {
        Node *cat = ir_node_insert_before(g, w->at, OP_Concat, arena_printf(g->arena, "%s_bands", p->T->name), nb, 1);
        for (int bi = 0; bi < nb; bi++) cat->in[bi] = b->pc[pieces[bi]].v;
        ir_attr_set_int(g, cat, "axis", 2);
        cat->out[0] = joined = new_value(g, arena_printf(g->arena, "%s_joined", p->T->name), p->T, (Rows){0, H});
        cat->out[0]->producer = cat;
    }
    piece(w, joined, (int64_t)ir_nbytes(p->T));
    if (in_arena(p->X)) use(w, hx);
    if (w->emit) {
        ir_replace_uses(g, p->T, joined);
        for (int i = 0; i < no; i++) w->orig[i]->dead = true;
        ir_compact(g);
    }
}

/* The plan's estimated peak (the banded prefix, then the rest of the graph as it is) and
 * cost: the bytes copied and the nodes run, the kernel calls and loops around them. */
static void estimate(Bander *b, Plan *p) {
    Build w = {b, p, false, NULL, &b->g->nodes[p->first], p->k - p->first + 1, 0, 0, 0, 0};
    build(&w);
    int64_t *live = b->live;
    for (int s = 0; s <= w.step + 1; s++) live[s] = 0;
    for (int i = 0; i < w.npc; i++) {
        live[b->pc[i].def] += b->pc[i].bytes;
        live[b->pc[i].last + 1] -= b->pc[i].bytes;
    }
    int64_t peak = 0, sum = 0;
    for (int s = 0; s <= w.step; s++) {
        sum += live[s];
        if (sum > peak) peak = sum;
    }
    int64_t rest = peak_from(b, p->k + 1);
    p->est = rest > peak ? rest : peak;
    p->copied = w.copied, p->nodes = w.nodes;
    p->cost = w.copied + 256 * (int64_t)w.nodes;
}

/* Writes the plan's bands into the graph before nodes[first]. */
static void apply(Bander *b, const Plan *p) {
    Graph *g = b->g;
    int no = p->k - p->first + 1;
    Node **orig = ARENA_ARRAY(g->arena, Node *, no);
    for (int i = 0; i < no; i++) orig[i] = g->nodes[p->first + i];
    Build w = {b, p, true, orig[0], orig, no, 0, 0, 0, 0};
    build(&w);
}

/* Position and last reader of every value in node order. */
static void lifetimes(Bander *b) {
    Graph *g = b->g;
    for (int v = 0; v < g->nvalues; v++) b->pos[v] = -1, b->last[v] = -1;
    for (int i = 0; i < g->nnodes; i++) {
        Node *n = g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->nout; j++)
            if (n->out[j]) b->pos[n->out[j]->id] = i;
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]) b->last[n->in[j]->id] = i;
    }
    for (int i = 0; i < g->noutputs; i++) b->last[g->outputs[i]->id] = g->nnodes;
}

void band_rows(Graph *g, const Options *o) {
    if (!o->max_arena || g->parent) return;
    Bander b = {.g = g, .pos = ARENA_ARRAY(g->arena, int, g->nvalues + 1),
                .last = ARENA_ARRAY(g->arena, int, g->nvalues + 1), .need = ARENA_ARRAY(g->arena, Rows, g->nvalues + 1)};
    int nn = g->nnodes + 1, maxin = 1;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i]->nin > maxin) maxin = g->nodes[i]->nin;
    b.fresh = ARENA_ARRAY(g->arena, Rows, (size_t)MAX_BANDS * nn);
    b.keep = ARENA_ARRAY(g->arena, int64_t, (size_t)MAX_BANDS * nn);
    b.have = ARENA_ARRAY(g->arena, Rows, nn);
    b.hi = ARENA_ARRAY(g->arena, int64_t, nn);
    b.lastpt = ARENA_ARRAY(g->arena, int, nn);
    b.hb = ARENA_ARRAY(g->arena, int, nn);
    b.carry = ARENA_ARRAY(g->arena, int, nn);
    b.pieces = ARENA_ARRAY(g->arena, int, MAX_BANDS);
    b.in = ARENA_ARRAY(g->arena, int, maxin);
    /* per band and node: its input Slices, itself, a Concat, T's Slice and the carries */
    b.cap = MAX_BANDS * nn * (maxin + 4) + 4;
    b.pc = ARENA_ARRAY(g->arena, Piece, (size_t)b.cap);
    b.live = ARENA_ARRAY(g->arena, int64_t, (size_t)b.cap + 2);
    lifetimes(&b);
    int64_t whole = peak_from(&b, 0);
    /* the prefix starts at the first node (what precedes a CNN's first conv is small) */
    int first = 0;
    while (first < g->nnodes && g->nodes[first]->dead) first++;
    if (first == g->nnodes || !bandable(g->nodes[first])) return;
    Value *X = NULL;
    for (int j = 0; j < g->nodes[first]->nin; j++)
        if (g->nodes[first]->in[j] && !is_const(g->nodes[first]->in[j])) X = g->nodes[first]->in[j];
    if (!X || X->rank != 4) return;
    Plan best = {0}, least = {0};
    for (int k = first; k < g->nnodes; k++) {
        Node *n = g->nodes[k];
        if (n->dead) continue;
        if (!bandable(n)) break;
        bool inside = true;     /* every activation input made in the prefix, or X */
        for (int j = 0; j < n->nin; j++) {
            Value *v = n->in[j];
            if (v && !is_const(v) && v != X && !(b.pos[v->id] >= first && b.pos[v->id] <= k)) inside = false;
        }
        if (!inside) break;
        /* a cut: one value of the prefix read after it, and X not */
        Value *T = NULL;
        int escaping = 0;
        for (int i = first; i <= k; i++) {
            Value *v = g->nodes[i]->out[0];
            if (!g->nodes[i]->dead && b.last[v->id] > k) escaping++, T = v;
        }
        if (escaping != 1 || b.last[X->id] > k || T->is_output || T->dims[2] < 2) continue;
        for (int nb = 2; nb <= MAX_BANDS && nb <= T->dims[2]; nb++) {
            int64_t h = (T->dims[2] + nb - 1) / nb;
            if ((T->dims[2] + h - 1) / h != nb) continue;   /* a last band of no rows */
            Plan p = {first, k, nb, X, T, 0, 0, 0, 0};
            estimate(&b, &p);
            if (verbose_level >= 2)
                fprintf(stderr, "onnxcc: band_rows: candidate %d bands of '%s' through '%s': peak %lld B, %lld B copied, "
                        "%d nodes\n", nb, T->name, n->name, (long long)p.est, (long long)p.copied, p.nodes);
            if (!least.T || p.est < least.est) least = p;
            if (p.est < whole && p.est + p.est / 16 <= o->max_arena && (!best.T || p.cost < best.cost || (p.cost == best.cost && p.est < best.est)))
                best = p;
        }
    }
    if (!best.T) best = least;
    if (!best.T || best.est >= whole) return;
    if (verbose_level)
        fprintf(stderr, "onnxcc: band_rows: %d bands of '%s' (%lld rows) through '%s': estimated peak %lld B "
                "(layer by layer %lld B), %lld B copied between bands, %d nodes\n", best.nb, best.T->name,
                (long long)best.T->dims[2], g->nodes[best.k]->name, (long long)best.est, (long long)whole,
                (long long)best.copied, best.nodes);
    apply(&b, &best);
}
