#include "export/passes/raise_opset.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <set>
#include <string>

#include "core/contained_call.h"
#include "core/error.h"
#include "export/qdq_graph.h"

namespace qs {

namespace {

onnx::OperatorSetIdProto* defaultOpset(onnx::ModelProto& model)
{
    for (auto& o : *model.mutable_opset_import())
        if (o.domain().empty() || o.domain() == "ai.onnx")
            return &o;
    return nullptr;
}

std::string label(const onnx::NodeProto& node)
{
    return "node '" + node.name() + "' (" + node.op_type() + ")";
}

// 17 → 18: the Reduce ops take `axes` as an input.
void reduceAxesToInput(onnx::GraphProto& graph)
{
    static const std::set<std::string> kReduce = {"ReduceL1",        "ReduceL2",   "ReduceLogSum",
                                                  "ReduceLogSumExp", "ReduceMax",  "ReduceMean",
                                                  "ReduceMin",       "ReduceProd", "ReduceSumSquare"};
    QdqGraph g(graph);
    for (auto& node : *graph.mutable_node()) {
        if (!node.domain().empty() || !kReduce.contains(node.op_type()))
            continue;
        const auto* axes = findAttribute(node, "axes");
        if (!axes)
            continue;
        const std::vector<int64_t> values(axes->ints().begin(), axes->ints().end());
        const std::string name = g.uniqueName(node.name().empty() ? node.op_type() + "_axes" : node.name() + "_axes");
        g.addInitializer(int64TensorProto(name, {int64_t(values.size())}, values));
        removeAttribute(node, "axes");
        if (node.input_size() < 1)
            throw Error("ONNX export: " + label(node) + " has no input");
        node.add_input(name);
    }
}

// 19 → 20: GridSample's modes are named after their dimension-free meaning.
void renameGridSampleModes(onnx::GraphProto& graph)
{
    for (auto& node : *graph.mutable_node()) {
        if (!node.domain().empty())
            continue;
        if (node.op_type() == "DFT")
            throw Error("ONNX export: " + label(node) +
                        ": DFT's axis becomes an input at opset 20, which this exporter does not adapt");
        if (node.op_type() != "GridSample")
            continue;
        for (auto& a : *node.mutable_attribute())
            if (a.name() == "mode") {
                if (a.s() == "bilinear")
                    a.set_s("linear");
                else if (a.s() == "bicubic")
                    a.set_s("cubic");
            }
    }
}

void refuseChanged(const onnx::GraphProto& graph, const std::string& op, int64_t opset)
{
    for (const auto& node : graph.node())
        if (node.domain().empty() && node.op_type() == op)
            throw Error("ONNX export: " + label(node) + ": " + op + " changes meaning at opset " +
                        std::to_string(opset) + ", which this exporter does not adapt");
}

// libonnx's version converter reads some inputs' shapes from the graph's
// value_info (Softmax 12 -> 13 needs its input's rank to keep the old
// flatten-to-2-D meaning) and fails where the file declares none, as older
// exporters' files do not. Shape inference gives them. It runs in a contained
// child (core/contained_call.h), as at load: libonnx's inference can crash on
// ranks it derives itself. The child sends back only the value_info; when it
// fails, the converter runs on the declarations the file has.
void inferShapesForConverter(onnx::ModelProto& model)
{
    std::string answer;
    ContainedOutcome outcome;
    try {
        outcome = ContainedCall::run(
            [&](ContainedChannel& channel) {
                try {
                    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                                       onnx::ShapeInferenceOptions(false, 1, false));
                } catch (const std::exception&) {
                    return; // nothing inferred: no answer
                }
                onnx::GraphProto declarations;
                *declarations.mutable_value_info() = model.graph().value_info();
                channel.send(declarations.SerializeAsString());
            },
            [&](std::string_view piece, bool) {
                if (answer.size() + piece.size() > kContainedMemoryBudget)
                    throw Error("shape inference's answer is too large");
                answer.append(piece);
            });
    } catch (const Error&) {
        return;
    }
    onnx::GraphProto declarations;
    if (outcome.answered() && !answer.empty() && declarations.ParseFromString(answer))
        *model.mutable_graph()->mutable_value_info() = std::move(*declarations.mutable_value_info());
}

} // namespace

int64_t libonnxNewestOpset()
{
    const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    const auto it = map.find(onnx::ONNX_DOMAIN);
    return it == map.end() ? 0 : it->second.second;
}

int64_t irVersionForOpset(int64_t opset)
{
    if (opset >= 21)
        return 10;
    if (opset >= 19)
        return 9;
    if (opset >= 17)
        return 8;
    if (opset >= 15)
        return 8;
    if (opset >= 13)
        return 7;
    return 3;
}

void raiseOpset(onnx::ModelProto& model, int64_t target)
{
    onnx::OperatorSetIdProto* opset = defaultOpset(model);
    const int64_t current = opset ? opset->version() : 1;
    if (target < current)
        throw Error("ONNX export: the model's opset " + std::to_string(current) + " cannot be lowered to " +
                    std::to_string(target));
    if (target == current)
        return;
    const int64_t known = libonnxNewestOpset();
    if (current < std::min(target, known)) {
        inferShapesForConverter(model);
        try {
            model = onnx::version_conversion::ConvertVersion(model, int(std::min(target, known)));
        } catch (const std::exception& e) {
            throw Error("ONNX export: ONNX's version converter cannot raise opset " + std::to_string(current) + " to " +
                        std::to_string(std::min(target, known)) + ": " + e.what());
        }
    }
    for (int64_t v = std::max(current, known) + 1; v <= target; ++v) {
        if (v == 18)
            reduceAxesToInput(*model.mutable_graph());
        if (v == 20)
            renameGridSampleModes(*model.mutable_graph());
        if (v == 21)
            refuseChanged(model.graph(), "GroupNormalization", 21);
    }
    opset = defaultOpset(model);
    if (!opset) {
        opset = model.add_opset_import();
        opset->set_domain("");
    }
    opset->set_version(target);
    model.set_ir_version(std::max<int64_t>(model.ir_version(), irVersionForOpset(target)));
}

} // namespace qs
