#!/usr/bin/python3
"""gen_seq_models.py - writes the sample model with sequences and optionals.

It goes to models/NAME/model.onnx with test_data_set_N/{input,output}_K.pb (the layout of the
ONNX backend test data; a sequence is a SequenceProto file), so that `onnxcc check` runs it and
tests/models.sh checks it. The expected outputs come from the plain numpy function below,
written from the ONNX operator definitions, not from any runtime.

  seq_ops   a sequence input `s` of two [2,4] tensors and a tensor x[6,4]: SplitToSequence of x
            in chunks of 2 rows, SequenceInsert of Relu(s[1]) at position 1, SequenceErase of
            the last element, SequenceLength, ConcatFromSequence with new_axis (a stack on
            axis 1), an Optional of s[0] read back with OptionalHasElement/OptionalGetElement,
            and a sequence output built by SequenceConstruct; two data sets
  seq_map   SequenceMap over a sequence `s` of three [N,3] tensors with different N and a
            tensor w[3] given whole to each element; its body holds a Loop (constant trip
            count) and gives two outputs, one stacked by ConcatFromSequence; then a Loop over
            the result's SequenceLength that builds a reversed sequence with SequenceInsert at
            position 0 and has a scan output (the pattern of SequenceMap's function body); two
            data sets (elements of 2, 4 and 1 rows)

Run: /usr/bin/python3 models/gen_seq_models.py   (needs python3-onnx, python3-numpy)
Written with onnx 1.12.0 and numpy 1.24; SEED fixes the data.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20250311
HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v"))


def reference(x, s):
    parts = [x[i:i + 2] for i in range(0, 6, 2)]                 # SplitToSequence, split=2
    parts.insert(1, np.maximum(s[1], 0))                          # SequenceInsert at 1
    parts.pop()                                                   # SequenceErase, position -1
    n = np.array(len(parts), np.int64)                            # SequenceLength
    stack = np.stack(parts, axis=1)                               # ConcatFromSequence new_axis=1
    has = np.array(True)                                          # OptionalHasElement
    out_seq = [-parts[0], s[0] * 2]                               # SequenceConstruct
    return stack, n, has, out_seq


def seq_ops():
    nodes = [
        const("two", np.array(2, np.int64)),
        const("one", np.array(1, np.int64)),
        const("last", np.array(-1, np.int64)),
        const("zero", np.array(0, np.int64)),
        helper.make_node("SplitToSequence", ["x", "two"], ["parts"], axis=0),
        helper.make_node("SequenceAt", ["s", "one"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["r1"]),
        helper.make_node("SequenceInsert", ["parts", "r1", "one"], ["p2"]),
        helper.make_node("SequenceErase", ["p2", "last"], ["p3"]),
        helper.make_node("SequenceLength", ["p3"], ["n"]),
        helper.make_node("ConcatFromSequence", ["p3"], ["stack"], axis=1, new_axis=1),
        helper.make_node("SequenceAt", ["s", "zero"], ["s0"]),
        helper.make_node("Optional", ["s0"], ["opt"]),
        helper.make_node("OptionalHasElement", ["opt"], ["has"]),
        helper.make_node("OptionalGetElement", ["opt"], ["got"]),
        helper.make_node("Add", ["got", "got"], ["twice"]),
        helper.make_node("SequenceAt", ["p3", "zero"], ["first"]),
        helper.make_node("Neg", ["first"], ["neg"]),
        helper.make_node("SequenceConstruct", ["neg", "twice"], ["out_seq"]),
    ]
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2, 4]))
    g = helper.make_graph(
        nodes, "seq_ops",
        [helper.make_tensor_value_info("x", F, [6, 4]), helper.make_value_info("s", seq_t)],
        [helper.make_tensor_value_info("stack", F, [2, 3, 4]),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("has", TensorProto.BOOL, []),
         helper.make_value_info("out_seq", helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2, 4])))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)], producer_name="gen_seq_models.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def seq_map_reference(s, w):
    ys, ms = [], []
    for x in s:
        acc = x
        for _ in range(2):                                        # the body's Loop
            acc = acc * np.float32(0.5) + x
        y = np.tanh(x) * w + acc
        ys.append(y)
        ms.append(y.max(axis=0))                                  # ReduceMax axes=[0]
    stack = np.stack(ms, axis=0)                                  # ConcatFromSequence new_axis
    rev = [-y for y in reversed(ys)]                              # SequenceInsert at 0
    mins = np.array([y.min() for y in ys], np.float32)            # the scan output
    return ys, stack, rev, mins


def seq_map():
    inner = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         const("half", np.array(0.5, np.float32)),
         helper.make_node("Mul", ["acc_in", "half"], ["scaled"]),
         helper.make_node("Add", ["scaled", "x"], ["acc_out"])],
        "inner",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", F, ["N", 3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", F, ["N", 3])])
    body = helper.make_graph(
        [const("trip", np.array(2, np.int64)),
         const("yes", np.array(True)),
         helper.make_node("Loop", ["trip", "yes", "x"], ["acc"], body=inner),
         helper.make_node("Tanh", ["x"], ["t"]),
         helper.make_node("Mul", ["t", "wv"], ["tw"]),
         helper.make_node("Add", ["tw", "acc"], ["y"]),
         helper.make_node("ReduceMax", ["y"], ["m"], axes=[0], keepdims=0)],
        "map_body",
        [helper.make_tensor_value_info("x", F, ["N", 3]), helper.make_tensor_value_info("wv", F, [3])],
        [helper.make_tensor_value_info("y", F, ["N", 3]), helper.make_tensor_value_info("m", F, [3])])
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, ["N", 3]))
    rev_body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("SequenceAt", ["ys", "k"], ["e"]),
         helper.make_node("Neg", ["e"], ["ne"]),
         const("front", np.array(0, np.int64)),
         helper.make_node("SequenceInsert", ["r_in", "ne", "front"], ["r_out"]),
         helper.make_node("ReduceMin", ["e"], ["lo"], keepdims=0)],
        "rev_body",
        [helper.make_tensor_value_info("k", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_value_info("r_in", seq_t)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_value_info("r_out", seq_t),
         helper.make_tensor_value_info("lo", F, [])])
    nodes = [
        helper.make_node("SequenceMap", ["s", "w"], ["ys", "ms"], body=body),
        helper.make_node("ConcatFromSequence", ["ms"], ["stack"], axis=0, new_axis=1),
        helper.make_node("SequenceLength", ["ys"], ["len"]),
        const("go", np.array(True)),
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
        helper.make_node("Loop", ["len", "go", "empty"], ["rev", "mins"], body=rev_body),
    ]
    g = helper.make_graph(
        nodes, "seq_map",
        [helper.make_value_info("s", seq_t), helper.make_tensor_value_info("w", F, [3])],
        [helper.make_value_info("ys", seq_t),
         helper.make_tensor_value_info("stack", F, [3, 3]),
         helper.make_value_info("rev", seq_t),
         helper.make_tensor_value_info("mins", F, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_seq_models.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def write(name, model, sets):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (ins, outs) in enumerate(sets):
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for kind, vals in (("input", ins), ("output", outs)):
            for i, v in enumerate(vals):
                if isinstance(v, list):
                    p = numpy_helper.from_list([np.asarray(e) for e in v])
                else:
                    p = numpy_helper.from_array(np.asarray(v))
                with open(os.path.join(sd, "%s_%d.pb" % (kind, i)), "wb") as f:
                    f.write(p.SerializeToString())


def main():
    rng = np.random.default_rng(SEED)
    sets = []
    for _ in range(2):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        s = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(2)]
        sets.append(([x, s], list(reference(x, s))))
    write("seq_ops", seq_ops(), sets)
    sets = []
    for rows in ((2, 4, 1), (2, 4, 1)):     # check compiles once, for the first set's shapes
        s = [rng.standard_normal((r, 3)).astype(np.float32) for r in rows]
        w = rng.standard_normal(3).astype(np.float32)
        sets.append(([s, w], list(seq_map_reference(s, w))))
    write("seq_map", seq_map(), sets)


if __name__ == "__main__":
    main()
