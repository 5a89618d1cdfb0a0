#pragma once
// QS_VECTOR_CLONES on a function with vectorisable loops gives it AVX-512 and
// AVX2 clones next to the baseline one, picked at load time. Multiply-adds are
// not fused (GCC's avx512f target brings FMA; fp-contract=off keeps it out),
// so every clone does the same IEEE operations and gives the same bits.
// QUANTSCOPE_NO_TARGET_CLONES builds only the baseline (to test it on an AVX2
// machine; and clang 14 cannot multiversion templates).
#ifdef QUANTSCOPE_NO_TARGET_CLONES
#define QS_VECTOR_CLONES
#else
#define QS_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#endif
