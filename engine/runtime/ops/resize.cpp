// Resize as ONNX defines it, done one axis at a time: every output position of
// an axis maps to an input coordinate (the coordinate transformation mode),
// then to up to four input positions and weights (nearest, linear or cubic).
// Interpolating the last axis first and the first axis last gives exactly the
// nested 1-D interpolation of ONNX's reference, extrapolation included.

#include "runtime/ops/resize.h"

#include <array>
#include <cmath>
#include <tbb/parallel_for.h>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

struct ResizeSettings {
    std::string mode = "nearest";         // nearest, linear, cubic
    std::string transform = "half_pixel"; // coordinate_transformation_mode
    std::string nearestMode = "round_prefer_floor";
    float cubicA = -0.75f;
    bool excludeOutside = false;
    float extrapolation = 0.0f;
};

// Where output position `x` of an axis reads from, by up to four weighted taps.
struct Taps {
    std::array<int64_t, 4> index{};
    std::array<float, 4> weight{};
    int count = 0;
    bool extrapolate = false; // tf_crop_and_resize outside the input
};

// `outLen` is the resized length as the reference computes it: the given size,
// or in * scale unrounded when scales are given (align_corners depends on it).
double inputCoordinate(const KernelContext& ctx, const ResizeSettings& s, int64_t x, double scale, int64_t inLen,
                       double outLen, double roiStart, double roiEnd)
{
    const std::string& t = s.transform;
    if (t == "half_pixel")
        return (double(x) + 0.5) / scale - 0.5;
    if (t == "pytorch_half_pixel")
        return outLen > 1 ? (double(x) + 0.5) / scale - 0.5 : 0.0;
    if (t == "align_corners")
        return outLen == 1.0 ? 0.0 : double(x) * double(inLen - 1) / (outLen - 1.0);
    if (t == "asymmetric")
        return double(x) / scale;
    if (t == "tf_half_pixel_for_nn")
        return (double(x) + 0.5) / scale;
    if (t == "half_pixel_symmetric") {
        const double adjustment = double(outLen) / (scale * double(inLen));
        const double center = double(inLen) / 2.0;
        const double offset = center * (1.0 - adjustment);
        return offset + (double(x) + 0.5) / scale - 0.5;
    }
    if (t == "tf_crop_and_resize")
        return outLen > 1
                   ? roiStart * double(inLen - 1) + double(x) * (roiEnd - roiStart) * double(inLen - 1) / (outLen - 1.0)
                   : 0.5 * (roiStart + roiEnd) * double(inLen - 1);
    ctx.fail("coordinate_transformation_mode '" + t + "' is not supported");
}

int64_t nearestIndex(const ResizeSettings& s, double c, double scale)
{
    const std::string& m = s.nearestMode;
    double r;
    if (m == "floor")
        r = std::floor(c);
    else if (m == "ceil")
        r = std::ceil(c);
    else if (m == "round_prefer_ceil")
        r = std::floor(c + 0.5);
    else if (m == "simple") // opset 10 and Upsample: floor when enlarging, ceil when shrinking
        r = scale < 1.0 ? std::ceil(c) : std::floor(c);
    else // round_prefer_floor
        r = (c - std::floor(c)) == 0.5 ? std::floor(c) : std::round(c);
    return int64_t(r);
}

