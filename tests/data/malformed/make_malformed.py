"""Writes the malformed-file corpus: every file is wrong in a different way,
across the formats Quantscope reads (onnx, safetensors, npy, npz, HDF5/Keras,
rule JSON), and manifest.json lists for each file the loader that must refuse
it and the phrases its error must contain (besides the file's own path, which
every message must name). tests/tst_malformed_corpus.cpp runs them.

These complement, not repeat, tests/data/archives/hostile/ (zip and
safetensors structure; the test runs those manifests too) and the in-code
cases of tst_npy, tst_onnx, tst_hdf5 and tst_rules: here the files go through
the file-level entry points and the loadModel() dispatch.

usage: /usr/bin/python3 make_malformed.py [OUTDIR]   (default: this folder)
"""
import json
import os
import struct
import sys

import h5py
import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "archives"))
from archive_formats import Member, safetensors_bytes, zip_bytes  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
MANIFEST = []


def emit(name, loader, data, expect):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    MANIFEST.append({"file": name, "loader": loader, "expect": expect})


# ---- ONNX -------------------------------------------------------------------

def tiny_model(weight=None, nodes=None, extra_inits=(), opset=13):
    """x[1,4] @ w[4,2] -> y; `weight` replaces the initializer."""
    w = weight or helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.arange(8, dtype=np.float32).tolist())
    nodes = nodes or [helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
                              [w, *extra_inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def onnx_bytes(model):
    return model.SerializeToString()


def raw_tensor(name, dtype, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def make_onnx():
    good = onnx_bytes(tiny_model())
    emit("onnx_empty.onnx", "onnx", b"", ["ir_version"])
    emit("onnx_truncated.onnx", "onnx", good[: len(good) // 2], ["protobuf"])
    emit("onnx_garbage.onnx", "onnx", b"\x08" + bytes(range(255, 0, -1)) * 4, ["protobuf"])
    emit("onnx_raw_data_short.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", TensorProto.FLOAT, [4, 2], b"\0" * 10))), ["initializer 'w'", "raw_data holds 10 bytes"])
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([4, 2])
    w.float_data.extend([1.0, 2.0, 3.0])
    emit("onnx_float_data_count.onnx", "onnx", onnx_bytes(tiny_model(w)), ["initializer 'w'", "float_data holds 3 values"])
    emit("onnx_negative_dim.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", TensorProto.FLOAT, [-4, 2], b"\0" * 32))), ["initializer 'w'", "dimension -4"])
    emit("onnx_dims_overflow.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", TensorProto.FLOAT, [1 << 40, 1 << 40], b"\0" * 32))),
         ["initializer 'w'", "overflows"])
    emit("onnx_unknown_dtype.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", 99, [4, 2], b"\0" * 32))), ["initializer 'w'", "element type #99 is not supported"])
    # int4 is read (two codes per byte): 8 codes need 4 bytes, 3 hold only 6.
    # Issue 24: float8 dims of 4e9 codes with 72 bytes were widened (16 GB) before the size check.
    emit("onnx_float8_dims_huge_raw_short.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", 17, [4, 1000000000], b"\0" * 72))),
         ["initializer 'w'", "raw_data holds 72 bytes", "4000000000 float8e4m3fn elements"])
    u4 = TensorProto()
    u4.name, u4.data_type = "w", 21
    u4.dims.extend([5])
    u4.int32_data.extend([0x21, 0x43])
    emit("onnx_uint4_int32_data_count.onnx", "onnx", onnx_bytes(tiny_model(u4)),
         ["initializer 'w'", "int32_data holds 2 values", "(3 bytes, two per byte)"])
    emit("onnx_bf16_raw_short.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", TensorProto.BFLOAT16, [4, 2], b"\0" * 10))),
         ["initializer 'w'", "raw_data holds 10 bytes", "8 bfloat16 elements"])
    emit("onnx_int4_raw_data_short.onnx", "onnx",
         onnx_bytes(tiny_model(raw_tensor("w", 22, [4, 2], b"\0" * 3))),
         ["initializer 'w'", "raw_data holds 3 bytes", "8 int4 elements"])
    ext = raw_tensor("w", TensorProto.FLOAT, [4, 2], b"")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights_that_are_not_there.bin"), ("offset", "0"), ("length", "32")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    emit("onnx_external_missing.onnx", "onnx", onnx_bytes(tiny_model(ext)), ["weights_that_are_not_there.bin"])
    ext2 = TensorProto()
    ext2.CopyFrom(ext)
    del ext2.external_data[:]
    e = ext2.external_data.add()
    e.key, e.value = "offset", "0"
    emit("onnx_external_no_location.onnx", "onnx", onnx_bytes(tiny_model(ext2)), ["location"])
    cycle = [helper.make_node("Relu", ["b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    emit("onnx_cycle.onnx", "onnx", onnx_bytes(tiny_model(nodes=cycle)), ["node 'first'", "reads 'b'"])
    twice = [helper.make_node("MatMul", ["x", "w"], ["y"], name="one"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="two")]
    emit("onnx_output_written_twice.onnx", "onnx", onnx_bytes(tiny_model(nodes=twice)), ["checker", "'y'"])
    bad_const = helper.make_node("Constant", [], ["k"], name="const_k",
                                 value=raw_tensor("kv", TensorProto.FLOAT, [5], b"\0" * 8))
    nodes = [bad_const, helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    emit("onnx_constant_attribute_short.onnx", "onnx", onnx_bytes(tiny_model(nodes=nodes)), ["node 'const_k'", "attribute 'value'", "raw_data holds 8 bytes"])


# ---- safetensors ------------------------------------------------------------

F32_6 = np.arange(6, dtype="<f4").tobytes()


def st_header(header_text, data=F32_6):
    return safetensors_bytes([], header_text=header_text, data=data)


def make_safetensors():
    emit("st_zero_header_length.safetensors", "safetensors", struct.pack("<Q", 0) + F32_6,
         ["not valid JSON", "byte offset 8"])
    emit("st_shape_not_list.safetensors", "safetensors",
         st_header('{"a": {"dtype": "F32", "shape": 6, "data_offsets": [0, 24]}}'), ['tensor "a" field shape'])
    emit("st_dtype_not_string.safetensors", "safetensors",
         st_header('{"a": {"dtype": 32, "shape": [6], "data_offsets": [0, 24]}}'), ['tensor "a" field dtype'])
    emit("st_offsets_negative.safetensors", "safetensors",
         st_header('{"a": {"dtype": "F32", "shape": [6], "data_offsets": [-24, 0]}}'),
         ['tensor "a" data_offsets[0]', "-24"])
    emit("st_offsets_float.safetensors", "safetensors",
         st_header('{"a": {"dtype": "F32", "shape": [6], "data_offsets": [0.0, 24.0]}}'),
         ['tensor "a" data_offsets[0]', "0.0"])
    emit("st_dim_bool.safetensors", "safetensors",
         st_header('{"a": {"dtype": "F32", "shape": [true, 6], "data_offsets": [0, 24]}}'),
         ['tensor "a" shape[0]'])
    emit("st_json_then_garbage.safetensors", "safetensors",
         st_header('{"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}} xyz'), ["not valid JSON", "byte offset 71"])
    emit("st_deeply_nested.safetensors", "safetensors",
         st_header('{"a": ' + "[" * 60000 + "]" * 60000 + "}", data=b""), ["nests deeper"])
    emit("st_f8_offsets_short.safetensors", "safetensors",
         st_header('{"w": {"dtype": "F8_E4M3", "shape": [4, 1000000000], "data_offsets": [0, 72]}}', data=b"\0" * 72),
         ['tensor "w"', "F8_E4M3 needs 4000000000 bytes", "hold 72"])
    emit("st_elements_over_limit.safetensors", "safetensors",
         st_header('{"w": {"dtype": "U8", "shape": [4294967304], "data_offsets": [0, 4294967304]}}', data=b"\0" * 8),
         ['tensor "w"', "4294967304 elements", "limit of 4294967296 per tensor"])
    emit("st_metadata_not_object.safetensors", "safetensors",
         st_header('{"__metadata__": ["format", "pt"], "a": {"dtype": "F32", "shape": [6], '
                   '"data_offsets": [0, 24]}}'), ["__metadata__"])


# ---- npy --------------------------------------------------------------------

def npy(header, version=1, data=b"", header_len=None):
    text = header.encode("latin1") if isinstance(header, str) else header
    if version == 1:
        pad = (-(10 + len(text) + 1)) % 64
        text += b" " * pad + b"\n"
        n = len(text) if header_len is None else header_len
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", n) + text + data
    pad = (-(12 + len(text) + 1)) % 64
    text += b" " * pad + b"\n"
    n = len(text) if header_len is None else header_len
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", n) + text + data


def make_npy():
    f4 = np.arange(4, dtype="<f4").tobytes()
    emit("npy_magic_only.npy", "npy", b"\x93NUMPY", ["magic"])
    emit("npy_v2_header_len_huge.npy", "npy",
         npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 2, f4, header_len=0xFFFFFFF0),
         ["header length 4294967280"])
    emit("npy_unicode_dtype.npy", "npy", npy("{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }", 1, b"\0" * 16),
         ["'descr'"])
    emit("npy_datetime_dtype.npy", "npy", npy("{'descr': '<M8[s]', 'fortran_order': False, 'shape': (2,), }", 1,
                                              b"\0" * 16), ["'descr'"])
    emit("npy_shape_string.npy", "npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': 'four', }", 1, f4),
         ["shape tuple at offset 50"])
    emit("npy_bytes_overflow.npy", "npy",
         npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 1, f4),
         ["'shape'"])
    emit("npy_nul_in_header.npy", "npy", npy("{'descr': '<f4',\0 'fortran_order': False, 'shape': (4,), }", 1, f4),
         ["control character"])
    emit("npy_dict_not_dict.npy", "npy", npy("['<f4', False, (4,)]", 1, f4), ["'{'", "offset 0"])
    emit("npy_odd_bytes_for_f2.npy", "npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", 1,
                                                b"\0" * 5), ["truncated", "needs 6 bytes"])


