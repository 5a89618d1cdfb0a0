// The indexing family: selection and scatter by computed positions. Kernels
// move elements as opaque words of their byte width unless they compute on
// values (CumSum, TopK, reductions of ScatterElements/ScatterND).

#include "runtime/ops/indexing.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "runtime/dtype_dispatch.h"
#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

template <class Body> decltype(auto) visit(const KernelContext& ctx, DType t, Body&& body)
{
    return visitDType(t, std::forward<Body>(body), [&](const std::string& problem) { ctx.fail(problem); });
}

int64_t normalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank)
{
    if (axis < -rank || axis >= rank)
        ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> int64Values(const Tensor& t)
{
    const Tensor v = castTensor(t, DType::I64);
    auto s = v.values<int64_t>();
    return {s.begin(), s.end()};
}

int64_t scalarInt(const KernelContext& ctx, const Tensor& t, const char* what)
{
    if (t.numel() != 1)
        ctx.fail(std::string(what) + " must hold one value");
    return int64Values(t)[0];
}

// Three-way split of a shape around `axis`: elements before, along and after it.
struct AxisView {
    int64_t outer = 1, len = 1, inner = 1;
};

AxisView viewAround(const Shape& shape, int64_t axis)
{
    AxisView v;
    for (int64_t a = 0; a < int64_t(shape.size()); ++a)
        (a < axis ? v.outer : (a == axis ? v.len : v.inner)) *= shape[size_t(a)];
    return v;
}

template <class T> T combine(const KernelContext& ctx, const std::string& reduction, T old, T update)
{
    if (reduction == "none")
        return update;
    if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("reduction '" + reduction + "' needs numeric data");
    } else {
        if (reduction == "add")
            return T(old + update);
        if (reduction == "mul")
            return T(old * update);
        if (reduction == "max")
            return std::max(old, update);
        if (reduction == "min")
            return std::min(old, update);
    }
    ctx.fail("reduction must be none, add, mul, max or min, got '" + reduction + "'");
}

} // namespace

void trilu(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2)
        ctx.fail("needs a tensor of rank 2 or more");
    const int64_t k = ctx.hasInput(1) ? scalarInt(ctx, ctx.input(1), "k") : 0;
    const bool upper = ctx.intAttribute("upper", 1) != 0;
    const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
    Tensor out = x.clone();
    const size_t elem = dtypeSize(x.dtype());
    auto* p = static_cast<std::byte*>(out.mutableRawData());
    const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    for (int64_t m = 0; m < matrices; ++m)
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
                if (upper ? j - i < k : j - i > k)
                    std::memset(p + size_t((m * rows + i) * cols + j) * elem, 0, elem);
    ctx.setOutput(0, std::move(out));
}

void cumSum(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t axis = normalizeAxis(ctx, scalarInt(ctx, ctx.input(1), "axis"), x.rank());
    const bool exclusive = ctx.intAttribute("exclusive", 0) != 0;
    const bool reverse = ctx.intAttribute("reverse", 0) != 0;
    const AxisView v = viewAround(x.shape(), axis);
    ctx.setOutput(0, visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
                      if constexpr (std::is_same_v<T, bool>) {
                          ctx.fail("needs numeric input");
                      } else {
                          Tensor out(x.dtype(), x.shape());
                          const T* src = x.values<T>().data();
                          T* dst = out.mutableValues<T>().data();
                          for (int64_t o = 0; o < v.outer; ++o)
                              for (int64_t i = 0; i < v.inner; ++i) {
                                  T acc = T(0);
                                  for (int64_t s = 0; s < v.len; ++s) {
                                      const int64_t j = reverse ? v.len - 1 - s : s;
                                      const int64_t at = (o * v.len + j) * v.inner + i;
                                      if (exclusive) {
                                          dst[at] = acc;
                                          acc = T(acc + src[at]);
                                      } else {
                                          acc = T(acc + src[at]);
                                          dst[at] = acc;
                                      }
                                  }
                              }
                          return out;
                      }
                  }));
}

