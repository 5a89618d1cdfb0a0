#!/usr/bin/python3
"""Trains the depthwise-separable CNN of issue 20's equalization figures: a
MobileNet-style network on the demo's digits (resources/demo/digits, the same
train / calibration / evaluation split, load_splits() of train_digits_cnn.py),
upsampled from 8x8 to 16x16 by repeating each pixel 2x2.

usage: train_depthwise_cnn.py OUT_DIR
Writes OUT_DIR/dw_cnn.onnx (input "input" [N, 1, 16, 16], output "logits"
[N, 10], opset 13, BatchNormalization folded into the convolutions by the
exporter), OUT_DIR/dw_calib.npz and OUT_DIR/dw_eval.npz ("input", "labels").

Network: Conv 3x3 1->16, then three blocks of depthwise Conv 3x3 and pointwise
Conv 1x1 (16->32, 32->64 stride 2, 64->64 stride 2), each Conv followed by
BatchNorm and ReLU, global average pooling and a Linear 64->10. ReLU where
MobileNet has ReLU6: as the Data-Free Quantization paper does for its
experiments, since ReLU6's clip at 6 does not commute with equalization's
scaling. The BatchNorms are what makes the folded depthwise weights' channel
ranges differ by orders of magnitude, as in MobileNetV2 (the paper's case).

Training: Adam (lr 3e-3), cosine schedule over 25 epochs, batch 32, one
thread, deterministic algorithms and seeds (the same torch build gives the same
file). About half a minute of CPU.
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
EPOCHS = 25
BATCH_SIZE = 32
LEARNING_RATE = 3e-3


def demo_module():
    spec = importlib.util.spec_from_file_location("train_digits_cnn", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upsample(x):
    return np.ascontiguousarray(x.repeat(2, axis=2).repeat(2, axis=3))


def conv_bn(cin, cout, kernel, stride, groups):
    return [nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU()]


class DepthwiseCNN(nn.Module):
    def __init__(self):
        super().__init__()
        layers = conv_bn(1, 16, 3, 1, 1)
        for cin, cout, stride in ((16, 32, 1), (32, 64, 2), (64, 64, 2)):
            layers += conv_bn(cin, cin, 3, stride, cin)  # depthwise
            layers += conv_bn(cin, cout, 1, 1, 1)        # pointwise
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

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
    model = DepthwiseCNN()
    x, y = (torch.from_numpy(a) for a in splits["train"])
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
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
        if epoch % 5 == 0:
            model.eval()
            print(f"epoch {epoch:3d}  train {accuracy(model, *splits['train']):.4f}  "
                  f"calib {accuracy(model, *splits['calib']):.4f}")
    model.eval()
    for name, (xs, ys) in splits.items():
        print(f"float top-1 {name:5s}: {accuracy(model, xs, ys) * 100:.2f} %")
    path = out / "dw_cnn.onnx"
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
        if init.name.endswith("weight") and len(init.dims) == 4 and init.dims[1] == 1:
            w = onnx.numpy_helper.to_array(init)
            r = np.abs(w).reshape(w.shape[0], -1).max(1)
            print(f"  {init.name}: channel ranges {r.min():.3g} .. {r.max():.3g}")
    demo.write_npz(out / "dw_calib.npz", {"input": splits["calib"][0], "labels": splits["calib"][1]})
    demo.write_npz(out / "dw_eval.npz", {"input": splits["eval"][0], "labels": splits["eval"][1]})


if __name__ == "__main__":
    main()
