#pragma once
// A dense, row-major (C-order) tensor: an element type, a shape and storage
// that is either owned or borrowed from something kept alive with it (a
// memory-mapped file, a protobuf message). Copies share storage; clone() copies.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace qs {

using Shape = std::vector<int64_t>;

// Number of elements of a shape; throws Error on negative dimensions or overflow.
int64_t shapeElementCount(const Shape& shape);
// "[2, 3, 4]"
std::string shapeToString(const Shape& shape);
// Row-major strides, in elements.
Shape rowMajorStrides(const Shape& shape);
// The order that undoes `axes` (Tensor::permuted(axes) then permuted(inverse) is the identity).
std::vector<int> inversePermutation(const std::vector<int>& axes);

class Tensor {
public:
    Tensor() = default;
    // Owned, zero-filled storage.
    Tensor(DType dtype, Shape shape);
    // Owned storage left unwritten: for outputs a kernel overwrites entirely
    // (zero-filling them first costs a full pass over memory).
    static Tensor uninitialized(DType dtype, Shape shape);
    // Borrowed storage: `data` stays valid as long as `owner` lives.
    static Tensor borrow(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner);

    template <class T> static Tensor fromVector(DType dtype, Shape shape, const std::vector<T>& values);

    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int rank() const { return int(shape_.size()); }
    int64_t dim(int axis) const { return shape_.at(size_t(axis)); }
    int64_t numel() const { return numel_; }
    size_t nbytes() const { return size_t(numel_) * dtypeSize(dtype_); }
    bool empty() const { return numel_ == 0; }
    bool isBorrowed() const { return borrowed_; }

    const void* rawData() const { return data_; }
    // What keeps the data alive (shared by copies and by tensors borrowed from
    // one buffer): with rawData(), the identity of the values a cache may key on.
    const std::shared_ptr<const void>& storage() const { return owner_; }
    // Writable access; throws Error for borrowed (read-only) storage.
    void* mutableRawData();

    template <class T> std::span<const T> values() const { return {static_cast<const T*>(data_), size_t(numel_)}; }
    template <class T> std::span<T> mutableValues() { return {static_cast<T*>(mutableRawData()), size_t(numel_)}; }

    // A deep copy with owned storage.
    Tensor clone() const;
    // Same data, new shape with the same element count (shares storage).
    Tensor reshaped(Shape shape) const;
    // Converts any numeric dtype to float32 (returns *this when already float32).
    Tensor toFloat32() const;
    // A copy with its axes reordered: axis i of the result is axis axes[i] of
    // this tensor (numpy's transpose). The identity order returns *this.
    Tensor permuted(const std::vector<int>& axes) const;

private:
    DType dtype_ = DType::F32;
    Shape shape_;
    int64_t numel_ = 0;
    std::shared_ptr<const void> owner_;
    const void* data_ = nullptr;
    bool borrowed_ = false;
};

template <class T> Tensor Tensor::fromVector(DType dtype, Shape shape, const std::vector<T>& values)
{
    Tensor t(dtype, std::move(shape));
    if (sizeof(T) != dtypeSize(dtype) || values.size() != size_t(t.numel()))
        throw Error("Tensor::fromVector: " + std::to_string(values.size()) + " values of " + std::to_string(sizeof(T)) +
                    " bytes do not fill a " + std::string(dtypeName(dtype)) + " tensor of shape " +
                    shapeToString(t.shape()));
    auto* out = static_cast<T*>(t.mutableRawData());
    for (size_t i = 0; i < values.size(); ++i)
        out[i] = values[i];
    return t;
}

} // namespace qs
