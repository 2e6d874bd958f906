#pragma once
// Online softmax over one block of transposed scores (FlashAttention-2, Dao 2023, Alg. 1
// lines 8-10), in base 2: scores arrive pre-multiplied by scale * log2(e).
//
// For every query lane r of St (keys x lanes):
//   m_new = max(m, max_c St[c][r])                running max (NaN scores ignored here: NaN
//                                                  reaches the row through P instead)
//   m_safe = m_new == -inf ? 0 : m_new             a row that has seen nothing stays at P = 0
//   alpha[r] = 2^(m - m_safe)                      rescale of l and O (1 where m = m_safe)
//   Pt[c][r] = 2^(St[c][r] - m_safe)               in place (1 where St = m_safe, so +inf
//                                                  scores give P = 1, not inf - inf = NaN)
//   l = alpha * l + sum_c Pt[c][r]

#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

template <typename T>
inline Vec<T> exp2_diff(Vec<T> x, Vec<T> m_safe) {
    const Vec<T> diff = x - m_safe;
    return exp2<T>(x == m_safe ? Vec<T>{} : diff);
}

/// online_softmax_block on NV adjacent lane vectors at once: NV independent max and sum chains
/// (one chain per vector would leave the max pass latency-bound: 28% of the softmax under
/// perf, d = 64).
template <typename T, int NV>
inline void
online_softmax_vecs(T* st, std::int64_t lds, std::int64_t n_keys, T* m, T* l, T* alpha) {
    constexpr int kL = Simd<T>::kLanes;
    const Vec<T> neg_inf = splat<T>(-std::numeric_limits<T>::infinity());
    constexpr auto kN = static_cast<std::size_t>(NV);
    Vec<T> mx[kN], m_safe[kN], sum[kN];
    for (int u = 0; u < NV; ++u)
        mx[u] = load(m + u * kL);
    for (std::int64_t c = 0; c < n_keys; ++c)
        for (int u = 0; u < NV; ++u)
            mx[u] = max_ignoring_nan<T>(mx[u], load(st + c * lds + u * kL));
    for (int u = 0; u < NV; ++u) {
        m_safe[u] = mx[u] == neg_inf ? Vec<T>{} : mx[u];
        sum[u] = Vec<T>{};
    }
    for (std::int64_t c = 0; c < n_keys; ++c) {
        for (int u = 0; u < NV; ++u) {
            T* at = st + c * lds + u * kL;
            const Vec<T> p = exp2_diff<T>(load(at), m_safe[u]); // P = exp(S - m_new)
            store(at, p);
            sum[u] += p;
        }
    }
    for (int u = 0; u < NV; ++u) {
        const Vec<T> a = exp2_diff<T>(load(m + u * kL), m_safe[u]); // exp(m_old - m_new)
        store(l + u * kL, a * load(l + u * kL) + sum[u]); // l = exp(m_old - m_new) l + rowsum(P)
        store(m + u * kL, mx[u]);
        store(alpha + u * kL, a);
    }
}

