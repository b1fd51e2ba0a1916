/* sched_tile.h - the register tiles of a contraction: candidates and their cost model
 * (passes/sched_tile.c), used by the schedule pass (passes/schedule.c). */
#ifndef ONNXCC_SCHED_TILE_H
#define ONNXCC_SCHED_TILE_H

#include <stdint.h>

/* The space of one blocked loop: its rows (trips of the blocked loop L), the whole vectors
 * of the picked loop J, the vector registers, and the bounds the schedule keeps anyway (rows
 * per block, vectors per block, statements of the jammed body). */
typedef struct TileSpace {
    int64_t rows, vecs;
    int regs, max_rows, max_u;
    int64_t body_nodes, max_nodes;
} TileSpace;

/* A register tile of mr rows by u vectors and its predicted cost (quarter cycles per step of
 * the reduction, summed over the blocks of the loop nest). */
typedef struct TileChoice {
    int mr, u;
    int64_t cost;
} TileChoice;

int64_t tile_cost(int64_t rows, int64_t vecs, int mr, int u);
/* The cheapest candidate of the space, or `today` (the hand-written choice, always a
 * candidate) unless another is predicted clearly cheaper; cost filled in either way. */
TileChoice tile_choose(const TileSpace *s, TileChoice today);
/* The candidates --autotune measures: out[0] = tile_choose's, then the others of the space
 * from the cheapest predicted, at most max in all; returns how many. */
int tile_rank(const TileSpace *s, TileChoice today, TileChoice *out, int max);

#endif
