#pragma once
// A 16 x 16 float block transposed in registers: what the depthwise kernel's
// channel interleaving and the position-rows convolution's output share.

namespace qs::ops {

// Sixteen floats, aligned as a float (loads and stores may be unaligned).
using Float16 = float __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float))));

// rows[i][j] <-> rows[j][i] for a 16 x 16 block in registers: four butterfly
// stages; at block size b, row i (with i & b == 0) and row i + b swap their
// off-diagonal b x b blocks.
[[gnu::always_inline]] inline void transpose16(Float16 rows[16])
{
#if defined(__clang__)
    // Clang has no __builtin_shuffle with a runtime mask; the fuzzing and
    // sanitizer builds use clang, where a plain swap is fast enough.
    for (int i = 0; i < 16; ++i)
        for (int j = i + 1; j < 16; ++j) {
            const float t = rows[i][j];
            rows[i][j] = rows[j][i];
            rows[j][i] = t;
        }
#else
    using Index = int __attribute__((vector_size(16 * sizeof(int))));
    auto stage = [&]<int B>() {
        Index lo, hi;
        for (int j = 0; j < 16; ++j) {
            lo[j] = (j & B) ? 16 + j - B : j;
            hi[j] = (j & B) ? 16 + j : j + B;
        }
        for (int i = 0; i < 16; ++i)
            if ((i & B) == 0) {
                const Float16 a = rows[i], b = rows[i + B];
                rows[i] = __builtin_shuffle(a, b, lo);
                rows[i + B] = __builtin_shuffle(a, b, hi);
            }
    };
    stage.template operator()<8>();
    stage.template operator()<4>();
    stage.template operator()<2>();
    stage.template operator()<1>();
#endif
}

} // namespace qs::ops
