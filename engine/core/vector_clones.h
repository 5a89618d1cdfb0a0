#pragma once
// QS_VECTOR_CLONES on a function with vectorisable loops gives it an AVX2 clone
// next to the baseline one, picked at load time. The AVX2 target has no FMA, so
// both clones do the same IEEE operations and give the same bits.
// QUANTSCOPE_NO_TARGET_CLONES builds only the baseline (to test it on an AVX2
// machine; and clang 14 cannot multiversion templates).
#ifdef QUANTSCOPE_NO_TARGET_CLONES
#define QS_VECTOR_CLONES
#else
#define QS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
