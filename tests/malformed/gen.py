#!/usr/bin/python3
"""gen.py OUTDIR - the malformed-input catalogue that tests/malformed.sh feeds to onnxcc: crafted
models (sizes that overflow, nesting that would exhaust the stack, missing or mistyped operands,
impossible opsets, gzip bombs, external data that escapes its folder), truncations and byte
flips of the sample models, bad attributes for each op family and misuses of the command line.

Writes the files into OUTDIR and a table OUTDIR/cases.txt, one case a line:
    NAME<TAB>STATUS<TAB>PATTERN<TAB>ARGS
STATUS is the exit status onnxcc must give (1: user error, 2: bad command line, 0: must work,
as external data that stays in its folder; "flip": 0 or 1, for byte flips whose damage a
model may survive). PATTERN is a fixed string the error line
must hold ("-": any). ARGS are onnxcc's arguments, split on spaces; @D@ stands for the case's
own (empty) output folder and @M@ for OUTDIR. Every case must end with exactly one
"onnxcc: error:" line and leave @D@ empty."""
import gzip
import os
import random
import struct
import sys
import zlib

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
CASES = []
BIG = 1 << 40


def case(name, status, pattern, args):
    CASES.append((name, str(status), pattern, args))


def f32(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=13, **kw):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    ops = [] if opset is None else [helper.make_opsetid("", opset)]
    return helper.make_model(g, opset_imports=ops, **kw)


def save(name, m):
    path = os.path.join(OUT, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m if isinstance(m, bytes) else m.SerializeToString())
    return path


def compile_case(name, m, pattern, status=1, extra=""):
    save(name, m)
    case(name, status, pattern, f"@M@/{name}.onnx -o @D@/x.o{extra}")


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def unary(op, shape, **attrs):
    return model([helper.make_node(op, ["x"], ["y"], **attrs)], [f32("x", shape)], [f32("y", None)])


def big_tensor(name, dims):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT)
    t.dims.extend(dims)
    return t


