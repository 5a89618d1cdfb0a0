#include "gemm/simd_level.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace qs::gemm {

SimdLevel simdLevel()
{
    static const SimdLevel level = [] {
        SimdLevel cap = SimdLevel::Avx512;
        if (const char* value = std::getenv("QUANTSCOPE_MAX_CPU_ISA"); value && *value) {
            const std::string name = value;
            if (name == "avx2")
                cap = SimdLevel::Avx2;
            else if (name == "baseline")
                cap = SimdLevel::None;
            else if (name != "avx512")
                throw Error("QUANTSCOPE_MAX_CPU_ISA='" + name + "' is not one of avx512, avx2, baseline");
        }
        SimdLevel cpu = SimdLevel::None;
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f"))
            cpu = SimdLevel::Avx512;
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            cpu = SimdLevel::Avx2;
#endif
        return std::min(cap, cpu);
    }();
    return level;
}

} // namespace qs::gemm
