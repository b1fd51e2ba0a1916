# gen.py OUTDIR - models large enough that parallelize splits their kernels (convs, depthwise
# convs, dense layers, attention-like matmuls, elementwise maps, copies, pools), each with a
# random input and a numpy reference output in test_data_set_0, for tests/threads.sh.
import os, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

out = sys.argv[1]
rng = np.random.default_rng(7)
F = TensorProto.FLOAT


def conv2d(x, w, b, stride=1, pad=0, group=1):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                y[:, g * mg:(g + 1) * mg] += np.einsum('nchw,mc->nmhw', patch, w[g * mg:(g + 1) * mg, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def save(name, nodes, inputs, outputs, inits, feeds, refs):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, 'test_data_set_0'), exist_ok=True)
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, 'model.onnx'))
    for i, (k, v) in enumerate(feeds):
        open(os.path.join(d, 'test_data_set_0', f'input_{i}.pb'), 'wb').write(numpy_helper.from_array(v, k).SerializeToString())
    for i, (k, v) in enumerate(refs):
        open(os.path.join(d, 'test_data_set_0', f'output_{i}.pb'), 'wb').write(numpy_helper.from_array(v.astype(np.float32), k).SerializeToString())


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, list(shape))


def arr(a, name):
    return numpy_helper.from_array(a.astype(np.float32), name)


