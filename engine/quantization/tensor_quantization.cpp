#include "quantization/tensor_quantization.h"

#include <algorithm>
#include <cfloat>

#include "calib/calibrate.h"
#include "calib/compatibility.h"
#include "core/error.h"
#include "core/half.h"
#include "numerics/qtype.h"
#include "quant/gguf_quantization.h"
#include "quant/microscaling.h"
#include "quant/palettization.h"

namespace qs {

namespace {

TensorQuantization microscalingQuantization(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName)
{
    const QuantTypeInfo& info = qtypeInfo(spec.qtype);
    TensorQuantization q;
    q.params = microscalingParams(x, spec.qtype, -1, tensorName);
    const float elementMax = qtypeInfo(info.element).maxFinite;
    q.ranges.reserve(q.params.scales.size());
    for (float s : q.params.scales)
        q.ranges.push_back({-s * elementMax, s * elementMax});
    q.saturation = q.ranges;
    return q;
}

// The GGUF block formats: params from the block encoder itself; per block the
// data's own range (its reference quantizer fits every block to it, so no value
// is counted as saturating).
TensorQuantization ggufQuantization(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName)
{
    TensorQuantization q;
    q.params = ggufBlockParams(x, spec.qtype, tensorName);
    // Each block's range, read in place (bf16/fp16 widened an element at a time).
    const size_t block = size_t(qtypeInfo(spec.qtype).blockSize);
    auto valueAt = [&x](size_t i) {
        switch (x.dtype()) {
        case DType::BF16: return bf16ToFloat(static_cast<const uint16_t*>(x.rawData())[i]);
        case DType::F16: return fp16ToFloat(static_cast<const uint16_t*>(x.rawData())[i]);
        default: return x.values<float>()[i];
        }
    };
    q.ranges.assign(q.params.scales.size(), Range{0.f, 0.f});
    for (size_t g = 0; g < q.ranges.size(); ++g)
        for (size_t i = g * block; i < (g + 1) * block; ++i) {
            const float v = valueAt(i);
            q.ranges[g].min = std::min(q.ranges[g].min, v);
            q.ranges[g].max = std::max(q.ranges[g].max, v);
        }
    q.saturation = q.ranges;
    return q;
}

TensorQuantization lutQuantization(const Tensor& x, const QuantizationSpec& spec, std::string_view tensorName,
                                   const CancellationToken& cancel)
{
    TensorQuantization q;
    q.params = lutParams(x, spec.qtype, layoutFor(x.shape(), spec), tensorName, cancel);
    const size_t k = size_t(1) << qtypeInfo(spec.qtype).bits;
    const size_t groups = q.params.scales.size();
    for (size_t g = 0; g < groups; ++g)
        q.ranges.push_back({q.params.lut[g * k], q.params.lut[g * k + k - 1]});
    q.saturation.assign(groups, Range{-FLT_MAX, FLT_MAX});
    return q;
}

} // namespace

BlockLayout layoutFor(const Shape& shape, const QuantizationSpec& spec)
{
    if (spec.granularity == Granularity::PerTensor) {
        if (spec.tileSize)
            throw Error("a tile size needs per_channel granularity (tiles are cut within each channel)");
        return BlockLayout::perTensor(shape);
    }
    const int rank = int(shape.size());
    const int axis = normalizeAxis(spec.axis, rank, "channel axis");
    if (!spec.tileSize)
        return BlockLayout::perChannel(shape, axis);
    if (axis == rank - 1)
        throw Error("tiles split the last axis, so the channel axis must be another one (got axis " +
                    std::to_string(spec.axis) + " of shape " + shapeToString(shape) + ")");
    const int64_t tile = resolveTileSize(*spec.tileSize, shape.back());
    return BlockLayout::tiled(shape, axis, rank - 1, tile);
}

TensorQuantization computeQuantization(const Tensor& input, const QuantizationSpec& spec, std::string_view tensorName,
                                       const CancellationToken& cancel)
{
    const Tensor x = input.dtype() == DType::F32 || input.dtype() == DType::F16 || input.dtype() == DType::BF16
                         ? input
                         : input.toFloat32();
    const MethodCompatibility compatibility = methodCompatibility(spec.qtype, spec.method, spec.symmetric);
    if (!compatibility)
        throw Error("tensor '" + std::string(tensorName) + "': " + compatibility.reason);
    if (isMicroscaling(spec.qtype))
        return microscalingQuantization(x, spec, tensorName);
    if (isGgufBlock(spec.qtype))
        return ggufQuantization(x, spec, tensorName);
    if (isLut(spec.qtype))
        return lutQuantization(x, spec, tensorName, cancel);

    const CalibrationTarget target{spec.qtype, spec.options, spec.symmetric};
    const bool symmetric = compatibility.symmetric;
    const QuantTypeInfo& info = qtypeInfo(spec.qtype);

    const Tensor xf = x.toFloat32();
    const BlockLayout layout = layoutFor(xf.shape(), spec);
    TensorQuantization q;
    CalibrationReport report;
    q.ranges = calibrateRanges(xf.values<float>(), layout, spec.method, target, tensorName, &report);
    q.params = quantParamsFromRanges(spec.qtype, layout, q.ranges, symmetric, spec.options, tensorName);
    // Where the quantizer saturates under the scales actually used (pow2 and fp16
    // restrictions, narrow range and clamped zero points included).
    q.saturation = saturationRanges(q.params);
    q.note = report.note;
    // The calibrated range as the scale reads it: symmetric ±absmax ([0, absmax] for
    // unsigned types); asymmetric the calibrated range widened to include 0.
    const bool isUnsigned = info.kind == QKind::Integer && !info.isSigned;
    for (Range& r : q.ranges) {
        const float a = std::max(-r.min, r.max);
        r = symmetric ? Range{isUnsigned ? 0.f : -a, a} : Range{std::min(r.min, 0.f), std::max(r.max, 0.f)};
    }
    return q;
}

} // namespace qs
