#pragma once
// The rows of a row block that have keys in a tile, as runs, for the materializing forward: a
// pass over the row block's non-empty tiles in increasing order visits each (row, tile) with a
// pair once. Two ways, chosen per row block from its tiles' pair counts:
//  - scanned: every row's cursor is checked per tile (a row with no key there costs one
//    compare), when most rows have keys in most tiles (random, strided);
//  - bucketed: each row waits in a list for the tile of its next key, so a tile visits only
//    its rows with pairs, when a few rows per tile do (bigbird:64:2:3 at b = 352: ~22 random
//    pairs in each of 44 tiles per row block).
// Bucketing, against every row visited per tile: 1.41x on bigbird:64:2:3 (ioattn run --N 16384
// --d 64 --pattern bigbird:64:2:3 --schedule materialized --threads 1 --repeat 3). Scanning
// visits rows inline, so that the index misses overlap the arithmetic, and costs random's
// rows, which have runs in most tiles, no division and list push per run.

#include "kernels/materialized/tile_ops.hpp"

#include <ioattn/sparse/block_view.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Rows i0.. of the support over key tiles of width bs. Storage: words(r, n_k, bs) words,
/// handed in (per row a cursor, a link and its first key if its keys are an interval, else -1;
/// first and last row per key tile). An interval row's run is arithmetic (interval_keys), told
/// once per row block: testing row.back() per row and tile would miss in L1, a fifth of
/// scanning's time.
class TileRows {
public:
    static std::int64_t words(std::int64_t r, std::int64_t n_k, std::int64_t bs) {
        return 6 * r + 2 * tiles(n_k, bs);
    }

    /// Bucketed when the tiles hold fewer than half of r runs on average (runs <= pairs).
    static bool bucketed(std::span<const BlockTile> tiles, std::int64_t r) {
        std::int64_t runs = 0;
        for (const BlockTile& t : tiles)
            runs += std::min(t.nonzeros, r);
        return 2 * runs < r * static_cast<std::int64_t>(tiles.size());
    }

    TileRows() = default;

    TileRows(const Support& s,
             std::int64_t i0,
             std::int64_t r,
             std::int64_t bs,
             bool bucketed,
             std::int64_t* at)
        : s_(&s)
        , i0_(i0)
        , r_(r)
        , bs_(bs)
        , bucketed_(bucketed)
        , cursor_(at)
        , next_(at + r)
        , front_(at + 2 * r)
        , run_x_(at + 3 * r)
        , run_lo_(at + 4 * r)
        , run_hi_(at + 5 * r)
        , first_(at + 6 * r)
        , last_(first_ + tiles(s.n_k(), bs)) {
        for (std::int64_t x = 0; x < r; ++x) { // the same for every pass over the block
            const auto row = s.row(i0 + x);
            const auto n = static_cast<std::int64_t>(row.size());
            front_[x] = n > 0 && row.back() - row.front() + 1 == n ? row.front() : -1;
        }
    }

    /// Every row back at its first key (a pass over the row block's tiles starts).
    void start() {
        taken_ = -1;
        if (bucketed_)
            std::fill(first_, first_ + tiles(s_->n_k(), bs_), std::int64_t{-1});
        for (std::int64_t x = 0; x < r_; ++x) {
            const auto row = s_->row(i0_ + x);
            cursor_[x] = 0;
            if (bucketed_ && !row.empty())
                push(x, row.front() / bs_);
        }
    }

    /// f(x, lo, hi) for each row x with keys in tile [j0, j0 + c) (col block j0 / bs), at
    /// positions [lo, hi) of its row; with `advance`, the rows then move past the tile (the
    /// last visit of a tile in a pass). Tiles come in increasing order, every non-empty one
    /// of the row block.
    template <typename F>
    void visit(std::int64_t j0, std::int64_t c, bool advance, F&& f) {
        if (!bucketed_) {
            for (std::int64_t x = 0; x < r_; ++x) {
                const auto [lo, hi] = run(x, j0, c);
                if (lo < hi) {
                    f(x, lo, hi);
                    if (advance)
                        cursor_[x] = hi;
                }
            }
            return;
        }
        if (taken_ != j0) { // the tile's list walked once into runs, not once per visit:
            taken_ = j0;    // 1.19x on bigbird:64:2:3's materializing forward, 1 thread
            n_runs_ = 0;
            for (std::int64_t x = first_[j0 / bs_]; x >= 0; x = next_[x]) {
                const auto [lo, hi] = run(x, j0, c);
                run_x_[n_runs_] = x;
                run_lo_[n_runs_] = lo;
                run_hi_[n_runs_++] = hi;
            }
        }
        for (std::int64_t k = 0; k < n_runs_; ++k)
            f(run_x_[k], run_lo_[k], run_hi_[k]);
        if (!advance)
            return;
        taken_ = -1;
        for (std::int64_t k = 0; k < n_runs_; ++k) {
            const std::int64_t x = run_x_[k], hi = run_hi_[k];
            const auto row = s_->row(i0_ + x);
            cursor_[x] = hi;
            if (hi < static_cast<std::int64_t>(row.size()))
                push(x, row[static_cast<std::size_t>(hi)] / bs_);
        }
    }

private:
    static std::int64_t tiles(std::int64_t n_k, std::int64_t bs) { return (n_k + bs - 1) / bs; }

    /// Row x's run in [j0, j0 + c) from its cursor.
    std::pair<std::int64_t, std::int64_t>
    run(std::int64_t x, std::int64_t j0, std::int64_t c) const {
        const auto row = s_->row(i0_ + x);
        return front_[x] < 0
                   ? keys_from(row, j0, c, cursor_[x])
                   : interval_keys(front_[x], static_cast<std::int64_t>(row.size()), j0, c);
    }

    void push(std::int64_t x, std::int64_t tile) { // appended: one tile's rows keep their order
        next_[x] = -1;
        if (first_[tile] < 0)
            first_[tile] = x;
        else
            next_[last_[tile]] = x;
        last_[tile] = x;
    }

    const Support* s_ = nullptr;
    std::int64_t i0_ = 0, r_ = 0, bs_ = 1;
    bool bucketed_ = false;
    std::int64_t *cursor_ = nullptr, *next_ = nullptr, *front_ = nullptr;
    std::int64_t *run_x_ = nullptr, *run_lo_ = nullptr, *run_hi_ = nullptr; // the taken tile's
    std::int64_t *first_ = nullptr, *last_ = nullptr;
    std::int64_t taken_ = -1, n_runs_ = 0;
};

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
