#include "runtime/ops/conv_transpose.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <vector>

#include "core/scratch.h"
#include "gemm/sgemm.h"
#include "runtime/ops/conv_plan.h"

namespace qs::ops {

void convTranspose(KernelContext& ctx)
{
    const Tensor& X = ctx.floatInput(0);
    const Tensor& Wt = ctx.floatInput(1);
    const Tensor* B = ctx.optionalInput(2);
    if (X.rank() < 3 || Wt.rank() != X.rank())
        ctx.fail("X " + shapeToString(X.shape()) + " and W " + shapeToString(Wt.shape()) +
                 " must both be [N, C, spatial...] and [C, M/group, kernel...]");
    const size_t rank = size_t(X.rank() - 2);
    const int64_t N = X.dim(0), C = X.dim(1);
    const int64_t group = ctx.intAttribute("group", 1);
    if (group < 1 || C % group != 0 || Wt.dim(0) != C)
        ctx.fail("group " + std::to_string(group) + " does not fit X " + shapeToString(X.shape()) + " and W " +
                 shapeToString(Wt.shape()));
    const int64_t Mg = Wt.dim(1), M = Mg * group, Cg = C / group;
    if (B && (B->dtype() != DType::F32 || B->numel() != M))
        ctx.fail("B must be float32 with " + std::to_string(M) + " values");
    const std::vector<int64_t> kernel = spatialOf(Wt.shape()), input = spatialOf(X.shape());
    if (auto ks = ctx.optionalIntsAttribute("kernel_shape"); ks && *ks != kernel)
        ctx.fail("kernel_shape does not match W " + shapeToString(Wt.shape()));
    const auto strides = ctx.intsAttribute("strides", std::vector<int64_t>(rank, 1));
    const auto dilations = ctx.intsAttribute("dilations", std::vector<int64_t>(rank, 1));
    const auto outputPadding = ctx.intsAttribute("output_padding", std::vector<int64_t>(rank, 0));
    if (strides.size() != rank || dilations.size() != rank || outputPadding.size() != rank)
        ctx.fail("strides, dilations and output_padding need one value per spatial axis");
    const std::string autoPad = ctx.stringAttribute("auto_pad", "NOTSET");
    auto outputShape = ctx.optionalIntsAttribute("output_shape");
    if (outputShape && outputShape->size() == rank + 2)
        outputShape = std::vector<int64_t>(outputShape->begin() + 2, outputShape->end());
    if (outputShape && outputShape->size() != rank)
        ctx.fail("output_shape needs one value per spatial axis");

    std::vector<int64_t> padBegin(rank, 0), out(rank, 0);
    const auto pads = ctx.intsAttribute("pads", std::vector<int64_t>(2 * rank, 0));
    if (pads.size() != 2 * rank)
        ctx.fail("pads needs " + std::to_string(2 * rank) + " values (begins, then ends)");
    for (size_t d = 0; d < rank; ++d) {
        if (strides[d] < 1 || dilations[d] < 1)
            ctx.fail("strides and dilations must be positive");
        const int64_t full = strides[d] * (input[d] - 1) + outputPadding[d] + (kernel[d] - 1) * dilations[d] + 1;
        const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
        if (outputShape || same) {
            out[d] = outputShape ? (*outputShape)[d] : input[d] * strides[d];
            const int64_t total = full - out[d];
            // ONNX: SAME_UPPER puts the smaller half first, everything else the larger; halves
            // round down as Python's // does, so a negative total (output_shape larger than
            // the natural size) grows the end and keeps the start.
            const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
            padBegin[d] = autoPad == "SAME_UPPER" ? half : total - half;
        } else {
            if (autoPad != "NOTSET" && autoPad != "VALID")
                ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
            if (autoPad == "NOTSET")
                padBegin[d] = pads[d];
            out[d] = full - (autoPad == "NOTSET" ? pads[d] + pads[d + rank] : 0);
        }
        if (out[d] < 1)
            ctx.fail("the output would have no elements on spatial axis " + std::to_string(d));
    }

    Shape yShape{N, M};
    yShape.insert(yShape.end(), out.begin(), out.end());
    Tensor Y(DType::F32, yShape);
    const float* x = X.values<float>().data();
    const float* w = Wt.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    const int64_t inSpatial = shapeElementCount(input), outSpatial = shapeElementCount(out),
                  kernelSize = shapeElementCount(kernel);
    const int64_t rows = Mg * kernelSize;

    // Tasks: (batch, group, block of output channels). A block's rows of
    // col = W^T X ([channels * kernel, input positions]) scatter into its own
    // output channels only, so blocks never write the same element.
    const int64_t wantedBlocks =
        (kConvTasksPerThread * tbb::this_task_arena::max_concurrency() + N * group - 1) / (N * group);
    const int64_t mBlock = std::max<int64_t>(1, (Mg + wantedBlocks - 1) / wantedBlocks);
    const int64_t blocks = (Mg + mBlock - 1) / mBlock;
    tbb::parallel_for(int64_t(0), N * group * blocks, [&](int64_t task) {
        ctx.checkCancelled();
        const int64_t ng = task / blocks, m0 = (task % blocks) * mBlock, m1 = std::min(Mg, m0 + mBlock);
        const int64_t n = ng / group, gi = ng % group;
        // col = (the block's columns of W_g)^T X_g, on the packed GEMM.
        const float* wg = w + gi * Cg * rows + m0 * kernelSize;
        const float* xg = x + (n * C + gi * Cg) * inSpatial;
        thread_local std::vector<float> colBuffer;
        float* col = growScratch(colBuffer, size_t((m1 - m0) * kernelSize * inSpatial));
        gemm::sgemm(true, false, (m1 - m0) * kernelSize, inSpatial, Cg, 1.0f, wg, rows, xg, inSpatial, col, inSpatial);
        float* yg = y + (n * M + gi * Mg) * outSpatial;
        for (int64_t m = m0; m < m1; ++m) {
            const float bias = B ? B->values<float>()[size_t(gi * Mg + m)] : 0.0f;
            std::fill(yg + m * outSpatial, yg + (m + 1) * outSpatial, bias);
        }
        if (rank == 2) {
            // Each row of col adds one input row's values into one output
            // row, every stride-th column from a fixed start: the columns
            // inside the output are worked out once per row of col.
            const int64_t IH = input[0], IW = input[1], OH = out[0], OW = out[1];
            for (int64_t r = m0 * kernelSize; r < m1 * kernelSize; ++r) {
                const int64_t m = r / kernelSize, kh = r % kernelSize / kernel[1], kw = r % kernel[1];
                const float* src = col + (r - m0 * kernelSize) * inSpatial;
                float* dst = yg + m * outSpatial;
                const int64_t columnStart = kw * dilations[1] - padBegin[1];
                // Input columns iw with 0 <= iw * s + columnStart < OW.
                const int64_t iw0 = columnStart >= 0 ? 0 : (-columnStart + strides[1] - 1) / strides[1];
                const int64_t iw1 =
                    std::clamp<int64_t>(OW - columnStart > 0 ? (OW - columnStart - 1) / strides[1] + 1 : 0, iw0, IW);
                for (int64_t ih = 0; ih < IH; ++ih) {
                    const int64_t oh = ih * strides[0] - padBegin[0] + kh * dilations[0];
                    if (oh < 0 || oh >= OH)
                        continue;
                    const float* in = src + ih * IW;
                    float* outRow = dst + oh * OW + columnStart;
                    const int64_t s = strides[1];
                    for (int64_t iw = iw0; iw < iw1; ++iw)
                        outRow[iw * s] += in[iw];
                }
            }
            return;
        }
        std::vector<int64_t> k(rank), i(rank);
        for (int64_t r = m0 * kernelSize; r < m1 * kernelSize; ++r) {
            const int64_t m = r / kernelSize;
            int64_t rem = r % kernelSize;
            for (size_t d = rank; d-- > 0;) {
                k[d] = rem % kernel[d];
                rem /= kernel[d];
            }
            std::fill(i.begin(), i.end(), 0);
            const float* src = col + (r - m0 * kernelSize) * inSpatial;
            float* dst = yg + m * outSpatial;
            for (int64_t p = 0; p < inSpatial; ++p) {
                int64_t offset = 0;
                bool inside = true;
                for (size_t d = 0; d < rank; ++d) {
                    const int64_t o = i[d] * strides[d] - padBegin[d] + k[d] * dilations[d];
                    inside = inside && o >= 0 && o < out[d];
                    offset = offset * out[d] + o;
                }
                if (inside)
                    dst[offset] += src[p];
                for (size_t d = rank; d-- > 0;) {
                    if (++i[d] < input[d])
                        break;
                    i[d] = 0;
                }
            }
        }
    });
    ctx.setOutput(0, std::move(Y));
}

} // namespace qs::ops
