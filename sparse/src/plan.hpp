#pragma once
// The fused sparse schedule's plan: row blocks cut by rows and by nonzeros, and for each block
// the sorted keys some row of it may see (the K/V rows the block streams). Built in parallel,
// O(Z_QK + sum over blocks of k log k) for k visible keys per block, once per (support, rows):
// Support::cached_fused_plan keeps it with the structure, so repeated calls do not rebuild it.

#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

struct FusedPlan {
    std::vector<std::int64_t> bounds;      ///< n_blocks + 1 row boundaries
    std::vector<std::int64_t> key_offsets; ///< n_blocks + 1 offsets into keys
    std::vector<std::int64_t> keys;        ///< per block, sorted unique visible keys
    std::vector<std::int64_t> row_lo;      ///< per query row: its keys are [lo, hi] (empty row:
    std::vector<std::int64_t> row_hi;      ///< [0, -1]); lo = -1: not an interval
    /// Per block, the indices a pass over it reads from slow memory: the column indices of
    /// each row that is not an interval (mask_chunk walks them), and its key list unless the
    /// block is simple (every row an interval, the keys one interval: the kernels then read
    /// only the ends of each chunk, and mask by the row intervals). Not counted: the row
    /// intervals (2 per row, O(n_q) per head beside the n_q (d + d_v + 1) words of Q, O and
    /// L), and the list of a simple block where the backward's bookkeeping or a sparse input's
    /// copy walks it (one index per streamed row beside its d + d_v + 2 words).
    std::vector<std::int64_t> index_reads;

    [[nodiscard]] std::int64_t blocks() const {
        return static_cast<std::int64_t>(bounds.size()) - 1;
    }

    [[nodiscard]] std::span<const std::int64_t> keys_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const std::int64_t>(keys).subspan(lo, hi - lo);
    }

    [[nodiscard]] std::int64_t row0(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b)];
    }

    [[nodiscard]] std::int64_t rows(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b) + 1] - bounds[static_cast<std::size_t>(b)];
    }

    /// The indices block b reads, in words of Scalar (an int64 is 8 / sizeof(Scalar) words).
    template <typename Scalar>
    [[nodiscard]] std::int64_t index_words(std::int64_t b) const {
        return index_reads[static_cast<std::size_t>(b)] * kIndexReadWords<Scalar>;
    }

    static FusedPlan build(const Support& support, std::int64_t max_rows);
};

/// The pairs above which a row of `s` is heavy (global tokens, a graph's hubs): 4x the mean
/// row's, 4 ceil(Z_QK / n_q). row_blocks and the dispatcher's split count heavy rows by it.
inline std::int64_t heavy_above(const Support& s) {
    return s.n_q() > 0 ? 4 * ((s.z_qk() + s.n_q() - 1) / s.n_q()) : 0;
}

/// The shortest run of consecutive keys the fused kernels read in place as a chunk of its own.
inline constexpr std::int64_t kMinRun = 16;

/// Length of the next chunk of keys[y0, n) (sorted, unique) of the fused kernels, at most
/// `max`: a run of at least kMinRun consecutive keys (whole key blocks, a band) forms chunks of
/// its own, split evenly, so that they are read in place; other keys are gathered together up
/// to the next such run. The chunking changes what is copied, never what is counted.
inline std::int64_t
chunk_length(const std::int64_t* keys, std::int64_t n, std::int64_t y0, std::int64_t max) {
    const auto run_from = [&](std::int64_t y) {
        return y + kMinRun <= n && keys[y + kMinRun - 1] - keys[y] == kMinRun - 1;
    };
    if (run_from(y0)) {
        std::int64_t run = kMinRun;
        while (y0 + run < n && keys[y0 + run] == keys[y0] + run)
            ++run;
        const std::int64_t parts = (run + max - 1) / max;
        return (run + parts - 1) / parts;
    }
    std::int64_t c = 1;
    while (c < max && y0 + c < n && !run_from(y0 + c))
        ++c;
    return c;
}

/// Per-row state of mask_chunk for the rows [i0, i0 + r) of one block: the position of the next
/// key in the row, and the row's keys as an interval [lo, hi] (lo = -1: not an interval). Read
/// once per block, so the chunks never touch the row's index array for interval rows.
struct RowCursors {
    std::int64_t* pos = nullptr;
    std::int64_t* lo = nullptr;
    std::int64_t* hi = nullptr;
};

/// The cursors of rows [i0, i0 + r) from the plan's row intervals (no access to the support's
/// index arrays); positions in `base` (r words).
inline RowCursors
row_cursors(const FusedPlan& plan, std::int64_t i0, std::int64_t r, std::int64_t* base) {
    std::fill(base, base + r, std::int64_t{0});
    const auto at = static_cast<std::size_t>(i0);
    return RowCursors{base,
                      const_cast<std::int64_t*>(plan.row_lo.data() + at),
                      const_cast<std::int64_t*>(plan.row_hi.data() + at)};
}