void oneHot(KernelContext& ctx)
{
    const Tensor& indices = ctx.input(0);
    const int64_t depth = int64_t(castTensor(ctx.input(1), DType::F64).values<double>()[0]);
    const Tensor& values = ctx.input(2);
    if (values.numel() != 2)
        ctx.fail("values must hold [off, on]");
    if (depth <= 0)
        ctx.fail("depth must be positive");
    const int64_t rank = indices.rank() + 1;
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", -1), rank);
    Shape out = indices.shape();
    out.insert(out.begin() + axis, depth);
    const std::vector<int64_t> idx = int64Values(indices);
    const AxisView v = viewAround(out, axis);
    Tensor result(values.dtype(), out);
    const size_t elem = dtypeSize(values.dtype());
    const auto* off = static_cast<const std::byte*>(values.rawData());
    const auto* on = off + elem;
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    for (int64_t i = 0; i < result.numel(); ++i)
        std::memcpy(dst + size_t(i) * elem, off, elem);
    for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t i = 0; i < v.inner; ++i) {
            int64_t d = idx[size_t(o * v.inner + i)];
            d = d < 0 ? d + depth : d;
            if (d >= 0 && d < depth)
                std::memcpy(dst + size_t((o * depth + d) * v.inner + i) * elem, on, elem);
        }
    ctx.setOutput(0, std::move(result));
}

void nonZero(KernelContext& ctx)
{
    const Tensor x = castTensor(ctx.input(0), DType::F64);
    const auto v = x.values<double>();
    const Shape strides = rowMajorStrides(x.shape());
    std::vector<int64_t> hits;
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i] != 0.0)
            hits.push_back(int64_t(i));
    Tensor out(DType::I64, {x.rank(), int64_t(hits.size())});
    int64_t* dst = out.mutableValues<int64_t>().data();
    for (int a = 0; a < x.rank(); ++a)
        for (size_t h = 0; h < hits.size(); ++h)
            dst[size_t(a) * hits.size() + h] = (hits[h] / strides[size_t(a)]) % x.dim(a);
    ctx.setOutput(0, std::move(out));
}

void compress(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> cond = int64Values(ctx.input(1));
    const Tensor data = ctx.hasAttribute("axis") ? x : x.reshaped({x.numel()});
    const int64_t axis = ctx.hasAttribute("axis") ? normalizeAxis(ctx, ctx.intAttribute("axis", 0), x.rank()) : 0;
    const AxisView v = viewAround(data.shape(), axis);
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < std::min<int64_t>(v.len, int64_t(cond.size())); ++i)
        if (cond[size_t(i)])
            keep.push_back(i);
    Shape out = data.shape();
    out[size_t(axis)] = int64_t(keep.size());
    Tensor result(x.dtype(), out);
    const size_t block = size_t(v.inner) * dtypeSize(x.dtype());
    const auto* src = static_cast<const std::byte*>(data.rawData());
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    for (int64_t o = 0; o < v.outer; ++o)
        for (size_t k = 0; k < keep.size(); ++k)
            std::memcpy(dst + (size_t(o) * keep.size() + k) * block, src + size_t(o * v.len + keep[k]) * block, block);
    ctx.setOutput(0, std::move(result));
}

void eyeLike(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2)
        ctx.fail("needs a 2-D input");
    DType type = x.dtype();
    if (ctx.hasAttribute("dtype")) {
        const int64_t code = ctx.intAttribute("dtype", 1);
        const std::optional<DType> t = dtypeOfOnnxElementType(code);
        if (!t)
            ctx.fail("dtype " + std::to_string(code) + " is not supported");
        type = *t;
    }
    const int64_t k = ctx.intAttribute("k", 0);
    Tensor ones(DType::F64, x.shape());
    double* p = ones.mutableValues<double>().data();
    for (int64_t i = 0; i < x.dim(0); ++i)
        if (i + k >= 0 && i + k < x.dim(1))
            p[i * x.dim(1) + i + k] = 1.0;
    ctx.setOutput(0, castTensor(ones, type));
}

