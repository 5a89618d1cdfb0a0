// Quantization hooks: the plan a rule set makes of a model, the cached
// fake-quantized weights, the hook that runs a model fake-quantized, activation
// calibration and the static ranges it yields, and Interpreter::runNode.
// References are independent: scalar quantizers written here, models whose
// initializers were replaced, observers fed by hand.
#include <QtTest>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "core/block_layout.h"
#include "graph/weight_layout.h"
#include "io/model_loader.h"
#include "quant/kernels.h"
#include "quant/microscaling.h"
#include "model_support.h"
#include "runtime/activation_calibration.h"
#include "runtime/quantization_hook.h"
#include "runtime/tensor_cast.h"

using namespace qs;

namespace {

const std::string kDemoDir = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/";

RuleSet rules(const std::string& rulesJson)
{
    return RuleSet::fromJson(R"({"version": 1, "rules": )" + rulesJson + "}");
}

// The model with some initializers replaced (everything else shared).
using test::withInitializers;

Tensor randomTensor(Shape shape, uint32_t seed, float scale = 1.0f)
{
    Tensor t(DType::F32, std::move(shape));
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    for (float& v : t.mutableValues<float>())
        v = normal(rng);
    return t;
}

// Equal as values (−0 == +0), same shape.
bool sameValues(const Tensor& a, const Tensor& b)
{
    if (a.shape() != b.shape())
        return false;
    const Tensor af = a.toFloat32(), bf = b.toFloat32();
    const auto x = af.values<float>(), y = bf.values<float>();
    for (size_t i = 0; i < x.size(); ++i)
        if (!(x[i] == y[i]))
            return false;
    return true;
}

// Scalar reference: symmetric absmax integer fake-quant of one group of values
// (bound qmax + 0.5, round half to even, clamp to [qmin, qmax]).
void fakeQuantGroupInt(std::vector<float*>& group, int qmin, int qmax)
{
    float absmax = 0;
    for (float* v : group)
        absmax = std::max(absmax, std::abs(*v));
    // Scales stay normal floats: a group of subnormal weights gets FLT_MIN.
    const float scale = absmax == 0 ? 1.0f : std::max(float(double(absmax) / (double(qmax) + 0.5)), FLT_MIN);
    for (float* v : group) {
        const float q = std::clamp(std::nearbyint(*v / scale), float(qmin), float(qmax));
        *v = q * scale;
    }
}

// Scalar reference of int-N absmax tiles: the groups are (index along
// `channel`, tile of `tile` indices along `contraction`), every other axis pooled.
Tensor tiledReference(const Tensor& w, int channel, int contraction, int64_t tile, int qmin, int qmax)
{
    Tensor out = w.toFloat32().clone();
    const Shape& shape = out.shape();
    const Shape strides = rowMajorStrides(shape);
    std::map<std::pair<int64_t, int64_t>, std::vector<float*>> groups;
    float* data = out.mutableValues<float>().data();
    for (int64_t flat = 0; flat < out.numel(); ++flat) {
        const int64_t c = (flat / strides[size_t(channel)]) % shape[size_t(channel)];
        const int64_t k = (flat / strides[size_t(contraction)]) % shape[size_t(contraction)];
        groups[{c, k / tile}].push_back(data + flat);
    }
    for (auto& [key, group] : groups)
        fakeQuantGroupInt(group, qmin, qmax);
    return out;
}

// Microscaling reference: every line of x along `axis` quantized as a 1-D
// tensor of its own (so its blocks run along that axis whatever the layout).
Tensor blockwiseReference(const Tensor& x, int axis, QType t)
{
    Tensor out = x.toFloat32().clone();
    const Shape& shape = out.shape();
    const int64_t length = shape[size_t(axis)], stride = rowMajorStrides(shape)[size_t(axis)];
    float* data = out.mutableValues<float>().data();
    for (int64_t flat = 0; flat < out.numel(); ++flat) {
        if ((flat / stride) % length != 0)
            continue; // not the first element of a line
        std::vector<float> line(static_cast<size_t>(length));
        for (int64_t i = 0; i < length; ++i)
            line[size_t(i)] = data[flat + i * stride];
        const Tensor l = Tensor::fromVector(DType::F32, {length}, line);
        const Tensor q = fakeQuantize(l, microscalingParams(l, t));
        for (int64_t i = 0; i < length; ++i)
            data[flat + i * stride] = q.values<float>()[size_t(i)];
    }
    return out;
}

// Records every node's inputs and outputs of one run.
struct Recorder : NodeObserver {
    std::map<size_t, std::vector<Tensor>> inputs, outputs;
    void beforeNode(NodeEvent& e) override { inputs[e.nodeIndex].assign(e.inputs.begin(), e.inputs.end()); }
    void afterNode(NodeEvent& e) override { outputs[e.nodeIndex].assign(e.outputs.begin(), e.outputs.end()); }
};

// Replaces each plan layer's data input by a scalar int8 absmax fake-quant with
// a given absmax (static) or the input's own absmax (dynamic).
struct ReferenceInt8Activations : NodeObserver {
    const QuantizationPlan* plan = nullptr;
    std::map<std::string, float> staticAbsMax; // empty: dynamic
    void beforeNode(NodeEvent& e) override
    {
        const LayerQuantization* lq = plan->forNode(e.nodeIndex);
        if (!lq || !lq->activation)
            return;
        Tensor x = e.inputs[lq->activation->input].clone();
        std::span<float> v = x.mutableValues<float>();
        float absmax = 0;
        if (staticAbsMax.empty())
            for (float f : v)
                absmax = std::max(absmax, std::abs(f));
        else
            absmax = staticAbsMax.at(lq->activation->value);
        const float scale = absmax == 0 ? 1.0f : float(double(absmax) / 127.5);
        for (float& f : v)
            f = std::clamp(std::nearbyint(f / scale), -128.0f, 127.0f) * scale;
        e.inputs[lq->activation->input] = x;
    }
};

// An ONNX graph built here: float input "input", output "logits", opset 17.
Model handBuiltModel(std::vector<Node> nodes)
{
    Model m;
    m.format = "onnx";
    m.opsetImports[""] = 17;
    m.inputs.push_back(ValueInfo{"input", DType::F32, "float32", std::nullopt});
    m.outputs.push_back(ValueInfo{"logits", DType::F32, "float32", std::nullopt});
    m.nodes = std::move(nodes);
    return m;
}

Tensor runOutput(const Interpreter& interpreter, const Tensor& input, NodeObserver* observer = nullptr)
{
    RunOptions options;
    options.observer = observer;
    return interpreter.run({{"input", input}}, options).at("logits");
}

double top1(const Tensor& logits, const Tensor& labels)
{
    const auto l = logits.values<float>();
    const auto y = labels.values<int64_t>();
    const int64_t classes = logits.dim(1);
    int64_t correct = 0;
    for (int64_t i = 0; i < logits.dim(0); ++i) {
        const auto row = l.subspan(size_t(i * classes), size_t(classes));
        correct += int64_t(std::max_element(row.begin(), row.end()) - row.begin()) == y[size_t(i)];
    }
    return double(correct) / double(logits.dim(0));
}

} // namespace