# a small CNN: stem conv (3 channels, stride 2), depthwise 3x3 with SiLU, pointwise, residual
# add, max pool, global average pool, dense
x = rng.standard_normal((1, 3, 96, 96)).astype(np.float32)
w1 = (rng.standard_normal((32, 3, 3, 3)) * 0.3).astype(np.float32); b1 = rng.standard_normal(32).astype(np.float32) * 0.1
wd = (rng.standard_normal((32, 1, 3, 3)) * 0.3).astype(np.float32); bd = rng.standard_normal(32).astype(np.float32) * 0.1
wp = (rng.standard_normal((32, 32, 1, 1)) * 0.2).astype(np.float32); bp = rng.standard_normal(32).astype(np.float32) * 0.1
wf = (rng.standard_normal((10, 32)) * 0.2).astype(np.float32); bf = rng.standard_normal(10).astype(np.float32) * 0.1
y1 = np.maximum(conv2d(x.astype(np.float64), w1, b1, 2, 1), 0)
yd = conv2d(y1, wd, bd, 1, 1, 32)
ys = yd / (1 + np.exp(-yd))
yp = conv2d(ys, wp, bp) + y1
ym = yp.reshape(1, 32, 24, 2, 24, 2).max(axis=(3, 5))
yg = ym.mean(axis=(2, 3))
yo = yg @ wf.T + bf
save('cnn', [
    helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node('Relu', ['c1'], ['r1']),
    helper.make_node('Conv', ['r1', 'wd', 'bd'], ['cd'], pads=[1, 1, 1, 1], group=32),
    helper.make_node('Sigmoid', ['cd'], ['sg']),
    helper.make_node('Mul', ['cd', 'sg'], ['sw']),
    helper.make_node('Conv', ['sw', 'wp', 'bp'], ['cp']),
    helper.make_node('Add', ['cp', 'r1'], ['ad']),
    helper.make_node('MaxPool', ['ad'], ['mp'], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node('GlobalAveragePool', ['mp'], ['gp']),
    helper.make_node('Flatten', ['gp'], ['fl']),
    helper.make_node('Gemm', ['fl', 'wf', 'bf'], ['y'], transB=1),
], [vi('x', x.shape)], [vi('y', yo.shape)],
    [arr(w1, 'w1'), arr(b1, 'b1'), arr(wd, 'wd'), arr(bd, 'bd'), arr(wp, 'wp'), arr(bp, 'bp'), arr(wf, 'wf'), arr(bf, 'bf')],
    [('x', x)], [('y', yo)])

# a ResNeXt/RegNet-like block: 1x1 conv, 3x3 grouped conv of 8 and of 4 channels a group
# (fewer than an AVX-512 vector's lanes: output channels across groups as lanes,
# passes/sched_group.c), 1x1 conv, global average pool
xq = rng.standard_normal((1, 16, 40, 40)).astype(np.float32)
wa = (rng.standard_normal((48, 16, 1, 1)) * 0.25).astype(np.float32); ba = rng.standard_normal(48).astype(np.float32) * 0.1
wg = (rng.standard_normal((48, 8, 3, 3)) * 0.1).astype(np.float32); bg = rng.standard_normal(48).astype(np.float32) * 0.1
wh = (rng.standard_normal((48, 4, 3, 3)) * 0.15).astype(np.float32); bh = rng.standard_normal(48).astype(np.float32) * 0.1
wz = (rng.standard_normal((32, 48, 1, 1)) * 0.15).astype(np.float32); bz = rng.standard_normal(32).astype(np.float32) * 0.1
ya = np.maximum(conv2d(xq.astype(np.float64), wa, ba), 0)
yb = np.maximum(conv2d(ya, wg, bg, 1, 1, 6), 0)
yc = np.maximum(conv2d(yb, wh, bh, 2, 1, 12), 0)
yz = conv2d(yc, wz, bz).mean(axis=(2, 3), keepdims=True)
save('grouped', [
    helper.make_node('Conv', ['x', 'wa', 'ba'], ['ca']), helper.make_node('Relu', ['ca'], ['ra']),
    helper.make_node('Conv', ['ra', 'wg', 'bg'], ['cg'], pads=[1, 1, 1, 1], group=6),
    helper.make_node('Relu', ['cg'], ['rg']),
    helper.make_node('Conv', ['rg', 'wh', 'bh'], ['ch'], pads=[1, 1, 1, 1], strides=[2, 2], group=12),
    helper.make_node('Relu', ['ch'], ['rh']),
    helper.make_node('Conv', ['rh', 'wz', 'bz'], ['cz']),
    helper.make_node('GlobalAveragePool', ['cz'], ['y']),
], [vi('x', xq.shape)], [vi('y', yz.shape)],
    [arr(wa, 'wa'), arr(ba, 'ba'), arr(wg, 'wg'), arr(bg, 'bg'), arr(wh, 'wh'), arr(bh, 'bh'), arr(wz, 'wz'), arr(bz, 'bz')],
    [('x', xq)], [('y', yz)])

# attention-like: q = x Wq, k = x Wk, softmax(q k^T / 8) (x Wv), a dense layer with GELU-ish tanh
T, D = 128, 192
xa = rng.standard_normal((1, T, D)).astype(np.float32)
wq, wk, wv, wo = [(rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32) for _ in range(4)]
xd = xa.astype(np.float64)
q, k, v = xd @ wq, xd @ wk, xd @ wv
s = q @ k.transpose(0, 2, 1) / 8
s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
o = np.tanh((s @ v) @ wo)
save('attention', [
    helper.make_node('MatMul', ['x', 'wq'], ['q']),
    helper.make_node('MatMul', ['x', 'wk'], ['k']),
    helper.make_node('MatMul', ['x', 'wv'], ['v']),
    helper.make_node('Transpose', ['k'], ['kt'], perm=[0, 2, 1]),
    helper.make_node('MatMul', ['q', 'kt'], ['s0']),
    helper.make_node('Div', ['s0', 'eight'], ['s1']),
    helper.make_node('Softmax', ['s1'], ['p'], axis=-1),
    helper.make_node('MatMul', ['p', 'v'], ['a']),
    helper.make_node('MatMul', ['a', 'wo'], ['b']),
    helper.make_node('Tanh', ['b'], ['y']),
], [vi('x', xa.shape)], [vi('y', o.shape)],
    [arr(wq, 'wq'), arr(wk, 'wk'), arr(wv, 'wv'), arr(wo, 'wo'), arr(np.array(8.0), 'eight')],
    [('x', xa)], [('y', o)])

# data movement and elementwise maps: a Transpose, a Concat, a broadcast Mul and an Exp
a = rng.standard_normal((1, 64, 80, 80)).astype(np.float32)
bb = rng.standard_normal((1, 64, 80, 80)).astype(np.float32)
sc = rng.standard_normal((1, 64, 1, 1)).astype(np.float32)
t = np.transpose(a, (0, 2, 3, 1))
cat = np.concatenate([a, bb], axis=1) * np.concatenate([sc, sc], axis=1)
save('movement', [
    helper.make_node('Transpose', ['a'], ['y0'], perm=[0, 2, 3, 1]),
    helper.make_node('Concat', ['a', 'b'], ['c'], axis=1),
    helper.make_node('Concat', ['s', 's'], ['s2'], axis=1),
    helper.make_node('Mul', ['c', 's2'], ['m']),
    helper.make_node('Exp', ['m'], ['y1']),
], [vi('a', a.shape), vi('b', bb.shape), vi('s', sc.shape)], [vi('y0', t.shape), vi('y1', cat.shape)], [],
    [('a', a), ('b', bb), ('s', sc)], [('y0', t), ('y1', np.exp(cat.astype(np.float64)))])

# a classifier's dense layer, 512 -> 1000 (memory-bound: split by bytes): its columns as
# 128-wide panels, a rest of 96 and a last vector of 8 (a vector loop in the parallel group)
xd = rng.standard_normal((1, 512)).astype(np.float32)
wd = (rng.standard_normal((1000, 512)) / np.sqrt(512)).astype(np.float32)
bd = rng.standard_normal(1000).astype(np.float32)
save('dense', [helper.make_node('Gemm', ['x', 'w', 'b'], ['y'], transB=1)],
     [vi('x', xd.shape)], [vi('y', (1, 1000))], [arr(wd, 'w'), arr(bd, 'b')],
     [('x', xd)], [('y', xd.astype(np.float64) @ wd.T + bd)])

# DenseNet's dense block: Concat of three inputs (64 + 32 + 32 channels) fused with a
# BatchNormalization and a Relu into one kernel, a loop per input: parallelize moves each loop
# to the output channels it writes and splits them (a 1x1 conv reads the result)
c0 = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
c1 = rng.standard_normal((1, 32, 28, 28)).astype(np.float32)
c2 = rng.standard_normal((1, 32, 28, 28)).astype(np.float32)
gs = (rng.random(128) + 0.5).astype(np.float32); bs = rng.standard_normal(128).astype(np.float32) * 0.1
mu = rng.standard_normal(128).astype(np.float32) * 0.1; va = (rng.random(128) + 0.5).astype(np.float32)
w5 = (rng.standard_normal((32, 128, 1, 1)) * 0.1).astype(np.float32); b5 = rng.standard_normal(32).astype(np.float32) * 0.1
cc = np.concatenate([c0, c1, c2], axis=1).astype(np.float64)
bn = (cc - mu.reshape(1, -1, 1, 1)) / np.sqrt(va.reshape(1, -1, 1, 1) + 1e-5) * gs.reshape(1, -1, 1, 1) + bs.reshape(1, -1, 1, 1)
rl = np.maximum(bn, 0)
save('densecat', [
    helper.make_node('Concat', ['c0', 'c1', 'c2'], ['cc'], axis=1),
    helper.make_node('BatchNormalization', ['cc', 'gs', 'bs', 'mu', 'va'], ['bn'], epsilon=1e-5),
    helper.make_node('Relu', ['bn'], ['y0']),
    helper.make_node('Conv', ['y0', 'w5', 'b5'], ['y1']),
], [vi('c0', c0.shape), vi('c1', c1.shape), vi('c2', c2.shape)], [vi('y0', rl.shape), vi('y1', (1, 32, 28, 28))],
    [arr(gs, 'gs'), arr(bs, 'bs'), arr(mu, 'mu'), arr(va, 'va'), arr(w5, 'w5'), arr(b5, 'b5')],
    [('c0', c0), ('c1', c1), ('c2', c2)], [('y0', rl), ('y1', conv2d(rl, w5, b5))])

# a recurrent net in passes/ops/rnn.c's stepped form (recurrent weights of 128 KB and more): a
# GRU (linear_before_reset, as PyTorch exports it) of 128 units, then an LSTM of 96, 6 steps,
# batch 2; each step's product is a kernel that parallelize splits over the gate rows
def sig(v): return 1 / (1 + np.exp(-v))
T_, B_, I_, H1, H2 = 6, 2, 24, 128, 96
xr = rng.standard_normal((T_, B_, I_)).astype(np.float32)
Wg = (rng.standard_normal((1, 3 * H1, I_)) * 0.3).astype(np.float32)
Rg = (rng.standard_normal((1, 3 * H1, H1)) * 0.1).astype(np.float32)
Bg = (rng.standard_normal((1, 6 * H1)) * 0.3).astype(np.float32)
Wl = (rng.standard_normal((1, 4 * H2, H1)) * 0.1).astype(np.float32)
Rl = (rng.standard_normal((1, 4 * H2, H2)) * 0.1).astype(np.float32)
Bl = (rng.standard_normal((1, 8 * H2)) * 0.3).astype(np.float32)
# Y [T, 1, B, H] of a forward GRU of H units from zero state (ONNX's formulas, float64)
def gru_ref(x, Wa, Ra, Ba, H, lbr):
    W, R, Bw, Br = Wa[0].astype(np.float64), Ra[0].astype(np.float64), Ba[0, :3 * H], Ba[0, 3 * H:]
    h = np.zeros((x.shape[1], H)); y = np.zeros((x.shape[0], 1, x.shape[1], H))
    for t in range(x.shape[0]):
        xw = x[t] @ W.T + Bw
        z = sig(xw[:, :H] + h @ R[:H].T + Br[:H]); r = sig(xw[:, H:2 * H] + h @ R[H:2 * H].T + Br[H:2 * H])
        rec = r * (h @ R[2 * H:].T + Br[2 * H:]) if lbr else (r * h) @ R[2 * H:].T + Br[2 * H:]
        h = (1 - z) * np.tanh(xw[:, 2 * H:] + rec) + z * h
        y[t, 0] = h
    return y
yg = gru_ref(xr, Wg, Rg, Bg, H1, True)
hl = np.zeros((B_, H2)); cl = np.zeros((B_, H2)); yl = np.zeros((T_, 1, B_, H2))
W, R, Bb = Wl[0].astype(np.float64), Rl[0].astype(np.float64), Bl[0, :4 * H2] + Bl[0, 4 * H2:]
for t in range(T_):
    g = yg[t, 0] @ W.T + hl @ R.T + Bb
    i, o, f, c = sig(g[:, :H2]), sig(g[:, H2:2 * H2]), sig(g[:, 2 * H2:3 * H2]), np.tanh(g[:, 3 * H2:])
    cl = f * cl + i * c
    hl = o * np.tanh(cl)
    yl[t, 0] = hl
save('recurrent', [
    helper.make_node('GRU', ['x', 'wg', 'rg', 'bg'], ['yg'], hidden_size=H1, linear_before_reset=1),
    helper.make_node('Squeeze', ['yg', 'ax'], ['sg']),
    helper.make_node('LSTM', ['sg', 'wl', 'rl', 'bl'], ['yl', 'hl'], hidden_size=H2),
], [vi('x', xr.shape)], [vi('yl', yl.shape), vi('hl', (1, B_, H2))],
    [arr(Wg, 'wg'), arr(Rg, 'rg'), arr(Bg, 'bg'), arr(Wl, 'wl'), arr(Rl, 'rl'), arr(Bl, 'bl'),
     numpy_helper.from_array(np.array([1], np.int64), 'ax')],
    [('x', xr)], [('yl', yl), ('hl', hl[None])])

# Winograd F(4x4, 3x3) convs (passes/winograd.c), one on a 22x21 map whose last tiles are cut:
# their output transforms store 4 rows a tile row (y[.., 4 * i + c, ..]), which parallelize
# cuts by tile rows
xw_ = rng.standard_normal((1, 32, 24, 24)).astype(np.float32)
wa_ = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32); ba_ = rng.standard_normal(32).astype(np.float32) * 0.1
wb_ = (rng.standard_normal((48, 32, 3, 3)) * 0.1).astype(np.float32); bb_ = rng.standard_normal(48).astype(np.float32) * 0.1
ya_ = np.maximum(conv2d(xw_.astype(np.float64), wa_, ba_, 1, 1), 0)
yb_ = conv2d(ya_[:, :, :22, :21], wb_, bb_, 1, 1)
save('winograd', [
    helper.make_node('Conv', ['x', 'wa', 'ba'], ['ca'], pads=[1, 1, 1, 1]), helper.make_node('Relu', ['ca'], ['ra']),
    helper.make_node('Slice', ['ra', 'st', 'en', 'axs'], ['sa']),
    helper.make_node('Conv', ['sa', 'wb', 'bb'], ['yb'], pads=[1, 1, 1, 1]),
], [vi('x', xw_.shape)], [vi('yb', yb_.shape)],
    [arr(wa_, 'wa'), arr(ba_, 'ba'), arr(wb_, 'wb'), arr(bb_, 'bb'),
     numpy_helper.from_array(np.array([0, 0], np.int64), 'st'), numpy_helper.from_array(np.array([22, 21], np.int64), 'en'),
     numpy_helper.from_array(np.array([2, 3], np.int64), 'axs')],
    [('x', xw_)], [('yb', yb_)])

# a GRU without linear_before_reset (the ONNX default) of 128 units in the stepped form: two
# products a step (the update and reset gates, then the candidate gate over r * H), each split
Wn = (rng.standard_normal((1, 3 * H1, I_)) * 0.3).astype(np.float32)
Rn = (rng.standard_normal((1, 3 * H1, H1)) * 0.1).astype(np.float32)
Bn = (rng.standard_normal((1, 6 * H1)) * 0.3).astype(np.float32)
yn = gru_ref(xr, Wn, Rn, Bn, H1, False)
save('recurrent_nolbr', [helper.make_node('GRU', ['x', 'w', 'r', 'b'], ['y'], hidden_size=H1)],
     [vi('x', xr.shape)], [vi('y', yn.shape)], [arr(Wn, 'w'), arr(Rn, 'r'), arr(Bn, 'b')], [('x', xr)], [('y', yn)])
