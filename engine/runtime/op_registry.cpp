#include "runtime/op_registry.h"

#include <algorithm>
#include <set>

namespace qs {

const Tensor& KernelContext::input(size_t i) const
{
    if (!hasInput(i))
        fail("input " + std::to_string(i) + " is required but absent");
    return *inputs_[i];
}

const Tensor& KernelContext::floatInput(size_t i) const
{
    const Tensor& t = input(i);
    if (t.dtype() != DType::F32)
        fail("input " + std::to_string(i) + " must be float32, not " + std::string(dtypeName(t.dtype())));
    return t;
}

void KernelContext::setOutput(size_t i, Tensor tensor)
{
    if (i >= outputs_.size()) {
        // An optional trailing output the node does not list: nobody reads it.
        return;
    }
    outputs_[i] = std::move(tensor);
}

void KernelContext::setPlacedOutput()
{
    if (!placement_ || outputs_.empty())
        fail("wrote a placed output without a placement");
    outputs_[0] = Tensor::borrow(DType::F32, placement_->shape, placement_->data, placement_->storage);
    placedOutput_ = true;
}

const Attribute* KernelContext::typedAttribute(std::string_view name, Attribute::Kind kind, const char* kindName) const
{
    const Attribute* a = node_.attribute(name);
    if (a && a->kind != kind)
        fail("attribute '" + std::string(name) + "' must be " + kindName);
    return a;
}

int64_t KernelContext::intAttribute(std::string_view name, int64_t fallback) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Int, "an int");
    return a ? a->i : fallback;
}

int64_t KernelContext::requiredIntAttribute(std::string_view name) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Int, "an int");
    if (!a)
        fail("attribute '" + std::string(name) + "' is required");
    return a->i;
}

float KernelContext::floatAttribute(std::string_view name, float fallback) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Float, "a float");
    return a ? a->f : fallback;
}

std::string KernelContext::stringAttribute(std::string_view name, std::string_view fallback) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::String, "a string");
    return a ? a->s : std::string(fallback);
}

std::vector<int64_t> KernelContext::intsAttribute(std::string_view name, std::vector<int64_t> fallback) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Ints, "a list of ints");
    return a ? a->ints : std::move(fallback);
}

std::optional<std::vector<int64_t>> KernelContext::optionalIntsAttribute(std::string_view name) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Ints, "a list of ints");
    if (!a)
        return std::nullopt;
    return a->ints;
}

std::vector<float> KernelContext::floatsAttribute(std::string_view name, std::vector<float> fallback) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Floats, "a list of floats");
    return a ? a->floats : std::move(fallback);
}

std::optional<Tensor> KernelContext::tensorAttribute(std::string_view name) const
{
    const Attribute* a = typedAttribute(name, Attribute::Kind::Tensor, "a tensor");
    if (!a)
        return std::nullopt;
    return a->tensor;
}

std::string KernelContext::describe() const
{
    std::string s = "node ";
    if (node_.name.empty()) {
        s += '#';
        s += std::to_string(nodeIndex_);
    } else {
        s += '\'';
        s += node_.name;
        s += '\'';
    }
    s += " (";
    s += node_.opType;
    s += ')';
    return s;
}

void KernelContext::fail(const std::string& problem) const
{
    throw Error(describe() + ": " + problem);
}

namespace {
std::string_view canonicalDomain(std::string_view domain)
{
    return domain == "ai.onnx" ? std::string_view{} : domain;
}
} // namespace

const OpKernelEntry* findOpKernel(std::string_view domain, std::string_view opType, int64_t opset)
{
    domain = canonicalDomain(domain);
    for (const OpKernelEntry& e : opKernelTable())
        if (e.opType == opType && e.domain == domain && opset >= e.sinceOpset && opset <= e.untilOpset)
            return &e;
    return nullptr;
}

int64_t modelOpset(const Model& model, std::string_view domain)
{
    domain = canonicalDomain(domain);
    for (const auto& [d, version] : model.opsetImports)
        if (canonicalDomain(d) == domain)
            return version;
    throw Error("the model does not import an opset for domain '" + std::string(domain.empty() ? "ai.onnx" : domain) +
                "'");
}

std::vector<std::string> unsupportedOps(const Model& model)
{
    std::set<std::string> missing;
    for (const OpTypeUse& use : model.opTypes()) {
        const std::string_view domain = canonicalDomain(use.domain);
        const std::string name = domain.empty() ? use.opType : std::string(domain) + ":" + use.opType;
        int64_t opset = -1;
        for (const auto& [d, version] : model.opsetImports)
            if (canonicalDomain(d) == domain)
                opset = version;
        if (opset < 0) {
            missing.insert(name + " (no opset imported for its domain)");
            continue;
        }
        if (findOpKernel(domain, use.opType, opset))
            continue;
        const auto table = opKernelTable();
        const bool known = std::any_of(table.begin(), table.end(), [&](const OpKernelEntry& e) {
            return e.opType == use.opType && e.domain == domain;
        });
        missing.insert(known ? name + " (opset " + std::to_string(opset) + ")" : name);
    }
    return {missing.begin(), missing.end()};
}

} // namespace qs
