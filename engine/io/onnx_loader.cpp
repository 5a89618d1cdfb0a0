#include "io/onnx_loader.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/contained_call.h"
#include "core/mapped_file.h"
#include "graph/weight_layout.h"
#include "io/constant_folding.h"
#include "io/load_budget.h"
#include "io/onnx_subgraph.h"
#include "io/onnx_tensor.h"

namespace qs {
namespace {

constexpr int64_t kOldestSupportedOpset = 7;
constexpr int64_t kNewestSupportedOpset = 21;

// The newest default-domain opset the linked libonnx has schemas for.
int libraryOpsetVersion()
{
    const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    const auto it = ranges.find(onnx::ONNX_DOMAIN);
    return it == ranges.end() ? 0 : it->second.second;
}

std::string oneLine(std::string text)
{
    for (char& c : text)
        if (c == '\n' || c == '\r')
            c = ' ';
    while (!text.empty() && text.back() == ' ')
        text.pop_back();
    return text;
}

std::string nodeLabel(const onnx::NodeProto& node, int index)
{
    std::string label = "node ";
    if (!node.name().empty())
        label += "'" + node.name() + "' ";
    return label + "(" + (node.op_type().empty() ? std::string("?") : node.op_type()) + ", #" + std::to_string(index) +
           ")";
}

ValueInfo convertValueInfo(const onnx::ValueInfoProto& proto)
{
    ValueInfo v;
    v.name = proto.name();
    const onnx::TypeProto& type = proto.type();
    if (type.has_tensor_type()) {
        const auto& tensorType = type.tensor_type();
        v.dtype = dtypeOfOnnxElementType(tensorType.elem_type());
        v.typeName = onnxElementTypeName(tensorType.elem_type());
        if (tensorType.has_shape()) {
            std::vector<Dim> dims;
            for (const auto& d : tensorType.shape().dim()) {
                if (d.has_dim_value() && d.dim_value() >= 0)
                    dims.push_back(Dim::fixed(d.dim_value()));
                else if (d.has_dim_param() && !d.dim_param().empty())
                    dims.push_back(Dim::named(d.dim_param()));
                else
                    dims.push_back(Dim::unknown());
            }
            v.shape = std::move(dims);
        }
    } else if (type.has_sequence_type()) {
        v.typeName = "sequence";
    } else if (type.has_map_type()) {
        v.typeName = "map";
    } else if (type.has_optional_type()) {
        v.typeName = "optional";
    } else if (type.has_sparse_tensor_type()) {
        v.typeName = "sparse_tensor";
    } else {
        v.typeName = "unknown";
    }
    return v;
}

// An attribute's type; IR < 2 files leave it to be read off the field that is set.
onnx::AttributeProto::AttributeType attributeType(const onnx::AttributeProto& proto)
{
    using AP = onnx::AttributeProto;
    if (proto.type() != AP::UNDEFINED)
        return proto.type();
    return proto.has_f()          ? AP::FLOAT
           : proto.has_i()        ? AP::INT
           : proto.has_s()        ? AP::STRING
           : proto.has_t()        ? AP::TENSOR
           : proto.has_g()        ? AP::GRAPH
           : proto.floats_size()  ? AP::FLOATS
           : proto.ints_size()    ? AP::INTS
           : proto.strings_size() ? AP::STRINGS
                                  : AP::UNDEFINED;
}

// Whether convertAttribute reads the attribute's tensor (numeric types only).
bool readsTensor(const onnx::AttributeProto& proto)
{
    return attributeType(proto) == onnx::AttributeProto::TENSOR && dtypeOfOnnxElementType(proto.t().data_type());
}

Attribute convertAttribute(const onnx::AttributeProto& proto, const std::string& what, OnnxTensorReader& reader)
{
    using AP = onnx::AttributeProto;
    Attribute a;
    a.name = proto.name();
    const AP::AttributeType type = attributeType(proto);
    switch (type) {
    case AP::FLOAT:
        a.kind = Attribute::Kind::Float;
        a.f = proto.f();
        break;
    case AP::INT:
        a.kind = Attribute::Kind::Int;
        a.i = proto.i();
        break;
    case AP::STRING:
        a.kind = Attribute::Kind::String;
        a.s = proto.s();
        break;
    case AP::FLOATS:
        a.kind = Attribute::Kind::Floats;
        a.floats.assign(proto.floats().begin(), proto.floats().end());
        break;
    case AP::INTS:
        a.kind = Attribute::Kind::Ints;
        a.ints.assign(proto.ints().begin(), proto.ints().end());
        break;
    case AP::STRINGS:
        a.kind = Attribute::Kind::Strings;
        a.strings.assign(proto.strings().begin(), proto.strings().end());
        break;
    case AP::TENSOR:
        if (readsTensor(proto)) {
            a.kind = Attribute::Kind::Tensor;
            a.tensor = reader.read(proto.t(), what + " attribute '" + proto.name() + "'", false);
        } else { // a string Constant, say: kept as a note, the engine has no such tensors
            a.kind = Attribute::Kind::Other;
            a.s = "tensor of " + onnxElementTypeName(proto.t().data_type());
        }
        break;
    case AP::GRAPH:
        a.kind = Attribute::Kind::Graph;
        a.s = proto.g().SerializeAsString();
        break;
    default:
        a.kind = Attribute::Kind::Other;
        a.s = AP::AttributeType_IsValid(type) ? AP::AttributeType_Name(type)
                                              : "attribute type " + std::to_string(int(type));
        break;
    }
    return a;
}

void runChecker(const onnx::ModelProto& proto, const Model& model, const std::string& sourceName,
                const std::filesystem::path& folder, Model& out)
{
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(int(std::min<int64_t>(model.irVersion, std::numeric_limits<int>::max())));
    std::unordered_map<std::string, int> opsets;
    for (const auto& [domain, version] : model.opsetImports)
        opsets[domain] = int(std::clamp<int64_t>(version, 0, std::numeric_limits<int>::max()));
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(folder.string());
    try {
        onnx::checker::LexicalScopeContext scope;
        onnx::checker::check_graph(proto.graph(), ctx, scope);
        onnx::checker::check_model_local_functions(proto, ctx, scope);
    } catch (const std::exception& e) {
        const std::string message = oneLine(e.what());
        const auto defaultOpset = model.opsetImports.find("");
        const int known = libraryOpsetVersion();
        if (defaultOpset != model.opsetImports.end() && defaultOpset->second > known)
            out.warnings.push_back("the ONNX checker (which knows opsets up to " + std::to_string(known) +
                                   ") could not check this opset-" + std::to_string(defaultOpset->second) +
                                   " model: " + message);
        else if (message.find("No Op registered for") != std::string::npos)
            out.warnings.push_back("the ONNX checker does not know an op of this model: " + message);
        else
            throw Error(sourceName + ": the ONNX checker rejects the model: " + message);
    }
}

// libonnx 1.12's shape inference for convolutions and pooling indexes the data
// input's dimensions by the kernel's rank and the attribute lengths without
// checking them, and crashes the process when they disagree (a Conv on a rank-2
// input, a kernel of another rank, pads of the wrong length). Such a node is
// invalid ONNX; finding it here lets the loader skip shape inference with a
// warning naming the node, without starting a process. A name may be declared
// several times (graph input, value_info, graph output, initializer) and
// libonnx lets a later declaration replace an earlier one, so every declared
// rank is checked. Ranks that only inference derives (a Flatten feeding a Conv)
// are not known here: inferShapesContained() below survives those.
std::optional<std::string> convPoolRankProblem(const onnx::GraphProto& graph)
{
    static const std::set<std::string> kConvOps = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"};
    static const std::set<std::string> kPoolOps = {"MaxPool", "AveragePool", "LpPool", "MaxUnpool", "MaxRoiPool"};
    std::map<std::string, std::set<int>> ranks;
    auto declare = [&](const onnx::ValueInfoProto& v) {
        if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
            ranks[v.name()].insert(v.type().tensor_type().shape().dim_size());
    };
    for (const auto& v : graph.input())
        declare(v);
    for (const auto& v : graph.value_info())
        declare(v);
    for (const auto& v : graph.output())
        declare(v);
    for (const auto& t : graph.initializer())
        ranks[t.name()].insert(t.dims_size());
    for (const auto& node : graph.node()) {
        const bool conv = kConvOps.contains(node.op_type()), pool = kPoolOps.contains(node.op_type());
        if ((!conv && !pool) || node.input_size() == 0 || !node.domain().empty())
            continue;
        const std::string label = "node '" + node.name() + "' (" + node.op_type() + ")";
        const auto data = ranks.find(node.input(0));
        if (data == ranks.end())
            continue;
        for (const int rank : data->second)
            if (rank < 3)
                return label + " has a rank-" + std::to_string(rank) + " input; it needs at least 3";
        if (data->second.size() > 1)
            return label + " reads '" + node.input(0) + "', which the file declares with " +
                   std::to_string(data->second.size()) + " different ranks";
        const int dataRank = *data->second.begin();
        const int spatial = dataRank - 2;
        const int weightInput = node.op_type() == "QLinearConv" ? 3 : 1;
        if (conv && node.input_size() > weightInput) {
            const auto weight = ranks.find(node.input(weightInput));
            if (weight != ranks.end())
                for (const int rank : weight->second)
                    if (rank != dataRank)
                        return label + " has a rank-" + std::to_string(rank) + " kernel for a rank-" +
                               std::to_string(dataRank) + " input";
        }
        for (const auto& a : node.attribute()) {
            const int expected = a.name() == "pads" ? 2 * spatial : spatial;
            const bool sized = a.name() == "pads" || a.name() == "strides" || a.name() == "dilations" ||
                               a.name() == "kernel_shape" || a.name() == "output_padding";
            if (sized && a.ints_size() != expected)
                return label + " has " + std::to_string(a.ints_size()) + " values in '" + a.name() + "' where " +
                       std::to_string(expected) + " are needed";
        }
    }
    return std::nullopt;
}

// What libonnx's shape inference adds to a graph: its value_info and output
// declarations. Inference runs in a contained child (core/contained_call.h):
// libonnx crashes on ranks it derives itself (a Flatten feeding a Conv), which
// no check of the declared ranks can foresee. The child works on its copy of
// the parsed model and sends back only what inference changed.
struct InferredShapes {
    std::string warning; // libonnx's own complaint, when it threw
    onnx::GraphProto declarations;
};

ContainedOutcome inferShapesInChild(onnx::ModelProto& proto, std::optional<int> firstNodes, InferredShapes* result)
{
    std::string answer;
    const ContainedOutcome outcome = ContainedCall::run(
        [&](ContainedChannel& channel) {
            if (firstNodes) // the child's own copy: dropping nodes leaves the caller's model alone
                proto.mutable_graph()->mutable_node()->DeleteSubrange(*firstNodes,
                                                                      proto.graph().node_size() - *firstNodes);
            std::string warning;
            try {
                onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                                   onnx::ShapeInferenceOptions(false, 1, false));
            } catch (const std::exception& e) {
                warning = oneLine(e.what());
            }
            if (!result)
                return;
            onnx::GraphProto declarations;
            *declarations.mutable_value_info() = proto.graph().value_info();
            *declarations.mutable_output() = proto.graph().output();
            const std::string length = std::to_string(warning.size());
            channel.send(length + ":" + warning);
            channel.send(declarations.SerializeAsString());
        },
        [&](std::string_view piece, bool) {
            if (answer.size() + piece.size() > kContainedMemoryBudget)
                throw Error("shape inference's answer exceeds " + std::to_string(kContainedMemoryBudget >> 20) +
                            " MiB");
            answer.append(piece);
        });
    if (outcome.answered() && result) {
        const size_t colon = answer.find(':');
        size_t length = 0;
        if (colon != std::string::npos && colon < 12)
            length = size_t(std::stoull(answer.substr(0, colon)));
        if (colon == std::string::npos || colon >= 12 || length > answer.size() - colon - 1 ||
            !result->declarations.ParseFromArray(answer.data() + colon + 1 + length,
                                                 int(answer.size() - colon - 1 - length)))
            throw Error("shape inference sent a garbled answer");
        result->warning = answer.substr(colon + 1, length);
    }
    return outcome;
}

// Runs shape inference contained and merges its declarations into `proto`; a
// failure becomes a warning naming the model and, for a crash, the first node
// whose inclusion makes libonnx crash (found by bisecting the node list).
void inferShapesContained(onnx::ModelProto& proto, const std::string& sourceName, std::vector<std::string>& warnings)
{
    InferredShapes inferred;
    ContainedOutcome outcome;
    try {
        outcome = inferShapesInChild(proto, std::nullopt, &inferred);
    } catch (const Error& e) {
        warnings.push_back("shape inference skipped on " + sourceName + ": " + e.what());
        return;
    }
    if (outcome.answered()) {
        *proto.mutable_graph()->mutable_value_info() = std::move(*inferred.declarations.mutable_value_info());
        *proto.mutable_graph()->mutable_output() = std::move(*inferred.declarations.mutable_output());
        if (!inferred.warning.empty())
            warnings.push_back("shape inference failed, value shapes are those the file declares: " +
                               inferred.warning);
        return;
    }
    std::string where;
    if (outcome.status == ContainedOutcome::Status::Crashed && proto.graph().node_size() > 0) {
        int fine = 0, crashes = proto.graph().node_size();
        while (crashes - fine > 1) {
            const int middle = fine + (crashes - fine) / 2;
            if (inferShapesInChild(proto, middle, nullptr).status == ContainedOutcome::Status::Crashed)
                crashes = middle;
            else
                fine = middle;
        }
        where = " at " + nodeLabel(proto.graph().node(crashes - 1), crashes - 1);
    }
    warnings.push_back("shape inference skipped: libonnx's shape inference " + outcome.reason() + " on " +
                       sourceName + where + "; value shapes are those the file declares");
}

} // namespace

