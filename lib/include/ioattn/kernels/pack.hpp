#pragma once
/// Transposed packing between row-major views and the fused kernels' lane-major fast-memory
/// tiles (Q^T, K^T, dO^T, O^T: columns x padded rows), in 16 x 16 blocks; and row-major packing
/// with the columns padded to whole vectors (K rows as the lanes of dQ = dS K).

#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/target.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

#if IOATTN_ISA_LEVEL == 3
/// The lanes I... of the two vectors (a's lanes, then b's): __builtin_shufflevector, which GCC
/// (12 on) and clang both compile to one two-source permute.
template <int... I>
inline Vec<float> shuffled(Vec<float> a, Vec<float> b, std::integer_sequence<int, I...>) {
    return __builtin_shufflevector(a, b, I...);
}

/// Transposes the 16 x 16 floats in v (v[r] a row of one 16-lane vector) in registers: v[c]
/// becomes column c. Four stages of 16 two-vector shuffles (AVX-512's unpacks of lanes and of
/// lane pairs, then two of 128-bit quarters) in place of 256 scalar moves: scalar packs of Q^T
/// and O would be 13% of strided:64's tile forward under perf (N = 16384, d = 64, 2 threads),
/// whose rows see about 190 keys each.
inline void transpose16(Vec<float>* v) {
    using V = Vec<float>;
    static_assert(Simd<float>::kLanes == 16);
    // lanes of (a, b): a's are 0-15, b's 16-31
    using Lo = std::integer_sequence<int, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29>;
    using Hi =
        std::integer_sequence<int, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31>;
    using LoPairs =
        std::integer_sequence<int, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29>;
    using HiPairs =
        std::integer_sequence<int, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31>;
    using Even =
        std::integer_sequence<int, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27>;
    using Odd =
        std::integer_sequence<int, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31>;
    V t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = shuffled(v[i], v[i + 1], Lo{});
        t[i + 1] = shuffled(v[i], v[i + 1], Hi{});
    }
    for (int i = 0; i < 16; i += 4) { // v[i + j]: rows i..i+3 of columns j, j+4, j+8, j+12
        v[i] = shuffled(t[i], t[i + 2], LoPairs{});
        v[i + 1] = shuffled(t[i], t[i + 2], HiPairs{});
        v[i + 2] = shuffled(t[i + 1], t[i + 3], LoPairs{});
        v[i + 3] = shuffled(t[i + 1], t[i + 3], HiPairs{});
    }
    for (int j = 0; j < 4; ++j) {
        t[j] = shuffled(v[j], v[4 + j], Even{});
        t[4 + j] = shuffled(v[j], v[4 + j], Odd{});
        t[8 + j] = shuffled(v[8 + j], v[12 + j], Even{});
        t[12 + j] = shuffled(v[8 + j], v[12 + j], Odd{});
    }
    for (int j = 0; j < 8; ++j) {
        v[j] = shuffled(t[j], t[8 + j], Even{});
        v[8 + j] = shuffled(t[j], t[8 + j], Odd{});
    }
}
#endif

/// Row i of a reordered problem: row map[i] of the operand (map null: i itself).
inline std::int64_t mapped(const std::int64_t* map, std::int64_t i) {
    return map != nullptr ? map[i] : i;
}

/// Packs rows [0, n) given by row_of(r) (cols wide), transposed and scaled, into t (cols x ld),
/// rows [n, ld) zero. 16 x 16 blocks, so that the 16 rows read and the 16 lines written stay in
/// L1 (column at a time, the 16-float lines of t would each be written 16 times from L2: 1.4%
/// of the forward; the materializing forward's K^T of a dense tile, one strided column at a
/// time from L2, 11% of bigbird's).
template <typename Scalar, typename RowOf>
void pack_rows_transposed(
    RowOf row_of, std::int64_t n, std::int64_t cols, Scalar scale, Scalar* t, std::int64_t ld) {
    constexpr std::int64_t kBlock = 16;
    for (std::int64_t r0 = 0; r0 < ld; r0 += kBlock) {
        const std::int64_t r1 = std::min(ld, r0 + kBlock);
        for (std::int64_t k0 = 0; k0 < cols; k0 += kBlock) {
            const std::int64_t k1 = std::min(cols, k0 + kBlock);
#if IOATTN_ISA_LEVEL == 3
            if constexpr (std::is_same_v<Scalar, float>) {
                if (r0 + kBlock <= n && k1 - k0 == kBlock) { // a whole block, in registers
                    Vec<float> v[16];
                    for (int r = 0; r < 16; ++r)
                        v[r] = load(row_of(r0 + r) + k0) * scale;
                    transpose16(v);
                    for (int k = 0; k < 16; ++k)
                        store(t + (k0 + k) * ld + r0, v[k]);
                    continue;
                }
            }
#endif
            for (std::int64_t r = r0; r < r1; ++r) {
                if (r >= n) {
                    for (std::int64_t k = k0; k < k1; ++k)
                        t[k * ld + r] = Scalar(0);
                    continue;
                }
                const Scalar* row = row_of(r);
                for (std::int64_t k = k0; k < k1; ++k)
                    t[k * ld + r] = row[k] * scale;
            }
        }
    }
}

