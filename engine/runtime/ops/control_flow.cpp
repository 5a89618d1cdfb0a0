#include "runtime/ops/control_flow.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_set>

#include "io/onnx_subgraph.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_cast.h"

namespace qs {

Subgraph::Subgraph() = default;
Subgraph::Subgraph(Subgraph&&) noexcept = default;
Subgraph::~Subgraph() = default;

const Subgraph* NodeSubgraphs::find(std::string_view attribute) const
{
    for (const Subgraph& g : graphs)
        if (g.attribute == attribute)
            return &g;
    return nullptr;
}

bool hasSubgraphs(const Node& node)
{
    for (const Attribute& a : node.attributes)
        if (a.kind == Attribute::Kind::Graph)
            return true;
    return false;
}

namespace {

std::string describeNode(const Node& node, size_t nodeIndex)
{
    return "node " + (node.name.empty() ? "#" + std::to_string(nodeIndex) : "'" + node.name + "'") + " (" +
           node.opType + ")";
}

// The subgraph as a model of its own (io/onnx_subgraph.h), ready to run: its
// outer-scope names are graph inputs after its own, so the interpreter's plan
// sees every name defined.
Subgraph loadSubgraph(const Model& parent, const std::string& bytes, const std::string& where, size_t& nextScope)
{
    OnnxSubgraph loaded = loadOnnxSubgraph(parent, bytes, where);
    Subgraph g;
    g.formalInputs = loaded.formalInputs;
    if (const std::vector<std::string> missing = unsupportedOps(loaded.model); !missing.empty()) {
        std::string list;
        for (const std::string& op : missing)
            list += (list.empty() ? "" : ", ") + op;
        throw Error(where + " uses ops the runtime lacks: " + list);
    }
    g.graph = std::make_unique<const Interpreter>(std::move(loaded.model), nextScope);
    return g;
}

bool truthy(const KernelContext& ctx, const Tensor& t, const char* what)
{
    if (t.numel() != 1)
        ctx.fail(std::string(what) + " must hold one value, it has shape " + shapeToString(t.shape()));
    return castTensor(t, DType::Bool).values<uint8_t>()[0] != 0;
}

template <class T> Tensor scalar(DType dtype, T value)
{
    Tensor t(dtype, {});
    t.mutableValues<T>()[0] = value;
    return t;
}

// Runs one subgraph of the node on its formal inputs (outer-scope values come
// from the node's trailing inputs); returns its outputs in order.
std::vector<Tensor> runSubgraph(const KernelContext& ctx, const Subgraph& g, std::vector<Tensor> formal,
                                const std::string& when)
{
    const Model& model = g.graph->model();
    if (formal.size() != g.formalInputs)
        ctx.fail("its " + g.attribute + " takes " + std::to_string(g.formalInputs) + " inputs, the node gives it " +
                 std::to_string(formal.size()));
    std::map<std::string, Tensor> inputs;
    for (size_t i = 0; i < formal.size(); ++i)
        inputs[model.inputs[i].name] = std::move(formal[i]);
    const NodeSubgraphs& all = *ctx.subgraphs();
    for (size_t k = 0; k < g.outerValues.size(); ++k) {
        const std::string& name = all.outerNames[g.outerValues[k]];
        const Tensor* value = ctx.optionalInput(ctx.node().inputs.size() + g.outerValues[k]);
        if (!value)
            ctx.fail("its " + g.attribute + " reads '" + name +
                     "' from the enclosing graph, which is not available when the node runs alone");
        inputs[name] = *value;
    }
    RunOptions options;
    if (ctx.cancellation())
        options.cancel = *ctx.cancellation();
    options.observer = ctx.subgraphObserver(); // calibration and fake-quant see the body's layers
    std::map<std::string, Tensor> outputs;
    try {
        outputs = g.graph->run(std::move(inputs), options);
    } catch (const Cancelled&) {
        throw;
    } catch (const Error& e) {
        ctx.fail(g.attribute + when + ": " + e.what());
    }
    std::vector<Tensor> result;
    result.reserve(model.outputs.size());
    for (const ValueInfo& out : model.outputs)
        result.push_back(outputs.at(out.name));
    return result;
}

const Subgraph& requiredSubgraph(const KernelContext& ctx, std::string_view attribute)
{
    const Subgraph* g = ctx.subgraphs() ? ctx.subgraphs()->find(attribute) : nullptr;
    if (!g)
        ctx.fail("its subgraph attribute '" + std::string(attribute) + "' is missing");
    return *g;
}

void checkOutputCount(const KernelContext& ctx, const Subgraph& g, size_t expected, const std::string& why)
{
    const size_t actual = g.graph->model().outputs.size();
    if (actual != expected)
        ctx.fail("its " + g.attribute + " has " + std::to_string(actual) + " outputs, " + std::to_string(expected) +
                 " expected (" + why + ")");
}

// Row-major view of a shape around one axis: outer * extent * inner elements.
struct AxisSplit {
    int64_t outer = 1, extent = 1, inner = 1;
};
AxisSplit splitAt(const Shape& shape, int axis)
{
    AxisSplit s;
    for (int d = 0; d < int(shape.size()); ++d)
        (d < axis ? s.outer : d == axis ? s.extent : s.inner) *= shape[size_t(d)];
    return s;
}

// Element `index` along `axis`: the tensor without that axis (borrowed when contiguous).
Tensor sliceAt(const Tensor& t, int axis, int64_t index)
{
    Shape shape = t.shape();
    const AxisSplit s = splitAt(shape, axis);
    shape.erase(shape.begin() + axis);
    const size_t element = dtypeSize(t.dtype());
    const size_t innerBytes = size_t(s.inner) * element;
    const auto* source = static_cast<const std::byte*>(t.rawData());
    if (s.outer == 1 && t.storage())
        return Tensor::borrow(t.dtype(), std::move(shape), source + size_t(index) * innerBytes, t.storage());
    Tensor out = Tensor::uninitialized(t.dtype(), std::move(shape));
    auto* target = static_cast<std::byte*>(out.mutableRawData());
    for (int64_t o = 0; o < s.outer; ++o)
        std::memcpy(target + size_t(o) * innerBytes, source + (size_t(o * s.extent + index)) * innerBytes, innerBytes);
    return out;
}

// The parts (all of one shape and type) stacked along a new axis `axis`;
// `count` slots, slots past parts.size() zero (Scan-8's short sequences).
Tensor stackAlong(const std::vector<Tensor>& parts, int axis, int64_t count)
{
    Shape shape = parts.front().shape();
    shape.insert(shape.begin() + axis, count);
    Tensor out(parts.front().dtype(), shape);
    const AxisSplit s = splitAt(shape, axis);
    const size_t innerBytes = size_t(s.inner) * dtypeSize(out.dtype());
    auto* target = static_cast<std::byte*>(out.mutableRawData());
    for (size_t p = 0; p < parts.size(); ++p) {
        const auto* source = static_cast<const std::byte*>(parts[p].rawData());
        for (int64_t o = 0; o < s.outer; ++o)
            std::memcpy(target + size_t(o * count + int64_t(p)) * innerBytes, source + size_t(o) * innerBytes,
                        innerBytes);
    }
    return out;
}

// The per-iteration values of the scan outputs, checked as they arrive.
class ScanCollector {
public:
    ScanCollector(const KernelContext& ctx, size_t count) : ctx_(ctx), parts_(count) {}

