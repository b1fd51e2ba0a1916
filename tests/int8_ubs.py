#!/usr/bin/python3
"""int8_ubs.py OUTDIR - ConvInteger models at the edges of exactness (tests/int8.sh).

On x86 without VNNI, backend/kernel.c (ubs_exact, ubs_dot) multiplies 8-bit weights by
pmaddubsw, which adds the products of a pair of bytes in 16 bits and saturates, only where the
constant weights make saturation impossible: in each pair (weights 4k and 4k+1, 4k+2 and
4k+3 of an output channel) the positive weights add up to at most 128 and the negative ones
to at least -128. Two 1x1 ConvInteger models (uint8 input, int8 weights, int32 output, so the
comparison is exact), their references computed by numpy in int64:
  edge  every pair at the bound: (64, 64), (-64, -64), (127, 1), (-128, 0), (100, -128), ...
        with inputs of 255 where it matters most: pmaddubsw is taken, and is exact;
  over  the same with one pair at (65, 64): 255 * 129 = 32895 would saturate, so the
        exact pmaddwd form must be taken; a wrong bound shows as a wrong sum.
And on vector targets an integer conv outside the dot4 form (depthwise) is accumulated in
float32 where every partial sum stays below 2^24 (passes/ops/conv.c, float_exact). Two
depthwise ConvIntegers (2 channels, uint8 input of 255s, int8 weights of -128 but one -127,
so that the sums are odd):
  fx_edge  a 22x23 kernel: 506 taps, |sum| <= 506 * 255 * 128 = 16,515,840 < 2^24: float;
  fx_over  a 23x23 kernel: 529 taps, 17,266,560 > 2^24: int32 (in float the odd sum would
           round).
And QLinearMatMul by a constant int8 B with zero points 0, which fuse_qdq turns into a 1x1
QLinearConv (the dot forms): qmm_u8 (uint8 A and Y, [1, 400] x [400, 10]: an 8-lane vector and
a rest of 2), qmm_s8 (int8 A and Y, 3 rows, [37, 21]: odd K and N); numpy's reference is the
op's definition, saturate(round_half_even(acc * float32(float32(sa * sb) / sy)) + zy).
Each OUTDIR/NAME/ gets model.onnx and test_data_set_0 (input_0.pb, output_0.pb)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

C, M, H, W = 64, 16, 4, 4
rng = np.random.default_rng(20261204)


def weights(over):
    pairs = [(64, 64), (-64, -64), (127, 1), (1, 127), (-128, 0), (0, -128), (100, -128),
             (-128, 127), (64, -128), (28, 100), (-1, -127), (0, 0)]
    w = np.zeros((M, C), np.int64)
    for m in range(M):
        for k in range(0, C, 2):
            w[m, k], w[m, k + 1] = pairs[(m * 7 + k // 2) % len(pairs)]
    if over:
        w[M // 2, 10], w[M // 2, 11] = 65, 64
    return w.astype(np.int8).reshape(M, C, 1, 1)


def write(out, name, over):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    w = weights(over)
    x = rng.integers(0, 256, (1, C, H, W)).astype(np.uint8)
    x[0, :, 0, :] = 255                      # a row of all-255 pixels: the largest sums
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"])
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, (1, M, H, W))],
                          [numpy_helper.from_array(w, "w")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    y = np.einsum("mc,nchw->nmhw", w.reshape(M, C).astype(np.int64), x.astype(np.int64)).astype(np.int32)
    for fn, arr, nm in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
        with open(os.path.join(d, "test_data_set_0", fn), "wb") as f:
            f.write(numpy_helper.from_array(arr, nm).SerializeToString())


def write_fx(out, name, kh, kw):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    w = np.full((2, 1, kh, kw), -128, np.int8)
    w[:, 0, kh // 2, kw // 2] = -127
    x = np.full((1, 2, 23, 23), 255, np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w"], ["y"], group=2)
    oh, ow = 23 - kh + 1, 23 - kw + 1
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, (1, 2, oh, ow))],
                          [numpy_helper.from_array(w, "w")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    y = np.zeros((1, 2, oh, ow), np.int64)
    for c in range(2):
        for i in range(oh):
            for j in range(ow):
                y[0, c, i, j] = (x[0, c, i:i + kh, j:j + kw].astype(np.int64) * w[c, 0].astype(np.int64)).sum()
    for fn, arr, nm in (("input_0.pb", x, "x"), ("output_0.pb", y.astype(np.int32), "y")):
        with open(os.path.join(d, "test_data_set_0", fn), "wb") as f:
            f.write(numpy_helper.from_array(arr, nm).SerializeToString())


def write_qmm(out, name, signed, m, k, n):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    t, nt = (TensorProto.INT8, np.int8) if signed else (TensorProto.UINT8, np.uint8)
    lo, hi = np.iinfo(nt).min, np.iinfo(nt).max
    a = rng.integers(lo, hi + 1, (m, k)).astype(nt)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    sa, sb, sy = np.float32(0.02), np.float32(0.003), np.float32(0.05 * k / 64)
    za, zy = nt(-9 if signed else 121), nt(3)
    inits = [numpy_helper.from_array(np.array(v, dt), nm) for v, dt, nm in
             ((sa, np.float32, "sa"), (za, nt, "za"), (sb, np.float32, "sb"), (0, np.int8, "zb"),
              (sy, np.float32, "sy"), (zy, nt, "zy"))] + [numpy_helper.from_array(b, "b")]
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("a", t, (m, k))],
                          [helper.make_tensor_value_info("y", t, (m, n))], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    acc = (a.astype(np.int64) - int(za)) @ b.astype(np.int64)
    mult = np.float32(np.float32(sa * sb) / sy)
    y = np.clip(np.round(acc.astype(np.float32) * mult).astype(np.int64) + int(zy), lo, hi).astype(nt)
    for fn, arr, nm in (("input_0.pb", a, "a"), ("output_0.pb", y, "y")):
        with open(os.path.join(d, "test_data_set_0", fn), "wb") as f:
            f.write(numpy_helper.from_array(arr, nm).SerializeToString())


if __name__ == "__main__":
    write(sys.argv[1], "edge", False)
    write(sys.argv[1], "over", True)
    write_fx(sys.argv[1], "fx_edge", 22, 23)
    write_fx(sys.argv[1], "fx_over", 23, 23)
    write_qmm(sys.argv[1], "qmm_u8", False, 1, 400, 10)
    write_qmm(sys.argv[1], "qmm_s8", True, 3, 37, 21)
