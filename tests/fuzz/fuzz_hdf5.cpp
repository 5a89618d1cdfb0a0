// Fuzz target: an HDF5 file through loadCheckpointModel (Keras weights when
// the file holds them, else a generic tree of datasets). libhdf5 is not
// instrumented, and Hdf5File runs every call into it in a contained child
// process (core/contained_call.h): a crash, a runaway allocation or a stall in
// libhdf5 ends the child and comes back as the qs::Error this target expects,
// in the ASan build exactly as in release (there is no in-process path). So a
// finding here is a bug of ours, in the parent. What runs in the child is not
// seen by libFuzzer's coverage.

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
