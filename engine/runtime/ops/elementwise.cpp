// The elementwise family: every kernel reduces to one of four shapes of loop
// (unary map, binary broadcast, variadic fold, ternary select), each written
// once below over the broadcast walk of runtime/broadcast.h. float16 and
// bfloat16 operands are computed in float32 and rounded back, as ONNX Runtime
// does on CPUs without native half arithmetic.

#include "runtime/ops/elementwise.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "runtime/broadcast.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/ops/activation.h"
#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

bool isHalf(DType t)
{
    return t == DType::F16 || t == DType::BF16;
}

// The node's inputs with float16/bfloat16 widened to float32; `narrowTo` is set
// to the half type found so results can be rounded back (F32 when none).
struct Operands {
    std::vector<Tensor> tensors; // empty Tensor for an absent input
    DType narrowTo = DType::F32;
};

// Before opset 7, binary ops broadcast only with `broadcast=1`, aligning B's
// dimensions at `axis` of A (default: the trailing ones); PRelu's slope of one
// value per channel aligns with axis 1. Reshaping B with trailing 1s turns both
// into numpy broadcasting.
void alignLegacyBroadcast(const KernelContext& ctx, const Tensor& a, Tensor& b)
{
    int64_t axis = -1;
    if (ctx.node().opType == "PRelu") {
        if (b.rank() == 1 && a.rank() > 2 && b.dim(0) == a.dim(1) && b.dim(0) != a.dim(a.rank() - 1))
            axis = 1;
    } else if (ctx.intAttribute("broadcast", 0) != 0) {
        axis = ctx.intAttribute("axis", a.rank() - b.rank());
    }
    if (axis < 0)
        return;
    if (axis + b.rank() > a.rank())
        ctx.fail("B of shape " + shapeToString(b.shape()) + " does not fit A of shape " + shapeToString(a.shape()) +
                 " at axis " + std::to_string(axis));
    Shape shape = b.shape();
    shape.resize(size_t(a.rank() - axis), 1);
    b = b.reshaped(shape);
}

Operands operands(const KernelContext& ctx)
{
    Operands ops;
    ops.tensors.resize(ctx.inputCount());
    for (size_t i = 0; i < ctx.inputCount(); ++i) {
        const Tensor* t = ctx.optionalInput(i);
        if (!t)
            continue;
        if (isHalf(t->dtype())) {
            ops.narrowTo = t->dtype();
            ops.tensors[i] = t->toFloat32();
        } else {
            ops.tensors[i] = *t;
        }
    }
    if (ctx.opset() < 7 && ops.tensors.size() == 2 && ops.tensors[0].rawData() && ops.tensors[1].rawData())
        alignLegacyBroadcast(ctx, ops.tensors[0], ops.tensors[1]);
    return ops;
}

void emit(KernelContext& ctx, size_t i, Tensor t, const Operands& ops)
{
    if (ops.narrowTo != DType::F32 && t.dtype() == DType::F32)
        t = castTensor(t, ops.narrowTo);
    ctx.setOutput(i, std::move(t));
}

template <class Body> decltype(auto) visit(const KernelContext& ctx, DType t, Body&& body)
{
    return visitDType(t, std::forward<Body>(body), [&](const std::string& problem) { ctx.fail(problem); });
}

template <class T> constexpr bool kIsNumber = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

// out = op(x) elementwise; O is the output element type.
template <class T, class O, class Op> Tensor mapUnary(const Tensor& x, DType outType, Op op)
{
    Tensor out = Tensor::uninitialized(outType, x.shape());
    const T* src = x.values<T>().data();
    O* dst = out.mutableValues<O>().data();
    auto body = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            dst[i] = op(src[i]);
    };
    const int64_t n = x.numel();
    if (n < kParallelElementwiseThreshold)
        body(0, n);
    else
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, size_t(kParallelElementwiseThreshold / 4)),
                          [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); });
    return out;
}

