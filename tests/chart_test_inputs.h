#pragma once
// The inputs tst_chart_data and tst_charts compute and draw charts from: a
// rule-like spec, a noisy tensor with outliers, and the demo model's weights.

#include <cstdint>
#include <random>

#include "analysis/tensor_quantization.h"
#include "graph/model.h"
#include "io/model_loader.h"

namespace qs::chart_test {

inline const char* const kDemoModel = QUANTSCOPE_TEST_DATA "/../../resources/demo/digits/digits_cnn.onnx";

inline QuantizationSpec specOf(const char* method, Granularity g = Granularity::PerChannel, QType t = QType::Int8)
{
    QuantizationSpec s;
    s.qtype = t;
    s.method = CalibrationMethod::parse(method);
    s.granularity = g;
    s.axis = 0;
    return s;
}

// Gaussian values with a few large outliers of both signs.
inline Tensor noisyTensor(Shape shape, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Tensor t(DType::F32, std::move(shape));
    auto v = t.mutableValues<float>();
    for (size_t i = 0; i < v.size(); ++i)
        v[i] = normal(rng) * (1.0f + float(i % 7));
    for (size_t i = 0; i < v.size(); i += 997)
        v[i] = (i % 2 ? 40.0f : -55.0f);
    return t;
}

struct Demo {
    Model model;
    size_t conv1 = 0, fc1 = 0;
};

inline const Demo& demo()
{
    static const Demo d = [] {
        Demo out{loadModel(kDemoModel)};
        for (size_t i = 0; i < out.model.layers.size(); ++i) {
            if (out.model.layers[i].modulePath == "features/conv1")
                out.conv1 = i;
            if (out.model.layers[i].modulePath == "classifier/fc1")
                out.fc1 = i;
        }
        return out;
    }();
    return d;
}

inline Tensor demoWeight(size_t layer)
{
    return demo().model.initializer(demo().model.layers[layer].weightName)->toFloat32();
}

} // namespace qs::chart_test
