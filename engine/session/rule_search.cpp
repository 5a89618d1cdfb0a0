#include "session/rule_search.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "quantization/weight_bytes.h"
#include "rules/regex_syntax.h"
#include "session/exploration.h"

namespace qs {
namespace {

// More would only make the path long; real lists have two to five.
constexpr size_t kMaxCandidates = 64;

std::string fieldText(const nlohmann::ordered_json& c, const char* key)
{
    const auto it = c.find(key);
    if (it == c.end() || it->is_null())
        return {};
    return it->is_string() ? it->get<std::string>() : it->dump();
}

// Runs the search over one exploration; see rule_search.h for the steps.
class Searcher {
public:
    Searcher(Exploration& x, const SearchCandidates& candidates, const SearchTarget& target,
             const CancellationToken& cancel, const ProgressCallback& progress)
        : x_(x), model_(*x.loaded().model), candidates_(candidates), target_(target), cancel_(cancel),
          progress_(progress)
    {
    }

    RuleSearchResult run();

private:
    // Per model layer, the candidates whose rule applies to it.
    void findApplicableCandidates();
    // A choice (one level per searched layer) as candidate indices per model layer.
    std::vector<int64_t> expand(const std::vector<size_t>& levels) const;
    RuleSet rulesFor(const std::vector<int64_t>& choice, bool catchAll) const;
    // Sets `rules`, brings weights and statistics up to date and evaluates.
    EvaluationResult evaluateRules(RuleSet rules, bool full);
    SearchPoint evaluate(const std::vector<size_t>& levels, const std::string& step);
    void advance(const std::string& what);

    Exploration& x_;
    const Model& model_; // the loaded model: its layers are those of every (equalized) model the rules give
    const SearchCandidates& candidates_;
    const SearchTarget& target_;
    const CancellationToken& cancel_;
    ProgressCallback progress_;

