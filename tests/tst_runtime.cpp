// The interpreter core: broadcasting against a scalar reference, the memory
// plan, rejection of unsupported ops, cancellation between nodes, errors that
// name the node, node observers, and small hand-built graphs end to end.
#include <QtTest>

#include <cstring>
#include <random>

#include "core/half.h"
#include "runtime/interpreter.h"

using namespace qs;

namespace {

Attribute intsAttr(const std::string& name, std::vector<int64_t> v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::Ints;
    a.ints = std::move(v);
    return a;
}

Attribute floatAttr(const std::string& name, float v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::Float;
    a.f = v;
    return a;
}

std::string indexed(const char* prefix, int i)
{
    std::string s = prefix;
    s += std::to_string(i);
    return s;
}

ValueInfo floatValue(const std::string& name)
{
    return ValueInfo{name, DType::F32, "float32", std::nullopt};
}

Node node(const std::string& name, const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
          std::vector<Attribute> attrs = {})
{
    Node n;
    n.name = name;
    n.opType = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    return n;
}

Model modelOf(std::vector<Node> nodes, std::vector<std::string> inputs, std::vector<std::string> outputs)
{
    Model m;
    m.format = "onnx";
    m.opsetImports[""] = 17;
    for (const auto& i : inputs)
        m.inputs.push_back(floatValue(i));
    for (const auto& o : outputs)
        m.outputs.push_back(floatValue(o));
    m.nodes = std::move(nodes);
    return m;
}

Tensor randomTensor(Shape shape, std::mt19937& rng)
{
    Tensor t(DType::F32, std::move(shape));
    std::normal_distribution<float> d(0.0f, 2.0f);
    for (float& v : t.mutableValues<float>())
        v = d(rng);
    return t;
}

// out[i] by explicit coordinates: the definition of numpy broadcasting.
Tensor referenceBinary(const Tensor& a, const Tensor& b, float (*op)(float, float))
{
    const size_t rank = std::max(a.shape().size(), b.shape().size());
    auto padded = [rank](const Shape& s) {
        Shape p(rank - s.size(), 1);
        p.insert(p.end(), s.begin(), s.end());
        return p;
    };
    const Shape pa = padded(a.shape()), pb = padded(b.shape());
    Shape out(rank);
    for (size_t i = 0; i < rank; ++i)
        out[i] = pa[i] == 1 ? pb[i] : pa[i];
    Tensor r(DType::F32, out);
    const Shape sa = rowMajorStrides(pa), sb = rowMajorStrides(pb);
    for (int64_t flat = 0; flat < r.numel(); ++flat) {
        int64_t rem = flat, ia = 0, ib = 0;
        for (size_t i = rank; i-- > 0;) {
            const int64_t c = rem % out[i];
            rem /= out[i];
            ia += (pa[i] == 1 ? 0 : c) * sa[i];
            ib += (pb[i] == 1 ? 0 : c) * sb[i];
        }
        r.mutableValues<float>()[size_t(flat)] = op(a.values<float>()[size_t(ia)], b.values<float>()[size_t(ib)]);
    }
    return r;
}

Tensor runBinary(const std::string& op, const Tensor& a, const Tensor& b)
{
    const Interpreter interpreter(modelOf({node("op", op, {"a", "b"}, {"y"})}, {"a", "b"}, {"y"}));
    return interpreter.run({{"a", a}, {"b", b}}).at("y");
}

bool sameFloats(const Tensor& x, const Tensor& y)
{
    if (x.shape() != y.shape())
        return false;
    for (size_t i = 0; i < size_t(x.numel()); ++i) {
        const float u = x.values<float>()[i], v = y.values<float>()[i];
        if (!(u == v || (std::isnan(u) && std::isnan(v))))
            return false;
    }
    return true;
}

// Records what it sees; can cancel or replace inputs.
class RecordingObserver : public NodeObserver {
public:
    std::vector<std::string> ran;
    std::vector<size_t> liveAfter;
    CancellationToken* cancelAfterFirst = nullptr;
    std::function<void(NodeEvent&)> before;

    void beforeNode(NodeEvent& e) override
    {
        if (before)
            before(e);
    }
    void afterNode(NodeEvent& e) override
    {
        ran.push_back(e.node->name);
        liveAfter.push_back(e.liveValues);
        if (cancelAfterFirst)
            cancelAfterFirst->cancel();
    }
};

// Sees every node as stated (the default), or lets the run fold activations into Conv.
class NodeLister : public NodeObserver {
public:
    explicit NodeLister(bool allowFusion) : allowFusion_(allowFusion) {}
    std::vector<std::string> ran;
    bool needsEveryNode() const override { return !allowFusion_; }
    void afterNode(NodeEvent& e) override { ran.push_back(e.node->opType); }

private:
    bool allowFusion_;
};

// Sees every node and reads no tensor (as a timer): where each node's output 0 lies.
class OutputLocator : public NodeObserver {
public:
    struct Place {
        const float* data = nullptr;
        int64_t numel = 0;
    };
    std::map<std::string, Place> written; // by node name
    bool needsEveryNode() const override { return false; }
    bool readsInputs() const override { return false; }
    bool readsOutputs() const override { return false; }
    void afterNode(NodeEvent& e) override
    {
        written[e.node->name] = {static_cast<const float*>(e.outputs[0].rawData()), e.outputs[0].numel()};
    }
};

bool sameBits(const Tensor& x, const Tensor& y)
{
    return x.shape() == y.shape() && x.dtype() == y.dtype() && std::memcmp(x.rawData(), y.rawData(), x.nbytes()) == 0;
}

// Output `name` of a model run twice, every node as stated and with fusion
// allowed, and the op types each run went through.
struct StatedAndFolded {
    Tensor stated, folded;
    std::vector<std::string> statedRan, foldedRan;
};

StatedAndFolded runStatedAndFolded(const Interpreter& interpreter, const std::map<std::string, Tensor>& inputs,
                                   const std::string& name)
{
    NodeLister stated(false), folded(true);
    RunOptions asStated, allowingFusion;
    asStated.observer = &stated;
    allowingFusion.observer = &folded;
    StatedAndFolded runs;
    runs.stated = interpreter.run(inputs, asStated).at(name);
    runs.folded = interpreter.run(inputs, allowingFusion).at(name);
    runs.statedRan = stated.ran;
    runs.foldedRan = folded.ran;
    return runs;
}

// Normal values with zeros of both signs, tiny and huge values mixed in.
Tensor adversarialTensor(Shape shape, std::mt19937& rng)
{
    Tensor t = randomTensor(std::move(shape), rng);
    const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 3.0f, -3.0f, 1e20f, -1e20f};
    auto v = t.mutableValues<float>();
    for (size_t i = 0; i < v.size(); i += 7)
        v[i] = specials[(i / 7) % std::size(specials)];
    return t;
}

} // namespace

