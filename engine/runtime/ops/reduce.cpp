#include "runtime/ops/reduce.h"

#include <cmath>
#include <limits>

namespace qs::ops {

namespace {

enum class Reduction { Mean, Sum, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

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
