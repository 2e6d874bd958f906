#pragma once
// Tile operations of the materializing sparse kernels (forward_materialized.cpp,
// backward_materialized.cpp): where a row's keys fall in a tile, and S_ij = A_i B_j^T on the
// allowed pairs of a tile, on the broadcast micro-kernel when the tile is dense enough.

#include "kernels/common/row_products.hpp"
#include "kernels/materialized/tile_rule.hpp"

#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/strip.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The positions of the keys in [j0, j0 + c) in an interval row of n keys from `front`.
inline std::pair<std::int64_t, std::int64_t>
interval_keys(std::int64_t front, std::int64_t n, std::int64_t j0, std::int64_t c) {
    return {std::clamp<std::int64_t>(j0 - front, 0, n),
            std::clamp<std::int64_t>(j0 + c - front, 0, n)};
}

/// The positions [first, last) in `row` (sorted keys) of the keys in [j0, j0 + c): arithmetic
/// for an interval row (banded patterns: no index is read, where a scan would miss on the
/// index array, 17% of the materializing forward), else found by binary search.
inline std::pair<std::int64_t, std::int64_t>
keys_in(std::span<const std::int64_t> row, std::int64_t j0, std::int64_t c) {
    const auto n = static_cast<std::int64_t>(row.size());
    if (n > 0 && row.back() - row.front() + 1 == n)
        return interval_keys(row.front(), n, j0, c);
    const auto lo = std::lower_bound(row.begin(), row.end(), j0);
    return {lo - row.begin(), std::lower_bound(lo, row.end(), j0 + c) - row.begin()};
}

/// As keys_in, scanned from `from`, the first position not in an earlier tile (a pass over a
/// row's tiles in increasing order).
inline std::pair<std::int64_t, std::int64_t>
keys_from(std::span<const std::int64_t> row, std::int64_t j0, std::int64_t c, std::int64_t from) {
    const auto n = static_cast<std::int64_t>(row.size());
    if (from >= n || row[static_cast<std::size_t>(from)] >= j0 + c)
        return {from, from}; // a scattered row's common case: no key in this tile
    const std::int64_t end = j0 + c;
    std::int64_t e = from + 1;
    while (e < n && row[static_cast<std::size_t>(e)] < end)
        ++e;
    return {from, e};
}

/// A tile of sparse rows with fewer than (r + c) / kScatterPairs pairs takes its dot products
/// over the stored entries; a fuller one scatters its rows first. The cut lies between
/// random:0.02's tiles (~82 pairs: scattered 1.9x faster) and bigbird:64:2:3's random keys (1
/// to 3 pairs: stored-entry dots 1.35x faster) (ioattn run --N 16384 --d 64 --pattern P
/// --input-density 0.25 --schedule materialized --threads 2 --repeat 3).
inline constexpr std::int64_t kScatterPairs = 4;

/// The keys of `keys` (ascending) in [j0, j0 + c): a tile's touched keys when `keys` are the
/// keys its row block sees (BlockView::keys_of), a tile's touched queries on Omega^T.
inline std::span<const std::int64_t>
keys_within(std::span<const std::int64_t> keys, std::int64_t j0, std::int64_t c) {
    const auto lo = std::lower_bound(keys.begin(), keys.end(), j0);
    const auto hi = std::lower_bound(lo, keys.end(), j0 + c);
    return keys.subspan(static_cast<std::size_t>(lo - keys.begin()),
                        static_cast<std::size_t>(hi - lo));
}

/// Where a tile's product goes: rows [i0, i0 + r) x keys [j0, j0 + c) of Omega with nnz pairs;
/// tile[x * ld + y], ld a whole number of vectors >= c; kt (zw x ld) and ones (ld) are scratch.
/// `keys`: the tile's touched keys (ascending, some pair has them); a dense tile packs the
/// others as rows of `zeros` (zw words), so that only touched key rows are read (their columns
/// of the tile are never kept).
template <typename Scalar>
struct TileTarget {
    std::int64_t i0, r, j0, c, nnz;
    Scalar* tile;
    std::int64_t ld;
    Scalar* kt;
    const Scalar* ones;
    std::span<const std::int64_t> keys;
    const Scalar* zeros;
};

/// Rows [row0, row0 + n) of one operand of slice (b, h), as a tile product reads them: in
/// place when dense, scattered into buf (n x chunk width) when a dense product needs them
/// (with `only`, just those rows, absolute and ascending; the others are never read).
template <typename Scalar>
struct ChunkRows {
    const RowSource<Scalar>* src;
    std::int64_t b, h, row0, n;
    Scalar* buf;
    std::optional<std::span<const std::int64_t>> only{};

    [[nodiscard]] RowBlock<Scalar> block(std::int64_t c0, std::int64_t cw) const {
        return only ? src->rows(b, h, row0, c0, cw, buf, *only)
                    : src->rows(b, h, row0, n, c0, cw, buf);
    }
};

