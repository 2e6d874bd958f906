// ioattn::detail::dot_peak_loop_bf16: the register-only loop behind measure_bf16_dot_peak
// (isa.cpp), compiled for the avx512 target with AVX512_BF16 only (lib/cmake/ioattn_isa.cmake).
// Per iteration: kChains independent chains x = vdpbf16ps(x, a, b) on whole vectors: 32 bf16
// products added in pairs into 16 fp32 lanes, 4 flops per lane (2 multiplies, 2 adds), the
// native bf16 kernels' instruction (dense/forward_fused_bf16.cpp). kChains covers the
// instruction's latency times the ports that issue it, and with the two operands fits the 32
// vector registers, so nothing but the arithmetic limits the rate.

#include <cstdint>

// The rest of this file is compiled for the avx512bf16 region (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/simd.hpp>

namespace ioattn::detail::IOATTN_ISA {

/// Runs `iterations` of the chains; adds the flops done to `flops` and returns a value that
/// depends on every chain (so none is optimised away).
double dot_peak_loop_bf16(std::int64_t iterations, std::int64_t& flops) {
    constexpr int kChains = 24;
    __m512 x[kChains];
    for (int c = 0; c < kChains; ++c)
        x[c] = _mm512_set1_ps(1.0F + static_cast<float>(c) * 1e-3F);
    // tiny products: the chains grow by 2^-40 per step and never overflow
    const __m512bh a = kernels::as<__m512bh>(_mm512_set1_epi32(0x2B802B80)); // (2^-40, 2^-40)
    const __m512bh b = kernels::as<__m512bh>(_mm512_set1_epi32(0x3F803F80)); // (1, 1)
    for (std::int64_t it = 0; it < iterations; ++it) {
        _Pragma("GCC unroll 24") for (int c = 0; c < kChains; ++c) x[c] =
            _mm512_dpbf16_ps(x[c], a, b);
    }
    __m512 sum = x[0];
    for (int c = 1; c < kChains; ++c)
        sum = _mm512_add_ps(sum, x[c]);
    flops += iterations * kChains * 16 * 4;
    const auto lanes = kernels::as<kernels::Vec<float>>(sum);
    double s = 0.0;
    for (int l = 0; l < 16; ++l)
        s += static_cast<double>(lanes[l]);
    return s;
}

} // namespace ioattn::detail::IOATTN_ISA
