#!/usr/bin/python3
"""gen.py - writes the tiny models of the single-pass golden tests (tests/passes.sh).

Each model exercises one pass; tests/passes.sh compiles it with --print-after=PASS and diffs
the dump against tests/passes/NAME.expected. The models are built here at test time (into the
directory given as the argument, build/passes-tests by default) rather than committed, so the
test reads as source. Weights are small hand-picked numbers, so that the expected dumps can be
checked by hand (a folded BatchNormalization, say).

  canon_clip_softmax  opset 9 Clip (min/max attributes) and Softmax (default axis 1, legacy)
  infer_reshape       Shape -> Gather -> Concat -> Reshape: infer_shapes folds it to a constant
  simplify_identity   Identity -> Relu -> Dropout -> Pad (zero pads) -> Exp: simplify drops
                      Identity, Dropout and Pad
  fuse_qdq            QDQ Conv (per-channel int8 weights, int32 bias) and Relu: the conv
                      becomes QLinearConv on the 8-bit data, the Relu (same scale and zero
                      point 10 on both sides) QLinearClip with lower bound 10: max(q, 10)
  fuse_batchnorm      Conv -> BatchNormalization -> Relu: BN folds into the conv's weights
  dead_taps           3x3 convs at dilation 4 on a 3x3 map: one becomes 1x1, one keeps a row
  winograd            a 3x3 conv of 256 channels on 11x11 (all weights 1): a Pad (the conv's pads,
                      one more row and column for the odd size), WinogradInput, sixteen 1x1
                      convs with weights U_ab = r_a r_b, r = G (1,1,1) = (1, 1.5, 0.5, 1), the
                      bias on M_11's, WinogradOutput cut to 11x11
  lower_gemm          one Gemm (transB=1, alpha, beta, bias): its loop nest
  fuse_conv_add_relu  Conv -> Add -> Relu: the Add and Relu join the conv's loop nest
  schedule_matmul         one MatMul big enough to schedule
  bufferize_chain     MatMul -> Softmax -> MatMul -> Softmax: temporaries get arena offsets

Run: /usr/bin/python3 tests/passes/gen.py [OUT_DIR]   (needs python3-onnx, python3-numpy)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

F = TensorProto.FLOAT


def const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, producer_name="onnxcc-tests",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def canon_clip_softmax():
    nodes = [helper.make_node("Clip", ["x"], ["c"], "clip", min=-1.0, max=1.0),
             helper.make_node("Softmax", ["c"], ["y"], "softmax")]
    return model("canon_clip_softmax", nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])], opset=9)


def infer_reshape():
    nodes = [helper.make_node("Shape", ["x"], ["s"], "shape"),
             helper.make_node("Gather", ["s", "i0"], ["n"], "gather", axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["t"], "concat", axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], "reshape")]
    inits = [const("i0", [0], np.int64), const("minus1", [-1], np.int64)]
    return model("infer_reshape", nodes, [vi("x", [2, 3, 4])], [vi("y", None)], inits)


def simplify_identity():
    # Both in the middle: one that writes a graph output must stay (the output keeps its name).
    # A Pad whose pads are all zero copies its input: gone too. A training-mode Dropout of
    # ratio 0 keeps every element (as Swin-T's attention dropouts): gone; of ratio 0.5, kept.
    nodes = [helper.make_node("Identity", ["x"], ["a"], "identity"),
             helper.make_node("Relu", ["a"], ["b"], "relu"),
             helper.make_node("Dropout", ["b"], ["c"], "dropout"),
             helper.make_node("Pad", ["c", "zeros"], ["d"], "pad"),
             helper.make_node("Dropout", ["d", "ratio0", "train"], ["e", "m"], "dropout_train_ratio0"),
             helper.make_node("Dropout", ["e", "ratio5", "train"], ["f"], "dropout_train"),
             helper.make_node("Exp", ["f"], ["y"], "exp")]
    return model("simplify_identity", nodes, [vi("x", [2, 3])], [vi("y", [2, 3])],
                 [const("zeros", [0, 0, 0, 0], np.int64), const("ratio0", 0.0), const("ratio5", 0.5),
                  const("train", True, np.bool_)])


def fuse_batchnorm():
    # 2 channels, 1x1 kernel, epsilon 0: the per-channel factors s/sqrt(var) are 2/1 = 2 and
    # 3/2 = 1.5, so the folded weights are [1, 0.5]*2 = [2, 1] and [2, -1]*1.5 = [3, -1.5], the
    # folded bias (b - mean)*f + beta = (0.25 - 1)*2 + 0.5 = -1 and (1 - 2)*1.5 - 1 = -2.5.
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv"),
             helper.make_node("BatchNormalization", ["c", "s", "beta", "mean", "var"], ["n"], "bn",
                              epsilon=0.0),
             helper.make_node("Relu", ["n"], ["y"], "relu")]
    inits = [const("w", [[[[1.0]], [[0.5]]], [[[2.0]], [[-1.0]]]]), const("b", [0.25, 1.0]),
             const("s", [2.0, 3.0]), const("beta", [0.5, -1.0]), const("mean", [1.0, 2.0]),
             const("var", [1.0, 4.0])]
    return model("fuse_batchnorm", nodes, [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 3, 3])], inits)


def dead_taps():
    # A 3x3 conv at dilation 4, pads 4, on a 3x3 map: the taps at offsets -4 and +4 never reach
    # the map, so it is a 1x1 conv by the centre weights (4 and 13: w is 0..17), pads 0. The
    # second (dilations [1, 4], pads [1, 4, 1, 4]) keeps its 3 rows and loses 2 columns: its
    # weights are w's middle column [[1, 4, 7], [10, 13, 16]], pads [1, 0, 1, 0], dilations
    # [1, 1].
    w = np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv", dilations=[4, 4], pads=[4, 4, 4, 4]),
             helper.make_node("Conv", ["c", "w2"], ["y"], "conv2", dilations=[1, 4], pads=[1, 4, 1, 4])]
    inits = [const("w", w), const("w2", w.reshape(1, 2, 3, 3))]
    return model("dead_taps", nodes, [vi("x", [1, 1, 3, 3])], [vi("y", [1, 1, 3, 3])], inits)


def winograd():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], "conv", pads=[1, 1, 1, 1])]
    inits = [const("w", np.ones((256, 256, 3, 3))), const("b", np.arange(256))]
    return model("winograd", nodes, [vi("x", [1, 256, 11, 11])], [vi("y", [1, 256, 11, 11])], inits)


def fuse_qdq():
    # x quantized by (0.5, 128); weights 2 and -3 with per-channel scales 0.25 and 0.125; the
    # bias 4 and -8 at the scales x_scale * w_scale = 0.125 and 0.0625 (zero point 0), so
    # QLinearConv takes it as it is; the conv's output quantized by (0.1, 10).
    q = lambda t, s, z, o: helper.make_node("QuantizeLinear", [t, s, z], [o], o)
    dq = lambda t, s, z, o, **a: helper.make_node("DequantizeLinear", [t, s, z], [o], o, **a)
    nodes = [q("x", "xs", "xz", "xq"), dq("xq", "xs", "xz", "xd"),
             dq("w", "ws", "wz", "wd", axis=0), dq("b", "bs", "bz", "bd", axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], "conv"),
             q("c", "cs", "cz", "cq"), dq("cq", "cs", "cz", "cd"),
             helper.make_node("Relu", ["cd"], ["r"], "relu"),
             q("r", "cs", "cz", "rq"), dq("rq", "cs", "cz", "y")]
    inits = [const("xs", 0.5), const("xz", 128, np.uint8), const("w", [[[[2]]], [[[-3]]]], np.int8),
             const("ws", [0.25, 0.125]), const("wz", [0, 0], np.int8), const("b", [4, -8], np.int32),
             const("bs", [0.125, 0.0625]), const("bz", [0, 0], np.int32), const("cs", 0.1),
             const("cz", 10, np.uint8)]
    return model("fuse_qdq", nodes, [vi("x", [1, 1, 2, 2])], [vi("y", [1, 2, 2, 2])], inits)


def lower_gemm():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], "gemm", transB=1, alpha=0.5, beta=2.0)]
    inits = [const("w", np.arange(12).reshape(3, 4) / 8), const("b", [1.0, 2.0, 3.0])]
    return model("lower_gemm", nodes, [vi("x", [2, 4])], [vi("y", [2, 3])], inits)


def fuse_conv_add_relu():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "z"], ["a"], "add"),
             helper.make_node("Relu", ["a"], ["y"], "relu")]
    inits = [const("w", np.full((2, 1, 3, 3), 0.125))]
    return model("fuse_conv_add_relu", nodes, [vi("x", [1, 1, 4, 4]), vi("z", [1, 2, 4, 4])],
                 [vi("y", [1, 2, 4, 4])], inits)


def schedule_matmul():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], "matmul")]
    return model("schedule_matmul", nodes, [vi("a", [16, 32]), vi("b", [32, 24])], [vi("y", [16, 24])])


def bufferize_chain():
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], "mm1"),
             helper.make_node("Softmax", ["h1"], ["s1"], "sm1", axis=-1),
             helper.make_node("MatMul", ["s1", "w2"], ["h2"], "mm2"),
             helper.make_node("Softmax", ["h2"], ["y"], "sm2", axis=-1)]
    inits = [const("w1", np.full((4, 8), 0.25)), const("w2", np.full((8, 4), 0.5))]
    return model("bufferize_chain", nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits)


MODELS = [canon_clip_softmax, infer_reshape, simplify_identity, fuse_qdq, fuse_batchnorm, dead_taps, winograd, lower_gemm,
          fuse_conv_add_relu, schedule_matmul, bufferize_chain]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/passes-tests"
    os.makedirs(out, exist_ok=True)
    for make in MODELS:
        save(make(), os.path.join(out, make.__name__ + ".onnx"))


if __name__ == "__main__":
    main()
