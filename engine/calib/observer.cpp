#include "calib/observer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "calib/clipping.h"
#include "core/group_runs.h"
#include "calib/statistics.h"
#include "core/error.h"

namespace qs {

namespace {

// The histogram cut to the bins from the first to the last that hold data (and,
// when `keepZero`, the bin edge at zero), so that searches do not walk empty
// range the growing histogram kept for later batches.
Histogram trimmed(const Histogram& h, bool keepZero)
{
    size_t first = h.bins(), last = 0;
    for (size_t b = 0; b < h.bins(); ++b)
        if (h.counts[b] != 0) {
            first = std::min(first, b);
            last = b;
        }
    if (first == h.bins())
        return h;
    if (keepZero && h.lo < 0 && h.hi > 0) {
        const size_t zero = size_t(std::llround(-h.lo / (h.hi - h.lo) * double(h.bins())));
        first = std::min(first, zero);
        last = std::max(last, zero == 0 ? 0 : zero - 1);
    }
    Histogram t{h.edge(first), h.edge(last + 1), {}};
    t.counts.assign(h.counts.begin() + std::ptrdiff_t(first), h.counts.begin() + std::ptrdiff_t(last + 1));
    return t;
}

} // namespace

Observer::Observer(std::string name, ObserverConfig config) : name_(std::move(name)), config_(std::move(config))
{
    if (config_.histogramBinsPerSide < 0)
        throw Error("observer '" + name_ + "': histogram bins per side must be 0 or more, got " +
                    std::to_string(config_.histogramBinsPerSide));
}

void Observer::observe(const Tensor& batch)
{
    const Tensor f = batch.toFloat32();
    observe(f.values<float>(), f.shape());
}

void Observer::observe(std::span<const float> x, const Shape& shape)
{
    const int rank = int(shape.size());
    // Per sample and per group: block 1 on the batch axes and the channel axis.
    BlockLayout perSample = BlockLayout::perTensor(shape);
    std::vector<bool> isBatch(size_t(rank), false);
    for (int a : config_.batchAxes) {
        const int axis = normalizeAxis(a, rank, ("observer '" + name_ + "': batch axis").c_str());
        isBatch[size_t(axis)] = true;
        perSample.block[size_t(axis)] = 1;
    }
    int channel = -1;
    if (config_.channelAxis >= 0 || config_.channelAxis < -1) {
        channel = normalizeAxis(config_.channelAxis, rank, ("observer '" + name_ + "': channel axis").c_str());
        if (isBatch[size_t(channel)])
            throw Error("observer '" + name_ + "': the channel axis " + std::to_string(channel) +
                        " is also a batch axis");
        perSample.block[size_t(channel)] = 1;
    }
    const int64_t groups = channel < 0 ? 1 : shape[size_t(channel)];
    if (batches_ > 0 && groups != groupCount())
        throw Error("observer '" + name_ + "': a batch of shape " + shapeToString(shape) + " has " +
                    std::to_string(groups) + " channels, earlier batches had " + std::to_string(groupCount()));

    if (int64_t(x.size()) != shapeElementCount(shape))
        throw Error("observer '" + name_ + "': " + std::to_string(x.size()) + " values do not fill the shape " +
                    shapeToString(shape));
    if (x.empty())
        return; // nothing to average: an empty batch does not count

    const GroupStatistics st = groupStatistics(x, perSample, name_, true);
    // Grid index → channel: the channel's grid stride is the product of the grid after it.
    const Shape grid = perSample.gridShape();
    int64_t channelStride = 1;
    for (int i = rank - 1; i > channel && channel >= 0; --i)
        channelStride *= grid[size_t(i)];
    std::vector<double> min(size_t(groups), 0), max(size_t(groups), 0), absMax(size_t(groups), 0),
        rms(size_t(groups), 0);
    std::vector<int64_t> samples(size_t(groups), 0);
    std::vector<float> lo(size_t(groups), std::numeric_limits<float>::infinity()),
        hi(size_t(groups), -std::numeric_limits<float>::infinity());
    for (size_t s = 0; s < st.count.size(); ++s) {
        if (st.count[s] == 0)
            continue;
        const size_t g = channel < 0 ? 0 : size_t((int64_t(s) / channelStride) % groups);
        min[g] += st.min[s];
        max[g] += st.max[s];
        absMax[g] += st.absMax(s);
        rms[g] += st.rms(s);
        ++samples[g];
        lo[g] = std::min(lo[g], st.min[s]);
        hi[g] = std::max(hi[g], st.max[s]);
    }
    if (batches_ == 0) {
        sumMin_.assign(size_t(groups), 0);
        sumMax_ = sumAbsMax_ = sumRms_ = sumMin_;
        runningMin_.assign(size_t(groups), std::numeric_limits<float>::infinity());
        runningMax_.assign(size_t(groups), -std::numeric_limits<float>::infinity());
        if (config_.histogramBinsPerSide > 0)
            histograms_.assign(size_t(groups), GrowingHistogram(config_.histogramBinsPerSide));
    }
    for (size_t g = 0; g < size_t(groups); ++g) {
        // A group without elements in this batch (a zero-sized axis) adds zeros.
        const double n = double(std::max<int64_t>(samples[g], 1));
        sumMin_[g] += min[g] / n;
        sumMax_[g] += max[g] / n;
        sumAbsMax_[g] += absMax[g] / n;
        sumRms_[g] += rms[g] / n;
        runningMin_[g] = std::min(runningMin_[g], lo[g]);
        runningMax_[g] = std::max(runningMax_[g], hi[g]);
    }
    if (!histograms_.empty()) {
        const GroupMajorValues values(x, channel < 0 ? BlockLayout::perTensor(shape)
                                                     : BlockLayout::perChannel(shape, channel));
        for (size_t g = 0; g < size_t(groups); ++g)
            histograms_[g].add(values.group(int64_t(g)), std::max(-lo[g], hi[g])); // checked finite above
    }
    ++batches_;
}

std::vector<Range> Observer::ranges(const CalibrationMethod& m, const CalibrationTarget& target,
                                    CalibrationReport* report) const
{
    if (batches_ == 0)
        throw Error("observer '" + name_ + "' has seen no batch; run calibration data through the model first");
    if (hasOwnBlockScales(target.qtype))
        throw Error("activation '" + name_ + "': " + std::string(qtypeName(target.qtype)) +
                    " computes its own block scales from the data; calibration method '" + m.toString() +
                    "' does not apply to it");
    if (m.needsHistogram() && histograms_.empty())
        throw Error("observer '" + name_ + "' kept no histogram, which calibration method '" + m.toString() +
                    "' needs");
    const bool symmetric = calibrationSymmetric(m, target);
    const size_t groups = size_t(groupCount());
    if (groups > 0)
        checkUnsignedSymmetric(target.qtype, symmetric, m, *std::min_element(runningMin_.begin(), runningMin_.end()),
                               "activation '" + name_ + "'");
    std::vector<Range> out(groups);
    int64_t wholeRange = 0;
    const double s = m.factor;
    for (size_t g = 0; g < groups; ++g) {
        switch (m.kind) {
        case CalibrationKind::AbsMax:
            out[g] = {-float(s * averageAbsMax(g)), float(s * averageAbsMax(g))};
            break;
        case CalibrationKind::MinMax:
            out[g] = {float(s * averageMin(g)), float(s * averageMax(g))};
            break;
        case CalibrationKind::Rms:
            out[g] = {-float(s * averageRms(g)), float(s * averageRms(g))};
            break;
        case CalibrationKind::Fixed:
            out[g] = {float(m.fixedMin), float(m.fixedMax)};
            break;
        case CalibrationKind::Percentile: {
            const GrowingHistogram& h = histograms_[g];
            if (h.empty())
                break;
            if (symmetric) {
                const float a = float(histogramPercentile(h.magnitudes(), m.percentile));
                out[g] = {-a, a};
            } else {
                out[g] = {float(histogramPercentile(h.values(), 100.0 - m.percentile)),
                          float(histogramPercentile(h.values(), m.percentile))};
            }
            break;
        }
        case CalibrationKind::Mse:
            break; // all groups at once below
        case CalibrationKind::Entropy: {
            // The growing histogram's bins merged down to the entropy search's bins
            // (clipping.h: entropyBins); too few values keep the whole range.
            const GrowingHistogram& gh = histograms_[g];
            if (gh.empty())
                break;
            const int levels = entropyLevels(target.qtype, symmetric, target.options.narrowRange);
            const Histogram h = symmetric ? trimmed(gh.magnitudes(), false) : trimmed(gh.values(), true);
            const size_t bins = entropyBins(gh.total(), levels, size_t(2 * gh.binsPerSide()));
            const float lo = std::min(runningMin_[g], 0.0f), hi = std::max(runningMax_[g], 0.0f);
            if (bins == 0) {
                ++wholeRange;
                out[g] = symmetric ? Range{-std::max(-lo, hi), std::max(-lo, hi)} : Range{lo, hi};
                break;
            }
            const Range r = entropyRange(mergedBins(h, (h.bins() + bins - 1) / bins), symmetric, levels);
            // Merging may pad the histogram past the data; a range never reaches beyond it.
            out[g] = symmetric ? Range{std::max(r.min, -std::max(-lo, hi)), std::min(r.max, std::max(-lo, hi))}
                               : Range{std::max(r.min, lo), std::min(r.max, hi)};
            break;
        }
        }
    }
    if (m.kind == CalibrationKind::Mse) {
        MsePoints points(int64_t(groups), 2 * int64_t(config_.histogramBinsPerSide));
        for (size_t g = 0; g < groups; ++g)
            if (runningMin_[g] <= runningMax_[g])
                points.setHistogram(int64_t(g), histograms_[g].values(), runningMin_[g], runningMax_[g]);
        out = mseRanges(points, ClippingTarget{target.qtype, target.options, symmetric}, name_);
    }
    if (report) {
        *report = {};
        report->groups = int64_t(groups);
        report->entropyWholeRange = wholeRange;
        if (wholeRange > 0)
            report->note = "entropy: " + std::to_string(wholeRange) + " of " + std::to_string(groups) +
                           " groups of activation '" + name_ +
                           "' kept their whole range: too few values for its histogram";
    }
    return out;
}

nlohmann::json Observer::toJson() const
{
    nlohmann::json hist = nlohmann::json::array();
    for (const GrowingHistogram& h : histograms_)
        hist.push_back(h.toJson());
    return {{"version", 1},
            {"name", name_},
            {"batch_axes", config_.batchAxes},
            {"channel_axis", config_.channelAxis},
            {"histogram_bins_per_side", config_.histogramBinsPerSide},
            {"batches", batches_},
            {"sum_min", sumMin_},
            {"sum_max", sumMax_},
            {"sum_abs_max", sumAbsMax_},
            {"sum_rms", sumRms_},
            {"running_min", runningMin_},
            {"running_max", runningMax_},
            {"histograms", hist}};
}

Observer Observer::fromJson(const nlohmann::json& j)
{
    const std::string name = j.value("name", std::string("?"));
    try {
        if (j.at("version").get<int>() != 1)
            throw Error("version " + j.at("version").dump() + " is not 1");
        ObserverConfig config;
        config.batchAxes = j.at("batch_axes").get<std::vector<int>>();
        config.channelAxis = j.at("channel_axis").get<int>();
        config.histogramBinsPerSide = j.at("histogram_bins_per_side").get<int>();
        Observer o(name, config);
        o.batches_ = j.at("batches").get<int64_t>();
        o.sumMin_ = j.at("sum_min").get<std::vector<double>>();
        o.sumMax_ = j.at("sum_max").get<std::vector<double>>();
        o.sumAbsMax_ = j.at("sum_abs_max").get<std::vector<double>>();
        o.sumRms_ = j.at("sum_rms").get<std::vector<double>>();
        // Infinity (a group that saw nothing) is written as null by JSON.
        for (const auto& [key, target, fill] :
             {std::tuple{"running_min", &o.runningMin_, std::numeric_limits<float>::infinity()},
              std::tuple{"running_max", &o.runningMax_, -std::numeric_limits<float>::infinity()}}) {
            target->clear();
            for (const auto& v : j.at(key))
                target->push_back(v.is_null() ? fill : v.get<float>());
        }
        for (const auto& h : j.at("histograms"))
            o.histograms_.push_back(GrowingHistogram::fromJson(h));
        const size_t groups = o.sumMin_.size();
        if (o.batches_ < 0 || o.sumMax_.size() != groups || o.sumAbsMax_.size() != groups ||
            o.sumRms_.size() != groups || o.runningMin_.size() != groups || o.runningMax_.size() != groups ||
            (!o.histograms_.empty() && o.histograms_.size() != groups) ||
            (o.batches_ > 0 && o.histograms_.empty() != (config.histogramBinsPerSide == 0)))
            throw Error("the per-group arrays do not agree in length");
        return o;
    } catch (const nlohmann::json::exception& e) {
        throw Error("observer '" + name + "' JSON: " + e.what());
    } catch (const Error& e) {
        throw Error("observer '" + name + "' JSON: " + e.what());
    }
}

} // namespace qs
