#!/usr/bin/python3
"""Writes the HDF5 fixtures of tst_hdf5 into the folder given as argv[1].

No TensorFlow or Keras is needed: the Keras files are written by hand in the
exact layout tf.keras 2.x `Model.save("x.h5")` produces (root attributes
`keras_version`, `backend`, `model_config` as UTF-8 JSON bytes; group
`model_weights` with `layer_names`, and one group per layer with `weight_names`
and the datasets `<layer>/<var>:0`). Values follow a seeded generator so the
test compares what it reads against .npy copies written beside the files.
"""
import json
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1234)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def generic():
    with h5py.File(os.path.join(out, "generic.h5"), "w") as f:
        enc = f.create_group("encoder")
        enc.create_dataset("layer0/weight", data=rand(4, 3))
        enc.create_dataset("layer0/bias", data=rand(4))
        f.create_dataset("f16", data=rand(2, 5).astype(np.float16))
        f.create_dataset("f64", data=rand(3).astype(np.float64))
        f.create_dataset("be_f32", data=rand(2, 3).astype(">f4"))
        f.create_dataset("i32", data=np.arange(-6, 6, dtype=np.int32).reshape(3, 4))
        f.create_dataset("u8", data=np.arange(10, dtype=np.uint8))
        f.create_dataset("flags", data=np.array([True, False, True]))
        f.create_dataset("scalar", data=np.float32(2.5))
        f.create_dataset("empty", data=np.zeros((0, 4), np.float32))
        f.create_dataset("null", data=h5py.Empty("f4"))
        f.create_dataset("text", data=np.array([b"a", b"bc"]))
        f.create_dataset("records", data=np.zeros(3, dtype=[("a", "f4"), ("b", "i4")]))
        # 4 TiB declared, nothing stored: must be refused before allocating.
        f.create_dataset("huge", shape=(1 << 20, 1 << 20), dtype="f4", chunks=(1, 1024))
        f.create_dataset("gzip", data=rand(64, 32), chunks=(16, 32), compression="gzip")
        f["soft"] = h5py.SoftLink("/encoder")
        f["ext"] = h5py.ExternalLink("elsewhere.h5", "/x")
        enc["again"] = enc  # a hard-link cycle
        f.attrs["note"] = "generic tree"
        f.attrs["names"] = np.array([b"alpha", b"beta"])
        f.attrs["number"] = 3
        for name in ["encoder/layer0/weight", "f16", "be_f32", "gzip"]:
            np.save(os.path.join(out, "generic_" + name.replace("/", "_") + ".npy"), f[name][()])


def write_keras(path, config, layers, keras_version="2.13.1"):
    """layers: list of (layer_name, [(weight_name, array), ...])."""
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = keras_version
        f.attrs["backend"] = "tensorflow"
        f.attrs["model_config"] = json.dumps(config).encode("utf8")
        g = f.create_group("model_weights")
        g.attrs["keras_version"] = keras_version
        g.attrs["backend"] = "tensorflow"
        g.attrs["layer_names"] = np.array([n.encode("utf8") for n, _ in layers])
        for name, weights in layers:
            lg = g.create_group(name)
            lg.attrs["weight_names"] = np.array([w.encode("utf8") for w, _ in weights])
            for wname, value in weights:
                lg.create_dataset(wname, data=value)


def layer(cls, name, **config):
    config["name"] = name
    config.setdefault("trainable", True)
    config.setdefault("dtype", "float32")
    return {"class_name": cls, "config": config}


