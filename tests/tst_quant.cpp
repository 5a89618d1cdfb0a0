// Quant: scales and zero points, microscaling block scales, and the fast
// kernels against the scalar reference, bit for bit.
#include <QtTest>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include <tbb/global_control.h>

#include "core/half.h"
#include "numerics/float_formats.h"
#include "numerics/grid.h"
#include "quant/kernels.h"
#include "quant/microscaling.h"
#include "quant/reference.h"

using namespace qs;

namespace {

const Shape kShape{5, 7, 45}; // 45 along the last axis: tiles of 32 and blocks of 32 leave a ragged tail

// A tensor of `dtype` holding `values` (rounded to fp16 / bf16 when asked).
Tensor makeInput(DType dtype, const Shape& shape, const std::vector<float>& values)
{
    if (dtype == DType::F32)
        return Tensor::fromVector<float>(DType::F32, shape, values);
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i)
        bits[i] = dtype == DType::F16 ? floatToFp16(values[i]) : floatToBf16(values[i]);
    return Tensor::fromVector<uint16_t>(dtype, shape, bits);
}

// Per-group [min, max] of the data, the way a minmax calibration would see it.
std::vector<Range> rangesOf(const Tensor& t, const BlockLayout& layout)
{
    const Tensor f = t.toFloat32();
    std::vector<Range> r(size_t(layout.groupCount()), Range{INFINITY, -INFINITY});
    for (int64_t i = 0; i < f.numel(); ++i) {
        Range& g = r[size_t(layout.groupOf(i))];
        g.min = std::min(g.min, f.values<float>()[size_t(i)]);
        g.max = std::max(g.max, f.values<float>()[size_t(i)]);
    }
    return r;
}

// |y − x| <= s/2, up to the float rounding of x / s and of q · s (a few ulps of x).
bool withinHalfStep(float y, float x, float s)
{
    return std::abs(y - x) <= s / 2 + 4 * FLT_EPSILON * std::abs(x);
}

enum class Data { Normal, HeavyTailed, Adversarial };

std::vector<float> randomData(Data kind, size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> v(n);
    for (auto& x : v)
        x = kind == Data::Normal ? normal(rng) : normal(rng) * std::exp(1.5f * normal(rng));
    return v;
}

// Values placed where rounding is hardest for the given params: exact ties at
// .5 code units, ±the grid's ends, just beyond the clip, float-format
// midpoints, denormals and ±0.
std::vector<float> adversarialData(const QuantParams& p, uint32_t seed)
{
    std::mt19937 rng(seed);
    const qs::QuantTypeInfo& q = qtypeInfo(p.qtype);
    const bool integerLike = isIntegerLike(p.qtype);
    const IntegerGrid grid = integerLike ? integerGrid(p.qtype, p.options.narrowRange) : IntegerGrid{0, 0};
    const float top = integerLike ? float(grid.qmax) : q.maxFinite;
    const float bottom = integerLike ? float(grid.qmin) : -q.maxFinite;
    std::vector<float> out(size_t(shapeElementCount(p.layout.shape)));
    for (size_t i = 0; i < out.size(); ++i) {
        const GroupQuant gq = groupQuant(p, p.layout.groupOf(int64_t(i)));
        float v = 0; // in code units, before the zero point
        switch (rng() % 10) {
        case 0:
            v = std::floor(std::uniform_real_distribution<float>(bottom, top)(rng)) + 0.5f;
            break;
        case 1:
            v = top;
            break;
        case 2:
            v = bottom;
            break;
        case 3:
            v = top * (1 + 0x1p-20f) + 0.5f;
            break;
        case 4:
            v = bottom * (1 + 0x1p-20f) - 0.5f;
            break;
        case 5: { // midpoint between two neighbouring codes of a float format or nf4
            if (integerLike) {
                v = float(int32_t(rng() % uint32_t(grid.qmax - grid.qmin + 1)) + grid.qmin) + 0.5f;
                break;
            }
            const uint32_t lastFinite = q.element == QType::Fp8E4M3   ? 0x7e
                                        : q.element == QType::Fp8E5M2 ? 0x7b
                                        : q.element == QType::Nf4     ? 15
                                                                      : 7;
            const uint32_t c = rng() % lastFinite;
            v = (gridValueOfCode(q.element, c) + gridValueOfCode(q.element, c + 1)) / 2 * (rng() % 2 ? 1.0f : -1.0f);
            break;
        }
        case 6:
            out[i] = std::bit_cast<float>(uint32_t(rng() % 0x7fffff + 1) | (rng() % 2 ? 0x80000000u : 0));
            continue;
        case 7:
            out[i] = rng() % 2 ? 0.0f : -0.0f;
            continue;
        default:
            v = std::uniform_real_distribution<float>(bottom, top)(rng);
            break;
        }
        out[i] = (v - float(gq.zeroPoint)) * gq.scale;
    }
    return out;
}

