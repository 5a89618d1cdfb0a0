#!/usr/bin/env python3
"""A CNN with explicit BatchNormalization nodes for tst_odml_models, the way
torch.onnx writes them in training-preserving exports: BNs after a Conv, a
depthwise Conv, a grouped ConvTranspose and a Gemm (all foldable), after a Conv
whose output is also read by an Add and after a Concat (not foldable: written
as Mul and Add). Writes batch_norm.onnx and batch_norm_calib.npz (input "x").

usage: make_batch_norm_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
rng = np.random.default_rng(23)
inits = []
nodes = []


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
    return name


def bn(name, x, channels, eps=1e-5):
    const(name + ".weight", rng.uniform(0.5, 1.5, channels))
    const(name + ".bias", rng.normal(0, 0.3, channels))
    const(name + ".running_mean", rng.normal(0, 0.5, channels))
    const(name + ".running_var", rng.uniform(0.2, 2.0, channels))
    out = name + "_out"
    nodes.append(helper.make_node("BatchNormalization", [x, name + ".weight", name + ".bias", name + ".running_mean",
                                                         name + ".running_var"], [out], name=name, epsilon=eps))
    return out


def w(shape):
    return rng.normal(0, 0.4, shape)


const("conv1.weight", w((4, 3, 3, 3)))
const("conv1.bias", w(4))
nodes.append(helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", pads=[1, 1, 1, 1]))
r1 = "r1"
nodes.append(helper.make_node("Relu", [bn("bn1", "c1", 4)], [r1], name="relu1"))
const("dw.weight", w((4, 1, 3, 3)))
nodes.append(helper.make_node("Conv", [r1, "dw.weight"], ["c2"], name="dw", group=4, pads=[1, 1, 1, 1]))
n2 = bn("bn2", "c2", 4, eps=1e-3)
const("up.weight", w((4, 2, 2, 2)))
const("up.bias", w(4))
nodes.append(helper.make_node("ConvTranspose", [n2, "up.weight", "up.bias"], ["c3"], name="up", group=2,
                              strides=[2, 2]))
n3 = bn("bn3", "c3", 4)
nodes.append(helper.make_node("MaxPool", [n3], ["p3"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
const("conv4.weight", w((4, 4, 1, 1)))
const("conv4.bias", w(4))
nodes.append(helper.make_node("Conv", ["p3", "conv4.weight", "conv4.bias"], ["c4"], name="conv4"))
n4 = bn("bn4", "c4", 4)  # c4 is read by the Add too: not foldable
nodes.append(helper.make_node("Add", ["c4", n4], ["a4"], name="add4"))
nodes.append(helper.make_node("Concat", ["a4", r1], ["cat"], name="cat", axis=1))
n5 = bn("bn5", "cat", 8)  # after a Concat: not foldable
nodes.append(helper.make_node("GlobalAveragePool", [n5], ["g"], name="gap"))
nodes.append(helper.make_node("Flatten", ["g"], ["f"], name="flatten"))
const("fc.weight", w((5, 8)))
const("fc.bias", w(5))
nodes.append(helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["fc_out"], name="fc", transB=1, beta=0.5))
bn("bn6", "fc_out", 5)
nodes[-1].output[0] = "y"

graph = helper.make_graph(nodes, "batch_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="quantscope-tests")
model.ir_version = 7
onnx.checker.check_model(model)
model = onnx.shape_inference.infer_shapes(model)
onnx.save(model, os.path.join(out_dir, "batch_norm.onnx"))
np.savez(os.path.join(out_dir, "batch_norm_calib.npz"), x=rng.normal(0, 1, (8, 3, 8, 8)).astype(np.float32))

# A torchvision ResNet-18 exported keeping its BatchNormalization nodes (eval mode,
# TrainingMode.PRESERVE: no folding by the exporter), with random BN statistics.
import torch  # noqa: E402
import torchvision  # noqa: E402

torch.manual_seed(23)
net = torchvision.models.resnet18(num_classes=10)
with torch.no_grad():
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0, 0.2)
            m.running_mean.normal_(0, 0.2)
            m.running_var.uniform_(0.5, 2.0)
net.eval()
x = torch.randn(1, 3, 64, 64)
torch.onnx.export(net, x, os.path.join(out_dir, "resnet18_bn.onnx"), input_names=["input"], output_names=["logits"],
                  opset_version=13, training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
np.savez(os.path.join(out_dir, "resnet18_bn_calib.npz"), input=rng.normal(0, 1, (4, 3, 64, 64)).astype(np.float32))
