#pragma once
// Building blocks of the element kernels (forward_element.cpp, backward_element.cpp): a
// resident row against a batch of gathered rows, one vector of lanes per batch.
//
//   batch_dots:     s[k] = x . Y_k for the NK <= kLanes rows Y_k of a batch (NK dot products in
//                   flight, one accumulator each, then one transposing reduction: lane k of the
//                   result is key k); paired_dots: s[k] = X_k . Y_k, each pair its own row X_k
//   batch_axpy:     acc = alpha acc + sum_k w[k] Y_k over a row of `n` words (the accumulator
//                   in registers a slice of 8 vectors at a time; bf16 rows in the avx512bf16
//                   target region: on pairs of keys, dp_axpy.hpp)
//   pair_dots, pair_axpy: the same over a batch of up to two vectors of rows (the kernels'
//                   batch: one softmax update per 2 kLanes pairs)
//   dp_dots_of, pair_dp_dots: batch_dots, pair_dots on bf16 rows in pairs (vdpbf16ps), for
//                   the forward's scores on bf16 views in the avx512bf16 target region
//   lanes_sum, lanes_max: horizontal reductions of one vector
//   key_batch:      one key's backward terms against a batch of gathered queries
//
// Rows gathered in place (K, V, Q, dO rows of the inputs) are read with whole-vector loads up
// to the last full vector and a partial load for the tail, so nothing past a row is read. They
// are stored as the arithmetic type T or, for the forward's K and V rows, as bf16 (load_as:
// widened on load, a 16-bit shift, exact), so the fp32 and bf16 forwards are one code; where
// the target has AVX512_BF16 the forward's scores take K's bf16 pairs as they are (dp_dots_of).
// No software prefetch: the kernels batch independent rows, so out-of-order execution keeps as
// many misses in flight as the line-fill buffers allow, and a prefetch instruction waits for
// one of them: a prefetch of the next rows costs random:0.02's forward 5-8% (docs/performance.md
// section 11).

#include "kernels/element/dp_axpy.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

// Every loop over a batch's keys or a slice's vectors is unrolled, so that the accumulator
// arrays live in registers (otherwise GCC keeps them on the stack: 4x slower under perf).
#define IOATTN_ELEMENT_UNROLL _Pragma("GCC unroll 16")

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

using kernels::Simd;
using kernels::Vec;

/// The n < kLanes words at p in the low lanes of a vector, the rest 0.
template <typename T>
inline Vec<T> load_partial(const T* p, std::int64_t n) {
    Vec<T> v{};
    std::memcpy(&v, p, static_cast<std::size_t>(n) * sizeof(T));
    return v;
}

/// A vector of T from the kLanes words of storage S at p: T's own words, or bf16 widened to
/// float (exact: the bf16 bits are the upper half of the float's).
template <typename T, typename S>
inline Vec<T> load_as(const S* p) {
    if constexpr (std::is_same_v<S, T>) {
        return kernels::load(p);
    } else {
        static_assert(std::is_same_v<S, bf16> && std::is_same_v<T, float>);
#if IOATTN_ISA_LEVEL == 3
        // vpmovzxwd from memory and vpslld (__builtin_convertvector of the 16 words goes
        // through two ymm halves: five instructions a vector). The full-mask form: the
        // unmasked intrinsic trips GCC 12's -Wmaybe-uninitialized (kernels/simd.hpp exp2).
        using Word = std::uint32_t __attribute__((vector_size(64)));
        __m256i h;
        std::memcpy(&h, p, sizeof(h));
        return kernels::as<Vec<T>>(kernels::as<Word>(_mm512_maskz_cvtepu16_epi32(0xFFFF, h))
                                   << 16U);
#else
        using Half = std::uint16_t __attribute__((vector_size(kernels::kVectorBytes / 2)));
        using Word = std::uint32_t __attribute__((vector_size(kernels::kVectorBytes)));
        Half h;
        std::memcpy(&h, p, sizeof(h));
        return kernels::as<Vec<T>>(__builtin_convertvector(h, Word) << 16U);
#endif
    }
}

/// load_as of the n < kLanes words at p in the low lanes, the rest 0.
template <typename T, typename S>
inline Vec<T> load_partial_as(const S* p, std::int64_t n) {
    if constexpr (std::is_same_v<S, T>) {
        return load_partial(p, n);
    } else {
        S h[static_cast<std::size_t>(Simd<T>::kLanes)] = {};
        std::memcpy(h, p, static_cast<std::size_t>(n) * sizeof(S));
        return load_as<T>(h);
    }
}

