#!/usr/bin/python3
"""An independent high-bias absorption in NumPy, written from Nagel, van Baalen,
Blankevoort and Welling 2019 ("Data-Free Quantization Through Weight
Equalization and Bias Correction", section 4.1, "Absorbing high biases"), after the cross-layer
equalization of cle_reference.py, and the two small ONNX models
tst_equalization runs it on.

For a pair y = W2 relu(W1 x + b1) + b2 whose pre-activation z = W1 x + b1 has
channel i never below c_i >= 0, relu(z_i) = relu(z_i - c_i) + c_i, so
    b1 <- b1 - c,   b2 <- b2 + W2 c
computes the same y. The paper takes c = max(0, beta - 3 gamma) from the
BatchNorm after layer 1; without BatchNorm statistics c is data-driven here:
c_i = max(0, min z_i) over the calibration inputs (every sample and position),
with z computed in float64 from the equalized float32 weights. Pairs whose
second layer pads its input (its zero padding would meet -c) or has no bias
(MatMul) do not absorb.

usage: high_bias_absorption_reference.py DIR
  Writes DIR/absorb_conv.onnx (Conv 3x3 3->8 pads 1 -> Relu -> depthwise Conv
  3x3 8 pads 0 -> Relu -> Conv 1x1 8->6 -> Relu -> Conv 3x3 6->4 pads 1) and
  DIR/absorb_linear.onnx (Gemm transB 16->12 -> Relu -> Gemm 12->10 -> Relu ->
  MatMul 10->7), each with DIR/<model>_calib.npz ("x", positive inputs; the
  same array as DIR/<model>_calib_x.npy), and
  DIR/<model>_c_<k>.npy (float64, c of absorbing pair k, model order) and
  DIR/<model>__<bias>.npy (float32, every bias after equalization and
  absorption).
"""
import importlib.util
import os
import pathlib
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent


def cle_module():
    spec = importlib.util.spec_from_file_location("cle_reference", HERE / "cle_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CLE = cle_module()


def conv2d(x, w, b, pad, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", xs[:, :, i:i + oh, j:j + ow], ws[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


def absorb(layers, pairs, w, b, pre_activations):
    """pairs: [(first, second)] absorbing pairs; pre_activations: first -> z (float64, channel axis 1 or last)."""
    b = {n: (None if v is None else v.copy()) for n, v in b.items()}
    cs = []
    for first, second in pairs:
        z = pre_activations[first]
        axis = 1 if layers[first]["kind"] == "conv" else z.ndim - 1
        minima = np.moveaxis(z, axis, 0).reshape(z.shape[axis], -1).min(axis=1)
        c = np.maximum(0.0, minima)
        cs.append(c)
        b[first] = b[first] - c
        w2 = w[second].astype(np.float64)
        if layers[second]["kind"] == "conv":
            groups = layers[second]["groups"]
            o, cg = w2.shape[0], w2.shape[1]
            per_out = c.reshape(groups, 1, cg).repeat(o // groups, axis=1).reshape(o, cg)
            b[second] = b[second] + (w2.reshape(o, cg, -1).sum(axis=2) * per_out).sum(axis=1)
        elif layers[second]["in_axis"] == 1:  # Gemm transB: [out, in]
            b[second] = b[second] + w2 @ c
        else:
            b[second] = b[second] + c @ w2
    return b, cs


def save_model(folder, name, nodes, inits, x_shape, y_name, y_shape, x):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None] + x_shape[1:])],
                              [helper.make_tensor_value_info(y_name, TensorProto.FLOAT, [None] + y_shape[1:])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    import onnx
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, name + ".onnx"))
    np.savez(os.path.join(folder, name + "_calib.npz"), x=x)
    np.save(os.path.join(folder, name + "_calib_x.npy"), x)


def save_results(folder, name, layers, b, cs):
    for k, c in enumerate(cs):
        np.save(os.path.join(folder, "%s_c_%d.npy" % (name, k)), c)
    for n, v in b.items():
        if v is not None:
            np.save(os.path.join(folder, "%s__%s.npy" % (name, layers[n]["b_name"])), v.astype(np.float32))


