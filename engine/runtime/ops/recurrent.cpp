#include "runtime/ops/recurrent.h"

#include <Eigen/Core>
#include <algorithm>
#include <cctype>
#include <cmath>

namespace qs::ops {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;

enum class Cell { LSTM, GRU, RNN };

// One activation function of the ONNX recurrent family with its alpha and beta.
struct Activation {
    enum class Kind {
        Sigmoid,
        Tanh,
        Relu,
        HardSigmoid,
        LeakyRelu,
        ThresholdedRelu,
        ScaledTanh,
        Affine,
        Elu,
        Softsign,
        Softplus
    } kind = Kind::Sigmoid;
    float alpha = 0.0f, beta = 0.0f;

    float operator()(float x) const
    {
        switch (kind) {
        case Kind::Sigmoid:
            return 1.0f / (1.0f + std::exp(-x));
        case Kind::Tanh:
            return std::tanh(x);
        case Kind::Relu:
            return std::max(0.0f, x);
        case Kind::HardSigmoid:
            return std::clamp(alpha * x + beta, 0.0f, 1.0f);
        case Kind::LeakyRelu:
            return x >= 0.0f ? x : alpha * x;
        case Kind::ThresholdedRelu:
            return x > alpha ? x : 0.0f;
        case Kind::ScaledTanh:
            return alpha * std::tanh(beta * x);
        case Kind::Affine:
            return alpha * x + beta;
        case Kind::Elu:
            return x >= 0.0f ? x : alpha * (std::exp(x) - 1.0f);
        case Kind::Softsign:
            return x / (1.0f + std::fabs(x));
        case Kind::Softplus:
            return std::log1p(std::exp(x));
        }
        return x;
    }
};

// The activations attribute, or the cell's defaults, for every direction;
// alpha and beta values are consumed in order by the functions that take them.
std::vector<Activation> activations(const KernelContext& ctx, Cell cell, int directions)
{
    std::vector<std::string> names;
    if (const Attribute* a = ctx.attribute("activations"); a && a->kind == Attribute::Kind::Strings)
        names = a->strings;
    if (names.empty()) {
        const std::vector<std::string> defaults = cell == Cell::LSTM
                                                      ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                                  : cell == Cell::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                      : std::vector<std::string>{"Tanh"};
        for (int d = 0; d < directions; ++d)
            names.insert(names.end(), defaults.begin(), defaults.end());
    }
    const size_t perDirection = cell == Cell::LSTM ? 3 : cell == Cell::GRU ? 2 : 1;
    if (names.size() != perDirection * size_t(directions))
        ctx.fail("activations needs " + std::to_string(perDirection * size_t(directions)) + " names, " +
                 std::to_string(perDirection) + " per direction");
    const std::vector<float> alphas = ctx.floatsAttribute("activation_alpha");
    const std::vector<float> betas = ctx.floatsAttribute("activation_beta");
    size_t nextAlpha = 0, nextBeta = 0;
    auto take = [](const std::vector<float>& list, size_t& next, float fallback) {
        return next < list.size() ? list[next++] : fallback;
    };
    std::vector<Activation> result;
    for (const std::string& raw : names) {
        std::string name = raw;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        Activation a;
        using K = Activation::Kind;
        if (name == "sigmoid")
            a.kind = K::Sigmoid;
        else if (name == "tanh")
            a.kind = K::Tanh;
        else if (name == "relu")
            a.kind = K::Relu;
        else if (name == "softsign")
            a.kind = K::Softsign;
        else if (name == "softplus")
            a.kind = K::Softplus;
        else if (name == "hardsigmoid")
            a = {K::HardSigmoid, take(alphas, nextAlpha, 0.2f), take(betas, nextBeta, 0.5f)};
        else if (name == "leakyrelu")
            a = {K::LeakyRelu, take(alphas, nextAlpha, 0.01f), 0.0f};
        else if (name == "thresholdedrelu")
            a = {K::ThresholdedRelu, take(alphas, nextAlpha, 1.0f), 0.0f};
        else if (name == "scaledtanh")
            a = {K::ScaledTanh, take(alphas, nextAlpha, 1.0f), take(betas, nextBeta, 1.0f)};
        else if (name == "affine")
            a = {K::Affine, take(alphas, nextAlpha, 1.0f), take(betas, nextBeta, 0.0f)};
        else if (name == "elu")
            a = {K::Elu, take(alphas, nextAlpha, 1.0f), 0.0f};
        else
            ctx.fail("activation '" + raw + "' is not one ONNX defines for recurrent layers");
        result.push_back(a);
    }
    return result;
}

const Tensor& floatInput(const KernelContext& ctx, size_t i, const Shape& expected, const char* name)
{
    const Tensor& t = ctx.input(i);
    if (t.dtype() != DType::F32 || t.shape() != expected)
        ctx.fail(std::string(name) + " " + shapeToString(t.shape()) + " (" + std::string(dtypeName(t.dtype())) +
                 ") must be float32 " + shapeToString(expected));
    return t;
}

// Swaps the first two axes of a rank-3 tensor ([a, b, c] -> [b, a, c]).
Tensor swapLeadingAxes(const Tensor& t)
{
    const int64_t a = t.dim(0), b = t.dim(1), c = t.dim(2);
    Tensor out(t.dtype(), {b, a, c});
    const float* src = t.values<float>().data();
    float* dst = out.mutableValues<float>().data();
    for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < b; ++j)
            std::copy(src + (i * b + j) * c, src + (i * b + j + 1) * c, dst + (j * a + i) * c);
    return out;
}

