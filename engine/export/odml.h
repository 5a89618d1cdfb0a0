#pragma once
// ODML (full-integer LiteRT) annotations, as Qwix's ODML conversion provider
// defines the scheme: every value of the graph that the converted model holds
// as an integer gets one quantization point, written to a JSON file that a
// converter applies.
//
// The scheme (int8 only):
//   weights      per-channel along the layer's channel axis (a single
//                quantization dimension; N-D MatMul weights are described
//                flattened to 2-D [rows, N], dimension 1), symmetric, narrow
//                range [−127, 127], zero point 0, with the rule's
//                weight_calibration (absmax by default). A rule's per_tensor
//                gives one scale (quantization_dimension null); tiles are
//                refused (LiteRT int8 has no sub-channel scales).
//   activations  per tensor, static, asymmetric int8 [−128, 127] from the
//                calibration statistics, with the layer's act_calibration (the
//                plan's Odml mode default: minmax) for layer inputs and minmax
//                elsewhere. Model inputs and outputs take a fixed range when
//                OdmlOptions gives one.
//   biases       (Conv input 2, Gemm input C) int32, zero point 0, scale per
//                channel = input scale × weight scale, dimension 0.
//   other float constants an op reads (an Add's constant operand): per
//                tensor, asymmetric int8 from their min and max.
// How each op is quantized follows the LiteRT converter and the LiteRT int8
// quantization spec (docs/formats.md lists the facts and their source). Run
// it on a model whose BatchNormalization nodes are folded (graph/
// batch_norm_folding.h), as the converter folds them before quantizing.
//   layer          Conv, ConvTranspose, Gemm, MatMul, Gather with a constant
//                  weight (a layer): output gets its own scale
//   fused          Relu, and Clip as Relu (0, inf), Relu6 (0, 6) or
//                  ReluN1To1 (−1, 1), right after a layer, Add, Sub, Mul, Div
//                  or Concat whose output nothing else reads: the converter
//                  fuses it into that op, whose output is never materialised
//                  (no point); the activation's output gets its own scale
//   pass_through   MaxPool, AveragePool, Reshape, Flatten, Transpose, Squeeze,
//                  Unsqueeze, Identity, Dropout, Pad, Resize, Upsample, Slice,
//                  Split, DepthToSpace, SpaceToDepth, a Gather on activations,
//                  any other Clip with constant bounds (MINIMUM/MAXIMUM): the
//                  output shares the input's scale and zero point
//   own_scale      Add, Sub, Mul, Div by a constant, Concat (its inputs are
//                  requantized to it by the converter), PRelu,
//                  GlobalAveragePool and ReduceMean (MEAN), HardSwish,
//                  HardSigmoid, LeakyRelu, a Relu or Relu6 not fused, MatMul
//                  of two activations: the output gets its own scale
//   fixed_scale    Sigmoid and Softmax (scale 1/256, zero point −128), Tanh
//                  (1/128, 0), LogSoftmax (16/256, 127): fixed by the kernel,
//                  not calibrated ("fixed_by_kernel": true)
//   not_quantized  nodes that compute only shapes, indices or values from
//                  constants (Shape → Gather → Mul …): the converter folds them
// Strict mode: every other op (and a layer no rule quantizes to int8, a Clip
// with computed bounds, a Div by a non-constant) is refused, all of them in
// one Error that names each node, its op type and why.
// A NaN, Inf or zero scale is an Error naming the tensor.
//
// JSON written: {"format": "quantscope-odml", "format_version": 1,
//   "tool_version", "model", "calibration": {"data", "batches"},
//   "quantization_points": [{"tensor", "kind" (activation, weight, bias,
//   constant), "dtype" ("i8"; "i32" for biases), "scale": [...],
//   "zero_point": [...] (integers), "narrow_range", "quantization_dimension"
//   (integer or null), "shape" (weights: as quantized, flattened for N-D
//   MatMul), "range": [min, max] (activations), "shares_scale_with"
//   (pass-through outputs), "fixed_by_kernel", "reciprocal" (a Div's
//   constant)}], "ops": [{"node", "op_type", "scheme", "fused_into" and
//   "activation" (fused: "RELU", "RELU6", "RELU_N1_TO_1")}]}.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "io/data_source.h"
#include "quant/scale.h"
#include "runtime/interpreter.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

