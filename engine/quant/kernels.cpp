#include "quant/kernels.h"

#include "quant/gguf_quantization.h"
#include "quant/palettization.h"

#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/half.h"
#include "core/vector_clones.h"
#include "numerics/grid.h"
#include "numerics/nf4.h"
#include "quant/fast_grids.h"
#include "quant/layout_walk.h"

namespace qs {

const Nf4FastGrid& Nf4FastGrid::instance()
{
    static const Nf4FastGrid grid = [] {
        Nf4FastGrid g{};
        for (size_t k = 0; k < 16; ++k)
            g.values[k] = decodeNf4(uint8_t(k));
        // Floats in order as integers, so a binary search can walk them.
        auto toOrdered = [](float f) {
            const int32_t b = std::bit_cast<int32_t>(f);
            return b < 0 ? -(b & 0x7fffffff) : b;
        };
        auto fromOrdered = [](int32_t o) {
            return o < 0 ? std::bit_cast<float>(-o | int32_t(0x80000000)) : std::bit_cast<float>(o);
        };
        for (size_t k = 0; k < 15; ++k) {
            // The smallest float in (values[k], values[k+1]] that encodes above k.
            int32_t lo = toOrdered(g.values[k]), hi = toOrdered(g.values[k + 1]);
            while (hi - lo > 1) {
                const int32_t mid = lo + (hi - lo) / 2;
                (encodeNf4(fromOrdered(mid)) > k ? hi : lo) = mid;
            }
            g.thresholds[k] = fromOrdered(hi);
        }
        return g;
    }();
    return grid;
}

namespace {

constexpr int64_t kGrain = 1 << 14; // elements per parallel task at least: 64 KiB of float32

struct LoadF32 {
    using In = float;
    static float get(float x) { return x; }
};
// fp16ToFloat without branches, so that the loops vectorize: placing the 15
// fp16 bits at the top of a float's and scaling by 2^112 re-biases the exponent
// and turns fp16 subnormals into exact float normals; Inf/NaN are selected
// apart. The tests hold it to core/half.h bit for bit through the reference.
struct LoadF16 {
    using In = uint16_t;
    [[gnu::always_inline]] static float get(uint16_t h)
    {
        const uint32_t magnitude = uint32_t(h & 0x7fffu) << 13;
        const uint32_t finite = std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) * 0x1p112f);
        const uint32_t bits = magnitude >= (0x7c00u << 13) ? magnitude | 0x7f800000u : finite;
        return std::bit_cast<float>(bits | (uint32_t(h & 0x8000u) << 16));
    }
};
struct LoadBf16 {
    using In = uint16_t;
    static float get(uint16_t h) { return bf16ToFloat(h); }
};

template <class Fn> void withInputType(DType t, Fn&& fn)
{
    switch (t) {
    case DType::F32:
        fn(LoadF32{});
        return;
    case DType::F16:
        fn(LoadF16{});
        return;
    case DType::BF16:
        fn(LoadBf16{});
        return;
    default:
        throw Error("quantization input must be float32, float16 or bfloat16, got " + std::string(dtypeName(t)));
    }
}

// Calls fn with the fast grid of the params' type.
template <class Fn> void withFastGrid(const QuantParams& p, Fn&& fn)
{
    const QuantTypeInfo& q = qtypeInfo(p.qtype);
    switch (q.kind) {
    case QKind::Integer:
    case QKind::Ternary: {
        const IntegerGrid g = integerGrid(p.qtype, p.options.narrowRange);
        fn(IntegerFastGrid{float(g.qmin), float(g.qmax), uint32_t((uint64_t(1) << q.bits) - 1)});
        return;
    }
    case QKind::Binary:
        fn(BinaryFastGrid{});
        return;
    case QKind::Float:
    case QKind::Microscaling:
        fn(FloatFastGrid::of(q.element));
        return;
    case QKind::Codebook:
        fn(Nf4FastGrid::instance());
        return;
    case QKind::GgufBlock:
        throw Error(std::string(q.name) + " has no element grid (GGUF block format)");
    case QKind::Lut:
        throw Error(std::string(q.name) + " has no element grid (a per-group k-means table)");
    }
}

// What every kernel needs, prepared once per call (no allocation in the loops).
struct Plan {
    const QuantParams& params;
    LayoutWalk walk;
    std::vector<float> zeroPoints; // as floats; empty when symmetric
    int64_t numel;

