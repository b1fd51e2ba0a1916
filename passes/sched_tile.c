/* sched_tile.c - the register tiles of a contraction as a space of candidates, ranked by a
 * cost model of the target (issue 16: a schedule space, not one schedule).
 *
 * A contraction that schedule.c's block_list blocks runs a register tile of MR rows (copies
 * of the blocked loop L: a matmul's rows, a conv's pixels) by U vectors (of the picked loop J:
 * a matmul's columns, a conv's output channels) around its reduction: each step of the
 * reduction loads U vectors and MR broadcast values and does MR x U vector FMAs into as many
 * accumulators. The rows left over (L % MR) run as one narrower block, the vectors left over
 * (V % U, V the whole vectors of J) as one narrower block too (vector_tile), so the tile
 * sizes decide how much of the iteration space runs in the small, slow blocks.
 *
 * The space: every MR in 1..min(L, MAX_ROWS) and U in 1..min(V, cap) whose accumulators,
 * U weight vectors and two spare registers fit the vector registers (MR*U + U + 2 <= regs,
 * the bound of the hand-written choice) and whose body stays within MAX_JAM_NODES.
 * The cost model, per step of the reduction, for a block of m rows by u vectors:
 *     cycles(m, u) = max(m*u / FMA_PER_CYCLE,           the FMA pipes
 *                        (m + u) / LOADS_PER_CYCLE,      broadcasts and vector loads
 *                        FMA_LATENCY)                    one FMA chain per accumulator waits
 *                                                        on its previous FMA
 * and the candidate's cost is the sum over its blocks (full blocks, the row rest, the vector
 * rest, the corner) of their count times cycles. Machine facts (2 FMA pipes, 4-cycle FMA
 * latency, 2 vector loads a cycle: the x86 machines of performance-facts.md) are the same for
 * AVX2 and AVX-512 apart from the register count, which the caller passes.
 *
 * The hand-written choice (schedule.c's block_factor and vector_copies) is always one
 * candidate and is kept unless another is predicted more than MARGIN_PCT% cheaper: the model
 * sees neither the epilogue nor loop overhead nor caches nor LLVM's register allocation, and
 * it ranks too coarsely to move a measured choice on a small predicted gain. Measured on
 * MobileNetV2's 1x1 convs for AVX2 (16 registers; per kernel, old and new interleaved twice,
 * loaded machine): 14 pixels as 5x2 + 5x2 + 4x2 instead of 6x2 + 6x2 + 2x2 (predicted 12.5%
 * cheaper) ran 3-5% faster, but 7 pixels as 4x2 + 3x2 instead of 6x2 + 1x2 (predicted 20%
 * cheaper) ran 5-10% slower: the latency term overrates a narrow rest block, whose chains
 * the core overlaps with the next block's. So at this margin the default moves only where
 * the hand-written tile is far off (few rows or vectors, a rest block as large as the main
 * one); ranking the rest is --autotune's job: tile_rank lists the model's choice and the
 * cheapest others, which it measures (passes/tune.c, cli/tune.c). When it does move, the
 * schedule line says so, with the model's inputs and both costs:
 * `tile(rows 8, vecs 3, regs 16: 8x1 54 < 6x2 72)`. */
#include <stdbool.h>

#include "sched_tile.h"

enum { FMA_PER_CYCLE = 2, LOADS_PER_CYCLE = 2, FMA_LATENCY = 4, MARGIN_PCT = 25 };

/* Cycles of one reduction step of an m x u block, in quarter cycles (exact integers). */
static int64_t step_cost(int64_t m, int64_t u) {
    int64_t fma = 4 * m * u / FMA_PER_CYCLE, ld = 4 * (m + u) / LOADS_PER_CYCLE, lat = 4 * FMA_LATENCY;
    int64_t c = fma > ld ? fma : ld;
    return c > lat ? c : lat;
}

int64_t tile_cost(int64_t rows, int64_t vecs, int mr, int u) {
    int64_t fr = rows / mr, rr = rows % mr, fu = vecs / u, ru = vecs % u, c = 0;
    c += fr * fu * step_cost(mr, u);
    if (rr) c += fu * step_cost(rr, u);
    if (ru) c += fr * step_cost(mr, ru);
    if (rr && ru) c += step_cost(rr, ru);
    return c;
}

/* Whether x ranks before y: the cheaper; among equals the one with more accumulators, then
 * more rows. */
static bool before(TileChoice x, TileChoice y) {
    return x.cost < y.cost || (x.cost == y.cost && (x.mr * x.u > y.mr * y.u || (x.mr * x.u == y.mr * y.u && x.mr > y.mr)));
}

static bool in_space(const TileSpace *s, int mr, int u) {
    return mr * u + u + 2 <= s->regs && s->body_nodes * mr * u <= s->max_nodes;
}

TileChoice tile_choose(const TileSpace *s, TileChoice today) {
    TileChoice best = today;
    if (s->rows < 1 || s->vecs < 1 || today.mr < 1 || today.u < 1) return today;
    best.cost = today.cost = tile_cost(s->rows, s->vecs, today.mr, today.u);
    for (int u = 1; u <= s->max_u && u <= s->vecs; u++)
        for (int mr = 1; mr <= s->max_rows && mr <= s->rows; mr++) {
            TileChoice c = {mr, u, tile_cost(s->rows, s->vecs, mr, u)};
            if (in_space(s, mr, u) && before(c, best)) best = c;
        }
    if (best.cost * 100 >= today.cost * (100 - MARGIN_PCT)) return today;
    return best;
}

int tile_rank(const TileSpace *s, TileChoice today, TileChoice *out, int max) {
    if (max < 1) return 0;
    out[0] = tile_choose(s, today);
    if (s->rows < 1 || s->vecs < 1 || today.mr < 1 || today.u < 1) return 1;
    int n = 1;
    for (int u = 1; u <= s->max_u && u <= s->vecs; u++)
        for (int mr = 1; mr <= s->max_rows && mr <= s->rows; mr++) {
            TileChoice c = {mr, u, tile_cost(s->rows, s->vecs, mr, u)};
            if (!in_space(s, mr, u) || (mr == out[0].mr && u == out[0].u)) continue;
            /* insertion into out[1..n), kept sorted, at most max */
            int at = n;
            while (at > 1 && before(c, out[at - 1])) at--;
            if (at >= max) continue;
            for (int i = n < max - 1 ? n : max - 1; i > at; i--) out[i] = out[i - 1];
            out[at] = c;
            if (n < max) n++;
        }
    return n;
}
