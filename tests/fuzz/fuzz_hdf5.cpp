// Fuzz target: an HDF5 file through loadCheckpointModel (Keras weights when
// the file holds them, else a generic tree of datasets). libhdf5 itself is not
// instrumented and parses the file's structure; a crash inside libhdf5 is
// recorded in docs/robustness.md as that library's, not hidden.

#include <cstddef>
#include <cstdint>
#include "core/error.h"
#include "io/checkpoint_model.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static qs::fuzz::ScratchFile scratch("fuzz.h5");
    try {
        (void)qs::loadCheckpointModel(scratch.write(data, size));
    } catch (const qs::Error&) {
    }
    return 0;
}
