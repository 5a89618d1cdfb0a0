#pragma once
// Kernels of the shape family (ops/shape.cpp): ops that move, select, pad or
// relabel elements without arithmetic, and the ops that compute shapes.

#include "runtime/op_registry.h"

namespace qs::ops {

void reshape(KernelContext& ctx);
void flatten(KernelContext& ctx);
void squeeze(KernelContext& ctx);
void unsqueeze(KernelContext& ctx);
void transpose(KernelContext& ctx);
void concat(KernelContext& ctx);
void split(KernelContext& ctx);
void slice(KernelContext& ctx);
void gather(KernelContext& ctx);
void gatherElements(KernelContext& ctx);
void expand(KernelContext& ctx);
void tile(KernelContext& ctx);
void shape(KernelContext& ctx);
void size(KernelContext& ctx);
void constantOfShape(KernelContext& ctx);
void range(KernelContext& ctx);
void identity(KernelContext& ctx);
void constant(KernelContext& ctx);
void cast(KernelContext& ctx);
void castLike(KernelContext& ctx);
void pad(KernelContext& ctx);
void depthToSpace(KernelContext& ctx);
void spaceToDepth(KernelContext& ctx);
void dropout(KernelContext& ctx);

} // namespace qs::ops
