#pragma once
// Internal to the ONNX loader: onnx::TensorProto -> qs::Tensor, including
// external data. Included only by the loader's sources (it needs the ONNX
// protobuf headers, which the io library links privately).

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <onnx/onnx_pb.h>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "graph/onnx_element_type.h"

namespace qs {

// Reads the tensors of one model. Data stored in the protobuf (raw_data and the
// wide typed fields) is borrowed from the message, which the tensor keeps alive
// through `owner`; narrow types in int32_data (f16, bf16, int8 ...) are
// converted into owned storage. Element types the engine has no DType for are
// widened into owned storage: int4/uint4 (two per byte, low nibble first) to
// int8/uint8, int4 sign-extended; float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz) to
// the float32 of each code's exact value, so DequantizeLinear over them
// computes the same numbers. External data is mapped, each file once, and
// borrowed from the mapping; a tensor whose offset is not aligned to its element
// size is copied instead (reading it in place would be a misaligned access).
class OnnxTensorReader {
public:
    // `sourceName` prefixes every error. External data is resolved inside
    // `folder`; an empty folder refuses external data.
    OnnxTensorReader(std::string sourceName, std::filesystem::path folder, std::shared_ptr<const void> owner);

    // What read() will take, found without allocating: every check read()
    // makes (element type, dims, the byte count the dims need for this element
    // type against raw_data, the typed field or the external range, and the
    // per-tensor element limit of io/load_budget.h) and the bytes of owned
    // storage read() will allocate (0 when it borrows).
    struct Plan {
        Shape shape;
        int64_t numel = 0;
        uint64_t allocatedBytes = 0;
    };
    Plan plan(const onnx::TensorProto& proto, const std::string& what, bool borrow = true);

    // `what` names the tensor in errors, e.g. "initializer 'conv.weight'".
    // `borrow` = false copies into owned storage (attribute tensors). Checks as
    // plan() does before allocating anything.
    Tensor read(const onnx::TensorProto& proto, const std::string& what, bool borrow = true);

private:
    struct ExternalBytes {
        const std::byte* data;
        std::shared_ptr<const MappedFile> file; // keeps `data` mapped
    };

    [[noreturn]] void fail(const std::string& what, const std::string& problem) const;
    // int4/uint4/float8 codes, widened (see above), from checked sizes.
    Tensor readWidened(const onnx::TensorProto& proto, const std::string& what, const Plan& plan);
    // `bytes` bytes of the tensor's external data; `layout` describes them in errors.
    ExternalBytes externalData(const onnx::TensorProto& proto, const std::string& what, uint64_t bytes,
                               const std::string& layout);
    std::shared_ptr<const MappedFile> externalFile(const std::string& location, const std::string& what);

    std::string sourceName_;
    std::filesystem::path folder_;
    std::shared_ptr<const void> owner_;
    std::map<std::filesystem::path, std::shared_ptr<const MappedFile>> mapped_;
};

// The ONNX element type's name ("float32", "string", "float8e4m3fn", ...).
std::string onnxElementTypeName(int32_t elemType);

} // namespace qs
