#pragma once
/// Transposed packing between row-major views and the fused kernels' lane-major fast-memory
/// tiles (Q^T, K^T, dO^T, O^T: columns x padded rows), in 16 x 16 blocks; and row-major packing
/// with the columns padded to whole vectors (K rows as the lanes of dQ = dS K).

#include <ioattn/kernels/target.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cstdint>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// Packs rows [row0, row0 + n) of a view, transposed and scaled, into t (cols x ld), zero-padded.
/// 16 x 16 blocks, so that the 16 rows read and the 16 lines written stay in L1 (column at a
/// time, the 16-float lines of t were each written 16 times from L2: 1.4% of the forward).
template <typename Scalar>
void pack_transposed(const TensorView<const Scalar>& x,
                     std::int64_t b,
                     std::int64_t h,
                     std::int64_t row0,
                     std::int64_t n,
                     Scalar scale,
                     Scalar* t,
                     std::int64_t ld) {
    constexpr std::int64_t kBlock = 16;
    for (std::int64_t r0 = 0; r0 < ld; r0 += kBlock) {
        const std::int64_t r1 = std::min(ld, r0 + kBlock);
        for (std::int64_t k0 = 0; k0 < x.cols; k0 += kBlock) {
            const std::int64_t k1 = std::min(x.cols, k0 + kBlock);
            for (std::int64_t r = r0; r < r1; ++r) {
                if (r >= n) {
                    for (std::int64_t k = k0; k < k1; ++k)
                        t[k * ld + r] = Scalar(0);
                    continue;
                }
                const Scalar* row = x.row(b, h, row0 + r);
                for (std::int64_t k = k0; k < k1; ++k)
                    t[k * ld + r] = row[k] * scale;
            }
        }
    }
}

/// Packs rows [row0, row0 + n) of a view, scaled, into t (n x ld), columns zero-padded to ld.
template <typename Scalar>
void pack_rows(const TensorView<const Scalar>& x,
               std::int64_t b,
               std::int64_t h,
               std::int64_t row0,
               std::int64_t n,
               Scalar scale,
               Scalar* t,
               std::int64_t ld) {
    for (std::int64_t r = 0; r < n; ++r) {
        const Scalar* row = x.row(b, h, row0 + r);
        for (std::int64_t k = 0; k < x.cols; ++k)
            t[r * ld + k] = row[k] * scale;
        std::fill(t + r * ld + x.cols, t + (r + 1) * ld, Scalar(0));
    }
}

/// The inverse of pack_transposed: rows [row0, row0 + n) of a view (cols wide) = t^T, row r
/// scaled by scale_of(r), in the same 16 x 16 blocks (O from O^T, dK/dV/dQ from theirs).
template <typename Scalar, typename ScaleOf>
void unpack_transposed(const Scalar* t,
                       std::int64_t ld,
                       ScaleOf scale_of,
                       const TensorView<Scalar>& x,
                       std::int64_t b,
                       std::int64_t h,
                       std::int64_t row0,
                       std::int64_t n) {
    constexpr std::int64_t kBlock = 16;
    for (std::int64_t r0 = 0; r0 < n; r0 += kBlock) {
        const std::int64_t r1 = std::min(n, r0 + kBlock);
        for (std::int64_t k0 = 0; k0 < x.cols; k0 += kBlock) {
            const std::int64_t k1 = std::min(x.cols, k0 + kBlock);
            for (std::int64_t r = r0; r < r1; ++r) {
                Scalar* row = x.row(b, h, row0 + r);
                const Scalar scale = scale_of(r);
                for (std::int64_t k = k0; k < k1; ++k)
                    row[k] = t[k * ld + r] * scale;
            }
        }
    }
}

/// Prefetches the `part`-th of `parts` equal shares of rows [row0, row0 + n) of slice (b, h)
/// into the cache (for writing when `write`). Spread over the column blocks of a row block, it
/// brings the next block's Q rows and this block's O rows in while the tiles compute: both
/// packs missed to DRAM one scalar at a time (3.8% of the forward at N=4096, d=128).
template <typename T>
void prefetch_share(const TensorView<T>& x,
                    std::int64_t b,
                    std::int64_t h,
                    std::int64_t row0,
                    std::int64_t n,
                    std::int64_t part,
                    std::int64_t parts,
                    bool write) {
    constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
    for (std::int64_t r = n * part / parts; r < n * (part + 1) / parts; ++r) {
        const T* row = x.row(b, h, row0 + r);
        for (std::int64_t k = 0; k < x.cols; k += kLine) {
            if (write)
                __builtin_prefetch(row + k, 1, 3);
            else
                __builtin_prefetch(row + k, 0, 3);
        }
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