class TestRuntime : public QObject {
    Q_OBJECT
private slots:
    void broadcastingMatchesTheScalarDefinition_data()
    {
        QTest::addColumn<QList<qint64>>("a");
        QTest::addColumn<QList<qint64>>("b");
        QTest::newRow("same") << QList<qint64>{3, 4} << QList<qint64>{3, 4};
        QTest::newRow("scalar") << QList<qint64>{2, 3, 5} << QList<qint64>{};
        QTest::newRow("row") << QList<qint64>{4, 7} << QList<qint64>{7};
        QTest::newRow("column") << QList<qint64>{4, 7} << QList<qint64>{4, 1};
        QTest::newRow("outer") << QList<qint64>{5, 1} << QList<qint64>{1, 6};
        QTest::newRow("middle") << QList<qint64>{2, 1, 3} << QList<qint64>{2, 5, 1};
        QTest::newRow("rank5") << QList<qint64>{2, 1, 3, 1, 4} << QList<qint64>{3, 2, 4};
        QTest::newRow("empty") << QList<qint64>{0, 3} << QList<qint64>{1, 3};
        QTest::newRow("large-parallel") << QList<qint64>{64, 33, 40} << QList<qint64>{33, 1};
        QTest::newRow("large-row") << QList<qint64>{1, 100000} << QList<qint64>{1};
        QTest::newRow("large-inner-broadcast") << QList<qint64>{300, 1, 200} << QList<qint64>{300, 3, 1};
    }
    void broadcastingMatchesTheScalarDefinition()
    {
        QFETCH(QList<qint64>, a);
        QFETCH(QList<qint64>, b);
        std::mt19937 rng(7);
        const Tensor ta = randomTensor(Shape(a.begin(), a.end()), rng);
        const Tensor tb = randomTensor(Shape(b.begin(), b.end()), rng);
        QVERIFY(sameFloats(runBinary("Sub", ta, tb), referenceBinary(ta, tb, [](float x, float y) { return x - y; })));
        QVERIFY(sameFloats(runBinary("Sub", tb, ta), referenceBinary(tb, ta, [](float x, float y) { return x - y; })));
        QVERIFY(sameFloats(runBinary("Max", ta, tb),
                           referenceBinary(ta, tb, [](float x, float y) { return x < y ? y : x; })));
    }

    void adversarialValuesPropagate()
    {
        const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
        const Tensor a = Tensor::fromVector(DType::F32, {4}, std::vector<float>{inf, -inf, nan, 0.0f});
        const Tensor b = Tensor::fromVector(DType::F32, {4}, std::vector<float>{1.0f, 2.0f, 3.0f, -0.0f});
        QVERIFY(sameFloats(runBinary("Max", a, b), referenceBinary(a, b, [](float x, float y) {
                               return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
                           })));
        QVERIFY(sameFloats(runBinary("Div", a, b), referenceBinary(a, b, [](float x, float y) { return x / y; })));
    }

    void largeUnaryMapsMatchTheScalarFormula()
    {
        // Above the parallel threshold, with the values where naive formulas overflow.
        std::mt19937 rng(5);
        Tensor x = randomTensor({3, 50000}, rng);
        const float special[] = {std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 -100.0f,
                                 100.0f,
                                 -0.0f,
                                 89.0f,
                                 -89.0f};
        for (size_t i = 0; i < std::size(special); ++i)
            x.mutableValues<float>()[i * 997] = special[i];
        const Interpreter sigmoid(modelOf({node("s", "Sigmoid", {"x"}, {"y"})}, {"x"}, {"y"}));
        const Interpreter softplus(modelOf({node("p", "Softplus", {"x"}, {"y"})}, {"x"}, {"y"}));
        const Tensor ys = sigmoid.run({{"x", x}}).at("y");
        const Tensor yp = softplus.run({{"x", x}}).at("y");
        for (size_t i = 0; i < size_t(x.numel()); ++i) {
            const double v = x.values<float>()[i];
            const double s = 1.0 / (1.0 + std::exp(-v));
            const double p = v > 30 ? v : std::log1p(std::exp(v));
            if (std::isnan(v)) {
                QVERIFY(std::isnan(ys.values<float>()[i]) && std::isnan(yp.values<float>()[i]));
                continue;
            }
            QVERIFY2(std::abs(ys.values<float>()[i] - s) <= 1e-6 * (1 + std::abs(s)), qPrintable(QString::number(v)));
            if (std::isinf(p))
                QCOMPARE(double(yp.values<float>()[i]), p);
            else
                QVERIFY2(std::abs(yp.values<float>()[i] - p) <= 1e-5 * (1 + std::abs(p)),
                         qPrintable(QString::number(v)));
        }
    }

