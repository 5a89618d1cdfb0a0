#!/usr/bin/python3
"""Builds the model zoo of the `conformance` suite tst_zoo: models as users bring them, exported here
with Debian's python3-torch / python3-torchvision / python3-onnx (random weights from a fixed seed), so
nobody here wrote the graphs the loader, the runtime and the exports must take.

    /usr/bin/python3 tests/zoo/make_zoo.py [--dynamic-batch] OUT_DIR

For each model NAME it writes OUT_DIR/NAME.onnx, NAME_calib.npz and NAME_eval.npz (8 and 32 rows, arrays
named after the model's input), and OUT_DIR/zoo.json: for each model its opset, input, design and
`expected_layers`, the number of Conv/ConvTranspose/Gemm/MatMul nodes whose weight operand is a constant
(an initializer, a Constant node, or one reached from those through Identity/Cast/Reshape/Transpose/
Unsqueeze/Squeeze), counted here with the onnx package rather than by the code under test. Subgraph nodes
(If/Loop/Scan bodies) count too.

torchvision models are exported as torch.onnx does by default: a fixed batch of 1, BatchNorm folded, at
opsets from 9 to 17 (python3-onnx 1.12 writes up to 17; the opset-18 and -21 models are written with
onnx.helper). BatchNorm statistics are settled on smooth random images first, so activations have the
ranges of a network that has seen images, not of a fresh initialisation. Models already present with the
same settings are kept (zoo.json records them), so a rebuild costs nothing.

With --dynamic-batch it writes only the zoo's ARCHITECTURES (what tests/bench/bench_zoo times; the
other models test the loader and control flow), exported with a dynamic axis 0 on every input and
output ("batch"), so that one file runs at any batch size. Give it another OUT_DIR than the fixed zoo.
zoo.json marks each model's `architecture` and `dynamic_batch`.
"""

import copy
import json
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper

SEED = 20261125
SIZE = 96  # image side: the torchvision designs at a size that keeps the suite fast
ROWS = 8  # calibration rows
# Evaluation rows: an output SQNR over 8 rows of a classifier's 10 logits (80
# values) moved by 0.33 dB when Sigmoid's last bit changed (regnet_y_400mf,
# from 34.38 to 34.05 dB against ONNX Runtime's 34.67), more than half of
# tst_zoo's 0.5 dB tolerance; over 32 rows two such builds agreed with ONNX
# Runtime within 0.19 dB on two independent draws.
EVAL_ROWS = 32
LAYER_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
PASS_THROUGH = {"Identity", "Cast", "Reshape", "Transpose", "Unsqueeze", "Squeeze"}


def smooth_images(rng, n, channels=3, size=SIZE):
    """Random images with spatial structure: noise at 1/8 resolution, upsampled bilinearly."""
    low = torch.from_numpy(rng.standard_normal((n, channels, size // 8, size // 8)).astype(np.float32))
    return torch.nn.functional.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)


def settle_batchnorm(model, rng, channels=3, size=SIZE):
    model.train()
    with torch.no_grad():
        for _ in range(6):
            model(smooth_images(rng, 8, channels, size))
    model.eval()


class SmallDenseNet(torch.nn.Module):
    """torchvision's DenseNet with 3 small dense blocks (dense concatenation), sized for the suite."""

    def __init__(self):
        super().__init__()
        self.net = torchvision.models.DenseNet(growth_rate=12, block_config=(3, 3, 3), num_init_features=24,
                                               bn_size=2, num_classes=10)

    def forward(self, x):
        return self.net(x)


class SegmentationHead(torch.nn.Module):
    """A small encoder-decoder: strided convs down, ConvTranspose and Resize up, a skip concat, per-pixel
    class logits (a segmentation head)."""

    def __init__(self):
        super().__init__()
        self.down1 = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, 2, 1), torch.nn.BatchNorm2d(16), torch.nn.ReLU())
        self.down2 = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, 2, 1), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        self.up1 = torch.nn.ConvTranspose2d(32, 16, 2, 2)
        self.fuse = torch.nn.Conv2d(32, 16, 3, 1, 1)
        self.classes = torch.nn.Conv2d(16, 5, 1)

    def forward(self, x):
        a = self.down1(x)
        b = self.down2(a)
        u = torch.relu(self.up1(b))
        f = torch.relu(self.fuse(torch.cat([u, a], dim=1)))
        y = self.classes(f)
        return torch.nn.functional.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)