/// Index of lane p of the folded pair (a, b) (Hi: the upper half of each segment): a and b
/// each hold N / W rows' partial sums in segments of W lanes; the fold holds 2N / W rows in
/// segments of W / 2 lanes, a's rows first.
template <int N, int W, bool Hi>
constexpr int fold_index(int p) {
    const int half = W / 2, g = p / half, w = p % half, rows = N / W;
    return (g < rows ? 0 : N) + (g % rows) * W + w + (Hi ? half : 0);
}

template <typename V, int N, int W, int... P>
inline V fold(V a, V b, std::integer_sequence<int, P...> /*lanes*/) {
    return __builtin_shufflevector(a, b, fold_index<N, W, false>(P)...) +
           __builtin_shufflevector(a, b, fold_index<N, W, true>(P)...);
}

/// One stage of transpose_sums: the live vectors v[0, Live) folded in pairs into v[0,
/// ceil(Live / 2)), segments of W lanes into W / 2; vectors past Live are zero and are not read.
template <typename T, int Live, int W>
inline void fold_stage(Vec<T>* v) {
    constexpr int kN = Simd<T>::kLanes;
    constexpr auto kSeq = std::make_integer_sequence<int, kN>{};
    IOATTN_ELEMENT_UNROLL
    for (int i = 0; i < (Live + 1) / 2; ++i)
        v[i] = fold<Vec<T>, kN, W>(v[2 * i], 2 * i + 1 < Live ? v[2 * i + 1] : Vec<T>{}, kSeq);
}

/// Lane k of the result = the sum of the lanes of v[k] for k < NK, 0 past it; reads v[0, NK)
/// only (clobbered). Every lane's sum is the same tree whatever NK, so a key's score does not
/// depend on the batch it falls in. The NK live vectors take ceil(NK / 2) + ... folds, not
/// kLanes - 1 (a 16-vector zeroed array and 15 folds a call would make the reduction and its
/// memset 27% of bigbird's element backward under perf, 3 keys a row).
template <typename T, int NK = Simd<T>::kLanes>
inline Vec<T> transpose_sums(Vec<T>* v) {
    constexpr int kN = Simd<T>::kLanes;
    static_assert(kN >= 2 && kN <= 16 && (kN & (kN - 1)) == 0 && NK >= 1 && NK <= kN);
    constexpr int kL1 = (NK + 1) / 2, kL2 = (kL1 + 1) / 2, kL3 = (kL2 + 1) / 2;
    fold_stage<T, NK, kN>(v);
    if constexpr (kN >= 4)
        fold_stage<T, kL1, kN / 2>(v);
    if constexpr (kN >= 8)
        fold_stage<T, kL2, kN / 4>(v);
    if constexpr (kN >= 16)
        fold_stage<T, kL3, kN / 8>(v);
    return v[0];
}

template <typename V, int N, int H, int... P>
inline V rotate(V a, std::integer_sequence<int, P...> /*lanes*/) {
    return __builtin_shufflevector(a, a, ((P + H) % N)...);
}

/// Sum of the lanes of v (a fixed tree: the same order every call).
template <typename T>
inline T lanes_sum(Vec<T> v) {
    constexpr int kN = Simd<T>::kLanes;
    constexpr auto kSeq = std::make_integer_sequence<int, kN>{};
    if constexpr (kN >= 16)
        v += rotate<Vec<T>, kN, 8>(v, kSeq);
    if constexpr (kN >= 8)
        v += rotate<Vec<T>, kN, 4>(v, kSeq);
    if constexpr (kN >= 4)
        v += rotate<Vec<T>, kN, 2>(v, kSeq);
    v += rotate<Vec<T>, kN, 1>(v, kSeq);
    return v[0];
}

/// Max of the lanes of v, NaN lanes ignored (-inf if all are NaN or -inf).
template <typename T>
inline T lanes_max(Vec<T> v) {
    constexpr int kN = Simd<T>::kLanes;
    constexpr auto kSeq = std::make_integer_sequence<int, kN>{};
    v = v == v ? v : kernels::splat<T>(-std::numeric_limits<T>::infinity());
    if constexpr (kN >= 16)
        v = kernels::max_ignoring_nan<T>(v, rotate<Vec<T>, kN, 8>(v, kSeq));
    if constexpr (kN >= 8)
        v = kernels::max_ignoring_nan<T>(v, rotate<Vec<T>, kN, 4>(v, kSeq));
    if constexpr (kN >= 4)
        v = kernels::max_ignoring_nan<T>(v, rotate<Vec<T>, kN, 2>(v, kSeq));
    v = kernels::max_ignoring_nan<T>(v, rotate<Vec<T>, kN, 1>(v, kSeq));
    return v[0];
}

