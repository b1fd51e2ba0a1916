#!/usr/bin/python3
"""gen_models.py - writes the sample models that onnxcc's tests and demo use.

Each model goes to models/NAME/model.onnx with models/NAME/test_data_set_0/{input_0,output_0}.pb,
the layout of the ONNX backend test data, so `onnxcc check models/NAME/model.onnx` works on it.
The expected outputs come from the small numpy reference below (float32, written from the ONNX
op definitions, not from any runtime), so a check compares onnxcc against an independent
implementation rather than against itself.

  mlp         Flatten, Gemm, Relu, Gemm, Relu, Gemm, Softmax (how PyTorch exports an MLP)
  cnn         Conv, BatchNormalization, Relu, MaxPool, Add (broadcast constant), Conv,
              BatchNormalization, Relu, GlobalAveragePool, Flatten, Gemm; the input is reshaped
              through Shape->Gather->Unsqueeze->Concat->Reshape like `x.view(x.size(0), ...)`,
              which only compile-time folding turns into a static shape
  mlp_opset9  the mlp at opset 9 with old-style attributes (Clip min/max, Softmax axis) for the
              canonicalisation pass
  example     the digit classifier of the demo (models/demo.c), trained here on the 8x8 digits of
              sklearn.datasets.load_digits; also writes models/example/samples.h

Run: /usr/bin/python3 models/gen_models.py   (needs python3-onnx, python3-numpy, python3-sklearn)
Written with onnx 1.12.0 and numpy 1.24; SEED fixes the weights, the split and the training.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20240601
ONNX_VERSION_USED = "1.12.0"
HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32

# ---------------------------------------------------------------------------------------------
# numpy reference: one function per ONNX op, float32 throughout, NCHW
# ---------------------------------------------------------------------------------------------


def ref_conv(x, w, b, pads, strides=(1, 1)):
    """Conv with explicit loops over the kernel window (group 1, no dilation)."""
    n, c, h, wd = x.shape
    m, c2, kh, kw = w.shape
    assert c == c2
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), dtype=F32)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j]).astype(F32)
    return (y + b.reshape(1, m, 1, 1)).astype(F32)


def ref_batchnorm(x, scale, bias, mean, var, eps=1e-5):
    sh = (1, -1, 1, 1)
    return ((x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + F32(eps)) * scale.reshape(sh)
            + bias.reshape(sh)).astype(F32)


def ref_relu(x):
    return np.maximum(x, F32(0))


def ref_clip(x, lo, hi):
    return np.minimum(np.maximum(x, F32(lo)), F32(hi))


def ref_maxpool(x, k, s):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = np.full((n, c, oh, ow), -np.inf, dtype=F32)
    for i in range(k):
        for j in range(k):
            y = np.maximum(y, x[:, :, i:i + s * oh:s, j:j + s * ow:s])
    return y


def ref_gap(x):
    return x.mean(axis=(2, 3), keepdims=True, dtype=F32)


def ref_gemm(a, b, c, trans_b=True):
    return (a @ (b.T if trans_b else b) + c).astype(F32)


def ref_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(F32)


# ---------------------------------------------------------------------------------------------
# data: the 8x8 digits, pixels scaled to [0, 1]
# ---------------------------------------------------------------------------------------------


def load_digits_split(rng):
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("gen_models.py: needs python3-sklearn (apt-get install python3-sklearn)")
    d = load_digits()
    x = (d.data / 16.0).astype(F32).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    perm = rng.permutation(len(y))
    ntest = len(y) // 5
    return x[perm[ntest:]], y[perm[ntest:]], x[perm[:ntest]], y[perm[:ntest]]


# ---------------------------------------------------------------------------------------------
# training (plain numpy, Adam, cross-entropy): only to get meaningful weights
# ---------------------------------------------------------------------------------------------


class Adam:
    def __init__(self, params, lr=0.01):
        self.p, self.lr, self.t = params, lr, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, grads):
        self.t += 1
        for k, g in grads.items():
            self.m[k] = 0.9 * self.m[k] + 0.1 * g
            self.v[k] = 0.999 * self.v[k] + 0.001 * g * g
            mh = self.m[k] / (1 - 0.9 ** self.t)
            vh = self.v[k] / (1 - 0.999 ** self.t)
            self.p[k] -= (self.lr * mh / (np.sqrt(vh) + 1e-8)).astype(F32)


def softmax_xent_grad(logits, y):
    p = ref_softmax(logits)
    p[np.arange(len(y)), y] -= 1
    return p / len(y)


def train_mlp(rng, xtr, ytr, sizes=(64, 32, 16, 10), epochs=40):
    p = {}
    for i in range(3):
        p["w%d" % i] = (rng.standard_normal((sizes[i + 1], sizes[i])) *
                        np.sqrt(2.0 / sizes[i])).astype(F32)
        p["b%d" % i] = np.zeros(sizes[i + 1], dtype=F32)
    opt = Adam(p, 0.005)
    x2 = xtr.reshape(len(xtr), -1)
    for _ in range(epochs):
        order = rng.permutation(len(ytr))
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            h0 = x2[idx]
            a1 = h0 @ p["w0"].T + p["b0"]
            h1 = np.maximum(a1, 0)
            a2 = h1 @ p["w1"].T + p["b1"]
            h2 = np.maximum(a2, 0)
            g3 = softmax_xent_grad(h2 @ p["w2"].T + p["b2"], ytr[idx])
            g2 = (g3 @ p["w2"]) * (a2 > 0)
            g1 = (g2 @ p["w1"]) * (a1 > 0)
            opt.step({"w2": g3.T @ h2, "b2": g3.sum(0), "w1": g2.T @ h1, "b1": g2.sum(0),
                      "w0": g1.T @ h0, "b0": g1.sum(0)})
    return p


def im2col3(x):
    """[N,C,8,8] -> [N,8,8,C*9] patches of a 3x3 pad-1 convolution (training only)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)
    return cols.reshape(n, c * 9, h, w).transpose(0, 2, 3, 1)


