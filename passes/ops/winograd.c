/* winograd.c - the rules of the two internal ops that passes/winograd.c puts around a 3x3
 * conv's sixteen 1x1 convs: Winograd's F(2x2, 3x3).
 *
 * For each 2x2 tile of the output, the conv reads a 4x4 tile d of its (padded) input, and
 *     y = A^T [ (G g G^T) . (B^T d B) ] A
 * where g is a 3x3 kernel, `.` the elementwise product and
 *     B^T = [1  0 -1  0]    G = [ 1    0    0 ]    A^T = [1  1  1  0]
 *           [0  1  1  0]        [ 1/2  1/2  1/2]          [0  1 -1 -1]
 *           [0 -1  1  0]        [ 1/2 -1/2  1/2]
 *           [0  1  0 -1]        [ 0    0    1 ]
 * Summed over the input channels, each of the 16 products is a 1x1 conv over the tiles:
 * M_ab[n, m] = sum_c U_ab[m, c] V_ab[n, c], with U = G g G^T (constants, passes/winograd.c)
 * and V = B^T d B.
 *
 * WinogradInput: x [N, C, 2T+2, 2S+2] (the conv's input, padded) -> the 16 V_ab [N, C, T, S],
 * output 4a + b, V_ab[n, c, t, s] = (B^T d B)[a][b] of the tile d = x[n, c, 2t.., 2s..].
 * WinogradOutput: the 16 M_ab [N, M, T, S] -> y [N, M, 2T, 2S], y[n, m, 2t + i, 2s + j] =
 * (A^T M A)[i][j] of the tile's M; with attribute sizes [H, W], y [N, M, H, W] of an odd H
 * (2T - 1) or W, whose last tiles' outputs past it are not computed. The conv's bias is
 * M_11's (its 1x1 conv's bias): A^T's column 1 is all ones, so M_11 reaches every output
 * once.
 *
 * Each kernel is one perfect nest n, c, t, s around its stores (an odd WinogradOutput: below
 * n and c, one nest per region of tiles, a region_mover), which read and write every
 * 4-d operand at channel c and elsewhere at expressions free of it: a channel_mover to the
 * schedule (passes/schedule.c), which gives all its operands NHWC or none and then runs the
 * channels innermost, as vectors. The sums are written once per output as expression trees
 * whose common parts (a row of B^T d, a row of M A) LLVM computes once. */
#include "../lower.h"

static const int bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const int at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

/* sum_i c[i] e[i] over the c[i] of +-1, a positive term first (every row of B^T and A^T has one) */
static Expr *signed_sum(Program *p, const int *c, Expr **e, int n) {
    int f = 0;
    while (f < n && c[f] <= 0) f++;
    if (f == n) die("winograd: a transform row without a positive entry");
    Expr *s = kx_clone(p, e[f]);
    for (int i = 0; i < n; i++)
        if (c[i] && i != f) s = kx_bin(p, c[i] > 0 ? K_ADD : K_SUB, s, kx_clone(p, e[i]));
    return s;
}

/* idx = [n, c, 2t + i, 2s + j]: row i, column j of tile (t, s), at loop variables vars n, c, t, s
 * (the input's 4x4 tiles, the output's 2x2 ones: both step 2) */
static void tile_index(Program *p, const int *vars, int i, int j, Expr **idx) {
    idx[0] = kx_var(p, vars[0]), idx[1] = kx_var(p, vars[1]);
    idx[2] = kx_addc(p, kx_mul(p, kx_var(p, vars[2]), 2), i);
    idx[3] = kx_addc(p, kx_mul(p, kx_var(p, vars[3]), 2), j);
}

static void check_tiles(const Node *n, const Value *v) {
    if (v->rank != 4 || v->dtype != DT_FLOAT) die("%s: %s is not a float 4-d map", n->name, v->name);
}

void infer_winograd_input(Graph *g, Node *n) {
    (void)g;
    const Value *x = n->in[0];
    check_tiles(n, x);
    if (x->dims[2] < 4 || x->dims[3] < 4 || x->dims[2] % 2 || x->dims[3] % 2)
        die("%s: a padded input of %lldx%lld holds no whole 4x4 tiles of stride 2", n->name, (long long)x->dims[2],
            (long long)x->dims[3]);
    int64_t dims[4] = {x->dims[0], x->dims[1], x->dims[2] / 2 - 1, x->dims[3] / 2 - 1};
    for (int i = 0; i < n->nout; i++) ir_set_shape(n->out[i], DT_FLOAT, 4, dims);
}

/* y's height and width: 2T and 2S, or one less where the node's `sizes` says so (an odd map,
 * whose last tiles lose a row or a column of outputs) */
static void output_size(const Node *n, const Value *m, int64_t *oh, int64_t *ow) {
    const int64_t *sz;
    int k = ir_attr_ints(n, "sizes", &sz);
    *oh = 2 * m->dims[2], *ow = 2 * m->dims[3];
    if (!k) return;
    if (k != 2 || sz[0] < *oh - 1 || sz[0] > *oh || sz[1] < *ow - 1 || sz[1] > *ow)
        die("%s: sizes do not fit its tiles", n->name);
    *oh = sz[0], *ow = sz[1];
}

