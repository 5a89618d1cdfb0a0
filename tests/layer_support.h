#pragma once
// What the algorithm unit suites (tst_gptq, tst_awq, tst_bias_correction)
// share: Eigen matrices as row-major tensors and back, and a Conv layer with
// the node that strides and pads it.

#include <Eigen/Core>

#include "core/tensor.h"
#include "graph/layer.h"
#include "graph/model.h"

namespace qs::test {

inline Tensor tensorOf(const Eigen::MatrixXf& m)
{
    Tensor t(DType::F32, {m.rows(), m.cols()});
    auto v = t.mutableValues<float>();
    for (int64_t r = 0; r < m.rows(); ++r)
        for (int64_t c = 0; c < m.cols(); ++c)
            v[size_t(r * m.cols() + c)] = m(r, c);
    return t;
}

inline Eigen::MatrixXf matrixOf(const Tensor& t)
{
    const auto v = t.values<float>();
    Eigen::MatrixXf m(t.shape()[0], t.shape()[1]);
    for (int64_t r = 0; r < m.rows(); ++r)
        for (int64_t c = 0; c < m.cols(); ++c)
            m(r, c) = v[size_t(r * m.cols() + c)];
    return m;
}

// A Conv layer "conv" with weights of `weightShape` and its node: stride 2 and
// one padding row and column on every side.
struct ConvLayer {
    QuantizableLayer layer;
    Node node;
};

inline ConvLayer stride2Pad1Conv(const Shape& weightShape, int64_t groups = 1)
{
    ConvLayer c;
    c.layer.modulePath = "conv";
    c.layer.opType = "Conv";
    c.layer.weightShape = weightShape;
    c.layer.groups = groups;
    c.node.opType = "Conv";
    Attribute strides, pads;
    strides.name = "strides";
    strides.kind = Attribute::Kind::Ints;
    strides.ints = {2, 2};
    pads.name = "pads";
    pads.kind = Attribute::Kind::Ints;
    pads.ints = {1, 1, 1, 1};
    c.node.attributes = {strides, pads};
    return c;
}

// The [n, C·3·3] im2col patches of that Conv's 3×3 kernel (stride 2, pad 1) over
// `input` [B, C, H, W], written out here: one row per image and output position,
// the features ordered (c, kernel row, kernel column), so a grouped Conv's group g
// has the columns [g·(C/G)·9, (g + 1)·(C/G)·9).
inline Eigen::MatrixXf stride2Pad1Patches(const Tensor& input)
{
    const Shape& s = input.shape();
    const int64_t batch = s[0], channels = s[1], height = s[2], width = s[3];
    const int64_t outH = (height + 2 - 3) / 2 + 1, outW = (width + 2 - 3) / 2 + 1;
    const auto v = input.values<float>();
    Eigen::MatrixXf rows(batch * outH * outW, channels * 9);
    int64_t row = 0;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t oy = 0; oy < outH; ++oy)
            for (int64_t ox = 0; ox < outW; ++ox, ++row)
                for (int64_t c = 0; c < channels; ++c)
                    for (int64_t i = 0; i < 3; ++i)
                        for (int64_t j = 0; j < 3; ++j) {
                            const int64_t y = oy * 2 - 1 + i, xx = ox * 2 - 1 + j;
                            const bool in = y >= 0 && y < height && xx >= 0 && xx < width;
                            rows(row, c * 9 + i * 3 + j) =
                                in ? v[size_t(((b * channels + c) * height + y) * width + xx)] : 0.f;
                        }
    return rows;
}

} // namespace qs::test