namespace qs {

struct OdmlOptions {
    // Fixed [min, max] ranges for model inputs and outputs, by value name;
    // a name that is not a graph input or output is an Error.
    std::map<std::string, Range> fixedRanges;
    std::optional<int64_t> maxBatches; // calibration batches; default all
};

struct OdmlSummary {
    std::filesystem::path path;
    int64_t activations = 0; // quantization points by kind
    int64_t weights = 0;
    int64_t biases = 0;
    int64_t constants = 0;
    int64_t ops = 0;         // nodes annotated
    std::map<std::string, int64_t> opsByScheme; // "layer", "fused", "pass_through", ... -> nodes
    int64_t batches = 0;     // calibration batches run
};

// How the LiteRT converter quantizes an op (the scheme table above).
enum class OdmlScheme : uint8_t {
    Layer,       // constant weight: per-channel int8 weight, int32 bias, own output scale
    PassThrough, // the output shares the input's scale and zero point
    OwnScale,    // the output gets its own calibrated scale
    FixedScale,  // the int8 kernel fixes the output scale and zero point
    Fused,       // a Relu/Relu6/ReluN1To1 fused into the op producing its input
    NotQuantized // computes shapes, indices or constants only: no integer activation
};

// The activation side of the scheme, what both the JSON annotations and the
// LiteRT flatbuffer (export/tflite.h) are written from: every node classified
// (strict mode: one Error naming every node refused), calibrated on the float
// model, one int8 QuantParams per value with its own range.
struct OdmlQuantization {
    std::vector<OdmlScheme> schemes;                              // per model node
    std::map<size_t, std::pair<size_t, std::string>> fusedInto;  // fused activation node -> (producer node, "RELU"...)
    std::map<std::string, std::string> aliasOf;                  // pass-through output -> the value it shares a scale with
    std::map<std::string, std::string> constantAlias;            // pass-through of a constant -> the initializer
    std::map<std::string, QuantParams> activations;              // values with their own range -> int8 per tensor
    std::set<std::string> fixedByKernel;                         // of those, the ones the kernel fixes (LOGISTIC ...)
    std::map<std::string, Shape> shapes;                         // every value computed, as in the first batch
    // Small integer values computed from shapes (a Slice's starts from Shape -> Gather -> Div),
    // as in the first batch: what a converter folds into constants.
    std::map<std::string, std::vector<int64_t>> integers;
    int64_t batches = 0;                                         // calibration batches run

    std::string root(std::string value) const; // the value whose range `value` shares
    const QuantParams* activation(const std::string& value) const; // null when the value has no range
    const Tensor* constant(const Model& model, const std::string& value) const; // null when not a constant
};

// How the ODML exports name a node in errors: node 'NAME' (OP), or node '#INDEX' (OP)
// for a node without a name.
std::string nodeLabel(const Node& node, size_t index);

// Classifies and calibrates (`calib` rewound first). `plan` must be built in
// QuantizationMode::Odml (an Error otherwise).
OdmlQuantization computeOdmlQuantization(const Interpreter& interpreter, const QuantizationPlan& plan,
                                         DataSource& calib, const OdmlOptions& options,
                                         const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

// Calibrates on `calib` (rewound first) with the interpreter's float model,
// builds every quantization point and writes the JSON to `out` atomically.
// `plan` must be built in QuantizationMode::Odml (an Error otherwise).
OdmlSummary exportOdml(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                       DataSource& calib, const OdmlOptions& options, const std::filesystem::path& out,
                       const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
