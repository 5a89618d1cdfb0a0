// Numerics: every code of the small float formats and nf4 decodes to its
// documented value; encoders pick the nearest code (ties to even, saturating)
// as an independent brute-force search over the code table does; integer,
// binary and ternary grids; seeded stochastic rounding; code packing; qtype names.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <functional>
#include <set>
#include <vector>

#include "core/error.h"
#include "numerics/float_formats.h"
#include "numerics/grid.h"
#include "numerics/nf4.h"
#include "numerics/packing.h"
#include "numerics/qtype.h"
#include "numerics/rounding.h"

using namespace qs;

namespace {

// A small float format as the test sees it, written from the format's definition
// (not from the engine's tables).
struct FormatSpec {
    const char* name;
    int expBits, manBits, bias;
    uint8_t maxCode;                    // largest finite magnitude code
    std::function<bool(uint8_t)> isNaN; // per magnitude code
    std::function<bool(uint8_t)> isInf; // per magnitude code
    std::function<uint8_t(float)> encode;
    std::function<float(uint8_t)> decode;
    uint8_t signBit() const { return uint8_t(1u << (expBits + manBits)); }
    int codeCount() const { return 1 << (1 + expBits + manBits); }
};

double specValue(const FormatSpec& f, uint8_t code)
{
    const uint8_t mag = code & uint8_t(f.signBit() - 1);
    const int e = mag >> f.manBits;
    const int m = mag & ((1 << f.manBits) - 1);
    const double frac = double(m) / double(1 << f.manBits);
    const double v = e == 0 ? frac * std::pow(2.0, 1 - f.bias) : (1 + frac) * std::pow(2.0, e - f.bias);
    return (code & f.signBit()) ? -v : v;
}

FormatSpec e4m3()
{
    return {
        "fp8_e4m3",   4, 3, 7, 0x7e, [](uint8_t m) { return m == 0x7f; }, [](uint8_t) { return false; }, encodeFp8E4M3,
        decodeFp8E4M3};
}
FormatSpec e5m2()
{
    return {"fp8_e5m2",
            5,
            2,
            15,
            0x7b,
            [](uint8_t m) { return m > 0x7c; },
            [](uint8_t m) { return m == 0x7c; },
            encodeFp8E5M2,
            decodeFp8E5M2};
}
FormatSpec e2m1()
{
    return {"fp4_e2m1",   2, 1, 1, 0x07, [](uint8_t) { return false; }, [](uint8_t) { return false; }, encodeFp4E2M1,
            decodeFp4E2M1};
}

struct CodeValue {
    uint8_t code;
    double value;
};

// Finite codes of the format with their spec values.
std::vector<CodeValue> finiteCodes(const FormatSpec& f)
{
    std::vector<CodeValue> t;
    for (int c = 0; c < f.codeCount(); ++c) {
        const uint8_t mag = uint8_t(c) & uint8_t(f.signBit() - 1);
        if (!f.isNaN(mag) && !f.isInf(mag))
            t.push_back({uint8_t(c), specValue(f, uint8_t(c))});
    }
    return t;
}

// Brute force: the code of x's sign whose value is nearest, ties to the even code
// (adjacent codes differ in their lowest bit). Beyond the largest finite value
// (where distances in double no longer tell codes apart) and at ±Inf: the largest code.
uint8_t nearestCodeBruteForce(const FormatSpec& f, const std::vector<CodeValue>& table, float x)
{
    const uint8_t sign = std::signbit(x) ? f.signBit() : 0;
    if (std::fabs(double(x)) >= specValue(f, f.maxCode))
        return uint8_t(sign | f.maxCode);
    int best = -1;
    double bestDistance = INFINITY;
    for (const CodeValue& cv : table) {
        if ((cv.code & f.signBit()) != sign)
            continue;
        const double d = std::fabs(double(x) - cv.value);
        if (d < bestDistance || (d == bestDistance && (cv.code & 1) == 0)) {
            best = cv.code;
            bestDistance = d;
        }
    }
    return uint8_t(best);
}

// The test inputs of a format: a fine sweep over every binade the format touches,
// midpoints between consecutive codes and their float neighbours, the ends,
// beyond the ends, infinities, float denormals, zeros, and random bit patterns.
std::vector<float> sweepInputs(const FormatSpec& f)
{
    std::vector<float> in;
    const double maxValue = specValue(f, f.maxCode);
    const int lowExp = 1 - f.bias - f.manBits - 3;
    const int highExp = int(std::ceil(std::log2(maxValue))) + 1;
    for (int e = lowExp; e <= highExp; ++e)
        for (uint32_t j = 0; j < (1u << 15); ++j) {
            const float v = std::ldexp(1.0f + float(j) * 0x1p-15f, e);
            in.push_back(v);
            in.push_back(-v);
        }
    std::vector<double> magnitudes;
    for (const CodeValue& cv : finiteCodes(f))
        if (!(cv.code & f.signBit()))
            magnitudes.push_back(cv.value);
    std::sort(magnitudes.begin(), magnitudes.end());
    for (size_t i = 0; i + 1 < magnitudes.size(); ++i) {
        const float mid = float((magnitudes[i] + magnitudes[i + 1]) / 2);
        for (float v : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
            in.push_back(v);
            in.push_back(-v);
        }
    }
    const float maxF = float(maxValue);
    const float halfStepAboveMax = float(maxValue + (maxValue - magnitudes[magnitudes.size() - 2]) / 2);
    for (float v :
         {maxF, std::nextafter(maxF, INFINITY), maxF * 1.0001f, halfStepAboveMax,
          std::nextafter(halfStepAboveMax, INFINITY), maxF * 2, 1e30f, FLT_MAX, 0x1p-149f, 1e-40f, FLT_MIN, 0.0f}) {
        in.push_back(v);
        in.push_back(-v);
    }
    uint32_t state = 0x9e3779b9u;
    for (int i = 0; i < 100000; ++i) {
        state = state * 1664525u + 1013904223u;
        const float v = std::bit_cast<float>(state);
        if (!std::isnan(v))
            in.push_back(v);
    }
    return in;
}

QString hex(uint32_t code)
{
    return QStringLiteral("0x%1").arg(code, 2, 16, QLatin1Char('0'));
}

const std::array<double, 16> kNf4Expected{
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
};

double roundHalfEvenReference(double v)
{
    const double r = std::floor(v);
    const double d = v - r;
    if (d > 0.5 || (d == 0.5 && std::fmod(r, 2.0) != 0))
        return r + 1;
    return r;
}

// The two grid neighbours lo <= v <= hi in a sorted list of grid values.
std::pair<double, double> neighbours(const std::vector<double>& sorted, double v)
{
    const auto upper = std::lower_bound(sorted.begin(), sorted.end(), v);
    if (*upper == v)
        return {v, v};
    return {*(upper - 1), *upper};
}

} // namespace

