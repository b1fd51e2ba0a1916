#!/usr/bin/python3
"""gen.py - writes tests/firmware/decoder (model.onnx, test_data_set_0/): the upsampling
layers of a decoder, small enough for a Cortex-M4 (tests/firmware), with its expected outputs from PyTorch's conv_transpose (an
implementation independent of onnxcc's stride phases).

  x [1, 16, 8, 8]  -> ConvTranspose 16->8 k4 s2 p1 (DCGAN-style) -> Relu
                   -> ConvTranspose 8->8 k2 s2 (U-Net-style)                  -> y [1, 8, 32, 32]
  a [1, 16, 16]    -> ConvTranspose1d 16->8 k16 s8 p4 (HiFi-GAN-style) -> LeakyRelu 0.1
                   -> Conv1d 8->8 k3 dilation 3 pad 3 (a residual block's)     -> z [1, 8, 128]

Kept out of models/, whose models seed tests/fuzz-smoke.sh.
Run: /usr/bin/python3 tests/firmware/decoder/gen.py   (needs python3-onnx, numpy, torch)
"""
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto as T, helper as h, numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = HERE
rng = np.random.default_rng(19)


def rnd(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


x = rnd(1, 16, 8, 8)
a = rnd(1, 16, 16)
w1, b1 = rnd(16, 8, 4, 4, scale=0.2), rnd(8, scale=0.1)
w2, b2 = rnd(8, 8, 2, 2, scale=0.3), rnd(8, scale=0.1)
w3, b3 = rnd(16, 8, 16, scale=0.2), rnd(8, scale=0.1)
w4, b4 = rnd(8, 8, 3, scale=0.3), rnd(8, scale=0.1)

t = torch.from_numpy
with torch.no_grad():
    y = F.conv_transpose2d(F.relu(F.conv_transpose2d(t(x), t(w1), t(b1), stride=2, padding=1)),
                           t(w2), t(b2), stride=2).numpy()
    z = F.conv1d(F.leaky_relu(F.conv_transpose1d(t(a), t(w3), t(b3), stride=8, padding=4), 0.1),
                 t(w4), t(b4), padding=3, dilation=3).numpy()

nodes = [
    h.make_node("ConvTranspose", ["x", "w1", "b1"], ["t1"], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1]),
    h.make_node("Relu", ["t1"], ["r1"]),
    h.make_node("ConvTranspose", ["r1", "w2", "b2"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    h.make_node("ConvTranspose", ["a", "w3", "b3"], ["t3"], kernel_shape=[16], strides=[8], pads=[4, 4]),
    h.make_node("LeakyRelu", ["t3"], ["r3"], alpha=0.1),
    h.make_node("Conv", ["r3", "w4", "b4"], ["z"], kernel_shape=[3], pads=[3, 3], dilations=[3]),
]
inits = [nh.from_array(v, n) for n, v in
         [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3), ("w4", w4), ("b4", b4)]]
g = h.make_graph(nodes, "decoder",
                 [h.make_tensor_value_info("x", T.FLOAT, x.shape), h.make_tensor_value_info("a", T.FLOAT, a.shape)],
                 [h.make_tensor_value_info("y", T.FLOAT, y.shape), h.make_tensor_value_info("z", T.FLOAT, z.shape)],
                 inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="gen_decoder.py")
m.ir_version = 7
onnx.checker.check_model(m)
os.makedirs(os.path.join(OUT, "test_data_set_0"), exist_ok=True)
onnx.save(m, os.path.join(OUT, "model.onnx"))
for name, v in [("input_0", nh.from_array(x, "x")), ("input_1", nh.from_array(a, "a")),
                ("output_0", nh.from_array(y, "y")), ("output_1", nh.from_array(z, "z"))]:
    with open(os.path.join(OUT, "test_data_set_0", name + ".pb"), "wb") as f:
        f.write(v.SerializeToString())
