# gen_resize.py OUTDIR - nearest Resizes with integral factors on some dims (the repeated form
# of passes/ops/resample.c, resize_repeat: loops over the input and its copies, the last dim's
# copies as stores side by side, up to 4; beyond, through the table), with and without a fused
# Add, next to dims that keep their tables (non-integral scales, align_corners), every
# coordinate mode and nearest_mode, 3-D to 5-D, batch 2. Reference: numpy, the formulas of the
# ONNX operator description (coordinate transformation, nearest rounding, clamping).
import sys, os
import numpy as np
from onnx import helper as h, numpy_helper as nh, TensorProto as T, save
os.chdir(sys.argv[1])
rng = np.random.default_rng(19)


def src_index(o, ins, outs, scale, ctm, nm):
    if ctm == "asymmetric":
        x = o / scale
    elif ctm == "half_pixel":
        x = (o + 0.5) / scale - 0.5
    elif ctm == "pytorch_half_pixel":
        x = (o + 0.5) / scale - 0.5 if outs > 1 else 0.0
    elif ctm == "align_corners":
        x = 0.0 if outs == 1 else o * (ins - 1) / (outs - 1)
    else:
        raise ValueError(ctm)
    if nm == "floor":
        i = np.floor(x)
    elif nm == "ceil":
        i = np.ceil(x)
    elif nm == "round_prefer_floor":
        i = np.ceil(x - 0.5)
    else:                                   # round_prefer_ceil
        i = np.floor(x + 0.5)
    return int(min(max(i, 0), ins - 1))


def reference(x, scales, ctm, nm):
    outs = [int(np.floor(n * s)) for n, s in zip(x.shape, scales)]
    y = x
    for d, (n, o, s) in enumerate(zip(x.shape, outs, scales)):
        idx = [src_index(i, n, o, s, ctm, nm) for i in range(o)]
        y = np.take(y, idx, axis=d)
    return y


# name, input shape, scales, coordinate mode, nearest mode, fused Add
cases = [("x2_asym_floor", [1, 16, 9, 13], [1, 1, 2, 2], "asymmetric", "floor", False),
         ("x2_add", [2, 8, 7, 40], [1, 1, 2, 2], "asymmetric", "floor", True),
         ("x2_half_pixel", [1, 5, 6, 17], [1, 1, 2, 2], "half_pixel", "round_prefer_floor", True),
         ("x3_rows_x4_cols", [1, 3, 5, 33], [1, 1, 3, 4], "asymmetric", "floor", False),
         ("x8_cols_table", [1, 4, 3, 5], [1, 1, 8, 8], "asymmetric", "floor", True),
         ("x2_rows_1p5_cols", [1, 3, 4, 6], [1, 1, 2, 1.5], "pytorch_half_pixel", "round_prefer_ceil", False),
         ("align_corners_x2", [1, 2, 4, 5], [1, 1, 2, 2], "align_corners", "round_prefer_floor", False),
         ("x2_ceil", [1, 2, 4, 5], [1, 1, 2, 2], "half_pixel", "ceil", False),
         ("x2_1d", [2, 6, 50], [1, 1, 2], "asymmetric", "floor", True),
         ("x2_3d", [1, 3, 3, 4, 18], [1, 1, 2, 2, 2], "asymmetric", "floor", False),
         ("x2_channels", [1, 3, 4, 4], [1, 2, 1, 1], "asymmetric", "floor", False)]
for name, xs, scales, ctm, nm, add in cases:
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    x = rng.standard_normal(xs).astype(np.float32)
    y = reference(x, scales, ctm, nm)
    ins = [h.make_tensor_value_info("x", T.FLOAT, xs)]
    feeds = [x]
    nodes = [h.make_node("Resize", ["x", "", "sc"], ["r" if add else "y"], mode="nearest",
                         coordinate_transformation_mode=ctm, nearest_mode=nm)]
    if add:
        z = rng.standard_normal(y.shape).astype(np.float32)
        nodes.append(h.make_node("Add", ["r", "z"], ["y"]))
        ins.append(h.make_tensor_value_info("z", T.FLOAT, list(y.shape)))
        feeds.append(z)
        y = y + z
    g = h.make_graph(nodes, name, ins, [h.make_tensor_value_info("y", T.FLOAT, list(y.shape))],
                     [nh.from_array(np.array(scales, np.float32), "sc")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    for i, (n, v) in enumerate(zip(["x", "z"], feeds)):
        with open("%s/test_data_set_0/input_%d.pb" % (name, i), "wb") as f:
            f.write(nh.from_array(v, n).SerializeToString())
    with open(name + "/test_data_set_0/output_0.pb", "wb") as f:
        f.write(nh.from_array(y.astype(np.float32), "y").SerializeToString())
