#pragma once
// Packing into bf16 pairs for the native bf16 kernels (dense and sparse, as kernels/tile_bf16.hpp),
// for the avx512bf16 target region (empty elsewhere): the operands of
// kernels/tile_bf16.hpp's dp_rows hold two consecutive terms of a sum (the even one in the low
// half) in one 32-bit word.
//
//   pair_word / put_word:  one pair of a bf16 row, and its store into a float-typed slot
//   pack_pairs:            Xp[p][x] = (X[2p][x], X[2p + 1][x]) of bf16 rows (pairs over rows)
//   pair_lanes:            two fp32 vectors rounded to one vector of bf16 pairs
//   pack_p:                fp32 rows rounded to bf16 pairs over rows, in place
//   p_at:                  one element of pack_p's pairs, widened (the scalar edge paths)
//   all_finite:            whether bf16 rows hold no Inf or NaN

#include <ioattn/bf16.hpp>
#include <ioattn/kernels/simd.hpp>

#include <cstdint>
#include <cstring>

#if defined(IOATTN_TARGET_AVX512BF16)

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// Pairs of n terms.
inline std::int64_t pairs(std::int64_t n) {
    return (n + 1) / 2;
}

/// The pair (x[2p], x[2p + 1]) of a bf16 row of n elements, zero past n.
inline std::uint32_t pair_word(const bf16* x, std::int64_t p, std::int64_t n) {
    const std::uint32_t lo = x[2 * p].bits;
    const std::uint32_t hi = 2 * p + 1 < n ? std::uint32_t{x[2 * p + 1].bits} : 0U;
    return lo | (hi << 16U);
}

inline void put_word(float* at, std::uint32_t w) {
    std::memcpy(at, &w, sizeof(w));
}

/// out[p * ldo + x] = (X[2p][x], X[2p + 1][x]) for p < ceil(n/2), x < w: pairs over the n rows
/// of X (stride ldx), the last one zero-padded for odd n; 16 columns at a time (a scalar pack
/// would cost about one instruction per pair against 1/n_vec of a vdpbf16ps).
inline void pack_pairs(
    const bf16* x, std::int64_t ldx, std::int64_t n, std::int64_t w, float* out, std::int64_t ldo) {
    constexpr std::int64_t kL = 16;
    for (std::int64_t p = 0; p < pairs(n); ++p) {
        const bf16* x0 = x + 2 * p * ldx;
        const bf16* x1 = 2 * p + 1 < n ? x0 + ldx : nullptr;
        float* o = out + p * ldo;
        std::int64_t c = 0;
        using Half = std::uint16_t __attribute__((vector_size(32)));
        using Word = std::uint32_t __attribute__((vector_size(64)));
        for (; c + kL <= w; c += kL) {
            Half a{}, b{};
            std::memcpy(&a, x0 + c, sizeof(a));
            if (x1 != nullptr)
                std::memcpy(&b, x1 + c, sizeof(b));
            const Word v =
                __builtin_convertvector(a, Word) | (__builtin_convertvector(b, Word) << 16U);
            std::memcpy(o + c, &v, sizeof(v));
        }
        for (; c < w; ++c) {
            const std::uint32_t lo = x0[c].bits;
            const std::uint32_t hi = x1 != nullptr ? std::uint32_t{x1[c].bits} : 0U;
            put_word(o + c, lo | (hi << 16U));
        }
    }
}

/// Lane r of the result: the bf16 pair (lo[r], hi[r]), each rounded to nearest even.
inline __m512i pair_lanes(__m512 lo, __m512 hi) {
    alignas(64) static constexpr std::int16_t kInterleave[32] = {
        0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    // words 0..15: lo's lanes, 16..31: hi's; then a pair per lane
    const auto both = as<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), both);
}

/// Tp[p][r] = bf16(T[2p][r], T[2p + 1][r]) (round to nearest even), in place over the first
/// ceil(n/2) of the n fp32 rows of T (stride ld, n_vec vectors of lanes).
inline void pack_p(float* t, std::int64_t ld, std::int64_t n, std::int64_t n_vec) {
    constexpr std::int64_t kL = 16;
    for (std::int64_t p = 0; p < pairs(n); ++p)
        for (std::int64_t v = 0; v < n_vec; ++v) {
            const __m512 p0 = _mm512_loadu_ps(t + 2 * p * ld + v * kL);
            const __m512 p1 = 2 * p + 1 < n ? _mm512_loadu_ps(t + (2 * p + 1) * ld + v * kL)
                                            : _mm512_setzero_ps();
            _mm512_storeu_si512(t + p * ld + v * kL, pair_lanes(p0, p1));
        }
}

/// T[row][r] as pack_p stored it (rounded to bf16), widened.
inline float p_at(const float* tp, std::int64_t ld, std::int64_t row, std::int64_t r) {
    std::uint32_t w = 0;
    std::memcpy(&w, tp + row / 2 * ld + r, sizeof(w));
    return bf16::widen(static_cast<std::uint16_t>(row % 2 == 0 ? w : w >> 16U));
}

/// Whether the bf16 rows [0, n) of width w at stride ld are all finite (exponent not all ones).
inline bool all_finite(const bf16* a, std::int64_t ld, std::int64_t n, std::int64_t w) {
    unsigned bad = 0;
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t x = 0; x < w; ++x)
            bad |= static_cast<unsigned>((std::uint32_t{a[i * ld + x].bits} & 0x7F80U) == 0x7F80U);
    return bad == 0;
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels

#endif // IOATTN_TARGET_AVX512BF16