/// Lane k (k < NK) = x_of(k) . rows[k] over n words; lanes >= NK are 0. x_of(k) is a resident
/// row zero-padded to whole vectors; rows[k] (storage S) are read only within their n words.
template <typename T, int NK, typename X, typename S>
inline Vec<T> dots_of(X x_of, const S* const* rows, std::int64_t n) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[static_cast<std::size_t>(NK)] = {};
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL) {
        IOATTN_ELEMENT_UNROLL
        for (int k = 0; k < NK; ++k)
            acc[k] = kernels::fmadd(kernels::load(x_of(k) + z), load_as<T>(rows[k] + z), acc[k]);
    }
    if (z < n) {
        IOATTN_ELEMENT_UNROLL
        for (int k = 0; k < NK; ++k)
            acc[k] = kernels::fmadd(
                kernels::load(x_of(k) + z), load_partial_as<T>(rows[k] + z, n - z), acc[k]);
    }
    return transpose_sums<T, NK>(acc);
}

/// Lane k (k < NK) = x . rows[k]: one resident row against the batch.
template <typename T, int NK, typename S = T>
inline Vec<T> batch_dots(const T* x, const S* const* rows, std::int64_t n) {
    return dots_of<T, NK>([x](int) { return x; }, rows, n);
}

/// Lane k (k < NK) = xs[k] . rows[k]: each pair its own resident row (several rows' keys in
/// one batch).
template <typename T, int NK, typename S = T>
inline Vec<T> paired_dots(const T* const* xs, const S* const* rows, std::int64_t n) {
    return dots_of<T, NK>([xs](int k) { return xs[k]; }, rows, n);
}

#if defined(IOATTN_TARGET_AVX512BF16)
/// acc + the 16 pair sums of the 32 bf16 words of x with the 32 of y.
inline Vec<float> dp_step(Vec<float> acc, __m512i x, __m512i y) {
    return kernels::as<Vec<float>>(_mm512_dpbf16_ps(
        kernels::as<__m512>(acc), kernels::as<__m512bh>(x), kernels::as<__m512bh>(y)));
}

/// acc + the 16 pair sums of the 32 bf16 words at x with the 32 of y.
inline Vec<float> dp_step(Vec<float> acc, const bf16* x, __m512i y) {
    return dp_step(acc, _mm512_loadu_si512(x), y);
}

/// Lane k (k < NK) = x_of(k) . rows[k] over n bf16 words, in pairs: vdpbf16ps multiplies the
/// 16 pairs of a vector of x_of(k) with those of rows[k] (exact products) and adds both into
/// the fp32 lanes of key k's accumulator, round to nearest even; one transposing reduction as
/// dots_of. The instruction ignores MXCSR: a denormal bf16 input counts as 0 and a denormal
/// fp32 sum flushes to 0. x_of(k) is a resident bf16 row zero-padded to whole 32-word vectors;
/// rows[k] are read only within their n words (a masked load for the tail). Flattened: the
/// reduction's folds are inlined wherever the inliner places it (folds left out of line keep
/// the accumulators in memory: the bf16 forward at random:0.02 ran about 1.7x slower).
template <int NK, typename X>
[[gnu::flatten]] inline Vec<float> dp_dots_of(X x_of, const bf16* const* rows, std::int64_t n) {
    constexpr std::int64_t kW = 2 * Simd<float>::kLanes; // bf16 words per vector
    Vec<float> acc[static_cast<std::size_t>(NK)] = {};
    std::int64_t z = 0;
    for (; z + kW <= n; z += kW) {
        IOATTN_ELEMENT_UNROLL
        for (int k = 0; k < NK; ++k)
            acc[k] = dp_step(acc[k], x_of(k) + z, _mm512_loadu_si512(rows[k] + z));
    }
    if (z < n) {
        const auto tail = static_cast<__mmask32>((1U << (n - z)) - 1U);
        IOATTN_ELEMENT_UNROLL
        for (int k = 0; k < NK; ++k)
            acc[k] = dp_step(acc[k], x_of(k) + z, _mm512_maskz_loadu_epi16(tail, rows[k] + z));
    }
    return transpose_sums<float, NK>(acc);
}
#endif

