// Runtime kernels that run on the packed GEMM (engine/gemm): the Conv family
// (Conv, depthwise and pointwise paths, ConvInteger, QLinearConv,
// ConvTranspose), MatMul, MatMulInteger, QLinearMatMul, Gemm and sgemm itself,
// against naive references written here, on random shapes and attributes and
// on cases whose answers the ONNX specification states. CTest runs it again
// with the instruction sets capped (tst_runtime_kernels_avx2, _baseline).
// (TBB's task_arena before QtTest: its profiling header has a member named
// emit, which Qt defines as a macro.)
#include <tbb/task_arena.h>

#include <QtTest>

#include "core/half.h"

#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include <Eigen/Cholesky>
#include <tbb/global_control.h>

#include "gemm/gram.h"
#include "gemm/sgemm.h"
#include "kernel_support.h"
#include "quantization/inverse_hessian.h"
#include "runtime/op_registry.h"
#include "runtime/ops/conv.h"
#include "runtime/ops/conv_integer.h"
#include "runtime/ops/conv_transpose.h"
#include "runtime/ops/depthwise_conv.h"
#include "runtime/ops/gemm_matmul.h"
#include "runtime/ops/pooling.h"
#include "runtime/output_extremes.h"

using namespace qs;
using namespace qs::test;

namespace {

int64_t product(const Shape& s, size_t from = 0)
{
    int64_t p = 1;
    for (size_t i = from; i < s.size(); ++i)
        p *= s[i];
    return p;
}

// Multi-index of a row-major flat index.
std::vector<int64_t> unflatten(int64_t flat, const Shape& shape)
{
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    return idx;
}
int64_t flatten(const std::vector<int64_t>& idx, const Shape& shape)
{
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d)
        f = f * shape[d] + idx[d];
    return f;
}

// Direct convolution: for every output element, sum over its window.
std::vector<float> referenceConv(const Tensor& X, const Tensor& W, const Tensor* B, int64_t group, const Shape& strides,
                                 const Shape& dilations, const Shape& padBegin, const Shape& outSpatial)
{
    const size_t r = outSpatial.size();
    const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0), Cg = C / group, Mg = M / group;
    Shape yShape{N, M};
    yShape.insert(yShape.end(), outSpatial.begin(), outSpatial.end());
    const Shape kShape(W.shape().begin() + 2, W.shape().end());
    std::vector<float> y(size_t(product(yShape)));
    for (int64_t flat = 0; flat < int64_t(y.size()); ++flat) {
        const auto o = unflatten(flat, yShape);
        const int64_t n = o[0], m = o[1], g = m / Mg;
        double acc = B ? B->values<float>()[size_t(m)] : 0.0;
        for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kf = 0; kf < product(kShape); ++kf) {
                const auto k = unflatten(kf, kShape);
                std::vector<int64_t> xi{n, g * Cg + c};
                bool inside = true;
                for (size_t d = 0; d < r; ++d) {
                    const int64_t i = o[2 + d] * strides[d] - padBegin[d] + k[d] * dilations[d];
                    inside = inside && i >= 0 && i < X.dim(int(2 + d));
                    xi.push_back(i);
                }
                if (!inside)
                    continue;
                std::vector<int64_t> wi{m, c};
                wi.insert(wi.end(), k.begin(), k.end());
                acc += double(X.values<float>()[size_t(flatten(xi, X.shape()))]) *
                       W.values<float>()[size_t(flatten(wi, W.shape()))];
            }
        y[size_t(flat)] = float(acc);
    }
    return y;
}

} // namespace

// A depthwise conv (group = channels) of `images` images of one geometry,
// with or without its bias, against referenceConv; the output's plane extents.
struct DepthwiseCase {
    int64_t channels, h, w, k, stride, dilation, padTop, padLeft, padBottom, padRight;

    Shape outputPlane() const
    {
        const int64_t extent = (k - 1) * dilation + 1;
        return {(h + padTop + padBottom - extent) / stride + 1, (w + padLeft + padRight - extent) / stride + 1};
    }
    void expectMatchesReference(int64_t images, bool withBias) const
    {
        const Tensor X = randomTensor({images, channels, h, w});
        const Tensor W = randomTensor({channels, 1, k, k}), B = randomTensor({channels});
        const auto y = runKernel(ops::conv, "Conv", {&X, &W, withBias ? &B : nullptr},
                                 {intAttr("group", channels), intsAttr("strides", {stride, stride}),
                                  intsAttr("dilations", {dilation, dilation}),
                                  intsAttr("pads", {padTop, padLeft, padBottom, padRight})});
        EXPECT_CLOSE(y[0],
                     referenceConv(X, W, withBias ? &B : nullptr, channels, {stride, stride}, {dilation, dilation},
                                   {padTop, padLeft}, outputPlane()),
                     1e-5);
    }
};

// MaxPool (no Indices output) of `images` images against a window-by-window
// maximum over the taps inside the input; the output's extents are the
// kernel's, checked against ONNX's formula (ceil_mode drops a last window
// that would start in the end padding).
struct MaxPoolCase {
    int64_t channels, h, w, kh, kw, stride, dilation, padTop, padLeft, padBottom, padRight;
    bool ceil;
    bool withNaN = false; // every fifth input NaN: the maximum of the other values, -inf where all are NaN

    void expectMatchesReference(int64_t images) const
    {
        Tensor X = randomTensor({images, channels, h, w});
        if (withNaN) {
            const std::span<float> v = X.mutableValues<float>();
            for (size_t i = 0; i < v.size(); i += 5)
                v[i] = std::numeric_limits<float>::quiet_NaN();
        }
        const auto y = runKernel(ops::maxPool, "MaxPool", {&X},
                                 {intsAttr("kernel_shape", {kh, kw}), intsAttr("strides", {stride, stride}),
                                  intsAttr("dilations", {dilation, dilation}),
                                  intsAttr("pads", {padTop, padLeft, padBottom, padRight}), intAttr("ceil_mode", ceil)},
                                 12);
        auto extent = [&](int64_t in, int64_t k, int64_t begin, int64_t end) {
            const int64_t span = in + begin + end - (k - 1) * dilation - 1;
            int64_t o = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
            if (ceil && (o - 1) * stride >= in + begin)
                --o;
            return o;
        };
        const int64_t OH = extent(h, kh, padTop, padBottom), OW = extent(w, kw, padLeft, padRight);
        QCOMPARE(y[0].shape(), (Shape{images, channels, OH, OW}));
        std::vector<float> reference;
        const std::span<const float> x = X.values<float>();
        for (int64_t plane = 0; plane < images * channels; ++plane)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    float best = -INFINITY;
                    for (int64_t i = 0; i < kh; ++i)
                        for (int64_t j = 0; j < kw; ++j) {
                            const int64_t r = oh * stride - padTop + i * dilation,
                                          c = ow * stride - padLeft + j * dilation;
                            if (r >= 0 && r < h && c >= 0 && c < w)
                                best = std::max(best, x[size_t((plane * h + r) * w + c)]);
                        }
                    reference.push_back(best);
                }
        EXPECT_CLOSE(y[0], reference, 0);
        const std::span<const float> got = y[0].values<float>(); // (maxError passes over NaN)
        for (size_t i = 0; i < reference.size(); ++i)
            QVERIFY2(got[i] == reference[i], qPrintable(QStringLiteral("output %1").arg(i)));
    }
};

// One Conv per path the kernel takes (under a 2-thread arena: the
// choices depend on the thread count), with folded nodes, and how to run it.
struct ConvPathCase {
    const char* path;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides;
    std::optional<FusedActivation> activation;
    bool residual;

    Shape outputShape() const
    {
        Shape shape = {x[0], w[0]};
        for (size_t d = 2; d < x.size(); ++d)
            shape.push_back((x[d] - w[d]) / strides[d - 2] + 1);
        return shape;
    }
    Node node() const
    {
        Node n;
        n.name = "n";
        n.opType = "Conv";
        n.inputs = {"x", "w", "b"};
        n.outputs = {"y"};
        n.attributes = {intAttr("group", group), intsAttr("strides", strides)};
        return n;
    }
};
std::vector<ConvPathCase> convPathCases()
{
    const FusedActivation relu{FusedActivation::Kind::Relu}, clip{FusedActivation::Kind::Clip, 0.0f, 0.5f},
        hardSwish{FusedActivation::Kind::HardSwish, 1.0f / 6, 0.5f};
    return {
        {"depthwise, 16 channels a task", {2, 24, 10, 10}, {24, 1, 3, 3}, 24, {1, 1}, clip, false},
        {"depthwise, 16 channels a task, not clamping", {1, 40, 9, 7}, {40, 1, 3, 3}, 40, {2, 2}, hardSwish, false},
        {"depthwise, plane by plane", {1, 4, 20, 20}, {4, 1, 3, 3}, 4, {1, 1}, relu, false},
        {"positions as rows", {2, 16, 9, 9}, {32, 16, 3, 3}, 1, {1, 1}, relu, true},
        {"implicit GEMM", {1, 8, 12, 12}, {8, 4, 3, 3}, 2, {1, 1}, std::nullopt, true},
        {"implicit GEMM, weights in row blocks", {1, 256, 5, 6}, {256, 128, 3, 3}, 2, {1, 1}, relu, false},
        {"few output positions", {1, 256, 3, 3}, {512, 256, 1, 1}, 1, {1, 1}, relu, true},
        {"few output positions, two images", {2, 256, 6, 6}, {1024, 256, 1, 1}, 1, {2, 2}, clip, false},
        {"pointwise over the batch", {4, 32, 4, 4}, {48, 32, 1, 1}, 1, {1, 1}, clip, true},
        {"pointwise, output channels split", {1, 64, 8, 8}, {256, 64, 1, 1}, 1, {1, 1}, relu, true},
        {"pointwise, channel blocks", {1, 16, 16, 16}, {96, 16, 1, 1}, 1, {1, 1}, relu, false},
        {"pointwise, column chunks", {1, 8, 64, 64}, {16, 8, 1, 1}, 1, {1, 1}, std::nullopt, true},
        {"strided 1 x 1 on its column matrix", {2, 8, 16, 16}, {16, 8, 1, 1}, 1, {2, 2}, relu, false},
        {"one spatial axis", {2, 4, 50}, {6, 4, 3}, 1, {1}, relu, false},
        {"three spatial axes", {1, 3, 6, 5, 4}, {5, 3, 2, 2, 2}, 1, {1, 1, 1}, std::nullopt, false},
    };
}

