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
  mlp          784-256-128-10 with ReLU (an MNIST MLP)"""
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


MODELS = (("resnet18", resnet18), ("mobilenetv2", mobilenetv2), ("transformer", transformer),
          ("lstm", lstm), ("kws", kws), ("mlp", mlp))


def export(make, path):
    torch.manual_seed(1234)
    module, args = make()
    module.eval()
    # BatchNorm's running statistics are 0 and 1 after initialisation; make them look trained
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    with torch.no_grad():
        torch.onnx.export(module, args, path, opset_version=17, do_constant_folding=True,
                          input_names=["input"], output_names=["output"])
