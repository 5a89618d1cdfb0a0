#pragma once
// How much memory a loader may commit to one file's tensors, decided before it
// allocates anything.
//
// Every loader first matches the sizes a header declares with the bytes the
// file holds; these bounds then cap what a consistent but huge file can make
// the process allocate:
// - a tensor a model loader produces holds at most kMaxTensorElements (2^32)
//   elements: 16 GiB as float32, the type quantization and the interpreter
//   compute in (float8 and int4 are widened to it or to int8 at load, and a
//   quantizer widens any weight to float32 later);
// - the storage a loader allocates for one file (copies, conversions, widened
//   float8/int4, inflated npz members) is at most kMaxLoadedBytesPerFile
//   (32 GiB), summed over the file's tensors before the first one is
//   allocated. Data borrowed from a memory mapping or from the parsed file
//   costs nothing and is not counted.
// An allocation within these bounds that the system still cannot satisfy is
// an Error naming the file and the tensor, never a bare "out of memory".

#include <cstdint>
#include <new>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace qs {

inline constexpr int64_t kMaxTensorElements = int64_t(1) << 32;
inline constexpr uint64_t kMaxLoadedBytesPerFile = uint64_t(32) << 30;

// "<source>: <what>: shape [...] has N elements, more than the limit of ..." when
// `numel` exceeds kMaxTensorElements.
inline void checkTensorElements(int64_t numel, const Shape& shape, const std::string& source, const std::string& what)
{
    if (numel > kMaxTensorElements)
        throw Error(source + ": " + what + ": shape " + shapeToString(shape) + " has " + std::to_string(numel) +
                    " elements, more than the limit of " + std::to_string(kMaxTensorElements) +
                    " per tensor (16 GiB as float32)");
}

// The running total of what one file's tensors will allocate.
class LoadBudget {
public:
    explicit LoadBudget(std::string source) : source_(std::move(source)) {}

    // Counts `bytes` that `what` will allocate; throws an Error naming the tensor
    // and the limit when the file's total would pass kMaxLoadedBytesPerFile.
    void reserve(uint64_t bytes, const std::string& what)
    {
        if (bytes > kMaxLoadedBytesPerFile - reserved_)
            throw Error(source_ + ": " + what + " needs " + std::to_string(bytes) + " bytes in memory" +
                        (reserved_ ? ", which with the " + std::to_string(reserved_) + " bytes of the tensors before it"
                                   : std::string()) +
                        " passes the limit of " + std::to_string(kMaxLoadedBytesPerFile) +
                        " bytes (32 GiB) that one file's tensors may take");
        reserved_ += bytes;
    }
    uint64_t reserved() const { return reserved_; }

private:
    std::string source_;
    uint64_t reserved_ = 0;
};

// Owned, unwritten storage (Tensor::uninitialized) whose allocation failure is
// an Error naming the file and the tensor.
inline Tensor allocateTensor(DType dtype, const Shape& shape, const std::string& source, const std::string& what)
{
    try {
        return Tensor::uninitialized(dtype, shape);
    } catch (const std::bad_alloc&) {
        throw Error(source + ": " + what + ": cannot allocate " +
                    std::to_string(uint64_t(shapeElementCount(shape)) * dtypeSize(dtype)) + " bytes for shape " +
                    shapeToString(shape) + " (out of memory)");
    }
}

} // namespace qs