class SharedLayerEncoder(torch.nn.Module):
    """Token embedding and a Transformer encoder whose two layers are the same module (shared weights, as in
    ALBERT): torch.onnx writes the second use through Identity nodes of the first's initializers."""

    def __init__(self, vocabulary=500, d_model=64):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocabulary, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.layers = torch.nn.ModuleList([layer, layer])
        self.head = torch.nn.Linear(d_model, 10)

    def forward(self, tokens):
        h = self.embedding(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(dim=1))


class ClonedLayerEncoder(SharedLayerEncoder):
    """The same encoder with two independent layers (deep copies)."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([self.layers[0], copy.deepcopy(self.layers[0])])


class DetectionHead(torch.nn.Module):
    """A small single-shot detector (SSD / RetinaNet style): a strided Conv-BN-ReLU backbone with features
    at strides 8, 16 and 32 (12x12, 6x6, 3x3 at the zoo's image size), a feature pyramid's top-down path
    (1x1 lateral convs; the coarser level upsampled by nearest Resize x2 and added), a 3x3 conv per level,
    then per level a class conv and a box conv whose maps are transposed to channels-last, reshaped to
    (batch, positions x anchors, classes or 4) and concatenated over the levels: outputs `scores` and
    `boxes`."""

    def __init__(self, classes=6, anchors=3, width=32):
        super().__init__()

        def block(cin, cout, stride):
            return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                       torch.nn.BatchNorm2d(cout), torch.nn.ReLU())

        self.classes = classes
        self.stem = torch.nn.Sequential(block(3, 16, 2), block(16, 24, 2))
        self.c3 = torch.nn.Sequential(block(24, 32, 2), block(32, 32, 1))
        self.c4 = torch.nn.Sequential(block(32, 64, 2), block(64, 64, 1))
        self.c5 = torch.nn.Sequential(block(64, 96, 2), block(96, 96, 1))
        self.lateral = torch.nn.ModuleList([torch.nn.Conv2d(c, width, 1) for c in (32, 64, 96)])
        self.smooth = torch.nn.ModuleList([torch.nn.Conv2d(width, width, 3, 1, 1) for _ in range(3)])
        self.cls = torch.nn.ModuleList([torch.nn.Conv2d(width, anchors * classes, 3, 1, 1) for _ in range(3)])
        self.box = torch.nn.ModuleList([torch.nn.Conv2d(width, anchors * 4, 3, 1, 1) for _ in range(3)])

    def forward(self, x):
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p5 = self.lateral[2](c5)
        p4 = self.lateral[1](c4) + torch.nn.functional.interpolate(p5, scale_factor=2.0, mode="nearest")
        p3 = self.lateral[0](c3) + torch.nn.functional.interpolate(p4, scale_factor=2.0, mode="nearest")
        scores, boxes = [], []
        for level, p in enumerate((p3, p4, p5)):
            p = torch.relu(self.smooth[level](p))
            n = p.shape[0]
            scores.append(self.cls[level](p).permute(0, 2, 3, 1).reshape(n, -1, self.classes))
            boxes.append(self.box[level](p).permute(0, 2, 3, 1).reshape(n, -1, 4))
        return torch.cat(scores, dim=1), torch.cat(boxes, dim=1)


def torch_model(make, opset, tokens=False, settle=True, outputs=("output",)):
    def build(path, rng, dynamic_batch=False):
        torch.manual_seed(SEED)
        model = make()
        if settle and not tokens:
            settle_batchnorm(model, rng)
        model.eval()
        example = torch.randint(0, 500, (1, 16)) if tokens else smooth_images(rng, 1)
        names = ["input", *outputs]
        dynamic_axes = {name: {0: "batch"} for name in names} if dynamic_batch else None
        # Autograd on: nn.TransformerEncoderLayer's eval fast path has no ONNX export.
        torch.onnx.export(model, (example,), path, opset_version=opset, input_names=["input"],
                          output_names=list(outputs), dynamic_axes=dynamic_axes, do_constant_folding=True)
        if tokens:
            data = lambda n: rng.integers(0, 500, (n, 16)).astype(np.int64)
        else:
            data = lambda n: smooth_images(rng, n).numpy()
        return data
    return build


def weights_into_constants(model, through=()):
    """Moves every initializer into a Constant node (as paddle2onnx and older tf2onnx write models); a
    weight named in `through` is stored transposed and read back through a Transpose, or stored as
    float16 and read through a Cast, as converters do."""
    graph = model.graph
    nodes = []
    for init in list(graph.initializer):
        value = numpy_helper.to_array(init)
        how = dict(through).get(init.name)
        if how == "transpose" and value.ndim >= 2:
            perm = list(range(value.ndim))[::-1]
            stored = numpy_helper.from_array(np.ascontiguousarray(value.transpose(perm)), init.name + "_stored")
            nodes.append(helper.make_node("Constant", [], [init.name + "_stored"], value=stored))
            nodes.append(helper.make_node("Transpose", [init.name + "_stored"], [init.name], perm=perm))
        elif how == "fp16":
            stored = numpy_helper.from_array(value.astype(np.float16), init.name + "_fp16")
            nodes.append(helper.make_node("Constant", [], [init.name + "_fp16"], value=stored))
            nodes.append(helper.make_node("Cast", [init.name + "_fp16"], [init.name], to=TensorProto.FLOAT))
        else:
            nodes.append(helper.make_node("Constant", [], [init.name], value=numpy_helper.from_array(value, init.name)))
    del graph.initializer[:]
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)
    # Graph inputs that named initializers (older exporters list them) are no longer inputs.
    names = {n.output[0] for n in nodes}
    kept = [i for i in graph.input if i.name not in names]
    del graph.input[:]
    graph.input.extend(kept)
    return model


class SmallCnn(torch.nn.Module):
    """Conv-BN-ReLU twice, max pool, Gemm, Softmax: the shape of many older classifiers."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, 1, 1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, 1, 1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1))
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        return torch.softmax(self.fc(torch.flatten(self.features(x), 1)), dim=1)


def constant_weights_model(opset, through):
    def build(path, rng):
        data = torch_model(SmallCnn, opset)(path, rng)
        model = weights_into_constants(onnx.load(path), through)
        onnx.save(model, path)
        return data
    return build


def conv_weight(rng, name, cout, cin, k=3):
    return numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32),
                                   name)


