#!/usr/bin/python3
"""gen.py OUTDIR [MODEL.onnx...] - prepares the models and inputs of `make bench` (tests/bench.sh).

Writes each model as OUTDIR/NAME/model.onnx (generated, never committed):
  with PyTorch (Debian's python3-torch and python3-torchvision; tests/bench/models.py):
    resnet18, mobilenetv2, transformer, lstm, kws, mlp   public architectures, random weights;
    unet, fpn, hifigan   decoders: a small U-Net, an FPN text-detection head (DBNet-style),
                         a HiFi-GAN-style ConvTranspose1d generator;
  always (onnx helpers):
    sgemm512  C = A B with A and B 512x512 float inputs: a GEMM with both operands given at
              run time, as BLAS's SGEMM takes them (no side can pack B ahead of time);
    mlp1024   1x1024 -> three 1024-wide Gemm+Relu layers -> 10-way Gemm (matrix-vector
              products over constant weights: memory-bound);
    floor     one Relu of one float: what a call costs on each side when there is no work
              (for onnxruntime-node, mostly its JavaScript and N-API layer);
  the widened set (issue 16; models.py WIDE): resnet50, resnext50, regnety400, densenet121,
    googlenet, inceptionv3, squeezenet, shufflenetv2, mnasnet, mobilenetv3, efficientnetb0,
    convnext, vitb16, swint, vgg16 (torchvision 0.14, random weights), deeplabv3 (segmentation)
    and gpt (a GPT-2-style causal decoder); each gets OUTDIR/NAME/wide, which tells bench.sh
    to time it at fewer builds and rounds;
  without PyTorch, instead of its models (and saying so on stderr):
    convnet   1x3x256x256 image -> stride-2 conv stem, two ResNet-style basic blocks (conv-BN-relu-
              conv-BN + skip, relu) at 128x128x16 and 64x64x32, global average pool, 10-way Gemm.
  always (committed, tests/int8/gen.py):
    NAME_i8   the quantized models of tests/int8 (lenet, kws, mlp: QDQ; lenet_qop: QOperator),
    NAME_f32  the float models they were quantized from, for the speed of int8 against float;
              each int8 row gets OUTDIR/NAME/tol, the largest scaled output difference from
              onnxruntime that bench.sh accepts: four output quanta (onnxruntime runs the QDQ
              groups as its own fused integer kernels, whose requantisation may round a
              layer's value the other way, a difference the following layers carry on).
Models given on the command line are added as they are, named after their folder.
BENCH_MODELS (environment), if set, is the list of names to prepare (the others are skipped);
a name gen.py does not know is an error.
A PyTorch export is skipped when OUTDIR/NAME/model.onnx exists and OUTDIR/NAME/export.key
says it came from the same models.py and the same torch and torchvision (the big models take
a minute each to export).
Then, for every model, writes one random input set as raw little-endian files
OUTDIR/NAME/input_K.bin (K in graph order, initializers excluded), the layout both
tests/bench/harness.c and tests/bench/ort.js read, and their names, dtypes and shapes as
OUTDIR/NAME/inputs.json for ort.js (onnxruntime-node cannot tell them), and the model's
multiply-accumulates per inference as OUTDIR/NAME/macs (tests/macs.py). NAME is a shell
identifier; gen.py prints the names, one a line. Seeded (inputs by model name), so that every
run, and every selection of BENCH_MODELS, benchmarks the same numbers."""
import hashlib
import json
import os
import re
import shutil
import sys
import zlib

import numpy as np
from onnx import TensorProto, helper, load, numpy_helper, save
from onnx.checker import check_model

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import macs  # noqa: E402  (tests/macs.py: the one MAC count of the tests)

rng = np.random.default_rng(1234)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


