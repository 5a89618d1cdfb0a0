// The shape family. Most kernels here reduce to one strided gather: the output
// is walked in row-major order while the input is read with per-axis strides
// (Transpose permutes them, Slice scales them by steps, Expand zeroes them).
// Elements are moved as opaque words of their byte width, so every dtype works.

#include "runtime/ops/shape.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <vector>

#include "runtime/broadcast.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

template <class Body> void byElementWidth(size_t bytes, Body&& body)
{
    switch (bytes) {
    case 1:
        body.template operator()<uint8_t>();
        break;
    case 2:
        body.template operator()<uint16_t>();
        break;
    case 4:
        body.template operator()<uint32_t>();
        break;
    default:
        body.template operator()<uint64_t>();
        break;
    }
}

// dst (row-major, shape `out`) = src[base + sum(coord[a] * strides[a])].
// Axes that read on contiguously (axis a's stride is axis a + 1's extent times
// its stride) are merged first, so that rows are as long as they can be: a
// channel split of [8, 232, 12, 12] copies rows of 144 values, not 12. Large
// outputs are copied in parallel pieces of whole rows.
Tensor gatherStrided(const Tensor& src, const Shape& out, const Shape& strides, int64_t base)
{
    Tensor result = Tensor::uninitialized(src.dtype(), out); // every element is written below
    if (result.numel() == 0)
        return result;
    Shape extents, steps;
    for (size_t a = 0; a < out.size(); ++a) {
        if (out[a] == 1)
            continue; // (reads one place whatever its stride)
        if (!extents.empty() && steps.back() == out[a] * strides[a]) {
            extents.back() *= out[a];
            steps.back() = strides[a];
            continue;
        }
        extents.push_back(out[a]);
        steps.push_back(strides[a]);
    }
    if (extents.empty())
        extents = {1}, steps = {1};
    byElementWidth(dtypeSize(src.dtype()), [&]<class E>() {
        const E* in = static_cast<const E*>(src.rawData()) + base;
        E* dst = static_cast<E*>(result.mutableRawData());
        const size_t rank = extents.size();
        const int64_t inner = extents.back(), innerStride = steps.back();
        const int64_t rows = result.numel() / inner;
        auto copyRows = [&](int64_t r0, int64_t r1) {
            // Row r0's coordinates and offset, then stepped along.
            Shape coord(rank, 0);
            int64_t offset = 0;
            for (size_t a = rank - 1, rest = size_t(r0); a-- > 0;) {
                coord[a] = int64_t(rest % size_t(extents[a]));
                rest /= size_t(extents[a]);
                offset += coord[a] * steps[a];
            }
            for (int64_t r = r0; r < r1; ++r) {
                E* row = dst + r * inner;
                if (innerStride == 1)
                    std::memcpy(row, in + offset, size_t(inner) * sizeof(E));
                else
                    for (int64_t j = 0; j < inner; ++j)
                        row[j] = in[offset + j * innerStride];
                for (size_t a = rank - 1; a-- > 0;) {
                    offset += steps[a];
                    if (++coord[a] < extents[a])
                        break;
                    offset -= coord[a] * steps[a];
                    coord[a] = 0;
                }
            }
        };
        const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / inner);
        if (rows <= grain)
            copyRows(0, rows);
        else
            tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain),
                              [&](const tbb::blocked_range<int64_t>& r) { copyRows(r.begin(), r.end()); });
    });
    return result;
}

// The integer values of a 1-D (or scalar) int64/int32 tensor.
std::vector<int64_t> intValues(const KernelContext& ctx, const Tensor& t, const char* what)
{
    if (t.dtype() == DType::I64) {
        auto v = t.values<int64_t>();
        return {v.begin(), v.end()};
    }
    if (t.dtype() == DType::I32) {
        auto v = t.values<int32_t>();
        return {v.begin(), v.end()};
    }
    ctx.fail(std::string(what) + " must be int64 or int32, got " + std::string(dtypeName(t.dtype())));
}

int64_t normalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what = "axis")
{
    if (axis < -rank || axis >= rank)
        ctx.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return axis < 0 ? axis + rank : axis;
}

Tensor int64Vector(const std::vector<int64_t>& v)
{
    return Tensor::fromVector(DType::I64, {int64_t(v.size())}, v);
}