# ---- 1. sizes that overflow ----
def sizes():
    compile_case("relu_huge", unary("Relu", [BIG, BIG]), "too large")
    compile_case("relu_2e62", unary("Relu", [1 << 31, 1 << 31]), "too large")
    w = const("W", np.ones((1, 1, 1, 1), np.float32))
    compile_case("conv_pads_huge", model(
        [helper.make_node("Conv", ["x", "W"], ["y"], pads=[BIG, BIG, BIG, BIG])],
        [f32("x", [1, 1, 4, 4])], [f32("y", None)], [w]), "too large")
    compile_case("reshape_overflow", model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], [f32("x", [4])], [f32("y", None)],
        [const("s", np.array([BIG, BIG, -1], np.int64))]), "-")
    compile_case("expand_huge", model(
        [helper.make_node("Expand", ["x", "s"], ["y"])], [f32("x", [1])], [f32("y", None)],
        [const("s", np.array([BIG, BIG], np.int64))]), "too large")
    compile_case("constantofshape_huge", model(
        [helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [f32("y", None)],
        [const("s", np.array([BIG, BIG], np.int64))]), "too large")
    compile_case("tile_huge", model(
        [helper.make_node("Tile", ["x", "r"], ["y"])], [f32("x", [2, 2])], [f32("y", None)],
        [const("r", np.array([BIG, BIG], np.int64))]), "too large")
    compile_case("pad_huge", model(
        [helper.make_node("Pad", ["x", "p"], ["y"])], [f32("x", [2, 2])], [f32("y", None)],
        [const("p", np.array([BIG, BIG, BIG, BIG], np.int64))]), "too large")
    compile_case("initializer_dims_huge", model(
        [helper.make_node("Relu", ["w"], ["y"])], [], [f32("y", None)],
        [big_tensor("w", [BIG, BIG])]), "too large")
    compile_case("input_negative_dim", unary("Relu", [-5, 2]), "-")
    # the target's size_t: 3 GiB of floats do not fit a 32-bit address space
    compile_case("too_large_for_32bit", unary("Relu", [3, 1 << 28]), "too large",
                 extra=" --target thumbv7em-none-eabihf")


# ---- 2. nesting ----
def varint(n):
    b = bytearray()
    while True:
        c = n & 0x7f
        n >>= 7
        if n:
            b.append(c | 0x80)
        else:
            b.append(c)
            return bytes(b)


def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def nested_if(depth):
    """If nodes nested through then_branch `depth` deep, encoded by hand (the protobuf
    libraries refuse to build or parse such nesting themselves)."""
    vi = lambda n: field(1, n) + field(2, field(1, field(1, 1)))   # name, tensor float
    graph = field(1, field(1, "x") + field(2, "y") + field(4, "Identity")) + field(2, "g") \
        + field(12, vi("y"))
    for _ in range(depth):
        attr = field(1, "then_branch") + field(6, graph) + field(20, 5)
        node = field(1, "c") + field(2, "y") + field(4, "If") + field(5, attr)
        graph = field(1, node) + field(2, "g") + field(12, vi("y"))
    top = graph + field(11, vi("c"))
    return field(1, 7) + field(8, field(2, 13)) + field(7, top)


def nesting():
    save("nested_if_3000", nested_if(3000))
    case("nested_if_3000", 1, "nest", "@M@/nested_if_3000.onnx -o @D@/x.o")
    save("nested_if_65", nested_if(65))
    case("nested_if_65", 1, "nest", "@M@/nested_if_65.onnx -o @D@/x.o")


# ---- 3. missing or mistyped operands ----
def operands():
    w = const("W", np.ones((1, 1, 1, 1), np.float32))
    compile_case("conv_empty_x", model([helper.make_node("Conv", ["", "W"], ["y"])], [],
                                       [f32("y", None)], [w]), "input 0")
    compile_case("matmul_empty_a", model([helper.make_node("MatMul", ["", "x"], ["y"])],
                                         [f32("x", [2, 2])], [f32("y", None)]), "input 0")
    # a required output without a name (the fuzzer's Dropout: a null value, once a crash)
    compile_case("dropout_empty_output", model([helper.make_node("Dropout", ["x"], ["", "m"])],
                                               [f32("x", [2, 2])], [f32("m", None)]), "output 0")
    # a Loop body that makes a sequence of a loop-carried tensor, or of a scan output (the
    # fuzzer's; once an internal error at lowering)
    i64 = TensorProto.INT64
    for name, carried, pattern in (("loop_carried_to_sequence", True, "leaves it as a sequence"),
                                   ("loop_scan_output_sequence", False, "is a sequence in the body")):
        body = helper.make_graph(
            [helper.make_node("Identity", ["cond"], ["cond_out"]),
             helper.make_node("SequenceConstruct", ["c_in" if carried else "i"], ["s"])],
            "body", [f32("i", [], i64), f32("cond", [], TensorProto.BOOL)] + ([f32("c_in", [], i64)] if carried else []),
            [f32("cond_out", [], TensorProto.BOOL), f32("s", [], i64)])
        loop = helper.make_node("Loop", ["n", "", "c0"] if carried else ["n", ""], ["y"], body=body)
        compile_case(name, model([loop], [], [f32("y", None, i64)], [const("n", np.int64(3)), const("c0", np.int64(0))]),
                     pattern)
    compile_case("gemm_empty_b", model([helper.make_node("Gemm", ["x", ""], ["y"])],
                                       [f32("x", [2, 2])], [f32("y", None)]), "inputs")
    compile_case("input_elem_type_0", model([helper.make_node("Relu", ["x"], ["y"])],
                                            [f32("x", [2], 0)], [f32("y", None)]), "element type")
    compile_case("input_elem_type_0_add", model([helper.make_node("Add", ["x", "z"], ["y"])],
                                                [f32("x", [2], 0), f32("z", [2])],
                                                [f32("y", None)]), "element type")
    x = f32("x", [1, 1, 2, 2])
    for dt, npt in (("float16", np.float16), ("bool", np.bool_), ("int16", np.int16)):
        b = const("B", np.ones((1,), npt))
        compile_case(f"conv_bias_{dt}", model([helper.make_node("Conv", ["x", "W", "B"], ["y"])],
                                             [x], [f32("y", None)], [w, b]), dt)
        p = [const(n, np.ones((1,), np.float32)) for n in "sbmv"]
        p[1] = const("b", np.ones((1,), npt))
        # opset 15 allows float16 parameters for float32 data
        compile_case(f"batchnorm_{dt}", model(
            [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
            [x], [f32("y", None)], p), dt, status="flip" if dt == "float16" else 1)
    # BatchNormalization's type variables per opset: before 14 one type for all five inputs,
    # from 14 mean and var share one (U), from 15 scale and bias (T1) and mean and var (T2)
    for opset, odd, pattern in ((13, "m", "input 0 'x' is float32 and input 3 'm' float16: opset 13"),
                                (14, "s", "input 0 'x' is float32 and input 1 's' float16: opset 14"),
                                (15, "v", "input 3 'm' is float32 and input 4 'v' float16: opset 15")):
        p = [const(n, np.ones((1,), np.float16 if n == odd else np.float32)) for n in "sbmv"]
        compile_case(f"batchnorm_types_opset{opset}", model(
            [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
            [x], [f32("y", None)], p, opset=opset), pattern)
    compile_case("conv_weight_int64", model(
        [helper.make_node("Conv", ["x", "W"], ["y"])], [x], [f32("y", None)],
        [const("W", np.ones((1, 1, 1, 1), np.int64))]), "int64")
    compile_case("matmul_mixed_types", model(
        [helper.make_node("MatMul", ["x", "z"], ["y"])],
        [f32("x", [2, 2]), f32("z", [2, 2], TensorProto.INT32)], [f32("y", None)]), "-")
    compile_case("add_mixed_types", model(
        [helper.make_node("Add", ["x", "z"], ["y"])],
        [f32("x", [2]), f32("z", [2], TensorProto.DOUBLE)], [f32("y", None)]), "-")
    compile_case("relu_string", model([helper.make_node("Relu", ["x"], ["y"])],
                                      [f32("x", [2], TensorProto.STRING)], [f32("y", None)]),
                 "string")
    # element types outside each elementwise op's type constraint (the fuzzer's Sigmoid on
    # bool reached the backend)
    B, I, F = TensorProto.BOOL, TensorProto.INT32, TensorProto.FLOAT
    for op, t, n in (("Sigmoid", B, 1), ("Exp", I, 1), ("Relu", B, 1), ("Xor", F, 2),
                     ("And", I, 2), ("Add", B, 2), ("Greater", B, 2), ("Max", B, 2)):
        ins = [f32(v, [2], t) for v in "ab"[:n]]
        compile_case(f"{op.lower()}_{'bool' if t == B else 'int32' if t == I else 'float'}",
                     model([helper.make_node(op, "ab"[:n], ["y"])], ins, [f32("y", None)]),
                     "bool" if t == B else "int32" if t == I else "float32")
    # a subgraph may use outer values defined before its node only (the fuzzer's Scan body
    # returned the Scan's own output, a value with no definition)
    def if_model(then_out, else_out, then_nodes=()):
        c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
        br = [helper.make_graph(list(ns), b, [], [f32(o, [2])])
              for b, o, ns in (("then", then_out, then_nodes), ("else", else_out, ()))]
        return model([helper.make_node("If", ["c"], ["y"], then_branch=br[0], else_branch=br[1]),
                      helper.make_node("Relu", ["x"], ["r"])],
                     [c, f32("x", [2])], [f32("y", [2]), f32("r", [2])])
    compile_case("if_branch_returns_own_output", if_model("y", "x"), "body output 'y' is not defined")
    compile_case("if_branch_uses_later_value",
                 if_model("t", "x", [helper.make_node("Neg", ["r"], ["t"])]),
                 "uses value 'r', which is not defined before it")

    # single static assignment, as ONNX's checker requires it: every name defined once, a graph
    # output listed once
    r = helper.make_node("Relu", ["x"], ["y"])
    compile_case("ssa_output_listed_twice", model([r], [f32("x", [2])], [f32("y", [2]), f32("y", [2])]),
                 "graph output 'y' is listed twice")
    compile_case("ssa_node_outputs_same_name", model(
        [helper.make_node("Split", ["x"], ["a", "a"], axis=0)], [f32("x", [2])], [f32("a", [1])]),
        "value 'a' is already defined by node")
    compile_case("ssa_two_nodes_one_output", model(
        [r, helper.make_node("Neg", ["x"], ["y"])], [f32("x", [2])], [f32("y", [2])]),
        "value 'y' is already defined by node")
    compile_case("ssa_node_redefines_input", model(
        [helper.make_node("Relu", ["x"], ["x"])], [f32("x", [2])], [f32("x", [2])]),
        "value 'x' is already defined as a graph input")
    compile_case("ssa_node_redefines_initializer", model(
        [helper.make_node("Relu", ["x"], ["W"])], [f32("x", [1, 1, 1, 1])], [f32("W", None)], [w]),
        "value 'W' is already defined as an initializer")
    compile_case("ssa_initializer_twice", model(
        [helper.make_node("Conv", ["x", "W"], ["y"])], [f32("x", [1, 1, 1, 1])], [f32("y", None)], [w, w]),
        "initializer 'W' is defined twice")
    compile_case("ssa_input_twice", model([r], [f32("x", [2]), f32("x", [2])], [f32("y", [2])]),
                 "graph input 'x' is listed twice")
    # the fuzzer's findings of this round, each with its message
    compile_case("output_is_initializer_other_type", model(
        [r], [f32("x", [2])], [f32("y", [2]), f32("W", [1, 1, 1, 1], TensorProto.UINT16)], [w]),
        "graph output 'W' is declared uint16, but is the initializer of type float32")
    compile_case("dropout_training_2e33", model(
        [helper.make_node("Dropout", ["x", "", "t"], ["y"])], [f32("x", [1 << 33])], [f32("y", None)],
        [const("t", np.array(True))]), "takes at most 2^32 elements")
    compile_case("lstm_hidden_size_not_r", model(
        [helper.make_node("LSTM", ["x", "Wl", "Rl"], ["y"], hidden_size=(1 << 63) - 1)],
        [f32("x", [1, 1, 3])], [f32("y", None)],
        [const("Wl", np.zeros((1, 16, 3), np.float32)), const("Rl", np.zeros((1, 16, 4), np.float32))]),
        "hidden_size 9223372036854775807 must be R's last dim, 4")
    compile_case("convtranspose_stride_overflow", model(
        [helper.make_node("ConvTranspose", ["x", "W"], ["y"], strides=[(1 << 63) - 1, 1])],
        [f32("x", [1, 1, 3, 3])], [f32("y", None)], [w]), "overflows 64 bits")
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    shadow = helper.make_graph([helper.make_node("Relu", ["x"], ["x"])], "b", [], [f32("x", [2])])
    compile_case("ssa_body_redefines_outer_input", model(
        [helper.make_node("If", ["c"], ["y"], then_branch=shadow,
                          else_branch=helper.make_graph([], "e", [], [f32("x", [2])]))],
        [c, f32("x", [2])], [f32("y", [2])]), "value 'x' is already defined as a graph input")
    # a body node defining the name its If reads as condition (fuzz finding 9): one error,
    # not one more for each later reader
    own = helper.make_graph([helper.make_node("Neg", ["x"], ["c"])], "e", [], [f32("c", [2])])
    compile_case("ssa_body_defines_outer_read", model(
        [helper.make_node("If", ["c"], ["y"], then_branch=own, else_branch=own)],
        [f32("x", [2])], [f32("y", [2])]),
        "value 'c' is read by an enclosing graph, which cannot see a body's values")
    body = helper.make_graph([helper.make_node("Add", ["s", "n"], ["t"]), helper.make_node("Identity", ["t"], ["o"])],
                             "b", [f32("s", [2]), f32("n", [2])], [f32("t", [2]), f32("o", [2])])
    # the 30-minute fuzz run's findings of this stop: each a user error with its message
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    compile_case("splittosequence_2e17_pieces", model(
        [helper.make_node("SplitToSequence", ["x"], ["s"], keepdims=0)], [f32("x", [1 << 17])], [seq], opset=11),
        "splits into 131072 pieces; onnxcc supports at most 1000")
    compile_case("roialign_sampling_ratio_2000", model(
        [helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], sampling_ratio=2000)],
        [f32("x", [1, 1, 4, 4]), f32("r", [1, 4]), f32("b", [1], TensorProto.INT64)], [f32("y", None)], opset=16),
        "sampling_ratio 2000 is over 1024")
    compile_case("maxunpool_kernel_overflow", model(
        [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[(1 << 63) - 1, 2], strides=[2, 2])],
        [f32("x", [1, 1, 2, 2]), f32("i", [1, 1, 2, 2], TensorProto.INT64)], [f32("y", None)], opset=11),
        "the output size that kernel_shape, strides and pads imply overflows 64 bits")
    compile_case("depthtospace_blocksize_2e20", model(
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=1 << 20)], [f32("x", [1, 4, 2, 2])], [f32("y", None)],
        opset=13), "blocksize 1048576 is over 65536")
    compile_case("abs_with_a_graph_attribute", model(
        [helper.make_node("Abs", ["x"], ["y"], then_branch=helper.make_graph(
            [helper.make_node("Constant", [], ["c"], value_float=1.0)], "t", [], [f32("c", [])]))],
        [f32("x", [2])], [f32("y", [2])], opset=13), "attribute 'then_branch' is a graph, and Abs takes none")
    # an If whose then branch is misnamed, its condition a constant taking else_branch: the
    # misnamed graph was never inferred and the verifier aborted (structure-aware fuzzing)
    compile_case("if_misnamed_branch", model(
        [helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.BOOL, [], [False])),
         helper.make_node("If", ["c"], ["y"], else_branch=helper.make_graph(
             [helper.make_node("Neg", ["x"], ["e"])], "e", [], [f32("e", [2])]), thenbranch=helper.make_graph(
             [helper.make_node("Abs", ["x"], ["t"])], "t", [], [f32("t", [2])]))],
        [f32("x", [2])], [f32("y", [2])], opset=13), "attribute 'thenbranch' is a graph that If does not take")
    # an opset-10 Pad (pads an attribute) given four inputs, as Pad-18 reads: the canonical form
    # dropped a present input (internal error; structure-aware fuzzing)
    compile_case("pad10_four_inputs", model(
        [helper.make_node("Pad", ["x", "p", "v", "a"], ["y"])],
        [f32("x", [2]), f32("p", [2], TensorProto.INT64), f32("v", []), f32("a", [1], TensorProto.INT64)],
        [f32("y", [2])], opset=10), "Pad-10 does not read input 3, which is given")
    compile_case("pad10_pads_twice", model(
        [helper.make_node("Pad", ["x", "p"], ["y"], pads=[0, 0])],
        [f32("x", [2]), f32("p", [2], TensorProto.INT64)], [f32("y", [2])], opset=10),
        "Pad-10 takes pads as an attribute, and input 1 is given too")
    compile_case("deformconv_group_int64_max", model(
        [helper.make_node("DeformConv", ["x", "w", "o"], ["y"], group=(1 << 63) - 1)],
        [f32("x", [1, 2, 3, 3]), f32("w", [1, 2, 3, 3]), f32("o", [1, 18, 1, 1])], [f32("y", None)], opset=22),
        "group 9223372036854775807 and offset_group 1 must divide the 2 channels")
    compile_case("tfidf_max_skip_count_2e40", model(
        [helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1,
                          max_skip_count=1 << 40, ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])],
        [f32("x", [4], TensorProto.INT64)], [f32("y", None)], opset=9),
        "max_skip_count 1099511627776 (0 to 2^31 - 1)")
    # a Scan body whose scan output is a sequence (a later stop's fuzz run: lowering found the
    # SplitToSequence still live and aborted)
    seqbody = helper.make_graph(
        [helper.make_node("Add", ["s", "n"], ["t"]), helper.make_node("SplitToSequence", ["t"], ["o"])],
        "b", [f32("s", [2]), f32("n", [2])],
        [f32("t", [2]), helper.make_tensor_sequence_value_info("o", TensorProto.FLOAT, None)])
    compile_case("scan_output_sequence", model(
        [helper.make_node("Scan", ["i", "x"], ["y", "z"], body=seqbody, num_scan_inputs=1)],
        [f32("i", [2]), f32("x", [3, 2])], [f32("y", None), f32("z", None)], opset=11),
        "scan output 0 ('o') is a sequence, not a tensor")
    compile_case("scan_num_scan_inputs_int_min", model(
        [helper.make_node("Scan", ["i", "x"], ["y", "z"], body=body, num_scan_inputs=-(1 << 31))],
        [f32("i", [2]), f32("x", [3, 2])], [f32("y", None), f32("z", None)], opset=11),
        "num_scan_inputs -2147483648 must be")


