// Fuzz target: ONNX bytes through loadOnnxBytes with the checker and shape
// inference on (what opening a model does). A qs::Error is the expected
// refusal; any other exception or a crash is a finding. External data is
// refused (no folder), so the target touches no files.

#include <cstddef>
#include <cstdint>
#include <span>
#include "core/error.h"
#include "io/onnx_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    try {
        const qs::Model model = qs::loadOnnxBytes(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.onnx");
        (void)model.opTypes();
    } catch (const qs::Error&) {
    }
    return 0;
}