// Axes from the attribute (before `inputSinceOpset`) or from input 1.
std::optional<std::vector<int64_t>> axesArgument(const KernelContext& ctx, int inputSinceOpset, size_t inputIndex)
{
    if (ctx.opset() < inputSinceOpset)
        return ctx.optionalIntsAttribute("axes");
    if (const Tensor* t = ctx.optionalInput(inputIndex))
        return intValues(ctx, *t, "axes");
    return std::nullopt;
}

} // namespace

void reshape(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> target = ctx.opset() < 5 ? ctx.intsAttribute("shape") : intValues(ctx, ctx.input(1), "shape");
    const bool allowZero = ctx.intAttribute("allowzero", 0) != 0;
    int inferred = -1;
    int64_t known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == 0 && !allowZero) {
            if (i >= size_t(x.rank()))
                ctx.fail("shape has 0 at axis " + std::to_string(i) + " beyond the input's rank");
            target[i] = x.dim(int(i));
        }
        if (target[i] == -1) {
            if (inferred >= 0)
                ctx.fail("shape has more than one -1");
            inferred = int(i);
        } else if (target[i] < 0) {
            ctx.fail("shape has a negative dimension " + std::to_string(target[i]));
        } else {
            known *= target[i];
        }
    }
    if (inferred >= 0) {
        if (known == 0 || x.numel() % known != 0)
            ctx.fail("cannot infer -1 reshaping " + shapeToString(x.shape()) + " to " + shapeToString(target));
        target[size_t(inferred)] = x.numel() / known;
    }
    if (shapeElementCount(target) != x.numel())
        ctx.fail("cannot reshape " + shapeToString(x.shape()) + " to " + shapeToString(target));
    ctx.setOutput(0, x.reshaped(target));
}

void flatten(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t axis = ctx.intAttribute("axis", 1);
    const int64_t a = axis < 0 ? axis + x.rank() : axis;
    if (a < 0 || a > x.rank())
        ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
    int64_t outer = 1;
    for (int64_t i = 0; i < a; ++i)
        outer *= x.dim(int(i));
    ctx.setOutput(0, x.reshaped({outer, outer == 0 ? 0 : x.numel() / std::max<int64_t>(outer, 1)}));
}

void squeeze(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const auto axes = axesArgument(ctx, 13, 1);
    std::vector<bool> drop(size_t(x.rank()), false);
    if (axes) {
        for (int64_t axis : *axes) {
            const int64_t a = normalizeAxis(ctx, axis, x.rank());
            if (x.dim(int(a)) != 1)
                ctx.fail("cannot squeeze axis " + std::to_string(axis) + " of size " + std::to_string(x.dim(int(a))));
            drop[size_t(a)] = true;
        }
    } else {
        for (int a = 0; a < x.rank(); ++a)
            drop[size_t(a)] = x.dim(a) == 1;
    }
    Shape out;
    for (int a = 0; a < x.rank(); ++a)
        if (!drop[size_t(a)])
            out.push_back(x.dim(a));
    ctx.setOutput(0, x.reshaped(out));
}

void unsqueeze(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const auto axes = axesArgument(ctx, 13, 1);
    if (!axes)
        ctx.fail("axes are required");
    const int64_t rank = x.rank() + int64_t(axes->size());
    std::vector<bool> inserted(size_t(rank), false);
    for (int64_t axis : *axes) {
        const int64_t a = normalizeAxis(ctx, axis, rank);
        if (inserted[size_t(a)])
            ctx.fail("axis " + std::to_string(axis) + " is repeated");
        inserted[size_t(a)] = true;
    }
    Shape out;
    int next = 0;
    for (int64_t a = 0; a < rank; ++a)
        out.push_back(inserted[size_t(a)] ? 1 : x.dim(next++));
    ctx.setOutput(0, x.reshaped(out));
}

