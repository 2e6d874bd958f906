#pragma once
// P V of the element forward on bf16 V rows in the avx512bf16 target region: batch_axpy
// (element_ops.hpp) on pairs of keys with vdpbf16ps.
//
//   dp_axpy: acc[0, n) = alpha acc + sum_k w[k] rows[k][0, n), the NK weights rounded to bf16
//            (round to nearest even; vcvtne2ps2bf16 flushes a weight below 2^-126 to 0).
//
// Keys go in pairs (2t, 2t + 1): unpacklo/hi_epi16 interleave 32 words of the two V rows, so
// fp32 lane 4L + i of the low vector holds words 8L + i of both rows and the high vector words
// 8L + 4 + i (L the 128-bit lane, i < 4); the accumulator is permuted into that order once per
// slice, takes both keys' exact products per vdpbf16ps (key 2t + 1 first, then key 2t, each
// sum rounded to nearest even) and is permuted back before it is stored. An odd last key pairs
// with zeros. Per pair of keys and 32 words: two loads, two shuffles and two vdpbf16ps, against
// four widening loads (vpmovzxwd and a shift each) and four FMAs on widened rows.
// Rounding the weights adds at most u max|V| (u = 2^-8) to O (docs/design.md section 16), as the
// tile variant's P does.

#include <ioattn/bf16.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(IOATTN_TARGET_AVX512BF16)
namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The weights w[0, NK) as bf16 pairs: word t of the result holds bf16(w[2t]) in its low half
/// and bf16(w[2t + 1]) in its high half (0 past NK).
template <int NK>
inline void weight_pairs(const float* w, std::uint32_t* pairs) {
    static_assert(NK <= 32);
    constexpr auto kLo = NK >= 16 ? 0xFFFFU : (1U << NK) - 1U;
    constexpr auto kHi = NK <= 16 ? 0U : NK >= 32 ? 0xFFFFU : (1U << (NK - 16)) - 1U;
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(kLo), w);
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(kHi), w + 16);
    _mm512_storeu_si512(pairs, kernels::as<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

/// One slice of dp_axpy: kC chunks of 32 words from word z0 (the last chunk's high half only
/// when hi_last), accumulator in registers.
template <int NK, int kC>
inline void dp_axpy_slice(float* acc,
                          const float* alpha,
                          const std::uint32_t* pairs,
                          const bf16* const* rows,
                          std::int64_t z0,
                          std::int64_t n,
                          bool hi_last) {
    // fp32 lane 4L + i of the low (high) vector: word 8L + i (8L + 4 + i) of a chunk
    const __m512i to_lo =
        _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0);
    const __m512i to_hi =
        _mm512_set_epi32(31, 30, 29, 28, 23, 22, 21, 20, 15, 14, 13, 12, 7, 6, 5, 4);
    // word j = 8L + r of a chunk: r < 4 from the low vector's lane 4L + r, else the high's
    const __m512i back_0 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    const __m512i back_1 =
        _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
    __m512 a_lo[static_cast<std::size_t>(kC)], a_hi[static_cast<std::size_t>(kC)];
    _Pragma("GCC unroll 8") for (int c = 0; c < kC; ++c) {
        const float* p = acc + z0 + 32 * c;
        const bool hi = c + 1 < kC || hi_last;
        __m512 x0 = _mm512_loadu_ps(p);
        __m512 x1 = hi ? _mm512_loadu_ps(p + 16) : _mm512_setzero_ps();
        if (alpha != nullptr) {
            x0 = _mm512_mul_ps(x0, _mm512_set1_ps(*alpha));
            x1 = _mm512_mul_ps(x1, _mm512_set1_ps(*alpha));
        }
        a_lo[c] = _mm512_permutex2var_ps(x0, to_lo, x1);
        a_hi[c] = _mm512_permutex2var_ps(x0, to_hi, x1);
    }
    const auto chunk = [&](const bf16* r, int c) {
        const std::int64_t z = z0 + 32 * c;
        if (z + 32 <= n)
            return _mm512_loadu_si512(r + z);
        return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ULL << (n - z)) - 1U), r + z);
    };
    _Pragma("GCC unroll 16") for (int t = 0; t + 1 < NK; t += 2) {
        const __m512bh wp =
            kernels::as<__m512bh>(_mm512_set1_epi32(static_cast<int>(pairs[t / 2])));
        _Pragma("GCC unroll 8") for (int c = 0; c < kC; ++c) {
            const __m512i ya = chunk(rows[t], c), yb = chunk(rows[t + 1], c);
            a_lo[c] =
                _mm512_dpbf16_ps(a_lo[c], kernels::as<__m512bh>(_mm512_unpacklo_epi16(ya, yb)), wp);
            a_hi[c] =
                _mm512_dpbf16_ps(a_hi[c], kernels::as<__m512bh>(_mm512_unpackhi_epi16(ya, yb)), wp);
        }
    }
    // an odd last key pairs with zeros (as a condition inside the loop above: 1.03x the time of
    // random:0.02's bf16 forward, 9 alternated rounds)
    if constexpr (NK % 2 == 1) {
        const __m512bh wp =
            kernels::as<__m512bh>(_mm512_set1_epi32(static_cast<int>(pairs[NK / 2])));
        _Pragma("GCC unroll 8") for (int c = 0; c < kC; ++c) {
            const __m512i ya = chunk(rows[NK - 1], c), yb = _mm512_setzero_si512();
            a_lo[c] =
                _mm512_dpbf16_ps(a_lo[c], kernels::as<__m512bh>(_mm512_unpacklo_epi16(ya, yb)), wp);
            a_hi[c] =
                _mm512_dpbf16_ps(a_hi[c], kernels::as<__m512bh>(_mm512_unpackhi_epi16(ya, yb)), wp);
        }
    }
    _Pragma("GCC unroll 8") for (int c = 0; c < kC; ++c) {
        float* p = acc + z0 + 32 * c;
        _mm512_storeu_ps(p, _mm512_permutex2var_ps(a_lo[c], back_0, a_hi[c]));
        if (c + 1 < kC || hi_last)
            _mm512_storeu_ps(p + 16, _mm512_permutex2var_ps(a_lo[c], back_1, a_hi[c]));
    }
}

/// batch_axpy (element_ops.hpp) of bf16 rows on pairs of keys: acc[0, n) = alpha acc +
/// sum_{k < NK} bf16(w[k]) rows[k][0, n) (alpha null: no rescale). acc is zero-padded to whole
/// vectors of 16 words; rows[k] are read only within their n words (masked loads for the
/// tail). Slices of 4 chunks of 32 words: 8 accumulator vectors in registers.
template <int NK>
inline void
dp_axpy(float* acc, const float* alpha, const float* w, const bf16* const* rows, std::int64_t n) {
    alignas(64) std::uint32_t pairs[16];
    weight_pairs<NK>(w, pairs);
    constexpr int kSlice = 4;
    const std::int64_t chunks = (n + 31) / 32;
    const bool hi_last = n % 32 == 0 || n % 32 > 16; // the last chunk's second vector exists
    for (std::int64_t c0 = 0; c0 < chunks; c0 += kSlice) {
        const std::int64_t nc = std::min<std::int64_t>(kSlice, chunks - c0);
        const bool hi = c0 + nc < chunks || hi_last;
        kernels::with_count<kSlice>(nc, [&](auto c) {
            dp_axpy_slice<NK, decltype(c)::value>(acc, alpha, pairs, rows, 32 * c0, n, hi);
        });
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
#endif
