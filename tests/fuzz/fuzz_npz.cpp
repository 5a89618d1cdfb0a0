// Fuzz target: an .npz archive through NpzFile::open, read() of every array,
// and a row-by-row NpzRowReader pass over every array that has rows (the
// streaming path a calibration data source takes).

#include <cstddef>
#include <cstdint>
#include "core/error.h"
#include "io/npz.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    static qs::fuzz::ScratchFile scratch("fuzz.npz");
    try {
        const qs::NpzFile file = qs::NpzFile::open(scratch.write(data, size));
        for (const qs::NpzArray& array : file.arrays()) {
            try {
                (void)file.read(array);
            } catch (const qs::Error&) {
            }
            if (array.header.shape.empty())
                continue;
            qs::NpzRowReader rows(file, array);
            while (rows.next(3).numel() > 0) {
            }
        }
    } catch (const qs::Error&) {
    }
    return 0;
}
