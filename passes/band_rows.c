/* band_rows.c - row bands (patch-based inference, as MCUNetV2 describes it): the first,
 * memory-heavy stages of a CNN run band by band of output rows, so that their large
 * activations never exist whole.
 *
 * A prefix of the graph (convolutions, MaxPools and elementwise ops over NCHW maps, reading one outside
 * map X and leaving one map T to the rest of the graph) is copied once per band of T's rows.
 * Walking the prefix backwards gives the rows each band needs of every map (a conv's window
 * widens them: the halo, recomputed by both neighbouring bands); each copy then reads a Slice
 * of X's rows, its convs take the pads that are real at the band's edges only, and a Concat
 * along H joins the bands into T. Every output element is computed by the same operation on
 * the same inputs as before, so the results are bit-identical. The nodes run band after band,
 * so bufferize's lifetimes keep only one band's maps live at a time (plus the finished
 * bands of T).
 *
 * It runs only under --max-arena (Options.max_arena), when the program lowered without it
 * had an arena over the budget: cli_build then runs this pass and lowers again. Among the
 * prefixes that end at a single map and the band counts, it takes the one with the fewest recomputed multiply-accumulates
 * whose estimated peak, plus 1/32 for what bufferize's packing may lose, fits (the smallest
 * estimate when none does). The estimate sums the
 * bytes of the maps live at each node, as bufferize's lower bound does, without the
 * kernel-level fusions and scratch buffers; -v prints it. Runs after fold_constants (the
 * integer ops of fuse_qdq are what it copies) and before lowering. */
#include <string.h>

#include "pipeline.h"

#define MAX_BANDS 32

typedef struct Rows { int64_t lo, hi; } Rows;