def sequential_cnn():
    c = dict(padding="same", strides=[1, 1], dilation_rate=[1, 1], data_format="channels_last")
    layers = [
        layer("InputLayer", "input_1", batch_input_shape=[None, 8, 8, 3], sparse=False, ragged=False),
        layer("Conv2D", "conv2d", filters=4, kernel_size=[3, 3], activation="linear", use_bias=True, **c),
        layer("BatchNormalization", "batch_normalization", axis=[3], epsilon=0.001, center=True, scale=True),
        layer("ReLU", "re_lu", max_value=None, negative_slope=0.0, threshold=0.0),
        layer("DepthwiseConv2D", "depthwise_conv2d", kernel_size=[3, 3], depth_multiplier=1,
              activation="relu", use_bias=True, **c),
        layer("SeparableConv2D", "separable_conv2d", filters=6, kernel_size=[3, 3], depth_multiplier=1,
              activation="linear", use_bias=True, **c),
        layer("MaxPooling2D", "max_pooling2d", pool_size=[2, 2], padding="valid", strides=[2, 2],
              data_format="channels_last"),
        layer("Conv2D", "conv2d_1", filters=5, kernel_size=[1, 1], activation="relu", use_bias=False, **c),
        layer("Flatten", "flatten", data_format="channels_last"),
        layer("Dropout", "dropout", rate=0.5),
        layer("Dense", "dense", units=10, activation="softmax", use_bias=True),
    ]
    config = {"class_name": "Sequential", "config": {"name": "sequential", "layers": layers}}
    weights = [
        ("conv2d", [("conv2d/kernel:0", rand(3, 3, 3, 4)), ("conv2d/bias:0", rand(4))]),
        ("batch_normalization", [("batch_normalization/gamma:0", rand(4)), ("batch_normalization/beta:0", rand(4)),
                                 ("batch_normalization/moving_mean:0", rand(4)),
                                 ("batch_normalization/moving_variance:0", np.abs(rand(4)) + 0.5)]),
        ("re_lu", []),
        ("depthwise_conv2d", [("depthwise_conv2d/depthwise_kernel:0", rand(3, 3, 4, 1)),
                              ("depthwise_conv2d/bias:0", rand(4))]),
        ("separable_conv2d", [("separable_conv2d/depthwise_kernel:0", rand(3, 3, 4, 1)),
                              ("separable_conv2d/pointwise_kernel:0", rand(1, 1, 4, 6)),
                              ("separable_conv2d/bias:0", rand(6))]),
        ("max_pooling2d", []),
        ("conv2d_1", [("conv2d_1/kernel:0", rand(1, 1, 6, 5))]),
        ("flatten", []),
        ("dropout", []),
        ("dense", [("dense/kernel:0", rand(80, 10)), ("dense/bias:0", rand(10))]),
    ]
    return config, weights


def functional_text():
    def node(*sources):
        return [[[s, 0, 0, {}] for s in sources]]
    layers = [
        {**layer("InputLayer", "tokens", batch_input_shape=[None, 6], dtype="int32"), "name": "tokens",
         "inbound_nodes": []},
        {**layer("Embedding", "embedding", input_dim=20, output_dim=8), "name": "embedding",
         "inbound_nodes": node("tokens")},
        {**layer("Dense", "dense", units=8, activation="relu", use_bias=True), "name": "dense",
         "inbound_nodes": node("embedding")},
        {**layer("Add", "add"), "name": "add", "inbound_nodes": node("embedding", "dense")},
        {**layer("LayerNormalization", "layer_normalization", axis=[2], epsilon=0.001, center=True, scale=True),
         "name": "layer_normalization", "inbound_nodes": node("add")},
        {**layer("Conv1D", "conv1d", filters=4, kernel_size=[3], strides=[1], padding="valid",
                 dilation_rate=[1], activation="tanh", use_bias=True, data_format="channels_last"),
         "name": "conv1d", "inbound_nodes": node("layer_normalization")},
        {**layer("Reshape", "reshape", target_shape=[16]), "name": "reshape", "inbound_nodes": node("conv1d")},
        {**layer("Dense", "logits", units=3, activation="linear", use_bias=True), "name": "logits",
         "inbound_nodes": node("reshape")},
    ]
    config = {"class_name": "Functional", "config": {
        "name": "model", "layers": layers, "input_layers": [["tokens", 0, 0]], "output_layers": [["logits", 0, 0]]}}
    weights = [
        ("tokens", []),
        ("embedding", [("embedding/embeddings:0", rand(20, 8))]),
        ("dense", [("dense/kernel:0", rand(8, 8)), ("dense/bias:0", rand(8))]),
        ("add", []),
        ("layer_normalization", [("layer_normalization/gamma:0", rand(8)), ("layer_normalization/beta:0", rand(8))]),
        ("conv1d", [("conv1d/kernel:0", rand(3, 8, 4)), ("conv1d/bias:0", rand(4))]),
        ("reshape", []),
        ("logits", [("logits/kernel:0", rand(16, 3)), ("logits/bias:0", rand(3))]),
    ]
    return config, weights


