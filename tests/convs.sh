#!/bin/sh
# tests/convs.sh - convolutions, Gemms and MatMuls with constant weights (tests/convs/gen.py and
# gen_dense.py make the models and their numpy reference outputs into build/conv-tests/; among
# them MatMuls over channel-last maps with a fused GELU epilogue), and
# BatchNormalizations whose operands are of several float types (gen_bn.py), ConvTransposes over
# their attributes (gen_convtranspose.py: strides, dilations, groups, output_padding, 1-D to 3-D,
# fused epilogues), nearest Resizes with integral factors (gen_resize.py: the repeated form,
# with and without a fused Add, next to dims that keep their tables; necks of convs around
# nearest or linear Resizes and a Concat, whose maps go NHWC; linear along several
# dims), DepthToSpace and SpaceToDepth (gen_d2s.py: blocks of 2 to 5, DCR and CRD, a fused
# Relu; sub-pixel nets whose DepthToSpaces go NHWC with the 3x3 convs around them, the last
# conv to 9 or 3 channels a vector reduction over the channels), two-input Einsums (gen_einsum.py: batched matrix products lowered as MatMul, with
# inputs permuted first, and the equations left to the general nest), checked with
# `onnxcc check` at -O0 and -O2, and on an AVX-512 host -O2 --cpu native and -O2 --isa 0
# (the x86-64-v3 level of the default dispatching object, which -O2 alone
# does not run there). These
# reach the weight re-layouts of passes/ops/conv.c and matmul.c, which the ONNX test data
# (weights as graph inputs) does not.
# atol 1e-4: the reference sums in float64, the compiled code in float32.
# Last line: "convs: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/conv-tests
. tests/check-models.sh
gen_models convs $OUT tests/convs/gen.py tests/convs/gen_dense.py tests/convs/gen_bn.py tests/convs/gen_convtranspose.py tests/convs/gen_resize.py tests/convs/gen_d2s.py tests/convs/gen_einsum.py
# and for this CPU when it has AVX-512: the schedule's 32-register paths (padded inputs,
# channel blocks: passes/schedule.c) are taken only there
native=
grep -qw avx512f /proc/cpuinfo 2>/dev/null && native="-O2,--cpu,native -O2,--isa,0"
check_models $OUT "-O0 -O2 $native"
# the RegNet blocks' temporaries NHWC on AVX-512 (groups of whole half vectors; their
# outputs checked above), the 56-channel groups' Winograd transforms along the channels
if [ -n "$native" ]; then
    for m in regnet_g24 regnet_g56; do
        if $ONNXCC --cpu x86-64-v4 $OUT/$m/model.onnx -o /dev/null --print-after=schedule 2>&1 |
                grep -q '^; schedule .*layout([^)]*,nhwc)'; then
            ok "$m: NHWC temporaries with AVX-512"
        else
            fail "$m: its temporaries stay NCHW with AVX-512"
        fi
    done
fi
summary convs
