#include "runtime/ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace qs::ops {

namespace {

enum class Reduction { Mean, Sum, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// Elements below which a reduction runs on the calling thread.
constexpr int64_t kParallelReductionThreshold = 1 << 16;

// Input values as doubles, whatever numeric type they are stored as.
std::vector<double> valuesAsDouble(const KernelContext& ctx, const Tensor& t)
{
    std::vector<double> v(size_t(t.numel()));
    auto copy = [&](auto span) {
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = double(span[i]);
    };
    switch (t.dtype()) {
    case DType::F32:
        copy(t.values<float>());
        break;
    case DType::F64:
        copy(t.values<double>());
        break;
    case DType::I32:
        copy(t.values<int32_t>());
        break;
    case DType::I64:
        copy(t.values<int64_t>());
        break;
    case DType::U8:
        copy(t.values<uint8_t>());
        break;
    case DType::I8:
        copy(t.values<int8_t>());
        break;
    default:
        ctx.fail("input type " + std::string(dtypeName(t.dtype())) + " is not supported");
    }
    return v;
}

Tensor tensorFromDoubles(DType dtype, Shape shape, const std::vector<double>& v)
{
    Tensor t(dtype, std::move(shape));
    auto fill = [&](auto span) {
        using T = typename decltype(span)::value_type;
        for (size_t i = 0; i < v.size(); ++i)
            span[i] = T(v[i]);
    };
    switch (dtype) {
    case DType::F32:
        fill(t.mutableValues<float>());
        break;
    case DType::F64:
        fill(t.mutableValues<double>());
        break;
    case DType::I32:
        fill(t.mutableValues<int32_t>());
        break;
    case DType::I64:
        fill(t.mutableValues<int64_t>());
        break;
    case DType::U8:
        fill(t.mutableValues<uint8_t>());
        break;
    case DType::I8:
        fill(t.mutableValues<int8_t>());
        break;
    default:
        break;
    }
    return t;
}

// Which axes a reduction covers: from the attribute or the input, per opset.
std::vector<bool> reducedAxes(const KernelContext& ctx, int rank, bool axesFromInput)
{
    std::vector<int64_t> axes;
    if (axesFromInput) {
        if (const Tensor* a = ctx.optionalInput(1)) {
            if (a->dtype() != DType::I64)
                ctx.fail("axes must be int64");
            axes.assign(a->values<int64_t>().begin(), a->values<int64_t>().end());
        }
    } else {
        axes = ctx.intsAttribute("axes");
    }
    std::vector<bool> reduced(size_t(rank), false);
    if (axes.empty()) {
        const bool noop = ctx.intAttribute("noop_with_empty_axes", 0) != 0;
        if (!noop)
            reduced.assign(size_t(rank), true);
        return reduced;
    }
    for (int64_t a : axes) {
        if (a < -rank || a >= rank)
            ctx.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
        reduced[size_t(a < 0 ? a + rank : a)] = true;
    }
    return reduced;
}

// A float32 reduction over one run of consecutive axes (LayerNorm's last axis,
// a channel axis, a plane): rows x count x inner elements, reduced over count.
// Sums and norms accumulate in double in eight interleaved partial sums (inner
// == 1) or one per inner position, so the loops vectorise; max and min as the
// general path. Returns false for the cases the general path keeps.
bool reduceConsecutiveAxes(KernelContext& ctx, Reduction kind, const Tensor& X, const std::vector<bool>& reduced,
                           const Shape& outShape)
{
    const bool summing = kind == Reduction::Mean || kind == Reduction::Sum || kind == Reduction::SumSquare ||
                         kind == Reduction::L1 || kind == Reduction::L2;
    if (X.dtype() != DType::F32 || !(summing || kind == Reduction::Max || kind == Reduction::Min))
        return false;
    const int rank = X.rank();
    const auto first = std::find(reduced.begin(), reduced.end(), true);
    const auto last = std::find(first, reduced.end(), false);
    if (first == reduced.end() || std::find(last, reduced.end(), true) != reduced.end())
        return false;
    int64_t rows = 1, count = 1, inner = 1;
    for (int d = 0; d < rank; ++d) {
        const size_t a = size_t(d);
        (a < size_t(first - reduced.begin()) ? rows : a < size_t(last - reduced.begin()) ? count : inner) *= X.dim(d);
    }
    if (count == 0 || rows * inner == 0)
        return false;

    Tensor Y = Tensor::uninitialized(DType::F32, outShape);
    const float* x = X.values<float>().data();
    float* y = Y.mutableValues<float>().data();
    auto finish = [&](double v) {
        if (kind == Reduction::Mean)
            v /= double(count);
        else if (kind == Reduction::L2)
            v = std::sqrt(v);
        return float(v);
    };
    auto term = [kind](float v) {
        const double d = v;
        return kind == Reduction::SumSquare || kind == Reduction::L2 ? d * d : kind == Reduction::L1 ? std::fabs(d) : d;
    };
    const double init = kind == Reduction::Max   ? -std::numeric_limits<double>::infinity()
                        : kind == Reduction::Min ? std::numeric_limits<double>::infinity()
                                                 : 0.0;
    auto combine = [kind](double acc, double v) {
        return kind == Reduction::Max ? std::max(acc, v) : kind == Reduction::Min ? std::min(acc, v) : acc + v;
    };
    auto reduceRows = [&](int64_t r0, int64_t r1) {
        std::vector<double> acc(static_cast<size_t>(inner));
        for (int64_t r = r0; r < r1; ++r) {
            const float* row = x + r * count * inner;
            if (inner == 1 && summing) {
                constexpr int kLanes = 8;
                double partial[kLanes] = {};
                int64_t i = 0;
                for (; i + kLanes <= count; i += kLanes)
                    for (int k = 0; k < kLanes; ++k)
                        partial[k] += term(row[i + k]);
                double total = 0.0;
                for (; i < count; ++i)
                    total += term(row[i]);
                for (double p : partial)
                    total += p;
                y[r] = finish(total);
                continue;
            }
            std::fill(acc.begin(), acc.end(), init);
            for (int64_t c = 0; c < count; ++c) {
                const float* slice = row + c * inner;
                for (int64_t i = 0; i < inner; ++i)
                    acc[size_t(i)] = combine(acc[size_t(i)], summing ? term(slice[i]) : double(slice[i]));
            }
            for (int64_t i = 0; i < inner; ++i)
                y[r * inner + i] = finish(acc[size_t(i)]);
        }
    };
    if (X.numel() < kParallelReductionThreshold)
        reduceRows(0, rows);
    else
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, std::max<int64_t>(1, kParallelReductionThreshold /
                                                                                      std::max<int64_t>(1, count * inner))),
                          [&](const tbb::blocked_range<int64_t>& r) { reduceRows(r.begin(), r.end()); });
    ctx.setOutput(0, std::move(Y));
    return true;
}

