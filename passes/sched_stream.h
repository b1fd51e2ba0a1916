/* sched_stream.h - prefetches ahead of a contraction's weights streamed from memory
 * (passes/sched_stream.c), for the schedule pass (passes/schedule.c). */
#ifndef ONNXCC_SCHED_STREAM_H
#define ONNXCC_SCHED_STREAM_H
#include "../ir/kir.h"

/* After the kernels' schedules: in each contraction whose largest constant is big enough to
 * come from memory each run and is loaded as whole vectors in its reductions, k->prefetch
 * names it (the backend prefetches ahead of those loads). Hosts only (vectors of 32 bytes or
 * more). */
void stream_weights(Program *p);
#endif
