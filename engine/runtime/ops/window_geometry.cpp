#include "runtime/ops/window_geometry.h"

#include <algorithm>
#include <string>

namespace qs::ops {

WindowGeometry resolveWindow(const KernelContext& ctx, const std::vector<int64_t>& input,
                             const std::vector<int64_t>& kernel, bool ceilMode, bool hasDilations)
{
    const size_t rank = input.size();
    WindowGeometry g;
    g.input = input;
    g.kernel = kernel;
    g.strides = ctx.intsAttribute("strides", std::vector<int64_t>(rank, 1));
    g.dilations =
        hasDilations ? ctx.intsAttribute("dilations", std::vector<int64_t>(rank, 1)) : std::vector<int64_t>(rank, 1);
    if (g.strides.size() != rank || g.dilations.size() != rank)
        ctx.fail("strides and dilations need " + std::to_string(rank) + " values, one per spatial axis");
    for (size_t d = 0; d < rank; ++d)
        if (g.strides[d] < 1 || g.dilations[d] < 1 || kernel[d] < 1)
            ctx.fail("kernel sizes, strides and dilations must be positive");
    const std::string autoPad = ctx.stringAttribute("auto_pad", "NOTSET");
    g.padBegin.assign(rank, 0);
    g.padEnd.assign(rank, 0);
    g.output.assign(rank, 0);
    for (size_t d = 0; d < rank; ++d) {
        const int64_t extent = (kernel[d] - 1) * g.dilations[d] + 1;
        if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
            g.output[d] = (input[d] + g.strides[d] - 1) / g.strides[d];
            const int64_t total = std::max<int64_t>(0, (g.output[d] - 1) * g.strides[d] + extent - input[d]);
            g.padBegin[d] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
            g.padEnd[d] = total - g.padBegin[d];
            continue;
        }
        if (autoPad == "NOTSET") {
            const std::vector<int64_t> pads = ctx.intsAttribute("pads", std::vector<int64_t>(2 * rank, 0));
            if (pads.size() != 2 * rank)
                ctx.fail("pads needs " + std::to_string(2 * rank) + " values (begins, then ends)");
            g.padBegin[d] = pads[d];
            g.padEnd[d] = pads[d + rank];
            if (g.padBegin[d] < 0 || g.padEnd[d] < 0)
                ctx.fail("pads must not be negative");
        } else if (autoPad != "VALID") {
            ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
        }
        const int64_t span = input[d] + g.padBegin[d] + g.padEnd[d] - extent;
        if (span < 0)
            ctx.fail("the window (" + std::to_string(extent) + ") is larger than the padded input (" +
                     std::to_string(input[d] + g.padBegin[d] + g.padEnd[d]) + ") on spatial axis " + std::to_string(d));
        if (ceilMode) {
            g.output[d] = (span + g.strides[d] - 1) / g.strides[d] + 1;
            // The last window must start inside the input or its begin padding.
            if ((g.output[d] - 1) * g.strides[d] >= input[d] + g.padBegin[d])
                --g.output[d];
        } else {
            g.output[d] = span / g.strides[d] + 1;
        }
    }
    return g;
}

} // namespace qs::ops
