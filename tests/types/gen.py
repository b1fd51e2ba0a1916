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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'opsets'))
import casefile

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
    casefile.save(OUT, name, nodes, inputs, outputs, opset, inits, ir_version=10)


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

# ---- float8 (ONNX 17-20), from the formats' definitions (Cast-19's docs) ----
F8 = {  # number: (name, exponent bits, mantissa bits, bias, uz: no -0 and NaN 0x80, has inf)
    17: ('e4m3fn', 4, 3, 7, False, False), 18: ('e4m3fnuz', 4, 3, 8, True, False),
    19: ('e5m2', 5, 2, 15, False, True), 20: ('e5m2fnuz', 5, 2, 16, True, False)}


def f8_values(t):
    """The finite non-negative values of float8 type t with their codes, ascending."""
    _, eb, mb, bias, uz, inf = F8[t]
    out = []
    for code in range(128):
        e, m = code >> mb, code & ((1 << mb) - 1)
        if inf and e == (1 << eb) - 1:
            continue                                # e5m2: inf and NaNs
        if not inf and not uz and code == 0x7f:
            continue                                # e4m3fn: NaN
        v = m * 2.0 ** (1 - bias - mb) if e == 0 else (1 + m / 2 ** mb) * 2.0 ** (e - bias)
        out.append((v, code))
    return out


def f8_round(x, t, saturate):
    """Cast-19 of float32 x to float8 type t, as the float value: to nearest, ties to the
    even code; past the largest finite value (half an ulp beyond, ties to even) saturated to
    it, or infinity (e5m2) / NaN without `saturate`; infinities saturate too."""
    vals = f8_values(t)
    v = np.array([a for a, _ in vals])
    codes = np.array([c for _, c in vals])
    mx, inf = v[-1], F8[t][5]
    step = v[-1] - v[-2]
    y = np.empty(x.shape, np.float64)
    for i, xi in enumerate(x.astype(np.float64).flat):
        a = abs(xi)
        if np.isnan(xi):
            r = np.nan
        elif np.isinf(a) or a > mx + step / 2 or (a == mx + step / 2 and codes[-1] % 2):
            r = mx if saturate else (np.inf if inf else np.nan)
        elif a >= mx:
            r = mx
        else:
            j = np.searchsorted(v, a)
            lo, hi = v[j - 1] if j else v[0], v[j]
            if a - lo < hi - a or (a - lo == hi - a and codes[j - 1] % 2 == 0):
                r = lo
            else:
                r = hi
        y.flat[i] = -r if xi < 0 else r
    return y.astype(np.float32)


def f8_interesting(t, n=64):
    """Values that exercise every path: zeros, subnormals, normals, exact ties between
    neighbours, the largest value and the ties and values past it, infinities, NaN."""
    v = np.array([a for a, _ in f8_values(t)])
    mids = (v[1:] + v[:-1]) / 2
    mx, step = v[-1], v[-1] - v[-2]
    special = [0.0, -0.0, v[1] / 3, v[1] * 0.5, v[1] * 1.5, mx, mx + step / 2, mx + step / 2 * 1.01,
               mx * 1.04, mx * 4, np.inf, -np.inf, np.nan, -mx - step, 1e30]
    pick = rng.choice(mids, n)
    return np.concatenate([special, pick, -rng.choice(mids, 16), rng.standard_normal(n) * mx / 8,
                           rng.standard_normal(16) * v[8]]).astype(np.float32)


for t, (tn, *_rest) in F8.items():
    x = f8_interesting(t)
    for sat in (1, 0):
        save(f'cast_f8{tn}_sat{sat}', [h.make_node('Cast', ['x'], ['c'], to=t, saturate=sat),
                                       h.make_node('Cast', ['c'], ['y'], to=T.FLOAT)],
             [('x', x)], [('y', f8_round(x, t, sat))], 19)

# QuantizeLinear to float8 per axis and DequantizeLinear back (saturating, zero point 0)
x = (randn(4, 6) * 300).astype(np.float32)
x[0, :3] = [np.inf, -np.inf, 1e-6]
s = rng.uniform(0.5, 2, 6).astype(np.float32)
for t, (tn, *_rest) in F8.items():
    zp = T()
    zp.name, zp.data_type = 'z', t
    zp.dims.extend([6])
    zp.raw_data = bytes(6)
    q = f8_round((x.astype(np.float32) / s).astype(np.float32), t, True)
    save(f'qdq_f8{tn}_axis1', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['q'], axis=1),
                               h.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'], axis=1)],
         [('x', x)], [('y', (q.astype(np.float32) * s).astype(np.float32))], 19, [('s', s), zp])


