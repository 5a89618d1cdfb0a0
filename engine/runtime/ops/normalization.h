#pragma once
// Normalizations: BatchNormalization (inference and training mode), LayerNormalization,
// InstanceNormalization, GroupNormalization and LRN.

#include "runtime/op_registry.h"

namespace qs::ops {

void batchNormalization(KernelContext& ctx);
void layerNormalization(KernelContext& ctx);
void instanceNormalization(KernelContext& ctx);
void groupNormalization(KernelContext& ctx);
void lrn(KernelContext& ctx);

} // namespace qs::ops
