#!/usr/bin/env python3
"""tests/guard/hostile.py OUTDIR - models fed with hostile run-time data, for tests/guard.sh.

The backend tests feed every op sensible values. A deployed model gets whatever its caller
passes: NaN and infinite coordinates, indices far outside their axis, integer division by
zero. ONNX leaves most of these undefined, but the generated code must still stay inside its
buffers, return, and give the same outputs on every run. Each case is a directory
OUTDIR/NAME/ with model.onnx and test_data_set_0/ (inputs, outputs). Where ONNX defines the
result (OneHot's out-of-range indices are all off) the outputs are numpy's and guard.c
compares them; elsewhere the output files only give the shapes and NAME lists in
OUTDIR/unchecked, whose cases guard.c runs without comparing values.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper, save

OUT = sys.argv[1]
unchecked = []

# Coordinates and values no sane caller passes.
BAD = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 1.0, -1.0, 0.5, -0.99,
                np.float32(1e-45), -0.0, 2.0, -2.0, 7.5], np.float32)
BIG = [7, -9, 1 << 40, -(1 << 62), (1 << 63) - 1, -(1 << 63), 3, -1]


def case(name, nodes, inputs, outputs, data, opset=16, expect=None):
    """data: input arrays; expect: output arrays (numpy-made) or None for unchecked."""
    ins = [helper.make_tensor_value_info(n, mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
           for n, a in zip(inputs, data)]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    g = helper.make_graph(nodes, name, ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    d = os.path.join(OUT, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    save(m, os.path.join(OUT, name, "model.onnx"))
    for i, (n, a) in enumerate(zip(inputs, data)):
        with open(os.path.join(d, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    if expect is None:
        unchecked.append(name)
        expect = [np.zeros(s, mapping.TENSOR_TYPE_TO_NP_TYPE[t]) for _, t, s in outputs]
    for i, ((n, _, _), a) in enumerate(zip(outputs, expect)):
        with open(os.path.join(d, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


rng = np.random.default_rng(7)
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32

# GridSample: every mode and padding mode, grid full of NaN, infinities and huge values
grid = np.resize(BAD, (1, 3, 4, 2)).astype(np.float32)
x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        case("gs_%s_%s" % (mode, pad),
             [helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad,
                               align_corners=int(pad == "reflection"))],
             ["x", "grid"], [("y", F, (1, 2, 3, 4))], [x, grid])

# RoiAlign: boxes with NaN and huge corners, batch indices outside the batch
rois = np.resize(BAD, (4, 4)).astype(np.float32)
case("roialign_bad", [helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=2,
                                       output_width=3, sampling_ratio=2, spatial_scale=1.0)],
     ["x", "rois", "b"], [("y", F, (4, 3, 2, 3))],
     [rng.standard_normal((2, 3, 5, 5)).astype(np.float32), rois,
      np.array([0, 5, -1, 1 << 40], np.int64)])

# Indices far outside their axis (ONNX: invalid; the code clamps them)
data = rng.standard_normal((5, 3)).astype(np.float32)
idx = np.array(BIG, np.int64)
case("gather_oob", [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
     ["x", "i"], [("y", F, (8, 3))], [data, idx])
case("gather_elements_oob", [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)],
     ["x", "i"], [("y", F, (2, 3))], [data, idx[:6].reshape(2, 3)])
case("gathernd_oob", [helper.make_node("GatherND", ["x", "i"], ["y"])],
     ["x", "i"], [("y", F, (4,))], [data, idx.reshape(4, 2)])
case("scatter_elements_oob",
     [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
     ["x", "i", "u"], [("y", F, (5, 3))],
     [data, idx[:6].reshape(2, 3), np.ones((2, 3), np.float32)])
case("scatternd_oob", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
     ["x", "i", "u"], [("y", F, (5, 3))],
     [data, idx.reshape(4, 2), np.ones(4, np.float32)])
case("maxunpool_oob", [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2],
                                        strides=[2, 2])],
     ["x", "i"], [("y", F, (1, 1, 4, 4))],
     [np.ones((1, 1, 2, 2), np.float32), np.array(BIG[:4], np.int64).reshape(1, 1, 2, 2)])
case("reverse_sequence_oob",
     [helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=1, time_axis=0)],
     ["x", "l"], [("y", F, (4, 3))],
     [rng.standard_normal((4, 3)).astype(np.float32), np.array([100, -3, 1 << 40], np.int64)])

# OneHot: ONNX defines out-of-range indices (all off) and wraps [-depth, -1]
oh = np.array([0, 3, 9, -1, -20, 1 << 40, -(1 << 62), 4], np.int64)
depth = 5
want = np.zeros((oh.size, depth), np.float32)
for r, v in enumerate(oh):
    if -depth <= v < depth:
        want[r, v % depth] = 1
want = want * 2 - 1    # values [off, on] = [-1, 1]
case("onehot_oob",
     [helper.make_node("Constant", [], ["d"], value=numpy_helper.from_array(np.array(depth, np.int64))),
      helper.make_node("Constant", [], ["v"],
                       value=numpy_helper.from_array(np.array([-1, 1], np.float32))),
      helper.make_node("OneHot", ["i", "d", "v"], ["y"])],
     ["i"], [("y", F, (oh.size, depth))], [oh], expect=[want])

# Integer division by zero and INT_MIN / -1 (x86's idiv traps on both)
a32 = np.array([7, -7, -2**31, 5, 0, -2**31, 9, 1], np.int32)
b32 = np.array([0, 0, -1, 2, 0, 0, -1, -2**31], np.int32)
case("div_int_zero", [helper.make_node("Div", ["a", "b"], ["y"])],
     ["a", "b"], [("y", I32, (8,))], [a32, b32])
case("mod_int_zero", [helper.make_node("Mod", ["a", "b"], ["y"])],
     ["a", "b"], [("y", I32, (8,))], [a32, b32])
case("fmod_int_zero", [helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)],
     ["a", "b"], [("y", I64, (8,))], [a32.astype(np.int64) * (1 << 32), b32.astype(np.int64)])

# Float to integer of NaN, infinities and values out of the type's range
case("cast_bad", [helper.make_node("Cast", ["x"], ["y%d" % k], to=t)
                  for k, t in enumerate((I32, I64, TensorProto.INT8, TensorProto.UINT8))],
     ["x"], [("y%d" % k, t, (16,)) for k, t in
             enumerate((I32, I64, TensorProto.INT8, TensorProto.UINT8))],
     [BAD])
case("quantize_bad", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
     ["x", "s", "z"], [("y", TensorProto.INT8, (16,))],
     [BAD, np.array(0.01, np.float32), np.array(3, np.int8)])

# NaN among the values an op orders or selects by
nanx = np.array([[np.nan, 1, np.nan, 3, -np.inf, np.nan], [np.nan] * 6], np.float32)
case("topk_nan", [helper.make_node("Constant", [], ["k"],
                                   value=numpy_helper.from_array(np.array([3], np.int64))),
                  helper.make_node("TopK", ["x", "k"], ["v", "i"])],
     ["x"], [("v", F, (2, 3)), ("i", I64, (2, 3))], [nanx])
case("argmax_nan", [helper.make_node("ArgMax", ["x"], ["y"], axis=1)],
     ["x"], [("y", I64, (2, 1))], [nanx])
case("maxpool_nan", [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])],
     ["x"], [("y", F, (1, 1, 1, 5)), ("i", I64, (1, 1, 1, 5))], [nanx.reshape(1, 1, 2, 6)])
case("trilu_k", [helper.make_node("Trilu", ["x", "k"], ["y"])],
     ["x", "k"], [("y", F, (2, 6))], [nanx, np.array((1 << 62), np.int64)])

# Run-time positions of opsets 23 and 24 far outside their axes: RotaryEmbedding's
# position_ids (clamped into the caches), Attention's nonpad_kv_seqlen, TensorScatter's
# write_indices in both modes.
big = np.array(BIG, np.int64)
ang = rng.uniform(0, 6, (5, 2)).astype(np.float32)
case("rotary_position_ids", [helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"])],
     ["x", "c", "s", "p"], [("y", F, [2, 1, 4, 4])],
     [rng.standard_normal((2, 1, 4, 4)).astype(np.float32), np.cos(ang), np.sin(ang),
      big.reshape(2, 4)], opset=23)
q = rng.standard_normal((8, 2, 3, 4)).astype(np.float32)
case("attention_nonpad", [helper.make_node("Attention", ["q", "k", "v", "", "", "", "n"], ["y"],
                                           is_causal=1)],
     ["q", "k", "v", "n"], [("y", F, [8, 2, 3, 4])], [q, q, q, big], opset=24)
cache = rng.standard_normal((8, 5, 2)).astype(np.float32)
for mode in ("linear", "circular"):
    case("tensor_scatter_" + mode,
         [helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], axis=1, mode=mode)],
         ["c", "u", "w"], [("y", F, [8, 5, 2])], [cache, cache[:, :3], big], opset=24)

# MaxRoiPool's RoIs full of NaN, infinities and huge values (batch index included)
case("max_roi_pool", [helper.make_node("MaxRoiPool", ["x", "r"], ["y"], pooled_shape=[2, 2])],
     ["x", "r"], [("y", F, [4, 2, 2, 2])],
     [rng.standard_normal((2, 2, 5, 6)).astype(np.float32), np.resize(BAD, (4, 5)).astype(np.float32)])

with open(os.path.join(OUT, "unchecked"), "w") as f:
    f.write("\n".join(unchecked) + "\n")
print(" ".join(sorted(os.listdir(OUT))))
