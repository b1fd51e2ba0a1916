"""models.py - the public architectures `make bench` times, exported from PyTorch with random
weights (imported by tests/bench/gen.py; needs Debian's python3-torch and python3-torchvision,
which tests/bench.sh installs when it can).

Each function returns (module, example inputs): eval mode, weights from torch's default
initialisation under a fixed seed, so every run benchmarks the same numbers. Exported with
static shapes at opset 17 (the newest Debian's onnx 1.12 knows):
  resnet18     torchvision ResNet-18, 1x3x224x224
  mobilenetv2  torchvision MobileNetV2 (depthwise-separable inverted residuals), 1x3x224x224
  transformer  one torch.nn.TransformerEncoderLayer: d_model 256, 4 heads, feed-forward 1024,
               sequence 64, batch 1 (sequence-first, so that export traces the plain ops)
  lstm         torch.nn.LSTM, input 64, hidden 128, sequence 50, batch 1
  kws          a DS-CNN keyword spotter (Zhang et al., "Hello Edge", 2017): a 10x4 conv with 64
               channels over a 49x10 MFCC map, four depthwise-separable blocks, average pool,
               12 classes
  mlp          784-256-128-10 with ReLU (an MNIST MLP)
decoders (issue 19: the upsampling half of segmentation, detection and audio models):
  unet         a small U-Net, 1x3x128x128: three conv-BN-ReLU stages of 16, 32 and 64 channels
               with max pools, then two ConvTranspose 2x2 stride-2 upsamplings, each
               concatenated with its skip and convolved, a 1x1 head
  fpn          an FPN text-detection head (DBNet-style), 1x3x256x256: a strided conv backbone
               (/4 to /32), 1x1 laterals to 64 channels, nearest Resize x2 + Add top-down,
               3x3 smoothing, the levels resized to /4 and concatenated, then conv-BN-ReLU,
               two ConvTranspose 2x2 stride-2 (64 -> 64 with BN-ReLU, 64 -> 1) and a Sigmoid
  hifigan      a HiFi-GAN-style generator (Kong et al., 2020), an 80x32 mel map: conv 80 -> 128,
               then ConvTranspose1d upsamplings x8, x8, x2, x2 (kernel twice the stride)
               halving the channels, each followed by a residual block of dilated k3 Conv1d
               (dilations 1, 3, 5) with LeakyReLU, a k7 conv to 1 channel and Tanh"""
import torch
import torchvision
from torch import nn


def resnet18():
    return torchvision.models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),)


def mobilenetv2():
    return torchvision.models.mobilenet_v2(weights=None), (torch.randn(1, 3, 224, 224),)


def transformer():
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0)
    return layer, (torch.randn(64, 1, 256),)


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 128)

    def forward(self, x):
        return self.lstm(x)[0]


def lstm():
    return Lstm(), (torch.randn(50, 1, 64),)


def conv_bn(cin, cout, kernel, stride=1, padding=0, groups=1):
    return [nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU()]


def kws():
    layers = conv_bn(1, 64, (10, 4), stride=(2, 2), padding=(5, 1))
    for _ in range(4):
        layers += conv_bn(64, 64, 3, padding=1, groups=64) + conv_bn(64, 64, 1)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 12)]
    return nn.Sequential(*layers), (torch.randn(1, 1, 49, 10),)


def mlp():
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 10))
    return net, (torch.randn(1, 784),)


