#pragma once
// A LiteRT (.tflite) model read back from its bytes into what an executor
// needs: every tensor of subgraph 0 (type, shape, quantization, constant
// bytes) and every operator (builtin code, inputs, outputs, the options the
// exporter writes). Read with the bounds-checked flatbuffer reader
// (export/flatbuffer.h): a malformed buffer, an operator the executor does not
// know or an option table of the wrong kind is an Error naming `what` and the
// operator or tensor.
//
// The integer simulation (export/tflite_integer.h) runs this, not the
// exporter's in-memory builder: what it simulates is what the file says.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "export/tflite_schema.h"

namespace qs {

struct TfliteProgram {
    struct TensorSpec {
        std::string name;
        tflite::TensorType type = tflite::TensorType::Float32;
        std::vector<int32_t> shape;
        std::vector<float> scales;       // empty when not quantized
        std::vector<int64_t> zeroPoints; // one per scale
        int32_t quantizedDimension = 0;  // the per-channel axis
        std::vector<uint8_t> data;       // a constant's bytes; empty for an activation
        bool constant() const { return !data.empty(); }
        int64_t numel() const;
        int32_t zeroPoint() const { return zeroPoints.empty() ? 0 : int32_t(zeroPoints[0]); } // per tensor
        std::vector<int32_t> int32Values() const; // a constant's data read as int32
    };
    struct Operation {
        tflite::BuiltinOperator op = tflite::BuiltinOperator::Add;
        std::vector<int32_t> inputs, outputs;
        // Options (the schema's defaults when the table is absent).
        tflite::Padding padding = tflite::Padding::Same;
        int32_t strideW = 1, strideH = 1, dilationW = 1, dilationH = 1;
        int32_t filterW = 1, filterH = 1, depthMultiplier = 1;
        tflite::Activation activation = tflite::Activation::None;
        int32_t axis = 0;
        bool keepDims = false, alignCorners = false, halfPixelCenters = false;
        float beta = 1.0f;
        int32_t masks = 0; // STRIDED_SLICE: its five masks or-ed (the simulation runs them all 0)
    };
    std::vector<TensorSpec> tensors;
    std::vector<Operation> operations;
    std::vector<int32_t> inputs, outputs;

    static TfliteProgram read(std::span<const uint8_t> bytes, const std::string& what);
};

// MEAN over the axes its second input lists: for each input element in
// row-major order, the output element it adds into, and how many add into each.
struct TfliteMeanReduction {
    std::vector<int64_t> outputOf;
    int64_t count = 1;
};
TfliteMeanReduction tfliteMeanReduction(const TfliteProgram::Operation& op,
                                        const std::vector<TfliteProgram::TensorSpec>& tensors);

// The name LiteRT gives a builtin operator ("CONV_2D"); "?" for one not in the subset.
const char* tfliteOperatorName(tflite::BuiltinOperator op);

} // namespace qs