void gatherND(KernelContext& ctx)
{
    const Tensor& data = ctx.input(0);
    const Tensor& indicesT = ctx.input(1);
    const int64_t b = ctx.intAttribute("batch_dims", 0);
    const int64_t last = indicesT.dim(indicesT.rank() - 1);
    if (b < 0 || b + last > data.rank() || b >= indicesT.rank())
        ctx.fail("indices' last dimension and batch_dims do not fit the data's rank");
    const std::vector<int64_t> idx = int64Values(indicesT);
    Shape out(indicesT.shape().begin(), indicesT.shape().end() - 1);
    out.insert(out.end(), data.shape().begin() + b + last, data.shape().end());
    int64_t batch = 1, slice = 1;
    for (int64_t a = 0; a < b; ++a)
        batch *= data.dim(int(a));
    for (int64_t a = b + last; a < data.rank(); ++a)
        slice *= data.dim(int(a));
    const Shape strides = rowMajorStrides(data.shape());
    const int64_t batchStride = b > 0 ? strides[size_t(b - 1)] : data.numel();
    const int64_t tuples = int64_t(idx.size()) / std::max<int64_t>(last, 1) / std::max<int64_t>(batch, 1);
    Tensor result(data.dtype(), out);
    const size_t elem = dtypeSize(data.dtype());
    const auto* src = static_cast<const std::byte*>(data.rawData());
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t t = 0; t < tuples; ++t) {
            int64_t offset = bi * batchStride;
            for (int64_t j = 0; j < last; ++j) {
                const int64_t d = data.dim(int(b + j));
                int64_t i = idx[size_t((bi * tuples + t) * last + j)];
                if (i < -d || i >= d)
                    ctx.fail("index " + std::to_string(i) + " is out of range for a dimension of size " +
                             std::to_string(d));
                offset += (i < 0 ? i + d : i) * strides[size_t(b + j)];
            }
            std::memcpy(dst + size_t((bi * tuples + t) * slice) * elem, src + size_t(offset) * elem,
                        size_t(slice) * elem);
        }
    ctx.setOutput(0, std::move(result));
}

void scatterElements(KernelContext& ctx)
{
    const Tensor& data = ctx.input(0);
    const Tensor& indicesT = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", 0), data.rank());
    const std::string reduction = ctx.stringAttribute("reduction", "none");
    if (indicesT.shape() != updates.shape() || indicesT.rank() != data.rank())
        ctx.fail("indices and updates must have one shape, of the data's rank");
    const std::vector<int64_t> idx = int64Values(indicesT);
    const Shape strides = rowMajorStrides(data.shape());
    const Shape& ishape = indicesT.shape();
    Tensor out = data.clone();
    visit(ctx, data.dtype(), [&]<class T>() {
        T* dst = out.mutableValues<T>().data();
        const T* up = updates.values<T>().data();
        Shape coord(ishape.size(), 0);
        for (int64_t i = 0; i < updates.numel(); ++i) {
            int64_t offset = 0;
            for (size_t a = 0; a < ishape.size(); ++a) {
                int64_t c = coord[a];
                if (int64_t(a) == axis) {
                    const int64_t d = data.dim(int(a));
                    c = idx[size_t(i)];
                    if (c < -d || c >= d)
                        ctx.fail("index " + std::to_string(c) + " is out of range for an axis of size " +
                                 std::to_string(d));
                    c = c < 0 ? c + d : c;
                }
                offset += c * strides[a];
            }
            dst[offset] = combine<T>(ctx, reduction, dst[offset], up[i]);
            for (size_t a = ishape.size(); a-- > 0;) {
                if (++coord[a] < ishape[a])
                    break;
                coord[a] = 0;
            }
        }
    });
    ctx.setOutput(0, std::move(out));
}

