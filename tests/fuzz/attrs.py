#!/usr/bin/env python3
"""tests/fuzz/attrs.py [ONNXCC] [OUTDIR] - every attribute of every op of ir/ops.def at its edges.

What tests/fuzz/optypes.py (`make fuzz-types`) does for element types, done for attributes
(`make fuzz-attrs`). For each op a base model: the first ONNX backend test (Debian's
libonnx-testdata) whose graph is that op alone, else one node over float32 inputs of shape
[1, 2, 3, 3]. Each attribute the op's schema names (Debian's python3-onnx; for the ops newer
than it, the table NEWER below, written from the operator docs) is then set, one at a time, to
each boundary value of its type:
  int     0, 1, -1, 2, 63, 64, 2^31, -2^31, INT64_MAX, INT64_MIN
  ints    [], [0], [-1], [INT64_MAX], [INT64_MIN], [0, 0, 0, 0], [-1] * 8, [1] * 100, [2^31, 1]
  float   0, -0, 1, -1, NaN, inf, -inf, 1e-45, 3.4e38
  floats  [], [NaN], [inf, -inf], [0] * 100
  string  "", "?", a 4096-byte string, "\\xff\\xfe"
  strings [], [""]
  tensor  an empty tensor, a float scalar, an int64 tensor of two elements
  graph   a graph with no nodes and no outputs
and, once each, with its type swapped for another (an int given as a string, and so on).
Each model must compile or be refused as a user error (status 0 or 1); any other status
(an internal error, a crash, a time-out), or a sanitizer's report on standard error (with
`make SANITIZE=1 fuzz-attrs`, the ASan+UBSan build, whose UBSan reports do not change the status), is kept in OUTDIR (default build-fuzz/attrs/) to
become a regression input in tests/fuzz/crashes/. Prints one line per failure and
"attrs: N passed, N failed". Runs two compilations at a time; a few minutes in all.
"""
import glob
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import onnx
import onnx.defs
from onnx import AttributeProto as A, TensorProto as T, helper, numpy_helper

ONNXCC = sys.argv[1] if len(sys.argv) > 1 else "./onnxcc"
OUT = sys.argv[2] if len(sys.argv) > 2 else "build-fuzz/attrs"
TESTDATA = os.environ.get("ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")
os.makedirs(OUT, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))

# attributes of the ops Debian's onnx (opset 17) has no schema for, from docs/Operators.md
# of onnx/onnx and the contrib ops' docs
I, IS, F, S = A.INT, A.INTS, A.FLOAT, A.STRING
NEWER = {
    "Gelu": {"approximate": S}, "Swish": {"alpha": F}, "Mish": {},
    "BitwiseAnd": {}, "BitwiseNot": {}, "BitwiseOr": {}, "BitwiseXor": {},
    "Col2Im": {"dilations": IS, "pads": IS, "strides": IS},
    "DeformConv": {"dilations": IS, "group": I, "kernel_shape": IS, "offset_group": I, "pads": IS, "strides": IS},
    "CumProd": {"exclusive": I, "reverse": I},
    "GroupNormalization": {"epsilon": F, "num_groups": I, "stash_type": I},
    "RMSNormalization": {"axis": I, "epsilon": F, "stash_type": I},
    "CenterCropPad": {"axes": IS},
    "TensorScatter": {"axis": I, "mode": S},
    "AffineGrid": {"align_corners": I},
    "Attention": {"is_causal": I, "kv_num_heads": I, "q_num_heads": I, "qk_matmul_output_mode": I,
                  "scale": F, "softcap": F, "softmax_precision": I},
    "RotaryEmbedding": {"interleaved": I, "num_heads": I, "rotary_embedding_dim": I},
    "QLinearGlobalAveragePool": {"channels_last": I},
    "QLinearAdd": {}, "QLinearMul": {}, "QLinearClip": {}, "QLinearLookup": {},
    "Adagrad": {"decay_factor": F, "epsilon": F, "norm_coefficient": F},
    "Adam": {"alpha": F, "beta": F, "epsilon": F, "norm_coefficient": F, "norm_coefficient_post": F},
    "Momentum": {"alpha": F, "beta": F, "mode": S, "norm_coefficient": F},
}
CONTRIB = {"QLinearGlobalAveragePool", "QLinearAdd", "QLinearMul", "QLinearClip", "QLinearLookup"}
TRAINING = {"Adagrad", "Adam", "Momentum"}

