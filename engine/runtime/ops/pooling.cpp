#include "runtime/ops/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/scratch.h"
#include "core/vector_clones.h"
#include "runtime/ops/depthwise_conv.h"
#include "runtime/ops/window_geometry.h"
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

// The taps of each output row's (axis 0) or column's (axis 1) windows that lie
// inside the input, [lo, hi), and inside the padded input, [lo, padded):
// computed once per node, not per plane (their divisions took longer than a
// small plane's maxima: 256 planes of 11 x 11, 3 x 3 at stride 2).
struct WindowTaps {
    int64_t lo, hi, padded;
};
std::vector<WindowTaps> windowTaps(const WindowGeometry& g, size_t axis)
{
    std::vector<WindowTaps> taps(size_t(g.output[axis]));
    for (int64_t o = 0; o < g.output[axis]; ++o) {
        const int64_t start = o * g.strides[axis] - g.padBegin[axis];
        const auto [lo, hi] = stepsInside(start, g.dilations[axis], g.input[axis], g.kernel[axis]);
        taps[size_t(o)] = {lo, hi,
                           stepsInside(start, g.dilations[axis], g.input[axis] + g.padEnd[axis], g.kernel[axis]).second};
    }
    return taps;
}

// Two spatial axes: each window's in-bounds taps come from rowTaps and
// columnTaps (windowTaps of axes 0 and 1), so the inner loops have no bounds checks.
QS_VECTOR_CLONES void pool2d(const float* xc, const WindowGeometry& g, const WindowTaps* rowTaps,
                             const WindowTaps* columnTaps, Pool kind, bool includePad, float p, bool columnMajor,
                             int64_t indexBase, float* y, int64_t* indices)
{
    const int64_t H = g.input[0], W = g.input[1];
    const WindowTaps* columns = columnTaps;
    if (kind == Pool::Max && !indices && g.dilations[1] == 1) {
        // No index asked for: separable. Per output row, the maximum over its
        // window's input rows first (whole rows, a loop that vectorizes), then
        // each output the maximum of its columns: the strided reads run on
        // output rows only, a quarter of the taps of a 3 x 3 stride-2 window.
        const int64_t OW = g.output[1], sw = g.strides[1], KW = g.kernel[1];
        thread_local std::vector<float> columnMax;
        growScratch(columnMax, size_t(W));
        // Interior windows: all KW taps inside the row.
        const int64_t owLo = std::min(OW, (g.padBegin[1] + sw - 1) / sw);
        const int64_t owHi =
            std::max(owLo, std::min(OW, W + g.padBegin[1] - KW >= 0 ? (W + g.padBegin[1] - KW) / sw + 1 : 0));
        for (int64_t oh = 0; oh < g.output[0]; ++oh) {
            const int64_t hStart = oh * g.strides[0] - g.padBegin[0];
            const int64_t khLo = rowTaps[oh].lo, khHi = rowTaps[oh].hi;
            float* m = columnMax.data();
            // The window's rows in one pass where it has two or three (the
            // common windows), else row after row.
            auto row = [&](int64_t kh) { return xc + (hStart + kh * g.dilations[0]) * W; };
            if (khHi - khLo == 3) {
                const float *a = row(khLo), *b = row(khLo + 1), *c = row(khLo + 2);
                for (int64_t w = 0; w < W; ++w)
                    m[w] = std::max(std::max(a[w], b[w]), c[w]);
            } else if (khHi - khLo == 2) {
                const float *a = row(khLo), *b = row(khLo + 1);
                for (int64_t w = 0; w < W; ++w)
                    m[w] = std::max(a[w], b[w]);
            } else {
                std::fill(m, m + W, -std::numeric_limits<float>::infinity());
                for (int64_t kh = khLo; kh < khHi; ++kh) {
                    const float* xr = row(kh);
                    for (int64_t w = 0; w < W; ++w)
                        m[w] = std::max(m[w], xr[w]);
                }
            }
            const float* mr = m - g.padBegin[1];
            float* yr = y + oh * OW;
            auto edge = [&](int64_t ow) {
                float best = -std::numeric_limits<float>::infinity();
                for (int64_t kw = columns[ow].lo; kw < columns[ow].hi; ++kw)
                    best = std::max(best, mr[ow * sw + kw]);
                yr[ow] = best;
            };
            for (int64_t ow = 0; ow < owLo; ++ow)
                edge(ow);
            // Interior columns: the common windows in one pass (a constant
            // stride vectorizes), others tap after tap.
            if (KW == 3 && sw == 2) {
                for (int64_t ow = owLo; ow < owHi; ++ow)
                    yr[ow] = std::max(std::max(mr[ow * 2], mr[ow * 2 + 1]), mr[ow * 2 + 2]);
            } else if (KW == 2 && sw == 2) {
                for (int64_t ow = owLo; ow < owHi; ++ow)
                    yr[ow] = std::max(mr[ow * 2], mr[ow * 2 + 1]);
            } else if (KW == 3 && sw == 1) {
                for (int64_t ow = owLo; ow < owHi; ++ow)
                    yr[ow] = std::max(std::max(mr[ow], mr[ow + 1]), mr[ow + 2]);
            } else {
                for (int64_t ow = owLo; ow < owHi; ++ow)
                    yr[ow] = -std::numeric_limits<float>::infinity();
                for (int64_t kw = 0; kw < KW; ++kw) {
                    const float* tap = mr + kw;
                    for (int64_t ow = owLo; ow < owHi; ++ow)
                        yr[ow] = std::max(yr[ow], tap[ow * sw]);
                }
            }
            for (int64_t ow = owHi; ow < OW; ++ow)
                edge(ow);
        }
        return;
    }
    for (int64_t oh = 0; oh < g.output[0]; ++oh) {
        const int64_t hStart = oh * g.strides[0] - g.padBegin[0];
        const int64_t khLo = rowTaps[oh].lo, khHi = rowTaps[oh].hi, khPadded = rowTaps[oh].padded;
        for (int64_t ow = 0; ow < g.output[1]; ++ow) {
            const int64_t wStart = ow * g.strides[1] - g.padBegin[1];
            const auto [kwLo, kwHi, kwPadded] = columns[ow];
            const int64_t o = oh * g.output[1] + ow;
            if (kind == Pool::Max && !indices) {
                // No index asked for: a branch-free running maximum.
                float m = -std::numeric_limits<float>::infinity();
                for (int64_t kh = khLo; kh < khHi; ++kh) {
                    const float* xr = xc + (hStart + kh * g.dilations[0]) * W + wStart;
                    for (int64_t kw = kwLo; kw < kwHi; ++kw)
                        m = std::max(m, xr[kw * g.dilations[1]]);
                }
                y[o] = m;
                continue;
            }
            float best = -std::numeric_limits<float>::infinity();
            int64_t bestH = -1, bestW = -1;
            double sum = 0.0;
            for (int64_t kh = khLo; kh < khHi; ++kh) {
                const int64_t ih = hStart + kh * g.dilations[0];
                const float* xr = xc + ih * W;
                for (int64_t kw = kwLo; kw < kwHi; ++kw) {
                    const int64_t iw = wStart + kw * g.dilations[1];
                    const float v = xr[iw];
                    if (kind == Pool::Max) {
                        if (v > best || bestH < 0) {
                            best = v;
                            bestH = ih;
                            bestW = iw;
                        }
                    } else if (kind == Pool::Average) {
                        sum += v;
                    } else {
                        sum += std::pow(std::fabs(double(v)), double(p));
                    }
                }
            }
            if (kind == Pool::Max) {
                y[o] = best;
                if (indices)
                    indices[o] = bestH < 0 ? -1 : indexBase + (columnMajor ? bestW * H + bestH : bestH * W + bestW);
            } else if (kind == Pool::Average) {
                const int64_t count = includePad ? khPadded * kwPadded : (khHi - khLo) * (kwHi - kwLo);
                y[o] = count == 0 ? 0.0f : float(sum / double(count));
            } else {
                y[o] = float(std::pow(sum, 1.0 / double(p)));
            }
        }
    }
}

