# casefile.py - writes one test case of tests/opsets/gen.py and tests/types/gen.py: OUT/NAME
# holding model.onnx and test_data_set_0, and the same data raw (little-endian) with
# meta.json for onnxruntime (tests/opsets/ort.js).
import os, json
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

NP2T = {np.float32: T.FLOAT, np.float64: T.DOUBLE, np.float16: T.FLOAT16, np.int64: T.INT64,
        np.int32: T.INT32, np.uint32: T.UINT32, np.uint64: T.UINT64, np.int8: T.INT8, np.uint8: T.UINT8, np.int16: T.INT16,
        np.uint16: T.UINT16, np.bool_: T.BOOL, np.object_: T.STRING}


def ttype(a):
    return NP2T[a.dtype.type]


def save(out, name, nodes, inputs, outputs, opset, inits=(), ir_version=8):
    """inputs/outputs: lists of (name, array); inits: TensorProtos or (name, array)."""
    d = os.path.join(out, name)
    os.makedirs(d + '/test_data_set_0', exist_ok=True)
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info(n, ttype(a), list(a.shape)) for n, a in inputs],
                     [h.make_tensor_value_info(n, ttype(a), list(a.shape)) for n, a in outputs],
                     [i if isinstance(i, T) else nh.from_array(i[1], i[0]) for i in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = ir_version
    onnx.save(m, d + '/model.onnx')
    meta = {}
    for kind, vals in (('input', inputs), ('output', outputs)):
        meta[kind + 's'] = []
        for i, (n, a) in enumerate(vals):
            open(f'{d}/test_data_set_0/{kind}_{i}.pb', 'wb').write(nh.from_array(a, n).SerializeToString())
            meta[kind + 's'].append({'name': n, 'type': str(a.dtype), 'shape': list(a.shape)})
            if a.dtype == object:       # strings: their values in meta.json
                meta[kind + 's'][-1].update(type='string', values=[str(v) for v in a.flat])
            else:
                a.astype(a.dtype.newbyteorder('<')).tofile(f'{d}/{kind}_{i}.bin')
    json.dump(meta, open(d + '/meta.json', 'w'))