def if_model(path, rng):
    """A branch on an input scalar (as voice-activity models branch on the sample rate): both branches run
    a Conv on the outer input with weights of their own, then a shared head Conv."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, SIZE, SIZE])
    flag = helper.make_tensor_value_info("use_wide", TensorProto.BOOL, [1])
    branch_out = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
    then_graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "wide_w"], ["t0"], pads=[2, 2, 2, 2], name="wide_conv"),
         helper.make_node("Relu", ["t0"], ["t_out"])],
        "then_branch", [], [branch_out("t_out")], [conv_weight(rng, "wide_w", 8, 3, 5)])
    else_graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "narrow_w"], ["e0"], pads=[1, 1, 1, 1], name="narrow_conv"),
         helper.make_node("Relu", ["e0"], ["e_out"])],
        "else_branch", [], [branch_out("e_out")], [conv_weight(rng, "narrow_w", 8, 3, 3)])
    nodes = [helper.make_node("If", ["use_wide"], ["features"], name="If_0", then_branch=then_graph,
                              else_branch=else_graph),
             helper.make_node("Conv", ["features", "head_w"], ["output"], name="head", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "if_model", [x, flag],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, SIZE, SIZE])],
                              [conv_weight(rng, "head_w", 4, 8)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    # Half the rows take each branch.
    return {"input": lambda n: smooth_images(rng, n).numpy(), "use_wide": lambda n: np.arange(n) % 2 == 0}


def loop_model(path, rng):
    """A Loop that applies the same MatMul + Tanh block 4 times (a constant trip count) to a loop-carried
    state (its weight read from the outer scope) and collects each step's state as a scan output."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w"], ["m"], name="step_matmul"),
         helper.make_node("Tanh", ["m"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["h_out"], ["scan_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 32]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [1, 32])])
    w = numpy_helper.from_array((rng.standard_normal((32, 32)) / np.sqrt(32) * 1.2).astype(np.float32), "w")
    head = numpy_helper.from_array((rng.standard_normal((32, 10)) / np.sqrt(32)).astype(np.float32), "head_w")
    steps = numpy_helper.from_array(np.array(4, np.int64), "steps")
    nodes = [helper.make_node("Loop", ["steps", "", "input"], ["final", "states"], name="Loop_0", body=body),
             helper.make_node("MatMul", ["final", "head_w"], ["output"], name="head")]
    graph = helper.make_graph(
        nodes, "loop_model",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10]),
         helper.make_tensor_value_info("states", TensorProto.FLOAT, [4, 1, 32])],
        [w, head, steps])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return lambda n: rng.standard_normal((n, 32)).astype(np.float32)


