#include "export/tflite.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "export/flatbuffer.h"
#include "export/tflite_program.h"
#include "export/tflite_schema.h"
#include "quant/kernels.h"
#include "quantization/tensor_quantization.h"

namespace qs {

namespace {

namespace fb = flatbuffer;
namespace tf = tflite;
using tf::BuiltinOperator;
using tf::BuiltinOptions;

// NHWC axis i holds NCHW axis kFromNchw[i]; NCHW axis j sits at NHWC axis kToNhwc[j].
constexpr int kFromNchw[4] = {0, 2, 3, 1};
constexpr int kToNhwc[4] = {0, 3, 1, 2};

// The operator version whose kernel takes int8 (LiteRT's op versioning).
int32_t int8Version(BuiltinOperator op)
{
    switch (op) {
    case BuiltinOperator::Conv2D:
    case BuiltinOperator::DepthwiseConv2D:
        return 3; // per-channel int8
    case BuiltinOperator::FullyConnected:
        return 4;
    case BuiltinOperator::TransposeConv:
    case BuiltinOperator::ResizeBilinear:
        return 3; // TRANSPOSE_CONV's bias input; RESIZE_BILINEAR's half_pixel_centers
    case BuiltinOperator::Reshape:
    case BuiltinOperator::HardSwish:
    case BuiltinOperator::Quantize:
        return 1;
    default:
        return 2;
    }
}

struct TensorQuant {
    std::vector<float> scales;
    std::vector<int64_t> zeroPoints;
    int32_t dimension = 0;
};

struct TensorDesc {
    std::string name;
    std::vector<int32_t> shape;
    tf::TensorType type = tf::TensorType::Int8;
    uint32_t buffer = 0;
    std::optional<TensorQuant> quant;
};

struct OpDesc {
    BuiltinOperator op;
    std::vector<int32_t> inputs, outputs;
    BuiltinOptions optionsType = BuiltinOptions::None;
    fb::Table options;
};

// The model as it is assembled, then turned into flatbuffer tables.
class ModelBuilder {
public:
    ModelBuilder() { buffers_.emplace_back(); } // buffer 0: the empty sentinel

    int32_t tensor(TensorDesc t)
    {
        tensors_.push_back(std::move(t));
        return int32_t(tensors_.size() - 1);
    }
    int32_t constant(TensorDesc t, std::vector<uint8_t> bytes)
    {
        buffers_.push_back(std::move(bytes));
        t.buffer = uint32_t(buffers_.size() - 1);
        return tensor(std::move(t));
    }
    void op(OpDesc o) { ops_.push_back(std::move(o)); }
    // Valid until the next tensor is added: callers that add tensors copy it.
    const TensorDesc& at(int32_t index) const { return tensors_.at(size_t(index)); }
    std::vector<int32_t> inputs, outputs;

    fb::Table build(const std::string& description, TfliteSummary& summary) const
    {
        std::vector<BuiltinOperator> codes;
        std::vector<fb::Table> operators;
        for (const OpDesc& o : ops_) {
            auto found = std::find(codes.begin(), codes.end(), o.op);
            if (found == codes.end())
                found = codes.insert(codes.end(), o.op);
            fb::Table t;
            t.scalar<uint32_t>(tf::op::opcode_index, uint32_t(found - codes.begin()));
            t.vector(tf::op::inputs, o.inputs);
            t.vector(tf::op::outputs, o.outputs);
            if (o.optionsType != BuiltinOptions::None) {
                t.scalar<uint8_t>(tf::op::builtin_options_type, uint8_t(o.optionsType));
                t.table(tf::op::builtin_options, o.options);
            }
            operators.push_back(std::move(t));
            ++summary.operatorsByType[tfliteOperatorName(o.op)];
        }
        std::vector<fb::Table> opcodes;
        for (BuiltinOperator c : codes) {
            fb::Table t;
            // deprecated_builtin_code is an int8: codes above 127 put 127 there (PLACEHOLDER_FOR_GREATER_OP_CODES).
            t.scalar<int8_t>(tf::operator_code::deprecated_builtin_code, int8_t(std::min<int32_t>(int32_t(c), 127)));
            t.scalar<int32_t>(tf::operator_code::version, int8Version(c));
            t.scalar<int32_t>(tf::operator_code::builtin_code, int32_t(c));
            opcodes.push_back(std::move(t));
        }
        std::vector<fb::Table> tensors;
        for (const TensorDesc& d : tensors_) {
            fb::Table t;
            t.vector(tf::tensor::shape, d.shape);
            t.scalar<int8_t>(tf::tensor::type, int8_t(d.type));
            t.scalar<uint32_t>(tf::tensor::buffer, d.buffer);
            t.string(tf::tensor::name, d.name);
            if (d.quant) {
                fb::Table q;
                q.vector(tf::quantization::scale, d.quant->scales);
                q.vector(tf::quantization::zero_point, d.quant->zeroPoints);
                q.scalar<int32_t>(tf::quantization::quantized_dimension, d.quant->dimension);
                t.table(tf::tensor::quantization, std::move(q));
            }
            tensors.push_back(std::move(t));
        }
        fb::Table subgraph;
        subgraph.tables(tf::subgraph::tensors, std::move(tensors));
        subgraph.vector(tf::subgraph::inputs, inputs);
        subgraph.vector(tf::subgraph::outputs, outputs);
        subgraph.tables(tf::subgraph::operators, std::move(operators));
        subgraph.string(tf::subgraph::name, "main");
        std::vector<fb::Table> buffers;
        for (const std::vector<uint8_t>& b : buffers_) {
            fb::Table t;
            if (!b.empty())
                t.vector(tf::buffer::data, b, 16); // the schema's force_align: 16
            buffers.push_back(std::move(t));
        }
        fb::Table model;
        model.scalar<uint32_t>(tf::model::version, tf::kSchemaVersion);
        model.tables(tf::model::operator_codes, std::move(opcodes));
        std::vector<fb::Table> subgraphs;
        subgraphs.push_back(std::move(subgraph));
        model.tables(tf::model::subgraphs, std::move(subgraphs));
        model.string(tf::model::description, description);
        model.tables(tf::model::buffers, std::move(buffers));
        summary.tensors = int64_t(tensors_.size());
        summary.operators = int64_t(ops_.size());
        return model;
    }

    const std::vector<TensorDesc>& tensors() const { return tensors_; }
    const std::vector<std::vector<uint8_t>>& buffers() const { return buffers_; }
    const std::vector<OpDesc>& ops() const { return ops_; }

private:
    std::vector<TensorDesc> tensors_;
    std::vector<std::vector<uint8_t>> buffers_;
    std::vector<OpDesc> ops_;
};

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T>& values)
{
    std::vector<uint8_t> b(values.size() * sizeof(T));
    if (!b.empty())
        std::memcpy(b.data(), values.data(), b.size());
    return b;
}

std::vector<int32_t> int32Shape(const Shape& shape, const std::string& value)
{
    std::vector<int32_t> out;
    for (int64_t d : shape) {
        if (d < 0 || d > std::numeric_limits<int32_t>::max())
            throw Error("value '" + value + "': dimension " + std::to_string(d) + " does not fit a LiteRT shape");
        out.push_back(int32_t(d));
    }
    return out;
}

// Where an ONNX value lives in the LiteRT model.
struct Placed {
    int32_t tensor = -1;
    bool nhwc = false; // a 4-D value stored NHWC
};

tf::Activation activationOf(const std::string& name)
{
    if (name == "RELU")
        return tf::Activation::Relu;
    if (name == "RELU6")
        return tf::Activation::Relu6;
    if (name == "RELU_N1_TO_1")
        return tf::Activation::ReluN1To1;
    return tf::Activation::None;
}

std::vector<int64_t> intsAttribute(const Node& node, const char* name, std::vector<int64_t> fallback)
{
    const Attribute* a = node.attribute(name);
    if (!a)
        return fallback;
    if (a->kind != Attribute::Kind::Ints)
        throw Error("attribute '" + std::string(name) + "' is not a list of integers");
    return a->ints;
}

// The refusal of one node: collected, then thrown together.
struct Refused : Error {
    using Error::Error;
};

class Converter {
public:
    Converter(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
              const OdmlQuantization& q, const TfliteOptions& options, TfliteSummary& summary)
        : model_(model), plan_(plan), weights_(weights), q_(q), options_(options), summary_(summary)
    {
        for (const auto& [relu, target] : q_.fusedInto)
            fusedBy_[target.first] = relu;
    }

    ModelBuilder run()
    {
        for (const ValueInfo& v : model_.inputs)
            if (!model_.initializer(v.name))
                placeInput(v.name);
        std::vector<std::string> refused;
        std::set<std::string> unwritten; // outputs of refused nodes: what reads them is not reported again
        for (size_t i = 0; i < model_.nodes.size(); ++i) {
            const Node& node = model_.nodes[i];
            if (q_.schemes.at(i) == OdmlScheme::NotQuantized || q_.schemes.at(i) == OdmlScheme::Fused)
                continue;
            const bool downstream = std::any_of(node.inputs.begin(), node.inputs.end(),
                                                [&](const std::string& v) { return unwritten.contains(v); });
            try {
                if (!downstream)
                    convert(node, i);
            } catch (const Refused& e) {
                refused.push_back(nodeLabel(node, i) + ": " + e.what());
            }
            if (downstream || !placed_.contains(outputValue(i))) {
                unwritten.insert(node.outputs.begin(), node.outputs.end());
                unwritten.insert(outputValue(i));
            }
        }
        if (!refused.empty()) {
            std::string list;
            for (const std::string& r : refused)
                list += (list.empty() ? "" : "; ") + r;
            throw Error(model_.sourcePath.filename().string() + ": the LiteRT export cannot write " +
                        std::to_string(refused.size()) + (refused.size() == 1 ? " node: " : " nodes: ") + list);
        }
        for (const ValueInfo& v : model_.outputs)
            placeOutput(v.name);
        return std::move(b_);
    }

private:
    // ---- values