class Unet(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(*conv_bn(3, 16, 3, padding=1), *conv_bn(16, 16, 3, padding=1))
        self.e2 = nn.Sequential(*conv_bn(16, 32, 3, padding=1), *conv_bn(32, 32, 3, padding=1))
        self.e3 = nn.Sequential(*conv_bn(32, 64, 3, padding=1), *conv_bn(64, 64, 3, padding=1))
        self.pool = nn.MaxPool2d(2)
        self.u2 = nn.ConvTranspose2d(64, 32, 2, 2)
        self.d2 = nn.Sequential(*conv_bn(64, 32, 3, padding=1))
        self.u1 = nn.ConvTranspose2d(32, 16, 2, 2)
        self.d1 = nn.Sequential(*conv_bn(32, 16, 3, padding=1))
        self.head = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(self.pool(a))
        c = self.e3(self.pool(b))
        d = self.d2(torch.cat([self.u2(c), b], 1))
        return self.head(self.d1(torch.cat([self.u1(d), a], 1)))


def unet():
    return Unet(), (torch.randn(1, 3, 128, 128),)


class Fpn(nn.Module):
    def __init__(self):
        super().__init__()
        chans = (16, 32, 64, 128, 256)
        self.stem = nn.Sequential(*conv_bn(3, chans[0], 3, 2, 1))
        self.stages = nn.ModuleList(nn.Sequential(*conv_bn(chans[i], chans[i + 1], 3, 2, 1))
                                    for i in range(4))
        self.lateral = nn.ModuleList(nn.Conv2d(c, 64, 1, bias=False) for c in chans[1:])
        self.smooth = nn.ModuleList(nn.Conv2d(64, 16, 3, padding=1, bias=False) for _ in chans[1:])
        self.head = nn.Sequential(*conv_bn(64, 16, 3, padding=1),
                                  nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.ConvTranspose2d(16, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        feats, x = [], self.stem(x)
        for s in self.stages:
            x = s(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lateral, feats)]
        for i in range(3, 0, -1):
            lat[i - 1] = lat[i - 1] + nn.functional.interpolate(lat[i], scale_factor=2.0, mode="nearest")
        outs = [s(l) for s, l in zip(self.smooth, lat)]
        outs = [outs[0]] + [nn.functional.interpolate(o, scale_factor=2.0 ** i, mode="nearest")
                            for i, o in enumerate(outs[1:], 1)]
        return self.head(torch.cat(outs, 1))


def fpn():
    return Fpn(), (torch.randn(1, 3, 256, 256),)


class ResBlock1d(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(c, c, 3, dilation=d, padding=d) for d in (1, 3, 5))

    def forward(self, x):
        for c in self.convs:
            x = x + c(nn.functional.leaky_relu(x, 0.1))
        return x


class Hifigan(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Conv1d(80, 128, 7, padding=3)
        ups, c = [], 128
        for s in (8, 8, 2, 2):
            ups += [nn.LeakyReLU(0.1), nn.ConvTranspose1d(c, c // 2, 2 * s, s, padding=s // 2),
                    ResBlock1d(c // 2)]
            c //= 2
        self.ups = nn.Sequential(*ups)
        self.post = nn.Conv1d(c, 1, 7, padding=3)

    def forward(self, x):
        return torch.tanh(self.post(nn.functional.leaky_relu(self.ups(self.pre(x)), 0.1)))


def hifigan():
    return Hifigan(), (torch.randn(1, 80, 32),)


def tv(name, size=224, **kw):
    """A torchvision classifier (or segmentation net) by name, random weights, 1x3xSIZExSIZE."""
    def make():
        ctor = getattr(torchvision.models, name, None) or getattr(torchvision.models.segmentation, name)
        return ctor(weights=None, **kw), (torch.randn(1, 3, size, size),)
    return make


class SegOut(nn.Module):
    """torchvision's segmentation nets return a dict; export its "out" tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def deeplabv3():
    net = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False)
    return SegOut(net), (torch.randn(1, 3, 224, 224),)


class GptBlock(nn.Module):
    """A GPT-2 block: pre-LayerNorm causal self-attention and a GELU MLP, each with a residual."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        # additive causal mask: position i sees positions <= i
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e9), diagonal=1))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        a = (q @ k.transpose(2, 3)) * (d // h) ** -0.5 + self.mask
        y = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """A GPT-2-style causal decoder over given token embeddings (the lookup itself is a Gather
    the bench's random float inputs cannot index): learned positions, 6 blocks of d 512 with 8
    heads, a final LayerNorm and a tied-size LM head to an 8192-token vocabulary."""

    def __init__(self, d=512, heads=8, layers=6, seq=128, vocab=8192):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.blocks = nn.Sequential(*(GptBlock(d, heads, seq) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        return self.head(self.ln(self.blocks(x + self.pos)))


def gpt():
    return Gpt(), (torch.randn(1, 128, 512),)


MODELS = (("resnet18", resnet18), ("mobilenetv2", mobilenetv2), ("transformer", transformer),
          ("lstm", lstm), ("kws", kws), ("mlp", mlp), ("unet", unet), ("fpn", fpn),
          ("hifigan", hifigan))

# The widened set (issue 16): one public architecture per family, torchvision 0.14's random
# weights, each at its standard input size. bench.sh times them at fewer builds and rounds
# (BENCH_WIDE_BUILDS, BENCH_WIDE_ROUNDS): each costs milliseconds to a third of a second.
WIDE = (("resnet50", tv("resnet50")),                       # bottleneck residual CNN
        ("resnext50", tv("resnext50_32x4d")),               # grouped 3x3 convs, 32 groups
        ("regnety400", tv("regnet_y_400mf")),               # RegNet: group convs + squeeze-excite
        ("densenet121", tv("densenet121")),                 # dense concatenation
        ("googlenet", tv("googlenet", aux_logits=False, init_weights=True)),  # Inception v1
        ("inceptionv3", tv("inception_v3", 299, aux_logits=False, init_weights=True)),
        ("squeezenet", tv("squeezenet1_1")),                # fire modules, ceil-mode pools
        ("shufflenetv2", tv("shufflenet_v2_x1_0")),         # channel shuffle, split
        ("mnasnet", tv("mnasnet1_0")),                      # NAS inverted residuals, 5x5 depthwise
        ("mobilenetv3", tv("mobilenet_v3_large")),          # HardSwish, squeeze-excite
        ("efficientnetb0", tv("efficientnet_b0")),          # SiLU, squeeze-excite
        ("convnext", tv("convnext_tiny")),                  # 7x7 depthwise, LayerNorm, GELU
        ("vitb16", tv("vit_b_16")),                         # ViT-Base: global attention, 344 MB
        ("swint", tv("swin_t")),                            # windowed attention
        ("vgg16", tv("vgg16")),                             # plain 3x3 CNN, 528 MB of weights
        ("deeplabv3", deeplabv3),                           # segmentation: dilated ASPP, bilinear
        ("gpt", gpt))                                       # causal decoder


def export(make, path):
    torch.manual_seed(1234)
    module, args = make()
    module.eval()
    # BatchNorm's running statistics are 0 and 1 after initialisation; make them look trained
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    # nn.MultiheadAttention in eval mode without autograd takes its fused fast path
    # (aten::_native_multi_head_attention), which has no ONNX export; with autograd on it traces
    # the plain ops (the outputs are the same)
    mha = any(isinstance(m, nn.MultiheadAttention) for m in module.modules())
    with torch.set_grad_enabled(mha):
        torch.onnx.export(module, args, path, opset_version=17, do_constant_folding=True,
                          input_names=["input"], output_names=["output"])
