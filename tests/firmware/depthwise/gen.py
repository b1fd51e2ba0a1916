#!/usr/bin/python3
"""gen.py - writes tests/firmware/depthwise (model.onnx, test_data_set_0/): depthwise convs on
maps of a few columns, the shapes that schedule.c's scalar_channelwise blocks on targets
without float vectors (rows peeled, whole rows jammed, two rows blocked, taps unrolled), with
their expected outputs from PyTorch's conv2d (an implementation independent of onnxcc).

  xa [1, 8, 9, 5]  -> 3x3 pad 1 + bias -> Relu              (odd interior rows: a last block)
  xb [1, 4, 10, 6] -> 3x3 stride 2 pad 1                    (columns read at stride 2)
  xc [1, 4, 8, 4]  -> 5x5 pad 2 + bias                       (25 taps: tap loops kept)
  xd [1, 4, 7, 5]  -> 3x3 dilation 2 pad 2 -> Relu
  xe [1, 4, 6, 3]  -> 3x3 pads top 0 left 1 bottom 2 right 1 (asymmetric borders)
  xf [1, 3, 4, 4]  -> 3x3 no padding                         (no border)
  xg [1, 4, 6, 4]  -> 3x3 pad 1, channel multiplier 2 (group 4, 8 outputs)

Run: /usr/bin/python3 tests/firmware/depthwise/gen.py   (needs python3-onnx, numpy, torch)
"""
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto as T, helper as h, numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(16)


def rnd(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# name, input shape, kernel, stride, dilation, pads (top, left, bottom, right), bias, relu, multiplier
CASES = [
    ("a", (1, 8, 9, 5), 3, 1, 1, (1, 1, 1, 1), True, True, 1),
    ("b", (1, 4, 10, 6), 3, 2, 1, (1, 1, 1, 1), False, False, 1),
    ("c", (1, 4, 8, 4), 5, 1, 1, (2, 2, 2, 2), True, False, 1),
    ("d", (1, 4, 7, 5), 3, 1, 2, (2, 2, 2, 2), False, True, 1),
    ("e", (1, 4, 6, 3), 3, 1, 1, (0, 1, 2, 1), True, False, 1),
    ("f", (1, 3, 4, 4), 3, 1, 1, (0, 0, 0, 0), False, False, 1),
    ("g", (1, 4, 6, 4), 3, 1, 1, (1, 1, 1, 1), True, False, 2),
]

nodes, inits, ins, outs, data_in, data_out = [], [], [], [], [], []
for name, shape, kk, s, d, (pt, pl, pb, pr), bias, relu, mult in CASES:
    c = shape[1]
    x, w = rnd(*shape), rnd(c * mult, 1, kk, kk, scale=0.3)
    b = rnd(c * mult, scale=0.1) if bias else None
    t = torch.from_numpy
    with torch.no_grad():
        y = F.conv2d(F.pad(t(x), (pl, pr, pt, pb)), t(w), t(b) if bias else None, stride=s, dilation=d, groups=c)
        if relu:
            y = F.relu(y)
    y = y.numpy()
    conv_in = ["x" + name, "w" + name] + (["b" + name] if bias else [])
    conv_out = "c" + name if relu else "y" + name
    nodes.append(h.make_node("Conv", conv_in, [conv_out], kernel_shape=[kk, kk], strides=[s, s], dilations=[d, d],
                             pads=[pt, pl, pb, pr], group=c))
    if relu:
        nodes.append(h.make_node("Relu", [conv_out], ["y" + name]))
    inits.append(nh.from_array(w, "w" + name))
    if bias:
        inits.append(nh.from_array(b, "b" + name))
    ins.append(h.make_tensor_value_info("x" + name, T.FLOAT, x.shape))
    outs.append(h.make_tensor_value_info("y" + name, T.FLOAT, y.shape))
    data_in.append(nh.from_array(x, "x" + name))
    data_out.append(nh.from_array(y, "y" + name))

g = h.make_graph(nodes, "depthwise", ins, outs, inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="gen_depthwise.py")
m.ir_version = 7
onnx.checker.check_model(m)
os.makedirs(os.path.join(HERE, "test_data_set_0"), exist_ok=True)
onnx.save(m, os.path.join(HERE, "model.onnx"))
for kind, tensors in (("input", data_in), ("output", data_out)):
    for i, v in enumerate(tensors):
        with open(os.path.join(HERE, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
            f.write(v.SerializeToString())