    TensorQuant activationQuant(const std::string& value) const
    {
        const QuantParams* p = q_.activation(value);
        if (!p || p->scales.size() != 1)
            throw Refused("value '" + value + "' has no ODML int8 range");
        return {{p->scales[0]}, {p->symmetric || p->zeroPoints.empty() ? 0 : int64_t(p->zeroPoints[0])}, 0};
    }
    Shape onnxShape(const std::string& value) const
    {
        const auto s = q_.shapes.find(value);
        if (s == q_.shapes.end())
            throw Refused("value '" + value + "' was not computed during calibration, so its shape is unknown");
        return s->second;
    }
    static std::vector<int32_t> stored(const std::vector<int32_t>& shape, bool nhwc)
    {
        if (!nhwc)
            return shape;
        std::vector<int32_t> out(4);
        for (int i = 0; i < 4; ++i)
            out[size_t(i)] = shape[size_t(kFromNchw[i])];
        return out;
    }
    // A new int8 activation tensor for ONNX value `value` (4-D: NHWC).
    Placed newActivation(const std::string& value, const std::string& quantOf)
    {
        const std::vector<int32_t> shape = int32Shape(onnxShape(value), value);
        const bool nhwc = shape.size() == 4;
        Placed p{b_.tensor({value, stored(shape, nhwc), tf::TensorType::Int8, 0, activationQuant(quantOf)}), nhwc};
        placed_[value] = p;
        return p;
    }
    Placed input(const std::string& value) const
    {
        const auto found = placed_.find(value);
        if (found == placed_.end())
            throw Refused("its input '" + value + "' is not an int8 activation of the exported model");
        return found->second;
    }
    // The value the op writes: its own output, or that of the Relu fused into it.
    std::string outputValue(size_t node) const
    {
        const auto f = fusedBy_.find(node);
        return f == fusedBy_.end() ? model_.nodes[node].outputs.at(0) : model_.nodes[f->second].outputs.at(0);
    }
    int8_t fusedActivation(size_t node) const
    {
        const auto f = fusedBy_.find(node);
        return int8_t(f == fusedBy_.end() ? tf::Activation::None : activationOf(q_.fusedInto.at(f->second).second));
    }

    void placeInput(const std::string& name)
    {
        const std::vector<int32_t> shape = int32Shape(onnxShape(name), name);
        const bool nhwc = shape.size() == 4;
        if (options_.int8Io) {
            const Placed p = newActivation(name, name);
            b_.inputs.push_back(p.tensor);
            return;
        }
        const int32_t f = b_.tensor({name, stored(shape, nhwc), tf::TensorType::Float32, 0, std::nullopt});
        const int32_t i8 =
            b_.tensor({name + "/int8", stored(shape, nhwc), tf::TensorType::Int8, 0, activationQuant(name)});
        b_.op({BuiltinOperator::Quantize, {f}, {i8}, BuiltinOptions::None, {}});
        b_.inputs.push_back(f);
        placed_[name] = {i8, nhwc};
    }
    void placeOutput(const std::string& name)
    {
        const auto found = placed_.find(name);
        if (found == placed_.end())
            throw Error(model_.sourcePath.filename().string() + ": graph output '" + name +
                        "' is not an int8 activation of the exported model");
        if (options_.int8Io) {
            b_.outputs.push_back(found->second.tensor);
            return;
        }
        const TensorDesc q = b_.at(found->second.tensor);
        std::vector<int32_t> shape = q.shape;
        const int32_t f = b_.tensor({name + "/float", shape, tf::TensorType::Float32, 0, std::nullopt});
        b_.op({BuiltinOperator::Dequantize, {found->second.tensor}, {f}, BuiltinOptions::None, {}});
        b_.outputs.push_back(f);
    }

    int32_t int32Constant(const std::string& name, const std::vector<int32_t>& values, std::vector<int32_t> shape = {})
    {
        if (shape.empty())
            shape = {int32_t(values.size())};
        return b_.constant({name, shape, tf::TensorType::Int32, 0, std::nullopt}, bytesOf(values));
    }

    // A float constant operand (Add's, Mul's) as int8 per tensor, laid out to broadcast against
    // an NHWC activation when `nhwc`.
    int32_t constantOperand(const std::string& name, const Tensor& value, bool nhwc, bool reciprocal)
    {
        Tensor x = value.toFloat32();
        Shape shape = x.shape();
        if (reciprocal) {
            Tensor r(DType::F32, shape);
            auto out = r.mutableValues<float>();
            const auto in = x.values<float>();
            for (size_t k = 0; k < in.size(); ++k)
                out[k] = 1.0f / in[k];
            x = std::move(r);
        }
        Range range{0, 0};
        for (float v : x.values<float>()) {
            if (!std::isfinite(v))
                throw Refused("constant '" + name + "' holds a NaN or infinite value");
            range.min = std::min(range.min, v), range.max = std::max(range.max, v);
        }
        const QuantParams p = quantParamsFromRanges(QType::Int8, BlockLayout::perTensor(shape),
                                                    std::span<const Range>(&range, 1), false, {}, name);
        const Tensor codes = quantize(x, p, Rounding::Nearest, 0, name);
        std::vector<int8_t> values(codes.values<int8_t>().begin(), codes.values<int8_t>().end());
        std::vector<int32_t> tshape = int32Shape(shape, name);
        if (nhwc && tshape.size() <= 4) {
            while (tshape.size() < 4)
                tshape.insert(tshape.begin(), 1);
            // [1, C, H, W] → [1, H, W, C], the values too.
            const int32_t n = tshape[0], c = tshape[1], h = tshape[2], w = tshape[3];
            std::vector<int8_t> t(values.size());
            for (int32_t a = 0; a < n; ++a)
                for (int32_t k = 0; k < c; ++k)
                    for (int32_t y = 0; y < h; ++y)
                        for (int32_t z = 0; z < w; ++z)
                            t[size_t(((a * h + y) * w + z) * c + k)] = values[size_t(((a * c + k) * h + y) * w + z)];
            values = std::move(t);
            tshape = {n, h, w, c};
        } else if (nhwc) {
            throw Refused("constant '" + name + "' has more than 4 dimensions");
        }
        summary_.floatWeightBytes += int64_t(x.numel()) * 4;
        return b_.constant(
            {name, tshape, tf::TensorType::Int8, 0, TensorQuant{{p.scales[0]}, {int64_t(p.zeroPoints.at(0))}, 0}},
            bytesOf(values));
    }

    // ---- the layer weights