void transpose(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> perm = ctx.intsAttribute("perm");
    if (perm.empty()) {
        perm.resize(size_t(x.rank()));
        std::iota(perm.rbegin(), perm.rend(), 0);
    }
    if (perm.size() != size_t(x.rank()))
        ctx.fail("perm has " + std::to_string(perm.size()) + " axes, the input has rank " + std::to_string(x.rank()));
    const Shape inStrides = rowMajorStrides(x.shape());
    Shape out, strides;
    std::vector<bool> seen(perm.size(), false);
    for (int64_t p : perm) {
        const int64_t a = normalizeAxis(ctx, p, x.rank(), "perm axis");
        if (seen[size_t(a)])
            ctx.fail("perm repeats axis " + std::to_string(p));
        seen[size_t(a)] = true;
        out.push_back(x.dim(int(a)));
        strides.push_back(inStrides[size_t(a)]);
    }
    ctx.setOutput(0, gatherStrided(x, out, strides, 0));
}

void concat(KernelContext& ctx)
{
    const Tensor& first = ctx.input(0);
    const int64_t axis = normalizeAxis(ctx, ctx.requiredIntAttribute("axis"), first.rank());
    Shape out = first.shape();
    out[size_t(axis)] = 0;
    for (size_t i = 0; i < ctx.inputCount(); ++i) {
        const Tensor& t = ctx.input(i);
        bool ok = t.rank() == first.rank() && t.dtype() == first.dtype();
        for (int a = 0; ok && a < t.rank(); ++a)
            ok = a == axis || t.dim(a) == first.dim(a);
        if (!ok)
            ctx.fail("input " + std::to_string(i) + " " + shapeToString(t.shape()) + " does not match input 0 " +
                     shapeToString(first.shape()) + " outside axis " + std::to_string(axis));
        out[size_t(axis)] += t.dim(int(axis));
    }
    // The output the run allocated when producers of some inputs wrote
    // their slices of it already (Interpreter); their copies are skipped.
    // (Left unwritten at allocation: the inputs' rows cover every element.)
    const Tensor* assembled = ctx.assembledOutput();
    const std::span<const char> inPlace = ctx.inputsInPlace();
    if (assembled && (assembled->shape() != out || assembled->dtype() != first.dtype()))
        ctx.fail("the output allocated for it, " + shapeToString(assembled->shape()) +
                 ", is not the concatenation's " + shapeToString(out));
    Tensor result = assembled ? *assembled : Tensor::uninitialized(first.dtype(), out);
    const size_t elem = dtypeSize(first.dtype());
    int64_t outer = 1;
    for (int64_t a = 0; a < axis; ++a)
        outer *= out[size_t(a)];
    const int64_t outRow = outer == 0 ? 0 : result.numel() / outer;
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    // The copies, in pieces of at most kConcatPiece bytes; a large output's
    // pieces run in parallel (squeezenet's concats at batch 8, 4 MiB each,
    // were serial).
    struct Piece {
        std::byte* to;
        const std::byte* from;
        size_t bytes;
    };
    constexpr size_t kConcatPiece = size_t(1) << 16;
    std::vector<Piece> pieces;
    int64_t column = 0;
    for (size_t i = 0; i < ctx.inputCount(); ++i) {
        const Tensor& t = ctx.input(i);
        const int64_t row = outer == 0 ? 0 : t.numel() / outer;
        if (assembled && i < inPlace.size() && inPlace[i]) {
            column += row;
            continue;
        }
        const auto* src = static_cast<const std::byte*>(t.rawData());
        for (int64_t o = 0; o < outer && row > 0; ++o) {
            std::byte* to = dst + size_t(o * outRow + column) * elem;
            const std::byte* from = src + size_t(o * row) * elem;
            for (size_t done = 0, bytes = size_t(row) * elem; done < bytes; done += kConcatPiece)
                pieces.push_back({to + done, from + done, std::min(kConcatPiece, bytes - done)});
        }
        column += row;
    }
    auto copy = [&](size_t k) { std::memcpy(pieces[k].to, pieces[k].from, pieces[k].bytes); };
    if (result.nbytes() < 4 * kConcatPiece)
        for (size_t k = 0; k < pieces.size(); ++k)
            copy(k);
    else
        tbb::parallel_for(size_t(0), pieces.size(), copy);
    ctx.setOutput(0, std::move(result));
}

