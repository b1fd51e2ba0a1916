/* winograd.c - the rules of the two internal ops that passes/winograd.c puts around a 3x3
 * conv's 1x1 convs: Winograd's F(m x m, 3x3) for tiles of m = 2 or 4 outputs a side.
 *
 * For each m x m tile of the output, the conv reads an r x r tile d (r = m + 2) of its
 * (padded) input, and
 *     y = A^T [ (G g G^T) . (B^T d B) ] A
 * where g is a 3x3 kernel and `.` the elementwise product. F(2x2, 3x3):
 *     B^T = [1  0 -1  0]    G = [ 1    0    0 ]    A^T = [1  1  1  0]
 *           [0  1  1  0]        [ 1/2  1/2  1/2]          [0  1 -1 -1]
 *           [0 -1  1  0]        [ 1/2 -1/2  1/2]
 *           [0  1  0 -1]        [ 0    0    1 ]
 * F(4x4, 3x3), from the points 0, 1, -1, 2, -2 and infinity:
 *     B^T = [4  0 -5  0  1  0]    G = [ 1/4    0     0  ]    A^T = [1  1  1  1  1  0]
 *           [0 -4 -4  1  1  0]        [-1/6  -1/6  -1/6 ]          [0  1 -1  2 -2  0]
 *           [0  4 -4 -1  1  0]        [-1/6   1/6  -1/6 ]          [0  1  1  4  4  0]
 *           [0 -2 -1  2  1  0]        [ 1/24  1/12  1/6 ]          [0  1 -1  8 -8  1]
 *           [0  2 -1 -2  1  0]        [ 1/24 -1/12  1/6 ]
 *           [0  4  0 -5  0  1]        [ 0     0     1  ]
 * Summed over the input channels, each of the r^2 products is a 1x1 conv over the tiles:
 * M_ab[n, m] = sum_c U_ab[m, c] V_ab[n, c], with U = G g G^T (constants that passes/winograd.c
 * computes with this file's G, winograd_g) and V = B^T d B. The form is the op's operand count: 16 for m = 2, 36 for m = 4.
 *
 * WinogradInput: x [N, C, mT+2, mS+2] (the conv's input, padded) -> the r^2 V_ab [N, C, T, S],
 * output r a + b, V_ab[n, c, t, s] = (B^T d B)[a][b] of the tile d = x[n, c, mt.., ms..].
 * WinogradOutput: the r^2 M_ab [N, M, T, S] -> y [N, M, mT, mS], y[n, m, mt + i, ms + j] =
 * (A^T M A)[i][j] of the tile's M; with attribute sizes [H, W], y [N, M, H, W] of a height
 * (mT - m < H < mT) or width that is not a multiple of m, whose last tiles' outputs past it are
 * not computed. The conv's bias is M_11's (its 1x1 conv's bias): A^T's column 1 is all ones,
 * so M_11 reaches every output once.
 *
 * Each kernel is one perfect nest n, c, t, s around its stores (a WinogradOutput with a partial
 * last tile: below n and c, one nest per region of tiles, a region_mover), which read and write
 * every 4-d operand at channel c and elsewhere at expressions free of it: a channel_mover to
 * the schedule (passes/schedule.c), which gives all its operands NHWC or none and then runs the
 * channels innermost, as vectors. The sums are written once per output as expression trees
 * whose common parts (a row of B^T d, a row of M A) LLVM computes once. */
#include "../lower.h"

typedef struct {
    int m, r;                           /* outputs and inputs a tile side */
    int bt[6][6], at[4][6];
    double g[6][3];
} Form;

static const Form forms[2] = {
    {2, 4, {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}, {{1, 1, 1, 0}, {0, 1, -1, -1}},
     {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}},
    {4, 6,
     {{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0},
      {0, 4, 0, -5, 0, 1}},
     {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}},
     {{0.25, 0, 0}, {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
      {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}}},
};

const double (*winograd_g(int m))[3] {
    for (int i = 0; i < 2; i++)
        if (forms[i].m == m) return forms[i].g;
    die("winograd: no form of %dx%d tiles", m, m);
}

/* the form of r^2 products: 16 or 36 */
static const Form *form_of(const Node *n, int products) {
    for (int i = 0; i < 2; i++)
        if (forms[i].r * forms[i].r == products) return &forms[i];
    die("%s: %d products are no Winograd form (16 or 36)", n->name, products);
}

