#pragma once
// The options fake-quant and compare-methods share: which .npy, which qtype,
// which groups. Declared once so both commands and their --help agree.

#include <string>
#include <vector>

#include "quantization/tensor_quantization.h"
#include "cli/arguments.h"
#include "core/error.h"

namespace qs::cli {

// --qtype, --granularity, --axis, --tile.
std::vector<OptionSpec> layoutOptions();
// Help paragraph on granularity, axis and tile.
std::string layoutNotes();

// Reads the --qtype, --granularity, --axis and --tile options into a spec.
// An unknown qtype is a qs::Error listing the valid names.
QuantizationSpec quantizationSpecFrom(const Arguments& args);

// Loads --npy FILE as float32 (any numeric dtype converts).
Tensor loadNpyArgument(const Arguments& args);

// Parses --method; a bad string is a qs::Error naming --method.
CalibrationMethod parseMethodArgument(const Arguments& args);

// "per_channel(axis=0)", or "blocks of 32 along the last axis" for MX types.
std::string layoutText(const QuantizationSpec& spec, const Shape& shape);

// Runs f; a qs::Error whose message does not name `file` gets it as a prefix,
// so that the one line on stderr says which input it is about.
template <class F> auto namingFile(const std::string& file, F&& f)
{
    try {
        return f();
    } catch (const Error& e) {
        if (std::string_view(e.what()).find(file) != std::string_view::npos)
            throw;
        throw Error(file + ": " + e.what());
    }
}

} // namespace qs::cli