void split(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", 0), x.rank());
    const int64_t dim = x.dim(int(axis));
    std::vector<int64_t> sizes;
    if (ctx.opset() < 13)
        sizes = ctx.intsAttribute("split");
    else if (const Tensor* s = ctx.optionalInput(1))
        sizes = intValues(ctx, *s, "split");
    if (sizes.empty()) {
        const int64_t parts = ctx.opset() >= 18 && ctx.hasAttribute("num_outputs") ? ctx.intAttribute("num_outputs", 1)
                                                                                   : int64_t(ctx.outputCount());
        if (parts <= 0)
            ctx.fail("cannot split into " + std::to_string(parts) + " parts");
        const int64_t chunk = (dim + parts - 1) / parts; // the last part may be smaller (opset 18)
        if (ctx.opset() < 18 && dim % parts != 0)
            ctx.fail("axis of size " + std::to_string(dim) + " does not split evenly into " + std::to_string(parts));
        for (int64_t p = 0, left = dim; p < parts; ++p, left -= chunk)
            sizes.push_back(std::max<int64_t>(0, std::min(chunk, left)));
    }
    if (sizes.size() != ctx.outputCount() || std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
        ctx.fail("split sizes do not cover axis " + std::to_string(axis) + " of size " + std::to_string(dim) +
                 " with " + std::to_string(ctx.outputCount()) + " outputs");
    const Shape strides = rowMajorStrides(x.shape());
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
        Shape out = x.shape();
        out[size_t(axis)] = sizes[i];
        ctx.setOutput(i, gatherStrided(x, out, strides, start * strides[size_t(axis)]));
        start += sizes[i];
    }
}

void slice(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (ctx.opset() < 10) {
        starts = ctx.intsAttribute("starts");
        ends = ctx.intsAttribute("ends");
        axes = ctx.intsAttribute("axes");
    } else {
        starts = intValues(ctx, ctx.input(1), "starts");
        ends = intValues(ctx, ctx.input(2), "ends");
        if (const Tensor* a = ctx.optionalInput(3))
            axes = intValues(ctx, *a, "axes");
        if (const Tensor* s = ctx.optionalInput(4))
            steps = intValues(ctx, *s, "steps");
    }
    if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i)
            axes.push_back(int64_t(i));
    if (steps.empty())
        steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
        ctx.fail("starts, ends, axes and steps must have the same length");
    const Shape inStrides = rowMajorStrides(x.shape());
    Shape out = x.shape();
    Shape strides = inStrides;
    int64_t base = 0;
    std::vector<bool> seen(size_t(x.rank()), false);
    for (size_t i = 0; i < starts.size(); ++i) {
        const int64_t a = normalizeAxis(ctx, axes[i], x.rank());
        if (seen[size_t(a)])
            ctx.fail("axis " + std::to_string(axes[i]) + " is repeated");
        seen[size_t(a)] = true;
        const int64_t d = x.dim(int(a));
        const int64_t step = steps[i];
        if (step == 0)
            ctx.fail("step 0 on axis " + std::to_string(axes[i]));
        int64_t s = starts[i] < 0 ? starts[i] + d : starts[i];
        int64_t e = ends[i] < 0 ? ends[i] + d : ends[i];
        int64_t n = 0;
        if (step > 0) {
            s = std::clamp<int64_t>(s, 0, d);
            e = std::clamp<int64_t>(e, 0, d);
            n = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = std::clamp<int64_t>(s, -1, d - 1);
            e = std::clamp<int64_t>(e, -1, d - 1);
            n = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        out[size_t(a)] = n;
        if (n > 0)
            base += s * inStrides[size_t(a)];
        strides[size_t(a)] = inStrides[size_t(a)] * step;
    }
    ctx.setOutput(0, gatherStrided(x, out, strides, base));
}

void gather(KernelContext& ctx)
{
    const Tensor& data = ctx.input(0);
    const Tensor& indicesTensor = ctx.input(1);
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", 0), data.rank());
    const std::vector<int64_t> indices = intValues(ctx, indicesTensor, "indices");
    const int64_t dim = data.dim(int(axis));
    Shape out(data.shape().begin(), data.shape().begin() + axis);
    out.insert(out.end(), indicesTensor.shape().begin(), indicesTensor.shape().end());
    out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
    Tensor result(data.dtype(), out);
    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a)
        outer *= data.dim(int(a));
    for (int64_t a = axis + 1; a < data.rank(); ++a)
        inner *= data.dim(int(a));
    const size_t block = size_t(inner) * dtypeSize(data.dtype());
    const auto* src = static_cast<const std::byte*>(data.rawData());
    auto* dst = static_cast<std::byte*>(result.mutableRawData());
    for (size_t k = 0; k < indices.size(); ++k)
        if (indices[k] < -dim || indices[k] >= dim)
            ctx.fail("index " + std::to_string(indices[k]) + " is out of range for axis of size " +
                     std::to_string(dim));
    for (int64_t o = 0; o < outer; ++o)
        for (size_t k = 0; k < indices.size(); ++k) {
            const int64_t idx = indices[k] < 0 ? indices[k] + dim : indices[k];
            std::memcpy(dst + (size_t(o) * indices.size() + k) * block, src + size_t(o * dim + idx) * block, block);
        }
    ctx.setOutput(0, std::move(result));
}