/// acc[0, n) = alpha * acc + sum_{k < NK} w[k] rows[k][0, n) (alpha null: no rescale). acc is
/// zero-padded to whole vectors; rows[k] are read only within their n words. The accumulator
/// stays in registers 8 vectors at a time while every row of the batch passes. Aligned to 64
/// bytes so that its loops' placement does not move with unrelated code (run_rows).
template <typename T, int NK, typename S = T>
[[gnu::aligned(64)]] inline void
batch_axpy(T* acc, const T* alpha, const T* w, const S* const* rows, std::int64_t n) {
#if defined(IOATTN_TARGET_AVX512BF16)
    if constexpr (std::is_same_v<S, bf16>) { // bf16 V rows: pairs of keys (dp_axpy.hpp)
        dp_axpy<NK>(acc, alpha, w, rows, n);
        return;
    }
#endif
    constexpr int kL = Simd<T>::kLanes;
    constexpr int kSlice = 8; // accumulator vectors in registers, plus one broadcast weight
    const std::int64_t full = n / kL * kL;
    for (std::int64_t z0 = 0; z0 < full; z0 += kSlice * kL) {
        const std::int64_t nv = std::min<std::int64_t>(kSlice, (full - z0) / kL);
        kernels::with_count<kSlice>(nv, [&](auto nvc) {
            constexpr int kV = decltype(nvc)::value;
            Vec<T> o[static_cast<std::size_t>(kV)];
            IOATTN_ELEMENT_UNROLL
            for (int v = 0; v < kV; ++v)
                o[v] = kernels::load(acc + z0 + v * kL);
            if (alpha != nullptr) {
                IOATTN_ELEMENT_UNROLL
                for (int v = 0; v < kV; ++v)
                    o[v] *= *alpha;
            }
            IOATTN_ELEMENT_UNROLL
            for (int k = 0; k < NK; ++k) {
                const Vec<T> wk = kernels::splat<T>(w[k]);
                IOATTN_ELEMENT_UNROLL
                for (int v = 0; v < kV; ++v)
                    o[v] = kernels::fmadd(wk, load_as<T>(rows[k] + z0 + v * kL), o[v]);
            }
            IOATTN_ELEMENT_UNROLL
            for (int v = 0; v < kV; ++v)
                kernels::store(acc + z0 + v * kL, o[v]);
        });
    }
    if (full < n) {
        Vec<T> o = kernels::load(acc + full);
        if (alpha != nullptr)
            o *= *alpha;
        for (int k = 0; k < NK; ++k)
            o = kernels::fmadd(
                kernels::splat<T>(w[k]), load_partial_as<T>(rows[k] + full, n - full), o);
        kernels::store(acc + full, o);
    }
}

/// Rows [i0, i0 + n) of a view scaled into t (n x ld, zero-padded to ld): a block's resident
/// rows (the element backward's, a folded key block's K and V) (n x ld, zero-padded to ld).
template <typename Scalar>
void load_rows(const TensorView<const Scalar>& v,
               std::int64_t b,
               std::int64_t h,
               std::int64_t i0,
               std::int64_t n,
               Scalar scale,
               Scalar* t,
               std::int64_t ld) {
    for (std::int64_t x = 0; x < n; ++x) {
        const Scalar* src = v.row(b, h, i0 + x);
        for (std::int64_t z = 0; z < v.cols; ++z)
            t[x * ld + z] = src[z] * scale;
        std::fill(t + x * ld + v.cols, t + (x + 1) * ld, Scalar(0));
    }
}

/// Rows [i0, i0 + n) of out = scale * acc (+ out when accumulating).
template <typename Scalar>
void store_rows(const TensorView<Scalar>& out,
                std::int64_t b,
                std::int64_t h,
                std::int64_t i0,
                std::int64_t n,
                const Scalar* acc,
                std::int64_t ld,
                Scalar scale,
                bool accumulate) {
    for (std::int64_t x = 0; x < n; ++x) {
        Scalar* o = out.row(b, h, i0 + x);
        for (std::int64_t z = 0; z < out.cols; ++z)
            o[z] = (accumulate ? o[z] : Scalar(0)) + scale * acc[x * ld + z];
    }
}

/// A batch of up to two vectors of rows (2 kLanes): their dot products with x, lanes past n at
/// `fill` (scores: -inf, so that they weigh nothing).
template <typename T>
struct Pair {
    Vec<T> lo, hi;
};

/// The halves of a batch of nk <= 2 kLanes rows: dots(count, first) is the Vec of the count
/// rows from row `first` (count a template constant), lanes past nk at `fill`.
template <typename T, typename Dots>
inline Pair<T> pair_of(std::int64_t nk, T fill, Dots&& dots) {
    constexpr int kL = Simd<T>::kLanes;
    Pair<T> s{kernels::splat<T>(fill), kernels::splat<T>(fill)};
    const std::int64_t n1 = std::min<std::int64_t>(kL, nk), n2 = nk - n1;
    kernels::with_count<kL>(n1, [&](auto c) { s.lo = dots(c, 0); });
    for (std::int64_t k = n1; k < kL; ++k)
        s.lo[k] = fill;
    if (n2 > 0) {
        kernels::with_count<kL>(n2, [&](auto c) { s.hi = dots(c, kL); });
        for (std::int64_t k = n2; k < kL; ++k)
            s.hi[k] = fill;
    }
    return s;
}