// MaxPool over kChannelBlock channels at once (maxPoolBlock) on planes of
// fewer pixels than this; larger planes stay on pool2d's separable maxima,
// whose row loops are long enough to vectorize. MaxPool 3 x 3 at stride 2,
// batch 8, 2 threads, median of 2000 runs, separable -> blocked: 256
// channels of 11 x 11 0.091 -> 0.037 ms, 128 of 23 x 23 0.110 -> 0.086;
// 3 x 3 at stride 1 on 64 of 14 x 14 0.070 -> 0.040; even at 28 x 28 (2 x 2,
// stride 2: 0.058 both) and 32 x 32 (0.124 -> 0.129), separable from 47 x 47
// (0.175 -> 0.198).
constexpr int64_t kBlockedPoolPlane = 1024;

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
    Tensor Y = Tensor::uninitialized(DType::F32, yShape); // every output is written below
    Tensor I = wantIndices ? Tensor::uninitialized(DType::I64, yShape) : Tensor();
    const int64_t inSpatial = shapeElementCount(input), outSpatial = shapeElementCount(g.output),
                  windowSize = shapeElementCount(kernel);
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    int64_t* indices = wantIndices ? I.mutableValues<int64_t>().data() : nullptr;

    if (kind == Pool::Max && !wantIndices && rank == 2 && C >= kChannelBlock / 2 && inSpatial < kBlockedPoolPlane) {
        forEachChannelBlockPart(N, C, g, [&](int64_t n, int64_t c0, int64_t channels, int64_t oh0, int64_t oh1) {
            maxPoolBlock(x + (n * C + c0) * inSpatial, channels, g, oh0, oh1, y + (n * C + c0) * outSpatial);
        });
        ctx.setOutput(0, castTensor(Y, original.dtype()));
        return;
    }
    const std::vector<WindowTaps> rowTaps = rank == 2 ? windowTaps(g, 0) : std::vector<WindowTaps>{},
                                  columnTaps = rank == 2 ? windowTaps(g, 1) : std::vector<WindowTaps>{};
    tbb::parallel_for(int64_t(0), N * C, [&](int64_t nc) {
        const float* xc = x + nc * inSpatial;
        if (rank == 2) {
            pool2d(xc, g, rowTaps.data(), columnTaps.data(), kind, includePad, p, columnMajor, nc * inSpatial,
                   y + nc * outSpatial, indices ? indices + nc * outSpatial : nullptr);
            return;
        }
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
    auto pool = [&](int64_t nc) {
        const float* xc = x + nc * spatial;
        if (kind == Pool::Max) {
            float best = -std::numeric_limits<float>::infinity();
            for (int64_t i = 0; i < spatial; ++i)
                best = std::max(best, xc[i]);
            y[nc] = best;
            return;
        }
        if (kind == Pool::Average) {
            // Eight partial sums: independent additions that vectorize, where one
            // running sum waits on each addition before the next.
            double part[8] = {};
            int64_t i = 0;
            for (; i + 8 <= spatial; i += 8)
                for (int j = 0; j < 8; ++j)
                    part[j] += double(xc[i + j]);
            double sum = 0.0;
            for (; i < spatial; ++i)
                sum += double(xc[i]);
            for (double v : part)
                sum += v;
            y[nc] = float(sum / double(spatial));
            return;
        }
        double sum = 0.0;
        for (int64_t i = 0; i < spatial; ++i)
            sum += std::pow(std::fabs(double(xc[i])), p);
        y[nc] = float(std::pow(sum, 1.0 / p));
    };
    // Channels per task: at least ~16k values, so small maps do not pay for scheduling.
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(spatial, 1));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, N * C, size_t(grain)), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t nc = r.begin(); nc < r.end(); ++nc)
            pool(nc);
    });
    ctx.setOutput(0, std::move(Y));
}

} // namespace

void maxPool(KernelContext& ctx)
{
    runPool(ctx, Pool::Max);
}
void averagePool(KernelContext& ctx)
{
    runPool(ctx, Pool::Average);
}
void lpPool(KernelContext& ctx)
{
    runPool(ctx, Pool::Lp);
}
void globalAveragePool(KernelContext& ctx)
{
    runGlobalPool(ctx, Pool::Average);
}
void globalMaxPool(KernelContext& ctx)
{
    runGlobalPool(ctx, Pool::Max);
}
void globalLpPool(KernelContext& ctx)
{
    runGlobalPool(ctx, Pool::Lp);
}

} // namespace qs::ops