    std::vector<std::vector<size_t>> applicable_; // per model layer
    std::vector<size_t> searched_;                // model layers with a choice of their own, model order
    std::map<std::vector<int64_t>, SearchPoint> seen_;
    RuleSearchResult result_;
    size_t done_ = 0, planned_ = 1;
};

void Searcher::advance(const std::string& what)
{
    ++done_;
    if (progress_)
        progress_(std::min(0.99, double(done_) / double(std::max(planned_, done_ + 1))), what);
}

void Searcher::findApplicableCandidates()
{
    applicable_.assign(model_.layers.size(), {});
    for (size_t c = 0; c < candidates_.candidates.size(); ++c) {
        cancel_.check();
        nlohmann::ordered_json rule = candidates_.candidates[c];
        rule["module_path"] = ".*";
        const nlohmann::ordered_json doc{{"version", 1}, {"rules", nlohmann::ordered_json::array({rule})}};
        x_.setRules(RuleSet::fromJson(doc.dump(), "candidate " + std::to_string(c)), "search");
        for (size_t i = 0; i < model_.layers.size(); ++i) {
            const LayerQuantization* lq = x_.plan()->forLayer(i);
            if (lq && lq->problem.empty())
                applicable_[i].push_back(c);
        }
    }
    for (size_t i = 0; i < model_.layers.size(); ++i) {
        if (model_.layers[i].sharesWeightOf)
            continue;
        if (applicable_[i].empty())
            result_.unsearched.push_back(model_.layers[i].modulePath);
        else
            searched_.push_back(i);
    }
}

std::vector<int64_t> Searcher::expand(const std::vector<size_t>& levels) const
{
    std::vector<int64_t> choice(model_.layers.size(), -1);
    for (size_t k = 0; k < searched_.size(); ++k)
        choice[searched_[k]] = int64_t(applicable_[searched_[k]][levels[k]]);
    for (size_t i = 0; i < model_.layers.size(); ++i)
        if (const auto owner = model_.layers[i].sharesWeightOf)
            choice[i] = choice[*owner];
    return choice;
}

RuleSet Searcher::rulesFor(const std::vector<int64_t>& choice, bool catchAll) const
{
    return searchChoiceRules(model_, candidates_, choice, catchAll);
}

EvaluationResult Searcher::evaluateRules(RuleSet rules, bool full)
{
    cancel_.check();
    x_.setRules(std::move(rules), "search");
    // smooth_alpha, high_bias_absorption: the rewritten model comes from the calibration's first phases.
    if (x_.smoothingPending() || x_.absorptionPending())
        x_.calibrate(KeptHistograms::AsPlanNeeds, cancel_);
    x_.updateWeights(cancel_);
    for (const auto& [layer, why] : x_.weights()->problems())
        throw Error("layer '" + model_.layers[layer].modulePath + "' (weight '" + model_.layers[layer].weightName +
                    "'): " + why);
    if (x_.needsCalibration() && !(x_.statistics() && x_.statistics()->covers(*x_.plan())))
        x_.calibrate(KeptHistograms::AsPlanNeeds, cancel_);
    EvaluationJob job = x_.evaluationJob();
    job.options.isolated = full;
    job.options.accumulated = full;
    EvaluationRun run = job.run(cancel_);
    EvaluationResult e = *run.result;
    x_.apply(std::move(run));
    return e;
}

SearchPoint Searcher::evaluate(const std::vector<size_t>& levels, const std::string& step)
{
    const std::vector<int64_t> choice = expand(levels);
    if (const auto it = seen_.find(choice); it != seen_.end())
        return it->second;
    const EvaluationResult e = evaluateRules(rulesFor(choice, false), false);
    SearchPoint p;
    p.step = step;
    p.candidate = choice;
    p.weightBytes = totalWeightBytes(model_, *x_.plan(), *x_.weights()).quantizedBytes;
    p.value = target_.value(e);
    p.meets = target_.met(p.value);
    result_.points.push_back(p);
    seen_.emplace(choice, p);
    advance("search: " + step + " point, " + std::string(target_.metricName()) + " " + std::to_string(p.value));
    return p;
}

RuleSearchResult Searcher::run()
{
    result_.target = target_;
    findApplicableCandidates();
    if (searched_.empty())
        throw Error("no candidate applies to any layer of " + model_.sourcePath.string());
    // Planned evaluations, for the progress fraction: smallest, largest, the
    // sensitivity runs, a bisection, a trimming pass, the final one.
    planned_ = 3 + 2 * searched_.size() + 8;

    std::vector<size_t> levels(searched_.size(), 0);
    std::vector<size_t> best;
    const SearchPoint smallest = evaluate(levels, "smallest");
    if (smallest.meets) {
        best = levels;
    } else {
        // Sensitivity of each layer at its smallest candidate: most damaging first.
        cancel_.check();
        const SensitivityRun ranking = x_.runSensitivity(SensitivityKind::OneLayer, {}, cancel_);
        done_ += searched_.size();
        std::vector<size_t> order; // positions in searched_
        std::vector<bool> placed(searched_.size(), false);
        for (const LayerSensitivity& s : ranking.result->ranking) {
            const auto it = std::find(searched_.begin(), searched_.end(), s.layer);
            if (it != searched_.end() && !placed[size_t(it - searched_.begin())]) {
                placed[size_t(it - searched_.begin())] = true;
                order.push_back(size_t(it - searched_.begin()));
            }
        }
        for (size_t k = 0; k < searched_.size(); ++k)
            if (!placed[k])
                order.push_back(k);
        for (size_t k : order)
            result_.sensitivityOrder.push_back(searched_[k]);

        // The path: in rounds, each layer in sensitivity order one candidate up.
        std::vector<std::vector<size_t>> path{levels};
        for (bool raised = true; raised;) {
            raised = false;
            for (size_t k : order)
                if (levels[k] + 1 < applicable_[searched_[k]].size()) {
                    ++levels[k];
                    path.push_back(levels);
                    raised = true;
                }
        }
        const SearchPoint largest = evaluate(path.back(), "largest");
        if (!largest.meets) {
            result_.met = false;
            result_.message = "the target " + target_.text() + " cannot be met with these candidates: with every " +
                              "layer at its last candidate " + std::string(target_.metricName()) + " is " +
                              std::to_string(largest.value) + " (at its first, " + std::to_string(smallest.value) + ")";
            if (progress_)
                progress_(1.0, "search: target not met");
            return result_;
        }
        size_t lo = 0, hi = path.size() - 1;
        while (hi - lo > 1) {
            const size_t mid = lo + (hi - lo) / 2;
            if (evaluate(path[mid], "bisect").meets)
                hi = mid;
            else
                lo = mid;
        }
        best = path[hi];
        // Trimming: least sensitive first, one candidate down where the target still holds.
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
            if (best[*it] == 0)
                continue;
            std::vector<size_t> lower = best;
            --lower[*it];
            if (evaluate(lower, "trim").meets)
                best = lower;
        }
    }