class TestNumerics : public QObject {
    Q_OBJECT
private slots:
    void floatFormatsDecodeEveryCodeAndReencodeIt_data()
    {
        QTest::addColumn<int>("format");
        QTest::newRow("fp8_e4m3") << 0;
        QTest::newRow("fp8_e5m2") << 1;
        QTest::newRow("fp4_e2m1") << 2;
    }
    void floatFormatsDecodeEveryCodeAndReencodeIt()
    {
        QFETCH(int, format);
        const FormatSpec f = format == 0 ? e4m3() : format == 1 ? e5m2() : e2m1();
        for (int c = 0; c < f.codeCount(); ++c) {
            const uint8_t code = uint8_t(c);
            const uint8_t mag = code & uint8_t(f.signBit() - 1);
            const float v = f.decode(code);
            if (f.isNaN(mag)) {
                QVERIFY2(std::isnan(v), qPrintable(hex(code)));
                continue;
            }
            if (f.isInf(mag)) {
                QVERIFY2(std::isinf(v) && std::signbit(v) == bool(code & f.signBit()), qPrintable(hex(code)));
                continue;
            }
            QVERIFY2(double(v) == specValue(f, code), qPrintable(hex(code)));
            QVERIFY2(std::signbit(v) == bool(code & f.signBit()), qPrintable(hex(code) + " sign"));
            QVERIFY2(f.encode(v) == code, qPrintable(hex(code) + " re-encodes to " + hex(f.encode(v))));
        }
    }

