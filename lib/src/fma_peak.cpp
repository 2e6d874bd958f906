// ioattn::detail::fma_peak_loop: the register-only loop behind measure_fma_peak (isa.cpp),
// compiled once per instruction set like the kernels.
// Per iteration: kChains independent chains x = x * a + b on whole vectors, 2 flops per lane
// (one fused multiply-add where the ISA target has FMA, a multiply and an add on the baseline).
// kChains covers the latency of the multiply-add times the ports that issue it (4 cycles x 2
// ports on current x86 cores) with room to spare, and fits the register file (32 vector
// registers with AVX-512, 16 otherwise), so nothing but the arithmetic limits the rate.

#include <cstdint>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/simd.hpp>

namespace ioattn::detail::IOATTN_ISA {

/// Runs `iterations` of the chains; adds the flops done to `flops` and returns a value that
/// depends on every chain (so none is optimised away).
template <typename T>
double fma_peak_loop(std::int64_t iterations, std::int64_t& flops) {
    using kernels::Simd;
    using kernels::splat;
    using V = kernels::Vec<T>;
    constexpr int kChains = IOATTN_ISA_LEVEL == 3 ? 24 : 12;
    V x[kChains];
    for (int c = 0; c < kChains; ++c)
        x[c] = splat<T>(T(1) + T(c) * T(1e-3));
    // a < 1 and b small: the chains converge to b / (1 - a) = 1 and never overflow or go
    // denormal.
    const V a = splat<T>(T(0.999));
    const V b = splat<T>(T(0.001));
    for (std::int64_t it = 0; it < iterations; ++it) {
        _Pragma("GCC unroll 24") for (int c = 0; c < kChains; ++c) x[c] = x[c] * a + b;
    }
    V sum = x[0];
    for (int c = 1; c < kChains; ++c)
        sum += x[c];
    flops += iterations * kChains * Simd<T>::kLanes * 2;
    double s = 0.0;
    for (int l = 0; l < Simd<T>::kLanes; ++l)
        s += static_cast<double>(sum[l]);
    return s;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template double fma_peak_loop<Scalar>(std::int64_t, std::int64_t&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::detail::IOATTN_ISA