# ---- 4. opsets ----
def opsets():
    compile_case("no_opset_import", model([helper.make_node("Relu", ["x"], ["y"])],
                                          [f32("x", [2])], [f32("y", None)], opset=None),
                 "opset")
    compile_case("opset_10000", model([helper.make_node("Relu", ["x"], ["y"])],
                                      [f32("x", [2])], [f32("y", None)], opset=10000),
                 "10000")
    compile_case("opset_0", model([helper.make_node("Relu", ["x"], ["y"])],
                                  [f32("x", [2])], [f32("y", None)], opset=0), "opset")
    m = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", [2])], [f32("y", None)])
    m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 99999))
    compile_case("training_opset_99999", m, "99999")
    compile_case("opset_27", model([helper.make_node("Relu", ["x"], ["y"])],
                                   [f32("x", [2])], [f32("y", None)], opset=27), "1 to 26")
    # the types of opsets 19 to 25 (TensorProto numbers: onnx 1.12 predates their names) where
    # onnxcc refuses them: a complex64 graph input, a Cast to float8e8m0 with a round_mode
    # that is none of the three, a QuantizeLinear to float8e8m0 (not a quantized type); a
    # graph output declared int4 that a float fills, a sequence of int4 (4-bit tensors are
    # supported, not in sequences); and an int4 initializer whose packed bytes are too few
    compile_case("complex64_input_24", model([helper.make_node("Identity", ["x"], ["y"])],
                                             [f32("x", [2], 14)], [f32("y", None, 0)], opset=24),
                 "input 'x' has unsupported element type complex64")
    compile_case("quantize_to_float8e8m0_24", model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=24)],
                                                    [f32("x", [2])], [f32("y", None, 0)],
                                                    [const("s", np.float32(0.5))], opset=24),
                 "quantizing to float8e8m0 is not supported")
    # a float8e8m0 scale (opset 25) gives no output type of its own: output_dtype is needed
    e8 = TensorProto(name="s", data_type=24, dims=[], raw_data=b"\x7f")
    compile_case("dequantize_e8m0_scale_no_dtype_25", model([helper.make_node("DequantizeLinear", ["x", "s"], ["y"])],
                                                            [f32("x", [2], TensorProto.INT8)], [f32("y", None, 0)],
                                                            [e8], opset=25),
                 "output_dtype float8e8m0 is not float, float16 or bfloat16")
    compile_case("int4_output_float_21", model([helper.make_node("Identity", ["x"], ["y"])],
                                               [f32("x", [3])], [f32("y", None, 22)], opset=21),
                 "output 'y' is declared int4, uint4 or float4e2m1 but is float32")
    # the same declared of a Constant node's output, which no node's inference sees (the
    # fuzzer's float16 Constant as a uint4 output: the backend built an invalid module)
    c16 = helper.make_tensor("v", TensorProto.FLOAT16, [2], [1.0, 2.0])
    compile_case("uint4_output_constant_float16", model([helper.make_node("Constant", [], ["y"], value=c16)],
                                                        [], [f32("y", [2], 21)], opset=21),
                 "output 'y' is declared int4, uint4 or float4e2m1 but is float16")
    seq = helper.make_tensor_sequence_value_info("s", 22, [2])
    compile_case("int4_sequence_input_21", model([helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                                                 [seq, f32("i", [], TensorProto.INT64)], [f32("y", None, 0)], opset=21),
                 "input 's' is a sequence or optional of int4")
    w = TensorProto(name="w", data_type=22, dims=[5], raw_data=b"\x12\x34")
    compile_case("int4_weight_short_21", model(
        [helper.make_node("DequantizeLinear", ["w", "s"], ["y"])], [], [f32("y", None)],
        [w, const("s", np.float32(0.5))], opset=21), "initializer 'w': raw_data holds 2 bytes, its 5 4-bit values need 3")
    compile_case("cast_to_float8e8m0_round_24", model([helper.make_node("Cast", ["x"], ["y"], to=24, round_mode="sideways")],
                                                      [f32("x", [2])], [f32("y", None, 0)], opset=24),
                 r"node 'Cast_0' (Cast, opset 24): round_mode 'sideways' is not up, down or nearest")
    compile_case("bitcast_sizes_26", model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT16)],
                                           [f32("x", [2])], [f32("y", None, 0)], opset=26),
                 r"node 'BitCast_0' (BitCast, opset 26): bitcast of float32 to int16: the sizes differ")
    compile_case("bitcast_bool_26", model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.BOOL)],
                                          [f32("x", [2], TensorProto.UINT8)], [f32("y", None, 0)], opset=26),
                 "bitcast of uint8 to bool: bool is not supported")
    # modes and attributes of opsets 18 to 21 refused by name
    compile_case("gridsample_4d_20", model([helper.make_node("GridSample", ["x", "g"], ["y"])],
                                           [f32("x", [1, 1, 2, 3, 4, 2]), f32("g", [1, 2, 2, 2, 2, 4])],
                                           [f32("y", None)], opset=20), "r 1 to 3")
    compile_case("dequantize_block_mismatch_21", model(
        [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1, block_size=3)],
        [f32("x", [2, 4], TensorProto.INT8)], [f32("y", None)],
        [const("s", np.ones((2, 3), np.float32))], opset=21),
        "does not fit input [2,4] with block_size 3 on axis 1")
    compile_case("quantize_int32_21", model(
        [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.INT32)],
        [f32("x", [4])], [f32("y", None)], [const("s", np.float32(0.5))], opset=21),
        "quantizing to int32 is not supported")


