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

#include <ioattn/kernels/simd.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

namespace ioattn::kernels {

template <typename T>
inline Vec<T> exp2_diff(Vec<T> x, Vec<T> m_safe) {
    const Vec<T> diff = x - m_safe;
    return exp2<T>(x == m_safe ? Vec<T>{} : diff);
}

template <typename T>
inline void online_softmax_block(
    T* st, std::int64_t lds, std::int64_t n_keys, std::int64_t n_vec, T* m, T* l, T* alpha) {
    constexpr int kL = Simd<T>::kLanes;
    const Vec<T> neg_inf = splat<T>(-std::numeric_limits<T>::infinity());
    for (std::int64_t v = 0; v < n_vec; ++v) {
        T* col = st + v * kL;
        const Vec<T> m_old = load(m + v * kL);
        Vec<T> mx = m_old;
        for (std::int64_t c = 0; c < n_keys; ++c)
            mx = max_ignoring_nan<T>(mx, load(col + c * lds));
        const Vec<T> m_safe = mx == neg_inf ? Vec<T>{} : mx;
        const Vec<T> a = exp2_diff<T>(m_old, m_safe); // exp(m_old - m_new)
        Vec<T> sum{};
        for (std::int64_t c = 0; c < n_keys; ++c) {
            const Vec<T> p = exp2_diff<T>(load(col + c * lds), m_safe); // P = exp(S - m_new)
            store(col + c * lds, p);
            sum += p;
        }
        store(l + v * kL, a * load(l + v * kL) + sum); // l = exp(m_old - m_new) l + rowsum(P)
        store(m + v * kL, mx);
        store(alpha + v * kL, a);
    }
}

/// Final normalisation of one query row: O = O / l and L = ln(2) (m + log2 l); a row that saw no
/// key (l = 0) gets O = 0 and L = -inf.
template <typename T>
inline T finish_row(T* o, std::int64_t d_v, T m, T l) {
    if (l == T(0)) {
        for (std::int64_t x = 0; x < d_v; ++x)
            o[x] = T(0);
        return -std::numeric_limits<T>::infinity();
    }
    const T inv = T(1) / l;
    for (std::int64_t x = 0; x < d_v; ++x)
        o[x] *= inv;
    return T(0.6931471805599453) * (m + std::log2(l));
}

} // namespace ioattn::kernels
