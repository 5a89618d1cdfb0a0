// NonMaxSuppression: per batch and class, boxes in descending score order are
// kept greedily unless they overlap a kept box by more than iou_threshold.

#include "runtime/ops/detection.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

using Box = std::array<float, 4>; // y1, x1, y2, x2 with y1 <= y2, x1 <= x2

Box cornersOf(const float* b, bool centerPoint)
{
    if (centerPoint) // [x_center, y_center, width, height]
        return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
    return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

float iou(const Box& a, const Box& b)
{
    const float h = std::max(0.0f, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const float w = std::max(0.0f, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const float inter = h * w;
    const float areaA = (a[2] - a[0]) * (a[3] - a[1]);
    const float areaB = (b[2] - b[0]) * (b[3] - b[1]);
    const float uni = areaA + areaB - inter;
    return uni > 0.0f ? inter / uni : 0.0f;
}

} // namespace

void nonMaxSuppression(KernelContext& ctx)
{
    const Tensor boxes = castTensor(ctx.input(0), DType::F32);
    const Tensor scores = castTensor(ctx.input(1), DType::F32);
    if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 || scores.dim(0) != boxes.dim(0) ||
        scores.dim(2) != boxes.dim(1))
        ctx.fail("boxes must be [B, N, 4] and scores [B, C, N]");
    auto scalar = [&](size_t i) -> const Tensor* {
        const Tensor* s = ctx.optionalInput(i);
        if (s && s->numel() == 0)
            return nullptr;
        if (s && s->numel() != 1)
            ctx.fail("input " + std::to_string(i) + " must be a scalar");
        return s;
    };
    const Tensor* maxT = scalar(2);
    const Tensor* iouT = scalar(3);
    const Tensor* scoreT = scalar(4);
    const int64_t maxPerClass = maxT ? castTensor(*maxT, DType::I64).values<int64_t>()[0] : 0;
    const float iouThreshold = iouT ? castTensor(*iouT, DType::F32).values<float>()[0] : 0.0f;
    const bool hasScoreThreshold = scoreT != nullptr;
    const float scoreThreshold = scoreT ? castTensor(*scoreT, DType::F32).values<float>()[0] : 0.0f;
    const bool centerPoint = ctx.intAttribute("center_point_box", 0) != 0;
    const int64_t batches = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
    std::vector<int64_t> selected;
    std::vector<int64_t> order;
    std::vector<Box> kept;
    for (int64_t b = 0; b < batches; ++b)
        for (int64_t c = 0; c < classes; ++c) {
            const float* s = scores.values<float>().data() + (b * classes + c) * n;
            order.clear();
            for (int64_t i = 0; i < n; ++i)
                if (!hasScoreThreshold || s[i] > scoreThreshold)
                    order.push_back(i);
            std::stable_sort(order.begin(), order.end(), [s](int64_t x, int64_t y) { return s[x] > s[y]; });
            kept.clear();
            for (int64_t i : order) {
                if (int64_t(kept.size()) >= maxPerClass)
                    break;
                const Box box = cornersOf(boxes.values<float>().data() + (b * n + i) * 4, centerPoint);
                const bool overlaps =
                    std::any_of(kept.begin(), kept.end(), [&](const Box& k) { return iou(k, box) > iouThreshold; });
                if (overlaps)
                    continue;
                kept.push_back(box);
                selected.insert(selected.end(), {b, c, i});
            }
        }
    ctx.setOutput(0, Tensor::fromVector(DType::I64, {int64_t(selected.size() / 3), 3}, selected));
}

} // namespace qs::ops
