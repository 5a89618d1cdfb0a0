// Fuzz target: .npy images through parseNpy. An accepted image must survive
// a round trip: encoding the tensor and parsing that again gives the same
// bytes (the reader and writer agree on every dtype and layout it accepted).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include "core/error.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    try {
        const qs::Tensor tensor = qs::parseNpy(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.npy");
        const std::vector<std::byte> encoded = qs::encodeNpy(tensor);
        if (qs::encodeNpy(qs::parseNpy(encoded, "re-encoded.npy")) != encoded)
            std::abort();
    } catch (const qs::Error&) {
    }
    return 0;
}
