#pragma once
// The bf16 dot-product tile kernel of the native bf16 kernels (dense and sparse:
// lib/src/dense/{forward,backward}_fused_bf16.cpp, sparse/src/kernels/tile/forward_fused_bf16.cpp),
// for the avx512bf16 target region (kernels/target_begin.hpp with IOATTN_TARGET_AVX512BF16);
// empty elsewhere.
//
//   dp_rows:  C[c][r] = (alpha[r] C[c][r] or 0) + sum_p A2(c, p) . B2[p][r]     (times `scale`)
//
// A2(c, p) and B2[p][r] are bf16 pairs (two consecutive terms of the sum, the even one in the
// low half) held in 32-bit words; vdpbf16ps multiplies the 16 lanes of a vector of B2 pairs
// with a broadcast pair of A2 and adds both products into fp32 lanes: 32 products per
// instruction, twice the fp32 FMA rate. The lanes are the query rows resident in the fused
// kernel, as in the float tile kernels (kernels/tile.hpp: S^T = K Q^T and O^T += V^T P^T).
// Blocking: 6 rows x 4 vectors = 24 accumulators, 4 B vectors and one broadcast of 32 registers.

#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(IOATTN_TARGET_AVX512BF16)

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// The bits of 4 bytes at p as a float (a bf16 pair; no arithmetic ever touches it as a float).
inline float pair_at(const void* p) {
    float w = 0;
    std::memcpy(&w, p, sizeof(w));
    return w;
}

/// A2(c, p) = the pair at elements 2p, 2p + 1 of bf16 row c at stride ld (elements): K rows of
/// the caller's view, read in place (even d), or a zero-padded copy (odd d).
struct PairRows {
    const bf16* a = nullptr;
    std::int64_t ld = 0;

    [[nodiscard]] float operator()(std::int64_t c, std::int64_t p) const {
        return pair_at(a + c * ld + 2 * p);
    }

    [[nodiscard]] PairRows from(std::int64_t c0) const { return {a + c0 * ld, ld}; }
};

/// A2(c, p) = words[p * ld + c]: pairs packed by depth (V_j's pairs of keys per column of V).
struct PairCols {
    const float* words = nullptr;
    std::int64_t ld = 0;

    [[nodiscard]] float operator()(std::int64_t c, std::int64_t p) const {
        return words[p * ld + c];
    }

    [[nodiscard]] PairCols from(std::int64_t c0) const { return {words + c0, ld}; }
};

/// NC rows x NV lane vectors of dp_rows over `depth` pairs.
template <int NC, int NV, typename A>
inline void dp_tile(A a,
                    const float* b,
                    std::int64_t ldb,
                    std::int64_t depth,
                    const float* alpha,
                    float scale,
                    float* c,
                    std::int64_t ldc) {
    __m512 acc[static_cast<std::size_t>(NC)][static_cast<std::size_t>(NV)];
    IOATTN_UNROLL
    for (int v = 0; v < NV; ++v) {
        const __m512 s = alpha != nullptr ? _mm512_loadu_ps(alpha + 16 * v) : _mm512_setzero_ps();
        IOATTN_UNROLL
        for (int r = 0; r < NC; ++r) // C = C * exp(m_old - m_new)
            acc[r][v] = alpha != nullptr ? _mm512_mul_ps(_mm512_loadu_ps(c + r * ldc + 16 * v), s)
                                         : _mm512_setzero_ps();
    }
    for (std::int64_t k = 0; k < depth; ++k) {
        __m512bh bv[static_cast<std::size_t>(NV)];
        IOATTN_UNROLL
        for (int v = 0; v < NV; ++v)
            bv[v] = as<__m512bh>(_mm512_loadu_ps(b + k * ldb + 16 * v));
        IOATTN_UNROLL
        for (int r = 0; r < NC; ++r) {
            const __m512bh s = as<__m512bh>(_mm512_set1_ps(a(r, k)));
            IOATTN_UNROLL
            for (int v = 0; v < NV; ++v)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], bv[v], s);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    IOATTN_UNROLL
    for (int r = 0; r < NC; ++r)
        IOATTN_UNROLL
    for (int v = 0; v < NV; ++v)
        _mm512_storeu_ps(c + r * ldc + 16 * v, _mm512_mul_ps(acc[r][v], sc));
}

/// C[0..rows)[0..n_vec lanes) over dp_tile, in the order of kernels::broadcast_rows (lane slabs
/// outer; a short row remainder joins the last whole tile and the two split evenly).
template <typename A>
inline void dp_rows(A a,
                    std::int64_t rows,
                    const float* b,
                    std::int64_t ldb,
                    std::int64_t depth,
                    std::int64_t n_vec,
                    const float* alpha,
                    float scale,
                    float* c,
                    std::int64_t ldc) {
    for (std::int64_t v = 0; v < n_vec; v += kTileVecs) {
        const float* al = alpha != nullptr ? alpha + v * 16 : nullptr;
        with_count<kTileVecs>(std::min<std::int64_t>(kTileVecs, n_vec - v), [&](auto nv) {
            const auto tile = [&](std::int64_t r, auto nr) {
                dp_tile<decltype(nr)::value, decltype(nv)::value>(
                    a.from(r), b + v * 16, ldb, depth, al, scale, c + r * ldc + v * 16, ldc);
            };
            const std::int64_t rem = rows % kTileRows;
            const bool merge = rem != 0 && rem <= kTileRows / 2 && rows > kTileRows;
            const std::int64_t whole = rows - rem - (merge ? kTileRows : 0);
            std::int64_t r = 0;
            for (; r < whole; r += kTileRows)
                tile(r, std::integral_constant<int, kTileRows>{});
            const std::int64_t first = (rows - r + 1) / 2;
            if (merge) {
                with_count<kTileRows - 1>(first, [&](auto nr) { tile(r, nr); });
                r += first;
            }
            with_count<kTileRows>(rows - r, [&](auto nr) { tile(r, nr); });
        });
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels

#endif // IOATTN_TARGET_AVX512BF16
