#include "graph/model.h"

#include <algorithm>

namespace qs {

std::string Dim::toString() const
{
    if (size)
        return std::to_string(*size);
    return symbol.empty() ? "?" : symbol;
}

std::string ValueInfo::toString() const
{
    std::string text = typeName.empty() ? "?" : typeName;
    if (!shape)
        return dtype ? text + "[?]" : text;
    text += '[';
    for (size_t i = 0; i < shape->size(); ++i) {
        if (i)
            text += ", ";
        text += (*shape)[i].toString();
    }
    return text + ']';
}

const Attribute* Node::attribute(std::string_view attributeName) const
{
    for (const Attribute& a : attributes)
        if (a.name == attributeName)
            return &a;
    return nullptr;
}

int64_t Node::intAttribute(std::string_view attributeName, int64_t fallback) const
{
    const Attribute* a = attribute(attributeName);
    if (!a)
        return fallback;
    if (a->kind != Attribute::Kind::Int)
        throw Error("node '" + name + "' (" + opType + "): attribute '" + std::string(attributeName) +
                    "' should be an integer");
    return a->i;
}

void Model::addInitializer(std::string name, qs::Tensor tensor)
{
    if (initializerIndex_.contains(name))
        throw Error(sourcePath.string() + ": initializer '" + name + "' is defined twice");
    initializerIndex_.emplace(name, initializers_.size());
    initializers_.push_back({std::move(name), std::move(tensor)});
}

void Model::addSubgraphWeight(std::string name, qs::Tensor tensor)
{
    subgraphWeights_.insert(name);
    addInitializer(std::move(name), std::move(tensor));
}

const Model& Model::scopeGraph(size_t scope) const
{
    if (scope == 0)
        return *this;
    if (scope > subgraphs.size() || !subgraphs[scope - 1].graph)
        throw Error(sourcePath.string() + ": scope " + std::to_string(scope) + " is not a subgraph of the model (it has " +
                    std::to_string(subgraphs.size()) + ")");
    return *subgraphs[scope - 1].graph;
}

std::string Model::scopePath(size_t scope) const
{
    if (scope == 0)
        return {};
    if (scope > subgraphs.size())
        throw Error(sourcePath.string() + ": scope " + std::to_string(scope) + " is not a subgraph of the model (it has " +
                    std::to_string(subgraphs.size()) + ")");
    return subgraphs[scope - 1].modulePath;
}

void Model::replaceInitializer(std::string_view name, qs::Tensor tensor)
{
    const auto it = initializerIndex_.find(std::string(name));
    if (it == initializerIndex_.end())
        throw Error(sourcePath.string() + ": no initializer '" + std::string(name) + "' to replace");
    initializers_[it->second].tensor = std::move(tensor);
    replaced_.insert(std::string(name));
}

size_t Model::removeInitializers(const std::unordered_set<std::string>& names)
{
    std::vector<NamedTensor> kept;
    kept.reserve(initializers_.size());
    for (NamedTensor& t : initializers_)
        if (!names.contains(t.name))
            kept.push_back(std::move(t));
    const size_t removed = initializers_.size() - kept.size();
    for (const std::string& name : names)
        subgraphWeights_.erase(name);
    initializers_ = std::move(kept);
    initializerIndex_.clear();
    for (size_t i = 0; i < initializers_.size(); ++i)
        initializerIndex_.emplace(initializers_[i].name, i);
    return removed;
}

const qs::Tensor* Model::initializer(std::string_view name) const
{
    const auto it = initializerIndex_.find(std::string(name));
    return it == initializerIndex_.end() ? nullptr : &initializers_[it->second].tensor;
}

std::vector<OpTypeUse> Model::opTypes() const
{
    std::map<std::pair<std::string, std::string>, size_t> counts;
    for (const Node& n : nodes)
        ++counts[{n.domain, n.opType}];
    std::vector<OpTypeUse> uses;
    uses.reserve(counts.size());
    for (const auto& [key, count] : counts)
        uses.push_back({key.first, key.second, count});
    return uses;
}

int64_t Model::parameterCount() const
{
    int64_t total = 0;
    for (const NamedTensor& t : initializers_)
        total += t.tensor.numel();
    return total;
}

} // namespace qs