    Plan(const QuantParams& p, int64_t n) : params(p), walk(p.layout), numel(n)
    {
        if (!p.symmetric)
            zeroPoints.assign(p.zeroPoints.begin(), p.zeroPoints.end());
    }
    const float* scales(int64_t group) const { return params.scales.data() + group; }
    const float* zps(int64_t group) const { return zeroPoints.empty() ? nullptr : zeroPoints.data() + group; }

    // Runs body(begin, end) over chunks in parallel; returns true if any returned true.
    template <class Body> bool parallelChunks(Body&& body) const
    {
        std::atomic<bool> any{false};
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, numel, kGrain), [&](const tbb::blocked_range<int64_t>& r) {
            if (body(r.begin(), r.end()))
                any.store(true, std::memory_order_relaxed);
        });
        return any.load();
    }
    // Calls fn(flatStart, count, group, perElement, hasZp) per run, as compile-time flags.
    template <class Fn> bool parallelRuns(Fn&& fn) const
    {
        return parallelChunks([&](int64_t begin, int64_t end) {
            bool bad = false;
            const bool perElement = walk.perElementGroups();
            const bool hasZp = !zeroPoints.empty();
            walk.forEachRun(begin, end, [&](int64_t start, int64_t count, int64_t group) {
                auto call = [&](auto pe, auto hz) { bad |= fn(start, count, group, pe, hz); };
                if (perElement)
                    hasZp ? call(std::true_type{}, std::true_type{}) : call(std::true_type{}, std::false_type{});
                else
                    hasZp ? call(std::false_type{}, std::true_type{}) : call(std::false_type{}, std::false_type{});
            });
            return bad;
        });
    }
};

// The inner loops get an AVX2 clone (core/vector_clones.h).

// One run of fake quantization with round-to-nearest. Returns whether an input
// was not finite. `out` may be `x` itself (float32 in place): each element is
// read before it is written, and no other.
template <class Grid, class Load, bool PerElement, bool HasZp>
QS_VECTOR_CLONES bool fakeRunNearest(const Grid& gridRef, const typename Load::In* x, float* out, int64_t n,
                                     const float* __restrict s, const float* __restrict z)
{
    const Grid grid = gridRef;
    const float s0 = s[0];
    const float z0 = HasZp ? z[0] : 0.0f;
    int bad = 0;
    for (int64_t j = 0; j < n; ++j) {
        const float xv = Load::get(x[j]);
        bad |= int(!(std::fabs(xv) <= FLT_MAX));
        const float sj = PerElement ? s[j] : s0;
        const float zj = HasZp ? (PerElement ? z[j] : z0) : 0.0f;
        if constexpr (Grid::kAddsZeroPoint)
            out[j] = (grid(xv / sj + zj) - zj) * sj;
        else
            out[j] = grid(xv / sj) * sj;
    }
    return bad != 0;
}

// One run of codes with round-to-nearest. Returns whether an input was not finite.
template <class Grid, class Load, bool PerElement, bool HasZp, class Code>
QS_VECTOR_CLONES bool quantizeRunNearest(const Grid& gridRef, const typename Load::In* __restrict x,
                                         Code* __restrict out, int64_t n, const float* __restrict s,
                                         const float* __restrict z)
{
    const Grid grid = gridRef;
    const float s0 = s[0];
    const float z0 = HasZp ? z[0] : 0.0f;
    int bad = 0;
    for (int64_t j = 0; j < n; ++j) {
        const float xv = Load::get(x[j]);
        bad |= int(!(std::fabs(xv) <= FLT_MAX));
        const float sj = PerElement ? s[j] : s0;
        const float zj = HasZp ? (PerElement ? z[j] : z0) : 0.0f;
        out[j] = Code(grid.code(grid(Grid::kAddsZeroPoint ? xv / sj + zj : xv / sj)));
    }
    return bad != 0;
}

// The grid value of one element with stochastic rounding: numerics' own scalar
// definition, since the draw is a hash per element anyway.
template <class Load, bool PerElement, bool HasZp>
float stochasticGrid(QType t, IntegerGrid grid, bool integerLike, typename Load::In xin, const float* s, const float* z,
                     int64_t j, uint64_t seed, int64_t flat, int& bad)
{
    const float xv = Load::get(xin);
    bad |= int(!(std::fabs(xv) <= FLT_MAX));
    float v = xv / s[PerElement ? j : 0];
    if (integerLike)
        v += HasZp ? z[PerElement ? j : 0] : 0.0f;
    return stochasticGridValue(t, grid, v, stochasticUniform(seed, uint64_t(flat)));
}

