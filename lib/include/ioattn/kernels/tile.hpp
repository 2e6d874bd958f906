#pragma once
// Register-blocked tile micro-kernels shared by the fused kernels (dense and sparse, forward and
// backward). Operands are row-major with explicit leading dimensions; "rows" of a transposed
// operand (Qt, St, Ot) are padded to a whole number of vectors of query lanes.
//
//   scores_block:  St[c][r] = sum_k K[c][k] Qt[k][r]                (S^T = K Q^T)
//   pvt_block:     Ot[x][r] = alpha[r] Ot[x][r] + sum_c V[c][x] Pt[c][r]   (O^T += V^T P^T)
//
// Keeping S^T (keys x queries) makes every softmax reduction over keys a vertical vector
// operation. Both are one broadcast kernel (a scalar of A times a vector of lanes of B): the
// lanes, the rows resident in a fused kernel, are always the vector-loaded operand, so every
// product of the fused kernels (the forward's P V, the backward's dV, dK and dQ) keeps its
// output transposed and reads P^T or dS^T rows as the score kernel reads Q^T rows. The row-major
// form (broadcasting from strided P^T lines) runs 27% slower per flop (perf, N = 4096, d = 128,
// 1 thread).
// Blocking (AVX-512): 6 rows x 4 vectors = 24 accumulators; AVX2 halves the rows for its 16
// registers.

#include <ioattn/error.hpp>
#include <ioattn/kernels/simd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#define IOATTN_UNROLL _Pragma("GCC unroll 8")

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

#if IOATTN_ISA_LEVEL == 3
inline constexpr int kTileRows = 6;
#else
inline constexpr int kTileRows = 3;
#endif
inline constexpr int kTileVecs = 4;

/// Calls f(std::integral_constant<int, W>{}) for the runtime count w in [1, Max]: how the
/// micro-kernel loops below pick their remainder kernel.
template <int Max, typename F>
inline void with_count(std::int64_t w, F&& f) {
    if constexpr (Max >= 1) {
        if (w == Max)
            f(std::integral_constant<int, Max>{});
        else
            with_count<Max - 1>(w, f);
    }
}

/// A(c, k) = a[c * ld + k]: the broadcast operand of broadcast_tile as rows at stride ld (K,
/// dS). The accessors are two words, passed in registers: a three-word one (pointer, row and
/// step strides) would go through the stack on every tile call, 7% of dilated:256:4's backward
/// (N = 16384, d = 64, 2 threads).
template <typename T>
struct RowsA {
    const T* a = nullptr;
    std::int64_t ld = 0;

    [[nodiscard]] T operator()(std::int64_t c, std::int64_t k) const { return a[c * ld + k]; }

    [[nodiscard]] RowsA from(std::int64_t c0) const { return {a + c0 * ld, ld}; }
};

/// A(c, k) = a[c + k * ld]: the transpose of rows at stride ld (V^T of V rows).
template <typename T>
struct ColsA {
    const T* a = nullptr;
    std::int64_t ld = 0;

    [[nodiscard]] T operator()(std::int64_t c, std::int64_t k) const { return a[c + k * ld]; }

    [[nodiscard]] ColsA from(std::int64_t c0) const { return {a + c0, ld}; }
};

/// A(c, k) = rows[c][k]: rows at scattered addresses, read in place (a chunk's gathered keys
/// without the copy into a contiguous buffer). The NC row pointers of a tile are loop-invariant.
template <typename T>
struct RowPtrsA {
    const T* const* rows = nullptr;

    [[nodiscard]] T operator()(std::int64_t c, std::int64_t k) const { return rows[c][k]; }

    [[nodiscard]] RowPtrsA from(std::int64_t c0) const { return {rows + c0}; }
};

/// A(c, k) = rows[k][c0 + c]: the transpose of rows at scattered addresses (V^T of a chunk's
/// gathered V rows, read in place): one pointer load per depth step, shared by the tile's rows.
template <typename T>
struct ColPtrsA {
    const T* const* rows = nullptr;
    std::int64_t c0 = 0;

    [[nodiscard]] T operator()(std::int64_t c, std::int64_t k) const { return rows[k][c0 + c]; }

    [[nodiscard]] ColPtrsA from(std::int64_t c) const { return {rows, c0 + c}; }
};