// out = op(a, b) with numpy broadcasting.
template <class T, class O, class Op>
Tensor mapBinary(const KernelContext& ctx, const Tensor& a, const Tensor& b, DType outType, Op op)
{
    const Shape shape = broadcastShapes(a.shape(), b.shape(), ctx.describe());
    Tensor out = Tensor::uninitialized(outType, shape);
    const T* pa = a.values<T>().data();
    const T* pb = b.values<T>().data();
    O* po = out.mutableValues<O>().data();
    forEachBroadcastRun<2>(
        shape, {broadcastStrides(a.shape(), shape), broadcastStrides(b.shape(), shape)},
        [&](int64_t o, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& step, int64_t n) {
            const T* x = pa + off[0];
            const T* y = pb + off[1];
            O* z = po + o;
            if (step[0] && step[1]) {
                for (int64_t j = 0; j < n; ++j)
                    z[j] = op(x[j], y[j]);
            } else if (step[0]) {
                const T yv = *y;
                for (int64_t j = 0; j < n; ++j)
                    z[j] = op(x[j], yv);
            } else if (step[1]) {
                const T xv = *x;
                for (int64_t j = 0; j < n; ++j)
                    z[j] = op(xv, y[j]);
            } else {
                const O v = op(*x, *y);
                for (int64_t j = 0; j < n; ++j)
                    z[j] = v;
            }
        });
    return out;
}

void requireSameType(const KernelContext& ctx, const Operands& ops)
{
    const Tensor* first = nullptr;
    for (const Tensor& t : ops.tensors) {
        if (!t.rawData())
            continue;
        if (first && t.dtype() != first->dtype())
            ctx.fail("inputs must share one element type, got " + std::string(dtypeName(first->dtype())) + " and " +
                     std::string(dtypeName(t.dtype())));
        first = &t;
    }
}

// Folds the inputs left to right with a numeric binary op (Add ... Sum, Max).
template <class MakeOp> Tensor foldNumeric(const KernelContext& ctx, const Operands& ops, MakeOp makeOp)
{
    requireSameType(ctx, ops);
    if (ops.tensors.empty())
        ctx.fail("needs at least one input");
    const DType type = ops.tensors[0].dtype();
    return visit(ctx, type, [&]<class T>() -> Tensor {
        if constexpr (!kIsNumber<T>) {
            ctx.fail("needs numeric inputs, got bool");
        } else {
            auto op = makeOp.template operator()<T>();
            Tensor acc = ops.tensors[0];
            if (ops.tensors.size() == 1)
                return acc.clone();
            for (size_t i = 1; i < ops.tensors.size(); ++i)
                acc = mapBinary<T, T>(ctx, acc, ops.tensors[i], type, op);
            return acc;
        }
    });
}

template <class MakeOp> void numericBinaryKernel(KernelContext& ctx, MakeOp makeOp)
{
    const Operands ops = operands(ctx);
    emit(ctx, 0, foldNumeric(ctx, ops, makeOp), ops);
}

// Float-only unary maps (Exp, Tanh, ...). `op` is called with float or double.
template <class Op> void floatUnaryKernel(KernelContext& ctx, Op op)
{
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    Tensor out = visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
        if constexpr (!std::is_floating_point_v<T>)
            ctx.fail("needs a floating-point input, got " + std::string(dtypeName(x.dtype())));
        else
            return mapUnary<T, T>(x, x.dtype(), [&](T v) { return T(op(v)); });
    });
    emit(ctx, 0, std::move(out), ops);
}

// A float-only activation: float32 through the vectorised loop the fused Conv
// epilogue runs (activation.cpp, the same bits), float64 through `op`.
template <class Op> void activationKernel(KernelContext& ctx, FusedActivation activation, Op op)
{
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    if (x.dtype() != DType::F32) {
        floatUnaryKernel(ctx, op);
        return;
    }
    Tensor out = Tensor::uninitialized(DType::F32, x.shape());
    const float* src = x.values<float>().data();
    float* dst = out.mutableValues<float>().data();
    const int64_t n = x.numel();
    if (n < kParallelElementwiseThreshold)
        finishOutputs(src, dst, n, nullptr, nullptr, &activation);
    else
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, size_t(kParallelElementwiseThreshold / 4)),
                          [&](const tbb::blocked_range<int64_t>& r) {
                              finishOutputs(src + r.begin(), dst + r.begin(), r.end() - r.begin(), nullptr, nullptr,
                                            &activation);
                          });
    emit(ctx, 0, std::move(out), ops);
}

