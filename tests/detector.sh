#!/bin/sh
# tests/detector.sh - `make check-detector`: a whole detector with its post-process, too slow
# for `make test`. torchvision's SSDlite320-MobileNetV3-Large (random weights, seeded; 1x3x320x320;
# score filter, per-class TopK with a run-time k, batched NMS, the first 300 kept, gathers:
# outputs of data-dependent dims) is exported to build/detector/ by tests/detector/gen.py
# (cached: build/detector/export.key), run by onnxruntime-node (tests/detector/ort.js) on one
# seeded input, whose outputs become build/detector/test_data_set_0; then `onnxcc check`
# compares the compiled model's reported dims and the valid part of its outputs with them at
# each level of DETECTOR_LEVELS (default "-O0 -O2").
# Needs what `make bench` installs, and installs it the same way when missing: Debian's
# python3-torch and python3-torchvision (apt-get, as root) and onnxruntime-node
# ORT_VERSION (default 1.30.0, npm, into build/bench/node_modules).
# Last line: "detector: N passed, N failed"; the exit status is 1 if anything failed.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
NODE=${NODE:-node}
NPM=${NPM:-npm}
ORT_VERSION=${ORT_VERSION:-1.30.0}
LEVELS=${DETECTOR_LEVELS:--O0 -O2}
OUT=build/detector
NODE_PATH=$(pwd)/build/bench/node_modules
export NODE_PATH
mkdir -p $OUT build/bench

# seconds since $t0, for the timings each step prints
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

if [ ! -x "$ONNXCC" ]; then
    fail "$ONNXCC not built (make onnxcc)"
    summary detector
    exit 1
fi

# ---- onnxruntime-node and PyTorch, as tests/bench.sh installs them ----
# (--ignore-scripts: the install script only fetches the CUDA build; the CPU one is in the package)
ort_works() { $NODE -e "
    const v = require('onnxruntime-node').env.versions.node;
    if ('$ORT_VERSION' && v !== '$ORT_VERSION') process.exit(1);" >/dev/null 2>&1; }
if ! ort_works; then
    echo "detector: installing onnxruntime-node@$ORT_VERSION into build/bench/node_modules (npm)"
    (cd build/bench && $NPM install --no-save --no-audit --no-fund --ignore-scripts \
        "onnxruntime-node@$ORT_VERSION") >$OUT/npm.log 2>&1
    if ! ort_works; then
        fail "onnxruntime-node unavailable" $OUT/npm.log
        summary detector
        exit 1
    fi
fi
if ! $PYTHON -c "import torch, torchvision" >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
   command -v apt-get >/dev/null; then
    echo "detector: installing python3-torch and python3-torchvision (apt-get, first use)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3-torch python3-torchvision >$OUT/apt.log 2>&1
fi

# ---- the export, onnxruntime's outputs as the test data ----
t0=$(now)
if ! $PYTHON tests/detector/gen.py $OUT >$OUT/gen.log 2>&1; then
    fail "export (tests/detector/gen.py)" $OUT/gen.log
    summary detector
    exit 1
fi
echo "$(tail -n 1 $OUT/gen.log): $(took $t0)"
t0=$(now)
rm -f $OUT/test_data_set_0/output_*.pb
if ! $NODE tests/detector/ort.js $OUT >$OUT/ort.log 2>&1 ||
   ! $PYTHON tests/detector/gen.py --pb $OUT >>$OUT/ort.log 2>&1; then
    fail "onnxruntime's outputs (tests/detector/ort.js)" $OUT/ort.log
    summary detector
    exit 1
fi
cat $OUT/ort.log
echo "detector: onnxruntime's outputs: $(took $t0)"

# ---- onnxcc check at each level ----
for o in $LEVELS; do
    t0=$(now)
    log=$OUT/check$o.log
    if $ONNXCC check $o $OUT/model.onnx $OUT/test_data_set_0 >$log 2>&1; then
        ok "check $o ssdlite320_mobilenet_v3_large ($(took $t0))"
    else
        fail "check $o ssdlite320_mobilenet_v3_large ($(took $t0))" $log
    fi
done
summary detector
