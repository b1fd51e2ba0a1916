# gen_resize.py OUTDIR - nearest Resizes with integral factors on some dims (the repeated form
# of passes/ops/resample.c, resize_repeat: loops over the input and its copies, the last dim's
# copies as stores side by side, up to 4; beyond, through the table), with and without a fused
# Add, next to dims that keep their tables (non-integral scales, align_corners), every
# coordinate mode and nearest_mode, 3-D to 5-D, batch 2; and linear ones along several dims
# (resize_separable), up- and downsampling. Reference: numpy, the formulas of the ONNX operator
# description (coordinate transformation, nearest rounding, linear weights, clamping).
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


def coord(o, ins, outs, scale, ctm):
    if ctm == "asymmetric":
        return o / scale
    if ctm == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if outs > 1 else 0.0
    return 0.0 if outs == 1 else o * (ins - 1) / (outs - 1)


def linear(x, scales, ctm):
    """Separable linear interpolation (each dim in turn), the neighbours clamped into the
    input, as the operator description's reference."""
    y = x.astype(np.float64)
    for d, s in enumerate(scales):
        n = y.shape[d]
        o = int(np.floor(n * s))
        c = np.array([min(max(coord(i, n, o, s, ctm), 0), n - 1) for i in range(o)])
        i0 = np.floor(c).astype(int)
        i1 = np.minimum(i0 + 1, n - 1)
        f = (c - i0).reshape([-1 if k == d else 1 for k in range(y.ndim)])
        y = np.take(y, i0, axis=d) * (1 - f) + np.take(y, i1, axis=d) * f
    return y


def reference(x, scales, ctm, nm):
    if nm == "linear":
        return linear(x, scales, ctm)
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
         ("x2_channels", [1, 3, 4, 4], [1, 2, 1, 1], "asymmetric", "floor", False),
         # linear along several dims: one kernel per dim from -O1 (resize_separable)
         ("bilinear_x2_add", [1, 16, 8, 21], [1, 1, 2, 2], "half_pixel", "linear", True),
         ("bilinear_1p5_pytorch", [2, 3, 6, 10], [1, 1, 1.5, 1.5], "pytorch_half_pixel", "linear", False),
         ("bilinear_down_asym", [1, 4, 9, 16], [1, 1, 0.5, 0.75], "asymmetric", "linear", False),
         ("trilinear_align", [1, 2, 3, 4, 5], [1, 1, 2, 2, 3], "align_corners", "linear", True)]
for name, xs, scales, ctm, nm, add in cases:
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    x = rng.standard_normal(xs).astype(np.float32)
    y = reference(x, scales, ctm, nm)
    ins = [h.make_tensor_value_info("x", T.FLOAT, xs)]
    feeds = [x]
    attrs = {"mode": "linear"} if nm == "linear" else {"mode": "nearest", "nearest_mode": nm}
    nodes = [h.make_node("Resize", ["x", "", "sc"], ["r" if add else "y"],
                         coordinate_transformation_mode=ctm, **attrs)]
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