[[noreturn]] void throwNonFinite(const Tensor& input, std::string_view tensorName)
{
    int64_t i = 0;
    float x = 0;
    withInputType(input.dtype(), [&](auto load) {
        using L = decltype(load);
        const auto* p = static_cast<const typename L::In*>(input.rawData());
        for (i = 0; i < input.numel(); ++i)
            if (!std::isfinite(x = L::get(p[i])))
                return;
    });
    std::string where;
    int64_t rest = i;
    for (size_t a = input.shape().size(); a-- > 0;) {
        where = std::to_string(rest % input.shape()[a]) + (where.empty() ? "" : ", ") + where;
        rest /= input.shape()[a];
    }
    throw Error("tensor '" + std::string(tensorName) + "': element [" + where + "] (flat index " + std::to_string(i) +
                ") is " + (std::isnan(x) ? "NaN" : "infinite") + "; quantization needs finite values");
}

uint32_t codeMask(QType t)
{
    return uint32_t((uint64_t(1) << qtypeInfo(t).bits) - 1);
}

void checkCodes(const Tensor& codes, const QuantParams& params)
{
    if (codes.dtype() != codeDType(params.qtype))
        throw Error("codes of " + std::string(qtypeName(params.qtype)) + " must be " +
                    std::string(dtypeName(codeDType(params.qtype))) + ", got " + std::string(dtypeName(codes.dtype())));
}

} // namespace

DType codeDType(QType t)
{
    switch (t) {
    case QType::Int8:
        return DType::I8;
    case QType::Int16:
        return DType::I16;
    default:
        return DType::U8;
    }
}

void checkQuantParams(const QuantParams& params, const Shape& shape, std::string_view tensorName)
{
    const std::string name = "tensor '" + std::string(tensorName) + "'";
    if (isGgufBlock(params.qtype))
        throw Error(name + ": " + std::string(qtypeName(params.qtype)) +
                    " is a GGUF block format: llama.cpp's blocks, not one code per element, which only a GGUF "
                    "file holds; use int4/int8 (with tile_size) for this export");
    if (isLut(params.qtype)) {
        checkLutParams(params, shape, tensorName);
        return;
    }
    if (params.layout.shape != shape || params.layout.block.size() != shape.size())
        throw Error(name + " has shape " + shapeToString(shape) + " but its quantization parameters are for " +
                    shapeToString(params.layout.shape));
    const int64_t groups = params.layout.groupCount();
    if (int64_t(params.scales.size()) != groups)
        throw Error(name + ": " + std::to_string(params.scales.size()) + " scales for " + std::to_string(groups) +
                    " groups (" + params.layout.describe() + ")");
    for (size_t g = 0; g < params.scales.size(); ++g)
        if (!(params.scales[g] > 0) || !std::isfinite(params.scales[g]))
            throw Error(name + ", group " + std::to_string(g) + ": scale " + std::to_string(params.scales[g]) +
                        " is not finite and positive");
    if (params.symmetric) {
        if (!params.zeroPoints.empty())
            throw Error(name + ": symmetric quantization parameters carry zero points");
        return;
    }
    if (qtypeInfo(params.qtype).kind != QKind::Integer)
        throw Error(name + ": " + std::string(qtypeName(params.qtype)) + " has no zero point");
    if (int64_t(params.zeroPoints.size()) != groups)
        throw Error(name + ": " + std::to_string(params.zeroPoints.size()) + " zero points for " +
                    std::to_string(groups) + " groups");
    const IntegerGrid grid = integerGrid(params.qtype, params.options.narrowRange);
    for (size_t g = 0; g < params.zeroPoints.size(); ++g)
        if (params.zeroPoints[g] < grid.qmin || params.zeroPoints[g] > grid.qmax)
            throw Error(name + ", group " + std::to_string(g) + ": zero point " + std::to_string(params.zeroPoints[g]) +
                        " is outside [" + std::to_string(grid.qmin) + ", " + std::to_string(grid.qmax) + "]");
}