void infer_winograd_output(Graph *g, Node *n) {
    (void)g;
    const Value *m = n->in[0];
    for (int i = 0; i < n->nin; i++) {
        check_tiles(n, n->in[i]);
        for (int d = 0; d < 4; d++)
            if (n->in[i]->dims[d] != m->dims[d]) die("%s: its inputs differ in shape", n->name);
    }
    int64_t dims[4] = {m->dims[0], m->dims[1], 0, 0};
    output_size(n, m, &dims[2], &dims[3]);
    ir_set_shape(n->out[0], DT_FLOAT, 4, dims);
}

void lower_winograd_input(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *x = lower_in(L, n, 0), *v[16];
    for (int i = 0; i < 16; i++) v[i] = lower_out(L, n, i);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, KINS(x), v[0], NULL, NULL);
    for (int i = 1; i < 16; i++) kir_param(p, k, v[i], KP_OUT);
    int vars[4];
    lower_vars(k, 4, vars);
    Stmt *body = NULL;
    for (int a = 0; a < 4; a++) {
        Expr *rows[4];                  /* row a of B^T d, column j */
        for (int j = 0; j < 4; j++) {
            Expr *d[4];
            for (int i = 0; i < 4; i++) {
                Expr *xi[4];
                tile_index(p, vars, i, j, xi);
                d[i] = kx_load(p, x, xi);
            }
            rows[j] = signed_sum(p, bt[a], d, 4);
        }
        for (int b = 0; b < 4; b++) {
            Expr *vi[4];
            lower_var_idx(p, 4, vars, vi);
            body = ks_seq(body, ks_store(p, v[4 * a + b], vi, signed_sum(p, bt[b], rows, 4)));
        }
    }
    k->body = lower_wrap(p, 4, v[0]->dims, vars, body);
}

/* y[n, m, 2t + i, 2s + j] = (A^T M A)[i][j] of tile t, s (M: the sixteen m[ab]) */
static Expr *output_sum(Program *p, Buf **m, const int *vars, int i, int j) {
    Expr *rows[4];                      /* row a of M A, column j */
    for (int a = 0; a < 4; a++) {
        Expr *e[4];
        for (int b = 0; b < 4; b++) {
            Expr *mi[4];
            lower_var_idx(p, 4, vars, mi);
            e[b] = kx_load(p, m[4 * a + b], mi);
        }
        rows[a] = signed_sum(p, at[j], e, 4);
    }
    return signed_sum(p, at[i], rows, 4);
}

static Stmt *output_store(Program *p, Buf *y, Buf **m, const int *vars, int i, int j) {
    Expr *yi[4];
    tile_index(p, vars, i, j, yi);
    return ks_store(p, y, yi, output_sum(p, m, vars, i, j));
}

/* Whole tiles: one nest n, m, t, s around the four stores of a tile. An odd height or width:
 * below n and m, one nest per region of tiles, each around the stores of the outputs its tiles
 * have: the whole tiles (four), the last column's (two), the last row's (two), the corner's
 * (one). Each region is a region_mover's to the schedule, which runs the channels innermost
 * in it; each M_ab is then read once in all, as with whole tiles. (One nest per output of a
 * tile, as this was, read the nine M_ab of each output over the whole map: 36 planes instead
 * of 16, Inception-v3's 71x71 output transform at 15 GB/s, 1.3 ms on a Zen 4 core.) */
void lower_winograd_output(Lower *L, Node *n) {
    Program *p = L->p;
    Buf *m[16], *y = lower_out(L, n, 0);
    for (int i = 0; i < 16; i++) m[i] = lower_in(L, n, i);
    Kernel *k = lower_kernel(L, n, KC_GENERIC, 16, m, y, NULL, NULL);
    int vars[4];
    lower_vars(k, 4, vars);
    const int64_t *md = m[0]->dims;
    if (y->dims[2] == 2 * md[2] && y->dims[3] == 2 * md[3]) {
        Stmt *body = NULL;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) body = ks_seq(body, output_store(p, y, m, vars, i, j));
        k->body = lower_wrap(p, 4, md, vars, body);
        return;
    }
    /* tiles [0, whole) of each dim have both outputs; tile `whole`, if any, the first only */
    int64_t whole[2] = {y->dims[2] / 2, y->dims[3] / 2}, ext[2][2];
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
            for (int i = 0; i < (rt ? 1 : 2); i++)
                for (int j = 0; j < (rs ? 1 : 2); j++) body = ks_seq(body, output_store(p, y, m, all, i, j));
            nests = ks_seq(nests, ks_loop(p, v[0], ext[0][0], ext[0][1], 1, ks_loop(p, v[1], ext[1][0], ext[1][1], 1, body)));
        }
    k->body = lower_wrap(p, 2, md, vars, nests);
}