/// online_softmax_vecs over NV lane vectors each over its own entries, vector u (lanes st + u
/// kL) over [a0[u], a1[u]) (non-empty): a staggered slab's vectors see staggered spans of a
/// chunk (sparse staggered_slab.hpp), and entries outside a vector's span are neither read nor
/// written. Where the spans overlap, the NV chains run interleaved; each vector's entries
/// before and after that common range alone. Each sum runs in key order, so the state is the
/// one online_softmax_vecs over the union leaves when the entries outside a span are -inf
/// (they add exact zeros; a max is exact in any order). Against the union, with the slab's
/// rescale folded into P V: 1.04x on window:64, whose vectors compute 144 of a 64-row slab's
/// 192 keys (ioattn run --N 16384 --d 64 --pattern window:64 --schedule fused --threads 2
/// --repeat 30).
template <typename T, int NV>
inline void online_softmax_spans(
    T* st, std::int64_t lds, const std::int64_t* a0, const std::int64_t* a1, T* m, T* l, T* alpha) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr auto kN = static_cast<std::size_t>(NV);
    const Vec<T> neg_inf = splat<T>(-std::numeric_limits<T>::infinity());
    std::int64_t c0 = a0[0], c1 = a1[0]; // the common range [c0, c1) of every span
    for (int u = 1; u < NV; ++u) {
        c0 = std::max(c0, a0[u]);
        c1 = std::min(c1, a1[u]);
    }
    const auto before = [&](int u) { return c0 < c1 ? c0 : a1[u]; }; // u alone: [a0, before)
    const auto after = [&](int u) { return c0 < c1 ? c1 : a1[u]; };  // and [after, a1)
    const auto at = [&](std::int64_t c, int u) { return st + c * lds + u * kL; };
    Vec<T> mx[kN], m_safe[kN], sum[kN];
    for (int u = 0; u < NV; ++u) {
        mx[u] = load(m + u * kL);
        for (std::int64_t c = a0[u]; c < before(u); ++c)
            mx[u] = max_ignoring_nan<T>(mx[u], load(at(c, u)));
        for (std::int64_t c = after(u); c < a1[u]; ++c)
            mx[u] = max_ignoring_nan<T>(mx[u], load(at(c, u)));
    }
    for (std::int64_t c = c0; c < c1; ++c)
        for (int u = 0; u < NV; ++u)
            mx[u] = max_ignoring_nan<T>(mx[u], load(at(c, u)));
    const auto exp_into = [&](std::int64_t c, int u) {
        const Vec<T> p = exp2_diff<T>(load(at(c, u)), m_safe[u]); // P = exp(S - m_new)
        store(at(c, u), p);
        sum[u] += p;
    };
    for (int u = 0; u < NV; ++u) {
        m_safe[u] = mx[u] == neg_inf ? Vec<T>{} : mx[u];
        sum[u] = Vec<T>{};
        for (std::int64_t c = a0[u]; c < before(u); ++c)
            exp_into(c, u);
    }
    for (std::int64_t c = c0; c < c1; ++c)
        for (int u = 0; u < NV; ++u)
            exp_into(c, u);
    for (int u = 0; u < NV; ++u) {
        for (std::int64_t c = after(u); c < a1[u]; ++c)
            exp_into(c, u);
        const Vec<T> a = exp2_diff<T>(load(m + u * kL), m_safe[u]); // exp(m_old - m_new)
        store(l + u * kL, a * load(l + u * kL) + sum[u]); // l = exp(m_old - m_new) l + rowsum(P)
        store(m + u * kL, mx[u]);
        store(alpha + u * kL, a);
    }
}

template <typename T>
inline void online_softmax_block(
    T* st, std::int64_t lds, std::int64_t n_keys, std::int64_t n_vec, T* m, T* l, T* alpha) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr int kStep = 4;
    std::int64_t v = 0;
    for (; v + kStep <= n_vec; v += kStep)
        online_softmax_vecs<T, kStep>(
            st + v * kL, lds, n_keys, m + v * kL, l + v * kL, alpha + v * kL);
    for (; v < n_vec; ++v)
        online_softmax_vecs<T, 1>(st + v * kL, lds, n_keys, m + v * kL, l + v * kL, alpha + v * kL);
}

/// Final normalisation of rows [row0, row0 + n) of slice (b, h) from the block's O^T (d_v x ld
/// lanes): O = O^T / l and L = ln(2) (m + log2 l); a row that saw no key (l = 0) gets O = 0 and
/// L = -inf. inv: scratch of n values. With `map`, row r is row map[row0 + r] of o and lse.
/// With `stream`, O's whole vectors are stored past the caches (unpack_transposed).
template <typename T>
inline void finish_rows(const T* ot,
                        std::int64_t ld,
                        const T* m,
                        const T* l,
                        T* inv,
                        const TensorView<T>& o,
                        const TensorView<T>& lse,
                        std::int64_t b,
                        std::int64_t h,
                        std::int64_t row0,
                        std::int64_t n,
                        const std::int64_t* map = nullptr,
                        bool stream = false) {
    const auto at = [&](std::int64_t r) { return mapped(map, row0 + r); };
    for (std::int64_t r = 0; r < n; ++r) {
        inv[r] = l[r] == T(0) ? T(0) : T(1) / l[r];
        *lse.row(b, h, at(r)) = l[r] == T(0) ? -std::numeric_limits<T>::infinity()
                                             : T(0.6931471805599453) * (m[r] + std::log2(l[r]));
    }
    unpack_transposed(
        ot, ld, [inv](std::int64_t r) { return inv[r]; }, o, b, h, row0, n, map, stream);
    for (std::int64_t r = 0; r < n; ++r) // 0, not 0 * (a NaN of a hidden key's V row)
        if (l[r] == T(0))
            std::fill_n(o.row(b, h, at(r)), o.cols, T(0));
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