float cubicWeight(double d, double a)
{
    d = std::abs(d);
    if (d <= 1.0)
        return float(((a + 2.0) * d - (a + 3.0)) * d * d + 1.0);
    if (d < 2.0)
        return float(((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a);
    return 0.0f;
}

Taps tapsFor(const KernelContext& ctx, const ResizeSettings& s, int64_t x, double scale, int64_t inLen, int64_t outLen,
             double roiStart, double roiEnd)
{
    Taps taps;
    double resizedLen = scale * double(inLen);
    if (s.transform == "tf_crop_and_resize" || std::abs(resizedLen - double(outLen)) < 1e-9)
        resizedLen = double(outLen); // sizes were given (scale = out / in up to rounding)
    double c = inputCoordinate(ctx, s, x, scale, inLen, resizedLen, roiStart, roiEnd);
    if (s.transform == "tf_crop_and_resize" && (c < 0.0 || c > double(inLen - 1))) {
        taps.extrapolate = true;
        return taps;
    }
    auto clampIndex = [inLen](int64_t i) { return std::clamp<int64_t>(i, 0, inLen - 1); };
    if (s.mode == "nearest") {
        taps.count = 1;
        taps.index[0] = clampIndex(nearestIndex(s, c, scale));
        taps.weight[0] = 1.0f;
    } else if (s.mode == "linear") {
        c = std::clamp(c, 0.0, double(inLen - 1));
        const int64_t i0 = int64_t(std::floor(c));
        const double f = c - double(i0);
        taps.count = 2;
        taps.index = {i0, clampIndex(i0 + 1), 0, 0};
        taps.weight = {float(1.0 - f), float(f), 0.0f, 0.0f};
    } else if (s.mode == "cubic") {
        const int64_t i0 = int64_t(std::floor(c));
        const double f = c - double(i0);
        taps.count = 4;
        float total = 0.0f;
        for (int k = 0; k < 4; ++k) {
            const int64_t i = i0 - 1 + k;
            float w = cubicWeight(f - double(k - 1), s.cubicA);
            if (s.excludeOutside && (i < 0 || i >= inLen))
                w = 0.0f;
            taps.index[size_t(k)] = clampIndex(i);
            taps.weight[size_t(k)] = w;
            total += w;
        }
        if (s.excludeOutside && total != 0.0f)
            for (float& w : taps.weight)
                w /= total;
    } else {
        ctx.fail("mode '" + s.mode + "' is not supported (nearest, linear, cubic)");
    }
    return taps;
}

// Resizes axis `axis` of `x` (float32) to `outLen`.
Tensor resizeAxis(const KernelContext& ctx, const ResizeSettings& s, const Tensor& x, int axis, int64_t outLen,
                  double scale, double roiStart, double roiEnd)
{
    const int64_t inLen = x.dim(axis);
    Shape shape = x.shape();
    shape[size_t(axis)] = outLen;
    Tensor out(DType::F32, shape);
    if (out.numel() == 0)
        return out;
    if (inLen == 0)
        ctx.fail("cannot resize an empty axis to a non-empty one");
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < axis; ++a)
        outer *= x.dim(a);
    for (int a = axis + 1; a < x.rank(); ++a)
        inner *= x.dim(a);
    std::vector<Taps> taps(static_cast<size_t>(outLen));
    for (int64_t j = 0; j < outLen; ++j)
        taps[size_t(j)] = tapsFor(ctx, s, j, scale, inLen, outLen, roiStart, roiEnd);
    const float* src = x.values<float>().data();
    float* dst = out.mutableValues<float>().data();
    // One outer slice: each output row the weighted sum of its taps' rows,
    // from zero in tap order (the last axis, inner = 1, without a row loop).
    auto slice = [&](int64_t o) {
        ctx.checkCancelled();
        const float* in = src + o * inLen * inner;
        float* rows = dst + o * outLen * inner;
        if (inner == 1) {
            for (int64_t j = 0; j < outLen; ++j) {
                const Taps& t = taps[size_t(j)];
                float sum = 0.0f;
                for (int k = 0; k < t.count; ++k)
                    sum += t.weight[size_t(k)] * in[t.index[size_t(k)]];
                rows[j] = t.extrapolate ? s.extrapolation : sum;
            }
            return;
        }
        for (int64_t j = 0; j < outLen; ++j) {
            float* row = rows + j * inner;
            const Taps& t = taps[size_t(j)];
            if (t.extrapolate) {
                std::fill_n(row, inner, s.extrapolation);
                continue;
            }
            for (int k = 0; k < t.count; ++k) {
                const float w = t.weight[size_t(k)];
                const float* tapRow = in + t.index[size_t(k)] * inner;
                for (int64_t i = 0; i < inner; ++i)
                    row[i] += w * tapRow[i];
            }
        }
    };
    if (out.numel() < (int64_t(1) << 14)) { // less work than waking the workers
        for (int64_t o = 0; o < outer; ++o)
            slice(o);
    } else {
        tbb::parallel_for(int64_t(0), outer, slice);
    }
    return out;
}

std::vector<double> floatValues(const Tensor& t)
{
    const Tensor f = castTensor(t, DType::F64);
    auto v = f.values<double>();
    return {v.begin(), v.end()};
}

// Resizes `x` to the per-axis scales or sizes (one entry per axis of x).
void run(KernelContext& ctx, const ResizeSettings& s, const std::vector<double>& scalesIn,
         const std::vector<int64_t>& sizesIn, const std::vector<double>& roi)
{
    const Tensor& input = ctx.input(0);
    const int rank = input.rank();
    std::vector<double> scales(size_t(rank), 1.0);
    std::vector<int64_t> sizes(static_cast<size_t>(rank));
    for (int a = 0; a < rank; ++a) {
        const double roiStart = roi.empty() ? 0.0 : roi[size_t(a)];
        const double roiEnd = roi.empty() ? 1.0 : roi[size_t(a) + size_t(rank)];
        if (!sizesIn.empty()) {
            sizes[size_t(a)] = sizesIn[size_t(a)];
            scales[size_t(a)] = input.dim(a) ? double(sizes[size_t(a)]) / double(input.dim(a)) : 1.0;
        } else {
            scales[size_t(a)] = scalesIn[size_t(a)];
            if (scales[size_t(a)] <= 0.0)
                ctx.fail("scales must be positive");
            const double extent = s.transform == "tf_crop_and_resize" ? roiEnd - roiStart : 1.0;
            sizes[size_t(a)] = int64_t(std::floor(double(input.dim(a)) * extent * scales[size_t(a)]));
        }
    }
    const bool half = input.dtype() != DType::F32;
    Tensor x = half ? castTensor(input, DType::F32) : input;
    for (int a = rank; a-- > 0;) {
        const bool identity =
            sizes[size_t(a)] == input.dim(a) && scales[size_t(a)] == 1.0 && s.transform != "tf_crop_and_resize";
        if (identity)
            continue;
        x = resizeAxis(ctx, s, x, a, sizes[size_t(a)], scales[size_t(a)], roi.empty() ? 0.0 : roi[size_t(a)],
                       roi.empty() ? 1.0 : roi[size_t(a) + size_t(rank)]);
    }
    if (x.rawData() == input.rawData() && !half)
        x = input;
    ctx.setOutput(0, half ? castTensor(x, input.dtype()) : x);
}

} // namespace

