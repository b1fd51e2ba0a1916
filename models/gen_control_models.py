#!/usr/bin/python3
"""gen_control_models.py - writes the sample models with control flow (If, Loop, Scan).

Each goes to models/NAME/model.onnx with test_data_set_N/{input,output}_K.pb (the layout of the
ONNX backend test data), so that `onnxcc check models/NAME/model.onnx` runs it; tests/models.sh
checks every models/*/model.onnx. The expected outputs are computed by the plain numpy
functions below, written from the ONNX operator definitions (If, Loop, Scan), not by any
runtime, so a check compares onnxcc with an independent implementation.

  if_branch    If on a condition computed from the input (ReduceSum > 0): the then branch is
               MatMul + Add with outer weights, the else branch Neg(MatMul) then Relu; two
               data sets, one taking each branch
  loop_while   Loop with a run-time trip count (an int64 graph input) and an early exit: the
               body halves a carried vector and adds the input, counts its iterations in a
               second carried value, and stops when the vector's sum exceeds a run-time limit;
               data sets that stop early, run out of trips, and run zero times
  scan_rnn     Scan (opset 11) as a small tanh RNN over 5 steps, with a second scanned input
               read in reverse and the scan output stacked on axis 1
  loop_exit    Loop with a constant trip count of 8 and an early exit on a run-time limit,
               whose scan output (the carried vector per iteration) is a graph output: it
               reports the rows written in its "acc_rows.dims" output; data sets that stop
               after 3 and 1 iterations and one that runs all 8
  loop_slice   Loop whose body slices a window of 2 columns at the iteration number
               (Slice(x, i + 1, i + 3) on axis 1: run-time starts, a constant length) into
               a carried sum and a scan output; trip counts 4, 2 and 0

Run: /usr/bin/python3 models/gen_control_models.py   (needs python3-onnx, python3-numpy)
Written with onnx 1.12.0 and numpy 1.24; SEED fixes the weights and data.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20250107
HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def save(name, graph, opset, sets):
    """sets: a list of (inputs, outputs), each a list of numpy arrays in graph order."""
    model = helper.make_model(graph, producer_name="onnxcc-gen_control_models",
                              opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (inputs, outputs) in enumerate(sets):
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for kind, vals, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for i, (v, info) in enumerate(zip(vals, infos)):
                t = numpy_helper.from_array(np.asarray(v), info.name)   # keeps 0-d arrays 0-d
                with open(os.path.join(sd, "%s_%d.pb" % (kind, i)), "wb") as f:
                    f.write(t.SerializeToString())
    print("gen_control_models: %-10s opset %2d  %d data sets" % (name, opset, len(sets)))


# ---- If ----

def ref_if(x, w, b):
    if x.sum(dtype=F32) > 0:
        return (x @ w + b).astype(F32)
    return np.maximum(-(x @ w), 0).astype(F32)


def write_if(rng):
    w = rng.standard_normal((4, 5)).astype(F32)
    b = rng.standard_normal(5).astype(F32)
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t_mm"]),
         helper.make_node("Add", ["t_mm", "b"], ["t_out"])],
        "then_body", [], [vi("t_out", TensorProto.FLOAT, [3, 5])])
    else_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["e_mm"]),
         helper.make_node("Neg", ["e_mm"], ["e_neg"]),
         helper.make_node("Relu", ["e_neg"], ["e_out"])],
        "else_body", [], [vi("e_out", TensorProto.FLOAT, [3, 5])])
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        "if_branch", [vi("x", TensorProto.FLOAT, [3, 4])], [vi("y", TensorProto.FLOAT, [3, 5])],
        [init("w", w), init("b", b), init("zero", np.array(0, F32))])
    sets = []
    for sign in (1, -1):
        x = (np.abs(rng.standard_normal((3, 4))) * sign).astype(F32)
        sets.append(([x], [ref_if(x, w, b)]))
    save("if_branch", g, 13, sets)


# ---- Loop ----

def ref_loop(x, n, limit):
    acc = np.zeros(4, F32)
    count = np.array(0, np.int64)
    cond = True
    i = 0
    while i < n and cond:
        acc = (acc * F32(0.5) + x).astype(F32)
        count = count + 1
        cond = bool(acc.sum(dtype=F32) <= limit)
        i += 1
    return acc, count


def write_loop(rng):
    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "half"], ["acc_half"]),
         helper.make_node("Add", ["acc_half", "x"], ["acc_out"]),
         helper.make_node("Add", ["count_in", "one"], ["count_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["acc_sum"], keepdims=0),
         helper.make_node("LessOrEqual", ["acc_sum", "limit"], ["cond_out"])],
        "loop_body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("acc_in", TensorProto.FLOAT, [4]), vi("count_in", TensorProto.INT64, [])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [4]),
         vi("count_out", TensorProto.INT64, [])],
        [init("half", np.array(0.5, F32)), init("one", np.array(1, np.int64))])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "acc0", "count0"], ["acc", "count"], body=body,
                          name="loop")],
        "loop_while",
        [vi("x", TensorProto.FLOAT, [4]), vi("n", TensorProto.INT64, []),
         vi("limit", TensorProto.FLOAT, [])],
        [vi("acc", TensorProto.FLOAT, [4]), vi("count", TensorProto.INT64, [])],
        [init("acc0", np.zeros(4, F32)), init("count0", np.array(0, np.int64))])
    x = np.abs(rng.standard_normal(4)).astype(F32) + F32(0.5)
    sets = []
    for n, limit in ((20, 1.6 * x.sum()), (3, 100.0), (0, 1.0), (20, 1e6)):
        n = np.array(n, np.int64)
        limit = np.array(limit, F32)
        acc, count = ref_loop(x, n, limit)
        sets.append(([x, n, limit], [acc, count]))
    assert 1 < sets[0][1][1] < 20, "the first set must exit early"
    save("loop_while", g, 13, sets)


# ---- Scan ----

def ref_scan(h0, xs, zs, w, u, v):
    h = h0
    ys = []
    for t in range(xs.shape[0]):
        h = np.tanh(w @ xs[t] + u @ h + v @ zs[xs.shape[0] - 1 - t]).astype(F32)
        ys.append(h)
    return h, np.stack(ys, axis=1)


def write_scan(rng):
    w = (rng.standard_normal((4, 3)) * 0.5).astype(F32)
    u = (rng.standard_normal((4, 4)) * 0.5).astype(F32)
    v = (rng.standard_normal((4, 2)) * 0.5).astype(F32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["w", "x_t"], ["wx"]),
         helper.make_node("MatMul", ["u", "h_in"], ["uh"]),
         helper.make_node("MatMul", ["v", "z_t"], ["vz"]),
         helper.make_node("Add", ["wx", "uh"], ["s1"]),
         helper.make_node("Add", ["s1", "vz"], ["s2"]),
         helper.make_node("Tanh", ["s2"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["y_t"])],
        "scan_body",
        [vi("h_in", TensorProto.FLOAT, [4]), vi("x_t", TensorProto.FLOAT, [3]),
         vi("z_t", TensorProto.FLOAT, [2])],
        [vi("h_out", TensorProto.FLOAT, [4]), vi("y_t", TensorProto.FLOAT, [4])])
    g = helper.make_graph(
        [helper.make_node("Scan", ["h0", "xs", "zs"], ["h", "ys"], body=body, num_scan_inputs=2,
                          scan_input_directions=[0, 1], scan_output_axes=[1])],
        "scan_rnn",
        [vi("h0", TensorProto.FLOAT, [4]), vi("xs", TensorProto.FLOAT, [5, 3]),
         vi("zs", TensorProto.FLOAT, [5, 2])],
        [vi("h", TensorProto.FLOAT, [4]), vi("ys", TensorProto.FLOAT, [4, 5])],
        [init("w", w), init("u", u), init("v", v)])
    h0 = rng.standard_normal(4).astype(F32)
    xs = rng.standard_normal((5, 3)).astype(F32)
    zs = rng.standard_normal((5, 2)).astype(F32)
    h, ys = ref_scan(h0, xs, zs, w, u, v)
    save("scan_rnn", g, 11, [([h0, xs, zs], [h, ys])])


# ---- Loop with an early exit and a scan output ----

def ref_loop_exit(x, limit, trips):
    acc = np.zeros(4, F32)
    rows = []
    cond = True
    while len(rows) < trips and cond:
        acc = (acc * F32(0.5) + x).astype(F32)
        rows.append(acc)
        cond = bool(acc.sum(dtype=F32) <= limit)
    return acc, np.stack(rows)


def write_loop_exit(rng):
    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "half"], ["acc_half"]),
         helper.make_node("Add", ["acc_half", "x"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["acc_sum"], keepdims=0),
         helper.make_node("LessOrEqual", ["acc_sum", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["row"])],
        "exit_body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("acc_in", TensorProto.FLOAT, [4])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [4]),
         vi("row", TensorProto.FLOAT, [4])],
        [init("half", np.array(0.5, F32))])
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "acc0"], ["acc", "acc_rows"], body=body, name="loop")],
        "loop_exit",
        [vi("x", TensorProto.FLOAT, [4]), vi("limit", TensorProto.FLOAT, [])],
        [vi("acc", TensorProto.FLOAT, [4]), vi("acc_rows", TensorProto.FLOAT, [None, 4])],
        [init("trips", np.array(8, np.int64)), init("acc0", np.zeros(4, F32))])
    x = np.abs(rng.standard_normal(4)).astype(F32) + F32(0.5)
    sets = []
    for limit in (1.6 * x.sum(), 0.5 * x.sum(), 1e6):
        limit = np.array(limit, F32)
        acc, rows = ref_loop_exit(x, limit, 8)
        sets.append(([x, limit], [acc, rows]))
    assert [len(s[1][1]) for s in sets] == [3, 1, 8], [len(s[1][1]) for s in sets]
    save("loop_exit", g, 13, sets)


# ---- Loop slicing at the iteration number ----

def ref_loop_slice(x, n):
    acc = np.zeros((3, 2), F32)
    wins = []
    for i in range(n):
        win = x[:, i + 1:i + 3]
        acc = (acc * F32(0.5) + win).astype(F32)
        wins.append(win)
    return acc, np.stack(wins) if wins else np.zeros((0, 3, 2), F32)


def write_loop_slice(rng):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["i", "ax0"], ["i1"]),
         helper.make_node("Add", ["i1", "one"], ["st"]),
         helper.make_node("Add", ["i1", "three"], ["en"]),
         helper.make_node("Slice", ["x", "st", "en", "ax1"], ["win"]),
         helper.make_node("Mul", ["acc_in", "half"], ["acc_half"]),
         helper.make_node("Add", ["acc_half", "win"], ["acc_out"]),
         helper.make_node("Identity", ["win"], ["win_out"])],
        "slice_body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("acc_in", TensorProto.FLOAT, [3, 2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [3, 2]),
         vi("win_out", TensorProto.FLOAT, [3, 2])],
        [init("ax0", np.array([0], np.int64)), init("ax1", np.array([1], np.int64)),
         init("one", np.array([1], np.int64)), init("three", np.array([3], np.int64)),
         init("half", np.array(0.5, F32))])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "acc0"], ["acc", "wins"], body=body, name="loop")],
        "loop_slice",
        [vi("x", TensorProto.FLOAT, [3, 6]), vi("n", TensorProto.INT64, [])],
        [vi("acc", TensorProto.FLOAT, [3, 2]), vi("wins", TensorProto.FLOAT, [None, 3, 2])],
        [init("acc0", np.zeros((3, 2), F32))])
    x = rng.standard_normal((3, 6)).astype(F32)
    sets = []
    for n in (4, 2, 0):     # i + 3 <= 6: every window inside x, as ONNX's clamping leaves it
        acc, wins = ref_loop_slice(x, n)
        sets.append(([x, np.array(n, np.int64)], [acc, wins]))
    save("loop_slice", g, 13, sets)


def main():
    rng = np.random.default_rng(SEED)
    write_if(rng)
    write_loop(rng)
    write_scan(rng)
    write_loop_slice(rng)
    write_loop_exit(rng)


if __name__ == "__main__":
    main()