void gatherElements(KernelContext& ctx)
{
    const Tensor& data = ctx.input(0);
    const Tensor& indicesTensor = ctx.input(1);
    const int64_t axis = normalizeAxis(ctx, ctx.intAttribute("axis", 0), data.rank());
    if (indicesTensor.rank() != data.rank())
        ctx.fail("indices must have the data's rank");
    const std::vector<int64_t> indices = intValues(ctx, indicesTensor, "indices");
    const Shape& out = indicesTensor.shape();
    const Shape strides = rowMajorStrides(data.shape());
    const int64_t dim = data.dim(int(axis));
    Tensor result(data.dtype(), out);
    byElementWidth(dtypeSize(data.dtype()), [&]<class E>() {
        const E* src = static_cast<const E*>(data.rawData());
        E* dst = static_cast<E*>(result.mutableRawData());
        Shape coord(out.size(), 0);
        for (int64_t i = 0; i < result.numel(); ++i) {
            int64_t offset = 0;
            for (size_t a = 0; a < out.size(); ++a) {
                int64_t c = coord[a];
                if (int64_t(a) == axis) {
                    c = indices[size_t(i)];
                    if (c < -dim || c >= dim)
                        ctx.fail("index " + std::to_string(c) + " is out of range for axis of size " +
                                 std::to_string(dim));
                    c = c < 0 ? c + dim : c;
                }
                offset += c * strides[a];
            }
            dst[i] = src[offset];
            for (size_t a = out.size(); a-- > 0;) {
                if (++coord[a] < out[a])
                    break;
                coord[a] = 0;
            }
        }
    });
    ctx.setOutput(0, std::move(result));
}

void expand(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const Shape target = intValues(ctx, ctx.input(1), "shape");
    const Shape out = broadcastShapes(x.shape(), target, ctx.describe());
    ctx.setOutput(0, gatherStrided(x, out, broadcastStrides(x.shape(), out), 0));
}

void tile(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> repeats = intValues(ctx, ctx.input(1), "repeats");
    if (repeats.size() != size_t(x.rank()))
        ctx.fail("repeats must have one entry per input axis");
    Tensor current = x;
    // One axis at a time: view as [outer, d, inner], copy the [d, inner] block r times.
    for (int a = 0; a < x.rank(); ++a) {
        if (repeats[size_t(a)] < 0)
            ctx.fail("repeats must not be negative");
        if (repeats[size_t(a)] == 1)
            continue;
        Shape out = current.shape();
        out[size_t(a)] *= repeats[size_t(a)];
        Tensor next(x.dtype(), out);
        int64_t outer = 1;
        for (int b = 0; b < a; ++b)
            outer *= out[size_t(b)];
        const size_t block = outer == 0 ? 0 : current.nbytes() / size_t(outer);
        const auto* src = static_cast<const std::byte*>(current.rawData());
        auto* dst = static_cast<std::byte*>(next.mutableRawData());
        for (int64_t o = 0; o < outer && block; ++o)
            for (int64_t r = 0; r < repeats[size_t(a)]; ++r)
                std::memcpy(dst + (size_t(o * repeats[size_t(a)] + r)) * block, src + size_t(o) * block, block);
        current = std::move(next);
    }
    ctx.setOutput(0, current);
}

void shape(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    auto clampAxis = [rank](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank); };
    const int64_t start = clampAxis(ctx.intAttribute("start", 0));
    const int64_t end = ctx.hasAttribute("end") ? clampAxis(ctx.intAttribute("end", rank)) : rank;
    std::vector<int64_t> dims;
    for (int64_t a = start; a < end; ++a)
        dims.push_back(x.dim(int(a)));
    ctx.setOutput(0, int64Vector(dims));
}