bool sameBits(const Tensor& a, const Tensor& b, QString& where)
{
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
        where = "dtype or shape differ";
        return false;
    }
    const size_t size = dtypeSize(a.dtype());
    const auto* pa = static_cast<const uint8_t*>(a.rawData());
    const auto* pb = static_cast<const uint8_t*>(b.rawData());
    for (int64_t i = 0; i < a.numel(); ++i)
        if (std::memcmp(pa + size_t(i) * size, pb + size_t(i) * size, size) != 0) {
            where = QString("element %1").arg(i);
            if (a.dtype() == DType::F32)
                where += QString(": %1 vs %2")
                             .arg(double(a.values<float>()[size_t(i)]), 0, 'g', 9)
                             .arg(double(b.values<float>()[size_t(i)]), 0, 'g', 9);
            return false;
        }
    return true;
}

struct LayoutCase {
    const char* name;
    BlockLayout layout;
};

std::vector<LayoutCase> layoutCases()
{
    return {{"per_tensor", BlockLayout::perTensor(kShape)},
            {"per_channel_axis0", BlockLayout::perChannel(kShape, 0)},
            {"per_channel_axis1", BlockLayout::perChannel(kShape, 1)},
            {"per_channel_axis2", BlockLayout::perChannel(kShape, 2)},
            {"tile32", BlockLayout::tiled(kShape, 0, 2, 32)},
            {"blocks32", BlockLayout::blocks(kShape, 2, 32)},
            {"blocks32_axis0", BlockLayout::blocks(Shape{70, 9}, 0, 32)}};
}

// Checks fast == reference (fake-quant, codes, dequantize) and the round trips.
void checkFastAgainstReference(const Tensor& input, const QuantParams& p, const QString& what)
{
    for (Rounding rounding : {Rounding::Nearest, Rounding::Stochastic}) {
        const QString label = what + " " + QString::fromUtf8(roundingName(rounding).data());
        QString where;
        const Tensor fake = fakeQuantize(input, p, rounding, 42);
        QVERIFY2(sameBits(fake, referenceFakeQuantize(input, p, rounding, 42), where),
                 qPrintable(label + " fake-quant: " + where));
        const Tensor codes = quantize(input, p, rounding, 42);
        QVERIFY2(sameBits(codes, referenceQuantize(input, p, rounding, 42), where),
                 qPrintable(label + " codes: " + where));
        const Tensor back = dequantize(codes, p);
        QVERIFY2(sameBits(back, referenceDequantize(codes, p), where), qPrintable(label + " dequantize: " + where));
        QVERIFY2(sameBits(back, fake, where), qPrintable(label + " dequantize(quantize(x)) vs fake-quant: " + where));
        const Tensor packed = quantizePacked(input, p, rounding, 42);
        QVERIFY2(sameBits(dequantizePacked(packed, p), fake, where),
                 qPrintable(label + " packed round trip: " + where));
    }
}

} // namespace

class TestQuant : public QObject {
    Q_OBJECT
private slots:
    void allZeroAndConstantGroupsGetFiniteScales()
    {
        const BlockLayout layout = BlockLayout::perChannel({3, 4}, 0);
        const std::vector<Range> ranges{{0, 0}, {2.5f, 2.5f}, {-0.75f, -0.75f}};
        for (bool symmetric : {true, false}) {
            const QuantParams p = quantParamsFromRanges(QType::Int8, layout, ranges, symmetric, {}, "w");
            QCOMPARE(p.scales[0], kDegenerateScale);
            for (float s : p.scales)
                QVERIFY(std::isnormal(s));
            // Zeros stay zero; the constants come back within half a step.
            const Tensor x = Tensor::fromVector<float>(
                DType::F32, {3, 4}, {0, 0, -0.0f, 0, 2.5f, 2.5f, 2.5f, 2.5f, -0.75f, -0.75f, -0.75f, -0.75f});
            const Tensor fq = fakeQuantize(x, p);
            const auto y = fq.values<float>();
            QCOMPARE(y[0], 0.0f);
            QCOMPARE(y[2], 0.0f);
            QVERIFY(withinHalfStep(y[4], 2.5f, p.scales[1]));
            QVERIFY(withinHalfStep(y[8], -0.75f, p.scales[2]));
        }
    }