void fakeQuantizeInto(const Tensor& input, const QuantParams& params, std::span<float> out, Rounding rounding,
                      uint64_t seed, std::string_view tensorName)
{
    if (isGgufBlock(params.qtype)) {
        if (rounding != Rounding::Nearest)
            throw Error("tensor '" + std::string(tensorName) + "': " + std::string(qtypeName(params.qtype)) +
                        " rounds as llama.cpp's reference quantizer does; stochastic rounding does not apply");
        if (params.layout.shape != input.shape())
            throw Error("tensor '" + std::string(tensorName) + "' has shape " + shapeToString(input.shape()) +
                        " but its quantization parameters are for " + shapeToString(params.layout.shape));
        ggufFakeQuantizeInto(input, params.qtype, out, tensorName);
        return;
    }
    if (isLut(params.qtype)) {
        if (rounding != Rounding::Nearest)
            throw Error("tensor '" + std::string(tensorName) + "': " + std::string(qtypeName(params.qtype)) +
                        " takes each value's nearest table entry; stochastic rounding does not apply");
        lutFakeQuantizeInto(input, params, out, tensorName);
        return;
    }
    checkQuantParams(params, input.shape(), tensorName);
    if (int64_t(out.size()) != input.numel())
        throw Error("tensor '" + std::string(tensorName) + "': output buffer holds " + std::to_string(out.size()) +
                    " floats for " + std::to_string(input.numel()) + " elements");
    if (input.numel() == 0)
        return;
    const Plan plan(params, input.numel());
    float* o = out.data();
    bool bad = false;
    withInputType(input.dtype(), [&](auto load) {
        using L = decltype(load);
        const auto* x = static_cast<const typename L::In*>(input.rawData());
        if (rounding == Rounding::Nearest) {
            withFastGrid(params, [&](const auto& grid) {
                using G = std::decay_t<decltype(grid)>;
                bad = plan.parallelRuns([&](int64_t start, int64_t n, int64_t group, auto pe, auto hz) {
                    return fakeRunNearest<G, L, pe(), hz()>(grid, x + start, o + start, n, plan.scales(group),
                                                            plan.zps(group));
                });
            });
            return;
        }
        const QType t = params.qtype;
        const bool integerLike = isIntegerLike(t);
        const bool codebook = qtypeInfo(t).kind == QKind::Codebook;
        const IntegerGrid ig = integerLike ? integerGrid(t, params.options.narrowRange) : IntegerGrid{0, 0};
        bad = plan.parallelRuns([&](int64_t start, int64_t n, int64_t group, auto pe, auto hz) {
            const float* s = plan.scales(group);
            const float* z = plan.zps(group);
            int badRun = 0;
            for (int64_t j = 0; j < n; ++j) {
                const float g =
                    stochasticGrid<L, pe(), hz()>(t, ig, integerLike, x[start + j], s, z, j, seed, start + j, badRun);
                const float sj = s[pe() ? j : 0];
                o[start + j] = integerLike ? float(int32_t(g) - int32_t(hz() ? z[pe() ? j : 0] : 0.0f)) * sj
                               : codebook  ? (g + 0.0f) * sj // nf4 has only +0
                                           : g * sj;
            }
            return badRun != 0;
        });
    });
    if (bad)
        throwNonFinite(input, tensorName);
}

Tensor fakeQuantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed,
                    std::string_view tensorName)
{
    // Not zero-filled first: fakeQuantizeInto writes every element (or throws).
    Tensor out = Tensor::uninitialized(DType::F32, input.shape());
    fakeQuantizeInto(input, params, out.mutableValues<float>(), rounding, seed, tensorName);
    return out;
}