class TestRuntimeKernels : public QObject {
    Q_OBJECT

private slots:
    void convMatchesDirectConvolutionOnRandomGeometry()
    {
        for (int trial = 0; trial < 60; ++trial) {
            const size_t r = size_t(1 + trial % 3);
            const int64_t group = std::vector<int64_t>{1, 2, 3}[size_t(randInt(0, 2))];
            const int64_t Cg = randInt(1, 3), Mg = randInt(1, 3), N = randInt(1, 2);
            Shape xs{N, Cg * group}, ws{Mg * group, Cg};
            Shape strides, dilations, padBegin, padEnd, pads, out;
            for (size_t d = 0; d < r; ++d) {
                const int64_t k = randInt(1, 3), dil = randInt(1, 2), s = randInt(1, 2);
                const int64_t pb = randInt(0, 2), pe = randInt(0, 2);
                const int64_t in = randInt((k - 1) * dil + 1, r == 3 ? 5 : 9);
                xs.push_back(in);
                ws.push_back(k);
                strides.push_back(s);
                dilations.push_back(dil);
                padBegin.push_back(pb);
                padEnd.push_back(pe);
                out.push_back((in + pb + pe - (k - 1) * dil - 1) / s + 1);
            }
            pads = padBegin;
            pads.insert(pads.end(), padEnd.begin(), padEnd.end());
            const Tensor X = randomTensor(xs), W = randomTensor(ws), B = randomTensor({Mg * group});
            const bool withBias = trial % 2 == 0;
            auto y = runKernel(ops::conv, "Conv", {&X, &W, withBias ? &B : nullptr},
                               {intAttr("group", group), intsAttr("strides", strides), intsAttr("dilations", dilations),
                                intsAttr("pads", pads)});
            Shape expectedShape{N, Mg * group};
            expectedShape.insert(expectedShape.end(), out.begin(), out.end());
            QCOMPARE(y[0].shape(), expectedShape);
            EXPECT_CLOSE(y[0], referenceConv(X, W, withBias ? &B : nullptr, group, strides, dilations, padBegin, out),
                         1e-5);
        }
    }

    void convOnSmallPlanesMatchesTheReferenceForEveryBatchWidth()
    {
        // Small output planes with many output channels share one column
        // matrix across the batch: N * P columns in whole strips, a few left
        // over (at most four run along the weights' rows, more in a padded
        // strip), or fewer than one strip. 3x3 with pads and stride 2; 1x1
        // windows, strided and plain, which stay on the per-image paths; 50
        // output channels (no whole row strip at the end) and 96 (whole strips
        // of 6 and 12 rows).
        struct Case {
            int64_t N, C, M, in, k, stride, pad;
        };
        const std::vector<Case> cases{
            {2, 8, 50, 7, 3, 1, 1},   // 98 columns: 3 x 32 + 2
            {3, 8, 50, 7, 3, 1, 1},   // 147: 4 x 32 + 19
            {1, 5, 96, 4, 3, 1, 1},   // 16: less than one strip
            {1, 4, 50, 2, 3, 1, 1},   // 4: along the rows only
            {2, 6, 96, 13, 3, 2, 1},  // stride 2 onto 7 x 7
            {2, 16, 64, 14, 1, 2, 0}, // strided 1x1 (a downsampling shortcut)
            {3, 24, 60, 5, 1, 1, 0},  // pointwise on 5 x 5: 75 columns
            {2, 3, 48, 16, 3, 1, 1},  // 16 x 16 = 256 outputs per plane
        };
        for (const Case& c : cases) {
            const int64_t out = (c.in + 2 * c.pad - c.k) / c.stride + 1;
            const Tensor X = randomTensor({c.N, c.C, c.in, c.in}), W = randomTensor({c.M, c.C, c.k, c.k}),
                         B = randomTensor({c.M});
            for (bool withBias : {true, false}) {
                auto y = runKernel(
                    ops::conv, "Conv", {&X, &W, withBias ? &B : nullptr},
                    {intsAttr("strides", {c.stride, c.stride}), intsAttr("pads", {c.pad, c.pad, c.pad, c.pad})});
                QCOMPARE(y[0].shape(), (Shape{c.N, c.M, out, out}));
                EXPECT_CLOSE(y[0],
                             referenceConv(X, W, withBias ? &B : nullptr, 1, {c.stride, c.stride}, {1, 1},
                                           {c.pad, c.pad}, {out, out}),
                             1e-5);
            }
        }
    }

    void convOnWideRowsMatchesTheReference()
    {
        // Sub-plane rows of several 16-column pieces, whose masks mark where
        // the input starts and ends within a piece (uneven pads, stride 2's
        // even lanes), and rows wider than the masked fill takes (over 512
        // sub-plane columns) or strides it does not (3); through the implicit
        // GEMM (depth under 64 or few output channels) and positions as rows.
        struct Case {
            int64_t N, C, M, H, W, stride, dilation, padTop, padLeft, padBottom, padRight;
        };
        const std::vector<Case> cases{
            {2, 4, 8, 5, 40, 2, 1, 1, 2, 0, 1},    // implicit GEMM, 21 sub-plane columns
            {1, 8, 32, 6, 37, 1, 1, 1, 1, 1, 1},   // positions as rows, 39 columns
            {3, 8, 40, 6, 70, 2, 2, 0, 1, 2, 0},   // dilated, stride 2 from an odd pad
            {1, 2, 4, 3, 1100, 2, 1, 1, 1, 1, 1},  // 551 columns: past the masked fill
            {1, 8, 32, 3, 600, 1, 1, 1, 1, 1, 1},  // 602 columns, positions as rows
            {2, 4, 8, 7, 50, 3, 1, 1, 2, 1, 0},    // stride 3
            {1, 16, 48, 9, 33, 2, 1, 1, 1, 1, 1},  // 17 columns per sub-plane: one lane in the last piece
        };
        for (const Case& c : cases) {
            const int64_t reach = 2 * c.dilation + 1;
            const int64_t OH = (c.H + c.padTop + c.padBottom - reach) / c.stride + 1,
                          OW = (c.W + c.padLeft + c.padRight - reach) / c.stride + 1;
            const Tensor X = randomTensor({c.N, c.C, c.H, c.W}), W = randomTensor({c.M, c.C, 3, 3}),
                         B = randomTensor({c.M});
            auto y = runKernel(ops::conv, "Conv", {&X, &W, &B},
                               {intsAttr("strides", {c.stride, c.stride}), intsAttr("dilations", {c.dilation, c.dilation}),
                                intsAttr("pads", {c.padTop, c.padLeft, c.padBottom, c.padRight})});
            QCOMPARE(y[0].shape(), (Shape{c.N, c.M, OH, OW}));
            EXPECT_CLOSE(y[0],
                         referenceConv(X, W, &B, 1, {c.stride, c.stride}, {c.dilation, c.dilation},
                                       {c.padTop, c.padLeft}, {OH, OW}),
                         1e-5);
        }
    }

    void convWithFewOutputPositionsGivesTheBitsOfTheBatchedPaths()
    {
        // 1 x 1 windows with weights of at least 1 MiB and 16 output channels
        // or more per output position run transposed (fewPositionsConv); a
        // larger batch of the same conv does not. Larger windows run with the
        // positions as the product's rows (positionRowsConv), whose tiles of
        // positions span images in a batch. Each image's outputs must be the
        // bits the batch gives it, and both the direct convolution's values.
        struct Case {
            int64_t C, M, in, k, stride, pad, batch; // batch: large enough for the other paths
        };
        const std::vector<Case> cases{
            {128, 512, 3, 3, 1, 1, 4},  // 3 x 3 on 3 x 3 planes (a late stage): tiles of 12 across images
            {64, 512, 6, 3, 2, 1, 4},   // stride 2 onto 3 x 3
            {320, 1280, 3, 1, 1, 0, 9}, // pointwise on 3 x 3; the batch: per image
            {160, 1024, 2, 3, 1, 1, 64} // 2 x 2 planes, K = 1440 (depth blocks of 256 and a rest)
        };
        for (const Case& c : cases) {
            const int64_t out = (c.in + 2 * c.pad - c.k) / c.stride + 1, P = out * out;
            const Tensor W = randomTensor({c.M, c.C, c.k, c.k}, 0.05f), B = randomTensor({c.M});
            const Tensor X = randomTensor({c.batch, c.C, c.in, c.in});
            const std::vector<Attribute> attributes = {intsAttr("strides", {c.stride, c.stride}),
                                                       intsAttr("pads", {c.pad, c.pad, c.pad, c.pad})};
            const Tensor batched = runKernel(ops::conv, "Conv", {&X, &W, &B}, attributes)[0];
            for (int64_t n : {int64_t(0), c.batch - 1}) {
                const int64_t inPlane = c.C * c.in * c.in;
                Tensor image = Tensor::uninitialized(DType::F32, {1, c.C, c.in, c.in});
                std::copy_n(X.values<float>().begin() + n * inPlane, inPlane, image.mutableValues<float>().begin());
                const Tensor y = runKernel(ops::conv, "Conv", {&image, &W, &B}, attributes)[0];
                QCOMPARE(y.shape(), (Shape{1, c.M, out, out}));
                const auto own = y.values<float>();
                const auto fromBatch = batched.values<float>().subspan(size_t(n * c.M * P), size_t(c.M * P));
                QVERIFY2(std::equal(own.begin(), own.end(), fromBatch.begin()),
                         ("image " + std::to_string(n) + " of a " + std::to_string(c.C) + " -> " +
                          std::to_string(c.M) + " conv differs from its batch's bits")
                             .c_str());
                if (n == 0) // (the direct convolution takes seconds per image)
                    EXPECT_CLOSE(y,
                                 referenceConv(image, W, &B, 1, {c.stride, c.stride}, {1, 1}, {c.pad, c.pad}, {out, out}),
                                 1e-5);
            }
        }
    }

