// Runtime kernels that do not run on the packed GEMM: pooling,
// normalization, softmax, reductions, LSTM/GRU and QuantizeLinear, against
// naive references written here, on random shapes and attributes and on cases
// whose answers the ONNX specification states.
#include <QtTest>

#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "kernel_support.h"
#include "runtime/op_registry.h"
#include "runtime/ops/activation.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/shape.h"
#include "runtime/ops/normalization.h"
#include "runtime/ops/pooling.h"
#include "runtime/ops/quantize_linear.h"
#include "runtime/ops/recurrent.h"
#include "runtime/ops/reduce.h"
#include "runtime/ops/softmax.h"

using namespace qs;
using namespace qs::test;

namespace {

float sigmoid(float x)
{
    return 1.0f / (1.0f + std::exp(-x));
}

// A naive LSTM (cell == 0) or GRU (cell == 1, `lbr` = linear_before_reset) over
// layout-0 tensors, written from the ONNX equations one scalar at a time.
// `reverse` runs a single direction backwards. Returns Y [T, dirs, N, H] followed by Y_h and, for LSTM, Y_c.
std::vector<std::vector<float>> referenceRecurrent(int cell, bool lbr, int dirs, bool reverse, const Tensor& X,
                                                   const Tensor& W, const Tensor& R, const Tensor& B,
                                                   const std::vector<int64_t>& lens, const Tensor& h0, const Tensor& c0,
                                                   const Tensor* P, int64_t H)
{
    const int64_t T = X.dim(0), N = X.dim(1), I = X.dim(2), G = (cell == 0 ? 4 : 3) * H;
    std::vector<float> Y(size_t(T * dirs * N * H), 0.0f), Yh(size_t(dirs * N * H)), Yc(size_t(dirs * N * H));
    auto x = [&](int64_t t, int64_t b, int64_t i) { return X.values<float>()[size_t((t * N + b) * I + i)]; };
    for (int d = 0; d < dirs; ++d) {
        auto w = [&](int64_t g, int64_t i) { return W.values<float>()[size_t((d * G + g) * I + i)]; };
        auto r = [&](int64_t g, int64_t j) { return R.values<float>()[size_t((d * G + g) * H + j)]; };
        auto wb = [&](int64_t g) { return B.values<float>()[size_t(d * 2 * G + g)]; };
        auto rb = [&](int64_t g) { return B.values<float>()[size_t(d * 2 * G + G + g)]; };
        for (int64_t b = 0; b < N; ++b) {
            std::vector<float> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
            for (int64_t k = 0; k < H; ++k) {
                h[size_t(k)] = h0.values<float>()[size_t((d * N + b) * H + k)];
                c[size_t(k)] = cell == 0 ? c0.values<float>()[size_t((d * N + b) * H + k)] : 0.0f;
            }
            for (int64_t s = 0; s < lens[size_t(b)]; ++s) {
                const int64_t t = d == 1 || reverse ? lens[size_t(b)] - 1 - s : s;
                // pre(g) = x W^T + h R^T + biases for gate row g.
                auto xw = [&](int64_t g) {
                    double a = wb(g);
                    for (int64_t i = 0; i < I; ++i)
                        a += double(x(t, b, i)) * w(g, i);
                    return a;
                };
                auto hr = [&](int64_t g, const std::vector<float>& v) {
                    double a = rb(g);
                    for (int64_t j = 0; j < H; ++j)
                        a += double(v[size_t(j)]) * r(g, j);
                    return a;
                };
                std::vector<float> nh(static_cast<size_t>(H)), nc(static_cast<size_t>(H));
                for (int64_t k = 0; k < H; ++k) {
                    if (cell == 0) {
                        const float* p = P ? P->values<float>().data() + d * 3 * H : nullptr;
                        const float i = sigmoid(float(xw(k) + hr(k, h)) + (p ? p[k] * c[size_t(k)] : 0.0f));
                        const float f =
                            sigmoid(float(xw(2 * H + k) + hr(2 * H + k, h)) + (p ? p[2 * H + k] * c[size_t(k)] : 0.0f));
                        const float g = std::tanh(float(xw(3 * H + k) + hr(3 * H + k, h)));
                        nc[size_t(k)] = f * c[size_t(k)] + i * g;
                        const float o =
                            sigmoid(float(xw(H + k) + hr(H + k, h)) + (p ? p[H + k] * nc[size_t(k)] : 0.0f));
                        nh[size_t(k)] = o * std::tanh(nc[size_t(k)]);
                    } else {
                        const float z = sigmoid(float(xw(k) + hr(k, h)));
                        std::vector<float> rh(static_cast<size_t>(H));
                        for (int64_t j = 0; j < H; ++j)
                            rh[size_t(j)] = sigmoid(float(xw(H + j) + hr(H + j, h))) * h[size_t(j)];
                        const float rk = sigmoid(float(xw(H + k) + hr(H + k, h)));
                        const float pre = lbr ? float(xw(2 * H + k) + rk * hr(2 * H + k, h))
                                              : float(xw(2 * H + k) + hr(2 * H + k, rh));
                        nh[size_t(k)] = (1 - z) * std::tanh(pre) + z * h[size_t(k)];
                    }
                }
                h = nh;
                if (cell == 0)
                    c = nc;
                for (int64_t k = 0; k < H; ++k)
                    Y[size_t(((t * dirs + d) * N + b) * H + k)] = h[size_t(k)];
            }
            for (int64_t k = 0; k < H; ++k) {
                Yh[size_t((d * N + b) * H + k)] = h[size_t(k)];
                Yc[size_t((d * N + b) * H + k)] = c[size_t(k)];
            }
        }
    }
    return {Y, Yh, Yc};
}

} // namespace

