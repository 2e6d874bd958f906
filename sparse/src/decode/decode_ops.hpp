#pragma once
// Building blocks of the decode chunk kernel (decode/decode_chunks.cpp), compiled for the ISA
// target of the including translation unit:
//   load_cached:  a vector of a cached row as working-type words (bf16: the exact 16-bit
//                 shift; fp16: vcvtph2ps; on load: a 16-bit cache is never copied)
//   block_scores: the scores of up to 4 query rows against kLanes / 4 cached rows (one
//                 accumulator per pair, one transposing reduction: kernels/element/element_ops.hpp)
//   tile_softmax: the online softmax step of one row over a tile of scores (base 2)
//   accumulate:   O rows = alpha O rows + P V over a tile, V read once per block of rows,
//                 several vectors of each row at once (independent multiply-add chains)

#include "kernels/element/element_ops.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/kernels/simd.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// A hook that does nothing (accumulate's on_key when nothing runs between its keys).
struct NoHook {
    void operator()(std::int64_t /*key*/) const {}
};

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

/// kLanes words of a cached row at p as a working-type vector: a load for a cache of the
/// working type; for bf16 a load of kLanes halves, zero-extended and shifted (exact); for fp16
/// the halves converted (exact).
template <typename T>
inline Vec<T> load_cached(const T* p) {
    return kernels::load(p);
}

// bf16 words of a double vector, as 16-bit and 32-bit integer vectors (non-dependent types:
// GCC drops vector_size on a type that depends on a template parameter)
using HalfD = std::uint16_t __attribute__((vector_size(Simd<double>::kLanes * 2)));
using WordD = std::uint32_t __attribute__((vector_size(Simd<double>::kLanes * 4)));
using FloatD = float __attribute__((vector_size(Simd<double>::kLanes * 4)));

template <typename T>
inline Vec<T> load_cached(const bf16* p) {
    if constexpr (std::is_same_v<T, float>) {
        return load_as<float>(p); // element_ops.hpp: the element forward's bf16 loads
    } else {
        HalfD h;
        std::memcpy(&h, p, sizeof(h));
        return __builtin_convertvector(kernels::as<FloatD>(__builtin_convertvector(h, WordD) << 16),
                                       Vec<double>);
    }
}

/// kLanes IEEE halves at p widened (exact): vcvtph2ps at the AVX-512 and AVX2 targets (the AVX2
/// target's CPUs all have F16C), fp16::widen lane by lane at the baseline.
inline Vec<float> halves_to_float(const fp16* p) {
#if IOATTN_ISA_LEVEL == 3
    __m256i h;
    std::memcpy(&h, p, sizeof(h));
    // the full-mask form: the unmasked intrinsic trips GCC 12's -Wmaybe-uninitialized
    return kernels::as<Vec<float>>(_mm512_maskz_cvtph_ps(0xFFFF, h));
#elif IOATTN_ISA_LEVEL == 2
    __m128i h;
    std::memcpy(&h, p, sizeof(h));
    return kernels::as<Vec<float>>(_mm256_cvtph_ps(h));
#else
    Vec<float> v;
    for (int j = 0; j < Simd<float>::kLanes; ++j)
        v[j] = fp16::widen(p[j].bits);
    return v;
#endif
}

template <typename T>
inline Vec<T> load_cached(const fp16* p) {
    if constexpr (std::is_same_v<T, float>) {
        return halves_to_float(p);
    } else { // kLanes halves as float, then double
        FloatD f;
        for (int j = 0; j < Simd<double>::kLanes; ++j)
            f[j] = fp16::widen(p[j].bits);
        return __builtin_convertvector(f, Vec<double>);
    }
}

/// The first n < kLanes words of a cached row at p (zeros past them): nothing past the row is
/// read.
template <typename T, typename C>
inline Vec<T> load_cached_partial(const C* p, std::int64_t n) {
    C part[static_cast<std::size_t>(Simd<T>::kLanes)] = {};
    std::memcpy(part, p, static_cast<std::size_t>(n) * sizeof(C));
    return load_cached<T>(part);
}

/// Lane r KB + t of the result (r < NR, t < KB = kLanes / 4): q[r] . k[t], the NR query rows
/// d words apart from q, the KB cached rows of d words at k[t]. One load of each K vector
/// serves the NR rows and one of each Q vector the KB keys: half a load per multiply-add at
/// NR = 4, against one for a row against kLanes keys. A lane's sum is the same tree whatever
/// the blocking (transpose_sums), so a score does not depend on the rows beside it.
template <typename T, int NR, typename C>
inline Vec<T> block_scores(const T* q, const C* const* k, std::int64_t d) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr int KB = kL / 4 > 0 ? kL / 4 : 1;
    static_assert(NR * KB <= kL);
    Vec<T> acc[static_cast<std::size_t>(NR * KB)] = {};
    Vec<T> kv[static_cast<std::size_t>(KB)];
    std::int64_t x = 0;
    for (; x + kL <= d; x += kL) {
        IOATTN_ELEMENT_UNROLL
        for (int t = 0; t < KB; ++t)
            kv[t] = load_cached<T>(k[t] + x);
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r) {
            const Vec<T> qv = kernels::load(q + r * d + x);
            IOATTN_ELEMENT_UNROLL
            for (int t = 0; t < KB; ++t)
                acc[r * KB + t] = kernels::fmadd(qv, kv[t], acc[r * KB + t]);
        }
    }
    if (x < d) { // the tail of the rows: partial loads, so nothing past a row is touched
        IOATTN_ELEMENT_UNROLL
        for (int t = 0; t < KB; ++t)
            kv[t] = load_cached_partial<T>(k[t] + x, d - x);
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r) {
            const Vec<T> qv = load_partial(q + r * d + x, d - x);
            IOATTN_ELEMENT_UNROLL
            for (int t = 0; t < KB; ++t)
                acc[r * KB + t] = kernels::fmadd(qv, kv[t], acc[r * KB + t]);
        }
    }
    return transpose_sums<T, NR * KB>(acc);
}

