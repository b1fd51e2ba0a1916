#!/usr/bin/python3
"""gen.py OUT_DIR - distribution tests of onnxcc's random ops (passes/ops/random.c) and of
Dropout's training mode, whose
values cannot match the ONNX test data (numpy's generator).

Each case is a model that draws a large sample with one random op and reduces it, in float64,
to a few statistics normalised to be of order 1 (mean, variance, a fraction in a range, class
frequencies). The expected statistics are numpy's: the same statistics of a numpy sample of
10^7 draws from the same distribution (numpy.random.default_rng), so the reference shares no
code with onnxcc. tests/random.sh checks each model with --rtol 0 and the atol written next to
it, several standard errors of a 10^6 sample.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

N = 1_000_000
REF = 10_000_000
ATOL = 0.01


def save(out, name, nodes, inputs, outputs, feeds, expected, inits=()):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for kind, vals in (("input", feeds), ("output", expected)):
        for i, v in enumerate(vals):
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(numpy_helper.from_array(np.array(v, order="C")).SerializeToString())
    with open(os.path.join(d, "atol"), "w") as f:
        f.write("%g\n" % ATOL)


def stats_nodes(x, mean, scale, lo, hi):
    """Nodes: m = mean((x - mean) / scale), v = mean(((x - mean) / scale)^2), and the fraction
    of x in [lo, hi)."""
    c = [numpy_helper.from_array(np.array(v, np.float64), n) for n, v in
         (("mu", mean), ("sc", scale), ("lo", lo), ("hi", hi))]
    nodes = [
        helper.make_node("Sub", [x, "mu"], ["xc"]),
        helper.make_node("Div", ["xc", "sc"], ["z"]),
        helper.make_node("ReduceMean", ["z"], ["m"], keepdims=0),
        helper.make_node("Mul", ["z", "z"], ["z2"]),
        helper.make_node("ReduceMean", ["z2"], ["v"], keepdims=0),
        helper.make_node("GreaterOrEqual", [x, "lo"], ["ge"]),
        helper.make_node("Less", [x, "hi"], ["lt"]),
        helper.make_node("And", ["ge", "lt"], ["in"]),
        helper.make_node("Cast", ["in"], ["inf"], to=TensorProto.DOUBLE),
        helper.make_node("ReduceMean", ["inf"], ["frac"], keepdims=0),
    ]
    outs = [helper.make_tensor_value_info(n, TensorProto.DOUBLE, []) for n in ("m", "v", "frac")]
    return nodes, outs, c


def ref_stats(s, mean, scale, lo, hi):
    z = (s - mean) / scale
    return [np.array(z.mean()), np.array((z * z).mean()), np.array(((s >= lo) & (s < hi)).mean())]


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(12345)
    # RandomUniform [-2, 3), and RandomUniformLike with the same bounds
    ref = rng.uniform(-2, 3, REF)
    for like in (False, True):
        name = "uniform_like" if like else "uniform"
        nodes, outs, c = stats_nodes("x", 0.5, 5, -1, 0.5)
        attrs = dict(low=-2.0, high=3.0, seed=7.0, dtype=TensorProto.DOUBLE)
        if like:
            gen = helper.make_node("RandomUniformLike", ["t"], ["x"], **attrs)
            ins, feeds = [helper.make_tensor_value_info("t", TensorProto.DOUBLE, [N])], [np.zeros(N)]
        else:
            gen = helper.make_node("RandomUniform", [], ["x"], shape=[N], **attrs)
            ins, feeds = [], []
        save(out, name, [gen] + nodes, ins, outs, feeds, ref_stats(ref, 0.5, 5, -1, 0.5), c)
    # RandomNormal mean 1 scale 2: the fraction within one sigma is 0.6827
    ref = rng.normal(1, 2, REF)
    for like in (False, True):
        name = "normal_like" if like else "normal"
        nodes, outs, c = stats_nodes("x", 1, 2, -1, 3)
        attrs = dict(mean=1.0, scale=2.0, seed=3.0, dtype=TensorProto.DOUBLE)
        if like:
            gen = helper.make_node("RandomNormalLike", ["t"], ["x"], **attrs)
            ins, feeds = [helper.make_tensor_value_info("t", TensorProto.FLOAT, [N])], [np.zeros(N, np.float32)]
        else:
            gen = helper.make_node("RandomNormal", [], ["x"], shape=[N], **attrs)
            ins, feeds = [], []
        save(out, name, [gen] + nodes, ins, outs, feeds, ref_stats(ref, 1, 2, -1, 3), c)
    # Bernoulli with p = 0.3 (first half) and 0.8 (second half): the mean of each half
    p = np.concatenate([np.full(N // 2, 0.3), np.full(N // 2, 0.8)]).reshape(2, N // 2)
    nodes = [helper.make_node("Bernoulli", ["p"], ["b"], seed=11.0),
             helper.make_node("ReduceMean", ["b"], ["m"], axes=[1], keepdims=0)]
    refb = (rng.uniform(size=(2, REF)) < np.array([[0.3], [0.8]])).mean(axis=1)
    save(out, "bernoulli", nodes, [helper.make_tensor_value_info("p", TensorProto.DOUBLE, [2, N // 2])],
         [helper.make_tensor_value_info("m", TensorProto.DOUBLE, [2])], [p], [refb])
    # Multinomial over 4 classes of probabilities 0.1 .. 0.4 (given as log-probabilities + 5):
    # the frequency of each class
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    logits = (np.log(probs) + 5).reshape(1, 4).astype(np.float32)
    cls = numpy_helper.from_array(np.arange(4, dtype=np.int64).reshape(4, 1), "cls")
    nodes = [helper.make_node("Multinomial", ["l"], ["s"], sample_size=N, seed=5.0, dtype=TensorProto.INT64),
             helper.make_node("Equal", ["s", "cls"], ["eq"]),
             helper.make_node("Cast", ["eq"], ["eqf"], to=TensorProto.DOUBLE),
             helper.make_node("ReduceMean", ["eqf"], ["f"], axes=[1], keepdims=0)]
    refm = np.bincount(rng.choice(4, size=REF, p=probs), minlength=4) / REF
    save(out, "multinomial", nodes, [helper.make_tensor_value_info("l", TensorProto.FLOAT, [1, 4])],
         [helper.make_tensor_value_info("f", TensorProto.DOUBLE, [4])], [logits], [refm], [cls])
    # Dropout in training mode, ratio 0.25 on ones: the mean of the output (1: kept ones are
    # scaled by 1 / 0.75) and the fraction kept (0.75)
    nodes = [helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=9),
             helper.make_node("ReduceMean", ["y"], ["ym"], keepdims=0),
             helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.DOUBLE),
             helper.make_node("ReduceMean", ["mf"], ["kept"], keepdims=0)]
    keep = rng.uniform(size=REF) >= 0.25
    save(out, "dropout", nodes,
         [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [N]),
          helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
          helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
         [helper.make_tensor_value_info("ym", TensorProto.DOUBLE, []),
          helper.make_tensor_value_info("kept", TensorProto.DOUBLE, [])],
         [np.ones(N), np.array(0.25, np.float32), np.array(True)],
         [np.array((keep / 0.75).mean()), np.array(keep.mean())])


if __name__ == "__main__":
    main()