class Builder:
    """Collects nodes and initializers; names every value after the node that makes it."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def fresh(self, op):
        self.n += 1
        return "%s_%d" % (op.lower(), self.n)

    def node(self, op, inputs, **attrs):
        out = self.fresh(op)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def weight(self, shape, fan_in):
        name = self.fresh("w")
        self.inits.append(init(name, rng.normal(0, np.sqrt(2.0 / fan_in), shape)))
        return name

    def conv_bn(self, x, cin, cout, stride):
        w = self.weight((cout, cin, 3, 3), cin * 9)
        y = self.node("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                      strides=[stride, stride])
        names = []
        for what, a in (("scale", rng.uniform(0.5, 1.5, cout)), ("bias", rng.normal(0, 0.1, cout)),
                        ("mean", rng.normal(0, 0.1, cout)), ("var", rng.uniform(0.5, 1.5, cout))):
            names.append(self.fresh(what))
            self.inits.append(init(names[-1], a))
        return self.node("BatchNormalization", [y] + names, epsilon=1e-5)

    def basic_block(self, x, c):
        y = self.node("Relu", [self.conv_bn(x, c, c, 1)])
        y = self.conv_bn(y, c, c, 1)
        return self.node("Relu", [self.node("Add", [y, x])])

    def gemm(self, x, k, n):
        w = self.weight((k, n), k)
        b = self.fresh("b")
        self.inits.append(init(b, rng.normal(0, 0.1, n)))
        return self.node("Gemm", [x, w, b])

    def model(self, name, x, xshape, y, yshape):
        g = helper.make_graph(self.nodes, name,
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, xshape)],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, yshape)],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="onnxcc tests/bench/gen.py")
        check_model(m)
        return m


def convnet():
    b = Builder()
    x = b.node("Relu", [b.conv_bn("input", 3, 16, 2)])      # 128x128x16
    x = b.basic_block(x, 16)
    x = b.node("Relu", [b.conv_bn(x, 16, 32, 2)])          # 64x64x32
    x = b.basic_block(x, 32)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    return b.model("convnet", "input", [1, 3, 256, 256], b.gemm(x, 32, 10), [1, 10])


def mlp1024():
    b = Builder()
    x = "input"
    for k in (1024, 1024, 1024):
        x = b.node("Relu", [b.gemm(x, k, 1024)])
    return b.model("mlp1024", "input", [1, 1024], b.gemm(x, 1024, 10), [1, 10])


def floor():
    b = Builder()
    return b.model("floor", "input", [1], b.node("Relu", ["input"]), [1])


def sgemm512():
    n = 512
    node = helper.make_node("MatMul", ["A", "B"], ["C"], name="sgemm")
    g = helper.make_graph([node], "sgemm512",
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n, n]) for x in "AB"],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="onnxcc tests/bench/gen.py")
    check_model(m)
    return m


# ONNX dtype -> numpy dtype and onnxruntime's name of it
DTYPES = {TensorProto.FLOAT: (np.float32, "float32"), TensorProto.DOUBLE: (np.float64, "float64"),
          TensorProto.INT32: (np.int32, "int32"), TensorProto.INT64: (np.int64, "int64"),
          TensorProto.BOOL: (np.bool_, "bool")}


def write_inputs(m, path, outdir, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inits = {t.name for t in m.graph.initializer}
    k, meta = 0, []
    for v in m.graph.input:
        if v.name in inits:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value for d in t.shape.dim]
        if any(d <= 0 for d in dims):
            sys.exit("gen.py: %s: input %s has symbolic dims" % (path, v.name))
        if t.elem_type not in DTYPES:
            sys.exit("gen.py: %s: input %s has an unsupported dtype" % (path, v.name))
        a = rng.uniform(-1, 1, dims).astype(DTYPES[t.elem_type][0])
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(outdir, "input_%d.bin" % k))
        meta.append({"name": v.name, "type": DTYPES[t.elem_type][1], "shape": dims})
        k += 1
    with open(os.path.join(outdir, "inputs.json"), "w") as f:
        json.dump(meta, f)


def export_key(torch_models, name):
    """What a cached export depends on: models.py's text, the torch and torchvision versions."""
    import torch
    import torchvision
    with open(torch_models.__file__, "rb") as f:
        src = f.read()
    h = hashlib.sha256(src + ("\0%s\0%s\0%s" % (torch.__version__, torchvision.__version__,
                                                    name)).encode())
    return h.hexdigest()