    void castSaturatesAndHalfRoundsToNearestEven()
    {
        Attribute to;
        to.name = "to";
        to.kind = Attribute::Kind::Int;
        to.i = 6; // int32
        Model m = modelOf({node("c", "Cast", {"x"}, {"y"}, {to})}, {"x"}, {});
        m.outputs.push_back(ValueInfo{"y", DType::I32, "int32", std::nullopt});
        const Tensor x = Tensor::fromVector(DType::F32, {6}, std::vector<float>{1e10f, -1e10f, 2.9f, -2.9f, NAN, 0.5f});
        const Tensor y = Interpreter(m).run({{"x", x}}).at("y");
        QCOMPARE(std::vector<int32_t>(y.values<int32_t>().begin(), y.values<int32_t>().end()),
                 (std::vector<int32_t>{INT32_MAX, INT32_MIN, 2, -2, 0, 0}));
        // float16 arithmetic is float arithmetic rounded back once.
        std::vector<uint16_t> a, b;
        std::mt19937 rng(9);
        std::uniform_real_distribution<float> d(-1000.0f, 1000.0f);
        for (int i = 0; i < 1000; ++i) {
            a.push_back(floatToFp16(d(rng)));
            b.push_back(floatToFp16(d(rng) / 1000.0f));
        }
        Model h = modelOf({node("add", "Add", {"a", "b"}, {"y"})}, {}, {});
        h.inputs = {ValueInfo{"a", DType::F16, "float16", std::nullopt},
                    ValueInfo{"b", DType::F16, "float16", std::nullopt}};
        h.outputs = {ValueInfo{"y", DType::F16, "float16", std::nullopt}};
        const Tensor sum = Interpreter(h)
                               .run({{"a", Tensor::fromVector(DType::F16, {1000}, a)},
                                     {"b", Tensor::fromVector(DType::F16, {1000}, b)}})
                               .at("y");
        QCOMPARE(sum.dtype(), DType::F16);
        for (size_t i = 0; i < a.size(); ++i)
            QCOMPARE(sum.values<uint16_t>()[i], floatToFp16(fp16ToFloat(a[i]) + fp16ToFloat(b[i])));
    }

    void incompatibleShapesNameTheNode()
    {
        std::mt19937 rng(1);
        try {
            runBinary("Add", randomTensor({2, 3}, rng), randomTensor({4}, rng));
            QFAIL("expected an Error");
        } catch (const Error& e) {
            const std::string m = e.what();
            QVERIFY2(m.find("'op' (Add)") != std::string::npos && m.find("[2, 3]") != std::string::npos, e.what());
        }
    }

    void memoryPlanFreesIntermediatesAfterTheirLastReader()
    {
        // x -> a -> b -> c -> y, and x is read again by the last node: x lives to the end,
        // a and b die right after their reader.
        const Interpreter interpreter(modelOf({node("n0", "Relu", {"x"}, {"a"}), node("n1", "Neg", {"a"}, {"b"}),
                                               node("n2", "Abs", {"b"}, {"c"}), node("n3", "Add", {"c", "x"}, {"y"})},
                                              {"x"}, {"y"}));
        const auto freed = interpreter.freedAfterEachNode();
        QCOMPARE(freed[0], std::vector<std::string>{});
        QCOMPARE(freed[1], std::vector<std::string>{"a"});
        QCOMPARE(freed[2], std::vector<std::string>{"b"});
        QCOMPARE(freed[3], (std::vector<std::string>{"x", "c"}));
        RecordingObserver obs;
        RunOptions options;
        options.observer = &obs;
        std::mt19937 rng(3);
        const Tensor x = randomTensor({8}, rng);
        const Tensor y = interpreter.run({{"x", x}}, options).at("y");
        // live after each node, counted before that node's frees: x + the new value (+ the one it read).
        QCOMPARE(obs.liveAfter, (std::vector<size_t>{2, 3, 3, 3}));
        for (size_t i = 0; i < 8; ++i)
            QCOMPARE(y.values<float>()[i], std::abs(-std::max(x.values<float>()[i], 0.0f)) + x.values<float>()[i]);
    }

    void longChainHoldsAConstantNumberOfValues()
    {
        std::vector<Node> nodes;
        std::string prev = "x";
        for (int i = 0; i < 50; ++i) {
            const std::string out = i == 49 ? "y" : indexed("v", i);
            nodes.push_back(node(indexed("n", i), i % 2 ? "Neg" : "Relu", {prev}, {out}));
            prev = out;
        }
        const Interpreter interpreter(modelOf(nodes, {"x"}, {"y"}));
        RecordingObserver obs;
        RunOptions options;
        options.observer = &obs;
        interpreter.run({{"x", Tensor(DType::F32, {16})}}, options);
        QCOMPARE(obs.ran.size(), size_t(50));
        for (size_t live : obs.liveAfter)
            QVERIFY(live <= 2);
    }

    void missingOpsAreAllListedAtConstruction()
    {
        Model m = modelOf({node("a", "FancyOp", {"x"}, {"t"}), node("b", "Relu", {"t"}, {"u"}),
                           node("c", "OtherOp", {"u"}, {"v"}), node("d", "FancyOp", {"v"}, {"y"})},
                          {"x"}, {"y"});
        m.nodes[2].domain = "com.example";
        m.opsetImports["com.example"] = 1;
        QCOMPARE(unsupportedOps(m), (std::vector<std::string>{"FancyOp", "com.example:OtherOp"}));
        try {
            Interpreter interpreter(m);
            QFAIL("expected an Error");
        } catch (const Error& e) {
            const std::string msg = e.what();
            QVERIFY2(msg.find("FancyOp") != std::string::npos && msg.find("com.example:OtherOp") != std::string::npos &&
                         msg.find("Relu") == std::string::npos,
                     e.what());
        }
        // An op known only at other opsets is named with the model's opset.
        Model old = modelOf({node("g", "Gelu", {"x"}, {"y"})}, {"x"}, {"y"});
        QCOMPARE(unsupportedOps(old), std::vector<std::string>{"Gelu (opset 17)"});
    }

    void cancellationStopsBetweenNodes()
    {
        const Interpreter interpreter(modelOf(
            {node("n0", "Relu", {"x"}, {"a"}), node("n1", "Neg", {"a"}, {"b"}), node("n2", "Abs", {"b"}, {"y"})}, {"x"},
            {"y"}));
        RunOptions options;
        RecordingObserver obs;
        obs.cancelAfterFirst = &options.cancel;
        options.observer = &obs;
        QVERIFY_THROWS_EXCEPTION(Cancelled, interpreter.run({{"x", Tensor(DType::F32, {4})}}, options));
        QCOMPARE(obs.ran, std::vector<std::string>{"n0"});
        // A token cancelled before the run stops it before the first node.
        RunOptions cancelled;
        cancelled.cancel.cancel();
        QVERIFY_THROWS_EXCEPTION(Cancelled, interpreter.run({{"x", Tensor(DType::F32, {4})}}, cancelled));
    }