class TestRuntimeKernelsNonGemm : public QObject {
    Q_OBJECT

private slots:
    void powOfTwoIsTheBitsOfDoublePow()
    {
        // Pow(x, 2) squares in float; the bits are those of pow in double
        // rounded once, edges included. Other exponents, and an exponent of
        // higher rank (the output broadcasts), keep the general path.
        std::vector<float> values{0.0f, -0.0f, 1e-30f, -3e-20f, 1.5e19f, -2e19f, 3.4e38f,
                                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::denorm_min()};
        std::mt19937 random(3);
        std::normal_distribution<float> normal(0.0f, 10.0f);
        for (int i = 0; i < 1000; ++i)
            values.push_back(normal(random));
        const Tensor x = Tensor::fromVector(DType::F32, {int64_t(values.size())}, values);
        for (const Shape& exponentShape : {Shape{}, Shape{1}, Shape{1, 1}}) {
            const Tensor two = Tensor::fromVector(DType::F32, exponentShape, std::vector<float>{2.0f});
            const Tensor y = runKernel(ops::pow, "Pow", {&x, &two}, {}).at(0);
            QCOMPARE(y.numel(), int64_t(values.size()));
            for (size_t i = 0; i < values.size(); ++i)
                QCOMPARE(std::bit_cast<uint32_t>(y.values<float>()[i]),
                         std::bit_cast<uint32_t>(float(std::pow(double(values[i]), 2.0))));
        }
        const Tensor wide = Tensor::fromVector(DType::F32, {1, 1}, std::vector<float>{2.0f});
        const Tensor one = Tensor::fromVector(DType::F32, {1}, std::vector<float>{-3.0f});
        QCOMPARE(runKernel(ops::pow, "Pow", {&one, &wide}, {}).at(0).shape(), (Shape{1, 1}));
        const Tensor half = Tensor::fromVector(DType::F32, {}, std::vector<float>{0.5f});
        QCOMPARE(runKernel(ops::pow, "Pow", {&x, &half}, {}).at(0).values<float>()[1], 0.0f);
    }

    void sigmoidIsWithinTwoUlpOfLibm()
    {
        // The vectorised sigmoid (and the e^v under it) against libm in double,
        // rounded once: every 1/256 step over [-104, 104] and the edges.
        auto ulps = [](float a, float b) {
            const int64_t ia = std::bit_cast<int32_t>(a), ib = std::bit_cast<int32_t>(b);
            return std::abs(ia - ib); // both non-negative here
        };
        std::vector<float> values{0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, -86.99f, -87.0f, -87.01f, 88.7f, 89.0f};
        for (int i = -104 * 256; i <= 104 * 256; ++i)
            values.push_back(float(i) / 256.0f + 1.0f / 1024.0f);
        int64_t worstSigmoid = 0, worstExp = 0;
        for (float v : values) {
            const float reference = float(1.0 / (1.0 + std::exp(-double(v))));
            const float got = ops::sigmoidOf(v);
            if (reference >= std::numeric_limits<float>::min())
                worstSigmoid = std::max(worstSigmoid, ulps(got, reference));
            else // would be subnormal: 0 within the subnormal range
                QVERIFY2(got >= 0.0f && got < std::numeric_limits<float>::min(), std::to_string(v).c_str());
            QCOMPARE(ops::swishOf(v), v * got); // rounded as Mul(v, Sigmoid(v))
            if (v <= 0.0f) {
                const float e = float(std::exp(double(v)));
                if (e >= std::numeric_limits<float>::min())
                    worstExp = std::max(worstExp, ulps(ops::expOfNonPositive(v), e));
            }
        }
        // The vectorised loops (AVX-512, AVX2 or SSE2, as this CPU has) give the scalar bits.
        for (FusedActivation::Kind kind : {FusedActivation::Kind::Sigmoid, FusedActivation::Kind::Swish}) {
            std::vector<float> mapped = values;
            FusedActivation{kind}.apply(mapped.data(), int64_t(mapped.size()));
            for (size_t i = 0; i < values.size(); ++i) {
                const float scalar =
                    kind == FusedActivation::Kind::Sigmoid ? ops::sigmoidOf(values[i]) : ops::swishOf(values[i]);
                QCOMPARE(std::bit_cast<uint32_t>(mapped[i]), std::bit_cast<uint32_t>(scalar));
            }
        }
        QVERIFY2(worstSigmoid <= 2, std::to_string(worstSigmoid).c_str());
        QVERIFY2(worstExp <= 2, std::to_string(worstExp).c_str());
        QCOMPARE(ops::sigmoidOf(std::numeric_limits<float>::infinity()), 1.0f);
        QCOMPARE(ops::sigmoidOf(-std::numeric_limits<float>::infinity()), 0.0f);
        QVERIFY(std::isnan(ops::sigmoidOf(std::numeric_limits<float>::quiet_NaN())));
        QCOMPARE(ops::sigmoidOf(0.0f), 0.5f);
    }