def f8_tensor(name, vals, t):
    """A float8 TensorProto of the exactly representable float values vals."""
    table = {a: c for a, c in f8_values(t)}
    tp = T()
    tp.name, tp.data_type = name, t
    tp.dims.extend(vals.shape)
    tp.raw_data = bytes((0x80 if v < 0 else 0) | table[abs(float(v))] for v in vals.flat)
    return tp


# constants cast at compile time (the interpreter's float8 rounding), next to the input
c = f8_interesting(19)
save('cast_f8e5m2_folded', [h.make_node('Cast', ['c'], ['c8'], to=19, saturate=0),
                            h.make_node('Cast', ['c8'], ['cf'], to=T.FLOAT), h.make_node('Add', ['x', 'cf'], ['y'])],
     [('x', np.zeros_like(c))], [('y', f8_round(c, 19, 0))], 19, [('c', c)])


def save_f8(name, nodes, x, y, t, opset=19):
    """A model with float8 input x and output y (exactly representable float arrays) of type t;
    no meta.json: onnxruntime-node has no float8 tensors."""
    d = os.path.join(OUT, name)
    os.makedirs(d + '/test_data_set_0', exist_ok=True)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info('x', t, list(x.shape))],
                     [h.make_tensor_value_info('y', t, list(y.shape))])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = 9
    onnx.save(m, d + '/model.onnx')
    open(f'{d}/test_data_set_0/input_0.pb', 'wb').write(f8_tensor('x', x, t).SerializeToString())
    open(f'{d}/test_data_set_0/output_0.pb', 'wb').write(f8_tensor('y', y, t).SerializeToString())


# float8 in and out of the model: Relu and Neg computed in float32, stored back
for t, (tn, *_rest) in F8.items():
    vals = np.array([a for a, _ in f8_values(t)])
    x = (rng.choice(vals, 40) * rng.choice([-1, 1], 40)).astype(np.float32)
    x[0] = 0
    save_f8(f'io_f8{tn}', [h.make_node('Relu', ['x'], ['r']), h.make_node('Neg', ['r'], ['y'])], x,
            -np.maximum(x, 0) + 0.0, t)

# float8 weights (e4m3fn) behind DequantizeLinear with a per-tensor scale, read by MatMul
vals = np.array([a for a, _ in f8_values(17)])
w = (rng.choice(vals[:100], (24, 10)) * rng.choice([-1, 1], (24, 10))).astype(np.float32)
x = randn(3, 24)
save('dq_f8e4m3fn_matmul', [h.make_node('DequantizeLinear', ['w', 's'], ['wf']), h.make_node('MatMul', ['x', 'wf'], ['y'])],
     [('x', x)], [('y', (x.astype(np.float64) @ (w.astype(np.float64) * 0.125)).astype(np.float32))], 19,
     [f8_tensor('w', w, 17), ('s', np.array(0.125, np.float32))])

# ---- BitCast (opset 26): numpy's view of the same bytes ----
f = randn(3, 5) * 100
f[0, :3] = [np.inf, -0.0, np.float32(1e-40)]
i32 = rng.integers(-2 ** 31, 2 ** 31, (4, 3)).astype(np.int32)
i32[0, 0] = 0x7fc00001                              # a quiet NaN with a payload
for name, x, to in (('f32_i32', f, T.INT32), ('i32_f32', i32, T.FLOAT), ('i32_u32', i32, T.UINT32),
                    ('f16_i16', (randn(2, 6) * 10).astype(np.float16), T.INT16),
                    ('u16_f16', rng.integers(0, 0x7c00, (7,)).astype(np.uint16), T.FLOAT16),
                    ('f64_i64', randn(5).astype(np.float64), T.INT64),
                    ('u64_f64', randn(4).astype(np.float64).view(np.uint64), T.DOUBLE),
                    ('i8_u8', rng.integers(-128, 128, (9,)).astype(np.int8), T.UINT8)):
    y = x.view(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[to])
    save(f'bitcast_{name}', [h.make_node('BitCast', ['x'], ['y'], to=to)], [('x', x)], [('y', y)], 26)
# folded: a constant bitcast at compile time, added to the input
c = (randn(6) * 3).astype(np.float32)
save('bitcast_folded', [h.make_node('BitCast', ['c'], ['b'], to=T.INT32), h.make_node('Add', ['x', 'b'], ['y'])],
     [('x', np.arange(6, dtype=np.int32))], [('y', np.arange(6, dtype=np.int32) + c.view(np.int32))], 26, [('c', c)])

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

# ---- int4/uint4 graph inputs and outputs, Cast and QuantizeLinear-21 to them ----
# Inputs and outputs travel packed (nibbles()); numpy references from the spec: Cast to a
# 4-bit type keeps the low 4 bits of the integer (a float truncated toward zero first),
# sign-extended for int4; QuantizeLinear is saturate(rint(x / scale) + zero point) into
# [-8, 7] or [0, 15], x / scale in float32 (ties to even).
NP4 = {INT4: np.int8, UINT4: np.uint8}


