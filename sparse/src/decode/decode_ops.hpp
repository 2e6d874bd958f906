#pragma once
// Building blocks of the decode chunk kernel (decode/decode_chunks.cpp), compiled for the ISA
// target of the including translation unit:
//   widen_row:    a cached row as working-type words (bf16: the exact 16-bit shift)
//   row_scores:   the scores of one query row against kLanes cached rows (one accumulator per
//                 cached row, one transposing reduction: kernels/element/element_ops.hpp)
//   tile_softmax: the online softmax step of one row over a tile of scores (base 2)
//   accumulate:   O rows = alpha O rows + P V over a tile, V read once per block of rows,
//                 several vectors of each row at once (independent multiply-add chains)

#include "kernels/element/element_ops.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/kernels/simd.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

template <typename T, int... P>
inline Vec<T> broadcast_lanes(T x, std::integer_sequence<int, P...> /*lanes*/) {
    return Vec<T>{((void)P, x)...};
}

/// x in every lane (kernels::splat adds x to a zero vector: a scalar add before each broadcast,
/// kept because 0 + -0 is +0).
template <typename T>
inline Vec<T> broadcast(T x) {
    return broadcast_lanes<T>(x, std::make_integer_sequence<int, Simd<T>::kLanes>{});
}

/// out[x] = in[x] for x < n, as the working type (bf16 widened exactly).
template <typename Scalar>
inline void widen_row(const bf16* in, Scalar* out, std::int64_t n) {
    if constexpr (std::is_same_v<Scalar, float>) {
        constexpr int kL = Simd<float>::kLanes;
        using U16 = std::uint16_t __attribute__((vector_size(kL * 2)));
        using U32 = std::uint32_t __attribute__((vector_size(kL * 4)));
        std::int64_t x = 0;
#if IOATTN_ISA_LEVEL == 3
        // one zero-extending load and one shift per 16 words (the generic form below is split
        // into 256-bit halves by the compiler)
        for (; x + 16 <= n; x += 16) {
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + x));
            const __m512i w = _mm512_maskz_cvtepu16_epi32(0xFFFF, h); // maskz: no undefined source
            _mm512_storeu_si512(out + x, _mm512_maskz_slli_epi32(0xFFFF, w, 16));
        }
#endif
        for (; x + kL <= n; x += kL) {
            U16 h;
            std::memcpy(&h, in + x, sizeof(h));
            const U32 w = __builtin_convertvector(h, U32) << 16;
            std::memcpy(out + x, &w, sizeof(w));
        }
        for (; x < n; ++x)
            out[x] = bf16::widen(in[x].bits);
    } else {
        for (std::int64_t x = 0; x < n; ++x)
            out[x] = static_cast<Scalar>(bf16::widen(in[x].bits));
    }
}

/// Lane t of the result: (q . k[t]) for t < NK (0 past it), q and k[t] rows of d words. The
/// tail of d is read with a partial load, so nothing past a row is touched.
template <typename T, int NK>
inline Vec<T> row_scores(const T* q, const T* const* k, std::int64_t d) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[static_cast<std::size_t>(kL)] = {};
    std::int64_t x = 0;
    for (; x + kL <= d; x += kL) {
        const Vec<T> qv = kernels::load(q + x);
        IOATTN_ELEMENT_UNROLL
        for (int t = 0; t < NK; ++t)
            acc[t] = kernels::fmadd(qv, kernels::load(k[t] + x), acc[t]);
    }
    if (x < d) {
        const Vec<T> qv = load_partial(q + x, d - x);
        IOATTN_ELEMENT_UNROLL
        for (int t = 0; t < NK; ++t)
            acc[t] = kernels::fmadd(qv, load_partial(k[t] + x, d - x), acc[t]);
    }
    return transpose_sums<T, NK>(acc);
}