    void add(size_t k, Tensor value)
    {
        std::vector<Tensor>& parts = parts_[k];
        if (!parts.empty() && (value.dtype() != parts.front().dtype() || value.shape() != parts.front().shape()))
            ctx_.fail("scan output " + std::to_string(k) + " is " + std::string(dtypeName(value.dtype())) +
                      shapeToString(value.shape()) + " in iteration " + std::to_string(parts.size()) + " and " +
                      std::string(dtypeName(parts.front().dtype())) + shapeToString(parts.front().shape()) +
                      " in the first; every iteration must give one shape");
        bytes_ += value.nbytes();
        if (bytes_ > kMaxScanOutputBytes)
            ctx_.fail("its scan outputs would take more than " + std::to_string(kMaxScanOutputBytes >> 30) +
                      " GiB, the runtime's limit");
        parts.push_back(std::move(value));
    }
    std::vector<Tensor>& parts(size_t k) { return parts_[k]; }

private:
    const KernelContext& ctx_;
    std::vector<std::vector<Tensor>> parts_;
    size_t bytes_ = 0;
};

// A scan output of no iterations: [0] and the body's declared shape (unknown dims as 0).
Tensor emptyScanOutput(const KernelContext& ctx, const Subgraph& body, size_t bodyOutput, int axis)
{
    const ValueInfo& info = body.graph->model().outputs[bodyOutput];
    if (!info.dtype)
        ctx.fail("ran no iteration, and its body does not declare the element type of output '" + info.name + "'");
    Shape shape;
    if (info.shape)
        for (const Dim& d : *info.shape)
            shape.push_back(d.isFixed() ? *d.size : 0);
    shape.insert(shape.begin() + std::min<int>(axis, int(shape.size())), 0);
    return Tensor(*info.dtype, shape);
}

int normalizedAxis(const KernelContext& ctx, int64_t axis, int rank, const std::string& what)
{
    if (axis < -rank || axis >= rank)
        ctx.fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return int(axis < 0 ? axis + rank : axis);
}

std::vector<int64_t> perValueAttribute(const KernelContext& ctx, const char* name, size_t count)
{
    std::vector<int64_t> values = ctx.intsAttribute(name, std::vector<int64_t>(count, 0));
    if (values.size() != count)
        ctx.fail("attribute '" + std::string(name) + "' has " + std::to_string(values.size()) + " values, " +
                 std::to_string(count) + " expected");
    return values;
}

// Runs the Scan body over `length` steps: `states` carried, one slice of each
// scan input per step; the per-step outputs go to `collector`.
std::vector<Tensor> scanSteps(const KernelContext& ctx, const Subgraph& body, std::vector<Tensor> states,
                              const std::vector<Tensor>& inputs, const std::vector<int>& axes,
                              const std::vector<int64_t>& directions, int64_t length, ScanCollector& collector)
{
    const size_t n = states.size();
    for (int64_t step = 0; step < length; ++step) {
        ctx.checkCancelled();
        std::vector<Tensor> formal = std::move(states);
        for (size_t j = 0; j < inputs.size(); ++j)
            formal.push_back(sliceAt(inputs[j], axes[j], directions[j] ? length - 1 - step : step));
        std::vector<Tensor> outs = runSubgraph(ctx, body, std::move(formal), " (step " + std::to_string(step) + ")");
        states.assign(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.begin() + long(n)));
        for (size_t k = n; k < outs.size(); ++k)
            collector.add(k - n, std::move(outs[k]));
    }
    return states;
}

} // namespace

