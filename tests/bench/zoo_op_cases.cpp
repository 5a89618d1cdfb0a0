#include "zoo_op_cases.h"

#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "io/model_loader.h"
#include "io/synthetic_data.h"
#include "runtime/interpreter.h"

namespace qs::bench {

namespace {

// The seed of the model's inputs and of every case's activations.
constexpr uint64_t kSeed = 20261126;

bool isTimedOp(const Node& node)
{
    return (node.domain.empty() || node.domain == "ai.onnx") &&
           (node.opType == "Conv" || node.opType == "Gemm" || node.opType == "MatMul");
}

// Which nodes ran (a node folded into a Conv gets no events) and the input
// and output shapes of those that did, as a plain inference run has them.
class ShapeRecorder final : public NodeObserver {
public:
    explicit ShapeRecorder(size_t nodes) : ran(nodes, false), inputs(nodes), output(nodes) {}

    bool needsEveryNode() const override { return false; } // fold as inference does
    void beforeNode(NodeEvent& event) override
    {
        ran[event.nodeIndex] = true;
        for (const Tensor& t : event.inputs)
            inputs[event.nodeIndex].push_back(t.shape());
    }
    void afterNode(NodeEvent& event) override
    {
        if (!event.outputs.empty())
            output[event.nodeIndex] = event.outputs[0].shape();
    }

    std::vector<bool> ran;
    std::vector<std::vector<Shape>> inputs;
    std::vector<Shape> output;
};

// For each node, the nodes folded into it: those that did not run (they get no
// events), each given to the node whose run wrote its inputs, the latest of
// them when there are two (a residual Add folds into the later of its two
// Convs; its other operand exists before that Conv runs).
std::vector<std::vector<size_t>> foldedNodes(const Model& m, const std::vector<bool>& ran)
{
    std::vector<std::vector<size_t>> folded(m.nodes.size());
    std::map<std::string, size_t> writtenBy; // value -> the node whose run wrote it
    for (size_t n = 0; n < m.nodes.size(); ++n) {
        size_t owner = n;
        if (!ran[n]) {
            std::optional<size_t> latest;
            for (const std::string& in : m.nodes[n].inputs)
                if (auto it = writtenBy.find(in); it != writtenBy.end())
                    latest = std::max(latest.value_or(0), it->second);
            if (!latest)
                continue; // in no run we saw
            owner = *latest;
            folded[owner].push_back(n);
        }
        for (const std::string& out : m.nodes[n].outputs)
            writtenBy[out] = owner;
    }
    return folded;
}

std::string attributeText(const Attribute& a)
{
    std::ostringstream s;
    s << a.name << '=';
    switch (a.kind) {
    case Attribute::Kind::Int:
        s << a.i;
        break;
    case Attribute::Kind::Float:
        s << a.f;
        break;
    case Attribute::Kind::Ints:
        for (int64_t v : a.ints)
            s << v << ',';
        break;
    case Attribute::Kind::Floats:
        for (float v : a.floats)
            s << v << ',';
        break;
    default:
        s << a.s;
    }
    return s.str();
}

std::string joined(const std::vector<int64_t>& v, const char* separator)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i)
            s += separator;
        s += std::to_string(v[i]);
    }
    return s;
}

std::string compactShape(const Shape& shape)
{
    std::string s = "[";
    s += joined(shape, ",");
    s += ']';
    return s;
}

std::vector<int64_t> intsOr(const Node& node, const char* name, std::vector<int64_t> fallback)
{
    const Attribute* a = node.attribute(name);
    return a && a->kind == Attribute::Kind::Ints && !a->ints.empty() ? a->ints : fallback;
}

// What a table row says of a case: op, window, shapes, folded nodes.
std::string summaryOf(const OpCase& c, const std::vector<Shape>& inputShapes, const std::vector<bool>& constant,
                      const Shape& outputShape)
{
    const Node& op = c.model.nodes.front();
    std::string s = op.opType;
    if (op.opType == "Conv") {
        const Shape& w = inputShapes[1];
        const Shape kernel(w.begin() + 2, w.end());
        const int64_t group = op.intAttribute("group", 1);
        s += " " + joined(kernel, "x");
        const std::vector<int64_t> ones(kernel.size(), 1);
        if (auto strides = intsOr(op, "strides", ones); strides != ones)
            s += " s" + joined(strides, "x");
        if (auto dilations = intsOr(op, "dilations", ones); dilations != ones)
            s += " d" + joined(dilations, "x");
        if (group > 1) {
            s += group == inputShapes[0][1] && group == w[0] ? " dw" : " g";
            s += std::to_string(group);
        }
        s += " " + compactShape(inputShapes[0]) + "->" + compactShape(outputShape);
    } else {
        const bool transB = op.opType == "Gemm" && op.intAttribute("transB", 0) != 0;
        s += " " + compactShape(inputShapes[0]) + "x" + compactShape(inputShapes[1]) + (transB ? "^T" : "");
        if (!constant[1])
            s += " (B computed)";
        if (op.opType == "Gemm" && inputShapes.size() > 2 && !inputShapes[2].empty())
            s += " +C";
    }
    for (size_t i = 1; i < c.model.nodes.size(); ++i)
        s += " +" + c.model.nodes[i].opType;
    return s;
}

} // namespace