    void attributeErrorsNameTheNodeAndAttribute()
    {
        Attribute perm = floatAttr("perm", 1.0f);
        const Interpreter interpreter(modelOf({node("swap", "Transpose", {"x"}, {"y"}, {perm})}, {"x"}, {"y"}));
        try {
            interpreter.run({{"x", Tensor(DType::F32, {2, 3})}});
            QFAIL("expected an Error");
        } catch (const Error& e) {
            QCOMPARE(std::string(e.what()),
                     std::string("node 'swap' (Transpose): attribute 'perm' must be a list of ints"));
        }
        // An unnamed node is named by its index.
        const Interpreter unnamed(
            modelOf({node("", "Relu", {"x"}, {"a"}), node("", "Transpose", {"a"}, {"y"}, {intsAttr("perm", {0, 0})})},
                    {"x"}, {"y"}));
        try {
            unnamed.run({{"x", Tensor(DType::F32, {2, 3})}});
            QFAIL("expected an Error");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).starts_with("node #1 (Transpose): perm repeats axis 0"), e.what());
        }
    }

    void inputsAreChecked()
    {
        Model m = modelOf({node("n", "Relu", {"x"}, {"y"})}, {"x"}, {"y"});
        m.inputs[0].shape = std::vector<Dim>{Dim::named("batch"), Dim::fixed(3)};
        const Interpreter interpreter(m);
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.run({}));
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.run({{"x", Tensor(DType::F32, {2, 4})}}));
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.run({{"x", Tensor(DType::I64, {2, 3})}}));
        QVERIFY_THROWS_EXCEPTION(Error, interpreter.run({{"x", Tensor(DType::F32, {2, 3})}, {"z", Tensor()}}));
        QCOMPARE(interpreter.run({{"x", Tensor(DType::F32, {5, 3})}}).at("y").shape(), (Shape{5, 3}));
        // A node reading a value nobody produces is refused at construction, naming both.
        try {
            Interpreter bad(modelOf({node("n", "Relu", {"ghost"}, {"y"})}, {"x"}, {"y"}));
            QFAIL("expected an Error");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("'ghost'") != std::string::npos, e.what());
        }
    }

    void observerCanReplaceAnInput()
    {
        Model m = modelOf({node("scale", "Mul", {"x", "w"}, {"y"})}, {"x"}, {"y"});
        m.addInitializer("w", Tensor::fromVector(DType::F32, {}, std::vector<float>{2.0f}));
        const Interpreter interpreter(m);
        RecordingObserver obs;
        obs.before = [](NodeEvent& e) { e.inputs[1] = Tensor::fromVector(DType::F32, {}, std::vector<float>{10.0f}); };
        RunOptions options;
        options.observer = &obs;
        const Tensor x = Tensor::fromVector(DType::F32, {2}, std::vector<float>{1.0f, -3.0f});
        QCOMPARE(interpreter.run({{"x", x}}, options).at("y").values<float>()[1], -30.0f);
        // The stored initializer is unchanged: a run without the observer uses it.
        QCOMPARE(interpreter.run({{"x", x}}).at("y").values<float>()[1], -6.0f);
    }

    void convActivationFusionGivesTheUnfusedBits_data()
    {
        QTest::addColumn<QString>("activation");
        QTest::addColumn<int>("group");
        QTest::addColumn<int>("kernel");
        QTest::addColumn<bool>("bias");
        for (const char* act :
             {"Relu", "LeakyRelu", "Clip", "Clip6", "HardSigmoid", "HardSwish", "Sigmoid", "SiLU", "SiLU swapped"})
            for (auto [group, kernel] :
                 {std::pair{1, 3}, std::pair{1, 1}, std::pair{6, 3}, std::pair{2, 3}, std::pair{16, 3}})
                for (bool bias : {true, false})
                    QTest::addRow("%s group %d kernel %d%s", act, group, kernel, bias ? " bias" : "")
                        << QString(act) << group << kernel << bias;
    }
    void convActivationFusionGivesTheUnfusedBits()
    {
        QFETCH(QString, activation);
        QFETCH(int, group);
        QFETCH(int, kernel);
        QFETCH(bool, bias);
        std::mt19937 rng(11);
        // 16 groups: a depthwise conv of one block of channels, stored clamped.
        const int64_t C = std::max(6, group), M = C, H = 9;
        std::vector<std::string> convInputs{"x", "w"};
        if (bias)
            convInputs.push_back("b");
        Node conv =
            node("conv", "Conv", convInputs, {"c"},
                 {intsAttr("pads", std::vector<int64_t>(4, kernel / 2)), intsAttr("strides", {kernel == 3 ? 2 : 1, 1}),
                  Attribute{"group", Attribute::Kind::Int, group, 0.0f, {}, {}, {}, {}, {}}});
        std::vector<Node> nodes{conv};
        Model m;
        const std::string act = activation.toStdString();
        if (act == "Clip") { // opset 11+: bounds as inputs
            nodes.push_back(node("act", "Clip", {"c", "lo", "hi"}, {"y"}));
        } else if (act == "Clip6") { // opset 6: bounds as attributes
            nodes.push_back(node("act", "Clip", {"c"}, {"y"}, {floatAttr("min", -0.5f), floatAttr("max", 0.75f)}));
        } else if (act == "LeakyRelu") {
            nodes.push_back(node("act", act, {"c"}, {"y"}, {floatAttr("alpha", 0.3f)}));
        } else if (act == "HardSigmoid") {
            nodes.push_back(node("act", act, {"c"}, {"y"}, {floatAttr("alpha", 0.25f), floatAttr("beta", 0.4f)}));
        } else if (act.starts_with("SiLU")) { // as exported: Mul(x, Sigmoid(x)), either operand order
            nodes.push_back(node("act", "Sigmoid", {"c"}, {"s"}));
            nodes.push_back(node("mul", "Mul", act == "SiLU" ? std::vector<std::string>{"c", "s"}
                                                             : std::vector<std::string>{"s", "c"},
                                 {"y"}));
        } else {
            nodes.push_back(node("act", act, {"c"}, {"y"}));
        }
        m = modelOf(nodes, {"x"}, {"y"});
        if (act == "Clip6")
            m.opsetImports[""] = 6;
        m.addInitializer("w", adversarialTensor({M, C / group, kernel, kernel}, rng));
        if (bias)
            m.addInitializer("b", adversarialTensor({M}, rng));
        m.addInitializer("lo", Tensor::fromVector(DType::F32, {}, std::vector<float>{-0.5f}));
        m.addInitializer("hi", Tensor::fromVector(DType::F32, {}, std::vector<float>{0.75f}));
        const Interpreter interpreter(m);
        const Tensor x = adversarialTensor({2, C, H, H}, rng);

        const StatedAndFolded runs = runStatedAndFolded(interpreter, {{"x", x}}, "y");
        const std::vector<std::string> stated = act.starts_with("SiLU")
                                                    ? std::vector<std::string>{"Conv", "Sigmoid", "Mul"}
                                                    : std::vector<std::string>{"Conv", act == "Clip6" ? "Clip" : act};
        QCOMPARE(runs.statedRan, stated);
        QVERIFY(sameBits(runs.folded, runs.stated));
        QCOMPARE(runs.foldedRan, std::vector<std::string>{"Conv"});          // the activation ran inside the Conv
        QVERIFY(sameBits(interpreter.run({{"x", x}}).at("y"), runs.stated)); // no observer: fused too
    }

    void fusionKeepsValuesOthersRead()
    {
        // The Conv's output is also a graph output, or read by a second node, or
        // Clip's bound is computed: each time the Relu/Clip must run on its own.
        std::mt19937 rng(5);
        auto convModel = [&](std::vector<Node> after, std::vector<std::string> outputs,
                             std::vector<std::string> inputs = {"x"}) {
            std::vector<Node> nodes{node("conv", "Conv", {"x", "w"}, {"c"})};
            nodes.insert(nodes.end(), after.begin(), after.end());
            Model m = modelOf(nodes, inputs, outputs);
            m.addInitializer("w", randomTensor({3, 2, 1, 1}, rng));
            return m;
        };
        const std::vector<Model> models{
            convModel({node("act", "Relu", {"c"}, {"y"})}, {"y", "c"}),
            convModel({node("act", "Relu", {"c"}, {"r"}), node("add", "Add", {"r", "c"}, {"y"})}, {"y"}),
            convModel({node("act", "Clip", {"c", "lo"}, {"y"})}, {"y"}, {"x", "lo"}),
            // SiLU whose Sigmoid output is also a graph output, or whose input a third node reads.
            convModel({node("sig", "Sigmoid", {"c"}, {"s"}), node("mul", "Mul", {"c", "s"}, {"y"})}, {"y", "s"}),
            convModel({node("sig", "Sigmoid", {"c"}, {"s"}), node("mul", "Mul", {"c", "s"}, {"m"}),
                       node("add", "Add", {"m", "c"}, {"y"})},
                      {"y"}),
        };
        const Tensor x = randomTensor({1, 2, 4, 4}, rng);
        const Tensor lo = Tensor::fromVector(DType::F32, {}, std::vector<float>{-0.25f});
        for (const Model& m : models) {
            const Interpreter interpreter(m);
            NodeLister folded(true), stated(false);
            RunOptions options, asStated;
            options.observer = &folded;
            asStated.observer = &stated;
            std::map<std::string, Tensor> inputs{{"x", x}};
            if (m.inputs.size() == 2)
                inputs["lo"] = lo;
            const auto outputs = interpreter.run(inputs, options);
            QCOMPARE(folded.ran.size(), m.nodes.size());
            const auto unfused = interpreter.run(inputs, asStated);
            for (const auto& [name, value] : outputs)
                QVERIFY2(sameBits(value, unfused.at(name)), name.c_str());
        }
    }

    void residualAddFoldsIntoTheConvBeforeIt()
    {
        // Conv -> Add(residual) -> Relu runs as one Conv when the residual exists
        // before the Conv and has the output's shape; the bits are the unfused ones.
        std::mt19937 rng(21);
        const Tensor x = adversarialTensor({2, 4, 6, 5}, rng);
        const Tensor perChannel = randomTensor({1, 4, 1, 1}, rng);
        struct Case {
            const char* name;
            std::vector<Node> nodes;
            std::vector<std::string> folded; // node types an allowing observer sees
        };
        auto conv = [&](const char* name, const char* w, const char* out, bool bias) {
            std::vector<std::string> in{"x", w};
            if (bias)
                in.push_back("b");
            return node(name, "Conv", in, {out}, {intsAttr("pads", {1, 1, 1, 1})});
        };
        const std::vector<Case> cases{
            {"conv first, bias",
             {conv("c", "w", "c", true), node("add", "Add", {"c", "x"}, {"s"}), node("act", "Relu", {"s"}, {"y"})},
             {"Conv"}},
            {"residual first",
             {conv("c", "w", "c", false), node("add", "Add", {"x", "c"}, {"s"}), node("act", "Relu", {"s"}, {"y"})},
             {"Conv"}},
            {"no activation", {conv("c", "w", "c", true), node("add", "Add", {"c", "x"}, {"y"})}, {"Conv"}},
            {"two convs: the later one",
             {conv("c1", "w", "o1", true), conv("c2", "w2", "o2", false), node("add", "Add", {"o1", "o2"}, {"s"}),
              node("act", "Relu", {"s"}, {"y"})},
             {"Conv", "Conv"}},
            {"broadcast: declined",
             {conv("c", "w", "c", true), node("add", "Add", {"c", "p"}, {"s"}), node("act", "Relu", {"s"}, {"y"})},
             {"Conv", "Add", "Relu"}},
            {"residual computed after",
             {conv("c", "w", "c", true), node("neg", "Neg", {"x"}, {"n"}), node("add", "Add", {"c", "n"}, {"s"}),
              node("act", "Relu", {"s"}, {"y"})},
             {"Conv", "Neg", "Add", "Relu"}},
        };
        for (const Case& c : cases) {
            Model m = modelOf(c.nodes, {"x", "p"}, {"y"});
            m.addInitializer("w", adversarialTensor({4, 4, 3, 3}, rng));
            m.addInitializer("w2", randomTensor({4, 4, 3, 3}, rng));
            m.addInitializer("b", adversarialTensor({4}, rng));
            const Interpreter interpreter(m);
            const std::map<std::string, Tensor> inputs{{"x", x}, {"p", perChannel}};
            const StatedAndFolded runs = runStatedAndFolded(interpreter, inputs, "y");
            QCOMPARE(runs.statedRan.size(), c.nodes.size());
            QVERIFY2(sameBits(runs.folded, runs.stated), c.name);
            QVERIFY2(runs.foldedRan == c.folded, c.name);
            QVERIFY2(sameBits(interpreter.run(inputs).at("y"), runs.stated), c.name);
        }
    }

    void foldedNodesGiveTheUnfusedBitsOnSmallPlaneConvs()
    {
        // Convs with many output channels on small planes put the positions
        // in the product's rows (3 x 3 windows) or transpose a product over
        // few positions (1 x 1); their outputs are finished as they are
        // transposed (bias and Relu or Clip) or in a pass after (a residual
        // Add, HardSwish), as the separate nodes would round them: 7 x 7 and
        // 2 x 2 planes, 40 channels (two strips of 16 and 8 more), 3 x 3 planes.
        std::mt19937 rng(33);
        struct Case {
            int64_t channels, outputs, window, side;
        };
        for (const Case& c : {Case{64, 64, 3, 7}, Case{64, 40, 3, 7}, Case{64, 64, 3, 2}, Case{256, 520, 1, 3}})
            for (const char* act : {"Relu", "Clip", "HardSwish"})
                for (bool residual : {false, true}) {
                    const int64_t pad = c.window / 2;
                    std::vector<Node> nodes{node("c", "Conv", {"x", "w", "b"}, {"c"},
                                                 {intsAttr("pads", {pad, pad, pad, pad})})};
                    if (residual)
                        nodes.push_back(node("add", "Add", {"c", "r"}, {"s"}));
                    const std::string in = residual ? "s" : "c";
                    nodes.push_back(std::string(act) == "Clip" ? node("act", "Clip", {in, "lo", "hi"}, {"y"})
                                                               : node("act", act, {in}, {"y"}));
                    Model m = modelOf(nodes, {"x", "r"}, {"y"});
                    m.addInitializer("w", adversarialTensor({c.outputs, c.channels, c.window, c.window}, rng));
                    m.addInitializer("b", adversarialTensor({c.outputs}, rng));
                    m.addInitializer("lo", Tensor::fromVector(DType::F32, {}, std::vector<float>{-0.5f}));
                    m.addInitializer("hi", Tensor::fromVector(DType::F32, {}, std::vector<float>{0.75f}));
                    const StatedAndFolded runs = runStatedAndFolded(
                        Interpreter(m),
                        {{"x", adversarialTensor({c.window == 1 ? 1 : 2, c.channels, c.side, c.side}, rng)},
                         {"r", adversarialTensor({c.window == 1 ? 1 : 2, c.outputs, c.side, c.side}, rng)}},
                        "y");
                    QCOMPARE(runs.statedRan.size(), nodes.size());
                    QVERIFY2(sameBits(runs.folded, runs.stated), act);
                    QCOMPARE(runs.foldedRan, std::vector<std::string>{"Conv"});
                }
    }

    void foldedNodesGiveTheUnfusedBitsOnImplicitGemmChunks()
    {
        // A shallow 3 x 3 conv (the implicit GEMM) on planes whose column
        // chunks start and end inside output rows: each channel's rows of a
        // chunk are finished in one call, the chunk's first and last rows in
        // part; bias, residual and activation as the separate nodes round
        // them. Unit stride and stride 2 (one junk column per row), a plane
        // of one output row, and batches of one and two.
        std::mt19937 rng(47);
        struct Case {
            int64_t images, h, w, stride;
        };
        for (const Case& c : {Case{1, 37, 45, 1}, Case{2, 29, 61, 2}, Case{1, 1, 300, 1}, Case{2, 40, 9, 2}}) {
            const int64_t OH = (c.h + 2 - 3) / c.stride + 1, OW = (c.w + 2 - 3) / c.stride + 1;
            Model m = modelOf({node("c", "Conv", {"x", "w", "b"}, {"c"},
                                    {intsAttr("pads", {1, 1, 1, 1}), intsAttr("strides", {c.stride, c.stride})}),
                               node("add", "Add", {"c", "r"}, {"s"}), node("act", "HardSwish", {"s"}, {"y"})},
                              {"x", "r"}, {"y"});
            m.addInitializer("w", adversarialTensor({6, 4, 3, 3}, rng));
            m.addInitializer("b", adversarialTensor({6}, rng));
            const StatedAndFolded runs =
                runStatedAndFolded(Interpreter(m),
                                   {{"x", adversarialTensor({c.images, 4, c.h, c.w}, rng)},
                                    {"r", adversarialTensor({c.images, 6, OH, OW}, rng)}},
                                   "y");
            QCOMPARE(runs.statedRan, (std::vector<std::string>{"Conv", "Add", "HardSwish"}));
            QVERIFY(sameBits(runs.folded, runs.stated));
            QCOMPARE(runs.foldedRan, std::vector<std::string>{"Conv"});
        }
    }

    void foldedNodesGiveTheUnfusedBitsOnPointwiseConvs()
    {
        // 1 x 1 convs store their sums finished (bias, residual, Relu or Clip)
        // from the product's registers; the bits are the separate nodes'. On
        // each path: column chunks of a large plane, output channels split
        // over one packed input (6 x 6), positions as the product's rows
        // (3 x 3, one image), one product over a batch of small planes (two
        // and four images of 3 x 3), a strided column matrix, a last strip of
        // a few columns (6 x 6: 32 + 4 columns; 33 x 1; a 2 x 2 plane), and
        // last strips that end inside a vector (11 x 11: 96 + 25 columns,
        // with a depth of two blocks, whose first block's sums are added to;
        // 5 x 9: 32 + 13).
        std::mt19937 rng(41);
        struct Case {
            int64_t images, channels, outputs, h, w, stride;
        };
        for (const Case& c : {Case{1, 16, 24, 40, 40, 1}, Case{1, 64, 200, 6, 6, 1}, Case{1, 64, 200, 3, 3, 1},
                              Case{2, 64, 200, 3, 3, 1}, Case{2, 24, 40, 13, 15, 2}, Case{2, 8, 20, 5, 7, 1},
                              Case{1, 32, 40, 33, 1, 1}, Case{1, 16, 24, 2, 2, 1}, Case{4, 448, 600, 3, 3, 1},
                              Case{1, 300, 48, 11, 11, 1}, Case{1, 48, 192, 11, 11, 1}, Case{1, 16, 24, 5, 9, 1}})
            for (const char* act : {"Relu", "Clip"}) {
                const int64_t oh = (c.h - 1) / c.stride + 1, ow = (c.w - 1) / c.stride + 1;
                std::vector<Node> nodes{node("c", "Conv", {"x", "w", "b"}, {"c"}, {intsAttr("strides", {c.stride, c.stride})}),
                                        node("add", "Add", {"c", "r"}, {"s"})};
                nodes.push_back(std::string(act) == "Clip" ? node("act", "Clip", {"s", "lo", "hi"}, {"y"})
                                                           : node("act", "Relu", {"s"}, {"y"}));
                Model m = modelOf(nodes, {"x", "r"}, {"y"});
                m.addInitializer("w", adversarialTensor({c.outputs, c.channels, 1, 1}, rng));
                m.addInitializer("b", adversarialTensor({c.outputs}, rng));
                m.addInitializer("lo", Tensor::fromVector(DType::F32, {}, std::vector<float>{-0.5f}));
                m.addInitializer("hi", Tensor::fromVector(DType::F32, {}, std::vector<float>{0.75f}));
                const std::map<std::string, Tensor> inputs{
                    {"x", adversarialTensor({c.images, c.channels, c.h, c.w}, rng)},
                    {"r", adversarialTensor({c.images, c.outputs, oh, ow}, rng)}};
                const StatedAndFolded runs = runStatedAndFolded(Interpreter(m), inputs, "y");
                const QByteArray name = QByteArray::number(qlonglong(c.outputs)) + " on " +
                                        QByteArray::number(qlonglong(c.h)) + " x " + QByteArray::number(qlonglong(c.w)) +
                                        ", " + act;
                QCOMPARE(runs.statedRan, (std::vector<std::string>{"Conv", "Add", act}));
                QVERIFY2(sameBits(runs.folded, runs.stated), name.constData());
                QVERIFY2(runs.foldedRan == std::vector<std::string>{"Conv"}, name.constData());
            }
    }

    void convsWriteStraightIntoTheConcatThatReadsThem()
    {
        // A fire module (squeeze, then 1 x 1 and 3 x 3 expands concatenated)
        // and variations. A Conv (with its folded Relu) that is the only
        // reader's only producer of a Concat input along the images or the
        // channels writes its slice of the Concat's output itself; the
        // Concat copies the rest. Every run gives the bits of the run that
        // states every node; where each Conv wrote tells whether it was placed.
        std::mt19937 rng(31);
        const int64_t N = 3, C = 6, S = 4, M1 = 5, M3 = 7, H = 6, W = 5;
        auto axisAttr = [](int64_t axis) { return Attribute{"axis", Attribute::Kind::Int, axis, 0, {}, {}, {}, {}, {}}; };
        const std::vector<Node> fire{
            node("squeeze", "Conv", {"x", "ws", "bs"}, {"s"}),
            node("squeeze_relu", "Relu", {"s"}, {"sr"}),
            node("e1", "Conv", {"sr", "w1", "b1"}, {"a"}),
            node("e1_relu", "Relu", {"a"}, {"ar"}),
            node("e3", "Conv", {"sr", "w3", "b3"}, {"b"}, {intsAttr("pads", {1, 1, 1, 1})}),
            node("e3_relu", "Relu", {"b"}, {"br"}),
        };
        struct Case {
            const char* name;
            std::vector<Node> after;
            std::vector<std::string> outputs;
            std::map<std::string, int64_t> placed; // conv -> its offset in the Concat's output (values)
            std::vector<std::string> notPlaced;
        };
        const int64_t plane = H * W;
        const std::vector<Case> cases{
            {"channels", {node("cat", "Concat", {"ar", "br"}, {"y"}, {axisAttr(1)})}, {"y"},
             {{"e1", 0}, {"e3", M1 * plane}}, {}},
            {"channels, counted from the end", {node("cat", "Concat", {"br", "ar"}, {"y"}, {axisAttr(-3)})}, {"y"},
             {{"e3", 0}, {"e1", M3 * plane}}, {}},
            {"images", {node("cat", "Concat", {"ar", "br2"}, {"y"}, {axisAttr(0)})}, {"y"},
             {{"e1", 0}, {"e3", N * M1 * plane}}, {}},
            {"a graph input between", {node("cat", "Concat", {"ar", "z", "br"}, {"y"}, {axisAttr(1)})}, {"y"},
             {{"e1", 0}, {"e3", (M1 + 2) * plane}}, {}},
            {"a branch computed after the first",
             {node("e3b", "Conv", {"br", "w33"}, {"c"}), node("cat", "Concat", {"ar", "c"}, {"y"}, {axisAttr(1)})},
             {"y"}, {{"e3b", M1 * plane}}, {"e1"}},
            {"read twice", {node("cat", "Concat", {"ar", "br"}, {"y"}, {axisAttr(1)})}, {"y", "ar"},
             {{"e3", M1 * plane}}, {"e1"}},
            {"along a spatial axis", {node("cat", "Concat", {"ar", "br3"}, {"y"}, {axisAttr(2)})}, {"y"}, {},
             {"e1", "e3"}},
        };
        for (const Case& c : cases) {
            std::vector<Node> nodes = fire;
            const std::string name = c.name;
            if (name == "images" || name == "along a spatial axis") {
                // M1 output channels: shapes that concatenate along that axis.
                nodes[4].inputs = {"sr", "w3b", "b3b"};
                nodes[5].outputs = {name == "images" ? "br2" : "br3"};
            }
            nodes.insert(nodes.end(), c.after.begin(), c.after.end());
            Model m = modelOf(nodes, {"x", "z"}, c.outputs);
            m.addInitializer("ws", randomTensor({S, C, 1, 1}, rng));
            m.addInitializer("bs", randomTensor({S}, rng));
            m.addInitializer("w1", adversarialTensor({M1, S, 1, 1}, rng));
            m.addInitializer("b1", randomTensor({M1}, rng));
            m.addInitializer("w3", adversarialTensor({M3, S, 3, 3}, rng));
            m.addInitializer("w3b", adversarialTensor({M1, S, 3, 3}, rng));
            m.addInitializer("b3", randomTensor({M3}, rng));
            m.addInitializer("b3b", randomTensor({M1}, rng));
            m.addInitializer("w33", randomTensor({4, M3, 1, 1}, rng));
            const Interpreter interpreter(m);
            const std::map<std::string, Tensor> inputs{{"x", adversarialTensor({N, C, H, W}, rng)},
                                                       {"z", randomTensor({N, 2, H, W}, rng)}};
            NodeLister stated(false);
            RunOptions asStated, located;
            asStated.observer = &stated;
            OutputLocator locator;
            located.observer = &locator;
            const auto expected = interpreter.run(inputs, asStated);
            const auto plain = interpreter.run(inputs), seen = interpreter.run(inputs, located);
            for (const auto& [name, value] : expected) {
                QVERIFY2(sameBits(plain.at(name), value), c.name);
                QVERIFY2(sameBits(seen.at(name), value), c.name);
            }
            const OutputLocator::Place cat = locator.written.at("cat");
            for (const auto& [conv, offset] : c.placed)
                QVERIFY2(locator.written.at(conv).data == cat.data + offset, (name + ": " + conv).c_str());
            for (const std::string& conv : c.notPlaced) {
                const float* data = locator.written.at(conv).data;
                QVERIFY2(data < cat.data || data >= cat.data + cat.numel, (name + ": " + conv).c_str());
            }
        }
    }

    void packedWeightsFollowTheWeightTensor()
    {
        // Conv keeps its packed weights across runs; a weight swapped in by an
        // observer (as the fake-quant hook does) must be used, and the stored
        // one again once the observer is gone.
        std::mt19937 rng(9);
        Model m = modelOf({node("conv", "Conv", {"x", "w"}, {"y"}, {intsAttr("pads", {1, 1, 1, 1})})}, {"x"}, {"y"});
        const Tensor w = randomTensor({16, 8, 3, 3}, rng), other = randomTensor({16, 8, 3, 3}, rng);
        m.addInitializer("w", w);
        Model otherModel = modelOf(m.nodes, {"x"}, {"y"});
        otherModel.addInitializer("w", other);
        const Interpreter interpreter(m), reference(otherModel);
        const Tensor x = randomTensor({2, 8, 10, 10}, rng);
        const Tensor first = interpreter.run({{"x", x}}).at("y");
        RecordingObserver swap;
        swap.before = [&](NodeEvent& e) { e.inputs[1] = other; };
        RunOptions swapped;
        swapped.observer = &swap;
        const Tensor expected = reference.run({{"x", x}}).at("y");
        for (int round = 0; round < 3; ++round) {
            QVERIFY(sameBits(interpreter.run({{"x", x}}).at("y"), first));
            QVERIFY(sameBits(interpreter.run({{"x", x}}, swapped).at("y"), expected));
        }
        // A fresh tensor each run (new storage, possibly at a reused address) is packed anew.
        for (int round = 0; round < 3; ++round) {
            const Tensor fresh = randomTensor({16, 8, 3, 3}, rng);
            swap.before = [&](NodeEvent& e) { e.inputs[1] = fresh.clone(); };
            Model freshModel = modelOf(m.nodes, {"x"}, {"y"});
            freshModel.addInitializer("w", fresh);
            QVERIFY(sameBits(interpreter.run({{"x", x}}, swapped).at("y"),
                             Interpreter(freshModel).run({{"x", x}}).at("y")));
        }
        QVERIFY(!sameBits(first, expected));
    }

    void smallGraphEndToEnd()
    {
        // y = Transpose(Concat(Where(x > 0, x * 2, Sigmoid(x)), Slice(x, reversed columns)), perm [1, 0])
        Model m = modelOf({node("gt", "Greater", {"x", "zero"}, {"pos"}), node("dbl", "Mul", {"x", "two"}, {"x2"}),
                           node("sig", "Sigmoid", {"x"}, {"s"}), node("sel", "Where", {"pos", "x2", "s"}, {"w"}),
                           node("rev", "Slice", {"x", "starts", "ends", "axes", "steps"}, {"r"}),
                           node("cat", "Concat", {"w", "r"}, {"c"},
                                {Attribute{"axis", Attribute::Kind::Int, 0, 0, {}, {}, {}, {}, {}}}),
                           node("tr", "Transpose", {"c"}, {"y"}, {intsAttr("perm", {1, 0})})},
                          {"x"}, {"y"});
        m.addInitializer("zero", Tensor::fromVector(DType::F32, {}, std::vector<float>{0.0f}));
        m.addInitializer("two", Tensor::fromVector(DType::F32, {}, std::vector<float>{2.0f}));
        m.addInitializer("starts", Tensor::fromVector(DType::I64, {1}, std::vector<int64_t>{-1}));
        m.addInitializer("ends", Tensor::fromVector(DType::I64, {1}, std::vector<int64_t>{INT64_MIN}));
        m.addInitializer("axes", Tensor::fromVector(DType::I64, {1}, std::vector<int64_t>{1}));
        m.addInitializer("steps", Tensor::fromVector(DType::I64, {1}, std::vector<int64_t>{-1}));
        const Interpreter interpreter(m);
        std::mt19937 rng(11);
        const Tensor x = randomTensor({3, 5}, rng);
        const Tensor y = interpreter.run({{"x", x}}).at("y");
        QCOMPARE(y.shape(), (Shape{5, 6}));
        auto xv = [&](int64_t i, int64_t j) { return x.values<float>()[size_t(i * 5 + j)]; };
        for (int64_t j = 0; j < 5; ++j)
            for (int64_t i = 0; i < 6; ++i) {
                float expected;
                if (i < 3) {
                    const float v = xv(i, j);
                    expected = v > 0 ? v * 2 : 1.0f / (1.0f + std::exp(-v));
                } else {
                    expected = xv(i - 3, 4 - j);
                }
                QVERIFY(std::abs(y.values<float>()[size_t(j * 6 + i)] - expected) <= 1e-6f * (1 + std::abs(expected)));
            }
    }
};

QTEST_APPLESS_MAIN(TestRuntime)
#include "tst_runtime.moc"
