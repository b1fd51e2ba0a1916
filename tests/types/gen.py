# gen.py OUTDIR [bench] - models with the types that Debian's onnx 1.12 has no helpers for,
# written by hand as TensorProtos (data_type numbers from the ONNX changelog: 21 uint4, 22
# int4), with numpy references from the spec's formulas in float64. One directory per case:
# model.onnx and test_data_set_0 (and the raw data with meta.json for tests/opsets/ort.js).
# With `bench`: int4_decoder and float_decoder instead, the weight-only int4 model and the
# float model of the same (dequantized) weights, for tests/types.sh --bench.
import os, sys, json
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

rng = np.random.default_rng(21)
OUT = sys.argv[1]
UINT4, INT4 = 21, 22


def nibbles(name, a, signed, int32_data=False):
    """An int4 (signed) or uint4 TensorProto of the integer array a, two values a byte, the
    first in the low nibble (raw_data, or one packed byte per int32_data element)."""
    lo, hi = (-8, 7) if signed else (0, 15)
    assert a.min() >= lo and a.max() <= hi
    flat = (a.reshape(-1).astype(np.int64) & 15).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
    t = T()
    t.name = name
    t.data_type = INT4 if signed else UINT4
    t.dims.extend(a.shape)
    if int32_data:
        t.int32_data.extend(int(b) for b in packed)
    else:
        t.raw_data = packed.tobytes()
    return t