class TestQuantizationHooks : public QObject {
    Q_OBJECT

    Model demo_;
    Tensor evalInput_, evalLabels_;

private slots:
    void initTestCase()
    {
        demo_ = loadModel(kDemoDir + "digits_cnn.onnx");
        QCOMPARE(demo_.layers.size(), size_t(5));
        auto data = openDataSource(kDemoDir + "digits_eval.npz", {.batchSize = 450}, &demo_);
        const Batch all = *data->next();
        evalInput_ = all.inputs.at("input");
        evalLabels_ = *all.labels;
    }

    void planResolvesWeightAndActivationSpecs()
    {
        const QuantizationPlan plan = QuantizationPlan::build(
            demo_, rules(R"([{"module_path": "classifier/.*", "weight_qtype": "int4", "tile_size": 16,
                              "act_qtype": "int8", "act_static_scale": true},
                             {"module_path": "features/conv2", "weight_qtype": "int8", "granularity": "per_tensor"}])"),
            QuantizationMode::Odml);
        QCOMPARE(plan.layers().size(), size_t(3));
        QVERIFY(plan.forLayer(0) == nullptr); // conv1: no rule, stays float
        const LayerQuantization* conv2 = plan.forLayer(1);
        QVERIFY(conv2 && conv2->weight && !conv2->activation && conv2->problem.empty());
        QCOMPARE(conv2->weight->granularity, Granularity::PerTensor);
        const LayerQuantization* fc1 = plan.forNode(*demo_.layers[3].node);
        QVERIFY(fc1 && fc1->layer == 3 && fc1->problem.empty());
        QCOMPARE(fc1->weight->qtype, QType::Int4);
        QCOMPARE(*fc1->weight->tileSize, 16.0);
        QVERIFY(fc1->weightAxes.empty()); // Gemm transB [N, K]: the contraction axis is last already
        QCOMPARE(fc1->activation->value, std::string("/classifier/flatten/Flatten_output_0"));
        QCOMPARE(fc1->activation->input, size_t(0));
        QCOMPARE(fc1->activation->method.kind, CalibrationKind::MinMax); // the ODML default
        const std::vector<ObservedActivation> observed = plan.observedActivations();
        QCOMPARE(observed.size(), size_t(2));
        QCOMPARE(observed[1].layers, std::vector<size_t>{4});
        QCOMPARE(plan.resolution().matchCount, (std::vector<size_t>{2, 1}));

        // A tile the contraction axis cannot take is the layer's problem, not an exception.
        const QuantizationPlan bad =
            QuantizationPlan::build(demo_, rules(R"([{"weight_qtype": "int4", "tile_size": 0.2}])"));
        QCOMPARE(bad.layers().size(), size_t(5));
        for (const LayerQuantization& lq : bad.layers()) {
            QVERIFY2(lq.problem.find("weight '" + demo_.layers[lq.layer].weightName + "'") != std::string::npos,
                     lq.problem.c_str());
            QVERIFY2(lq.problem.find("5 tiles") != std::string::npos, lq.problem.c_str());
        }
        // Conv tiles run along I: the plan moves it last.
        const QuantizationPlan conv =
            QuantizationPlan::build(demo_, rules(R"([{"weight_qtype": "int4", "tile_size": 4}])"));
        QCOMPARE(conv.forLayer(1)->weightAxes, (std::vector<int>{0, 2, 3, 1}));
    }

    void problemLayersStayFloat()
    {
        const Interpreter interpreter(demo_);
        const QuantizationPlan plan = QuantizationPlan::build(
            demo_, rules(R"([{"weight_qtype": "int4", "tile_size": 0.2, "act_qtype": "int8"}])"));
        WeightQuantizer weights;
        QVERIFY(weights.update(demo_, plan).empty());
        QVERIFY(weights.weights().empty());
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(demo_, plan, weights, none);
        QVERIFY(sameValues(runOutput(interpreter, evalInput_, &hook), runOutput(interpreter, evalInput_)));
    }

    void smallConvTilesAlongInputChannels()
    {
        // One Conv, weight [O=3, I=8, 2, 2]: int4 tiles of 4 input channels (two
        // tiles per output channel, each pooling the 2×2 kernel positions).
        Model m;
        m.opsetImports[""] = 13;
        m.inputs.push_back(
            {"x", DType::F32, "float32", std::vector<Dim>{Dim::fixed(2), Dim::fixed(8), Dim::fixed(4), Dim::fixed(4)}});
        m.outputs.push_back({"y", DType::F32, "float32", std::nullopt});
        Node conv;
        conv.name = "conv";
        conv.opType = "Conv";
        conv.inputs = {"x", "w"};
        conv.outputs = {"y"};
        m.nodes.push_back(conv);
        Tensor w = randomTensor({3, 8, 2, 2}, 7);
        w.mutableValues<float>()[5] = 4.0f; // an outlier: its tile gets a much larger scale than its neighbour
        m.addInitializer("w", w);
        m.layers = findGraphLayers(m);
        QCOMPARE(m.layers.size(), size_t(1));

        const QuantizationPlan plan =
            QuantizationPlan::build(m, rules(R"([{"weight_qtype": "int4", "tile_size": 4}])"));
        WeightQuantizer weights;
        QCOMPARE(weights.update(m, plan), std::vector<size_t>{0});
        const auto q = weights.find(0);
        QVERIFY(q);
        QCOMPARE(q->transposedAxes, (std::vector<int>{0, 2, 3, 1}));
        QCOMPARE(q->quantization.params.scales.size(), size_t(3 * 2));
        const Tensor reference = tiledReference(w, 0, 1, 4, -8, 7);
        QVERIFY(sameValues(q->fakeQuant, reference));
        QVERIFY(q->metrics.mse > 0 && q->metrics.cosine > 0.95 && q->metrics.fractionClipped == 0);

        // The hooked run equals the model with the reference weight.
        const Interpreter hooked(m), replaced(withInitializers(m, {{"w", reference}}));
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(m, plan, weights, none);
        const Tensor x = randomTensor({2, 8, 4, 4}, 3);
        RunOptions options;
        options.observer = &hook;
        QVERIFY(sameValues(hooked.run({{"x", x}}, options).at("y"), replaced.run({{"x", x}}).at("y")));
        QVERIFY(!sameValues(hooked.run({{"x", x}}).at("y"), replaced.run({{"x", x}}).at("y")));
    }

    void microscalingBlocksRunAlongTheContraction()
    {
        // mxfp4 weights of a Conv [O, I, kh, kw]: blocks along I (the weight is
        // transposed to [O, kh, kw, I] for the kernels and back).
        Model m;
        m.opsetImports[""] = 13;
        m.inputs.push_back({"x", DType::F32, "float32",
                            std::vector<Dim>{Dim::fixed(1), Dim::fixed(40), Dim::fixed(3), Dim::fixed(3)}});
        m.outputs.push_back({"y", DType::F32, "float32", std::nullopt});
        Node conv;
        conv.opType = "Conv";
        conv.inputs = {"x", "w"};
        conv.outputs = {"y"};
        m.nodes.push_back(conv);
        Tensor w = randomTensor({4, 40, 2, 2}, 21);
        w.mutableValues<float>()[3] = 30.0f; // an outlier in the first block of one line only
        m.addInitializer("w", w);
        m.layers = findGraphLayers(m);
        const QuantizationPlan plan =
            QuantizationPlan::build(m, rules(R"([{"weight_qtype": "mxfp4", "tile_size": 8}])"));
        QVERIFY(plan.forLayer(0)->problem.empty());
        QVERIFY(plan.forLayer(0)->note.find("tile_size does not apply") != std::string::npos);
        WeightQuantizer weights;
        weights.update(m, plan);
        QVERIFY(weights.find(0));
        QCOMPARE(weights.find(0)->quantization.params.scales.size(), size_t(4 * 2 * 2 * 2)); // 40 = 32 + 8
        QVERIFY(sameValues(weights.find(0)->fakeQuant, blockwiseReference(w, 1, QType::MxFp4)));

        // mxfp8 activations of the demo's conv2: per batch, blocks along the channels of [N, C, H, W].
        const QuantizationPlan act =
            QuantizationPlan::build(demo_, rules(R"([{"module_path": "features/conv2", "act_qtype": "mxfp8"}])"));
        QCOMPARE(act.forLayer(1)->activation->blockAxis, 1);
        WeightQuantizer none;
        none.update(demo_, act);
        const std::map<size_t, StaticActivation> noStatic;
        QuantizationHook hook(demo_, act, none, noStatic);
        Recorder floatRun, hookedRun;
        hook.setNext(&hookedRun);
        const Interpreter interpreter(demo_);
        runOutput(interpreter, evalInput_, &floatRun);
        runOutput(interpreter, evalInput_, &hook);
        const size_t node = *demo_.layers[1].node;
        const Tensor reference = blockwiseReference(floatRun.inputs.at(node)[0], 1, QType::MxFp8);
        QVERIFY(sameValues(hookedRun.inputs.at(node)[0], reference));
        QVERIFY(!sameValues(reference, floatRun.inputs.at(node)[0]));
        // A static microscaling activation cannot be: its scales come from each batch.
        const QuantizationPlan staticMx = QuantizationPlan::build(
            demo_, rules(R"([{"module_path": "features/conv2", "act_qtype": "mxfp8", "act_static_scale": true}])"));
        QVERIFY(staticMx.forLayer(1)->problem.find("act_static_scale") != std::string::npos);
    }

    void hookedRunEqualsFakeQuantizedWeights_data()
    {
        QTest::addColumn<QString>("rule");
        QTest::newRow("int8 per-channel") << QString(R"({"weight_qtype": "int8"})");
        QTest::newRow("int4 tile 4") << QString(R"({"weight_qtype": "int4", "tile_size": 4})");
        QTest::newRow("fp8 e4m3") << QString(R"({"weight_qtype": "fp8_e4m3"})");
        QTest::newRow("nf4") << QString(R"({"weight_qtype": "nf4"})");
    }

    void hookedRunEqualsFakeQuantizedWeights()
    {
        QFETCH(QString, rule);
        const QuantizationPlan plan = QuantizationPlan::build(demo_, rules("[" + rule.toStdString() + "]"));
        WeightQuantizer weights;
        QCOMPARE(weights.update(demo_, plan).size(), size_t(5));
        QVERIFY(weights.problems().empty());

        std::map<std::string, Tensor> replaced;
        for (const LayerQuantization& lq : plan.layers()) {
            const QuantizableLayer& layer = demo_.layers[lq.layer];
            const Tensor& w = *demo_.initializer(layer.weightName);
            Tensor reference;
            if (lq.weight->tileSize) {
                reference = tiledReference(w, layer.channelAxis, layer.contractionAxes[0], 4, -8, 7);
            } else {
                const TensorQuantization tq = computeQuantization(w, *lq.weight, layer.weightName);
                reference = fakeQuantize(w, tq.params);
            }
            QVERIFY2(sameValues(weights.find(lq.layer)->fakeQuant, reference), layer.modulePath.c_str());
            QVERIFY(!sameValues(reference, w));
            replaced[layer.weightName] = reference;
        }
        const Interpreter interpreter(demo_), reference(withInitializers(demo_, replaced));
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(demo_, plan, weights, none);
        const Tensor hooked = runOutput(interpreter, evalInput_, &hook);
        QVERIFY(sameValues(hooked, runOutput(reference, evalInput_)));
        QVERIFY(!sameValues(hooked, runOutput(interpreter, evalInput_)));

        // One layer enabled: only its weight is replaced.
        std::vector<bool> enabled(5, false);
        enabled[2] = true;
        hook.setEnabledLayers(enabled);
        const std::string w2 = demo_.layers[2].weightName;
        const Interpreter onlyConv3(withInitializers(demo_, {{w2, replaced.at(w2)}}));
        QVERIFY(sameValues(runOutput(interpreter, evalInput_, &hook), runOutput(onlyConv3, evalInput_)));
        QVERIFY_THROWS_EXCEPTION(Error, hook.setEnabledLayers(std::vector<bool>(3, true)));
    }

    void updateRecomputesOnlyChangedLayers()
    {
        const std::string base = R"({"module_path": "features/.*", "weight_qtype": "int8"},
                                    {"module_path": "classifier/fc1", "weight_qtype": "int4", "tile_size": 32})";
        WeightQuantizer weights;
        QCOMPARE(weights.update(demo_, QuantizationPlan::build(demo_, rules("[" + base + "]"))).size(), size_t(4));
        const auto conv1 = weights.find(0), fc1 = weights.find(3);
        // Same rules again: nothing to do.
        QVERIFY(weights.update(demo_, QuantizationPlan::build(demo_, rules("[" + base + "]"))).empty());
        // Edit the fc1 rule and add fc2: only those two are computed; the convs keep their objects.
        const std::string edited = R"({"module_path": "features/.*", "weight_qtype": "int8"},
                                      {"module_path": "classifier/.*", "weight_qtype": "int4", "tile_size": 16})";
        QCOMPARE(weights.update(demo_, QuantizationPlan::build(demo_, rules("[" + edited + "]"))),
                 (std::vector<size_t>{3, 4}));
        QVERIFY(weights.find(0) == conv1);
        QVERIFY(weights.find(3) != fc1);
        QCOMPARE(weights.find(3)->quantization.params.scales.size(), size_t(64 * 512 / 16));
        // The rounding seed is part of the key; dropping the features rule drops their weights.
        const std::string stochastic = R"({"module_path": "classifier/.*", "weight_qtype": "int4", "tile_size": 16,
                                          "rounding": "stochastic", "rounding_seed": 3})";
        QCOMPARE(weights.update(demo_, QuantizationPlan::build(demo_, rules("[" + stochastic + "]"))),
                 (std::vector<size_t>{3, 4}));
        QCOMPARE(weights.weights().size(), size_t(2));
        QVERIFY(!weights.find(0));

        // Cancelled before any layer ran: Cancelled, and nothing stale is kept.
        WeightQuantizer fresh;
        CancellationToken cancel;
        cancel.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled,
                                 fresh.update(demo_, QuantizationPlan::build(demo_, rules("[" + base + "]")), cancel));
        QVERIFY(fresh.weights().empty());
        QCOMPARE(fresh.update(demo_, QuantizationPlan::build(demo_, rules("[" + base + "]"))).size(), size_t(4));
    }

    void weightThatCannotBeQuantizedIsAProblem()
    {
        Tensor broken = demo_.initializer("features.conv2.weight")->clone();
        broken.mutableValues<float>()[17] = NAN;
        const Model m = withInitializers(demo_, {{"features.conv2.weight", broken}});
        const QuantizationPlan plan = QuantizationPlan::build(m, rules(R"([{"weight_qtype": "int8"}])"));
        WeightQuantizer weights;
        QCOMPARE(weights.update(m, plan).size(), size_t(5));
        QCOMPARE(weights.weights().size(), size_t(4));
        QVERIFY(!weights.find(1));
        QCOMPARE(weights.problems().size(), size_t(1));
        const std::string& problem = weights.problems().at(1);
        QVERIFY2(problem.find("features.conv2.weight") != std::string::npos, problem.c_str());
        // The same plan again does not retry it; the hook leaves that layer float.
        QVERIFY(weights.update(m, plan).empty());
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(m, plan, weights, none);
        const Interpreter interpreter(m);
        runOutput(interpreter, evalInput_, &hook);
        // A weight the quantizer never saw is an Error that says what to do.
        WeightQuantizer empty;
        QuantizationHook stale(m, plan, empty, none);
        QVERIFY_THROWS_EXCEPTION(Error, runOutput(interpreter, evalInput_, &stale));
    }

    void fp16WeightsAreQuantizedAndFedAsFp16()
    {
        // An fp16 embedding table: quantized from its fp16 values and fed back
        // to the kernel as fp16; its int64 indices are never quantized.
        Model m;
        m.opsetImports[""] = 13;
        m.inputs.push_back({"ids", DType::I64, "int64", std::vector<Dim>{Dim::fixed(4)}});
        m.outputs.push_back({"y", DType::F16, "float16", std::nullopt});
        Node gather;
        gather.opType = "Gather";
        gather.inputs = {"table", "ids"};
        gather.outputs = {"y"};
        m.nodes.push_back(gather);
        m.addInitializer("table", castTensor(randomTensor({6, 5}, 11), DType::F16));
        m.layers = findGraphLayers(m);
        QCOMPARE(m.layers.size(), size_t(1));
        const QuantizationPlan plan =
            QuantizationPlan::build(m, rules(R"([{"weight_qtype": "int4", "act_qtype": "int8"}])"));
        QVERIFY(plan.forLayer(0)->problem.empty());
        QVERIFY(!plan.forLayer(0)->activation);
        QVERIFY(plan.forLayer(0)->note.find("act_qtype does not apply") != std::string::npos);
        WeightQuantizer weights;
        weights.update(m, plan);
        const auto q = weights.find(0);
        QVERIFY(q);
        const Tensor table = m.initializer("table")->toFloat32();
        const Tensor reference = tiledReference(table, 0, 1, 5, -8, 7); // per row: one tile spanning it
        QVERIFY(sameValues(q->fakeQuant, reference));

        const Interpreter interpreter(m);
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(m, plan, weights, none);
        const Tensor ids = Tensor::fromVector(DType::I64, {4}, std::vector<int64_t>{5, 0, 3, 3});
        RunOptions options;
        options.observer = &hook;
        const Tensor y = interpreter.run({{"ids", ids}}, options).at("y");
        QCOMPARE(y.dtype(), DType::F16);
        const auto rows = reference.values<float>();
        const Tensor yf = y.toFloat32();
        const auto got = yf.values<float>();
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 5; ++c)
                QCOMPARE(got[size_t(r * 5 + c)],
                         castTensor(Tensor::fromVector(
                                        DType::F32, {1},
                                        std::vector<float>{rows[size_t(ids.values<int64_t>()[size_t(r)] * 5 + c)]}),
                                    DType::F16)
                             .toFloat32()
                             .values<float>()[0]);
    }

    void calibrationObserversEqualDirectObservers()
    {
        const QuantizationPlan plan = QuantizationPlan::build(
            demo_, rules(R"([{"module_path": "features/conv[23]", "act_qtype": "int8", "act_static_scale": true,
                              "act_batch_axes": [0, 2]},
                             {"act_qtype": "int8", "act_static_scale": true}])"));
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 64}, &demo_);
        std::vector<std::string> steps;
        CalibrationOptions options;
        options.histogramBinsPerSide = 256;
        const ActivationStatistics stats = calibrateActivations(
            interpreter, plan, *data, options, {}, [&](double, std::string_view step) { steps.emplace_back(step); });
        QCOMPARE(stats.batches(), int64_t(5));
        QCOMPARE(steps.size(), size_t(5));
        QCOMPARE(steps.back(), std::string("calibrating batch 5/5"));
        QCOMPARE(stats.observers().size(), size_t(5));
        QVERIFY(stats.covers(plan));

        // The same values, captured by a plain float run and fed to observers by hand.
        std::map<std::string, Observer> direct;
        for (const ObservedActivation& o : plan.observedActivations())
            direct.emplace(o.value, Observer(o.value, {o.config.batchAxes, -1, 256}));
        data->rewind();
        while (auto batch = data->next()) {
            Recorder recorder;
            RunOptions options;
            options.observer = &recorder;
            interpreter.run(batch->inputs, options);
            for (const LayerQuantization& lq : plan.layers())
                direct.at(lq.activation->value).observe(recorder.inputs.at(*demo_.layers[lq.layer].node)[0]);
        }
        for (const auto& [value, observer] : direct) {
            QVERIFY(stats.find(value));
            QCOMPARE(stats.find(value)->toJson(), observer.toJson());
        }
        QCOMPARE(stats.find("/features/relu1/Relu_output_0")->config().batchAxes, (std::vector<int>{0, 2}));

        // JSON round trip, through a file too.
        QCOMPARE(ActivationStatistics::fromJson(stats.toJson()).toJson(), stats.toJson());
        QTemporaryDir dir;
        const std::filesystem::path file = dir.filePath("stats.json").toStdString();
        stats.save(file);
        QCOMPARE(ActivationStatistics::load(file).toJson(), stats.toJson());
        nlohmann::json broken = stats.toJson();
        broken["observers"][1].erase("batch_axes");
        try {
            ActivationStatistics::fromJson(broken);
            QFAIL("a malformed observer was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("\"observers[1]\"") != std::string::npos, e.what());
        }
        broken = stats.toJson();
        broken["batches"] = "five";
        QVERIFY_THROWS_EXCEPTION(Error, ActivationStatistics::fromJson(broken));

        // Statistics gathered with other batch axes do not cover a plan asking for [0].
        const QuantizationPlan axis0 =
            QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true}])"));
        QVERIFY(!stats.covers(axis0));
    }

    void methodChangesRangesWithoutRunningTheModel()
    {
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 90}, &demo_);
        const QuantizationPlan absmax =
            QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true}])"));
        const ActivationStatistics stats = calibrateActivations(interpreter, absmax, *data);
        // The statistics alone give every method's ranges: staticActivations takes no model or data.
        std::map<std::string, std::vector<float>> maxima;
        for (const char* method : {"absmax", "percentile,99", "entropy"}) {
            const QuantizationPlan plan = QuantizationPlan::build(
                demo_, rules(std::string(R"([{"act_qtype": "int8", "act_static_scale": true, "act_calibration": ")") +
                             method + "\"}]"));
            QVERIFY(stats.covers(plan));
            for (const auto& [layer, s] : staticActivations(plan, stats))
                maxima[method].push_back(s.range.max);
            QCOMPARE(maxima[method].size(), size_t(5));
        }
        QCOMPARE(maxima["absmax"][3], float(stats.find("/classifier/flatten/Flatten_output_0")->averageAbsMax(0)));
        QVERIFY(maxima["absmax"] != maxima["percentile,99"]);
        QVERIFY(maxima["absmax"] != maxima["entropy"]);
        QVERIFY(maxima["percentile,99"] != maxima["entropy"]);
        // A percentile never exceeds the largest value seen (by more than the
        // observer's histogram bin), and cuts the long tails of the hidden
        // activations (the digits' pixels are often at their maximum).
        size_t l = 0, cut = 0;
        for (const ObservedActivation& o : absmax.observedActivations()) {
            const float largest = stats.find(o.value)->runningAbsMax(0);
            QVERIFY(maxima["percentile,99"][l] <= largest * 1.001f);
            cut += maxima["percentile,99"][l++] < largest;
        }
        QVERIFY(cut >= 3);
        // A value the statistics lack is an Error naming it.
        const QuantizationPlan onlyFc =
            QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true}])"));
        try {
            staticActivations(onlyFc, ActivationStatistics());
            QFAIL("missing statistics were accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("'input'") != std::string::npos, e.what());
        }
    }

    void calibrationKeepsHistogramsWhereThePlanNeedsThem()
    {
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 90}, &demo_);
        // conv2 and conv3 calibrate with histogram methods (conv3 dynamically), the rest with absmax.
        const QuantizationPlan plan = QuantizationPlan::build(
            demo_, rules(R"([{"module_path": "features/conv2", "act_qtype": "int8", "act_static_scale": true,
                              "act_calibration": "percentile,99.9"},
                             {"module_path": "features/conv3", "act_qtype": "int8", "act_calibration": "mse"},
                             {"act_qtype": "int8", "act_static_scale": true}])"));
        CalibrationOptions needed;
        needed.histogramBinsPerSide = 512;
        needed.histograms = KeptHistograms::AsPlanNeeds;
        const ActivationStatistics lean = calibrateActivations(interpreter, plan, *data, needed);
        CalibrationOptions every = needed;
        every.histograms = KeptHistograms::All;
        const ActivationStatistics full = calibrateActivations(interpreter, plan, *data, every);

        size_t withHistograms = 0;
        for (const LayerQuantization& lq : plan.layers()) {
            const std::string& path = demo_.layers[lq.layer].modulePath;
            const Observer& a = *lean.find(lq.activation->value);
            const Observer& b = *full.find(lq.activation->value);
            const bool histogramMethod = path == "features/conv2" || path == "features/conv3";
            QCOMPARE(a.config().histogramBinsPerSide, histogramMethod ? 512 : 0);
            QCOMPARE(b.config().histogramBinsPerSide, 512);
            withHistograms += histogramMethod;
            // The statistics themselves do not depend on which histograms are kept.
            QCOMPARE(a.batches(), b.batches());
            QCOMPARE(a.averageAbsMax(0), b.averageAbsMax(0));
            QCOMPARE(a.averageMin(0), b.averageMin(0));
            QCOMPARE(a.averageRms(0), b.averageRms(0));
            QCOMPARE(a.runningMax(0), b.runningMax(0));
            if (histogramMethod)
                QCOMPARE(a.histogram(0).counts(), b.histogram(0).counts());
        }
        QCOMPARE(withHistograms, size_t(2));
        // Both cover the plan and give it the same ranges.
        QVERIFY(lean.covers(plan) && full.covers(plan));
        const auto leanRanges = staticActivations(plan, lean), fullRanges = staticActivations(plan, full);
        QCOMPARE(leanRanges.size(), size_t(4));
        for (const auto& [layer, s] : fullRanges) {
            QCOMPARE(leanRanges.at(layer).range.min, s.range.min);
            QCOMPARE(leanRanges.at(layer).range.max, s.range.max);
        }
        // Turning every layer to entropy needs histograms the lean statistics lack:
        // they no longer cover the plan (the caller calibrates again); the full ones still do.
        const QuantizationPlan entropy = QuantizationPlan::build(
            demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true, "act_calibration": "entropy"}])"));
        QVERIFY(!lean.covers(entropy));
        QVERIFY(full.covers(entropy));
        QCOMPARE(staticActivations(entropy, full).size(), size_t(5));
    }

    void cancellationStopsCalibration()
    {
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 32}, &demo_);
        const QuantizationPlan plan =
            QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true}])"));
        CancellationToken cancel;
        int batches = 0;
        QVERIFY_THROWS_EXCEPTION(
            Cancelled, calibrateActivations(interpreter, plan, *data, {}, cancel, [&](double, std::string_view) {
                if (++batches == 2)
                    cancel.cancel();
            }));
        QCOMPARE(batches, 2);
    }

    void staticAndDynamicActivationsEqualScalarReferences()
    {
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 90}, &demo_);
        const QuantizationPlan staticPlan =
            QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8", "act_static_scale": true}])"));
        const ActivationStatistics stats = calibrateActivations(interpreter, staticPlan, *data);
        const std::map<size_t, StaticActivation> ranges = staticActivations(staticPlan, stats);
        WeightQuantizer noWeights;
        noWeights.update(demo_, staticPlan);

        const Tensor a = evalInput_.reshaped({450, 1, 8, 8});
        const Tensor batchA = Tensor::fromVector(
            DType::F32, {50, 1, 8, 8}, std::vector<float>(a.values<float>().begin(), a.values<float>().begin() + 3200));
        const Tensor batchB =
            Tensor::fromVector(DType::F32, {50, 1, 8, 8},
                               std::vector<float>(a.values<float>().begin() + 3200, a.values<float>().begin() + 6400));

        // Static: the range the observer reports, applied by a scalar int8 quantizer.
        QuantizationHook staticHook(demo_, staticPlan, noWeights, ranges);
        ReferenceInt8Activations staticReference;
        staticReference.plan = &staticPlan;
        for (const auto& [layer, s] : ranges) {
            const std::string& value = staticPlan.forLayer(layer)->activation->value;
            QCOMPARE(s.range.max, float(stats.find(value)->averageAbsMax(0)));
            staticReference.staticAbsMax[value] = s.range.max;
        }
        const Tensor staticA = runOutput(interpreter, batchA, &staticHook);
        QVERIFY(sameValues(staticA, runOutput(interpreter, batchA, &staticReference)));
        QVERIFY(!sameValues(staticA, runOutput(interpreter, batchA)));

        // Dynamic: each batch's own absmax.
        const QuantizationPlan dynamicPlan = QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8"}])"));
        const std::map<size_t, StaticActivation> none;
        QuantizationHook dynamicHook(demo_, dynamicPlan, noWeights, none);
        ReferenceInt8Activations dynamicReference;
        dynamicReference.plan = &dynamicPlan;
        for (const Tensor& batch : {batchA, batchB})
            QVERIFY(sameValues(runOutput(interpreter, batch, &dynamicHook),
                               runOutput(interpreter, batch, &dynamicReference)));
        QVERIFY(!sameValues(runOutput(interpreter, batchA, &dynamicHook), staticA));

        // A static activation without its range is an Error that says calibration is needed.
        QuantizationHook uncalibrated(demo_, staticPlan, noWeights, none);
        try {
            runOutput(interpreter, batchA, &uncalibrated);
            QFAIL("a static activation ran without a range");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("activation 'input'") != std::string::npos, e.what());
            QVERIFY2(std::string(e.what()).find("needs calibration") != std::string::npos, e.what());
        }
        // Activations off: the static plan runs float.
        staticHook.setQuantizeActivations(false);
        QVERIFY(sameValues(runOutput(interpreter, batchA, &staticHook), runOutput(interpreter, batchA)));
    }

    void activationsReadLastAreFakeQuantizedInPlace()
    {
        // r = Relu(x) feeds a quantized MatMul and, after it, an Add: it must
        // stay float for the Add. y = m + r is read last by the second MatMul,
        // which may overwrite it. Both runs equal a reference that copies.
        using test::graphNode;
        Model m = handBuiltModel(
            {graphNode("relu", "Relu", {"input"}, "r"), graphNode("first", "MatMul", {"r", "w1"}, "m"),
             graphNode("add", "Add", {"m", "r"}, "y"), graphNode("second", "MatMul", {"y", "w2"}, "logits")});
        std::mt19937 rng(3);
        std::normal_distribution<float> normal;
        for (const char* w : {"w1", "w2"}) {
            std::vector<float> v(64);
            for (float& f : v)
                f = normal(rng);
            m.addInitializer(w, Tensor::fromVector(DType::F32, {8, 8}, v));
        }
        m.layers = findGraphLayers(m);
        QCOMPARE(m.layers.size(), size_t(2));
        const QuantizationPlan plan = QuantizationPlan::build(m, rules(R"([{"act_qtype": "int8"}])"));
        const Interpreter interpreter(m);
        std::vector<float> v(32);
        for (float& f : v)
            f = normal(rng);
        const Tensor input = Tensor::fromVector(DType::F32, {4, 8}, v);

        // What the kernels read: the second MatMul's input is the Add's own output, overwritten.
        struct Storage : NodeObserver {
            const void* addOutput = nullptr;
            const void* secondInput = nullptr;
            const void* firstInput = nullptr;
            const void* relu = nullptr;
            void beforeNode(NodeEvent& e) override
            {
                if (e.nodeIndex == 1)
                    firstInput = e.inputs[0].rawData();
                if (e.nodeIndex == 3)
                    secondInput = e.inputs[0].rawData();
            }
            void afterNode(NodeEvent& e) override
            {
                if (e.nodeIndex == 0)
                    relu = e.outputs[0].rawData();
                if (e.nodeIndex == 2)
                    addOutput = e.outputs[0].rawData();
            }
        };
        WeightQuantizer noWeights;
        noWeights.update(m, plan);
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(m, plan, noWeights, none);
        Storage storage;
        hook.setNext(&storage);
        ReferenceInt8Activations reference;
        reference.plan = &plan;
        const Tensor hooked = runOutput(interpreter, input, &hook);
        QVERIFY(sameValues(hooked, runOutput(interpreter, input, &reference)));
        QVERIFY(storage.secondInput != nullptr && storage.secondInput == storage.addOutput);
        QVERIFY(storage.firstInput != nullptr && storage.firstInput != storage.relu); // r is read again later
    }

    void dynamicRangesComeFromTheExtremesTheirConvsGathered()
    {
        // input -> Conv a -> x1 -> Conv b (depthwise) + Clip -> x2 -> Conv c
        // (its Add broadcasts, so it declines the fusion) -> Add -> Relu -> x3
        // -> Conv d -> logits, every Conv's input fake-quantized with a dynamic
        // range. x1 and x2 come with the extremes their Convs gathered; the
        // graph input and x3 (which Conv c did not write) do not. The outputs
        // equal a run whose observer asks for no extremes, bit for bit, and
        // the scalar reference (absmax); a NaN is still an Error naming it.
        using test::graphNode;
        Model m = handBuiltModel(
            {graphNode("a", "Conv", {"input", "wa", "ba"}, "x1"), graphNode("b", "Conv", {"x1", "wb"}, "b"),
             graphNode("clip", "Clip", {"b", "lo", "hi"}, "x2"), graphNode("c", "Conv", {"x2", "wc"}, "c"),
             graphNode("add", "Add", {"c", "shift"}, "s"), graphNode("relu", "Relu", {"s"}, "x3"),
             graphNode("d", "Conv", {"x3", "wd"}, "logits")});
        Attribute pads, group;
        pads.name = "pads";
        pads.kind = Attribute::Kind::Ints;
        pads.ints = {1, 1, 1, 1};
        group.name = "group";
        group.kind = Attribute::Kind::Int;
        group.i = 16;
        m.nodes[0].attributes = {pads};
        m.nodes[1].attributes = {pads, group};
        m.addInitializer("wa", randomTensor({16, 8, 3, 3}, 1, 0.3f));
        m.addInitializer("ba", randomTensor({16}, 2));
        m.addInitializer("wb", randomTensor({16, 1, 3, 3}, 3, 0.5f));
        m.addInitializer("lo", Tensor::fromVector(DType::F32, {}, std::vector<float>{-1.0f}));
        m.addInitializer("hi", Tensor::fromVector(DType::F32, {}, std::vector<float>{3.0f}));
        m.addInitializer("wc", randomTensor({16, 16, 1, 1}, 4, 0.3f));
        m.addInitializer("shift", randomTensor({1, 16, 1, 1}, 5));
        m.addInitializer("wd", randomTensor({4, 16, 1, 1}, 6, 0.3f));
        m.layers = findGraphLayers(m);
        QCOMPARE(m.layers.size(), size_t(4));
        const Interpreter interpreter(m);
        const Tensor input = randomTensor({2, 8, 12, 12}, 7);

        // Forwards to the hook, asking for no extremes.
        struct WithoutExtremes : NodeObserver {
            QuantizationHook* hook = nullptr;
            void beforeNode(NodeEvent& e) override { hook->beforeNode(e); }
            void afterNode(NodeEvent& e) override { hook->afterNode(e); }
            bool needsEveryNode() const override { return hook->needsEveryNode(); }
        };
        // Which nodes were shown extremes for their first input.
        struct Shown : NodeObserver {
            std::map<size_t, bool> extremes;
            void beforeNode(NodeEvent& e) override
            {
                extremes[e.nodeIndex] = !e.inputExtremes.empty() && e.inputExtremes[0] != nullptr;
            }
            bool needsEveryNode() const override { return false; }
        };
        WeightQuantizer noWeights;
        for (const char* method : {"absmax", "minmax"}) {
            const QuantizationPlan plan = QuantizationPlan::build(
                m, rules(std::string(R"([{"act_qtype": "int8", "act_calibration": ")") + method + "\"}]"));
            noWeights.update(m, plan);
            const std::map<size_t, StaticActivation> none;
            QuantizationHook hook(m, plan, noWeights, none);
            Shown shown;
            hook.setNext(&shown);
            const Tensor hooked = runOutput(interpreter, input, &hook);
            QCOMPARE(shown.extremes,
                     (std::map<size_t, bool>{{0, false}, {1, true}, {3, true}, {4, false}, {5, false}, {6, false}}));
            WithoutExtremes plain;
            plain.hook = &hook;
            QVERIFY(sameValues(hooked, runOutput(interpreter, input, &plain)));
            QVERIFY(!sameValues(hooked, runOutput(interpreter, input)));
            if (std::string(method) == "absmax") {
                ReferenceInt8Activations reference;
                reference.plan = &plan;
                QVERIFY(sameValues(hooked, runOutput(interpreter, input, &reference)));
            }
            // A NaN first in x1 (Conv a's bias): its extremes are no answer,
            // and the range calibrated on x1 names the element.
            Tensor nanBias = m.initializer("ba")->clone();
            nanBias.mutableValues<float>()[3] = NAN;
            const Model withNaN = withInitializers(m, {{"ba", nanBias}});
            try {
                runOutput(Interpreter(withNaN), input, &hook);
                QFAIL("a NaN activation was quantized");
            } catch (const Error& e) {
                QVERIFY2(std::string(e.what()).find("'x1'") != std::string::npos, e.what());
                QVERIFY2(std::string(e.what()).find("NaN") != std::string::npos, e.what());
            }
        }
    }

    void observersAreShownOnlyTheNodesTheyWatch()
    {
        // An observer that watches one node gets events for it alone; the
        // others run as without an observer (the outputs are the float run's).
        const Interpreter interpreter(demo_);
        struct One : NodeObserver {
            size_t watched = 0;
            std::map<size_t, int> before, after;
            bool observesNode(size_t scope, size_t node) const override { return scope == 0 && node == watched; }
            void beforeNode(NodeEvent& e) override { ++before[e.nodeIndex]; }
            void afterNode(NodeEvent& e) override { ++after[e.nodeIndex]; }
        };
        One one;
        one.watched = 1;
        QVERIFY(sameValues(runOutput(interpreter, evalInput_, &one), runOutput(interpreter, evalInput_)));
        QCOMPARE(one.before, (std::map<size_t, int>{{1, 1}}));
        QCOMPARE(one.after, (std::map<size_t, int>{{1, 1}}));

        // The hook watches its plan's layers, and whatever the next observer watches.
        const QuantizationPlan plan = QuantizationPlan::build(demo_, rules(R"([{"act_qtype": "int8"}])"));
        WeightQuantizer noWeights;
        noWeights.update(demo_, plan);
        const std::map<size_t, StaticActivation> none;
        QuantizationHook hook(demo_, plan, noWeights, none);
        size_t layers = 0, other = 0;
        for (size_t n = 0; n < demo_.nodes.size(); ++n) {
            QCOMPARE(hook.observesNode(0, n), plan.forNode(n) != nullptr);
            layers += plan.forNode(n) != nullptr;
            other = plan.forNode(n) ? other : n;
        }
        QVERIFY(layers > 0 && layers < demo_.nodes.size());
        one.watched = other;
        hook.setNext(&one);
        QVERIFY(hook.observesNode(0, other));
        Recorder recorder;
        hook.setNext(&recorder);
        runOutput(interpreter, evalInput_, &hook);
        QCOMPARE(recorder.inputs.size(), demo_.nodes.size()); // a Recorder watches every node
    }

    void runNodeEqualsTheNodeInAFullRun()
    {
        const Interpreter interpreter(demo_);
        Recorder recorder;
        runOutput(interpreter, evalInput_, &recorder);
        for (size_t n = 0; n < demo_.nodes.size(); ++n) {
            const std::vector<Tensor> out = interpreter.runNode(n, recorder.inputs.at(n));
            QCOMPARE(out.size(), recorder.outputs.at(n).size());
            QVERIFY(sameValues(out[0], recorder.outputs.at(n)[0]));
        }
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.runNode(0, std::span(recorder.inputs.at(0)).first(1)));
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.runNode(99, recorder.inputs.at(0)));
    }

    void w8a8KeepsDemoAccuracy()
    {
        const Interpreter interpreter(demo_);
        auto data = openDataSource(kDemoDir + "digits_calib.npz", {.batchSize = 32}, &demo_);
        const QuantizationPlan plan = QuantizationPlan::build(
            demo_, rules(R"([{"weight_qtype": "int8", "act_qtype": "int8", "act_static_scale": true}])"));
        WeightQuantizer weights;
        weights.update(demo_, plan);
        const ActivationStatistics stats = calibrateActivations(interpreter, plan, *data);
        const std::map<size_t, StaticActivation> ranges = staticActivations(plan, stats);
        QuantizationHook hook(demo_, plan, weights, ranges);
        const double floatTop1 = top1(runOutput(interpreter, evalInput_), evalLabels_);
        const double quantizedTop1 = top1(runOutput(interpreter, evalInput_, &hook), evalLabels_);
        qInfo("w8a8 (int8 per-channel absmax weights, int8 static absmax activations): top-1 %.2f%% (float %.2f%%)",
              100 * quantizedTop1, 100 * floatTop1);
        QVERIFY(std::abs(floatTop1 - 0.9867) < 0.005);
        QVERIFY(quantizedTop1 >= floatTop1 - 0.01);
    }
};

QTEST_APPLESS_MAIN(TestQuantizationHooks)
#include "tst_quantization_hooks.moc"
