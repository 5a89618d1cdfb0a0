#pragma once
// What a background job is, and how the app treats each kind: one table
// (kJobKinds) gives its name and whether it is a long job the user follows
// and stops — shown with a progress bar in the status bar, cancelled by
// "Cancel Jobs", logged when cancelled — or a quick one that is only ever
// superseded by a newer one of its kind (weights of an edit, chart data).

#include <array>
#include <cstddef>
#include <string_view>

namespace qs {

enum class JobKind {
    Load,                // opening a model
    Weights,             // quantizing the weights of the current rules
    Calibrate,           // activation calibration
    Evaluate,            // float and quantized side by side
    Sensitivity,         // per-layer sensitivity
    Export,              // writing an export
    Distribution,        // the distribution chart's data
    MethodComparison,    // the method-comparison chart's data
    ScaleRange,          // the scale-range chart's data
    Comparison,          // A against B: the comparison of the kept results with the current ones
    Search,              // the smallest rules that meet a target
    GraphLayout,         // the graph view's layout (Graphviz)
    AlgorithmComparison, // one layer's weight rounded by every algorithm (Methods chart, Inspector)
};

struct JobKindInfo {
    JobKind kind;
    std::string_view name; // for logs and messages ("internal error while calibrate")
    bool userFacing;       // progress bar, "Cancel Jobs" cancels it, logged when cancelled
};

inline constexpr std::array<JobKindInfo, 13> kJobKinds{{
    {JobKind::Load, "load", true},
    {JobKind::Weights, "weights", false},
    {JobKind::Calibrate, "calibrate", true},
    {JobKind::Evaluate, "evaluate", true},
    {JobKind::Sensitivity, "sensitivity", true},
    {JobKind::Export, "export", true},
    {JobKind::Distribution, "distribution", false},
    {JobKind::MethodComparison, "method comparison", false},
    {JobKind::ScaleRange, "scale ranges", false},
    {JobKind::Comparison, "comparison", false},
    {JobKind::Search, "search", true},
    {JobKind::GraphLayout, "graph layout", true},
    {JobKind::AlgorithmComparison, "algorithm comparison", false},
}};

constexpr const JobKindInfo& jobKindInfo(JobKind kind)
{
    return kJobKinds[static_cast<size_t>(kind)];
}

// The table lists every kind once, in enum order (jobKindInfo indexes it).
static_assert([] {
    for (size_t i = 0; i < kJobKinds.size(); ++i)
        if (static_cast<size_t>(kJobKinds[i].kind) != i)
            return false;
    return true;
}());

} // namespace qs
