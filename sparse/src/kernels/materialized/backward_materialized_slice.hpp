#pragma once
// The state the phases of sparse backward_materialized share for one kv slice (batch, kv
// head) and its group of query heads: the operands, Omega's and Omega^T's block views, the
// slow-memory P/dS store, and the per-worker fast-memory layout (see backward_materialized.cpp,
// whose opening block states the schedule and its I/O). A kernel header: compiled once per
// instruction set inside that file.

#include "kernels/common/row_source.hpp"
#include "kernels/materialized/tile_ops.hpp"

#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/block_view.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// One kv slice (batch bb, kv head g) and its group of query heads, tiles of side b, feature
/// chunks of width w (Tiling::feature_chunk). `pds` is the slow-memory P/dS store
/// [group][Z_QK], tile-major (a tile's values as one run, row by row); `fast` the per-worker scratch: D (rb), a dense tile (rb x ld),
/// an accumulator (max(rb, cb) x wb), the scattered chunks of sparse operands (rb x wb for Q,
/// cb x wb for K or V), the B^T of a dense tile (wb x ld), ones (ld), one key's values down a
/// row tile (rb) and zeros (wb: the untouched keys of a dense tile),
/// rb = min(b, n_q), cb = min(b, n_k), wb = min(w, max(d, d_v)), ld = cb padded to vectors.
template <typename Scalar>
struct Slice {
    const BackwardArgs<Scalar>* a;
    const Operands<Scalar>* src;
    const Support* s;
    const BlockView* rows_view; ///< Omega, b x b: per row tile, its non-empty key tiles
    const BlockView* keys_view; ///< Omega^T, b x b: per key tile, its non-empty row tiles
    std::int64_t b, bb, g;
    Scalar* pds;
    const kernels::Workspace<Scalar>* fast;
    std::int64_t w; ///< the feature chunk
    /// per entry of Omega^T, its place in the tile-major P/dS store (tile_places)
    const std::int64_t* at_t;

    [[nodiscard]] static std::int64_t lanes(const Problem& p, std::int64_t b) {
        constexpr int kL = kernels::Simd<Scalar>::kLanes;
        return (std::min(b, p.n_k) + kL - 1) / kL * kL;
    }

    [[nodiscard]] static std::int64_t
    scratch_words(const Problem& p, std::int64_t b, std::int64_t chunk) {
        const std::int64_t rb = std::min(b, p.n_q), cb = std::min(b, p.n_k);
        const std::int64_t wb = std::min(chunk, std::max(p.d, p.d_v)), ld = lanes(p, b);
        return rb + rb * ld + std::max(rb, cb) * wb + (rb + cb) * wb + wb * ld + ld + rb + wb;
    }

    [[nodiscard]] const Problem& p() const { return a->problem; }

    [[nodiscard]] std::int64_t ld() const { return lanes(p(), b); }

    [[nodiscard]] Scalar* delta(int worker) const { return fast->slab(worker); }

    [[nodiscard]] Scalar* tile(int worker) const { return delta(worker) + std::min(b, p().n_q); }

    [[nodiscard]] Scalar* acc(int worker) const {
        return tile(worker) + std::min(b, p().n_q) * ld();
    }

    [[nodiscard]] std::int64_t chunk_width() const { return std::min(w, std::max(p().d, p().d_v)); }

    /// Scattered Q chunk (rows x chunk_width) of a sparse Q.
    [[nodiscard]] Scalar* q_chunk(int worker) const {
        return acc(worker) + std::max(std::min(b, p().n_q), std::min(b, p().n_k)) * chunk_width();
    }

    /// Scattered K or V chunk (keys x chunk_width) of a sparse K or V.
    [[nodiscard]] Scalar* kv_chunk(int worker) const {
        return q_chunk(worker) + std::min(b, p().n_q) * chunk_width();
    }

    /// B^T of a dense tile (chunk_width x ld), then ones (ld, set by the kernel's driver).
    [[nodiscard]] Scalar* kt(int worker) const {
        return kv_chunk(worker) + std::min(b, p().n_k) * chunk_width();
    }

    [[nodiscard]] Scalar* ones(int worker) const { return kt(worker) + chunk_width() * ld(); }

    /// One key's stored values down a row tile (rb).
    [[nodiscard]] Scalar* column(int worker) const { return ones(worker) + ld(); }

    /// Zeros (chunk_width, set by the kernel's driver with ones).
    [[nodiscard]] Scalar* zeros(int worker) const { return column(worker) + std::min(b, p().n_q); }

    /// Where S_ij of rect (i0, r, j0, c) with nnz pairs and touched keys `keys` goes in
    /// worker's scratch.
    [[nodiscard]] TileTarget<Scalar> target(int worker,
                                            std::int64_t i0,
                                            std::int64_t r,
                                            std::int64_t j0,
                                            std::int64_t c,
                                            std::int64_t nnz,
                                            std::span<const std::int64_t> keys) const {
        return {
            i0, r, j0, c, nnz, tile(worker), ld(), kt(worker), ones(worker), keys, zeros(worker)};
    }

    /// The keys of row tile i0 with a pair in key tile [j0, j0 + c), ascending.
    [[nodiscard]] std::span<const std::int64_t>
    touched_keys(std::int64_t i0, std::int64_t j0, std::int64_t c) const {
        return keys_within(rows_view->keys_of(i0 / b), j0, c);
    }

    /// The queries of key tile j0 with a pair in row tile [i0, i0 + r), ascending.
    [[nodiscard]] std::span<const std::int64_t>
    touched_queries(std::int64_t j0, std::int64_t i0, std::int64_t r) const {
        return keys_within(keys_view->keys_of(j0 / b), i0, r);
    }

    [[nodiscard]] std::int64_t head(std::int64_t k) const { return g * p().group() + k; }

    [[nodiscard]] std::int64_t q_slice(std::int64_t k) const { return bb * p().heads + head(k); }

    [[nodiscard]] std::int64_t kv_slice() const { return bb * p().kv_heads + g; }

    [[nodiscard]] std::int64_t rows(std::int64_t i0) const { return std::min(b, p().n_q - i0); }

    [[nodiscard]] std::int64_t cols(std::int64_t j0) const { return std::min(b, p().n_k - j0); }

    /// CSR positions [lo, hi) of the keys of row i in [j0, j0 + c).
    [[nodiscard]] std::pair<std::int64_t, std::int64_t>
    segment(std::int64_t i, std::int64_t j0, std::int64_t c) const {
        const std::int64_t base = s->row_offsets()[static_cast<std::size_t>(i)];
        const auto [lo, hi] = keys_in(s->row(i), j0, c);
        return {base + lo, base + hi};
    }

    /// Key of the CSR position e.
    [[nodiscard]] std::int64_t key(std::int64_t e) const {
        return s->col_indices()[static_cast<std::size_t>(e)];
    }

    /// The stored P/dS value of head k at place e of the tile-major store.
    [[nodiscard]] Scalar& store(std::int64_t k, std::int64_t e) const {
        return pds[k * s->z_qk() + e];
    }
};

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
