#include "widgets/graph/repeated_blocks.h"

#include <cctype>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "graph/model.h"

namespace qs {

namespace {

bool allDigits(std::string_view s)
{
    if (s.empty())
        return false;
    for (const char c : s)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    return true;
}

// The block prefix and family of a node name, or none when no component is numbered.
struct BlockKey {
    std::string prefix, family;
};

std::optional<BlockKey> blockKey(std::string_view name)
{
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find('/', start);
        if (end == std::string_view::npos)
            end = name.size();
        const std::string_view component = name.substr(start, end - start);
        // The last component is the op (`Conv`, `MatMul_1`): never a block.
        if (end == name.size())
            return std::nullopt;
        size_t number = std::string_view::npos;
        if (allDigits(component))
            number = 0;
        else if (const size_t dot = component.rfind('.');
                 dot != std::string_view::npos && allDigits(component.substr(dot + 1)))
            number = dot + 1;
        if (number != std::string_view::npos) {
            BlockKey key;
            key.prefix = std::string(name.substr(0, end));
            key.family = std::string(name.substr(0, start + number)) + "#";
            return key;
        }
        start = end + 1;
    }
    return std::nullopt;
}

// The structure of nodes [first, first + count): op types and, per input, the
// position inside the block of the node producing it, or -1 (outside).
std::vector<std::string> signature(const Model& model, size_t first, size_t count)
{
    std::unordered_map<std::string, size_t> producedAt;
    std::vector<std::string> sig;
    sig.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        const Node& node = model.nodes[first + i];
        std::string s = node.domain + ":" + node.opType + "(";
        for (const std::string& in : node.inputs) {
            const auto it = producedAt.find(in);
            s += in.empty() ? "_" : it == producedAt.end() ? "-1" : std::to_string(it->second);
            s += ',';
        }
        s += ")";
        sig.push_back(std::move(s));
        for (const std::string& out : node.outputs)
            if (!out.empty())
                producedAt[out] = i;
    }
    return sig;
}

} // namespace

std::string RepeatedRun::label() const
{
    auto last = [](const std::string& prefix) {
        const size_t slash = prefix.rfind('/');
        return slash == std::string::npos ? prefix : prefix.substr(slash + 1);
    };
    return last(blocks.front().prefix) + "\u2013" + last(blocks.back().prefix) + " \u00d7" +
           std::to_string(blocks.size());
}

std::vector<RepeatedRun> findRepeatedRuns(const Model& model)
{
    // Blocks: maximal stretches of consecutive nodes with one numbered prefix.
    struct Block {
        RepeatedBlock block;
        std::string family;
    };
    std::vector<Block> blocks;
    for (size_t i = 0; i < model.nodes.size(); ++i) {
        const auto key = blockKey(model.nodes[i].name);
        if (!key)
            continue;
        if (!blocks.empty() && blocks.back().block.prefix == key->prefix &&
            blocks.back().block.firstNode + blocks.back().block.nodeCount == i) {
            ++blocks.back().block.nodeCount;
            continue;
        }
        Block b;
        b.block.prefix = key->prefix;
        b.block.firstNode = i;
        b.block.nodeCount = 1;
        b.family = key->family;
        blocks.push_back(std::move(b));
    }

    std::vector<RepeatedRun> runs;
    size_t i = 0;
    while (i < blocks.size()) {
        const auto sig = signature(model, blocks[i].block.firstNode, blocks[i].block.nodeCount);
        size_t j = i + 1;
        while (j < blocks.size() && blocks[j].family == blocks[i].family &&
               blocks[j].block.firstNode == blocks[j - 1].block.firstNode + blocks[j - 1].block.nodeCount &&
               blocks[j].block.nodeCount == blocks[i].block.nodeCount &&
               signature(model, blocks[j].block.firstNode, blocks[j].block.nodeCount) == sig)
            ++j;
        if (j - i >= 2) {
            RepeatedRun run;
            run.family = blocks[i].family;
            for (size_t k = i; k < j; ++k)
                run.blocks.push_back(blocks[k].block);
            runs.push_back(std::move(run));
        }
        i = j;
    }
    return runs;
}

} // namespace qs
