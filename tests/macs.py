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
    known = {t.name: numpy_helper.to_array(t) for t in g.initializer if prod(t.dims) <= 4096}
    for _ in range(64):                      # each round sees through one more Reshape
        m = shape_inference.infer_shapes(model)
        dims = {}
        for v in list(m.graph.input) + list(m.graph.value_info):
            t = v.type.tensor_type
            if t.HasField("shape") and all(x.HasField("dim_value") for x in t.shape.dim):
                dims[v.name] = [x.dim_value for x in t.shape.dim]   # no shape field: rank unknown
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
                d = dims[n.input[0]]
                r = np.array(d[a.get("start", 0):a.get("end", len(d))], dtype=np.int64)
            elif n.input and all(x is not None and x.size <= 4096 for x in ins):   # shape-sized, not weights
                r = eval_shape_op(n.op_type, a, ins)
            if r is not None:
                known[n.output[0]] = r
                g.initializer.append(numpy_helper.from_array(np.asarray(r), n.output[0]))
                added += 1
        if not added:
            break
    return model


def eval_shape_op(op, a, ins):
    """The value of one node of a shape computation whose inputs are all known (small integer
    tensors), or None for the ops this does not evaluate."""
    x = ins[0]
    if op == "Gather":
        return np.take(x, ins[1], axis=a.get("axis", 0))
    if op in ("Unsqueeze", "Squeeze"):
        axes = a.get("axes", ins[1] if len(ins) > 1 else None)
        if op == "Unsqueeze":
            return np.expand_dims(x, tuple(int(v) for v in axes))
        return np.squeeze(x, axis=None if axes is None else tuple(int(v) for v in axes))
    if op == "Concat":
        return np.concatenate(ins, axis=a["axis"])
    if op == "Cast":
        return x.astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[a["to"]])
    if op == "Identity":
        return x
    if op == "Transpose":
        return np.transpose(x, a.get("perm"))
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal,
              "Less": np.less, "Greater": np.greater, "Mod": np.mod, "Max": np.maximum, "Min": np.minimum}
    if op in binary and len(ins) == 2:
        return binary[op](x, ins[1]).astype(x.dtype if op not in ("Equal", "Less", "Greater") else bool)
    if op == "Div" and x.dtype.kind in "iu":
        return np.trunc(x / ins[1]).astype(x.dtype)
    if op == "Not":
        return np.logical_not(x)
    if op == "Where":
        return np.where(x, ins[1], ins[2])
    if op == "Range":
        return np.arange(x, ins[1], ins[2]).astype(x.dtype)
    if op == "ConstantOfShape":
        v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        return np.full(tuple(int(d) for d in x), v.reshape(-1)[0], dtype=v.dtype)
    if op == "Expand":
        return x * np.ones(tuple(int(d) for d in ins[1]), dtype=x.dtype)
    if op == "Reshape":
        shape = [int(d) if d != 0 else x.shape[i] for i, d in enumerate(ins[1])]
        return x.reshape(shape)
    if op == "Slice" and len(ins) >= 3:
        axes = ins[3] if len(ins) > 3 else range(len(ins[1]))
        steps = ins[4] if len(ins) > 4 else [1] * len(ins[1])
        sl = [slice(None)] * x.ndim
        for s, e, ax, st in zip(ins[1], ins[2], axes, steps):
            sl[int(ax)] = slice(int(s), int(e), int(st))
        return x[tuple(sl)]
    return None


def shapes(model):
    """Static shapes of every value: graph inputs, initializers, inferred intermediates."""
    light = onnx.ModelProto()
    light.CopyFrom(model)
    for t in light.graph.initializer:        # inference needs the weights' dims, not their data:
        if prod(t.dims) > 4096:              # each round would copy them (Swin-T: 30 s, now 3)
            for f in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
                t.ClearField(f)
    m = shape_inference.infer_shapes(fold_shape_ops(light))
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