    void poolingMatchesWindowReferenceWithCeilModeDilationsAndPads()
    {
        for (int trial = 0; trial < 60; ++trial) {
            const int64_t H = randInt(3, 9), W = randInt(3, 9), kh = randInt(1, 3), kw = randInt(1, 3);
            const int64_t s = randInt(1, 3), dil = randInt(1, 2), pb = randInt(0, kh - 1), pe = randInt(0, kw - 1);
            const bool ceil = trial % 2 == 1, includePad = trial % 4 >= 2;
            if ((kh - 1) * dil + 1 > H + pb + pb || (kw - 1) * dil + 1 > W + pe + pe)
                continue;
            const Tensor X = randomTensor({2, 3, H, W});
            const std::vector<Attribute> common = {intsAttr("kernel_shape", {kh, kw}), intsAttr("strides", {s, s}),
                                                   intsAttr("pads", {pb, pe, pb, pe}), intAttr("ceil_mode", ceil)};
            auto withDilations = common;
            withDilations.push_back(intsAttr("dilations", {dil, dil}));
            auto averageAttrs = withDilations;
            averageAttrs.push_back(intAttr("count_include_pad", includePad));
            auto mx = runKernel(ops::maxPool, "MaxPool", {&X}, withDilations, 12, 2);
            auto avg = runKernel(ops::averagePool, "AveragePool", {&X}, averageAttrs, 19);
            // Output size: floor or ceil, and a last window must start inside input + begin pad.
            auto outSize = [&](int64_t in, int64_t k, int64_t pad) {
                const double span = double(in + 2 * pad - (k - 1) * dil - 1) / double(s);
                int64_t o = int64_t(ceil ? std::ceil(span) : std::floor(span)) + 1;
                if (ceil && (o - 1) * s >= in + pad)
                    --o;
                return o;
            };
            const int64_t OH = outSize(H, kh, pb), OW = outSize(W, kw, pe);
            QCOMPARE(mx[0].shape(), (Shape{2, 3, OH, OW}));
            std::vector<float> refMax, refAvg;
            std::vector<int64_t> refIdx;
            for (int64_t nc = 0; nc < 6; ++nc)
                for (int64_t oh = 0; oh < OH; ++oh)
                    for (int64_t ow = 0; ow < OW; ++ow) {
                        float best = -INFINITY;
                        int64_t bestIdx = -1, inside = 0, padded = 0;
                        double sum = 0;
                        for (int64_t i = 0; i < kh; ++i)
                            for (int64_t j = 0; j < kw; ++j) {
                                const int64_t h = oh * s - pb + i * dil, w = ow * s - pe + j * dil;
                                if (h < H + pb && w < W + pe)
                                    ++padded;
                                if (h < 0 || h >= H || w < 0 || w >= W)
                                    continue;
                                const float v = X.values<float>()[size_t((nc * H + h) * W + w)];
                                ++inside;
                                sum += v;
                                if (v > best) {
                                    best = v;
                                    bestIdx = (nc * H + h) * W + w;
                                }
                            }
                        refMax.push_back(best);
                        refIdx.push_back(bestIdx);
                        refAvg.push_back(float(sum / double(includePad ? padded : inside)));
                    }
            EXPECT_CLOSE(mx[0], refMax, 0);
            // Without the Indices output MaxPool takes its branch-free path.
            EXPECT_CLOSE(runKernel(ops::maxPool, "MaxPool", {&X}, withDilations, 12)[0], refMax, 0);
            EXPECT_CLOSE(avg[0], refAvg, 1e-6);
            QVERIFY(std::equal(refIdx.begin(), refIdx.end(), mx[1].values<int64_t>().begin()));
        }
    }

    void padMatchesAnElementwiseReferenceInEveryMode()
    {
        // Row-wise Pad against the definition, element by element: every mode,
        // pads on some axes or all (opset 18's axes input), negative pads that
        // crop, a constant fill value, rows that are all padding, ranks 1 to 4,
        // float and int64 data.
        auto reference = [](const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
                            const std::string& mode, double value) {
            const int64_t rank = x.rank();
            Shape out(static_cast<size_t>(rank));
            for (int64_t a = 0; a < rank; ++a)
                out[size_t(a)] = x.dim(int(a)) + before[size_t(a)] + after[size_t(a)];
            std::vector<double> y;
            Shape coord(static_cast<size_t>(rank), 0);
            const Tensor xf = x.toFloat32();
            for (int64_t i = 0; i < shapeElementCount(out); ++i) {
                int64_t offset = 0;
                bool inside = true;
                for (int64_t a = 0; a < rank; ++a) {
                    const int64_t d = x.dim(int(a));
                    int64_t c = coord[size_t(a)] - before[size_t(a)];
                    if (c < 0 || c >= d) {
                        if (mode == "constant")
                            inside = false;
                        else if (mode == "edge")
                            c = std::clamp<int64_t>(c, 0, d - 1);
                        else if (mode == "wrap")
                            c = ((c % d) + d) % d;
                        else {
                            const int64_t period = 2 * (d - 1);
                            c = period == 0 ? 0 : ((c % period) + period) % period;
                            if (c >= d)
                                c = period - c;
                        }
                    }
                    offset = offset * d + c;
                }
                y.push_back(inside ? double(xf.values<float>()[size_t(offset)]) : value);
                for (int64_t a = rank; a-- > 0;) {
                    if (++coord[size_t(a)] < out[size_t(a)])
                        break;
                    coord[size_t(a)] = 0;
                }
            }
            return std::pair{out, y};
        };
        for (int trial = 0; trial < 80; ++trial) {
            const int64_t rank = randInt(1, 4);
            const std::string mode = std::vector<std::string>{"constant", "edge", "reflect", "wrap"}[size_t(trial % 4)];
            Shape shape;
            for (int64_t a = 0; a < rank; ++a)
                shape.push_back(randInt(2, a + 1 == rank ? 40 : 5));
            std::vector<int64_t> before(static_cast<size_t>(rank)), after(static_cast<size_t>(rank)), axes;
            for (int64_t a = 0; a < rank; ++a) {
                const bool padded = trial % 3 != 0 || a % 2 == 0;
                if (padded)
                    axes.push_back(a);
                // Reflect pads stay below the axis size; the others may also crop (negative).
                const int64_t hi = mode == "reflect" ? shape[size_t(a)] - 1 : 3;
                const int64_t lo = mode == "reflect" ? 0 : -1;
                before[size_t(a)] = padded ? randInt(lo, hi) : 0;
                after[size_t(a)] = padded ? randInt(lo, hi) : 0;
            }
            std::vector<int64_t> pads;
            for (int64_t a : axes)
                pads.push_back(before[size_t(a)]);
            for (int64_t a : axes)
                pads.push_back(after[size_t(a)]);
            const bool integers = trial % 5 == 4;
            Tensor x = randomTensor(shape);
            if (integers) {
                std::vector<int64_t> v;
                for (float f : x.values<float>())
                    v.push_back(int64_t(std::lround(f * 100)));
                x = Tensor::fromVector<int64_t>(DType::I64, shape, v);
            }
            const Tensor padsT = Tensor::fromVector<int64_t>(DType::I64, {int64_t(pads.size())}, pads);
            const Tensor axesT = Tensor::fromVector<int64_t>(DType::I64, {int64_t(axes.size())}, axes);
            const Tensor valueT = integers ? Tensor::fromVector<int64_t>(DType::I64, {}, std::vector<int64_t>{7})
                                           : Tensor::fromVector<float>(DType::F32, {}, std::vector<float>{-2.5f});
            const auto y = runKernel(ops::pad, "Pad", {&x, &padsT, &valueT, &axesT}, {stringAttr("mode", mode)}, 18);
            const auto [outShape, expected] = reference(x, before, after, mode, integers ? 7.0 : -2.5);
            QCOMPARE(y[0].shape(), outShape);
            const Tensor got = y[0].toFloat32();
            for (size_t i = 0; i < expected.size(); ++i)
                QVERIFY2(double(got.values<float>()[i]) == expected[i],
                         (mode + " trial " + std::to_string(trial) + " element " + std::to_string(i)).c_str());
        }
    }

