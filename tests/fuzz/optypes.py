#!/usr/bin/env python3
"""tests/fuzz/optypes.py [ONNXCC] [OUTDIR] - every op of ir/ops.def with inputs of every element type.

A sweep next to `make fuzz` (which mutates bytes and rarely hits a type constraint it has not
seen): for each op, models whose inputs are all one type, and ones where only input 0 has it
(the others float32), in ranks 1 and 4, are compiled. Each must compile or be refused as a
user error (status 0 or 1); any other status is an internal error or a crash (and with
`make SANITIZE=1 fuzz-types`, the ASan+UBSan build, so is a sanitizer report), and the model
is kept in OUTDIR (default build-fuzz/types/) to become a regression input in
tests/fuzz/crashes/. Prints one line per failure and "types: N passed, N failed". It takes
about ten minutes, so `make test` does not run it: `make fuzz-types` does.
"""
import os
import re
import subprocess
import sys

from onnx import TensorProto as T, helper

ONNXCC = sys.argv[1] if len(sys.argv) > 1 else "./onnxcc"
OUT = sys.argv[2] if len(sys.argv) > 2 else "build-fuzz/types"
os.makedirs(OUT, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
ops = []
for line in open(os.path.join(here, "../../ir/ops.def")):
    m = re.match(r"OP\((\w+),\s*(\d+),\s*(\d+),\s*(\w+),\s*(\d+),", line)
    if m:
        ops.append((m.group(1), int(m.group(3)), int(m.group(5))))
# attributes without which an op is refused before its types are looked at
ATTRS = {
    "LRN": {"size": 3}, "AveragePool": {"kernel_shape": [2, 2]}, "MaxPool": {"kernel_shape": [2, 2]},
    "LpPool": {"kernel_shape": [2, 2]}, "MaxRoiPool": {"pooled_shape": [1, 1]},
    "Cast": {"to": T.FLOAT}, "DepthToSpace": {"blocksize": 1}, "SpaceToDepth": {"blocksize": 1},
    "Concat": {"axis": 0}, "Einsum": {"equation": "ij->ji"}, "Split": {"axis": 0},
    "Gather": {"axis": 0}, "ConcatFromSequence": {"axis": 0}, "MaxUnpool": {"kernel_shape": [2, 2]},
    "EyeLike": {}, "RandomUniformLike": {}, "Bernoulli": {},
}
TYPES = [T.BOOL, T.INT32, T.FLOAT16, T.DOUBLE, T.INT8, T.UINT64, T.FLOAT, T.INT64]
passed = failed = 0
for op, nin, nout in ops:
    for t in TYPES:
        for shape in ([1, 2, 3, 3], [3]):
            for only_first in (False, True):
                names = ["i%d" % k for k in range(nin)]
                types = [T.FLOAT if only_first and k else t for k in range(nin)]
                node = helper.make_node(op, names, ["o%d" % k for k in range(max(nout, 1))],
                                        **ATTRS.get(op, {}))
                g = helper.make_graph(
                    [node], "g", [helper.make_tensor_value_info(a, b, shape) for a, b in zip(names, types)],
                    [helper.make_tensor_value_info("o0", t, None)])
                m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
                m.ir_version = 8
                path = os.path.join(OUT, "m.onnx")
                with open(path, "wb") as f:
                    f.write(m.SerializeToString())
                try:
                    r = subprocess.run([ONNXCC, path, "-o", os.path.join(OUT, "m.o")],
                                       capture_output=True, text=True, timeout=60)
                    status, why = r.returncode, (r.stderr.strip().splitlines() or [""])[-1]
                    san = [l for l in r.stderr.splitlines() if "runtime error:" in l or "Sanitizer" in l]
                    if san:     # `make SANITIZE=1 fuzz-types`: a report fails, whatever the status
                        status, why = "sanitizer", san[0]
                except subprocess.TimeoutExpired:
                    status, why = "timeout", ""
                if status in (0, 1):
                    passed += 1
                    continue
                failed += 1
                keep = os.path.join(OUT, "%s_%s_r%d%s.onnx" % (op, T.DataType.Name(t).lower(), len(shape),
                                                              "_first" if only_first else ""))
                os.replace(path, keep)
                print("FAIL %s: status %s: %s" % (keep, status, why[:160]))
print("types: %d passed, %d failed" % (passed, failed))
sys.exit(failed != 0)