    void sgemmMatchesADoubleReference()
    {
        // Every shape class of the blocked product: below, at and above one
        // micro-tile (6/12 rows, 16/32 columns), one depth block (256), one column
        // block (1024); transposed operands, alpha, leading dimensions wider than
        // the matrices, and C's columns past N left untouched.
        const std::vector<int64_t> sizes{1, 2, 3, 7, 15, 16, 17, 63, 64, 65, 255, 257};
        std::vector<std::array<int64_t, 3>> shapes{{13, 1100, 20}, {300, 70, 600}, {1, 1, 1}, {5, 0, 3}};
        for (int i = 0; i < 60; ++i)
            shapes.push_back(
                {sizes[size_t(randInt(0, 11))], sizes[size_t(randInt(0, 11))], sizes[size_t(randInt(0, 11))]});
        shapes.push_back({4, 5, 0}); // K = 0: zeros
        int checked = 0;
        for (const auto& [M, N, K] : shapes)
            for (int t = 0; t < 4; ++t) {
                const bool transA = t & 1, transB = t & 2;
                const float alpha = t == 3 ? -0.5f : 1.0f;
                const int64_t lda = (transA ? M : K) + 3, ldb = (transB ? K : N) + 1, ldc = N + 2;
                const Tensor A = randomTensor({(transA ? K : M) * lda + 1}),
                             B = randomTensor({(transB ? N : K) * ldb + 1});
                std::vector<float> a(A.values<float>().begin(), A.values<float>().end()),
                    b(B.values<float>().begin(), B.values<float>().end());
                // Adversarial values: zeros of both signs, large magnitudes that cancel.
                for (size_t e = 0; e < a.size(); e += 11)
                    a[e] = e % 2 ? -0.0f : 1e6f;
                for (size_t e = 5; e < b.size(); e += 13)
                    b[e] = e % 2 ? 0.0f : -1e6f;
                std::vector<float> c(size_t(std::max<int64_t>(M * ldc, 1)), std::nanf(""));
                gemm::sgemm(transA, transB, M, N, K, alpha, a.data(), lda, b.data(), ldb, c.data(), ldc);
                for (int64_t i = 0; i < M; ++i) {
                    for (int64_t j = 0; j < N; ++j) {
                        double ref = 0, magnitude = 0;
                        for (int64_t k = 0; k < K; ++k) {
                            const double x = a[size_t(transA ? k * lda + i : i * lda + k)];
                            const double y = b[size_t(transB ? j * ldb + k : k * ldb + j)];
                            ref += x * y;
                            magnitude += std::abs(x * y);
                        }
                        ref *= alpha;
                        const double got = c[size_t(i * ldc + j)];
                        if (!(std::abs(got - ref) <= 1e-5 * std::abs(alpha) * magnitude + 1e-30))
                            QFAIL(qPrintable(QString("M %1 N %2 K %3 transA %4 transB %5: C[%6, %7] = %8, expected %9")
                                                 .arg(M)
                                                 .arg(N)
                                                 .arg(K)
                                                 .arg(transA)
                                                 .arg(transB)
                                                 .arg(i)
                                                 .arg(j)
                                                 .arg(got)
                                                 .arg(ref)));
                    }
                    for (int64_t j = N; j < ldc; ++j)
                        QVERIFY2(std::isnan(c[size_t(i * ldc + j)]), "sgemm wrote past column N");
                }
                ++checked;
            }
        QCOMPARE(checked, int(shapes.size()) * 4);
    }

    void gramTilesMatchALongDoubleSumAndKeepTheirBitsHoweverSplit()
    {
        // XᵀX tiles in double (quantization/input_hessian's): below, at and above a
        // micro-tile (16 x 12 / 8 x 6 / 4 x 4) and one depth block (128 rows), leading
        // dimensions wider than the tile, and the diagonal tiles of a lower triangle.
        const gemm::SimdLevel level = gemm::simdLevel();
        std::mt19937 rng(7);
        std::normal_distribution<double> normal;
        int checked = 0;
        for (const auto& [rows, features] : std::vector<std::array<int64_t, 2>>{
                 {1, 1}, {3, 5}, {127, 17}, {128, 16}, {129, 40}, {300, 37}, {517, 70}, {64, 100}}) {
            const int64_t ld = features + 3;
            std::vector<double> x(size_t(rows * ld));
            for (double& v : x)
                v = normal(rng);
            for (size_t e = 0; e < x.size(); e += 29)
                x[e] = e % 2 ? -0.0 : 1e6; // zeros of both signs, large magnitudes
            const int64_t ldh = features + 2;
            // The whole lower triangle as one diagonal tile, and as tiles of 13 features.
            std::vector<double> whole(size_t(ldh * features), 0.0), tiled(whole.size(), 0.0);
            gemm::addGramTile(level, x.data(), rows, ld, 0, features, 0, features, whole.data(), ldh, true);
            for (int64_t r0 = 0; r0 < features; r0 += 13)
                for (int64_t c0 = 0; c0 <= r0; c0 += 13)
                    gemm::addGramTile(level, x.data(), rows, ld, r0, std::min<int64_t>(13, features - r0), c0,
                                      std::min<int64_t>(13, features - c0), tiled.data(), ldh, r0 == c0);
            for (int64_t j = 0; j < features; ++j)
                for (int64_t i = j; i < features; ++i) {
                    long double ref = 0, magnitude = 0;
                    for (int64_t k = 0; k < rows; ++k) {
                        const long double p = (long double)x[size_t(k * ld + i)] * x[size_t(k * ld + j)];
                        ref += p;
                        magnitude += std::abs(p);
                    }
                    const double got = whole[size_t(j * ldh + i)];
                    if (!(std::abs(got - double(ref)) <= 1e-13 * double(magnitude) + 1e-300))
                        QFAIL(qPrintable(QString("rows %1 features %2: H[%3, %4] = %5, expected %6")
                                             .arg(rows)
                                             .arg(features)
                                             .arg(i)
                                             .arg(j)
                                             .arg(got, 0, 'g', 17)
                                             .arg(double(ref), 0, 'g', 17)));
                    QCOMPARE(tiled[size_t(j * ldh + i)], got); // the same bits whatever the tiles
                }
            // Rows added in two calls: each call's sums are added to H in turn.
            std::vector<double> twice(whole.size(), 0.0);
            gemm::addGramTile(level, x.data(), rows, ld, 0, features, 0, features, twice.data(), ldh, true);
            gemm::addGramTile(level, x.data(), rows, ld, 0, features, 0, features, twice.data(), ldh, true);
            for (int64_t j = 0; j < features; ++j)
                for (int64_t i = j; i < features; ++i)
                    QCOMPARE(twice[size_t(j * ldh + i)], whole[size_t(j * ldh + i)] + whole[size_t(j * ldh + i)]);
            // Nothing past the matrix: the padding rows of H stay zero.
            for (int64_t j = 0; j < features; ++j)
                for (int64_t i = features; i < ldh; ++i)
                    QCOMPARE(whole[size_t(j * ldh + i)], 0.0);
            ++checked;
        }
        QCOMPARE(checked, 8);
    }

