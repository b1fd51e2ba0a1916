# gen.py OUTDIR - models of the default domain's opsets 19 to 26, which Debian's ONNX test data
# (opset <= 17) lacks: each new op and each attribute or type a version added, written with
# onnx.helper at the opset that brought it (the checker, which onnx 1.12 would run against
# its own schemas, is not run) and checked against numpy references computed here from the
# spec's formulas, in float64. One directory per case: model.onnx and test_data_set_0 (and the
# same data raw, with meta.json, for onnxruntime: tests/opsets/ort.js).
import os, sys, math, json
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

rng = np.random.default_rng(19)
OUT = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import casefile


def save(name, nodes, inputs, outputs, opset, inits=()):
    """inputs/outputs: lists of (name, array); inits: (name, array)."""
    casefile.save(OUT, name, nodes, inputs, outputs, opset, inits)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def unary(name, op, opset, x, y, **attrs):
    save(name, [h.make_node(op, ['x'], ['y'], **attrs)], [('x', x)], [('y', y)], opset)


# ---- new elementwise ops: Gelu (20), Swish (24) ----
x = randn(3, 7) * 3
xd = x.astype(np.float64)
erf = np.vectorize(math.erf)
unary('gelu_20', 'Gelu', 20, x, (0.5 * xd * (1 + erf(xd / math.sqrt(2)))).astype(np.float32))
unary('gelu_tanh_20', 'Gelu', 20, x, (0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                      (xd + 0.044715 * xd ** 3)))).astype(np.float32), approximate='tanh')
unary('swish_24', 'Swish', 24, x, (xd / (1 + np.exp(-1.7 * xd))).astype(np.float32), alpha=1.7)
unary('swish_default_24', 'Swish', 24, x, (xd / (1 + np.exp(-xd))).astype(np.float32))

# ---- BitwiseAnd/Or/Xor/Not (18), every integer width, broadcast ----
for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, (3, 4), dtype=dt, endpoint=True)
    b = rng.integers(info.min, info.max, (4,), dtype=dt, endpoint=True)
    a[0, 0], b[1] = info.max, info.min
    nm = np.dtype(dt).name
    save(f'bitwise_{nm}_18', [h.make_node('BitwiseAnd', ['a', 'b'], ['y0']), h.make_node('BitwiseOr', ['a', 'b'], ['y1']),
                              h.make_node('BitwiseXor', ['a', 'b'], ['y2']), h.make_node('BitwiseNot', ['a'], ['y3'])],
         [('a', a), ('b', b)], [('y0', a & b), ('y1', a | b), ('y2', a ^ b), ('y3', ~a)], 18)

# folded at compile time (kir_interpret): constants of the widest types
cu = np.array([0, 1, 2 ** 63, 2 ** 64 - 1], np.uint64)
ci = np.array([0, -1, -2 ** 63, 2 ** 63 - 1], np.int64)
save('bitwise_folded_18', [h.make_node('BitwiseNot', ['cu'], ['nu']), h.make_node('BitwiseNot', ['ci'], ['ni']),
                           h.make_node('BitwiseXor', ['cu', 'u'], ['y'])],
     [('u', cu[::-1].copy())], [('nu', ~cu), ('ni', ~ci), ('y', cu ^ cu[::-1])], 18, [('cu', cu), ('ci', ci)])

# ---- CumProd (26) ----
x = (rng.uniform(0.5, 1.5, (3, 5))).astype(np.float32)
xd = x.astype(np.float64)
save('cumprod_26', [h.make_node('CumProd', ['x', 'axis'], ['y'])], [('x', x)],
     [('y', np.cumprod(xd, axis=1).astype(np.float32))], 26, [('axis', np.array(1, np.int64))])
ex = np.flip(np.concatenate([np.ones((1, 5)), np.cumprod(xd[::-1], axis=0)[:-1]], axis=0), 0)
save('cumprod_excl_rev_26', [h.make_node('CumProd', ['x', 'axis'], ['y'], exclusive=1, reverse=1)],
     [('x', x)], [('y', ex.astype(np.float32))], 26, [('axis', np.array(-2, np.int64))])
xi = rng.integers(-3, 4, (2, 6)).astype(np.int32)
save('cumprod_int32_axis_input_26', [h.make_node('CumProd', ['x', 'axis'], ['y'])],
     [('x', xi), ('axis', np.array(1, np.int64))], [('y', np.cumprod(xi, axis=1).astype(np.int32))], 26)

# ---- RMSNormalization (23) ----
def rms(x, axis, scale, eps):
    xd = x.astype(np.float64)
    ax = tuple(range(axis % x.ndim, x.ndim))
    return (xd / np.sqrt(np.mean(xd * xd, axis=ax, keepdims=True) + eps) * scale).astype(np.float32)
x = randn(2, 3, 8)
s = randn(8)
save('rmsnorm_23', [h.make_node('RMSNormalization', ['x', 's'], ['y'])], [('x', x)],
     [('y', rms(x, -1, s, 1e-5))], 23, [('s', s)])
s2 = randn(3, 8)
save('rmsnorm_axis1_23', [h.make_node('RMSNormalization', ['x', 's'], ['y'], axis=1, epsilon=0.1)],
     [('x', x), ('s', s2)], [('y', rms(x, 1, s2, 0.1))], 23)

# ---- GroupNormalization: 21 (scale and bias per channel), 18 (per group) ----
def groupnorm(x, g, scale, bias, eps):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, g, -1)
    y = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    y = y.reshape(x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(bshape) + bias.reshape(bshape)).astype(np.float32)
x = randn(2, 6, 5, 4)
sc, b = randn(6), randn(6)
save('groupnorm_21', [h.make_node('GroupNormalization', ['x', 's', 'b'], ['y'], num_groups=3)],
     [('x', x)], [('y', groupnorm(x, 3, sc, b, 1e-5))], 21, [('s', sc), ('b', b)])
sg, bg = randn(2), randn(2)
save('groupnorm_18_per_group', [h.make_node('GroupNormalization', ['x', 's', 'b'], ['y'],
                                            num_groups=2, epsilon=1e-3)],
     [('x', x), ('s', sg), ('b', bg)], [('y', groupnorm(x, 2, np.repeat(sg, 3), np.repeat(bg, 3), 1e-3))], 18)
x3 = randn(3, 4, 7)
save('groupnorm_21_1d', [h.make_node('GroupNormalization', ['x', 's', 'b'], ['y'], num_groups=4)],
     [('x', x3), ('s', sc[:4]), ('b', b[:4])], [('y', groupnorm(x3, 4, sc[:4], b[:4], 1e-5))], 21)

