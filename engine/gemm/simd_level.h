#pragma once
// Which vector instructions the hand-written kernels (the GEMM's micro-kernels,
// Conv's depthwise paths, the fused activations) may use.

namespace qs::gemm {

// The widest vector instructions the kernels use: what the CPU offers, capped
// by the environment variable QUANTSCOPE_MAX_CPU_ISA (avx512, avx2 or baseline;
// read once) so that tests can run every path on one machine.
enum class SimdLevel { None, Avx2, Avx512 };
SimdLevel simdLevel();

} // namespace qs::gemm
