#!/usr/bin/python3
"""Writes a ResNet-50 (25.6M parameters, random weights from a fixed seed) as ONNX for the rule-edit
benchmark: the size of model issue 18 measures edit latency on. Made at benchmark time, never committed.

    /usr/bin/python3 tests/bench/make_resnet50.py OUT.onnx
"""
import sys

import torch
import torchvision

torch.manual_seed(20261126)
model = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(model, torch.randn(1, 3, 224, 224), sys.argv[1], opset_version=13,
                  input_names=["input"], output_names=["logits"])