def attention():
    """A Functional model with MultiHeadAttention: weights-only with a warning."""
    layers = [
        {**layer("InputLayer", "x", batch_input_shape=[None, 5, 8]), "name": "x", "inbound_nodes": []},
        {**layer("MultiHeadAttention", "mha", num_heads=2, key_dim=4, value_dim=4, use_bias=True),
         "name": "mha", "inbound_nodes": [[["x", 0, 0, {"value": ["x", 0, 0]}]]]},
        {**layer("Sequential", "head", layers=[layer("Dense", "inner", units=2)]), "name": "head",
         "inbound_nodes": [[["mha", 0, 0, {}]]]},
    ]
    config = {"class_name": "Functional", "config": {
        "name": "model", "layers": layers, "input_layers": [["x", 0, 0]], "output_layers": [["head", 0, 0]]}}
    mha = [(f"mha/{p}/{v}:0", rand(*s)) for p, shapes in [
        ("query", [(8, 2, 4), (2, 4)]), ("key", [(8, 2, 4), (2, 4)]), ("value", [(8, 2, 4), (2, 4)]),
        ("attention_output", [(2, 4, 8), (8,)])] for v, s in zip(["kernel", "bias"], shapes)]
    weights = [("x", []), ("mha", mha), ("head", [("inner/kernel:0", rand(8, 2)), ("inner/bias:0", rand(2))])]
    return config, weights


generic()
config, weights = sequential_cnn()
write_keras(os.path.join(out, "keras_sequential.h5"), config, weights)
for _, ws in weights:
    for wname, value in ws:
        np.save(os.path.join(out, "sequential_" + wname.replace("/", "_").replace(":0", "") + ".npy"), value)
config, weights = functional_text()
write_keras(os.path.join(out, "keras_functional.h5"), config, weights)

config, weights = attention()
write_keras(os.path.join(out, "keras_attention.h5"), config, weights)

# Hostile variants of the Sequential file.
config, weights = sequential_cnn()
with open(os.path.join(out, "keras_sequential.h5"), "rb") as f:
    whole = f.read()
with open(os.path.join(out, "truncated.h5"), "wb") as f:
    f.write(whole[: len(whole) // 2])
with open(os.path.join(out, "not_hdf5.h5"), "wb") as f:
    f.write(b"this is not an HDF5 file\n" * 40)
write_keras(os.path.join(out, "bad_json.h5"), config, weights)
with h5py.File(os.path.join(out, "bad_json.h5"), "a") as f:
    f.attrs["model_config"] = b'{"class_name": "Sequential", "config": {'
bad = [(n, [(w, rand(5, 5, 3, 4)) if w == "conv2d/kernel:0" else (w, v) for w, v in ws]) for n, ws in weights]
write_keras(os.path.join(out, "bad_shape.h5"), config, bad)
write_keras(os.path.join(out, "missing_layer.h5"), config, weights)
with h5py.File(os.path.join(out, "missing_layer.h5"), "a") as f:
    del f["model_weights/dense"]
write_keras(os.path.join(out, "missing_weight.h5"), config, weights)
with h5py.File(os.path.join(out, "missing_weight.h5"), "a") as f:
    del f["model_weights/conv2d/conv2d/bias:0"]
