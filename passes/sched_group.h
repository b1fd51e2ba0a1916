/* sched_group.h - grouped convolutions of few channels a group, run with their output
 * channels as vector lanes across several groups (passes/sched_group.c), for the schedule
 * pass (passes/schedule.c: channelwise takes them with the depthwise convs). */
#ifndef ONNXCC_SCHED_GROUP_H
#define ONNXCC_SCHED_GROUP_H
#include "../ir/kir.h"

/* Mg if `chan`, the input channel index of a conv whose output channel loop is variable m and
 * whose float weights w are [M, Cg, kh, kw], is m / Mg * Cg + c (c another variable, the
 * reduction over the group's input channels) with Mg < lanes a divisor of lanes and of M, so
 * that every vector of output channels starting at a multiple of Mg holds whole groups; else
 * 0. */
int64_t group_narrow(const Expr *chan, int m, const Buf *w, int lanes);



/* After the pixels are blocked around the vectors: the innermost reduction loops inside
 * vector loops (the taps along the width) unrolled, so that the blocked pixels' taps that
 * read the same input pixel share its loads and permutes (the backend's, and LLVM's CSE). */
void group_unroll_taps(Program *p, Kernel *k);


/* The pixels a register tile blocks around one vector of output channels `j` (the picked
 * loop) when its body reads the input through a group's channel (group_narrow's form), else
 * 0. One vector wide, so that the blocked pixels' inputs, each permuted once for the taps
 * that read it, and the taps' weight vectors fit the registers with the accumulators. */
int64_t group_rows(const Stmt *j, int lanes, int vregs);
#endif