def wrap4(a, signed):
    """The low 4 bits of the integers a, sign-extended when signed."""
    v = np.asarray(a).astype(np.int64) & 15
    return (np.where(v >= 8, v - 16, v) if signed else v).astype(np.int8 if signed else np.uint8)


def quant4(x, s, zp, signed):
    """QuantizeLinear to int4/uint4: s and zp already broadcast to x. (The reference's
    rint(x / s) of an infinity has no integer: it saturates, as a value past the range.)"""
    r = np.clip((x.astype(np.float32) / s.astype(np.float32)).astype(np.float32), -1e6, 1e6)
    q = np.rint(r).astype(np.int64) + zp
    return np.clip(q, -8 if signed else 0, 7 if signed else 15).astype(np.int8 if signed else np.uint8)


def save_packed(name, nodes, ins, outs, opset, inits, ir_version, tensor):
    """ins/outs: lists of (name, array, type number), each written as tensor(name, array, type)
    makes it; inits: TensorProtos or (name, array) pairs."""
    d = os.path.join(OUT, name)
    os.makedirs(d + '/test_data_set_0', exist_ok=True)
    vi = lambda n, a, t: h.make_tensor_value_info(n, t, list(a.shape))
    g = h.make_graph(nodes, name, [vi(*i) for i in ins], [vi(*o) for o in outs],
                     [i if isinstance(i, T) else nh.from_array(i[1], i[0]) for i in inits])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', opset)])
    m.ir_version = ir_version
    onnx.save(m, d + '/model.onnx')
    for kind, vals in (('input', ins), ('output', outs)):
        for k, (n, a, t) in enumerate(vals):
            open(f'{d}/test_data_set_0/{kind}_{k}.pb', 'wb').write(tensor(n, a, t).SerializeToString())


def save4(name, nodes, ins, outs, opset=21, inits=()):
    """4-bit and 2-bit types written with nibbles() and crumbs(), the others with numpy_helper.
    No meta.json (tests/opsets/ort.js has no 4-bit tensors)."""
    save_packed(name, nodes, ins, outs, opset, inits, 10,
                lambda n, a, t: nibbles(n, a, t == INT4) if t in NP4 else crumbs(n, a, t == INT2) if t in NP2
                else nh.from_array(a, n))


UINT2, INT2 = 25, 26
NP2 = {INT2: np.int8, UINT2: np.uint8}


def crumbs(name, a, signed):
    """An int2 (signed) or uint2 TensorProto of the integer array a, four values a byte, the
    first in the lowest two bits (raw_data)."""
    lo, hi = (-2, 1) if signed else (0, 3)
    assert a.min() >= lo and a.max() <= hi
    flat = (a.reshape(-1).astype(np.int64) & 3).astype(np.uint8)
    flat = np.append(flat, np.zeros(-flat.size % 4, np.uint8))
    packed = (flat[0::4] | (flat[1::4] << 2) | (flat[2::4] << 4) | (flat[3::4] << 6)).astype(np.uint8)
    t = T()
    t.name, t.data_type = name, INT2 if signed else UINT2
    t.dims.extend(a.shape)
    t.raw_data = packed.tobytes()
    return t


def wrap2(a, signed):
    """The low 2 bits of the integers a, sign-extended when signed."""
    v = np.asarray(a).astype(np.int64) & 3
    return (np.where(v >= 2, v - 4, v) if signed else v).astype(np.int8 if signed else np.uint8)


def quant2(x, s, zp, signed):
    r = np.clip((x.astype(np.float32) / s.astype(np.float32)).astype(np.float32), -1e6, 1e6)
    q = np.rint(r).astype(np.int64) + zp
    return np.clip(q, -2 if signed else 0, 1 if signed else 3).astype(np.int8 if signed else np.uint8)


# every nibble value, odd counts (a last half byte), in and out unchanged: through a view
# (Identity), a Transpose (strided loads and stores) and a Reshape
a = np.arange(-8, 7, dtype=np.int8).reshape(3, 5)
save4('io_int4_identity', [h.make_node('Identity', ['x'], ['y'])], [('x', a, INT4)], [('y', a, INT4)])
u = rng.integers(0, 16, (7, 9)).astype(np.uint8)
u.flat[:16] = np.arange(16)
save4('io_uint4_transpose', [h.make_node('Transpose', ['x'], ['y'], perm=[1, 0])], [('x', u, UINT4)],
      [('y', u.T.copy(), UINT4)])
a = q4((2, 3, 11), True)
save4('io_int4_reshape_two_outputs', [h.make_node('Reshape', ['x', 'sh'], ['y']), h.make_node('Identity', ['x'], ['z'])],
      [('x', a, INT4)], [('y', a.reshape(6, 11), INT4), ('z', a, INT4)], 21,
      [('sh', np.array([6, 11], np.int64))])

