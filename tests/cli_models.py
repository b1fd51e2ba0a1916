#!/usr/bin/python3
"""cli_models.py OUTDIR - writes the small models that tests/cli.sh feeds to onnxcc's error
paths: unknown_ops.onnx (two nodes of made-up op types around one valid node, so that every
unsupported op must be reported, each naming its node) and symbolic.onnx (an input whose first
dimension is the symbol "batch", which only --shape resolves; symbolic_hw.onnx: N, 3, H, W),
loop_scan.onnx (a Loop named
loop_node with a run-time trip count and a scan output, which needs --max-trip) and
if_shapes.onnx (an If named if_node whose branches give different shapes), slice_dyn.onnx and
slice_step.onnx (Slices named slice_node with run-time starts: ends not provably the starts
plus a constant, and ends that are but with step 2), seq_loop.onnx (a Loop named seq_loop that
grows a sequence by a run-time trip count), seq_loop_long.onnx (the same for 5000 iterations),
seq_map2.onnx (a SequenceMap named map_node over two sequence inputs, whose lengths --seq makes
differ), if_const.onnx (an If with a constant
condition whose other branch has a value of no declared type) and topk_u64.onnx (a TopK whose
run-time k is a Min over uint64, one constant above INT64_MAX)."""
import os
import sys

