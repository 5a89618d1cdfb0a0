#include "quant/gguf_quantization.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/block_layout.h"
#include "core/half.h"
#include "core/error.h"
#include "numerics/gguf_blocks.h"

namespace qs {
namespace {

// The tensor's rows along its last axis, checked: finite values, a row length
// the block size divides. Rows are read as float32 one at a time (bf16 and fp16
// widened into the caller's buffer), never the whole tensor at once: a model's
// largest weights are what this quantizes.
struct Rows {
    const Tensor* input = nullptr;
    int64_t count = 0;
    int64_t length = 0;

    std::span<const float> row(int64_t r, std::vector<float>& buffer) const
    {
        const size_t n = size_t(length), offset = size_t(r * length);
        if (input->dtype() == DType::F32)
            return input->values<float>().subspan(offset, n);
        buffer.resize(n);
        const auto* bits = static_cast<const uint16_t*>(input->rawData()) + offset;
        if (input->dtype() == DType::BF16)
            for (size_t i = 0; i < n; ++i)
                buffer[i] = bf16ToFloat(bits[i]);
        else
            for (size_t i = 0; i < n; ++i)
                buffer[i] = fp16ToFloat(bits[i]);
        return buffer;
    }
};

Rows rowsOf(const Tensor& input, QType t, std::string_view tensorName)
{
    const std::string name = "tensor '" + std::string(tensorName) + "'";
    if (!isGgufBlock(t))
        throw Error(name + ": " + std::string(qtypeName(t)) + " is not a GGUF block format");
    if (input.dtype() != DType::F32 && input.dtype() != DType::F16 && input.dtype() != DType::BF16)
        throw Error(name + ": " + std::string(qtypeName(t)) + " needs float32, float16 or bfloat16 data, got " +
                    std::string(dtypeName(input.dtype())));
    if (input.rank() < 1)
        throw Error(name + ": " + std::string(qtypeName(t)) + " needs a tensor of rank 1 or more");
    Rows r;
    r.input = &input;
    r.length = input.shape().back();
    const int blockSize = qtypeInfo(t).blockSize;
    if (r.length % blockSize != 0)
        throw Error(name + " " + shapeToString(input.shape()) + ": " + std::string(qtypeName(t)) +
                    " quantizes rows of its last axis in blocks of " + std::to_string(blockSize) + ", and " +
                    std::to_string(r.length) + " is not a multiple of " + std::to_string(blockSize) +
                    (blockSize == 256
                         ? "; use a type with blocks of 32 (q8_0, q4_0, q4_1, q5_0, q5_1) or leave it float"
                         : "; leave it float"));
    r.count = r.length == 0 ? 0 : input.numel() / r.length;
    std::vector<float> buffer;
    for (int64_t row = 0; row < r.count; ++row) {
        const std::span<const float> v = r.row(row, buffer);
        const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
        if (bad != v.end())
            throw Error(name + ": element " + std::to_string(row * r.length + (bad - v.begin())) + " is " +
                        (std::isnan(*bad) ? "NaN" : "infinite") + "; quantization needs finite values");
    }
    return r;
}

// The largest code magnitude of a type, for the informative step of a block.
float largestCode(QType t)
{
    switch (t) {
    case QType::Q8_0:
        return 127;
    case QType::Q4_0:
        return 8;
    case QType::Q5_0:
        return 16;
    case QType::Q6K:
        return 32;
    case QType::Q4_1:
    case QType::Q4K:
        return 15;
    default: // q5_1, q5_k
        return 31;
    }
}

// fn(first, last) over ranges of rows, in parallel, about 16k elements a task.
template <class Fn> void forRowRanges(int64_t rows, int64_t length, Fn fn)
{
    const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(length, 1));
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, grain),
                      [&](const tbb::blocked_range<int64_t>& range) { fn(range.begin(), range.end()); });
}

} // namespace

