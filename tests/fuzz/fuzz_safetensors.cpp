// Fuzz target: a single .safetensors file through SafetensorsFile::open and
// tensor() of every entry (both the borrowed and the copied paths).

#include <cstddef>
#include <cstdint>
#include "core/error.h"
#include "io/safetensors.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static qs::fuzz::ScratchFile scratch("fuzz.safetensors");
    try {
        const qs::SafetensorsFile file = qs::SafetensorsFile::open(scratch.write(data, size));
        for (const qs::SafetensorsEntry& entry : file.entries())
            (void)file.tensor(entry);
    } catch (const qs::Error&) {
    }
    return 0;
}
