# gen_resize.py OUTDIR - nearest Resizes with integral factors on some dims (the repeated form
# of passes/ops/resample.c, resize_repeat: loops over the input and its copies, the last dim's
# copies as stores side by side, up to 4; beyond, through the table), with and without a fused
# Add, next to dims that keep their tables (non-integral scales, align_corners), every
# coordinate mode and nearest_mode, 3-D to 5-D, batch 2; and linear ones along several dims
# (resize_separable), up- and downsampling; and necks of convs around a nearest or linear
# Resize and a Concat (neck_nhwc*, at the end). Reference: numpy, the formulas of the ONNX operator
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


# A YOLO/FPN-style neck: a Resize of a conv's output between convs (nearest, or linear as a
# U-Net or DeepLab decoder upsamples), concatenated with a lateral conv's output and added to
# another, then convs over both (outputs through a 1x1 conv to 2 classes, which reads its
# 48-channel map NHWC (few_outputs), and through a nearest Resize, as graph outputs). The
# Resizes are channel movers (passes/schedule.c, channel_mover): with vectors, their maps
# take NHWC with the convs around them, each Resize then running along runs of channels
# (channel_inner). Reference: numpy in float64.
def conv_ref(x, w, b, s, p):
    n, c, hh, ww = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p, p), (p, p)])
    oh, ow = (hh + 2 * p - kh) // s + 1, (ww + 2 * p - kw) // s + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + (oh - 1) * s + 1:s, j:j + (ow - 1) * s + 1:s]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y + b.reshape(1, m, 1, 1)


def up2(x):
    return x.repeat(2, axis=2).repeat(2, axis=3)


def neck(name, mode, ctm, skip_k=1):
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    x = rng.standard_normal([1, 16, 16, 24]).astype(np.float32)
    inits, nodes = [], []
    def wconv(tag, m, c, k):
        w = (rng.standard_normal([m, c, k, k]) / np.sqrt(c * k * k)).astype(np.float32)
        b = (0.1 * rng.standard_normal(m)).astype(np.float32)
        inits.extend([nh.from_array(w, tag + "w"), nh.from_array(b, tag + "b")])
        return w.astype(np.float64), b.astype(np.float64)
    w1, b1 = wconv("c1", 64, 16, 3)
    w2, b2 = wconv("c2", 32, 16, skip_k)
    w3, b3 = wconv("c3", 64, 16, skip_k)
    w4, b4 = wconv("c4", 48, 96, 3)
    w5, b5 = wconv("c5", 40, 64, 3)
    w6, b6 = wconv("c6", 2, 48, 1)
    x64 = x.astype(np.float64)
    c1 = np.maximum(conv_ref(x64, w1, b1, 2, 1), 0)
    u1 = up2(c1) if mode == "nearest" else linear(c1, [1, 1, 2, 2], ctm)
    c2 = np.maximum(conv_ref(x64, w2, b2, 1, skip_k // 2), 0)
    c3 = np.maximum(conv_ref(x64, w3, b3, 1, skip_k // 2), 0)
    y1 = conv_ref(np.maximum(conv_ref(np.concatenate([u1, c2], 1), w4, b4, 1, 1), 0), w6, b6, 1, 0)
    y2 = up2(np.maximum(conv_ref(u1 + c3, w5, b5, 1, 1), 0))
    sc = nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    nodes = [h.make_node("Conv", ["x", "c1w", "c1b"], ["a1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["a1"], ["r1"]),
             h.make_node("Resize", ["r1", "", "sc"], ["u1"], mode=mode, coordinate_transformation_mode=ctm,
                         **({"nearest_mode": "floor"} if mode == "nearest" else {})),
             h.make_node("Conv", ["x", "c2w", "c2b"], ["a2"], pads=[skip_k // 2] * 4), h.make_node("Relu", ["a2"], ["r2"]),
             h.make_node("Conv", ["x", "c3w", "c3b"], ["a3"], pads=[skip_k // 2] * 4), h.make_node("Relu", ["a3"], ["r3"]),
             h.make_node("Concat", ["u1", "r2"], ["cat"], axis=1),
             h.make_node("Conv", ["cat", "c4w", "c4b"], ["a4"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["a4"], ["r4"]),
             h.make_node("Conv", ["r4", "c6w", "c6b"], ["y1"]),
             h.make_node("Add", ["u1", "r3"], ["s"]),
             h.make_node("Conv", ["s", "c5w", "c5b"], ["a5"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["a5"], ["r5"]),
             h.make_node("Resize", ["r5", "", "sc"], ["y2"], mode="nearest")]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                     [h.make_tensor_value_info("y1", T.FLOAT, list(y1.shape)),
                      h.make_tensor_value_info("y2", T.FLOAT, list(y2.shape))], inits + [sc])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    with open(name + "/test_data_set_0/input_0.pb", "wb") as f:
        f.write(nh.from_array(x, "x").SerializeToString())
    for i, (n, v) in enumerate([("y1", y1), ("y2", y2)]):
        with open("%s/test_data_set_0/output_%d.pb" % (name, i), "wb") as f:
            f.write(nh.from_array(v.astype(np.float32), n).SerializeToString())


neck("neck_nhwc", "nearest", "asymmetric")
neck("neck_nhwc_bilinear", "linear", "half_pixel")
neck("neck_nhwc_align", "linear", "align_corners")
# the skip branches 3x3 convs (not 1x1s storing through a view of their pixels): the Concat's
# parts (the Resize's and a conv's output) both go in place, then the Concat, with its two
# writers' stores, into the padded copy that the 3x3 conv after it reads
neck("neck_nhwc_pad_cat", "nearest", "asymmetric", 3)