    // The weight's int8 parameters: the plan's (per channel along axis 0, or per tensor),
    // or per tensor when `perTensor`.
    QuantParams weightParams(size_t node, const Tensor& w, bool perTensor, int channelAxis = 0)
    {
        const LayerQuantization* lq = plan_.forNode(node);
        if (!lq || !lq->weight || lq->layer >= model_.layers.size())
            throw Refused("the quantization plan has no int8 weight for this node");
        const QuantizableLayer& layer = model_.layers[lq->layer];
        if (isLut(lq->weight->qtype))
            throw Error("layer '" + layer.modulePath + "': weight_qtype " + std::string(qtypeName(lq->weight->qtype)) +
                        " is palettized (codes into a k-means table), which LiteRT's int8 kernels cannot hold; "
                        "use int8 for LiteRT");
        if (lq->biasCorrection)
            throw Error("layer '" + layer.modulePath +
                        "': the LiteRT export computes its int32 biases from the "
                        "model's own, so it cannot carry bias_correction; remove bias_correction for LiteRT");
        if (lq->weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
            throw Error("layer '" + layer.modulePath +
                        "': the LiteRT export rounds the float weights itself, so it "
                        "cannot carry the weights algorithm " +
                        lq->weightAlgorithm.toString() + " chose; use algorithm rtn for LiteRT");
        QuantizationSpec spec = *lq->weight;
        spec.options.narrowRange = true;
        spec.symmetric = true;
        const auto cached = weights_.find(lq->layer);
        QuantParams wp = cached && cached->spec.options.narrowRange && cached->transposedAxes.empty()
                             ? cached->quantization.params
                             : computeQuantization(w, spec, layer.weightName).params;
        if (perTensor && !wp.layout.isPerTensor()) {
            float absmax = 0;
            for (float v : w.toFloat32().values<float>())
                absmax = std::max(absmax, std::fabs(v));
            const Range r{-absmax, absmax};
            ScaleOptions o;
            o.narrowRange = true;
            wp = quantParamsFromRanges(QType::Int8, BlockLayout::perTensor(w.shape()), std::span<const Range>(&r, 1),
                                       true, o, layer.weightName);
            summary_.notes.push_back("layer '" + layer.modulePath +
                                     "': FULLY_CONNECTED weights written per tensor (absmax), not per channel as "
                                     "the plan has them (Arm NN's TfLite parser refuses per-channel ones)");
        }
        if (!wp.layout.isPerTensor() &&
            (wp.scales.size() != size_t(w.shape().at(size_t(channelAxis))) ||
             wp.layout.describe() != BlockLayout::perChannel(w.shape(), channelAxis).describe()))
            throw Refused("weight '" + layer.weightName + "': per-channel scales must run along axis " +
                          std::to_string(channelAxis));
        return wp;
    }
    std::vector<int8_t> codes(const Tensor& w, const QuantParams& p, const std::string& name)
    {
        const Tensor c = quantize(w.toFloat32(), p, Rounding::Nearest, 0, name);
        summary_.floatWeightBytes += int64_t(w.numel()) * 4;
        return {c.values<int8_t>().begin(), c.values<int8_t>().end()};
    }
    int32_t bias(const Node& node, size_t index, const std::string& name, int64_t channels, float inputScale,
                 const std::vector<float>& weightScales)
    {
        return biasTensor(name, biasCodes(node, index, channels, inputScale, weightScales), inputScale, weightScales);
    }
    int32_t biasTensor(const std::string& name, const std::vector<int32_t>& q, float inputScale,
                       const std::vector<float>& weightScales)
    {
        TensorQuant quant;
        for (size_t c = 0; c < (weightScales.size() == 1 ? 1 : q.size()); ++c)
            quant.scales.push_back(inputScale * weightScales[c]), quant.zeroPoints.push_back(0);
        return b_.constant({name, {int32_t(q.size())}, tf::TensorType::Int32, 0, quant}, bytesOf(q));
    }
    // The bias in int32 at scale input scale × weight scale (zeros when the node has none).
    std::vector<int32_t> biasCodes(const Node& node, size_t index, int64_t channels, float inputScale,
                                   const std::vector<float>& weightScales)
    {
        std::vector<float> b(size_t(channels), 0.0f);
        if (node.inputs.size() > index && !node.inputs[index].empty()) {
            const Tensor* t = q_.constant(model_, node.inputs[index]);
            if (!t || t->numel() != channels)
                throw Refused("bias '" + node.inputs[index] + "' is not a constant of " + std::to_string(channels) +
                              " values");
            const Tensor f = t->toFloat32();
            std::copy(f.values<float>().begin(), f.values<float>().end(), b.begin());
            summary_.floatWeightBytes += channels * 4;
        }
        std::vector<int32_t> q(b.size());
        for (size_t c = 0; c < b.size(); ++c) {
            const float scale = inputScale * weightScales[weightScales.size() == 1 ? 0 : c];
            const double v = std::nearbyint(double(b[c]) / double(scale));
            q[c] = int32_t(std::clamp(v, -2147483647.0, 2147483647.0));
        }
        return q;
    }

    // ---- padding

    struct Window {
        int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
        int64_t top = 0, left = 0, bottom = 0, right = 0;
    };
    Window window(const Node& node, const std::vector<int64_t>& kernel, const Shape& in, const Shape& out) const
    {
        Window w;
        if (kernel.size() != 2)
            throw Refused("only 2-D windows are written");
        w.kh = kernel[0], w.kw = kernel[1];
        const std::vector<int64_t> strides = intsAttribute(node, "strides", {1, 1});
        const std::vector<int64_t> dilations = intsAttribute(node, "dilations", {1, 1});
        const std::vector<int64_t> pads = intsAttribute(node, "pads", {0, 0, 0, 0});
        if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
            throw Refused("strides, dilations and pads must be 2-D");
        w.sh = strides[0], w.sw = strides[1], w.dh = dilations[0], w.dw = dilations[1];
        std::string autoPad;
        if (const Attribute* a = node.attribute("auto_pad"))
            autoPad = a->s;
        if (autoPad == "SAME_LOWER")
            throw Refused("auto_pad SAME_LOWER has no LiteRT padding");
        if (autoPad.empty() || autoPad == "NOTSET") {
            w.top = pads[0], w.left = pads[1], w.bottom = pads[2], w.right = pads[3];
        }
        if (autoPad == "SAME_UPPER") {
            const auto same = samePads(in[2], w.kh, w.sh, w.dh);
            const auto sameW = samePads(in[3], w.kw, w.sw, w.dw);
            w.top = same.first, w.bottom = same.second, w.left = sameW.first, w.right = sameW.second;
        }
        // ceil_mode (pools) and any other end padding the output size asks for.
        const int64_t needH = (out[2] - 1) * w.sh + (w.kh - 1) * w.dh + 1 - (in[2] + w.top);
        const int64_t needW = (out[3] - 1) * w.sw + (w.kw - 1) * w.dw + 1 - (in[3] + w.left);
        w.bottom = std::max(w.bottom, needH), w.right = std::max(w.right, needW);
        return w;
    }
    static std::pair<int64_t, int64_t> samePads(int64_t in, int64_t k, int64_t s, int64_t d)
    {
        const int64_t out = (in + s - 1) / s;
        const int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
        return {total / 2, total - total / 2};
    }
    // SAME or VALID for `w` over `in` ([N, C, H, W]); explicit padding first when neither fits: a PAD
    // before a CONV_2D, a border concatenated before a MAX_POOL_2D or a DEPTHWISE_CONV_2D (borderOf).
    tf::Padding padding(Placed& in, const Window& w, const Shape& inShape, const std::string& what, bool maxPool,
                        bool depthwise = false)
    {
        if (w.top == 0 && w.left == 0 && w.bottom == 0 && w.right == 0)
            return tf::Padding::Valid;
        const auto sh = samePads(inShape[2], w.kh, w.sh, w.dh), sw = samePads(inShape[3], w.kw, w.sw, w.dw);
        if (sh == std::pair{w.top, w.bottom} && sw == std::pair{w.left, w.right} && !maxPool)
            return tf::Padding::Same;
        if (sh == std::pair{w.top, w.bottom} && sw == std::pair{w.left, w.right} && maxPool)
            return tf::Padding::Same; // MAX_POOL_2D's SAME ignores the padding, as ONNX's
        if (maxPool || depthwise) {
            border(in, w, what, maxPool ? int8_t(-128) : int8_t(b_.at(in.tensor).quant->zeroPoints.at(0)));
            return tf::Padding::Valid;
        }
        const TensorDesc src = b_.at(in.tensor);
        std::vector<int32_t> shape = src.shape;
        shape[1] += int32_t(w.top + w.bottom), shape[2] += int32_t(w.left + w.right);
        const std::vector<int32_t> pads = {0, 0, int32_t(w.top), int32_t(w.bottom), int32_t(w.left), int32_t(w.right),
                                           0, 0};
        const int32_t padsTensor = int32Constant(what + "/paddings", pads, {4, 2});
        const int32_t out = b_.tensor({what + "/padded", shape, tf::TensorType::Int8, 0, src.quant});
        b_.op({BuiltinOperator::Pad, {in.tensor, padsTensor}, {out}, BuiltinOptions::PadOptions, {}});
        in = {out, true};
        return tf::Padding::Valid;
    }
    // Explicit padding as CONCATENATIONs of constant borders holding `code`, along the rows and then
    // along the columns. Arm NN 20.08 fills a PAD it does not fold into a CONV_2D (it folds none into
    // a DEPTHWISE_CONV_2D or a MAX_POOL_2D) with the code 0 rather than the zero point, and its parser
    // has no PADV2; LiteRT copies the codes of a CONCATENATION whose inputs share its quantization, so
    // both compute what the simulation does. A DEPTHWISE_CONV_2D's border is the zero point (the
    // value 0); a MAX_POOL_2D's is −128, the lowest code, which never wins the maximum (a window
    // holds at least one input value) whatever the zero point, where a PAD's zero point could.
    void border(Placed& in, const Window& w, const std::string& what, int8_t code)
    {
        const TensorQuant quant = *b_.at(in.tensor).quant; // copies: b_ grows below
        auto join = [&](int axis, int64_t before, int64_t after, const std::string& name) {
            if (before == 0 && after == 0)
                return;
            const std::vector<int32_t> shape = b_.at(in.tensor).shape;
            auto border = [&](int64_t size, const std::string& side) {
                std::vector<int32_t> s = shape;
                s[size_t(axis)] = int32_t(size);
                int64_t n = 1;
                for (int32_t d : s)
                    n *= d;
                const std::vector<int8_t> codes(size_t(n), code);
                return b_.constant({what + "/" + name + "/" + side, s, tf::TensorType::Int8, 0, quant}, bytesOf(codes));
            };
            std::vector<int32_t> parts;
            if (before > 0)
                parts.push_back(border(before, "before"));
            parts.push_back(in.tensor);
            if (after > 0)
                parts.push_back(border(after, "after"));
            std::vector<int32_t> outShape = shape;
            outShape[size_t(axis)] += int32_t(before + after);
            const int32_t out = b_.tensor({what + "/" + name, outShape, tf::TensorType::Int8, 0, quant});
            fb::Table opt;
            opt.scalar<int32_t>(tf::concatenation::axis, axis);
            b_.op({BuiltinOperator::Concatenation, parts, {out}, BuiltinOptions::ConcatenationOptions, std::move(opt)});
            in = {out, true};
        };
        join(1, w.top, w.bottom, "padded_rows");
        join(2, w.left, w.right, "padded");
    }

    // ---- ops

    void convert(const Node& node, size_t i)
    {
        const std::string& t = node.opType;
        if (t == "Identity" || t == "Dropout") {
            placed_[node.outputs.at(0)] = input(node.inputs.at(0));
            return;
        }
        if (t == "Conv")
            return conv(node, i);
        if (t == "ConvTranspose")
            return convTranspose(node, i);
        if (t == "Gemm" || t == "MatMul")
            return fullyConnected(node, i);
        if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div")
            return binary(node, i);
        if (t == "Concat")
            return concat(node, i);
        if (t == "GlobalAveragePool" || t == "ReduceMean")
            return mean(node, i);
        if (t == "MaxPool" || t == "AveragePool")
            return pool(node, i);
        if (t == "Flatten" || t == "Reshape")
            return reshape(node);
        if (t == "Transpose")
            return transpose(node);
        if (t == "Slice")
            return slice(node);
        if (t == "Split")
            return split(node);
        if (t == "Pad")
            return pad(node);
        if (t == "Sigmoid" || t == "Softmax" || t == "HardSwish")
            return unary(node);
        if (t == "HardSigmoid")
            return hardSigmoid(node);
        if (t == "Resize")
            return resize(node);
        throw Refused("no LiteRT op is written for it (the export writes CONV_2D, DEPTHWISE_CONV_2D, "
                      "TRANSPOSE_CONV, FULLY_CONNECTED, ADD, SUB, MUL, CONCATENATION, MEAN, AVERAGE_POOL_2D, "
                      "MAX_POOL_2D, PAD, RESHAPE, TRANSPOSE, SLICE, STRIDED_SLICE, LOGISTIC, SOFTMAX, HARD_SWISH, "
                      "RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR)");
    }

    void conv(const Node& node, size_t i)
    {
        Placed in = input(node.inputs.at(0));
        const Shape inShape = onnxShape(node.inputs[0]);
        if (!in.nhwc)
            throw Refused("only 2-D convolutions (a 4-D input) are written");
        const Tensor* weight = q_.constant(model_, node.inputs.at(1));
        if (!weight || weight->rank() != 4)
            throw Refused("its weight is not a constant 4-D tensor");
        const Tensor w = weight->toFloat32();
        const int64_t o = w.dim(0), ipg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
        const int64_t group = node.intAttribute("group", 1), channels = inShape[1];
        const bool depthwise = group > 1 && group == channels && ipg == 1 && o % channels == 0;
        // Any other grouping is a CONV_2D whose filter holds ipg = channels / group input channels:
        // LiteRT derives the groups from the input's depth and the filter's.
        if (group < 1 || channels != group * ipg || o % group != 0)
            throw Refused("a grouped convolution (group " + std::to_string(group) + ", " + std::to_string(channels) +
                          " input channels, " + std::to_string(ipg) + " per group, " + std::to_string(o) +
                          " outputs) whose channels do not divide into its groups");
        const QuantParams wp = weightParams(i, w, false);
        const std::vector<int8_t> c = codes(w, wp, node.inputs[1]);
        // ONNX [O, I, kh, kw] → CONV_2D [O, kh, kw, I]; DEPTHWISE_CONV_2D [1, kh, kw, O].
        std::vector<int8_t> stored(c.size());
        for (int64_t a = 0; a < o; ++a)
            for (int64_t b = 0; b < ipg; ++b)
                for (int64_t y = 0; y < kh; ++y)
                    for (int64_t x = 0; x < kw; ++x) {
                        const size_t from = size_t(((a * ipg + b) * kh + y) * kw + x);
                        const size_t to =
                            depthwise ? size_t((y * kw + x) * o + a) : size_t(((a * kh + y) * kw + x) * ipg + b);
                        stored[to] = c[from];
                    }
        TensorQuant wq{wp.scales, std::vector<int64_t>(wp.scales.size(), 0), depthwise ? 3 : 0};
        const std::vector<int32_t> wshape =
            depthwise ? std::vector<int32_t>{1, int32_t(kh), int32_t(kw), int32_t(o)}
                      : std::vector<int32_t>{int32_t(o), int32_t(kh), int32_t(kw), int32_t(ipg)};
        const int32_t wt = b_.constant({node.inputs[1], wshape, tf::TensorType::Int8, 0, wq}, bytesOf(stored));
        const float inputScale = b_.at(in.tensor).quant->scales[0];
        const std::string out = outputValue(i);
        const Window win = window(node, {kh, kw}, inShape, onnxShape(node.outputs[0]));
        const std::string label = node.name.empty() ? out : node.name;
        const bool split = group > 1 && !depthwise && options_.groupedConv == TfliteGroupedConv::Split;
        // Split: each group's slice is padded on its own, so that a PAD feeds its CONV_2D directly
        // (Arm NN folds such a PAD into the convolution; alone, it pads int8 with the code 0 rather
        // than the zero point).
        const Placed unpadded = in;
        tf::Padding padMode = split ? tf::Padding::Valid : padding(in, win, inShape, label, false, depthwise);
        auto convOptions = [&] {
            fb::Table opt;
            opt.scalar<int8_t>(tf::conv2d::padding, int8_t(padMode));
            opt.scalar<int32_t>(tf::conv2d::stride_w, int32_t(win.sw));
            opt.scalar<int32_t>(tf::conv2d::stride_h, int32_t(win.sh));
            opt.scalar<int8_t>(tf::conv2d::fused_activation_function, fusedActivation(i));
            opt.scalar<int32_t>(tf::conv2d::dilation_w_factor, int32_t(win.dw));
            opt.scalar<int32_t>(tf::conv2d::dilation_h_factor, int32_t(win.dh));
            return opt;
        };
        if (split) {
            // One SLICE and one CONV_2D per group, joined by a CONCATENATION at the output's scale:
            // the same codes as the grouped CONV_2D (each output channel's sum, requantization and
            // clamp are unchanged), for consumers that do not run grouped CONV_2D.
            const std::vector<int32_t> biasAll = biasCodes(node, 2, o, inputScale, wp.scales);
            const Placed result = newActivation(out, out);
            const TensorDesc resultDesc = b_.at(result.tensor);
            const int64_t opg = o / group;
            std::vector<int32_t> parts;
            const std::vector<int32_t> inStored = b_.at(unpadded.tensor).shape;
            const TensorQuant inQuant = *b_.at(unpadded.tensor).quant; // copies: b_ grows below
            for (int64_t g = 0; g < group; ++g) {
                const std::string part = label + "/group" + std::to_string(g);
                std::vector<int32_t> size = inStored;
                size[3] = int32_t(ipg);
                Placed slice{sliceOp(unpadded.tensor, {0, 0, 0, int32_t(g * ipg)}, size, part + "/input", inQuant),
                             true};
                padMode = padding(slice, win, inShape, part, false);
                const auto rows = [&](const auto& all, int64_t per) {
                    using T = typename std::decay_t<decltype(all)>::value_type;
                    return std::vector<T>(all.begin() + g * opg * per, all.begin() + (g + 1) * opg * per);
                };
                const std::vector<float> scales =
                    wp.scales.size() == 1 ? wp.scales : rows(wp.scales, 1);
                const TensorQuant partQuant{scales, std::vector<int64_t>(scales.size(), 0), 0};
                const int32_t pw = b_.constant({part + "/weight", {int32_t(opg), int32_t(kh), int32_t(kw), int32_t(ipg)},
                                                tf::TensorType::Int8, 0, partQuant},
                                               bytesOf(rows(stored, kh * kw * ipg)));
                const int32_t pb = biasTensor(part + "/bias", rows(biasAll, 1), inputScale, scales);
                std::vector<int32_t> partShape = resultDesc.shape;
                partShape[3] = int32_t(opg);
                const int32_t py = b_.tensor({part, partShape, tf::TensorType::Int8, 0, resultDesc.quant});
                b_.op({BuiltinOperator::Conv2D, {slice.tensor, pw, pb}, {py}, BuiltinOptions::Conv2DOptions,
                       convOptions()});
                parts.push_back(py);
            }
            fb::Table opt;
            opt.scalar<int32_t>(tf::concatenation::axis, 3);
            opt.scalar<int8_t>(tf::concatenation::fused_activation_function, int8_t(tf::Activation::None));
            b_.op({BuiltinOperator::Concatenation, parts, {result.tensor}, BuiltinOptions::ConcatenationOptions,
                   std::move(opt)});
            return;
        }
        const int32_t bt = bias(node, 2, label + "/bias", o, inputScale, wp.scales);
        const Placed result = newActivation(out, out);
        fb::Table opt;
        if (depthwise) {
            opt.scalar<int8_t>(tf::depthwise::padding, int8_t(padMode));
            opt.scalar<int32_t>(tf::depthwise::stride_w, int32_t(win.sw));
            opt.scalar<int32_t>(tf::depthwise::stride_h, int32_t(win.sh));
            opt.scalar<int32_t>(tf::depthwise::depth_multiplier, int32_t(o / channels));
            opt.scalar<int8_t>(tf::depthwise::fused_activation_function, fusedActivation(i));
            opt.scalar<int32_t>(tf::depthwise::dilation_w_factor, int32_t(win.dw));
            opt.scalar<int32_t>(tf::depthwise::dilation_h_factor, int32_t(win.dh));
            b_.op({BuiltinOperator::DepthwiseConv2D,
                   {in.tensor, wt, bt},
                   {result.tensor},
                   BuiltinOptions::DepthwiseConv2DOptions,
                   std::move(opt)});
        } else {
            b_.op({BuiltinOperator::Conv2D, {in.tensor, wt, bt}, {result.tensor}, BuiltinOptions::Conv2DOptions,
                   convOptions()});
        }
    }

    // ConvTranspose → TRANSPOSE_CONV (inputs: output shape, weight [O, kh, kw, I] per output
    // channel, input, int32 bias). LiteRT places the output by its padding mode alone: VALID has no
    // leading padding (pads 0, the output (in − 1)·stride + k), SAME the leading half of
    // (in − 1)·stride + k − out with out = in·stride. Anything else ONNX can say (other pads,
    // output_padding beyond these sizes, dilations, groups) is refused.
    void convTranspose(const Node& node, size_t i)
    {
        const Placed in = input(node.inputs.at(0));
        const Shape inShape = onnxShape(node.inputs[0]);
        if (!in.nhwc)
            throw Refused("only 2-D transposed convolutions (a 4-D input) are written");
        const Tensor* weight = q_.constant(model_, node.inputs.at(1));
        if (!weight || weight->rank() != 4)
            throw Refused("its weight is not a constant 4-D tensor");
        if (node.intAttribute("group", 1) != 1)
            throw Refused("TRANSPOSE_CONV has no groups (group " + std::to_string(node.intAttribute("group", 1)) +
                          ")");
        const Tensor w = weight->toFloat32();
        const int64_t ic = w.dim(0), o = w.dim(1), kh = w.dim(2), kw = w.dim(3);
        if (ic != inShape[1])
            throw Refused("its weight has " + std::to_string(ic) + " input channels for an input of " +
                          std::to_string(inShape[1]));
        for (int64_t d : intsAttribute(node, "dilations", {1, 1}))
            if (d != 1)
                throw Refused("TRANSPOSE_CONV has no dilations");
        std::string autoPad = "NOTSET";
        if (const Attribute* a = node.attribute("auto_pad"))
            autoPad = a->s;
        if (autoPad != "NOTSET" && autoPad != "VALID")
            throw Refused("auto_pad " + autoPad + " (only explicit pads or VALID are written)");
        const std::vector<int64_t> strides = intsAttribute(node, "strides", {1, 1});
        const std::vector<int64_t> pads =
            autoPad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : intsAttribute(node, "pads", {0, 0, 0, 0});
        if (strides.size() != 2 || pads.size() != 4)
            throw Refused("strides and pads must be 2-D");
        const std::string out = outputValue(i);
        const Shape outShape = onnxShape(node.outputs.at(0));
        // Which LiteRT padding places the output as ONNX does, per spatial axis.
        auto mode = [&](int axis, int64_t k) -> std::optional<tf::Padding> {
            const int64_t n = inShape[size_t(axis)], m = outShape[size_t(axis)], s = strides[size_t(axis - 2)];
            const int64_t begin = pads[size_t(axis - 2)];
            if (begin == 0 && m == (n - 1) * s + k)
                return tf::Padding::Valid;
            if (m == n * s && begin == std::max<int64_t>((n - 1) * s + k - m, 0) / 2)
                return tf::Padding::Same;
            return std::nullopt;
        };
        const std::optional<tf::Padding> ph = mode(2, kh), pw = mode(3, kw);
        if (!ph || !pw || *ph != *pw)
            throw Refused("its pads (" + std::to_string(pads[0]) + ", " + std::to_string(pads[1]) + ", " +
                          std::to_string(pads[2]) + ", " + std::to_string(pads[3]) + ") and output size " +
                          std::to_string(outShape[2]) + "x" + std::to_string(outShape[3]) +
                          " are neither TRANSPOSE_CONV's VALID nor its SAME placement");
        const QuantParams wp = weightParams(i, w, false, 1);
        const std::vector<int8_t> c = codes(w, wp, node.inputs[1]);
        // ONNX [I, O, kh, kw] → TRANSPOSE_CONV [O, kh, kw, I] (the same taps: neither flips them).
        std::vector<int8_t> stored(c.size());
        for (int64_t a = 0; a < ic; ++a)
            for (int64_t b = 0; b < o; ++b)
                for (int64_t y = 0; y < kh; ++y)
                    for (int64_t x = 0; x < kw; ++x)
                        stored[size_t(((b * kh + y) * kw + x) * ic + a)] = c[size_t(((a * o + b) * kh + y) * kw + x)];
        const TensorQuant wq{wp.scales, std::vector<int64_t>(wp.scales.size(), 0), 0};
        const int32_t wt = b_.constant(
            {node.inputs[1], {int32_t(o), int32_t(kh), int32_t(kw), int32_t(ic)}, tf::TensorType::Int8, 0, wq},
            bytesOf(stored));
        const std::string label = node.name.empty() ? out : node.name;
        const bool biasInput = options_.transposeConvBias == TfliteTransposeConvBias::Input;
        const int32_t bt =
            biasInput ? bias(node, 2, label + "/bias", o, b_.at(in.tensor).quant->scales[0], wp.scales) : -1;
        const Placed result = newActivation(out, out);
        if (const auto act = tf::Activation(fusedActivation(i)); act != tf::Activation::None) {
            const TensorQuant q = *b_.at(result.tensor).quant;
            const double top = double(q.scales[0]) * double(127 - q.zeroPoints[0]);
            if (act == tf::Activation::ReluN1To1 || q.zeroPoints[0] != -128 ||
                (act == tf::Activation::Relu6 && top > 6.0 * (1.0 + 1e-6)))
                throw Refused("its fused activation is not the int8 range of its output");
        }
        const TensorDesc resultDesc = b_.at(result.tensor);
        const int32_t shape = int32Constant(label + "/output_shape", resultDesc.shape);
        // A fused Relu/Relu6 is the output's own range (its zero point is the code of 0, its top at
        // most 6): the int8 clamp is the activation, so the version-4 field is not needed.
        fb::Table opt;
        opt.scalar<int8_t>(tf::transpose_conv::padding, int8_t(*ph));
        opt.scalar<int32_t>(tf::transpose_conv::stride_w, int32_t(strides[1]));
        opt.scalar<int32_t>(tf::transpose_conv::stride_h, int32_t(strides[0]));
        const bool hasBias = node.inputs.size() > 2 && !node.inputs[2].empty();
        if (biasInput || !hasBias) {
            std::vector<int32_t> inputs = {shape, wt, in.tensor};
            if (biasInput)
                inputs.push_back(bt);
            b_.op({BuiltinOperator::TransposeConv,
                   inputs,
                   {result.tensor},
                   BuiltinOptions::TransposeConvOptions,
                   std::move(opt)});
            return;
        }
        // The sum without its bias, then an ADD of the bias. Its range is the output's less the
        // bias's: [out min − bias max, out max − bias min]. Wider would not matter, for a sum clipped
        // there still lands at or beyond the output's bound once any channel's bias is added.
        Tensor b(DType::F32, {1, o, 1, 1});
        const Tensor* t = q_.constant(model_, node.inputs[2]);
        if (!t || t->numel() != o)
            throw Refused("bias '" + node.inputs[2] + "' is not a constant of " + std::to_string(o) + " values");
        const Tensor f = t->toFloat32();
        std::copy(f.values<float>().begin(), f.values<float>().end(), b.mutableValues<float>().begin());
        const auto bv = b.values<float>();
        const float bMin = *std::min_element(bv.begin(), bv.end()), bMax = *std::max_element(bv.begin(), bv.end());
        const TensorQuant& q = *resultDesc.quant;
        const float outMin = q.scales[0] * float(-128 - q.zeroPoints[0]);
        const float outMax = q.scales[0] * float(127 - q.zeroPoints[0]);
        const Range range{std::min(outMin - bMax, 0.0f), std::max(outMax - bMin, 0.0f)};
        const QuantParams sp = quantParamsFromRanges(QType::Int8, BlockLayout::perTensor({1}),
                                                     std::span<const Range>(&range, 1), false, {}, label + "/sum");
        const int32_t sum = b_.tensor({label + "/sum", resultDesc.shape, tf::TensorType::Int8, 0,
                                       TensorQuant{{sp.scales[0]}, {int64_t(sp.zeroPoints.at(0))}, 0}});
        b_.op({BuiltinOperator::TransposeConv, {shape, wt, in.tensor}, {sum}, BuiltinOptions::TransposeConvOptions,
               std::move(opt)});
        const int32_t biasConstant = constantOperand(label + "/bias", b, true, false);
        fb::Table addOpt;
        addOpt.scalar<int8_t>(tf::add_mul::fused_activation_function, fusedActivation(i));
        b_.op({BuiltinOperator::Add, {sum, biasConstant}, {result.tensor}, BuiltinOptions::AddOptions,
               std::move(addOpt)});
    }

    void fullyConnected(const Node& node, size_t i)
    {
        const Placed in = input(node.inputs.at(0));
        const Shape inShape = onnxShape(node.inputs[0]);
        if (in.nhwc || inShape.size() != 2)
            throw Refused("FULLY_CONNECTED is written for a 2-D input only");
        const Tensor* weight = q_.constant(model_, node.inputs.at(1));
        if (!weight || weight->rank() != 2)
            throw Refused("its weight is not a constant 2-D tensor");
        bool transposed = node.opType == "MatMul" ? false : node.intAttribute("transB", 0) != 0;
        if (node.opType == "Gemm") {
            const Attribute* alpha = node.attribute("alpha");
            const Attribute* beta = node.attribute("beta");
            if (node.intAttribute("transA", 0) != 0 || (alpha && alpha->f != 1.0f) || (beta && beta->f != 1.0f))
                throw Refused("a Gemm with transA, alpha or beta other than 0, 1, 1");
        }
        Tensor w = weight->toFloat32();
        if (!transposed) { // [I, O] → [O, I]
            const int64_t rows = w.dim(0), cols = w.dim(1);
            Tensor t(DType::F32, {cols, rows});
            const auto src = w.values<float>();
            auto dst = t.mutableValues<float>();
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < cols; ++c)
                    dst[size_t(c * rows + r)] = src[size_t(r * cols + c)];
            w = std::move(t);
        }
        const QuantParams wp = weightParams(i, w, true);
        const std::vector<int8_t> c = codes(w, wp, node.inputs[1]);
        const int64_t o = w.dim(0);
        const int32_t wt = b_.constant(
            {node.inputs[1], {int32_t(o), int32_t(w.dim(1))}, tf::TensorType::Int8, 0, TensorQuant{wp.scales, {0}, 0}},
            bytesOf(c));
        const std::string out = outputValue(i);
        const int32_t bt = bias(node, node.opType == "Gemm" ? 2 : 99, (node.name.empty() ? out : node.name) + "/bias",
                                o, b_.at(in.tensor).quant->scales[0], wp.scales);
        const Placed result = newActivation(out, out);
        fb::Table opt;
        opt.scalar<int8_t>(tf::fully_connected::fused_activation_function, fusedActivation(i));
        b_.op({BuiltinOperator::FullyConnected,
               {in.tensor, wt, bt},
               {result.tensor},
               BuiltinOptions::FullyConnectedOptions,
               std::move(opt)});
    }