/* c e, a float constant times e where |c| is not 1 */
static Expr *scaled(Program *p, int c, Expr *e) {
    e = kx_clone(p, e);
    return c == 1 || c == -1 ? e : kx_bin(p, K_MUL, e, kx_const(p, DT_FLOAT, c < 0 ? -c : c));
}

/* sum_i c[i] e[i] over integer c[i], a positive term first (every row of B^T and A^T has one) */
static Expr *lin_sum(Program *p, const int *c, Expr **e, int n) {
    int f = 0;
    while (f < n && c[f] <= 0) f++;
    if (f == n) die("winograd: a transform row without a positive entry");
    Expr *s = scaled(p, c[f], e[f]);
    for (int i = 0; i < n; i++)
        if (c[i] && i != f) s = kx_bin(p, c[i] > 0 ? K_ADD : K_SUB, s, scaled(p, c[i], e[i]));
    return s;
}

/* idx = [n, c, m t + i, m s + j]: row i, column j of tile (t, s), at loop variables vars n, c,
 * t, s (the input's r x r tiles and the output's m x m ones both step m) */
static void tile_index(Program *p, int m, const int *vars, int i, int j, Expr **idx) {
    idx[0] = kx_var(p, vars[0]), idx[1] = kx_var(p, vars[1]);
    idx[2] = kx_addc(p, kx_mul(p, kx_var(p, vars[2]), m), i);
    idx[3] = kx_addc(p, kx_mul(p, kx_var(p, vars[3]), m), j);
}

static void check_tiles(const Node *n, const Value *v) {
    if (v->rank != 4 || v->dtype != DT_FLOAT) die("%s: %s is not a float 4-d map", n->name, v->name);
}

void infer_winograd_input(Graph *g, Node *n) {
    (void)g;
    const Value *x = n->in[0];
    const Form *f = form_of(n, n->nout);
    check_tiles(n, x);
    if (x->dims[2] < f->r || x->dims[3] < f->r || (x->dims[2] - 2) % f->m || (x->dims[3] - 2) % f->m)
        die("%s: a padded input of %lldx%lld holds no whole %dx%d tiles of stride %d", n->name, (long long)x->dims[2],
            (long long)x->dims[3], f->r, f->r, f->m);
    int64_t dims[4] = {x->dims[0], x->dims[1], (x->dims[2] - 2) / f->m, (x->dims[3] - 2) / f->m};
    for (int i = 0; i < n->nout; i++) ir_set_shape(n->out[i], DT_FLOAT, 4, dims);
}

/* y's height and width: mT and mS, or less where the node's `sizes` says so (a map whose
 * last tiles lose rows or columns of outputs) */
static void output_size(const Node *n, const Form *f, const Value *v, int64_t *oh, int64_t *ow) {
    const int64_t *sz;
    int k = ir_attr_ints(n, "sizes", &sz);
    *oh = f->m * v->dims[2], *ow = f->m * v->dims[3];
    if (!k) return;
    if (k != 2 || sz[0] <= *oh - f->m || sz[0] > *oh || sz[1] <= *ow - f->m || sz[1] > *ow)
        die("%s: sizes do not fit its tiles", n->name);
    *oh = sz[0], *ow = sz[1];
}

void infer_winograd_output(Graph *g, Node *n) {
    (void)g;
    const Value *v = n->in[0];
    for (int i = 0; i < n->nin; i++) {
        check_tiles(n, n->in[i]);
        for (int d = 0; d < 4; d++)
            if (n->in[i]->dims[d] != v->dims[d]) die("%s: its inputs differ in shape", n->name);
    }
    int64_t dims[4] = {v->dims[0], v->dims[1], 0, 0};
    output_size(n, form_of(n, n->nin), v, &dims[2], &dims[3]);
    ir_set_shape(n->out[0], DT_FLOAT, 4, dims);
}

void lower_winograd_input(Lower *L, Node *n) {
    Program *p = L->p;
    const Form *f = form_of(n, n->nout);
    int r = f->r;
    Buf *x = lower_in(L, n, 0), *v[36];
    for (int i = 0; i < n->nout; i++) v[i] = lower_out(L, n, i);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), v[0], NULL, NULL);
    for (int i = 1; i < n->nout; i++) kir_param(p, k, v[i], KP_OUT);
    int vars[4];
    lower_vars(k, 4, vars);
    Stmt *body = NULL;
    for (int a = 0; a < r; a++) {
        Expr *rows[6];                  /* row a of B^T d, column j */
        for (int j = 0; j < r; j++) {
            Expr *d[6];
            for (int i = 0; i < r; i++) {
                Expr *xi[4];
                tile_index(p, f->m, vars, i, j, xi);
                d[i] = kx_load(p, x, xi);
            }
            rows[j] = lin_sum(p, f->bt[a], d, r);
        }
        for (int b = 0; b < r; b++) {
            Expr *vi[4];
            lower_var_idx(p, 4, vars, vi);
            body = ks_seq(body, ks_store(p, v[r * a + b], vi, lin_sum(p, f->bt[b], rows, r)));
        }
    }
    k->body = lower_wrap(p, 4, v[0]->dims, vars, body);
}