    void tinyAndHugeRangesStayFiniteAndNormal()
    {
        const BlockLayout layout = BlockLayout::perChannel({4, 2}, 0);
        const std::vector<Range> ranges{{-1e-45f, 1e-45f}, {0, FLT_MIN}, {-FLT_MAX, FLT_MAX}, {-3e38f, 0}};
        for (auto r : {ScaleRestriction::Float, ScaleRestriction::Pow2, ScaleRestriction::Fp16})
            for (bool symmetric : {true, false}) {
                const QuantParams p = quantParamsFromRanges(QType::Int8, layout, ranges, symmetric, {false, r}, "w");
                for (float s : p.scales)
                    QVERIFY2(std::isnormal(s) && s > 0, qPrintable(QString::number(double(s))));
            }
        const QuantParams p = quantParamsFromRanges(QType::Int8, layout, ranges, true, {}, "w");
        QCOMPARE(p.scales[0], FLT_MIN);
    }

    void nonFiniteRangesNameTheTensorAndGroup()
    {
        const BlockLayout layout = BlockLayout::perChannel({4, 2}, 0);
        for (float bad : {NAN, INFINITY, -INFINITY}) {
            const std::vector<Range> ranges{{-1, 1}, {-1, 1}, {-1, 1}, {bad, 1}};
            try {
                quantParamsFromRanges(QType::Int4, layout, ranges, true, {}, "conv1.weight");
                QFAIL("expected an Error");
            } catch (const Error& e) {
                const QString msg = e.what();
                QVERIFY2(msg.contains("conv1.weight") && msg.contains("group 3"), qPrintable(msg));
            }
        }
    }

    void narrowRangeDropsTheMostNegativeCode()
    {
        const BlockLayout layout = BlockLayout::perTensor({4});
        const QuantParams wide = quantParamsFromRanges(QType::Int8, layout, std::vector<Range>{{-2, 2}}, true, {}, "w");
        QCOMPARE(wide.scales[0], 2.0f / 127.5f);
        const QuantParams p =
            quantParamsFromRanges(QType::Int8, layout, std::vector<Range>{{-2, 2}}, true, {true}, "w");
        QCOMPARE(p.scales[0], 2.0f / 127.0f);
        const Tensor x = Tensor::fromVector<float>(DType::F32, {4}, {-2.0f, -5.0f, 2.0f, 0.5f});
        const Tensor q = quantize(x, p);
        const auto codes = q.values<int8_t>();
        QCOMPARE(int(codes[0]), -127);
        QCOMPARE(int(codes[1]), -127);
        QCOMPARE(int(codes[2]), 127);
    }

    void scaleRestrictions()
    {
        QCOMPARE(restrictScale(3.0f, ScaleRestriction::Pow2), 4.0f);  // log2 3 = 1.58
        QCOMPARE(restrictScale(2.8f, ScaleRestriction::Pow2), 2.0f);  // log2 2.8 = 1.49
        QCOMPARE(restrictScale(2.83f, ScaleRestriction::Pow2), 4.0f); // just above 2^1.5
        QCOMPARE(restrictScale(0.3f, ScaleRestriction::Pow2), 0.25f);
        QCOMPARE(restrictScale(1e-44f, ScaleRestriction::Pow2), FLT_MIN);
        QCOMPARE(restrictScale(FLT_MAX, ScaleRestriction::Pow2), 0x1p127f);
        QCOMPARE(restrictScale(0.1f, ScaleRestriction::Fp16), fp16ToFloat(floatToFp16(0.1f)));
        QVERIFY(restrictScale(0.1f, ScaleRestriction::Fp16) != 0.1f);
        QCOMPARE(restrictScale(1e6f, ScaleRestriction::Fp16), 65504.0f);
        QCOMPARE(restrictScale(1e-30f, ScaleRestriction::Fp16), 0x1p-24f);
        QCOMPARE(restrictScale(1e-44f, ScaleRestriction::Float), FLT_MIN);
        QVERIFY_THROWS_EXCEPTION(Error, restrictScale(NAN, ScaleRestriction::Float));
        QVERIFY(parseScaleRestriction("pow2") == ScaleRestriction::Pow2);
        QVERIFY(!parseScaleRestriction("pow3"));
        // Restricted scales are what the params hold, and zero stays exact with them.
        const QuantParams p =
            quantParamsFromRanges(QType::UInt8, BlockLayout::perTensor({1}), std::vector<Range>{{-0.3f, 2.9f}}, false,
                                  {false, ScaleRestriction::Pow2}, "w");
        QCOMPARE(p.scales[0], 0.015625f); // 3.2 / 255 = 0.01255 → 2^-6
        QCOMPARE(fakeQuantize(Tensor::fromVector<float>(DType::F32, {1}, {0.0f}), p).values<float>()[0], 0.0f);
    }

