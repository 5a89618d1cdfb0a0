#!/usr/bin/python3
"""Exports the models tst_ort_compare runs through the interpreter and ONNX Runtime.

    /usr/bin/python3 tests/ort/export_models.py OUT_DIR

Writes OUT_DIR/resnet18.onnx, mobilenet_v3_small.onnx and transformer_encoder.onnx:
torchvision's ResNet-18 and MobileNetV3-Small and a small Transformer encoder
classifier, all with random weights from a fixed seed, in eval mode, exported by
Debian's python3-torch (1.13) with a dynamic batch axis. The files are large
(ResNet-18 is 45 MB), so they are generated into the build tree at test time by
the CTest fixture `ort_models`, never committed. A model whose file already
exists with the same exporter settings is kept (the settings are in
OUT_DIR/models.json).
"""

import json
import os
import sys

import torch
import torchvision

SEED = 20261122


class TransformerClassifier(torch.nn.Module):
    """Token embedding, 2 Transformer encoder layers (d_model 64, 4 heads), mean pool, linear head."""

    def __init__(self, vocabulary=1000, d_model=64, heads=4, layers=2, classes=10):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocabulary, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.classifier = torch.nn.Linear(d_model, classes)

    def forward(self, tokens):
        return self.classifier(self.encoder(self.embedding(tokens)).mean(dim=1))


# name -> (constructor, example input, input name, output name, opset)
MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None),
                 lambda: torch.randn(2, 3, 224, 224), "input", "logits", 13),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(weights=None),
                           lambda: torch.randn(2, 3, 224, 224), "input", "logits", 14),
    "transformer_encoder": (TransformerClassifier,
                            lambda: torch.randint(0, 1000, (2, 16), dtype=torch.int64), "tokens", "logits", 17),
}


def export(name, out_dir):
    make, example, input_name, output_name, opset = MODELS[name]
    torch.manual_seed(SEED)
    model = make().eval()
    # Random BatchNorm statistics, so that the folded scales and shifts are not the identity.
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
    path = os.path.join(out_dir, name + ".onnx")
    # Exported with autograd on: in eval mode without it, nn.TransformerEncoderLayer takes its fused
    # fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
    torch.onnx.export(model, (example(),), path, opset_version=opset, input_names=[input_name],
                      output_names=[output_name], dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
                      do_constant_folding=True)
    return {"opset": opset, "seed": SEED, "torch": torch.__version__, "torchvision": torchvision.__version__}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    stamp_path = os.path.join(out_dir, "models.json")
    stamps = {}
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            stamps = json.load(f)
    for name in MODELS:
        _, _, _, _, opset = MODELS[name]
        want = {"opset": opset, "seed": SEED, "torch": torch.__version__, "torchvision": torchvision.__version__}
        if stamps.get(name) == want and os.path.exists(os.path.join(out_dir, name + ".onnx")):
            print(f"{name}: up to date")
            continue
        stamps[name] = export(name, out_dir)
        print(f"{name}: exported (opset {opset})")
        with open(stamp_path, "w") as f:
            json.dump(stamps, f, indent=1)


if __name__ == "__main__":
    main()