    void transposeAndSliceMatchTheirDefinitionOnLargeTensors()
    {
        // Strided gathers merge the axes that read on contiguously and copy
        // large outputs in parallel pieces of rows: transposes that keep the
        // last axes in place, swap them or reverse all, with size-1 axes; a
        // channel split; slices with steps, negative steps and size-1 results.
        const Shape shape{3, 40, 1, 50, 37};
        const Tensor x = randomTensor(shape);
        const Shape strides = rowMajorStrides(shape);
        for (const std::vector<int64_t>& perm :
             {std::vector<int64_t>{0, 1, 2, 3, 4}, {1, 0, 2, 3, 4}, {0, 2, 1, 4, 3}, {4, 3, 2, 1, 0}, {2, 0, 3, 1, 4}}) {
            const auto y = runKernel(ops::transpose, "Transpose", {&x}, {intsAttr("perm", perm)});
            Shape out;
            for (int64_t p : perm)
                out.push_back(shape[size_t(p)]);
            QCOMPARE(y[0].shape(), out);
            const auto got = y[0].values<float>();
            Shape coord(out.size(), 0);
            for (size_t i = 0; i < got.size(); ++i) {
                int64_t offset = 0;
                for (size_t a = 0; a < out.size(); ++a)
                    offset += coord[a] * strides[size_t(perm[a])];
                QCOMPARE(got[i], x.values<float>()[size_t(offset)]);
                for (size_t a = out.size(); a-- > 0;) {
                    if (++coord[a] < out[a])
                        break;
                    coord[a] = 0;
                }
            }
        }
        struct Case {
            std::vector<int64_t> starts, ends, axes, steps;
        };
        const Tensor z = randomTensor({8, 232, 12, 12});
        const Shape zs = rowMajorStrides(z.shape());
        for (const Case& c : {Case{{0}, {116}, {1}, {1}}, Case{{116}, {232}, {1}, {1}},
                              Case{{1, 11}, {200, 0}, {1, 3}, {2, -3}}, Case{{5, 3}, {6, 4}, {0, 2}, {1, 1}},
                              Case{{-1}, {-1000}, {1}, {-1}}}) {
            auto tensor = [](const std::vector<int64_t>& v) {
                return Tensor::fromVector<int64_t>(DType::I64, {int64_t(v.size())}, v);
            };
            const Tensor s = tensor(c.starts), e = tensor(c.ends), a = tensor(c.axes), st = tensor(c.steps);
            const auto y = runKernel(ops::slice, "Slice", {&z, &s, &e, &a, &st}, {}, 13);
            // Per axis: the indices the slice takes, as ONNX defines them.
            std::vector<std::vector<int64_t>> taken(4);
            for (int64_t axis = 0; axis < 4; ++axis) {
                const int64_t d = z.dim(int(axis));
                int64_t start = 0, end = d, step = 1;
                for (size_t k = 0; k < c.axes.size(); ++k)
                    if (c.axes[k] == axis)
                        start = c.starts[k], end = c.ends[k], step = c.steps[k];
                start = start < 0 ? start + d : start;
                end = end < 0 ? end + d : end;
                start = step > 0 ? std::clamp<int64_t>(start, 0, d) : std::clamp<int64_t>(start, 0, d - 1);
                end = step > 0 ? std::clamp<int64_t>(end, 0, d) : std::clamp<int64_t>(end, -1, d - 1);
                for (int64_t i = start; step > 0 ? i < end : i > end; i += step)
                    taken[size_t(axis)].push_back(i);
            }
            QCOMPARE(y[0].shape(), (Shape{int64_t(taken[0].size()), int64_t(taken[1].size()),
                                          int64_t(taken[2].size()), int64_t(taken[3].size())}));
            const auto got = y[0].values<float>();
            size_t i = 0;
            for (int64_t n : taken[0])
                for (int64_t ch : taken[1])
                    for (int64_t h : taken[2])
                        for (int64_t w : taken[3])
                            QCOMPARE(got[i++], z.values<float>()[size_t(n * zs[0] + ch * zs[1] + h * zs[2] + w)]);
        }
    }