# ---- 5. gzip ----
def gz():
    real = open("models/mlp/model.onnx", "rb").read()
    g = bytearray(gzip.compress(real))
    g[-4:] = struct.pack("<I", 0xffffffff)        # ISIZE claims 4 GiB
    open(os.path.join(OUT, "isize_4g.onnx.gz"), "wb").write(g)
    case("gzip_isize_4g", 1, "gzip", "@M@/isize_4g.onnx.gz -o @D@/x.o")
    tiny = gzip.compress(b"\x08\x07")[:-4] + struct.pack("<I", 0xffffffff)
    open(os.path.join(OUT, "tiny_isize_4g.onnx.gz"), "wb").write(tiny)
    case("gzip_tiny_isize_4g", 1, "gzip", "@M@/tiny_isize_4g.onnx.gz -o @D@/x.o")
    g = gzip.compress(real)
    open(os.path.join(OUT, "truncated.onnx.gz"), "wb").write(g[:len(g) // 2])
    case("gzip_truncated", 1, "gzip", "@M@/truncated.onnx.gz -o @D@/x.o")
    # a bomb: 256 MiB of zeros in about 256 KB; the default limit refuses it early
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    bomb = b"".join(c.compress(chunk) for _ in range(256)) + c.flush()
    open(os.path.join(OUT, "bomb.onnx.gz"), "wb").write(bomb)
    case("gzip_bomb", 1, "max-model-size", "@M@/bomb.onnx.gz -o @D@/x.o")
    case("gzip_bomb_small_limit", 1, "max-model-size",
         "@M@/bomb.onnx.gz --max-model-size 1000 -o @D@/x.o")
    # a raw model over --max-model-size
    case("max_model_size_plain", 1, "max-model-size",
         "models/mlp/model.onnx --max-model-size 100 -o @D@/x.o")


# ---- 6. truncations and byte flips of real models ----
def damage():
    for src in ("mlp", "cnn"):
        real = open(f"models/{src}/model.onnx", "rb").read()
        for frac in (1, 7, 33, 50, 90, 99):
            n = len(real) * frac // 100
            open(os.path.join(OUT, f"trunc_{src}_{frac}.onnx"), "wb").write(real[:n])
            case(f"trunc_{src}_{frac}", 1, "-", f"@M@/trunc_{src}_{frac}.onnx -o @D@/x.o")
        rnd = random.Random(src)
        # the first 2 KB hold the graph structure; weights follow
        head = min(len(real), 2048)
        for k in range(24):
            b = bytearray(real)
            for _ in range(1 + k % 4):
                b[rnd.randrange(head)] ^= 1 << rnd.randrange(8)
            open(os.path.join(OUT, f"flip_{src}_{k}.onnx"), "wb").write(bytes(b))
            case(f"flip_{src}_{k}", "flip", "-", f"@M@/flip_{src}_{k}.onnx -o @D@/x.o")


# ---- 7. bad attributes, per op family ----
def attrs():
    x4 = [f32("x", [1, 2, 4, 4])]
    w = const("W", np.ones((2, 2, 3, 3), np.float32))
    y = [f32("y", None)]
    conv = lambda name, **a: compile_case(name, model(
        [helper.make_node("Conv", ["x", "W"], ["y"], **a)], x4, y, [w]), "-")
    conv("conv_strides_0", strides=[0, 0])
    conv("conv_dilations_0", dilations=[0, 1])
    conv("conv_negative_pads", pads=[-3, 0, 0, 0])
    conv("conv_group_0", group=0)
    conv("conv_group_3", group=3)
    conv("conv_kernel_shape_wrong", kernel_shape=[5, 5])
    conv("conv_pads_short", pads=[1])
    conv("conv_auto_pad_bogus", auto_pad="SIDEWAYS")
    conv("conv_strides_huge", strides=[BIG * 2, 1])
    conv("conv_dilations_huge", dilations=[BIG, 1])
    pool = lambda name, op, **a: compile_case(name, model(
        [helper.make_node(op, ["x"], ["y"], **a)], x4, y), "-")
    pool("maxpool_kernel_0", "MaxPool", kernel_shape=[0, 0])
    pool("maxpool_no_kernel", "MaxPool")
    pool("maxpool_strides_0", "MaxPool", kernel_shape=[2, 2], strides=[0, 0])
    pool("avgpool_kernel_huge", "AveragePool", kernel_shape=[BIG, 2])
    pool("avgpool_kernel_negative", "AveragePool", kernel_shape=[-2, 2])
    un = lambda name, op, **a: compile_case(name, unary(op, [2, 3], **a), "-")
    un("softmax_axis_5", "Softmax", axis=5)
    un("flatten_axis_9", "Flatten", axis=9)
    un("transpose_perm_dup", "Transpose", perm=[0, 0])
    un("transpose_perm_range", "Transpose", perm=[0, 7])
    un("transpose_perm_short", "Transpose", perm=[0])
    compile_case("reducemean_axes_range", model(
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[4])], [f32("x", [2, 3])], y), "-")
    un("argmax_axis_range", "ArgMax", axis=-9)
    un("cast_to_0", "Cast", to=0)
    un("cast_to_1000", "Cast", to=1000)
    compile_case("cast_to_string_capacity", unary("Cast", [2, 3], to=TensorProto.STRING), "at least 19",
                 extra=" --max-strlen 8")
    compile_case("cast_int_to_string", model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING)],
                 [helper.make_tensor_value_info("x", TensorProto.INT64, [2])], [f32("y", None)]), "only float32")
    compile_case("string_rank_8", model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                 [helper.make_tensor_value_info("x", TensorProto.STRING, [1] * 8)], [f32("y", None)]), "up to rank 7")
    compile_case("tfidf_strings_int_pool", model([helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
        ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])],
        [helper.make_tensor_value_info("x", TensorProto.STRING, [3])], [f32("y", None)]), "need pool_strings")
    compile_case("stringnormalizer_on_floats", unary("StringNormalizer", [2]), "takes strings")
    compile_case("tfidf_pool_counts", model([helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
        ngram_counts=[0, 3], ngram_indexes=[0, 1, 2], pool_int64s=[1, 2, 3, 4])],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [5])], [f32("y", None)]), "whole 2-grams")
    un("lrn_size_0", "LRN", size=0)
    un("depthtospace_blocksize_0", "DepthToSpace", blocksize=0)
    un("spacetodepth_blocksize_huge", "SpaceToDepth", blocksize=BIG)
    un("hardmax_axis_range", "Hardmax", axis=3)
    un("layernorm_axis_range", "LayerNormalization", axis=5)
    un("einsum_bad_equation", "Einsum", equation="ij,->(")
    two = lambda name, op, sh2, **a: compile_case(name, model(
        [helper.make_node(op, ["x", "z"], ["y"], **a)], [f32("x", [2, 3]), f32("z", sh2)], y), "-")
    two("concat_axis_range", "Concat", [2, 3], axis=2)
    two("concat_shape_mismatch", "Concat", [4, 4], axis=0)
    two("gemm_shape_mismatch", "Gemm", [4, 4])
    two("matmul_shape_mismatch", "MatMul", [4, 4])
    two("add_broadcast_mismatch", "Add", [4, 4])
    idx = lambda name, op, ind, **a: compile_case(name, model(
        [helper.make_node(op, ["x", "i"], ["y"], **a)], [f32("x", [2, 3])], y,
        [const("i", np.array(ind, np.int64))]), "-")
    idx("gather_axis_range", "Gather", [0], axis=4)
    idx("gather_index_range", "Gather", [7])
    # constant indices outside their axis: errors (run-time ones are clamped into the axis)
    i64 = lambda a: np.array(a, np.int64)
    ind = lambda name, op, ind, upd=None, xs=(2, 3), **a: compile_case(name, model(
        [helper.make_node(op, ["x", "i"] + (["u"] if upd is not None else []), ["y"], **a)],
        [f32("x", list(xs))], y, [const("i", ind)] +
        ([const("u", np.ones(upd, np.float32))] if upd is not None else [])), "out of range")
    ind("gather_elements_index_range", "GatherElements", i64([[0, 5, 0]]), axis=1)
    ind("gather_elements_negative_range", "GatherElements", i64([[-3, 0, 0]]))
    ind("gathernd_index_range", "GatherND", i64([[1, 7]]))
    ind("scatter_elements_index_range", "ScatterElements", i64([[0, 9, 0]]), (1, 3), axis=1)
    ind("scatternd_index_range", "ScatterND", i64([[2]]), (1, 3))
    # an empty axis cannot be indexed, even by run-time indices (the clamp has nowhere to go)
    for op, xs, ish in (("Gather", [0, 3], [2]), ("GatherElements", [2, 0], [2, 1])):
        compile_case(op.lower() + "_empty_axis", model(
            [helper.make_node(op, ["x", "i"], ["y"], axis=1 if op == "GatherElements" else 0)],
            [f32("x", xs), f32("i", ish, TensorProto.INT64)], y), "empty")
    compile_case("reducemean_axes_dup", model(
        [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, -1])], [f32("x", [2, 3])], y),
        "repeated")
    compile_case("globallppool_p_0", model(
        [helper.make_node("GlobalLpPool", ["x"], ["y"], p=0)], x4, y), "p 0 must be >= 1")
    idx("reshape_two_minus_one", "Reshape", [-1, -1])
    idx("reshape_wrong_count", "Reshape", [5, 5])
    idx("reshape_negative", "Reshape", [-6])
    idx("tile_negative", "Tile", [-1, 1])
    idx("expand_incompatible", "Expand", [5, 5])
    idx("split_sizes_wrong", "Split", [1, 5], axis=1)
    idx("unsqueeze_axis_dup", "Unsqueeze", [0, 0])
    idx("squeeze_non_one", "Squeeze", [0])
    idx("topk_k_too_big", "TopK", [9])
    compile_case("slice_step_0", model(
        [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], [f32("x", [4])], y,
        [const("s", np.array([0], np.int64)), const("e", np.array([4], np.int64)),
         const("a", np.array([0], np.int64)), const("t", np.array([0], np.int64))]), "-")
    compile_case("range_delta_0", model(
        [helper.make_node("Range", ["a", "b", "c"], ["y"])], [], y,
        [const("a", np.array(0, np.int64)), const("b", np.array(10, np.int64)),
         const("c", np.array(0, np.int64))]), "-")
    compile_case("range_huge", model(
        [helper.make_node("Range", ["a", "b", "c"], ["y"])], [], y,
        [const("a", np.array(0, np.int64)), const("b", np.array(1 << 62, np.int64)),
         const("c", np.array(1, np.int64))]), "-")
    compile_case("pad_mode_bogus", model(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="sideways")], [f32("x", [2])], y,
        [const("p", np.array([1, 1], np.int64))]), "-")
    compile_case("resize_mode_bogus", model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic2")], [f32("x", [1, 1, 2, 2])],
        y, [const("s", np.array([1, 1, 2, 2], np.float32))]), "-")
    compile_case("resize_scale_huge", model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"])], [f32("x", [1, 1, 2, 2])],
        y, [const("s", np.array([1, 1, 1e12, 1e12], np.float32))]), "-")
    compile_case("lstm_hidden_0", model(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=0)],
        [f32("x", [1, 1, 2])], y,
        [const("W", np.ones((1, 0, 2), np.float32)), const("R", np.ones((1, 0, 0), np.float32))]),
        "-")
    compile_case("lstm_hidden_mismatch", model(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=3)],
        [f32("x", [1, 1, 2])], y,
        [const("W", np.ones((1, 8, 2), np.float32)), const("R", np.ones((1, 8, 2), np.float32))]),
        "-")
    compile_case("constant_no_value", model([helper.make_node("Constant", [], ["y"])], [], y), "-")
    compile_case("batchnorm_param_shape", model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
        [f32("x", [1, 2, 2, 2])], y,
        [const(n, np.ones((5,), np.float32)) for n in "sbmv"]), "-")
    compile_case("quantize_scale_type", model(
        [helper.make_node("QuantizeLinear", ["x", "s"], ["y"])], [f32("x", [2])], y,
        [const("s", np.array(1, np.int64))]), "-")
    compile_case("attr_wrong_type", model(
        [helper.make_node("Softmax", ["x"], ["y"], axis="one")], [f32("x", [2])], y), "-")
    compile_case("dft_length_0", model(
        [helper.make_node("DFT", ["x", "n"], ["y"])], [f32("x", [1, 4, 1])], y,
        [const("n", np.array(0, np.int64))], opset=17), "-")


