#!/usr/bin/python3
"""An independent SmoothQuant in NumPy, written from Xiao, Lin, Seznec, Wu,
Demouth and Han 2023 ("SmoothQuant: Accurate and Efficient Post-Training
Quantization for Large Language Models", section 4), and the two small ONNX
models tst_smoothquant runs it on.

For a linear layer Y = X W (W: [K, N], X's last axis the K input channels),
with max|X_j| over every row of the calibration data (float model) and
max|W_j| over row j of W -- over the rows of every layer that reads the same
X, which then share one s (q, k and v after one LayerNorm, as the paper does):
    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)     (s_j = 1 when either is 0)
    W[j, :] *= s_j          for every layer reading X
and 1/s is folded into what produces X: a LayerNormalization's scale and bias,
or a linear producer's output channels (its weight's columns and its bias).
Activations are processed in model order of their first reader, each from the
weights as the earlier ones left them. An RMSNorm's weight (a Mul by a
per-channel constant) takes 1/s like a LayerNorm's scale; a product a * b of
two computed operands takes it in the linear layer producing one of them
((a * b) / s = a * (b / s)). A layer whose X is produced by an op
that is not per-channel linear (Relu here) is not smoothed. Everything is
float64; the smoothed tensors are rounded to float32 at the end.

usage: smoothquant_reference.py DIR
  For each model M in (ln_qkv, linear_chain, rms_mlp) writes DIR/M.onnx, DIR/M_calib.npz
  (array x), and for each alpha A in (0.5, 0.75): DIR/M_a<A*100>_scales_<k>.npy
  (float64, activation k in model order) and DIR/M_a<A*100>__<initializer>.npy
  (float32, every smoothed tensor).

  ln_qkv: x [N, 6, 16] -> LayerNormalization (scale with outlier channels, bias)
    -> MatMul q, k, v (16->8 each); v -> Relu -> MatMul p (8->5), which is
    skipped (Relu cannot take 1/s). Outputs q, k, p.
  linear_chain: x [N, 16] -> Gemm transB fc1 (16->12, bias) -> Gemm fc2
    (12->10) -> MatMul fc3 (10->6) -> Add b3 -> MatMul fc4 (6->5). fc1 is
    skipped (x is a graph input); fc2 folds into fc1, fc3 into fc2, fc4 into
    fc3 + b3.
  rms_mlp: x [N, 5, 12] -> RMSNorm written out as ops (Mul, ReduceMean, Add eps,
    Sqrt, Reciprocal, Mul, then Mul by its weight with outlier channels, as the
    Llama graph of a checkpoint folder does) -> MatMul gate and up (12->9, one
    shared s, folded into the RMSNorm weight) -> SiLU(gate) * up -> MatMul down
    (9->7; its s folded into up's columns through the product). Nothing is skipped.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALPHAS = (0.5, 0.75)


def layer_norm(x, scale, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def scales_of(x_max, w_max, alpha):
    s = np.ones_like(x_max)
    ok = (x_max > 0) & (w_max > 0)
    s[ok] = x_max[ok] ** alpha / w_max[ok] ** (1.0 - alpha)
    return s


def channel_max(x):
    return np.abs(x.reshape(-1, x.shape[-1])).max(axis=0)


def ln_qkv(rng):
    k = 16
    t = {
        "ln_scale": (rng.uniform(0.5, 1.5, k) * np.where(np.arange(k) % 5 == 2, 25.0, 1.0)).astype(np.float32),
        "ln_bias": (0.1 * rng.standard_normal(k)).astype(np.float32),
        "wq": (0.3 * rng.standard_normal((k, 8))).astype(np.float32),
        "wk": (0.3 * rng.standard_normal((k, 8))).astype(np.float32),
        "wv": (0.3 * rng.standard_normal((k, 8))).astype(np.float32),
        "wp": (0.3 * rng.standard_normal((8, 5))).astype(np.float32),
    }
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["h"], name="/ln/LayerNormalization",
                         axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["h", "wq"], ["q"], name="/q/MatMul"),
        helper.make_node("MatMul", ["h", "wk"], ["k"], name="/k/MatMul"),
        helper.make_node("MatMul", ["h", "wv"], ["v"], name="/v/MatMul"),
        helper.make_node("Relu", ["v"], ["vr"], name="/relu/Relu"),
        helper.make_node("MatMul", ["vr", "wp"], ["p"], name="/p/MatMul"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6, k])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 6, d]) for n, d in (("q", 8), ("k", 8), ("p", 5))]
    x = (rng.standard_normal((12, 6, k)) + rng.uniform(-1, 1, k)).astype(np.float32)

    def smooth(alpha):
        w = {n: v.astype(np.float64) for n, v in t.items()}
        h = layer_norm(x.astype(np.float64), w["ln_scale"], w["ln_bias"])
        x_max = channel_max(h)
        w_max = np.max([np.abs(w[n]).max(axis=1) for n in ("wq", "wk", "wv")], axis=0)
        s = scales_of(x_max, w_max, alpha)
        for n in ("wq", "wk", "wv"):
            w[n] = w[n] * s[:, None]
        w["ln_scale"] = w["ln_scale"] / s
        w["ln_bias"] = w["ln_bias"] / s
        changed = ("ln_scale", "ln_bias", "wq", "wk", "wv")
        return [s], {n: w[n].astype(np.float32) for n in changed}

    return nodes, inputs, outputs, t, x, smooth


def linear_chain(rng):
    spread = lambda n: np.exp(rng.uniform(-2.5, 2.5, n))
    t = {
        "w1": (0.4 * rng.standard_normal((12, 16)) * spread(12)[:, None]).astype(np.float32),  # transB: [N, K]
        "b1": (0.2 * rng.standard_normal(12)).astype(np.float32),
        "w2": (0.4 * rng.standard_normal((12, 10)) * spread(10)[None, :]).astype(np.float32),
        "w3": (0.4 * rng.standard_normal((10, 6)) * spread(6)[None, :]).astype(np.float32),
        "b3": (0.2 * rng.standard_normal(6)).astype(np.float32),
        "w4": (0.4 * rng.standard_normal((6, 5))).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["y1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Gemm", ["y1", "w2"], ["y2"], name="/fc2/Gemm"),
        helper.make_node("MatMul", ["y2", "w3"], ["y3"], name="/fc3/MatMul"),
        helper.make_node("Add", ["y3", "b3"], ["y4"], name="/fc3/Add"),
        helper.make_node("MatMul", ["y4", "w4"], ["out"], name="/fc4/MatMul"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 5])]
    x = (rng.standard_normal((40, 16)) * spread(16)).astype(np.float32)

    def smooth(alpha):
        w = {n: v.astype(np.float64) for n, v in t.items()}
        xs = x.astype(np.float64)
        # The float model's activations (smoothing keeps the function, so these hold throughout).
        y1 = xs @ w["w1"].T + w["b1"]
        y2 = y1 @ w["w2"]
        y4 = y2 @ w["w3"] + w["b3"]
        scales = []
        # fc2 reads y1 (made by fc1: w1's rows are its output channels, and b1).
        s = scales_of(channel_max(y1), np.abs(w["w2"]).max(axis=1), alpha)
        w["w2"] *= s[:, None]
        w["w1"] /= s[:, None]
        w["b1"] /= s
        scales.append(s)
        # fc3 reads y2 (made by fc2: w2's columns).
        s = scales_of(channel_max(y2), np.abs(w["w3"]).max(axis=1), alpha)
        w["w3"] *= s[:, None]
        w["w2"] /= s[None, :]
        scales.append(s)
        # fc4 reads y4 (made by fc3 + b3: w3's columns and b3).
        s = scales_of(channel_max(y4), np.abs(w["w4"]).max(axis=1), alpha)
        w["w4"] *= s[:, None]
        w["w3"] /= s[None, :]
        w["b3"] /= s
        scales.append(s)
        changed = ("w1", "b1", "w2", "w3", "b3", "w4")
        return scales, {n: w[n].astype(np.float32) for n in changed}

    return nodes, inputs, outputs, t, x, smooth


def rms_mlp(rng):
    k = 12
    t = {
        "eps": np.array([1e-6], dtype=np.float32),
        "rms_weight": (rng.uniform(0.5, 1.5, k) * np.where(np.arange(k) % 4 == 1, 30.0, 1.0)).astype(np.float32),
        "w_gate": (0.3 * rng.standard_normal((k, 9))).astype(np.float32),
        "w_up": (0.3 * rng.standard_normal((k, 9))).astype(np.float32),
        "w_down": (0.3 * rng.standard_normal((9, 7))).astype(np.float32),
    }
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"], name="/norm/square"),
        helper.make_node("ReduceMean", ["sq"], ["ms"], name="/norm/mean_square", axes=[-1], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"], name="/norm/plus_eps"),
        helper.make_node("Sqrt", ["mse"], ["root"], name="/norm/root"),
        helper.make_node("Reciprocal", ["root"], ["inv"], name="/norm/inverse_root"),
        helper.make_node("Mul", ["x", "inv"], ["normed"], name="/norm/normalized"),
        helper.make_node("Mul", ["rms_weight", "normed"], ["h"], name="/norm/scaled"),
        helper.make_node("MatMul", ["h", "w_gate"], ["gate"], name="/gate/MatMul"),
        helper.make_node("MatMul", ["h", "w_up"], ["up"], name="/up/MatMul"),
        helper.make_node("Sigmoid", ["gate"], ["gate_sigmoid"], name="/mlp/Sigmoid"),
        helper.make_node("Mul", ["gate", "gate_sigmoid"], ["silu"], name="/mlp/silu"),
        helper.make_node("Mul", ["silu", "up"], ["gated"], name="/mlp/gated"),
        helper.make_node("MatMul", ["gated", "w_down"], ["out"], name="/down/MatMul"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5, k])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 5, 7])]
    x = (rng.standard_normal((10, 5, k)) + rng.uniform(-1, 1, k)).astype(np.float32)

    def smooth(alpha):
        w = {n: v.astype(np.float64) for n, v in t.items()}
        xs = x.astype(np.float64)
        h = xs / np.sqrt((xs * xs).mean(axis=-1, keepdims=True) + w["eps"][0]) * w["rms_weight"]
        w_max = np.max([np.abs(w[n]).max(axis=1) for n in ("w_gate", "w_up")], axis=0)
        s = scales_of(channel_max(h), w_max, alpha)
        for n in ("w_gate", "w_up"):
            w[n] = w[n] * s[:, None]
        w["rms_weight"] = w["rms_weight"] / s
        # down reads SiLU(gate) * up (of the float model): 1/s goes into up's columns, as earlier
        # groups left them.
        gate, up = h @ t["w_gate"].astype(np.float64), h @ t["w_up"].astype(np.float64)
        gated = gate / (1.0 + np.exp(-gate)) * up
        s_down = scales_of(channel_max(gated), np.abs(w["w_down"]).max(axis=1), alpha)
        w["w_down"] = w["w_down"] * s_down[:, None]
        w["w_up"] = w["w_up"] / s_down[None, :]
        changed = ("rms_weight", "w_gate", "w_up", "w_down")
        return [s, s_down], {n: w[n].astype(np.float32) for n in changed}

    return nodes, inputs, outputs, t, x, smooth


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20)
    for name, build in (("ln_qkv", ln_qkv), ("linear_chain", linear_chain), ("rms_mlp", rms_mlp)):
        nodes, inputs, outputs, tensors, x, smooth = build(rng)
        graph = helper.make_graph(nodes, name, inputs, outputs,
                                  [numpy_helper.from_array(v, n) for n, v in tensors.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name + ".onnx"))
        np.savez(os.path.join(out, name + "_calib.npz"), x=x)
        for alpha in ALPHAS:
            prefix = os.path.join(out, "%s_a%d" % (name, round(alpha * 100)))
            scales, smoothed = smooth(alpha)
            for i, s in enumerate(scales):
                np.save("%s_scales_%d.npy" % (prefix, i), s)
            for n, v in smoothed.items():
                np.save("%s__%s.npy" % (prefix, n), v)


if __name__ == "__main__":
    main()