/// tile[x][y] = A_x . B_y (first chunk) or += (later chunks) over columns [c0, c0 + zw), for
/// the allowed pairs of the tile (other entries: undefined, never read). a: query rows i0..,
/// b: keys j0... A dense tile runs in broadcast_block (sparse rows scattered first); a sparse
/// one takes a dot product per allowed pair, four keys of a row at a time (kernels::dot4: the
/// query row read once, one lane reduction for the four: 1.11x on random:0.02, ioattn run
/// --N 16384 --d 64 --pattern random:0.02 --schedule materialized --threads 2 --repeat 3), or
/// over the stored entries of a sparse
/// side (chunk_dot: nothing is scattered). rows(f) calls f(x, lo, hi) for the tile's rows with
/// pairs, their keys at positions [lo, hi) of row i0 + x (TileRows::visit; the overload
/// without `rows` visits every row, its keys by binary search).
template <typename Scalar, typename Rows>
void sddmm_chunk(const Support& s,
                 const TileTarget<Scalar>& t,
                 const ChunkRows<Scalar>& a,
                 const ChunkRows<Scalar>& b,
                 std::int64_t c0,
                 std::int64_t zw,
                 bool first,
                 const Rows& rows) {
    if (!per_pair_tile(t.nnz, t.r, t.c)) { // B^T lanes zero-padded to ld
        const RowBlock<Scalar> ra = a.block(c0, zw), rb = b.block(c0, zw);
        const bool all = static_cast<std::int64_t>(t.keys.size()) == t.c;
        kernels::pack_rows_transposed(
            [&](std::int64_t y) {
                return all || std::binary_search(t.keys.begin(), t.keys.end(), t.j0 + y) ? rb.row(y)
                                                                                         : t.zeros;
            },
            t.c,
            zw,
            Scalar(1),
            t.kt,
            t.ld);
        kernels::broadcast_block(ra.p,
                                 ra.ld,
                                 1,
                                 t.r,
                                 t.kt,
                                 t.ld,
                                 zw,
                                 t.ld / kernels::Simd<Scalar>::kLanes,
                                 first ? static_cast<const Scalar*>(nullptr) : t.ones,
                                 t.tile,
                                 t.ld);
        return;
    }
    // Sparse rows are scattered (then dense dots) unless the tile has so few pairs that the
    // scatter would cost more than the stored-entry dots (kScatterPairs).
    const bool stored =
        (a.src->sparse != nullptr || b.src->sparse != nullptr) && t.nnz * kScatterPairs < t.r + t.c;
    RowBlock<Scalar> ra{}, rb{};
    if (!stored) {
        ra = a.block(c0, zw);
        rb = b.block(c0, zw);
    }
    const auto pairs = [&](std::int64_t x, std::int64_t lo, std::int64_t hi) {
        const auto row = s.row(t.i0 + x);
        Scalar* out = t.tile + x * t.ld; // entry y: set by the first chunk, then accumulated
        std::int64_t e = lo;
        if (!stored) // four keys at a time: the query row read once, one shared lane reduction
            for (; e + 4 <= hi; e += 4) {
                std::int64_t y[4];
                const Scalar* kr[4];
                Scalar v[4];
                for (int k = 0; k < 4; ++k) {
                    y[k] = row[static_cast<std::size_t>(e + k)] - t.j0;
                    kr[k] = rb.row(y[k]);
                }
                kernels::dot4(ra.row(x), kr, zw, v);
                for (int k = 0; k < 4; ++k)
                    out[y[k]] = first ? v[k] : out[y[k]] + v[k];
            }
        for (; e < hi; ++e) {
            const std::int64_t y = row[static_cast<std::size_t>(e)] - t.j0;
            const Scalar v =
                stored ? chunk_dot<Scalar>(
                             *a.src, a.b, a.h, a.row0 + x, *b.src, b.h, b.row0 + y, c0, zw)
                       : kernels::dot(ra.row(x), rb.row(y), zw);
            out[y] = first ? v : out[y] + v;
        }
    };
    rows(pairs);
}

/// sddmm_chunk over every row of the tile, its keys found by binary search (keys_in).
template <typename Scalar>
void sddmm_chunk(const Support& s,
                 const TileTarget<Scalar>& t,
                 const ChunkRows<Scalar>& a,
                 const ChunkRows<Scalar>& b,
                 std::int64_t c0,
                 std::int64_t zw,
                 bool first) {
    sddmm_chunk(s, t, a, b, c0, zw, first, [&](const auto& f) {
        for (std::int64_t x = 0; x < t.r; ++x) {
            const auto [lo, hi] = keys_in(s.row(t.i0 + x), t.j0, t.c);
            f(x, lo, hi);
        }
    });
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