# 4-bit inputs read by a computation: Cast to float (negative nibbles), Cast to int8/uint8
a = q4((5, 13), True)
save4('cast_int4_to_float', [h.make_node('Cast', ['x'], ['c'], to=T.FLOAT), h.make_node('Mul', ['c', 'h'], ['y'])],
      [('x', a, INT4)], [('y', a.astype(np.float32) * np.float32(0.5), T.FLOAT)], 21,
      [('h', np.array(0.5, np.float32))])
save4('cast_int4_to_int8', [h.make_node('Cast', ['x'], ['y'], to=T.INT8)], [('x', a, INT4)], [('y', a, T.INT8)])
u = q4((3, 7), False)
save4('cast_uint4_to_uint8_int32', [h.make_node('Cast', ['x'], ['y'], to=T.UINT8), h.make_node('Cast', ['x'], ['z'], to=T.INT32)],
      [('x', u, UINT4)], [('y', u, T.UINT8), ('z', u.astype(np.int32), T.INT32)])

# Cast to int4/uint4: integers keep their low 4 bits (-9 -> 7, 8 -> -8, 200 -> -8 for int4);
# floats in range are truncated toward zero (2.7 -> 2, -2.7 -> -2, -0.5 -> 0)
i = np.concatenate([np.arange(-20, 21), [200, -200, 127, -128, 1000, 2 ** 31 - 1, -2 ** 31]]).astype(np.int32)
for t, tn in ((INT4, 'int4'), (UINT4, 'uint4')):
    save4(f'cast_int32_to_{tn}', [h.make_node('Cast', ['x'], ['y'], to=t)], [('x', i, T.INT32)],
          [('y', wrap4(i, t == INT4), t)])
f = np.array([0, -0.0, 0.4, -0.5, 2.7, -2.7, 6.99, 7, -8, -7.9, 3.5, -3.5, 1e-30, 5.25, 0.99], np.float32)
save4('cast_float_to_int4', [h.make_node('Cast', ['x'], ['y'], to=INT4)], [('x', f, T.FLOAT)],
      [('y', wrap4(np.trunc(f), True), INT4)])
fu = np.abs(f) * 2
fu[fu > 15.5] = 15
save4('cast_float_to_uint4', [h.make_node('Cast', ['x'], ['y'], to=UINT4)], [('x', fu, T.FLOAT)],
      [('y', wrap4(np.trunc(fu), False), UINT4)])
# CastLike to the type of a 4-bit input; a Cast of a constant folded at compile time
like = q4((1,), True)
save4('castlike_int4', [h.make_node('CastLike', ['x', 'l'], ['y'])], [('x', i, T.INT32), ('l', like, INT4)],
      [('y', wrap4(i, True), INT4)])
c = np.array([-9, 8, 15, 16, -1, 3, 100], np.int32)
save4('cast_int4_folded', [h.make_node('Cast', ['c'], ['c4'], to=INT4), h.make_node('Cast', ['c4'], ['cf'], to=T.FLOAT),
                           h.make_node('Add', ['x', 'cf'], ['y'])],
      [('x', np.zeros(7, np.float32), T.FLOAT)], [('y', wrap4(c, True).astype(np.float32), T.FLOAT)], 21, [('c', c)])

# QuantizeLinear-21 to int4/uint4: per tensor with ties (x / s = k + 0.5) and saturation,
# per axis, blocked with a shorter last block; int4 zero points as constants and as inputs
x = np.array([0, 0.25, 0.75, -0.25, -0.75, 1.25, -1.25, 1.75, 3.4, -3.6, 100, -100, np.inf, -np.inf, 3.75], np.float32)
s = np.array(0.5, np.float32)
zp = np.array(1, np.int8)
save4('quant_int4_per_tensor', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'])], [('x', x, T.FLOAT)],
      [('y', quant4(x, s, 1, True), INT4)], 21, [('s', s), nibbles('z', zp, True)])
save4('quant_uint4_output_dtype', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], output_dtype=UINT4)],
      [('x', x, T.FLOAT)], [('y', quant4(x, s, 0, False), UINT4)], 21, [('s', s)])
x = randn(4, 9) * 4
s = rng.uniform(0.3, 1, 9).astype(np.float32)
zp = q4((9,), False)
save4('quant_uint4_axis1', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=1)], [('x', x, T.FLOAT)],
      [('y', quant4(x, s[None, :], zp[None, :].astype(np.int64), False), UINT4)], 21, [('s', s), nibbles('z', zp, False)])
