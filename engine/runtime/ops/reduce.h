#pragma once
// Reductions: ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp
// (axes as an attribute before opset 18 — before 13 for ReduceSum — and as an
// input after; keepdims; noop_with_empty_axes) and ArgMax/ArgMin.

#include "runtime/op_registry.h"

namespace qs::ops {

void reduceMean(KernelContext& ctx);
void reduceSum(KernelContext& ctx);
void reduceMax(KernelContext& ctx);
void reduceMin(KernelContext& ctx);
void reduceProd(KernelContext& ctx);
void reduceL1(KernelContext& ctx);
void reduceL2(KernelContext& ctx);
void reduceSumSquare(KernelContext& ctx);
void reduceLogSum(KernelContext& ctx);
void reduceLogSumExp(KernelContext& ctx);
void argMax(KernelContext& ctx);
void argMin(KernelContext& ctx);

} // namespace qs::ops