    void binary(const Node& node, size_t i)
    {
        if (node.inputs.size() != 2)
            throw Refused("two inputs expected");
        const bool div = node.opType == "Div";
        std::optional<Placed> a, b;
        for (size_t k = 0; k < 2; ++k)
            if (const auto p = placed_.find(node.inputs[k]); p != placed_.end())
                (k == 0 ? a : b) = p->second;
        if (!a && !b)
            throw Refused("neither input is an activation");
        if (div && !b && !q_.constant(model_, node.inputs[1]))
            throw Refused("it divides by a value that is not a constant");
        const bool nhwc = (a && a->nhwc) || (b && b->nhwc);
        int32_t ta, tb;
        for (size_t k = 0; k < 2; ++k) {
            const std::optional<Placed>& p = k == 0 ? a : b;
            int32_t& t = k == 0 ? ta : tb;
            if (p) {
                if (p->nhwc != nhwc && b_.at(p->tensor).shape.size() > 1)
                    throw Refused("it mixes a 4-D and a lower-rank activation");
                if (div && k == 1)
                    throw Refused("LiteRT has no int8 DIV by an activation");
                t = p->tensor;
                continue;
            }
            const Tensor* c = q_.constant(model_, node.inputs[k]);
            if (!c || !isFloatingDType(c->dtype()))
                throw Refused("input '" + node.inputs[k] + "' is neither an activation nor a float constant");
            t = constantOperand(node.inputs[k], *c, nhwc, div && k == 1);
        }
        const std::string out = outputValue(i);
        const Placed result = newActivation(out, out);
        fb::Table opt;
        opt.scalar<int8_t>(tf::add_mul::fused_activation_function, fusedActivation(i));
        const bool add = node.opType == "Add", sub = node.opType == "Sub";
        b_.op({add ? BuiltinOperator::Add : sub ? BuiltinOperator::Sub : BuiltinOperator::Mul,
               {ta, tb},
               {result.tensor},
               add ? BuiltinOptions::AddOptions : sub ? BuiltinOptions::SubOptions : BuiltinOptions::MulOptions,
               std::move(opt)});
    }