def scan_model(path, rng):
    """A small recurrent cell run by Scan over a sequence: h = tanh(x W + h U), outputs every h."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["a"], name="input_proj"),
         helper.make_node("MatMul", ["h_in", "U"], ["b"], name="recurrent_proj"),
         helper.make_node("Add", ["a", "b"], ["c"]),
         helper.make_node("Tanh", ["c"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["y_t"])],
        "cell",
        [helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 24]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 24]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [1, 24])])
    W = numpy_helper.from_array((rng.standard_normal((16, 24)) / 4).astype(np.float32), "W")
    U = numpy_helper.from_array((rng.standard_normal((24, 24)) / 5).astype(np.float32), "U")
    h0 = numpy_helper.from_array(np.zeros((1, 24), np.float32), "h0")
    graph = helper.make_graph(
        [helper.make_node("Scan", ["h0", "input"], ["h_last", "output"], name="Scan_0", body=body,
                          num_scan_inputs=1)],
        "scan_model", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [12, 1, 16])],
        [helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [1, 24]),
         helper.make_tensor_value_info("output", TensorProto.FLOAT, [12, 1, 24])],
        [W, U, h0])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    return {"input": lambda n: rng.standard_normal((12 * n, 1, 16)).astype(np.float32)}


def new_opset_cnn(opset):
    """A CNN written directly at an opset newer than python3-onnx knows (18: ReduceMean's axes are an input;
    21): Conv, Relu, ReduceMean over the plane, Gemm."""
    def build(path, rng):
        fc = numpy_helper.from_array((rng.standard_normal((10, 16)) / 4).astype(np.float32), "fc_w")
        axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
        nodes = [helper.make_node("Conv", ["input", "c1_w"], ["a"], pads=[1, 1, 1, 1], name="/c1/Conv"),
                 helper.make_node("Relu", ["a"], ["b"]),
                 helper.make_node("Conv", ["b", "c2_w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], name="/c2/Conv"),
                 helper.make_node("Relu", ["c"], ["d"]),
                 helper.make_node("ReduceMean", ["d", "axes"], ["e"], keepdims=0, name="/pool/ReduceMean"),
                 helper.make_node("Gemm", ["e", "fc_w"], ["output"], transB=1, name="/fc/Gemm")]
        graph = helper.make_graph(nodes, f"cnn_opset{opset}",
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
                                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
                                  [conv_weight(rng, "c1_w", 8, 3), conv_weight(rng, "c2_w", 16, 8), fc, axes])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8 if opset <= 18 else 10
        onnx.save(model, path)
        return lambda n: smooth_images(rng, n).numpy()
    return build


tv = torchvision.models
# name -> (builder, opset, design)
ZOO = {
    "resnet18": (torch_model(lambda: tv.resnet18(num_classes=10), 13), 13, "plain residual"),
    "mobilenet_v2": (torch_model(lambda: tv.mobilenet_v2(num_classes=10), 11), 11,
                     "depthwise, inverted residuals, ReLU6 as Clip"),
    "mobilenet_v3_small": (torch_model(lambda: tv.mobilenet_v3_small(num_classes=10), 14), 14,
                           "squeeze-excite, HardSwish, HardSigmoid"),
    "efficientnet_b0": (torch_model(lambda: tv.efficientnet_b0(num_classes=10), 13), 13,
                        "depthwise 5x5 stride 2, squeeze-excite, SiLU"),
    "shufflenet_v2": (torch_model(lambda: tv.shufflenet_v2_x0_5(num_classes=10), 12), 12,
                      "channel shuffle (Reshape/Transpose), split"),
    "squeezenet": (torch_model(lambda: tv.squeezenet1_1(num_classes=10), 10), 10, "fire modules, concat"),
    "densenet_small": (torch_model(SmallDenseNet, 15), 15, "dense concatenation"),
    "regnet_y_400mf": (torch_model(lambda: tv.regnet_y_400mf(num_classes=10), 16), 16,
                       "grouped convs, squeeze-excite"),
    "mnasnet": (torch_model(lambda: tv.mnasnet0_5(num_classes=10), 9), 9, "depthwise, opset 9"),
    "segmentation_head": (torch_model(SegmentationHead, 13), 13, "ConvTranspose, Resize, skip concat"),
    "encoder_shared_layers": (torch_model(SharedLayerEncoder, 17, tokens=True), 17,
                              "transformer, one layer used twice (Identity to shared weights)"),
    "encoder_cloned_layers": (torch_model(ClonedLayerEncoder, 14, tokens=True), 14,
                              "transformer, two layers, LayerNorm decomposed"),
    "cnn_constant_weights_opset9": (constant_weights_model(9, ()), 9, "every weight in a Constant node"),
    "cnn_constant_weights_opset11": (constant_weights_model(11, (("fc.weight", "transpose"),)), 11,
                                     "Constant weights, one through Transpose, Softmax"),
    "cnn_fp16_constant_weights": (constant_weights_model(13, (("features.0.weight", "fp16"),
                                                              ("features.4.weight", "fp16"))), 13,
                                  "float16 Constant weights through Cast"),
    "if_branch": (if_model, 13, "If on an input scalar, a Conv in each branch"),
    "loop_cell": (loop_model, 13, "Loop with loop-carried state and a scan output"),
    "scan_rnn": (scan_model, 11, "Scan running a recurrent cell"),
    "cnn_opset18": (new_opset_cnn(18), 18, "ReduceMean with axes as an input"),
    "cnn_opset21": (new_opset_cnn(21), 21, "opset 21"),
    # Added last: a model's random seed is its position here, so the ones above keep theirs.
    "detection_head": (torch_model(DetectionHead, 13, outputs=("scores", "boxes")), 13,
                       "multi-scale features, FPN top-down Resize + Add, per-level class/box heads, "
                       "Transpose/Reshape/Concat"),
}


# The designs users bring (what tests/bench/bench_zoo times, --dynamic-batch writes); the other models of
# ZOO test the loader (Constant weights, new opsets) and control flow.
ARCHITECTURES = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2", "squeezenet",
                 "densenet_small", "regnet_y_400mf", "mnasnet", "segmentation_head", "encoder_shared_layers",
                 "encoder_cloned_layers", "detection_head")


def constant_values(graph, outer=frozenset()):
    """Names of the values of `graph` that are constants: initializers, Constant outputs, and the outputs
    of pass-through ops whose inputs are all constant (outer-scope constants included)."""
    constants = set(outer) | {i.name for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            constants.update(node.output)
        elif node.op_type in PASS_THROUGH and node.input and all(i in constants for i in node.input if i):
            constants.update(node.output)
    return constants


def count_layers(graph, outer=frozenset()):
    constants = constant_values(graph, outer)
    count = 0
    for node in graph.node:
        if node.op_type in LAYER_OPS and len(node.input) > 1 and node.input[1] in constants:
            count += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                count += count_layers(attr.g, constants)
    return count


def main():
    arguments = sys.argv[1:]
    dynamic_batch = arguments[:1] == ["--dynamic-batch"]
    arguments = arguments[1:] if dynamic_batch else arguments
    if len(arguments) != 1 or arguments[0].startswith("-"):
        sys.exit("usage: make_zoo.py [--dynamic-batch] OUT_DIR")
    out = arguments[0]
    os.makedirs(out, exist_ok=True)
    manifest_path = os.path.join(out, "zoo.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    stamp = {"seed": SEED, "size": SIZE, "rows": ROWS, "eval_rows": EVAL_ROWS, "torch": torch.__version__,
             "torchvision": torchvision.__version__, "script": os.path.getmtime(__file__),
             "dynamic_batch": dynamic_batch}
    for index, (name, (build, opset, design)) in enumerate(ZOO.items()):
        if dynamic_batch and name not in ARCHITECTURES:
            continue
        path = os.path.join(out, name + ".onnx")
        entry = manifest.get(name, {})
        if entry.get("stamp") == stamp and all(os.path.exists(os.path.join(out, name + s))
                                               for s in (".onnx", "_calib.npz", "_eval.npz")):
            print(f"{name}: up to date")
            continue
        rng = np.random.default_rng(SEED + index)
        data = build(path, rng, dynamic_batch=True) if dynamic_batch else build(path, rng)
        model = onnx.load(path)
        inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        makers = data if isinstance(data, dict) else {inputs[0]: data}
        for split, rows in (("calib", ROWS), ("eval", EVAL_ROWS)):
            np.savez(os.path.join(out, f"{name}_{split}.npz"), **{k: make(rows) for k, make in makers.items()})
        manifest[name] = {"opset": opset, "design": design, "inputs": inputs,
                          "expected_layers": count_layers(model.graph), "architecture": name in ARCHITECTURES,
                          "dynamic_batch": dynamic_batch, "stamp": stamp}
        print(f"{name}: opset {opset}, {manifest[name]['expected_layers']} layers ({design})")
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
