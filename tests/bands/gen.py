"""tests/bands/gen.py - a small float CNN for the row bands of --max-arena (band_rows) on the
host: a 3x3 conv, Relu, a 3x3 MaxPool of stride 2, a dilated 3x3 conv (dilation 2) with a
residual Add, a strided 3x3 conv and a Clip, then a global average pool. Its windows of
several heights, strides and dilations, and a map read by two nodes, give line buffers of 1
to 4 carried rows. The expected output comes from torch's functional ops in double precision
(not from onnxcc). Writes model.onnx and test_data_set_0/ next to this file; run with /usr/bin/python3."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20)


def w(*shape):
    return rng.standard_normal(shape).astype(np.float32) * 0.3


inits = [numpy_helper.from_array(a, n) for n, a in [
    ("w1", w(8, 3, 3, 3)), ("b1", w(8)), ("w2", w(8, 8, 3, 3)), ("b2", w(8)),
    ("w3", w(16, 8, 3, 3)), ("b3", w(16)),
    ("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))]]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="pool1"),
    helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[2, 2, 2, 2], dilations=[2, 2], name="conv2"),
    helper.make_node("Add", ["c2", "p1"], ["a2"], name="add2"),
    helper.make_node("Conv", ["a2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv3"),
    helper.make_node("Clip", ["c3", "lo", "hi"], ["r3"], name="clip3"),
    helper.make_node("GlobalAveragePool", ["r3"], ["y"], name="gap"),
]
graph = helper.make_graph(nodes, "bands", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 40, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 1, 1])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "model.onnx"))
x = rng.standard_normal((1, 3, 40, 40)).astype(np.float32)
p = {i.name: torch.from_numpy(numpy_helper.to_array(i).astype(np.float64)) for i in inits}
t = torch.from_numpy(x.astype(np.float64))
p1 = F.max_pool2d(torch.relu(F.conv2d(t, p["w1"], p["b1"], padding=1)), 3, stride=2, padding=1)
a2 = F.conv2d(p1, p["w2"], p["b2"], padding=2, dilation=2) + p1
r3 = torch.clamp(F.conv2d(a2, p["w3"], p["b3"], padding=1, stride=2), 0, 6)
y = r3.mean(dim=(2, 3), keepdim=True).numpy().astype(np.float32)
d = os.path.join(here, "test_data_set_0")
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "input_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(x, "x").SerializeToString())
with open(os.path.join(d, "output_0.pb"), "wb") as f:
    f.write(numpy_helper.from_array(y, "y").SerializeToString())