void runRecurrent(KernelContext& ctx, Cell cell)
{
    const int gates = cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;
    const std::string direction = ctx.stringAttribute("direction", "forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
        ctx.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
    const int dirs = direction == "bidirectional" ? 2 : 1;
    const bool batchFirst = ctx.intAttribute("layout", 0) != 0;
    const int64_t H = ctx.requiredIntAttribute("hidden_size");
    const float clip = ctx.floatAttribute("clip", 0.0f);
    const bool inputForget = ctx.intAttribute("input_forget", 0) != 0;
    const bool linearBeforeReset = ctx.intAttribute("linear_before_reset", 0) != 0;
    const std::vector<Activation> acts = activations(ctx, cell, dirs);

    const Tensor& X0 = ctx.input(0);
    if (X0.dtype() != DType::F32 || X0.rank() != 3)
        ctx.fail("X " + shapeToString(X0.shape()) + " must be float32 of rank 3");
    const Tensor X = batchFirst ? swapLeadingAxes(X0) : X0;
    const int64_t T = X.dim(0), N = X.dim(1), I = X.dim(2), G = gates * H;
    const Tensor& W = floatInput(ctx, 1, {dirs, G, I}, "W");
    const Tensor& R = floatInput(ctx, 2, {dirs, G, H}, "R");
    const Tensor* B = ctx.hasInput(3) ? &floatInput(ctx, 3, {dirs, 2 * G}, "B") : nullptr;
    std::vector<int64_t> lengths(size_t(N), T);
    if (const Tensor* sl = ctx.optionalInput(4)) {
        if (sl->numel() != N || (sl->dtype() != DType::I32 && sl->dtype() != DType::I64))
            ctx.fail("sequence_lens " + shapeToString(sl->shape()) + " must be int32 with one length per batch item");
        for (int64_t b = 0; b < N; ++b) {
            lengths[size_t(b)] =
                sl->dtype() == DType::I32 ? sl->values<int32_t>()[size_t(b)] : sl->values<int64_t>()[size_t(b)];
            if (lengths[size_t(b)] < 0 || lengths[size_t(b)] > T)
                ctx.fail("sequence_lens holds " + std::to_string(lengths[size_t(b)]) + ", outside [0, " +
                         std::to_string(T) + "]");
        }
    }
    const Shape stateShape = batchFirst ? Shape{N, dirs, H} : Shape{dirs, N, H};
    auto initialState = [&](size_t i, const char* name) -> Tensor {
        if (!ctx.hasInput(i))
            return Tensor(DType::F32, {dirs, N, H});
        const Tensor& t = floatInput(ctx, i, stateShape, name);
        return batchFirst ? swapLeadingAxes(t) : t;
    };
    const Tensor H0 = initialState(5, "initial_h");
    const Tensor C0 = cell == Cell::LSTM ? initialState(6, "initial_c") : Tensor();
    const Tensor* P = cell == Cell::LSTM && ctx.hasInput(7) ? &floatInput(ctx, 7, {dirs, 3 * H}, "P") : nullptr;

    Tensor Y(DType::F32, {T, dirs, N, H}), Yh(DType::F32, {dirs, N, H}), Yc(DType::F32, {dirs, N, H});
    float* y = Y.mutableValues<float>().data();
    auto clipped = [clip](float v) { return clip > 0.0f ? std::clamp(v, -clip, clip) : v; };

    for (int d = 0; d < dirs; ++d) {
        const bool reverse = direction == "reverse" || d == 1;
        const Activation* act = acts.data() + d * (cell == Cell::LSTM ? 3 : cell == Cell::GRU ? 2 : 1);
        ConstMatrixMap w(W.values<float>().data() + d * G * I, G, I);
        ConstMatrixMap r(R.values<float>().data() + d * G * H, G, H);
        Eigen::RowVectorXf wb = Eigen::RowVectorXf::Zero(G), rb = Eigen::RowVectorXf::Zero(G);
        if (B) {
            wb = Eigen::Map<const Eigen::RowVectorXf>(B->values<float>().data() + d * 2 * G, G);
            rb = Eigen::Map<const Eigen::RowVectorXf>(B->values<float>().data() + d * 2 * G + G, G);
        }
        // The input part of every gate at every step, biases included: [T * N, G].
        RowMatrix xw = ConstMatrixMap(X.values<float>().data(), T * N, I) * w.transpose();
        // LSTM and RNN add both biases to the input part; GRU adds Rb where its recurrent part is formed.
        xw.rowwise() += cell == Cell::GRU ? Eigen::RowVectorXf(wb) : Eigen::RowVectorXf(wb + rb);
        RowMatrix h = ConstMatrixMap(H0.values<float>().data() + d * N * H, N, H);
        RowMatrix c =
            cell == Cell::LSTM ? RowMatrix(ConstMatrixMap(C0.values<float>().data() + d * N * H, N, H)) : RowMatrix();
        const float* p = P ? P->values<float>().data() + d * 3 * H : nullptr;
        RowMatrix hr(N, G);
        std::vector<float> z(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
        for (int64_t s = 0; s < T; ++s) {
            if (cell == Cell::GRU) {
                // z and r see H R^T + Rb; h's recurrent part is computed below.
                hr.leftCols(2 * H).noalias() = h * r.topRows(2 * H).transpose();
                hr.leftCols(2 * H).rowwise() += rb.head(2 * H);
                if (linearBeforeReset) {
                    hr.rightCols(H).noalias() = h * r.bottomRows(H).transpose();
                    hr.rightCols(H).rowwise() += rb.tail(H);
                }
            } else {
                hr.noalias() = h * r.transpose();
            }
            for (int64_t b = 0; b < N; ++b) {
                const int64_t len = lengths[size_t(b)];
                if (s >= len)
                    continue;
                const int64_t t = reverse ? len - 1 - s : s;
                const float* xg = xw.data() + (t * N + b) * G;
                float* hg = hr.data() + b * G;
                float* hb = h.data() + b * H;
                if (cell == Cell::LSTM) {
                    float* cb = c.data() + b * H;
                    for (int64_t k = 0; k < H; ++k) {
                        const float cPrev = cb[k];
                        const float i = act[0](clipped(xg[k] + hg[k] + (p ? p[k] * cPrev : 0.0f)));
                        const float f =
                            inputForget
                                ? 1.0f - i
                                : act[0](clipped(xg[2 * H + k] + hg[2 * H + k] + (p ? p[2 * H + k] * cPrev : 0.0f)));
                        const float g = act[1](clipped(xg[3 * H + k] + hg[3 * H + k]));
                        const float cNew = f * cPrev + i * g;
                        const float o = act[0](clipped(xg[H + k] + hg[H + k] + (p ? p[H + k] * cNew : 0.0f)));
                        cb[k] = cNew;
                        hb[k] = o * act[2](cNew);
                    }
                } else if (cell == Cell::GRU) {
                    for (int64_t k = 0; k < H; ++k) {
                        z[size_t(k)] = act[0](clipped(xg[k] + hg[k]));
                        const float rGate = act[0](clipped(xg[H + k] + hg[H + k]));
                        rh[size_t(k)] = linearBeforeReset ? rGate * hg[2 * H + k] : rGate * hb[k];
                    }
                    for (int64_t k = 0; k < H; ++k) {
                        float pre = xg[2 * H + k];
                        if (linearBeforeReset) {
                            pre += rh[size_t(k)];
                        } else {
                            // (r . H) Rh^T + Rbh
                            const float* rRow = r.data() + (2 * H + k) * H;
                            float dot = rb[2 * H + k];
                            for (int64_t j = 0; j < H; ++j)
                                dot += rh[size_t(j)] * rRow[j];
                            pre += dot;
                        }
                        const float hTilde = act[1](clipped(pre));
                        hb[k] = (1.0f - z[size_t(k)]) * hTilde + z[size_t(k)] * hb[k];
                    }
                } else {
                    for (int64_t k = 0; k < H; ++k)
                        hb[k] = act[0](clipped(xg[k] + hg[k]));
                }
                std::copy(hb, hb + H, y + ((t * dirs + d) * N + b) * H);
            }
            ctx.checkCancelled();
        }
        std::copy(h.data(), h.data() + N * H, Yh.mutableValues<float>().data() + d * N * H);
        if (cell == Cell::LSTM)
            std::copy(c.data(), c.data() + N * H, Yc.mutableValues<float>().data() + d * N * H);
    }

    if (batchFirst) {
        // [T, dirs, N, H] -> [N, T, dirs, H]; states [dirs, N, H] -> [N, dirs, H].
        Tensor Yb(DType::F32, {N, T, dirs, H});
        float* yb = Yb.mutableValues<float>().data();
        for (int64_t t = 0; t < T; ++t)
            for (int d = 0; d < dirs; ++d)
                for (int64_t b = 0; b < N; ++b)
                    std::copy(y + ((t * dirs + d) * N + b) * H, y + ((t * dirs + d) * N + b + 1) * H,
                              yb + ((b * T + t) * dirs + d) * H);
        Y = std::move(Yb);
        Yh = swapLeadingAxes(Yh);
        Yc = swapLeadingAxes(Yc);
    }
    ctx.setOutput(0, std::move(Y));
    ctx.setOutput(1, std::move(Yh));
    if (cell == Cell::LSTM)
        ctx.setOutput(2, std::move(Yc));
}

} // namespace

void lstm(KernelContext& ctx)
{
    runRecurrent(ctx, Cell::LSTM);
}
void gru(KernelContext& ctx)
{
    runRecurrent(ctx, Cell::GRU);
}
void rnn(KernelContext& ctx)
{
    runRecurrent(ctx, Cell::RNN);
}

} // namespace qs::ops
