# gen.py OUTDIR - a small model whose kernels have several candidate schedules (tests/tune.sh):
# a 1x1 conv + Relu on a 14x14 map (32 -> 64 channels: a register tile of pixels by vectors), a
# padded 3x3 conv + Relu (64 -> 64: on AVX-512 blocks of channels by a row of pixels), a global
# pool and a Gemm to 100 (a tile of one row by vectors), with a float64 numpy reference.
import onnx, numpy as np, os, sys
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(16)
def conv(x, w, b, pad):
    n, c, H, W = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    y = np.zeros((n, m, H, W))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum('nchw,mc->nmhw', xp[:, :, i:i + H, j:j + W], w[:, :, i, j])
    return y + b.reshape(1, m, 1, 1)
x = rng.standard_normal([1, 32, 14, 14]).astype(np.float32)
w1 = (rng.standard_normal([64, 32, 1, 1]) / 6).astype(np.float32); b1 = rng.standard_normal(64).astype(np.float32)
w2 = (rng.standard_normal([64, 64, 3, 3]) / 24).astype(np.float32); b2 = rng.standard_normal(64).astype(np.float32)
wg = (rng.standard_normal([64, 100]) / 8).astype(np.float32); bg = rng.standard_normal(100).astype(np.float32)
f = lambda a: a.astype(np.float64)
t = np.maximum(conv(f(x), f(w1), f(b1), 0), 0)
u = np.maximum(conv(t, f(w2), f(b2), 1), 0)
y = (u.mean(axis=(2, 3)) @ f(wg) + f(bg)).astype(np.float32)
nodes = [h.make_node('Conv', ['x', 'W1', 'B1'], ['c1']), h.make_node('Relu', ['c1'], ['r1']),
         h.make_node('Conv', ['r1', 'W2', 'B2'], ['c2'], pads=[1, 1, 1, 1]), h.make_node('Relu', ['c2'], ['r2']),
         h.make_node('GlobalAveragePool', ['r2'], ['p']), h.make_node('Flatten', ['p'], ['fl']),
         h.make_node('Gemm', ['fl', 'WG', 'BG'], ['y'])]
init = [nh.from_array(a, n) for a, n in [(w1, 'W1'), (b1, 'B1'), (w2, 'W2'), (b2, 'B2'), (wg, 'WG'), (bg, 'BG')]]
g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, x.shape)],
                 [h.make_tensor_value_info('y', T.FLOAT, y.shape)], init)
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 8
d = os.path.join(sys.argv[1], 'small')
os.makedirs(d + '/test_data_set_0', exist_ok=True)
onnx.save(m, d + '/model.onnx')
open(d + '/test_data_set_0/input_0.pb', 'wb').write(nh.from_array(x, 'x').SerializeToString())
open(d + '/test_data_set_0/output_0.pb', 'wb').write(nh.from_array(y, 'y').SerializeToString())