// Unary maps defined for signed numbers too (Neg, Abs, Sign, Relu).
template <class Op> void numericUnaryKernel(KernelContext& ctx, Op op)
{
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    Tensor out = visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
        if constexpr (!kIsNumber<T>)
            ctx.fail("needs a numeric input, got bool");
        else
            return mapUnary<T, T>(x, x.dtype(), [&](T v) { return T(op(v)); });
    });
    emit(ctx, 0, std::move(out), ops);
}

template <class Cmp> void comparisonKernel(KernelContext& ctx, Cmp cmp)
{
    const Operands ops = operands(ctx);
    requireSameType(ctx, ops);
    const Tensor& a = ops.tensors.at(0);
    const Tensor& b = ops.tensors.at(1);
    ctx.setOutput(0, visit(ctx, a.dtype(), [&]<class T>() {
                      return mapBinary<T, bool>(ctx, a, b, DType::Bool, [&](T x, T y) { return bool(cmp(x, y)); });
                  }));
}

template <class Op> void logicKernel(KernelContext& ctx, Op op)
{
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::Bool || b.dtype() != DType::Bool)
        ctx.fail("needs bool inputs");
    ctx.setOutput(0, mapBinary<bool, bool>(ctx, a, b, DType::Bool, op));
}

// A float attribute's value, for activation parameters.
float param(const KernelContext& ctx, const char* name, float fallback)
{
    return ctx.floatAttribute(name, fallback);
}

} // namespace

