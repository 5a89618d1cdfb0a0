#!/usr/bin/python3
"""Writes the small float models the ONNX QDQ export tests quantize, into the
folder given as the first argument (generated at test time, not committed):

  matmul_mlp.onnx (+ matmul_mlp.onnx.data): input x [N, 64] -> MatMul 64x96 + Add
      -> Relu -> MatMul 96x10 -> y; weights saved as external data.
  resnet_like.onnx: input x [N, 3, 8, 8] -> Conv 3->8 -> Relu -> Conv 8->8 -> Relu
      -> Conv 8->8 -> Add (skip) -> Relu -> GlobalAveragePool -> Flatten -> Gemm 8->10 -> y.
  saturating_conv.onnx: input x [N, 16, 4, 4] -> Conv 16->4 (3x3, weights all in [0.5, 1]) -> Conv 4->4
      (1x1) -> y. With inputs in [0.5, 1] nearly every 8-bit code of the first Conv is at the top of its
      range: adjacent products summed in 16 bits overflow, which is how ONNX Runtime's u8s8 kernels of AVX2
      CPUs without VNNI lose values. The second Conv quantizes the first one's output, so ONNX Runtime runs
      the first as one integer kernel (QLinearConv).
  llm_block.onnx: input x [N, 8, 256] (a batch of token sequences) -> MatMul 256x320 + Add -> Relu
      -> Gemm (transB, weight [256, 320], bias) needs 2-D: Reshape [-1, 320] -> Gemm -> Reshape [N, 8, 256]
      -> MatMul 256x64 -> y. Contractions of 256 and 320 (320 is not a multiple of 128: a short last
      block), the shapes of a transformer's linear layers, for the int4 MatMulNBits export.
  matmul_mlp_inputs.npz, resnet_like_inputs.npz, saturating_conv_inputs.npz, llm_block_inputs.npz: a batch
      of 16 inputs (`x`) for each, used both to calibrate and to compare runs.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(7)


def init(name, shape, scale):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inputs, outputs, inits, name):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="quantscope-tests")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


mlp = model(
    [helper.make_node("MatMul", ["x", "fc1.weight"], ["h0"], name="/fc1/MatMul"),
     helper.make_node("Add", ["h0", "fc1.bias"], ["h1"], name="/fc1/Add"),
     helper.make_node("Relu", ["h1"], ["h2"], name="/relu/Relu"),
     helper.make_node("MatMul", ["h2", "fc2.weight"], ["y"], name="/fc2/MatMul")],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
    [init("fc1.weight", (64, 96), 0.15), init("fc1.bias", (96,), 0.1), init("fc2.weight", (96, 10), 0.12)],
    "matmul_mlp")
onnx.save_model(mlp, os.path.join(out, "matmul_mlp.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                location="matmul_mlp.onnx.data", size_threshold=0)


def conv(name, x, y, cin, cout):
    return (helper.make_node("Conv", [x, name + ".weight", name + ".bias"], [y], name="/" + name + "/Conv",
                             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            [init(name + ".weight", (cout, cin, 3, 3), 0.8 / np.sqrt(cin * 9)), init(name + ".bias", (cout,), 0.05)])


c1, i1 = conv("stem", "x", "s0", 3, 8)
c2, i2 = conv("block/conv1", "s1", "b0", 8, 8)
c3, i3 = conv("block/conv2", "b1", "b2", 8, 8)
res = model(
    [c1, helper.make_node("Relu", ["s0"], ["s1"], name="/stem/Relu"),
     c2, helper.make_node("Relu", ["b0"], ["b1"], name="/block/Relu"),
     c3, helper.make_node("Add", ["b2", "s1"], ["r0"], name="/block/Add"),
     helper.make_node("Relu", ["r0"], ["r1"], name="/block/Relu_1"),
     helper.make_node("GlobalAveragePool", ["r1"], ["p0"], name="/pool/GlobalAveragePool"),
     helper.make_node("Flatten", ["p0"], ["p1"], name="/flatten/Flatten"),
     helper.make_node("Gemm", ["p1", "head.weight", "head.bias"], ["y"], name="/head/Gemm", transB=1)],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
    i1 + i2 + i3 + [init("head.weight", (10, 8), 0.5), init("head.bias", (10,), 0.05)],
    "resnet_like")
onnx.save_model(res, os.path.join(out, "resnet_like.onnx"))

np.savez(os.path.join(out, "matmul_mlp_inputs.npz"), x=rng.standard_normal((16, 64)).astype(np.float32))
np.savez(os.path.join(out, "resnet_like_inputs.npz"), x=rng.standard_normal((16, 3, 8, 8)).astype(np.float32))

sat = model(
    [helper.make_node("Conv", ["x", "conv.weight"], ["h"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["h", "mix.weight"], ["y"], name="/mix/Conv", kernel_shape=[1, 1])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 4, 4])],
    [numpy_helper.from_array(rng.uniform(0.5, 1.0, (4, 16, 3, 3)).astype(np.float32), "conv.weight"),
     init("mix.weight", (4, 4, 1, 1), 0.5)],
    "saturating_conv")
onnx.save_model(sat, os.path.join(out, "saturating_conv.onnx"))
np.savez(os.path.join(out, "saturating_conv_inputs.npz"), x=rng.uniform(0.5, 1.0, (16, 16, 4, 4)).astype(np.float32))

llm = model(
    [helper.make_node("MatMul", ["x", "up.weight"], ["u0"], name="/up/MatMul"),
     helper.make_node("Add", ["u0", "up.bias"], ["u1"], name="/up/Add"),
     helper.make_node("Relu", ["u1"], ["u2"], name="/act/Relu"),
     helper.make_node("Reshape", ["u2", "rows"], ["u3"], name="/down/Reshape"),
     helper.make_node("Gemm", ["u3", "down.weight", "down.bias"], ["d0"], name="/down/Gemm", transB=1),
     helper.make_node("Shape", ["x"], ["xs"], name="/shape/Shape"),
     helper.make_node("Reshape", ["d0", "xs"], ["d1"], name="/down/Reshape_1"),
     helper.make_node("MatMul", ["d1", "head.weight"], ["y"], name="/head/MatMul")],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 256])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 64])],
    [init("up.weight", (256, 320), 0.06), init("up.bias", (320,), 0.1), init("down.weight", (256, 320), 0.06),
     init("down.bias", (256,), 0.1), init("head.weight", (256, 64), 0.06),
     numpy_helper.from_array(np.array([-1, 320], dtype=np.int64), "rows")],
    "llm_block")
onnx.save_model(llm, os.path.join(out, "llm_block.onnx"))
np.savez(os.path.join(out, "llm_block_inputs.npz"), x=rng.standard_normal((16, 8, 256)).astype(np.float32))
