#!/bin/sh
# tests/opsets.sh [--ort] - the default domain's opsets 19 to 26, which Debian's ONNX test data
# (opset <= 17) lacks: tests/opsets/gen.py writes a model per new op and per attribute, mode or
# type a version added (Gelu, Swish, CumProd, RMSNormalization, GroupNormalization 18 and 21,
# AveragePool's dilations, Pad's wrap mode and axes, Resize's antialias, half_pixel_symmetric,
# axes and keep_aspect_ratio_policy, ReduceMax/Min on bool, DFT's axis input, GridSample-20
# (new mode names, 1-D and 3-D), blocked and 16-bit QuantizeLinear/DequantizeLinear, the
# requantisation edges (ties, saturation, large magnitudes; QuantizeLinear and QLinearConv), Cast's float8-only attributes,
# Equal on strings, RotaryEmbedding, AffineGrid, Attention, TensorScatter, DeformConv, LpPool,
# LpNormalization, CenterCropPad, Col2Im, MaxRoiPool and the Bitwise ops)
# and a LeNet-like network re-stamped at opsets 19, 21, 23 and 26, with numpy references, into
# build/opset-tests/; each is checked with `onnxcc check --atol 1e-4` at -O0 and -O2, two
# checks at a time (JOBS=N to change).
# --ort also runs the references through onnxruntime-node (tests/opsets/ort.js; the one `make
# bench` installs into build/bench/node_modules, or NODE_PATH's), so that they are checked
# against an implementation other than ours; the cases listed in ORT_DIFFERS are skipped
# there, each with the reason onnxruntime 1.30 gives another result or none.
# Last line: "opsets: N passed, N failed[, N skipped]".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/opset-tests
export ONNXCC
gen_models opsets $OUT tests/opsets/gen.py
# check_models' loop, two checks at a time (JOBS) as tests/golden.sh runs its tests
# The requantisation edges also run on ISA level 0 of the default object (x86-64-v3, whose
# requantising stores go through saturating packs: docs/int8.md), which -O2 alone does not run
# on an AVX-512 host.
isa0=
[ "$(uname -m)" = x86_64 ] && isa0=-O2,--isa,0
for m in $OUT/*/; do
    for o in -O0 -O2; do echo "${m%/} $o"; done
    case $m in */quantize_edges_*) [ -n "$isa0" ] && echo "${m%/} $isa0" ;; esac
done | xargs -P ${JOBS:-2} -L 1 sh -c 'name=${0##*/}
    if $ONNXCC check $(echo $1 | tr , " ") --atol 1e-4 $0/model.onnx >$0$1.log 2>&1; then echo "ok   $name $1"
    else echo "FAIL $name $1"; tail -n 5 $0$1.log; fi' >$OUT/check.out
tally $OUT/check.out

# onnxruntime 1.30 and the spec part ways here:
#   cast_saturate_19, cast_round_mode_24: it refuses these attributes on casts that are not
#     to float8 ("only used for cast to float 8 types"); the spec only says they apply to those
#   dequantize_output_dtype_23: an output_dtype (float16) other than the scale's type (float)
#     fails at run time ("Tensor type mismatch"); the spec allows it (T3 apart from T2)
#   pad_wrap_axes_19: a begin pad longer than the dim gives zeros where the torus repeats
#   affine_grid_2d_1x6_a1_20: a spatial size of 1 with align_corners places its one sample at
#     +1; PyTorch's affine_grid, which the op follows, at 0 (as onnxcc), the ONNX reference at -1
#   attention_4d_floatmask_short_23: a mask shorter than the keys (the spec pads it with
#     -inf/false) is refused ("inconsistent total_sequence_length")
#   attention_4d_past_no_present_23: a past without the present_key output is refused ("does
#     not support past_key provided and present_key being null")
#   attention_4d_window_25, attention_4d_causal_window_25: it knows Attention up to opset 24
#     ("Unrecognized attribute: left_window_size")
#   gridsample_1d_*, gridsample_3d_cubic_*: it samples in 2-D and 3-D only, and not 3-D cubic
#     ("Only 4-D or 5-D tensor is supported", "Only support GridSample Cubic mode in 4-D cases")
#   max_roi_pool_scale_22: it has no MaxRoiPool-22 kernel ("Could not find an implementation")
ORT_DIFFERS="$(cd $OUT && echo gridsample_1d_* gridsample_3d_cubic_*) max_roi_pool_scale_22 cast_saturate_19 cast_round_mode_24 dequantize_output_dtype_23 pad_wrap_axes_19
affine_grid_2d_1x6_a1_20 attention_4d_floatmask_short_23 attention_4d_past_no_present_23
attention_4d_window_25 attention_4d_causal_window_25"
if [ "${1:-}" = --ort ]; then
    NODE_PATH=${NODE_PATH:-$PWD/build/bench/node_modules}
    export NODE_PATH
    skipped=0
    if ! node tests/opsets/ort.js $OUT >$OUT/ort.log 2>$OUT/ort.err; then
        fail "onnxruntime: tests/opsets/ort.js" $OUT/ort.err
    fi
    while read -r status name detail; do
        case " $(echo $ORT_DIFFERS) " in
            *" $name "*) skipped=$((skipped + 1)); echo "skip onnxruntime $name: $status $detail" ;;
            *) if [ "$status" = ok ]; then ok "onnxruntime $name"; else fail "onnxruntime $name" "$status $detail"; fi ;;
        esac
    done <$OUT/ort.log
fi
summary opsets