void runReduction(KernelContext& ctx, Reduction kind)
{
    const Tensor& X = ctx.input(0);
    const int rank = X.rank();
    const bool axesFromInput = ctx.opset() >= (kind == Reduction::Sum ? 13 : 18);
    const std::vector<bool> reduced = reducedAxes(ctx, rank, axesFromInput);
    const bool keepdims = ctx.intAttribute("keepdims", 1) != 0;

    Shape outShape, outStrides(size_t(rank), 0);
    int64_t count = 1;
    for (int d = 0; d < rank; ++d)
        if (reduced[size_t(d)]) {
            count *= X.dim(d);
            if (keepdims)
                outShape.push_back(1);
        } else {
            outShape.push_back(X.dim(d));
        }
    // Output stride of every input axis (0 for the reduced ones).
    int64_t stride = 1;
    for (int d = rank; d-- > 0;)
        if (!reduced[size_t(d)]) {
            outStrides[size_t(d)] = stride;
            stride *= X.dim(d);
        }
    const int64_t outCount = stride;
    if (reduceConsecutiveAxes(ctx, kind, X, reduced, outShape))
        return;

    double init = 0.0;
    if (kind == Reduction::Max)
        init = -std::numeric_limits<double>::infinity();
    else if (kind == Reduction::Min)
        init = std::numeric_limits<double>::infinity();
    else if (kind == Reduction::Prod)
        init = 1.0;
    if (X.dtype() != DType::F32 && X.dtype() != DType::F64 && (kind == Reduction::Max || kind == Reduction::Min) &&
        count == 0)
        ctx.fail("an integer reduction over no elements has no value");
    std::vector<double> acc(size_t(outCount), init);
    const std::vector<double> x = valuesAsDouble(ctx, X);

    // LogSumExp subtracts each output's maximum first so that exp() cannot overflow.
    std::vector<double> shift(size_t(outCount), 0.0);
    std::vector<int64_t> idx(size_t(rank), 0);
    auto forEach = [&](auto&& f) {
        std::fill(idx.begin(), idx.end(), 0);
        int64_t o = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            f(size_t(o), x[i]);
            for (int d = rank; d-- > 0;) {
                o += outStrides[size_t(d)];
                if (++idx[size_t(d)] < X.dim(d))
                    break;
                o -= outStrides[size_t(d)] * X.dim(d);
                idx[size_t(d)] = 0;
            }
        }
    };
    if (kind == Reduction::LogSumExp) {
        std::fill(shift.begin(), shift.end(), -std::numeric_limits<double>::infinity());
        forEach([&](size_t o, double v) { shift[o] = std::max(shift[o], v); });
        for (double& s : shift)
            if (!std::isfinite(s))
                s = 0.0;
    }
    forEach([&](size_t o, double v) {
        switch (kind) {
        case Reduction::Mean:
        case Reduction::Sum:
        case Reduction::LogSum:
            acc[o] += v;
            break;
        case Reduction::Max:
            acc[o] = std::max(acc[o], v);
            break;
        case Reduction::Min:
            acc[o] = std::min(acc[o], v);
            break;
        case Reduction::Prod:
            acc[o] *= v;
            break;
        case Reduction::L1:
            acc[o] += std::fabs(v);
            break;
        case Reduction::L2:
        case Reduction::SumSquare:
            acc[o] += v * v;
            break;
        case Reduction::LogSumExp:
            acc[o] += std::exp(v - shift[o]);
            break;
        }
    });
    for (size_t o = 0; o < acc.size(); ++o) {
        if (kind == Reduction::Mean)
            acc[o] /= double(count);
        else if (kind == Reduction::L2)
            acc[o] = std::sqrt(acc[o]);
        else if (kind == Reduction::LogSum)
            acc[o] = std::log(acc[o]);
        else if (kind == Reduction::LogSumExp)
            acc[o] = std::log(acc[o]) + shift[o];
    }
    ctx.setOutput(0, tensorFromDoubles(X.dtype(), outShape, acc));
}

