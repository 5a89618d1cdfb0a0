#!/usr/bin/python3
"""Trains the MobileNetV2-style CNN of the Data-Free Quantization figures
(docs/algorithms.md, "Cross-layer equalization here"): inverted residual
blocks with BatchNorm, on the demo's digits (resources/demo/digits, the same
train / calibration / evaluation split as train_depthwise_cnn.py), upsampled
from 8x8 to 16x16 by repeating each pixel 2x2.

usage: train_mobilenet_v2.py OUT_DIR
Writes OUT_DIR/mbv2.onnx (input "input" [N, 1, 16, 16], output "logits" [N, 10],
opset 13, every BatchNormalization folded into its convolution by the exporter),
OUT_DIR/mbv2_calib.npz and OUT_DIR/mbv2_eval.npz ("input", "labels").

Network (MobileNetV2's structure, scaled down): Conv 3x3 1->16 + BN + ReLU; four
inverted residual blocks, each expand Conv 1x1 (x4) + BN + ReLU, depthwise Conv
3x3 + BN + ReLU, project Conv 1x1 + BN (linear, no activation), with the
residual Add where the block keeps its shape: 16->16, 16->24 stride 2, 24->24,
24->32 stride 2; head Conv 1x1 32->128 + BN + ReLU, global average pooling,
Linear 128->10. ReLU where MobileNetV2 has ReLU6, as the paper does for its
CLE experiments (ReLU6's clip does not commute with equalization's scaling).

What makes per-tensor quantization fail, as it does on ImageNet MobileNetV2:
folding a BatchNorm multiplies each output channel of its convolution by
gamma / sqrt(var + eps). In MobileNetV2 some expanded channels are dead (the
ReLU after the expand convolution never lets them through), so the depthwise
convolution of such a channel always outputs 0, its BatchNorm's running
variance decays to ~0, and its folded kernel is scaled by ~1/sqrt(eps) = 316
while the live channels' are scaled by 1/sigma of order 1: the channel ranges
of one depthwise layer spread over orders of magnitude and one scale per
tensor leaves the live channels a handful of grid steps. A small model
trained for a minute on digits does not kill channels on its own (measured:
its depthwise ranges differ 3-7x), so the dead channels are made, not waited
for: one expanded channel in DEAD_EVERY of every block starts with its expand
BatchNorm's beta at DEAD_BETA, which no normalised input overcomes; the ReLU
gives it no gradient, so it stays dead through training, as a dead channel
does. Everything else trains as usual (no weight decay), and the exported
weights are what BatchNorm folding makes of it. The script prints the spread
of the folded depthwise kernels' channel ranges (max / min per layer).

Training: Adam (lr 3e-3), cosine schedule over EPOCHS epochs, batch 32, one
thread, deterministic algorithms and seeds (the same torch build gives the
same file). Measured here: 43 s of user CPU (plus 20 s of system time)
with one thread.
"""
import collections
import importlib.util
import pathlib
import sys

import numpy as np
import onnx
import torch
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
DEMO = HERE.parent.parent / "resources" / "demo" / "digits" / "train_digits_cnn.py"
SEED = 20261127
EPOCHS = 8
BATCH_SIZE = 32
LEARNING_RATE = 3e-3
EXPANSION = 4
DEAD_EVERY = 8
DEAD_BETA = -10.0


def demo_module():
    spec = importlib.util.spec_from_file_location("train_digits_cnn", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upsample(x):
    return np.ascontiguousarray(x.repeat(2, axis=2).repeat(2, axis=3))


def conv_bn(cin, cout, kernel, stride=1, groups=1, relu=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return layers + [nn.ReLU()] if relu else layers


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        hidden = cin * EXPANSION
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(*conv_bn(cin, hidden, 1), *conv_bn(hidden, hidden, 3, stride, hidden),
                                  *conv_bn(hidden, cout, 1, relu=False))
        with torch.no_grad():  # the dead expanded channels (see the module's docstring)
            self.body[1].bias[::DEAD_EVERY] = DEAD_BETA

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2Digits(nn.Module):
    def __init__(self):
        super().__init__()
        blocks = [InvertedResidual(cin, cout, stride) for cin, cout, stride in
                  ((16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 32, 2))]
        self.features = nn.Sequential(*conv_bn(1, 16, 3), *blocks, *conv_bn(32, 128, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    demo = demo_module()
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    splits = {name: (upsample(x), y) for name, (x, y) in demo.load_splits().items()}
    model = MobileNetV2Digits()
    x, y = (torch.from_numpy(a) for a in splits["train"])
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=0)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(SEED)
    for epoch in range(1, EPOCHS + 1):
        model.train()
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            optimizer.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            optimizer.step()
        schedule.step()
        if epoch % 4 == 0:
            model.eval()
            print(f"epoch {epoch:3d}  train {accuracy(model, *splits['train']):.4f}  "
                  f"calib {accuracy(model, *splits['calib']):.4f}")
    model.eval()
    for name, (xs, ys) in splits.items():
        print(f"float top-1 {name:5s}: {accuracy(model, xs, ys) * 100:.2f} %")
    path = out / "mbv2.onnx"
    torch.onnx.export(model, torch.from_numpy(splits["eval"][0][:2]), str(path), opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL)
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported, full_check=True)
    ops = collections.Counter(n.op_type for n in exported.graph.node)
    print("ONNX ops:", dict(ops))
    assert "BatchNormalization" not in ops, "the exporter did not fold the BatchNorms"
    for init in exported.graph.initializer:
        if init.name.endswith("weight") or len(init.dims) == 4:
            w = onnx.numpy_helper.to_array(init)
            if w.ndim == 4 and w.shape[1] == 1:
                r = np.abs(w).reshape(w.shape[0], -1).max(1)
                print(f"  depthwise {init.name} {list(w.shape)}: channel ranges {r.min():.3g} .. {r.max():.3g} "
                      f"(x{r.max() / max(r.min(), 1e-30):.3g})")
    demo.write_npz(out / "mbv2_calib.npz", {"input": splits["calib"][0], "labels": splits["calib"][1]})
    demo.write_npz(out / "mbv2_eval.npz", {"input": splits["eval"][0], "labels": splits["eval"][1]})


if __name__ == "__main__":
    main()