void scatterND(KernelContext& ctx)
{
    const Tensor& data = ctx.input(0);
    const Tensor& indicesT = ctx.input(1);
    const Tensor& updates = ctx.input(2);
    const std::string reduction = ctx.stringAttribute("reduction", "none");
    const int64_t last = indicesT.dim(indicesT.rank() - 1);
    if (last > data.rank())
        ctx.fail("indices' last dimension exceeds the data's rank");
    const std::vector<int64_t> idx = int64Values(indicesT);
    const Shape strides = rowMajorStrides(data.shape());
    int64_t slice = 1;
    for (int64_t a = last; a < data.rank(); ++a)
        slice *= data.dim(int(a));
    const int64_t tuples = last ? int64_t(idx.size()) / last : 0;
    if (updates.numel() != tuples * slice)
        ctx.fail("updates do not match indices and data");
    Tensor out = data.clone();
    visit(ctx, data.dtype(), [&]<class T>() {
        T* dst = out.mutableValues<T>().data();
        const T* up = updates.values<T>().data();
        for (int64_t t = 0; t < tuples; ++t) {
            int64_t offset = 0;
            for (int64_t j = 0; j < last; ++j) {
                const int64_t d = data.dim(int(j));
                const int64_t i = idx[size_t(t * last + j)];
                if (i < -d || i >= d)
                    ctx.fail("index " + std::to_string(i) + " is out of range for a dimension of size " +
                             std::to_string(d));
                offset += (i < 0 ? i + d : i) * strides[size_t(j)];
            }
            for (int64_t s = 0; s < slice; ++s)
                dst[offset + s] = combine<T>(ctx, reduction, dst[offset + s], up[t * slice + s]);
        }
    });
    ctx.setOutput(0, std::move(out));
}

void topK(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t k = ctx.opset() < 10 ? ctx.requiredIntAttribute("k") : scalarInt(ctx, ctx.input(1), "K");
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", -1), x.rank());
    const bool largest = ctx.intAttribute("largest", 1) != 0;
    const AxisView v = viewAround(x.shape(), axis);
    if (k < 0 || k > v.len)
        ctx.fail("K " + std::to_string(k) + " is out of range for an axis of size " + std::to_string(v.len));
    Shape out = x.shape();
    out[size_t(axis)] = k;
    Tensor indices(DType::I64, out);
    int64_t* pi = indices.mutableValues<int64_t>().data();
    Tensor values = visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
        Tensor r(x.dtype(), out);
        const T* src = x.values<T>().data();
        T* dst = r.mutableValues<T>().data();
        std::vector<int64_t> order(size_t(v.len));
        for (int64_t o = 0; o < v.outer; ++o)
            for (int64_t i = 0; i < v.inner; ++i) {
                auto at = [&](int64_t j) { return src[(o * v.len + j) * v.inner + i]; };
                std::iota(order.begin(), order.end(), 0);
                // Ties keep the lower index first, as ONNX specifies.
                std::stable_sort(order.begin(), order.end(),
                                 [&](int64_t a, int64_t b) { return largest ? at(b) < at(a) : at(a) < at(b); });
                for (int64_t j = 0; j < k; ++j) {
                    dst[(o * k + j) * v.inner + i] = at(order[size_t(j)]);
                    pi[(o * k + j) * v.inner + i] = order[size_t(j)];
                }
            }
        return r;
    });
    ctx.setOutput(0, std::move(values));
    ctx.setOutput(1, std::move(indices));
}

void reverseSequence(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> lens = int64Values(ctx.input(1));
    const int64_t timeAxis = ctx.intAttribute("time_axis", 0);
    const int64_t batchAxis = ctx.intAttribute("batch_axis", 1);
    if (x.rank() < 2 || (timeAxis != 0 && timeAxis != 1) || (batchAxis != 0 && batchAxis != 1) || timeAxis == batchAxis)
        ctx.fail("needs rank >= 2 and time_axis, batch_axis being 0 and 1");
    if (int64_t(lens.size()) != x.dim(int(batchAxis)))
        ctx.fail("sequence_lens must hold one length per batch entry");
    const Shape strides = rowMajorStrides(x.shape());
    const int64_t steps = x.dim(int(timeAxis));
    const size_t block = size_t(strides[1]) * dtypeSize(x.dtype()); // everything after axes 0 and 1
    Tensor out = x.clone();
    const auto* src = static_cast<const std::byte*>(x.rawData());
    auto* dst = static_cast<std::byte*>(out.mutableRawData());
    for (int64_t b = 0; b < int64_t(lens.size()); ++b) {
        if (lens[size_t(b)] < 0 || lens[size_t(b)] > steps)
            ctx.fail("sequence length " + std::to_string(lens[size_t(b)]) + " is out of range");
        for (int64_t t = 0; t < lens[size_t(b)]; ++t) {
            const int64_t from = t, to = lens[size_t(b)] - 1 - t;
            auto offset = [&](int64_t time) {
                return size_t(
                           (timeAxis == 0 ? time * strides[0] + b * strides[1] : b * strides[0] + time * strides[1])) *
                       dtypeSize(x.dtype());
            };
            std::memcpy(dst + offset(to), src + offset(from), block);
        }
    }
    ctx.setOutput(0, std::move(out));
}

