#include "io/onnx_subgraph.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <span>
#include <unordered_set>
#include <utility>

#include "graph/module_path.h"
#include "graph/weight_layout.h"
#include "io/onnx_loader.h"

namespace qs {
namespace {

// Names `graph` (and the graphs nested in it) read without defining them, each
// once, in the order they are first read.
std::vector<std::string> outerScopeNames(const onnx::GraphProto& graph)
{
    std::unordered_set<std::string> defined, listed;
    for (const auto& v : graph.input())
        defined.insert(v.name());
    for (const auto& t : graph.initializer())
        defined.insert(t.name());
    std::vector<std::string> names;
    auto read = [&](const std::string& name) {
        if (!name.empty() && !defined.contains(name) && listed.insert(name).second)
            names.push_back(name);
    };
    for (const auto& node : graph.node()) {
        for (const std::string& in : node.input())
            read(in);
        for (const auto& attribute : node.attribute()) {
            if (attribute.has_g())
                for (const std::string& name : outerScopeNames(attribute.g()))
                    read(name);
            for (const auto& g : attribute.graphs())
                for (const std::string& name : outerScopeNames(g))
                    read(name);
        }
        for (const std::string& out : node.output())
            if (!out.empty())
                defined.insert(out);
    }
    for (const auto& v : graph.output())
        read(v.name());
    return names;
}

std::string describeNode(const Node& node, size_t nodeIndex)
{
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "#" + std::string&& here.
    std::string text = "node ";
    if (node.name.empty())
        text.append("#").append(std::to_string(nodeIndex));
    else
        text.append("'").append(node.name).append("'");
    return text.append(" (").append(node.opType).append(")");
}

// Walks the subgraphs of a model in scope order, collecting their layers.
class SubgraphCollector {
public:
    explicit SubgraphCollector(Model& main) : main_(main)
    {
        for (const ValueInfo& v : main.inputs)
            taken_.insert(v.name);
        for (const Node& node : main.nodes)
            taken_.insert(node.outputs.begin(), node.outputs.end());
    }

    void collect(size_t scope)
    {
        const Model& graph = main_.scopeGraph(scope); // a subgraph's model is held by a shared_ptr: stays put
        const std::string prefix = main_.scopePath(scope);
        std::map<std::string, size_t> ordinal; // per op type, for `<optype>_<n>`
        for (size_t n = 0; n < graph.nodes.size(); ++n) {
            const Node& node = graph.nodes[n];
            bool any = false;
            for (const Attribute& a : node.attributes)
                any = any || a.kind == Attribute::Kind::Graph;
            if (!any)
                continue;
            std::string nodePath = modulePathFromNodeName(node.name, node.opType);
            if (nodePath.empty())
                nodePath = node.opType + '_' + std::to_string(ordinal[node.opType]++);
            for (const Attribute& a : node.attributes) {
                if (a.kind != Attribute::Kind::Graph)
                    continue;
                const std::string where =
                    main_.sourcePath.string() + ": " + describeNode(node, n) + ", subgraph '" + a.name + "'";
                OnnxSubgraph sub = loadOnnxSubgraph(graph, a.s, where);
                SubgraphScope s;
                s.parent = scope;
                s.node = n;
                s.attribute = a.name;
                s.modulePath = (prefix.empty() ? "" : prefix + "/") + nodePath + "/" + a.name;
                s.formalInputs = sub.formalInputs;
                s.graph = std::make_shared<const Model>(std::move(sub.model));
                main_.subgraphs.push_back(std::move(s));
                const size_t id = main_.subgraphs.size();
                addLayers(id);
                collect(id);
            }
        }
    }

    std::vector<QuantizableLayer> layers;
    std::vector<std::string> paths;

private:
    // The name the main model holds a constant of scope `scope` under (added on first use).
    std::string mainName(size_t scope, const std::string& name, const Tensor& tensor)
    {
        if (scope == 0)
            return name;
        const auto key = std::make_pair(scope, name);
        if (const auto it = aliases_.find(key); it != aliases_.end())
            return it->second;
        const std::string base = main_.scopePath(scope) + "/" + name;
        std::string alias = base;
        for (int k = 1; main_.isInitializer(alias) || taken_.contains(alias); ++k)
            alias = base + "_" + std::to_string(k);
        main_.addSubgraphWeight(alias, tensor);
        aliases_.emplace(key, alias);
        return alias;
    }

    // The constant `name` read in scope `scope`: its own initializer, or one of
    // an enclosing graph when the scope reads it from outside.
    std::optional<std::pair<size_t, const Tensor*>> resolve(size_t scope, const std::string& name) const
    {
        const Model& graph = main_.scopeGraph(scope);
        if (const Tensor* t = graph.initializer(name); t && !(scope == 0 && main_.isSubgraphWeight(name)))
            return std::make_pair(scope, t);
        if (scope == 0)
            return std::nullopt;
        const SubgraphScope& s = main_.subgraphs[scope - 1];
        for (size_t i = s.formalInputs; i < graph.inputs.size(); ++i)
            if (graph.inputs[i].name == name)
                return resolve(s.parent, name);
        return std::nullopt;
    }