    int storedAxis(int64_t axis, int rank, bool nhwc) const
    {
        if (axis < 0)
            axis += rank;
        if (axis < 0 || axis >= rank)
            throw Refused("axis " + std::to_string(axis) + " outside rank " + std::to_string(rank));
        return nhwc ? kToNhwc[axis] : int(axis);
    }

    // CONCATENATION's inputs and output share one scale and zero point (XNNPACK runs it only so):
    // an input with other parameters is requantized to the output's by a QUANTIZE, as the
    // converter does. The output keeps its calibrated range, the union of its inputs'.
    void concat(const Node& node, size_t i)
    {
        const std::string out = outputValue(i);
        const TensorQuant outQuant = activationQuant(out);
        std::vector<int32_t> ins;
        bool nhwc = false;
        for (const std::string& v : node.inputs) {
            const Placed p = input(v);
            nhwc = p.nhwc;
            const TensorDesc d = b_.at(p.tensor);
            if (d.quant && d.quant->scales == outQuant.scales && d.quant->zeroPoints == outQuant.zeroPoints) {
                ins.push_back(p.tensor);
                continue;
            }
            const int32_t requantized = b_.tensor({v + "/requantized", d.shape, tf::TensorType::Int8, 0, outQuant});
            b_.op({BuiltinOperator::Quantize, {p.tensor}, {requantized}, BuiltinOptions::None, {}});
            ins.push_back(requantized);
        }
        const int rank = int(onnxShape(node.outputs.at(0)).size());
        const int axis = storedAxis(node.intAttribute("axis", 1), rank, nhwc);
        const Placed result = newActivation(out, out);
        fb::Table opt;
        opt.scalar<int32_t>(tf::concatenation::axis, axis);
        opt.scalar<int8_t>(tf::concatenation::fused_activation_function, fusedActivation(i));
        b_.op({BuiltinOperator::Concatenation,
               ins,
               {result.tensor},
               BuiltinOptions::ConcatenationOptions,
               std::move(opt)});
    }

