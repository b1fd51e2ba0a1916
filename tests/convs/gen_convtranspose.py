# gen_convtranspose.py OUTDIR - ConvTranspose models with a numpy reference, for the stride
# phases of passes/ops/conv.c (each phase a stride-1 Conv, constant weights sliced per phase,
# an interleaving kernel with the fused epilogue): strides 2, 3, 4 and 8, kernels not a
# multiple of the stride, dilation (with a stride sharing a factor with it: phases with no
# taps, which get the bias only), groups and depthwise, output_padding, output_shape beyond
# the last input contribution, SAME_UPPER/SAME_LOWER, a stride of 70 (more phases than
# MAX_PHASES: the gather form), 1-D, 2-D and 3-D, batch 2, and
# epilogues (Relu, BatchNormalization + Sigmoid, a residual Add). Most weights are constant
# (the ONNX test data has them as graph inputs only); two cases keep them run-time inputs.
# The reference scatters each input element through each tap (the operator's definition),
# independently of the phase arithmetic of the compiler.
import os, sys
import numpy as np
from onnx import helper as h, TensorProto as T, numpy_helper as nh, save
rng = np.random.default_rng(19)


def convtranspose(x, w, b, s, d, pads, op, group, out_shape=None, auto_pad='NOTSET'):
    n, c = x.shape[:2]
    nsp = x.ndim - 2
    mg = w.shape[1]
    ks = w.shape[2:]
    full = [s[i] * (x.shape[2 + i] - 1) + op[i] + (ks[i] - 1) * d[i] + 1 for i in range(nsp)]
    if out_shape is not None:
        total = [full[i] - out_shape[i] for i in range(nsp)]
        upper = auto_pad == 'SAME_UPPER'
        pb = [t // 2 if upper else t - t // 2 for t in total]
        out = list(out_shape)
    else:
        pb = list(pads[:nsp])
        out = [full[i] - pads[i] - pads[nsp + i] for i in range(nsp)]
    # canvas wide enough for negative padding (outputs past the contributions)
    lo = [max(0, -p) for p in pb]
    canvas = [max(full[i], pb[i] + out[i]) + lo[i] for i in range(nsp)]
    y = np.zeros((n, mg * group) + tuple(canvas))
    cg = c // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for t in np.ndindex(*ks):
            contrib = np.einsum('nc...,cm->nm...', xs, w[(slice(g * cg, (g + 1) * cg), slice(None)) + t])
            sl = tuple(slice(lo[i] + t[i] * d[i], lo[i] + t[i] * d[i] + (x.shape[2 + i] - 1) * s[i] + 1, s[i])
                       for i in range(nsp))
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += contrib
    crop = tuple(slice(lo[i] + pb[i], lo[i] + pb[i] + out[i]) for i in range(nsp))
    y = y[(slice(None), slice(None)) + crop]
    return y + b.reshape((1, -1) + (1,) * nsp)


# name, x shape, C, M, kernel, strides, dilations, pads, output_padding, group, epilogue,
# extra attributes (output_shape, auto_pad), constant weights
cases = [
    ('ct_s2_k4_bn_sigmoid', [1, 16, 7, 9], 16, 8, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, 'bn_sigmoid', {}, True),
    ('ct_s3_k3_outpad_asym', [2, 5, 4, 6], 5, 7, [3, 2], [3, 3], [1, 1], [1, 0, 0, 2], [2, 1], 1, 'relu', {}, True),
    ('ct_s2_d2_notaps', [1, 4, 5, 6], 4, 6, [3, 3], [2, 2], [2, 2], [1, 0, 2, 1], [1, 0], 1, 'none', {}, True),
    ('ct_s2_d3', [1, 3, 6, 5], 3, 4, [3, 2], [2, 2], [3, 3], [2, 1, 1, 0], [0, 1], 1, 'relu', {}, True),
    ('ct_groups2', [1, 8, 5, 7], 8, 6, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 2, 'add', {}, True),
    ('ct_groups3_bn_sigmoid', [1, 6, 4, 5], 6, 9, [3, 4], [2, 2], [1, 1], [1, 1, 0, 1], [0, 1], 3, 'bn_sigmoid', {}, True),
    ('ct_depthwise_s2_k4', [2, 16, 6, 5], 16, 16, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 16, 'relu', {}, True),
    ('ct_1d_s3_k5_outpad', [2, 4, 11], 4, 8, [5], [3], [1], [2, 1], [1], 1, 'relu', {}, True),
    ('ct_1d_s8_k16_vocoder', [1, 16, 9], 16, 8, [16], [8], [1], [4, 4], [0], 1, 'add', {}, True),
    ('ct_3d_s2_k3', [1, 4, 3, 4, 5], 4, 5, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 0, 1, 1, 1, 0], [1, 0, 1], 1, 'relu', {}, True),
    ('ct_s1_k3', [1, 6, 7, 8], 6, 5, [3, 3], [1, 1], [1, 1], [1, 1, 0, 2], [0, 0], 1, 'relu', {}, True),
    ('ct_s2_k1', [1, 5, 4, 6], 5, 3, [1, 1], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1], 1, 'none', {}, True),
    ('ct_outshape_past', [1, 3, 4, 5], 3, 4, [3, 3], [2, 2], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'relu', {'output_shape': [12, 14]}, True),
    ('ct_same_upper', [1, 3, 5, 4], 3, 4, [5, 3], [2, 3], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'none', {'auto_pad': 'SAME_UPPER'}, True),
    ('ct_same_lower', [1, 3, 5, 4], 3, 4, [3, 5], [3, 2], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'none', {'auto_pad': 'SAME_LOWER'}, True),
    # 32 -> 32 channels: the phases take the vector conv paths (padded input, channel blocks)
    ('ct_s2_k4_wide_bn_sigmoid', [1, 32, 10, 21], 32, 32, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, 'bn_sigmoid', {}, True),
    ('ct_s2_k3_wide_add', [1, 24, 9, 13], 24, 40, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 1, 'add', {}, True),
    # DCGAN/HiFi-GAN shapes: 4x4 and 2x3 maps (phases of 2x2 and 1x2 outputs: the schedule jams
    # rows with the whole short row), 1x1 input k4 s1 p0 (a generator's first layer), 1-D k4
    # s2 p1 and k16 s8 wide, 3-D k4 s2 p1, grouped wide
    ('ct_dcgan_4x4_bn_relu', [1, 64, 4, 4], 64, 32, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, 'bn_relu', {}, True),
    # to 3 channels (an image generator's last layer): rows jammed by few_channel_rows
    ('ct_dcgan_rgb_k4_s2', [1, 32, 16, 19], 32, 3, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, 'add', {}, True),
    ('ct_dcgan_2x3_add', [2, 32, 2, 3], 32, 48, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [0, 0], 1, 'add', {}, True),
    ('ct_dcgan_1x1_k4_bn_relu', [2, 40, 1, 1], 40, 48, [4, 4], [1, 1], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'bn_relu', {}, True),
    # batch 1, 1280 output columns: the weights' view packed into panels of 64 (pack_panels)
    ('ct_dcgan_1x1_k4_panels', [1, 100, 1, 1], 100, 80, [4, 4], [1, 1], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'bn_relu', {}, True),
    ('ct_dcgan_1x1_k2x3_out', [3, 8, 1, 1], 8, 5, [2, 3], [2, 2], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'none', {}, True),
    ('ct_dcgan_1x1_k3_s2_outpad', [1, 24, 1, 1], 24, 32, [3, 3], [2, 2], [1, 1], [0, 1, 0, 0], [1, 0], 1, 'relu', {}, True),
    ('ct_1d_k4_s2_p1_wide', [1, 48, 13], 48, 32, [4], [2], [1], [1, 1], [0], 1, 'add', {}, True),
    ('ct_1d_k16_s8_wide', [1, 32, 5], 32, 16, [16], [8], [1], [4, 4], [0], 1, 'relu', {}, True),
    # 8 phases interleaved by whole vectors (backend: interleave_vectors), with a rest
    ('ct_1d_k16_s8_long', [1, 16, 41], 16, 16, [16], [8], [1], [4, 4], [0], 1, 'add', {}, True),
    ('ct_3d_k4_s2_p1_wide', [1, 32, 3, 4, 4], 32, 16, [4, 4, 4], [2, 2, 2], [1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0], 1, 'bn_sigmoid', {}, True),
    ('ct_groups2_wide_4x4', [1, 64, 4, 4], 64, 64, [4, 4], [2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 2, 'relu', {}, True),
    # more than MAX_PHASES phases: the gather form
    ('ct_1d_s70_gather', [1, 2, 3], 2, 3, [3], [70], [1], [1, 0], [0], 1, 'relu', {}, True),
    # run-time weights: the phases read the ConvTranspose's own weights at their taps
    ('ct_rt_groups_dil', [1, 6, 5, 7], 6, 9, [3, 3], [2, 3], [2, 1], [1, 2, 0, 1], [1, 2], 3, 'relu', {}, False),
    ('ct_rt_1d_s4', [2, 4, 6], 4, 4, [6], [4], [1], [1, 2], [3], 2, 'none', {}, False),
    # a U-Net decoder step: the interleaving kernel writes into the Concat that a padded 3x3
    # conv reads, in place at the padding's offset (backend: its stores still interleaved)
    ('ct_s2_k2_cat_conv', [1, 16, 8, 11], 16, 16, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], [0, 0], 1, 'cat_conv', {}, True),
    # LinkNet's decoder: 3x3 stride 2, output_padding 1, 16 -> 16 channels on 32x32 planes (4 KiB
    # apart); the phase of two row taps and one column tap tests its rows only (schedule:
    # runs along the width, no border columns to take channels innermost)
    ('ct_s2_k3_op1_rows', [1, 16, 32, 32], 16, 16, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 1, 'bn_relu', {}, True),
    # LinkNet's head, smaller: the phases that read past the input's right and bottom edges
    # share one zero-padded copy of it (loops.c loop_pad: pad(%x:%x_pad))
    ('ct_s2_k3_op1_share', [1, 64, 12, 10], 64, 32, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], [1, 1], 1, 'relu', {}, True),
]
os.chdir(sys.argv[1])
for name, xs, C, M, ks, s, d, pads, op, grp, epi, extra, const_w in cases:
    nsp = len(xs) - 2
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal([C, M // grp] + ks).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    out_shape = None
    if 'auto_pad' in extra:
        out_shape = [xs[2 + i] * s[i] for i in range(nsp)]
    if 'output_shape' in extra:
        out_shape = extra['output_shape']
    y = convtranspose(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), s, d, pads, op, grp,
                      out_shape, extra.get('auto_pad', 'NOTSET'))
    attrs = dict(strides=s, dilations=d, group=grp, output_padding=op, **extra)
    if out_shape is None:
        attrs['pads'] = pads
    inits = [nh.from_array(b, 'B')]
    inputs = [h.make_tensor_value_info('x', T.FLOAT, xs)]
    feeds = [('x', x)]
    if const_w:
        inits.append(nh.from_array(w, 'W'))
    else:
        inputs.append(h.make_tensor_value_info('W', T.FLOAT, list(w.shape)))
        feeds.append(('W', w))
    nodes = [h.make_node('ConvTranspose', ['x', 'W', 'B'], ['c'], **attrs)]
    last = 'c'
    if epi == 'relu':
        nodes.append(h.make_node('Relu', ['c'], ['y']))
        y = np.maximum(y, 0)
    elif epi in ('bn_sigmoid', 'bn_relu'):
        sc, sh, mu, var = (rng.uniform(0.5, 1.5, M), rng.standard_normal(M), rng.standard_normal(M), rng.uniform(0.5, 2, M))
        for n_, v in (('sc', sc), ('sh', sh), ('mu', mu), ('var', var)):
            inits.append(nh.from_array(v.astype(np.float32), n_))
        nodes += [h.make_node('BatchNormalization', ['c', 'sc', 'sh', 'mu', 'var'], ['bn']),
                  h.make_node('Sigmoid' if epi == 'bn_sigmoid' else 'Relu', ['bn'], ['y'])]
        ch = lambda a: a.astype(np.float32).astype(np.float64).reshape((1, M) + (1,) * nsp)
        t = (y - ch(mu)) / np.sqrt(ch(var) + 1e-5) * ch(sc) + ch(sh)
        y = 1 / (1 + np.exp(-t)) if epi == 'bn_sigmoid' else np.maximum(t, 0)
    elif epi == 'add':
        r = rng.standard_normal(y.shape).astype(np.float32)
        inputs.append(h.make_tensor_value_info('r', T.FLOAT, list(y.shape)))
        feeds.append(('r', r))
        nodes.append(h.make_node('Add', ['c', 'r'], ['y']))
        y = y + r
    elif epi == 'cat_conv':
        r = rng.standard_normal(y.shape).astype(np.float32)
        w2 = (rng.standard_normal([M, 2 * M, 3, 3]) * 0.2).astype(np.float32)
        inputs.append(h.make_tensor_value_info('r', T.FLOAT, list(y.shape)))
        feeds.append(('r', r))
        inits.append(nh.from_array(w2, 'W2'))
        nodes += [h.make_node('Concat', ['c', 'r'], ['cat'], axis=1),
                  h.make_node('Conv', ['cat', 'W2'], ['y'], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
        cat = np.pad(np.concatenate([y, r.astype(np.float64)], 1), ((0, 0), (0, 0), (1, 1), (1, 1)))
        H, W = y.shape[2], y.shape[3]
        y = sum(np.einsum('nchw,mc->nmhw', cat[:, :, i:i + H, j:j + W], w2[:, :, i, j].astype(np.float64))
                for i in range(3) for j in range(3))
    else:
        nodes[0].output[0] = 'y'
    y = y.astype(np.float32)
    g = h.make_graph(nodes, name, inputs, [h.make_tensor_value_info('y', T.FLOAT, list(y.shape))], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    os.makedirs(name + '/test_data_set_0', exist_ok=True)
    save(m, name + '/model.onnx')
    for i, (n_, v) in enumerate(feeds):
        open('%s/test_data_set_0/input_%d.pb' % (name, i), 'wb').write(nh.from_array(v, n_).SerializeToString())
    open(name + '/test_data_set_0/output_0.pb', 'wb').write(nh.from_array(y, 'y').SerializeToString())

# ConvTranspose between convs, which take its input and output channel-last (schedule.c
# channel_last_layouts): the interleaving kernel is a region_mover, so the phases' buffers go
# NHWC with them and no phase scatters its vectors of output channels (LinkNet's decoder).
# head8: a merged 32 -> 2 k2 s2 head (one 1x1 conv of 8 outputs: few_outputs on AVX-512) that
# reads the conv's NHWC output and writes the graph's output NCHW.
def conv2d(x, w, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2], w.shape[3]
    H, W = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    return sum(np.einsum('nchw,mc->nmhw', x[:, :, i:i + H, j:j + W], w[:, :, i, j]) for i in range(kh) for j in range(kw))


chains = [
    # name, x shape, conv 3x3 channels, ConvTranspose M, kernel, output_padding, pads, 1x1 conv after (0: none)
    ('ct_chain_nhwc', [1, 32, 12, 14], 32, 32, [3, 3], [1, 1], [1, 1, 1, 1], 48),
    ('ct_chain_head8', [1, 32, 20, 20], 32, 2, [2, 2], [0, 0], [0, 0, 0, 0], 0),
]
for name, xs, C, M, ks, op, pads, M2 in chains:
    x = rng.standard_normal(xs).astype(np.float32)
    w0 = (rng.standard_normal([C, xs[1], 3, 3]) * 0.1).astype(np.float32)
    w = (rng.standard_normal([C, M] + ks) * 0.2).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    w2 = (rng.standard_normal([max(M2, 1), M, 1, 1]) * 0.2).astype(np.float32)
    t = np.maximum(conv2d(x.astype(np.float64), w0.astype(np.float64), 1), 0)
    y = convtranspose(t, w.astype(np.float64), b.astype(np.float64), [2, 2], [1, 1], pads, op, 1)
    inits = [nh.from_array(w0, 'W0'), nh.from_array(w, 'W'), nh.from_array(b, 'B')]
    nodes = [h.make_node('Conv', ['x', 'W0'], ['c0'], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node('Relu', ['c0'], ['r0']),
             h.make_node('ConvTranspose', ['r0', 'W', 'B'], ['ct'], strides=[2, 2], pads=pads, output_padding=op)]
    if M2:
        y = np.maximum(y, 0)
        y = np.einsum('nchw,mc->nmhw', y, w2[:, :, 0, 0].astype(np.float64))
        inits.append(nh.from_array(w2, 'W2'))
        nodes += [h.make_node('Relu', ['ct'], ['r1']), h.make_node('Conv', ['r1', 'W2'], ['y'])]
    else:
        nodes[-1].output[0] = 'y'
    y = y.astype(np.float32)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info('x', T.FLOAT, xs)],
                     [h.make_tensor_value_info('y', T.FLOAT, list(y.shape))], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
    m.ir_version = 8
    os.makedirs(name + '/test_data_set_0', exist_ok=True)
    save(m, name + '/model.onnx')
    open(name + '/test_data_set_0/input_0.pb', 'wb').write(nh.from_array(x, 'x').SerializeToString())
    open(name + '/test_data_set_0/output_0.pb', 'wb').write(nh.from_array(y, 'y').SerializeToString())
