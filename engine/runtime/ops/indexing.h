#pragma once
// Kernels of the indexing family (ops/indexing.cpp): ops that select, scatter
// or generate elements by computed positions.

#include "runtime/op_registry.h"

namespace qs::ops {

void trilu(KernelContext& ctx);
void cumSum(KernelContext& ctx);
void oneHot(KernelContext& ctx);
void nonZero(KernelContext& ctx);
void compress(KernelContext& ctx);
void eyeLike(KernelContext& ctx);
void gatherND(KernelContext& ctx);
void scatterElements(KernelContext& ctx);
void scatterND(KernelContext& ctx);
void topK(KernelContext& ctx);
void reverseSequence(KernelContext& ctx);
void unique(KernelContext& ctx);

} // namespace qs::ops