    void maxPoolCeilModeMatchesOnnxExample()
    {
        // ONNX's maxpool_2d_ceil: 4x4 input 1..16, kernel 3, stride 2, ceil_mode -> [[11, 12], [15, 16]].
        std::vector<float> v(16);
        for (int i = 0; i < 16; ++i)
            v[size_t(i)] = float(i + 1);
        const Tensor X = Tensor::fromVector<float>(DType::F32, {1, 1, 4, 4}, v);
        auto y = runKernel(ops::maxPool, "MaxPool", {&X},
                           {intsAttr("kernel_shape", {3, 3}), intsAttr("strides", {2, 2}), intAttr("ceil_mode", 1)});
        QCOMPARE(y[0].shape(), (Shape{1, 1, 2, 2}));
        EXPECT_CLOSE(y[0], (std::vector<float>{11, 12, 15, 16}), 0);
        auto g = runKernel(ops::globalAveragePool, "GlobalAveragePool", {&X}, {});
        QCOMPARE(g[0].shape(), (Shape{1, 1, 1, 1}));
        EXPECT_CLOSE(g[0], (std::vector<float>{8.5f}), 0);
    }

    void normalizationsMatchTheirFormulas()
    {
        const Tensor X = randomTensor({3, 4, 5, 6}, 3.0f);
        // LayerNormalization over the last two axes, scale/bias [5, 6]; Mean and InvStdDev outputs.
        const Tensor scale = randomTensor({5, 6}), bias = randomTensor({5, 6});
        auto ln = runKernel(ops::layerNormalization, "LayerNormalization", {&X, &scale, &bias},
                            {intAttr("axis", -2), floatAttr("epsilon", 1e-3f)}, 17, 3);
        std::vector<float> ref, means, invStds;
        for (int64_t r = 0; r < 12; ++r) {
            const float* x = X.values<float>().data() + r * 30;
            double m = 0, v = 0;
            for (int i = 0; i < 30; ++i)
                m += x[i];
            m /= 30;
            for (int i = 0; i < 30; ++i)
                v += (x[i] - m) * (x[i] - m);
            v /= 30;
            means.push_back(float(m));
            invStds.push_back(float(1 / std::sqrt(v + 1e-3)));
            for (int i = 0; i < 30; ++i)
                ref.push_back(float((x[i] - m) / std::sqrt(v + 1e-3) * scale.values<float>()[size_t(i)] +
                                    bias.values<float>()[size_t(i)]));
        }
        EXPECT_CLOSE(ln[0], ref, 1e-5);
        QCOMPARE(ln[1].shape(), (Shape{3, 4, 1, 1}));
        EXPECT_CLOSE(ln[1], means, 1e-6);
        EXPECT_CLOSE(ln[2], invStds, 1e-5);

        // BatchNormalization (inference) and InstanceNormalization, per channel.
        const Tensor s = randomTensor({4}), b = randomTensor({4}), mean = randomTensor({4});
        Tensor var = randomTensor({4});
        for (float& v : var.mutableValues<float>())
            v = std::fabs(v) + 0.1f;
        auto bn = runKernel(ops::batchNormalization, "BatchNormalization", {&X, &s, &b, &mean, &var}, {}, 15);
        auto in = runKernel(ops::instanceNormalization, "InstanceNormalization", {&X, &s, &b}, {});
        std::vector<float> refBn, refIn;
        for (int64_t nc = 0; nc < 12; ++nc) {
            const size_t c = size_t(nc % 4);
            const float* x = X.values<float>().data() + nc * 30;
            double m = 0, v = 0;
            for (int i = 0; i < 30; ++i)
                m += x[i];
            m /= 30;
            for (int i = 0; i < 30; ++i)
                v += (x[i] - m) * (x[i] - m);
            v /= 30;
            for (int i = 0; i < 30; ++i) {
                refBn.push_back(float((x[i] - mean.values<float>()[c]) / std::sqrt(var.values<float>()[c] + 1e-5) *
                                          s.values<float>()[c] +
                                      b.values<float>()[c]));
                refIn.push_back(float((x[i] - m) / std::sqrt(v + 1e-5) * s.values<float>()[c] + b.values<float>()[c]));
            }
        }
        EXPECT_CLOSE(bn[0], refBn, 1e-5);
        EXPECT_CLOSE(in[0], refIn, 1e-5);
    }

    void softmaxFlattensBeforeOpset13AndUsesOneAxisAfter()
    {
        const Tensor X = randomTensor({2, 3, 4}, 4.0f);
        auto old = runKernel(ops::softmax, "Softmax", {&X}, {intAttr("axis", 1)}, 11);
        auto now = runKernel(ops::softmax, "Softmax", {&X}, {intAttr("axis", 1)}, 13);
        auto logNow = runKernel(ops::logSoftmax, "LogSoftmax", {&X}, {}, 13);
        std::vector<float> refOld(24), refNow(24), refLog(24);
        for (int n = 0; n < 2; ++n) {
            // Opset 11: rows of 12 (the [3, 4] block flattened).
            double sum = 0;
            for (int i = 0; i < 12; ++i)
                sum += std::exp(double(X.values<float>()[size_t(n * 12 + i)]));
            for (int i = 0; i < 12; ++i)
                refOld[size_t(n * 12 + i)] = float(std::exp(double(X.values<float>()[size_t(n * 12 + i)])) / sum);
            // Opset 13: along axis 1 only (3 values, stride 4).
            for (int k = 0; k < 4; ++k) {
                double s = 0;
                for (int c = 0; c < 3; ++c)
                    s += std::exp(double(X.values<float>()[size_t(n * 12 + c * 4 + k)]));
                for (int c = 0; c < 3; ++c) {
                    const size_t i = size_t(n * 12 + c * 4 + k);
                    refNow[i] = float(std::exp(double(X.values<float>()[i])) / s);
                }
            }
        }
        // LogSoftmax along the last axis (default -1).
        for (int r = 0; r < 6; ++r) {
            double s = 0;
            for (int k = 0; k < 4; ++k)
                s += std::exp(double(X.values<float>()[size_t(r * 4 + k)]));
            for (int k = 0; k < 4; ++k)
                refLog[size_t(r * 4 + k)] = float(double(X.values<float>()[size_t(r * 4 + k)]) - std::log(s));
        }
        EXPECT_CLOSE(old[0], refOld, 1e-6);
        EXPECT_CLOSE(now[0], refNow, 1e-6);
        EXPECT_CLOSE(logNow[0], refLog, 1e-6);
        // Large logits must not overflow.
        const Tensor big = Tensor::fromVector<float>(DType::F32, {1, 3}, {1000.0f, 1000.0f, -1000.0f});
        auto y = runKernel(ops::softmax, "Softmax", {&big}, {}, 13);
        EXPECT_CLOSE(y[0], (std::vector<float>{0.5f, 0.5f, 0.0f}), 1e-7);
    }

