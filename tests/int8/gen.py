#!/usr/bin/python3
"""gen.py [OUTDIR] - writes the int8 test models of tests/int8.sh, quantized the way
onnxruntime's static quantizer (quantize_static) does, with onnxruntime-made goldens.

onnxruntime's Python quantizer is not available here, so this script does what it does, on
the same rules (onnxruntime/python/tools/quantization, quant_utils.compute_scale_zp):
  - weights of Conv and Gemm: int8, symmetric (zero point 0, range [-127, 127]), per output
    channel (axis 0 of a Conv's [M, C, kh, kw], of a Gemm's transposed B [N, K]);
  - biases: int32 with scale x_scale * w_scale[c] and zero point 0;
  - activations: uint8, asymmetric, per tensor, from MinMax calibration: the range of each
    tensor over random inputs, widened to hold 0; scale = (max - min) / 255,
    zero point = round(-min / scale);
  - MaxPool, Flatten and Reshape keep their input's parameters; a Relu that follows a Conv or
    Gemm is dropped and the producer's output quantized with the Relu's range (what the
    quantizer does when fuse is on), except in lenet, which keeps its Relus with QDQ pairs of
    their own so that the Relu pattern is tested too;
  - QDQ format: QuantizeLinear -> DequantizeLinear pairs on every activation, weights and
    biases stored quantized behind a DequantizeLinear.
The calibration runs the float model in onnxruntime (tests/int8/ort_run.js, under node) with
every intermediate tensor as an output, 16 random inputs as one batch.

Models (OUTDIR/NAME/, OUTDIR defaults to tests/int8/):
  lenet     1x1x28x28 -> Conv 5x5 (6) Relu MaxPool, Conv 5x5 (16) Relu MaxPool, Flatten,
            Gemm 400-120 Relu, Gemm 120-84 Relu, Gemm 84-10
  kws       1x1x49x10 MFCCs -> Conv 10x4 stride 2 (64) + BN, four blocks of depthwise 3x3 + BN +
            Relu, pointwise 1x1 + BN + Relu (the last two with a residual Add), GlobalAveragePool,
            Flatten, Gemm 64-12; the BatchNormalizations folded into the convs before quantizing
            (as onnxruntime's pre-processing does)
  mlp       1x256 -> Gemm 256-128 Relu, Gemm 128-64 Relu, Gemm 64-10
  ops       1x8x6x6 -> Conv 3x3 (8), x * Sigmoid(x), Tanh, + LeakyRelu(conv), then
            x + GlobalAveragePool(x): one op of each kind that is neither a product nor a move
            (no float.onnx: too small for the flash comparison, not benchmarked)
  ops_s8    1x4x5x5, int8 activations with nonzero zero points: Sigmoid, Relu, Clip, Add, Mul,
            Add, GlobalAveragePool, broadcasting Add (no float.onnx either)
  kws_rr    kws with other random weights quantized to 7 bits, [-64, 64] (the quantizer's
            reduce_range), which pmaddubsw multiplies exactly on AVX2
  dscnn     kws without its residual Adds and with an AveragePool 25x5 for its pool (the
            DS-CNN of Arm's ML zoo)
  mbv2      1x3x96x96 -> MobileNetV2-style (width 0.5, Relu for Relu6): Conv 3x3 s2 (16), inverted
            residual blocks (expand 1x1, depthwise 3x3, project 1x1, residual Adds) down to 6x6x48,
            GlobalAveragePool, Gemm 48-10: the row bands of tests/firmware (mbv2_i8_b*; no
            float.onnx)
  lenet_qop lenet's convolutions in QOperator form: QuantizeLinear, QLinearConv (Relu fused),
            MaxPool on uint8, QLinearConv, MaxPool, Reshape, QLinearMatMul 400-10 (per-tensor
            weights), DequantizeLinear
Each gets model.onnx (quantized), float.onnx (the float model it came from), test_data_set_0
(one random input and onnxruntime's output, graph optimizations off so that each QDQ group is
computed as the standard defines it) and atol (one quantum of the output: the tolerance of the
comparison). Needs numpy, onnx, node and onnxruntime-node (NODE_PATH; tests/bench.sh installs
it into build/bench/node_modules). Seeded: every run writes the same models.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
from onnx.checker import check_model

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32
CALIB = 16
rng = np.random.default_rng(20261203)


# ---- float models: a list of nodes over named tensors, weights as numpy arrays ----

class Net:
    def __init__(self, name, xshape):
        self.name, self.xshape = name, list(xshape)
        self.nodes, self.w, self.n = [], {}, 0

    def fresh(self, what):
        self.n += 1
        return "%s_%d" % (what, self.n)

    def node(self, op, ins, **attrs):
        out = self.fresh(op.lower())
        self.nodes.append((op, list(ins), out, attrs))
        return out

    def weight(self, a):
        name = self.fresh("w")
        self.w[name] = np.asarray(a, F32)
        return name

    def conv(self, x, cin, cout, k, stride=1, pads=(0, 0, 0, 0), group=1, bn=False):
        w = rng.normal(0, np.sqrt(2.0 / (cin // group * k[0] * k[1])), (cout, cin // group) + tuple(k))
        b = rng.normal(0, 0.1, cout)
        if bn:   # fold y = (conv - mean) / sqrt(var + eps) * gamma + beta into w and b
            gamma, beta = rng.uniform(0.5, 1.5, cout), rng.normal(0, 0.1, cout)
            mean, var = rng.normal(0, 0.1, cout), rng.uniform(0.5, 1.5, cout)
            f = gamma / np.sqrt(var + 1e-5)
            w, b = w * f[:, None, None, None], (b - mean) * f + beta
        return self.node("Conv", [x, self.weight(w), self.weight(b)], kernel_shape=list(k),
                         strides=[stride, stride], pads=list(pads), group=group)

    def gemm(self, x, k, n):
        w = rng.normal(0, np.sqrt(2.0 / k), (n, k))
        return self.node("Gemm", [x, self.weight(w), self.weight(rng.normal(0, 0.1, n))], transB=1)

    def model(self, batch, y, outputs=None):
        xs = [batch] + self.xshape[1:]
        nodes = [helper.make_node(op, ins, [out], name=out, **a) for op, ins, out, a in self.nodes]
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs or [y]]
        if not outputs:
            outs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)]
        g = helper.make_graph(nodes, self.name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, xs)],
                              outs, [numpy_helper.from_array(a, k) for k, a in self.w.items()])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                                 producer_name="onnxcc tests/int8/gen.py")


def lenet():
    n = Net("lenet", [1, 1, 28, 28])
    x = n.node("Relu", [n.conv("input", 1, 6, (5, 5), pads=(2, 2, 2, 2))])
    x = n.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = n.node("Relu", [n.conv(x, 6, 16, (5, 5))])
    x = n.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = n.node("Flatten", [x], axis=1)
    x = n.node("Relu", [n.gemm(x, 400, 120)])
    x = n.node("Relu", [n.gemm(x, 120, 84)])
    return n, n.gemm(x, 84, 10)


def kws():
    n = Net("kws", [1, 1, 49, 10])
    x = n.node("Relu", [n.conv("input", 1, 64, (10, 4), stride=2, pads=(4, 1, 5, 2), bn=True)])
    for i in range(4):
        y = n.node("Relu", [n.conv(x, 64, 64, (3, 3), pads=(1, 1, 1, 1), group=64, bn=True)])
        y = n.node("Relu", [n.conv(y, 64, 64, (1, 1), bn=True)])
        x = n.node("Add", [x, y]) if i >= 2 else y
    x = n.node("Flatten", [n.node("GlobalAveragePool", [x])], axis=1)
    return n, n.gemm(x, 64, 12)


def dscnn():
    n = Net("dscnn", [1, 1, 49, 10])
    x = n.node("Relu", [n.conv("input", 1, 64, (10, 4), stride=2, pads=(4, 1, 5, 2), bn=True)])
    for i in range(4):
        x = n.node("Relu", [n.conv(x, 64, 64, (3, 3), pads=(1, 1, 1, 1), group=64, bn=True)])
        x = n.node("Relu", [n.conv(x, 64, 64, (1, 1), bn=True)])
    x = n.node("Flatten", [n.node("AveragePool", [x], kernel_shape=[25, 5])], axis=1)
    return n, n.gemm(x, 64, 12)


def mbv2():
    """MobileNetV2-style at 96x96 (width 0.5, Relu for Relu6, the first five stages): inverted
    residual blocks of pointwise expand, depthwise 3x3, pointwise project, residual Adds where
    the shapes allow; the test of row bands (band_rows), whose early maps are the peak."""
    n = Net("mbv2", [1, 3, 96, 96])
    x = n.node("Relu", [n.conv("input", 3, 16, (3, 3), stride=2, pads=(1, 1, 1, 1), bn=True)])
    cin = 16
    for t, c, reps, s in ((1, 8, 1, 1), (6, 16, 2, 2), (6, 16, 2, 2), (6, 32, 2, 2), (6, 48, 1, 1)):
        for i in range(reps):
            st = s if i == 0 else 1
            h = cin * t
            y = n.node("Relu", [n.conv(x, cin, h, (1, 1), bn=True)]) if t != 1 else x
            y = n.node("Relu", [n.conv(y, h, h, (3, 3), stride=st, pads=(1, 1, 1, 1), group=h, bn=True)])
            y = n.conv(y, h, c, (1, 1), bn=True)
            x = n.node("Add", [x, y]) if st == 1 and cin == c else y
            cin = c
    x = n.node("Flatten", [n.node("GlobalAveragePool", [x])], axis=1)
    return n, n.gemm(x, cin, 10)


def ops():
    """The QDQ groups that are not products, each with its own output parameters: Sigmoid,
    Mul (swish), Tanh, LeakyRelu, Add, GlobalAveragePool (tables, integer Add/Mul/pool), and
    an Add that broadcasts (float between its DQs and Q)."""
    n = Net("ops", [1, 8, 6, 6])
    c = n.conv("input", 8, 8, (3, 3), pads=(1, 1, 1, 1))
    x = n.node("Tanh", [n.node("Mul", [c, n.node("Sigmoid", [c])])])
    x = n.node("Add", [x, n.node("LeakyRelu", [c], alpha=0.1)])
    # the broadcasting Add stays float (-v says so); the output is the whole map, so that a
    # one-quantum error of any of the ops above shows
    return n, n.node("Add", [x, n.node("GlobalAveragePool", [x])])


def mlp():
    n = Net("mlp", [1, 256])
    x = n.node("Relu", [n.gemm("input", 256, 128)])
    x = n.node("Relu", [n.gemm(x, 128, 64)])
    return n, n.gemm(x, 64, 10)


# ---- onnxruntime through node ----

def ort_run(model, feeds):
    """Runs model (ModelProto) on {name: array}; returns [(name, array)] of its outputs."""
    types = {np.dtype(F32): "float32", np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        save(model, path)
        ins = []
        for k, (name, a) in enumerate(feeds.items()):
            f = os.path.join(d, "in%d.bin" % k)
            a.astype(a.dtype.newbyteorder("<")).tofile(f)
            ins.append({"name": name, "type": types[a.dtype], "shape": list(a.shape), "file": f})
        job = os.path.join(d, "job.json")
        with open(job, "w") as f:
            json.dump({"model": path, "inputs": ins, "outdir": d}, f)
        subprocess.run(["node", os.path.join(HERE, "ort_run.js"), job], check=True)
        with open(os.path.join(d, "outputs.json")) as f:
            meta = json.load(f)
        np_types = {"float32": F32, "uint8": np.uint8, "int8": np.int8, "int32": np.int32}
        return [(m["name"], np.fromfile(m["file"], np_types[m["type"]]).reshape(m["shape"])) for m in meta]


# ---- quantization ----

def act_params(lo, hi):
    """uint8 asymmetric scale and zero point of the range [lo, hi] widened to hold 0."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    s = (hi - lo) / 255.0 if hi > lo else 1.0
    return F32(s), np.uint8(np.clip(round(-lo / s), 0, 255))