std::unique_ptr<NodeSubgraphs> prepareSubgraphs(const Model& model, const Node& node, size_t nodeIndex,
                                                size_t& nextScope)
{
    auto result = std::make_unique<NodeSubgraphs>();
    for (const Attribute& a : node.attributes) {
        if (a.kind != Attribute::Kind::Graph)
            continue;
        const std::string where =
            model.sourcePath.string() + ": " + describeNode(node, nodeIndex) + ", subgraph '" + a.name + "'";
        Subgraph g = loadSubgraph(model, a.s, where, nextScope);
        g.attribute = a.name;
        const std::vector<ValueInfo>& inputs = g.graph->model().inputs;
        for (size_t i = g.formalInputs; i < inputs.size(); ++i) {
            const std::string& name = inputs[i].name;
            auto it = std::find(result->outerNames.begin(), result->outerNames.end(), name);
            g.outerValues.push_back(size_t(it - result->outerNames.begin()));
            if (it == result->outerNames.end())
                result->outerNames.push_back(name);
        }
        result->graphs.push_back(std::move(g));
    }
    return result;
}

namespace ops {

void ifOp(KernelContext& ctx)
{
    const bool condition = truthy(ctx, ctx.input(0), "the condition");
    const Subgraph& branch = requiredSubgraph(ctx, condition ? "then_branch" : "else_branch");
    checkOutputCount(ctx, branch, ctx.outputCount(), "one per output of the node");
    std::vector<Tensor> outs = runSubgraph(ctx, branch, {}, "");
    for (size_t i = 0; i < outs.size(); ++i)
        ctx.setOutput(i, std::move(outs[i]));
}

void loop(KernelContext& ctx)
{
    const Subgraph& body = requiredSubgraph(ctx, "body");
    const size_t explicitInputs = ctx.node().inputs.size();
    if (explicitInputs < 2)
        ctx.fail("needs the inputs M and cond (either may be empty), it has " + std::to_string(explicitInputs));
    const size_t n = explicitInputs - 2;
    if (ctx.outputCount() < n)
        ctx.fail("has " + std::to_string(n) + " loop-carried inputs but only " + std::to_string(ctx.outputCount()) +
                 " outputs");
    const size_t k = ctx.outputCount() - n;
    checkOutputCount(ctx, body, 1 + n + k,
                     "the condition, " + std::to_string(n) + " loop-carried values and " + std::to_string(k) +
                         " scan outputs");

    std::optional<int64_t> tripCount;
    if (const Tensor* m = ctx.optionalInput(0)) {
        if (m->numel() != 1)
            ctx.fail("the trip count M must hold one value, it has shape " + shapeToString(m->shape()));
        tripCount = castTensor(*m, DType::I64).values<int64_t>()[0];
        if (*tripCount < 0)
            ctx.fail("the trip count M is negative (" + std::to_string(*tripCount) + ")");
    }
    const bool conditioned = ctx.hasInput(1);
    bool condition = conditioned ? truthy(ctx, ctx.input(1), "the condition") : true;

    std::vector<Tensor> carried;
    for (size_t i = 0; i < n; ++i) {
        if (!ctx.hasInput(2 + i))
            ctx.fail("loop-carried input " + std::to_string(i) + " is absent (optional states are not supported)");
        carried.push_back(ctx.input(2 + i));
    }
    ScanCollector scans(ctx, k);
    int64_t iteration = 0;
    for (; condition && (!tripCount || iteration < *tripCount); ++iteration) {
        if (iteration >= kMaxLoopIterations)
            ctx.fail("did not stop after " + std::to_string(kMaxLoopIterations) +
                     " iterations, the runtime's limit for one Loop");
        ctx.checkCancelled();
        std::vector<Tensor> formal;
        formal.reserve(2 + n);
        formal.push_back(scalar<int64_t>(DType::I64, iteration));
        formal.push_back(scalar<uint8_t>(DType::Bool, condition ? 1 : 0));
        for (Tensor& t : carried)
            formal.push_back(std::move(t));
        std::vector<Tensor> outs =
            runSubgraph(ctx, body, std::move(formal), " (iteration " + std::to_string(iteration) + ")");
        if (conditioned)
            condition = truthy(ctx, outs[0], "the body's condition output");
        for (size_t i = 0; i < n; ++i)
            carried[i] = std::move(outs[1 + i]);
        for (size_t j = 0; j < k; ++j)
            scans.add(j, std::move(outs[1 + n + j]));
    }
    for (size_t i = 0; i < n; ++i)
        ctx.setOutput(i, std::move(carried[i]));
    for (size_t j = 0; j < k; ++j) {
        if (!ctx.wantsOutput(n + j))
            continue;
        const std::vector<Tensor>& parts = scans.parts(j);
        ctx.setOutput(n + j, parts.empty() ? emptyScanOutput(ctx, body, 1 + n + j, 0)
                                           : stackAlong(parts, 0, int64_t(parts.size())));
    }
}

void scan(KernelContext& ctx)
{
    const Subgraph& body = requiredSubgraph(ctx, "body");
    const bool batched = ctx.opset() < 9; // Scan-8: a batch axis first, sequence_lens as input 0
    const size_t first = batched ? 1 : 0;
    const size_t explicitInputs = ctx.node().inputs.size();
    const int64_t m = ctx.requiredIntAttribute("num_scan_inputs");
    if (m < 1 || size_t(m) + first > explicitInputs)
        ctx.fail("num_scan_inputs is " + std::to_string(m) + ", the node has " + std::to_string(explicitInputs) +
                 " inputs");
    const size_t n = explicitInputs - first - size_t(m);
    if (ctx.outputCount() < n)
        ctx.fail("has " + std::to_string(n) + " state inputs but only " + std::to_string(ctx.outputCount()) +
                 " outputs");
    const size_t k = ctx.outputCount() - n;
    checkOutputCount(ctx, body, n + k, std::to_string(n) + " states and " + std::to_string(k) + " scan outputs");

    std::vector<Tensor> states, inputs;
    for (size_t i = 0; i < n; ++i)
        states.push_back(ctx.input(first + i));
    for (size_t j = 0; j < size_t(m); ++j)
        inputs.push_back(ctx.input(first + n + j));

    if (!batched) {
        const std::vector<int64_t> inAxes = perValueAttribute(ctx, "scan_input_axes", size_t(m));
        const std::vector<int64_t> inDirections = perValueAttribute(ctx, "scan_input_directions", size_t(m));
        const std::vector<int64_t> outAxes = perValueAttribute(ctx, "scan_output_axes", k);
        const std::vector<int64_t> outDirections = perValueAttribute(ctx, "scan_output_directions", k);
        std::vector<int> axes;
        int64_t length = -1;
        for (size_t j = 0; j < size_t(m); ++j) {
            const std::string what = "scan input " + std::to_string(j);
            axes.push_back(normalizedAxis(ctx, inAxes[j], inputs[j].rank(), what + "'s axis"));
            const int64_t extent = inputs[j].dim(axes.back());
            if (length >= 0 && extent != length)
                ctx.fail(what + " has " + std::to_string(extent) + " steps along its scan axis, scan input 0 has " +
                         std::to_string(length));
            length = extent;
        }
        ScanCollector collector(ctx, k);
        states = scanSteps(ctx, body, std::move(states), inputs, axes, inDirections, length, collector);
        for (size_t i = 0; i < n; ++i)
            ctx.setOutput(i, std::move(states[i]));
        for (size_t j = 0; j < k; ++j) {
            std::vector<Tensor>& parts = collector.parts(j);
            if (parts.empty()) {
                ctx.setOutput(n + j, emptyScanOutput(ctx, body, n + j, 0));
                continue;
            }
            if (outDirections[j])
                std::reverse(parts.begin(), parts.end());
            const int axis = normalizedAxis(ctx, outAxes[j], parts.front().rank() + 1,
                                            "scan output " + std::to_string(j) + "'s axis");
            ctx.setOutput(n + j, stackAlong(parts, axis, int64_t(parts.size())));
        }
        return;
    }

    // Scan-8: every state and scan input has the batch first; each batch row is scanned on its own.
    const std::vector<int64_t> directions = perValueAttribute(ctx, "directions", size_t(m));
    if (inputs.front().rank() < 2)
        ctx.fail("scan input 0 must be [batch, sequence, ...], it has shape " + shapeToString(inputs.front().shape()));
    const int64_t batch = inputs.front().dim(0), longest = inputs.front().dim(1);
    if (batch < 1)
        ctx.fail("scan input 0 has an empty batch, shape " + shapeToString(inputs.front().shape()));
    for (const std::vector<Tensor>* list : {&states, &inputs})
        for (const Tensor& t : *list)
            if (t.rank() < (list == &inputs ? 2 : 1) || t.dim(0) != batch || (list == &inputs && t.dim(1) != longest))
                ctx.fail("every state and scan input must share the batch size " + std::to_string(batch) +
                         " (and the scan inputs the sequence length " + std::to_string(longest) + "), one has shape " +
                         shapeToString(t.shape()));
    std::vector<int64_t> lengths(size_t(batch), longest);
    if (const Tensor* lens = ctx.optionalInput(0)) {
        if (lens->numel() != batch)
            ctx.fail("sequence_lens has " + std::to_string(lens->numel()) + " values for a batch of " +
                     std::to_string(batch));
        const Tensor l = castTensor(*lens, DType::I64);
        for (int64_t b = 0; b < batch; ++b) {
            lengths[size_t(b)] = l.values<int64_t>()[size_t(b)];
            if (lengths[size_t(b)] < 0 || lengths[size_t(b)] > longest)
                ctx.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(lengths[size_t(b)]) +
                         ", outside [0, " + std::to_string(longest) + "]");
        }
    }
    std::vector<std::vector<Tensor>> finalStates(n), scanRows(k);
    const std::vector<int> axes(size_t(m), 0);
    for (int64_t b = 0; b < batch; ++b) {
        std::vector<Tensor> rowStates, rowInputs;
        for (const Tensor& t : states)
            rowStates.push_back(sliceAt(t, 0, b));
        for (const Tensor& t : inputs)
            rowInputs.push_back(sliceAt(t, 0, b));
        ScanCollector collector(ctx, k);
        rowStates =
            scanSteps(ctx, body, std::move(rowStates), rowInputs, axes, directions, lengths[size_t(b)], collector);
        for (size_t i = 0; i < n; ++i)
            finalStates[i].push_back(std::move(rowStates[i]));
        for (size_t j = 0; j < k; ++j) {
            const std::vector<Tensor>& parts = collector.parts(j);
            // Zero past the row's length; a row of length 0 is filled in below.
            scanRows[j].push_back(parts.empty() ? Tensor() : stackAlong(parts, 0, longest));
        }
    }
    for (size_t i = 0; i < n; ++i) {
        for (const Tensor& row : finalStates[i])
            if (row.shape() != finalStates[i].front().shape() || row.dtype() != finalStates[i].front().dtype())
                ctx.fail("state " + std::to_string(i) + " ends with different shapes in different batch rows");
        ctx.setOutput(i, stackAlong(finalStates[i], 0, batch));
    }
    for (size_t j = 0; j < k; ++j) {
        std::vector<Tensor>& rows = scanRows[j];
        const auto full = std::find_if(rows.begin(), rows.end(), [](const Tensor& t) { return t.rawData(); });
        const Tensor shaped = full == rows.end() ? emptyScanOutput(ctx, body, n + j, 0) : *full;
        for (Tensor& row : rows) {
            if (!row.rawData())
                row = Tensor(shaped.dtype(), shaped.shape());
            if (row.shape() != shaped.shape() || row.dtype() != shaped.dtype())
                ctx.fail("scan output " + std::to_string(j) + " has different shapes in different batch rows");
        }
        ctx.setOutput(n + j, stackAlong(rows, 0, batch));
    }
}

} // namespace ops
} // namespace qs