    // The choice as rules, evaluated again through them with every per-layer metric.
    const std::vector<int64_t> choice = expand(best);
    RuleSet rules = rulesFor(choice, true);
    const EvaluationResult e = evaluateRules(rules, true);
    SearchPoint final;
    final.step = "final";
    final.candidate = choice;
    const WeightBytes bytes = totalWeightBytes(model_, *x_.plan(), *x_.weights());
    final.weightBytes = bytes.quantizedBytes;
    result_.floatBytes = bytes.floatBytes;
    final.value = target_.value(e);
    final.meets = target_.met(final.value);
    result_.points.push_back(final);
    result_.chosen = final;
    result_.rules = std::move(rules);
    result_.met = final.meets;
    result_.message = final.meets
                          ? "target " + target_.text() + " met: " + std::string(target_.metricName()) + " " +
                                std::to_string(final.value) + " with " + std::to_string(final.weightBytes) +
                                " weight bytes (float " + std::to_string(bytes.floatBytes) + "), " +
                                std::to_string(result_.points.size()) + " evaluations"
                          : "the chosen rules met " + target_.text() + " in the search but not when evaluated again (" +
                                std::string(target_.metricName()) + " " + std::to_string(final.value) + ")";
    if (progress_)
        progress_(1.0, "search done");
    return result_;
}

nlohmann::json pointJson(const SearchPoint& p)
{
    nlohmann::json candidates = nlohmann::json::array();
    for (int64_t c : p.candidate)
        candidates.push_back(c < 0 ? nlohmann::json() : nlohmann::json(c));
    return {{"step", p.step},
            {"weight_bytes", p.weightBytes},
            {"value", std::isfinite(p.value) ? nlohmann::json(p.value) : nlohmann::json()},
            {"meets", p.meets},
            {"candidates", candidates}};
}

} // namespace

SearchCandidates SearchCandidates::fromJson(std::string_view text, std::string_view sourceName)
{
    const std::string source(sourceName);
    nlohmann::ordered_json doc;
    try {
        doc = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(source + ": not valid JSON: " + e.what());
    }
    if (!doc.is_object())
        throw Error(source + ": expected an object {\"version\": 1, \"candidates\": [...]}");
    for (const auto& [key, value] : doc.items())
        if (key != "version" && key != "candidates")
            throw Error(source + ": unknown field \"" + key +
                        "\"; a candidate file has \"version\" and \"candidates\"");
    if (!doc.contains("version") || doc["version"] != 1)
        throw Error(source + ": \"version\" must be 1");
    const auto it = doc.find("candidates");
    if (it == doc.end() || !it->is_array() || it->empty())
        throw Error(source + ": \"candidates\" must be a non-empty list of rule fields, smallest first");
    if (it->size() > kMaxCandidates)
        throw Error(source + ": " + std::to_string(it->size()) + " candidates; at most " +
                    std::to_string(kMaxCandidates));
    SearchCandidates c;
    for (size_t i = 0; i < it->size(); ++i) {
        const nlohmann::ordered_json& entry = (*it)[i];
        const std::string name = source + ": candidate " + std::to_string(i);
        if (!entry.is_object())
            throw Error(name + ": expected an object of rule fields ({} for float)");
        for (const char* key : {"module_path", "op_types"})
            if (entry.contains(key))
                throw Error(name + ", field \"" + key +
                            "\": candidates apply to every layer; the search writes module_path itself");
        // The fields are checked as a rule would be.
        const nlohmann::ordered_json doc1{{"version", 1}, {"rules", nlohmann::ordered_json::array({entry})}};
        try {
            RuleSet::fromJson(doc1.dump(), name);
        } catch (const Error& e) {
            // "<name>: rule 0, field ..." -> "<name>, field ..."
            std::string what = e.what();
            const std::string head = name + ": rule 0";
            if (what.rfind(head, 0) == 0)
                what = name + what.substr(head.size());
            throw Error(what);
        }
        c.candidates.push_back(entry);
    }
    return c;
}