def weight_params(w, qmax=127):
    """int8 symmetric per output channel (axis 0): scales and the quantized weights, in
    [-qmax, qmax] (64: the quantizer's reduce_range, 7-bit weights)."""
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    s = np.where(amax > 0, amax / float(qmax), 1.0).astype(F32)
    q = np.clip(np.rint(w / s.reshape((-1,) + (1,) * (w.ndim - 1))), -qmax, qmax).astype(np.int8)
    return s, q


def calibrate(net, y):
    """Per tensor (min, max) over a batch of random inputs, onnxruntime computing."""
    names = ["input"] + [out for _, _, out, _ in net.nodes]
    xs = rng.uniform(-1, 1, [CALIB] + net.xshape[1:]).astype(F32)
    outs = dict(ort_run(net.model(CALIB, y, names[1:]), {"input": xs}))
    outs["input"] = xs
    return {k: (v.min(), v.max()) for k, v in outs.items()}


class QDQ:
    """Writes the QDQ model of a Net from the calibrated ranges."""

    def __init__(self, net, ranges, fuse_relu, qmax=127):
        self.net, self.nodes, self.inits, self.q = net, [], [], {}
        self.ranges, self.fuse, self.qmax = ranges, fuse_relu, qmax
        self.dq = {}     # float tensor -> the DequantizeLinear output that replaces it

    def const(self, name, a):
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def qdq(self, t, params, out=None):
        s, z = params
        self.q[t] = params
        sn, zn = self.const(t + "_scale", s), self.const(t + "_zero_point", z)
        self.nodes.append(helper.make_node("QuantizeLinear", [t, sn, zn], [t + "_q"], name=t + "_q"))
        self.dq[t] = out or t + "_dq"
        self.nodes.append(helper.make_node("DequantizeLinear", [t + "_q", sn, zn], [self.dq[t]], name=t + "_dq"))

    def weights(self, name, x_scale):
        s, q = weight_params(self.net.w[name[0]], self.qmax)
        wq = self.const(name[0] + "_q", q)
        ws, wz = self.const(name[0] + "_scale", s), self.const(name[0] + "_zero_point", np.zeros(len(s), np.int8))
        self.nodes.append(helper.make_node("DequantizeLinear", [wq, ws, wz], [name[0] + "_dq"], axis=0, name=name[0] + "_dq"))
        bs = (x_scale * s).astype(F32)
        bq = np.rint(self.net.w[name[1]] / bs).astype(np.int32)
        bn = self.const(name[1] + "_q", bq)
        bsn, bz = self.const(name[1] + "_scale", bs), self.const(name[1] + "_zero_point", np.zeros(len(s), np.int32))
        self.nodes.append(helper.make_node("DequantizeLinear", [bn, bsn, bz], [name[1] + "_dq"], axis=0, name=name[1] + "_dq"))
        return [name[0] + "_dq", name[1] + "_dq"]

    def build(self, y, yshape):
        net, self.yshape = self.net, yshape
        self.qdq("input", act_params(*self.ranges["input"]))
        consumers = {}
        for op, ins, out, a in net.nodes:
            for i in ins:
                consumers.setdefault(i, []).append(op)
        alias = {}      # a dropped Relu's output -> its producer's output
        for op, ins, out, a in net.nodes:
            ins = [alias.get(i, i) for i in ins]
            if op == "Relu" and self.fuse:
                alias[out] = ins[0]
                continue
            xin = [self.dq[i] for i in ins if i in self.dq]
            if op in ("Conv", "Gemm"):
                xin += self.weights(ins[1:], self.q[ins[0]][0])
            self.nodes.append(helper.make_node(op, xin, [out], name=out, **a))
            rng_out = self.ranges[out]
            if self.fuse and consumers.get(out) == ["Relu"]:
                relu = next(o for p, i, o, _ in net.nodes if p == "Relu" and i == [out])
                rng_out = self.ranges[relu]
            same = op in ("MaxPool", "Flatten", "Reshape")
            self.qdq(out, self.q[ins[0]] if same else act_params(*rng_out), "output" if out == y else None)
        g = helper.make_graph(self.nodes, net.name + "_qdq",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, net.xshape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, self.yshape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxcc tests/int8/gen.py")
        check_model(m)
        return m, self.q[y][0]


def lenet_qop(net, ranges):
    """lenet's convolutions and one QLinearMatMul 400-10 in QOperator form."""
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def params(t):
        s, z = act_params(*ranges[t])
        return const(t + "_s", s), const(t + "_z", z), s

    convs = [o for op, _, o, _ in net.nodes if op == "Conv"]
    relus = [o for op, i, o, _ in net.nodes if op == "Relu" and i[0] in convs]
    xs, xz, xsv = params("input")
    nodes.append(helper.make_node("QuantizeLinear", ["input", xs, xz], ["xq"]))
    x = "xq"
    for conv, relu in zip(convs, relus):
        ins, attrs = next((i, a) for op, i, o, a in net.nodes if o == conv)
        ws, wq = weight_params(net.w[ins[1]])
        ys, yz, ysv = params(relu)    # Relu fused: the conv's output takes the Relu's range
        b = np.rint(net.w[ins[2]] / (xsv * ws)).astype(np.int32)
        qins = [x, xs, xz, const(conv + "_w", wq), const(conv + "_ws", ws),
                const(conv + "_wz", np.zeros(len(ws), np.int8)), ys, yz, const(conv + "_b", b)]
        nodes.append(helper.make_node("QLinearConv", qins, [conv + "_q"], **attrs))
        nodes.append(helper.make_node("MaxPool", [conv + "_q"], [conv + "_p"], kernel_shape=[2, 2], strides=[2, 2]))
        x, xs, xz, xsv = conv + "_p", ys, yz, ysv
    nodes.append(helper.make_node("Reshape", [x, const("shape", np.array([1, 400], np.int64))], ["flat"]))
    w = rng.normal(0, np.sqrt(2.0 / 400), (400, 10)).astype(F32)
    wsv = F32(np.abs(w).max() / 127.0)
    wq = np.clip(np.rint(w / wsv), -127, 127).astype(np.int8)
    # the output range from the float product of the dequantized inputs over the calibration
    lo, hi = -4.0, 4.0
    ys, yz = const("y_s", F32((hi - lo) / 255)), const("y_z", np.uint8(128))
    nodes.append(helper.make_node("QLinearMatMul", ["flat", xs, xz, const("fc_w", wq), const("fc_ws", wsv),
                                                    const("fc_wz", np.int8(0)), ys, yz], ["fc"]))
    nodes.append(helper.make_node("DequantizeLinear", ["fc", ys, yz], ["output"]))
    g = helper.make_graph(nodes, "lenet_qop", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxcc tests/int8/gen.py")
    check_model(m)
    # float twin: the same computation in float (Conv, Relu, MaxPool, Reshape, MatMul)
    f = Net("lenet_qop_float", [1, 1, 28, 28])
    f.nodes = [nd for nd in net.nodes if nd[2] in convs or nd[2] in relus or nd[0] == "MaxPool"]
    f.w = {k: net.w[k] for op, i, o, a in f.nodes for k in i if k in net.w}
    f.nodes = list(f.nodes) + [("Flatten", [f.nodes[-1][2]], "flat", {"axis": 1}),
                               ("MatMul", ["flat", "fc_w"], "fc", {})]
    f.w["fc_w"] = w
    return m, F32((hi - lo) / 255), f.model(1, "fc")


def ops_s8():
    """int8 activations (nonzero zero points), scales chosen by hand: Sigmoid, Relu, Clip with
    constant bounds, Add, Mul, Add, GlobalAveragePool and a broadcasting Add, each with its own
    QuantizeLinear/DequantizeLinear pair."""
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def op(kind, ins, s, z, **attrs):
        t = "%s_%d" % (kind.lower(), len(nodes))
        nodes.append(helper.make_node(kind, ins, [t], **attrs))
        sn, zn = const(t + "_s", F32(s)), const(t + "_z", np.int8(z))
        nodes.append(helper.make_node("QuantizeLinear", [t, sn, zn], [t + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [t + "_q", sn, zn], [t + "_dq"]))
        return t + "_dq"

    x = op("Identity", ["input"], 0.01, -5)
    sg = op("Sigmoid", [x], 1 / 256, -128)
    r = op("Relu", [x], 0.006, -100)
    cl = op("Clip", [x, const("lo", F32(-0.3)), const("hi", F32(0.5))], 0.005, 3)
    a = op("Add", [op("Mul", [op("Add", [sg, r], 0.012, -20), cl], 0.004, 7), x], 0.011, 2)
    y = op("Add", [op("GlobalAveragePool", [a], 0.003, -9), a], 0.013, 1)
    nodes.append(helper.make_node("Identity", [y], ["output"]))
    shape = [1, 4, 5, 5]
    g = helper.make_graph(nodes, "ops_s8", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxcc tests/int8/gen.py")
    check_model(m)
    return m, F32(0.013), rng.uniform(-1.5, 1.5, shape).astype(F32)


def write(outdir, name, model, float_model, atol, x):
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    save(model, os.path.join(d, "model.onnx"))
    if float_model:
        save(float_model, os.path.join(d, "float.onnx"))
    ((_, y),) = ort_run(model, {"input": x})
    for fn, arr, nm in (("input_0.pb", x, "input"), ("output_0.pb", y, "output")):
        with open(os.path.join(d, "test_data_set_0", fn), "wb") as f:
            f.write(numpy_helper.from_array(arr, nm).SerializeToString())
    with open(os.path.join(d, "atol"), "w") as f:
        # one quantum of the output, and a float rounding's worth more
        print("%.9g" % (atol * 1.001), file=f)
    print("gen.py: %s: %d nodes, output scale %g" % (name, len(model.graph.node), atol), file=sys.stderr)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else HERE
    for make, fuse in ((lenet, False), (kws, True), (mlp, False)):
        net, y = make()
        ranges = calibrate(net, y)
        m, ys = QDQ(net, ranges, fuse).build(y, [1, net.w[net.nodes[-1][1][1]].shape[0]])
        x = rng.uniform(-1, 1, net.xshape).astype(F32)
        write(outdir, net.name, m, net.model(1, y), ys, x)
        if net.name == "lenet":
            qm, qs, fm = lenet_qop(net, ranges)
            write(outdir, "lenet_qop", qm, fm, qs, x)
    # after the others, so that their random draws and files stay as they were
    net, y = ops()
    ranges = calibrate(net, y)
    m, ys = QDQ(net, ranges, False).build(y, net.xshape)
    write(outdir, net.name, m, None, ys, rng.uniform(-1, 1, net.xshape).astype(F32))
    m, ys, x = ops_s8()
    write(outdir, "ops_s8", m, None, ys, x)
    # kws with 7-bit weights (reduce_range), which onnxruntime recommends for AVX2 without VNNI
    net, y = kws()
    ranges = calibrate(net, y)
    m, ys = QDQ(net, ranges, True, qmax=64).build(y, [1, net.w[net.nodes[-1][1][1]].shape[0]])
    write(outdir, "kws_rr", m, net.model(1, y), ys, rng.uniform(-1, 1, net.xshape).astype(F32))
    # the DS-CNN of Arm's ML zoo: kws without residual Adds, its pool an AveragePool 25x5
    net, y = dscnn()
    ranges = calibrate(net, y)
    m, ys = QDQ(net, ranges, True).build(y, [1, net.w[net.nodes[-1][1][1]].shape[0]])
    write(outdir, "dscnn", m, net.model(1, y), ys, rng.uniform(-1, 1, net.xshape).astype(F32))
    net, y = mbv2()
    ranges = calibrate(net, y)
    m, ys = QDQ(net, ranges, True).build(y, [1, net.w[net.nodes[-1][1][1]].shape[0]])
    # no float.onnx: the test of row bands, not of the weights' size (its depthwise convs, 9
    # int8 weights an output channel beside a 4-byte scale and bias, are 0.36x the float's)
    write(outdir, "mbv2", m, None, ys, rng.uniform(-1, 1, net.xshape).astype(F32))


if __name__ == "__main__":
    main()