void add(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() { return [](T x, T y) { return T(x + y); }; });
}
void sub(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() { return [](T x, T y) { return T(x - y); }; });
}
void mul(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() { return [](T x, T y) { return T(x * y); }; });
}
void div(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() {
        return [](T x, T y) {
            if constexpr (std::is_integral_v<T>)
                return y == 0 ? T(0) : T(x / y); // integer division by zero is undefined in C++; ONNX leaves it open
            else
                return T(x / y);
        };
    });
}
void sum(KernelContext& ctx)
{
    add(ctx);
}
void min(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() {
        return [](T x, T y) {
            if constexpr (std::is_floating_point_v<T>)
                if (std::isnan(x) || std::isnan(y))
                    return std::numeric_limits<T>::quiet_NaN();
            return y < x ? y : x;
        };
    });
}
void max(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() {
        return [](T x, T y) {
            if constexpr (std::is_floating_point_v<T>)
                if (std::isnan(x) || std::isnan(y))
                    return std::numeric_limits<T>::quiet_NaN();
            return x < y ? y : x;
        };
    });
}
void mean(KernelContext& ctx)
{
    const Operands ops = operands(ctx);
    Tensor total = foldNumeric(ctx, ops, []<class T>() { return [](T x, T y) { return T(x + y); }; });
    const double count = double(ops.tensors.size());
    Tensor out = visit(ctx, total.dtype(), [&]<class T>() -> Tensor {
        if constexpr (!std::is_floating_point_v<T>)
            ctx.fail("needs floating-point inputs");
        else
            return mapUnary<T, T>(total, total.dtype(), [&](T v) { return T(v / T(count)); });
    });
    emit(ctx, 0, std::move(out), ops);
}
void prelu(KernelContext& ctx)
{
    numericBinaryKernel(ctx, []<class T>() { return [](T x, T slope) { return x < T(0) ? T(x * slope) : x; }; });
}
void bitShift(KernelContext& ctx)
{
    const std::string direction = ctx.stringAttribute("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
        ctx.fail("attribute 'direction' must be LEFT or RIGHT, got '" + direction + "'");
    const bool left = direction == "LEFT";
    const DType t = ctx.input(0).dtype();
    if (t != DType::U8 && t != DType::U16 && t != DType::U32 && t != DType::U64)
        ctx.fail("needs unsigned integer inputs, got " + std::string(dtypeName(t)));
    numericBinaryKernel(ctx, [&]<class T>() {
        return [left](T x, T y) {
            if constexpr (!std::is_unsigned_v<T>) {
                return T(0); // not reached: signed types are refused above
            } else {
                if (y >= T(sizeof(T) * 8))
                    return T(0);
                return left ? T(x << y) : T(x >> y);
            }
        };
    });
}
void mod(KernelContext& ctx)
{
    const bool cStyle = ctx.intAttribute("fmod", 0) != 0;
    numericBinaryKernel(ctx, [cStyle]<class T>() {
        return [cStyle](T x, T y) {
            if constexpr (std::is_floating_point_v<T>) {
                T r = std::fmod(x, y);
                if (!cStyle && r != T(0) && ((r < T(0)) != (y < T(0))))
                    r += y;
                return r;
            } else {
                if (y == 0)
                    return T(0);
                T r = T(x % y);
                if constexpr (std::is_signed_v<T>)
                    if (!cStyle && r != 0 && ((r < 0) != (y < 0)))
                        r = T(r + y);
                return r;
            }
        };
    });
}
void pow(KernelContext& ctx)
{
    const Operands ops = operands(ctx);
    const Tensor& base = ops.tensors.at(0);
    const Tensor exponent = castTensor(ops.tensors.at(1), base.dtype());
    // x^2 as decomposed normalizations (LayerNorm's variance) write it: the
    // double product of two floats is exact, so x * x rounded once to float is
    // the bits of pow(double(x), 2.0) rounded to float, without calling pow.
    if (base.dtype() == DType::F32 && exponent.numel() == 1 && exponent.values<float>()[0] == 2.0f &&
        exponent.rank() <= base.rank()) {
        emit(ctx, 0, mapUnary<float, float>(base, DType::F32, [](float x) { return x * x; }), ops);
        return;
    }
    Tensor out = visit(ctx, base.dtype(), [&]<class T>() -> Tensor {
        if constexpr (!kIsNumber<T>)
            ctx.fail("needs a numeric base, got bool");
        else
            return mapBinary<T, T>(ctx, base, exponent, base.dtype(),
                                   [](T x, T y) { return T(std::pow(double(x), double(y))); });
    });
    emit(ctx, 0, std::move(out), ops);
}

void neg(KernelContext& ctx)
{
    numericUnaryKernel(ctx, [](auto v) { return -v; });
}
void abs(KernelContext& ctx)
{
    numericUnaryKernel(ctx, []<class T>(T v) {
        if constexpr (std::is_unsigned_v<T>)
            return v;
        else
            return v < T(0) ? T(-v) : v;
    });
}
void sign(KernelContext& ctx)
{
    numericUnaryKernel(ctx, []<class T>(T v) { return T(v > T(0) ? 1 : (v < T(0) ? -1 : 0)); });
}
void relu(KernelContext& ctx)
{
    numericUnaryKernel(ctx, []<class T>(T v) { return reluOf(v); });
}
void sqrt(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::sqrt(v); });
}
void reciprocal(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return decltype(v)(1) / v; });
}
void exp(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::exp(v); });
}
void log(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::log(v); });
}
void erf(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::erf(v); });
}
void tanh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::tanh(v); });
}
void sigmoid(KernelContext& ctx)
{
    activationKernel(ctx, {FusedActivation::Kind::Sigmoid}, []<class T>(T v) { return sigmoidOf(v); });
}
void leakyRelu(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 0.01f);
    floatUnaryKernel(ctx, [alpha]<class T>(T v) { return leakyReluOf(v, T(alpha)); });
}
void elu(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 1.0f);
    floatUnaryKernel(ctx, [alpha]<class T>(T v) { return v < T(0) ? T(alpha) * std::expm1(v) : v; });
}
void selu(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 1.67326319217681884765625f);
    const float gamma = param(ctx, "gamma", 1.05070102214813232421875f);
    floatUnaryKernel(ctx, [alpha, gamma]<class T>(T v) {
        return v <= T(0) ? T(gamma) * (T(alpha) * std::exp(v) - T(alpha)) : T(gamma) * v;
    });
}
void celu(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 1.0f);
    floatUnaryKernel(
        ctx, [alpha]<class T>(T v) { return std::max(T(0), v) + std::min(T(0), T(alpha) * std::expm1(v / T(alpha))); });
}
void hardSigmoid(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 0.2f);
    const float beta = param(ctx, "beta", 0.5f);
    floatUnaryKernel(ctx, [alpha, beta]<class T>(T v) { return hardSigmoidOf(v, T(alpha), T(beta)); });
}
void hardSwish(KernelContext& ctx)
{
    floatUnaryKernel(ctx, []<class T>(T v) { return hardSwishOf(v); });
}
void softplus(KernelContext& ctx)
{
    floatUnaryKernel(ctx, []<class T>(T v) {
        // log(1 + e^v) = max(v, 0) + log1p(e^-|v|): exact for large |v|.
        return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
    });
}
void softsign(KernelContext& ctx)
{
    floatUnaryKernel(ctx, []<class T>(T v) { return v / (T(1) + std::abs(v)); });
}
void thresholdedRelu(KernelContext& ctx)
{
    const float alpha = param(ctx, "alpha", 1.0f);
    floatUnaryKernel(ctx, [alpha]<class T>(T v) { return v > T(alpha) ? v : T(0); });
}
void mish(KernelContext& ctx)
{
    floatUnaryKernel(ctx, []<class T>(T v) {
        const T sp = std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
        return v * std::tanh(sp);
    });
}
void shrink(KernelContext& ctx)
{
    const double lambd = ctx.floatAttribute("lambd", 0.5f);
    const double bias = ctx.floatAttribute("bias", 0.0f);
    numericUnaryKernel(ctx, [=]<class T>(T v) {
        const double x = double(v);
        return T(x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0));
    });
}
void gelu(KernelContext& ctx)
{
    const std::string approximate = ctx.stringAttribute("approximate", "none");
    if (approximate == "tanh") {
        floatUnaryKernel(ctx, []<class T>(T v) {
            const T k = T(0.7978845608028654); // sqrt(2 / pi)
            return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
        });
    } else if (approximate == "none") {
        floatUnaryKernel(ctx, []<class T>(T v) { return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476))); });
    } else {
        ctx.fail("attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approximate + "\"");
    }
}
void clip(KernelContext& ctx)
{
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    Tensor out = visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
        if constexpr (!kIsNumber<T>) {
            ctx.fail("needs a numeric input, got bool");
        } else {
            T lo = std::numeric_limits<T>::lowest();
            T hi = std::numeric_limits<T>::max();
            if (ctx.opset() < 11) {
                lo = T(ctx.floatAttribute("min", float(lo)));
                hi = T(ctx.floatAttribute("max", float(hi)));
            } else {
                auto bound = [&](size_t i, T& v) {
                    const Tensor& b = ops.tensors.size() > i ? ops.tensors[i] : Tensor();
                    if (!b.rawData())
                        return;
                    if (b.numel() != 1 || b.dtype() != x.dtype())
                        ctx.fail(std::string(i == 1 ? "min" : "max") + " must be a scalar of the input's type");
                    v = b.values<T>()[0];
                };
                bound(1, lo);
                bound(2, hi);
            }
            return mapUnary<T, T>(x, x.dtype(), [lo, hi](T v) { return clipOf(v, lo, hi); });
        }
    });
    emit(ctx, 0, std::move(out), ops);
}
void floor(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::floor(v); });
}
void ceil(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::ceil(v); });
}
void round(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::nearbyint(v); }); // half to even in the default FP mode
}
void sin(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::sin(v); });
}
void cos(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::cos(v); });
}
void tan(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::tan(v); });
}
void asin(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::asin(v); });
}
void acos(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::acos(v); });
}
void atan(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::atan(v); });
}
void sinh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::sinh(v); });
}
void cosh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::cosh(v); });
}
void asinh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::asinh(v); });
}
void acosh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::acosh(v); });
}
void atanh(KernelContext& ctx)
{
    floatUnaryKernel(ctx, [](auto v) { return std::atanh(v); });
}