# ---- npz --------------------------------------------------------------------

def make_npz():
    good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 1, np.arange(4, dtype="<f4").tobytes())
    emit("npz_member_empty.npz", "npz", zip_bytes([Member("w.npy", b"")]), ['"w.npy"', "magic"])
    emit("npz_member_bad_dict.npz", "npz",
         zip_bytes([Member("ok.npy", good),
                    Member("w.npy", npy("{'descr': '<f4', 'shape': (4,), }", 1, b"\0" * 16))]),
         ['"w.npy"', "fortran_order"])
    emit("npz_member_version_9.npz", "npz",
         zip_bytes([Member("w.npy", b"\x93NUMPY\x09\x00" + good[8:], method=8)]), ['"w.npy"', "version 9.0"])
    emit("npz_member_data_short_deflated.npz", "npz",
         zip_bytes([Member("w.npy", good[:-6], method=8)]), ['"w.npy"', "needs 16 bytes", "holds 10"])


# ---- HDF5 / Keras -----------------------------------------------------------

def h5_file(path, build):
    with h5py.File(path, "w") as f:
        build(f)
    with open(path, "rb") as f:
        return f.read()


def keras_weights(f, names=(b"dense",), weight_names=(b"dense/kernel:0",), kernel=None):
    g = f.create_group("model_weights")
    g.attrs["layer_names"] = np.array(names, dtype="S")
    layer = g.create_group("dense")
    layer.attrs["weight_names"] = np.array(weight_names, dtype="S")
    inner = layer.create_group("dense")
    inner.create_dataset("kernel:0", data=np.ones((4, 2), np.float32) if kernel is None else kernel)
    f.attrs["keras_version"] = "2.15.0"
    f.attrs["backend"] = "tensorflow"
    f.attrs["model_config"] = json.dumps({"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})


def make_hdf5():
    tmp = os.path.join(OUT, ".tmp.h5")
    good = h5_file(tmp, lambda f: keras_weights(f))
    emit("h5_superblock_version_9.h5", "hdf5", good[:8] + b"\x09" + good[9:], ["HDF5", "superblock"])
    cut = bytearray(good)
    cut[8:] = b"\xee" * (len(good) - 8)
    emit("h5_signature_then_noise.h5", "hdf5", bytes(cut), ["HDF5", "superblock"])
    emit("h5_userblock_signature_only.h5", "hdf5", b"\0" * 512 + b"\x89HDF\r\n\x1a\n" + b"\0" * 40, ["cannot open the HDF5 file"])
    emit("h5_keras_layer_names_ints.h5", "hdf5",
         h5_file(tmp, lambda f: (keras_weights(f), f["model_weights"].attrs.__setitem__(
             "layer_names", np.array([1, 2], np.int32)))), ["/model_weights attribute 'layer_names'", "expected a string"])
    emit("h5_keras_kernel_strings.h5", "hdf5",
         h5_file(tmp, lambda f: keras_weights(f, kernel=np.array([b"ab", b"cd"], dtype="S2"))),
         ["/model_weights/dense/dense/kernel:0", "strings"])
    emit("h5_keras_config_array.h5", "hdf5",
         h5_file(tmp, lambda f: (keras_weights(f), f.attrs.__setitem__("model_config", "[1, 2]"))), ["'model_config'", "class_name"])
    os.remove(tmp)


# ---- rule files -------------------------------------------------------------

def make_rules():
    emit("rules_empty.json", "rules", b"", ["invalid JSON", "line 1, column 1"])
    emit("rules_truncated.json", "rules", b'{"version": 1, "rules": [{"module_path": "conv', ["invalid JSON", "column 47"])
    emit("rules_invalid_utf8.json", "rules", b'{"version": 1, "rules": [{"module_path": "\xff\xfe"}]}',
         ["invalid JSON", "UTF-8"])
    emit("rules_nul_byte.json", "rules", b'{"version": 1,\0 "rules": []}', ["invalid JSON", "column 15"])
    emit("rules_nested_100k.json", "rules",
         b'{"version": 1, "rules": [{"op_types": ' + b"[" * 60000 + b"]" * 60000 + b"}]}", ["nested deeper"])
    emit("rules_bad_regex.json", "rules", b'{"version": 1, "rules": [{"module_path": "layer(1|2"}]}',
         ["rule 0", "module_path", "position 6"])
    emit("rules_version_huge.json", "rules", b'{"version": 1e400, "rules": []}', ["invalid JSON", "number overflow"])
    emit("rules_second_rule_bad.json", "rules",
         b'{"version": 1, "rules": [{"weight_qtype": "int8"}, {"weight_qtype": "int8", "tile_size": -1}]}',
         ["rule 1", "tile_size"])


make_onnx()
make_safetensors()
make_npy()
make_npz()
make_hdf5()
make_rules()
with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump(MANIFEST, f, indent=1)
    f.write("\n")
print(len(MANIFEST), "files")
