#!/usr/bin/env python3
"""Writes the graph view's fixtures (tests/CMakeLists.txt runs this once per build):

  blocks_<N>.onnx: a stem MatMul, N residual blocks of five nodes named as the
  PyTorch exporter names a module list (/blocks/blocks.i/fc1/MatMul, .../act1/Relu,
  .../fc2/MatMul, .../Add, .../act2/Relu), a head MatMul: 5 N + 2 nodes, 2 N + 2 layers.

Usage: make_block_models.py OUT_DIR  (writes blocks_6.onnx and blocks_400.onnx, 2002 nodes)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 8


def block_model(blocks: int, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def weight(name):
        inits.append(numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) * 0.3, name))
        return name

    nodes.append(helper.make_node("MatMul", ["x", weight("stem.weight")], ["h0"], name="/stem/MatMul"))
    x = "h0"
    for i in range(blocks):
        p = f"/blocks/blocks.{i}"
        nodes += [
            helper.make_node("MatMul", [x, weight(f"blocks.{i}.fc1.weight")], [f"b{i}_fc1"], name=f"{p}/fc1/MatMul"),
            helper.make_node("Relu", [f"b{i}_fc1"], [f"b{i}_act1"], name=f"{p}/act1/Relu"),
            helper.make_node("MatMul", [f"b{i}_act1", weight(f"blocks.{i}.fc2.weight")], [f"b{i}_fc2"],
                             name=f"{p}/fc2/MatMul"),
            helper.make_node("Add", [f"b{i}_fc2", x], [f"b{i}_sum"], name=f"{p}/Add"),
            helper.make_node("Relu", [f"b{i}_sum"], [f"b{i}_out"], name=f"{p}/act2/Relu"),
        ]
        x = f"b{i}_out"
    nodes.append(helper.make_node("MatMul", [x, weight("head.weight")], ["y"], name="/head/MatMul"))
    graph = helper.make_graph(nodes, f"blocks_{blocks}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_block_models")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for blocks in (6, 400):
        path = os.path.join(out, f"blocks_{blocks}.onnx")
        tmp = path + ".tmp"
        onnx.save(block_model(blocks, seed=blocks), tmp)
        os.replace(tmp, path)


if __name__ == "__main__":
    main()