void size(KernelContext& ctx)
{
    ctx.setOutput(0, Tensor::fromVector(DType::I64, {}, std::vector<int64_t>{ctx.input(0).numel()}));
}

void constantOfShape(KernelContext& ctx)
{
    const Shape out = intValues(ctx, ctx.input(0), "shape");
    const std::optional<Tensor> value = ctx.tensorAttribute("value");
    if (value && value->numel() != 1)
        ctx.fail("attribute 'value' must hold one element");
    Tensor result(value ? value->dtype() : DType::F32, out);
    if (value) {
        const size_t elem = dtypeSize(value->dtype());
        auto* dst = static_cast<std::byte*>(result.mutableRawData());
        for (int64_t i = 0; i < result.numel(); ++i)
            std::memcpy(dst + size_t(i) * elem, value->rawData(), elem);
    }
    ctx.setOutput(0, std::move(result));
}

void range(KernelContext& ctx)
{
    const Tensor& start = ctx.input(0);
    const Tensor& limit = ctx.input(1);
    const Tensor& delta = ctx.input(2);
    if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
        ctx.fail("start, limit and delta must be scalars");
    ctx.setOutput(0, visitDType(
                         start.dtype(),
                         [&]<class T>() -> Tensor {
                             if constexpr (std::is_same_v<T, bool>) {
                                 ctx.fail("does not take bool");
                             } else {
                                 const T s = start.values<T>()[0], l = limit.values<T>()[0], d = delta.values<T>()[0];
                                 if (d == T(0))
                                     ctx.fail("delta is 0");
                                 const double count = std::ceil((double(l) - double(s)) / double(d));
                                 const int64_t n = std::max<int64_t>(0, int64_t(count));
                                 Tensor out(start.dtype(), {n});
                                 T* dst = out.mutableValues<T>().data();
                                 for (int64_t i = 0; i < n; ++i)
                                     dst[i] = T(s + T(i) * d);
                                 return out;
                             }
                         },
                         [&](const std::string& p) { ctx.fail(p); }));
}

void identity(KernelContext& ctx)
{
    ctx.setOutput(0, ctx.input(0));
}

void constant(KernelContext& ctx)
{
    if (auto t = ctx.tensorAttribute("value"))
        return ctx.setOutput(0, *t);
    if (ctx.hasAttribute("value_float"))
        return ctx.setOutput(
            0, Tensor::fromVector(DType::F32, {}, std::vector<float>{ctx.floatAttribute("value_float", 0)}));
    if (ctx.hasAttribute("value_floats")) {
        const auto v = ctx.floatsAttribute("value_floats");
        return ctx.setOutput(0, Tensor::fromVector(DType::F32, {int64_t(v.size())}, v));
    }
    if (ctx.hasAttribute("value_int"))
        return ctx.setOutput(
            0, Tensor::fromVector(DType::I64, {}, std::vector<int64_t>{ctx.intAttribute("value_int", 0)}));
    if (ctx.hasAttribute("value_ints"))
        return ctx.setOutput(0, int64Vector(ctx.intsAttribute("value_ints")));
    ctx.fail("needs one of the attributes value, value_float(s), value_int(s) (strings and sparse tensors are not "
             "supported)");
}

void cast(KernelContext& ctx)
{
    const int64_t to = ctx.requiredIntAttribute("to");
    const std::optional<DType> type = dtypeOfOnnxElementType(to);
    if (!type)
        ctx.fail("cannot cast to ONNX element type " + std::to_string(to) +
                 " (strings, float8 and int4 are not supported)");
    ctx.setOutput(0, castTensor(ctx.input(0), *type));
}

void castLike(KernelContext& ctx)
{
    ctx.setOutput(0, castTensor(ctx.input(0), ctx.input(1).dtype()));
}

namespace {

enum class PadMode { Constant, Reflect, Edge, Wrap };

// Where coordinate c (0 <= c < d: inside) of an axis of d elements reads from:
// c itself inside; outside, the mode's source, or -1 (the fill) in constant mode.
int64_t padSource(int64_t c, int64_t d, PadMode mode)
{
    if (c >= 0 && c < d)
        return c;
    switch (mode) {
    case PadMode::Constant:
        return -1;
    case PadMode::Edge:
        return std::clamp<int64_t>(c, 0, d - 1);
    case PadMode::Wrap:
        return ((c % d) + d) % d;
    case PadMode::Reflect: { // without repeating the edge
        const int64_t period = 2 * (d - 1);
        if (period == 0)
            return 0;
        c = ((c % period) + period) % period;
        return c >= d ? period - c : c;
    }
    }
    return -1;
}

} // namespace

