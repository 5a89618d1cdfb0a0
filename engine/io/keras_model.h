#pragma once
// Keras `.h5` files (tf.keras / Keras 2 `model.save`, Keras 3's legacy `.h5`,
// and `save_weights` files) as a Model.
//
// Weights: `model_weights/` (or the root of a weights file) lists its layers
// in the `layer_names` attribute; each layer group lists its variables in
// `weight_names` ("dense/kernel:0"), stored at `<layer>/<weight name>`. Large
// lists split by Keras into `layer_names0`, `layer_names1`, ... are joined.
// Every listed layer and variable must exist and be readable.
//
// Module paths: the layer name; a variable whose name does not start with its
// layer's name belongs to a layer nested in it ("head" holding "inner/kernel:0"
// gives "head/inner"); a MultiHeadAttention's projections are one layer each
// ("mha/query", "mha/key", "mha/value", "mha/attention_output"); a
// SeparableConv2D is two layers, "<name>/depthwise" and "<name>/pointwise".
// Initializers are named `<module path>/<variable>:0`.
//
// Quantizable layers and their weight layouts (Keras kernels as stored):
//   Dense                 MatMul [in, out]                  channel 1, contraction 0
//   Conv1D/2D/3D          Conv   [k..., in, out]            channel last, contraction second-to-last
//   DepthwiseConv2D       Conv   [kh, kw, in, mult]         channel 2 (in), contraction 0 and 1, groups = in
//   SeparableConv2D       its depthwise kernel as above, its pointwise kernel [1, 1, in·mult, out] as Conv
//   Embedding             Gather [vocab, dim]               channel 0, contraction 1
//   MultiHeadAttention    MatMul query/key/value [d, heads, k]: channel 2, contraction 0;
//                                output [heads, v, d]: channel 2, contraction 0 and 1
// Normalization variables (gamma, beta, moving statistics) are initializers,
// not quantizable layers.
//
// Graph: when `model_config` is a Sequential, or a Functional model whose
// layers are each called once, made only of InputLayer, Dense, Conv1D/2D,
// DepthwiseConv2D, SeparableConv2D, BatchNormalization, LayerNormalization,
// Embedding, Activation, ReLU, Dropout, Flatten, Reshape, Add, MaxPooling2D,
// AveragePooling2D and GlobalAveragePooling2D, the model becomes a graph of
// ONNX ops (opset 17) computing what Keras computes. Keras tensors are NHWC
// (channels last); ONNX Conv, pooling and BatchNormalization run NCHW, so the
// graph transposes activations NHWC -> NCHW before them and back only where a
// channels-last op (Dense, Flatten, Reshape, LayerNormalization, Softmax, a
// graph output) needs it. Conv kernels stay initializers in Keras layout and
// reach the Conv node through a Transpose (and a Reshape for depthwise), so the
// layer's weight is the stored kernel. Any other config (MultiHeadAttention,
// nested models, shared layers, channels_first data) gives a weights-only
// Model of the layers found, with a warning saying why.
//
// Errors (qs::Error naming the file and the object): `model_config` that is
// not JSON or not a Keras config, a layer listed in `layer_names` without its
// group, a listed variable without its dataset, a variable whose shape
// contradicts the layer's config (kernel size, filters, units, input width).

#include <filesystem>

#include "graph/model.h"
#include "io/hdf5_file.h"

namespace qs {

// True when the file holds Keras weights (`model_weights` with `layer_names`,
// or `layer_names` on the root).
bool isKerasFile(const Hdf5File& file);

// The Keras model held by `file` (see above). format = "keras-h5".
Model loadKerasModel(const Hdf5File& file);

} // namespace qs