    void mean(const Node& node, size_t i)
    {
        const Placed in = input(node.inputs.at(0));
        if (!in.nhwc)
            throw Refused("MEAN is written over the spatial axes of a 4-D input only");
        bool keep = true;
        if (node.opType == "ReduceMean") {
            std::vector<int64_t> axes = intsAttribute(node, "axes", {});
            if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
                const Tensor* a = q_.constant(model_, node.inputs[1]);
                if (!a)
                    throw Refused("its axes are not a constant");
                const Tensor ai = a->toFloat32();
                axes.clear();
                for (float v : ai.values<float>())
                    axes.push_back(int64_t(v));
            }
            for (int64_t& a : axes)
                a = a < 0 ? a + 4 : a;
            std::sort(axes.begin(), axes.end());
            if (axes != std::vector<int64_t>{2, 3})
                throw Refused("MEAN is written over the spatial axes (2, 3) only");
            keep = node.intAttribute("keepdims", 1) != 0;
        }
        const std::string out = outputValue(i);
        const int32_t axes = int32Constant(out + "/axes", {1, 2});
        const std::vector<int32_t> shape = int32Shape(onnxShape(out), out);
        const Placed result{
            b_.tensor({out, keep ? stored(shape, true) : shape, tf::TensorType::Int8, 0, activationQuant(out)}), keep};
        placed_[out] = result;
        fb::Table opt;
        opt.scalar<bool>(tf::reducer::keep_dims, keep);
        b_.op({BuiltinOperator::Mean,
               {in.tensor, axes},
               {result.tensor},
               BuiltinOptions::ReducerOptions,
               std::move(opt)});
    }

    void pool(const Node& node, size_t i)
    {
        Placed in = input(node.inputs.at(0));
        const Shape inShape = onnxShape(node.inputs[0]);
        if (!in.nhwc)
            throw Refused("only 2-D pooling (a 4-D input) is written");
        const bool maxPool = node.opType == "MaxPool";
        if (node.outputs.size() > 1 && !node.outputs[1].empty())
            throw Refused("MaxPool's indices have no LiteRT equivalent");
        const Window w = window(node, intsAttribute(node, "kernel_shape", {}), inShape, onnxShape(node.outputs[0]));
        if (w.dh != 1 || w.dw != 1)
            throw Refused("dilated pooling has no LiteRT equivalent");
        const std::string out = outputValue(i);
        tf::Padding mode = tf::Padding::Valid;
        if (!maxPool) {
            const auto sh = samePads(inShape[2], w.kh, w.sh, 1), sw = samePads(inShape[3], w.kw, w.sw, 1);
            const bool none = w.top == 0 && w.left == 0 && w.bottom == 0 && w.right == 0;
            const bool same = sh == std::pair{w.top, w.bottom} && sw == std::pair{w.left, w.right};
            if (!none && !(same && node.intAttribute("count_include_pad", 0) == 0))
                throw Refused("its padding is neither none nor TensorFlow's SAME without the padding counted");
            mode = none ? tf::Padding::Valid : tf::Padding::Same;
        } else {
            mode = padding(in, w, inShape, node.name.empty() ? out : node.name, true);
        }
        const Placed result = newActivation(out, out);
        fb::Table opt;
        opt.scalar<int8_t>(tf::pool2d::padding, int8_t(mode));
        opt.scalar<int32_t>(tf::pool2d::stride_w, int32_t(w.sw));
        opt.scalar<int32_t>(tf::pool2d::stride_h, int32_t(w.sh));
        opt.scalar<int32_t>(tf::pool2d::filter_width, int32_t(w.kw));
        opt.scalar<int32_t>(tf::pool2d::filter_height, int32_t(w.kh));
        opt.scalar<int8_t>(tf::pool2d::fused_activation_function, fusedActivation(i));
        b_.op({maxPool ? BuiltinOperator::MaxPool2D : BuiltinOperator::AveragePool2D,
               {in.tensor},
               {result.tensor},
               BuiltinOptions::Pool2DOptions,
               std::move(opt)});
    }

    int32_t transposeOp(int32_t in, const std::vector<int32_t>& perm, const std::string& name)
    {
        const TensorDesc src = b_.at(in);
        std::vector<int32_t> shape(perm.size());
        for (size_t k = 0; k < perm.size(); ++k)
            shape[k] = src.shape.at(size_t(perm[k]));
        const int32_t permTensor = int32Constant(name + "/perm", perm);
        const int32_t out = b_.tensor({name, shape, tf::TensorType::Int8, 0, src.quant});
        b_.op({BuiltinOperator::Transpose, {in, permTensor}, {out}, BuiltinOptions::TransposeOptions, {}});
        return out;
    }

    void reshape(const Node& node)
    {
        Placed in = input(node.inputs.at(0));
        const std::string& out = node.outputs.at(0);
        if (in.nhwc) {
            const std::vector<int32_t>& s = b_.at(in.tensor).shape;
            if (!(s[1] == 1 && s[2] == 1)) // NHWC order differs from NCHW's: back to NCHW first
                in = {transposeOp(in.tensor, {0, 3, 1, 2}, out + "/nchw"), false};
        }
        const std::vector<int32_t> shape = int32Shape(onnxShape(out), out);
        const int32_t shapeTensor = int32Constant(out + "/shape", shape);
        const bool nhwc = shape.size() == 4;
        const int32_t flat =
            b_.tensor({nhwc ? out + "/nchw" : out, shape, tf::TensorType::Int8, 0, activationQuant(out)});
        fb::Table opt;
        opt.vector(tf::reshape::new_shape, shape);
        b_.op({BuiltinOperator::Reshape,
               {in.tensor, shapeTensor},
               {flat},
               BuiltinOptions::ReshapeOptions,
               std::move(opt)});
        placed_[out] = {nhwc ? transposeOp(flat, {0, 2, 3, 1}, out) : flat, nhwc};
    }

    void transpose(const Node& node)
    {
        const Placed in = input(node.inputs.at(0));
        const int rank = int(b_.at(in.tensor).shape.size());
        std::vector<int64_t> perm = intsAttribute(node, "perm", {});
        if (perm.empty())
            for (int k = rank - 1; k >= 0; --k)
                perm.push_back(k);
        if (int(perm.size()) != rank)
            throw Refused("perm does not match the rank");
        std::vector<int32_t> p(static_cast<size_t>(rank));
        for (int k = 0; k < rank; ++k)
            p[size_t(k)] = in.nhwc ? kToNhwc[perm[size_t(kFromNchw[k])]] : int32_t(perm[size_t(k)]);
        placed_[node.outputs.at(0)] = {transposeOp(in.tensor, p, node.outputs[0]), in.nhwc};
    }

    // Input `k` of `node` as integers: a constant, or a value computed from shapes during
    // calibration (fixed for the model's shapes). Empty when the input is absent.
    std::vector<int64_t> integerInput(const Node& node, size_t k, const char* what) const
    {
        if (k >= node.inputs.size() || node.inputs[k].empty())
            return {};
        const std::string& name = node.inputs[k];
        if (const Tensor* t = q_.constant(model_, name)) {
            if (t->dtype() == DType::I64)
                return {t->values<int64_t>().begin(), t->values<int64_t>().end()};
            if (t->dtype() == DType::I32)
                return {t->values<int32_t>().begin(), t->values<int32_t>().end()};
            throw Refused(std::string("its ") + what + " '" + name + "' is not an integer tensor");
        }
        const auto computed = q_.integers.find(name);
        if (computed == q_.integers.end())
            throw Refused(std::string("its ") + what + " '" + name +
                          "' is neither a constant nor computed from the model's shapes");
        return computed->second;
    }

    // One SLICE of `in` (placed) from `begin` for `size` elements per axis, both in the ONNX
    // value's axis order; the output shares the input's scale (a pass-through).
    void writeSlice(const Placed& in, std::vector<int32_t> begin, std::vector<int32_t> size, const std::string& out)
    {
        if (onnxShape(out).size() != begin.size())
            throw Refused("output '" + out + "' has another rank than its input");
        begin = stored(begin, in.nhwc), size = stored(size, in.nhwc);
        const int32_t beginTensor = int32Constant(out + "/begin", begin);
        const int32_t sizeTensor = int32Constant(out + "/size", size);
        const Placed result = newActivation(out, out);
        if (result.nhwc != in.nhwc || b_.at(result.tensor).shape != size)
            throw Refused("output '" + out + "' does not have the shape its slice gives");
        b_.op({BuiltinOperator::Slice, {in.tensor, beginTensor, sizeTensor}, {result.tensor},
               BuiltinOptions::SliceOptions, {}});
    }
    // A SLICE of stored tensor `in` (begin and size in its stored axis order) into a new tensor.
    int32_t sliceOp(int32_t in, const std::vector<int32_t>& begin, const std::vector<int32_t>& size,
                    const std::string& name, const TensorQuant& quant)
    {
        const int32_t beginTensor = int32Constant(name + "/begin", begin);
        const int32_t sizeTensor = int32Constant(name + "/size", size);
        const int32_t out = b_.tensor({name, size, tf::TensorType::Int8, 0, quant});
        b_.op({BuiltinOperator::Slice, {in, beginTensor, sizeTensor}, {out}, BuiltinOptions::SliceOptions, {}});
        return out;
    }