void pad(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t rank = x.rank();
    const std::string mode = ctx.stringAttribute("mode", "constant");
    std::vector<int64_t> pads;
    Tensor fill;
    std::vector<int64_t> axes;
    if (ctx.opset() < 11) {
        pads = ctx.intsAttribute("pads");
        fill = castTensor(Tensor::fromVector(DType::F32, {}, std::vector<float>{ctx.floatAttribute("value", 0)}),
                          x.dtype());
    } else {
        pads = intValues(ctx, ctx.input(1), "pads");
        if (const Tensor* v = ctx.optionalInput(2); v && v->numel() > 0)
            fill = castTensor(v->reshaped({}), x.dtype());
        else
            fill = Tensor(x.dtype(), {});
        if (const Tensor* a = ctx.optionalInput(3))
            axes = intValues(ctx, *a, "axes");
    }
    if (axes.empty())
        for (int64_t a = 0; a < rank; ++a)
            axes.push_back(a);
    if (pads.size() != 2 * axes.size())
        ctx.fail("pads must hold 2 values per padded axis, got " + std::to_string(pads.size()));
    std::vector<int64_t> before(size_t(rank), 0), after(size_t(rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = normalizeAxis(ctx, axes[i], rank);
        before[size_t(a)] = pads[i];
        after[size_t(a)] = pads[i + axes.size()];
    }
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
        ctx.fail("mode must be constant, reflect, edge or wrap, got '" + mode + "'");
    Shape out(static_cast<size_t>(rank));
    for (int64_t a = 0; a < rank; ++a) {
        out[size_t(a)] = x.dim(int(a)) + before[size_t(a)] + after[size_t(a)];
        if (out[size_t(a)] < 0)
            ctx.fail("pads crop axis " + std::to_string(a) + " below size 0");
        if (mode != "constant" && x.dim(int(a)) == 0 && out[size_t(a)] > 0)
            ctx.fail("cannot " + mode + "-pad an empty axis");
        if (mode == "reflect" && (before[size_t(a)] >= x.dim(int(a)) || after[size_t(a)] >= x.dim(int(a))) &&
            (before[size_t(a)] > 0 || after[size_t(a)] > 0))
            ctx.fail("reflect padding must be smaller than the axis size");
    }
    const PadMode padMode = mode == "constant" ? PadMode::Constant
                            : mode == "edge"     ? PadMode::Edge
                            : mode == "wrap"     ? PadMode::Wrap
                                                 : PadMode::Reflect;
    Tensor result = Tensor::uninitialized(x.dtype(), out); // every element is written below
    if (result.numel() == 0) {
        ctx.setOutput(0, std::move(result));
        return;
    }
    if (rank == 0) { // nothing to pad: the value itself
        std::memcpy(result.mutableRawData(), x.rawData(), dtypeSize(x.dtype()));
        ctx.setOutput(0, std::move(result));
        return;
    }
    // Row by row along the last axis: each output row comes from one input row
    // (or is all fill, in constant mode, when an outer coordinate falls in the
    // padding); within it, the columns that map inside the input are one copy,
    // only the padded columns are mapped one by one. (Element by element, with
    // the mode compared as a string per padded element, Pad took a tenth of
    // densenet_small's run.)
    const Shape strides = rowMajorStrides(x.shape());
    const int64_t last = rank - 1, width = out[size_t(last)], d = x.dim(int(last)), lead = before[size_t(last)];
    const int64_t rows = result.numel() / width;
    const int64_t lo = std::clamp<int64_t>(lead, 0, width), hi = std::clamp<int64_t>(lead + d, lo, width);
    byElementWidth(dtypeSize(x.dtype()), [&]<class E>() {
        const E* src = static_cast<const E*>(x.rawData());
        E* dst = static_cast<E*>(result.mutableRawData());
        const E value = *static_cast<const E*>(fill.rawData());
        const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / width);
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain), [&](const tbb::blocked_range<int64_t>& r) {
            for (int64_t row = r.begin(); row < r.end(); ++row) {
                E* y = dst + row * width;
                // The source row: each outer coordinate mapped through the mode.
                int64_t offset = 0, rest = row;
                bool inside = true;
                for (int64_t a = last; a-- > 0;) {
                    const int64_t coordinate = rest % out[size_t(a)];
                    rest /= out[size_t(a)];
                    const int64_t c = padSource(coordinate - before[size_t(a)], x.dim(int(a)), padMode);
                    inside = inside && c >= 0;
                    offset += c * strides[size_t(a)];
                }
                if (!inside) {
                    std::fill(y, y + width, value);
                    continue;
                }
                const E* s = src + offset;
                for (int64_t j = 0; j < lo; ++j) {
                    const int64_t c = padSource(j - lead, d, padMode);
                    y[j] = c < 0 ? value : s[c];
                }
                std::copy(s + (lo - lead), s + (hi - lead), y + lo);
                for (int64_t j = hi; j < width; ++j) {
                    const int64_t c = padSource(j - lead, d, padMode);
                    y[j] = c < 0 ? value : s[c];
                }
            }
        });
    });
    ctx.setOutput(0, std::move(result));
}