def conv_model(folder, rng):
    specs = [  # name, weight shape, groups, pads, bias mean
        ("conv1", (8, 3, 3, 3), 1, 1, 1.5),
        ("dw", (8, 1, 3, 3), 8, 0, 1.0),
        ("pw", (6, 8, 1, 1), 1, 0, 0.8),
        ("head", (4, 6, 3, 3), 1, 1, 0.0),
    ]
    layers, inits, nodes = {}, [], []
    value = "x"
    for name, shape, groups, pads, bias_mean in specs:
        w = (CLE.uneven(rng, shape, 0) * 0.15).astype(np.float32)
        b = (bias_mean + rng.standard_normal(shape[0]) * 0.6).astype(np.float32)
        inits += [numpy_helper.from_array(w, name + ".weight"), numpy_helper.from_array(b, name + ".bias")]
        nodes.append(helper.make_node("Conv", [value, name + ".weight", name + ".bias"], [name + "_out"],
                                      name="/" + name + "/Conv", group=groups, pads=[pads] * 4,
                                      kernel_shape=list(shape[2:])))
        layers[name] = {"w": w, "b": b, "kind": "conv", "groups": groups, "pads": pads, "out_axis": 0,
                        "w_name": name + ".weight", "b_name": name + ".bias"}
        value = name + "_out"
        if name != "head":
            nodes.append(helper.make_node("Relu", [value], [name + "_relu"], name="/" + name + "_relu/Relu"))
            value = name + "_relu"
    x = rng.uniform(0.0, 1.0, (24, 3, 8, 8)).astype(np.float32)
    save_model(folder, "absorb_conv", nodes, inits, [24, 3, 8, 8], value, [24, 4, 6, 6], x)
    w, b, _, _ = CLE.equalize(layers, [("conv1", "dw"), ("dw", "pw"), ("pw", "head")])
    w = {n: v.astype(np.float32).astype(np.float64) for n, v in w.items()}
    b = {n: v.astype(np.float32).astype(np.float64) for n, v in b.items()}
    z, h = {}, x.astype(np.float64)
    for name, _, groups, pads, _ in specs:
        z[name] = conv2d(h, w[name], b[name], pads, groups)
        h = np.maximum(z[name], 0.0)
    b, cs = absorb(layers, [("conv1", "dw"), ("dw", "pw")], w, b, z)  # pw -> head: head pads
    save_results(folder, "absorb_conv", layers, b, cs)


def linear_model(folder, rng):
    w1 = (CLE.uneven(rng, (12, 16), 0) * 0.2).astype(np.float32)  # Gemm transB: [out, in]
    b1 = (1.2 + rng.standard_normal(12) * 0.6).astype(np.float32)
    w2 = (CLE.uneven(rng, (12, 10), 1) * 0.2).astype(np.float32)  # Gemm: [in, out]
    b2 = (0.8 + rng.standard_normal(10) * 0.6).astype(np.float32)
    w3 = CLE.uneven(rng, (10, 7), 1)                               # MatMul: [in, out]
    inits = [numpy_helper.from_array(w1, "fc1.weight"), numpy_helper.from_array(b1, "fc1.bias"),
             numpy_helper.from_array(w2, "fc2.weight"), numpy_helper.from_array(b2, "fc2.bias"),
             numpy_helper.from_array(w3, "fc3.weight")]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h1"], ["r1"], name="/relu1/Relu"),
        helper.make_node("Gemm", ["r1", "fc2.weight", "fc2.bias"], ["h2"], name="/fc2/Gemm"),
        helper.make_node("Relu", ["h2"], ["r2"], name="/relu2/Relu"),
        helper.make_node("MatMul", ["r2", "fc3.weight"], ["y"], name="/fc3/MatMul"),
    ]
    layers = {
        "fc1": {"w": w1, "b": b1, "kind": "linear", "out_axis": 0, "in_axis": 1, "w_name": "fc1.weight",
                "b_name": "fc1.bias"},
        "fc2": {"w": w2, "b": b2, "kind": "linear", "out_axis": 1, "in_axis": 0, "w_name": "fc2.weight",
                "b_name": "fc2.bias"},
        "fc3": {"w": w3, "b": None, "kind": "linear", "out_axis": 1, "in_axis": 0, "w_name": "fc3.weight",
                "b_name": None},
    }
    x = rng.uniform(0.0, 1.0, (64, 16)).astype(np.float32)
    save_model(folder, "absorb_linear", nodes, inits, [64, 16], "y", [64, 7], x)
    w, b, _, _ = CLE.equalize(layers, [("fc1", "fc2"), ("fc2", "fc3")])
    w = {n: v.astype(np.float32).astype(np.float64) for n, v in w.items()}
    b = {n: (None if v is None else v.astype(np.float32).astype(np.float64)) for n, v in b.items()}
    z1 = x.astype(np.float64) @ w["fc1"].T + b["fc1"]
    z2 = np.maximum(z1, 0.0) @ w["fc2"] + b["fc2"]
    b, cs = absorb(layers, [("fc1", "fc2")], w, b, {"fc1": z1, "fc2": z2})  # fc2 -> fc3: MatMul has no bias
    save_results(folder, "absorb_linear", layers, b, cs)


def main():
    folder = sys.argv[1]
    rng = np.random.default_rng(412)
    conv_model(folder, rng)
    linear_model(folder, rng)


if __name__ == "__main__":
    main()