    void slice(const Node& node)
    {
        const Placed in = input(node.inputs.at(0));
        const Shape shape = onnxShape(node.inputs[0]);
        const int64_t rank = int64_t(shape.size());
        std::vector<int64_t> starts = intsAttribute(node, "starts", {}), ends = intsAttribute(node, "ends", {});
        std::vector<int64_t> axes = intsAttribute(node, "axes", {}), steps;
        if (node.inputs.size() > 1) { // opset 10+: the bounds are inputs
            starts = integerInput(node, 1, "starts"), ends = integerInput(node, 2, "ends");
            axes = integerInput(node, 3, "axes"), steps = integerInput(node, 4, "steps");
        }
        if (axes.empty())
            for (size_t k = 0; k < starts.size(); ++k)
                axes.push_back(int64_t(k));
        if (starts.size() != ends.size() || axes.size() != starts.size() ||
            (!steps.empty() && steps.size() != starts.size()))
            throw Refused("its starts, ends, axes and steps differ in length");
        std::vector<int32_t> begin(size_t(rank), 0), size(shape.begin(), shape.end()), step(size_t(rank), 1);
        for (size_t k = 0; k < axes.size(); ++k) {
            const int64_t axis = axes[k] < 0 ? axes[k] + rank : axes[k];
            if (axis < 0 || axis >= rank)
                throw Refused("axis " + std::to_string(axes[k]) + " is outside rank " + std::to_string(rank));
            const int64_t stride = steps.empty() ? 1 : steps[k];
            if (stride < 1 || stride > std::numeric_limits<int32_t>::max())
                throw Refused("a step of " + std::to_string(stride) + " (positive steps are written)");
            const int64_t dim = shape[size_t(axis)];
            auto clampIndex = [&](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t(0), dim); };
            const int64_t from = clampIndex(starts[k]), to = clampIndex(ends[k]);
            begin[size_t(axis)] = int32_t(from);
            size[size_t(axis)] = int32_t(std::max<int64_t>((to - from + stride - 1) / stride, 0));
            step[size_t(axis)] = int32_t(stride);
        }
        if (std::all_of(step.begin(), step.end(), [](int32_t v) { return v == 1; }))
            return writeSlice(in, begin, size, node.outputs.at(0));
        writeStridedSlice(in, begin, size, step, node.outputs.at(0));
    }

    // A STRIDED_SLICE taking every step-th element of `size` from `begin` per axis (ONNX axis
    // order), no masks: end = begin + (size − 1)·step + 1. The output shares the input's scale.
    void writeStridedSlice(const Placed& in, std::vector<int32_t> begin, std::vector<int32_t> size,
                           std::vector<int32_t> step, const std::string& out)
    {
        if (onnxShape(out).size() != begin.size())
            throw Refused("output '" + out + "' has another rank than its input");
        begin = stored(begin, in.nhwc), size = stored(size, in.nhwc), step = stored(step, in.nhwc);
        std::vector<int32_t> end(begin.size());
        for (size_t k = 0; k < begin.size(); ++k)
            end[k] = size[k] == 0 ? begin[k] : begin[k] + (size[k] - 1) * step[k] + 1;
        const int32_t beginTensor = int32Constant(out + "/begin", begin);
        const int32_t endTensor = int32Constant(out + "/end", end);
        const int32_t stepTensor = int32Constant(out + "/strides", step);
        const Placed result = newActivation(out, out);
        if (result.nhwc != in.nhwc || b_.at(result.tensor).shape != size)
            throw Refused("output '" + out + "' does not have the shape its slice gives");
        fb::Table opt;
        for (int field : {tf::strided_slice::begin_mask, tf::strided_slice::end_mask, tf::strided_slice::ellipsis_mask,
                          tf::strided_slice::new_axis_mask, tf::strided_slice::shrink_axis_mask})
            opt.scalar<int32_t>(field, 0);
        b_.op({BuiltinOperator::StridedSlice, {in.tensor, beginTensor, endTensor, stepTensor}, {result.tensor},
               BuiltinOptions::StridedSliceOptions, std::move(opt)});
    }

    // Split: one SLICE per output along the axis.
    void split(const Node& node)
    {
        const Placed in = input(node.inputs.at(0));
        const Shape shape = onnxShape(node.inputs[0]);
        const int64_t rank = int64_t(shape.size());
        int64_t axis = node.intAttribute("axis", 0);
        axis = axis < 0 ? axis + rank : axis;
        if (axis < 0 || axis >= rank)
            throw Refused("axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
        int32_t offset = 0;
        for (const std::string& out : node.outputs) {
            const Shape part = onnxShape(out); // the sizes the model computed, whichever form they were given in
            std::vector<int32_t> begin(size_t(rank), 0), size(shape.begin(), shape.end());
            begin[size_t(axis)] = offset;
            size[size_t(axis)] = int32_t(part.at(size_t(axis)));
            offset += size[size_t(axis)];
            writeSlice(in, begin, size, out);
        }
        if (offset != shape[size_t(axis)])
            throw Refused("its outputs do not cover axis " + std::to_string(axis));
    }

    void pad(const Node& node)
    {
        const Placed in = input(node.inputs.at(0));
        std::string mode = "constant";
        if (const Attribute* a = node.attribute("mode"))
            mode = a->s;
        if (mode != "constant")
            throw Refused("only constant padding is written");
        std::vector<int64_t> pads = intsAttribute(node, "pads", {});
        if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
            const Tensor* t = q_.constant(model_, node.inputs[1]);
            if (!t)
                throw Refused("its pads are not a constant");
            const Tensor f = t->toFloat32();
            pads.clear();
            for (float v : f.values<float>())
                pads.push_back(int64_t(v));
        }
        if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
            const Tensor* v = q_.constant(model_, node.inputs[2]);
            if (!v || v->toFloat32().values<float>()[0] != 0.0f)
                throw Refused("only padding with 0 is written");
        }
        const int rank = int(b_.at(in.tensor).shape.size());
        if (int(pads.size()) != 2 * rank)
            throw Refused("pads do not match the rank");
        std::vector<int32_t> p(static_cast<size_t>(2 * rank));
        for (int k = 0; k < rank; ++k) {
            const int onnxAxis = in.nhwc ? kFromNchw[k] : k;
            p[size_t(2 * k)] = int32_t(pads[size_t(onnxAxis)]);
            p[size_t(2 * k + 1)] = int32_t(pads[size_t(onnxAxis + rank)]);
        }
        const std::string& out = node.outputs.at(0);
        const TensorQuant inQuant = *b_.at(in.tensor).quant, outQuant = activationQuant(out);
        if (in.nhwc && p[0] == 0 && p[1] == 0 && p[6] == 0 && p[7] == 0 && inQuant.scales == outQuant.scales &&
            inQuant.zeroPoints == outQuant.zeroPoints) {
            // Spatial padding (torch.onnx's Pad before a count_include_pad AveragePool): the border
            // as constants of the zero point, which Arm NN 20.08 computes as written (see border).
            Placed padded = in;
            Window w;
            w.top = p[2], w.bottom = p[3], w.left = p[4], w.right = p[5];
            border(padded, w, out, int8_t(inQuant.zeroPoints.at(0)));
            placed_[out] = padded;
            return;
        }
        const int32_t padsTensor = int32Constant(out + "/paddings", p, {rank, 2});
        const Placed result = newActivation(out, out);
        b_.op({BuiltinOperator::Pad, {in.tensor, padsTensor}, {result.tensor}, BuiltinOptions::PadOptions, {}});
    }

    void unary(const Node& node)
    {
        const Placed in = input(node.inputs.at(0));
        const std::string& out = node.outputs.at(0);
        const Placed result = newActivation(out, out);
        if (node.opType == "Sigmoid") {
            b_.op({BuiltinOperator::Logistic, {in.tensor}, {result.tensor}, BuiltinOptions::None, {}});
        } else if (node.opType == "HardSwish") {
            b_.op({BuiltinOperator::HardSwish, {in.tensor}, {result.tensor}, BuiltinOptions::HardSwishOptions, {}});
        } else {
            const int rank = int(b_.at(in.tensor).shape.size());
            int64_t axis = node.intAttribute("axis", -1);
            if (axis < 0)
                axis += rank;
            if (in.nhwc || axis != rank - 1)
                throw Refused("SOFTMAX is written over the last axis only");
            fb::Table opt;
            opt.scalar<float>(tf::softmax::beta, 1.0f);
            b_.op({BuiltinOperator::Softmax,
                   {in.tensor},
                   {result.tensor},
                   BuiltinOptions::SoftmaxOptions,
                   std::move(opt)});
        }
    }

    // LiteRT has no HARD_SIGMOID; PyTorch's (alpha 1/6, beta 1/2) is relu6(x + 3) / 6, written as an
    // ADD of 3 with a fused RELU6 (its output on the fixed grid [0, 6]) and a MUL by 1/6. Both
    // constants are exact on their int8 grids.
    void hardSigmoid(const Node& node)
    {
        const Attribute* alpha = node.attribute("alpha");
        const Attribute* beta = node.attribute("beta");
        const float a = alpha ? alpha->f : 0.2f, b = beta ? beta->f : 0.5f;
        if (std::fabs(a - 1.0f / 6.0f) > 1e-6f || b != 0.5f)
            throw Refused("only HardSigmoid with alpha 1/6 and beta 1/2 (relu6(x + 3) / 6) is written");
        const Placed in = input(node.inputs.at(0));
        const std::string& out = node.outputs.at(0);
        const TensorDesc src = b_.at(in.tensor);
        const int32_t three =
            constantOperand(out + "/3", Tensor::fromVector(DType::F32, {1}, std::vector<float>{3.0f}), in.nhwc, false);
        const int32_t shifted = b_.tensor(
            {out + "/relu6(x+3)", src.shape, tf::TensorType::Int8, 0, TensorQuant{{6.0f / 255.0f}, {-128}, 0}});
        fb::Table addOpt;
        addOpt.scalar<int8_t>(tf::add_mul::fused_activation_function, int8_t(tf::Activation::Relu6));
        b_.op({BuiltinOperator::Add, {in.tensor, three}, {shifted}, BuiltinOptions::AddOptions, std::move(addOpt)});
        const int32_t sixth = constantOperand(
            out + "/1/6", Tensor::fromVector(DType::F32, {1}, std::vector<float>{1.0f / 6.0f}), in.nhwc, false);
        const Placed result = newActivation(out, out);
        fb::Table mulOpt;
        mulOpt.scalar<int8_t>(tf::add_mul::fused_activation_function, int8_t(tf::Activation::None));
        b_.op({BuiltinOperator::Mul, {shifted, sixth}, {result.tensor}, BuiltinOptions::MulOptions, std::move(mulOpt)});
    }

    // Resize of the spatial axes of a 4-D value → RESIZE_BILINEAR (mode linear) or
    // RESIZE_NEAREST_NEIGHBOR; the output shares the input's scale. The ONNX
    // coordinate_transformation_mode becomes the flags:
    //   half_pixel (and pytorch_half_pixel where no output axis has length 1) → half_pixel_centers
    //   align_corners → align_corners;  asymmetric → neither
    // For nearest, the rounding must be what LiteRT's flags imply: floor when asymmetric,
    // round_prefer_ceil with half_pixel_centers or align_corners. Other modes (tf_crop_and_resize,
    // cubic, antialias, scales that are not the ratio of the sizes) are refused.
    void resize(const Node& node)
    {
        auto text = [&](const char* name, const char* fallback) {
            const Attribute* a = node.attribute(name);
            return a ? a->s : std::string(fallback);
        };
        // Opset 10's Resize has no coordinate_transformation_mode: asymmetric coordinates, floor.
        const auto opset = model_.opsetImports.find("");
        const bool opset10 = opset != model_.opsetImports.end() && opset->second < 11;
        const std::string mode = text("mode", "nearest");
        const bool bilinear = mode == "linear";
        if (!bilinear && mode != "nearest")
            throw Refused("Resize mode '" + mode + "' has no LiteRT op (linear and nearest are written)");
        if (node.intAttribute("antialias", 0) != 0)
            throw Refused("an antialiased Resize has no LiteRT op");
        const std::string coordinates = opset10 ? "asymmetric" : text("coordinate_transformation_mode", "half_pixel");
        const Placed in = input(node.inputs.at(0));
        if (!in.nhwc)
            throw Refused("only a 4-D Resize is written");
        const std::string& out = node.outputs.at(0);
        const std::vector<int32_t> shape = int32Shape(onnxShape(out), out);
        const Shape inShape = onnxShape(node.inputs[0]);
        if (shape[0] != inShape[0] || shape[1] != inShape[1])
            throw Refused("a Resize of the batch or channel axis");
        // Scales (rather than sizes) map coordinates by 1/scale: the ratio of the sizes only when exact.
        const size_t scalesInput = opset10 ? 1 : 2;
        if (node.inputs.size() > scalesInput && !node.inputs[scalesInput].empty() &&
            (opset10 || node.inputs.size() <= 3 || node.inputs[3].empty())) {
            const Tensor* scales = q_.constant(model_, node.inputs[scalesInput]);
            if (!scales || scales->numel() != 4)
                throw Refused("its scales are not a constant of 4 values");
            const Tensor f = scales->toFloat32();
            for (int axis : {2, 3})
                if (double(inShape[size_t(axis)]) * double(f.values<float>()[size_t(axis)]) !=
                    double(shape[size_t(axis)]))
                    throw Refused("its scale " + std::to_string(f.values<float>()[size_t(axis)]) + " on axis " +
                                  std::to_string(axis) + " is not the ratio of the output's size to the input's");
        }
        bool alignCorners = false, halfPixel = false;
        if (coordinates == "half_pixel" || (coordinates == "pytorch_half_pixel" && shape[2] > 1 && shape[3] > 1))
            halfPixel = true;
        else if (coordinates == "align_corners")
            alignCorners = true;
        else if (coordinates != "asymmetric")
            throw Refused("coordinate_transformation_mode '" + coordinates + "' has no LiteRT equivalent");
        if (!bilinear) {
            const std::string rounding = text("nearest_mode", "round_prefer_floor");
            const std::string wanted = halfPixel || alignCorners ? "round_prefer_ceil" : "floor";
            if (!opset10 && rounding != wanted)
                throw Refused("a nearest Resize with " + coordinates + " coordinates and nearest_mode " + rounding +
                              " (LiteRT rounds as nearest_mode " + wanted + " there)");
        }
        const int32_t size = int32Constant(out + "/size", {shape[2], shape[3]});
        const Placed result = newActivation(out, out);
        fb::Table opt;
        if (bilinear) {
            opt.scalar<bool>(tf::resize_bilinear::align_corners, alignCorners);
            opt.scalar<bool>(tf::resize_bilinear::half_pixel_centers, halfPixel);
            b_.op({BuiltinOperator::ResizeBilinear,
                   {in.tensor, size},
                   {result.tensor},
                   BuiltinOptions::ResizeBilinearOptions,
                   std::move(opt)});
            return;
        }
        opt.scalar<bool>(tf::resize_nearest::align_corners, alignCorners);
        opt.scalar<bool>(tf::resize_nearest::half_pixel_centers, halfPixel);
        b_.op({BuiltinOperator::ResizeNearestNeighbor,
               {in.tensor, size},
               {result.tensor},
               BuiltinOptions::ResizeNearestNeighborOptions,
               std::move(opt)});
    }

    const Model& model_;
    const QuantizationPlan& plan_;
    const WeightQuantizer& weights_;
    const OdmlQuantization& q_;
    const TfliteOptions& options_;
    TfliteSummary& summary_;
    ModelBuilder b_;
    std::map<std::string, Placed> placed_;
    std::map<size_t, size_t> fusedBy_; // producer node -> the fused activation node
};

