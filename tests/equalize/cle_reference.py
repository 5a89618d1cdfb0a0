#!/usr/bin/python3
"""An independent cross-layer equalization in NumPy, written from Nagel, van
Baalen, Blankevoort and Welling 2019 ("Data-Free Quantization Through Weight
Equalization and Bias Correction", section 4.1), and the two small ONNX models
tst_equalization runs it on.

For consecutive layers y = W2 f(W1 x + b1) with f positively homogeneous
(ReLU, or nothing between), with r1_i the range of W1's output channel i and
r2_i the range of W2's input channel i (here max |w| over the channel):
    s_i = (1 / r2_i) * sqrt(r1_i * r2_i)
    W1[i, ...] /= s_i,  b1[i] /= s_i,  W2[:, i, ...] *= s_i
so that both ranges become sqrt(r1_i * r2_i). A channel with a zero range keeps
s_i = 1. Chains of more than two layers are swept pair after pair, first pair
first, until every scale of a sweep is within 1e-8 of 1 (the paper iterates
until convergence). Everything is float64; the equalized tensors are rounded
to float32 at the end. A Conv's input channel c of a grouped weight
[O, I/g, kh, kw] is the weight's [o, c mod (I/g)] for the outputs o of group
c div (I/g). A pair through Clip (ReLU6) is not equalized: Clip at 6 does not
commute with the scaling.

usage: cle_reference.py DIR
  Writes DIR/conv_chain.onnx (Conv 3->8 -> Relu -> depthwise Conv 8 -> Relu ->
  Conv 1x1 8->6 -> Clip(0, 6) -> Conv 1x1 6->4) and DIR/linear_chain.onnx (Gemm
  transB 16->12 -> Relu -> Gemm 12->10 -> MatMul 10->7), each with its input
  DIR/<model>_x.npy, and for each model DIR/<model>_scales_<k>.npy (float64,
  the product of the sweeps' scales of pair k, model order),
  DIR/<model>_sweeps.npy (int64 [1]) and DIR/<model>__<initializer>.npy
  (float32, every equalized weight and bias).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOLERANCE = 1e-8
MAX_SWEEPS = 1000


def uneven(rng, shape, axis):
    """Random weights whose channels along `axis` differ in range by up to e^4."""
    w = rng.standard_normal(shape)
    spread = np.exp(rng.uniform(-2.0, 2.0, shape[axis]))
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return (w * spread.reshape(view)).astype(np.float32)


def output_ranges(layer, w):
    axis = layer["out_axis"]
    moved = np.moveaxis(np.abs(w), axis, 0)
    return moved.reshape(moved.shape[0], -1).max(axis=1)


def input_ranges(layer, w):
    if layer["kind"] == "conv":
        groups = layer["groups"]
        o, i_per_group = w.shape[0], w.shape[1]
        per_group = np.abs(w).reshape(groups, o // groups, i_per_group, -1)
        return per_group.max(axis=(1, 3)).reshape(groups * i_per_group)
    axis = layer["in_axis"]
    moved = np.moveaxis(np.abs(w), axis, 0)
    return moved.reshape(moved.shape[0], -1).max(axis=1)


def scale_output(layer, w, s):
    view = [1] * w.ndim
    view[layer["out_axis"]] = len(s)
    return w / s.reshape(view)


def scale_input(layer, w, s):
    if layer["kind"] == "conv":
        groups = layer["groups"]
        o, i_per_group = w.shape[0], w.shape[1]
        per_group = s.reshape(groups, 1, i_per_group)
        factor = np.repeat(per_group, o // groups, axis=1).reshape(o, i_per_group)
        return w * factor.reshape(o, i_per_group, *([1] * (w.ndim - 2)))
    view = [1] * w.ndim
    view[layer["in_axis"]] = len(s)
    return w * s.reshape(view)


def equalize(layers, pairs):
    """layers: name -> dict(w, b (or None), kind, axes); pairs: [(first, second)]."""
    w = {n: l["w"].astype(np.float64) for n, l in layers.items()}
    b = {n: (None if l["b"] is None else l["b"].astype(np.float64)) for n, l in layers.items()}
    total = [np.ones(layers[p[0]]["w"].shape[layers[p[0]]["out_axis"]]) for p in pairs]
    sweeps = 0
    while sweeps < MAX_SWEEPS:
        sweeps += 1
        moved = 0.0
        for k, (first, second) in enumerate(pairs):
            r1 = output_ranges(layers[first], w[first])
            r2 = input_ranges(layers[second], w[second])
            s = np.where((r1 > 0) & (r2 > 0), np.sqrt(r1 / np.where(r2 > 0, r2, 1.0)), 1.0)
            w[first] = scale_output(layers[first], w[first], s)
            if b[first] is not None:
                b[first] = b[first] / s
            w[second] = scale_input(layers[second], w[second], s)
            total[k] = total[k] * s
            moved = max(moved, float(np.abs(s - 1.0).max()))
        if moved < TOLERANCE:
            break
    return w, b, total, sweeps


def save(folder, model_name, graph, layers, pairs, x):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, model_name + ".onnx"))
    np.save(os.path.join(folder, model_name + "_x.npy"), x)
    w, b, total, sweeps = equalize(layers, pairs)
    for k, s in enumerate(total):
        np.save(os.path.join(folder, "%s_scales_%d.npy" % (model_name, k)), s)
    np.save(os.path.join(folder, model_name + "_sweeps.npy"), np.array([sweeps], np.int64))
    touched = {p[0] for p in pairs} | {p[1] for p in pairs}
    for n in touched:
        np.save(os.path.join(folder, "%s__%s.npy" % (model_name, layers[n]["w_name"])), w[n].astype(np.float32))
    for first, _ in pairs:
        if b[first] is not None:
            np.save(os.path.join(folder, "%s__%s.npy" % (model_name, layers[first]["b_name"])),
                    b[first].astype(np.float32))


def conv_chain(folder, rng):
    specs = [  # name, weight shape, groups, pads
        ("conv1", (8, 3, 3, 3), 1, 1),
        ("dw", (8, 1, 3, 3), 8, 1),
        ("pw", (6, 8, 1, 1), 1, 0),
        ("head", (4, 6, 1, 1), 1, 0),
    ]
    layers, inits, nodes = {}, [], []
    value = "x"
    for k, (name, shape, groups, pads) in enumerate(specs):
        w = uneven(rng, shape, 0)
        b = (rng.standard_normal(shape[0]) * 0.5).astype(np.float32)
        inits += [numpy_helper.from_array(w, name + ".weight"), numpy_helper.from_array(b, name + ".bias")]
        out = name + "_out"
        nodes.append(helper.make_node("Conv", [value, name + ".weight", name + ".bias"], [out], name="/" + name + "/Conv",
                                      group=groups, pads=[pads] * 4, kernel_shape=list(shape[2:])))
        layers[name] = {"w": w, "b": b, "kind": "conv", "groups": groups, "out_axis": 0, "w_name": name + ".weight",
                        "b_name": name + ".bias"}
        value = out
        if name in ("conv1", "dw"):
            nodes.append(helper.make_node("Relu", [value], [name + "_relu"], name="/" + name + "_relu/Relu"))
            value = name + "_relu"
        elif name == "pw":
            inits += [numpy_helper.from_array(np.array(0.0, np.float32), "clip_min"),
                      numpy_helper.from_array(np.array(6.0, np.float32), "clip_max")]
            nodes.append(helper.make_node("Clip", [value, "clip_min", "clip_max"], ["pw_clip"], name="/pw_clip/Clip"))
            value = "pw_clip"
    graph = helper.make_graph(nodes, "conv_chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info(value, TensorProto.FLOAT, [2, 4, 8, 8])], inits)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    save(folder, "conv_chain", graph, layers, [("conv1", "dw"), ("dw", "pw")], x)


def linear_chain(folder, rng):
    w1 = uneven(rng, (12, 16), 0)  # Gemm transB: [out, in]
    b1 = (rng.standard_normal(12) * 0.5).astype(np.float32)
    w2 = uneven(rng, (12, 10), 1)  # Gemm: [in, out]
    b2 = (rng.standard_normal(10) * 0.5).astype(np.float32)
    w3 = uneven(rng, (10, 7), 1)   # MatMul: [in, out]
    inits = [numpy_helper.from_array(w1, "fc1.weight"), numpy_helper.from_array(b1, "fc1.bias"),
             numpy_helper.from_array(w2, "fc2.weight"), numpy_helper.from_array(b2, "fc2.bias"),
             numpy_helper.from_array(w3, "fc3.weight")]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h1"], ["r1"], name="/relu1/Relu"),
        helper.make_node("Gemm", ["r1", "fc2.weight", "fc2.bias"], ["h2"], name="/fc2/Gemm"),
        helper.make_node("MatMul", ["h2", "fc3.weight"], ["y"], name="/fc3/MatMul"),
    ]
    graph = helper.make_graph(nodes, "linear_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 7])], inits)
    layers = {
        "fc1": {"w": w1, "b": b1, "kind": "linear", "out_axis": 0, "in_axis": 1, "w_name": "fc1.weight",
                "b_name": "fc1.bias"},
        "fc2": {"w": w2, "b": b2, "kind": "linear", "out_axis": 1, "in_axis": 0, "w_name": "fc2.weight",
                "b_name": "fc2.bias"},
        "fc3": {"w": w3, "b": None, "kind": "linear", "out_axis": 1, "in_axis": 0, "w_name": "fc3.weight",
                "b_name": None},
    }
    x = rng.standard_normal((4, 16)).astype(np.float32)
    save(folder, "linear_chain", graph, layers, [("fc1", "fc2"), ("fc2", "fc3")], x)


def main():
    folder = sys.argv[1]
    rng = np.random.default_rng(20)
    conv_chain(folder, rng)
    linear_chain(folder, rng)


if __name__ == "__main__":
    main()