void unique(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const bool sorted = ctx.intAttribute("sorted", 1) != 0;
    const bool hasAxis = ctx.hasAttribute("axis");
    const Tensor data = hasAxis ? x : x.reshaped({x.numel()});
    const int64_t axis = hasAxis ? normalizeAxis(ctx, ctx.intAttribute("axis", 0), x.rank()) : 0;
    const AxisView v = viewAround(data.shape(), axis);
    // Slices along `axis` compared as tuples of doubles (exact for every supported type but 64-bit integers
    // beyond 2^53, which compare by their nearest double).
    const Tensor values = castTensor(data, DType::F64);
    const double* p = values.values<double>().data();
    auto slice = [&](int64_t j) {
        std::vector<double> s;
        s.reserve(size_t(v.outer * v.inner));
        for (int64_t o = 0; o < v.outer; ++o)
            for (int64_t i = 0; i < v.inner; ++i)
                s.push_back(p[(o * v.len + j) * v.inner + i]);
        return s;
    };
    std::vector<std::vector<double>> slices;
    for (int64_t j = 0; j < v.len; ++j)
        slices.push_back(slice(j));
    std::vector<int64_t> firstOf; // index of each unique slice's first occurrence, in order of appearance
    std::vector<int64_t> inverse(size_t(v.len));
    std::map<std::vector<double>, int64_t> seen;
    for (int64_t j = 0; j < v.len; ++j) {
        auto [it, inserted] = seen.emplace(slices[size_t(j)], int64_t(firstOf.size()));
        if (inserted)
            firstOf.push_back(j);
        inverse[size_t(j)] = it->second;
    }
    std::vector<int64_t> order(firstOf.size());
    std::iota(order.begin(), order.end(), 0);
    if (sorted)
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return slices[size_t(firstOf[size_t(a)])] < slices[size_t(firstOf[size_t(b)])];
        });
    std::vector<int64_t> rank(order.size());
    for (size_t r = 0; r < order.size(); ++r)
        rank[size_t(order[r])] = int64_t(r);
    std::vector<int64_t> indices, counts(order.size(), 0), inv;
    for (int64_t u : order)
        indices.push_back(firstOf[size_t(u)]);
    for (int64_t j = 0; j < v.len; ++j) {
        inv.push_back(rank[size_t(inverse[size_t(j)])]);
        ++counts[size_t(inv.back())];
    }
    Shape outShape = data.shape();
    outShape[size_t(axis)] = int64_t(indices.size());
    Tensor y(x.dtype(), outShape);
    const size_t block = size_t(v.inner) * dtypeSize(x.dtype());
    const auto* src = static_cast<const std::byte*>(data.rawData());
    auto* dst = static_cast<std::byte*>(y.mutableRawData());
    for (int64_t o = 0; o < v.outer; ++o)
        for (size_t k = 0; k < indices.size(); ++k)
            std::memcpy(dst + (size_t(o) * indices.size() + k) * block, src + size_t(o * v.len + indices[k]) * block,
                        block);
    ctx.setOutput(0, std::move(y));
    const int64_t n = int64_t(indices.size());
    ctx.setOutput(1, Tensor::fromVector(DType::I64, {n}, indices));
    ctx.setOutput(2, Tensor::fromVector(DType::I64, {v.len}, inv));
    ctx.setOutput(3, Tensor::fromVector(DType::I64, {n}, counts));
}

} // namespace qs::ops
