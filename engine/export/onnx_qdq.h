#pragma once
// The ONNX QDQ export: the source ONNX model, rewritten so that a runtime such
// as ONNX Runtime runs it quantized the way the rules say (docs/export.md).
// - Each quantized weight initializer becomes integer codes, a scale and a zero
//   point read by a DequantizeLinear whose output keeps the weight's name:
//   per tensor (scalar scale), per channel (`axis` = the layer's channel axis)
//   or, for tiled rules, blocked (`axis` = the contraction axis, `block_size` =
//   the tile; opset 21). The codes are exactly those of the fake-quantized
//   weight the simulation uses.
// - Each statically quantized activation gets QuantizeLinear → DequantizeLinear
//   (per tensor, scale and zero point from calibration) in front of the layer
//   that reads it; other readers of the float value keep reading it.
// - Dynamic-range activations (act_qtype without act_static_scale) stay float:
//   the scale of a dynamic activation is a function of each batch, which QDQ
//   cannot hold; ONNX Runtime's dynamic quantization (or DynamicQuantizeLinear
//   inserted by a runtime) quantizes them at run time. The summary lists them.
// - ONNX types: int8, uint8 (opset 13); fp8 e4m3fn, e5m2 for weights only
//   (opset 19, no zero point; ONNX Runtime refuses float8 activations around
//   Conv/MatMul); int16, int4, uint4 (opset 21). Any other qtype (int3,
//   nf4, fp4, mx*, binary, ternary ...) is an Error naming the layer and the
//   qtype. The opset is raised when the types need it.
// - External data of the source is read and written inline (one .onnx file).
// - 8-bit integers are written as uint8 by default (int8 codes and zero points
//   + 128, the same values), so that ONNX Runtime runs its u8u8 kernels, exact
//   on every x86 CPU (EightBitForm below).
// - Optionally (Int4Form::MatMulNBits) MatMul and Gemm with int4/uint4 weights
//   in blocks along K become com.microsoft.MatMulNBits; the others keep their
//   DequantizeLinear with a warning naming the layer.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "export/qdq_graph.h"
#include "graph/model.h"
#include "quant/scale.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "runtime/activation_calibration.h"

namespace qs {

// How 8-bit integer quantizations are written. ONNX Runtime fuses QDQ groups
// into integer kernels (QLinearConv, QLinearMatMul, ...). On x86 CPUs with
// AVX2 but without VNNI (AVX512-VNNI or AVX-VNNI), its kernels for uint8
// activations × int8 weights (u8s8) add pairs of products in 16 bits and
// saturate, and its s8s8 path is worse; its u8u8 kernels widen to 16 bits
// first and are exact everywhere (measured in docs/export.md).
enum class EightBitForm {
    Unsigned, // every int8 quantization as uint8 (+128): exact on every CPU; the default
    AsRules,  // the rules' types: ONNX Runtime's fastest kernels where the CPU has VNNI
};
// "unsigned" / "as-rules"; none for another name.
std::optional<EightBitForm> parseEightBitForm(std::string_view name);
const char* eightBitFormName(EightBitForm form);
// One sentence for reports and dialogs: what the form does and why.
std::string eightBitFormReason(EightBitForm form);

// How blocked int4/uint4 weights of MatMul and Gemm are written
// (export/passes/matmul_nbits.h).
enum class Int4Form {
    Dequantize,  // opset-21 DequantizeLinear (block_size) in front of the float op: standard ONNX; the default
    MatMulNBits, // one com.microsoft.MatMulNBits node (ONNX Runtime's int4 kernel, float activations)
};
// "dequantize" / "matmulnbits"; none for another name.
std::optional<Int4Form> parseInt4Form(std::string_view name);
const char* int4FormName(Int4Form form);

struct OnnxExportOptions {
    EightBitForm eightBitForm = EightBitForm::Unsigned;
    Int4Form int4Form = Int4Form::Dequantize;
    bool runPasses = true;        // run the clean-up passes (export/passes/pipeline.h) on the QDQ graph
    std::optional<int64_t> opset; // default-domain opset to write; default: the source's, raised as the types need
    bool runChecker = true;       // run onnx::checker (full: with strict shape inference) where libonnx knows the opset
};

struct OnnxExportSummary {
    int64_t sourceOpset = 0;
    int64_t opset = 0;                                  // default-domain opset written
    int64_t irVersion = 0;                              // IR version written
    EightBitForm eightBitForm = EightBitForm::Unsigned; // as asked (OnnxExportOptions)
    Int4Form int4Form = Int4Form::Dequantize;           // as asked
    int64_t matMulNBits = 0;                            // MatMul/Gemm nodes written as com.microsoft.MatMulNBits
    int64_t signedEightBit = 0;     // int8 quantizations left in the file (ONNX Runtime's u8s8/s8s8 kernels)
    std::vector<PassReport> passes; // the rewrite ("quantize_weights", "quantize_activations") then each pass
    std::vector<std::string> dynamicActivations; // values left float for the runtime's dynamic quantization
    int64_t floatBytes = 0;                      // the quantized weights as float32 in the source
    int64_t quantizedBytes = 0;                  // their codes, scales and zero points as written
    bool checked = false; // onnx::checker ran and passed (false: libonnx does not know the opset)
    std::vector<std::string> warnings;
};

// What the export quantizes, independent of how it was computed (the
// plan-based overload below builds it from the weight cache and calibration).
struct QdqWeight {
    size_t layer = 0;                // index into Model::layers
    QuantParams params;              // as computed for the weight (or its transposed view)
    std::vector<int> transposedAxes; // non-empty: params' layout is over the weight transposed by these axes
    Tensor fakeQuant;                // float32, the weight's shape: the codes are recovered from it exactly
    // awq: float32, the weight's rank, 1 on every axis but the input channels'. The
    // dequantized codes are divided by it (a Div after the DequantizeLinear), as
    // the simulation divides them; fakeQuant then holds the undivided grid values.
    Tensor inputScale;
    // bias_correction: float32 [O], written as the node's bias (Conv B, Gemm C) in
    // place of its own, or as a new bias input when it has none.
    Tensor correctedBias;
};

struct QdqActivation {
    size_t layer = 0;  // index into Model::layers; its node reads `value`
    std::string value; // the node input quantized
    QType qtype = QType::Int8;
    float scale = 1.0f;
    int32_t zeroPoint = 0;
};

struct QdqExportRequest {
    std::vector<QdqWeight> weights;
    std::vector<QdqActivation> activations;      // static ones
    std::vector<std::string> dynamicActivations; // values a rule quantizes dynamically (reported, left float)
};

// Builds the request from a plan's quantized weights and static activations.
// Throws Error naming the layer for a plan layer whose weight is missing from
// the cache or whose static activation was not calibrated.
QdqExportRequest qdqRequestFromPlan(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                    const std::map<size_t, StaticActivation>& staticActivations);

// The QDQ model's bytes (a serialized ModelProto). `model` must come from
// loadOnnx of an ONNX file (model.sourcePath is read again).
std::string buildOnnxQdq(const Model& model, const QdqExportRequest& request, const OnnxExportOptions& options,
                         OnnxExportSummary& summary);

// Builds and writes `out` atomically.
OnnxExportSummary exportOnnxQdq(const Model& model, const QdqExportRequest& request, const std::filesystem::path& out,
                                const OnnxExportOptions& options = {});
OnnxExportSummary exportOnnxQdq(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                                const std::map<size_t, StaticActivation>& staticActivations,
                                const std::filesystem::path& out, const OnnxExportOptions& options = {});

} // namespace qs
