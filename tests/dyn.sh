#!/bin/sh
# tests/dyn.sh [--regen] - data-dependent values inside the graph: torch exports whose
# NonZero or NonMaxSuppression output feeds further ops (torch.nonzero and x[x > 0],
# boxes[mask] with column ops, concat, max, argmax, topk, transpose and flatten on the kept
# rows, reductions along the kept rows, Concat along the kept rows, Split and the kept
# count (Shape), the boxes
# torchvision.ops.nms keeps, score filtering then NMS then gathers, and a detection
# post-process: score and size filters, NMS or batched_nms (an If of two shapes), the first
# k kept, gathers; score filtering then TopK with k = min(K, the survivors' count) then NMS
# and full_like labels; SSD's per-class score filter and TopK joined by a Concat, then
# batched_nms (NonMaxSuppression and TopK loop to the run-time counts);
# and with onnx helpers TopK with k a graph input, Compress along axis 1, Unique with an axis, an If
# whose branches give [2,3] and [3,2]), checked
# in under tests/dyn/models/NAME/ with their test data (inputs, onnxruntime's outputs, some
# with nothing or everything kept). Each is checked with `onnxcc check`, which compares the
# reported dims and the valid part of every output, at -O0 and -O2.
# --regen first rewrites tests/dyn/models/ with tests/dyn/gen.py (needs torch and
# torchvision), tests/dyn/ort.js (onnxruntime-node through NODE_PATH, default the one `make
# bench` installs) and `gen.py --pb` (which also compares onnxruntime's outputs with torch's).
# Last line: "dyn: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
M=tests/dyn/models
if [ "${1:-}" = --regen ]; then
    NODE_PATH=${NODE_PATH:-$PWD/build/bench/node_modules}
    export NODE_PATH
    rm -rf $M && mkdir -p $M
    if ! $PYTHON tests/dyn/gen.py $M || ! node tests/dyn/ort.js $M || ! $PYTHON tests/dyn/gen.py --pb $M; then
        fail "regenerating $M"
        summary dyn
        exit 1
    fi
    find $M \( -name '*.bin' -o -name '*.npy' -o -name '*.json' \) -exec rm {} +
fi
LOG=${B:-build}/dyn-tests
mkdir -p $LOG
for m in $M/*/; do
    name=$(basename $m)
    for o in -O0 -O2; do
        if $ONNXCC check $o $m/model.onnx >$LOG/$name$o.log 2>&1; then ok "$name $o"
        else fail "$name $o" $LOG/$name$o.log; fi
    done
done
summary dyn
