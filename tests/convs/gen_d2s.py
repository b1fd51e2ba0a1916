# gen_d2s.py OUTDIR - DepthToSpace (DCR and CRD) with blocks of 2 to 4, written from -O1 as
# rows of stores side by side (passes/ops/movement.c), and of 5 (the output-order form), with a
# fused Relu, batch 2, odd maps; and SpaceToDepth. Reference: numpy's reshape/transpose, as in
# the ONNX operator description.
import sys, os
import numpy as np
from onnx import helper as h, numpy_helper as nh, TensorProto as T, save
os.chdir(sys.argv[1])
rng = np.random.default_rng(20)


def d2s(x, b, mode):
    n, c, hh, ww = x.shape
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), hh, ww).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, hh, ww).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), hh * b, ww * b)


def s2d(x, b):
    n, c, hh, ww = x.shape
    t = x.reshape(n, c, hh // b, b, ww // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, hh // b, ww // b)


# name, op, input shape, blocksize, mode, fused Relu
cases = [("d2s_dcr_b2", "DepthToSpace", [1, 32, 9, 37], 2, "DCR", False),
         ("d2s_crd_b2_relu", "DepthToSpace", [2, 12, 5, 20], 2, "CRD", True),
         ("d2s_dcr_b3_relu", "DepthToSpace", [1, 18, 4, 7], 3, "DCR", True),
         ("d2s_crd_b4", "DepthToSpace", [1, 32, 3, 19], 4, "CRD", False),
         ("d2s_dcr_b5", "DepthToSpace", [1, 50, 2, 3], 5, "DCR", False),
         ("s2d_b2", "SpaceToDepth", [2, 3, 10, 34], 2, None, False)]
for name, op, xs, b, mode, relu in cases:
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    x = rng.standard_normal(xs).astype(np.float32)
    y = d2s(x, b, mode) if op == "DepthToSpace" else s2d(x, b)
    attrs = {"blocksize": b}
    if mode:
        attrs["mode"] = mode
    nodes = [h.make_node(op, ["x"], ["t" if relu else "y"], **attrs)]
    if relu:
        nodes.append(h.make_node("Relu", ["t"], ["y"]))
        y = np.maximum(y, 0)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, xs)],
                     [h.make_tensor_value_info("y", T.FLOAT, list(y.shape))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    with open(name + "/test_data_set_0/input_0.pb", "wb") as f:
        f.write(nh.from_array(x, "x").SerializeToString())
    with open(name + "/test_data_set_0/output_0.pb", "wb") as f:
        f.write(nh.from_array(y.astype(np.float32), "y").SerializeToString())
