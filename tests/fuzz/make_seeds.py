"""Writes the seed corpora of the fuzz targets: a few small valid files per
parser (so the fuzzer starts from inputs that reach deep) and a few broken
ones. Inputs the fuzzers found are added next to them by hand, under names
saying what they broke (docs/robustness.md); this script does not touch those,
except the crafted reproductions of findings that regression_inputs() writes.

usage: /usr/bin/python3 make_seeds.py               (writes corpus/<target>/seed_* and the regressions)
       /usr/bin/python3 make_seeds.py regressions   (writes only corpus/<target>/regress_* of regression_inputs)
"""
import io
import json
import os
import sys

import h5py
import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data", "archives"))
from archive_formats import Member, safetensors_bytes, zip_bytes  # noqa: E402


def put(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed_" + name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def onnx_seeds():
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.linspace(-1, 1, 8).tolist())
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w])
    matmul = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    put("onnx", "matmul.onnx", matmul)
    k = helper.make_tensor("k", TensorProto.FLOAT, [2, 1, 3, 3], np.arange(18, dtype=np.float32).tobytes(), raw=True)
    b = helper.make_tensor("b", TensorProto.INT8, [2], [1, -1])
    nodes = [helper.make_node("Conv", ["x", "k"], ["c"], name="/layer1/conv/Conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="/layer1/relu/Relu"),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Gemm", ["f", "gw", "gb"], ["y"], name="/fc/Gemm", transB=1)]
    gw = helper.make_tensor("gw", TensorProto.FLOAT16, [3, 32], np.ones(96, np.float16).view(np.uint16).tolist())
    gb = helper.make_tensor("gb", TensorProto.FLOAT, [3], [0.0, 1.0, 2.0])
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [k, b, gw, gb])
    cnn = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    put("onnx", "cnn.onnx", cnn)
    put("onnx", "truncated.onnx", cnn[: len(cnn) // 3])


def safetensors_seeds():
    f32 = np.arange(6, dtype="<f4").tobytes()
    put("safetensors", "two.safetensors",
        safetensors_bytes([("a.weight", "F32", [2, 3], f32), ("a.bias", "I16", [2], b"\1\0\2\0")],
                          metadata={"format": "pt"}))
    put("safetensors", "dtypes.safetensors",
        safetensors_bytes([("f16", "F16", [2], b"\0<\0<"), ("bf", "BF16", [1], b"\x80?"),
                           ("b", "BOOL", [3], b"\0\1\2"), ("e4", "F8_E4M3", [2], b"\x38\xff"),
                           ("i64", "I64", [1], b"\1" * 8), ("odd", "U8", [1, 0], b"")], pad_to=0))
    put("safetensors", "gap.safetensors",
        safetensors_bytes([("a", "F32", [2], f32[:8])], data=f32[:12]))


def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def npy_seeds():
    put("npy", "f4.npy", npy_bytes(np.linspace(-2, 2, 6, dtype="<f4").reshape(2, 3)))
    put("npy", "be_fortran.npy", npy_bytes(np.asfortranarray(np.arange(6, dtype=">i2").reshape(2, 3))))
    put("npy", "bool.npy", npy_bytes(np.array([True, False, True])))
    put("npy", "scalar_f8.npy", npy_bytes(np.float64(3.5)))
    put("npy", "empty.npy", npy_bytes(np.zeros((0, 4), np.float16)))
    put("npy", "short.npy", npy_bytes(np.arange(8, dtype="<u4"))[:-3])


def npz_seeds():
    arrays = {"x": np.arange(12, dtype="<f4").reshape(3, 4), "labels": np.array([1, 0, 2], "<i8"),
              "f": np.asfortranarray(np.ones((2, 3), ">f8"))}
    for name, save in (("stored.npz", np.savez), ("deflated.npz", np.savez_compressed)):
        buf = io.BytesIO()
        save(buf, **arrays)
        put("npz", name, buf.getvalue())
    put("npz", "other_member.npz",
        zip_bytes([Member("readme.txt", b"hello"), Member("s.npy", npy_bytes(np.float32(1)), method=8)]))
    put("npz", "crc.npz", zip_bytes([Member("x.npy", npy_bytes(np.ones(4, "<f4")), crc=1)]))


def rules_seeds():
    put("rules", "full.json", json.dumps({"version": 1, "rules": [
        {"module_path": "layer(1|2)/.*/conv[0-9]+", "op_types": ["Conv"], "weight_qtype": "int4",
         "weight_calibration": "percentile,99.9", "granularity": "per_channel", "tile_size": 0.25,
         "narrow_range": True, "scale_restriction": "pow2"},
        {"module_path": "fc", "weight_qtype": "int8", "act_qtype": "uint8", "act_calibration": "minmax",
         "act_static_scale": True, "act_batch_axes": [0, 1], "rounding": "stochastic", "rounding_seed": 7},
        {"weight_qtype": "fp8_e4m3", "act_qtype": "nf4", "act_calibration": "mse"},
        {"module_path": ".*", "weight_qtype": "mxfp4", "weight_calibration": "fixed,-1,2"}]}, indent=1))
    put("rules", "empty.json", '{"version": 1, "rules": []}')
    put("rules", "bad_field.json", '{"version": 1, "rules": [{"module_path": "(a", "tile_size": 0.3}]}')


def hdf5_seeds():
    path = os.path.join(HERE, "corpus", "hdf5", "seed_keras.h5")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w", libver="latest") as f:
        g = f.create_group("model_weights")
        g.attrs["layer_names"] = np.array([b"dense"], dtype="S")
        layer = g.create_group("dense")
        layer.attrs["weight_names"] = np.array([b"dense/kernel:0", b"dense/bias:0"], dtype="S")
        layer.create_dataset("dense/kernel:0", data=np.ones((4, 2), np.float32))
        layer.create_dataset("dense/bias:0", data=np.zeros(2, np.float32))
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["model_config"] = json.dumps({"class_name": "Sequential", "config": {"name": "s", "layers": [
            {"class_name": "Dense", "config": {"name": "dense", "units": 2}}]}})
    with h5py.File(os.path.join(HERE, "corpus", "hdf5", "seed_generic.h5"), "w") as f:
        f.create_dataset("encoder/layer0/weight", data=np.arange(6, dtype=">f4").reshape(2, 3))
        f.create_dataset("scalar", data=np.float64(2))
        f.create_dataset("gzip", data=np.ones(8, np.float16), compression="gzip", chunks=(4,))


def tokenizer_seeds():
    """Small tokenizer.json files of each supported kind, and a few refused ones."""
    byte_level = {
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\u0120": 5, "\u0120a": 6},
                  "merges": ["a b", "ab c", "\u0120 a"], "ignore_merges": True},
        "added_tokens": [{"id": 7, "content": "<|end|>", "special": True, "normalized": False,
                          "lstrip": True, "rstrip": False}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "behavior": "Isolated", "invert": False, "pattern": {"Regex":
             "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel"},
            {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                                                      {"Sequence": {"id": "A", "type_id": 0}}],
             "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [7], "tokens": ["<|end|>"]}}}]},
        "decoder": {"type": "ByteLevel"},
    }
    put("tokenizer", "byte_level.json", json.dumps(byte_level))
    gpt2 = dict(byte_level, pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True})
    put("tokenizer", "gpt2.json", json.dumps(gpt2))
    vocab = {"<unk>": 0, "<s>": 1, "\u2581": 2, "h": 3, "i": 4, "\u2581h": 5, "\u2581hi": 6}
    vocab.update({"<0x%02X>" % b: 7 + b for b in range(256)})
    sentencepiece = {
        "model": {"type": "BPE", "vocab": vocab, "merges": [["\u2581", "h"], ["\u2581h", "i"]],
                  "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True},
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    }
    put("tokenizer", "sentencepiece.json", json.dumps(sentencepiece))
    metaspace = dict(sentencepiece, normalizer=None,
                     pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                    "split": False},
                     decoder={"type": "Metaspace", "replacement": "\u2581"})
    put("tokenizer", "metaspace.json", json.dumps(metaspace))
    put("tokenizer", "wordpiece.json", '{"model": {"type": "WordPiece", "vocab": {"a": 0}}}')
    put("tokenizer", "bad_merge.json", '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}}')
    put("tokenizer", "truncated.json", json.dumps(sentencepiece)[:200])


def regression_inputs():
    """Small files reproducing what libhdf5 and libonnx do on hostile input
    (docs/robustness.md): each must become an error or a warning, never an
    outage of the process or the host."""
    # libhdf5 1.10 maps every chunk a read touches into a skip list, with a
    # dataspace copy each (about 4 KB per chunk): 724 x 724 float16 chunks of
    # one element are 524 176 chunks, about 2.3 GB of RSS for a 4 KB file that
    # passes every size check (1 MiB of data, within the fill-value allowance).
    path = os.path.join(HERE, "corpus", "hdf5", "regress_oom_chunk_map_524k_chunks.h5")
    with h5py.File(path, "w", libver="earliest") as f:
        d = f.create_dataset("chunks", shape=(724, 724), dtype="<f2", chunks=(1, 1))
        d[0, 0] = 7
    # libonnx 1.12 lets a graph output's declaration replace the graph input's
    # of the same name: the Conv then reads a rank-2 x and convPoolShapeInference
    # dereferences null (Python's infer_shapes crashes the same way).
    w = helper.make_tensor("W", TensorProto.FLOAT, [2, 1, 3, 3], np.ones(18, np.float32).tobytes(), raw=True)
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with open(os.path.join(HERE, "corpus", "onnx", "regress_conv_input_redeclared_as_output.onnx"), "wb") as f:
        f.write(model)
    # A rank only inference derives: Flatten makes x rank 2 before the Conv.
    # No declared rank shows it; the same crash.
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
                           helper.make_node("Conv", ["f", "W"], ["y"], name="conv_on_flat", pads=[1, 1, 1, 1])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with open(os.path.join(HERE, "corpus", "onnx", "regress_conv_on_flatten_derived_rank.onnx"), "wb") as f:
        f.write(model)


if sys.argv[1:] != ["regressions"]:
    onnx_seeds()
    hdf5_seeds()
    safetensors_seeds()
    npy_seeds()
    npz_seeds()
    rules_seeds()
    tokenizer_seeds()
regression_inputs()
