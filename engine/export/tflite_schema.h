#pragma once
// The subset of the LiteRT (TensorFlow Lite) flatbuffer schema the exporter
// writes: field ids of the tables and the enum values, from the published
// schema (tensorflow/compiler/mlir/lite/schema/schema.fbs; the same ids in
// LiteRT's copy). A union field takes two ids: `<name>_type` (a uint8) then
// the table. File identifier "TFL3"; schema version 3.

#include <cstdint>

namespace qs::tflite {

inline constexpr const char* kFileIdentifier = "TFL3";
inline constexpr uint32_t kSchemaVersion = 3;

namespace model { // table Model
inline constexpr int version = 0, operator_codes = 1, subgraphs = 2, description = 3, buffers = 4;
}
namespace operator_code { // table OperatorCode
inline constexpr int deprecated_builtin_code = 0, custom_code = 1, version = 2, builtin_code = 3;
}
namespace subgraph { // table SubGraph
inline constexpr int tensors = 0, inputs = 1, outputs = 2, operators = 3, name = 4;
}
namespace tensor { // table Tensor
inline constexpr int shape = 0, type = 1, buffer = 2, name = 3, quantization = 4;
}
namespace quantization { // table QuantizationParameters (details: ids 4 and 5)
inline constexpr int min = 0, max = 1, scale = 2, zero_point = 3, quantized_dimension = 6;
}
namespace op { // table Operator
inline constexpr int opcode_index = 0, inputs = 1, outputs = 2, builtin_options_type = 3, builtin_options = 4;
}
namespace buffer { // table Buffer
inline constexpr int data = 0;
}

// Option tables' fields.
namespace conv2d { // Conv2DOptions
inline constexpr int padding = 0, stride_w = 1, stride_h = 2, fused_activation_function = 3, dilation_w_factor = 4,
                     dilation_h_factor = 5;
}
namespace depthwise { // DepthwiseConv2DOptions
inline constexpr int padding = 0, stride_w = 1, stride_h = 2, depth_multiplier = 3, fused_activation_function = 4,
                     dilation_w_factor = 5, dilation_h_factor = 6;
}
namespace pool2d { // Pool2DOptions
inline constexpr int padding = 0, stride_w = 1, stride_h = 2, filter_width = 3, filter_height = 4,
                     fused_activation_function = 5;
}
namespace fully_connected { // FullyConnectedOptions
inline constexpr int fused_activation_function = 0, weights_format = 1, keep_num_dims = 2;
}
namespace softmax { // SoftmaxOptions
inline constexpr int beta = 0;
}
namespace concatenation { // ConcatenationOptions
inline constexpr int axis = 0, fused_activation_function = 1;
}
namespace add_mul { // AddOptions, SubOptions and MulOptions: the activation is field 0 of each
inline constexpr int fused_activation_function = 0;
}
namespace reshape { // ReshapeOptions
inline constexpr int new_shape = 0;
}
namespace reducer { // ReducerOptions
inline constexpr int keep_dims = 0;
}
namespace resize_nearest { // ResizeNearestNeighborOptions
inline constexpr int align_corners = 0, half_pixel_centers = 1;
}
namespace resize_bilinear { // ResizeBilinearOptions (fields 0 and 1, new_height and new_width, are deprecated)
inline constexpr int align_corners = 2, half_pixel_centers = 3;
}
namespace transpose_conv { // TransposeConvOptions (fused_activation_function: version 4 and above)
inline constexpr int padding = 0, stride_w = 1, stride_h = 2, fused_activation_function = 3;
}
namespace strided_slice { // StridedSliceOptions
inline constexpr int begin_mask = 0, end_mask = 1, ellipsis_mask = 2, new_axis_mask = 3, shrink_axis_mask = 4;
}

enum class TensorType : int8_t { Float32 = 0, Int32 = 2, Int8 = 9 };
enum class Padding : int8_t { Same = 0, Valid = 1 };
enum class Activation : int8_t { None = 0, Relu = 1, ReluN1To1 = 2, Relu6 = 3 };

enum class BuiltinOperator : int32_t {
    Add = 0,
    AveragePool2D = 1,
    Concatenation = 2,
    Conv2D = 3,
    DepthwiseConv2D = 4,
    Dequantize = 6,
    FullyConnected = 9,
    Logistic = 14,
    MaxPool2D = 17,
    Mul = 18,
    Reshape = 22,
    ResizeBilinear = 23,
    Softmax = 25,
    Pad = 34,
    Transpose = 39,
    Mean = 40,
    Sub = 41,
    StridedSlice = 45,
    PadV2 = 60,
    Slice = 65,
    TransposeConv = 67,
    ResizeNearestNeighbor = 97,
    Quantize = 114,
    HardSwish = 117,
};

// BuiltinOptions union member indices.
enum class BuiltinOptions : uint8_t {
    None = 0,
    Conv2DOptions = 1,
    DepthwiseConv2DOptions = 2,
    Pool2DOptions = 5,
    FullyConnectedOptions = 8,
    SoftmaxOptions = 9,
    ConcatenationOptions = 10,
    AddOptions = 11,
    ResizeBilinearOptions = 15,
    ReshapeOptions = 17,
    MulOptions = 21,
    PadOptions = 22,
    TransposeOptions = 26,
    ReducerOptions = 27,
    SubOptions = 28,
    StridedSliceOptions = 32,
    DequantizeOptions = 38,
    PadV2Options = 43,
    SliceOptions = 48,
    TransposeConvOptions = 49,
    ResizeNearestNeighborOptions = 74,
    QuantizeOptions = 89,
    HardSwishOptions = 91,
};

} // namespace qs::tflite