SearchCandidates SearchCandidates::load(const std::filesystem::path& file)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (ec)
        throw Error(file.string() + ": cannot read: " + ec.message());
    if (size > RuleSet::kMaxFileBytes)
        throw Error(file.string() + ": " + std::to_string(size) + " bytes; a candidate file may have at most " +
                    std::to_string(RuleSet::kMaxFileBytes));
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw Error(file.string() + ": cannot open");
    std::ostringstream text;
    text << in.rdbuf();
    return fromJson(text.str(), file.string());
}

std::string SearchCandidates::label(size_t candidate) const
{
    const nlohmann::ordered_json& c = candidates.at(candidate);
    std::string weight = fieldText(c, "weight_qtype"), act = fieldText(c, "act_qtype");
    if (weight.empty() && act.empty())
        return "float";
    std::string s = weight.empty() ? "float" : weight;
    if (const std::string tile = fieldText(c, "tile_size"); !tile.empty())
        s += " tile " + tile;
    if (fieldText(c, "granularity") == "per_tensor")
        s += " per tensor";
    if (!act.empty())
        s += " / act " + act;
    return s;
}

SearchTarget SearchTarget::parse(std::string_view text)
{
    const std::string t(text);
    const std::string accepted =
        "; expected output_sqnr_db>=DB, top1_agreement>=FRACTION or perplexity_increase<=FRACTION";
    size_t op = t.find(">=");
    const bool atLeast = op != std::string::npos;
    if (!atLeast)
        op = t.find("<=");
    if (op == std::string::npos)
        throw Error("--target '" + t + "': no >= or <=" + accepted);
    auto trim = [](std::string s) {
        s.erase(0, s.find_first_not_of(" \t"));
        s.erase(s.find_last_not_of(" \t") + 1);
        return s;
    };
    const std::string name = trim(t.substr(0, op)), number = trim(t.substr(op + 2));
    SearchTarget target;
    if (name == "output_sqnr_db" && atLeast)
        target.metric = Metric::OutputSqnrDb;
    else if (name == "top1_agreement" && atLeast)
        target.metric = Metric::Top1Agreement;
    else if (name == "perplexity_increase" && !atLeast)
        target.metric = Metric::PerplexityIncrease;
    else
        throw Error("--target '" + t + "': unknown metric or direction '" + name + (atLeast ? ">=" : "<=") + "'" +
                    accepted);
    size_t used = 0;
    try {
        target.threshold = std::stod(number, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != number.size() || !std::isfinite(target.threshold))
        throw Error("--target '" + t + "': '" + number + "' is not a number");
    if (target.metric == Metric::Top1Agreement && (target.threshold < 0 || target.threshold > 1))
        throw Error("--target '" + t + "': top1_agreement is a fraction in [0, 1]");
    return target;
}

std::string_view SearchTarget::metricName() const
{
    switch (metric) {
    case Metric::OutputSqnrDb:
        return "output_sqnr_db";
    case Metric::Top1Agreement:
        return "top1_agreement";
    case Metric::PerplexityIncrease:
        return "perplexity_increase";
    }
    return "";
}

std::string SearchTarget::text() const
{
    std::ostringstream s;
    s << metricName() << (metric == Metric::PerplexityIncrease ? "<=" : ">=") << threshold;
    return s.str();
}

double SearchTarget::value(const EvaluationResult& e) const
{
    switch (metric) {
    case Metric::OutputSqnrDb:
        if (e.outputs.empty())
            throw Error("output_sqnr_db: the evaluation has no output");
        return e.outputs.front().metrics.sqnrDb;
    case Metric::Top1Agreement:
        if (!e.agreement)
            throw Error("top1_agreement: the first output has no rows of classes to compare (it needs [N, C...] "
                        "logits, C >= 2)");
        return e.agreement->fraction();
    case Metric::PerplexityIncrease:
        if (!e.perplexity)
            throw Error("perplexity_increase: perplexity is measured for causal language models only");
        return e.perplexity->quantizedValue / e.perplexity->floatValue - 1.0;
    }
    return 0;
}

bool SearchTarget::met(double v) const
{
    if (std::isnan(v))
        return false;
    return metric == Metric::PerplexityIncrease ? v <= threshold : v >= threshold;
}

nlohmann::json RuleSearchResult::toJson(const Model& model, const SearchCandidates& candidates) const
{
    nlohmann::json j;
    j["target"] = target.text();
    j["metric"] = std::string(target.metricName());
    j["threshold"] = target.threshold;
    j["met"] = met;
    j["message"] = message;
    j["float_weight_bytes"] = floatBytes;
    j["candidates"] = nlohmann::json::array();
    for (size_t c = 0; c < candidates.candidates.size(); ++c)
        j["candidates"].push_back({{"label", candidates.label(c)}, {"fields", candidates.candidates[c]}});
    j["layers"] = nlohmann::json::array();
    for (const QuantizableLayer& l : model.layers)
        j["layers"].push_back(l.modulePath);
    j["sensitivity_order"] = nlohmann::json::array();
    for (size_t l : sensitivityOrder)
        j["sensitivity_order"].push_back(model.layers.at(l).modulePath);
    j["unsearched"] = unsearched;
    j["points"] = nlohmann::json::array();
    for (const SearchPoint& p : points)
        j["points"].push_back(pointJson(p));
    j["chosen"] = chosen ? pointJson(*chosen) : nlohmann::json();
    return j;
}

RuleSearchResult searchRules(Exploration& exploration, const SearchCandidates& candidates, const SearchTarget& target,
                             const CancellationToken& cancel, const ProgressCallback& progress)
{
    if (!exploration.hasModel())
        throw Error("no model is open");
    Searcher searcher(exploration, candidates, target, cancel, progress);
    return searcher.run();
}

RuleSet searchChoiceRules(const Model& model, const SearchCandidates& candidates, const std::vector<int64_t>& choice,
                          bool catchAll)
{
    if (choice.size() != model.layers.size())
        throw Error("a search choice has " + std::to_string(choice.size()) + " entries; the model has " +
                    std::to_string(model.layers.size()) + " layers");
    for (const int64_t c : choice)
        if (c >= int64_t(candidates.candidates.size()))
            throw Error("a search choice names candidate " + std::to_string(c) + "; there are " +
                        std::to_string(candidates.candidates.size()));
    std::map<int64_t, std::vector<std::string>> groups; // candidate -> escaped paths, model order
    bool unsearched = false;
    for (size_t i = 0; i < choice.size(); ++i) {
        if (choice[i] < 0)
            unsearched = true;
        else
            groups[choice[i]].push_back(escapedModulePath(model.layers[i].modulePath));
    }
    // The commonest choice as a final ".*" rule, when no layer is left out of the search.
    std::optional<int64_t> rest;
    if (catchAll && !unsearched && !groups.empty())
        rest = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
                   return a.second.size() < b.second.size();
               })->first;
    nlohmann::ordered_json rules = nlohmann::ordered_json::array();
    auto add = [&](int64_t candidate, const std::string& pattern) {
        nlohmann::ordered_json rule{{"module_path", pattern}};
        for (const auto& [key, value] : candidates.candidates[size_t(candidate)].items())
            rule[key] = value;
        rules.push_back(rule);
    };
    for (const auto& [candidate, paths] : groups) {
        if (rest && candidate == *rest)
            continue;
        std::string pattern;
        for (const std::string& p : paths) {
            if (!pattern.empty() && pattern.size() + 1 + p.size() > kMaxPatternLength) {
                add(candidate, pattern);
                pattern.clear();
            }
            pattern += (pattern.empty() ? "" : "|") + p;
        }
        add(candidate, pattern);
    }
    if (rest)
        add(*rest, ".*");
    const nlohmann::ordered_json doc{{"version", 1}, {"rules", rules}};
    return RuleSet::fromJson(doc.dump(), "search result");
}

std::string escapedModulePath(std::string_view path)
{
    std::string s;
    for (char ch : path) {
        if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos)
            s += '\\';
        s += ch;
    }
    return s;
}

} // namespace qs
