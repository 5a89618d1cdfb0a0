#!/usr/bin/env python3
"""Models with If, Loop and Scan for tst_control_flow, with inputs and the
outputs numpy computes for them (written beside each model as NAME.in.K.npy
and NAME.out.K.npy). Also malformed ones the interpreter must refuse.

usage: make_control_flow_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
rng = np.random.default_rng(17)
OPSET = [helper.make_opsetid("", 13)]


def save(name, graph, inputs=(), outputs=(), opsets=OPSET, check=True):
    model = helper.make_model(graph, opset_imports=opsets, producer_name="quantscope-tests")
    model.ir_version = 7
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, name + ".onnx"))
    for k, a in enumerate(inputs):
        np.save(os.path.join(out_dir, f"{name}.in.{k}.npy"), a)
    for k, a in enumerate(outputs):
        np.save(os.path.join(out_dir, f"{name}.out.{k}.npy"), a)


def conv2d(x, w, b, pad, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = h + 2 * pad - dilation * (kh - 1)
    ow = wd + 2 * pad - dilation * (kw - 1)
    y = np.zeros((n, o, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dilation:i * dilation + oh, j * dilation:j * dilation + ow]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return (y + b.reshape(1, -1, 1, 1)).astype(np.float32)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

# --- If choosing between two Convs that read the outer graph's x, W and B.
x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
b = rng.standard_normal(3).astype(np.float32)
then_graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "W", "B"], ["then_y"], name="then_conv", pads=[1, 1, 1, 1])],
    "then_branch", [], [vi("then_y", F, [1, 3, 5, 5])])
else_graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "W", "B"], ["else_y"], name="else_conv", pads=[2, 2, 2, 2], dilations=[2, 2])],
    "else_branch", [], [vi("else_y", F, [1, 3, 5, 5])])
graph = helper.make_graph(
    [helper.make_node("If", ["flag"], ["y"], name="pick_conv", then_branch=then_graph, else_branch=else_graph)],
    "if_conv", [vi("flag", B, []), vi("x", F, [1, 2, 5, 5])], [vi("y", F, [1, 3, 5, 5])],
    [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
for flag, pad, dilation in ((True, 1, 1), (False, 2, 2)):
    save("if_conv_" + ("then" if flag else "else"), graph, [np.array(flag), x], [conv2d(x, w, b, pad, dilation)])

# --- Loop: s += sign(i) * x * i with a scan output of every s; sign(i) comes
# from an If nested in the body (even i: +x, odd i: -x), which reads the top
# graph's x through the Loop body.
nested_if = helper.make_node(
    "If", ["even"], ["term"], name="sign_if",
    then_branch=helper.make_graph([helper.make_node("Identity", ["x"], ["pos"])], "then_branch", [],
                                  [vi("pos", F, [4])]),
    else_branch=helper.make_graph([helper.make_node("Neg", ["x"], ["neg"])], "else_branch", [],
                                  [vi("neg", F, [4])]))
body = helper.make_graph(
    [
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2, np.int64))),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Mod", ["i", "two"], ["parity"]),
        helper.make_node("Equal", ["parity", "zero"], ["even"]),
        nested_if,
        helper.make_node("Cast", ["i"], ["i_float"], to=F),
        helper.make_node("Mul", ["term", "i_float"], ["step"]),
        helper.make_node("Add", ["s_in", "step"], ["s_out"]),
        helper.make_node("Identity", ["s_out"], ["s_scan"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ],
    "body", [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [4])],
    [vi("cond_out", B, []), vi("s_out", F, [4]), vi("s_scan", F, [4])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["M", "", "s0"], ["s", "history"], name="sum_loop", body=body)],
    "loop_sum", [vi("M", I64, []), vi("x", F, [4]), vi("s0", F, [4])], [vi("s", F, [4]), vi("history", F, ["iterations", 4])])
x = rng.standard_normal(4).astype(np.float32)
s0 = rng.standard_normal(4).astype(np.float32)
s, history = s0.copy(), []
for i in range(6):
    s = (s + (x if i % 2 == 0 else -x) * np.float32(i)).astype(np.float32)
    history.append(s)
save("loop_sum", graph, [np.array(6, np.int64), x, s0], [s, np.stack(history)])
save("loop_sum_zero", graph, [np.array(0, np.int64), x, s0], [s0, np.zeros((0, 4), np.float32)])
save("loop_sum_negative", graph, [np.array(-3, np.int64), x, s0])

# --- A while loop (PyTorch's form: M = INT64_MAX, stop on the condition):
# doubles s until its sum reaches the input limit.
body = helper.make_graph(
    [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Mul", ["s_in", "k"], ["s_out"]),
        helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["cond_out"]),
    ],
    "body", [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, [3])], [vi("cond_out", B, []), vi("s_out", F, [3])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["M", "go", "s0"], ["s"], name="while_loop", body=body)],
    "loop_while", [vi("s0", F, [3]), vi("limit", F, [])], [vi("s", F, [3])],
    [numpy_helper.from_array(np.array(np.iinfo(np.int64).max, np.int64), "M"),
     numpy_helper.from_array(np.array(True), "go")])
s0 = np.array([0.5, 1.0, 0.25], np.float32)
s = s0.copy()
while True:
    s = s * np.float32(2)
    if not s.sum() < 100.0:
        break
save("loop_while", graph, [s0, np.array(100.0, np.float32)], [s])

# --- Scan over a sequence with a small recurrent cell h = tanh(x Wx + h Wh).
T, N, D, H = 5, 2, 3, 4
wx = (rng.standard_normal((D, H)) * 0.5).astype(np.float32)
wh = (rng.standard_normal((H, H)) * 0.5).astype(np.float32)


def cell_graph(outputs):
    return helper.make_graph(
        [
            helper.make_node("MatMul", ["x_t", "Wx"], ["xw"]),
            helper.make_node("MatMul", ["h_in", "Wh"], ["hw"]),
            helper.make_node("Add", ["xw", "hw"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["h_out"]),
        ] + [helper.make_node("Identity", ["h_out"], [o]) for o in outputs],
        "body", [vi("h_in", F, [N, H]), vi("x_t", F, [N, D])],
        [vi("h_out", F, [N, H])] + [vi(o, F, [N, H]) for o in outputs])


def run_cell(h, steps):
    hs = []
    for x_t in steps:
        h = np.tanh(x_t.astype(np.float64) @ wx + h @ wh).astype(np.float32)
        hs.append(h)
    return h, hs


weights = [numpy_helper.from_array(wx, "Wx"), numpy_helper.from_array(wh, "Wh")]
xs = rng.standard_normal((T, N, D)).astype(np.float32)
h0 = rng.standard_normal((N, H)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Scan", ["h0", "xs"], ["h", "hs"], name="rnn_scan", num_scan_inputs=1, body=cell_graph(["h_t"]))],
    "scan_rnn", [vi("h0", F, [N, H]), vi("xs", F, [T, N, D])], [vi("h", F, [N, H]), vi("hs", F, [T, N, H])], weights)
h, hs = run_cell(h0, list(xs))
save("scan_rnn", graph, [h0, xs], [h, np.stack(hs)])

# The same cell over a batch-first sequence [N, T, D] read backwards (input
# axis 1, direction 1); one scan output stacked on axis 1, one reversed on axis 0.
xs_bt = rng.standard_normal((N, T, D)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Scan", ["h0", "xs"], ["h", "hs_axis1", "hs_reversed"], name="rnn_scan_axes",
                      num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1, 0],
                      scan_output_directions=[0, 1], body=cell_graph(["h_a", "h_b"]))],
    "scan_rnn_axes", [vi("h0", F, [N, H]), vi("xs", F, [N, T, D])],
    [vi("h", F, [N, H]), vi("hs_axis1", F, [N, T, H]), vi("hs_reversed", F, [T, N, H])], weights)
h, hs = run_cell(h0, [xs_bt[:, t] for t in reversed(range(T))])
save("scan_rnn_axes", graph, [h0, xs_bt], [h, np.stack(hs, axis=1), np.stack(hs[::-1])])

# --- Malformed models the interpreter must refuse, naming the node.
# A branch with two outputs for a node with one.
two = helper.make_graph([helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["x"], ["b"])],
                        "then_branch", [], [vi("a", F, [2]), vi("b", F, [2])])
one = helper.make_graph([helper.make_node("Identity", ["x"], ["c"])], "else_branch", [], [vi("c", F, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["flag"], ["y"], name="bad_if", then_branch=two, else_branch=one)],
    "if_output_count", [vi("flag", B, []), vi("x", F, [2])], [vi("y", F, [2])])
save("if_output_count", graph, [np.array(True), np.ones(2, np.float32)], check=False)

# A branch using an op no runtime knows.
odd = helper.make_graph([helper.make_node("Mystery", ["x"], ["m"], domain="com.example")], "then_branch", [],
                        [vi("m", F, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["flag"], ["y"], name="custom_if", then_branch=odd, else_branch=one)],
    "if_custom_op", [vi("flag", B, []), vi("x", F, [2])], [vi("y", F, [2])])
save("if_custom_op", graph, opsets=OPSET + [helper.make_opsetid("com.example", 1)], check=False)

# A scan output whose shape grows with the iteration (Range(0, i + 1)).
body = helper.make_graph(
    [
        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.int64))),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Add", ["i", "one"], ["end"]),
        helper.make_node("Range", ["zero", "end", "one"], ["r"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ],
    "body", [vi("i", I64, []), vi("cond_in", B, [])], [vi("cond_out", B, []), vi("r", I64, ["n"])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["M", ""], ["rs"], name="growing_loop", body=body)],
    "loop_growing_scan", [vi("M", I64, [])], [vi("rs", I64, ["iterations", "n"])])
save("loop_growing_scan", graph, [np.array(3, np.int64)], check=False)
