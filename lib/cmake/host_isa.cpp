// Prints the best ISA target of ioattn this CPU and its operating system run (avx512, avx2 or
// sse2), for IOATTN_ISA_TARGETS=host (ioattn_isa.cmake). GCC's cpu model checks the OS state
// bits too; the library's own run-time check (src/isa.cpp) stays the one that dispatches.
#include <cstdio>

int main() {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                      __builtin_cpu_supports("popcnt");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl");
    std::puts(avx512 ? "avx512" : avx2 ? "avx2" : "sse2");
    return 0;
}