# ---- AveragePool-19's dilations ----
def pool_out(sp, k, s, d, pb, pe, ceil):
    """a pool's output extents; with ceil, a last window that starts in the end padding is dropped"""
    out = []
    for i in range(len(k)):
        num = sp[i] + pb[i] + pe[i] - ((k[i] - 1) * d[i] + 1)
        o = (-(-num // s[i]) if ceil else num // s[i]) + 1
        if ceil and (o - 1) * s[i] >= sp[i] + pb[i]:
            o -= 1
        out.append(o)
    return out

def pool(x, k, s, d, pb, pe, ceil, fn):
    """fn(taps, padded) of each window: the values inside x, and how many taps fall in padding"""
    n, c = x.shape[:2]
    sp = x.shape[2:]
    out = pool_out(sp, k, s, d, pb, pe, ceil)
    y = np.zeros((n, c) + tuple(out))
    for o in np.ndindex(*out):
        taps, padded = [], 0
        for t in np.ndindex(*k):
            pos = [o[i] * s[i] - pb[i] + t[i] * d[i] for i in range(len(k))]
            if all(0 <= pos[i] < sp[i] for i in range(len(k))):
                taps.append(x[(slice(None), slice(None)) + tuple(pos)])
            elif all(-pb[i] <= pos[i] < sp[i] + pe[i] for i in range(len(k))):
                padded += 1
        y[(slice(None), slice(None)) + o] = fn(taps, padded)
    return y.astype(np.float32)

def avgpool(x, k, s, d, pb, pe, include_pad, ceil):
    return pool(x, k, s, d, pb, pe, ceil,
                lambda taps, padded: sum(taps) / (len(taps) + (padded if include_pad else 0)))
x = randn(1, 2, 9, 10)
for name, k, s, d, pads, inc, ceil in (('avgpool_dil_19', [3, 2], [1, 2], [2, 3], [1, 1, 2, 1], 0, 0),
                                         ('avgpool_dil_incpad_19', [3, 2], [2, 1], [2, 3], [1, 1, 2, 1], 1, 0),
                                         ('avgpool_dil_ceil_19', [2, 3], [2, 3], [3, 2], [0, 1, 1, 0], 0, 1),
                                         ('avgpool_dil_incpad_ceil_19', [2, 3], [2, 4], [3, 2], [0, 1, 0, 0], 1, 1),
                                         ('avgpool_dil_1d_19', [3], [1], [2], [2, 2], 0, 0)):
    xx = x if len(k) == 2 else x[:, :, 0]
    y = avgpool(xx.astype(np.float64), k, s, d, pads[:len(k)], pads[len(k):], inc, ceil)
    save(name, [h.make_node('AveragePool', ['x'], ['y'], kernel_shape=k, strides=s, dilations=d,
                            pads=pads, count_include_pad=inc, ceil_mode=ceil)],
         [('x', xx)], [('y', y)], 19)

# ---- LpPool (18: dilations and ceil_mode; 22) and LpNormalization (22) ----
def lppool(x, k, s, d, pb, pe, ceil, pw):
    return pool(x, k, s, d, pb, pe, ceil, lambda taps, _: sum(np.abs(t) ** pw for t in taps) ** (1 / pw))
x = randn(1, 3, 8, 9)
for name, opset, k, s_, d, pads, ceil, pw in (('lppool_p2_pads_11', 11, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], 0, 2),
                                               ('lppool_p3_dil_ceil_18', 18, [2, 3], [2, 2], [2, 2], [0, 1, 1, 0], 1, 3),
                                               ('lppool_p1_22', 22, [2, 2], [1, 1], [1, 1], [0, 0, 0, 0], 0, 1)):
    attrs = dict(kernel_shape=k, strides=s_, pads=pads, p=pw)
    if opset >= 18:
        attrs.update(dilations=d, ceil_mode=ceil)
    save(name, [h.make_node('LpPool', ['x'], ['y'], **attrs)], [('x', x)],
         [('y', lppool(x.astype(np.float64), k, s_, d, pads[:2], pads[2:], ceil, pw))], opset)
x = randn(2, 3, 4)
xd = x.astype(np.float64)
save('lpnorm_p2_22', [h.make_node('LpNormalization', ['x'], ['y'])], [('x', x)],
     [('y', (xd / np.sqrt((xd * xd).sum(-1, keepdims=True))).astype(np.float32))], 22)
save('lpnorm_p1_axis1_1', [h.make_node('LpNormalization', ['x'], ['y'], axis=1, p=1)], [('x', x)],
     [('y', (xd / np.abs(xd).sum(1, keepdims=True)).astype(np.float32))], 1)

# ---- DeformConv (19): bilinear taps at the offset positions, neighbours outside count 0 ----
def deform_conv(x, w, off, b, mask, s, pads, d, group, og):
    n, c, ih, iw = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    y = np.zeros((n, oc, oh, ow))
    def px(bb, ch, hh, ww):
        return x[bb, ch, hh, ww] if 0 <= hh < ih and 0 <= ww < iw else 0.0
    for bb, o, i, j in np.ndindex(n, oc, oh, ow):
        acc = 0.0 if b is None else b[o]
        for ci in range(cg):
            ch = (o // (oc // group)) * cg + ci
            g = ch // (c // og)
            for a, e in np.ndindex(kh, kw):
                t = a * kw + e
                hh = i * s[0] - pads[0] + a * d[0] + off[bb, g * kh * kw * 2 + 2 * t, i, j]
                ww = j * s[1] - pads[1] + e * d[1] + off[bb, g * kh * kw * 2 + 2 * t + 1, i, j]
                h0, w0 = math.floor(hh), math.floor(ww)
                fh, fw = hh - h0, ww - w0
                v = (px(bb, ch, h0, w0) * (1 - fh) * (1 - fw) + px(bb, ch, h0, w0 + 1) * (1 - fh) * fw +
                     px(bb, ch, h0 + 1, w0) * fh * (1 - fw) + px(bb, ch, h0 + 1, w0 + 1) * fh * fw)
                mv = 1.0 if mask is None else mask[bb, g * kh * kw + t, i, j]
                acc += w[o, ci, a, e] * v * mv
        y[bb, o, i, j] = acc
    return y.astype(np.float32)
x = randn(2, 4, 6, 7)
for name, oc, group, og, s_, pads, d, with_b, with_m in (
        ('deform_conv_19', 3, 1, 1, [1, 1], [0, 0, 0, 0], [1, 1], 0, 0),
        ('deform_conv_mask_bias_pads_19', 4, 2, 2, [1, 2], [1, 1, 1, 0], [1, 1], 1, 1),
        ('deform_conv_dil_stride_22', 2, 1, 4, [2, 1], [1, 0, 0, 1], [2, 2], 1, 1)):
    w = randn(oc, 4 // group, 2, 3)
    kh, kw = 2, 3
    oh = (6 + pads[0] + pads[2] - ((kh - 1) * d[0] + 1)) // s_[0] + 1
    ow = (7 + pads[1] + pads[3] - ((kw - 1) * d[1] + 1)) // s_[1] + 1
    off = (randn(2, og * kh * kw * 2, oh, ow) * 1.5).astype(np.float32)
    bias = randn(oc) if with_b else None
    mask = rng.uniform(0, 1, (2, og * kh * kw, oh, ow)).astype(np.float32) if with_m else None
    y = deform_conv(x.astype(np.float64), w.astype(np.float64), off.astype(np.float64), bias, mask, s_, pads, d, group, og)
    ins = ['x', 'w', 'off'] + (['b'] if with_b else ([''] if with_m else [])) + (['m'] if with_m else [])
    save(name, [h.make_node('DeformConv', ins, ['y'], strides=s_, pads=pads, dilations=d, group=group,
                            offset_group=og, kernel_shape=[kh, kw])],
         [('x', x), ('off', off)] + ([('m', mask)] if with_m else []), [('y', y)],
         19 if name.endswith('19') else 22, [('w', w)] + ([('b', bias)] if with_b else []))

# ---- Col2Im (18): every block's taps added into the image (a scatter, unlike our gather) ----
def col2im(x, img, blk, s, d, pads):
    r = len(img)
    n, ck, _ = x.shape
    k = int(np.prod(blk))
    nb = [(img[i] + pads[i] + pads[r + i] - d[i] * (blk[i] - 1) - 1) // s[i] + 1 for i in range(r)]
    y = np.zeros((n, ck // k) + tuple(img))
    for bi, b in enumerate(np.ndindex(*nb)):
        for ti, t in enumerate(np.ndindex(*blk)):
            pos = [b[i] * s[i] - pads[i] + t[i] * d[i] for i in range(r)]
            if all(0 <= pos[i] < img[i] for i in range(r)):
                y[(slice(None), slice(None)) + tuple(pos)] += x[:, ti::k, bi]
    return y.astype(np.float32)
for name, img, blk, s_, d, pads in (('col2im_18', [5, 5], [2, 2], [1, 1], [1, 1], [0, 0, 0, 0]),
                                     ('col2im_strides_pads_dil_18', [6, 7], [2, 3], [2, 2], [2, 1], [1, 0, 1, 2]),
                                     ('col2im_1d_18', [9], [3], [2], [1], [1, 1])):
    r = len(img)
    nb = [(img[i] + pads[i] + pads[r + i] - d[i] * (blk[i] - 1) - 1) // s_[i] + 1 for i in range(r)]
    x = randn(2, 3 * int(np.prod(blk)), int(np.prod(nb)))
    save(name, [h.make_node('Col2Im', ['x', 'i', 'b'], ['y'], strides=s_, dilations=d, pads=pads)], [('x', x)],
         [('y', col2im(x.astype(np.float64), img, blk, s_, d, pads))], 18,
         [('i', np.array(img, np.int64)), ('b', np.array(blk, np.int64))])

# ---- MaxRoiPool (1, 22): Caffe2's RoIPool, coordinates rounded half away from zero ----
def max_roi_pool(x, rois, ph, pw, scale):
    n, c, hh, ww = x.shape
    y = np.zeros((len(rois), c, ph, pw))
    rnd = lambda v: math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        sw, sh, ew, eh = rnd(x1 * scale), rnd(y1 * scale), rnd(x2 * scale), rnd(y2 * scale)
        bh, bw = max(eh - sh + 1, 1) / ph, max(ew - sw + 1, 1) / pw
        for i, j in np.ndindex(ph, pw):
            h0 = min(max(math.floor(i * bh) + sh, 0), hh); h1 = min(max(math.ceil((i + 1) * bh) + sh, 0), hh)
            w0 = min(max(math.floor(j * bw) + sw, 0), ww); w1 = min(max(math.ceil((j + 1) * bw) + sw, 0), ww)
            y[r, :, i, j] = 0 if h1 <= h0 or w1 <= w0 else x[int(b), :, h0:h1, w0:w1].max(axis=(1, 2))
    return y.astype(np.float32)
x = randn(2, 3, 8, 10)
rois = np.array([[0, 1, 1, 6, 5], [1, 0.4, 2.5, 9.6, 7.2], [1, 3, 3, 3, 3], [0, -2, -1, 4.5, 3.5]], np.float32)
save('max_roi_pool_1', [h.make_node('MaxRoiPool', ['x', 'r'], ['y'], pooled_shape=[2, 3])], [('x', x), ('r', rois)],
     [('y', max_roi_pool(x, rois, 2, 3, 1.0))], 1)
rois2 = rois.copy()
rois2[:, 1:] *= 2
save('max_roi_pool_scale_22', [h.make_node('MaxRoiPool', ['x', 'r'], ['y'], pooled_shape=[3, 2], spatial_scale=0.5)],
     [('x', x), ('r', rois2)], [('y', max_roi_pool(x, rois2, 3, 2, 0.5))], 22)

# ---- Pad-19's wrap mode, Pad-18's axes ----
# wrap: "as if the data tensor forms a torus", periodic also where a pad exceeds the dim
# (numpy's np.pad, which the ONNX reference calls, is not periodic there)
def wrap(x, pads):
    for a, (b, e) in enumerate(pads):
        x = np.take(x, np.arange(-b, x.shape[a] + e) % x.shape[a], axis=a)
    return x
x = randn(3, 5)
save('pad_wrap_19', [h.make_node('Pad', ['x', 'p'], ['y'], mode='wrap')], [('x', x)],
     [('y', wrap(x, [(2, 4), (1, 7)]))], 19, [('p', np.array([2, 1, 4, 7], np.int64))])
save('pad_wrap_axes_19', [h.make_node('Pad', ['x', 'p', '', 'a'], ['y'], mode='wrap')], [('x', x)],
     [('y', wrap(x, [(0, 0), (6, 2)]))], 19,
     [('p', np.array([6, 2], np.int64)), ('a', np.array([-1], np.int64))])
x4 = randn(2, 3, 4, 5)
save('pad_axes_constant_18', [h.make_node('Pad', ['x', 'p', 'c', 'a'], ['y'])], [('x', x4)],
     [('y', np.pad(x4, [(0, 0), (0, 0), (1, 2), (0, 0)], constant_values=1.5))], 18,
     [('p', np.array([1, 2], np.int64)), ('c', np.array(1.5, np.float32)), ('a', np.array([2], np.int64))])
save('pad_reflect_axes_21', [h.make_node('Pad', ['x', 'p', '', 'a'], ['y'], mode='reflect')], [('x', x4)],
     [('y', np.pad(x4, [(0, 0), (1, 0), (0, 0), (2, 3)], mode='reflect'))], 21,
     [('p', np.array([2, 1, 3, 0], np.int64)), ('a', np.array([3, 1], np.int64))])

# ---- CenterCropPad (18): the reference's centred slices ----
def center_crop_pad(x, shape, axes=None):
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    out = list(x.shape)
    crop = [slice(None)] * x.ndim
    pad = [slice(None)] * x.ndim
    for a, sh in zip(axes, shape):
        dim = x.shape[a]
        out[a] = sh
        if sh < dim:
            crop[a] = slice((dim - sh) // 2, (dim - sh) // 2 + sh)
        elif sh > dim:
            pad[a] = slice((sh - dim) // 2, (sh - dim) // 2 + dim)
    y = np.zeros(out, x.dtype)
    y[tuple(pad)] = x[tuple(crop)]
    return y
x = randn(5, 6, 3)
save('center_crop_pad_18', [h.make_node('CenterCropPad', ['x', 's'], ['y'])], [('x', x)],
     [('y', center_crop_pad(x, [2, 9, 3]))], 18, [('s', np.array([2, 9, 3], np.int64))])
save('center_crop_pad_axes_18', [h.make_node('CenterCropPad', ['x', 's'], ['y'], axes=[-1, 0])], [('x', x)],
     [('y', center_crop_pad(x, [6, 4], [-1, 0]))], 18, [('s', np.array([6, 4], np.int64))])

# ---- Resize: half_pixel_symmetric (19), axes and keep_aspect_ratio_policy (18) ----
def coord(mode, o, scale, inw, outw):
    if mode == 'half_pixel':
        return (o + 0.5) / scale - 0.5
    if mode == 'half_pixel_symmetric':
        adj = outw / (scale * inw)
        return inw / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
    if mode == 'asymmetric':
        return o / scale
    raise ValueError(mode)
def resize_axis(x, axis, outw, scale, mode, interp):
    inw = x.shape[axis]
    y = np.moveaxis(x, axis, 0)
    res = []
    for o in range(outw):
        c = coord(mode, o, scale, inw, outw)
        if interp == 'nearest':      # round_prefer_floor
            i = int(math.ceil(c - 0.5))
            res.append(y[min(max(i, 0), inw - 1)])
        else:
            c = min(max(c, 0), inw - 1)
            i0 = int(math.floor(c)); i1 = min(i0 + 1, inw - 1); f = c - i0
            res.append(y[i0] * (1 - f) + y[i1] * f)
    return np.moveaxis(np.stack(res), 0, axis)
def aa_coeffs(interp, ratio, scale, a=-0.75):
    """the spec reference's antialiased filters: taps start..-start+1 around the left neighbour"""
    scale = min(scale, 1.0)
    start = int(math.floor((-2 if interp == 'cubic' else -1) / scale) + 1)
    args = np.abs((np.arange(start, 2 - start) - ratio) * scale)
    if interp == 'linear':
        c = np.clip(1 - args, 0, 1)
    else:
        c = np.where(args <= 1, (a + 2) * args ** 3 - (a + 3) * args ** 2 + 1,
                     np.where(args < 2, a * args ** 3 - 5 * a * args ** 2 + 8 * a * args - 4 * a, 0))
    return start, c / c.sum()
def resize_aa_axis(x, axis, outw, scale, interp):
    inw = x.shape[axis]
    y = np.moveaxis(x, axis, 0)
    res = []
    for o in range(outw):
        c = coord('half_pixel', o, scale, inw, outw)
        base = math.ceil(c) - 1
        start, cf = aa_coeffs(interp, c - base, scale)
        idx = np.clip(base + np.arange(start, start + len(cf)), 0, inw - 1)
        res.append(np.tensordot(cf, y[idx], axes=1))
    return np.moveaxis(np.stack(res), 0, axis)
def resize(x, scales, outs, mode, interp):
    y = x.astype(np.float64)
    for a in range(x.ndim):
        if outs[a] != x.shape[a] or scales[a] != 1:
            y = resize_axis(y, a, outs[a], scales[a], mode, interp)
    return y.astype(np.float32)
x = randn(1, 2, 7, 9)
sc = np.array([1, 1, 0.65, 1.7], np.float32)   # no coordinate on a tie of nearest
outs = [int(math.floor(float(sc[i]) * x.shape[i])) for i in range(4)]
for interp in ('linear', 'nearest'):
    save(f'resize_hps_{interp}_19', [h.make_node('Resize', ['x', '', 's'], ['y'], mode=interp,
                                                 coordinate_transformation_mode='half_pixel_symmetric')],
         [('x', x)], [('y', resize(x, [float(v) for v in sc], outs, 'half_pixel_symmetric', interp))], 19,
         [('s', sc)])
save('resize_axes_sizes_18', [h.make_node('Resize', ['x', '', '', 'z'], ['y'], mode='linear', axes=[3, 2])],
     [('x', x)], [('y', resize(x, [1, 1, 4 / 7, 13 / 9], [1, 2, 4, 13], 'half_pixel', 'linear'))], 18,
     [('z', np.array([13, 4], np.int64))])
for pol, pick in (('not_larger', min), ('not_smaller', max)):
    k = pick(5 / 7, 12 / 9)
    outs = [1, 2, int(k * 7 + 0.5), int(k * 9 + 0.5)]
    save(f'resize_keep_{pol}_19', [h.make_node('Resize', ['x', '', '', 'z'], ['y'], mode='linear',
                                               axes=[2, 3], keep_aspect_ratio_policy=pol)],
         [('x', x)], [('y', resize(x, [1, 1, k, k], outs, 'half_pixel', 'linear'))], 19,
         [('z', np.array([5, 12], np.int64))])

# Resize-18's antialias: linear and cubic filters widened by 1/scale when downscaling
x = randn(1, 2, 10, 12)
for interp, sc in (('linear', [1, 1, 0.4, 0.6]), ('cubic', [1, 1, 0.5, 0.75]), ('linear', [1, 1, 1.5, 0.3])):
    outs = [int(math.floor(np.float32(sc[i]) * x.shape[i])) for i in range(4)]
    y = x.astype(np.float64)
    for ax in (2, 3):
        y = resize_aa_axis(y, ax, outs[ax], float(np.float32(sc[ax])), interp)
    save(f'resize_antialias_{interp}_{"_".join(str(v).replace(".", "") for v in sc[2:])}_18',
         [h.make_node('Resize', ['x', '', 's'], ['y'], mode=interp, antialias=1)], [('x', x)],
         [('y', y.astype(np.float32))], 18, [('s', np.array(sc, np.float32))])

# ---- ReduceMax/ReduceMin-20 on bool ----
xb = rng.random((3, 4, 5)) < 0.5
xb[0] = True; xb[1] = False
for op, f in (('ReduceMax', np.any), ('ReduceMin', np.all)):
    save(f'{op.lower()}_bool_20', [h.make_node(op, ['x', 'a'], ['y'], keepdims=0)], [('x', xb)],
         [('y', f(xb, axis=(1, 2)))], 20, [('a', np.array([1, 2], np.int64))])

# ---- DFT-20: the axis is input 2 ----
x = randn(2, 6, 5, 1)
for ax in (1, 2, -2, -3):
    f = np.fft.fft(x[..., 0].astype(np.float64), axis=ax % 4)   # ONNX counts the re/im dim
    y = np.stack([f.real, f.imag], -1).astype(np.float32)
    save(f'dft_axis_{ax}_20'.replace('-', 'm'), [h.make_node('DFT', ['x', '', 'a'], ['y'])], [('x', x)],
         [('y', y)], 20, [('a', np.array(ax, np.int64))])
f = np.fft.fft(x[..., 0].astype(np.float64), axis=2)   # no axis: -2, the last signal axis
save('dft_default_axis_20', [h.make_node('DFT', ['x'], ['y'])], [('x', x)],
     [('y', np.stack([f.real, f.imag], -1).astype(np.float32))], 20)
f = np.fft.fft(x[..., 0].astype(np.float64), axis=1)   # DFT-17: attribute, default 1
save('dft_attr_17', [h.make_node('DFT', ['x'], ['y'])], [('x', x)],
     [('y', np.stack([f.real, f.imag], -1).astype(np.float32))], 17)

# ---- GridSample-20: linear and nearest named the new way (2-D) ----
def grid_sample(x, grid, mode, align):
    n, c, hh, ww = x.shape
    _, ho, wo, _ = grid.shape
    y = np.zeros((n, c, ho, wo))
    def unnorm(v, size):
        return (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
    def px(b, i, j):
        return x[b, :, i, j] if 0 <= i < hh and 0 <= j < ww else np.zeros(c)
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                gx, gy = unnorm(grid[b, i, j, 0], ww), unnorm(grid[b, i, j, 1], hh)
                if mode == 'nearest':
                    y[b, :, i, j] = px(b, int(np.rint(gy)), int(np.rint(gx)))
                    continue
                x0, y0 = int(math.floor(gx)), int(math.floor(gy))
                fx, fy = gx - x0, gy - y0
                y[b, :, i, j] = (px(b, y0, x0) * (1 - fx) * (1 - fy) + px(b, y0, x0 + 1) * fx * (1 - fy) +
                                 px(b, y0 + 1, x0) * (1 - fx) * fy + px(b, y0 + 1, x0 + 1) * fx * fy)
    return y.astype(np.float32)
x = randn(1, 2, 5, 6)
grid = rng.uniform(-1.1, 1.1, (1, 3, 4, 2)).astype(np.float32)
for mode in ('linear', 'nearest'):
    for align in (0, 1):
        save(f'gridsample_{mode}_a{align}_20', [h.make_node('GridSample', ['x', 'g'], ['y'], mode=mode,
                                                            align_corners=align)],
             [('x', x), ('g', grid)], [('y', grid_sample(x.astype(np.float64), grid.astype(np.float64), mode, align))], 20)

# ---- AffineGrid (20), 2-D and 3-D, and feeding GridSample ----
def base(n, align):
    if align:   # a size of 1: 0, as torch.nn.functional.affine_grid (the reference: -1)
        return np.array([0.0]) if n == 1 else -1 + 2 * np.arange(n) / (n - 1)
    return -1 + (2 * np.arange(n) + 1) / n
def affine_grid(theta, size, align):
    sp = size[2:]
    axes = [base(n, align) for n in sp]                 # D, H, W order
    mesh = np.meshgrid(*axes, indexing='ij')
    homo = np.stack([m for m in mesh[::-1]] + [np.ones(mesh[0].shape)], -1)   # x, y, (z), 1
    return np.einsum('nik,...k->n...i', theta.astype(np.float64), homo).astype(np.float32)
for r, size in ((2, [2, 3, 4, 5]), (2, [1, 1, 1, 6]), (3, [2, 1, 3, 4, 2])):
    th = randn(size[0], r, r + 1)
    for align in (0, 1):
        save(f'affine_grid_{r}d_{"x".join(map(str, size[2:]))}_a{align}_20',
             [h.make_node('AffineGrid', ['t', 'z'], ['y'], align_corners=align)], [('t', th)],
             [('y', affine_grid(th, size, align))], 20, [('z', np.array(size, np.int64))])
th = (np.array([[[0.9, -0.2, 0.1], [0.3, 0.8, -0.1]]]) + 0.05 * randn(1, 2, 3)).astype(np.float32)
x = randn(1, 2, 5, 6)
g = affine_grid(th, [1, 2, 4, 7], 0)
save('affine_grid_sample_20', [h.make_node('AffineGrid', ['t', 'z'], ['g']),
                               h.make_node('GridSample', ['x', 'g'], ['y'])], [('x', x), ('t', th)],
     [('y', grid_sample(x.astype(np.float64), g.astype(np.float64), 'linear', 0))], 20,
     [('z', np.array([1, 2, 4, 7], np.int64))])

# GridSample-20 in 1-D and 3-D: every tap from the spec's definitions (zeros: 0 outside;
# border: coordinates clamped into the input, per tap for cubic)
def grid_sample_nd(x, grid, mode, pad, align):
    n, c = x.shape[:2]
    sp = x.shape[2:]
    r = len(sp)
    out = np.zeros((n, c) + grid.shape[1:-1])
    def unnorm(v, size):
        return (v + 1) / 2 * (size - 1) if align else ((v + 1) * size - 1) / 2
    def clampc(v, size):
        return min(max(v, 0), size - 1) if pad == 'border' else v
    def tap(b, co):
        if all(0 <= co[d] <= sp[d] - 1 for d in range(r)):
            return x[(b, slice(None)) + tuple(int(v) for v in co)]
        return np.zeros(c)
    def cubic_w(f, a=-0.75):
        ws = []
        for dist in (f + 1, f, 1 - f, 2 - f):
            dd = abs(dist)
            ws.append(((a + 2) * dd - (a + 3)) * dd * dd + 1 if dd <= 1 else ((a * dd - 5 * a) * dd + 8 * a) * dd - 4 * a)
        return ws
    for b in range(n):
        for o in np.ndindex(*grid.shape[1:-1]):
            g = grid[(b,) + o]
            co = [unnorm(g[r - 1 - d], sp[d]) for d in range(r)]      # grid's first component: last dim
            if mode == 'nearest':
                out[(b, slice(None)) + o] = tap(b, [np.rint(clampc(v, sp[d])) for d, v in enumerate(co)])
                continue
            if mode == 'linear':
                co = [clampc(v, sp[d]) for d, v in enumerate(co)]
            f0 = [math.floor(v) for v in co]
            fr = [v - f for v, f in zip(co, f0)]
            nt = 2 if mode == 'linear' else 4
            acc = np.zeros(c)
            for js in np.ndindex(*([nt] * r)):
                wt = 1.0
                pos = []
                for d, j in enumerate(js):
                    if mode == 'linear':
                        wt *= (1 - fr[d]) if j == 0 else fr[d]
                        pos.append(f0[d] + j)
                    else:
                        wt *= cubic_w(fr[d])[j]
                        pos.append(clampc(f0[d] + j - 1, sp[d]))
                acc = acc + wt * tap(b, pos)
            out[(b, slice(None)) + o] = acc
    return out.astype(np.float32)
x1, g1 = randn(2, 3, 7), rng.uniform(-1.2, 1.2, (2, 5, 1)).astype(np.float32)
x3, g3 = randn(1, 2, 4, 5, 6), rng.uniform(-1.1, 1.1, (1, 2, 3, 4, 3)).astype(np.float32)
for (xx, gg, dim) in ((x1, g1, 1), (x3, g3, 3)):
    for mode, pad, align in (('linear', 'zeros', 0), ('linear', 'border', 1), ('nearest', 'zeros', 0),
                             ('nearest', 'border', 1), ('cubic', 'zeros', 0), ('cubic', 'border', 1)):
        save(f'gridsample_{dim}d_{mode}_{pad}_20', [h.make_node('GridSample', ['x', 'g'], ['y'], mode=mode,
                                                                padding_mode=pad, align_corners=align)],
             [('x', xx), ('g', gg)], [('y', grid_sample_nd(xx.astype(np.float64), gg.astype(np.float64), mode, pad, align))], 20)

# ---- QuantizeLinear / DequantizeLinear: blocked (21), output_dtype (21, 23), 16-bit (19, 21) ----
def quant(x, s, zp, lo, hi):
    return np.clip(np.rint(x.astype(np.float32) / s) + zp, lo, hi)
x = randn(4, 6) * 3
s = rng.uniform(0.02, 0.05, (4, 3)).astype(np.float32)
zp = rng.integers(-5, 5, (4, 3)).astype(np.int8)
se, ze = np.repeat(s, 2, axis=1), np.repeat(zp, 2, axis=1).astype(np.float32)
q = quant(x, se, ze, -128, 127).astype(np.int8)
save('quantize_blocked_21', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=1, block_size=2)],
     [('x', x)], [('y', q)], 21, [('s', s), ('z', zp)])
save('dequantize_blocked_21', [h.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'], axis=1, block_size=2)],
     [('q', q)], [('y', ((q.astype(np.float32) - ze) * se).astype(np.float32))], 21, [('s', s), ('z', zp)])
s0 = rng.uniform(0.02, 0.05, (2, 6)).astype(np.float32)
qb = rng.integers(0, 255, (4, 6)).astype(np.uint8)
save('dequantize_blocked_axis0_21', [h.make_node('DequantizeLinear', ['q', 's'], ['y'], axis=0, block_size=2)],
     [('q', qb)], [('y', (qb.astype(np.float32) * np.repeat(s0, 2, axis=0)).astype(np.float32))], 21, [('s', s0)])
# a shorter last block: 7 columns in blocks of 3 (3, 3, 1)
x7 = randn(3, 7) * 3
s7 = rng.uniform(0.02, 0.05, (3, 3)).astype(np.float32)
z7 = rng.integers(100, 150, (3, 3)).astype(np.uint8)
se7, ze7 = np.repeat(s7, 3, axis=1)[:, :7], np.repeat(z7, 3, axis=1)[:, :7].astype(np.float32)
q7 = quant(x7, se7, ze7, 0, 255).astype(np.uint8)
save('quantize_blocked_short_21', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=-1, block_size=3)],
     [('x', x7)], [('y', q7)], 21, [('s', s7), ('z', z7)])
save('dequantize_blocked_short_21', [h.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'], axis=1, block_size=3)],
     [('q', q7), ('s', s7), ('z', z7)], [('y', ((q7.astype(np.float32) - ze7) * se7).astype(np.float32))], 21)
save('quantize_output_dtype_21', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], output_dtype=T.INT8)],
     [('x', x)], [('y', quant(x, np.float32(0.03), 0, -128, 127).astype(np.int8))], 21,
     [('s', np.array(0.03, np.float32))])
save('quantize_int16_21', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'])], [('x', x * 100)],
     [('y', quant(x * 100, np.float32(0.01), -7, -32768, 32767).astype(np.int16))], 21,
     [('s', np.array(0.01, np.float32)), ('z', np.array(-7, np.int16))])
save('quantize_uint16_output_dtype_21', [h.make_node('QuantizeLinear', ['x', 's'], ['y'], output_dtype=T.UINT16)],
     [('x', x * 100)], [('y', quant(x * 100, np.float32(0.01), 0, 0, 65535).astype(np.uint16))], 21,
     [('s', np.array(0.01, np.float32))])
xh = (randn(3, 5) * 2).astype(np.float16)
sh = np.array(0.0625, np.float16)
save('quantize_float16_19', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'])], [('x', xh)],
     [('y', quant(xh.astype(np.float32), np.float32(sh), 3, 0, 255).astype(np.uint8))], 19,
     [('s', sh), ('z', np.array(3, np.uint8))])
qi = rng.integers(-30000, 30000, (3, 5)).astype(np.int16)
save('dequantize_int16_float16_21', [h.make_node('DequantizeLinear', ['q', 's', 'z'], ['y'])], [('q', qi)],
     [('y', ((qi.astype(np.float64) - 7) * np.float64(sh)).astype(np.float16))], 21,
     [('s', sh), ('z', np.array(7, np.int16))])
save('dequantize_output_dtype_23', [h.make_node('DequantizeLinear', ['q', 's'], ['y'], output_dtype=T.FLOAT16)],
     [('q', qb)], [('y', (qb.astype(np.float64) * 0.03125).astype(np.float16))], 23,
     [('s', np.array(0.03125, np.float32))])

# ---- requantisation edges (backend/kernel.c, pack_requant; docs/int8.md): ties at .5 (to
# even, with odd zero points, where rounding after the zero point's add would differ), values
# at and just past the saturation limits, magnitudes past 2^22 (where adding 1.5 * 2^23 would
# no longer round exactly), past int32 (cvtps2dq's INT_MIN) and infinities; int8 and uint8,
# per tensor and per channel (the channel innermost: a zero point per vector lane). Scales are
# powers of two, so the reference's float32 steps are exact and it is numpy's rint. ----
def edge_values(lo, hi):
    k = np.arange(lo - 6, hi + 7, dtype=np.float64)
    v = np.concatenate([k, k + 0.5, k - 0.5, k + 0.25, [lo - 0.5, hi + 0.5, lo - 0.49, hi + 0.49],
                        [2.0 ** 22 - 0.5, 2.0 ** 22 + 0.5, -2.0 ** 22 - 0.5, 2.0 ** 23, -2.0 ** 23 - 1, 1e6 + 0.5, -1e6 - 0.5],
                        [3e9, -3e9, 2.0 ** 31, -2.0 ** 31, 1e30, -1e30, np.inf, -np.inf]])
    return np.resize(v, (len(v) + 31) // 32 * 32).astype(np.float32)
for dt, zp, lo, hi in ((np.int8, -3, -128, 127), (np.uint8, 131, 0, 255)):
    nm = np.dtype(dt).name
    x = (edge_values(lo - zp, hi - zp) * 0.5).reshape(-1, 32)          # x / 0.5: the edges
    q = quant(x, np.float32(0.5), zp, lo, hi).astype(dt)
    save(f'quantize_edges_{nm}_21', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'])], [('x', x)], [('y', q)], 21,
         [('s', np.array(0.5, np.float32)), ('z', np.array(zp, dt))])
    # per channel, axis 1 innermost: 16 channels of scales 2^-3 .. 2^3 and zero points odd and even
    sc = (2.0 ** rng.integers(-3, 4, 16)).astype(np.float32)
    zc = (rng.integers(lo, hi, 16, endpoint=True)).astype(dt)
    zc[:4] = (lo, hi, zp, zp + 1)
    xc = edge_values(lo - 0, hi - 0)
    xc = np.resize(xc, (len(xc) + 15) // 16 * 16).reshape(-1, 16) * sc
    qc = quant(xc, sc, zc.astype(np.float32), lo, hi).astype(dt)
    save(f'quantize_edges_axis_{nm}_21', [h.make_node('QuantizeLinear', ['x', 's', 'z'], ['y'], axis=1)],
         [('x', xc.astype(np.float32))], [('y', qc)], 21, [('s', sc), ('z', zc)])
    # QLinearConv 1x1 by constant int8 weights (the int8 kernels' integer accumulation and
    # requantising store): per-channel scales 2^-2 .. 2^20 make ties, saturation at both
    # ends and products past int32; pixels that are the zero point but for one channel put
    # chosen multiples of the weights' first column in the accumulators
    K, N = 64, 32
    za = 0 if dt == np.int8 else 128
    A = rng.integers(lo, hi, (12, K), endpoint=True).astype(np.int64)
    for r, c in enumerate((1, -1, 2, -3, 127, -128, 255 - za, -za)):
        if lo <= za + c <= hi:
            A[r] = za
            A[r, 0] = za + c
    B = rng.integers(-128, 127, (K, N), endpoint=True).astype(np.int64)
    B[0] = np.resize(np.array([1, -1, 2, -2, 3, -3, 127, -128, 64, -64, 5, 7], np.int64), N)
    bs = (2.0 ** np.resize(np.array([-1, -2, 0, -7, -8, -10, 1, 10, 20, -12, -14, -13, -1, 0, 3, -9]), N)).astype(np.float32)
    acc = (A - za) @ B
    v = acc * bs.astype(np.float64)
    y = np.clip(np.rint(v) + zp, lo, hi).astype(dt)
    assert (y == lo).any() and (y == hi).any() and ((v % 1) == 0.5).sum() > 20 and (np.abs(v) > 2 ** 31).any()
    save(f'quantize_edges_qlinearconv_{nm}_10',
         [h.make_node('QLinearConv', ['x', 'xs', 'xz', 'w', 'ws', 'wz', 'ys', 'yz'], ['y'])],
         [('x', A.T.reshape(1, K, 3, 4).astype(dt))], [('y', y.T.reshape(1, N, 3, 4))], 10,
         [('xs', np.array(1, np.float32)), ('xz', np.array(za, dt)), ('w', B.T.reshape(N, K, 1, 1).astype(np.int8)),
          ('ws', bs), ('wz', np.zeros(N, np.int8)), ('ys', np.array(1, np.float32)), ('yz', np.array(zp, dt))])

    # the same 1x1 conv read by a 3x3 depthwise conv whose centre tap is 1 (scales 1, the same
    # zero point: the result is the 1x1 conv's): the depthwise conv accumulates in float, so
    # the 1x1 conv stores its requantised bytes as floats (magic_requant)
    dw = np.zeros((N, 1, 3, 3), np.int8)
    dw[:, 0, 1, 1] = 1
    save(f'quantize_edges_qlinearconv_dw_{nm}_10',
         [h.make_node('QLinearConv', ['x', 'xs', 'xz', 'w', 'ws', 'wz', 'ys', 'yz'], ['t']),
          h.make_node('QLinearConv', ['t', 'ys', 'yz', 'dw', 'ys', 'dz', 'ys', 'yz'], ['y'], group=N, pads=[1, 1, 1, 1])],
         [('x', A.T.reshape(1, K, 3, 4).astype(dt))], [('y', y.T.reshape(1, N, 3, 4))], 10,
         [('xs', np.array(1, np.float32)), ('xz', np.array(za, dt)), ('w', B.T.reshape(N, K, 1, 1).astype(np.int8)),
          ('ws', bs), ('wz', np.zeros(N, np.int8)), ('ys', np.array(1, np.float32)), ('yz', np.array(zp, dt)),
          ('dw', dw), ('dz', np.array(0, np.int8))])

# ---- Equal-19 on strings, broadcast ----
sa = np.array(['ab', 'cd', '', 'x y'], dtype=object)
sb = np.array([['ab'], [''], ['x y'], ['abc']], dtype=object)
save('equal_string_19', [h.make_node('Equal', ['a', 'b'], ['y'])], [('a', sa), ('b', sb)],
     [('y', sa.astype(str) == sb.astype(str))], 19)

# ---- RotaryEmbedding (23): the spec's reference algorithm, in float64 ----
def rope(x, cos, sin, pos, interleaved, rd, nh):
    shape = x.shape
    x = x.astype(np.float64)
    x = np.transpose(x, (0, 2, 1, 3)) if x.ndim == 4 else x.reshape(shape[0], shape[1], nh, -1)
    rd = rd or x.shape[3]
    xr, xn = x[..., :rd], x[..., rd:]
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if interleaved else np.split(xr, 2, axis=-1)
    re, im = cos * x1 - sin * x2, sin * x1 + cos * x2
    xr = np.stack([re, im], -1).reshape(xr.shape) if interleaved else np.concatenate([re, im], -1)
    y = np.concatenate([xr, xn], -1)
    y = y.reshape(shape) if len(shape) == 3 else np.transpose(y, (0, 2, 1, 3))
    return y.astype(np.float32)
x = randn(2, 3, 5, 8)
ang = rng.uniform(0, 6.3, (7, 4))
cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
pos = rng.integers(0, 7, (2, 5)).astype(np.int64)
save('rotary_4d_pos_23', [h.make_node('RotaryEmbedding', ['x', 'c', 's', 'p'], ['y'])],
     [('x', x), ('p', pos)], [('y', rope(x, cos, sin, pos, 0, 0, 0))], 23, [('c', cos), ('s', sin)])
save('rotary_4d_pos_interleaved_23', [h.make_node('RotaryEmbedding', ['x', 'c', 's', 'p'], ['y'], interleaved=1)],
     [('x', x), ('p', pos), ('c', cos), ('s', sin)], [('y', rope(x, cos, sin, pos, 1, 0, 0))], 23)
x3 = randn(2, 5, 3 * 10)
ang3 = rng.uniform(0, 6.3, (2, 5, 3))
c3, s3 = np.cos(ang3).astype(np.float32), np.sin(ang3).astype(np.float32)
for inter in (0, 1):
    save(f'rotary_3d_partial_i{inter}_23', [h.make_node('RotaryEmbedding', ['x', 'c', 's'], ['y'], interleaved=inter,
                                                        num_heads=3, rotary_embedding_dim=6)],
         [('x', x3), ('c', c3), ('s', s3)], [('y', rope(x3, c3, s3, None, inter, 6, 3))], 23)

# ---- Attention (23, 24's nonpad_kv_seqlen, 25's windows), from the spec's definition ----
def attention(q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, scale=None, causal=0,
              hq=None, hkv=None, softcap=0, left_window_size=-1, right_window_size=-1):
    left, right = left_window_size, right_window_size
    three = q.ndim == 3
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if three:
        b, sq = q.shape[:2]
        q = q.reshape(b, sq, hq, -1).transpose(0, 2, 1, 3)
        k = k.reshape(b, k.shape[1], hkv, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, v.shape[1], hkv, -1).transpose(0, 2, 1, 3)
    if past_k is not None:
        k = np.concatenate([past_k, k], 2)
        v = np.concatenate([past_v, v], 2)
    pk, pv = k, v
    b, nq, sq, dk = q.shape
    t = k.shape[2]
    scale = 1 / math.sqrt(dk) if scale is None else scale
    bias = np.zeros((b, nq, sq, t))
    allowed = np.ones((b, nq, sq, t), bool)
    if mask is not None:
        m = mask
        if m.shape[-1] < t:
            m = np.concatenate([m, np.full(m.shape[:-1] + (t - m.shape[-1],), False if m.dtype == bool else -np.inf)], -1)
        if m.dtype == bool:
            allowed &= np.broadcast_to(m, allowed.shape)
        else:
            bias = bias + m
    off = np.full((b, 1, 1, 1), past_k.shape[2] if past_k is not None else 0)
    if nonpad is not None:
        off = (nonpad - sq).reshape(b, 1, 1, 1)
        allowed &= np.arange(t).reshape(1, 1, 1, t) < nonpad.reshape(b, 1, 1, 1)
    i = np.arange(sq).reshape(1, 1, sq, 1) + off
    j = np.arange(t).reshape(1, 1, 1, t)
    if causal:
        allowed &= j <= i
    if left >= 0:
        allowed &= i - j <= left
    if right >= 0:
        allowed &= j - i <= right
    rep = nq // k.shape[1]
    k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    qk = [s]
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    qk.append(s)
    s = np.where(allowed, s + bias, -np.inf)
    qk.append(s)
    mx = s.max(-1, keepdims=True)
    none = np.isneginf(mx)
    e = np.exp(s - np.where(none, 0, mx))
    pr = np.where(none, 0, e / np.where(none, 1, e.sum(-1, keepdims=True)))
    qk.append(pr)
    y = pr @ v
    if three:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return y.astype(np.float32), pk.astype(np.float32), pv.astype(np.float32), [a.astype(np.float32) for a in qk]
def attn_case(name, opset, ins, outs=('y',), inits=(), **attrs):
    names = ['q', 'k', 'v', 'mask', 'past_k', 'past_v', 'nonpad']
    kw = {key: val for key, val in ins.items() if key not in names[:3]}
    y, pk, pv, qk = attention(ins['q'], ins['k'], ins['v'], **kw, **{a: attrs[a] for a in attrs if a not in
                          ('is_causal', 'q_num_heads', 'kv_num_heads', 'qk_matmul_output_mode')},
                          causal=attrs.get('is_causal', 0), hq=attrs.get('q_num_heads'), hkv=attrs.get('kv_num_heads'))
    last = max(i for i, nm in enumerate(names) if nm in ins)
    node_in = [nm if nm in ins else '' for nm in names[:last + 1]]
    res = {'y': y, 'present_k': pk, 'present_v': pv, 'qk': qk[attrs.get('qk_matmul_output_mode', 0)]}
    allouts = ['y', 'present_k', 'present_v', 'qk']
    node_out = [o if o in outs else '' for o in allouts[:max(allouts.index(o) for o in outs if o) + 1]]
    save(name, [h.make_node('Attention', node_in, node_out, **attrs)],
         [(nm, ins[nm]) for nm in names if nm in ins and nm not in inits],
         [(o, res[o]) for o in outs if o], opset, [(nm, ins[nm]) for nm in inits])
q4, k4, v4 = randn(2, 4, 5, 8), randn(2, 4, 6, 8), randn(2, 4, 6, 3)
attn_case('attention_4d_23', 23, {'q': q4, 'k': k4, 'v': v4})
attn_case('attention_4d_gqa_causal_scale_23', 23, {'q': q4, 'k': k4[:, :2], 'v': v4[:, :2]}, is_causal=1, scale=0.3)
attn_case('attention_4d_boolmask_softcap_23', 23,
          {'q': q4, 'k': k4, 'v': v4, 'mask': rng.random((5, 6)) < 0.7}, softcap=2.0)
attn_case('attention_4d_floatmask_short_23', 23,
          {'q': q4, 'k': k4, 'v': v4, 'mask': randn(2, 1, 5, 4)}, inits=('mask',))
q3, k3, v3 = randn(2, 3, 4 * 6), randn(2, 5, 2 * 6), randn(2, 5, 2 * 7)
attn_case('attention_3d_gqa_23', 23, {'q': q3, 'k': k3, 'v': v3}, q_num_heads=4, kv_num_heads=2)
pk, pv = randn(2, 2, 4, 6), randn(2, 2, 4, 7)
attn_case('attention_3d_past_causal_23', 23, {'q': q3, 'k': k3, 'v': v3, 'past_k': pk, 'past_v': pv},
          outs=('y', 'present_k', 'present_v'), q_num_heads=4, kv_num_heads=2, is_causal=1)
attn_case('attention_4d_past_boolmask_23', 23,
          {'q': q4, 'k': k4[:, :, :2], 'v': v4[:, :, :2], 'mask': rng.random((2, 4, 5, 5)) < 0.6,
           'past_k': randn(2, 4, 3, 8), 'past_v': randn(2, 4, 3, 3)}, outs=('y', 'present_k', 'present_v'))
attn_case('attention_4d_past_no_present_23', 23,
          {'q': q4, 'k': k4[:, :, :2], 'v': v4[:, :, :2], 'past_k': randn(2, 4, 3, 8), 'past_v': randn(2, 4, 3, 3)},
          outs=('y', '', 'present_v'), is_causal=1)
fully = np.ones((5, 6), bool); fully[2] = False    # row 2 attends nothing: zeros
attn_case('attention_4d_fully_masked_row_23', 23, {'q': q4, 'k': k4, 'v': v4, 'mask': fully}, inits=('mask',))
mask = rng.random((5, 6)) < 0.7
mask[3] = False
for mode in range(4):
    attn_case(f'attention_qk_output_mode{mode}_23', 23, {'q': q4, 'k': k4, 'v': v4, 'mask': mask},
              outs=('y', 'qk'), inits=('mask',), softcap=2.0, qk_matmul_output_mode=mode)
attn_case('attention_4d_nonpad_causal_24', 24, {'q': q4, 'k': k4, 'v': v4, 'nonpad': np.array([6, 5], np.int64)},
          is_causal=1)
attn_case('attention_4d_window_25', 25, {'q': q4, 'k': k4, 'v': v4}, left_window_size=2, right_window_size=1)
attn_case('attention_4d_causal_window_25', 25, {'q': q4, 'k': k4, 'v': v4}, is_causal=1, left_window_size=1)

# ---- TensorScatter (24): the spec's pseudocode ----
def tensor_scatter(past, upd, w, axis, mode):
    out = past.copy()
    axis %= past.ndim
    m = past.shape[axis]
    for prefix in np.ndindex(past.shape[:axis]):
        for j in range(upd.shape[axis]):
            pos = (0 if w is None else w[prefix[0]]) + j
            if mode == 'circular':
                pos %= m
            out[prefix + (pos,)] = upd[prefix + (j,)]
    return out
past, upd = randn(3, 2, 7, 4), randn(3, 2, 3, 4)
save('tensor_scatter_prefill_24', [h.make_node('TensorScatter', ['c', 'u'], ['y'])], [('c', past), ('u', upd)],
     [('y', tensor_scatter(past, upd, None, -2, 'linear'))], 24)
w = np.array([0, 4, 2], np.int64)
save('tensor_scatter_linear_24', [h.make_node('TensorScatter', ['c', 'u', 'w'], ['y'])],
     [('c', past), ('u', upd), ('w', w)], [('y', tensor_scatter(past, upd, w, -2, 'linear'))], 24)
w = np.array([5, 13, 6], np.int64)     # wrapping past the end, and an index beyond M
save('tensor_scatter_circular_24', [h.make_node('TensorScatter', ['c', 'u', 'w'], ['y'], mode='circular')],
     [('c', past), ('u', upd), ('w', w)], [('y', tensor_scatter(past, upd, w, -2, 'circular'))], 24)
pi, ui = rng.integers(-9, 9, (2, 6, 3)).astype(np.int32), rng.integers(-9, 9, (2, 2, 3)).astype(np.int32)
w = np.array([1, 3], np.int64)
save('tensor_scatter_axis1_int32_24', [h.make_node('TensorScatter', ['c', 'u', 'w'], ['y'], axis=1)],
     [('c', pi), ('u', ui), ('w', w)], [('y', tensor_scatter(pi, ui, w, 1, 'linear'))], 24)

# ---- Cast-19's saturate and Cast-24's round_mode, which apply to float8 only ----
x = randn(3, 4) * 1000
save('cast_saturate_19', [h.make_node('Cast', ['x'], ['y'], to=T.FLOAT16, saturate=0)], [('x', x)],
     [('y', x.astype(np.float16))], 19)
save('cast_round_mode_24', [h.make_node('Cast', ['x'], ['y'], to=T.INT32, round_mode='down')], [('x', x)],
     [('y', x.astype(np.int32))], 24)

# ---- a LeNet-like network re-stamped at opsets 19, 21, 23, 26 ----
def conv(x, w, b):
    n, c, hh, ww = x.shape
    m, _, kh, kw = w.shape
    y = np.zeros((n, m, hh - kh + 1, ww - kw + 1))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum('nchw,mc->nmhw', x[:, :, i:i + y.shape[2], j:j + y.shape[3]], w[:, :, i, j])
    return y + b.reshape(1, m, 1, 1)
def maxpool2(x):
    n, c, hh, ww = x.shape
    return x[:, :, :hh // 2 * 2, :ww // 2 * 2].reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
x = randn(2, 1, 28, 28)
w1, b1 = randn(6, 1, 5, 5) * 0.3, randn(6) * 0.1
w2, b2 = randn(16, 6, 5, 5) * 0.1, randn(16) * 0.1
f1, c1 = randn(120, 256) * 0.05, randn(120) * 0.1
f2, c2 = randn(10, 120) * 0.1, randn(10) * 0.1
a = maxpool2(np.maximum(conv(x.astype(np.float64), w1, b1), 0))
a = maxpool2(np.maximum(conv(a, w2, b2), 0)).reshape(2, 256)
a = np.maximum(a @ f1.T.astype(np.float64) + c1, 0) @ f2.T.astype(np.float64) + c2
e = np.exp(a - a.max(1, keepdims=True))
y = (e / e.sum(1, keepdims=True)).astype(np.float32)
nodes = [h.make_node('Conv', ['x', 'w1', 'b1'], ['c1']), h.make_node('Relu', ['c1'], ['r1']),
         h.make_node('MaxPool', ['r1'], ['p1'], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node('Conv', ['p1', 'w2', 'b2'], ['c2']), h.make_node('Relu', ['c2'], ['r2']),
         h.make_node('MaxPool', ['r2'], ['p2'], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node('Reshape', ['p2', 'shape'], ['fl']),
         h.make_node('Gemm', ['fl', 'f1', 'c1b'], ['g1'], transB=1), h.make_node('Relu', ['g1'], ['r3']),
         h.make_node('Gemm', ['r3', 'f2', 'c2b'], ['g2'], transB=1), h.make_node('Softmax', ['g2'], ['y'])]
inits = [('w1', w1), ('b1', b1), ('w2', w2), ('b2', b2), ('shape', np.array([2, 256], np.int64)),
         ('f1', f1), ('c1b', c1), ('f2', f2), ('c2b', c2)]
for opset in (19, 21, 23, 26):
    save(f'lenet_{opset}', nodes, [('x', x)], [('y', y)], opset, inits)