void depthToSpace(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t b = ctx.requiredIntAttribute("blocksize");
    const std::string mode = ctx.stringAttribute("mode", "DCR");
    if (x.rank() != 4 || b <= 0 || x.dim(1) % (b * b) != 0)
        ctx.fail("needs a [N, C, H, W] input with C divisible by blocksize^2");
    const int64_t n = x.dim(0), c = x.dim(1) / (b * b), h = x.dim(2), w = x.dim(3);
    Tensor t;
    if (mode == "DCR") {
        t = x.reshaped({n, b, b, c, h, w});
        const Shape s = rowMajorStrides(t.shape()); // -> [n, c, h, b1, w, b2]
        t = gatherStrided(t, {n, c, h, b, w, b}, {s[0], s[3], s[4], s[1], s[5], s[2]}, 0);
    } else if (mode == "CRD") {
        t = x.reshaped({n, c, b, b, h, w});
        const Shape s = rowMajorStrides(t.shape());
        t = gatherStrided(t, {n, c, h, b, w, b}, {s[0], s[1], s[4], s[2], s[5], s[3]}, 0);
    } else {
        ctx.fail("mode must be DCR or CRD, got '" + mode + "'");
    }
    ctx.setOutput(0, t.reshaped({n, c, h * b, w * b}));
}

void spaceToDepth(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int64_t b = ctx.requiredIntAttribute("blocksize");
    if (x.rank() != 4 || b <= 0 || x.dim(2) % b != 0 || x.dim(3) % b != 0)
        ctx.fail("needs a [N, C, H, W] input with H and W divisible by blocksize");
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2) / b, w = x.dim(3) / b;
    const Tensor t = x.reshaped({n, c, h, b, w, b});
    const Shape s = rowMajorStrides(t.shape()); // -> [n, b1, b2, c, h, w]
    ctx.setOutput(
        0,
        gatherStrided(t, {n, b, b, c, h, w}, {s[0], s[3], s[5], s[1], s[2], s[4]}, 0).reshaped({n, c * b * b, h, w}));
}

void dropout(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    bool training = false;
    float ratio = ctx.opset() < 12 ? ctx.floatAttribute("ratio", 0.5f) : 0.5f;
    if (ctx.opset() >= 12) {
        if (const Tensor* r = ctx.optionalInput(1))
            ratio = castTensor(*r, DType::F32).values<float>()[0];
        if (const Tensor* t = ctx.optionalInput(2))
            training = castTensor(*t, DType::Bool).values<bool>()[0];
    }
    // Inference is the identity; training with ratio 0 is too. Random masks are not reproduced.
    if (training && ratio != 0.0f)
        ctx.fail("training-mode dropout (random masks) is not supported; the runtime does inference");
    ctx.setOutput(0, x);
    if (ctx.wantsOutput(1)) {
        Tensor mask(DType::Bool, x.shape());
        std::fill_n(mask.mutableValues<bool>().data(), size_t(mask.numel()), true);
        ctx.setOutput(1, std::move(mask));
    }
}

} // namespace qs::ops