    void triangularInverseAndInverseCholeskyMatchEigen()
    {
        // Orders below, at and above the unblocked size (64) and odd halves; a
        // well-conditioned lower L (unit-ish diagonal), and a Hessian-like SPD H.
        const gemm::SimdLevel level = gemm::simdLevel();
        std::mt19937 rng(11);
        std::normal_distribution<double> normal;
        for (const int64_t n : {1, 5, 64, 65, 130, 301}) {
            const int64_t ld = n + 3;
            std::vector<double> l(size_t(ld * n), 7.0); // the strict upper triangle holds 7s it must leave
            Eigen::MatrixXd dense = Eigen::MatrixXd::Zero(n, n);
            for (int64_t j = 0; j < n; ++j)
                for (int64_t i = j; i < n; ++i) {
                    const double v = i == j ? 1.0 + std::abs(normal(rng)) : 0.3 * normal(rng) / std::sqrt(double(n));
                    l[size_t(j * ld + i)] = v;
                    dense(i, j) = v;
                }
            std::vector<double> one = l, two = l;
            {
                tbb::global_control threads(tbb::global_control::max_allowed_parallelism, 1);
                gemm::invertLowerTriangular(level, one.data(), n, ld);
            }
            gemm::invertLowerTriangular(level, two.data(), n, ld);
            QVERIFY(one == two); // the same bits on one thread and on many
            Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, n);
            for (int64_t j = 0; j < n; ++j) {
                for (int64_t i = 0; i < j; ++i)
                    QCOMPARE(one[size_t(j * ld + i)], 7.0);
                for (int64_t i = j; i < n; ++i)
                    x(i, j) = one[size_t(j * ld + i)];
            }
            const double residual = (dense * x - Eigen::MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff();
            QVERIFY2(residual < 1e-12, qPrintable(QString("n %1: max |L·X − I| %2").arg(n).arg(residual)));

            // The factor GPTQ reads, against the way it was computed before: invert H, factor H⁻¹.
            Eigen::MatrixXd a(n, n + 10);
            for (double& v : a.reshaped())
                v = normal(rng);
            const Eigen::MatrixXd h = a * a.transpose() / double(n) + 0.01 * Eigen::MatrixXd::Identity(n, n);
            const std::optional<Eigen::MatrixXd> factor = choleskyOfInverse(h);
            QVERIFY(factor);
            Eigen::MatrixXd inverse = Eigen::MatrixXd::Identity(n, n);
            h.llt().solveInPlace(inverse);
            const Eigen::MatrixXd expected = inverse.llt().matrixL();
            const double scale = expected.cwiseAbs().maxCoeff();
            const double difference = (*factor - expected).cwiseAbs().maxCoeff();
            QVERIFY2(difference < 1e-10 * scale,
                     qPrintable(QString("n %1: max |factor − Eigen's| %2 of %3").arg(n).arg(difference).arg(scale)));
            QVERIFY(factor->triangularView<Eigen::StrictlyUpper>().toDenseMatrix().isZero(0));
        }
        // Not positive definite: nothing.
        Eigen::MatrixXd indefinite = Eigen::MatrixXd::Identity(3, 3);
        indefinite(1, 1) = -1;
        QVERIFY(!choleskyOfInverse(indefinite));
    }