    void reductionsOverConsecutiveAxesMatchTheirFormulas()
    {
        // Every run of consecutive axes of a [3, 4, 5, 37] tensor (the float
        // fast path), each reduction, against sums written out in double.
        const Shape shape{3, 4, 5, 37};
        const Tensor X = randomTensor(shape);
        const std::vector<std::pair<const char*, Kernel>> kinds{
            {"ReduceMean", ops::reduceMean}, {"ReduceSum", ops::reduceSum}, {"ReduceSumSquare", ops::reduceSumSquare},
            {"ReduceL1", ops::reduceL1},     {"ReduceL2", ops::reduceL2},   {"ReduceMax", ops::reduceMax},
            {"ReduceMin", ops::reduceMin}};
        for (int a = 0; a < 4; ++a)
            for (int b = a + 1; b <= 4; ++b) {
                std::vector<int64_t> axisList;
                for (int d = a; d < b; ++d)
                    axisList.push_back(d);
                const Tensor axes = Tensor::fromVector<int64_t>(DType::I64, {int64_t(axisList.size())}, axisList);
                int64_t rows = 1, count = 1, inner = 1;
                for (int d = 0; d < 4; ++d)
                    (d < a ? rows : d < b ? count : inner) *= shape[size_t(d)];
                for (const auto& [name, kernel] : kinds) {
                    const std::string kind = name;
                    const Tensor y = runKernel(kernel, name, {&X, &axes}, {}, 18).at(0);
                    std::vector<float> expected;
                    for (int64_t r = 0; r < rows; ++r)
                        for (int64_t i = 0; i < inner; ++i) {
                            double sum = 0, sq = 0, l1 = 0, hi = -1e300, lo = 1e300;
                            for (int64_t c = 0; c < count; ++c) {
                                const double v = X.values<float>()[size_t((r * count + c) * inner + i)];
                                sum += v;
                                sq += v * v;
                                l1 += std::fabs(v);
                                hi = std::max(hi, v);
                                lo = std::min(lo, v);
                            }
                            expected.push_back(float(kind == "ReduceMean"        ? sum / double(count)
                                                     : kind == "ReduceSum"       ? sum
                                                     : kind == "ReduceSumSquare" ? sq
                                                     : kind == "ReduceL1"        ? l1
                                                     : kind == "ReduceL2"        ? std::sqrt(sq)
                                                     : kind == "ReduceMax"       ? hi
                                                                                 : lo));
                        }
                    QCOMPARE(y.numel(), int64_t(expected.size()));
                    EXPECT_CLOSE(y, expected, 1e-6);
                }
            }
    }

    void reductionsTakeAxesFromAttributeOrInputByOpset()
    {
        const Tensor X = randomTensor({3, 4, 5});
        const Tensor axes = Tensor::fromVector<int64_t>(DType::I64, {2}, {0, -1});
        auto attr = runKernel(ops::reduceMean, "ReduceMean", {&X}, {intsAttr("axes", {0, -1})}, 13);
        auto input = runKernel(ops::reduceMean, "ReduceMean", {&X, &axes}, {intAttr("keepdims", 0)}, 18);
        auto l2 = runKernel(ops::reduceL2, "ReduceL2", {&X, &axes}, {}, 18);
        auto lse = runKernel(ops::reduceLogSumExp, "ReduceLogSumExp", {&X, &axes}, {}, 18);
        QCOMPARE(attr[0].shape(), (Shape{1, 4, 1}));
        QCOMPARE(input[0].shape(), (Shape{4}));
        std::vector<float> mean, norm, logSumExp;
        for (int j = 0; j < 4; ++j) {
            double s = 0, sq = 0, e = 0;
            for (int i = 0; i < 3; ++i)
                for (int k = 0; k < 5; ++k) {
                    const double v = X.values<float>()[size_t((i * 4 + j) * 5 + k)];
                    s += v;
                    sq += v * v;
                    e += std::exp(v);
                }
            mean.push_back(float(s / 15));
            norm.push_back(float(std::sqrt(sq)));
            logSumExp.push_back(float(std::log(e)));
        }
        EXPECT_CLOSE(attr[0], mean, 1e-6);
        EXPECT_CLOSE(input[0], mean, 1e-6);
        EXPECT_CLOSE(l2[0], norm, 1e-6);
        EXPECT_CLOSE(lse[0], logSumExp, 1e-6);
        // No axes: all of them, unless noop_with_empty_axes.
        auto all = runKernel(ops::reduceSum, "ReduceSum", {&X}, {intAttr("keepdims", 0)}, 13);
        QCOMPARE(all[0].shape(), Shape{});
        auto noop = runKernel(ops::reduceMax, "ReduceMax", {&X}, {intAttr("noop_with_empty_axes", 1)}, 18);
        EXPECT_CLOSE(noop[0], (std::vector<float>(X.values<float>().begin(), X.values<float>().end())), 0);
        // ArgMax with ties: first index, or the last with select_last_index.
        const Tensor ties = Tensor::fromVector<float>(DType::F32, {2, 3}, {1, 5, 5, 2, 2, 0});
        auto first = runKernel(ops::argMax, "ArgMax", {&ties}, {intAttr("axis", 1), intAttr("keepdims", 0)}, 13);
        auto last =
            runKernel(ops::argMax, "ArgMax", {&ties}, {intAttr("axis", 1), intAttr("select_last_index", 1)}, 13);
        auto minimum = runKernel(ops::argMin, "ArgMin", {&ties}, {intAttr("axis", 0)}, 13);
        QCOMPARE(first[0].shape(), (Shape{2}));
        QCOMPARE(last[0].shape(), (Shape{2, 1}));
        QCOMPARE(std::vector<int64_t>(first[0].values<int64_t>().begin(), first[0].values<int64_t>().end()),
                 (std::vector<int64_t>{1, 0}));
        QCOMPARE(std::vector<int64_t>(last[0].values<int64_t>().begin(), last[0].values<int64_t>().end()),
                 (std::vector<int64_t>{2, 1}));
        QCOMPARE(std::vector<int64_t>(minimum[0].values<int64_t>().begin(), minimum[0].values<int64_t>().end()),
                 (std::vector<int64_t>{0, 1, 1}));
    }