Model loadOnnxBytes(std::span<const std::byte> bytes, const std::string& sourceName,
                    const std::filesystem::path& folder, const OnnxLoadOptions& options)
{
    if (bytes.size() > kMaxOnnxProtobufBytes)
        throw Error(sourceName + ": " + std::to_string(bytes.size()) +
                    " bytes is more than protobuf can parse (2 GiB); save the model with its weights as external data "
                    "(onnx.save_model(..., save_as_external_data=True))");
    auto proto = std::make_shared<onnx::ModelProto>();
    {
        google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), int(bytes.size()));
        in.SetTotalBytesLimit(int(kMaxOnnxProtobufBytes));
        if (!proto->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
            throw Error(sourceName + ": not a valid ONNX file (the protobuf is truncated or corrupted)");
    }
    if (proto->ir_version() <= 0)
        throw Error(sourceName + ": not an ONNX model (ir_version is missing or not positive)");
    if (!proto->has_graph())
        throw Error(sourceName + ": not an ONNX model (it has no graph)");
    const onnx::GraphProto& graph = proto->graph();

    Model model;
    model.sourcePath = sourceName;
    model.format = "onnx";
    model.irVersion = proto->ir_version();
    model.producer = proto->producer_name();
    if (!proto->producer_version().empty())
        model.producer += (model.producer.empty() ? "" : " ") + proto->producer_version();
    for (const auto& opset : proto->opset_import()) {
        const std::string domain = opset.domain() == "ai.onnx" ? std::string() : opset.domain();
        if (!model.opsetImports.emplace(domain, opset.version()).second)
            throw Error(sourceName + ": opset_import lists domain '" + opset.domain() + "' twice");
    }
    if (model.irVersion < 3 && !model.opsetImports.contains(""))
        model.opsetImports[""] = 1; // before IR 3 the default domain's opset was implied
    if (const auto it = model.opsetImports.find(""); it == model.opsetImports.end())
        model.warnings.push_back("the model imports no opset of the default ONNX domain");
    else if (it->second < kOldestSupportedOpset || it->second > kNewestSupportedOpset)
        model.warnings.push_back("opset " + std::to_string(it->second) + " is outside the supported range " +
                                 std::to_string(kOldestSupportedOpset) + "-" + std::to_string(kNewestSupportedOpset) +
                                 "; ops whose meaning changed may not run as the file intends");
    for (const auto& entry : proto->metadata_props())
        model.metadata[entry.key()] = entry.value();

    OnnxTensorReader reader(sourceName, folder, proto);
    if (graph.sparse_initializer_size() > 0)
        throw Error(sourceName + ": sparse initializer '" + graph.sparse_initializer(0).values().name() +
                    "': sparse initializers are not supported");
    // Every tensor's sizes are checked, and what they will take in memory summed
    // against the per-file budget, before the first of them is allocated.
    LoadBudget budget(sourceName);
    std::unordered_set<std::string_view> initializerNames;
    for (int i = 0; i < graph.initializer_size(); ++i) {
        const onnx::TensorProto& t = graph.initializer(i);
        if (t.name().empty())
            throw Error(sourceName + ": initializer #" + std::to_string(i) + " has no name");
        const std::string what = "initializer '" + t.name() + "'";
        if (!initializerNames.insert(t.name()).second)
            throw Error(sourceName + ": " + what + " is defined twice");
        budget.reserve(reader.plan(t, what).allocatedBytes, what);
    }
    for (int i = 0; i < graph.node_size(); ++i)
        for (const auto& attribute : graph.node(i).attribute())
            if (readsTensor(attribute)) {
                const std::string what = nodeLabel(graph.node(i), i) + " attribute '" + attribute.name() + "'";
                budget.reserve(reader.plan(attribute.t(), what, false).allocatedBytes, what);
            }
    for (const onnx::TensorProto& t : graph.initializer())
        model.addInitializer(t.name(), reader.read(t, "initializer '" + t.name() + "'"));

    std::unordered_set<std::string> available;
    for (const auto& input : graph.input())
        available.insert(input.name());
    for (const NamedTensor& t : model.initializers())
        available.insert(t.name);
    model.nodes.reserve(size_t(graph.node_size()));
    for (int i = 0; i < graph.node_size(); ++i) {
        const onnx::NodeProto& proto_node = graph.node(i);
        const std::string label = nodeLabel(proto_node, i);
        if (proto_node.op_type().empty())
            throw Error(sourceName + ": " + label + " has no op_type");
        Node node;
        node.name = proto_node.name();
        node.opType = proto_node.op_type();
        node.domain = proto_node.domain() == "ai.onnx" ? std::string() : proto_node.domain();
        node.inputs.assign(proto_node.input().begin(), proto_node.input().end());
        node.outputs.assign(proto_node.output().begin(), proto_node.output().end());
        for (const std::string& input : node.inputs)
            if (!input.empty() && !available.contains(input))
                throw Error(sourceName + ": " + label + " reads '" + input +
                            "', which is not a graph input, an initializer or the output of an earlier node");
        for (const std::string& output : node.outputs)
            if (!output.empty())
                available.insert(output);
        for (const auto& attribute : proto_node.attribute())
            node.attributes.push_back(convertAttribute(attribute, label, reader));
        model.nodes.push_back(std::move(node));
    }

    if (options.runChecker)
        runChecker(*proto, model, sourceName, folder, model);
    const std::optional<std::string> rankProblem =
        options.runShapeInference ? convPoolRankProblem(graph) : std::nullopt;
    if (rankProblem) {
        model.warnings.push_back("shape inference skipped: " + *rankProblem);
    } else if (options.runShapeInference) {
        inferShapesContained(*proto, sourceName, model.warnings);
    }
    for (const auto& input : graph.input())
        if (!model.isInitializer(input.name()))
            model.inputs.push_back(convertValueInfo(input));
    for (const auto& output : graph.output())
        model.outputs.push_back(convertValueInfo(output));
    for (const auto& value : graph.value_info())
        model.valueInfos.push_back(convertValueInfo(value));

    // Constant nodes and layout ops on constants become initializers, so that
    // every form of weight is found (io/constant_folding.h).
    foldConstants(model, sourceName, budget);
    try {
        model.layers = findGraphLayers(model);
        if (options.loadSubgraphs)
            loadSubgraphLayers(model);
    } catch (const Error& e) {
        throw Error(sourceName + ": " + e.what());
    }
    if (std::string warning = missingWeightsWarning(model); !warning.empty())
        model.warnings.push_back(std::move(warning));
    return model;
}

Model loadOnnx(const std::filesystem::path& file, const OnnxLoadOptions& options)
{
    const std::shared_ptr<const MappedFile> mapped = MappedFile::open(file);
    std::filesystem::path folder = std::filesystem::absolute(file).parent_path();
    Model model = loadOnnxBytes(mapped->bytes(), file.string(), folder, options);
    model.sourcePath = file;
    return model;
}

} // namespace qs