/// NC rows x NV lane vectors of C = A B (alpha null) or C = alpha o C + A B (alpha: NV vectors,
/// one factor per lane), over `depth` steps; A(c, k) (RowsA, ColsA, RowPtrsA, ColPtrsA) is
/// broadcast, B[k] is a row of lanes at stride ldb.
template <typename T, int NC, int NV, typename A>
inline void broadcast_tile(
    A a, const T* b, std::int64_t ldb, std::int64_t depth, const T* alpha, T* c, std::int64_t ldc) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[static_cast<std::size_t>(NC)][static_cast<std::size_t>(NV)] = {};
    if (alpha != nullptr) {
        IOATTN_UNROLL
        for (int v = 0; v < NV; ++v) {
            const Vec<T> s = load(alpha + v * kL); // C = C * exp(m_old - m_new)
            IOATTN_UNROLL
            for (int r = 0; r < NC; ++r)
                acc[r][v] = load(c + r * ldc + v * kL) * s;
        }
    }
    for (std::int64_t k = 0; k < depth; ++k) {
        Vec<T> bv[static_cast<std::size_t>(NV)];
        IOATTN_UNROLL
        for (int v = 0; v < NV; ++v)
            bv[v] = load(b + k * ldb + v * kL);
        IOATTN_UNROLL
        for (int r = 0; r < NC; ++r) {
            const T s = a(r, k);
            IOATTN_UNROLL
            for (int v = 0; v < NV; ++v)
                acc[r][v] += s * bv[v];
        }
    }
    IOATTN_UNROLL
    for (int r = 0; r < NC; ++r)
        IOATTN_UNROLL
    for (int v = 0; v < NV; ++v)
        store(c + r * ldc + v * kL, acc[r][v]);
}

