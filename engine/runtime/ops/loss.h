#pragma once
// Kernels of the loss family (ops/loss.cpp): the classification losses ONNX
// defines, so exported training graphs and their evaluation heads run too.

#include "runtime/op_registry.h"

namespace qs::ops {

void negativeLogLikelihoodLoss(KernelContext& ctx);
void softmaxCrossEntropyLoss(KernelContext& ctx);

} // namespace qs::ops
