#include "quant/microscaling.h"

#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <memory>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/half.h"
#include "numerics/float_formats.h"
#include "quant/layout_walk.h"

namespace qs {
namespace {

constexpr int64_t kGrain = 1 << 14;
constexpr float kNvfp4SmallestBlockScale = 0x1p-9f; // e4m3's smallest subnormal

template <class T, class Convert>
void blockAbsMaxes(const T* x, const LayoutWalk& walk, int64_t n, std::atomic<uint32_t>* maxBits, Convert convert)
{
    // |x| of non-negative floats orders like its bit pattern, NaN above Inf,
    // so one unsigned max per group also catches non-finite values.
    auto raise = [](std::atomic<uint32_t>& slot, uint32_t bits) {
        uint32_t seen = slot.load(std::memory_order_relaxed);
        while (bits > seen && !slot.compare_exchange_weak(seen, bits, std::memory_order_relaxed)) {
        }
    };
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kGrain), [&](const tbb::blocked_range<int64_t>& r) {
        walk.forEachRun(r.begin(), r.end(), [&](int64_t start, int64_t count, int64_t group) {
            if (walk.perElementGroups()) {
                for (int64_t j = 0; j < count; ++j)
                    raise(maxBits[group + j], std::bit_cast<uint32_t>(convert(x[start + j])) & 0x7fffffffu);
                return;
            }
            uint32_t m = 0;
            for (int64_t j = 0; j < count; ++j)
                m = std::max(m, std::bit_cast<uint32_t>(convert(x[start + j])) & 0x7fffffffu);
            raise(maxBits[group], m);
        });
    });
}

} // namespace

int mxSharedExponent(float blockAbsMax, QType t)
{
    const int emaxElem = std::ilogb(qtypeInfo(qtypeInfo(t).element).maxFinite); // 8 for e4m3, 2 for e2m1
    return std::clamp(std::ilogb(blockAbsMax) - emaxElem, -127, 127);
}

QuantParams microscalingParams(const Tensor& input, QType t, int axis, std::string_view tensorName)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    if (q.kind != QKind::Microscaling)
        throw Error("tensor '" + std::string(tensorName) + "': " + std::string(q.name) +
                    " is not a microscaling type; its scales come from calibrated ranges");
    QuantParams p;
    p.qtype = t;
    p.layout = BlockLayout::blocks(input.shape(), axis, q.blockSize);
    p.symmetric = true;
    const int64_t groups = p.layout.groupCount();
    const LayoutWalk walk(p.layout);
    auto maxBits = std::make_unique<std::atomic<uint32_t>[]>(size_t(groups));
    for (int64_t g = 0; g < groups; ++g)
        maxBits[size_t(g)].store(0, std::memory_order_relaxed);
    const int64_t n = input.numel();
    switch (input.dtype()) {
    case DType::F32:
        blockAbsMaxes(input.values<float>().data(), walk, n, maxBits.get(), [](float x) { return x; });
        break;
    case DType::F16:
        blockAbsMaxes(input.values<uint16_t>().data(), walk, n, maxBits.get(), fp16ToFloat);
        break;
    case DType::BF16:
        blockAbsMaxes(input.values<uint16_t>().data(), walk, n, maxBits.get(), bf16ToFloat);
        break;
    default:
        throw Error("tensor '" + std::string(tensorName) +
                    "': microscaling needs float32, float16 or bfloat16 data, got " +
                    std::string(dtypeName(input.dtype())));
    }

    std::vector<float> absMax(static_cast<size_t>(groups));
    float tensorAbsMax = 0;
    for (int64_t g = 0; g < groups; ++g) {
        const uint32_t bits = maxBits[size_t(g)].load(std::memory_order_relaxed);
        if (bits >= 0x7f800000u)
            throw Error("tensor '" + std::string(tensorName) + "', block " + std::to_string(g) + " (" +
                        p.layout.describe() + "): holds a " + (bits > 0x7f800000u ? "NaN" : "infinite value") +
                        "; quantization needs finite values");
        absMax[size_t(g)] = std::bit_cast<float>(bits);
        tensorAbsMax = std::max(tensorAbsMax, absMax[size_t(g)]);
    }

    p.scales.resize(size_t(groups));
    if (t == QType::NvFp4) {
        const float global = tensorAbsMax == 0 ? 1.0f : std::max(tensorAbsMax / (448.0f * 6.0f), FLT_MIN);
        p.globalScale = global;
        for (size_t g = 0; g < absMax.size(); ++g) {
            float b = decodeFp8E4M3(encodeFp8E4M3(absMax[g] / 6.0f / global));
            if (b == 0)
                b = kNvfp4SmallestBlockScale;
            p.scales[g] = b * global;
        }
        return p;
    }
    for (size_t g = 0; g < absMax.size(); ++g)
        p.scales[g] = decodeE8M0(encodeE8M0(absMax[g] == 0 ? -127 : mxSharedExponent(absMax[g], t)));
    return p;
}

} // namespace qs