def main():
    out = sys.argv[1]
    only = os.environ.get("BENCH_MODELS", "").split()
    try:
        import models as torch_models
    except ImportError as e:
        torch_models = None
        print("gen.py: no PyTorch (%s): ResNet-18, MobileNetV2, the transformer layer, the LSTM, "
              "the KWS CNN, the MLP and the decoders are left out; convnet stands in" % e, file=sys.stderr)
    paths = {}
    generated = [("floor", floor), ("sgemm512", sgemm512), ("mlp1024", mlp1024)]
    if not torch_models:
        generated.append(("convnet", convnet))
    # always built, in this order (mlp1024's weights come from the shared rng), listed if chosen
    for name, make in generated:
        os.makedirs(os.path.join(out, name), exist_ok=True)
        paths[name] = os.path.join(out, name, "model.onnx")
        save(make(), paths[name])
    known = list(paths)
    wide = set()
    for group in ((torch_models.MODELS, torch_models.WIDE) if torch_models else ()):
        for name, make in group:
            known.append(name)
            if group is torch_models.WIDE:
                wide.add(name)
            if only and name not in only:
                continue
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            paths[name] = os.path.join(d, "model.onnx")
            key, keyfile = export_key(torch_models, name), os.path.join(d, "export.key")
            try:
                with open(keyfile) as f:
                    cached = f.read().strip() == key and os.path.isfile(paths[name])
            except OSError:
                cached = False
            if not cached:
                if os.path.exists(keyfile):
                    os.remove(keyfile)
                torch_models.export(make, paths[name])
                with open(keyfile, "w") as f:
                    print(key, file=f)
    int8 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "int8")
    tols = {}
    for name in sorted(os.listdir(int8)):
        d = os.path.join(int8, name)
        if not os.path.isfile(os.path.join(d, "float.onnx")):    # (ops: a test model only)
            continue
        known += [name + "_i8", name + "_f32"]
        paths[name + "_i8"] = os.path.join(d, "model.onnx")
        paths[name + "_f32"] = os.path.join(d, "float.onnx")
        with open(os.path.join(d, "atol")) as f:
            tols[name + "_i8"] = 4 * float(f.read())
    for path in sys.argv[2:]:
        name = re.sub(r"\W", "_", os.path.basename(os.path.dirname(os.path.abspath(path))))
        known.append(name)
        paths[name] = path
    unknown = [n for n in only if n not in known]
    if unknown:
        sys.exit("gen.py: BENCH_MODELS: unknown %s; known: %s" % (" ".join(unknown), " ".join(known)))
    for name, path in paths.items():
        if only and name not in only:
            continue
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        if os.path.abspath(path) != os.path.abspath(os.path.join(d, "model.onnx")):
            shutil.copyfile(path, os.path.join(d, "model.onnx"))
        m = load(path)
        write_inputs(m, path, d, name)
        if name in wide:
            open(os.path.join(d, "wide"), "w").close()
        elif os.path.exists(os.path.join(d, "wide")):
            os.remove(os.path.join(d, "wide"))
        if name in tols:
            with open(os.path.join(d, "tol"), "w") as f:
                print("%.6g" % tols[name], file=f)
        try:
            n = macs.count_model(m)
        except Exception as e:     # tests/macs.py's shape folding cannot follow every graph
            n = 0
            print("gen.py: %s: no MAC count (tests/macs.py: %r); GFLOP shown as -" % (name, e),
                  file=sys.stderr)
        with open(os.path.join(d, "macs"), "w") as f:
            print(n, file=f)
        print(name)


if __name__ == "__main__":
    main()
