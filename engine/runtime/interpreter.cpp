#include "runtime/interpreter.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "runtime/ops/control_flow.h"

namespace qs {

namespace {

std::string joinNames(const std::vector<std::string>& names)
{
    std::string s;
    for (const std::string& n : names)
        s += (s.empty() ? "" : ", ") + n;
    return s;
}

void checkInputAgainstDeclaration(const ValueInfo& info, const Tensor& t)
{
    if (info.dtype && *info.dtype != t.dtype())
        throw Error("input '" + info.name + "': expected " + std::string(dtypeName(*info.dtype)) + ", got " +
                    std::string(dtypeName(t.dtype())));
    if (!info.shape)
        return;
    const auto& dims = *info.shape;
    bool ok = dims.size() == size_t(t.rank());
    for (size_t i = 0; ok && i < dims.size(); ++i)
        ok = !dims[i].isFixed() || *dims[i].size == t.dim(int(i));
    if (!ok)
        throw Error("input '" + info.name + "': expected shape " + info.toString() + ", got " +
                    shapeToString(t.shape()));
}

// The bf16/fp16 initializers a model that asks for it (Model::widenHalfInitializers)
// gets widened to float32 when the interpreter is built: those some node reads
// other than as a Gemm's B. A Gemm widens its B a strip of columns at a time
// (ops::gemm), so a language model's projections stay as mapped.
std::unordered_set<std::string> halfInitializersToWiden(const Model& model)
{
    std::unordered_set<std::string> half;
    for (const NamedTensor& init : model.initializers())
        if (init.tensor.dtype() == DType::F16 || init.tensor.dtype() == DType::BF16)
            half.insert(init.name);
    std::unordered_set<std::string> widened;
    for (const Node& node : model.nodes)
        for (size_t i = 0; i < node.inputs.size(); ++i)
            if (half.contains(node.inputs[i]) && !(node.opType == "Gemm" && node.domain.empty() && i == 1))
                widened.insert(node.inputs[i]);
    return widened;
}

bool isDefaultDomain(const Node& node)
{
    return node.domain.empty() || node.domain == "ai.onnx";
}

} // namespace

Interpreter::Interpreter(Model model) : model_(std::move(model))
{
    size_t nextScope = 0;
    build(nextScope);
}

Interpreter::Interpreter(Model model, size_t& nextScope) : model_(std::move(model))
{
    build(nextScope);
}

void Interpreter::build(size_t& nextScope)
{
    scope_ = nextScope++;
    if (model_.weightsOnly)
        throw Error("model '" + model_.sourcePath.string() + "' has no graph (a weights-only checkpoint) to run");
    const std::vector<std::string> missing = unsupportedOps(model_);
    if (!missing.empty())
        throw Error("model '" + model_.sourcePath.string() + "' uses ops the runtime lacks: " + joinNames(missing));

    std::unordered_map<std::string, int> ids;
    auto idOf = [&](const std::string& name) {
        auto [it, inserted] = ids.try_emplace(name, int(valueNames_.size()));
        if (inserted)
            valueNames_.push_back(name);
        return it->second;
    };
    std::vector<bool> defined;
    auto define = [&](int id) {
        if (size_t(id) >= defined.size())
            defined.resize(size_t(id) + 1, false);
        defined[size_t(id)] = true;
    };
    const std::unordered_set<std::string> widened =
        model_.widenHalfInitializers ? halfInitializersToWiden(model_) : std::unordered_set<std::string>{};
    for (const NamedTensor& init : model_.initializers()) {
        initializerIds_.push_back(idOf(init.name));
        define(initializerIds_.back());
        initializerValues_.push_back(widened.contains(init.name) ? init.tensor.toFloat32() : init.tensor);
    }
    for (const ValueInfo& in : model_.inputs) {
        graphInputIds_.push_back(idOf(in.name));
        define(graphInputIds_.back());
    }

    plan_.resize(model_.nodes.size());
    for (size_t n = 0; n < model_.nodes.size(); ++n) {
        const Node& node = model_.nodes[n];
        PlannedNode& p = plan_[n];
        p.opset = modelOpset(model_, node.domain);
        p.kernel = findOpKernel(node.domain, node.opType, p.opset);
        for (const std::string& in : node.inputs) {
            if (in.empty()) {
                p.inputs.push_back(-1);
                continue;
            }
            const int id = idOf(in);
            if (size_t(id) >= defined.size() || !defined[size_t(id)])
                throw Error("node '" + node.name + "' (" + node.opType + ") reads '" + in +
                            "', which no earlier node, initializer or graph input produces");
            p.inputs.push_back(id);
        }
        if (hasSubgraphs(node)) {
            subgraphs_.push_back(prepareSubgraphs(model_, node, n, nextScope));
            p.subgraphs = subgraphs_.back().get();
            for (const std::string& outer : p.subgraphs->outerNames) {
                const int id = idOf(outer);
                if (size_t(id) >= defined.size() || !defined[size_t(id)])
                    throw Error("node '" + node.name + "' (" + node.opType + "): a subgraph reads '" + outer +
                                "', which no earlier node, initializer or graph input produces");
                p.inputs.push_back(id);
            }
        }
        for (const std::string& out : node.outputs) {
            const int id = out.empty() ? -1 : idOf(out);
            if (id >= 0)
                define(id);
            p.outputs.push_back(id);
        }
    }
    for (const ValueInfo& out : model_.outputs) {
        auto it = ids.find(out.name);
        if (it == ids.end() || size_t(it->second) >= defined.size() || !defined[size_t(it->second)])
            throw Error("graph output '" + out.name + "' is produced by no node, initializer or input");
        graphOutputIds_.push_back(it->second);
    }

    // Memory plan: a value dies after its last reader, unless it is a graph output.
    std::vector<int> lastUse(valueNames_.size(), -1);
    for (size_t n = 0; n < plan_.size(); ++n) {
        for (int id : plan_[n].inputs)
            if (id >= 0)
                lastUse[size_t(id)] = int(n);
        for (int id : plan_[n].outputs) // an output nobody reads dies at once
            if (id >= 0 && lastUse[size_t(id)] < int(n))
                lastUse[size_t(id)] = int(n);
    }
    for (int id : graphOutputIds_)
        lastUse[size_t(id)] = -1;
    for (size_t id = 0; id < lastUse.size(); ++id)
        if (lastUse[id] >= 0)
            plan_[size_t(lastUse[id])].freeAfter.push_back(int(id));
    planFusion();
    planPlacement();
    memos_ = std::make_unique<KernelMemo[]>(plan_.size());
}

Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter::~Interpreter() = default;

std::vector<int> Interpreter::readerCounts() const
{
    std::vector<int> readers(valueNames_.size(), 0);
    for (const PlannedNode& p : plan_)
        for (int id : p.inputs)
            if (id >= 0)
                ++readers[size_t(id)];
    for (int id : graphOutputIds_)
        ++readers[size_t(id)]; // a graph output is read by the caller
    return readers;
}

void Interpreter::planFusion()
{
    const std::vector<int> readers = readerCounts();
    std::vector<int> producer(valueNames_.size(), -1), lastReader(valueNames_.size(), -1);
    for (size_t n = 0; n < plan_.size(); ++n) {
        for (int id : plan_[n].inputs)
            if (id >= 0)
                lastReader[size_t(id)] = int(n);
        for (int id : plan_[n].outputs)
            if (id >= 0)
                producer[size_t(id)] = int(n);
    }
    std::vector<const Tensor*> initializer(valueNames_.size(), nullptr);
    for (size_t i = 0; i < initializerIds_.size(); ++i)
        initializer[size_t(initializerIds_[i])] = &initializerValues_[i];
    for (int id : graphInputIds_)
        initializer[size_t(id)] = nullptr; // a graph input overrides an initializer

    // endsAt[v]: the Conv whose (possibly folded) run ends in value v.
    std::vector<int> endsAt(valueNames_.size(), -1);
    for (size_t n = 0; n < plan_.size(); ++n)
        if (model_.nodes[n].opType == "Conv" && isDefaultDomain(model_.nodes[n]) && plan_[n].outputs.size() == 1 &&
            plan_[n].outputs[0] >= 0)
            endsAt[size_t(plan_[n].outputs[0])] = int(n);
    auto absorb = [&](size_t conv, size_t n) {
        PlannedNode& c = plan_[conv];
        c.fusedOutput = plan_[n].outputs[0];
        c.absorbed.push_back(n);
        plan_[n].foldedAway = true;
        endsAt[size_t(c.fusedOutput)] = int(conv);
    };

    for (size_t n = 0; n < plan_.size(); ++n) {
        const Node& node = model_.nodes[n];
        PlannedNode& p = plan_[n];
        if (p.foldedAway || !isDefaultDomain(node) || p.inputs.empty() || p.inputs[0] < 0 || p.outputs.size() != 1 ||
            p.outputs[0] < 0)
            continue;

        // A residual Add of a Conv's output and a value that exists before that
        // Conv runs (the later Conv of the two when both operands are Convs').
        if (node.opType == "Add") {
            if (p.inputs.size() != 2 || p.inputs[1] < 0 || p.inputs[0] == p.inputs[1])
                continue;
            int best = -1, addend = -1;
            for (int side = 0; side < 2; ++side) {
                const int x = p.inputs[size_t(side)], y = p.inputs[size_t(1 - side)];
                const int conv = endsAt[size_t(x)];
                if (conv < 0 || readers[size_t(x)] != 1 || plan_[size_t(conv)].fused ||
                    plan_[size_t(conv)].addend >= 0 || producer[size_t(y)] >= conv || conv <= best)
                    continue;
                best = conv;
                addend = y;
            }
            if (best >= 0) {
                plan_[size_t(best)].addend = addend;
                absorb(size_t(best), n);
            }
            continue;
        }

        const int x = p.inputs[0];
        const int from = endsAt[size_t(x)];
        if (from < 0 || plan_[size_t(from)].fused)
            continue;
        PlannedNode& c = plan_[size_t(from)];

        // SiLU as exported: Mul(x, Sigmoid(x)), x read by those two nodes only.
        if (node.opType == "Sigmoid" && readers[size_t(x)] == 2 && readers[size_t(p.outputs[0])] == 1) {
            const int s = p.outputs[0];
            const size_t m = size_t(lastReader[size_t(s)]);
            const Node& mul = model_.nodes[m];
            const std::vector<int>& in = plan_[m].inputs;
            if (mul.opType == "Mul" && isDefaultDomain(mul) && in.size() == 2 &&
                ((in[0] == x && in[1] == s) || (in[0] == s && in[1] == x)) && plan_[m].outputs.size() == 1 &&
                plan_[m].outputs[0] >= 0) {
                c.fused = FusedActivation{FusedActivation::Kind::Swish};
                absorb(size_t(from), n);
                absorb(size_t(from), m);
            }
            continue;
        }
        if (readers[size_t(x)] != 1)
            continue;

        // The activation's parameters, read as its own kernel reads them.
        const KernelContext attributes(node, n, p.opset, {}, {}, nullptr);
        FusedActivation f;
        if (node.opType == "Relu") {
            f.kind = FusedActivation::Kind::Relu;
        } else if (node.opType == "LeakyRelu") {
            f = {FusedActivation::Kind::LeakyRelu, attributes.floatAttribute("alpha", 0.01f), 0};
        } else if (node.opType == "HardSigmoid") {
            f = {FusedActivation::Kind::HardSigmoid, attributes.floatAttribute("alpha", 0.2f),
                 attributes.floatAttribute("beta", 0.5f)};
        } else if (node.opType == "HardSwish") {
            f.kind = FusedActivation::Kind::HardSwish;
        } else if (node.opType == "Sigmoid") {
            f.kind = FusedActivation::Kind::Sigmoid;
        } else if (node.opType == "Clip") {
            f = {FusedActivation::Kind::Clip, std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max()};
            if (p.opset < 11) {
                f.a = attributes.floatAttribute("min", f.a);
                f.b = attributes.floatAttribute("max", f.b);
            } else {
                bool constant = true;
                for (size_t i = 1; i < p.inputs.size() && i < 3; ++i) {
                    if (p.inputs[i] < 0)
                        continue;
                    const Tensor* bound = initializer[size_t(p.inputs[i])];
                    if (!bound || bound->dtype() != DType::F32 || bound->numel() != 1) {
                        constant = false; // computed or malformed bounds: the Clip kernel handles (or reports) them
                        break;
                    }
                    (i == 1 ? f.a : f.b) = bound->values<float>()[0];
                }
                if (!constant)
                    continue;
            }
        } else {
            continue;
        }
        c.fused = f;
        absorb(size_t(from), n);
    }
}

void Interpreter::planPlacement()
{
    const std::vector<int> readers = readerCounts();
    // The node whose (folded) run ends in each value, where its kernel can
    // write into a placement and no residual Add is folded into it.
    std::vector<int> writer(valueNames_.size(), -1);
    for (size_t n = 0; n < plan_.size(); ++n) {
        const PlannedNode& p = plan_[n];
        if (p.foldedAway || !p.kernel->placedOutputShape || p.addend >= 0 || p.outputs.empty())
            continue;
        const int v = p.absorbed.empty() ? p.outputs[0] : p.fusedOutput;
        if (v >= 0)
            writer[size_t(v)] = int(n);
    }
    for (size_t n = 0; n < plan_.size(); ++n) {
        const Node& node = model_.nodes[n];
        PlannedNode& p = plan_[n];
        if (node.opType != "Concat" || !isDefaultDomain(node))
            continue;
        Assembly a{n, std::vector<int>(p.inputs.size(), -1)};
        bool any = false;
        for (size_t i = 0; i < p.inputs.size(); ++i) {
            const int v = p.inputs[i];
            if (v >= 0 && readers[size_t(v)] == 1 && writer[size_t(v)] >= 0) {
                a.writers[i] = writer[size_t(v)];
                any = true;
            }
        }
        if (!any)
            continue;
        p.assembles = int(assemblies_.size());
        for (size_t i = 0; i < a.writers.size(); ++i)
            if (a.writers[i] >= 0) {
                plan_[size_t(a.writers[i])].placedIn = p.assembles;
                plan_[size_t(a.writers[i])].placedSlot = i;
            }
        assemblies_.push_back(std::move(a));
    }
}

std::vector<std::vector<std::string>> Interpreter::freedAfterEachNode() const
{
    std::vector<std::vector<std::string>> out(plan_.size());
    for (size_t n = 0; n < plan_.size(); ++n)
        for (int id : plan_[n].freeAfter)
            out[n].push_back(valueNames_[size_t(id)]);
    return out;
}

std::vector<Tensor> Interpreter::runNode(size_t nodeIndex, std::span<const Tensor> inputs,
                                         const CancellationToken& cancel) const
{
    if (nodeIndex >= plan_.size())
        throw Error("node index " + std::to_string(nodeIndex) + " is out of range: the model has " +
                    std::to_string(plan_.size()) + " nodes");
    const PlannedNode& p = plan_[nodeIndex];
    const Node& node = model_.nodes[nodeIndex];
    if (inputs.size() != node.inputs.size())
        throw Error("node '" + node.name + "' (" + node.opType + ") takes " + std::to_string(node.inputs.size()) +
                    " inputs, got " + std::to_string(inputs.size()));
    std::vector<const Tensor*> inputPtrs(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i)
        if (!node.inputs[i].empty())
            inputPtrs[i] = &inputs[i];
    std::vector<Tensor> outputs(p.outputs.size());
    KernelContext ctx(node, nodeIndex, p.opset, inputPtrs, outputs, &cancel);
    ctx.setMemo(&memos_[nodeIndex]);
    ctx.setSubgraphs(p.subgraphs); // outer-scope values are absent here: a subgraph reading one fails
    p.kernel->kernel(ctx);
    for (size_t o = 0; o < outputs.size(); ++o)
        if (!node.outputs[o].empty() && outputs[o].rawData() == nullptr)
            ctx.fail("the kernel did not produce output " + std::to_string(o) + " ('" + node.outputs[o] + "')");
    return outputs;
}

std::map<std::string, Tensor> Interpreter::run(std::map<std::string, Tensor> inputs, const RunOptions& options) const
{
    std::vector<Tensor> values(valueNames_.size());
    std::vector<bool> held(valueNames_.size(), false);
    std::vector<bool> isInitializer(valueNames_.size(), false);
    for (size_t i = 0; i < initializerIds_.size(); ++i) {
        const size_t id = size_t(initializerIds_[i]);
        values[id] = initializerValues_[i];
        held[id] = true;
        isInitializer[id] = true;
    }
    size_t live = 0;
    for (size_t i = 0; i < graphInputIds_.size(); ++i) {
        const ValueInfo& info = model_.inputs[i];
        auto it = inputs.find(info.name);
        if (it == inputs.end())
            throw Error("input '" + info.name + "' is missing (the model needs " + info.toString() + ")");
        checkInputAgainstDeclaration(info, it->second);
        const size_t id = size_t(graphInputIds_[i]);
        values[id] = std::move(it->second);
        isInitializer[id] = false; // a graph input overrides an initializer of the same name
        held[id] = true;
        ++live;
        inputs.erase(it);
    }
    if (!inputs.empty())
        throw Error("input '" + inputs.begin()->first + "' is not an input of the model");

    const bool fuse = !options.observer || !options.observer->needsEveryNode();
    auto release = [&](const PlannedNode& p) {
        for (int id : p.freeAfter) {
            if (held[size_t(id)] && !isInitializer[size_t(id)]) {
                values[size_t(id)] = Tensor();
                held[size_t(id)] = false;
                --live;
            }
        }
    };
    std::vector<const Tensor*> inputPtrs;
    std::vector<Tensor> outputs;
    std::vector<Tensor> observed;
    std::vector<char> owned;
    // Extremes of the values whose writers gathered them (observer runs only).
    std::vector<std::optional<Range>> extremes(options.observer ? values.size() : 0);
    std::vector<const Range*> inputExtremes;
    std::vector<char> runAnyway(plan_.size(), 0);

    // The Concats whose producers write into their outputs (planPlacement),
    // each set up when the first of those producers runs that knows every
    // input's shape.
    struct Assembled {
        enum class State { Undecided, Ready, Off } state = State::Undecided;
        Tensor output;
        std::vector<OutputPlacement> slots;
        std::vector<char> inPlace;
    };
    std::vector<Assembled> assembled(fuse ? assemblies_.size() : 0);
    // (Node `current`, about to run, reads its inputs through `currentInputs`:
    // a value it reads last may have been handed to the observer.)
    auto assemble = [&](size_t index, size_t current,
                        std::span<const Tensor* const> currentInputs) -> const Assembled& {
        Assembled& s = assembled[index];
        if (s.state != Assembled::State::Undecided)
            return s;
        const Assembly& a = assemblies_[index];
        const PlannedNode& cp = plan_[a.concat];
        s.state = Assembled::State::Off;
        if (options.observer && options.observer->observesNode(scope_, a.concat) && options.observer->readsInputs())
            return s; // the observer reads the Concat's inputs as tensors of their own
        // Every input's shape: the values present, and what each producer yet
        // to run will write (not yet known: a later producer asks again).
        std::vector<Shape> shapes(cp.inputs.size());
        std::vector<const Tensor*> producerInputs;
        for (size_t i = 0; i < cp.inputs.size(); ++i) {
            const int id = cp.inputs[i];
            if (id < 0)
                return s;
            if (held[size_t(id)]) {
                if (values[size_t(id)].dtype() != DType::F32)
                    return s;
                shapes[i] = values[size_t(id)].shape();
                continue;
            }
            const int q = a.writers[i];
            if (q < 0) { // computed later by a node that writes a tensor of its own
                s.state = Assembled::State::Undecided;
                return s;
            }
            const PlannedNode& qp = plan_[size_t(q)];
            producerInputs.assign(qp.inputs.size(), nullptr);
            for (size_t k = 0; k < qp.inputs.size(); ++k) {
                const int in = qp.inputs[k];
                if (in >= 0 && !held[size_t(in)]) {
                    s.state = Assembled::State::Undecided;
                    return s;
                }
                if (in >= 0)
                    producerInputs[k] = size_t(q) == current ? currentInputs[k] : &values[size_t(in)];
            }
            const KernelContext predicted(model_.nodes[size_t(q)], size_t(q), qp.opset, producerInputs, {}, nullptr);
            try {
                shapes[i] = qp.kernel->placedOutputShape(predicted);
            } catch (const Error&) {
                return s; // the producer's own run reports it
            }
        }
        // Concatenated along the images (axis 0) or the channels (axis 1);
        // shapes that do not fit are left to the Concat kernel to report.
        const Attribute* axisAttribute = model_.nodes[a.concat].attribute("axis");
        if (!axisAttribute || axisAttribute->kind != Attribute::Kind::Int || shapes[0].empty())
            return s;
        const int64_t rank = int64_t(shapes[0].size());
        const int64_t axis = axisAttribute->i < 0 ? axisAttribute->i + rank : axisAttribute->i;
        if (axis != 0 && axis != 1)
            return s;
        Shape out = shapes[0];
        out[size_t(axis)] = 0;
        for (const Shape& shape : shapes) {
            if (shape.size() != out.size())
                return s;
            for (size_t d = 0; d < shape.size(); ++d)
                if (int64_t(d) != axis && shape[d] != out[d])
                    return s;
            out[size_t(axis)] += shape[size_t(axis)];
        }
        try {
            if (shapeElementCount(out) == 0)
                return s;
        } catch (const Error&) {
            return s; // too large: the Concat kernel reports it
        }
        int64_t inner = 1;
        for (size_t d = size_t(axis) + 1; d < out.size(); ++d)
            inner *= out[d];
        s.output = Tensor::uninitialized(DType::F32, out);
        float* data = s.output.mutableValues<float>().data();
        const int64_t imageStride = axis == 0 ? inner : out[1] * inner;
        s.slots.resize(shapes.size());
        for (size_t i = 0, offset = 0; i < shapes.size(); offset += size_t(shapes[i][size_t(axis)] * inner), ++i)
            s.slots[i] = {shapes[i], data + offset, imageStride, s.output.storage()};
        s.inPlace.assign(shapes.size(), 0);
        s.state = Assembled::State::Ready;
        return s;
    };
    for (size_t n = 0; n < plan_.size(); ++n) {
        options.cancel.check();
        const PlannedNode& p = plan_[n];
        const Node& node = model_.nodes[n];
        if (fuse && p.foldedAway && !runAnyway[n]) {
            release(p); // its Conv wrote its output
            continue;
        }
        inputPtrs.assign(p.inputs.size(), nullptr);
        for (size_t i = 0; i < p.inputs.size(); ++i)
            if (p.inputs[i] >= 0)
                inputPtrs[i] = &values[size_t(p.inputs[i])];
        outputs.assign(p.outputs.size(), Tensor());

        NodeEvent event;
        // Nodes the observer does not watch run as without one (no copies of their inputs).
        const bool shown = options.observer && options.observer->observesNode(scope_, n);
        if (shown) {
            observed.assign(p.inputs.size(), Tensor());
            owned.assign(p.inputs.size(), 0);
            inputExtremes.assign(p.inputs.size(), nullptr);
            for (size_t i = 0; i < p.inputs.size(); ++i) {
                if (!inputPtrs[i])
                    continue;
                if (const std::optional<Range>& e = extremes[size_t(p.inputs[i])])
                    inputExtremes[i] = &*e;
                // A value this node reads last, once, whose storage nothing
                // else holds (a graph input's caller, an outer scope, a view)
                // is handed to the observer, which may then fake-quantize it
                // in place rather than into a new tensor.
                const int id = p.inputs[i];
                if (!isInitializer[size_t(id)] && values[size_t(id)].storage() &&
                    values[size_t(id)].storage().use_count() == 1 &&
                    std::count(p.inputs.begin(), p.inputs.end(), id) == 1 &&
                    std::find(p.freeAfter.begin(), p.freeAfter.end(), id) != p.freeAfter.end()) {
                    observed[i] = std::move(values[size_t(id)]);
                    owned[i] = 1;
                } else {
                    observed[i] = *inputPtrs[i];
                }
            }
            event.scope = scope_;
            event.nodeIndex = n;
            event.node = &node;
            event.opset = p.opset;
            event.inputs = std::span(observed).first(node.inputs.size()); // not the outer-scope values
            event.ownedInputs = std::span<const char>(owned).first(node.inputs.size());
            event.inputExtremes = std::span<const Range* const>(inputExtremes).first(node.inputs.size());
            event.liveValues = live;
            options.observer->beforeNode(event);
            for (size_t i = 0; i < p.inputs.size(); ++i)
                if (inputPtrs[i])
                    inputPtrs[i] = &observed[i];
        }

        KernelContext ctx(node, n, p.opset, inputPtrs, outputs, &options.cancel);
        ctx.setMemo(&memos_[n]);
        ctx.setSubgraphs(p.subgraphs);
        if (p.subgraphs && options.observer && options.observer->seesSubgraphs())
            ctx.setSubgraphObserver(options.observer);
        const bool folding = fuse && !p.absorbed.empty();
        if (folding && p.fused)
            ctx.setFusedActivation(&*p.fused);
        if (folding && p.addend >= 0)
            ctx.setFusedAddend(&values[size_t(p.addend)]);
        // The value the kernel writes first, if an observer reads its extremes later.
        std::optional<OutputExtremes> gathered;
        int gatheredId = -1;
        if (options.observer && p.kernel->gathersExtremes && !p.outputs.empty())
            gatheredId = folding ? p.fusedOutput : p.outputs[0];
        if (gatheredId >= 0 && options.observer->wantsExtremesOf(valueNames_[size_t(gatheredId)]))
            ctx.setOutputExtremes(&gathered.emplace());
        // Its output straight into a later Concat's, or that Concat's output with them in it.
        if (p.placedIn >= 0 && !assembled.empty() && (!shown || !options.observer->readsOutputs()))
            if (const Assembled& a = assemble(size_t(p.placedIn), n, inputPtrs); a.state == Assembled::State::Ready)
                ctx.setOutputPlacement(&a.slots[p.placedSlot]);
        if (p.assembles >= 0 && !assembled.empty() &&
            assembled[size_t(p.assembles)].state == Assembled::State::Ready)
            ctx.setAssembledOutput(&assembled[size_t(p.assembles)].output, assembled[size_t(p.assembles)].inPlace);
        p.kernel->kernel(ctx);
        if (ctx.wrotePlacedOutput())
            assembled[size_t(p.placedIn)].inPlace[p.placedSlot] = 1;
        if (p.assembles >= 0 && !assembled.empty()) { // its output is the Concat's own now (ownership as usual)
            assembled[size_t(p.assembles)] = Assembled{};
            assembled[size_t(p.assembles)].state = Assembled::State::Off;
        }
        // A Conv that could not take the folded nodes (an Add that broadcasts)
        // ran alone; they run after it as the model states them.
        const bool folded = folding && !ctx.fusionDeclined();
        if (folding && !folded)
            for (size_t a : p.absorbed)
                runAnyway[a] = true;

        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const int id = folded ? p.fusedOutput : p.outputs[o];
            if (id < 0)
                continue;
            if (outputs[o].rawData() == nullptr)
                ctx.fail("the kernel did not produce output " + std::to_string(o) + " ('" + node.outputs[o] + "')");
            if (!held[size_t(id)] || isInitializer[size_t(id)])
                ++live;
            isInitializer[size_t(id)] = false;
            held[size_t(id)] = true;
            values[size_t(id)] = outputs[o];
        }
        // Declined, the fusion wrote the Conv's own output, not the value asked about.
        if (gathered && folded == folding && outputs[0].dtype() == DType::F32)
            extremes[size_t(gatheredId)] = gathered->of(outputs[0].numel());
        if (shown) {
            event.outputs = outputs;
            event.liveValues = live;
            options.observer->afterNode(event);
            // An observer may replace a present output (bias correction of a layer
            // without a bias adds it here): the run continues with the replacement.
            for (size_t o = 0; o < p.outputs.size(); ++o) {
                const int id = folded ? p.fusedOutput : p.outputs[o];
                if (id >= 0 && outputs[o].rawData() != values[size_t(id)].rawData()) {
                    values[size_t(id)] = outputs[o];
                    extremes[size_t(id)].reset();
                }
            }
        }
        release(p);
    }

    std::map<std::string, Tensor> result;
    for (size_t i = 0; i < graphOutputIds_.size(); ++i)
        result[model_.outputs[i].name] = values[size_t(graphOutputIds_[i])];
    return result;
}

} // namespace qs