    void asymmetricZeroIsExact()
    {
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-5, 5);
        for (QType t : {QType::UInt8, QType::Int8, QType::UInt4, QType::Int4, QType::Int3, QType::Int16})
            for (int k = 0; k < 200; ++k) {
                const float a = u(rng), b = u(rng) * std::exp(u(rng));
                const Range r{std::min(a, b), std::max(a, b)};
                for (auto restriction : {ScaleRestriction::Float, ScaleRestriction::Pow2, ScaleRestriction::Fp16}) {
                    const QuantParams p = quantParamsFromRanges(t, BlockLayout::perTensor({2}), std::vector<Range>{r},
                                                                false, {false, restriction}, "w");
                    const Tensor y = fakeQuantize(Tensor::fromVector<float>(DType::F32, {2}, {0.0f, -0.0f}), p);
                    QCOMPARE(y.values<float>()[0], 0.0f);
                    QCOMPARE(y.values<float>()[1], 0.0f);
                }
            }
        // The zero point is where 0 lands: uint8 over [-1, 3] has scale 4/255 and zero point 64.
        const QuantParams p = quantParamsFromRanges(QType::UInt8, BlockLayout::perTensor({1}),
                                                    std::vector<Range>{{-1, 3}}, false, {}, "w");
        QCOMPARE(p.zeroPoints[0], 64);
        QVERIFY_THROWS_EXCEPTION(Error, quantParamsFromRanges(QType::Fp8E4M3, BlockLayout::perTensor({1}),
                                                              std::vector<Range>{{-1, 3}}, false, {}, "w"));
    }

    void unsignedSymmetricClipsNegativesToZero()
    {
        const QuantParams p = quantParamsFromRanges(QType::UInt8, BlockLayout::perTensor({3}),
                                                    std::vector<Range>{{-4, 2}}, true, {}, "w");
        QVERIFY(p.zeroPoints.empty());
        QCOMPARE(p.scales[0], 4.0f / 255.5f);
        const Tensor fq = fakeQuantize(Tensor::fromVector<float>(DType::F32, {3}, {-1.0f, 2.0f, 4.0f}), p);
        const auto y = fq.values<float>();
        QCOMPARE(y[0], 0.0f);
        QVERIFY(withinHalfStep(y[1], 2.0f, p.scales[0]));
        QCOMPARE(y[2], 255 * p.scales[0]);
    }

    void saturationRangesCountEveryClippedValue()
    {
        // 1000 values evenly from −1 to 1; absmax 1 gives int8 the scale 1/127.5, which
        // pow2 rounds down to 2^−7: values above 127.5·2^−7 = 0.99609375 land on 127 with
        // more than half a step of error (0.998 and 1: two values). fp8 e4m3: 1/448
        // becomes 2^−9, so |x| > 448·2^−9 = 0.875 saturates (63 values on each side).
        std::vector<float> v(1000);
        for (size_t k = 0; k < v.size(); ++k)
            v[k] = float(-1.0 + 2.0 * double(k) / 999.0);
        const Tensor x = Tensor::fromVector<float>(DType::F32, {1000}, v);
        const BlockLayout layout = BlockLayout::perTensor({1000});
        const std::vector<Range> absmax{{-1, 1}};
        struct Case {
            QType qtype;
            ScaleRestriction restriction;
            bool narrowRange;
            int64_t clipped;
        };
        for (const Case& c :
             {Case{QType::Int8, ScaleRestriction::Float, false, 0}, Case{QType::Int8, ScaleRestriction::Pow2, false, 2},
              Case{QType::Int8, ScaleRestriction::Float, true, 0},
              Case{QType::Int8, ScaleRestriction::Pow2, true, 4}, // 1/127 → 2^−7, both ends at ±127.5
              Case{QType::Fp8E4M3, ScaleRestriction::Float, false, 0},
              Case{QType::Fp8E4M3, ScaleRestriction::Pow2, false, 126}}) {
            const ScaleOptions options{c.narrowRange, c.restriction};
            const QuantParams p = quantParamsFromRanges(c.qtype, layout, absmax, true, options, "w");
            const Range r = saturationRanges(p).at(0);
            const Tensor fq = fakeQuantize(x, p);
            const float top = qtypeInfo(c.qtype).kind == QKind::Integer
                                  ? float(integerGrid(c.qtype, c.narrowRange).qmax)
                                  : qtypeInfo(c.qtype).maxFinite;
            int64_t outside = 0;
            for (size_t k = 0; k < v.size(); ++k) {
                // The slack analysis' fractionClipped allows for the scale's float rounding.
                const bool saturated = v[k] < r.min * (1 + 0x1p-20f) || v[k] > r.max * (1 + 0x1p-20f);
                outside += saturated;
                // A saturated value sits on the grid's end; one inside is within rounding of its code.
                if (saturated)
                    QCOMPARE(std::abs(fq.values<float>()[k]), top * p.scales[0]);
                else if (qtypeInfo(c.qtype).kind == QKind::Integer)
                    QVERIFY(withinHalfStep(fq.values<float>()[k], v[k], p.scales[0]));
            }
            QVERIFY2(outside == c.clipped,
                     qPrintable(QString("%1 %2 narrow %3: %4 saturated, expected %5")
                                    .arg(QString::fromUtf8(qtypeName(c.qtype).data()))
                                    .arg(QString::fromUtf8(scaleRestrictionName(c.restriction).data()))
                                    .arg(c.narrowRange)
                                    .arg(outside)
                                    .arg(c.clipped)));
        }
        // Asymmetric: [−0.25, 1] on uint4 puts the zero point at round(0 + 0.25·15/1.25) = 3;
        // the range is (qmin − zp − 0.5)·s .. (qmax − zp + 0.5)·s.
        const QuantParams a =
            quantParamsFromRanges(QType::UInt4, layout, std::vector<Range>{{-0.25f, 1.0f}}, false, {}, "w");
        QCOMPARE(a.zeroPoints.at(0), 3);
        const Range ra = saturationRanges(a).at(0);
        QCOMPARE(ra.min, float(-3.5 * double(a.scales[0])));
        QCOMPARE(ra.max, float(12.5 * double(a.scales[0])));
    }

    void int8PerChannelErrorIsAtMostHalfAStep()
    {
        const Shape shape{16, 300};
        const Tensor x = makeInput(DType::F32, shape, randomData(Data::HeavyTailed, 16 * 300, 3));
        const BlockLayout layout = BlockLayout::perChannel(shape, 0);
        for (bool narrow : {false, true}) {
            const QuantParams p = quantParamsFromRanges(QType::Int8, layout, rangesOf(x, layout), true, {narrow}, "w");
            const Tensor fq = fakeQuantize(x, p);
            const auto y = fq.values<float>();
            for (int64_t i = 0; i < x.numel(); ++i) {
                const float s = p.scales[size_t(i / 300)];
                QVERIFY(withinHalfStep(y[size_t(i)], x.values<float>()[size_t(i)], s));
            }
        }
    }

    void fastEqualsReferenceForEveryQType()
    {
        for (const qs::QuantTypeInfo& q : allQTypes()) {
            if (q.kind == QKind::GgufBlock)
                continue; // one implementation, checked against llama.cpp's own in tst_gguf_blocks
            if (q.kind == QKind::Lut)
                continue; // one implementation, checked against a NumPy k-means in tst_lut
            for (const LayoutCase& lc : layoutCases()) {
                const BlockLayout& layout = lc.layout;
                const bool mx = q.kind == QKind::Microscaling;
                if (mx && std::string_view(lc.name).substr(0, 8) != "blocks32")
                    continue; // microscaling types only come in their own blocks
                const size_t n = size_t(shapeElementCount(layout.shape));
                for (DType dtype : {DType::F32, DType::F16, DType::BF16})
                    for (Data data : {Data::Normal, Data::HeavyTailed, Data::Adversarial})
                        for (bool symmetric : {true, false}) {
                            if (!symmetric && (q.kind != QKind::Integer))
                                continue;
                            const uint32_t seed = uint32_t(q.type) * 131 + uint32_t(data);
                            Tensor x =
                                makeInput(dtype, layout.shape,
                                          randomData(data == Data::Normal ? Data::Normal : Data::HeavyTailed, n, seed));
                            const int axis = layout.shape.size() == 3 ? 2 : 0;
                            auto paramsFor = [&](const Tensor& t) {
                                if (mx)
                                    return microscalingParams(t, q.type, axis, "x");
                                return quantParamsFromRanges(q.type, layout, rangesOf(t, layout), symmetric,
                                                             {q.type == QType::Int8 && data == Data::Normal}, "x");
                            };
                            QuantParams p = paramsFor(x);
                            if (data == Data::Adversarial) {
                                x = makeInput(dtype, layout.shape, adversarialData(p, seed));
                                if (mx)
                                    p = paramsFor(x);
                            }
                            checkFastAgainstReference(x, p,
                                                      QString("%1 %2 %3 data %4 %5")
                                                          .arg(q.name.data(), lc.name, dtypeName(dtype).data())
                                                          .arg(int(data))
                                                          .arg(symmetric ? "symmetric" : "asymmetric"));
                            if (QTest::currentTestFailed())
                                return;
                        }
            }
        }
    }

    void microscalingFollowsTheOcpRule()
    {
        const Shape shape{6, 100};
        std::vector<float> v = randomData(Data::HeavyTailed, 600, 11);
        for (int j = 64; j < 96; ++j)
            v[size_t(j)] = 0; // an all-zero block: row 0, block 2
        v[200] = 1e-42f;      // a tiny block absmax (denormal)
        for (int j = 201; j < 232; ++j)
            v[size_t(j)] = 0;
        const Tensor x = makeInput(DType::F32, shape, v);
        for (QType t : {QType::MxFp8, QType::MxFp4}) {
            const QuantParams p = microscalingParams(x, t, -1, "x");
            QVERIFY(p.layout.gridShape() == (Shape{6, 4}));
            const int emax = t == QType::MxFp8 ? 8 : 2;
            for (int64_t g = 0; g < 24; ++g) {
                const int64_t row = g / 4, block = g % 4;
                double amax = 0;
                for (int64_t j = block * 32; j < std::min<int64_t>(100, block * 32 + 32); ++j)
                    amax = std::max(amax, std::abs(double(v[size_t(row * 100 + j)])));
                // Brute force: the largest power of two 2^e <= amax.
                int e = -127;
                if (amax > 0) {
                    e = 200;
                    while (std::ldexp(1.0, e) > amax)
                        --e;
                    e = std::clamp(e - emax, -127, 127);
                }
                QCOMPARE(p.scales[size_t(g)], float(std::ldexp(1.0, e)));
            }
        }
        // Blocks along axis 0: each column gets its own scale per 32 rows.
        const QuantParams col = microscalingParams(x, QType::MxFp4, 0, "x");
        QVERIFY(col.layout.gridShape() == (Shape{1, 100}));
        const Tensor bad = makeInput(DType::F32, {2, 40}, std::vector<float>(80, NAN));
        try {
            microscalingParams(bad, QType::MxFp8, -1, "layer3.weight");
            QFAIL("expected an Error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("layer3.weight") && QString(e.what()).contains("block 0"), e.what());
        }
    }

    void nvfp4ScalesAreNearestE4M3OfAbsMaxOverSix()
    {
        const Shape shape{4, 64};
        std::vector<float> v = randomData(Data::HeavyTailed, 256, 5);
        for (int j = 16; j < 32; ++j)
            v[size_t(j)] = 0;
        const Tensor x = makeInput(DType::F32, shape, v);
        const QuantParams p = microscalingParams(x, QType::NvFp4, -1, "x");
        float tensorMax = 0;
        for (float f : v)
            tensorMax = std::max(tensorMax, std::abs(f));
        QCOMPARE(p.globalScale, tensorMax / 2688.0f);
        QCOMPARE(p.scales.size(), size_t(16));
        for (size_t g = 0; g < 16; ++g) {
            float amax = 0;
            for (size_t j = 0; j < 16; ++j)
                amax = std::max(amax, std::abs(v[g * 16 + j]));
            const float target = amax / 6 / p.globalScale;
            if (amax == 0) {
                QCOMPARE(p.scales[g], 0x1p-9f * p.globalScale);
                continue;
            }
            // Brute force: the e4m3 values nearest to the target (every finite non-negative code).
            float best = INFINITY;
            for (uint32_t c = 0; c < 0x7f; ++c)
                best = std::min(best, std::abs(decodeFp8E4M3(uint8_t(c)) - target));
            bool found = false;
            for (uint32_t c = 0; c < 0x7f; ++c)
                found |= std::abs(decodeFp8E4M3(uint8_t(c)) - target) == best &&
                         p.scales[g] == decodeFp8E4M3(uint8_t(c)) * p.globalScale;
            QVERIFY2(
                found,
                qPrintable(
                    QString("block %1: scale %2 for target %3").arg(g).arg(double(p.scales[g])).arg(double(target))));
        }
        const float top = *std::max_element(p.scales.begin(), p.scales.end());
        QCOMPARE(top, 448.0f * p.globalScale);
    }

    void nonFiniteInputNamesTheTensorAndIndex()
    {
        std::vector<float> v(24, 1.0f);
        v[13] = NAN;
        const Tensor x = makeInput(DType::F32, {2, 3, 4}, v);
        const QuantParams p = quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({2, 3, 4}),
                                                    std::vector<Range>{{-1, 1}}, true, {}, "w");
        for (Rounding r : {Rounding::Nearest, Rounding::Stochastic})
            try {
                fakeQuantize(x, p, r, 0, "fc.weight");
                QFAIL("expected an Error");
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).contains("fc.weight") && QString(e.what()).contains("[1, 0, 1]"), e.what());
            }
    }

    void stochasticRoundingIsUnbiased()
    {
        // 0.3 code units rounds up 30% of the time, so the mean comes back near 0.3.
        const QuantParams p = quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({100000}),
                                                    std::vector<Range>{{-127, 127}}, true, {true}, "w");
        const Tensor x = makeInput(DType::F32, {100000}, std::vector<float>(100000, 0.3f));
        double sum = 0;
        const Tensor fq = fakeQuantize(x, p, Rounding::Stochastic, 9);
        for (float y : fq.values<float>())
            sum += y;
        QVERIFY(std::abs(sum / 100000 - 0.3) < 0.01);
        QVERIFY(
            !sameBitsFor(fakeQuantize(x, p, Rounding::Stochastic, 9), fakeQuantize(x, p, Rounding::Stochastic, 10)));
    }

    void parallelEqualsSingleThread()
    {
        const Shape shape{64, 4096};
        const Tensor x = makeInput(DType::BF16, shape, randomData(Data::HeavyTailed, 64 * 4096, 21));
        std::vector<QuantParams> ps;
        for (const BlockLayout& l : {BlockLayout::perChannel(shape, 0), BlockLayout::perChannel(shape, 1),
                                     BlockLayout::tiled(shape, 0, 1, 100)})
            ps.push_back(quantParamsFromRanges(QType::Int4, l, rangesOf(x, l), false, {}, "w"));
        ps.push_back(microscalingParams(x, QType::MxFp4, 0, "w"));
        ps.push_back(microscalingParams(x, QType::NvFp4, -1, "w"));
        std::vector<Tensor> parallel;
        for (const auto& p : ps)
            for (Rounding r : {Rounding::Nearest, Rounding::Stochastic})
                parallel.push_back(fakeQuantize(x, p, r, 3));
        const tbb::global_control oneThread(tbb::global_control::max_allowed_parallelism, 1);
        size_t k = 0;
        for (const auto& p : ps) {
            QVERIFY(microscalingOr(p, x).scales == p.scales);
            for (Rounding r : {Rounding::Nearest, Rounding::Stochastic}) {
                QString where;
                QVERIFY2(sameBits(fakeQuantize(x, p, r, 3), parallel[k++], where), qPrintable(where));
            }
        }
    }

private:
    static bool sameBitsFor(const Tensor& a, const Tensor& b)
    {
        QString where;
        return sameBits(a, b, where);
    }
    // Recomputes microscaling params (under the current thread limit); others as given.
    static QuantParams microscalingOr(const QuantParams& p, const Tensor& x)
    {
        if (!isMicroscaling(p.qtype))
            return p;
        const int axis = p.layout.block[0] > 1 ? 0 : -1;
        return microscalingParams(x, p.qtype, axis, "w");
    }
};

QTEST_APPLESS_MAIN(TestQuant)
#include "tst_quant.moc"
