#pragma once
// Per-thread scratch buffers of the kernels. Resizing a thread_local vector to
// each call's size would, after a smaller call, zero the regrown part on the
// next larger one (resize value-initialises): with shapes alternating along a
// model, up to a megabyte of memset per GEMM call for the packed columns.
// growScratch only grows; what the buffer holds is whatever its last user
// left, so callers write before reading.

#include <cstddef>
#include <vector>

namespace qs {

template <class T> T* growScratch(std::vector<T>& buffer, size_t n)
{
    if (buffer.size() < n)
        buffer.resize(n);
    return buffer.data();
}

} // namespace qs
