#pragma once
// The full-integer LiteRT (.tflite) model of an ODML-mode plan: the flatbuffer
// phones run, written by our own builder (export/flatbuffer.h) over a schema
// subset (export/tflite_schema.h).
//
// What is written, from the ODML scheme (export/odml.h) of a model whose
// BatchNormalization nodes are folded:
//   layout       4-D activations NHWC (the model's NCHW transposed; a model
//                input [N, C, H, W] becomes a float32 input [N, H, W, C]),
//                other ranks as they are
//   activations  int8 per tensor, asymmetric, from the calibrated ranges
//                (computeOdmlQuantization); pass-through ops share their
//                input's tensor parameters; LOGISTIC and SOFTMAX outputs
//                take 1/256 and zero point −128
//   weights      int8 symmetric narrow range: per output channel for CONV_2D
//                (quantized_dimension 0) and DEPTHWISE_CONV_2D (dimension 3),
//                with the plan's scales; per tensor for FULLY_CONNECTED (Arm
//                NN's TfLite parser aborts on per-channel FULLY_CONNECTED), its
//                scale absmax / 127 when the plan had per-channel scales
//   biases       int32, scale = input scale × weight scale (per channel), zero 0
//   edges        QUANTIZE after each float input, DEQUANTIZE before each
//                float output (TfliteOptions::int8Io keeps them int8)
// Ops: Conv → CONV_2D or DEPTHWISE_CONV_2D (group = channels), ConvTranspose →
// TRANSPOSE_CONV (VALID or SAME placement only; TfliteTransposeConvBias), Gemm and a
// MatMul by a constant 2-D weight → FULLY_CONNECTED, a Relu/Relu6 the scheme
// fuses → the fused activation, Add → ADD, Sub → SUB, Mul and a Div by a constant → MUL,
// Concat → CONCATENATION, GlobalAveragePool and ReduceMean over H, W → MEAN,
// AveragePool → AVERAGE_POOL_2D, MaxPool → MAX_POOL_2D, Pad → PAD, Flatten and
// Reshape → RESHAPE (with a TRANSPOSE back to NCHW order first when the spatial
// dims are not 1), Transpose → TRANSPOSE, Sigmoid → LOGISTIC, Softmax (last
// axis) → SOFTMAX, HardSwish → HARD_SWISH, PyTorch's HardSigmoid → ADD 3 with
// RELU6 and MUL 1/6, Resize → RESIZE_BILINEAR (linear) or RESIZE_NEAREST_NEIGHBOR
// (nearest), half_pixel → half_pixel_centers, align_corners → align_corners,
// asymmetric → neither; Slice → SLICE, or STRIDED_SLICE with positive steps other
// than 1; Identity and Dropout are dropped. A CONCATENATION
// input whose parameters differ from the output's is requantized to them by a
// QUANTIZE (int8 → int8) first, as the converter does.
// ONNX padding that is not TensorFlow's SAME becomes an explicit PAD (zero
// point) and VALID; a MaxPool is padded so only when its input's zero point
// is −128 (the padding value 0 is then the smallest value: exact).
// Anything else is an Error naming every node refused and why.
//
// The file is written atomically, then read back with the bounds-checked
// reader: tensors, operators, buffers and their bytes must be what was meant.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "export/odml.h"

namespace qs {

// How a grouped convolution (neither plain nor depthwise) is written.
enum class TfliteGroupedConv {
    Native, // one CONV_2D whose filter holds a group's input channels (LiteRT, XNNPACK)
    Split,  // SLICE + CONV_2D per group + CONCATENATION: the same codes, for consumers that
            // miscompute grouped CONV_2D (Arm NN 20.08's TfLite parser ignores the groups)
};

// Where a transposed convolution's bias goes.
enum class TfliteTransposeConvBias {
    Input, // TRANSPOSE_CONV's fourth input, int32 at input × weight scale (version 3; LiteRT, XNNPACK)
    Add,   // a three-input TRANSPOSE_CONV, then an ADD of the bias as an int8 constant, for consumers
           // that take no bias input (Arm NN 20.08's TfLite parser accepts exactly three inputs)
};

struct TfliteOptions {
    OdmlOptions odml;    // fixed input/output ranges, calibration batches
    bool int8Io = false; // keep the model's inputs and outputs int8 (no QUANTIZE/DEQUANTIZE)
    TfliteGroupedConv groupedConv = TfliteGroupedConv::Native;
    TfliteTransposeConvBias transposeConvBias = TfliteTransposeConvBias::Input;
};

struct TfliteSummary {
    std::filesystem::path path;
    int64_t bytes = 0;            // file size
    int64_t floatWeightBytes = 0; // the float32 weights and biases it replaces
    int64_t tensors = 0;
    int64_t operators = 0;
    std::map<std::string, int64_t> operatorsByType; // "CONV_2D" -> count
    int64_t batches = 0;                            // calibration batches run
    std::vector<std::string> notes;                 // what the user should know (per-tensor FULLY_CONNECTED ...)
};

// Calibrates on `calib` (rewound first) with the interpreter's float model
// (the ODML ranges: computeOdmlQuantization), builds the LiteRT model and
// writes it to `out`. `plan` must be built in QuantizationMode::Odml.
TfliteSummary exportTflite(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                           DataSource& calib, const TfliteOptions& options, const std::filesystem::path& out,
                           const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

// The same model as bytes, not written anywhere (the session's integer
// simulation runs them: export/tflite_integer.h). `summary.path` stays empty
// and `summary.bytes` is the size.
struct TfliteModel {
    std::vector<uint8_t> bytes;
    TfliteSummary summary;
};
TfliteModel buildTflite(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                        DataSource& calib, const TfliteOptions& options, const CancellationToken& cancel = {},
                        const ProgressCallback& progress = {});

// What a written .tflite holds, read with the bounds-checked reader (an Error
// naming `path` for a malformed file): per subgraph-0 tensor its name, type
// and shape; per operator its builtin code; the buffers' sizes.
struct TfliteContents {
    struct TensorInfo {
        std::string name;
        int type = 0;
        std::vector<int32_t> shape;
        std::vector<float> scales;
        std::vector<int64_t> zeroPoints;
        uint32_t buffer = 0;
    };
    uint32_t version = 0;
    std::vector<TensorInfo> tensors;
    std::vector<int32_t> operatorCodes;                // builtin code of each operator, in order
    std::vector<std::vector<int32_t>> operatorInputs;  // tensor indices each operator reads
    std::vector<std::vector<int32_t>> operatorOutputs; // and writes
    std::vector<int32_t> inputs, outputs;
    std::vector<size_t> bufferSizes;
};
TfliteContents readTflite(const std::filesystem::path& path);

} // namespace qs