    void fewColumnProductsMatchTheMicroKernelsAndSubnormalWeightsFlush()
    {
        // Up to kFewColumns columns run along A's rows; every C element is
        // still the micro-kernels' sum, so the first columns of a wide product
        // (micro-kernels) equal a narrow one's bit for bit. Rows: partial last
        // strips and a row range; depth: three blocks; C transposed too. And
        // flushed subnormal weights.
        if (gemm::simdLevel() == gemm::SimdLevel::None)
            QSKIP("no packed products without AVX2");
        const int64_t rows = 29, depth = 600, wide = 9;
        const Tensor A = randomTensor({rows * depth}), B = randomTensor({depth * wide});
        const gemm::PackedMatrix packed(gemm::simdLevel(), A.values<float>().data(), 1, rows, depth, 0, depth, 1);
        const float* b = B.values<float>().data();
        std::vector<float> reference(size_t(rows * wide));
        packed.multiply(0, b, wide, 1, wide, reference.data(), wide);
        for (int64_t n = 1; n <= wide; ++n) {
            std::vector<float> c(size_t(rows * n), std::nanf("")), t(size_t(rows * n), std::nanf(""));
            packed.multiply(0, b, wide, 1, n, c.data(), n);
            packed.multiplyFewColumns(0, b, wide, 1, n, t.data(), 1, rows); // C transposed: [n, rows]
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t j = 0; j < n; ++j) {
                    QCOMPARE(c[size_t(r * n + j)], reference[size_t(r * wide + j)]);
                    QCOMPARE(t[size_t(j * rows + r)], reference[size_t(r * wide + j)]);
                }
        }
        // Weights packed with Subnormals::Flush: subnormal values count as zeros.
        std::vector<float> subnormal(A.values<float>().begin(), A.values<float>().end()), zeroed = subnormal;
        for (size_t e = 0; e < subnormal.size(); e += 7) {
            subnormal[e] = (e % 2 ? -1.0f : 1.0f) * std::ldexp(float(e % 100 + 1), -140);
            zeroed[e] = e % 2 ? -0.0f : 0.0f;
        }
        const gemm::PackedMatrix flushed(gemm::simdLevel(), subnormal.data(), 1, rows, depth, 0, depth, 1,
                                         gemm::Subnormals::Flush);
        const gemm::PackedMatrix zeros(gemm::simdLevel(), zeroed.data(), 1, rows, depth, 0, depth, 1);
        std::vector<float> got(size_t(rows * wide)), expected(size_t(rows * wide));
        flushed.multiply(0, b, wide, 1, wide, got.data(), wide);
        zeros.multiply(0, b, wide, 1, wide, expected.data(), wide);
        QCOMPARE(got, expected);
        std::vector<float> part(size_t(17 * 3), std::nanf(""));
        packed.multiply(0, b, wide, 1, 3, part.data(), 3, 12, 29); // rows 12..28
        for (int64_t r = 12; r < rows; ++r)
            for (int64_t j = 0; j < 3; ++j)
                QCOMPARE(part[size_t((r - 12) * 3 + j)], reference[size_t(r * wide + j)]);
    }

    void productsSumEachElementInDepthOrderWhateverTheirTileOrder()
    {
        // Products of one depth block (256 at most) run A-strip by A-strip,
        // deeper ones strip by strip of B; B's rows in memory are
        // packed row by row, a transposed B column by column. Whichever, each
        // C element is its dot product as fused multiply-adds in depth order
        // within each depth block (256), the blocks' sums added in order, then
        // the epilogue: the bits of that sum written out here. Rows: a
        // partial last strip and a row range; columns: past one column block
        // (1024), a partial last strip.
        if (gemm::simdLevel() == gemm::SimdLevel::None)
            QSKIP("no packed products without AVX2");
        const int64_t rows = 29, n = 1100, r0 = 12;
        for (const int64_t depth : {5, 64, 256, 257, 300}) {
            const Tensor A = randomTensor({rows * depth}), B = randomTensor({depth * n}), bias = randomTensor({rows});
            std::vector<float> transposedB(size_t(depth * n));
            for (int64_t k = 0; k < depth; ++k)
                for (int64_t j = 0; j < n; ++j)
                    transposedB[size_t(j * depth + k)] = B.values<float>()[size_t(k * n + j)];
            const float* a = A.values<float>().data();
            const gemm::PackedMatrix packed(gemm::simdLevel(), a, 1, rows, depth, 0, depth, 1);
            gemm::Epilogue clip;
            clip.bias = bias.values<float>().data() + r0;
            clip.clamp = gemm::Epilogue::Clamp::Clip;
            clip.lo = -0.5f, clip.hi = 0.75f;
            std::vector<float> c(size_t((rows - r0) * n), std::nanf("")), ct = c;
            packed.multiply(0, B.values<float>().data(), n, 1, n, c.data(), n, r0, rows, &clip);
            packed.multiply(0, transposedB.data(), 1, depth, n, ct.data(), n, r0, rows, &clip);
            for (int64_t r = r0; r < rows; ++r)
                for (int64_t j = 0; j < n; ++j) {
                    float sum = 0.0f;
                    for (int64_t k0 = 0; k0 < depth; k0 += gemm::kDepthBlock) {
                        float block = 0.0f;
                        for (int64_t k = k0; k < std::min(depth, k0 + gemm::kDepthBlock); ++k)
                            block = std::fma(a[r * depth + k], B.values<float>()[size_t(k * n + j)], block);
                        sum = k0 == 0 ? block : sum + block;
                    }
                    const float expected = clip.finish(sum, r - r0, j, n);
                    const size_t at = size_t((r - r0) * n + j);
                    if (c[at] != expected || ct[at] != expected)
                        QFAIL(qPrintable(QString("depth %1, C[%2, %3]: %4 (B transposed %5), expected %6")
                                             .arg(depth)
                                             .arg(r)
                                             .arg(j)
                                             .arg(c[at])
                                             .arg(ct[at])
                                             .arg(expected)));
                }
        }
    }

    void depthwiseRowsGiveTheSubPlanesBits()
    {
        // Unit-stride depthwise convs on large planes run row by row from a
        // ring of padded input rows instead of through a padded copy of the
        // plane and a grid: the same sums in the same order, so the same
        // bits, with and without a clamp, for every shape of window and pad.
        struct Plane {
            int64_t h, w, k, dilation, padTop, padLeft, padBottom, padRight;
        };
        gemm::Epilogue relu6;
        relu6.clamp = gemm::Epilogue::Clamp::Clip;
        relu6.lo = 0.0f, relu6.hi = 0.3f;
        for (const Plane& p :
             {Plane{112, 112, 3, 1, 1, 1, 1, 1}, Plane{97, 70, 5, 2, 4, 3, 0, 5}, Plane{90, 128, 7, 1, 0, 0, 0, 0},
              Plane{60, 200, 3, 3, 0, 2, 3, 1}, Plane{100, 65, 1, 1, 0, 0, 0, 0}}) {
            const int64_t extent = (p.k - 1) * p.dilation + 1;
            const ops::WindowGeometry g{
                {p.h, p.w},
                {p.k, p.k},
                {1, 1},
                {p.dilation, p.dilation},
                {p.padTop, p.padLeft},
                {p.padBottom, p.padRight},
                {p.h + p.padTop + p.padBottom - extent + 1, p.w + p.padLeft + p.padRight - extent + 1}};
            ops::DepthwisePlanes planes(g);
            QVERIFY2(planes.byRows, qPrintable(QString("%1 x %2 runs row by row").arg(p.h).arg(p.w)));
            const Tensor X = randomTensor({p.h * p.w}), W = randomTensor({p.k * p.k});
            const int64_t outputs = g.output[0] * g.output[1];
            for (const gemm::Epilogue* clamp : std::array<const gemm::Epilogue*, 2>{nullptr, &relu6}) {
                std::vector<float> rows(size_t(outputs), std::nanf("")), subPlanes = rows;
                planes.byRows = true;
                ops::depthwise2d(X.values<float>().data(), W.values<float>().data(), 0.25f, planes, rows.data(), clamp);
                planes.byRows = false;
                ops::depthwise2d(X.values<float>().data(), W.values<float>().data(), 0.25f, planes, subPlanes.data(),
                                 clamp);
                for (int64_t i = 0; i < outputs; ++i)
                    if (std::bit_cast<uint32_t>(rows[size_t(i)]) != std::bit_cast<uint32_t>(subPlanes[size_t(i)]))
                        QFAIL(qPrintable(QString("%1 x %2, kernel %3: output %4 is %5 by rows, %6 by sub-planes")
                                             .arg(p.h)
                                             .arg(p.w)
                                             .arg(p.k)
                                             .arg(i)
                                             .arg(rows[size_t(i)])
                                             .arg(subPlanes[size_t(i)])));
            }
        }
    }

    void depthwiseAndPointwiseConvMatchTheReference()
    {
        // Depthwise (group = channels) takes its own path; 1x1 stride-1 reads the input in place.
        const Tensor X = randomTensor({2, 8, 13, 11});
        const Tensor Wd = randomTensor({8, 1, 3, 3}), B = randomTensor({8});
        auto y = runKernel(ops::conv, "Conv", {&X, &Wd, &B},
                           {intAttr("group", 8), intsAttr("strides", {2, 1}), intsAttr("pads", {1, 1, 1, 1}),
                            intsAttr("dilations", {1, 2})});
        EXPECT_CLOSE(y[0], referenceConv(X, Wd, &B, 8, {2, 1}, {1, 2}, {1, 1}, {7, 9}), 1e-5);
        // Depthwise on small planes runs kChannelBlock (16) channels at a time:
        // full blocks, a partial last block, too few channels for a block (the
        // per-channel path), 5x5 taps, strides, dilations and uneven pads.
        using Depthwise = DepthwiseCase;
        for (const Depthwise& d :
             {Depthwise{16, 7, 7, 5, 1, 1, 2, 2, 2, 2}, Depthwise{40, 14, 13, 3, 2, 1, 1, 0, 1, 1},
              Depthwise{8, 9, 11, 3, 1, 2, 2, 2, 2, 2}, Depthwise{24, 15, 15, 5, 2, 1, 2, 2, 1, 2},
              Depthwise{4, 8, 8, 3, 1, 1, 1, 1, 1, 1}, Depthwise{33, 5, 6, 3, 1, 1, 0, 0, 0, 0},
              Depthwise{32, 20, 37, 3, 2, 1, 1, 1, 1, 1}, // rows wide enough for register transposes
              // Rows narrower than four outputs: every pixel joins a group
              // across rows, the last group short (3 x 3 and 2 x 5 outputs).
              Depthwise{40, 3, 3, 5, 1, 1, 2, 2, 2, 2}, Depthwise{20, 4, 9, 3, 2, 1, 1, 0, 0, 0},
              // Planes under 16 pixels, in and out, go through the transposes
              // too: fewer than 8 pixels (a channel's vector runs past the
              // next channel), a block of one channel.
              Depthwise{16, 2, 3, 3, 1, 1, 1, 1, 1, 1}, Depthwise{17, 2, 2, 3, 1, 1, 1, 1, 1, 1},
              // Strided planes over 256 outputs also run interleaved: a partial
              // block with a last input column no window reaches; dilations.
              Depthwise{24, 40, 34, 3, 2, 1, 1, 0, 1, 0}, Depthwise{16, 36, 30, 3, 2, 2, 2, 2, 2, 2},
              // Larger planes run channel by channel, in blocks of 64 outputs
              // whose last one runs into the slack: unit strides over 256
              // outputs, strided ones over 4096; uneven pads, dilations.
              Depthwise{12, 30, 29, 3, 1, 1, 1, 1, 1, 1}, Depthwise{9, 23, 27, 5, 1, 2, 4, 3, 4, 4},
              Depthwise{8, 140, 130, 3, 2, 1, 1, 1, 0, 1},
              // Unit strides on planes whose sub-plane outgrows L1 run row by
              // row: a last block of outputs shorter than 64, dilations,
              // uneven pads, a window wider than the padding, none.
              Depthwise{3, 100, 113, 3, 1, 1, 1, 1, 1, 1}, Depthwise{2, 97, 70, 5, 1, 2, 4, 3, 0, 5},
              Depthwise{2, 90, 128, 7, 1, 1, 0, 0, 0, 0}})
            for (bool withBias : {true, false})
                d.expectMatchesReference(2, withBias);
        const Tensor Wp = randomTensor({5, 8, 1, 1});
        y = runKernel(ops::conv, "Conv", {&X, &Wp}, {});
        EXPECT_CLOSE(y[0], referenceConv(X, Wp, nullptr, 1, {1, 1}, {1, 1}, {0, 0}, {13, 11}), 1e-5);
        // Pointwise convs with fewer (image, group, column chunk) tasks than
        // the threads want also split their output channels: a last strip of
        // rows cut short, two groups, two images.
        const Tensor Xf = randomTensor({1, 160, 6, 6}), Wf = randomTensor({330, 160, 1, 1}), Bf = randomTensor({330});
        y = runKernel(ops::conv, "Conv", {&Xf, &Wf, &Bf}, {});
        EXPECT_CLOSE(y[0], referenceConv(Xf, Wf, &Bf, 1, {1, 1}, {1, 1}, {0, 0}, {6, 6}), 1e-5);
        // With 16 output channels per position or more, the positions are the
        // product's rows: one image's input packed in place, or two images'
        // column matrix (weights of 1 MiB); a last strip of channels cut
        // short. Other batches of planes narrower than a strip run as one
        // product over the whole batch: two and four images.
        const Tensor Wm = randomTensor({600, 448, 1, 1}), Bm = randomTensor({600});
        struct Batch {
            int64_t images;
            const Tensor *w, *b;
        };
        for (const Batch& batch : {Batch{1, &Wf, &Bf}, Batch{2, &Wm, &Bm}, Batch{2, &Wf, &Bf}, Batch{4, &Wm, &Bm}}) {
            const Tensor Xp = randomTensor({batch.images, batch.w->dim(1), 3, 3});
            y = runKernel(ops::conv, "Conv", {&Xp, batch.w, batch.b}, {});
            EXPECT_CLOSE(y[0], referenceConv(Xp, *batch.w, batch.b, 1, {1, 1}, {1, 1}, {0, 0}, {3, 3}),
                         batch.w == &Wm ? 1e-4 : 1e-5); // (448 products per output)
        }
        const Tensor Xg = randomTensor({2, 64, 5, 7}), Wg = randomTensor({100, 32, 1, 1});
        y = runKernel(ops::conv, "Conv", {&Xg, &Wg}, {intAttr("group", 2)});
        EXPECT_CLOSE(y[0], referenceConv(Xg, Wg, nullptr, 2, {1, 1}, {1, 1}, {0, 0}, {5, 7}), 1e-5);
        // Large convs span several column chunks that start and end mid-row.
        const Tensor Xl = randomTensor({1, 64, 30, 31}), Wl = randomTensor({8, 64, 3, 3});
        y = runKernel(ops::conv, "Conv", {&Xl, &Wl}, {intsAttr("pads", {1, 1, 1, 1})});
        EXPECT_CLOSE(y[0], referenceConv(Xl, Wl, nullptr, 1, {1, 1}, {1, 1}, {1, 1}, {30, 31}), 1e-4);
        // Stride-1 convs run as an implicit GEMM; weights over 1 MiB (here 160 x 2304
        // floats) split into row blocks that each cover every image and column.
        const Tensor Xb = randomTensor({2, 256, 9, 8}), Wb = randomTensor({160, 256, 3, 3}), Bb = randomTensor({160});
        y = runKernel(ops::conv, "Conv", {&Xb, &Wb, &Bb},
                      {intsAttr("pads", {1, 0, 2, 1}), intsAttr("dilations", {1, 2})});
        EXPECT_CLOSE(y[0], referenceConv(Xb, Wb, &Bb, 1, {1, 1}, {1, 2}, {1, 0}, {10, 5}), 1e-4);
        const Tensor Xs = randomTensor({1, 64, 61, 63});
        y = runKernel(ops::conv, "Conv", {&Xs, &Wl},
                      {intsAttr("pads", {2, 1, 0, 2}), intsAttr("strides", {2, 3}), intsAttr("dilations", {2, 1})});
        EXPECT_CLOSE(y[0], referenceConv(Xs, Wl, nullptr, 1, {2, 3}, {2, 1}, {2, 1}, {30, 22}), 1e-4);
    }

    void channelBlockedDepthwiseSplitsPlanesIntoRowParts()
    {
        // One image with one or two blocks of channels is fewer tasks than four
        // threads want: its planes split into parts of output rows, each part
        // interleaving the input rows its windows read (halo rows, the padding
        // above and below, dilated and strided windows, a partial block).
        tbb::task_arena arena(4);
        arena.execute([&] {
            for (const DepthwiseCase& d :
                 {DepthwiseCase{16, 60, 50, 3, 2, 1, 1, 1, 1, 1}, DepthwiseCase{8, 41, 33, 5, 2, 2, 2, 1, 3, 2},
                  DepthwiseCase{24, 30, 45, 3, 2, 1, 0, 1, 2, 0}}) {
                QVERIFY(shapeElementCount(d.outputPlane()) >= 2 * 128); // at least two parts
                d.expectMatchesReference(1, true);
            }
        });
    }

    void channelBlockedMaxPoolMatchesTheWindowMaxima()
    {
        // MaxPool on planes under 1024 pixels with at least 8 channels runs 16
        // channels at a time (depthwise's interleaving): full and partial
        // blocks, planes under 16 pixels, rows narrower than four outputs,
        // uneven pads, dilations, ceil_mode windows reaching past the end
        // padding, 1 x 1 and 2 x 3 windows; other shapes (3 channels, a plane
        // of 1024 pixels) take the separable path, which must agree.
        using Pool = MaxPoolCase;
        for (const Pool& p :
             {Pool{16, 11, 11, 3, 3, 2, 1, 0, 0, 0, 0, true}, Pool{48, 23, 23, 3, 3, 2, 1, 0, 0, 0, 0, true},
              Pool{35, 14, 13, 3, 3, 1, 1, 1, 1, 1, 1, false}, Pool{8, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, false},
              Pool{17, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, false}, Pool{20, 9, 10, 3, 2, 2, 2, 1, 0, 2, 1, true},
              Pool{24, 12, 7, 1, 1, 2, 1, 0, 0, 0, 0, false}, Pool{16, 5, 5, 5, 5, 3, 1, 2, 2, 2, 2, true},
              Pool{9, 31, 30, 2, 3, 2, 1, 0, 1, 1, 1, true}, Pool{3, 11, 11, 3, 3, 2, 1, 0, 0, 0, 0, true},
              Pool{16, 32, 32, 3, 3, 2, 1, 1, 1, 1, 1, false}})
            for (int64_t images : {1, 2})
                p.expectMatchesReference(images);
        // One image of one block is fewer tasks than four threads want: its
        // planes split into parts of output rows.
        // A NaN never enters the maximum (a running std::max from -inf).
        Pool{16, 11, 11, 3, 3, 2, 1, 1, 1, 1, 1, true, true}.expectMatchesReference(2);
        tbb::task_arena arena(4);
        arena.execute([&] {
            Pool{16, 31, 31, 3, 3, 1, 1, 1, 1, 1, 1, false}.expectMatchesReference(1);
            Pool{12, 30, 25, 3, 3, 2, 2, 2, 1, 0, 2, true}.expectMatchesReference(1);
        });
    }

    void convTasksGatherTheExtremesOfEveryOutput()
    {
        // A run that wants a Conv's output extremes (the fake-quant hook's
        // dynamic ranges) has every path's tasks add what they wrote: exactly
        // every element once, after the folded Add and activation, so that
        // the gathered {min, max} is the output's. One case per path.
        int nanCases = 0;
        tbb::task_arena arena(2); // the paths' choices depend on the thread count
        arena.execute([&] {
            for (const ConvPathCase& c : convPathCases()) {
                const Tensor X = randomTensor(c.x), W = randomTensor(c.w, 0.3f), B = randomTensor({c.w[0]});
                const Tensor addend = randomTensor(c.outputShape());
                const Node node = c.node();
                const Tensor* inputs[] = {&X, &W, &B};
                // The Conv with the case's folded nodes, gathering into `extremes` when given.
                auto run = [&](OutputExtremes* extremes) {
                    std::vector<Tensor> out(1);
                    KernelContext ctx(node, 0, 17, inputs, out, nullptr);
                    if (c.activation)
                        ctx.setFusedActivation(&*c.activation);
                    if (c.residual)
                        ctx.setFusedAddend(&addend);
                    ctx.setOutputExtremes(extremes);
                    ops::conv(ctx);
                    return ctx.fusionDeclined() ? Tensor() : out[0];
                };
                for (bool withNaN : {false, true}) {
                    Tensor x = X.clone();
                    if (withNaN)
                        x.mutableValues<float>()[size_t(X.numel() / 2)] = NAN;
                    inputs[0] = &x;
                    OutputExtremes extremes;
                    const Tensor gathered = run(&extremes), plain = run(nullptr);
                    QVERIFY2(gathered.rawData(), c.path); // the fusion was not declined
                    const auto y = gathered.values<float>(), expected = plain.values<float>();
                    QVERIFY2(std::equal(y.begin(), y.end(), expected.begin(), expected.end(),
                                        [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }),
                             c.path);
                    const std::optional<Range> range = extremes.of(gathered.numel());
                    // Not finite: no answer, the reader reads the tensor and names the NaN.
                    // (A folded Relu or Clip may have clamped it away.)
                    if (std::any_of(y.begin(), y.end(), [](float v) { return std::isnan(v); })) {
                        QVERIFY2(!range, c.path);
                        ++nanCases;
                        continue;
                    }
                    QVERIFY2(range, c.path);
                    const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
                    QVERIFY2(range->min == *lo && range->max == *hi, c.path);
                    // Counted: one element short or over is no answer.
                    QVERIFY2(!extremes.of(gathered.numel() - 1) && !extremes.of(gathered.numel() + 1), c.path);
                }
            }
        });
        QVERIFY(nanCases >= 4); // the cases without a clamping activation keep their NaN
    }

    void convPathsWriteIntoTheirSliceOfAConcatsOutput()
    {
        // Given a placement (its slice of a later Concat's output, along the
        // channels), every path writes there what it would have written into
        // a tensor of its own, bit for bit, image by image at the
        // placement's stride, and nothing outside the slice. With a residual
        // Add folded in, or a placement of another shape, it writes a tensor
        // of its own and leaves the buffer alone.
        // Each case also with one image more, so that every path writes
        // images at the placement's stride.
        std::vector<ConvPathCase> cases = convPathCases();
        for (ConvPathCase c : convPathCases()) {
            ++c.x[0];
            cases.push_back(c);
        }
        tbb::task_arena arena(2);
        arena.execute([&] {
            for (const ConvPathCase& c : cases) {
                const Tensor X = randomTensor(c.x), W = randomTensor(c.w, 0.3f), B = randomTensor({c.w[0]});
                const Shape shape = c.outputShape();
                const Tensor addend = randomTensor(shape);
                const Node node = c.node();
                const Tensor* inputs[] = {&X, &W, &B};
                const int64_t images = shape[0], image = shapeElementCount(shape) / images;
                // Channels before and after the slice: 3 and 5 planes' worth.
                const int64_t plane = image / shape[1], before = 3 * plane, after = 5 * plane;
                const int64_t stride = before + image + after;
                const float sentinel = -12345.0f;
                for (bool residual : {false, true}) {
                    if (residual && !c.residual)
                        continue;
                    for (bool otherShape : {false, true}) {
                        Tensor buffer(DType::F32, {images * stride});
                        std::fill(buffer.mutableValues<float>().begin(), buffer.mutableValues<float>().end(),
                                  sentinel);
                        OutputPlacement placement{shape, buffer.mutableValues<float>().data() + before, stride,
                                                  buffer.storage()};
                        if (otherShape)
                            ++placement.shape[1];
                        auto run = [&](const OutputPlacement* into, bool* placed) {
                            std::vector<Tensor> out(1);
                            KernelContext ctx(node, 0, 17, inputs, out, nullptr);
                            if (c.activation)
                                ctx.setFusedActivation(&*c.activation);
                            if (residual)
                                ctx.setFusedAddend(&addend);
                            ctx.setOutputPlacement(into);
                            ops::conv(ctx);
                            *placed = ctx.wrotePlacedOutput();
                            return out[0];
                        };
                        bool placed = false, plainPlaced = false;
                        const Tensor written = run(&placement, &placed), plain = run(nullptr, &plainPlaced);
                        QVERIFY2(!plainPlaced && placed == (!residual && !otherShape), c.path);
                        QVERIFY2(written.shape() == shape, c.path);
                        const auto out = buffer.values<float>(), expected = plain.values<float>();
                        for (int64_t n = 0; n < images; ++n) {
                            const float* slice = out.data() + n * stride;
                            QVERIFY2(std::all_of(slice, slice + before, [&](float v) { return v == sentinel; }),
                                     c.path);
                            QVERIFY2(std::all_of(slice + before + image, slice + stride,
                                                 [&](float v) { return v == sentinel; }),
                                     c.path);
                            const float* mine = placed ? slice + before : written.values<float>().data() + n * image;
                            QVERIFY2(std::equal(mine, mine + image, expected.data() + n * image), c.path);
                            if (!placed)
                                QVERIFY2(std::all_of(slice + before, slice + before + image,
                                                     [&](float v) { return v == sentinel; }),
                                         c.path);
                        }
                    }
                }
            }
        });
    }

    void convIntegerSubtractsZeroPointsBeforePadding()
    {
        // Padding contributes zero after the zero point is subtracted (not the raw code 0).
        const Shape xs{2, 4, 7, 6}, ws{6, 2, 3, 3};
        std::vector<uint8_t> xc(size_t(product(xs)));
        std::vector<int8_t> wc(size_t(product(ws)));
        for (auto& v : xc)
            v = uint8_t(randInt(0, 255));
        for (auto& v : wc)
            v = int8_t(randInt(-128, 127));
        const Tensor X = Tensor::fromVector<uint8_t>(DType::U8, xs, xc),
                     W = Tensor::fromVector<int8_t>(DType::I8, ws, wc);
        const Tensor xZero = Tensor::fromVector<uint8_t>(DType::U8, {}, {uint8_t(131)});
        const Tensor wZero = Tensor::fromVector<int8_t>(DType::I8, {6}, {0, 1, -1, 5, -128, 127});
        auto y = runKernel(ops::convInteger, "ConvInteger", {&X, &W, &xZero, &wZero},
                           {intAttr("group", 2), intsAttr("pads", {1, 2, 1, 0}), intsAttr("strides", {2, 1})}, 10);
        QCOMPARE(y[0].dtype(), DType::I32);
        Tensor xf(DType::F32, xs), wf(DType::F32, ws);
        for (size_t i = 0; i < xc.size(); ++i)
            xf.mutableValues<float>()[i] = float(int(xc[i]) - 131);
        for (size_t i = 0; i < wc.size(); ++i)
            wf.mutableValues<float>()[i] = float(int(wc[i]) - wZero.values<int8_t>()[i / 18]);
        const auto ref = referenceConv(xf, wf, nullptr, 2, {2, 1}, {1, 1}, {1, 2}, {4, 6});
        QCOMPARE(y[0].shape(), (Shape{2, 6, 4, 6}));
        for (size_t i = 0; i < ref.size(); ++i)
            QCOMPARE(double(y[0].values<int32_t>()[i]), double(ref[i]));
    }

    void qLinearConvAddsBiasAndRequantizesPerChannel()
    {
        const Shape xs{1, 3, 6, 5}, ws{4, 3, 3, 3};
        std::vector<uint8_t> xc(size_t(product(xs)));
        std::vector<int8_t> wc(size_t(product(ws)));
        for (auto& v : xc)
            v = uint8_t(randInt(0, 255));
        for (auto& v : wc)
            v = int8_t(randInt(-128, 127));
        const Tensor X = Tensor::fromVector<uint8_t>(DType::U8, xs, xc),
                     W = Tensor::fromVector<int8_t>(DType::I8, ws, wc);
        const Tensor xScale = Tensor::fromVector<float>(DType::F32, {}, {0.03f});
        const Tensor xZero = Tensor::fromVector<uint8_t>(DType::U8, {}, {uint8_t(120)});
        const Tensor wScale = Tensor::fromVector<float>(DType::F32, {4}, {0.002f, 0.01f, 0.0005f, 0.004f});
        const Tensor wZero = Tensor::fromVector<int8_t>(DType::I8, {4}, {0, 0, 0, 0});
        const Tensor yScale = Tensor::fromVector<float>(DType::F32, {}, {0.1f});
        const Tensor yZero = Tensor::fromVector<int8_t>(DType::I8, {}, {int8_t(-5)});
        const Tensor B = Tensor::fromVector<int32_t>(DType::I32, {4}, {1000, -2000, 0, 123456});
        const std::vector<Attribute> attrs = {intsAttr("pads", {1, 1, 1, 1})};
        auto q = runKernel(ops::qLinearConv, "QLinearConv",
                           {&X, &xScale, &xZero, &W, &wScale, &wZero, &yScale, &yZero, &B}, attrs, 10);
        auto acc = runKernel(ops::convInteger, "ConvInteger", {&X, &W, &xZero, &wZero}, attrs, 10);
        QCOMPARE(q[0].dtype(), DType::I8);
        QCOMPARE(q[0].shape(), acc[0].shape());
        const int64_t P = 30;
        for (int64_t e = 0; e < acc[0].numel(); ++e) {
            const size_t m = size_t(e / P);
            const float real = float(acc[0].values<int32_t>()[size_t(e)] + B.values<int32_t>()[m]) *
                               (0.03f * wScale.values<float>()[m] / 0.1f);
            QCOMPARE(float(q[0].values<int8_t>()[size_t(e)]), std::clamp(std::nearbyint(real) - 5.0f, -128.0f, 127.0f));
        }
    }

    void convAutoPadPlacesTheOddPadAsOnnxSays()
    {
        // Input 5, kernel 2, stride 2 -> output 3, total pad 1: SAME_UPPER pads the end, SAME_LOWER the start.
        const Tensor X = Tensor::fromVector<float>(DType::F32, {1, 1, 5}, {1, 2, 3, 4, 5});
        const Tensor W = Tensor::fromVector<float>(DType::F32, {1, 1, 2}, {1, 10});
        auto upper =
            runKernel(ops::conv, "Conv", {&X, &W}, {stringAttr("auto_pad", "SAME_UPPER"), intsAttr("strides", {2})});
        auto lower =
            runKernel(ops::conv, "Conv", {&X, &W}, {stringAttr("auto_pad", "SAME_LOWER"), intsAttr("strides", {2})});
        auto valid =
            runKernel(ops::conv, "Conv", {&X, &W}, {stringAttr("auto_pad", "VALID"), intsAttr("strides", {2})});
        EXPECT_CLOSE(upper[0], (std::vector<float>{21, 43, 5}), 0);
        EXPECT_CLOSE(lower[0], (std::vector<float>{10, 32, 54}), 0);
        EXPECT_CLOSE(valid[0], (std::vector<float>{21, 43}), 0);
    }

    void convRejectsGroupsThatDoNotDivideChannels()
    {
        const Tensor X = randomTensor({1, 6, 4, 4}), W = randomTensor({4, 3, 1, 1});
        QVERIFY_THROWS_EXCEPTION(Error, runKernel(ops::conv, "Conv", {&X, &W}, {intAttr("group", 4)}));
    }

    void convTransposeMatchesScatterReference()
    {
        for (int trial = 0; trial < 60; ++trial) {
            const int64_t group = randInt(1, 2), Cg = randInt(1, 3), Mg = randInt(1, 3);
            const int64_t H = randInt(2, 5), Wd = randInt(2, 5), k = randInt(1, 3), s = randInt(1, 3),
                          dil = randInt(1, 2), op = randInt(0, s - 1), opW = randInt(0, s - 1);
            // Pads small enough that both output sizes stay positive.
            const int64_t pad = randInt(0, std::min<int64_t>(k - 1, (s * (std::min(H, Wd) - 1) + (k - 1) * dil) / 2));
            const Tensor X = randomTensor({1, Cg * group, H, Wd}), W = randomTensor({Cg * group, Mg, k, k}),
                         B = randomTensor({Mg * group});
            const int64_t OH = s * (H - 1) + op + (k - 1) * dil + 1 - 2 * pad;
            const int64_t OW = s * (Wd - 1) + opW + (k - 1) * dil + 1 - 2 * pad;
            auto y = runKernel(ops::convTranspose, "ConvTranspose", {&X, &W, &B},
                               {intAttr("group", group), intsAttr("strides", {s, s}), intsAttr("dilations", {dil, dil}),
                                intsAttr("pads", {pad, pad, pad, pad}), intsAttr("output_padding", {op, opW})});
            QCOMPARE(y[0].shape(), (Shape{1, Mg * group, OH, OW}));
            std::vector<float> ref(size_t(Mg * group * OH * OW));
            for (int64_t m = 0; m < Mg * group; ++m)
                for (int64_t i = 0; i < OH * OW; ++i)
                    ref[size_t(m * OH * OW + i)] = B.values<float>()[size_t(m)];
            for (int64_t c = 0; c < Cg * group; ++c)
                for (int64_t ih = 0; ih < H; ++ih)
                    for (int64_t iw = 0; iw < Wd; ++iw)
                        for (int64_t mm = 0; mm < Mg; ++mm)
                            for (int64_t kh = 0; kh < k; ++kh)
                                for (int64_t kw = 0; kw < k; ++kw) {
                                    const int64_t oh = ih * s - pad + kh * dil, ow = iw * s - pad + kw * dil;
                                    if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                        continue;
                                    const int64_t m = (c / Cg) * Mg + mm;
                                    ref[size_t((m * OH + oh) * OW + ow)] +=
                                        X.values<float>()[size_t((c * H + ih) * Wd + iw)] *
                                        W.values<float>()[size_t(((c * Mg + mm) * k + kh) * k + kw)];
                                }
            EXPECT_CLOSE(y[0], ref, 1e-5);
        }
        // output_shape fixes the size; the pads follow from it.
        const Tensor X = randomTensor({1, 1, 3, 3}), W = randomTensor({1, 2, 3, 3});
        auto y = runKernel(ops::convTranspose, "ConvTranspose", {&X, &W},
                           {intsAttr("strides", {3, 2}), intsAttr("output_shape", {10, 8})});
        QCOMPARE(y[0].shape(), (Shape{1, 2, 10, 8}));
    }

    void matMulBroadcastsBatchesAndOneDimensionalOperands()
    {
        const std::vector<std::pair<Shape, Shape>> cases = {
            {{2, 1, 3, 4}, {5, 4, 6}}, {{4}, {3, 4, 2}},          {{2, 3, 4}, {4}},     {{4}, {4}},
            {{7, 33}, {33, 65}},       {{1, 3, 4}, {2, 1, 4, 5}}, {{300, 20}, {20, 30}}};
        for (const auto& [as, bs] : cases) {
            const Tensor A = randomTensor(as), B = randomTensor(bs);
            auto y = runKernel(ops::matMul, "MatMul", {&A, &B}, {});
            // Reference through explicit NumPy rules.
            Shape a = as, b = bs;
            if (a.size() == 1)
                a.insert(a.begin(), 1);
            if (b.size() == 1)
                b.push_back(1);
            const size_t br = std::max(a.size(), b.size()) - 2;
            Shape ab(br, 1), bb(br, 1), batch(br);
            std::copy(a.begin(), a.end() - 2, ab.end() - (a.size() - 2));
            std::copy(b.begin(), b.end() - 2, bb.end() - (b.size() - 2));
            for (size_t d = 0; d < br; ++d)
                batch[d] = std::max(ab[d], bb[d]);
            const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
            std::vector<float> ref;
            for (int64_t t = 0; t < product(batch); ++t) {
                const auto idx = unflatten(t, batch);
                std::vector<int64_t> ai(br), bi(br);
                for (size_t d = 0; d < br; ++d) {
                    ai[d] = ab[d] == 1 ? 0 : idx[d];
                    bi[d] = bb[d] == 1 ? 0 : idx[d];
                }
                const int64_t ao = flatten(ai, ab) * M * K, bo = flatten(bi, bb) * K * N;
                for (int64_t i = 0; i < M; ++i)
                    for (int64_t j = 0; j < N; ++j) {
                        double acc = 0;
                        for (int64_t k = 0; k < K; ++k)
                            acc += double(A.values<float>()[size_t(ao + i * K + k)]) *
                                   B.values<float>()[size_t(bo + k * N + j)];
                        ref.push_back(float(acc));
                    }
            }
            Shape expected = batch;
            if (as.size() > 1)
                expected.push_back(M);
            if (bs.size() > 1)
                expected.push_back(N);
            QCOMPARE(y[0].shape(), expected);
            EXPECT_CLOSE(y[0], ref, 1e-5);
        }
        const Tensor A = randomTensor({2, 3, 4}), B = randomTensor({3, 4, 5});
        QVERIFY_THROWS_EXCEPTION(Error, runKernel(ops::matMul, "MatMul", {&A, &B}, {}));
    }

    void matMulIntegerSubtractsZeroPointsAndAccumulatesExactly()
    {
        // Extreme codes make sums beyond float's 24-bit exactness: int32 must hold them exactly.
        const int64_t M = 3, K = 700, N = 4;
        std::vector<uint8_t> a(size_t(2 * M * K));
        std::vector<int8_t> b(size_t(K * N));
        for (auto& v : a)
            v = uint8_t(randInt(0, 1) ? 255 : randInt(0, 255));
        for (auto& v : b)
            v = int8_t(randInt(0, 1) ? -128 : randInt(-128, 127));
        const Tensor A = Tensor::fromVector<uint8_t>(DType::U8, {2, M, K}, a);
        const Tensor B = Tensor::fromVector<int8_t>(DType::I8, {K, N}, b);
        const Tensor aZero = Tensor::fromVector<uint8_t>(DType::U8, {M}, {0, 7, 200});
        const Tensor bZero = Tensor::fromVector<int8_t>(DType::I8, {N}, {0, -3, 5, 127});
        auto y = runKernel(ops::matMulInteger, "MatMulInteger", {&A, &B, &aZero, &bZero}, {}, 10);
        QCOMPARE(y[0].dtype(), DType::I32);
        QCOMPARE(y[0].shape(), (Shape{2, M, N}));
        for (int64_t t = 0; t < 2; ++t)
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                    int64_t acc = 0;
                    for (int64_t k = 0; k < K; ++k)
                        acc += (int64_t(a[size_t((t * M + i) * K + k)]) - aZero.values<uint8_t>()[size_t(i)]) *
                               (int64_t(b[size_t(k * N + j)]) - bZero.values<int8_t>()[size_t(j)]);
                    QCOMPARE(int64_t(y[0].values<int32_t>()[size_t((t * M + i) * N + j)]), acc);
                }
    }

    void qLinearMatMulRequantizesWithPerColumnScalesAndSaturates()
    {
        const int64_t M = 4, K = 9, N = 3;
        std::vector<int8_t> a(size_t(M * K)), b(size_t(K * N));
        for (auto& v : a)
            v = int8_t(randInt(-128, 127));
        for (auto& v : b)
            v = int8_t(randInt(-128, 127));
        const Tensor A = Tensor::fromVector<int8_t>(DType::I8, {M, K}, a),
                     B = Tensor::fromVector<int8_t>(DType::I8, {K, N}, b);
        const Tensor aScale = Tensor::fromVector<float>(DType::F32, {}, {0.02f});
        const Tensor aZero = Tensor::fromVector<int8_t>(DType::I8, {}, {int8_t(-3)});
        const Tensor bScale = Tensor::fromVector<float>(DType::F32, {N}, {0.01f, 0.001f, 0.05f});
        const Tensor bZero = Tensor::fromVector<int8_t>(DType::I8, {N}, {0, 2, -1});
        const Tensor yScale = Tensor::fromVector<float>(DType::F32, {}, {0.05f});
        const Tensor yZero = Tensor::fromVector<uint8_t>(DType::U8, {}, {uint8_t(100)});
        auto y = runKernel(ops::qLinearMatMul, "QLinearMatMul",
                           {&A, &aScale, &aZero, &B, &bScale, &bZero, &yScale, &yZero}, {}, 10);
        QCOMPARE(y[0].dtype(), DType::U8);
        bool saturated = false;
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int64_t acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += (a[size_t(i * K + k)] + 3) * (b[size_t(k * N + j)] - bZero.values<int8_t>()[size_t(j)]);
                const float m = 0.02f * bScale.values<float>()[size_t(j)] / 0.05f;
                const float want = std::clamp(std::nearbyint(float(acc) * m) + 100.0f, 0.0f, 255.0f);
                saturated = saturated || want == 0.0f || want == 255.0f;
                QCOMPARE(float(y[0].values<uint8_t>()[size_t(i * N + j)]), want);
            }
        QVERIFY(saturated); // the large third column's scale drives some outputs past the range
    }

    void gemmHonoursTransposesScalarsAndBroadcastC()
    {
        // Trials 16 to 23: up to four rows against a large B (a classifier on a
        // small batch), which runs along B's packed rows; 24 to 31: a batch of
        // 5 to 257 rows (B packed once, the product transposed; 257 is sgemm's).
        for (int trial = 0; trial < 32; ++trial) {
            const bool tA = trial < 16 && (trial & 1), tB = trial & 2;
            const bool few = trial >= 16 && trial < 24, batch = trial >= 24;
            const int64_t batchRows = std::vector<int64_t>{5, 8, 64, 256, 257, 7, 33, 100}[size_t(trial % 8)];
            const int64_t M = few ? 1 + trial % 4 : batch ? batchRows : randInt(1, 40),
                          K = few || batch ? 300 : randInt(1, 20), N = few || batch ? 517 : randInt(1, 30);
            const Tensor A = randomTensor(tA ? Shape{K, M} : Shape{M, K}),
                         B = randomTensor(tB ? Shape{N, K} : Shape{K, N});
            const Shape cShape = std::vector<Shape>{{N}, {M, 1}, {M, N}, {}}[size_t(trial / 4 % 4)];
            const Tensor C = randomTensor(cShape);
            const float alpha = 0.5f, beta = -2.0f;
            auto y = runKernel(
                ops::gemm, "Gemm", {&A, &B, &C},
                {intAttr("transA", tA), intAttr("transB", tB), floatAttr("alpha", alpha), floatAttr("beta", beta)});
            std::vector<float> ref;
            for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; ++k)
                        acc += double(A.values<float>()[size_t(tA ? k * M + i : i * K + k)]) *
                               B.values<float>()[size_t(tB ? j * K + k : k * N + j)];
                    int64_t ci = 0;
                    if (cShape.size() == 1)
                        ci = j;
                    else if (cShape.size() == 2)
                        ci = cShape[1] == 1 ? i : i * N + j;
                    ref.push_back(float(alpha * acc + beta * C.values<float>()[size_t(ci)]));
                }
            EXPECT_CLOSE(y[0], ref, few || batch ? 1e-4 : 1e-5); // sums of 300 products: float rounding grows
        }
        // An empty inner dimension: zeros.
        const Tensor A0(DType::F32, {2, 0}), B0(DType::F32, {0, 5});
        auto y0 = runKernel(ops::gemm, "Gemm", {&A0, &B0}, {});
        EXPECT_CLOSE(y0[0], std::vector<float>(10, 0.0f), 0.0);
    }

    // A language model's weights stay bf16/fp16 (the interpreter does not widen a
    // Gemm's B): the Gemm widens strips of about 4 Mi elements. Against the float
    // Gemm on the widened copy, over strip boundaries (K 4096: 1024 columns a
    // strip, N 2500: three strips), both transposes, few rows and a batch.
    void gemmWithHalfWeightsEqualsGemmOnTheirWidenedCopy()
    {
        for (const DType dtype : {DType::BF16, DType::F16})
            for (const bool tB : {true, false})
                for (const int64_t M : {int64_t(3), int64_t(300)}) {
                    const int64_t K = 4096, N = 2500;
                    const Tensor A = randomTensor({M, K});
                    const Tensor wide = randomTensor(tB ? Shape{N, K} : Shape{K, N}, 0.05f);
                    Tensor half(dtype, wide.shape());
                    auto* bits = static_cast<uint16_t*>(half.mutableRawData());
                    for (int64_t i = 0; i < wide.numel(); ++i)
                        bits[i] = dtype == DType::BF16 ? floatToBf16(wide.values<float>()[size_t(i)])
                                                       : floatToFp16(wide.values<float>()[size_t(i)]);
                    const Tensor widened = half.toFloat32();
                    const Tensor C = randomTensor({N});
                    const std::vector<Attribute> attributes = {intAttr("transB", tB), floatAttr("alpha", 0.5f),
                                                               floatAttr("beta", 2.0f)};
                    auto fromHalf = runKernel(ops::gemm, "Gemm", {&A, &half, &C}, attributes);
                    auto fromFloat = runKernel(ops::gemm, "Gemm", {&A, &widened, &C}, attributes);
                    EXPECT_CLOSE(fromHalf[0], std::vector<float>(fromFloat[0].values<float>().begin(),
                                                                 fromFloat[0].values<float>().end()),
                                 1e-5);
                }
        // Any other dtype of B is refused by name.
        const Tensor A = randomTensor({2, 3}), B(DType::I32, {3, 4});
        try {
            runKernel(ops::gemm, "Gemm", {&A, &B}, {});
            QFAIL("an int32 B was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("input 1 must be float32, bfloat16 or float16") != std::string::npos,
                     e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestRuntimeKernels)
#include "tst_runtime_kernels.moc"
