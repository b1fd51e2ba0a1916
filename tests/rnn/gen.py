# gen.py OUTDIR - RNN, GRU and LSTM models with shapes the ONNX test data lacks (hidden 37, not a
# multiple of a vector width; input 19; sequence 7; batch 3; both directions) and a numpy
# reference written from the operator's formulas in the ONNX spec, in float64. Weights are
# initializers (the compile-time transposes of passes/ops/rnn.c; R in panels with hidden 128)
# except in the *_winput cases, where they are graph inputs (its copy kernels).
import onnx, numpy as np, os, sys
from onnx import helper as h, TensorProto as T, numpy_helper as nh
rng = np.random.default_rng(1)

def sigmoid(x): return 1 / (1 + np.exp(-x))
ACT = {'Sigmoid': lambda x, a, b: sigmoid(x), 'Tanh': lambda x, a, b: np.tanh(x),
       'Relu': lambda x, a, b: np.maximum(x, 0),
       'HardSigmoid': lambda x, a, b: np.clip(a * x + b, 0, 1),
       'LeakyRelu': lambda x, a, b: np.where(x < 0, a * x, x),
       'Softsign': lambda x, a, b: x / (1 + np.abs(x))}
DEFAULT = {'HardSigmoid': (0.2, 0.5), 'LeakyRelu': (0.01, 0)}

def ref(op, x, W, R, B, h0, c0, P, lens, direction, acts, clip, lbr, input_forget):
    """x [T, B, I]; returns Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H] (layout 0)."""
    Tn, Bn, _ = x.shape
    D, H = W.shape[0], R.shape[2]
    ng = {'RNN': 1, 'GRU': 3, 'LSTM': 4}[op]
    na = {'RNN': 1, 'GRU': 2, 'LSTM': 3}[op]
    Y = np.zeros((Tn, D, Bn, H)); Yh = np.zeros((D, Bn, H)); Yc = np.zeros((D, Bn, H))
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    for d in range(D):
        f = [(lambda v, a=a: ACT[a[0]](cl(v), a[1], a[2])) for a in acts[d * na:(d + 1) * na]]
        rev = direction == 'reverse' or d == 1
        Wb, Rb = B[d, :ng * H], B[d, ng * H:]
        Hs = h0[d].copy(); Cs = c0[d].copy()
        for t in (range(Tn - 1, -1, -1) if rev else range(Tn)):
            live = (t < lens)[:, None]
            xw = x[t] @ W[d].T + Wb
            hr = Hs @ R[d].T
            if op == 'RNN':
                Hn = f[0](xw + hr + Rb)
            elif op == 'GRU':
                g = lambda k, v: v[..., k * H:(k + 1) * H]
                z = f[0](g(0, xw) + g(0, hr) + g(0, Rb))
                r = f[0](g(1, xw) + g(1, hr) + g(1, Rb))
                if lbr:
                    hh = f[1](g(2, xw) + r * (g(2, hr) + g(2, Rb)))
                else:
                    hh = f[1](g(2, xw) + (r * Hs) @ R[d][2 * H:].T + g(2, Rb))
                Hn = (1 - z) * hh + z * Hs
            else:
                gs = xw + hr + Rb
                gi, go, gf, gc = (gs[:, k * H:(k + 1) * H] for k in range(4))
                Pi, Po, Pf = P[d, :H], P[d, H:2 * H], P[d, 2 * H:]
                i = f[0](gi + Pi * Cs)
                fg = 1 - i if input_forget else f[0](gf + Pf * Cs)
                Cn = fg * Cs + i * f[1](gc)
                o = f[0](go + Po * Cn)
                Hn = o * f[2](Cn)
                Cs = np.where(live, Cn, Cs)
            Hs = np.where(live, Hn, Hs)
            Y[t, d] = np.where(live, Hn, 0)
        Yh[d] = Hs; Yc[d] = Cs
    return Y, Yh, Yc

