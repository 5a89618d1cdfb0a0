// The op table: every op the runtime can run, one line each. This list is the
// single source of truth for "supported ops" (unsupportedOps, the CLI's
// inspect, docs/conformance.md all read it through opKernelTable()).
// Opset ranges are those where the op's semantics match what the kernel does;
// a kernel that handles several versions reads ctx.opset().

#include "runtime/op_registry.h"
#include "runtime/ops/control_flow.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/conv_integer.h"
#include "runtime/ops/conv_transpose.h"
#include "runtime/ops/detection.h"
#include "runtime/ops/einsum.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/gemm_matmul.h"
#include "runtime/ops/grid_sample.h"
#include "runtime/ops/indexing.h"
#include "runtime/ops/linalg.h"
#include "runtime/ops/loss.h"
#include "runtime/ops/matmul_nbits.h"
#include "runtime/ops/normalization.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/quantize_linear.h"
#include "runtime/ops/recurrent.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/resize.h"
#include "runtime/ops/shape.h"
#include "runtime/ops/signal.h"
#include "runtime/ops/softmax.h"

namespace qs {

namespace {

constexpr int L = kLatestOpset;

constexpr OpKernelEntry kTable[] = {
    // ops/elementwise.cpp
    {"", "Add", 6, L, ops::add},
    {"", "Sub", 6, L, ops::sub},
    {"", "Mul", 6, L, ops::mul},
    {"", "Div", 6, L, ops::div},
    {"", "Pow", 1, L, ops::pow},
    {"", "Mod", 10, L, ops::mod},
    {"", "Min", 6, L, ops::min},
    {"", "Max", 6, L, ops::max},
    {"", "Sum", 6, L, ops::sum},
    {"", "Mean", 6, L, ops::mean},
    {"", "PRelu", 6, L, ops::prelu},
    {"", "BitShift", 11, L, ops::bitShift},
    {"", "Neg", 6, L, ops::neg},
    {"", "Abs", 6, L, ops::abs},
    {"", "Sqrt", 6, L, ops::sqrt},
    {"", "Reciprocal", 6, L, ops::reciprocal},
    {"", "Exp", 6, L, ops::exp},
    {"", "Log", 6, L, ops::log},
    {"", "Erf", 9, L, ops::erf},
    {"", "Tanh", 6, L, ops::tanh},
    {"", "Sigmoid", 6, L, ops::sigmoid},
    {"", "Relu", 6, L, ops::relu},
    {"", "LeakyRelu", 6, L, ops::leakyRelu},
    {"", "Elu", 6, L, ops::elu},
    {"", "Selu", 6, L, ops::selu},
    {"", "Celu", 12, L, ops::celu},
    {"", "HardSigmoid", 6, L, ops::hardSigmoid},
    {"", "HardSwish", 14, L, ops::hardSwish},
    {"", "Softplus", 1, L, ops::softplus},
    {"", "Softsign", 1, L, ops::softsign},
    {"", "ThresholdedRelu", 10, L, ops::thresholdedRelu},
    {"", "Mish", 18, L, ops::mish},
    {"", "Shrink", 9, L, ops::shrink},
    {"", "Gelu", 20, L, ops::gelu},
    {"", "Clip", 6, L, ops::clip},
    {"", "Floor", 6, L, ops::floor},
    {"", "Ceil", 6, L, ops::ceil},
    {"", "Round", 11, L, ops::round},
    {"", "Sign", 9, L, ops::sign},
    {"", "Sin", 7, L, ops::sin},
    {"", "Cos", 7, L, ops::cos},
    {"", "Tan", 7, L, ops::tan},
    {"", "Asin", 7, L, ops::asin},
    {"", "Acos", 7, L, ops::acos},
    {"", "Atan", 7, L, ops::atan},
    {"", "Sinh", 9, L, ops::sinh},
    {"", "Cosh", 9, L, ops::cosh},
    {"", "Asinh", 9, L, ops::asinh},
    {"", "Acosh", 9, L, ops::acosh},
    {"", "Atanh", 9, L, ops::atanh},
    {"", "Where", 9, L, ops::where},
    {"", "Equal", 7, L, ops::equal},
    {"", "Less", 7, L, ops::less},
    {"", "LessOrEqual", 12, L, ops::lessOrEqual},
    {"", "Greater", 7, L, ops::greater},
    {"", "GreaterOrEqual", 12, L, ops::greaterOrEqual},
    {"", "Not", 1, L, ops::logicalNot},
    {"", "And", 7, L, ops::logicalAnd},
    {"", "Or", 7, L, ops::logicalOr},
    {"", "Xor", 7, L, ops::logicalXor},
    {"", "IsNaN", 9, L, ops::isNaN},
    {"", "IsInf", 10, L, ops::isInf},
    // ops/shape.cpp
    {"", "Reshape", 5, L, ops::reshape},
    {"", "Flatten", 1, L, ops::flatten},
    {"", "Squeeze", 1, L, ops::squeeze},
    {"", "Unsqueeze", 1, L, ops::unsqueeze},
    {"", "Transpose", 1, L, ops::transpose},
    {"", "Concat", 4, L, ops::concat},
    {"", "Split", 2, L, ops::split},
    {"", "Slice", 1, L, ops::slice},
    {"", "Gather", 1, L, ops::gather},
    {"", "GatherElements", 11, L, ops::gatherElements},
    {"", "Expand", 8, L, ops::expand},
    {"", "Tile", 6, L, ops::tile},
    {"", "Shape", 1, L, ops::shape},
    {"", "Size", 1, L, ops::size},
    {"", "ConstantOfShape", 9, L, ops::constantOfShape},
    {"", "Range", 11, L, ops::range},
    {"", "Identity", 1, L, ops::identity},
    {"", "Constant", 1, L, ops::constant},
    {"", "Cast", 6, L, ops::cast},
    {"", "CastLike", 15, L, ops::castLike},
    {"", "Pad", 2, L, ops::pad},
    {"", "DepthToSpace", 1, L, ops::depthToSpace},
    {"", "SpaceToDepth", 1, L, ops::spaceToDepth},
    {"", "Dropout", 7, L, ops::dropout},
    // ops/detection.cpp
    {"", "NonMaxSuppression", 10, L, ops::nonMaxSuppression},
    // ops/einsum.cpp
    {"", "Einsum", 12, L, ops::einsum},
    // ops/grid_sample.cpp
    {"", "GridSample", 16, L, ops::gridSample},
    // ops/indexing.cpp
    {"", "Trilu", 14, L, ops::trilu},
    {"", "CumSum", 11, L, ops::cumSum},
    {"", "OneHot", 9, L, ops::oneHot},
    {"", "NonZero", 9, L, ops::nonZero},
    {"", "Compress", 9, L, ops::compress},
    {"", "EyeLike", 9, L, ops::eyeLike},
    {"", "GatherND", 11, L, ops::gatherND},
    {"", "Scatter", 9, 10, ops::scatterElements},
    {"", "ScatterElements", 11, L, ops::scatterElements},
    {"", "ScatterND", 11, L, ops::scatterND},
    {"", "TopK", 1, L, ops::topK},
    {"", "ReverseSequence", 10, L, ops::reverseSequence},
    {"", "Unique", 11, L, ops::unique},
    // ops/linalg.cpp
    {"", "Det", 11, L, ops::det},
    // ops/loss.cpp
    {"", "NegativeLogLikelihoodLoss", 12, L, ops::negativeLogLikelihoodLoss},
    {"", "SoftmaxCrossEntropyLoss", 12, L, ops::softmaxCrossEntropyLoss},
    // ops/signal.cpp
    {"", "HannWindow", 17, L, ops::hannWindow},
    {"", "HammingWindow", 17, L, ops::hammingWindow},
    {"", "BlackmanWindow", 17, L, ops::blackmanWindow},
    // ops/resize.cpp
    {"", "Resize", 10, L, ops::resize},
    {"", "Upsample", 7, 9, ops::upsample},
    // ops/conv.cpp
    {"", "Conv", 1, L, ops::conv, true, ops::convOutputShape},
    // ops/conv_integer.cpp
    {"", "ConvInteger", 10, L, ops::convInteger},
    {"", "QLinearConv", 10, L, ops::qLinearConv},
    // ops/conv_transpose.cpp
    {"", "ConvTranspose", 1, L, ops::convTranspose},
    // ops/gemm_matmul.cpp
    {"", "Gemm", 7, L, ops::gemm},
    {"", "MatMul", 1, L, ops::matMul},
    {"", "MatMulInteger", 10, L, ops::matMulInteger},
    {"", "QLinearMatMul", 10, L, ops::qLinearMatMul},
    // ops/matmul_nbits.cpp
    {"com.microsoft", "MatMulNBits", 1, 1, ops::matMulNBits},
    // ops/pooling.cpp
    {"", "MaxPool", 1, L, ops::maxPool},
    {"", "AveragePool", 1, L, ops::averagePool},
    {"", "LpPool", 2, L, ops::lpPool},
    {"", "GlobalAveragePool", 1, L, ops::globalAveragePool},
    {"", "GlobalMaxPool", 1, L, ops::globalMaxPool},
    {"", "GlobalLpPool", 2, L, ops::globalLpPool},
    // ops/normalization.cpp
    {"", "BatchNormalization", 9, L, ops::batchNormalization},
    {"", "LayerNormalization", 17, L, ops::layerNormalization},
    {"", "InstanceNormalization", 6, L, ops::instanceNormalization},
    {"", "GroupNormalization", 18, L, ops::groupNormalization},
    {"", "LRN", 1, L, ops::lrn},
    // ops/softmax.cpp
    {"", "Softmax", 1, L, ops::softmax},
    {"", "LogSoftmax", 1, L, ops::logSoftmax},
    {"", "Hardmax", 1, L, ops::hardmax},
    // ops/reduce.cpp
    {"", "ReduceMean", 1, L, ops::reduceMean},
    {"", "ReduceSum", 1, L, ops::reduceSum},
    {"", "ReduceMax", 1, L, ops::reduceMax},
    {"", "ReduceMin", 1, L, ops::reduceMin},
    {"", "ReduceProd", 1, L, ops::reduceProd},
    {"", "ReduceL1", 1, L, ops::reduceL1},
    {"", "ReduceL2", 1, L, ops::reduceL2},
    {"", "ReduceSumSquare", 1, L, ops::reduceSumSquare},
    {"", "ReduceLogSum", 1, L, ops::reduceLogSum},
    {"", "ReduceLogSumExp", 1, L, ops::reduceLogSumExp},
    {"", "ArgMax", 1, L, ops::argMax},
    {"", "ArgMin", 1, L, ops::argMin},
    // ops/recurrent.cpp
    {"", "LSTM", 7, L, ops::lstm},
    {"", "GRU", 7, L, ops::gru},
    {"", "RNN", 7, L, ops::rnn},
    // ops/control_flow.cpp
    {"", "If", 1, L, ops::ifOp},
    {"", "Loop", 1, L, ops::loop},
    {"", "Scan", 8, L, ops::scan},
    // ops/quantize_linear.cpp
    {"", "QuantizeLinear", 10, L, ops::quantizeLinear},
    {"", "DequantizeLinear", 10, L, ops::dequantizeLinear},
    {"", "DynamicQuantizeLinear", 11, L, ops::dynamicQuantizeLinear},
};

} // namespace

std::span<const OpKernelEntry> opKernelTable()
{
    return kTable;
}

} // namespace qs