std::vector<OpCase> zooOpCases(const std::filesystem::path& path, int64_t batch)
{
    const std::string source = path.string();
    Model model = loadModel(path);
    std::mt19937_64 random(kSeed);
    std::map<std::string, Tensor> inputs;
    for (const ValueInfo& input : model.inputs)
        inputs[input.name] = syntheticTensor(input, syntheticShape(input, std::nullopt, 1, source, "fixed shapes"),
                                             syntheticIdBound(model, input.name), random);
    const Interpreter interpreter(std::move(model));
    const Model& m = interpreter.model();
    ShapeRecorder recorder(m.nodes.size());
    RunOptions options;
    options.observer = &recorder;
    interpreter.run(inputs, options);

    const std::vector<std::vector<size_t>> folded = foldedNodes(m, recorder.ran);
    std::vector<OpCase> cases;
    std::map<std::string, size_t> byKey;
    for (size_t n = 0; n < m.nodes.size(); ++n) {
        if (!recorder.ran[n] || !isTimedOp(m.nodes[n]))
            continue;
        std::vector<size_t> group{n};
        group.insert(group.end(), folded[n].begin(), folded[n].end());

        OpCase c;
        c.opType = m.nodes[n].opType;
        c.model.format = "onnx";
        c.model.irVersion = m.irVersion;
        c.model.opsetImports = m.opsetImports;
        std::string key;
        std::set<std::string> known; // names given as graph inputs or initializers
        std::set<std::string> inside;
        std::vector<Shape> opInputShapes;
        std::vector<bool> opInputConstant;
        for (size_t g : group) {
            const Node& node = m.nodes[g];
            c.model.nodes.push_back(node);
            key += node.opType + "(";
            for (const Attribute& a : node.attributes)
                key += attributeText(a) + ";";
            for (size_t i = 0; i < node.inputs.size(); ++i) {
                const std::string& name = node.inputs[i];
                Shape shape;
                bool constant = false;
                if (name.empty() || inside.contains(name)) {
                    // absent, or made inside the group
                } else if (const Tensor* t = m.initializer(name)) {
                    shape = t->shape();
                    constant = true;
                    if (known.insert(name).second)
                        c.model.addInitializer(name, *t);
                } else {
                    // An activation: the op's own inputs as it saw them; a residual
                    // addend has the op's output shape (else it would not fold).
                    shape = g == n ? recorder.inputs[n].at(i) : recorder.output[n];
                    if (!shape.empty())
                        shape[0] *= batch;
                    if (known.insert(name).second) {
                        ValueInfo info{name, DType::F32, "float32", std::vector<Dim>{}};
                        for (int64_t d : shape)
                            info.shape->push_back(Dim::fixed(d));
                        c.model.inputs.push_back(info);
                    }
                }
                if (g == n) {
                    opInputShapes.push_back(shape);
                    opInputConstant.push_back(constant);
                }
                key += (constant ? "w" : "x") + compactShape(shape) + ";";
            }
            key += ")";
            inside.insert(node.outputs.begin(), node.outputs.end());
        }
        if (auto it = byKey.find(key); it != byKey.end()) {
            ++cases[it->second].count;
            continue;
        }
        const Node& last = c.model.nodes.back();
        c.model.outputs.push_back(ValueInfo{last.outputs.at(0), DType::F32, "float32", std::nullopt});
        Shape outputShape = recorder.output[n];
        if (!outputShape.empty())
            outputShape[0] *= batch;
        c.summary = summaryOf(c, opInputShapes, opInputConstant, outputShape);
        std::normal_distribution<float> normal;
        for (const ValueInfo& input : c.model.inputs) {
            Shape shape;
            for (const Dim& d : *input.shape)
                shape.push_back(*d.size);
            Tensor t = Tensor::uninitialized(DType::F32, shape);
            for (float& v : t.mutableValues<float>())
                v = normal(random);
            c.activations.push_back(std::move(t));
        }
        byKey[key] = cases.size();
        cases.push_back(std::move(c));
    }
    return cases;
}

} // namespace qs::bench
