#!/usr/bin/env python3
"""make_conv_bn_relu.py - the worked example of docs/architecture.md.

Writes conv_bn_relu.onnx next to this script: x[1,2,5,5] -> Conv(3 output channels, 3x3
kernel, pads 1, with bias) -> BatchNormalization (inference form) -> Relu -> y[1,3,5,5],
opset 13, and one test data set (test_data_set_0/{input,output}_0.pb) computed with numpy,
so that `./onnxcc check docs/example/conv_bn_relu.onnx` runs it. The weights are rounded to
two decimals so that the IR dumps in the document stay readable. Deterministic (fixed seed).

    /usr/bin/python3 docs/example/make_conv_bn_relu.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def rounded(*shape, lo=-1.0, hi=1.0):
    return np.round(rng.uniform(lo, hi, shape), 2).astype(np.float32)


w = rounded(3, 2, 3, 3)
b = rounded(3)
gamma = rounded(3, lo=0.5, hi=1.5)
beta = rounded(3)
mean = rounded(3)
var = rounded(3, lo=0.5, hi=2.0)
eps = 1e-5

inits = [numpy_helper.from_array(a, name) for a, name in
         [(w, "w"), (b, "b"), (gamma, "gamma"), (beta, "beta"), (mean, "mean"), (var, "var")]]
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["conv_out"], name="conv",
                     kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["conv_out", "gamma", "beta", "mean", "var"],
                     ["bn_out"], name="bn", epsilon=eps),
    helper.make_node("Relu", ["bn_out"], ["y"], name="relu"),
]
graph = helper.make_graph(
    nodes, "conv_bn_relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5, 5])],
    inits)
model = helper.make_model(graph, producer_name="onnxcc-docs",
                          opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(HERE, "conv_bn_relu.onnx"))


# Reference result: direct convolution, then BN and Relu, in float64.
def reference(x):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 3, 5, 5))
    for m in range(3):
        for i in range(5):
            for j in range(5):
                out[0, m, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * w[m]) + b[m]
    s = (gamma / np.sqrt(var.astype(np.float64) + eps)).reshape(1, 3, 1, 1)
    out = (out - mean.reshape(1, 3, 1, 1)) * s + beta.reshape(1, 3, 1, 1)
    return np.maximum(out, 0).astype(np.float32)


x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
ds = os.path.join(HERE, "test_data_set_0")
os.makedirs(ds, exist_ok=True)
for name, arr, fname in [("x", x, "input_0.pb"), ("y", reference(x), "output_0.pb")]:
    with open(os.path.join(ds, fname), "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())
