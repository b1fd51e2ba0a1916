#!/usr/bin/python3
"""macs.py - multiply-accumulates of one inference of an ONNX model, counted over its Conv,
ConvTranspose, Gemm, MatMul (and their integer/QLinear forms) nodes and the gate products of
LSTM, GRU and RNN, after ONNX shape inference. An independent count (from the ONNX graph, not
from onnxcc) for the figures that divide by it: instructions per multiply-add on the firmware
(tests/firmware/run.sh), GFLOP/s in the benchmarks (tests/bench/gen.py imports it).

  macs.py MODEL.onnx            prints the total
  macs.py -v MODEL.onnx         also one line per counted node
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def fold_shape_ops(model):
    """Exporters compute Reshape targets with Shape -> Gather -> Concat chains, which ONNX shape
    inference does not see through: evaluate those chains (on static input shapes) and make
    their results initializers, so that inference knows the shapes after the Reshape."""
    g = model.graph
    known = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for _ in range(4):
        m = shape_inference.infer_shapes(model)
        dims = {}
        for v in list(m.graph.input) + list(m.graph.value_info):
            d = v.type.tensor_type.shape.dim
            if all(x.HasField("dim_value") for x in d):
                dims[v.name] = [x.dim_value for x in d]
        added = 0
        for n in g.node:
            if n.output[0] in known:
                continue
            a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
            ins = [known.get(i) for i in n.input]
            r = None
            if n.op_type == "Constant" and "value" in a:
                r = numpy_helper.to_array(a["value"])
            elif n.op_type == "Shape" and n.input[0] in dims:
                r = np.array(dims[n.input[0]], dtype=np.int64)
            elif all(x is not None for x in ins):
                if n.op_type == "Gather":
                    r = np.take(ins[0], ins[1], axis=a.get("axis", 0))
                elif n.op_type == "Unsqueeze":
                    axes = a.get("axes", ins[1] if len(ins) > 1 else None)
                    r = np.expand_dims(ins[0], tuple(int(x) for x in axes))
                elif n.op_type == "Concat":
                    r = np.concatenate(ins, axis=a["axis"])
                elif n.op_type == "Cast":
                    r = ins[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[a["to"]])
            if r is not None:
                known[n.output[0]] = r
                g.initializer.append(numpy_helper.from_array(np.asarray(r), n.output[0]))
                added += 1
        if not added:
            break
    return model


def shapes(model):
    """Static shapes of every value: graph inputs, initializers, inferred intermediates."""
    m = shape_inference.infer_shapes(fold_shape_ops(model))
    out = {}
    for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            out[v.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    for t in m.graph.initializer:
        out[t.name] = list(t.dims)
    return m, out


def prod(xs):
    r = 1
    for x in xs:
        r *= x
    return r


def node_macs(n, sh):
    """MACs of one node, or 0 for the ops that do none (or whose shapes are unknown)."""
    ins = [sh.get(i) for i in n.input]
    outs = [sh.get(o) for o in n.output]
    if not outs or outs[0] is None or None in outs[0]:
        return 0
    y = outs[0]
    if n.op_type in ("Conv", "ConvInteger", "QLinearConv"):
        w = ins[3] if n.op_type == "QLinearConv" else ins[1]
        if w is None:
            return 0
        return prod(y) * prod(w[1:])             # each output: C/group * kernel taps
    if n.op_type == "ConvTranspose":
        x, w = ins[0], ins[1]
        if x is None or w is None:
            return 0
        return prod(x) * prod(w[1:])             # each input scatters to M/group * taps
    if n.op_type in ("LSTM", "GRU", "RNN"):
        x, w, r = ins[0], ins[1], ins[2]       # [seq, batch, in], [dirs, gates*h, in], [dirs, gates*h, h]
        if x is None or w is None or r is None:
            return 0
        return x[0] * x[1] * w[0] * w[1] * (w[2] + r[2])
    if n.op_type in ("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul"):
        a = ins[0]
        if a is None:
            return 0
        k = a[-1]
        if n.op_type == "Gemm" and any(at.name == "transA" and at.i for at in n.attribute):
            k = a[0]
        return prod(y) * k
    return 0


def count(path, verbose=False):
    return count_model(onnx.load(path), verbose)


def count_model(model, verbose=False):
    m, sh = shapes(model)
    total = 0
    for n in m.graph.node:
        c = node_macs(n, sh)
        if c and verbose:
            print("%-12s %-24s %d" % (n.op_type, n.name, c))
        total += c
    return total


if __name__ == "__main__":
    args = sys.argv[1:]
    v = "-v" in args
    args = [a for a in args if a != "-v"]
    if len(args) != 1:
        sys.exit("usage: macs.py [-v] MODEL.onnx")
    print(count(args[0], v))
