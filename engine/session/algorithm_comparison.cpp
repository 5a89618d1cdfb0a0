#include "session/algorithm_comparison.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "core/block_layout.h"
#include "core/error.h"
#include "numerics/qtype.h"
#include "quantization/input_hessian.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "session/rule_search.h"

namespace qs {
namespace {

const QuantizationRule& ruleOfLayer(const Model& model, const RuleSet& rules, size_t layer)
{
    const QuantizableLayer& l = model.layers.at(layer);
    const std::optional<size_t> index = rules.firstMatch(l.modulePath, l.opType);
    if (!index || !rules.rules()[*index].weightQType)
        throw Error(
            "layer '" + l.modulePath + "': " +
            (index ? "rule " + std::to_string(*index) + " sets no weight_qtype" : std::string("no rule matches it")) +
            ", so its weight stays float and there is nothing to round; set a weight_qtype for it");
    return rules.rules()[*index];
}

// The rule, for this layer's path only.
QuantizationRule forPathOnly(const QuantizationRule& rule, const QuantizableLayer& layer)
{
    QuantizationRule r = rule;
    r.modulePath = ModulePathPattern(escapedModulePath(layer.modulePath));
    return r;
}

QType integerOfBits(int bits)
{
    return QType(int(QType::Int1) + std::clamp(bits, 1, 8) - 1);
}

// The weight as a matrix [O, F]: its channel axis first, the others in order (the Hessian's feature order).
Eigen::MatrixXd weightRows(const Tensor& weight, int channelAxis)
{
    return channelRows(weight.toFloat32(), normalizeAxis(channelAxis, weight.rank(), "channel axis"));
}

} // namespace

RuleSet rulesReadingInputsOf(const Model& model, const RuleSet& rules, size_t layer)
{
    QuantizationRule r = forPathOnly(ruleOfLayer(model, rules, layer), model.layers.at(layer));
    const QuantTypeInfo& info = qtypeInfo(*r.weightQType);
    if (info.kind != QKind::Integer) {
        r.weightQType = integerOfBits(info.bits);
        r.weightCalibration = CalibrationMethod::parse("absmax");
        r.symmetric.reset();
    }
    if (r.algorithm.kind != WeightAlgorithmKind::Gptq)
        r.algorithm = WeightAlgorithm::parse("gptq");
    r.rounding = Rounding::Nearest;
    r.roundingSeed = 0;
    std::vector<QuantizationRule> all{r};
    for (const QuantizationRule& other : rules.rules())
        all.push_back(other);
    return RuleSet(std::move(all));
}

AlgorithmComparison compareAlgorithms(const Model& model, const RuleSet& rules, size_t layer,
                                      const InputHessian& inputs, const CancellationToken& cancel)
{
    const QuantizableLayer& l = model.layers.at(layer);
    const QuantizationRule base = forPathOnly(ruleOfLayer(model, rules, layer), l);
    AlgorithmComparison c;
    c.layer = layer;
    c.modulePath = l.modulePath;
    c.weightName = l.weightName;
    c.rule = nlohmann::json::parse(RuleSet(std::vector<QuantizationRule>{ruleOfLayer(model, rules, layer)}).toJson())
                 .at("rules")
                 .at(0)
                 .dump();
    c.calibrationRows = inputs.rows();

    const Tensor* weight = model.initializer(l.weightName);
    if (!weight)
        throw Error("layer '" + l.modulePath + "': weight '" + l.weightName + "' is not in the model");
    const Eigen::MatrixXd w = weightRows(*weight, l.channelAxis);
    // A grouped Conv: output channel o contracts its group's features only, against its group's statistics.
    const int64_t groups = calibrationGroups(l);
    if (inputs.groups() != groups || w.cols() != inputs.groupFeatures() || w.rows() % groups != 0)
        throw Error("layer '" + l.modulePath + "': its calibration statistics have " +
                    std::to_string(inputs.features()) + " features in " + std::to_string(inputs.groups()) +
                    " groups, its weight contracts " + std::to_string(w.cols()) + " in each of " +
                    std::to_string(groups));
    const int64_t groupRows = w.rows() / groups;
    std::vector<Eigen::MatrixXd> m; // E[x xᵀ] per group
    for (int64_t g = 0; g < groups; ++g)
        m.push_back(inputs.hessian(g) * 0.5);
    const Eigen::VectorXd mu = inputs.mean();
    // Σ over the groups' rows of d·M_g·dᵀ, and of (d·E[x_g])² (what bias correction removes).
    const auto energy = [&](const Eigen::MatrixXd& d) {
        double sum = 0;
        for (int64_t g = 0; g < groups; ++g) {
            const auto dg = d.middleRows(g * groupRows, groupRows);
            sum += (dg * m[size_t(g)]).cwiseProduct(dg).sum();
        }
        return sum;
    };
    const auto meanShift = [&](const Eigen::MatrixXd& d) {
        double sum = 0;
        for (int64_t g = 0; g < groups; ++g)
            sum += (d.middleRows(g * groupRows, groupRows) * mu.segment(g * w.cols(), w.cols())).squaredNorm();
        return sum;
    };
    const double signal = energy(w);

    std::vector<QuantizationRule> variants;
    for (const WeightAlgorithmInfo& info : allWeightAlgorithms()) {
        QuantizationRule r = base;
        // The rule's own options when it names this algorithm, else the algorithm's defaults.
        WeightAlgorithm defaults;
        defaults.kind = info.kind;
        r.algorithm = base.algorithm.kind == info.kind ? base.algorithm : defaults;
        for (bool bias : {false, true}) {
            r.biasCorrection = bias;
            variants.push_back(r);
        }
    }
    const QuantTypeInfo& info = qtypeInfo(*base.weightQType);
    if (!isLut(info.type) && info.bits <= 8) {
        QuantizationRule r = base;
        r.weightQType = QType(int(QType::Lut1) + info.bits - 1);
        r.weightCalibration = CalibrationMethod::parse("absmax");
        r.symmetric.reset();
        r.narrowRange = false;
        r.scaleRestriction = ScaleRestriction::Float;
        r.rounding = Rounding::Nearest;
        r.roundingSeed = 0;
        r.algorithm = WeightAlgorithm{};
        for (bool bias : {false, true}) {
            r.biasCorrection = bias;
            variants.push_back(r);
        }
    }

    for (const QuantizationRule& v : variants) {
        cancel.check();
        AlgorithmRow row;
        row.algorithm = v.algorithm.toString();
        row.biasCorrection = v.biasCorrection;
        row.qtype = std::string(qtypeName(*v.weightQType));
        row.variant = (v.weightQType != base.weightQType ? row.qtype : row.algorithm) +
                      (v.biasCorrection ? " + bias_correction" : "");
        try {
            const RuleSet one(std::vector<QuantizationRule>{v});
            const QuantizationPlan plan = QuantizationPlan::build(model, one);
            const LayerQuantization* lq = plan.forLayer(layer);
            if (!lq || !lq->weight)
                throw Error("the variant's rule does not quantize the layer");
            if (!lq->problem.empty())
                throw Error(lq->problem);
            const auto start = std::chrono::steady_clock::now();
            const QuantizedWeight q = WeightQuantizer::quantize(model, *lq, &inputs, cancel);
            row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            row.weight = q.metrics;
            const Eigen::MatrixXd d = w - weightRows(q.fakeQuant, l.channelAxis);
            double error = energy(d);
            if (v.biasCorrection)
                error -= meanShift(d);
            error = std::max(error, 0.0);
            row.outputMse = error / double(w.rows());
            row.outputSqnrDb = error > 0 ? 10.0 * std::log10(signal / error) : std::numeric_limits<double>::infinity();
        } catch (const Cancelled&) {
            throw;
        } catch (const Error& e) {
            row.skipped = e.what();
        }
        c.rows.push_back(std::move(row));
    }
    return c;
}

} // namespace qs