template <typename T, typename S = T>
inline Pair<T>
pair_dots(const T* x, const S* const* rows, std::int64_t nk, std::int64_t n, T fill) {
    return pair_of<T>(nk, fill, [&](auto c, std::int64_t first) {
        return batch_dots<T, decltype(c)::value>(x, rows + first, n);
    });
}

#if defined(IOATTN_TARGET_AVX512BF16)
/// pair_dots of a resident bf16 row x on bf16 pairs (dp_dots_of), each sum times `scale`
/// before the fill.
inline Pair<float> pair_dp_dots(const bf16* x,
                                const bf16* const* rows,
                                std::int64_t nk,
                                std::int64_t n,
                                float scale,
                                float fill) {
    const auto x_of = [x](int) { return x; };
    return pair_of<float>(nk, fill, [&](auto c, std::int64_t first) {
        return dp_dots_of<decltype(c)::value>(x_of, rows + first, n) * scale;
    });
}
#endif

/// batch_axpy over the nk <= 2 kLanes rows of a batch, weights w[0, nk).
template <typename T, typename S = T>
inline void pair_axpy(
    T* acc, const T* alpha, const T* w, const S* const* rows, std::int64_t nk, std::int64_t n) {
    constexpr int kL = Simd<T>::kLanes;
    kernels::with_count<2 * kL>(
        nk, [&](auto c) { batch_axpy<T, decltype(c)::value>(acc, alpha, w, rows, n); });
}

/// Key row k (scaled by scale log2(e), zero-padded) and value row v against nb <= 2 kLanes
/// gathered queries (their Q, dO rows, L in base 2 and D in l2, dd, whose lanes past nb this
/// sets to +inf and 0: P = dS = 0 there): s = q . k, P = 2^(min(s, L2) - L2) (<= 1, as
/// kernels::probabilities makes it; with kClamp false P = 2^(s - L2), the element backward's),
/// dP = dO . v, dS = P o (dP - D); dv += P dO, dk += dS Q; dS of the nb pairs in ds. A narrow
/// chunk's key (narrow_chunk.hpp), a folded block's key (folded_pass.hpp) and a key row of the
/// element backward's sweep K (backward_element_rows.hpp) run their pairs through it.
template <typename Scalar, bool kClamp = true>
void key_batch(const Problem& p,
               const Scalar* k,
               const Scalar* v,
               const Scalar* const* q_rows,
               const Scalar* const* do_rows,
               std::int64_t nb,
               Scalar* l2,
               Scalar* dd,
               Scalar* dk,
               Scalar* dv,
               Scalar* ds) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    alignas(64) Scalar pr[kB];
    for (auto u = static_cast<std::size_t>(nb); u < kB; ++u) {
        l2[u] = std::numeric_limits<Scalar>::infinity();
        dd[u] = Scalar(0);
    }
    const auto sc = pair_dots(k, q_rows, nb, p.d, Scalar(0));
    const auto dp = pair_dots(v, do_rows, nb, p.d_v, Scalar(0));
    const Vec<Scalar> l_lo = kernels::load(l2), l_hi = kernels::load(l2 + kL);
    const Vec<Scalar> s_lo = kClamp ? (sc.lo > l_lo ? l_lo : sc.lo) : sc.lo;
    const Vec<Scalar> s_hi = kClamp ? (sc.hi > l_hi ? l_hi : sc.hi) : sc.hi;
    const Vec<Scalar> p_lo = kernels::exp2_diff<Scalar>(s_lo, l_lo);
    const Vec<Scalar> p_hi = kernels::exp2_diff<Scalar>(s_hi, l_hi);
    kernels::store(pr, p_lo);
    kernels::store(pr + kL, p_hi);
    kernels::store(ds, p_lo * (dp.lo - kernels::load(dd)));
    kernels::store(ds + kL, p_hi * (dp.hi - kernels::load(dd + kL)));
    pair_axpy(dv, static_cast<const Scalar*>(nullptr), pr, do_rows, nb, p.d_v);
    pair_axpy(dk, static_cast<const Scalar*>(nullptr), ds, q_rows, nb, p.d);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