def save(name, nodes, inputs, outputs, opset, inits=()):
    """inputs/outputs: lists of (name, array); inits: TensorProtos or (name, array)."""
    d = os.path.join(OUT, name)
    os.makedirs(d + '/test_data_set_0', exist_ok=True)
    tt = lambda a: nh.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info(n, tt(a), list(a.shape)) for n, a in inputs],
                     [h.make_tensor_value_info(n, tt(a), list(a.shape)) for n, a in outputs],
                     [i if isinstance(i, T) else nh.from_array(i[1], i[0]) for i in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 10
    onnx.save(m, d + '/model.onnx')
    meta = {}
    for kind, vals in (('input', inputs), ('output', outputs)):
        meta[kind + 's'] = []
        for i, (n, a) in enumerate(vals):
            open(f'{d}/test_data_set_0/{kind}_{i}.pb', 'wb').write(nh.from_array(a, n).SerializeToString())
            meta[kind + 's'].append({'name': n, 'type': str(a.dtype), 'shape': list(a.shape)})
            a.astype(a.dtype.newbyteorder('<')).tofile(f'{d}/{kind}_{i}.bin')
    json.dump(meta, open(d + '/meta.json', 'w'))


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def q4(shape, signed):
    return rng.integers(-8 if signed else 0, 8 if signed else 16, shape).astype(np.int8 if signed else np.uint8)


def dequant(w, s, zp, axis, block):
    """DequantizeLinear-21's reference: scale and zero point repeated over their block (or
    broadcast along axis), (w - zp) * s in float64."""
    w = w.astype(np.float64)
    if block:
        s = np.repeat(s, block, axis=axis).take(range(w.shape[axis]), axis=axis)
        zp = np.repeat(zp, block, axis=axis).take(range(w.shape[axis]), axis=axis)
    elif axis is not None:
        shp = [1] * w.ndim
        shp[axis] = -1
        s, zp = s.reshape(shp), zp.reshape(shp)
    return (w - zp.astype(np.float64)) * s.astype(np.float64)


def dq_case(name, op, x, w, signed, axis, block, trans=False, zp=True, int32_data=False):
    """y = op(x, DequantizeLinear(w)) with w int4/uint4 (op MatMul, or Gemm with transB)."""
    K = w.shape[axis] if block else None
    if block:
        sshape = list(w.shape)
        sshape[axis] = -(-w.shape[axis] // block)
    else:
        sshape = [w.shape[axis]]
    s = (rng.uniform(0.01, 0.1, sshape)).astype(np.float32)
    z = q4(sshape, signed) if zp else np.zeros(sshape, np.int8 if signed else np.uint8)
    wf = dequant(w, s, z, axis, block)
    y = x.astype(np.float64) @ (wf.T if trans else wf)
    attrs = {'axis': axis}
    if block:
        attrs['block_size'] = block
    ins = ['w', 's', 'z'] if zp else ['w', 's']
    inits = [nibbles('w', w, signed, int32_data), ('s', s)] + ([nibbles('z', z, signed)] if zp else [])
    mm = h.make_node('Gemm', ['x', 'wf'], ['y'], transB=1) if trans else h.make_node('MatMul', ['x', 'wf'], ['y'])
    save(name, [h.make_node('DequantizeLinear', ins, ['wf'], **attrs), mm], [('x', x)],
         [('y', y.astype(np.float32))], 21, inits)


if len(sys.argv) > 2 and sys.argv[2] == 'bench':
    # a small decoder's MLP stack at batch 1: 4 layers, 3.1M weights (12.6 MB float32), int4
    # with float scales per block of 32 along K (what weight-only quantizers write)
    dims = [512, 1536, 512, 1536, 512]
    x = randn(1, dims[0])
    nq, nf, iq, inf_ = [], [], [], []
    prev = 'x'
    for i in range(4):
        K, N = dims[i], dims[i + 1]
        w = q4((K, N), True)
        s = rng.uniform(0.001, 0.01, (K // 32, N)).astype(np.float32)
        z = np.zeros((K // 32, N), np.int8)
        wf = dequant(w, s, z, 0, 32).astype(np.float32)
        iq += [nibbles(f'w{i}', w, True), (f's{i}', s)]
        inf_ += [(f'w{i}', wf)]
        nq += [h.make_node('DequantizeLinear', [f'w{i}', f's{i}'], [f'wf{i}'], axis=0, block_size=32),
               h.make_node('MatMul', [prev, f'wf{i}'], [f'm{i}'])]
        nf += [h.make_node('MatMul', [prev, f'w{i}'], [f'm{i}'])]
        act = [h.make_node('Relu', [f'm{i}'], [f'a{i}'])] if i < 3 else []
        nq += act
        nf += act
        prev = f'a{i}' if i < 3 else f'm{i}'
    y = x.astype(np.float64)
    for i in range(4):
        y = y @ inf_[i][1].astype(np.float64)
        if i < 3:
            y = np.maximum(y, 0)
    y = y.astype(np.float32)
    for name, nodes, inits in (('int4_decoder', nq, iq), ('float_decoder', nf, inf_)):
        nodes[-1].output[0] = 'y'
        save(name, nodes, [('x', x)], [('y', y)], 21, inits)
    sys.exit(0)

# ---- int4/uint4 weights behind DequantizeLinear-21, read by MatMul and Gemm ----
dq_case('dq_int4_matmul_blocked', 'MatMul', randn(3, 64), q4((64, 40), True), True, 0, 32)
dq_case('dq_uint4_matmul_axis1_odd', 'MatMul', randn(2, 47), q4((47, 33), False), False, 1, 0)
dq_case('dq_int4_gemm_transb_short_block', 'Gemm', randn(4, 40), q4((24, 40), True), True, 1, 16, trans=True)
dq_case('dq_int4_matvec_panels', 'MatMul', randn(1, 256), q4((256, 200), True), True, 0, 32)
dq_case('dq_uint4_matvec_int32_data', 'MatMul', randn(1, 96), q4((96, 130), False), False, 0, 32,
        zp=False, int32_data=True)
dq_case('dq_int4_batched_rows', 'MatMul', randn(2, 5, 128), q4((128, 72), True), True, 0, 64)

# a DequantizeLinear of int4 that no MatMul reads (folded into floats) next to one per tensor
w = q4((5, 7), True)
x = randn(5, 7)
save('dq_int4_folded_per_tensor', [h.make_node('DequantizeLinear', ['w', 's'], ['wf']),
                                   h.make_node('Add', ['x', 'wf'], ['y'])],
     [('x', x)], [('y', (x + w.astype(np.float32) * np.float32(0.25)).astype(np.float32))], 21,
     [nibbles('w', w, True), ('s', np.array(0.25, np.float32))])