void resize(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    const int rank = x.rank();
    ResizeSettings s;
    s.mode = ctx.stringAttribute("mode", "nearest");
    if (ctx.opset() < 11) {
        s.transform = "asymmetric";
        s.nearestMode = "simple";
        run(ctx, s, floatValues(ctx.input(1)), {}, {});
        return;
    }
    s.transform = ctx.stringAttribute("coordinate_transformation_mode", "half_pixel");
    s.nearestMode = ctx.stringAttribute("nearest_mode", "round_prefer_floor");
    s.cubicA = ctx.floatAttribute("cubic_coeff_a", -0.75f);
    s.excludeOutside = ctx.intAttribute("exclude_outside", 0) != 0;
    s.extrapolation = ctx.floatAttribute("extrapolation_value", 0.0f);
    if (ctx.intAttribute("antialias", 0) != 0)
        ctx.fail("antialias is not supported");
    const std::string policy = ctx.stringAttribute("keep_aspect_ratio_policy", "stretch");
    std::vector<int64_t> axes = ctx.intsAttribute("axes");
    if (axes.empty())
        for (int a = 0; a < rank; ++a)
            axes.push_back(a);
    for (int64_t& a : axes) {
        if (a < -rank || a >= rank)
            ctx.fail("axis " + std::to_string(a) + " is out of range");
        a = a < 0 ? a + rank : a;
    }
    std::vector<double> roi;
    if (const Tensor* r = ctx.optionalInput(1); r && r->numel() > 0) {
        const std::vector<double> given = floatValues(*r);
        if (given.size() != 2 * axes.size())
            ctx.fail("roi must hold 2 values per resized axis");
        roi.assign(2 * size_t(rank), 0.0);
        for (int a = 0; a < rank; ++a)
            roi[size_t(a + rank)] = 1.0;
        for (size_t i = 0; i < axes.size(); ++i) {
            roi[size_t(axes[i])] = given[i];
            roi[size_t(axes[i] + rank)] = given[i + axes.size()];
        }
    }
    const Tensor* scalesT = ctx.optionalInput(2);
    const Tensor* sizesT = ctx.optionalInput(3);
    if (scalesT && scalesT->numel() == 0)
        scalesT = nullptr;
    if (sizesT && sizesT->numel() == 0)
        sizesT = nullptr;
    if (bool(scalesT) == bool(sizesT))
        ctx.fail("exactly one of scales and sizes must be given");
    if (scalesT) {
        const std::vector<double> given = floatValues(*scalesT);
        if (given.size() != axes.size())
            ctx.fail("scales must hold one value per resized axis");
        std::vector<double> scales(size_t(rank), 1.0);
        for (size_t i = 0; i < axes.size(); ++i)
            scales[size_t(axes[i])] = given[i];
        run(ctx, s, scales, {}, roi);
        return;
    }
    const Tensor sizesI64 = castTensor(*sizesT, DType::I64);
    if (size_t(sizesI64.numel()) != axes.size())
        ctx.fail("sizes must hold one value per resized axis");
    std::vector<int64_t> sizes(x.shape().begin(), x.shape().end());
    for (size_t i = 0; i < axes.size(); ++i)
        sizes[size_t(axes[i])] = sizesI64.values<int64_t>()[i];
    if (policy != "stretch") {
        double scale = policy == "not_larger" ? 1e300 : 0.0;
        for (int64_t a : axes) {
            const double r = double(sizes[size_t(a)]) / double(x.dim(int(a)));
            scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
        }
        for (int64_t a : axes)
            sizes[size_t(a)] = int64_t(std::nearbyint(scale * double(x.dim(int(a)))));
        std::vector<double> scales(size_t(rank), 1.0);
        for (int64_t a : axes)
            scales[size_t(a)] = scale;
        run(ctx, s, scales, {}, roi); // the kept ratio, not the rounded sizes, maps coordinates
        return;
    }
    run(ctx, s, {}, sizes, roi);
}

void upsample(KernelContext& ctx)
{
    ResizeSettings s;
    s.mode = ctx.stringAttribute("mode", "nearest");
    s.transform = "asymmetric";
    s.nearestMode = "simple";
    std::vector<double> scales;
    if (ctx.opset() < 9) {
        for (float f : ctx.floatsAttribute("scales"))
            scales.push_back(f);
    } else {
        scales = floatValues(ctx.input(1));
    }
    if (scales.size() != size_t(ctx.input(0).rank()))
        ctx.fail("scales must hold one value per axis");
    run(ctx, s, scales, {}, {});
}

} // namespace qs::ops
