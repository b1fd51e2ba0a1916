"""tests/detector/gen.py OUT | --pb OUT - the detector of `make check-detector` (tests/detector.sh).

gen.py OUT exports torchvision's SSDlite320-MobileNetV3-Large with its post-process (random
weights: torch.manual_seed(0), no download; batch-norm statistics from random images) in eval
mode at 1x3x320x320, opset 17, as OUT/model.onnx, and writes one seeded input as
OUT/test_data_set_0/input_0.pb, as raw little-endian OUT/input_0.bin with OUT/inputs.json for
tests/detector/ort.js, and torch's own outputs as OUT/torch_J.npy. The export takes about 12 s,
so it is skipped when OUT/export.key says it came from this file and the same torch and
torchvision.
gen.py --pb OUT turns onnxruntime's outputs (OUT/output_J.bin and OUT/outs.json from ort.js)
into OUT/test_data_set_0/output_J.pb, named as the graph's outputs, and prints how they
compare with torch's (the reference is onnxruntime's: it runs the exported graph itself)."""
import hashlib
import json
import os
import sys

import numpy as np

SEED = 0
SHAPE = (1, 3, 320, 320)


def export_key():
    import torch
    import torchvision
    with open(__file__, "rb") as f:
        src = f.read()
    return hashlib.sha256(src + ("\0%s\0%s" % (torch.__version__,
                                               torchvision.__version__)).encode()).hexdigest()


def export(out):
    import torch
    import torchvision
    from onnx import numpy_helper
    key, keyfile = export_key(), os.path.join(out, "export.key")
    model = os.path.join(out, "model.onnx")
    try:
        with open(keyfile) as f:
            if f.read().strip() == key and os.path.isfile(model):
                print("detector: export cached (%s)" % model)
                return
    except OSError:
        pass
    if os.path.exists(keyfile):
        os.remove(keyfile)
    torch.manual_seed(SEED)
    m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None).eval()
    # the input from its own seed, so that it does not depend on how many numbers the
    # weights' initialisation drew
    x = torch.rand(SHAPE, generator=torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        # Random weights under batch norms at their initial statistics (mean 0, variance 1)
        # shrink the features to 1e-13: every class score would be 1/91 and every box its
        # anchor, leaving the backbone and the score order untested. The norms' statistics
        # are therefore those of four other random images (a cumulative average).
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.reset_running_stats()
                mod.momentum = None
        m.train()
        m.backbone(torch.rand((4,) + SHAPE[1:], generator=torch.Generator().manual_seed(SEED + 2)))
        m.eval()
        ref = m([x[0]])[0]
        torch.onnx.export(m, x, model, opset_version=17)
    # torchvision's detection output is a list of dicts; the export flattens it in this order
    for j, k in enumerate(("boxes", "scores", "labels")):
        np.save(os.path.join(out, "torch_%d.npy" % j), ref[k].numpy())
    a = x.numpy()
    sd = os.path.join(out, "test_data_set_0")
    os.makedirs(sd, exist_ok=True)
    import onnx
    g = onnx.load(model, load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    name = [i.name for i in g.input if i.name not in inits][0]
    with open(os.path.join(sd, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(a, name).SerializeToString())
    a.astype("<f4").tofile(os.path.join(out, "input_0.bin"))
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump([{"name": name, "type": "float32", "shape": list(SHAPE)}], f)
    with open(keyfile, "w") as f:
        f.write(key + "\n")
    print("detector: exported %s (%d nodes)" % (model, len(g.node)))


TYPES = {"float32": "<f4", "int64": "<i8"}


def to_pb(out):
    import onnx
    from onnx import numpy_helper
    g = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False).graph
    with open(os.path.join(out, "outs.json")) as f:
        outs = json.load(f)
    sd = os.path.join(out, "test_data_set_0")
    for j, o in enumerate(outs):
        a = np.fromfile(os.path.join(out, "output_%d.bin" % j),
                        dtype=TYPES[o["type"]]).reshape(o["dims"])
        with open(os.path.join(sd, "output_%d.pb" % j), "wb") as f:
            f.write(numpy_helper.from_array(a, g.output[j].name).SerializeToString())
        t = np.load(os.path.join(out, "torch_%d.npy" % j))
        same = t.shape == a.shape
        diff = float(np.max(np.abs(t.astype(np.float64) - a))) if same and a.size else 0.0
        print("detector: output %d %s %s, torch %s%s" % (
            j, g.output[j].name, list(a.shape), list(t.shape),
            ", max |difference| %.3g" % diff if same else ""))


if __name__ == "__main__":
    if sys.argv[1] == "--pb":
        to_pb(sys.argv[2])
    else:
        os.makedirs(sys.argv[1], exist_ok=True)
        export(sys.argv[1])