QuantParams ggufBlockParams(const Tensor& input, QType t, std::string_view tensorName)
{
    const Rows rows = rowsOf(input, t, tensorName);
    const int blockSize = qtypeInfo(t).blockSize;
    QuantParams p;
    p.qtype = t;
    p.symmetric = true;
    p.layout = BlockLayout::blocks(input.shape(), -1, blockSize);
    p.scales.assign(size_t(p.layout.groupCount()), kDegenerateScale);
    const float codeMax = largestCode(t);
    const size_t blocksPerRow = size_t(rows.length / blockSize);
    forRowRanges(rows.count, rows.length, [&](int64_t first, int64_t last) {
        std::vector<float> buffer;
        for (int64_t r = first; r < last; ++r) {
            const std::span<const float> x = rows.row(r, buffer);
            for (size_t b = 0; b < blocksPerRow; ++b) {
                float m = 0;
                for (size_t i = b * size_t(blockSize); i < (b + 1) * size_t(blockSize); ++i)
                    m = std::max(m, std::fabs(x[i]));
                if (m > 0)
                    p.scales[size_t(r) * blocksPerRow + b] = std::max(m / codeMax, 0x1p-126f);
            }
        }
    });
    return p;
}

void ggufFakeQuantizeInto(const Tensor& input, QType t, std::span<float> out, std::string_view tensorName)
{
    if (int64_t(out.size()) != input.numel())
        throw Error("tensor '" + std::string(tensorName) + "': output buffer holds " + std::to_string(out.size()) +
                    " floats for " + std::to_string(input.numel()) + " elements");
    const Rows rows = rowsOf(input, t, tensorName);
    const size_t rowBytes = ggufRowBytes(t, rows.length);
    forRowRanges(rows.count, rows.length, [&](int64_t first, int64_t last) {
        std::vector<uint8_t> bytes(rowBytes);
        std::vector<float> buffer;
        for (int64_t r = first; r < last; ++r) {
            ggufEncodeRow(t, rows.row(r, buffer), bytes);
            ggufDecodeRow(t, bytes, out.subspan(size_t(r * rows.length), size_t(rows.length)));
        }
    });
}

Tensor ggufEncode(const Tensor& input, QType t, std::string_view tensorName)
{
    const Rows rows = rowsOf(input, t, tensorName);
    const size_t rowBytes = ggufRowBytes(t, rows.length);
    Tensor out = Tensor::uninitialized(DType::U8, {rows.count, int64_t(rowBytes)});
    uint8_t* b = out.mutableValues<uint8_t>().data();
    forRowRanges(rows.count, rows.length, [&](int64_t first, int64_t last) {
        std::vector<float> buffer;
        for (int64_t r = first; r < last; ++r)
            ggufEncodeRow(t, rows.row(r, buffer), {b + size_t(r) * rowBytes, rowBytes});
    });
    return out;
}

Tensor ggufDecode(const Tensor& bytes, QType t, const Shape& shape)
{
    if (shape.empty())
        throw Error(std::string(qtypeName(t)) + " blocks decode to a tensor of rank 1 or more");
    const int64_t length = shape.back();
    const size_t rowBytes = ggufRowBytes(t, length);
    const int64_t rows = length == 0 ? 0 : shapeElementCount(shape) / length;
    if (bytes.dtype() != DType::U8 || size_t(bytes.numel()) != size_t(rows) * rowBytes)
        throw Error(std::string(qtypeName(t)) + " blocks of a " + shapeToString(shape) + " tensor must be " +
                    std::to_string(size_t(rows) * rowBytes) + " uint8 bytes, got " + std::to_string(bytes.numel()) +
                    " " + std::string(dtypeName(bytes.dtype())));
    Tensor out = Tensor::uninitialized(DType::F32, shape);
    float* y = out.mutableValues<float>().data();
    const uint8_t* b = bytes.values<uint8_t>().data();
    forRowRanges(rows, length, [&](int64_t first, int64_t last) {
        for (int64_t r = first; r < last; ++r)
            ggufDecodeRow(t, {b + size_t(r) * rowBytes, rowBytes}, {y + r * length, size_t(length)});
    });
    return out;
}

} // namespace qs