x = randn(5, 3, 7) * 3
s = rng.uniform(0.3, 1, (5, 3, 3)).astype(np.float32)
zp = q4((5, 3, 3), True)
sb, zb = np.repeat(s, 3, axis=2)[:, :, :7], np.repeat(zp, 3, axis=2)[:, :, :7].astype(np.int64)
save4('quant_int4_blocked_short', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=2, block_size=3)],
      [('x', x, T.FLOAT), ('z', zp, INT4)], [('y', quant4(x, sb, zb, True), INT4)], 21, [('s', s)])
# a 4-bit value inside the graph (the arena holds it a byte a value): Q -> DQ per axis
x = randn(6, 10) * 2
s = rng.uniform(0.2, 0.5, 6).astype(np.float32)
zp = q4((6,), True)
q = quant4(x, s[:, None], zp[:, None].astype(np.int64), True)
save4('qdq_int4_axis0', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['q'], axis=0),
                         h.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'], axis=0)],
      [('x', x, T.FLOAT)], [('y', ((q.astype(np.float32) - zp[:, None]) * s[:, None]).astype(np.float32), T.FLOAT)],
      21, [('s', s), nibbles('z', zp, True)])
# large enough for vector loops and threads: [64, 129] in, quantized out, and read back
x = randn(64, 129) * 3
s = np.array(0.75, np.float32)
save4('quant_int4_large', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], output_dtype=INT4)],
      [('x', x, T.FLOAT)], [('y', quant4(x, s, 0, True), INT4)], 21, [('s', s)])
a = q4((64, 129), False)
save4('dq_uint4_input_large', [h.make_node('DequantizeLinear', ['x', 's'], ['y'])], [('x', a, UINT4)],
      [('y', (a.astype(np.float32) * s).astype(np.float32), T.FLOAT)], 21, [('s', s)])

# ---- float4e2m1 (opset 23): constants, inputs and outputs (two codes a byte), Cast, and
# QuantizeLinear/DequantizeLinear, from ONNX's float4 document: sign bit 3, values 0, 0.5, 1,
# 1.5, 2, 3, 4, 6 (codes 0 to 7); rounded to nearest, ties to the even code; past 6 and
# infinities +-6, NaN +6 ----
F4 = 23
F4V = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def f4_round(x):
    """Cast to float4e2m1, as its value (float32; the sign of zero kept)."""
    y = np.empty(x.shape, np.float32)
    for i, xi in enumerate(x.astype(np.float64).flat):
        if np.isnan(xi):
            y.flat[i] = 6
            continue
        a = min(abs(xi), 6.0)
        j = int(np.searchsorted(F4V, a))
        if F4V[j] == a:
            r = a
        else:
            lo, hi = F4V[j - 1], F4V[j]
            r = lo if a - lo < hi - a or (a - lo == hi - a and (j - 1) % 2 == 0) else hi
        y.flat[i] = -r if np.signbit(xi) else r
    return y


def f4_codes(v):
    """The codes of float4e2m1 values v (exactly representable)."""
    return np.array([(8 if np.signbit(a) else 0) | int(np.where(F4V == abs(a))[0][0]) for a in v.flat],
                    np.uint8).reshape(v.shape)


def f4_tensor(name, v):
    tp = nibbles(name, f4_codes(v), False)
    tp.data_type = F4
    return tp


def save_f4(name, nodes, ins, outs, opset=23, inits=()):
    """As save4, float4e2m1 arrays (of exact values) marked with type F4."""
    save_packed(name, nodes, ins, outs, opset, inits, 11,
                lambda n, a, t: f4_tensor(n, a) if t == F4 else nibbles(n, a, t == INT4) if t in NP4
                else nh.from_array(a, n))


# Cast to float4e2m1: every tie (midpoints of neighbours), saturation, infinities, NaN, -0,
# values below the smallest; out as float4 (odd count) and back to float
mids = (F4V[1:] + F4V[:-1]) / 2
x = np.concatenate([[0, -0.0, 0.1, 0.25, -0.25, 0.26, 5, 5.01, 6, 6.5, 7, 100, -7, np.inf, -np.inf, np.nan, 1e-30, -1e-30],
                    mids, -mids, rng.standard_normal(20) * 3]).astype(np.float32)
save_f4('cast_float_to_f4e2m1', [h.make_node('Cast', ['x'], ['y'], to=F4), h.make_node('Cast', ['y'], ['z'], to=T.FLOAT)],
        [('x', x, T.FLOAT)], [('y', f4_round(x), F4), ('z', f4_round(x), T.FLOAT)])
