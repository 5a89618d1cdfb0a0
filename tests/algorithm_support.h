#pragma once
// What the algorithm suites (tst_gptq_model, tst_algorithms_model) share: the
// demo digits CNN with its calibration and evaluation data run through the
// exploration in the CLI's order, and the reading of an exported ONNX file.

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/error.h"
#include "rules/ruleset.h"
#include "session/exploration.h"

namespace qs::test {

inline const char* const kModel = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx";
inline const char* const kEval = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_eval.npz";
inline const char* const kCalib = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_calib.npz";

inline DataConfig file(const char* path)
{
    DataConfig c;
    c.path = path;
    return c;
}

inline RuleSet int4Rules(const std::string& algorithm, const std::string& extra = "")
{
    return RuleSet::fromJson(R"({"version":1,"rules":[{"weight_qtype":"int4","algorithm":")" + algorithm + "\"" +
                             extra + "}]}");
}

struct Outcome {
    double outputSqnrDb = 0;
    double top1 = 0, floatTop1 = 0; // 0 for data without labels
    std::shared_ptr<const WeightQuantizer> weights;
};

// The demo (or `model` with its data) under `rules`, in the CLI's order:
// calibration (when an algorithm reads it), weights, evaluation.
inline Outcome run(const RuleSet& rules, const char* model = kModel, const char* calib = kCalib,
                   const char* eval = kEval)
{
    Exploration e;
    e.setModel(loadExplorationModel(model));
    e.setRules(rules);
    e.setCalibrationData(file(calib));
    e.setEvaluationData(file(eval));
    if (e.needsCalibration())
        e.calibrate(KeptHistograms::AsPlanNeeds);
    e.updateWeights();
    if (!e.weights()->problems().empty())
        throw Error(e.weights()->problems().begin()->second);
    const EvaluationRun r = e.evaluate();
    const auto& accuracy = r.result->accuracy; // none for data without labels
    return {r.result->outputs.at(0).metrics.sqnrDb, accuracy ? accuracy->quantizedTop1 : 0.0,
            accuracy ? accuracy->floatTop1 : 0.0, e.weights()};
}

inline onnx::ModelProto readProto(const std::filesystem::path& path)
{
    onnx::ModelProto proto;
    std::ifstream in(path, std::ios::binary);
    if (!proto.ParseFromIstream(&in))
        throw Error(path.string() + ": not a model");
    return proto;
}

inline const onnx::TensorProto& initializerOf(const onnx::ModelProto& m, const std::string& name)
{
    for (const auto& t : m.graph().initializer())
        if (t.name() == name)
            return t;
    throw Error("no initializer '" + name + "'");
}

} // namespace qs::test
