#pragma once
// Register-blocked tile micro-kernels shared by the fused kernels (dense and sparse, forward and
// backward). Operands are row-major with explicit leading dimensions; "rows" of a transposed
// operand (Qt, St) are padded to a whole number of vectors.
//
//   scores_block:  St[c][r] = sum_k K[c][k] * Qt[k][r]       (S^T = K Q^T: keys x query lanes)
//   pv_block:      O[r][:]  = alpha[r] O[r][:] + sum_c Pt[c][r] V[c][:]
//
// Keeping S^T (keys x queries) makes every softmax reduction over keys a vertical vector
// operation. Blocking (AVX-512): 6 keys x 4 vectors = 24 accumulators for scores, 6 rows x 4
// vectors for P V; AVX2 halves both to fit 16 registers.

#include <ioattn/kernels/simd.hpp>

#include <cstddef>
#include <cstdint>

#define IOATTN_UNROLL _Pragma("GCC unroll 8")

namespace ioattn::kernels {

#if defined(__AVX512F__)
inline constexpr int kScoreKeys = 6;
inline constexpr int kPvRows = 6;
#else
inline constexpr int kScoreKeys = 3;
inline constexpr int kPvRows = 3;
#endif
inline constexpr int kScoreVecs = 4;
inline constexpr int kPvVecs = 4;

/// NC keys x NV query vectors of St = K Qt.
template <typename T, int NC, int NV>
inline void scores_tile(const T* k,
                        std::int64_t ldk,
                        const T* qt,
                        std::int64_t ldq,
                        std::int64_t d,
                        T* st,
                        std::int64_t lds) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[static_cast<std::size_t>(NC)][static_cast<std::size_t>(NV)] = {};
    for (std::int64_t kk = 0; kk < d; ++kk) {
        Vec<T> q[static_cast<std::size_t>(NV)];
        IOATTN_UNROLL
        for (int v = 0; v < NV; ++v)
            q[v] = load(qt + kk * ldq + v * kL);
        IOATTN_UNROLL
        for (int c = 0; c < NC; ++c) {
            const T kc = k[c * ldk + kk];
            IOATTN_UNROLL
            for (int v = 0; v < NV; ++v)
                acc[c][v] += kc * q[v];
        }
    }
    IOATTN_UNROLL
    for (int c = 0; c < NC; ++c)
        IOATTN_UNROLL
    for (int v = 0; v < NV; ++v)
        store(st + c * lds + v * kL, acc[c][v]);
}

template <typename T, int NC>
inline void scores_keys(const T* k,
                        std::int64_t ldk,
                        const T* qt,
                        std::int64_t ldq,
                        std::int64_t d,
                        std::int64_t n_vec,
                        T* st,
                        std::int64_t lds) {
    constexpr int kL = Simd<T>::kLanes;
    std::int64_t v = 0;
    for (; v + kScoreVecs <= n_vec; v += kScoreVecs)
        scores_tile<T, NC, kScoreVecs>(k, ldk, qt + v * kL, ldq, d, st + v * kL, lds);
    switch (n_vec - v) {
    case 3:
        scores_tile<T, NC, 3>(k, ldk, qt + v * kL, ldq, d, st + v * kL, lds);
        break;
    case 2:
        scores_tile<T, NC, 2>(k, ldk, qt + v * kL, ldq, d, st + v * kL, lds);
        break;
    case 1:
        scores_tile<T, NC, 1>(k, ldk, qt + v * kL, ldq, d, st + v * kL, lds);
        break;
    default:
        break;
    }
}

/// St[0..n_keys)[0..n_vec*lanes) = K[0..n_keys) Qt, K rows at stride ldk.
template <typename T>
inline void scores_block(const T* k,
                         std::int64_t ldk,
                         std::int64_t n_keys,
                         const T* qt,
                         std::int64_t ldq,
                         std::int64_t d,
                         std::int64_t n_vec,
                         T* st,
                         std::int64_t lds) {
    std::int64_t c = 0;
    for (; c + kScoreKeys <= n_keys; c += kScoreKeys)
        scores_keys<T, kScoreKeys>(k + c * ldk, ldk, qt, ldq, d, n_vec, st + c * lds, lds);
    for (; c < n_keys; ++c)
        scores_keys<T, 1>(k + c * ldk, ldk, qt, ldq, d, n_vec, st + c * lds, lds);
}