// The read-back check: what the file holds is what was meant.
void checkWritten(const std::filesystem::path& path, const ModelBuilder& b)
{
    const TfliteContents c = readTflite(path);
    const std::string what = path.string();
    if (c.tensors.size() != b.tensors().size() || c.operatorCodes.size() != b.ops().size() ||
        c.bufferSizes.size() != b.buffers().size())
        throw Error(what + ": read back " + std::to_string(c.tensors.size()) + " tensors, " +
                    std::to_string(c.operatorCodes.size()) + " operators, " + std::to_string(c.bufferSizes.size()) +
                    " buffers; wrote " + std::to_string(b.tensors().size()) + ", " + std::to_string(b.ops().size()) +
                    ", " + std::to_string(b.buffers().size()));
    for (size_t k = 0; k < c.tensors.size(); ++k) {
        const TensorDesc& d = b.tensors()[k];
        const TfliteContents::TensorInfo& t = c.tensors[k];
        if (t.name != d.name || t.shape != d.shape || t.type != int(d.type) || t.buffer != d.buffer ||
            (d.quant && t.scales != d.quant->scales))
            throw Error(what + ": tensor " + std::to_string(k) + " ('" + d.name + "') reads back differently");
    }
    for (size_t k = 0; k < c.operatorCodes.size(); ++k)
        if (c.operatorCodes[k] != int32_t(b.ops()[k].op))
            throw Error(what + ": operator " + std::to_string(k) + " reads back differently");
    for (size_t k = 0; k < c.bufferSizes.size(); ++k)
        if (c.bufferSizes[k] != b.buffers()[k].size())
            throw Error(what + ": buffer " + std::to_string(k) + " reads back with another size");
}

} // namespace

TfliteContents readTflite(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw Error(path.string() + ": cannot open");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0 || size > (int64_t(1) << 31))
        throw Error(path.string() + ": not a LiteRT flatbuffer (size " + std::to_string(size) + " bytes)");
    in.seekg(0);
    std::vector<uint8_t> bytes(size_t(size), 0);
    in.read(reinterpret_cast<char*>(bytes.data()), size);
    if (!in)
        throw Error(path.string() + ": read failed");
    const fb::Reader reader(bytes, path.string(), tf::kFileIdentifier);
    const fb::TableView model = reader.root();
    TfliteContents c;
    c.version = model.scalar<uint32_t>(tf::model::version, 0);
    if (model.vectorSize(tf::model::subgraphs) != 1)
        throw Error(path.string() + ": expected one subgraph");
    std::vector<int32_t> codes;
    for (size_t k = 0; k < model.vectorSize(tf::model::operator_codes); ++k)
        codes.push_back(
            model.tableAt(tf::model::operator_codes, k).scalar<int32_t>(tf::operator_code::builtin_code, 0));
    const fb::TableView sg = model.tableAt(tf::model::subgraphs, 0);
    for (size_t k = 0; k < sg.vectorSize(tf::subgraph::tensors); ++k) {
        const fb::TableView t = sg.tableAt(tf::subgraph::tensors, k);
        TfliteContents::TensorInfo info;
        info.name = t.string(tf::tensor::name);
        info.type = t.scalar<int8_t>(tf::tensor::type, 0);
        info.shape = t.vector<int32_t>(tf::tensor::shape);
        info.buffer = t.scalar<uint32_t>(tf::tensor::buffer, 0);
        if (t.has(tf::tensor::quantization)) {
            const fb::TableView q = t.table(tf::tensor::quantization);
            info.scales = q.vector<float>(tf::quantization::scale);
            info.zeroPoints = q.vector<int64_t>(tf::quantization::zero_point);
        }
        c.tensors.push_back(std::move(info));
    }
    for (size_t k = 0; k < sg.vectorSize(tf::subgraph::operators); ++k) {
        const fb::TableView op = sg.tableAt(tf::subgraph::operators, k);
        const uint32_t index = op.scalar<uint32_t>(tf::op::opcode_index, 0);
        if (index >= codes.size())
            throw Error(path.string() + ": operator " + std::to_string(k) + " has opcode index " +
                        std::to_string(index) + " of " + std::to_string(codes.size()));
        c.operatorCodes.push_back(codes[index]);
        c.operatorInputs.push_back(op.vector<int32_t>(tf::op::inputs));
        c.operatorOutputs.push_back(op.vector<int32_t>(tf::op::outputs));
        for (int32_t t : c.operatorInputs.back())
            if (t < -1 || t >= int32_t(sg.vectorSize(tf::subgraph::tensors)))
                throw Error(path.string() + ": operator " + std::to_string(k) + " reads tensor " + std::to_string(t) +
                            " of " + std::to_string(sg.vectorSize(tf::subgraph::tensors)));
    }
    c.inputs = sg.vector<int32_t>(tf::subgraph::inputs);
    c.outputs = sg.vector<int32_t>(tf::subgraph::outputs);
    for (size_t k = 0; k < model.vectorSize(tf::model::buffers); ++k)
        c.bufferSizes.push_back(model.tableAt(tf::model::buffers, k).vectorBytes(tf::buffer::data, 1).size());
    return c;
}

namespace {

struct Built {
    ModelBuilder builder;
    std::vector<uint8_t> bytes;
    TfliteSummary summary;
};

Built build(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
            DataSource& calib, const TfliteOptions& options, const CancellationToken& cancel,
            const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    const OdmlQuantization q = computeOdmlQuantization(interpreter, plan, calib, options.odml, cancel, progress);
    Built b;
    b.summary.batches = q.batches;
    cancel.check();
    b.builder = Converter(model, plan, weights, q, options, b.summary).run();
    const std::string description =
        "Quantscope " QUANTSCOPE_VERSION " full-integer export of " + model.sourcePath.filename().string();
    b.bytes = fb::serialize(b.builder.build(description, b.summary), tf::kFileIdentifier);
    b.summary.bytes = int64_t(b.bytes.size());
    return b;
}

} // namespace

TfliteModel buildTflite(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                        DataSource& calib, const TfliteOptions& options, const CancellationToken& cancel,
                        const ProgressCallback& progress)
{
    Built b = build(interpreter, plan, weights, calib, options, cancel, progress);
    if (progress)
        progress(1.0, "done");
    return {std::move(b.bytes), std::move(b.summary)};
}

TfliteSummary exportTflite(const Interpreter& interpreter, const QuantizationPlan& plan, const WeightQuantizer& weights,
                           DataSource& calib, const TfliteOptions& options, const std::filesystem::path& out,
                           const CancellationToken& cancel, const ProgressCallback& progress)
{
    Built b = build(interpreter, plan, weights, calib, options, cancel, progress);
    b.summary.path = out;
    writeFileAtomically(out, b.bytes.data(), b.bytes.size());
    checkWritten(out, b.builder);
    if (progress)
        progress(1.0, "done");
    return b.summary;
}

} // namespace qs