# name, op, T, B, I, H, direction, layout, extra attributes, lens, peepholes, weights as inputs
cases = [
    ('lstm_bidi_peep_clip', 'LSTM', 7, 3, 19, 37, 'bidirectional', 0, dict(clip=2.5), [7, 5, 2], True, False),
    ('lstm_rev_forget_layout1', 'LSTM', 7, 2, 19, 37, 'reverse', 1,
     dict(input_forget=1, activations=['HardSigmoid', 'Tanh', 'Softsign'],
          activation_alpha=[0.3], activation_beta=[0.4]), None, True, False),
    ('lstm_winput', 'LSTM', 7, 3, 19, 37, 'forward', 0, {}, None, False, True),
    ('gru_bidi_lbr', 'GRU', 7, 3, 19, 37, 'bidirectional', 0, dict(linear_before_reset=1, clip=3.0), [4, 7, 6], False, False),
    ('gru_fwd_layout1', 'GRU', 7, 2, 19, 37, 'forward', 1, {}, None, False, False),
    ('gru_rev_winput', 'GRU', 7, 3, 19, 37, 'reverse', 0, {}, None, False, True),
    ('lstm_h128_panels', 'LSTM', 3, 2, 19, 128, 'bidirectional', 0, {}, [3, 2], True, False),
    ('gru_h128_panels', 'GRU', 3, 2, 19, 128, 'forward', 0, {}, None, False, False),
    ('gru_h128_panels_lbr', 'GRU', 3, 1, 19, 128, 'reverse', 0, dict(linear_before_reset=1), None, False, False),
    ('rnn_bidi_acts', 'RNN', 7, 3, 19, 37, 'bidirectional', 0,
     dict(activations=['Tanh', 'LeakyRelu'], activation_alpha=[0.1]), [7, 3, 6], False, False),
    # recurrent weights of 128 KB or more a direction: passes/ops/rnn.c's stepped form (a loop
    # region of a product kernel and an update kernel a step)
    ('lstm_step_bidi_peep', 'LSTM', 5, 2, 19, 96, 'bidirectional', 0, dict(clip=2.5), [5, 3], True, False),
    ('gru_step_lbr_layout1', 'GRU', 5, 2, 19, 112, 'bidirectional', 1, dict(linear_before_reset=1), [5, 2], False, False),
    ('gru_step_lbr_panels', 'GRU', 4, 1, 19, 128, 'forward', 0, dict(linear_before_reset=1), None, False, False),
    ('rnn_step_winput', 'RNN', 5, 2, 19, 192, 'reverse', 0, {}, None, False, True),
    # GRU without linear_before_reset, stepped: two products a step with rh = r * H between
    ('gru_step_nolbr', 'GRU', 5, 2, 19, 112, 'bidirectional', 0, dict(clip=3.0), [5, 3], False, False),
    ('gru_step_nolbr_panels', 'GRU', 4, 1, 19, 128, 'forward', 1, {}, None, False, False),
]
os.chdir(sys.argv[1])
for name, op, Tn, Bn, I, H, direction, layout, attrs, lens, peep, winput in cases:
    D = 2 if direction == 'bidirectional' else 1
    ng = {'RNN': 1, 'GRU': 3, 'LSTM': 4}[op]
    na = {'RNN': 1, 'GRU': 2, 'LSTM': 3}[op]
    f32 = lambda *s, sc=1.0: (sc * rng.standard_normal(s)).astype(np.float32)
    x = f32(Tn, Bn, I); W = f32(D, ng * H, I, sc=0.3); R = f32(D, ng * H, H, sc=0.2)
    B = f32(D, 2 * ng * H, sc=0.3); h0 = f32(D, Bn, H, sc=0.5); c0 = f32(D, Bn, H, sc=0.5)
    P = f32(D, 3 * H, sc=0.3) if peep else np.zeros((D, 3 * H), np.float32)
    sl = np.array(lens if lens else [Tn] * Bn, np.int32)
    names = [a for a in attrs.get('activations', [])]
    if not names:
        names = {'RNN': ['Tanh'], 'GRU': ['Sigmoid', 'Tanh'], 'LSTM': ['Sigmoid', 'Tanh', 'Tanh']}[op] * D
    elif len(names) == na and D == 2:
        names = names * 2
    al = list(attrs.get('activation_alpha', [])); be = list(attrs.get('activation_beta', []))
    acts = []
    for a in names:
        da, db = DEFAULT.get(a, (0, 0))
        acts.append((a, al.pop(0) if a in DEFAULT and al else da,
                     be.pop(0) if a == 'HardSigmoid' and be else db))
    Y, Yh, Yc = ref(op, x.astype(np.float64), W.astype(np.float64), R.astype(np.float64),
                    B.astype(np.float64), h0.astype(np.float64), c0.astype(np.float64),
                    P.astype(np.float64), sl, direction, acts, attrs.get('clip'),
                    attrs.get('linear_before_reset', 0), attrs.get('input_forget', 0))
    xin, h0in, c0in = x, h0, c0
    if layout:
        xin = x.transpose(1, 0, 2); h0in = h0.transpose(1, 0, 2); c0in = c0.transpose(1, 0, 2)
        Y = Y.transpose(2, 0, 1, 3); Yh = Yh.transpose(1, 0, 2); Yc = Yc.transpose(1, 0, 2)
    ins = ['x', 'W', 'R', 'B', 'sl' if lens else '', 'h0'] + (['c0', 'P' if peep else ''] if op == 'LSTM' else [])
    outs = ['Y', 'Y_h'] + (['Y_c'] if op == 'LSTM' else [])
    kw = {k: v for k, v in attrs.items()}
    if layout: kw['layout'] = 1
    node = h.make_node(op, ins, outs, hidden_size=H, direction=direction, **kw)
    feeds = {'x': xin}
    inits = {'B': B, 'h0': h0in}
    if lens: inits['sl'] = sl
    if op == 'LSTM':
        inits['c0'] = c0in
        if peep: inits['P'] = P
    if winput: feeds.update(W=W, R=R)
    else: inits.update(W=W, R=R)
    results = {'Y': Y, 'Y_h': Yh, 'Y_c': Yc}
    g = h.make_graph([node], 'g', [h.make_tensor_value_info(k, T.FLOAT, v.shape) for k, v in feeds.items()],
                     [h.make_tensor_value_info(o, T.FLOAT, results[o].shape) for o in outs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 14)]); m.ir_version = 8
    onnx.checker.check_model(m)
    os.makedirs(name + '/test_data_set_0', exist_ok=True)
    onnx.save(m, name + '/model.onnx')
    for i, (k, v) in enumerate(feeds.items()):
        open(f'{name}/test_data_set_0/input_{i}.pb', 'wb').write(nh.from_array(v, k).SerializeToString())
    for i, o in enumerate(outs):
        open(f'{name}/test_data_set_0/output_{i}.pb', 'wb').write(
            nh.from_array(results[o].astype(np.float32), o).SerializeToString())
