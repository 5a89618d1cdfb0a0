#!/usr/bin/python3
"""Exports torchvision models with random weights (nothing is downloaded) to
ONNX the way users do, into the folder given as argument: resnet18.onnx and
mobilenet_v2.onnx, each with NAME.modules.txt listing the model's Conv2d and
Linear modules in forward order (torch's own names, dots turned into `/`, and
the conv's groups). tst_onnx checks that the module paths Quantscope derives
from the exporter's node names are exactly these. Needs python3-torch and
python3-torchvision.
"""
import os
import sys

import torch
import torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
for name, factory in (("resnet18", torchvision.models.resnet18), ("mobilenet_v2", torchvision.models.mobilenet_v2)):
    model = factory(weights=None).eval()
    order = []
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: order.append((n, m)))
             for n, m in model.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(torch.randn(1, 3, 64, 64))
    for h in hooks:
        h.remove()
    with open(os.path.join(out, name + ".modules.txt"), "w") as f:
        for n, m in order:
            f.write("%s %s %d\n" % (n.replace(".", "/"), "Conv" if isinstance(m, torch.nn.Conv2d) else "Gemm",
                                     m.groups if isinstance(m, torch.nn.Conv2d) else 1))
    torch.onnx.export(model, torch.randn(1, 3, 64, 64), os.path.join(out, name + ".onnx"), opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
print("torchvision exports written to", out)
