#!/usr/bin/python3
"""gen.py - writes tests/firmware/floats/NAME/test_data_set_0 for the float twins of the int8
models (tests/int8/NAME/float.onnx, which tests/int8/gen.py writes): the int8 model's input
and onnxruntime's output of the float model (tests/int8/ort_run.js: one thread, graph
optimizations off), an implementation independent of onnxcc. tests/firmware/run.sh runs the
float.onnx files in place with these data sets (the *_f32 cases), to hold the conv and dense
layers of float models to issue 16's 2.5 instructions per multiply-accumulate on the M4.

Run: NODE_PATH=.../node_modules /usr/bin/python3 tests/firmware/floats/gen.py
(needs numpy, onnx, node and onnxruntime-node, as tests/int8/gen.py does)
"""
import os
import sys

import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
INT8 = os.path.join(HERE, "..", "..", "int8")
sys.path.insert(0, INT8)
from gen import ort_run  # noqa: E402  (tests/int8/gen.py: runs a model under node)

NAMES = ("kws", "dscnn", "lenet", "mlp")


def main():
    for name in NAMES:
        model = onnx.load(os.path.join(INT8, name, "float.onnx"))
        x = numpy_helper.to_array(onnx.load_tensor(os.path.join(INT8, name, "test_data_set_0", "input_0.pb")))
        (iname,) = [i.name for i in model.graph.input]
        outs = ort_run(model, {iname: x})
        d = os.path.join(HERE, name, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        tensors = [("input_0", x, iname)] + [("output_%d" % k, y, n) for k, (n, y) in enumerate(outs)]
        for fn, a, n in tensors:
            with open(os.path.join(d, fn + ".pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
        print("gen.py: %s: input %s, outputs %s" % (name, list(x.shape), [list(y.shape) for _, y in outs]),
              file=sys.stderr)


if __name__ == "__main__":
    main()