#if defined(IOATTN_TARGET_AVX512BF16)
/// block_scores of bf16 query rows against a bf16 cache with vdpbf16ps: lane r KB + t =
/// q[r] . k[t] (KB = 4), 32 words of a row per instruction, no widening. Each product of two
/// bf16 words is exact in fp32 and the sums are fp32, in pairs of words (word 2i + 1, then 2i,
/// each add rounded to nearest even); bf16 subnormal words count as 0 (the instruction's DAZ).
/// A row's tail of d mod 32 words is a masked load (nothing past a row is read).
template <int NR>
inline Vec<float> block_scores_bf16(const bf16* q, const bf16* const* k, std::int64_t d) {
    constexpr int KB = 4;
    static_assert(NR * KB <= 16);
    Vec<float> acc[static_cast<std::size_t>(NR * KB)] = {};
    const auto step = [&](std::int64_t x, __mmask32 keep) {
        __m512i kv[KB];
        IOATTN_ELEMENT_UNROLL
        for (int t = 0; t < KB; ++t)
            kv[t] = _mm512_maskz_loadu_epi16(keep, k[t] + x);
        IOATTN_ELEMENT_UNROLL
        for (int r = 0; r < NR; ++r) {
            const __m512i qv = _mm512_maskz_loadu_epi16(keep, q + r * d + x);
            IOATTN_ELEMENT_UNROLL
            for (int t = 0; t < KB; ++t)
                acc[r * KB + t] = dp_step(acc[r * KB + t], qv, kv[t]); // element_ops.hpp
        }
    };
    std::int64_t x = 0;
    for (; x + 32 <= d; x += 32)
        step(x, ~__mmask32{0});
    if (x < d)
        step(x, static_cast<__mmask32>((std::uint64_t{1} << (d - x)) - 1));
    return transpose_sums<float, NR * KB>(acc);
}
#endif

/// The online softmax step of one row over a tile's scores s[0, kTile) (base 2; score i
/// visible when bit i of `visible` is set, the rest ignored): m' = max(m, max s), alpha =
/// 2^(m - m'), s <- 2^(s - m') (0 where hidden), l = alpha l + sum s. A row that has seen only -inf scores stays at P = 0 (m' = -inf is
/// taken as 0, so a NaN score still reaches l); a score equal to m' gives exactly 1 (+inf
/// scores give 1, not inf - inf = NaN). Returns alpha.
template <typename T, int kTile>
inline T tile_softmax(T* s, std::uint64_t visible, T& m, T& l) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr int kNV = kTile / kL;
    static_assert(kTile % kL == 0);
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    using I = typename Simd<T>::I;
    using E = std::remove_cvref_t<decltype(I{}[0])>;
    static_assert(kTile <= 64);
    I lane{};
    for (int j = 0; j < kL; ++j)
        lane[j] = static_cast<E>(j);
    Vec<T> sv[static_cast<std::size_t>(kNV)];
    Vec<T> mv = kernels::splat<T>(kNegInf);
    IOATTN_ELEMENT_UNROLL
    for (int j = 0; j < kNV; ++j) {
        const auto bits = static_cast<E>((visible >> (j * kL)) & ((std::uint64_t{1} << kL) - 1));
        const auto seen = ((I{} + bits) >> lane) & static_cast<E>(1);
        sv[j] = seen != static_cast<E>(0) ? kernels::load(s + j * kL) : kernels::splat<T>(kNegInf);
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
template <typename T, int NR, int kTile, typename C, typename OnKey = NoHook>
inline void accumulate(const T* p,
                       const C* const* v,
                       std::int64_t n,
                       std::int64_t d_v,
                       const T* alpha,
                       T* o,
                       std::int64_t ldo,
                       OnKey&& on_key = OnKey{}) {
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
            if (x == 0)
                on_key(t);
            Vec<T> vv[static_cast<std::size_t>(XB)];
            IOATTN_ELEMENT_UNROLL
            for (int b = 0; b < XB; ++b)
                vv[b] = load_cached<T>(v[t] + x + b * kL);
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
            const Vec<T> vv = load_cached_partial<T>(v[t] + x, w);
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