    void floatFormatsDocumentedValues()
    {
        QCOMPARE(decodeFp8E4M3(0x7e), 448.f);
        QCOMPARE(decodeFp8E4M3(0xfe), -448.f);
        QCOMPARE(decodeFp8E4M3(0x01), 0x1p-9f);
        QCOMPARE(decodeFp8E4M3(0x08), 0x1p-6f);
        QCOMPARE(decodeFp8E4M3(0x38), 1.f);
        QVERIFY(std::isnan(decodeFp8E4M3(0x7f)) && std::isnan(decodeFp8E4M3(0xff)));
        QCOMPARE(decodeFp8E5M2(0x7b), 57344.f);
        QCOMPARE(decodeFp8E5M2(0x01), 0x1p-16f);
        QCOMPARE(decodeFp8E5M2(0x3c), 1.f);
        QCOMPARE(decodeFp8E5M2(0x7c), INFINITY);
        QCOMPARE(decodeFp8E5M2(0xfc), -INFINITY);
        for (uint8_t c : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff})
            QVERIFY(std::isnan(decodeFp8E5M2(c)));
        const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
        for (uint8_t c = 0; c < 8; ++c) {
            QCOMPARE(decodeFp4E2M1(c), fp4[c]);
            QCOMPARE(decodeFp4E2M1(uint8_t(c | 8)), -fp4[c]);
        }
        // Ties to even, saturation, sign of zero, NaN.
        QCOMPARE(encodeFp8E4M3(1.0625f), uint8_t(0x38)); // between 1 (even) and 1.125
        QCOMPARE(encodeFp8E4M3(1.1875f), uint8_t(0x3a)); // between 1.125 and 1.25 (even)
        QCOMPARE(encodeFp8E4M3(464.f), uint8_t(0x7e));   // would round to 480: saturates
        QCOMPARE(encodeFp8E4M3(INFINITY), uint8_t(0x7e));
        QCOMPARE(encodeFp8E4M3(-INFINITY), uint8_t(0xfe));
        QCOMPARE(encodeFp8E4M3(0x1p-10f), uint8_t(0x00)); // half the smallest subnormal ties to 0
        QCOMPARE(encodeFp8E4M3(-0.f), uint8_t(0x80));
        QCOMPARE(encodeFp8E4M3(NAN), uint8_t(0x7f));
        QCOMPARE(encodeFp8E4M3(-NAN), uint8_t(0xff));
        QCOMPARE(encodeFp8E5M2(INFINITY), uint8_t(0x7b));
        QCOMPARE(encodeFp8E5M2(61440.f), uint8_t(0x7b));
        QCOMPARE(encodeFp8E5M2(NAN) & 0x7f, 0x7e);
        QCOMPARE(encodeFp4E2M1(2.5f), uint8_t(0x4)); // between 2 (even) and 3
        QCOMPARE(encodeFp4E2M1(5.f), uint8_t(0x6));  // between 4 (even) and 6
        QCOMPARE(encodeFp4E2M1(0.25f), uint8_t(0x0));
        QCOMPARE(encodeFp4E2M1(0.75f), uint8_t(0x2));
        QCOMPARE(encodeFp4E2M1(-100.f), uint8_t(0xf));
        QCOMPARE(encodeFp4E2M1(NAN), uint8_t(0x0));
    }

    void floatEncodersPickNearestCodeTiesToEven_data() { floatFormatsDecodeEveryCodeAndReencodeIt_data(); }
    void floatEncodersPickNearestCodeTiesToEven()
    {
        QFETCH(int, format);
        const FormatSpec f = format == 0 ? e4m3() : format == 1 ? e5m2() : e2m1();
        const std::vector<CodeValue> table = finiteCodes(f);
        const std::vector<float> inputs = sweepInputs(f);
        QVERIFY(inputs.size() > 100000);
        for (float x : inputs) {
            const uint8_t expected = nearestCodeBruteForce(f, table, x);
            const uint8_t got = f.encode(x);
            if (got != expected)
                QFAIL(qPrintable(QStringLiteral("%1: encode(%2) = %3, nearest is %4")
                                     .arg(f.name)
                                     .arg(double(x), 0, 'g', 10)
                                     .arg(hex(got), hex(expected))));
        }
        for (float inf : {INFINITY, -INFINITY})
            QCOMPARE(f.encode(inf), nearestCodeBruteForce(f, table, inf));
    }

    void e8m0DecodesPowersOfTwo()
    {
        for (int c = 0; c < 255; ++c) {
            QCOMPARE(double(decodeE8M0(uint8_t(c))), std::pow(2.0, c - 127));
            QCOMPARE(encodeE8M0(c - 127), uint8_t(c));
        }
        QVERIFY(std::isnan(decodeE8M0(0xff)));
        QCOMPARE(encodeE8M0(-1000), uint8_t(0));
        QCOMPARE(encodeE8M0(128), uint8_t(254));
        QCOMPARE(encodeE8M0(1000), uint8_t(254));
    }

    void nf4CodebookIsQLoRAs()
    {
        const auto& book = nf4Codebook();
        for (int i = 0; i < 16; ++i) {
            QCOMPARE(book[size_t(i)], float(kNf4Expected[size_t(i)]));
            QCOMPARE(decodeNf4(uint8_t(i)), book[size_t(i)]);
            QCOMPARE(encodeNf4(book[size_t(i)]), uint8_t(i));
            if (i > 0)
                QVERIFY(book[size_t(i - 1)] < book[size_t(i)]);
        }
        QCOMPARE(book[0], -1.f);
        QCOMPARE(book[7], 0.f);
        QCOMPARE(book[15], 1.f);
        QCOMPARE(encodeNf4(NAN), uint8_t(7));
    }

    void nf4EncoderPicksNearestTiesToSmallerMagnitude()
    {
        // Reference: nearest entry in double; at a tie the entry closer to zero.
        auto reference = [](float x) {
            if (std::fabs(x) >= 1.f)
                return uint8_t(x < 0 ? 0 : 15);
            int best = 0;
            for (int i = 1; i < 16; ++i) {
                const double d = std::fabs(double(x) - kNf4Expected[size_t(i)]);
                const double bd = std::fabs(double(x) - kNf4Expected[size_t(best)]);
                if (d < bd || (d == bd && std::fabs(kNf4Expected[size_t(i)]) < std::fabs(kNf4Expected[size_t(best)])))
                    best = i;
            }
            return uint8_t(best);
        };
        std::vector<float> inputs;
        for (int i = -1 << 16; i <= 1 << 16; ++i)
            inputs.push_back(float(i) * 0x1p-15f); // [-2, 2] at step 2^-15
        for (int i = 0; i < 15; ++i) {
            const float mid = float((double(nf4Codebook()[size_t(i)]) + double(nf4Codebook()[size_t(i + 1)])) / 2);
            for (float v : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)})
                inputs.push_back(v);
        }
        for (float v : {INFINITY, -INFINITY, 1e30f, -1e30f, 1e-40f, -1e-40f, 0.f, -0.f})
            inputs.push_back(v);
        for (float x : inputs)
            QVERIFY2(encodeNf4(x) == reference(x), qPrintable(QString::number(double(x), 'g', 10)));
        // Midpoints that are exact floats: the tie goes to the entry nearer zero.
        QCOMPARE(encodeNf4(-0.4599952697753906f), uint8_t(3));   // between codes 2 and 3
        QCOMPARE(encodeNf4(-0.045525018125772476f), uint8_t(7)); // between codes 6 and 7
        QCOMPARE(encodeNf4(0.03979014977812767f), uint8_t(7));   // between codes 7 and 8
        QCOMPARE(encodeNf4(0.6427869200706482f), uint8_t(13));   // between codes 13 and 14
    }

    void integerGridsRoundHalfEvenAndClamp()
    {
        for (const QuantTypeInfo& q : allQTypes()) {
            if (q.kind != QKind::Integer)
                continue;
            for (bool narrow : {false, true}) {
                const IntegerGrid g = integerGrid(q.type, narrow);
                const int64_t expectedMin = !q.isSigned ? 0 : (narrow && q.bits > 1) ? -q.qmax : q.qmin;
                QCOMPARE(int64_t(g.qmin), expectedMin);
                QCOMPARE(int64_t(g.qmax), q.isSigned ? (int64_t(1) << (q.bits - 1)) - 1 : (int64_t(1) << q.bits) - 1);
                std::vector<float> inputs;
                for (float v = float(g.qmin) - 3; v <= float(g.qmax) + 3; v += q.bits == 16 ? 0.375f : 0.125f)
                    inputs.push_back(v);
                for (float v : {1e30f, -1e30f, INFINITY, -INFINITY, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f,
                                std::nextafter(0.5f, 1.f), std::nextafter(-0.5f, -1.f), 0x1p-140f})
                    inputs.push_back(v);
                for (float v : inputs) {
                    const double expected =
                        std::clamp(roundHalfEvenReference(double(v)), double(g.qmin), double(g.qmax));
                    const float got = nearestGridValue(q.type, g, v);
                    if (double(got) != expected)
                        QFAIL(qPrintable(QStringLiteral("%1 narrow=%2: v=%3 gave %4, expected %5")
                                             .arg(QString::fromUtf8(q.name.data(), int(q.name.size())))
                                             .arg(narrow)
                                             .arg(double(v), 0, 'g', 9)
                                             .arg(double(got))
                                             .arg(expected)));
                }
                QVERIFY(std::isnan(nearestGridValue(q.type, g, NAN)));
            }
        }
        QCOMPARE(integerGrid(QType::Int8, true).qmin, -127);
        QCOMPARE(integerGrid(QType::Int8, false).qmin, -128);
        QCOMPARE(integerGrid(QType::UInt8, true).qmin, 0);
        QVERIFY_THROWS_EXCEPTION(Error, integerGrid(QType::Fp8E4M3, false));
    }

    void integerCodesAreTwosComplementWithinBits()
    {
        for (const QuantTypeInfo& q : allQTypes()) {
            if (q.kind != QKind::Integer)
                continue;
            std::set<uint32_t> seen;
            for (int64_t v = q.qmin; v <= q.qmax; ++v) {
                const uint32_t code = codeOfGridValue(q.type, float(v));
                QVERIFY(code < (uint32_t(1) << q.bits));
                QCOMPARE(code, uint32_t(v) & ((uint32_t(1) << q.bits) - 1));
                QCOMPARE(double(gridValueOfCode(q.type, code)), double(v));
                seen.insert(code);
            }
            QCOMPARE(seen.size(), size_t(q.qmax - q.qmin + 1));
        }
        QCOMPARE(codeOfGridValue(QType::Int4, -1), 0xfu);
        QCOMPARE(codeOfGridValue(QType::Int16, -1), 0xffffu);
        QCOMPARE(codeOfGridValue(QType::Int8, -128), 0x80u);
        QCOMPARE(gridValueOfCode(QType::Int4, 0x8), -8.f);
        QCOMPARE(gridValueOfCode(QType::Int4, 0x1f), -1.f); // bits above the width are ignored
        QCOMPARE(gridValueOfCode(QType::UInt4, 0xf), 15.f);
        QCOMPARE(gridValueOfCode(QType::Int1, 1), -1.f);
        QCOMPARE(codeOfGridValue(QType::Int8, NAN), 0u);
    }

    void binaryAndTernary()
    {
        const IntegerGrid b = integerGrid(QType::Binary, false), t = integerGrid(QType::Ternary, false);
        QCOMPARE(nearestGridValue(QType::Binary, b, 0.f), 1.f);
        QCOMPARE(nearestGridValue(QType::Binary, b, -0.f), 1.f);
        QCOMPARE(nearestGridValue(QType::Binary, b, 0.3f), 1.f);
        QCOMPARE(nearestGridValue(QType::Binary, b, -1e-30f), -1.f);
        QCOMPARE(nearestGridValue(QType::Binary, b, -7.f), -1.f);
        QCOMPARE(nearestGridValue(QType::Ternary, t, 0.5f), 0.f);
        QCOMPARE(nearestGridValue(QType::Ternary, t, 0.51f), 1.f);
        QCOMPARE(nearestGridValue(QType::Ternary, t, -1.5f), -1.f);
        QCOMPARE(nearestGridValue(QType::Ternary, t, 9.f), 1.f);
        QCOMPARE(codeOfGridValue(QType::Binary, -1), 0u);
        QCOMPARE(codeOfGridValue(QType::Binary, 1), 1u);
        QCOMPARE(gridValueOfCode(QType::Binary, 0), -1.f);
        QCOMPARE(gridValueOfCode(QType::Binary, 1), 1.f);
        for (float v : {-1.f, 0.f, 1.f})
            QCOMPARE(gridValueOfCode(QType::Ternary, codeOfGridValue(QType::Ternary, v)), v);
        QCOMPARE(codeOfGridValue(QType::Ternary, -1), 3u);
        QVERIFY_THROWS_EXCEPTION(Error, gridValueOfCode(QType::Ternary, 2));
    }

    void floatAndCodebookGridsUseTheirCodecs()
    {
        uint32_t state = 7;
        for (int i = 0; i < 20000; ++i) {
            state = state * 1664525u + 1013904223u;
            const float v = (float(state >> 8) * 0x1p-24f - 0.5f) * 1200.f;
            QCOMPARE(nearestGridValue(QType::Fp8E4M3, {}, v), decodeFp8E4M3(encodeFp8E4M3(v)));
            QCOMPARE(nearestGridValue(QType::Fp8E5M2, {}, v), decodeFp8E5M2(encodeFp8E5M2(v)));
            QCOMPARE(nearestGridValue(QType::Fp4E2M1, {}, v / 100), decodeFp4E2M1(encodeFp4E2M1(v / 100)));
            QCOMPARE(nearestGridValue(QType::Nf4, {}, v / 500), decodeNf4(encodeNf4(v / 500)));
            // Microscaling types round their elements like the element type.
            QCOMPARE(nearestGridValue(QType::MxFp8, {}, v), nearestGridValue(QType::Fp8E4M3, {}, v));
            QCOMPARE(nearestGridValue(QType::MxFp4, {}, v / 100), nearestGridValue(QType::Fp4E2M1, {}, v / 100));
            QCOMPARE(nearestGridValue(QType::NvFp4, {}, v / 100), nearestGridValue(QType::Fp4E2M1, {}, v / 100));
        }
        for (QType t : {QType::Fp8E4M3, QType::Fp8E5M2, QType::Fp4E2M1, QType::Nf4, QType::MxFp4}) {
            QVERIFY(std::isnan(nearestGridValue(t, {}, NAN)));
            QVERIFY(std::isnan(stochasticGridValue(t, {}, NAN, 0.5f)));
        }
        QCOMPARE(nearestGridValue(QType::Fp8E4M3, {}, 1e6f), 448.f);
        QCOMPARE(nearestGridValue(QType::Fp8E4M3, {}, -INFINITY), -448.f);
        QVERIFY(std::signbit(nearestGridValue(QType::Fp8E4M3, {}, -1e-30f)));
        // Codes: float formats their bit pattern, nf4 its index, microscaling their element's.
        QCOMPARE(codeOfGridValue(QType::Fp8E4M3, -448.f), 0xfeu);
        QCOMPARE(codeOfGridValue(QType::Fp4E2M1, -6.f), 0xfu);
        QCOMPARE(codeOfGridValue(QType::MxFp4, 1.5f), 0x3u);
        QCOMPARE(codeOfGridValue(QType::Nf4, 0.f), 7u);
        QCOMPARE(gridValueOfCode(QType::Fp8E5M2, 0x3c), 1.f);
        QCOMPARE(gridValueOfCode(QType::Nf4, 15), 1.f);
        QCOMPARE(gridValueOfCode(QType::MxFp8, 0x7e), 448.f);
    }

    void stochasticUniformIsSeededCounterBased()
    {
        double sum = 0, sumSq = 0;
        int bins[16] = {};
        const int n = 200000;
        for (int i = 0; i < n; ++i) {
            const float u = stochasticUniform(1234, uint64_t(i));
            QVERIFY(u >= 0.f && u < 1.f);
            QCOMPARE(u * 0x1p24f, std::floor(u * 0x1p24f)); // 24 random bits
            QCOMPARE(stochasticUniform(1234, uint64_t(i)), u);
            sum += u;
            sumSq += double(u) * u;
            ++bins[int(u * 16)];
        }
        QVERIFY(std::fabs(sum / n - 0.5) < 0.005);
        QVERIFY(std::fabs(sumSq / n - sum / n * sum / n - 1.0 / 12) < 0.002);
        for (int b : bins)
            QVERIFY(std::abs(b - n / 16) < 600); // about 5 standard deviations
        int same = 0;
        for (int i = 0; i < 1000; ++i)
            same += stochasticUniform(1, uint64_t(i)) == stochasticUniform(2, uint64_t(i));
        QVERIFY(same < 5);
        QCOMPARE(parseRounding("nearest"), std::optional<Rounding>(Rounding::Nearest));
        QCOMPARE(parseRounding(roundingName(Rounding::Stochastic)), std::optional<Rounding>(Rounding::Stochastic));
        QVERIFY(!parseRounding("up"));
    }

    void stochasticRoundingIsUnbiasedBetweenNeighbours_data()
    {
        QTest::addColumn<int>("type");
        QTest::addColumn<bool>("narrow");
        QTest::addColumn<QList<float>>("values");
        QTest::newRow("int8") << int(QType::Int8) << false << QList<float>{0.3f, -0.3f, -127.6f, 126.9f, 5.5f};
        QTest::newRow("int8 narrow") << int(QType::Int8) << true << QList<float>{-126.25f, 2.75f};
        QTest::newRow("uint4") << int(QType::UInt4) << false << QList<float>{0.1f, 14.9f, 7.5f};
        QTest::newRow("int2") << int(QType::Int2) << false << QList<float>{-1.7f, 0.6f};
        QTest::newRow("int16") << int(QType::Int16) << false << QList<float>{-32767.75f, 1000.25f};
        QTest::newRow("binary") << int(QType::Binary) << false << QList<float>{0.f, 0.5f, -0.9f};
        QTest::newRow("ternary") << int(QType::Ternary) << false << QList<float>{0.2f, -0.7f};
        QTest::newRow("fp8_e4m3") << int(QType::Fp8E4M3) << false
                                  << QList<float>{1.03f, -1.03f, 300.f, -440.f, 0.001f, -0.0009f, 0x1p-11f};
        QTest::newRow("fp8_e5m2") << int(QType::Fp8E5M2) << false << QList<float>{1.1f, -50000.f, 3e-6f};
        QTest::newRow("fp4_e2m1") << int(QType::Fp4E2M1) << false << QList<float>{0.2f, -0.7f, 5.f, -2.2f};
        QTest::newRow("nf4") << int(QType::Nf4) << false << QList<float>{0.05f, -0.05f, 0.9f, -0.6f};
        QTest::newRow("mxfp4") << int(QType::MxFp4) << false << QList<float>{0.2f, -5.5f};
    }
    void stochasticRoundingIsUnbiasedBetweenNeighbours()
    {
        QFETCH(int, type);
        QFETCH(bool, narrow);
        QFETCH(QList<float>, values);
        const QType t = QType(type);
        const QType element = qtypeInfo(t).element;
        const IntegerGrid grid = isIntegerLike(t) ? integerGrid(t, narrow) : IntegerGrid{};
        // The grid as a sorted list, built from the type's definition.
        std::vector<double> sorted;
        if (isIntegerLike(t)) {
            for (int64_t q = grid.qmin; q <= grid.qmax; ++q)
                if (t != QType::Binary || q != 0)
                    sorted.push_back(double(q));
        } else if (element == QType::Nf4) {
            sorted.assign(kNf4Expected.begin(), kNf4Expected.end());
        } else {
            const FormatSpec f = element == QType::Fp8E4M3 ? e4m3() : element == QType::Fp8E5M2 ? e5m2() : e2m1();
            for (const CodeValue& cv : finiteCodes(f))
                sorted.push_back(cv.value);
            std::sort(sorted.begin(), sorted.end());
            sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
        }
        const int n = 40000;
        for (float v : values) {
            const auto [lo, hi] = neighbours(sorted, double(v));
            QVERIFY(lo < hi);
            double sum = 0;
            for (int i = 0; i < n; ++i) {
                const float r = stochasticGridValue(t, grid, v, stochasticUniform(99, uint64_t(i)));
                if (double(r) != lo && double(r) != hi)
                    QFAIL(qPrintable(QStringLiteral("v=%1 gave %2, not a neighbour").arg(double(v)).arg(double(r))));
                sum += r;
            }
            const double p = (double(v) - lo) / (hi - lo);
            const double standardError = (hi - lo) * std::sqrt(p * (1 - p) / n);
            QVERIFY2(std::fabs(sum / n - double(v)) < 4 * standardError,
                     qPrintable(QStringLiteral("v=%1 mean %2").arg(double(v)).arg(sum / n, 0, 'g', 9)));
            // The draw decides: the upper neighbour exactly when u < p.
            QCOMPARE(double(stochasticGridValue(t, grid, v, 0.f)), hi);
            QCOMPARE(double(stochasticGridValue(t, grid, v, 1.f - 0x1p-24f)), lo);
        }
        // Grid values stay, whatever the draw; beyond the ends saturates.
        for (double g : sorted)
            for (float u : {0.f, 0.5f, 0.999f})
                QCOMPARE(double(stochasticGridValue(t, grid, float(g), u)), g);
        for (float u : {0.f, 0.999f}) {
            QCOMPARE(double(stochasticGridValue(t, grid, float(sorted.back()) * 4 + 10, u)), sorted.back());
            QCOMPARE(double(stochasticGridValue(t, grid, float(sorted.front()) * 4 - 10, u)), sorted.front());
            QCOMPARE(double(stochasticGridValue(t, grid, INFINITY, u)), sorted.back());
        }
    }

    void stochasticRoundingPicksUpperExactlyWhenDrawIsBelowFraction()
    {
        // Kernels must reproduce this bit for bit: hi iff u < (v − lo) / (hi − lo).
        const IntegerGrid g = integerGrid(QType::Int8, false);
        QCOMPARE(stochasticGridValue(QType::Int8, g, 2.5f, 0.5f), 2.f);
        QCOMPARE(stochasticGridValue(QType::Int8, g, 2.5f, 0.5f - 0x1p-24f), 3.f);
        QCOMPARE(stochasticGridValue(QType::Int8, g, -2.25f, 0.75f), -3.f);
        QCOMPARE(stochasticGridValue(QType::Int8, g, -2.25f, 0.75f - 0x1p-24f), -2.f);
        // fp8 e4m3 between 1 and 1.125: 1.0625 is the fraction 0.5.
        QCOMPARE(stochasticGridValue(QType::Fp8E4M3, {}, 1.0625f, 0.5f), 1.f);
        QCOMPARE(stochasticGridValue(QType::Fp8E4M3, {}, 1.0625f, 0.25f), 1.125f);
        // −1.09375 lies a quarter of the way from lo = −1.125 to hi = −1.
        QCOMPARE(stochasticGridValue(QType::Fp8E4M3, {}, -1.09375f, 0.25f), -1.125f);
        QCOMPARE(stochasticGridValue(QType::Fp8E4M3, {}, -1.09375f, 0.25f - 0x1p-24f), -1.f);
        QCOMPARE(stochasticGridValue(QType::Fp8E4M3, {}, -1.09375f, 0.3f), -1.125f);
    }

    void stochasticFloatKeepsNegativeZero()
    {
        const float r = stochasticGridValue(QType::Fp8E4M3, {}, -0x1p-12f, 0.f);
        QCOMPARE(r, 0.f);
        QVERIFY(std::signbit(r));
        QVERIFY(std::signbit(stochasticGridValue(QType::Fp8E4M3, {}, -0.f, 0.3f)));
    }

    void stochasticNf4ReturnsOnlyCodebookValues()
    {
        // The nf4 table holds +0 only: a −0 input must not come back as −0.
        QVERIFY(!std::signbit(stochasticGridValue(QType::Nf4, {}, -0.f, 0.7f)));
        QCOMPARE(stochasticGridValue(QType::Nf4, {}, -0.f, 0.7f), nearestGridValue(QType::Nf4, {}, -0.f));
    }

    void roundHalfEvenMatchesNearbyint()
    {
        uint32_t state = 99;
        for (int i = 0; i < 200000; ++i) {
            state = state * 1664525u + 1013904223u;
            const float v = std::bit_cast<float>((state & 0x8fffffffu) | 0x38000000u); // |v| in [2^-15, 2^17)
            const float r = roundHalfEven(v);
            QVERIFY(r == std::nearbyint(v) && std::signbit(r) == std::signbit(std::nearbyint(v)));
        }
        for (float v : {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0x1p23f + 1, 0x1p23f - 0.5f, -0.f, INFINITY, 1e30f})
            QVERIFY(roundHalfEven(v) == std::nearbyint(v) && std::signbit(roundHalfEven(v)) == std::signbit(v));
        QVERIFY(std::isnan(roundHalfEven(NAN)));
    }

    void packingRoundTripsEveryWidth()
    {
        uint32_t state = 3;
        for (int bits = 1; bits <= 8; ++bits) {
            QCOMPARE(codesPerByte(bits), bits == 1 ? 8 : bits == 2 ? 4 : bits == 4 ? 2 : 1);
            for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(7), size_t(9), size_t(13), size_t(101)}) {
                std::vector<uint8_t> codes(count), masked(count);
                for (size_t i = 0; i < count; ++i) {
                    state = state * 1664525u + 1013904223u;
                    codes[i] = uint8_t(state >> 24); // high garbage bits must be ignored
                    masked[i] = uint8_t(codes[i] & ((1u << bits) - 1));
                }
                const size_t perByte = size_t(codesPerByte(bits));
                QCOMPARE(packedByteCount(count, bits), (count + perByte - 1) / perByte);
                std::vector<uint8_t> packed(packedByteCount(count, bits), 0xaa);
                packCodes(codes, bits, packed);
                std::vector<uint8_t> back(count, 0xee);
                unpackCodes(packed, bits, back);
                QCOMPARE(back, masked);
                // Padding bits of a final partial byte are zero.
                if (count % perByte != 0)
                    QCOMPARE(packed.back() >> ((count % perByte) * size_t(bits)), 0);
            }
        }
    }

    void packingKnownLayouts()
    {
        auto pack = [](std::vector<uint8_t> codes, int bits) {
            std::vector<uint8_t> out(packedByteCount(codes.size(), bits));
            packCodes(codes, bits, out);
            return out;
        };
        const uint8_t minusOne4 = uint8_t(codeOfGridValue(QType::Int4, -1));
        QCOMPARE(pack({1, minusOne4}, 4), (std::vector<uint8_t>{0xf1}));
        QCOMPARE(pack({0x2, 0xc, 0x7}, 4), (std::vector<uint8_t>{0xc2, 0x07}));
        QCOMPARE(pack({0, 1, 2, 3, 3}, 2), (std::vector<uint8_t>{0xe4, 0x03}));
        QCOMPARE(pack({1, 0, 0, 0, 0, 0, 0, 1, 1}, 1), (std::vector<uint8_t>{0x81, 0x01}));
        QCOMPARE(pack({0xff, 0x05}, 3), (std::vector<uint8_t>{0x07, 0x05}));
        QCOMPARE(pack({0xff}, 7), (std::vector<uint8_t>{0x7f}));
        std::vector<uint8_t> small(1);
        const std::vector<uint8_t> three{1, 2, 3};
        QVERIFY_THROWS_EXCEPTION(Error, packCodes(three, 4, small));
        std::vector<uint8_t> out(3);
        QVERIFY_THROWS_EXCEPTION(Error, unpackCodes(small, 4, out));
        QVERIFY_THROWS_EXCEPTION(Error, codesPerByte(9));
        QVERIFY_THROWS_EXCEPTION(Error, codesPerByte(0));
    }

    void qtypeNamesParse()
    {
        for (const QuantTypeInfo& q : allQTypes()) {
            QCOMPARE(parseQType(q.name), std::optional<QType>(q.type));
            QCOMPARE(qtypeName(q.type), q.name);
            QCOMPARE(qtypeInfo(q.type).type, q.type);
        }
        const std::pair<const char*, QType> aliases[] = {
            {"float8_e4m3fn", QType::Fp8E4M3}, {"e4m3", QType::Fp8E4M3},     {"fp8", QType::Fp8E4M3},
            {"float8_e5m2", QType::Fp8E5M2},   {"e5m2", QType::Fp8E5M2},     {"fp4", QType::Fp4E2M1},
            {"float4_e2m1fn", QType::Fp4E2M1}, {"mxfp4_e2m1", QType::MxFp4}, {"mxfp8_e4m3", QType::MxFp8},
        };
        for (const auto& [alias, type] : aliases)
            QCOMPARE(parseQType(alias), std::optional<QType>(type));
        // ggml's own spelling of the k types.
        const std::pair<const char*, QType> ggml[] = {{"q4_K", QType::Q4K}, {"q5_K", QType::Q5K}, {"q6_K", QType::Q6K}};
        for (const auto& [alias, type] : ggml)
            QCOMPARE(parseQType(alias), std::optional<QType>(type));
        for (const char* bad : {"", "int9", "Int8", "fp8 ", "float32"})
            QVERIFY2(!parseQType(bad), bad);
        const QStringList names = QString::fromStdString(qtypeNameList()).split(QStringLiteral(", "));
        QCOMPARE(names.size(), 42);
        QCOMPARE(int(allQTypes().size()), 42);
        for (const QString& n : names)
            QVERIFY2(parseQType(n.toStdString()), qPrintable(n));
        QCOMPARE(names.first(), QStringLiteral("int1"));
        QCOMPARE(names.last(), QStringLiteral("lut8"));
    }
};

QTEST_APPLESS_MAIN(TestNumerics)
#include "tst_numerics.moc"