/* y[n, m, m t + i, m s + j] = (A^T M A)[i][j] of tile t, s (M: the r^2 mp[ab]) */
static Expr *output_sum(Program *p, const Form *f, Buf **mp, const int *vars, int i, int j) {
    Expr *rows[6];                      /* row a of M A, column j */
    for (int a = 0; a < f->r; a++) {
        Expr *e[6];
        for (int b = 0; b < f->r; b++) {
            Expr *mi[4];
            lower_var_idx(p, 4, vars, mi);
            e[b] = kx_load(p, mp[f->r * a + b], mi);
        }
        rows[a] = lin_sum(p, f->at[j], e, f->r);
    }
    return lin_sum(p, f->at[i], rows, f->r);
}

static Stmt *output_store(Program *p, const Form *f, Buf *y, Buf **mp, const int *vars, int i, int j) {
    Expr *yi[4];
    tile_index(p, f->m, vars, i, j, yi);
    return ks_store(p, y, yi, output_sum(p, f, mp, vars, i, j));
}

/* Whole tiles: one nest n, m, t, s around the m^2 stores of a tile. A height or width that is
 * not a multiple of m: below n and m, one nest per region of tiles, each around the stores of
 * the outputs its tiles have: the whole tiles, the last column's, the last row's, the corner's.
 * Each region is a region_mover's to the schedule, which runs the channels innermost in it;
 * each M_ab is then read once in all, as with whole tiles. (One nest per output of a tile, as
 * this was, read the nine M_ab of each output over the whole map: 36 planes instead of 16,
 * Inception-v3's 71x71 output transform at 15 GB/s, 1.3 ms on a Zen 4 core.) */
void lower_winograd_output(Lower *L, Node *n) {
    Program *p = L->p;
    const Form *f = form_of(n, n->nin);
    Buf *mp[36], *y = lower_out(L, n, 0);
    for (int i = 0; i < n->nin; i++) mp[i] = lower_in(L, n, i);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, n->nin, mp, y, NULL, NULL);
    int vars[4];
    lower_vars(k, 4, vars);
    const int64_t *md = mp[0]->dims;
    if (y->dims[2] == f->m * md[2] && y->dims[3] == f->m * md[3]) {
        Stmt *body = NULL;
        for (int i = 0; i < f->m; i++)
            for (int j = 0; j < f->m; j++) body = ks_seq(body, output_store(p, f, y, mp, vars, i, j));
        k->body = lower_wrap(p, 4, md, vars, body);
        return;
    }
    /* tiles [0, whole) of each dim have all m outputs; tile `whole`, if any, the first rest */
    int64_t whole[2] = {y->dims[2] / f->m, y->dims[3] / f->m}, ext[2][2];
    int rest[2] = {(int)(y->dims[2] % f->m), (int)(y->dims[3] % f->m)};
    Stmt *nests = NULL;
    for (int rt = 0; rt < 2; rt++)
        for (int rs = 0; rs < 2; rs++) {
            ext[0][0] = rt ? whole[0] : 0, ext[0][1] = rt ? md[2] : whole[0];
            ext[1][0] = rs ? whole[1] : 0, ext[1][1] = rs ? md[3] : whole[1];
            if (ext[0][0] >= ext[0][1] || ext[1][0] >= ext[1][1]) continue;
            int v[2];
            lower_vars(k, 2, v);
            int all[4] = {vars[0], vars[1], v[0], v[1]};
            Stmt *body = NULL;
            for (int i = 0; i < (rt ? rest[0] : f->m); i++)
                for (int j = 0; j < (rs ? rest[1] : f->m); j++) body = ks_seq(body, output_store(p, f, y, mp, all, i, j));
            nests = ks_seq(nests, ks_loop(p, v[0], ext[0][0], ext[0][1], 1, ks_loop(p, v[1], ext[1][0], ext[1][1], 1, body)));
        }
    k->body = lower_wrap(p, 2, md, vars, nests);
}
