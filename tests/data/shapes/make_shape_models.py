#!/usr/bin/python3
"""Writes the small models and data tst_cli_model uses for batch sizes and shapes.

usage: make_shape_models.py OUT_DIR

  fixed_batch.onnx    x float32[1, 4] -> MatMul W[4, 3] -> Relu -> y[1, 3]  (batch fixed at 1,
                      as torch.onnx exports by default)
  fixed_batch16.onnx  the same with x float32[16, 4]
  dynamic_batch.onnx  the same with x float32[N, 4]
  dynamic_hw.onnx     x float32[1, 1, H, W] -> Conv W[2, 1, 3, 3] pads 1 -> MaxPool 2x2 -> y
  tokens.onnx         ids int64[N, T] -> Gather of a [100, 16] table -> ReduceMean over T -> y
  rows40.npz          x float32[40, 4], labels int64[40] in [0, 3)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="quantscope-tests")
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, path)


def matmul_model(batch, path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "fc.weight")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "fc.weight"], ["h"], name="/fc/MatMul"),
         helper.make_node("Relu", ["h"], ["y"], name="/relu/Relu")],
        "matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])], [w])
    save(graph, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    matmul_model(1, os.path.join(out, "fixed_batch.onnx"))
    matmul_model(16, os.path.join(out, "fixed_batch16.onnx"))
    matmul_model("N", os.path.join(out, "dynamic_batch.onnx"))

    rng = np.random.default_rng(2)
    conv_w = numpy_helper.from_array(rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "conv.weight")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
         helper.make_node("MaxPool", ["c"], ["y"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2])],
        "spatial", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, None, None])], [conv_w])
    save(graph, os.path.join(out, "dynamic_hw.onnx"))

    table = numpy_helper.from_array(rng.standard_normal((100, 16)).astype(np.float32), "embed.weight")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["embed.weight", "ids"], ["e"], name="/embed/Gather"),
         helper.make_node("ReduceMean", ["e"], ["y"], name="/mean/ReduceMean", axes=[1], keepdims=0)],
        "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], [table])
    save(graph, os.path.join(out, "tokens.onnx"))

    np.savez(os.path.join(out, "rows40.npz"), x=rng.standard_normal((40, 4)).astype(np.float32),
             labels=(np.arange(40) % 3).astype(np.int64))


if __name__ == "__main__":
    main()