# ---- 8. external data ----
def external():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    ext = os.path.join(OUT, "ext")
    os.makedirs(os.path.join(ext, "sub"), exist_ok=True)
    with open(os.path.join(ext, "w.bin"), "wb") as f:
        f.write(b"\0" * 8 + np.arange(4, dtype=np.float32).tobytes())

    def ext_model(name, loc, offset=None, length=None):
        tp = TensorProto()
        tp.CopyFrom(t)
        tp.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", offset), ("length", length)):
            if v is not None:
                e = tp.external_data.add()
                e.key, e.value = k, str(v)
        m = model([helper.make_node("Relu", ["w"], ["y"])], [], [f32("y", None)], [tp])
        open(os.path.join(ext, name + ".onnx"), "wb").write(m.SerializeToString())
        return f"@M@/ext/{name}.onnx -o @D@/x.o"

    case("ext_absolute", 1, "absolute", ext_model("ext_absolute", "/etc/passwd"))
    case("ext_dotdot", 1, "..", ext_model("ext_dotdot", "../cases.txt"))
    case("ext_dotdot_inside", 1, "..", ext_model("ext_dotdot_inside", "sub/../w.bin", 8, 16))
    case("ext_missing", 1, "nosuch.bin", ext_model("ext_missing", "nosuch.bin"))
    case("ext_offset_past_end", 1, "offset", ext_model("ext_offset_past_end", "w.bin", 100, 16))
    case("ext_length_past_end", 1, "length", ext_model("ext_length_past_end", "w.bin", 8, 64))
    case("ext_length_wrong", 1, "16", ext_model("ext_length_wrong", "w.bin", 8, 12))
    case("ext_offset_negative", 1, "offset", ext_model("ext_offset_negative", "w.bin", -8, 16))
    case("ext_no_location", 1, "location", ext_model("ext_no_location", None))
    case("ext_directory", 1, "sub", ext_model("ext_directory", "sub"))
    if not os.path.lexists(os.path.join(ext, "escape.bin")):
        os.symlink("/etc/hostname", os.path.join(ext, "escape.bin"))
    case("ext_symlink_escape", 1, "symlink", ext_model("ext_symlink_escape", "escape.bin"))
    if not os.path.lexists(os.path.join(ext, "sub", "up")):
        os.symlink("../..", os.path.join(ext, "sub", "up"))
    case("ext_symlink_dir_escape", 1, "symlink",
         ext_model("ext_symlink_dir_escape", "sub/up/cases.txt"))
    # one that works: Relu of [0, 1, 2, 3] read at offset 8, checked against numpy's
    case("ext_ok", 0, "-", "check " + ext_model("model", "w.bin", 8, 16).split()[0])
    os.makedirs(os.path.join(ext, "test_data_set_0"), exist_ok=True)
    want = numpy_helper.from_array(np.maximum(np.arange(4, dtype=np.float32), 0), "y")
    open(os.path.join(ext, "test_data_set_0", "output_0.pb"), "wb").write(want.SerializeToString())
    case("ext_ok_no_length", 0, "-", ext_model("ext_ok_no_length", "w4.bin", None, None))
    with open(os.path.join(ext, "w4.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())


# ---- 9. the command line ----
def cli():
    m = "models/mlp/model.onnx"
    case("cli_no_args", 2, "-", "")
    case("cli_o_without_path", 2, "-", f"{m} -o")
    case("cli_two_models", 2, "-", f"{m} {m} -o @D@/x.o")
    case("cli_unknown_option", 2, "-", f"{m} --bogus -o @D@/x.o")
    case("cli_bad_O", 2, "-", f"{m} -O9 -o @D@/x.o")
    case("cli_bad_emit", 2, "-", f"{m} --emit=exe -o @D@/x.o")
    case("cli_header_without_path", 2, "-", f"{m} -o @D@/x.o --header")
    case("cli_header_same_as_output", 2, "-", f"{m} -o @D@/x.o --header @D@/x.o")
    case("cli_max_model_size_bad", 2, "-", f"{m} --max-model-size lots -o @D@/x.o")
    case("cli_max_model_size_negative", 2, "-", f"{m} --max-model-size -5 -o @D@/x.o")
    case("cli_model_is_directory", 1, "-", "models/mlp -o @D@/x.o")
    case("cli_output_is_directory", 1, "-", f"{m} -o @D@")
    case("cli_output_dir_missing", 1, "-", f"{m} -o @D@/no/such/x.o")
    case("cli_header_dir_missing", 1, "-", f"{m} -o @D@/x.o --header @D@/no/such/x.h")
    case("cli_bad_shape", 2, "-", f"{m} --shape x=1xq -o @D@/x.o")
    case("cli_bad_target", 1, "-", f"{m} --target nonsense-none-none -o @D@/x.o")
    open(os.path.join(OUT, "empty.onnx"), "wb").close()
    case("cli_empty_model_file", 1, "empty", "@M@/empty.onnx -o @D@/x.o")
    case("cli_model_is_device", 1, "regular", "/dev/zero -o @D@/x.o")
    case("cli_check_missing_dir", 1, "-", f"check {m} @D@/nosuch")


def main():
    os.makedirs(OUT, exist_ok=True)
    for part in (sizes, nesting, operands, opsets, gz, damage, attrs, external, cli):
        part()
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        for c in CASES:
            f.write("\t".join(c) + "\n")


if __name__ == "__main__":
    main()
