#!/usr/bin/python3
"""Writes the models tst_constant_weights loads, into the folder given as the
first argument (generated at test time, not committed). Each NAME.onnx keeps
its weights in one of the forms exporters other than torch.onnx write;
NAME_plain.onnx is the same network with every weight a plain float32
initializer holding the values NAME.onnx computes, in the same layer order.

  cnn_opset7 / cnn_opset9 / cnn_opset11: x [N, 3, 8, 8] -> Conv 3->4 (weight and bias Constant
      nodes) -> Relu -> Flatten -> Gemm 256->10 (transB=1, Constant B and C)
      -> Softmax -> y. IR 3 for opset 7 (initializers listed as graph inputs), IR 4
      for opset 9 (paddle2onnx / older tf2onnx style).
  layouts: opset 13, x [N, 4, 6, 6] -> Conv (weight Identity(initializer)) -> Relu
      -> Conv (weight Reshape(Constant flat, Constant shape)) -> Conv 1x1 (weight
      Unsqueeze(Constant [O, I], axes Constant [2, 3])) -> Flatten -> Gemm (B =
      Cast(float16 initializer -> float), transB=1) -> MatMul (B = Transpose(Constant)) -> y.
  tied: opset 13, x [N, 5, 8] -> MatMul (B = Transpose(Constant Wq)) -> Relu
      -> MatMul (B = Identity(Transpose output)), the second layer reading the
      first layer's weight through Identity as torch.onnx writes tied weights -> y.
  no_layers: opset 13, x [N, 3, 6, 6] and w [4, 3, 3, 3] -> Conv(x, w) -> y: the
      weight is a graph input, so no layer can be found.
  sparse_constant: a MatMul whose weight is a Constant with a sparse_value (refused).
  bad_reshape: a MatMul whose weight is Reshape(Constant [6], Constant [4, 2]) (refused).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(17)


def rand(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def const(name, array):
    return helper.make_node("Constant", [], [name], name=name + "_Constant",
                            value=numpy_helper.from_array(array, name + "_value"))


def save(name, nodes, initializers, inputs, output_shape, opset, ir=None):
    graph = helper.make_graph(nodes, name, inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                              initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="make_models.py")
    if ir is not None:
        model.ir_version = ir
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def x_input(shape):
    return [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"] + shape)]


def cnn(opset, ir):
    w, b, g, c = rand(4, 3, 3, 3), rand(4, scale=0.1), rand(10, 256, scale=0.1), rand(10, scale=0.1)
    body = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["h"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["z"], name="fc", transB=1),
        helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=1),
    ]
    consts = [const("conv_w", w), const("conv_b", b), const("fc_w", g), const("fc_b", c)]
    name = "cnn_opset%d" % opset
    save(name, consts + body, [], x_input([3, 8, 8]), ["N", 10], opset, ir)
    plain = [numpy_helper.from_array(a, n) for a, n in ((w, "conv_w"), (b, "conv_b"), (g, "fc_w"), (c, "fc_b"))]
    inputs = x_input([3, 8, 8])
    if ir is not None and ir < 4:
        inputs += [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in plain]
    save(name + "_plain", body, plain, inputs, ["N", 10], opset, ir)


def layouts():
    w1 = rand(5, 4, 3, 3)
    w2 = rand(6, 5, 3, 3)
    w3 = rand(3, 6)
    g16 = rand(7, 3 * 2 * 2, scale=0.2).astype(np.float16)
    m = rand(4, 7)  # MatMul weight [K=7, N=4] is its transpose
    body = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1"),
        helper.make_node("Relu", ["a"], ["ar"], name="relu1"),
        helper.make_node("Conv", ["ar", "w2"], ["b"], name="conv2"),
        helper.make_node("Conv", ["b", "w3"], ["c"], name="conv3"),
        helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "g"], ["z"], name="fc", transB=1),
        helper.make_node("MatMul", ["z", "m"], ["y"], name="proj"),
    ]
    folded = [
        helper.make_node("Identity", ["w1_source"], ["w1"], name="w1_identity"),
        const("w2_flat", w2.reshape(-1)),
        const("w2_shape", np.array([6, 5, 3, 3], dtype=np.int64)),
        helper.make_node("Reshape", ["w2_flat", "w2_shape"], ["w2"], name="w2_reshape"),
        const("w3_2d", w3),
        const("w3_axes", np.array([2, 3], dtype=np.int64)),
        helper.make_node("Unsqueeze", ["w3_2d", "w3_axes"], ["w3"], name="w3_unsqueeze"),
        helper.make_node("Cast", ["g_half"], ["g"], name="g_cast", to=TensorProto.FLOAT),
        const("m_t", m),
        helper.make_node("Transpose", ["m_t"], ["m"], name="m_transpose", perm=[1, 0]),
    ]
    inits = [numpy_helper.from_array(w1, "w1_source"), numpy_helper.from_array(g16, "g_half")]
    save("layouts", folded + body, inits, x_input([4, 6, 6]), ["N", 4], 13)
    plain = [numpy_helper.from_array(a, n) for a, n in
             ((w1, "w1"), (w2, "w2"), (w3.reshape(3, 6, 1, 1), "w3"), (g16.astype(np.float32), "g"),
              (np.ascontiguousarray(m.T), "m"))]
    save("layouts_plain", body, plain, x_input([4, 6, 6]), ["N", 4], 13)


def tied():
    wq = rand(8, 8)
    body = [
        helper.make_node("MatMul", ["x", "wq"], ["a"], name="layer0/MatMul"),
        helper.make_node("Relu", ["a"], ["r"], name="layer0/Relu"),
        helper.make_node("MatMul", ["r", "wq_tied"], ["y"], name="layer1/MatMul"),
    ]
    folded = [
        const("wq_t", wq),
        helper.make_node("Transpose", ["wq_t"], ["wq"], name="wq_transpose", perm=[1, 0]),
        helper.make_node("Identity", ["wq"], ["wq_tied"], name="wq_identity"),
    ]
    save("tied", folded + body, [], x_input([5, 8]), ["N", 5, 8], 13)
    plain = [numpy_helper.from_array(np.ascontiguousarray(wq.T), n) for n in ("wq", "wq_tied")]
    save("tied_plain", body, plain, x_input([5, 8]), ["N", 5, 8], 13)


def no_layers():
    graph_inputs = x_input([3, 6, 6]) + [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3])]
    body = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    save("no_layers", body, [], graph_inputs, ["N", 4, 4, 4], 13)


def refused():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "v"),
                                       numpy_helper.from_array(np.array([1, 5], dtype=np.int64), "i"), [4, 2])
    nodes = [helper.make_node("Constant", [], ["w"], name="w_sparse", sparse_value=sparse),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")]
    save("sparse_constant", nodes, [], x_input([4]), ["N", 2], 13)
    nodes = [const("w_flat", rand(6)), const("w_shape", np.array([4, 2], dtype=np.int64)),
             helper.make_node("Reshape", ["w_flat", "w_shape"], ["w"], name="w_reshape"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "bad_reshape", x_input([4]),
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, os.path.join(out, "bad_reshape.onnx"))  # the checker would refuse it too


cnn(7, 3)
cnn(9, 4)
cnn(11, None)
layouts()
tied()
no_layers()
refused()
