// Graph IR: module paths (table-driven, real exporter names), weight layouts of
// every quantizable op, checkpoint layer inference, rule resolution over a model.
#include <QtTest>

#include "graph/model.h"
#include "graph/module_path.h"
#include "quantization/rule_resolution.h"
#include "graph/weight_layout.h"

using namespace qs;

namespace {

Node makeNode(std::string name, std::string op, std::vector<std::string> inputs, std::vector<Attribute> attrs = {})
{
    Node n;
    n.name = std::move(name);
    n.opType = std::move(op);
    n.inputs = std::move(inputs);
    n.outputs = {n.name + ":out"};
    n.attributes = std::move(attrs);
    return n;
}

Attribute intAttr(std::string name, int64_t v)
{
    Attribute a;
    a.name = std::move(name);
    a.kind = Attribute::Kind::Int;
    a.i = v;
    return a;
}

const QuantizableLayer* layerOfNode(const std::vector<QuantizableLayer>& layers, size_t node)
{
    for (const QuantizableLayer& l : layers)
        if (l.node == node)
            return &l;
    return nullptr;
}

} // namespace

class TestGraph : public QObject {
    Q_OBJECT
private slots:
    void nodeNamePaths_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("op");
        QTest::addColumn<QString>("path");
        // torchvision resnet18 (torch.onnx.export)
        QTest::newRow("resnet conv1") << "/conv1/Conv"
                                      << "Conv"
                                      << "conv1";
        QTest::newRow("resnet block conv") << "/layer1/layer1.0/conv1/Conv"
                                           << "Conv"
                                           << "layer1/0/conv1";
        QTest::newRow("resnet downsample") << "/layer4/layer4.0/downsample/downsample.0/Conv"
                                           << "Conv"
                                           << "layer4/0/downsample/0";
        QTest::newRow("resnet fc") << "/fc/Gemm"
                                   << "Gemm"
                                   << "fc";
        // torchvision mobilenet_v2
        QTest::newRow("mobilenet stem") << "/features/features.0/features.0.0/Conv"
                                        << "Conv"
                                        << "features/0/0";
        QTest::newRow("mobilenet inverted residual") << "/features/features.1/conv/conv.0/conv.0.0/Conv"
                                                     << "Conv"
                                                     << "features/1/conv/0/0";
        QTest::newRow("mobilenet classifier") << "/classifier/classifier.1/Gemm"
                                              << "Gemm"
                                              << "classifier/1";
        // Hugging Face BERT
        QTest::newRow("bert query") << "/bert/encoder/layer.0/attention/self/query/MatMul"
                                    << "MatMul"
                                    << "bert/encoder/layer/0/attention/self/query";
        QTest::newRow("bert output dense") << "/bert/encoder/layer.11/output/dense/MatMul"
                                           << "MatMul"
                                           << "bert/encoder/layer/11/output/dense";
        QTest::newRow("bert embeddings") << "/bert/embeddings/word_embeddings/Gather"
                                         << "Gather"
                                         << "bert/embeddings/word_embeddings";
        QTest::newRow("repeated dotted prefix") << "/encoder/encoder.layer.0/attention/MatMul"
                                                << "MatMul"
                                                << "encoder/layer/0/attention";
        QTest::newRow("second op in scope") << "/attention/self/MatMul_1"
                                            << "MatMul"
                                            << "attention/self";
        // Names that say nothing once the op type is gone.
        QTest::newRow("old exporter") << "Conv_0"
                                      << "Conv"
                                      << "";
        QTest::newRow("only op") << "/Conv"
                                 << "Conv"
                                 << "";
        QTest::newRow("empty") << ""
                               << "Gemm"
                               << "";
        // Other shapes of names are kept readable, not guessed at.
        QTest::newRow("tf2onnx") << "StatefulPartitionedCall/model/conv2d/Conv2D"
                                 << "Conv"
                                 << "StatefulPartitionedCall/model/conv2d/Conv2D";
        QTest::newRow("op-like suffix kept") << "/fc/MatMulInteger"
                                             << "MatMul"
                                             << "fc/MatMulInteger";
        QTest::newRow("non-numeric suffix kept") << "/fc/Conv_x"
                                                 << "Conv"
                                                 << "fc/Conv_x";
        QTest::newRow("empty components") << "//a//b.c/"
                                          << "Relu"
                                          << "a/b/c";
        QTest::newRow("no leading slash") << "blocks.3.mlp.fc1"
                                          << "MatMul"
                                          << "blocks/3/mlp/fc1";
        QTest::newRow("prefix needs a dot") << "/layer1/layer10/Conv"
                                            << "Conv"
                                            << "layer1/layer10";
    }
    void nodeNamePaths()
    {
        QFETCH(QString, name);
        QFETCH(QString, op);
        QFETCH(QString, path);
        QCOMPARE(QString::fromStdString(modulePathFromNodeName(name.toStdString(), op.toStdString())), path);
    }

    void parameterNamePaths_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("path");
        QTest::newRow("torch weight") << "layer1.0.conv1.weight"
                                      << "layer1/0/conv1";
        QTest::newRow("torch bias") << "fc.bias"
                                    << "fc";
        QTest::newRow("underscore") << "conv1_weight"
                                    << "conv1";
        QTest::newRow("keras") << "dense/kernel:0"
                               << "dense";
        QTest::newRow("bert table") << "bert.embeddings.word_embeddings.weight"
                                    << "bert/embeddings/word_embeddings";
        QTest::newRow("exporter generated") << "onnx::Conv_193"
                                            << "";
        QTest::newRow("no suffix") << "W"
                                   << "W";
        QTest::newRow("suffix only") << "weight"
                                     << "weight";
    }
    void parameterNamePaths()
    {
        QFETCH(QString, name);
        QFETCH(QString, path);
        QCOMPARE(QString::fromStdString(modulePathFromParameterName(name.toStdString())), path);
    }

    void checkpointPaths_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("path");
        QTest::newRow("llama") << "model.layers.0.self_attn.q_proj.weight"
                               << "model/layers/0/self_attn/q_proj";
        QTest::newRow("head") << "lm_head.weight"
                              << "lm_head";
        QTest::newRow("single") << "weight"
                                << "weight";
        QTest::newRow("hdf5") << "dense/kernel:0"
                              << "dense";
        QTest::newRow("resnet") << "layer2.1.bn2.running_var"
                                << "layer2/1/bn2";
    }
    void checkpointPaths()
    {
        QFETCH(QString, name);
        QFETCH(QString, path);
        QCOMPARE(QString::fromStdString(checkpointModulePath(name.toStdString())), path);
    }

    void uniquePathsAreStableAndNeverStealAPath()
    {
        const std::vector<std::string> out = uniqueModulePaths({"a", "a", "a_1", "a", "b"});
        QCOMPARE(out, (std::vector<std::string>{"a", "a_2", "a_1", "a_3", "b"}));
        QCOMPARE(uniqueModulePaths({"x", "y"}), (std::vector<std::string>{"x", "y"}));
    }

    void graphLayerLayouts()
    {
        Model m;
        m.addInitializer("conv.weight", Tensor(DType::F32, {8, 2, 3, 3}));
        m.addInitializer("deconv.weight", Tensor(DType::F32, {6, 4, 2, 2}));
        m.addInitializer("gemm_nk", Tensor(DType::F32, {10, 20}));
        m.addInitializer("gemm_kn", Tensor(DType::F16, {20, 10}));
        m.addInitializer("matmul_kn", Tensor(DType::F32, {16, 32}));
        m.addInitializer("batched", Tensor(DType::F32, {4, 16, 32}));
        m.addInitializer("vector", Tensor(DType::F32, {16}));
        m.addInitializer("table", Tensor(DType::BF16, {100, 8}));
        m.addInitializer("qweight", Tensor(DType::I8, {16, 32}));
        m.nodes = {
            makeNode("/conv/Conv", "Conv", {"x", "conv.weight", ""}, {intAttr("group", 4)}),               // 0
            makeNode("/up/ConvTranspose", "ConvTranspose", {"x", "deconv.weight"}, {intAttr("group", 3)}), // 1
            makeNode("/fc1/Gemm", "Gemm", {"x", "gemm_nk"}, {intAttr("transB", 1)}),                       // 2
            makeNode("/fc2/Gemm", "Gemm", {"x", "gemm_kn"}),                                               // 3
            makeNode("/a_const/Gemm", "Gemm", {"gemm_nk", "x"}, {intAttr("transA", 1)}),                   // 4
            makeNode("/proj/MatMul", "MatMul", {"x", "matmul_kn"}),                                        // 5
            makeNode("/heads/MatMul", "MatMul", {"x", "batched"}),                                         // 6
            makeNode("/left/MatMul", "MatMul", {"matmul_kn", "x"}),                                        // 7
            makeNode("/vec/MatMul", "MatMul", {"x", "vector"}),                                            // 8
            makeNode("/emb/Gather", "Gather", {"table", "ids"}),                                           // 9
            makeNode("/cols/Gather", "Gather", {"table", "ids"}, {intAttr("axis", 1)}),                    // 10
            makeNode("/int/MatMul", "MatMul", {"x", "qweight"}),                                           // 11
            makeNode("/act/MatMul", "MatMul", {"x", "y"}),                                                 // 12
        };
        const std::vector<QuantizableLayer> layers = findGraphLayers(m);
        QCOMPARE(layers.size(), size_t(7));

        const QuantizableLayer* conv = layerOfNode(layers, 0);
        QVERIFY(conv);
        QCOMPARE(conv->modulePath, std::string("conv"));
        QCOMPARE(conv->weightInput, std::optional<size_t>(1));
        QCOMPARE(conv->channelAxis, 0);
        QCOMPARE(conv->contractionAxes, std::vector<int>{1});
        QCOMPARE(conv->groups, int64_t(4));
        QCOMPARE(conv->parameterCount, int64_t(8 * 2 * 9));

        const QuantizableLayer* deconv = layerOfNode(layers, 1);
        QVERIFY(deconv);
        QCOMPARE(deconv->channelAxis, 1);
        QCOMPARE(deconv->contractionAxes, std::vector<int>{0});
        QCOMPARE(deconv->groups, int64_t(3));

        const QuantizableLayer* nk = layerOfNode(layers, 2);
        QVERIFY(nk);
        QCOMPARE(nk->channelAxis, 0);
        QCOMPARE(nk->contractionAxes, std::vector<int>{1});
        const QuantizableLayer* kn = layerOfNode(layers, 3);
        QVERIFY(kn);
        QCOMPARE(kn->channelAxis, 1);
        QCOMPARE(kn->contractionAxes, std::vector<int>{0});
        QCOMPARE(kn->weightDType, DType::F16);
        QVERIFY(!layerOfNode(layers, 4)); // constant A is not a weight

        const QuantizableLayer* mm = layerOfNode(layers, 5);
        QVERIFY(mm);
        QCOMPARE(mm->channelAxis, 1);
        QCOMPARE(mm->contractionAxes, std::vector<int>{0});
        const QuantizableLayer* batched = layerOfNode(layers, 6);
        QVERIFY(batched);
        QCOMPARE(batched->channelAxis, 2);
        QCOMPARE(batched->contractionAxes, std::vector<int>{1});
        QVERIFY(!layerOfNode(layers, 7)); // constant left operand
        QVERIFY(!layerOfNode(layers, 8)); // 1-D right operand

        const QuantizableLayer* emb = layerOfNode(layers, 9);
        QVERIFY(emb);
        QCOMPARE(emb->weightInput, std::optional<size_t>(0));
        QCOMPARE(emb->channelAxis, 0);
        QCOMPARE(emb->contractionAxes, std::vector<int>{1});
        QCOMPARE(emb->modulePath, std::string("emb"));
        QVERIFY(!layerOfNode(layers, 10)); // Gather along columns is not an embedding lookup
        QVERIFY(!layerOfNode(layers, 11)); // already-integer weight
        QVERIFY(!layerOfNode(layers, 12)); // activation x activation
    }

    void graphPathsFallBackAndStayUnique()
    {
        Model m;
        m.addInitializer("block.fc.weight", Tensor(DType::F32, {4, 4}));
        m.addInitializer("onnx::MatMul_7", Tensor(DType::F32, {4, 4}));
        m.addInitializer("w2", Tensor(DType::F32, {4, 4}));
        m.nodes = {
            makeNode("", "MatMul", {"x", "block.fc.weight"}),         // weight name
            makeNode("", "MatMul", {"x", "onnx::MatMul_7"}),          // op type + ordinal
            makeNode("MatMul_12", "MatMul", {"x", "onnx::MatMul_7"}), // op type + ordinal
            makeNode("/dup/MatMul", "MatMul", {"x", "w2"}),
            makeNode("/dup/MatMul_1", "MatMul", {"x", "w2"}),
            makeNode("/dup/Relu", "Relu", {"x"}),
        };
        const std::vector<QuantizableLayer> layers = findGraphLayers(m);
        QCOMPARE(layers.size(), size_t(5));
        QCOMPARE(layers[0].modulePath, std::string("block/fc"));
        QCOMPARE(layers[1].modulePath, std::string("MatMul_0"));
        QCOMPARE(layers[2].modulePath, std::string("MatMul_1"));
        QCOMPARE(layers[3].modulePath, std::string("dup"));
        QCOMPARE(layers[4].modulePath, std::string("dup_1"));
        // The same model always gives the same paths.
        const std::vector<QuantizableLayer> again = findGraphLayers(m);
        for (size_t i = 0; i < layers.size(); ++i)
            QCOMPARE(again[i].modulePath, layers[i].modulePath);
    }

    void checkpointLayersFromNamesAndShapes()
    {
        Model m;
        m.weightsOnly = true;
        m.addInitializer("model.embed_tokens.weight", Tensor(DType::BF16, {100, 16}));
        m.addInitializer("model.layers.0.self_attn.q_proj.weight", Tensor(DType::F32, {16, 16}));
        m.addInitializer("model.layers.0.self_attn.q_proj.bias", Tensor(DType::F32, {16}));
        m.addInitializer("model.layers.0.input_layernorm.weight", Tensor(DType::F32, {16}));
        m.addInitializer("conv.weight", Tensor(DType::F32, {8, 3, 3, 3}));
        m.addInitializer("bn.running_mean", Tensor(DType::F32, {8}));
        m.addInitializer("position_ids", Tensor(DType::I64, {1, 512}));
        m.addInitializer("attn.bias", Tensor(DType::F32, {4, 4})); // a 2-D bias is still a bias
        m.addInitializer("ln.gamma", Tensor(DType::F32, {2, 16}));
        m.addInitializer("x.weight", Tensor(DType::F32, {1, 2, 3, 4, 5, 6}));
        m.addInitializer("lm_head.weight", Tensor(DType::F32, {100, 16}));
        const std::vector<QuantizableLayer> layers = inferCheckpointLayers(m);
        QCOMPARE(layers.size(), size_t(4));
        QCOMPARE(layers[0].opType, std::string("Embedding"));
        QCOMPARE(layers[0].modulePath, std::string("model/embed_tokens"));
        QCOMPARE(layers[0].weightDType, DType::BF16);
        QCOMPARE(layers[1].opType, std::string("Linear"));
        QCOMPARE(layers[1].modulePath, std::string("model/layers/0/self_attn/q_proj"));
        QCOMPARE(layers[1].channelAxis, 0);
        QCOMPARE(layers[1].contractionAxes, std::vector<int>{1});
        QVERIFY(!layers[1].node);
        QCOMPARE(layers[2].opType, std::string("Conv"));
        QCOMPARE(layers[2].modulePath, std::string("conv"));
        QCOMPARE(layers[3].opType, std::string("Linear"));
        QCOMPARE(layers[3].modulePath, std::string("lm_head"));
        QCOMPARE(layers[3].parameterCount, int64_t(1600));
    }

    void modelBookkeeping()
    {
        Model m;
        m.sourcePath = "m.onnx";
        m.addInitializer("w", Tensor(DType::F32, {2, 3}));
        QVERIFY_THROWS_EXCEPTION(Error, m.addInitializer("w", Tensor(DType::F32, {1})));
        QVERIFY(m.isInitializer("w"));
        QVERIFY(!m.isInitializer("v"));
        QCOMPARE(m.parameterCount(), int64_t(6));
        m.nodes = {makeNode("a", "Relu", {}), makeNode("b", "Relu", {}), makeNode("c", "Foo", {})};
        m.nodes[2].domain = "com.example";
        const std::vector<OpTypeUse> ops = m.opTypes();
        QCOMPARE(ops.size(), size_t(2));
        QCOMPARE(ops[0].opType, std::string("Relu"));
        QCOMPARE(ops[0].count, size_t(2));
        QCOMPARE(ops[1].domain, std::string("com.example"));

        ValueInfo v{"x", DType::F32, "float32", std::vector<Dim>{Dim::named("batch"), Dim::fixed(3), Dim::unknown()}};
        QCOMPARE(v.toString(), std::string("float32[batch, 3, ?]"));

        Node n = makeNode("n", "Conv", {}, {intAttr("group", 2)});
        Attribute f;
        f.name = "alpha";
        f.kind = Attribute::Kind::Float;
        n.attributes.push_back(f);
        QCOMPARE(n.intAttribute("group", 1), int64_t(2));
        QCOMPARE(n.intAttribute("missing", 7), int64_t(7));
        try {
            n.intAttribute("alpha", 0);
            QFAIL("a float attribute read as an integer should throw");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("'alpha'") != std::string::npos);
        }
    }

    void rulesResolveOverModelLayers()
    {
        Model m;
        m.addInitializer("w", Tensor(DType::F32, {4, 4, 1, 1}));
        m.addInitializer("fc", Tensor(DType::F32, {4, 4}));
        m.nodes = {
            makeNode("/layer1/layer1.0/conv1/Conv", "Conv", {"x", "w"}),
            makeNode("/layer1/layer1.1/conv1/Conv", "Conv", {"x", "w"}),
            makeNode("/fc/Gemm", "Gemm", {"x", "fc"}, {intAttr("transB", 1)}),
        };
        m.layers = findGraphLayers(m);
        const RuleSet rules = RuleSet::fromJson(R"({"version": 1, "rules": [
            {"module_path": "layer1/0/.*", "weight_qtype": "int4"},
            {"module_path": "layer1/.*", "op_types": ["Conv"], "weight_qtype": "int8"},
            {"module_path": "nothing/.*", "weight_qtype": "int8"}]})");
        const RuleResolution r = resolveRules(rules, m);
        QCOMPARE(r.ruleOfLayer.size(), size_t(3));
        QCOMPARE(r.ruleOfLayer[0], std::optional<size_t>(0)); // "layer1/0/conv1": the first match wins
        QCOMPARE(r.ruleOfLayer[1], std::optional<size_t>(1));
        QCOMPARE(r.ruleOfLayer[2], std::optional<size_t>()); // "fc" stays float
        QCOMPARE(r.matchCount, (std::vector<size_t>{1, 1, 0}));
        QCOMPARE(r.unusedRules, (std::vector<size_t>{2}));
    }
};

QTEST_APPLESS_MAIN(TestGraph)
#include "tst_graph.moc"
