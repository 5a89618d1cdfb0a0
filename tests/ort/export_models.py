#!/usr/bin/python3
"""Exports the models tst_ort_compare runs through the interpreter and ONNX Runtime.

    /usr/bin/python3 tests/ort/export_models.py OUT_DIR

Writes OUT_DIR/resnet18.onnx, mobilenet_v3_small.onnx and transformer_encoder.onnx:
torchvision's ResNet-18 and MobileNetV3-Small and a small Transformer encoder
classifier, all with random weights from a fixed seed, in eval mode, exported by
Debian's python3-torch (1.13) with a dynamic batch axis; and kernel_shapes.onnx,
Conv and Gemm nodes written with onnx.helper (see kernel_shapes_model()). The files are large
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
    "kernel_shapes": (None, None, None, None, 13),  # built with onnx.helper, see kernel_shapes_model()
}


def kernel_shapes_model():
    """Conv and Gemm nodes shaped to hit the edges of the runtime's fast paths.

    Inputs x [N, 29, 23, 19] and v [N, 700]. Conv weights of 13, 50 and 7 output
    channels (not multiples of the GEMM micro-kernels' 6 or 12 rows), a 3x3 window
    over 29 channels (depth 261: one full depth block of 256 and a remainder), a
    1x1 stride-1 (pointwise) and a 1x1 stride-2 conv, a depthwise 5x5 with strides
    2x3, dilations 2x1 and uneven pads, and two Gemm nodes with 2 rows (the
    matrix-vector path), with and without transB, alpha and beta not 1.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)

    def weight(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) / np.sqrt(np.prod(shape[1:])),
                                       name)

    initializers = [weight("wa", 13, 29, 3, 3), weight("ba", 13), weight("wb", 50, 29, 1, 1),
                    weight("wc", 29, 1, 5, 5), weight("bc", 29), weight("we", 7, 29, 1, 1),
                    weight("g1", 900, 700), weight("c1", 900), weight("g2", 700, 300), weight("c2", 1, 300)]
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["conv3x3"], name="conv3x3", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wb"], ["pointwise"], name="pointwise"),
        helper.make_node("Conv", ["x", "wc", "bc"], ["depthwise"], name="depthwise", group=29, strides=[2, 3],
                         dilations=[2, 1], pads=[3, 1, 2, 2]),
        helper.make_node("Conv", ["x", "we"], ["strided1x1"], name="strided1x1", strides=[2, 2]),
        helper.make_node("Gemm", ["v", "g1", "c1"], ["gemm_transb"], name="gemm_transb", transB=1, alpha=0.5,
                         beta=2.0),
        helper.make_node("Gemm", ["v", "g2", "c2"], ["gemm"], name="gemm", alpha=1.5, beta=-1.0),
    ]
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT,
                                             ["N", None] if n.op_type == "Gemm" else ["N", None, None, None])
               for n in nodes]
    graph = helper.make_graph(nodes, "kernel_shapes",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 29, 23, 19]),
                               helper.make_tensor_value_info("v", TensorProto.FLOAT, ["N", 700])],
                              outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="export_models.py")


def export(name, out_dir):
    if name == "kernel_shapes":
        import onnx
        onnx.save(kernel_shapes_model(), os.path.join(out_dir, name + ".onnx"))
        return {"opset": 13, "seed": SEED}

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
        want = {"opset": opset, "seed": SEED}
        if name != "kernel_shapes":
            want.update(torch=torch.__version__, torchvision=torchvision.__version__)
        if stamps.get(name) == want and os.path.exists(os.path.join(out_dir, name + ".onnx")):
            print(f"{name}: up to date")
            continue
        stamps[name] = export(name, out_dir)
        print(f"{name}: exported (opset {opset})")
        with open(stamp_path, "w") as f:
            json.dump(stamps, f, indent=1)


if __name__ == "__main__":
    main()