    void addLayers(size_t scope)
    {
        const SubgraphScope& s = main_.subgraphs[scope - 1];
        Model view = *s.graph; // plus the enclosing graphs' constants it reads, for findGraphLayers
        std::map<std::string, std::pair<size_t, const Tensor*>> outer;
        for (size_t i = s.formalInputs; i < view.inputs.size(); ++i)
            if (const auto found = resolve(s.parent, view.inputs[i].name)) {
                view.addInitializer(view.inputs[i].name, *found->second);
                outer.emplace(view.inputs[i].name, *found);
            }
        for (QuantizableLayer& layer : findGraphLayers(view)) {
            const auto it = outer.find(layer.weightName);
            const auto [owner, tensor] =
                it != outer.end() ? it->second : std::make_pair(scope, s.graph->initializer(layer.weightName));
            layer.weightName = mainName(owner, layer.weightName, *tensor);
            layer.scope = scope;
            layer.sharesWeightOf.reset();
            paths.push_back(s.modulePath + "/" + layer.modulePath);
            layers.push_back(std::move(layer));
        }
    }

    Model& main_;
    std::unordered_set<std::string> taken_;
    std::map<std::pair<size_t, std::string>, std::string> aliases_;
};

} // namespace

OnnxSubgraph loadOnnxSubgraph(const Model& parent, const std::string& bytes, const std::string& where)
{
    onnx::GraphProto graph;
    {
        google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
        in.SetTotalBytesLimit(int(kMaxOnnxProtobufBytes));
        if (!graph.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
            throw Error(where + ": the subgraph does not parse (truncated or corrupted)");
    }
    const std::vector<std::string> outer = outerScopeNames(graph);
    for (const std::string& name : outer)
        graph.add_input()->set_name(name);

    onnx::ModelProto model;
    model.set_ir_version(parent.irVersion > 0 ? parent.irVersion : 8);
    for (const auto& [domain, version] : parent.opsetImports) {
        auto* opset = model.add_opset_import();
        opset->set_domain(domain);
        opset->set_version(version);
    }
    *model.mutable_graph() = std::move(graph);
    const std::string serialized = model.SerializeAsString();
    // External data of a subgraph's tensors resolves in the model's folder, as the main graph's does.
    std::error_code ec;
    std::filesystem::path folder;
    if (parent.format == "onnx" && std::filesystem::is_regular_file(parent.sourcePath, ec))
        folder = std::filesystem::absolute(parent.sourcePath, ec).parent_path();
    OnnxLoadOptions options;
    options.runChecker = false; // the checker ran on the whole model, subgraphs included
    options.runShapeInference = false;
    options.loadSubgraphs = false; // the caller walks nested subgraphs itself
    OnnxSubgraph sub;
    sub.model = loadOnnxBytes(std::as_bytes(std::span(serialized.data(), serialized.size())), where, folder, options);
    sub.model.sourcePath = where;
    sub.model.format = parent.format;
    if (sub.model.inputs.size() < outer.size())
        throw Error(where + ": an initializer of the subgraph has the name of a value it reads from outside");
    sub.formalInputs = sub.model.inputs.size() - outer.size();
    for (size_t k = 0; k < outer.size(); ++k)
        if (sub.model.inputs[sub.formalInputs + k].name != outer[k])
            throw Error(where + ": an initializer of the subgraph has the name of one of its inputs");
    return sub;
}

void loadSubgraphLayers(Model& model)
{
    SubgraphCollector collector(model);
    try {
        collector.collect(0);
    } catch (const Error& e) {
        // All or nothing: scope numbers must be the interpreter's.
        std::unordered_set<std::string> aliases;
        for (const NamedTensor& t : model.initializers())
            if (model.isSubgraphWeight(t.name))
                aliases.insert(t.name);
        model.removeInitializers(aliases);
        model.subgraphs.clear();
        model.warnings.push_back(std::string("layers inside subgraphs are not listed: ") + e.what());
        return;
    }
    if (collector.layers.empty())
        return;
    std::vector<std::string> paths;
    for (const QuantizableLayer& layer : model.layers)
        paths.push_back(layer.modulePath);
    paths.insert(paths.end(), collector.paths.begin(), collector.paths.end());
    paths = uniqueModulePaths(std::move(paths));
    for (QuantizableLayer& layer : collector.layers)
        model.layers.push_back(std::move(layer));
    for (size_t i = 0; i < model.layers.size(); ++i)
        model.layers[i].modulePath = std::move(paths[i]);
    markSharedWeights(model, model.layers);
}

} // namespace qs
