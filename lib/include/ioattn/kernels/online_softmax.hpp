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
/// (one chain per vector left the max pass latency-bound: 28% of the softmax, perf, d=64).
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
                        const std::int64_t* map = nullptr) {
    const auto at = [&](std::int64_t r) { return mapped(map, row0 + r); };
    for (std::int64_t r = 0; r < n; ++r) {
        inv[r] = l[r] == T(0) ? T(0) : T(1) / l[r];
        *lse.row(b, h, at(r)) = l[r] == T(0) ? -std::numeric_limits<T>::infinity()
                                             : T(0.6931471805599453) * (m[r] + std::log2(l[r]));
    }
    unpack_transposed(
        ot, ld, [inv](std::int64_t r) { return inv[r]; }, o, b, h, row0, n, map);
    for (std::int64_t r = 0; r < n; ++r) // 0, not 0 * (a NaN of a hidden key's V row)
        if (l[r] == T(0))
            std::fill_n(o.row(b, h, at(r)), o.cols, T(0));
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