def train_example_cnn(rng, xtr, ytr, ch=8, epochs=30):
    """Conv3x3(1->ch, pad 1) + Relu + MaxPool2 + Flatten + Gemm(ch*16 -> 10)."""
    p = {"cw": (rng.standard_normal((ch, 9)) * np.sqrt(2.0 / 9)).astype(F32),
         "cb": np.zeros(ch, dtype=F32),
         "fw": (rng.standard_normal((10, ch * 16)) * np.sqrt(2.0 / (ch * 16))).astype(F32),
         "fb": np.zeros(10, dtype=F32)}
    opt = Adam(p, 0.005)
    cols_all = im2col3(xtr)
    for _ in range(epochs):
        order = rng.permutation(len(ytr))
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            n = len(idx)
            cols = cols_all[idx]                               # [n,8,8,9]
            a = cols @ p["cw"].T + p["cb"]                     # [n,8,8,ch]
            r = np.maximum(a, 0)
            blocks = r.reshape(n, 4, 2, 4, 2, ch)
            m = blocks.max(axis=(2, 4))                        # [n,4,4,ch]
            flat = m.transpose(0, 3, 1, 2).reshape(n, -1)      # NCHW flatten order
            g = softmax_xent_grad(flat @ p["fw"].T + p["fb"], ytr[idx])
            gflat = g @ p["fw"]
            gm = gflat.reshape(n, ch, 4, 4).transpose(0, 2, 3, 1)
            mask = blocks == m[:, :, None, :, None, :]
            gr = (mask * gm[:, :, None, :, None, :]).reshape(n, 8, 8, ch) * (a > 0)
            opt.step({"fw": g.T @ flat, "fb": g.sum(0),
                      "cw": gr.reshape(-1, ch).T @ cols.reshape(-1, 9), "cb": gr.sum((0, 1, 2))})
    return {"cw": p["cw"].reshape(ch, 1, 3, 3), "cb": p["cb"], "fw": p["fw"], "fb": p["fb"]}


