// GridSample over 2-D spatial inputs: X [N, C, H, W] sampled at grid
// [N, Ho, Wo, 2] of normalized (x, y) in [-1, 1]. Coordinates outside the
// input are clamped (border), reflected (reflection) or read as 0 (zeros),
// first for the sampling point and then for each tap, as ONNX Runtime does.

#include "runtime/ops/grid_sample.h"

#include <cmath>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

enum class Padding { Zeros, Border, Reflection };

double reflect(double x, double lo, double hi)
{
    const double range = hi - lo;
    if (range <= 0)
        return lo;
    if (x < lo) {
        const double d = lo - x;
        const auto n = int64_t(d / range);
        const double r = d - double(n) * range;
        return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        const double d = x - hi;
        const auto n = int64_t(d / range);
        const double r = d - double(n) * range;
        return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
}

struct Plane {
    const float* data;
    int64_t h, w;
    Padding padding;
    double lo[2], hi[2]; // valid coordinate range of x and y

    float at(int64_t y, int64_t x) const
    {
        switch (padding) {
        case Padding::Zeros:
            if (x < 0 || x >= w || y < 0 || y >= h)
                return 0.0f;
            break;
        case Padding::Border:
            x = std::clamp<int64_t>(x, 0, w - 1);
            y = std::clamp<int64_t>(y, 0, h - 1);
            break;
        case Padding::Reflection:
            x = std::clamp<int64_t>(int64_t(reflect(double(x), lo[0], hi[0])), 0, w - 1);
            y = std::clamp<int64_t>(int64_t(reflect(double(y), lo[1], hi[1])), 0, h - 1);
            break;
        }
        return data[y * w + x];
    }
};

std::array<double, 4> cubicCoefficients(double t)
{
    const double a = -0.75;
    auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

} // namespace

void gridSample(KernelContext& ctx)
{
    const Tensor x = castTensor(ctx.input(0), DType::F32);
    const Tensor grid = castTensor(ctx.input(1), DType::F32);
    if (x.rank() != 4 || grid.rank() != 4 || grid.dim(3) != 2 || grid.dim(0) != x.dim(0))
        ctx.fail("supports X [N, C, H, W] with grid [N, Ho, Wo, 2] only");
    const bool alignCorners = ctx.intAttribute("align_corners", 0) != 0;
    std::string mode = ctx.stringAttribute("mode", ctx.opset() < 20 ? "bilinear" : "linear");
    if (mode == "bilinear")
        mode = "linear";
    if (mode == "bicubic")
        mode = "cubic";
    if (mode != "linear" && mode != "nearest" && mode != "cubic")
        ctx.fail("mode '" + mode + "' is not supported");
    const std::string pad = ctx.stringAttribute("padding_mode", "zeros");
    Padding padding = Padding::Zeros;
    if (pad == "border")
        padding = Padding::Border;
    else if (pad == "reflection")
        padding = Padding::Reflection;
    else if (pad != "zeros")
        ctx.fail("padding_mode '" + pad + "' is not supported");
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = grid.dim(1), wo = grid.dim(2);
    Tensor out(DType::F32, {n, c, ho, wo});
    float* dst = out.mutableValues<float>().data();
    const double lo[2] = {alignCorners ? 0.0 : -0.5, alignCorners ? 0.0 : -0.5};
    const double hi[2] = {alignCorners ? double(w - 1) : double(w) - 0.5,
                          alignCorners ? double(h - 1) : double(h) - 0.5};
    auto denormalize = [alignCorners](double v, int64_t len) {
        return alignCorners ? (v + 1) / 2 * double(len - 1) : ((v + 1) * double(len) - 1) / 2;
    };
    for (int64_t b = 0; b < n; ++b) {
        ctx.checkCancelled();
        for (int64_t ch = 0; ch < c; ++ch) {
            const Plane plane{
                x.values<float>().data() + (b * c + ch) * h * w, h, w, padding, {lo[0], lo[1]}, {hi[0], hi[1]}};
            for (int64_t i = 0; i < ho; ++i)
                for (int64_t j = 0; j < wo; ++j) {
                    const float* g = grid.values<float>().data() + ((b * ho + i) * wo + j) * 2;
                    double px = denormalize(g[0], w), py = denormalize(g[1], h);
                    if (mode == "nearest") {
                        px = std::nearbyint(px);
                        py = std::nearbyint(py);
                    }
                    if (px < lo[0] || px > hi[0] || py < lo[1] || py > hi[1]) {
                        if (padding == Padding::Border) {
                            px = std::clamp(px, 0.0, double(w - 1));
                            py = std::clamp(py, 0.0, double(h - 1));
                        } else if (padding == Padding::Reflection) {
                            px = reflect(px, lo[0], hi[0]);
                            py = reflect(py, lo[1], hi[1]);
                        }
                    }
                    double v = 0.0;
                    if (mode == "nearest") {
                        v = plane.at(int64_t(std::nearbyint(py)), int64_t(std::nearbyint(px)));
                    } else if (mode == "linear") {
                        const auto x0 = int64_t(std::floor(px)), y0 = int64_t(std::floor(py));
                        const double fx = px - double(x0), fy = py - double(y0);
                        v = (1 - fy) * ((1 - fx) * plane.at(y0, x0) + fx * plane.at(y0, x0 + 1)) +
                            fy * ((1 - fx) * plane.at(y0 + 1, x0) + fx * plane.at(y0 + 1, x0 + 1));
                    } else {
                        const auto x0 = int64_t(std::floor(px)) - 1, y0 = int64_t(std::floor(py)) - 1;
                        const auto wx = cubicCoefficients(px - double(x0 + 1));
                        const auto wy = cubicCoefficients(py - double(y0 + 1));
                        for (int r = 0; r < 4; ++r) {
                            double row = 0.0;
                            for (int k = 0; k < 4; ++k)
                                row += wx[size_t(k)] * plane.at(y0 + r, x0 + k);
                            v += wy[size_t(r)] * row;
                        }
                    }
                    dst[((b * c + ch) * ho + i) * wo + j] = float(v);
                }
        }
    }
    ctx.setOutput(0, ctx.input(0).dtype() == DType::F32 ? out : castTensor(out, ctx.input(0).dtype()));
}

} // namespace qs::ops
