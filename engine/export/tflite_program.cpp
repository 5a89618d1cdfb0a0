#include "export/tflite_program.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "export/flatbuffer.h"

namespace qs {

namespace fb = flatbuffer;
namespace tf = tflite;
using tf::BuiltinOperator;
using tf::BuiltinOptions;

const char* tfliteOperatorName(BuiltinOperator op)
{
    switch (op) {
    case BuiltinOperator::Add:
        return "ADD";
    case BuiltinOperator::AveragePool2D:
        return "AVERAGE_POOL_2D";
    case BuiltinOperator::Concatenation:
        return "CONCATENATION";
    case BuiltinOperator::Conv2D:
        return "CONV_2D";
    case BuiltinOperator::DepthwiseConv2D:
        return "DEPTHWISE_CONV_2D";
    case BuiltinOperator::Dequantize:
        return "DEQUANTIZE";
    case BuiltinOperator::FullyConnected:
        return "FULLY_CONNECTED";
    case BuiltinOperator::Logistic:
        return "LOGISTIC";
    case BuiltinOperator::MaxPool2D:
        return "MAX_POOL_2D";
    case BuiltinOperator::Mul:
        return "MUL";
    case BuiltinOperator::Reshape:
        return "RESHAPE";
    case BuiltinOperator::ResizeBilinear:
        return "RESIZE_BILINEAR";
    case BuiltinOperator::Softmax:
        return "SOFTMAX";
    case BuiltinOperator::Pad:
        return "PAD";
    case BuiltinOperator::PadV2:
        return "PADV2";
    case BuiltinOperator::Transpose:
        return "TRANSPOSE";
    case BuiltinOperator::Mean:
        return "MEAN";
    case BuiltinOperator::Sub:
        return "SUB";
    case BuiltinOperator::StridedSlice:
        return "STRIDED_SLICE";
    case BuiltinOperator::TransposeConv:
        return "TRANSPOSE_CONV";
    case BuiltinOperator::Slice:
        return "SLICE";
    case BuiltinOperator::ResizeNearestNeighbor:
        return "RESIZE_NEAREST_NEIGHBOR";
    case BuiltinOperator::Quantize:
        return "QUANTIZE";
    case BuiltinOperator::HardSwish:
        return "HARD_SWISH";
    }
    return "?";
}

int64_t TfliteProgram::TensorSpec::numel() const
{
    int64_t n = 1;
    for (int32_t d : shape)
        n *= d;
    return n;
}

namespace {

bool known(int32_t code)
{
    return std::string(tfliteOperatorName(BuiltinOperator(code))) != "?";
}

// The option table an operator of `op` carries.
BuiltinOptions optionsOf(BuiltinOperator op)
{
    switch (op) {
    case BuiltinOperator::Conv2D:
        return BuiltinOptions::Conv2DOptions;
    case BuiltinOperator::DepthwiseConv2D:
        return BuiltinOptions::DepthwiseConv2DOptions;
    case BuiltinOperator::AveragePool2D:
    case BuiltinOperator::MaxPool2D:
        return BuiltinOptions::Pool2DOptions;
    case BuiltinOperator::FullyConnected:
        return BuiltinOptions::FullyConnectedOptions;
    case BuiltinOperator::Softmax:
        return BuiltinOptions::SoftmaxOptions;
    case BuiltinOperator::Concatenation:
        return BuiltinOptions::ConcatenationOptions;
    case BuiltinOperator::Add:
        return BuiltinOptions::AddOptions;
    case BuiltinOperator::Mul:
        return BuiltinOptions::MulOptions;
    case BuiltinOperator::Sub:
        return BuiltinOptions::SubOptions;
    case BuiltinOperator::TransposeConv:
        return BuiltinOptions::TransposeConvOptions;
    case BuiltinOperator::StridedSlice:
        return BuiltinOptions::StridedSliceOptions;
    case BuiltinOperator::ResizeBilinear:
        return BuiltinOptions::ResizeBilinearOptions;
    case BuiltinOperator::Mean:
        return BuiltinOptions::ReducerOptions;
    case BuiltinOperator::ResizeNearestNeighbor:
        return BuiltinOptions::ResizeNearestNeighborOptions;
    default:
        return BuiltinOptions::None;
    }
}

void readOptions(const fb::TableView& o, TfliteProgram::Operation& op)
{
    auto act = [&](int field) { return tf::Activation(o.scalar<int8_t>(field, 0)); };
    switch (op.op) {
    case BuiltinOperator::Conv2D:
        op.padding = tf::Padding(o.scalar<int8_t>(tf::conv2d::padding, 0));
        op.strideW = o.scalar<int32_t>(tf::conv2d::stride_w, 0);
        op.strideH = o.scalar<int32_t>(tf::conv2d::stride_h, 0);
        op.activation = act(tf::conv2d::fused_activation_function);
        op.dilationW = o.scalar<int32_t>(tf::conv2d::dilation_w_factor, 1);
        op.dilationH = o.scalar<int32_t>(tf::conv2d::dilation_h_factor, 1);
        break;
    case BuiltinOperator::DepthwiseConv2D:
        op.padding = tf::Padding(o.scalar<int8_t>(tf::depthwise::padding, 0));
        op.strideW = o.scalar<int32_t>(tf::depthwise::stride_w, 0);
        op.strideH = o.scalar<int32_t>(tf::depthwise::stride_h, 0);
        op.depthMultiplier = o.scalar<int32_t>(tf::depthwise::depth_multiplier, 0);
        op.activation = act(tf::depthwise::fused_activation_function);
        op.dilationW = o.scalar<int32_t>(tf::depthwise::dilation_w_factor, 1);
        op.dilationH = o.scalar<int32_t>(tf::depthwise::dilation_h_factor, 1);
        break;
    case BuiltinOperator::AveragePool2D:
    case BuiltinOperator::MaxPool2D:
        op.padding = tf::Padding(o.scalar<int8_t>(tf::pool2d::padding, 0));
        op.strideW = o.scalar<int32_t>(tf::pool2d::stride_w, 0);
        op.strideH = o.scalar<int32_t>(tf::pool2d::stride_h, 0);
        op.filterW = o.scalar<int32_t>(tf::pool2d::filter_width, 0);
        op.filterH = o.scalar<int32_t>(tf::pool2d::filter_height, 0);
        op.activation = act(tf::pool2d::fused_activation_function);
        break;
    case BuiltinOperator::FullyConnected:
        op.activation = act(tf::fully_connected::fused_activation_function);
        op.keepDims = o.scalar<bool>(tf::fully_connected::keep_num_dims, false);
        break;
    case BuiltinOperator::Softmax:
        op.beta = o.scalar<float>(tf::softmax::beta, 0.0f);
        break;
    case BuiltinOperator::Concatenation:
        op.axis = o.scalar<int32_t>(tf::concatenation::axis, 0);
        op.activation = act(tf::concatenation::fused_activation_function);
        break;
    case BuiltinOperator::Add:
    case BuiltinOperator::Sub:
    case BuiltinOperator::Mul:
        op.activation = act(tf::add_mul::fused_activation_function);
        break;
    case BuiltinOperator::TransposeConv:
        op.padding = tf::Padding(o.scalar<int8_t>(tf::transpose_conv::padding, 0));
        op.strideW = o.scalar<int32_t>(tf::transpose_conv::stride_w, 0);
        op.strideH = o.scalar<int32_t>(tf::transpose_conv::stride_h, 0);
        op.activation = act(tf::transpose_conv::fused_activation_function);
        break;
    case BuiltinOperator::StridedSlice:
        op.masks = o.scalar<int32_t>(tf::strided_slice::begin_mask, 0) |
                   o.scalar<int32_t>(tf::strided_slice::end_mask, 0) |
                   o.scalar<int32_t>(tf::strided_slice::ellipsis_mask, 0) |
                   o.scalar<int32_t>(tf::strided_slice::new_axis_mask, 0) |
                   o.scalar<int32_t>(tf::strided_slice::shrink_axis_mask, 0);
        break;
    case BuiltinOperator::ResizeBilinear:
        op.alignCorners = o.scalar<bool>(tf::resize_bilinear::align_corners, false);
        op.halfPixelCenters = o.scalar<bool>(tf::resize_bilinear::half_pixel_centers, false);
        break;
    case BuiltinOperator::Mean:
        op.keepDims = o.scalar<bool>(tf::reducer::keep_dims, false);
        break;
    case BuiltinOperator::ResizeNearestNeighbor:
        op.alignCorners = o.scalar<bool>(tf::resize_nearest::align_corners, false);
        op.halfPixelCenters = o.scalar<bool>(tf::resize_nearest::half_pixel_centers, false);
        break;
    default:
        break;
    }
}

} // namespace

TfliteProgram TfliteProgram::read(std::span<const uint8_t> bytes, const std::string& what)
{
    const fb::Reader reader(bytes, what, tf::kFileIdentifier);
    const fb::TableView model = reader.root();
    if (model.vectorSize(tf::model::subgraphs) != 1)
        throw Error(what + ": expected one subgraph, found " + std::to_string(model.vectorSize(tf::model::subgraphs)));
    std::vector<int32_t> codes;
    for (size_t k = 0; k < model.vectorSize(tf::model::operator_codes); ++k) {
        const fb::TableView c = model.tableAt(tf::model::operator_codes, k);
        const int32_t code = std::max<int32_t>(c.scalar<int32_t>(tf::operator_code::builtin_code, 0),
                                               c.scalar<int8_t>(tf::operator_code::deprecated_builtin_code, 0));
        codes.push_back(code);
    }
    const size_t bufferCount = model.vectorSize(tf::model::buffers);
    const fb::TableView sg = model.tableAt(tf::model::subgraphs, 0);
    TfliteProgram p;
    const size_t tensorCount = sg.vectorSize(tf::subgraph::tensors);
    for (size_t k = 0; k < tensorCount; ++k) {
        const fb::TableView t = sg.tableAt(tf::subgraph::tensors, k);
        TensorSpec s;
        s.name = t.string(tf::tensor::name);
        const std::string label = what + ": tensor " + std::to_string(k) + " ('" + s.name + "')";
        const int8_t type = t.scalar<int8_t>(tf::tensor::type, 0);
        if (type != int8_t(tf::TensorType::Float32) && type != int8_t(tf::TensorType::Int8) &&
            type != int8_t(tf::TensorType::Int32))
            throw Error(label + " has type " + std::to_string(type) + "; the simulation runs float32, int8 and int32");
        s.type = tf::TensorType(type);
        s.shape = t.vector<int32_t>(tf::tensor::shape);
        int64_t n = 1;
        for (int32_t d : s.shape) {
            if (d < 0 || (d > 0 && n > (int64_t(1) << 31) / d))
                throw Error(label + " has a negative or too large shape");
            n *= d;
        }
        if (t.has(tf::tensor::quantization)) {
            const fb::TableView q = t.table(tf::tensor::quantization);
            s.scales = q.vector<float>(tf::quantization::scale);
            s.zeroPoints = q.vector<int64_t>(tf::quantization::zero_point);
            s.quantizedDimension = q.scalar<int32_t>(tf::quantization::quantized_dimension, 0);
            if (s.zeroPoints.size() != s.scales.size())
                throw Error(label + " has " + std::to_string(s.scales.size()) + " scales and " +
                            std::to_string(s.zeroPoints.size()) + " zero points");
            if (s.scales.size() > 1 && (s.quantizedDimension < 0 || size_t(s.quantizedDimension) >= s.shape.size() ||
                                        int64_t(s.scales.size()) != s.shape[size_t(s.quantizedDimension)]))
                throw Error(label + ": its per-channel scales do not run along quantized_dimension " +
                            std::to_string(s.quantizedDimension));
            for (float scale : s.scales)
                if (!(scale > 0) || !std::isfinite(scale))
                    throw Error(label + " has a scale that is not a positive finite number");
        }
        const uint32_t buffer = t.scalar<uint32_t>(tf::tensor::buffer, 0);
        if (buffer >= bufferCount)
            throw Error(label + " refers to buffer " + std::to_string(buffer) + " of " + std::to_string(bufferCount));
        if (buffer != 0) {
            const std::span<const uint8_t> data =
                model.tableAt(tf::model::buffers, buffer).vectorBytes(tf::buffer::data, 1);
            const size_t element = s.type == tf::TensorType::Int8 ? 1 : 4;
            if (!data.empty() && data.size() != size_t(n) * element)
                throw Error(label + " has " + std::to_string(data.size()) + " bytes for " + std::to_string(n) +
                            " elements");
            s.data.assign(data.begin(), data.end());
        }
        p.tensors.push_back(std::move(s));
    }
    auto checkIndices = [&](const std::vector<int32_t>& list, const std::string& label) {
        for (int32_t t : list)
            if (t < 0 || size_t(t) >= tensorCount)
                throw Error(label + " refers to tensor " + std::to_string(t) + " of " + std::to_string(tensorCount));
    };
    for (size_t k = 0; k < sg.vectorSize(tf::subgraph::operators); ++k) {
        const fb::TableView o = sg.tableAt(tf::subgraph::operators, k);
        const std::string label = what + ": operator " + std::to_string(k);
        const uint32_t index = o.scalar<uint32_t>(tf::op::opcode_index, 0);
        if (index >= codes.size())
            throw Error(label + " has opcode index " + std::to_string(index) + " of " + std::to_string(codes.size()));
        if (!known(codes[index]))
            throw Error(label + " is builtin operator " + std::to_string(codes[index]) +
                        ", which the integer simulation does not run");
        Operation op;
        op.op = BuiltinOperator(codes[index]);
        op.inputs = o.vector<int32_t>(tf::op::inputs);
        op.outputs = o.vector<int32_t>(tf::op::outputs);
        checkIndices(op.inputs, label + " (" + tfliteOperatorName(op.op) + ")");
        checkIndices(op.outputs, label + " (" + tfliteOperatorName(op.op) + ")");
        const BuiltinOptions expected = optionsOf(op.op);
        const auto type = BuiltinOptions(o.scalar<uint8_t>(tf::op::builtin_options_type, 0));
        if (expected != BuiltinOptions::None) {
            if (type != expected || !o.has(tf::op::builtin_options))
                throw Error(label + " (" + tfliteOperatorName(op.op) + ") lacks its options table");
            readOptions(o.table(tf::op::builtin_options), op);
        }
        p.operations.push_back(std::move(op));
    }
    p.inputs = sg.vector<int32_t>(tf::subgraph::inputs);
    p.outputs = sg.vector<int32_t>(tf::subgraph::outputs);
    checkIndices(p.inputs, what + ": the subgraph's inputs");
    checkIndices(p.outputs, what + ": the subgraph's outputs");
    return p;
}

std::vector<int32_t> TfliteProgram::TensorSpec::int32Values() const
{
    std::vector<int32_t> v(data.size() / 4);
    if (!v.empty())
        std::memcpy(v.data(), data.data(), v.size() * 4);
    return v;
}

TfliteMeanReduction tfliteMeanReduction(const TfliteProgram::Operation& op,
                                        const std::vector<TfliteProgram::TensorSpec>& tensors)
{
    const TfliteProgram::TensorSpec& in = tensors[size_t(op.inputs[0])];
    const int rank = int(in.shape.size());
    std::vector<bool> reduced(size_t(rank), false);
    for (int32_t a : tensors[size_t(op.inputs[1])].int32Values())
        reduced.at(size_t(a < 0 ? a + rank : a)) = true;
    TfliteMeanReduction r;
    std::vector<int64_t> outStrides(size_t(rank), 0);
    int64_t stride = 1;
    for (int k = rank - 1; k >= 0; --k) {
        if (reduced[size_t(k)]) {
            r.count *= in.shape[size_t(k)];
        } else {
            outStrides[size_t(k)] = stride;
            stride *= in.shape[size_t(k)];
        }
    }
    r.outputOf.resize(size_t(in.numel()));
    std::vector<int32_t> index(size_t(rank), 0);
    for (size_t i = 0; i < r.outputOf.size(); ++i) {
        int64_t o = 0;
        for (int k = 0; k < rank; ++k)
            o += index[size_t(k)] * outStrides[size_t(k)];
        r.outputOf[i] = o;
        for (int k = rank; k-- > 0;) {
            if (++index[size_t(k)] < in.shape[size_t(k)])
                break;
            index[size_t(k)] = 0;
        }
    }
    return r;
}

} // namespace qs
