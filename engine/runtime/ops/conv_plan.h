#pragma once
// What the convolution kernels (conv.cpp, conv_integer.cpp, conv_transpose.cpp,
// sub_plane_conv.cpp) share: the checked shapes of a Conv-like node.

#include <cstdint>
#include <optional>
#include <vector>

#include "gemm/sgemm.h"
#include "runtime/ops/activation.h"
#include "runtime/ops/window_geometry.h"

namespace qs::ops {

// Tasks per thread a convolution kernel aims for: enough to balance uneven
// tasks. (Four made every zoo model 1-4% slower on 2 threads, fastest of 180
// to 300 runs each: mobilenet_v2 1.106 -> 1.065 ms at batch 1, resnet18
// 18.56 -> 18.14 at batch 8; each task also packs or fills its inputs.)
inline constexpr int64_t kConvTasksPerThread = 2;

// Shapes of a Conv or ConvInteger node, checked.
struct ConvPlan {
    int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
    std::vector<int64_t> kernel;
    WindowGeometry g;
    Shape outputShape;
};

// Where a convolution writes its output: image n's [M, spatial...] values at
// image(n), contiguous. imageStride is M x the spatial size for an output
// of its own, more when the conv writes its slice of a Concat's output along
// channels (OutputPlacement). A residual Add's addend is never placed: an
// output offset (dst - data) is its offset in the addend.
struct ConvOutput {
    float* data = nullptr;
    int64_t imageStride = 0;
    float* image(int64_t n) const { return data + n * imageStride; }
};

// A conv's bias, folded residual and activation as the product's store
// epilogue (finishOutputs' steps, the same bits), when the activation is one
// the micro-kernels apply (Relu, Clip) or none; else nullopt.
std::optional<gemm::Epilogue> storeEpilogue(const float* bias, const float* addend,
                                            const FusedActivation* activation);

// Checks X [N, C, spatial...] and W [M, C/group, kernel...] of a Conv or
// ConvInteger node against each other and the node's attributes; errors name
// the node and what does not fit.
ConvPlan planConv(const KernelContext& ctx, const Tensor& X, const Tensor& Wt);

// The spatial axes of an [N, C, spatial...] shape.
inline std::vector<int64_t> spatialOf(const Shape& shape)
{
    return {shape.begin() + 2, shape.end()};
}

} // namespace qs::ops
