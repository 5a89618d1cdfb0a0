#pragma once
// What the calibration suites (tst_calib, tst_calib_search) share: Gaussian
// and adversarial data, the groups of a block layout, np.percentile and a
// histogram written out plainly, and comparisons that are exact where QCOMPARE
// is fuzzy or that check an Error's message.

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/block_layout.h"
#include "core/error.h"

namespace qs::test {

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(rng);
    return v;
}

// Heavy-tailed data with a few large outliers, ties and exact zeros: what
// activations look like and what breaks naive bucketing.
inline std::vector<float> adversarial(size_t n, uint32_t seed)
{
    std::vector<float> v = gaussian(n, seed);
    std::mt19937 rng(seed + 1);
    for (size_t i = 0; i < n; i += 97)
        v[i] = 0.0f;
    for (size_t i = 5; i < n; i += 1013)
        v[i] = 250.0f * (rng() % 2 ? 1.0f : -1.0f);
    for (size_t i = 11; i < n; i += 31)
        v[i] = float(int(v[i] * 4)) / 4; // many ties
    if (n > 3)
        v[3] = -3e4f;
    return v;
}

// Each group's values in flat order, found with the reference BlockLayout::groupOf.
inline std::vector<std::vector<float>> groupsOf(const std::vector<float>& x, const BlockLayout& layout)
{
    std::vector<std::vector<float>> g(size_t(layout.groupCount()));
    for (size_t i = 0; i < x.size(); ++i)
        g[size_t(layout.groupOf(int64_t(i)))].push_back(x[i]);
    return g;
}

inline std::vector<BlockLayout> layoutsFor(const Shape& s)
{
    std::vector<BlockLayout> l{BlockLayout::perTensor(s)};
    for (int a = 0; a < int(s.size()); ++a)
        l.push_back(BlockLayout::perChannel(s, a));
    if (s.size() >= 2) {
        l.push_back(BlockLayout::tiled(s, 0, int(s.size()) - 1, 8));  // ragged last tile when shape % 8 != 0
        l.push_back(BlockLayout::tiled(s, -1, int(s.size()) - 1, 5)); // tiles without a channel axis
        BlockLayout boxes{s, s};                                      // ragged boxes on every axis
        for (size_t i = 0; i < s.size(); ++i)
            boxes.block[i] = std::max<int64_t>(1, s[i] / 2 - 1);
        l.push_back(boxes);
    }
    return l;
}

// np.percentile(v, p), from a full sort.
inline double sortedPercentile(std::vector<float> v, double p)
{
    std::sort(v.begin(), v.end());
    const double r = p / 100.0 * double(v.size() - 1);
    const size_t k = size_t(std::floor(r));
    const double a = v[k], b = v[std::min(k + 1, v.size() - 1)], t = r - double(k);
    const double d = double(float(b - a));
    return t < 0.5 ? a + d * t : b - d * (1 - t);
}

inline std::vector<int64_t> naiveHistogram(const std::vector<float>& x, bool magnitudes, float lo, float hi, int bins)
{
    std::vector<int64_t> c(size_t(bins), 0);
    const float scale = hi > lo ? float(bins) / (hi - lo) : 0.0f;
    for (float v : x) {
        const float t = ((magnitudes ? std::abs(v) : v) - lo) * scale;
        const int b = t <= 0 ? 0 : (t >= float(bins - 1) ? bins - 1 : int(t));
        ++c[size_t(b)];
    }
    return c;
}

} // namespace qs::test

// QCOMPARE on floating point is fuzzy; calibration results must be equal bit for bit.
#define QCOMPARE_EXACT(actual, expected)                                                                               \
    QVERIFY2((actual) == (expected),                                                                                   \
             qPrintable(QString("%1 != %2").arg(double(actual), 0, 'g', 17).arg(double(expected), 0, 'g', 17)))

#define QVERIFY_THROWS_WITH(expr, ...)                                                                                 \
    do {                                                                                                               \
        bool thrown = false;                                                                                           \
        try {                                                                                                          \
            expr;                                                                                                      \
        } catch (const qs::Error& e) {                                                                                 \
            thrown = true;                                                                                             \
            const std::string msg = e.what();                                                                          \
            for (const char* needle : {__VA_ARGS__})                                                                   \
                QVERIFY2(msg.find(needle) != std::string::npos, (msg + "  (missing: " + needle + ")").c_str());        \
        }                                                                                                              \
        QVERIFY2(thrown, #expr " did not throw qs::Error");                                                            \
    } while (0)