    void lstmAndGruMatchScalarEquationsInEveryDirection()
    {
        for (int trial = 0; trial < 12; ++trial) {
            const int cell = trial % 2;
            const bool lbr = trial % 4 == 3;
            const std::string direction =
                std::vector<std::string>{"forward", "reverse", "bidirectional"}[size_t(trial / 4)];
            const int dirs = direction == "bidirectional" ? 2 : 1;
            const int64_t T = randInt(1, 5), N = randInt(1, 3), I = randInt(1, 4), H = randInt(1, 5);
            const int64_t G = (cell == 0 ? 4 : 3) * H;
            const Tensor X = randomTensor({T, N, I}), W = randomTensor({dirs, G, I}, 0.5f),
                         R = randomTensor({dirs, G, H}, 0.5f), B = randomTensor({dirs, 2 * G}, 0.5f),
                         h0 = randomTensor({dirs, N, H}), c0 = randomTensor({dirs, N, H}),
                         P = randomTensor({dirs, 3 * H}, 0.5f);
            std::vector<int64_t> lens(static_cast<size_t>(N));
            for (auto& l : lens)
                l = randInt(0, T);
            lens[0] = T;
            const Tensor seqLens =
                Tensor::fromVector<int32_t>(DType::I32, {N}, std::vector<int32_t>(lens.begin(), lens.end()));
            std::vector<Attribute> attrs = {intAttr("hidden_size", H), stringAttr("direction", direction)};
            if (lbr)
                attrs.push_back(intAttr("linear_before_reset", 1));
            auto out = cell == 0 ? runKernel(ops::lstm, "LSTM", {&X, &W, &R, &B, &seqLens, &h0, &c0, &P}, attrs, 14, 3)
                                 : runKernel(ops::gru, "GRU", {&X, &W, &R, &B, &seqLens, &h0}, attrs, 14, 2);
            const auto ref = referenceRecurrent(cell, lbr, dirs, direction == "reverse", X, W, R, B, lens, h0, c0,
                                                cell == 0 ? &P : nullptr, H);
            QCOMPARE(out[0].shape(), (Shape{T, dirs, N, H}));
            EXPECT_CLOSE(out[0], ref[0], 1e-5);
            EXPECT_CLOSE(out[1], ref[1], 1e-5);
            if (cell == 0)
                EXPECT_CLOSE(out[2], ref[2], 1e-5);
        }
    }