# float4 in: every code (with -0), read as float (Mul) and moved (Transpose) back out
v = np.concatenate([F4V, -F4V]).astype(np.float32)
v[8] = -0.0
a = rng.choice(v, (5, 7)).astype(np.float32)
a.flat[:16] = v
save_f4('io_f4e2m1', [h.make_node('Cast', ['x'], ['c'], to=T.FLOAT), h.make_node('Mul', ['c', 'k'], ['y']),
                      h.make_node('Transpose', ['x'], ['t'], perm=[1, 0])],
        [('x', a, F4)], [('y', a * np.float32(1.5), T.FLOAT), ('t', a.T.copy(), F4)], 23, [('k', np.array(1.5, np.float32))])
# ONNX's QuantizeLinear example (per axis), and QuantizeLinear -> DequantizeLinear blocked
x = np.array([[0.0, 2.5, 4.8, 8.6], [-30, -20, 6, 9], [-0.0, -2.5, -4.8, -8.6]], np.float32)
s = np.array([2.0, 3.0, 4.0], np.float32)
zp = f4_tensor('z', np.zeros(3, np.float32))
save_f4('quant_f4e2m1_axis0', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=0)], [('x', x, T.FLOAT)],
        [('y', np.array([0, 1, 2, 4, -6, -6, 2, 3, -0.0, -0.5, -1, -2], np.float32).reshape(3, 4), F4)], 23, [('s', s), zp])
x = randn(3, 10) * 4
s = rng.uniform(0.5, 2, (3, 4)).astype(np.float32)
sb = np.repeat(s, 3, axis=1)[:, :10]
q = f4_round((x / sb).astype(np.float32))
save_f4('qdq_f4e2m1_blocked', [h.make_node('QuantizeLinear', ['x', 's'], ['q'], axis=1, block_size=3, output_dtype=F4),
                               h.make_node('DequantizeLinear', ['q', 's'], ['y'], axis=1, block_size=3)],
        [('x', x, T.FLOAT)], [('y', (q * sb).astype(np.float32), T.FLOAT)], 23, [('s', s)])
# float4 weights behind DequantizeLinear (blocked), read by MatMul: kept 4-bit, like int4
w = rng.choice(v, (64, 24)).astype(np.float32)
x = randn(2, 64)
s = rng.uniform(0.01, 0.1, (2, 24)).astype(np.float32)
wf = w.astype(np.float64) * np.repeat(s, 32, axis=0)
save_f4('dq_f4e2m1_matmul_blocked', [h.make_node('DequantizeLinear', ['w', 's'], ['wf'], axis=0, block_size=32),
                                     h.make_node('MatMul', ['x', 'wf'], ['y'])],
        [('x', x, T.FLOAT)], [('y', (x.astype(np.float64) @ wf).astype(np.float32), T.FLOAT)], 23,
        [f4_tensor('w', w), ('s', s)])

# ---- int2/uint2 (opset 25): four values a byte, lowest bits first; as int4 otherwise ----
# counts of 4k + 1, + 2, + 3 (the unused bits of the last byte), every value, Transpose
for n in (5, 6, 7):
    a = np.resize(np.array([-2, -1, 0, 1], np.int8), (n, 3)).copy()
    save4(f'io_int2_transpose_{n}x3', [h.make_node('Transpose', ['x'], ['y'], perm=[1, 0]),
                                       h.make_node('Cast', ['x'], ['z'], to=T.FLOAT)],
          [('x', a, INT2)], [('y', a.T.copy(), INT2), ('z', a.astype(np.float32), T.FLOAT)], 25)
u = rng.integers(0, 4, (3, 11)).astype(np.uint8)
save4('io_uint2_identity', [h.make_node('Identity', ['x'], ['y'])], [('x', u, UINT2)], [('y', u, UINT2)], 25)
# Cast to int2/uint2: the low 2 bits (-3 -> 1, 2 -> -2 for int2), floats truncated first
i = np.concatenate([np.arange(-9, 10), [200, -200, 127, -128]]).astype(np.int32)
for t, tn in ((INT2, 'int2'), (UINT2, 'uint2')):
    save4(f'cast_int32_to_{tn}', [h.make_node('Cast', ['x'], ['y'], to=t)], [('x', i, T.INT32)],
          [('y', wrap2(i, t == INT2), t)], 25)
f = np.array([0, -0.0, 0.9, -0.9, 1.5, -1.5, -2, 1, 0.3], np.float32)
save4('cast_float_to_int2', [h.make_node('Cast', ['x'], ['y'], to=INT2)], [('x', f, T.FLOAT)],
      [('y', wrap2(np.trunc(f), True), INT2)], 25)
# QuantizeLinear to int2 (ties, saturation) per tensor with an int2 zero point; to uint2 per
# axis with output_dtype; int2 weights behind DequantizeLinear read by MatMul
x = np.array([0, 0.25, 0.75, -0.25, -0.75, 1.25, -1.25, 3, -3, np.inf, -np.inf], np.float32)
s = np.array(0.5, np.float32)
save4('quant_int2_per_tensor', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'])], [('x', x, T.FLOAT)],
      [('y', quant2(x, s, -1, True), INT2)], 25, [('s', s), crumbs('z', np.array(-1, np.int8), True)])