/// NR rows x NV vectors of O = alpha o O + Pt^T V over n_keys keys.
template <typename T, int NR, int NV>
inline void pv_tile(const T* pt,
                    std::int64_t ldp,
                    const T* v,
                    std::int64_t ldv,
                    std::int64_t n_keys,
                    const T* alpha,
                    T* o,
                    std::int64_t ldo) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[static_cast<std::size_t>(NR)][static_cast<std::size_t>(NV)];
    IOATTN_UNROLL
    for (int r = 0; r < NR; ++r)
        IOATTN_UNROLL
    for (int x = 0; x < NV; ++x)
        acc[r][x] = load(o + r * ldo + x * kL) * alpha[r]; // O = O * exp(m_old - m_new)
    for (std::int64_t c = 0; c < n_keys; ++c) {
        Vec<T> vv[static_cast<std::size_t>(NV)];
        IOATTN_UNROLL
        for (int x = 0; x < NV; ++x)
            vv[x] = load(v + c * ldv + x * kL);
        IOATTN_UNROLL
        for (int r = 0; r < NR; ++r) {
            const T p = pt[c * ldp + r];
            IOATTN_UNROLL
            for (int x = 0; x < NV; ++x)
                acc[r][x] += p * vv[x]; // O += P V
        }
    }
    IOATTN_UNROLL
    for (int r = 0; r < NR; ++r)
        IOATTN_UNROLL
    for (int x = 0; x < NV; ++x)
        store(o + r * ldo + x * kL, acc[r][x]);
}

template <typename T, int NR>
inline void pv_rows(const T* pt,
                    std::int64_t ldp,
                    const T* v,
                    std::int64_t ldv,
                    std::int64_t n_keys,
                    std::int64_t d_v,
                    const T* alpha,
                    T* o,
                    std::int64_t ldo) {
    constexpr int kL = Simd<T>::kLanes;
    const std::int64_t n_vec = d_v / kL;
    std::int64_t x = 0;
    for (; x + kPvVecs <= n_vec; x += kPvVecs)
        pv_tile<T, NR, kPvVecs>(pt, ldp, v + x * kL, ldv, n_keys, alpha, o + x * kL, ldo);
    switch (n_vec - x) {
    case 3:
        pv_tile<T, NR, 3>(pt, ldp, v + x * kL, ldv, n_keys, alpha, o + x * kL, ldo);
        break;
    case 2:
        pv_tile<T, NR, 2>(pt, ldp, v + x * kL, ldv, n_keys, alpha, o + x * kL, ldo);
        break;
    case 1:
        pv_tile<T, NR, 1>(pt, ldp, v + x * kL, ldv, n_keys, alpha, o + x * kL, ldo);
        break;
    default:
        break;
    }
    for (std::int64_t col = n_vec * kL; col < d_v; ++col) { // columns past the last vector
        IOATTN_UNROLL
        for (int r = 0; r < NR; ++r) {
            T acc = o[r * ldo + col] * alpha[r];
            for (std::int64_t c = 0; c < n_keys; ++c)
                acc += pt[c * ldp + r] * v[c * ldv + col];
            o[r * ldo + col] = acc;
        }
    }
}

/// O[0..n_rows) = alpha o O + Pt^T V, every row over the same n_keys keys.
template <typename T>
inline void pv_block(const T* pt,
                     std::int64_t ldp,
                     const T* v,
                     std::int64_t ldv,
                     std::int64_t n_keys,
                     std::int64_t n_rows,
                     std::int64_t d_v,
                     const T* alpha,
                     T* o,
                     std::int64_t ldo) {
    std::int64_t r = 0;
    for (; r + kPvRows <= n_rows; r += kPvRows)
        pv_rows<T, kPvRows>(pt + r, ldp, v, ldv, n_keys, d_v, alpha + r, o + r * ldo, ldo);
    for (; r < n_rows; ++r)
        pv_rows<T, 1>(pt + r, ldp, v, ldv, n_keys, d_v, alpha + r, o + r * ldo, ldo);
}

/// One row of pv_block over its own key count (rows on a mask boundary, so that a masked
/// key's V row, even NaN, is never touched).
template <typename T>
inline void pv_row(const T* pt,
                   std::int64_t ldp,
                   const T* v,
                   std::int64_t ldv,
                   std::int64_t n_keys,
                   std::int64_t d_v,
                   const T* alpha,
                   T* o) {
    pv_rows<T, 1>(pt, ldp, v, ldv, n_keys, d_v, alpha, o, 0);
}

} // namespace ioattn::kernels