    void lstmBatchFirstLayoutTransposesInputsAndOutputs()
    {
        const int64_t T = 3, N = 2, I = 3, H = 4;
        const Tensor X = randomTensor({T, N, I}), W = randomTensor({2, 4 * H, I}), R = randomTensor({2, 4 * H, H});
        Tensor Xb(DType::F32, {N, T, I});
        for (int64_t t = 0; t < T; ++t)
            for (int64_t b = 0; b < N; ++b)
                for (int64_t i = 0; i < I; ++i)
                    Xb.mutableValues<float>()[size_t((b * T + t) * I + i)] =
                        X.values<float>()[size_t((t * N + b) * I + i)];
        const std::vector<Attribute> attrs = {intAttr("hidden_size", H), stringAttr("direction", "bidirectional")};
        auto seqFirst = runKernel(ops::lstm, "LSTM", {&X, &W, &R}, attrs, 14, 3);
        auto withLayout = attrs;
        withLayout.push_back(intAttr("layout", 1));
        auto batchFirst = runKernel(ops::lstm, "LSTM", {&Xb, &W, &R}, withLayout, 14, 3);
        QCOMPARE(batchFirst[0].shape(), (Shape{N, T, 2, H}));
        QCOMPARE(batchFirst[1].shape(), (Shape{N, 2, H}));
        std::vector<float> expected;
        for (int64_t b = 0; b < N; ++b)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t d = 0; d < 2; ++d)
                    for (int64_t k = 0; k < H; ++k)
                        expected.push_back(seqFirst[0].values<float>()[size_t(((t * 2 + d) * N + b) * H + k)]);
        EXPECT_CLOSE(batchFirst[0], expected, 0);
    }

    void quantizeLinearRoundsHalfToEvenAndSaturatesPerAxisAndBlocked()
    {
        // Per tensor, uint8 by default: ties to even, saturation at both ends.
        const Tensor x =
            Tensor::fromVector<float>(DType::F32, {8}, {0.5f, 1.5f, 2.5f, -0.5f, 300.0f, -300.0f, 127.4f, 3.0f});
        const Tensor scale = Tensor::fromVector<float>(DType::F32, {}, {1.0f});
        auto u8 = runKernel(ops::quantizeLinear, "QuantizeLinear", {&x, &scale}, {}, 13);
        QCOMPARE(u8[0].dtype(), DType::U8);
        QCOMPARE(std::vector<uint8_t>(u8[0].values<uint8_t>().begin(), u8[0].values<uint8_t>().end()),
                 (std::vector<uint8_t>{0, 2, 2, 0, 255, 0, 127, 3}));
        const Tensor zp8 = Tensor::fromVector<int8_t>(DType::I8, {}, {int8_t(1)});
        auto i8 = runKernel(ops::quantizeLinear, "QuantizeLinear", {&x, &scale, &zp8}, {}, 13);
        QCOMPARE(std::vector<int8_t>(i8[0].values<int8_t>().begin(), i8[0].values<int8_t>().end()),
                 (std::vector<int8_t>{1, 3, 3, 1, 127, -128, 127, 4}));

        // Per axis (axis 1) and blocked (axis 1, block 2) against the formula.
        const Tensor X = randomTensor({2, 5, 3}, 4.0f);
        const Tensor perAxis = Tensor::fromVector<float>(DType::F32, {5}, {0.1f, 0.2f, 0.05f, 1.0f, 0.3f});
        const Tensor perAxisZp = Tensor::fromVector<int8_t>(DType::I8, {5}, {0, 3, -4, 10, 0});
        auto qa =
            runKernel(ops::quantizeLinear, "QuantizeLinear", {&X, &perAxis, &perAxisZp}, {intAttr("axis", 1)}, 13);
        Tensor blockScale = randomTensor({2, 3, 3});
        for (float& v : blockScale.mutableValues<float>())
            v = std::fabs(v) * 0.1f + 0.01f;
        auto qb = runKernel(ops::quantizeLinear, "QuantizeLinear", {&X, &blockScale},
                            {intAttr("axis", 1), intAttr("block_size", 2), intAttr("output_dtype", 3)}, 21);
        QCOMPARE(qb[0].dtype(), DType::I8);
        for (int64_t o = 0; o < 2; ++o)
            for (int64_t a = 0; a < 5; ++a)
                for (int64_t i = 0; i < 3; ++i) {
                    const size_t e = size_t((o * 5 + a) * 3 + i);
                    const float v = X.values<float>()[e];
                    const double wantA = std::clamp(std::nearbyint(double(v / perAxis.values<float>()[size_t(a)])) +
                                                        perAxisZp.values<int8_t>()[size_t(a)],
                                                    -128.0, 127.0);
                    const float bs = blockScale.values<float>()[size_t((o * 3 + a / 2) * 3 + i)];
                    const double wantB = std::clamp(std::nearbyint(double(v / bs)), -128.0, 127.0);
                    QCOMPARE(double(qa[0].values<int8_t>()[e]), wantA);
                    QCOMPARE(double(qb[0].values<int8_t>()[e]), wantB);
                }
        // Dequantize undoes the grid exactly: (q - zp) * scale.
        auto dq = runKernel(ops::dequantizeLinear, "DequantizeLinear", {&qa[0], &perAxis, &perAxisZp},
                            {intAttr("axis", 1)}, 13);
        std::vector<float> back;
        for (int64_t e = 0; e < 30; ++e) {
            const size_t a = size_t((e / 3) % 5);
            back.push_back(float(qa[0].values<int8_t>()[size_t(e)] - perAxisZp.values<int8_t>()[a]) *
                           perAxis.values<float>()[a]);
        }
        EXPECT_CLOSE(dq[0], back, 0);
        // A blocked scale of the wrong shape is refused.
        const Tensor wrong = randomTensor({2, 2, 3});
        QVERIFY_THROWS_EXCEPTION(Error, runKernel(ops::quantizeLinear, "QuantizeLinear", {&X, &wrong},
                                                  {intAttr("axis", 1), intAttr("block_size", 2)}, 21));
    }

    void dynamicQuantizeLinearMatchesOnnxExample()
    {
        // ONNX's example: range widened to include 0 -> scale (2 + 3) / 255, zero point 153.
        const Tensor x = Tensor::fromVector<float>(DType::F32, {6}, {0.0f, 2.0f, -3.0f, -2.5f, 1.34f, 0.5f});
        auto y = runKernel(ops::dynamicQuantizeLinear, "DynamicQuantizeLinear", {&x}, {}, 11, 3);
        QCOMPARE(std::vector<uint8_t>(y[0].values<uint8_t>().begin(), y[0].values<uint8_t>().end()),
                 (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
        QCOMPARE(y[1].values<float>()[0], 5.0f / 255.0f);
        QCOMPARE(y[2].values<uint8_t>()[0], uint8_t(153));
        // All zeros: a zero scale quantizes everything to 0, not NaN.
        const Tensor zeros(DType::F32, {4});
        auto z = runKernel(ops::dynamicQuantizeLinear, "DynamicQuantizeLinear", {&zeros}, {}, 11, 3);
        QCOMPARE(z[0].values<uint8_t>()[0], uint8_t(0));
        QCOMPARE(z[2].values<uint8_t>()[0], uint8_t(0));
    }
};

QTEST_APPLESS_MAIN(TestRuntimeKernelsNonGemm)
#include "tst_runtime_kernels_non_gemm.moc"
