#pragma once
// The inputs tst_chart_data and tst_charts compute and draw charts from: a
// rule-like spec, a noisy tensor with outliers, and the demo model's weights.

#include <cstdint>
#include <limits>
#include <map>
#include <random>

#include "quantization/tensor_quantization.h"
#include "graph/model.h"
#include "io/model_loader.h"
#include "session/evaluation.h"

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

// absmax, per channel, in tiles of `tileSize` along the last axis.
inline QuantizationSpec tiledSpec(double tileSize)
{
    QuantizationSpec s = specOf("absmax");
    s.tileSize = tileSize;
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

// The first five layers of the demo model evaluated (isolated SQNR 35, 12,
// 28, 9.5 and 40 dB), a sensitivity ranking of layers 3 and 1, and layer 0's
// weight exact.
struct LayerErrorInputs {
    EvaluationResult eval;
    SensitivityResult sens;
    std::map<size_t, ErrorMetrics> weights;
};

inline LayerErrorInputs layerErrorInputs()
{
    LayerErrorInputs in;
    const double isolated[] = {35.0, 12.0, 28.0, 9.5, 40.0};
    for (size_t i = 0; i < demo().model.layers.size() && i < 5; ++i) {
        LayerEvaluation e;
        e.layer = i;
        e.weight = ErrorMetrics{0, 30.0 + double(i), 0, 1, 0};
        e.isolated = ErrorMetrics{0, isolated[i], 0, 1, 0};
        e.accumulated = ErrorMetrics{0, isolated[i] - 2.0 * double(i), 0, 1, 0};
        in.eval.layers.push_back(e);
    }
    in.sens.ranking = {{3, ErrorMetrics{0, 11.0, 0, 1, 0}, 0.9}, {1, ErrorMetrics{0, 15.0, 0, 1, 0}, 0.95}};
    in.weights = {{0, ErrorMetrics{0, std::numeric_limits<double>::infinity(), 0, 1, 0}}};
    return in;
}

} // namespace qs::chart_test
