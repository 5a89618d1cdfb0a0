#include "runtime/ops/pooling.h"

#include <cmath>
#include <limits>
#include <tbb/parallel_for.h>

#include "runtime/ops/conv.h"
#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

enum class Pool { Max, Average, Lp };

const Tensor& spatialInput(const KernelContext& ctx, bool integersAllowed = false)
{
    const Tensor& X = ctx.input(0);
    const bool smallInteger = X.dtype() == DType::I8 || X.dtype() == DType::U8;
    if (X.dtype() != DType::F32 && !(integersAllowed && smallInteger))
        ctx.fail("input must be float32, not " + std::string(dtypeName(X.dtype())));
    if (X.rank() < 3)
        ctx.fail("input " + shapeToString(X.shape()) + " must be [N, C, spatial...]");
    return X;
}

int64_t product(const std::vector<int64_t>& v)
{
    int64_t p = 1;
    for (int64_t x : v)
        p *= x;
    return p;
}

void runPool(KernelContext& ctx, Pool kind)
{
    // MaxPool also takes int8/uint8: every such value is exact in float32 and a max picks one of them.
    const Tensor& original = spatialInput(ctx, kind == Pool::Max);
    const Tensor X = castTensor(original, DType::F32);
    const size_t rank = size_t(X.rank() - 2);
    const std::vector<int64_t> input(X.shape().begin() + 2, X.shape().end());
    const std::vector<int64_t> kernel = ctx.intsAttribute("kernel_shape");
    if (kernel.size() != rank)
        ctx.fail("kernel_shape needs " + std::to_string(rank) + " values, one per spatial axis");
    const bool ceilMode = ctx.intAttribute("ceil_mode", 0) != 0;
    const WindowGeometry g = resolveWindow(ctx, input, kernel, ceilMode, true);
    const bool includePad = ctx.intAttribute("count_include_pad", 0) != 0;
    const float p = float(ctx.intAttribute("p", 2));
    const bool columnMajor = ctx.intAttribute("storage_order", 0) != 0;
    const bool wantIndices = kind == Pool::Max && ctx.wantsOutput(1);

    const int64_t N = X.dim(0), C = X.dim(1);
    Shape yShape{N, C};
    yShape.insert(yShape.end(), g.output.begin(), g.output.end());
    Tensor Y(DType::F32, yShape);
    Tensor I = wantIndices ? Tensor(DType::I64, yShape) : Tensor();
    const int64_t inSpatial = product(input), outSpatial = product(g.output), windowSize = product(kernel);
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    int64_t* indices = wantIndices ? I.mutableValues<int64_t>().data() : nullptr;

    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const float* xc = x + nc * inSpatial;
        std::vector<int64_t> o(rank, 0), k(rank);
        for (int64_t op = 0; op < outSpatial; ++op) {
            float best = -std::numeric_limits<float>::infinity();
            int64_t bestOffset = -1;
            double sum = 0.0;
            int64_t inside = 0, padded = 0;
            std::fill(k.begin(), k.end(), 0);
            for (int64_t w = 0; w < windowSize; ++w) {
                int64_t offset = 0;
                bool in = true, inPadded = true;
                for (size_t d = 0; d < rank; ++d) {
                    const int64_t i = o[d] * g.strides[d] - g.padBegin[d] + k[d] * g.dilations[d];
                    in = in && i >= 0 && i < input[d];
                    inPadded = inPadded && i < input[d] + g.padEnd[d];
                    offset = offset * input[d] + i;
                }
                padded += inPadded;
                if (in) {
                    ++inside;
                    const float v = xc[offset];
                    if (kind == Pool::Max) {
                        if (v > best || bestOffset < 0) {
                            best = v;
                            bestOffset = offset;
                        }
                    } else if (kind == Pool::Average) {
                        sum += v;
                    } else {
                        sum += std::pow(std::fabs(double(v)), double(p));
                    }
                }
                for (size_t d = rank; d-- > 0;) {
                    if (++k[d] < kernel[d])
                        break;
                    k[d] = 0;
                }
            }
            float result = 0.0f;
            if (kind == Pool::Max)
                result = best;
            else if (kind == Pool::Average)
                result = inside == 0 ? 0.0f : float(sum / double(includePad ? padded : inside));
            else
                result = float(std::pow(sum, 1.0 / double(p)));
            y[nc * outSpatial + op] = result;
            if (indices) {
                // Flat index into X; storage_order 1 counts the spatial axes column-major.
                int64_t spatial = bestOffset;
                if (columnMajor && bestOffset >= 0) {
                    int64_t rem = bestOffset, stride = 1;
                    spatial = 0;
                    std::vector<int64_t> coord(rank);
                    for (size_t d = rank; d-- > 0;) {
                        coord[d] = rem % input[d];
                        rem /= input[d];
                    }
                    for (size_t d = 0; d < rank; ++d) {
                        spatial += coord[d] * stride;
                        stride *= input[d];
                    }
                }
                indices[nc * outSpatial + op] = nc * inSpatial + spatial;
            }
            for (size_t d = rank; d-- > 0;) {
                if (++o[d] < g.output[d])
                    break;
                o[d] = 0;
            }
        }
    });
    ctx.setOutput(0, castTensor(Y, original.dtype()));
    if (wantIndices)
        ctx.setOutput(1, std::move(I));
}

void runGlobalPool(KernelContext& ctx, Pool kind)
{
    const Tensor& X = spatialInput(ctx);
    const int64_t N = X.dim(0), C = X.dim(1), spatial = X.numel() / std::max<int64_t>(1, N * C);
    const double p = double(ctx.intAttribute("p", 2));
    Shape yShape{N, C};
    yShape.resize(size_t(X.rank()), 1);
    Tensor Y(DType::F32, yShape);
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const float* xc = x + nc * spatial;
        if (kind == Pool::Max) {
            float best = -std::numeric_limits<float>::infinity();
            for (int64_t i = 0; i < spatial; ++i)
                best = std::max(best, xc[i]);
            y[nc] = best;
            return;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < spatial; ++i)
            sum += kind == Pool::Average ? double(xc[i]) : std::pow(std::fabs(double(xc[i])), p);
        y[nc] = kind == Pool::Average ? float(sum / double(spatial)) : float(std::pow(sum, 1.0 / p));
    });
    ctx.setOutput(0, std::move(Y));
}

} // namespace

void maxPool(KernelContext& ctx) { runPool(ctx, Pool::Max); }
void averagePool(KernelContext& ctx) { runPool(ctx, Pool::Average); }
void lpPool(KernelContext& ctx) { runPool(ctx, Pool::Lp); }
void globalAveragePool(KernelContext& ctx) { runGlobalPool(ctx, Pool::Average); }
void globalMaxPool(KernelContext& ctx) { runGlobalPool(ctx, Pool::Max); }
void globalLpPool(KernelContext& ctx) { runGlobalPool(ctx, Pool::Lp); }

} // namespace qs::ops