/// C[0..rows)[0..n_vec lanes) over broadcast_tile. Lane slabs of kTileVecs vectors are the
/// outer loop, so one slab of B (depth x 64 floats) stays in L1 while every row passes over it.
template <typename T, typename A>
inline void broadcast_rows(A a,
                           std::int64_t rows,
                           const T* b,
                           std::int64_t ldb,
                           std::int64_t depth,
                           std::int64_t n_vec,
                           const T* alpha,
                           T* c,
                           std::int64_t ldc) {
    constexpr int kL = Simd<T>::kLanes;
    for (std::int64_t v = 0; v < n_vec; v += kTileVecs) {
        const T* al = alpha != nullptr ? alpha + v * kL : nullptr;
        with_count<kTileVecs>(std::min<std::int64_t>(kTileVecs, n_vec - v), [&](auto nv) {
            const auto tile = [&](std::int64_t r, auto nr) {
                broadcast_tile<T, decltype(nr)::value, decltype(nv)::value>(
                    a.from(r), b + v * kL, ldb, depth, al, c + r * ldc + v * kL, ldc);
            };
            // A short remainder (fewer than half a tile) joins the last whole tile and the two
            // split evenly: d = 128 leaves 2 rows, run as 4 + 4 instead of 6 + 2 (a 2-row tile
            // is load-bound: 4 loads for 8 FMAs).
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

/// broadcast_rows of a strided A(c, k) = a[c * a_row + k * a_step]: rows (a_step = 1) or their
/// transpose (a_row = 1), the only forms the kernels use.
template <typename T>
inline void broadcast_block(const T* a,
                            std::int64_t a_row,
                            std::int64_t a_step,
                            std::int64_t rows,
                            const T* b,
                            std::int64_t ldb,
                            std::int64_t depth,
                            std::int64_t n_vec,
                            const T* alpha,
                            T* c,
                            std::int64_t ldc) {
    IOATTN_ASSERT(a_step == 1 || a_row == 1);
    if (a_step == 1)
        broadcast_rows(RowsA<T>{a, a_row}, rows, b, ldb, depth, n_vec, alpha, c, ldc);
    else
        broadcast_rows(ColsA<T>{a, a_step}, rows, b, ldb, depth, n_vec, alpha, c, ldc);
}

/// St[0..n_keys)[0..n_vec lanes) = K[0..n_keys) Qt, K rows at stride ldk.
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
    broadcast_block(k,
                    ldk,
                    std::int64_t{1},
                    n_keys,
                    qt,
                    ldq,
                    d,
                    n_vec,
                    static_cast<const T*>(nullptr),
                    st,
                    lds);
}

/// Ot[0..d_v)[0..n_vec lanes) = alpha o Ot + V[0..n_keys)^T Pt, V rows at stride ldv, alpha one
/// factor per lane. Every lane takes every key: a lane that must not see a key needs P = 0 there
/// and a finite V row (callers route blocks with non-finite V rows on a mask edge elsewhere).
template <typename T>
inline void pvt_block(const T* pt,
                      std::int64_t ldp,
                      const T* v,
                      std::int64_t ldv,
                      std::int64_t n_keys,
                      std::int64_t d_v,
                      std::int64_t n_vec,
                      const T* alpha,
                      T* ot,
                      std::int64_t ldo) {
    broadcast_block(v, std::int64_t{1}, ldv, d_v, pt, ldp, n_keys, n_vec, alpha, ot, ldo);
}

/// scores_block over key rows at scattered addresses k[0..n_keys) (read in place, not gathered).
template <typename T>
inline void scores_rows(const T* const* k,
                        std::int64_t n_keys,
                        const T* qt,
                        std::int64_t ldq,
                        std::int64_t d,
                        std::int64_t n_vec,
                        T* st,
                        std::int64_t lds) {
    broadcast_rows(
        RowPtrsA<T>{k}, n_keys, qt, ldq, d, n_vec, static_cast<const T*>(nullptr), st, lds);
}

/// pvt_block over V rows at scattered addresses v[0..n_keys) (read in place, not gathered).
template <typename T>
inline void pvt_rows(const T* pt,
                     std::int64_t ldp,
                     const T* const* v,
                     std::int64_t n_keys,
                     std::int64_t d_v,
                     std::int64_t n_vec,
                     const T* alpha,
                     T* ot,
                     std::int64_t ldo) {
    broadcast_rows(ColPtrsA<T>{v, 0}, d_v, pt, ldp, n_keys, n_vec, alpha, ot, ldo);
}

/// One stored row of a sparse operand: values val[0, n) at sorted columns idx[0, n).
template <typename T>
struct SparseRow {
    const std::int64_t* idx = nullptr;
    const T* val = nullptr;
    std::int64_t n = 0;
};

/// C[y][0..n_vec lanes) = sum over the stored (k, a) of row_of(y) of a B[k][lanes], y < rows:
/// scores_block for an A given as sparse rows (a sparse dot product per lane vector, 2 flops
/// per stored entry and lane, B rows gathered by the entries' columns).
template <typename T, typename RowOf>
inline void sparse_rows_block(std::int64_t rows,
                              RowOf row_of,
                              const T* b,
                              std::int64_t ldb,
                              std::int64_t n_vec,
                              T* c,
                              std::int64_t ldc) {
    constexpr int kL = Simd<T>::kLanes;
    for (std::int64_t v = 0; v < n_vec; v += kTileVecs) {
        with_count<kTileVecs>(std::min<std::int64_t>(kTileVecs, n_vec - v), [&](auto nv) {
            constexpr int kN = decltype(nv)::value;
            for (std::int64_t y = 0; y < rows; ++y) {
                const SparseRow<T> row = row_of(y);
                Vec<T> acc[static_cast<std::size_t>(kN)] = {};
                for (std::int64_t e = 0; e < row.n; ++e) {
                    const T s = row.val[e];
                    const T* bk = b + row.idx[e] * ldb + v * kL;
                    IOATTN_UNROLL
                    for (int x = 0; x < kN; ++x)
                        acc[x] += s * load(bk + x * kL);
                }
                IOATTN_UNROLL
                for (int x = 0; x < kN; ++x)
                    store(c + y * ldc + v * kL + x * kL, acc[x]);
            }
        });
    }
}

/// pvt_block for V given as sparse rows: Ot = alpha o Ot, then for each key c and stored
/// (x, a) of its V row, Ot[x][lanes] += a Pt[c][lanes].
template <typename T, typename RowOf>
inline void sparse_pvt_block(const T* pt,
                             std::int64_t ldp,
                             RowOf row_of,
                             std::int64_t n_keys,
                             std::int64_t d_v,
                             std::int64_t n_vec,
                             const T* alpha,
                             T* ot,
                             std::int64_t ldo) {
    constexpr int kL = Simd<T>::kLanes;
    for (std::int64_t x = 0; x < d_v; ++x)
        for (std::int64_t v = 0; v < n_vec; ++v)
            store(ot + x * ldo + v * kL, load(ot + x * ldo + v * kL) * load(alpha + v * kL));
    for (std::int64_t c = 0; c < n_keys; ++c) {
        const SparseRow<T> row = row_of(c);
        for (std::int64_t e = 0; e < row.n; ++e) {
            const T s = row.val[e];
            T* o = ot + row.idx[e] * ldo;
            for (std::int64_t v = 0; v < n_vec; ++v)
                store(o + v * kL, load(o + v * kL) + s * load(pt + c * ldp + v * kL));
        }
    }
}

/// One lane r of pvt_block over its own key count, scalar: Ot[x][r] = alpha Ot[x][r] +
/// sum_{c < n_keys} V[c][x] Pt[c][r] (pt and ot point at lane r). For lanes on a mask edge of a
/// block whose V rows are not all finite, so that a hidden key's V row is never touched.
template <typename T>
inline void pvt_lane(const T* pt,
                     std::int64_t ldp,
                     const T* v,
                     std::int64_t ldv,
                     std::int64_t n_keys,
                     std::int64_t d_v,
                     T alpha,
                     T* ot,
                     std::int64_t ldo) {
    for (std::int64_t x = 0; x < d_v; ++x) {
        T acc = ot[x * ldo] * alpha;
        for (std::int64_t c = 0; c < n_keys; ++c)
            acc += pt[c * ldp] * v[c * ldv + x];
        ot[x * ldo] = acc;
    }
}

/// Whether rows [0, n) of width w at stride ld are all finite (x * 0 is 0 exactly for finite
/// x and NaN for inf and NaN).
template <typename T>
inline bool all_finite(const T* a, std::int64_t ld, std::int64_t n, std::int64_t w) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc{};
    T tail = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const T* row = a + i * ld;
        std::int64_t x = 0;
        for (; x + kL <= w; x += kL)
            acc += load(row + x) * T(0);
        for (; x < w; ++x)
            tail += row[x] * T(0);
    }
    for (int l = 0; l < kL; ++l)
        tail += acc[l];
    return tail == T(0);
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
