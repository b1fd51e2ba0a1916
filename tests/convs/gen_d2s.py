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


def write_case(name, nodes, xs, x, y, init):
    """NAME/model.onnx (graph x -> y, opset 13) and its test_data_set_0."""
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, xs)],
                     [h.make_tensor_value_info("y", T.FLOAT, list(y.shape))], init)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    with open(name + "/test_data_set_0/input_0.pb", "wb") as f:
        f.write(nh.from_array(x, "x").SerializeToString())
    with open(name + "/test_data_set_0/output_0.pb", "wb") as f:
        f.write(nh.from_array(y.astype(np.float32), "y").SerializeToString())


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
    write_case(name, nodes, xs, x, y, [])


# Sub-pixel nets (ESPCN, EDSR): 3x3 convs into a DepthToSpace, which reads its channels as an
# affine function of the channel loop and so takes NHWC with the convs around it (from then on
# channel-last: passes/schedule.c reads_c_as_channel), and a last 3x3 conv to fewer output
# channels than a vector (9 before a DepthToSpace, 3 for an image), each output a vector
# reduction over the channels of a padded NHWC input (few_taps). Own generator, so that the
# cases above keep their data.
rng2 = np.random.default_rng(21)


def conv3(x, w, b):
    n, c, hh, ww = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], hh, ww))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + hh, j:j + ww], w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def subpixel(name, xs, layers):
    """layers: ("conv", M, act) or ("d2s", b, mode); act None, "Relu" or "Tanh"."""
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    x = rng2.standard_normal(xs).astype(np.float32)
    y, prev, c, nodes, init = x.astype(np.float64), "x", xs[1], [], []
    for k, (op, a, b) in enumerate(layers):
        out = "y" if k == len(layers) - 1 else "t%d" % k
        if op == "d2s":
            nodes.append(h.make_node("DepthToSpace", [prev], [out], blocksize=a, mode=b))
            y, c = d2s(y, a, b), c // (a * a)
        else:
            w = (rng2.standard_normal([a, c, 3, 3]) / np.sqrt(9 * c)).astype(np.float32)
            bias = (rng2.standard_normal(a) * 0.1).astype(np.float32)
            init += [nh.from_array(w, "w%d" % k), nh.from_array(bias, "b%d" % k)]
            conv_out = out if b is None else "c%d" % k
            nodes.append(h.make_node("Conv", [prev, "w%d" % k, "b%d" % k], [conv_out], pads=[1, 1, 1, 1]))
            y = conv3(y, w.astype(np.float64), bias)
            if b is not None:
                nodes.append(h.make_node(b, [conv_out], [out]))
                y = np.maximum(y, 0) if b == "Relu" else np.tanh(y)
            c = a
        prev = out
    write_case(name, nodes, xs, x, y, init)


subpixel("espcn_nhwc", [1, 4, 13, 17], [("conv", 32, "Tanh"), ("conv", 32, "Tanh"), ("conv", 9, None), ("d2s", 3, "CRD")])
subpixel("edsr_nhwc", [1, 3, 11, 10], [("conv", 32, "Relu"), ("conv", 128, None), ("d2s", 2, "CRD"), ("conv", 32, "Relu"),
                                       ("conv", 128, None), ("d2s", 2, "DCR"), ("conv", 3, None)])