from onnx import TensorProto, helper, save


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model(nodes, inputs, outputs, name):
    g = helper.make_graph(nodes, name, inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # no checker here: the point is that these ops do not exist
    save(model([helper.make_node("FooOp", ["x"], ["a"], name="foo_node"),
                helper.make_node("Relu", ["a"], ["b"], name="relu_node"),
                helper.make_node("BarOp", ["b"], ["y"], name="bar_node")],
               [f32("x", [1, 4])], [f32("y", [1, 4])], "unknown_ops"),
         os.path.join(out, "unknown_ops.onnx"))
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
               [f32("x", ["batch", 4])], [f32("y", ["batch", 4])], "symbolic"),
         os.path.join(out, "symbolic.onnx"))
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu_node")],
               [f32("x", ["N", 3, "H", "W"])], [f32("y", ["N", 3, "H", "W"])], "symbolic_hw"),
         os.path.join(out, "symbolic_hw.onnx"))
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["v_in", "v_in"], ["v_out"]),
         helper.make_node("Identity", ["v_out"], ["row"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), f32("v_in", [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), f32("v_out", [3]), f32("row", [3])])
    save(model([helper.make_node("Loop", ["n", "", "x"], ["y", "rows"], body=body, name="loop_node")],
               [helper.make_tensor_value_info("n", TensorProto.INT64, []), f32("x", [3])],
               [f32("y", [3]), f32("rows", ["t", 3])], "loop_scan"),
         os.path.join(out, "loop_scan.onnx"))
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "then", [], [f32("a", [2, 3])])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["b"], keepdims=0)], "else", [], [f32("b", [])])
    save(model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if_node")],
               [helper.make_tensor_value_info("c", TensorProto.BOOL, []), f32("x", [2, 3])],
               [f32("y", None)], "if_shapes"),
         os.path.join(out, "if_shapes.onnx"))
    # a data-dependent shape (NonZero's) feeding an op that cannot follow it at run time (README,
    # "Data-dependent shapes", lists those that can)
    save(model([helper.make_node("NonZero", ["x"], ["nz"], name="nz_node"),
                helper.make_node("Softmax", ["nz"], ["y"], name="softmax_node")],
               [f32("x", [2, 3])], [helper.make_tensor_value_info("y", TensorProto.INT64, [2, None])],
               "dyn_consumer"),
         os.path.join(out, "dyn_consumer.onnx"))
    # Slice with run-time starts: ends unrelated to them; ends = starts + 2 but step 2
    i64 = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, [1])
    const = lambda name, v: helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [1], [v]))
    save(model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="slice_node")],
               [f32("x", [6]), i64("s"), i64("e")], [f32("y", [None])], "slice_dyn"),
         os.path.join(out, "slice_dyn.onnx"))
    save(model([const("two", 2), helper.make_node("Add", ["s", "two"], ["e"]),
                helper.make_node("Slice", ["x", "s", "e", "", "two"], ["y"], name="slice_node")],
               [f32("x", [6]), i64("s")], [f32("y", [None])], "slice_step"),
         os.path.join(out, "slice_step.onnx"))

    # strings (passes/ops/text.c): a string into an op without strings; a string constant longer
    # than --max-strlen; Cast to string (needs a capacity of 19); an unsupported locale
    st = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.STRING, shape)
    save(model([helper.make_node("Identity", ["s"], ["y"], name="id_node")], [st("s", [2])], [st("y", [2])],
               "str_identity"),
         os.path.join(out, "str_identity.onnx"))
    save(model([helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.STRING, [1], [b"x" * 40])),
                helper.make_node("Cast", ["c"], ["y"], name="cast_node", to=TensorProto.FLOAT)],
               [], [f32("y", [1])], "str_long_const"),
         os.path.join(out, "str_long_const.onnx"))
    save(model([helper.make_node("Cast", ["x"], ["y"], name="cast_node", to=TensorProto.STRING)],
               [f32("x", [2])], [st("y", [2])], "str_cast"),
         os.path.join(out, "str_cast.onnx"))
    save(model([helper.make_node("StringNormalizer", ["s"], ["y"], name="norm_node", locale="tr_TR",
                                 case_change_action="UPPER")],
               [st("s", [2])], [st("y", [2])], "str_locale"),
         os.path.join(out, "str_locale.onnx"))
    # sequences are resolved at compile time: a Loop that grows one needs a constant trip count
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("SequenceInsert", ["s_in", "x"], ["s_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []), helper.make_value_info("s_in", seq_t)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_value_info("s_out", seq_t)])
    m = model([helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
               helper.make_node("Loop", ["n", "", "e"], ["s"], body=body, name="seq_loop")],
              [helper.make_tensor_value_info("n", TensorProto.INT64, []), f32("x", [3])],
              [helper.make_value_info("s", seq_t)], "seq_loop")
    save(m, os.path.join(out, "seq_loop.onnx"))
    many = helper.make_node("Constant", [], ["n"], value=helper.make_tensor("n", TensorProto.INT64, [], [5000]))
    m = model([many, helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
               helper.make_node("Loop", ["n", "", "e"], ["s"], body=body, name="seq_loop")],
              [f32("x", [3])], [helper.make_value_info("s", seq_t)], "seq_loop_long")
    save(m, os.path.join(out, "seq_loop_long.onnx"))
    body = helper.make_graph([helper.make_node("Add", ["p", "q"], ["r"])], "map_body",
                             [f32("p", [3]), f32("q", [3])], [f32("r", [3])])
    m = model([helper.make_node("SequenceMap", ["a", "b"], ["y"], body=body, name="map_node")],
              [helper.make_value_info("a", seq_t), helper.make_value_info("b", seq_t)],
              [helper.make_value_info("y", seq_t)], "seq_map2")
    m.opset_import[0].version = 17
    save(m, os.path.join(out, "seq_map2.onnx"))
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "then", [], [f32("a", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["b1"]), helper.make_node("Abs", ["b1"], ["b"])],
                               "else", [], [f32("b", [2, 3])])
    yes = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True]))
    save(model([yes, helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if_node")],
               [f32("x", [2, 3])], [f32("y", [2, 3])], "if_const"),
         os.path.join(out, "if_const.onnx"))
    # TopK k = Min(uint64 2^63 + 5, c): no bound (above INT64_MAX), so the capacity is x's 10
    kbig = helper.make_tensor("K", TensorProto.UINT64, [1], [2**63 + 5])
    g = helper.make_graph([helper.make_node("Min", ["K", "c"], ["k"]), helper.make_node("TopK", ["x", "k"], ["v", "i"])],
                          "topk_u64", [f32("x", [10]), helper.make_tensor_value_info("c", TensorProto.UINT64, [1])],
                          [f32("v", None), helper.make_tensor_value_info("i", TensorProto.INT64, None)], [kbig])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "topk_u64.onnx"))


if __name__ == "__main__":
    main()