x = randn(5, 6) * 2
s = rng.uniform(0.3, 1, 6).astype(np.float32)
save4('quant_uint2_axis1', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], axis=1, output_dtype=UINT2)],
      [('x', x, T.FLOAT)], [('y', quant2(x, s[None, :], 0, False), UINT2)], 25, [('s', s)])
w = rng.integers(-2, 2, (48, 20)).astype(np.int8)
x = randn(3, 48)
s = rng.uniform(0.05, 0.2, (3, 20)).astype(np.float32)
wf = w.astype(np.float64) * np.repeat(s, 16, axis=0)
save4('dq_int2_matmul_blocked', [h.make_node('DequantizeLinear', ['w', 's'], ['wf'], axis=0, block_size=16),
                                 h.make_node('MatMul', ['x', 'wf'], ['y'])],
      [('x', x, T.FLOAT)], [('y', (x.astype(np.float64) @ wf).astype(np.float32), T.FLOAT)], 25,
      [crumbs('w', w, True), ('s', s)])

# ---- float8e8m0 (opset 24): 2^(code - 127), 0xff NaN; Cast-24 by round_mode and saturate,
# from the bits of the float32 as onnx's reference computes it (numpy_helper.to_float8e8m0):
# the exponent field, plus one when up (any fraction) or nearest (a half or more; at
# exponent 0 more than a half), unless saturating at 0xfe; infinities and NaN NaN ----
E8M0 = 24


def e8m0_codes(x, saturate, mode):
    u = x.astype(np.float32).view(np.uint32).astype(np.int64)
    e, frac = (u >> 23) & 0xff, u & 0x7fffff
    if mode == 'up':
        up = frac != 0
    elif mode == 'nearest':
        up = ((frac >> 22) & 1).astype(bool) & (((frac & 0x3fffff) != 0) | (e > 0))
    else:
        up = np.zeros(e.shape, bool)
    if saturate:
        up &= e != 0xfe
    up &= (u & 0x7fffffff) != 0x00400000    # 2^-127 stays code 0 (README: the reference rounds it up)
    return np.where(e == 0xff, 0xff, np.minimum(e + up, 0xff)).astype(np.uint8)


def e8m0_values(c):
    return np.where(c == 0xff, np.nan, np.ldexp(1.0, c.astype(np.int64) - 127)).astype(np.float32)


def e8m0_tensor(name, c):
    tp = T()
    tp.name, tp.data_type = name, E8M0
    tp.dims.extend(c.shape)
    tp.raw_data = c.astype(np.uint8).tobytes()
    return tp


def save_e8m0(name, nodes, ins, outs, opset=24, inits=()):
    """ins/outs: (name, array, type); E8M0 arrays are codes (uint8)."""
    save_packed(name, nodes, ins, outs, opset, inits, 11,
                lambda n, a, t: e8m0_tensor(n, a) if t == E8M0 else nh.from_array(a, n))


p2 = lambda k: np.ldexp(np.float32(1), k)
x = np.array([1, 2, 1.5, 1.4999999, 1.5000001, 1.75, 3, 0.75, 0.1, 1e10, 0, 1e-40, 1e-39, p2(-127),
              p2(-127) * 1.5, p2(-126), p2(-126) * 1.5, p2(127), p2(127) * 1.5, p2(127) * 1.9, 3.4e38,
              np.inf, np.nan, 6.5, 48, 0.3], np.float32)
for mode in ('up', 'down', 'nearest'):
    for sat in (1, 0):
        c = e8m0_codes(x, sat, mode)
        save_e8m0(f'cast_e8m0_{mode}_sat{sat}',
                  [h.make_node('Cast', ['x'], ['c'], to=E8M0, saturate=sat, round_mode=mode),
                   h.make_node('Cast', ['c'], ['y'], to=T.FLOAT), h.make_node('Identity', ['c'], ['z'])],
                  [('x', x, T.FLOAT)], [('y', e8m0_values(c), T.FLOAT), ('z', c, E8M0)])
# float8e8m0 in: every code (0 to 0xff), read as float and scaled by a power of two
c = np.arange(256, dtype=np.uint8)
save_e8m0('io_e8m0', [h.make_node('Cast', ['x'], ['f'], to=T.FLOAT), h.make_node('Mul', ['f', 'k'], ['y'])],
          [('x', c, E8M0)], [('y', (e8m0_values(c).astype(np.float64) * 2.0 ** -10).astype(np.float32), T.FLOAT)],
          24, [('k', np.array(2.0 ** -10, np.float32))])
