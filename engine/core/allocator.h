#pragma once
// How the process's allocator treats the tensors a model run allocates and
// frees, node after node, run after run.

#include <cstddef>
#include <memory>

namespace qs {

// Keeps freed tensor memory in the process for the next allocation of that
// size instead of handing it back to the system at once: glibc maps every
// block above a threshold (128 KiB, growing with use) freshly and trims the
// heap's top after each free, so each run of a model pays page faults (and the
// kernel's zeroing) for every activation again. Up to 32 MiB per block stays
// on the heap, and up to 512 MiB of free heap is kept. Larger tensor blocks
// (allocateTensorStorage) are kept by the engine, up to 512 MiB more. Called
// once at start-up by the applications; without it, and for blocks of other
// than tensors, the system's allocator decides. (On mobilenet_v3_small, batch
// 2, 2 threads: float 3.7 -> 3.1 ms, fake-quant 14.7 -> 4.4 ms.)
void keepFreedMemoryForReuse();

// Storage for a tensor's `bytes` (64-byte aligned; at least one byte), freed
// when the last copy of the pointer goes. Once keepFreedMemoryForReuse() has
// been called, a freed block of kKeptBlockMinBytes or more — one glibc would
// map on each allocation and unmap on each free, whatever it is told — is kept
// (up to kKeptBlocksMaxBytes in all, the least recently freed let go first)
// and handed to the next tensor it holds with at most an eighth of that
// tensor's size to spare. (mobilenet_v2 at 224 x 224, batch 8: its 38.5 MB
// activation took 9400 page faults, about 10 ms, on every run.)
std::shared_ptr<void> allocateTensorStorage(size_t bytes);
inline constexpr size_t kKeptBlockMinBytes = size_t(32) << 20;
inline constexpr size_t kKeptBlocksMaxBytes = size_t(512) << 20;

// The bytes of the large blocks kept for reuse now.
size_t keptTensorBlockBytes();

} // namespace qs