/// Packs rows [row0, row0 + n) of a view, transposed and scaled, into t (cols x ld), zero-padded
/// (pack_rows_transposed). With `map`, row r is the view's row map[row0 + r] (a reordered
/// problem read in place).
template <typename Scalar>
void pack_transposed(const TensorView<const Scalar>& x,
                     std::int64_t b,
                     std::int64_t h,
                     std::int64_t row0,
                     std::int64_t n,
                     Scalar scale,
                     Scalar* t,
                     std::int64_t ld,
                     const std::int64_t* map = nullptr) {
    pack_rows_transposed([&](std::int64_t r) { return x.row(b, h, mapped(map, row0 + r)); },
                         n,
                         x.cols,
                         scale,
                         t,
                         ld);
}

/// Packs rows [row0, row0 + n) of a view, scaled, into t (n x ld), columns zero-padded to ld;
/// with `map`, row r is the view's row map[row0 + r].
template <typename Scalar>
void pack_rows(const TensorView<const Scalar>& x,
               std::int64_t b,
               std::int64_t h,
               std::int64_t row0,
               std::int64_t n,
               Scalar scale,
               Scalar* t,
               std::int64_t ld,
               const std::int64_t* map = nullptr) {
    for (std::int64_t r = 0; r < n; ++r) {
        const Scalar* row = x.row(b, h, mapped(map, row0 + r));
        for (std::int64_t k = 0; k < x.cols; ++k)
            t[r * ld + k] = row[k] * scale;
        std::fill(t + r * ld + x.cols, t + (r + 1) * ld, Scalar(0));
    }
}

/// Stores v at p, a whole vector, past the caches when `stream` and p is on a vector boundary
/// (a non-temporal store: no read for ownership of the line, which a row written whole does
/// not need); the caller fences (streamed_fence) before another thread may read it.
template <typename T>
inline void store_row_vector(T* p, Vec<T> v, bool stream) {
#if IOATTN_ISA_LEVEL == 3
    if constexpr (std::is_same_v<T, float>) {
        if (stream && reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0) {
            _mm512_stream_ps(p, as<__m512>(v));
            return;
        }
    }
#endif
    (void)stream;
    store(p, v);
}

/// Orders the streamed stores before whatever follows (a task's end, which publishes them).
inline void streamed_fence() {
#if IOATTN_ISA_LEVEL >= 2
    _mm_sfence();
#endif
}

/// The inverse of pack_transposed: rows [row0, row0 + n) of a view (cols wide) = t^T, row r
/// scaled by scale_of(r), in the same 16 x 16 blocks (O from O^T, dK/dV/dQ from theirs); with
/// `map`, row r is the view's row map[row0 + r]. With `stream`, whole vectors of rows are
/// stored past the caches (store_row_vector; fenced before it returns).
template <typename Scalar, typename ScaleOf>
void unpack_transposed(const Scalar* t,
                       std::int64_t ld,
                       ScaleOf scale_of,
                       const TensorView<Scalar>& x,
                       std::int64_t b,
                       std::int64_t h,
                       std::int64_t row0,
                       std::int64_t n,
                       const std::int64_t* map = nullptr,
                       bool stream = false) {
    const auto row_of = [&](std::int64_t r) { return x.row(b, h, mapped(map, row0 + r)); };
    constexpr std::int64_t kBlock = 16;
    for (std::int64_t r0 = 0; r0 < n; r0 += kBlock) {
        const std::int64_t r1 = std::min(n, r0 + kBlock);
        for (std::int64_t k0 = 0; k0 < x.cols; k0 += kBlock) {
            const std::int64_t k1 = std::min(x.cols, k0 + kBlock);
#if IOATTN_ISA_LEVEL == 3
            if constexpr (std::is_same_v<Scalar, float>) {
                if (r1 - r0 == kBlock && k1 - k0 == kBlock) { // a whole block, in registers
                    Vec<float> v[16];
                    for (int k = 0; k < 16; ++k)
                        v[k] = load(t + (k0 + k) * ld + r0);
                    transpose16(v);
                    for (int r = 0; r < 16; ++r)
                        store_row_vector(row_of(r0 + r) + k0, v[r] * scale_of(r0 + r), stream);
                    continue;
                }
            }
#endif
            for (std::int64_t r = r0; r < r1; ++r) {
                Scalar* row = row_of(r);
                const Scalar scale = scale_of(r);
                for (std::int64_t k = k0; k < k1; ++k)
                    row[k] = t[k * ld + r] * scale;
            }
        }
    }
    if (stream)
        streamed_fence();
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
