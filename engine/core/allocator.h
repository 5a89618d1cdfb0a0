#pragma once
// How the process's allocator treats the tensors a model run allocates and
// frees, node after node, run after run.

namespace qs {

// Keeps freed tensor memory in the process for the next allocation of that
// size instead of handing it back to the system at once: glibc maps every
// block above a threshold (128 KiB, growing with use) freshly and trims the
// heap's top after each free, so each run of a model pays page faults (and the
// kernel's zeroing) for every activation again. Up to 32 MiB per block stays
// on the heap, and up to 512 MiB of free heap is kept. Called once at start-up
// by the applications; without glibc it does nothing. (On mobilenet_v3_small,
// batch 2, 2 threads: float 3.7 -> 3.1 ms, fake-quant 14.7 -> 4.4 ms.)
void keepFreedMemoryForReuse();

} // namespace qs