BIG, SMALL = (1 << 63) - 1, -(1 << 63)
EDGES = {
    A.INT: [0, 1, -1, 2, 63, 64, 1 << 31, -(1 << 31), BIG, SMALL],
    A.INTS: [[], [0], [-1], [BIG], [SMALL], [0, 0, 0, 0], [-1] * 8, [1] * 100, [1 << 31, 1]],
    A.FLOAT: [0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), float("-inf"), 1e-45, 3.4e38],
    A.FLOATS: [[], [float("nan")], [float("inf"), float("-inf")], [0.0] * 100],
    A.STRING: [b"", b"?", b"x" * 4096, b"\xff\xfe"],
    A.STRINGS: [[], [b""]],
    A.TENSOR: [numpy_helper.from_array(__import__("numpy").zeros((0,), "float32"), "t"),
               helper.make_tensor("t", T.FLOAT, [], [1.5]),
               helper.make_tensor("t", T.INT64, [2], [BIG, SMALL])],
    A.GRAPH: [helper.make_graph([], "empty", [], [])],
}
# a value of another type, for "the attribute has the wrong type"
SWAP = {A.INT: (A.STRING, b"1"), A.INTS: (A.FLOAT, 1.0), A.FLOAT: (A.INTS, [1]), A.FLOATS: (A.INT, 1),
        A.STRING: (A.INT, 0), A.STRINGS: (A.STRING, b"a"), A.TENSOR: (A.FLOATS, [1.0]),
        A.GRAPH: (A.INT, 0), A.SPARSE_TENSOR: (A.INT, 0), A.TENSORS: (A.INT, 0), A.GRAPHS: (A.INT, 0),
        A.TYPE_PROTO: (A.INT, 0), A.TYPE_PROTOS: (A.INT, 0)}


def make_attr(name, kind, value):
    a = A(name=name, type=kind)
    if kind == A.INT:
        a.i = value
    elif kind == A.INTS:
        a.ints.extend(value)
    elif kind == A.FLOAT:
        a.f = value
    elif kind == A.FLOATS:
        a.floats.extend(value)
    elif kind == A.STRING:
        a.s = value
    elif kind == A.STRINGS:
        a.strings.extend(value)
    elif kind == A.TENSOR:
        a.t.CopyFrom(value)
    elif kind == A.GRAPH:
        a.g.CopyFrom(value)
    return a


def ops_def():
    for line in open(os.path.join(here, "../../ir/ops.def")):
        m = re.match(r"OP\((\w+),\s*(\d+),\s*(\d+),\s*(\w+),\s*(\d+),", line)
        if m:
            yield m.group(1), int(m.group(3)), int(m.group(5))


def schema_attrs(op):
    if op in NEWER:
        return NEWER[op]
    if not onnx.defs.has(op):
        return {}
    return {name: int(a.type) for name, a in onnx.defs.get_schema(op).attributes.items()}


def test_bases():
    """op -> the model of the first backend test that is that op alone."""
    bases = {}
    for path in sorted(glob.glob(os.path.join(TESTDATA, "node", "*", "model.onnx"))):
        try:
            m = onnx.load(path)
        except Exception:
            continue
        if len(m.graph.node) == 1:
            bases.setdefault(m.graph.node[0].op_type, m)
    return bases


def synthetic_base(op, nin, nout):
    names = ["i%d" % k for k in range(nin)]
    node = helper.make_node(op, names, ["o%d" % k for k in range(max(nout, 1))])
    opsets = [helper.make_opsetid("", 26 if op in NEWER else 18)]
    if op in CONTRIB:
        node.domain = "com.microsoft"
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    if op in TRAINING:
        node.domain = "ai.onnx.preview.training"
        opsets.append(helper.make_opsetid("ai.onnx.preview.training", 1))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, T.FLOAT, [1, 2, 3, 3]) for n in names],
                          [helper.make_tensor_value_info("o0", T.FLOAT, None)])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 8
    return m


def cases():
    bases = test_bases()
    for op, nin, nout in ops_def():
        base = bases.get(op) or synthetic_base(op, nin, nout)
        for name, kind in sorted(schema_attrs(op).items()):
            values = [(kind, v) for v in EDGES.get(kind, [])] + [SWAP.get(kind, (A.INT, 0))]
            for j, (k, v) in enumerate(values):
                m = onnx.ModelProto()
                m.CopyFrom(base)
                node = m.graph.node[0]
                keep = [a for a in node.attribute if a.name != name]
                del node.attribute[:]
                node.attribute.extend(keep + [make_attr(name, k, v)])
                yield "%s_%s_%d" % (op, name, j), m.SerializeToString()


def run(case):
    tag, data = case
    path = os.path.join(OUT, tag + ".onnx")
    with open(path, "wb") as f:
        f.write(data)
    try:
        r = subprocess.run([ONNXCC, path, "-o", os.path.join(OUT, tag + ".o")], capture_output=True, errors="replace",
                           text=True, timeout=120)
        status, why = r.returncode, (r.stderr.strip().splitlines() or [""])[-1]
        san = [l for l in r.stderr.splitlines() if "runtime error:" in l or "Sanitizer" in l]
        if san:                 # `make SANITIZE=1 fuzz-attrs`: a report fails, whatever the status
            status, why = "sanitizer", san[0]
    except subprocess.TimeoutExpired:
        status, why = "timeout", ""
    for ext in (".o", ".h"):
        if os.path.exists(os.path.join(OUT, tag + ext)):
            os.remove(os.path.join(OUT, tag + ext))
    if status in (0, 1):
        os.remove(path)
        return None
    return "FAIL %s: status %s: %s" % (path, status, why[:200])


def main():
    passed = failed = 0
    with ThreadPoolExecutor(max_workers=int(os.environ.get("FUZZ_JOBS", "2"))) as ex:
        for res in ex.map(run, cases()):
            if res is None:
                passed += 1
            else:
                failed += 1
                print(res, flush=True)
    print("attrs: %d passed, %d failed" % (passed, failed))
    sys.exit(failed != 0)


if __name__ == "__main__":
    main()