# ---------------------------------------------------------------------------------------------
# model writers
# ---------------------------------------------------------------------------------------------


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def save(name, graph, opset, inputs, outputs):
    model = helper.make_model(graph, producer_name="onnxcc-gen_models",
                              opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, vals, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
        for i, (v, info) in enumerate(zip(vals, infos)):
            t = numpy_helper.from_array(np.ascontiguousarray(v), info.name)
            with open(os.path.join(d, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(t.SerializeToString())
    size = os.path.getsize(os.path.join(d, "model.onnx"))
    assert size < 1 << 20, name
    print("gen_models: %-10s opset %2d  %6d bytes" % (name, opset, size))


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp_forward(p, x, act2=ref_relu):
    h = x.reshape(len(x), -1)
    h = ref_relu(ref_gemm(h, p["w0"], p["b0"]))
    h = act2(ref_gemm(h, p["w1"], p["b1"]))
    return ref_softmax(ref_gemm(h, p["w2"], p["b2"]))


def write_mlp(p, x):
    N = helper.make_node
    nodes = [N("Flatten", ["input"], ["flat"], name="/Flatten", axis=1),
             N("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["g1"], name="/fc1/Gemm",
               alpha=1.0, beta=1.0, transB=1),
             N("Relu", ["g1"], ["r1"], name="/relu1/Relu"),
             N("Gemm", ["r1", "fc2.weight", "fc2.bias"], ["g2"], name="/fc2/Gemm",
               alpha=1.0, beta=1.0, transB=1),
             N("Relu", ["g2"], ["r2"], name="/relu2/Relu"),
             N("Gemm", ["r2", "fc3.weight", "fc3.bias"], ["logits"], name="/fc3/Gemm",
               alpha=1.0, beta=1.0, transB=1),
             N("Softmax", ["logits"], ["output"], name="/Softmax", axis=1)]
    inits = [init("fc%d.weight" % (i + 1), p["w%d" % i]) for i in range(3)] + \
            [init("fc%d.bias" % (i + 1), p["b%d" % i]) for i in range(3)]
    g = helper.make_graph(nodes, "mlp", [vi("input", [1, 1, 8, 8])], [vi("output", [1, 10])], inits)
    save("mlp", g, 13, [x], [mlp_forward(p, x)])


def write_mlp_opset9(p, x):
    """Opset 9: Clip takes min/max as attributes, Softmax's axis coerces to 2-D, Gemm needs C."""
    N = helper.make_node
    nodes = [N("Flatten", ["input"], ["flat"], axis=1),
             N("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["g1"], transB=1),
             N("Relu", ["g1"], ["r1"]),
             N("Gemm", ["r1", "fc2.weight", "fc2.bias"], ["g2"], transB=1),
             N("Clip", ["g2"], ["r2"], min=0.0, max=6.0),
             N("Gemm", ["r2", "fc3.weight", "fc3.bias"], ["logits"], transB=1),
             N("Softmax", ["logits"], ["output"], axis=1)]
    inits = [init("fc%d.weight" % (i + 1), p["w%d" % i]) for i in range(3)] + \
            [init("fc%d.bias" % (i + 1), p["b%d" % i]) for i in range(3)]
    g = helper.make_graph(nodes, "mlp_opset9", [vi("input", [1, 1, 8, 8])], [vi("output", [1, 10])],
                          inits)
    out = mlp_forward(p, x, act2=lambda h: ref_clip(h, 0.0, 6.0))
    save("mlp_opset9", g, 9, [x], [out])


def write_cnn(rng, x):
    """Random but well-scaled weights; BatchNorm statistics far from identity on purpose."""
    def rnd(*shape, s=0.5):
        return (rng.standard_normal(shape) * s).astype(F32)

    w = {"c1.w": rnd(4, 1, 3, 3), "c1.b": rnd(4, s=0.1),
         "bn1.scale": (1 + rnd(4, s=0.2)), "bn1.bias": rnd(4, s=0.2),
         "bn1.mean": rnd(4, s=0.3), "bn1.var": (0.5 + np.abs(rnd(4))),
         "add.c": rnd(4, 1, 1, s=0.3),
         "c2.w": rnd(8, 4, 3, 3, s=0.3), "c2.b": rnd(8, s=0.1),
         "bn2.scale": (1 + rnd(8, s=0.2)), "bn2.bias": rnd(8, s=0.2),
         "bn2.mean": rnd(8, s=0.3), "bn2.var": (0.5 + np.abs(rnd(8))),
         "fc.w": rnd(10, 8), "fc.b": rnd(10, s=0.1),
         "zero": np.array([0], dtype=np.int64), "tail": np.array([1, 8, 8], dtype=np.int64)}
    N = helper.make_node
    nodes = [
        # x.view(x.size(0), 1, 8, 8), as torch.onnx exports it
        N("Shape", ["input"], ["shape"], name="/Shape"),
        N("Constant", [], ["idx0"], name="/Constant",
          value=numpy_helper.from_array(np.array(0, dtype=np.int64))),
        N("Gather", ["shape", "idx0"], ["batch"], name="/Gather", axis=0),
        N("Unsqueeze", ["batch", "zero"], ["batch1"], name="/Unsqueeze"),
        N("Concat", ["batch1", "tail"], ["newshape"], name="/Concat", axis=0),
        N("Reshape", ["input", "newshape"], ["img"], name="/Reshape"),
        N("Conv", ["img", "c1.w", "c1.b"], ["c1"], name="/conv1/Conv",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        N("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["b1"],
          name="/bn1/BatchNormalization", epsilon=1e-5),
        N("Relu", ["b1"], ["r1"], name="/Relu"),
        N("MaxPool", ["r1"], ["p1"], name="/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        N("Add", ["p1", "add.c"], ["a1"], name="/Add"),
        N("Conv", ["a1", "c2.w", "c2.b"], ["c2"], name="/conv2/Conv",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c2", "bn2.scale", "bn2.bias", "bn2.mean", "bn2.var"], ["b2"],
          name="/bn2/BatchNormalization", epsilon=1e-5),
        N("Relu", ["b2"], ["r2"], name="/Relu_1"),
        N("GlobalAveragePool", ["r2"], ["gap"], name="/GlobalAveragePool"),
        N("Flatten", ["gap"], ["flat"], name="/Flatten", axis=1),
        N("Gemm", ["flat", "fc.w", "fc.b"], ["output"], name="/fc/Gemm", transB=1),
    ]
    inits = [init(k, v) for k, v in w.items()]
    g = helper.make_graph(nodes, "cnn", [vi("input", [1, 64])], [vi("output", [1, 10])], inits)

    h = x.reshape(1, 1, 8, 8)
    h = ref_conv(h, w["c1.w"], w["c1.b"], (1, 1, 1, 1))
    h = ref_relu(ref_batchnorm(h, w["bn1.scale"], w["bn1.bias"], w["bn1.mean"], w["bn1.var"]))
    h = ref_maxpool(h, 2, 2) + w["add.c"][None]
    h = ref_conv(h, w["c2.w"], w["c2.b"], (1, 1, 1, 1))
    h = ref_relu(ref_batchnorm(h, w["bn2.scale"], w["bn2.bias"], w["bn2.mean"], w["bn2.var"]))
    out = ref_gemm(ref_gap(h).reshape(1, -1), w["fc.w"], w["fc.b"])
    save("cnn", g, 13, [x], [out])


def example_forward(p, x):
    h = ref_relu(ref_conv(x, p["cw"], p["cb"], (1, 1, 1, 1)))
    h = ref_maxpool(h, 2, 2).reshape(len(x), -1)
    return ref_softmax(ref_gemm(h, p["fw"], p["fb"]))


def write_example(p, xte, yte):
    N = helper.make_node
    nodes = [N("Conv", ["input", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv",
               kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
             N("Relu", ["c"], ["r"], name="/Relu"),
             N("MaxPool", ["r"], ["m"], name="/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             N("Flatten", ["m"], ["f"], name="/Flatten", axis=1),
             N("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
             N("Softmax", ["logits"], ["probs"], name="/Softmax", axis=1)]
    inits = [init("conv.weight", p["cw"]), init("conv.bias", p["cb"]),
             init("fc.weight", p["fw"]), init("fc.bias", p["fb"])]
    g = helper.make_graph(nodes, "example", [vi("input", [1, 1, 8, 8])], [vi("probs", [1, 10])],
                          inits)
    save("example", g, 13, [xte[:1]], [example_forward(p, xte[:1])])
    write_samples_h(p, xte, yte)


def c_float(v):
    s = "%.9g" % v
    return s + (".0f" if "." not in s and "e" not in s else "f")


def write_samples_h(p, xte, yte, count=8):
    """A few held-out digits for the demo, as C arrays (pixels are multiples of 1/16: exact)."""
    lines = ["/* samples.h - %d held-out 8x8 digits (pixels/16, row-major) and their labels." % count,
             " * Generated by models/gen_models.py (seed %d); do not edit. */" % SEED,
             "#ifndef EXAMPLE_SAMPLES_H", "#define EXAMPLE_SAMPLES_H", "",
             "#define EXAMPLE_NUM_SAMPLES %d" % count, "",
             "static const float example_samples[EXAMPLE_NUM_SAMPLES][64] = {"]
    for i in range(count):
        vals = ", ".join(c_float(v) for v in xte[i].reshape(-1))
        lines.append("    { /* label %d */ %s }," % (yte[i], vals))
    lines += ["};", "",
              "static const int example_labels[EXAMPLE_NUM_SAMPLES] = { %s };" %
              ", ".join(str(int(v)) for v in yte[:count]), "", "#endif", ""]
    with open(os.path.join(HERE, "example", "samples.h"), "w") as f:
        f.write("\n".join(lines))


def main():
    if onnx.__version__ != ONNX_VERSION_USED:
        print("gen_models: note: written with onnx %s, running %s" %
              (ONNX_VERSION_USED, onnx.__version__))
    rng = np.random.default_rng(SEED)
    xtr, ytr, xte, yte = load_digits_split(rng)

    mlp = train_mlp(rng, xtr, ytr)
    acc = (mlp_forward(mlp, xte).argmax(1) == yte).mean()
    print("gen_models: mlp test accuracy %.3f" % acc)
    write_mlp(mlp, xte[1:2])
    write_mlp_opset9(mlp, xte[2:3])
    write_cnn(rng, xte[3].reshape(1, 64))

    ex = train_example_cnn(rng, xtr, ytr)
    pred = example_forward(ex, xte).argmax(1)
    print("gen_models: example test accuracy %.3f (samples.h: %d of 8 right)" %
          ((pred == yte).mean(), (pred[:8] == yte[:8]).sum()))
    write_example(ex, xte, yte)


if __name__ == "__main__":
    main()