/// The online softmax step of one row over a tile's scores s[0, kTile) (base 2; those in
/// [lo, hi) visible, the rest ignored): m' = max(m, max s), alpha = 2^(m - m'),
/// s <- 2^(s - m') (0 outside [lo, hi)), l = alpha l + sum s. A row that has seen only -inf scores stays at P = 0 (m' = -inf is
/// taken as 0, so a NaN score still reaches l); a score equal to m' gives exactly 1 (+inf
/// scores give 1, not inf - inf = NaN). Returns alpha.
template <typename T, int kTile>
inline T tile_softmax(T* s, std::int64_t lo, std::int64_t hi, T& m, T& l) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr int kNV = kTile / kL;
    static_assert(kTile % kL == 0);
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    using I = typename Simd<T>::I;
    using E = std::remove_cvref_t<decltype(I{}[0])>;
    I lane{};
    for (int j = 0; j < kL; ++j)
        lane[j] = static_cast<E>(j);
    Vec<T> sv[static_cast<std::size_t>(kNV)];
    Vec<T> mv = kernels::splat<T>(kNegInf);
    IOATTN_ELEMENT_UNROLL
    for (int j = 0; j < kNV; ++j) {
        const auto at = lane + static_cast<E>(j * kL);
        const auto visible = (at >= static_cast<E>(lo)) & (at < static_cast<E>(hi));
        sv[j] = visible ? kernels::load(s + j * kL) : kernels::splat<T>(kNegInf);
        mv = kernels::max_ignoring_nan<T>(mv, sv[j]);
    }
    const T m_tile = lanes_max<T>(mv);
    const T m_new = m_tile > m ? m_tile : m;
    const T m_safe = m_new == kNegInf ? T(0) : m_new;
    const T alpha = m == m_safe ? T(1) : std::exp2(m - m_safe);
    const Vec<T> ms = kernels::splat<T>(m_safe);
    Vec<T> sum{};
    IOATTN_ELEMENT_UNROLL
    for (int j = 0; j < kNV; ++j) {
        const Vec<T> p = kernels::exp2_diff<T>(sv[j], ms);
        kernels::store(s + j * kL, p);
        sum += p;
    }
    l = alpha * l + lanes_sum<T>(sum);
    m = m_new;
    return alpha;
}

/// For r < NR: o[r] = alpha[r] o[r] + sum_{t < n} p[r][t] v[t] (o rows ldo apart, p rows kTile
/// apart, v[t] rows of d_v words). Each V vector is loaded once for the NR rows; kXB vectors of
/// a row are updated together, so NR kXB independent multiply-add chains hide the latency.
/// Every element sums its terms in t order, whatever the blocking.
template <typename T, int NR, int kTile>
inline void accumulate(const T* p,
                       const T* const* v,
                       std::int64_t n,
                       std::int64_t d_v,
                       const T* alpha,
                       T* o,
                       std::int64_t ldo) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr int kXB = 16 / NR > 8 ? 8 : 16 / NR;
    const auto block = [&](std::int64_t x, auto xb_count) {
        constexpr int XB = decltype(xb_count)::value;
        Vec<T> acc[static_cast<std::size_t>(NR)][static_cast<std::size_t>(XB)];
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r)
            IOATTN_ELEMENT_UNROLL
        for (int b = 0; b < XB; ++b)
            acc[r][b] = kernels::load(o + r * ldo + x + b * kL) * alpha[r];
        for (std::int64_t t = 0; t < n; ++t) {
            Vec<T> vv[static_cast<std::size_t>(XB)];
            IOATTN_ELEMENT_UNROLL
            for (int b = 0; b < XB; ++b)
                vv[b] = kernels::load(v[t] + x + b * kL);
            IOATTN_ELEMENT_UNROLL
            for (int r = 0; r < NR; ++r) {
                const Vec<T> pr = broadcast<T>(p[r * kTile + t]);
                IOATTN_ELEMENT_UNROLL
                for (int b = 0; b < XB; ++b)
                    acc[r][b] = kernels::fmadd(pr, vv[b], acc[r][b]);
            }
        }
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r)
            IOATTN_ELEMENT_UNROLL
        for (int b = 0; b < XB; ++b)
            kernels::store(o + r * ldo + x + b * kL, acc[r][b]);
    };
    std::int64_t x = 0;
    for (; x + kXB * kL <= d_v; x += kXB * kL)
        block(x, std::integral_constant<int, kXB>{});
    for (; x + kL <= d_v; x += kL)
        block(x, std::integral_constant<int, 1>{});
    if (x < d_v) { // the tail of a row: partial loads, so nothing past a row is touched
        const std::int64_t w = d_v - x;
        Vec<T> acc[static_cast<std::size_t>(NR)];
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r)
            acc[r] = load_partial(o + r * ldo + x, w) * alpha[r];
        for (std::int64_t t = 0; t < n; ++t) {
            const Vec<T> vv = load_partial(v[t] + x, w);
            IOATTN_ELEMENT_UNROLL
            for (int r = 0; r < NR; ++r)
                acc[r] = kernels::fmadd(broadcast<T>(p[r * kTile + t]), vv, acc[r]);
        }
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r)
            std::memcpy(o + r * ldo + x, &acc[r], static_cast<std::size_t>(w) * sizeof(T));
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
