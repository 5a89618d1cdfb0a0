#include "core/tensor.h"

#include <cstring>
#include <limits>

#include "core/allocator.h"
#include "core/half.h"

namespace qs {

int64_t shapeElementCount(const Shape& shape)
{
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0)
            throw Error("negative dimension in shape " + shapeToString(shape));
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            throw Error("element count of shape " + shapeToString(shape) + " overflows 64 bits");
        n *= d;
    }
    return n;
}

std::string shapeToString(const Shape& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i)
            s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

Shape rowMajorStrides(const Shape& shape)
{
    Shape strides(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;)
        strides[i - 1] = strides[i] * shape[i];
    return strides;
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(uninitialized(dtype, std::move(shape)))
{
    std::memset(const_cast<void*>(data_), 0, nbytes());
}

Tensor Tensor::uninitialized(DType dtype, Shape shape)
{
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.numel_ = shapeElementCount(t.shape_);
    std::shared_ptr<void> storage = allocateTensorStorage(t.nbytes());
    t.data_ = storage.get();
    t.owner_ = std::move(storage);
    return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner)
{
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.numel_ = shapeElementCount(t.shape_);
    t.owner_ = std::move(owner);
    t.data_ = data;
    t.borrowed_ = true;
    return t;
}

void* Tensor::mutableRawData()
{
    if (borrowed_)
        throw Error("tensor storage is read-only (borrowed from a file or buffer)");
    return const_cast<void*>(data_);
}

Tensor Tensor::clone() const
{
    Tensor t(dtype_, shape_);
    if (nbytes())
        std::memcpy(t.mutableRawData(), data_, nbytes());
    return t;
}

Tensor Tensor::reshaped(Shape shape) const
{
    if (shapeElementCount(shape) != numel_)
        throw Error("cannot reshape " + shapeToString(shape_) + " to " + shapeToString(shape));
    Tensor t = *this;
    t.shape_ = std::move(shape);
    return t;
}

namespace {
template <class T> void convertToFloat(const void* src, float* dst, int64_t n)
{
    const T* s = static_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i)
        dst[i] = float(s[i]);
}
} // namespace

Tensor Tensor::toFloat32() const
{
    if (dtype_ == DType::F32)
        return *this;
    Tensor out(DType::F32, shape_);
    float* dst = out.mutableValues<float>().data();
    switch (dtype_) {
    case DType::F16: {
        const auto* s = static_cast<const uint16_t*>(data_);
        for (int64_t i = 0; i < numel_; ++i)
            dst[i] = fp16ToFloat(s[i]);
        break;
    }
    case DType::BF16: {
        const auto* s = static_cast<const uint16_t*>(data_);
        for (int64_t i = 0; i < numel_; ++i)
            dst[i] = bf16ToFloat(s[i]);
        break;
    }
    case DType::F64:
        convertToFloat<double>(data_, dst, numel_);
        break;
    case DType::I8:
        convertToFloat<int8_t>(data_, dst, numel_);
        break;
    case DType::U8:
        convertToFloat<uint8_t>(data_, dst, numel_);
        break;
    case DType::I16:
        convertToFloat<int16_t>(data_, dst, numel_);
        break;
    case DType::U16:
        convertToFloat<uint16_t>(data_, dst, numel_);
        break;
    case DType::I32:
        convertToFloat<int32_t>(data_, dst, numel_);
        break;
    case DType::U32:
        convertToFloat<uint32_t>(data_, dst, numel_);
        break;
    case DType::I64:
        convertToFloat<int64_t>(data_, dst, numel_);
        break;
    case DType::U64:
        convertToFloat<uint64_t>(data_, dst, numel_);
        break;
    case DType::Bool:
        convertToFloat<uint8_t>(data_, dst, numel_);
        break;
    case DType::F32:
        break;
    }
    return out;
}

std::vector<int> inversePermutation(const std::vector<int>& axes)
{
    std::vector<int> inverse(axes.size());
    for (size_t i = 0; i < axes.size(); ++i)
        inverse[size_t(axes[i])] = int(i);
    return inverse;
}

namespace {

// Copies `out`'s elements from `src` walking the output in row-major order and
// carrying the input offset along (`strides`: the input stride of each output axis).
template <size_t Item>
void gatherPermuted(const uint8_t* src, uint8_t* dst, const Shape& shape, const Shape& strides, int64_t count)
{
    const size_t rank = shape.size();
    std::vector<int64_t> index(rank, 0);
    const int64_t inner = shape.back(), innerStride = strides.back();
    int64_t offset = 0; // input element of index (without the last axis)
    for (int64_t flat = 0; flat < count; flat += inner) {
        for (int64_t j = 0; j < inner; ++j)
            std::memcpy(dst + size_t(flat + j) * Item, src + size_t(offset + j * innerStride) * Item, Item);
        for (size_t a = rank - 1; a-- > 0;) {
            if (++index[a] < shape[a]) {
                offset += strides[a];
                break;
            }
            offset -= strides[a] * (shape[a] - 1);
            index[a] = 0;
        }
    }
}

} // namespace

Tensor Tensor::permuted(const std::vector<int>& axes) const
{
    const int r = rank();
    if (int(axes.size()) != r)
        throw Error("permuted: " + std::to_string(axes.size()) + " axes for a tensor of rank " + std::to_string(r));
    bool identity = true;
    for (int i = 0; i < r; ++i)
        identity = identity && axes[size_t(i)] == i;
    if (identity)
        return *this;
    Shape shape(static_cast<size_t>(r)), strides(static_cast<size_t>(r));
    const Shape inStrides = rowMajorStrides(shape_);
    for (int i = 0; i < r; ++i) {
        shape[size_t(i)] = dim(axes[size_t(i)]);
        strides[size_t(i)] = inStrides[size_t(axes[size_t(i)])];
    }
    Tensor out(dtype_, shape);
    if (out.numel() == 0)
        return out;
    const auto* src = static_cast<const uint8_t*>(rawData());
    auto* dst = static_cast<uint8_t*>(out.mutableRawData());
    switch (dtypeSize(dtype_)) {
    case 1:
        gatherPermuted<1>(src, dst, shape, strides, out.numel());
        break;
    case 2:
        gatherPermuted<2>(src, dst, shape, strides, out.numel());
        break;
    case 4:
        gatherPermuted<4>(src, dst, shape, strides, out.numel());
        break;
    case 8:
        gatherPermuted<8>(src, dst, shape, strides, out.numel());
        break;
    default:
        throw Error("permuted: no copy for " + std::string(dtypeName(dtype_)) + " elements");
    }
    return out;
}

} // namespace qs
