#pragma once
// Raises a model's default-domain (ai.onnx) opset, for types an older opset
// cannot hold (int4 and blocked quantization need 21). ONNX's own version
// converter (libonnx) does it as far as the library knows opsets (17 for
// libonnx 1.12); from there on the few changes of meaning between opsets 17 and
// 21 are adapted here: the Reduce ops' `axes` attribute becomes an input (18),
// GridSample's modes are renamed (20). An op whose change is not adapted
// (DFT at 20, GroupNormalization at 21) is an Error naming the node.

#include <cstdint>

#include <onnx/onnx_pb.h>

namespace qs {

// The newest ai.onnx opset the linked libonnx knows.
int64_t libonnxNewestOpset();
// The lowest IR version a model importing `opset` must declare.
int64_t irVersionForOpset(int64_t opset);

// Throws Error for a target below the model's opset or a conversion that fails.
void raiseOpset(onnx::ModelProto& model, int64_t target);

} // namespace qs
