#include "cli/quantization_options.h"

#include "core/error.h"
#include "io/npy.h"
#include "numerics/qtype.h"

namespace qs::cli {

std::vector<OptionSpec> layoutOptions()
{
    return {
        {"--qtype", "Q", "quantized type: " + qtypeNameList(), {}, true},
        {"--granularity",
         "G",
         "which elements share a scale, default per_channel:",
         {"per_tensor", "per_channel", "tile"},
         false},
        {"--axis", "A", "channel axis for per_channel and tile; negative counts from the end (default 0)", {}, false},
        {"--tile", "T", "tile length along the last axis for tile (default 128); T < 1 means 1/T tiles", {}, false},
    };
}

std::string layoutNotes()
{
    return "Granularity: per_tensor uses one scale; per_channel one per index of --axis; tile is per-channel\n"
           "along --axis and splits the last axis (the contraction axis of an [out, in] weight) into tiles of\n"
           "--tile elements. mxfp8, mxfp4 and nvfp4 compute their own block scales (blocks of 32, 32 and 16\n"
           "along the last axis) and take no --granularity, --axis or --tile; so do the GGUF block formats\n"
           "q8_0, q4_0, q4_1, q5_0, q5_1 (blocks of 32) and q4_k, q5_k, q6_k (256), encoded as llama.cpp's\n"
           "reference quantizers do along the last axis, whose length must be a multiple of the block.\n"
           "lut1 ... lut8 find a table of 2^n float32 entries per group (the granularity above) by k-means\n"
           "and replace each value by its nearest entry; their method is absmax (no range is calibrated).";
}

QuantizationSpec quantizationSpecFrom(const Arguments& args)
{
    QuantizationSpec spec;
    const std::string qtypeText = *args.value("--qtype");
    const auto qtype = parseQType(qtypeText);
    if (!qtype)
        throw Error("--qtype: unknown qtype '" + qtypeText + "'; valid qtypes: " + qtypeNameList());
    spec.qtype = *qtype;
    const auto granularity = args.value("--granularity");
    // "tile" is per-channel with a tile size, as a rule's granularity and tile_size say it.
    spec.granularity = granularity == "per_tensor" ? Granularity::PerTensor : Granularity::PerChannel;
    const bool tiled = granularity == "tile";
    if (hasOwnBlockScales(spec.qtype) && (granularity || args.value("--axis") || args.value("--tile")))
        throw Error("--qtype " + std::string(qtypeName(spec.qtype)) +
                    " computes its own block scales along the last axis; drop --granularity, --axis and --tile");
    if (args.value("--axis") && spec.granularity == Granularity::PerTensor)
        throw UsageError("--axis applies to per_channel and tile granularity, not per_tensor");
    if (args.value("--tile") && !tiled)
        throw UsageError("--tile needs --granularity tile");
    spec.axis = int(args.integer("--axis", -64, 63).value_or(0));
    if (tiled) {
        spec.tileSize = args.number("--tile").value_or(128.0);
        if (*spec.tileSize <= 0)
            throw UsageError("--tile needs a positive number, got '" + *args.value("--tile") + "'");
    }
    return spec;
}

CalibrationMethod parseMethodArgument(const Arguments& args)
{
    try {
        return CalibrationMethod::parse(*args.value("--method"));
    } catch (const Error& e) {
        throw Error(std::string("--method: ") + e.what());
    }
}

std::string layoutText(const QuantizationSpec& spec, const Shape& shape)
{
    if (hasOwnBlockScales(spec.qtype))
        return "blocks of " + std::to_string(qtypeInfo(spec.qtype).blockSize) + " along the last axis";
    return layoutFor(shape, spec).describe();
}

Tensor loadNpyArgument(const Arguments& args)
{
    const std::string path = *args.value("--npy");
    const Tensor t = readNpy(path);
    if (t.dtype() == DType::Bool)
        throw Error(path + ": holds booleans; quantization needs a numeric array");
    if (t.empty())
        throw Error(path + ": the array is empty (shape " + shapeToString(t.shape()) + "); nothing to quantize");
    return t.toFloat32();
}

} // namespace qs::cli
