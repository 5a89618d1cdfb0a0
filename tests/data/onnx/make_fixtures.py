#!/usr/bin/python3
"""Writes the ONNX fixtures of tst_onnx into the folder given as argument.

Run by the test at start-up (python3-onnx and python3-numpy from Debian), so
the fixtures always match this script. Each model is small and built by hand
with onnx.helper; external-data cases write their .bin files next to them.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def weight(name, shape, dtype=np.float32):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


def value(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# --- every quantizable layout, unnamed nodes, a name collision -------------
inits = [
    weight("features.0.weight", [6, 2, 3, 3]),      # Conv, group 2
    weight("up.weight", [4, 3, 2, 2]),              # ConvTranspose [I, O/g, k, k], group 2
    weight("fc_nk", [8, 16]),                       # Gemm transB=1
    weight("fc_kn", [16, 8]),                       # Gemm transB=0
    weight("block.proj.weight", [16, 8]),           # MatMul, unnamed node: path from the weight name
    weight("onnx::MatMul_9", [16, 8]),              # MatMul, unnamed, exporter weight name: MatMul_0
    weight("left", [3, 2]),                         # constant LEFT operand: not a layer
    weight("heads", [4, 16, 8]),                    # batched constant right operand
    weight("emb.weight", [10, 16]),                 # Gather table
    weight("half", [16, 8], np.float16),            # float16 weight
]
nodes = [
    helper.make_node("Conv", ["img", "features.0.weight"], ["c"], name="/features/features.0/Conv",
                     group=2, pads=[1, 1, 1, 1]),
    helper.make_node("ConvTranspose", ["img", "up.weight"], ["u"], name="/up/ConvTranspose", group=2),
    helper.make_node("Gemm", ["vec", "fc_nk"], ["g1"], name="/fc/Gemm", transB=1),
    helper.make_node("Gemm", ["vec", "fc_kn"], ["g2"], name="/fc/Gemm_1"),
    helper.make_node("MatMul", ["vec", "block.proj.weight"], ["m1"]),
    helper.make_node("MatMul", ["vec", "onnx::MatMul_9"], ["m2"]),
    helper.make_node("MatMul", ["left", "small"], ["m3"], name="/left/MatMul"),
    helper.make_node("MatMul", ["seq", "heads"], ["m4"], name="/attn/heads/MatMul"),
    helper.make_node("Gather", ["emb.weight", "ids"], ["e"], name="/emb/Gather"),
    helper.make_node("Cast", ["vec"], ["vec16"], to=TensorProto.FLOAT16),
    helper.make_node("MatMul", ["vec16", "half"], ["m5"], name="/half/MatMul"),
]
graph = helper.make_graph(
    nodes, "layers",
    [value("img", TensorProto.FLOAT, ["batch", 4, 8, 8]), value("vec", TensorProto.FLOAT, [2, 16]),
     value("small", TensorProto.FLOAT, [2, 16]), value("seq", TensorProto.FLOAT, [4, "seq", 16]),
     value("ids", TensorProto.INT64, [5])],
    [value("c", TensorProto.FLOAT, ["batch", 6, 8, 8]), value("u", TensorProto.FLOAT, ["batch", 6, 9, 9])]
    + [value(n, TensorProto.FLOAT, [2, 8]) for n in ["g1", "g2", "m1", "m2"]]
    + [value("m3", TensorProto.FLOAT, [3, 16]), value("m4", TensorProto.FLOAT, [4, "seq", 8]),
       value("e", TensorProto.FLOAT, [5, 16]), value("m5", TensorProto.FLOAT16, [2, 8])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="quantscope-fixtures",
                          producer_version="1")
helper.set_model_props(model, {"author": "tst_onnx"})
save(model, "layers.onnx")


# --- external data ----------------------------------------------------------
def external(tensor, location, offset=None, length=None):
    tensor.data_location = TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    for key, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            entry = tensor.external_data.add()
            entry.key = key
            entry.value = str(v)
    return tensor


def external_model(tensors, name):
    nodes, outputs = [], []
    for i, t in enumerate(tensors):
        shape = list(t.dims)
        nodes.append(helper.make_node("MatMul", ["x%d" % i, t.name], ["y%d" % i], name="/lin%d/MatMul" % i))
        outputs.append(value("y%d" % i, TensorProto.FLOAT, [1, shape[1]]))
    inputs = [value("x%d" % i, TensorProto.FLOAT, [1, t.dims[0]]) for i, t in enumerate(tensors)]
    graph = helper.make_graph(nodes, name, inputs, outputs, tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


a = rng.standard_normal([4, 8]).astype(np.float32)
b = rng.standard_normal([8, 2]).astype(np.float32)
pad = b"\x01\x02\x03"  # puts b at an odd offset: mapped tensors there are copied
with open(os.path.join(out, "weights.bin"), "wb") as f:
    f.write(a.tobytes() + pad + b.tobytes())
np.save(os.path.join(out, "external_expected_a.npy"), a)
np.save(os.path.join(out, "external_expected_b.npy"), b)
ta = external(numpy_helper.from_array(a, "a"), "weights.bin", 0, a.nbytes)
tb = external(numpy_helper.from_array(b, "b"), "weights.bin", a.nbytes + len(pad))
onnx.save(external_model([ta, tb], "external"), os.path.join(out, "external.onnx"))
onnx.checker.check_model(os.path.join(out, "external.onnx"))  # by path: the checker finds weights.bin

bad_cases = {
    "external_escape.onnx": ("../outside.bin", 0, None),
    "external_absolute.onnx": ("/etc/hostname", 0, None),
    "external_past_end.onnx": ("weights.bin", 1000, None),
    "external_length_mismatch.onnx": ("weights.bin", 0, 12),
    "external_missing.onnx": ("nothing_here.bin", 0, None),
    "external_bad_offset.onnx": ("weights.bin", "-4", None),
}
for file, (location, offset, length) in bad_cases.items():
    t = external(numpy_helper.from_array(a, "a"), location, offset, length)
    # Written without the checker: these files are wrong on purpose.
    onnx.save(external_model([t], "bad"), os.path.join(out, file))
os.makedirs(os.path.join(out, "sub"), exist_ok=True)
os.symlink("../weights.bin", os.path.join(out, "sub", "link.bin")) if not os.path.lexists(
    os.path.join(out, "sub", "link.bin")) else None
with open(os.path.join(out, "..", "outside.bin"), "wb") as f:
    f.write(a.tobytes())
t = external(numpy_helper.from_array(a, "a"), "link.bin", 0, None)
onnx.save(external_model([t], "link"), os.path.join(out, "sub", "symlink_escape.onnx"))

# --- unknown ops and custom domains -----------------------------------------
graph = helper.make_graph(
    [helper.make_node("FancyNewOp", ["x"], ["y"], name="/fancy/FancyNewOp", alpha=0.5),
     helper.make_node("Foo", ["y"], ["z"], name="/foo/Foo", domain="com.example"),
     helper.make_node("MatMul", ["z", "w"], ["out"], name="/head/MatMul")],
    "unknown", [value("x", TensorProto.FLOAT, [1, 4])], [value("out", TensorProto.FLOAT, [1, 3])],
    [weight("w", [4, 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
onnx.save(model, os.path.join(out, "unknown_op.onnx"))

# --- an opset newer than the checker knows (ReduceMean takes axes as input from 18)
graph = helper.make_graph(
    [helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="/pool/ReduceMean")],
    "opset18", [value("x", TensorProto.FLOAT, [2, 3])], [value("y", TensorProto.FLOAT, [2, 1])],
    [numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 8
onnx.save(model, os.path.join(out, "opset18.onnx"))

# --- an opset older than the supported range
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "old",
                          [value("x", TensorProto.FLOAT, [2])], [value("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
model.ir_version = 3
onnx.save(model, os.path.join(out, "opset6.onnx"))

# --- a string initializer
graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"], name="/id/Identity")], "strings", [],
                          [value("y", TensorProto.STRING, [2])],
                          [helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"b"])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "string.onnx"))

# --- a real checker error: Conv without its required weight input
graph = helper.make_graph([helper.make_node("Conv", ["x"], ["y"], name="/bad/Conv")], "badconv",
                          [value("x", TensorProto.FLOAT, [1, 1, 4, 4])], [value("y", TensorProto.FLOAT, [1, 1, 4, 4])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "bad_conv.onnx"))

# --- shape inference fails (MatMul of [2,3] by [4,5]) but the model loads
graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm/MatMul")], "badshape",
                          [value("x", TensorProto.FLOAT, [2, 3])], [value("y", TensorProto.FLOAT, [2, 5])],
                          [weight("w", [4, 5])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(out, "bad_shapes.onnx"))

# --- typed fields instead of raw_data (float_data, int32_data for float16 and int8, int64_data, double_data)
typed = [
    helper.make_tensor("f32", TensorProto.FLOAT, [2, 2], [1.0, -2.0, 3.5, 0.25]),
    helper.make_tensor("f16", TensorProto.FLOAT16, [3], [1.0, -0.5, 65504.0]),
    helper.make_tensor("i8", TensorProto.INT8, [3], [-128, 0, 127]),
    helper.make_tensor("i64", TensorProto.INT64, [2], [-(2 ** 40), 7]),
    helper.make_tensor("f64", TensorProto.DOUBLE, [2], [0.1, -1e300]),
    helper.make_tensor("bf16", TensorProto.BFLOAT16, [1], [1.0]),
]
graph = helper.make_graph([helper.make_node("Identity", [t.name], [t.name + "_out"]) for t in typed], "typed", [],
                          [value(t.name + "_out", t.data_type, list(t.dims)) for t in typed], typed)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), "typed.onnx")
print("fixtures written to", out)