/// The entries [lo, hi) of the chunk keys[0, c) that some row of [x0, x1) of the block at row
/// i0 sees (lo == hi: none), from the row intervals and, for other rows, from the cursors:
/// each row's keys before the chunk have been consumed, so its keys in the chunk start at its
/// cursor. Scores outside [lo, hi) are not computed for those rows: every one of them would be
/// masked. Measured (Zen 3, N = 16384, d = 64, 2 threads, forward): rows that are not one
/// interval (a window plus global keys, bigbird) used to compute every entry of the chunk.
inline std::pair<std::int64_t, std::int64_t> chunk_span(const Support& s,
                                                        std::int64_t i0,
                                                        const RowCursors& cur,
                                                        std::int64_t x0,
                                                        std::int64_t x1,
                                                        const std::int64_t* keys,
                                                        std::int64_t c) {
    const bool interval = keys[c - 1] - keys[0] + 1 == c;
    const auto first_at = [&](std::int64_t j) { // the first entry >= key j
        return interval ? j - keys[0] : std::lower_bound(keys, keys + c, j) - keys;
    };
    const auto end_at = [&](std::int64_t j) { // one past the last entry <= key j
        return interval ? j - keys[0] + 1 : std::upper_bound(keys, keys + c, j) - keys;
    };
    std::int64_t lo = c, hi = 0;
    for (std::int64_t x = x0; x < x1; ++x) {
        std::int64_t first = 0, last = -1; // the row's keys in the chunk span [first, last]
        if (cur.lo[x] >= 0) {
            first = std::max(cur.lo[x], keys[0]);
            last = std::min(cur.hi[x], keys[c - 1]);
        } else {
            const auto row = s.row(i0 + x);
            const auto p = row.begin() + cur.pos[x];
            if (p == row.end() || *p > keys[c - 1])
                continue;
            first = *p; // the row's keys in the chunk are at most c, from p on
            const auto end = row.end() - p > c ? p + c : row.end();
            last = *(std::upper_bound(p, end, keys[c - 1]) - 1);
        }
        if (first > last)
            continue;
        lo = std::min(lo, first_at(first));
        hi = std::max(hi, end_at(last));
        if (lo == 0 && hi == c)
            break; // the whole chunk (block patterns: the first row)
    }
    return {lo, std::max(lo, hi)};
}

/// Masks row x of St outside the run [lo, hi) of the chunk's c entries (hi < lo: all of it).
template <typename Scalar>
inline void mask_outside(
    Scalar* st, std::int64_t ld, std::int64_t x, std::int64_t lo, std::int64_t hi, std::int64_t c) {
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    for (std::int64_t y = 0; y < lo; ++y)
        st[y * ld + x] = kNegInf;
    for (std::int64_t y = std::max(lo, hi); y < c; ++y)
        st[y * ld + x] = kNegInf;
}

/// Applies Omega to the chunk keys[0, c) of St (st[y * ld + x] for chunk entry y and row x):
/// entries outside Omega become -inf. Interval rows against an interval chunk mask a prefix and
/// a suffix; other rows merge their sorted keys from their cursor. Rows whose keys cover the
/// chunk are left alone. Returns whether any row was partial.
template <typename Scalar>
inline bool mask_chunk(const Support& s,
                       std::int64_t i0,
                       std::int64_t r,
                       const std::int64_t* keys,
                       std::int64_t c,
                       const RowCursors& cur,
                       Scalar* st,
                       std::int64_t ld) {
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    const bool interval = keys[c - 1] - keys[0] + 1 == c; // the chunk is keys[0] .. keys[0]+c-1
    bool partial = false;
    for (std::int64_t x = 0; x < r; ++x) {
        if (interval && cur.lo[x] >= 0) {
            const std::int64_t n = cur.hi[x] - cur.lo[x] + 1;
            const std::int64_t lo = std::clamp<std::int64_t>(cur.lo[x] - keys[0], 0, c);
            const std::int64_t hi = std::clamp<std::int64_t>(cur.hi[x] - keys[0] + 1, 0, c);
            cur.pos[x] = std::clamp<std::int64_t>(keys[c - 1] - cur.lo[x] + 1, 0, n);
            if (lo == 0 && hi == c)
                continue;
            partial = true;
            mask_outside(st, ld, x, lo, hi, c);
            continue;
        }
        const auto row = s.row(i0 + x);
        const auto n = static_cast<std::int64_t>(row.size());
        std::int64_t a = cur.pos[x];
        // the row's keys in the chunk: at most c from its cursor on
        const std::int64_t e =
            std::upper_bound(row.begin() + a, row.begin() + std::min(n, a + c), keys[c - 1]) -
            row.begin();
        cur.pos[x] = e;
        if (e - a == c)
            continue; // every key of the chunk allowed
        partial = true;
        if (interval && e > a &&
            row[static_cast<std::size_t>(e - 1)] - row[static_cast<std::size_t>(a)] == e - 1 - a) {
            // one run of keys here (a band row with global keys elsewhere): mask around it, as
            // for an interval row, instead of merging the chunk. Measured (N = 16384, d = 64, 2
            // threads, medians of 4 alternated runs, forward): window:64+global:2 65.2 -> 73.2
            // GFLOP/s, window:256+global:4 115.9 -> 136.7, bigbird:64:2:3 60.3 -> 67.6
            mask_outside(st,
                         ld,
                         x,
                         row[static_cast<std::size_t>(a)] - keys[0],
                         row[static_cast<std::size_t>(e - 1)] - keys[0] + 1,
                         c);
            continue;
        }
        for (std::int64_t y = 0; y < c; ++y) {
            if (a < e && row[static_cast<std::size_t>(a)] == keys[y])
                ++a;
            else
                st[y * ld + x] = kNegInf;
        }
    }
    return partial;
}

} // namespace ioattn::sparse::detail