Tensor quantize(const Tensor& input, const QuantParams& params, Rounding rounding, uint64_t seed,
                std::string_view tensorName)
{
    if (isLut(params.qtype)) {
        if (rounding != Rounding::Nearest)
            throw Error("tensor '" + std::string(tensorName) + "': " + std::string(qtypeName(params.qtype)) +
                        " takes each value's nearest table entry; stochastic rounding does not apply");
        return lutQuantize(input, params, tensorName);
    }
    checkQuantParams(params, input.shape(), tensorName);
    const DType codeType = codeDType(params.qtype);
    Tensor out(codeType, input.shape());
    if (input.numel() == 0)
        return out;
    const Plan plan(params, input.numel());
    const QType t = params.qtype;
    const bool integerLike = isIntegerLike(t);
    const IntegerGrid ig = integerLike ? integerGrid(t, params.options.narrowRange) : IntegerGrid{0, 0};
    bool bad = false;
    auto run = [&](auto load, auto* codes) {
        using L = decltype(load);
        using Code = std::remove_pointer_t<decltype(codes)>;
        const auto* x = static_cast<const typename L::In*>(input.rawData());
        if (rounding == Rounding::Nearest) {
            withFastGrid(params, [&](const auto& grid) {
                using G = std::decay_t<decltype(grid)>;
                bad = plan.parallelRuns([&](int64_t start, int64_t n, int64_t group, auto pe, auto hz) {
                    return quantizeRunNearest<G, L, pe(), hz(), Code>(grid, x + start, codes + start, n,
                                                                      plan.scales(group), plan.zps(group));
                });
            });
            return;
        }
        bad = plan.parallelRuns([&](int64_t start, int64_t n, int64_t group, auto pe, auto hz) {
            const float* s = plan.scales(group);
            const float* z = plan.zps(group);
            int badRun = 0;
            for (int64_t j = 0; j < n; ++j)
                codes[start + j] =
                    Code(codeOfGridValue(t, stochasticGrid<L, pe(), hz()>(t, ig, integerLike, x[start + j], s, z, j,
                                                                          seed, start + j, badRun)));
            return badRun != 0;
        });
    };
    withInputType(input.dtype(), [&](auto load) {
        switch (codeType) {
        case DType::I8:
            run(load, out.mutableValues<int8_t>().data());
            break;
        case DType::I16:
            run(load, out.mutableValues<int16_t>().data());
            break;
        default:
            run(load, out.mutableValues<uint8_t>().data());
            break;
        }
    });
    if (bad)
        throwNonFinite(input, tensorName);
    return out;
}

Tensor dequantize(const Tensor& codes, const QuantParams& params)
{
    if (isLut(params.qtype))
        return lutDequantize(codes, params);
    checkQuantParams(params, codes.shape(), "codes");
    checkCodes(codes, params);
    Tensor out(DType::F32, codes.shape());
    if (codes.numel() == 0)
        return out;
    const Plan plan(params, codes.numel());
    const QType t = params.qtype;
    const QuantTypeInfo& q = qtypeInfo(t);
    const uint32_t mask = codeMask(t);
    // Integers are decoded arithmetically (sign-extended from their bits); every
    // other type through a table of numerics' gridValueOfCode.
    const bool integer = q.kind == QKind::Integer;
    const int shift = integer && q.isSigned ? 32 - q.bits : 0;
    float table[256] = {};
    bool invalid[256] = {}; // codes numerics rejects (ternary's 2)
    if (!integer)
        for (uint32_t c = 0; c <= mask; ++c) {
            try {
                table[c] = gridValueOfCode(t, c);
            } catch (const Error&) {
                invalid[c] = true;
            }
        }
    const bool addsZp = isIntegerLike(t);
    float* o = out.mutableValues<float>().data();
    bool bad = false;
    auto run = [&](const auto* c) {
        bad = plan.parallelRuns([&](int64_t start, int64_t n, int64_t group, auto pe, auto hz) {
            const float* s = plan.scales(group);
            const float* z = plan.zps(group);
            int badRun = 0;
            for (int64_t j = 0; j < n; ++j) {
                const uint32_t code = uint32_t(c[start + j]);
                badRun |= int(invalid[code & 0xff]);
                const float g = !integer ? table[code & mask]
                                : shift  ? float(int32_t(code << shift) >> shift)
                                         : float(code & mask);
                const float zj = hz() ? z[pe() ? j : 0] : 0.0f;
                o[start + j] = (addsZp ? g - zj : g) * s[pe() ? j : 0];
            }
            return badRun != 0;
        });
    };
    switch (codes.dtype()) {
    case DType::I8:
        run(codes.values<int8_t>().data());
        break;
    case DType::I16:
        run(codes.values<int16_t>().data());
        break;
    default:
        run(codes.values<uint8_t>().data());
        break;
    }
    if (bad) // only uint8 codes reach the table, so the first invalid one is found there
        for (const uint8_t c : codes.values<uint8_t>())
            if (invalid[c & mask])
                throw Error(std::string(qtypeName(t)) + " code " + std::to_string(c & mask) + " is not a valid code");
    return out;
}

} // namespace qs
