#pragma once
// What the runtime kernel suites (tst_runtime_kernels*) share: attributes made
// by hand, one kernel run on hand-made inputs outside any interpreter, random
// tensors from one seeded generator, and a relative-error comparison.

#include <QtTest>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "runtime/op_registry.h"

namespace qs::test {

inline Attribute intAttr(const char* name, int64_t v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::Int;
    a.i = v;
    return a;
}
inline Attribute intsAttr(const char* name, std::vector<int64_t> v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::Ints;
    a.ints = std::move(v);
    return a;
}
inline Attribute floatAttr(const char* name, float v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::Float;
    a.f = v;
    return a;
}
inline Attribute stringAttr(const char* name, std::string v)
{
    Attribute a;
    a.name = name;
    a.kind = Attribute::Kind::String;
    a.s = std::move(v);
    return a;
}

// Runs one kernel on inputs (nullptr = absent) and returns its `outputs` outputs.
inline std::vector<Tensor> runKernel(Kernel kernel, const char* opType, std::vector<const Tensor*> inputs,
                                     std::vector<Attribute> attributes, int64_t opset = 17, size_t outputs = 1)
{
    Node node;
    node.name = "n";
    node.opType = opType;
    for (size_t i = 0; i < inputs.size(); ++i)
        node.inputs.push_back(inputs[i] ? "in" + std::to_string(i) : "");
    for (size_t i = 0; i < outputs; ++i)
        node.outputs.push_back("out" + std::to_string(i));
    node.attributes = std::move(attributes);
    std::vector<Tensor> out(outputs);
    KernelContext ctx(node, 0, opset, inputs, out, nullptr);
    kernel(ctx);
    return out;
}

inline std::mt19937& rng()
{
    static std::mt19937 g(20261122);
    return g;
}
inline int64_t randInt(int64_t lo, int64_t hi)
{
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

inline Tensor randomTensor(Shape shape, float scale = 1.0f)
{
    Tensor t(DType::F32, std::move(shape));
    std::normal_distribution<float> d(0.0f, scale);
    for (float& v : t.mutableValues<float>())
        v = d(rng());
    return t;
}

// Largest |a - b| relative to max(1, |b|).
inline double maxError(const Tensor& a, const std::vector<float>& b)
{
    if (size_t(a.numel()) != b.size())
        return INFINITY;
    double worst = 0.0;
    for (size_t i = 0; i < b.size(); ++i)
        worst =
            std::max(worst, std::fabs(double(a.values<float>()[i]) - b[i]) / std::max(1.0, std::fabs(double(b[i]))));
    return worst;
}

#define EXPECT_CLOSE(tensor, reference, tol)                                                                           \
    do {                                                                                                               \
        const double e_ = maxError(tensor, reference);                                                                 \
        QVERIFY2(e_ <= (tol), qPrintable(QStringLiteral("max error %1").arg(e_)));                                     \
    } while (0)

} // namespace qs::test