void runArgReduction(KernelContext& ctx, bool wantMax)
{
    const Tensor& X = ctx.input(0);
    const int rank = X.rank();
    int64_t axis = ctx.intAttribute("axis", 0);
    if (axis < -rank || axis >= rank)
        ctx.fail("axis " + std::to_string(axis) + " is out of range for shape " + shapeToString(X.shape()));
    if (axis < 0)
        axis += rank;
    const bool keepdims = ctx.intAttribute("keepdims", 1) != 0;
    const bool last = ctx.intAttribute("select_last_index", 0) != 0;
    const int64_t n = X.dim(int(axis));
    if (n == 0)
        ctx.fail("ArgMax/ArgMin over an empty axis has no answer");
    int64_t outer = 1, inner = 1;
    Shape outShape;
    for (int d = 0; d < rank; ++d) {
        if (d < axis)
            outer *= X.dim(d);
        else if (d > axis)
            inner *= X.dim(d);
        if (d != axis)
            outShape.push_back(X.dim(d));
        else if (keepdims)
            outShape.push_back(1);
    }
    const std::vector<double> x = valuesAsDouble(ctx, X);
    Tensor Y(DType::I64, outShape);
    auto y = Y.mutableValues<int64_t>();
    for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
            const double* row = x.data() + o * n * inner + i;
            int64_t best = 0;
            for (int64_t k = 1; k < n; ++k) {
                const double v = row[k * inner], b = row[best * inner];
                const bool better = wantMax ? (v > b || (last && v == b)) : (v < b || (last && v == b));
                if (better)
                    best = k;
            }
            y[size_t(o * inner + i)] = best;
        }
    ctx.setOutput(0, std::move(Y));
}

} // namespace

void reduceMean(KernelContext& ctx)
{
    runReduction(ctx, Reduction::Mean);
}
void reduceSum(KernelContext& ctx)
{
    runReduction(ctx, Reduction::Sum);
}
void reduceMax(KernelContext& ctx)
{
    runReduction(ctx, Reduction::Max);
}
void reduceMin(KernelContext& ctx)
{
    runReduction(ctx, Reduction::Min);
}
void reduceProd(KernelContext& ctx)
{
    runReduction(ctx, Reduction::Prod);
}
void reduceL1(KernelContext& ctx)
{
    runReduction(ctx, Reduction::L1);
}
void reduceL2(KernelContext& ctx)
{
    runReduction(ctx, Reduction::L2);
}
void reduceSumSquare(KernelContext& ctx)
{
    runReduction(ctx, Reduction::SumSquare);
}
void reduceLogSum(KernelContext& ctx)
{
    runReduction(ctx, Reduction::LogSum);
}
void reduceLogSumExp(KernelContext& ctx)
{
    runReduction(ctx, Reduction::LogSumExp);
}
void argMax(KernelContext& ctx)
{
    runArgReduction(ctx, true);
}
void argMin(KernelContext& ctx)
{
    runArgReduction(ctx, false);
}

} // namespace qs::ops