void where(KernelContext& ctx)
{
    const Operands ops = operands(ctx);
    const Tensor& c = ops.tensors.at(0);
    const Tensor& a = ops.tensors.at(1);
    const Tensor& b = ops.tensors.at(2);
    if (c.dtype() != DType::Bool)
        ctx.fail("condition must be bool, got " + std::string(dtypeName(c.dtype())));
    if (a.dtype() != b.dtype())
        ctx.fail("X and Y must share one element type");
    const Shape shape =
        broadcastShapes(broadcastShapes(c.shape(), a.shape(), ctx.describe()), b.shape(), ctx.describe());
    Tensor out = visit(ctx, a.dtype(), [&]<class T>() {
        Tensor r(a.dtype(), shape);
        const bool* pc = c.values<bool>().data();
        const T* pa = a.values<T>().data();
        const T* pb = b.values<T>().data();
        T* po = r.mutableValues<T>().data();
        forEachBroadcastRun<3>(
            shape,
            {broadcastStrides(c.shape(), shape), broadcastStrides(a.shape(), shape),
             broadcastStrides(b.shape(), shape)},
            [&](int64_t o, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st, int64_t n) {
                for (int64_t j = 0; j < n; ++j)
                    po[o + j] = pc[off[0] + j * st[0]] ? pa[off[1] + j * st[1]] : pb[off[2] + j * st[2]];
            });
        return r;
    });
    emit(ctx, 0, std::move(out), ops);
}
void equal(KernelContext& ctx)
{
    comparisonKernel(ctx, [](auto x, auto y) { return x == y; });
}
void less(KernelContext& ctx)
{
    comparisonKernel(ctx, [](auto x, auto y) { return x < y; });
}
void lessOrEqual(KernelContext& ctx)
{
    comparisonKernel(ctx, [](auto x, auto y) { return x <= y; });
}
void greater(KernelContext& ctx)
{
    comparisonKernel(ctx, [](auto x, auto y) { return x > y; });
}
void greaterOrEqual(KernelContext& ctx)
{
    comparisonKernel(ctx, [](auto x, auto y) { return x >= y; });
}
void logicalAnd(KernelContext& ctx)
{
    logicKernel(ctx, [](bool x, bool y) { return x && y; });
}
void logicalOr(KernelContext& ctx)
{
    logicKernel(ctx, [](bool x, bool y) { return x || y; });
}
void logicalXor(KernelContext& ctx)
{
    logicKernel(ctx, [](bool x, bool y) { return x != y; });
}
void logicalNot(KernelContext& ctx)
{
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::Bool)
        ctx.fail("needs a bool input");
    ctx.setOutput(0, mapUnary<bool, bool>(x, DType::Bool, [](bool v) { return !v; }));
}
void isNaN(KernelContext& ctx)
{
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    ctx.setOutput(0, visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
                      if constexpr (!std::is_floating_point_v<T>)
                          ctx.fail("needs a floating-point input");
                      else
                          return mapUnary<T, bool>(x, DType::Bool, [](T v) { return std::isnan(v); });
                  }));
}
void isInf(KernelContext& ctx)
{
    const bool negative = ctx.intAttribute("detect_negative", 1) != 0;
    const bool positive = ctx.intAttribute("detect_positive", 1) != 0;
    const Operands ops = operands(ctx);
    const Tensor& x = ops.tensors.at(0);
    ctx.setOutput(0, visit(ctx, x.dtype(), [&]<class T>() -> Tensor {
                      if constexpr (!std::is_floating_point_v<T>)
                          ctx.fail("needs a floating-point input");
                      else
                          return mapUnary<T, bool>(x, DType::Bool, [=](T v) {
                              return std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative));
                          });
                  }));
}

} // namespace qs::ops
