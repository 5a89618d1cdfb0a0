#include "graph/value_readers.h"

#include <algorithm>

namespace qs {

ValueReaders valueReaders(const Model& model)
{
    ValueReaders readers;
    for (size_t n = 0; n < model.nodes.size(); ++n)
        for (size_t i = 0; i < model.nodes[n].inputs.size(); ++i)
            if (!model.nodes[n].inputs[i].empty())
                readers[model.nodes[n].inputs[i]].emplace_back(n, i);
    return readers;
}

size_t readerCount(const ValueReaders& readers, const std::string& value)
{
    const auto r = readers.find(value);
    return r == readers.end() ? 0 : r->second.size();
}

bool isGraphOutput(const Model& model, const std::string& value)
{
    return std::any_of(model.outputs.begin(), model.outputs.end(), [&](const ValueInfo& v) { return v.name == value; });
}

} // namespace qs