# a 4-bit output that the graph reads too (DequantizeLinear loads it back from the caller's
# packed buffer), and an int4 input that is also an output
x = randn(7, 5) * 2
s = np.array(0.4, np.float32)
q = quant4(x, s, 0, True)
a = q4((3, 3), True)
save4('qdq_int4_output_read', [h.make_node('QuantizeLinear', ['x', 's'], ['q'], output_dtype=INT4),
                               h.make_node('DequantizeLinear', ['q', 's'], ['y'])],
      [('x', x, T.FLOAT), ('a', a, INT4)], [('q', q, INT4), ('y', (q.astype(np.float32) * s).astype(np.float32), T.FLOAT), ('a', a, INT4)],
      21, [('s', s)])
# rows of even length: whole vectors of pairs stored at once (kernel.c, nibble_store)
x = randn(16, 256) * 3
s = np.array(0.5, np.float32)
save4('quant_int4_even_rows', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], output_dtype=INT4)],
      [('x', x, T.FLOAT)], [('y', quant4(x, s, 0, True), INT4)], 21, [('s', s)])
x = randn(8, 128) * 4
save_f4('cast_f4e2m1_even_rows', [h.make_node('Cast', ['x'], ['y'], to=F4)], [('x', x, T.FLOAT)], [('y', f4_round(x), F4)])
# ... and read: a vector from an even element loads its w / 2 bytes (kernel.c, nibble_load)
a = q4((16, 256), True)
save4('dq_int4_input_even_rows', [h.make_node('DequantizeLinear', ['x', 's'], ['y'])], [('x', a, INT4)],
      [('y', (a.astype(np.float32) * np.float32(0.5)).astype(np.float32), T.FLOAT)], 21, [('s', np.array(0.5, np.float32))])
a = rng.choice(v, (8, 128)).astype(np.float32)
save_f4('io_f4e2m1_even_rows', [h.make_node('Cast', ['x'], ['y'], to=T.FLOAT)], [('x', a, F4)], [('y', a, T.FLOAT)])

# ---- onnxruntime's view of the 2- and 4-bit results (tests/types.sh --ort): tests/opsets/ort.js
# has no 4- or 2-bit tensors, so these twins cast the result to int32 for it (and are checked
# by onnxcc too). onnxruntime 1.30 has no CPU float4e2m1 Cast or QuantizeLinear, and rounds a
# float cast to int4 (2.7 -> 3) where onnxcc truncates (README): neither is here. ----
xq = np.array([0, 0.25, 0.75, -0.25, -0.75, 1.25, -1.25, 1.75, 3.4, -3.6, 100, -100, 3.75, 0.5], np.float32)
sq = np.array(0.5, np.float32)
for od, tn, ref in ((INT4, 'int4', lambda: quant4(xq, sq, 0, True)), (UINT4, 'uint4', lambda: quant4(xq, sq, 0, False)),
                    (INT2, 'int2', lambda: quant2(xq, sq, 0, True)), (UINT2, 'uint2', lambda: quant2(xq, sq, 0, False))):
    save(f'ort_quant_{tn}', [h.make_node('QuantizeLinear', ['x', 's'], ['q'], output_dtype=od),
                             h.make_node('Cast', ['q'], ['y'], to=T.INT32)],
         [('x', xq)], [('y', ref().astype(np.int32))], 25 if od in NP2 else 21, [('s', sq)])
for t, tn, ref in ((INT4, 'int4', wrap4), (UINT4, 'uint4', wrap4), (INT2, 'int2', wrap2), (UINT2, 'uint2', wrap2)):
    save(f'ort_cast_int32_{tn}', [h.make_node('Cast', ['x'], ['c'], to=t), h.make_node('Cast', ['c'], ['y'], to=T.INT32)],
         [('x', i)], [('y', ref(i, t in (INT4, INT2)).astype(np.int32))], 25 if t in NP2 else 21)

# MXFP4 (DequantizeLinear-25): float4e2m1 weights with float8e8m0 scales, one per block of 32
# along K, output_dtype float, read by MatMul (kept 4-bit, dequantised in its loads)
w = rng.choice(v, (64, 24)).astype(np.float32)
x = randn(2, 64)
sc = rng.integers(120, 130, (2, 24)).astype(np.uint8)
sf = np.ldexp(1.0, sc.astype(np.int64) - 127)
wf = w.astype(np.float64) * np.repeat(sf, 32, axis=0)
save_f4('dq_mxfp4_matmul', [h.make_node('DequantizeLinear', ['w', 's'], ['wf'], axis=0, block_size=32, output_dtype=T.FLOAT),
                            h.make_node('MatMul', ['x', 'wf'], ['y'])],
        [('x', x, T.FLOAT)], [('y', (x.astype(np.float64) @ wf).astype(np.float32), T.FLOAT)], 25,
        [f4_tensor('w', w), e8m0_tensor('s', sc)])
