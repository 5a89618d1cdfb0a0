// Fuzz target: ONNX bytes through loadOnnxBytes with the checker and shape
// inference on (what opening a model does). A qs::Error is the expected
// refusal; any other exception or a crash is a finding. External data is
// refused (no folder), so the target touches no files. libonnx's shape
// inference runs in a contained child process (its crashes in
// convPoolShapeInference become a warning), the same in the ASan build.
//
// QUANTSCOPE_FUZZ_NO_SHAPE_INFERENCE=1 in the environment turns ONNX shape
// inference off: no child process per input, so the rest of the loader is
// fuzzed several times faster.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include "core/error.h"
#include "io/onnx_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static const bool shapeInference = std::getenv("QUANTSCOPE_FUZZ_NO_SHAPE_INFERENCE") == nullptr;
    try {
        const qs::Model model = qs::loadOnnxBytes(std::span(reinterpret_cast<const std::byte*>(data), size),
                                                  "fuzz.onnx", {}, {true, shapeInference});
        (void)model.opTypes();
    } catch (const qs::Error&) {
    }
    return 0;
}