typedef struct Bander {
    Graph *g;
    int *pos;                       /* value id -> index of its producer in g->nodes (-1: none) */
    int *last;                      /* value id -> index of its last reader (nnodes: an output) */
    Rows *need;                     /* value id -> rows a band needs of it */
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

static int64_t conv_macs_row(const Node *n) {
    const Value *w = n->in[n->op == OP_QLinearConv ? 3 : 1], *y = n->out[0];
    return y->dims[0] * y->dims[1] * y->dims[3] * w->dims[1] * w->dims[2] * w->dims[3];
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

typedef struct Plan { int first, k, nb; Value *X, *T; int64_t est, macs; } Plan;

/* Estimated peak and multiply-accumulates of the prefix nodes[first..k] in nb bands. */
static void estimate(Bander *b, Plan *p) {
    Graph *g = b->g;
    int64_t H = p->T->dims[2], h = (H + p->nb - 1) / p->nb, done = 0, peak = 0, macs = 0;
    for (int64_t lo = 0; lo < H; lo += h) {
        Rows r = {lo, lo + h < H ? lo + h : H};
        back_rows(b, g->nodes, p->first, p->k, p->X, p->T, r);
        /* X's rows are a Slice of their own, unless every reader of X is elementwise (the
         * kernel fusion then reads them in place: a QuantizeLinear of the model's input) */
        int64_t xs = 0;
        for (int i = p->first; i <= p->k; i++) {
            Node *n = g->nodes[i];
            for (int j = 0; j < n->nin && !xs; j++)
                if (n->in[j] == p->X && !rowwise(n) && !in_arena(p->X))
                    xs = row_bytes(p->X) * (b->need[p->X->id].hi - b->need[p->X->id].lo);
        }
        for (int i = p->first; i <= p->k; i++) {
            Node *n = g->nodes[i];
            if (n->dead) continue;
            int64_t live = done + xs;
            for (int j = p->first; j <= i; j++) {
                Value *v = g->nodes[j]->out[0];
                Rows q = b->need[v->id];
                int lastj = b->last[v->id] > p->k ? p->k : b->last[v->id];
                if (!g->nodes[j]->dead && lastj >= i) live += row_bytes(v) * (q.hi - q.lo);
            }
            if (in_arena(p->X) && b->last[p->X->id] >= i) live += (int64_t)ir_nbytes(p->X);
            if (live > peak) peak = live;
            if (conv_like(n)) macs += conv_macs_row(n) * (b->need[n->out[0]->id].hi - b->need[n->out[0]->id].lo);
        }
        done += row_bytes(p->T) * (r.hi - r.lo);
    }
    /* the Concat holds every band and T; then the rest of the graph */
    int64_t rest = peak_from(b, p->k + 1);
    if (2 * (int64_t)ir_nbytes(p->T) > peak) peak = 2 * (int64_t)ir_nbytes(p->T);
    p->est = rest > peak ? rest : peak;
    p->macs = macs;
}

static Value *new_value(Graph *g, const char *name, const Value *like, Rows r) {
    Value *v = ir_value_new(g, name);
    int64_t d[4] = {like->dims[0], like->dims[1], r.hi - r.lo, like->dims[3]};
    ir_set_shape(v, like->dtype, 4, d);
    return v;
}

static Value *i64(Graph *g, const char *name, int64_t x) {
    int64_t one = 1;
    return ir_const_new(g, name, DT_INT64, 1, &one, &x);
}

/* Rows [want] of v, which holds rows [have] of the original map. */
static Value *slice_rows(Graph *g, Node *before, Value *v, Rows have, Rows want, const char *name) {
    if (have.lo == want.lo && have.hi == want.hi) return v;
    Node *s = ir_node_insert_before(g, before, OP_Slice, name, 4, 1);
    if (s->opset < 13) s->opset = 13;
    s->in[0] = v;
    s->in[1] = i64(g, arena_printf(g->arena, "%s_starts", name), want.lo - have.lo);
    s->in[2] = i64(g, arena_printf(g->arena, "%s_ends", name), want.hi - have.lo);
    s->in[3] = i64(g, arena_printf(g->arena, "%s_axes", name), 2);
    s->out[0] = new_value(g, arena_printf(g->arena, "%s_out", name), v, want);
    s->out[0]->producer = s;
    return s->out[0];
}

/* Copies the prefix once per band before nodes[first] and joins the bands into T. */
static void apply(Bander *b, const Plan *p) {
    Graph *g = b->g;
    Node *at = g->nodes[p->first];
    Node **orig = ARENA_ARRAY(g->arena, Node *, p->k - p->first + 1);
    for (int i = p->first; i <= p->k; i++) orig[i - p->first] = g->nodes[i];
    int no = p->k - p->first + 1;
    int64_t H = p->T->dims[2], h = (H + p->nb - 1) / p->nb;
    Value **band = ARENA_ARRAY(g->arena, Value *, g->nvalues + 1);
    Value **pieces = ARENA_ARRAY(g->arena, Value *, p->nb + 1);
    int npieces = 0;
    int nvalues0 = g->nvalues;
    for (int64_t lo = 0; lo < H; lo += h) {
        Rows r = {lo, lo + h < H ? lo + h : H};
        int bi = npieces;
        back_rows(b, orig, 0, no - 1, p->X, p->T, r);
        Rows xr = b->need[p->X->id];
        memset(band, 0, sizeof(Value *) * (size_t)nvalues0);
        band[p->X->id] = slice_rows(g, at, p->X, (Rows){0, p->X->dims[2]}, xr,
                                    arena_printf(g->arena, "%s_band%d", p->X->name, bi));
        for (int i = 0; i < no; i++) {
            Node *n = orig[i];
            Value *y = n->out[0];
            Rows o = b->need[y->id];
            if (n->dead || o.hi <= o.lo) continue;
            Node *c = ir_node_insert_before(g, at, n->op, arena_printf(g->arena, "%s_band%d", n->name, bi), n->nin, 1);
            c->op_type = n->op_type, c->domain = n->domain, c->opset = n->opset;
            c->nattrs = n->nattrs;
            c->attrs = ARENA_ARRAY(g->arena, Attr, n->nattrs + 1);
            if (n->nattrs) memcpy(c->attrs, n->attrs, sizeof(Attr) * (size_t)n->nattrs);
            for (int j = 0; j < n->nin; j++) {
                Value *v = n->in[j];
                if (!v || is_const(v)) { c->in[j] = v; continue; }
                Rows want = in_rows(n, v, o);
                Value *src = band[v->id];
                if (!src) die("band_rows: %s has no band of %s", n->name, v->name);
                Rows have = v == p->X ? xr : b->need[v->id];
                c->in[j] = slice_rows(g, c, src, have, want, arena_printf(g->arena, "%s_band%d_in%d", n->name, bi, j));
            }
            if (windowed(n)) {
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
            band[y->id] = c->out[0];
        }
        pieces[npieces++] = slice_rows(g, at, band[p->T->id], b->need[p->T->id], r,
                                       arena_printf(g->arena, "%s_band%d_rows", p->T->name, bi));
    }
    Node *cat = ir_node_insert_before(g, at, OP_Concat, arena_printf(g->arena, "%s_bands", p->T->name), npieces, 1);
    for (int i = 0; i < npieces; i++) cat->in[i] = pieces[i];
    ir_attr_set_int(g, cat, "axis", 2);
    cat->out[0] = new_value(g, arena_printf(g->arena, "%s_joined", p->T->name), p->T, (Rows){0, H});
    cat->out[0]->producer = cat;
    ir_replace_uses(g, p->T, cat->out[0]);
    for (int i = 0; i < no; i++) orig[i]->dead = true;
    ir_compact(g);
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
    Bander b = {g, ARENA_ARRAY(g->arena, int, g->nvalues + 1), ARENA_ARRAY(g->arena, int, g->nvalues + 1),
                ARENA_ARRAY(g->arena, Rows, g->nvalues + 1)};
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
        int64_t base = 0;
        for (int i = first; i <= k; i++)
            if (!g->nodes[i]->dead && conv_like(g->nodes[i]))
                base += conv_macs_row(g->nodes[i]) * g->nodes[i]->out[0]->dims[2];
        for (int nb = 2; nb <= MAX_BANDS && nb <= T->dims[2]; nb++) {
            Plan p = {first, k, nb, X, T, 0, 0};
            estimate(&b, &p);
            p.macs -= base;
            if (!least.T || p.est < least.est) least = p;
            if (p.est + p.est / 32 <= o->max_arena && (!best.T || p.macs < best.macs || (p.macs == best.macs && p.est < best.est)))
                best = p;
        }
    }
    if (!best.T) best = least;
    if (!best.T || best.est >= whole) return;
    if (verbose_level)
        fprintf(stderr, "onnxcc: band_rows: %d bands of '%s' (%lld rows) through '%s': estimated peak %lld B "
                "(layer by layer %lld B), %lld more multiply-accumulates\n", best.nb, best.T->name,
                (long long)best.T->dims[2], g->nodes[best.k]->name, (long long)best.est, (long long)whole,
                (long long)best.macs);
    apply(&b, &best);
}
