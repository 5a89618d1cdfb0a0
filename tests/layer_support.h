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

inline ConvLayer stride2Pad1Conv(const Shape& weightShape)
{
    ConvLayer c;
    c.layer.modulePath = "conv";
    c.layer.opType = "Conv";
    c.layer.weightShape = weightShape;
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

} // namespace qs::test
