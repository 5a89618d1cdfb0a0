#include "core/allocator.h"

#include <cstdlib> // defines __GLIBC__ with glibc (the check below without it compiled to nothing)

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace qs {

void keepFreedMemoryForReuse()
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest allowed value on 64-bit
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

} // namespace qs
