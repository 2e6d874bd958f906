#pragma once
// The fused sparse kernels' chunks of a block's visible keys and Omega applied to a chunk's
// score tile: chunk_length cuts the key list into chunks read in place or gathered,
// RowCursors walk each row's keys outside its run, chunk_spans bounds the entries a range of
// rows sees, mask_chunk sets the entries outside Omega to -inf.

#include "support/block_keys.hpp"

#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

namespace ioattn::sparse::detail {

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
        // the run's length by bisection (keys[y0 + m] == keys[y0] + m holds for m below it and
        // fails above: the keys are sorted and unique), not by a walk, which would cost a
        // heavy row's block of 16384 keys its rest once per chunk, 2 M steps a pass
        std::int64_t run = kMinRun, past = n - y0 + 1; // a run of `run` keys, not of `past`
        while (past - run > 1) {
            const std::int64_t mid = run + (past - run) / 2;
            (keys[y0 + mid - 1] == keys[y0] + mid - 1 ? run : past) = mid;
        }
        const std::int64_t parts = (run + max - 1) / max;
        return (run + parts - 1) / parts;
    }
    std::int64_t c = 1;
    while (c < max && y0 + c < n && !run_from(y0 + c))
        ++c;
    return c;
}

/// Per-row state of mask_chunk for the rows [i0, i0 + r) of one block. Each row is its run
/// (the longest interval [lo, hi] of consecutive keys it sees, at position run_at of its sorted
/// keys) plus its extra keys, those outside the run (a band's global keys, a graph's scattered
/// neighbours); pos is the position of the row's next extra key not yet consumed (the row's
/// length: none left). The run is read from the plan, so the chunks touch a row's index array
/// only for its extra keys: a window with global keys reads two indices per row, not all 133.
/// Against walking every key of every row: 1.39x forward on bigbird:64:2:3 (ioattn run --N 16384
/// --d 64 --pattern bigbird:64:2:3 --schedule fused --threads 2 --repeat 20).
struct RowCursors {
    std::int64_t* pos = nullptr;
    const std::int64_t* lo = nullptr;
    const std::int64_t* hi = nullptr;
    const std::int64_t* run_at = nullptr;
    const std::int64_t* prefix = nullptr;

    /// The cursors of rows x0 and on.
    [[nodiscard]] RowCursors from(std::int64_t x0) const {
        return {pos + x0, lo + x0, hi + x0, run_at + x0, prefix + x0};
    }

    /// The length of row x's run.
    [[nodiscard]] std::int64_t run(std::int64_t x) const { return hi[x] - lo[x] + 1; }

    /// Position p of row x, moved over its run when the run starts there.
    [[nodiscard]] std::int64_t over_run(std::int64_t x, std::int64_t p) const {
        return p == run_at[x] ? p + run(x) : p;
    }

    /// The position of row x's extra key after the one at position p.
    [[nodiscard]] std::int64_t after(std::int64_t x, std::int64_t p) const {
        return over_run(x, p + 1);
    }

    /// The position of row x's first extra key at or after position p.
    [[nodiscard]] std::int64_t extra_from(std::int64_t x, std::int64_t p) const {
        return p >= run_at[x] && p < run_at[x] + run(x) ? run_at[x] + run(x) : p;
    }

    /// The entries [0, e) that row x (of `len` keys) sees of the chunk at entries [y0, y0 + c)
    /// of its block's key list, when its prefix settles it: e = c when the chunk lies in the
    /// prefix, else, for a row that is all prefix, its keys left; -1 when only the row's index
    /// array can say.
    [[nodiscard]] std::int64_t
    prefix_sees(std::int64_t x, std::int64_t len, std::int64_t y0, std::int64_t c) const {
        if (prefix[x] >= y0 + c)
            return c;
        return prefix[x] == len ? std::clamp<std::int64_t>(len - y0, 0, c) : -1;
    }

    /// Row x's cursor moved past one extra key.
    void step(std::int64_t x) const { pos[x] = after(x, pos[x]); }

    /// The segment [a, e) of row x's positions that holds its extras from its cursor on up to
    /// key k (those before its run, or those after it), at most c of them.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> extras_upto(
        std::span<const std::int64_t> row, std::int64_t x, std::int64_t k, std::int64_t c) const {
        const auto n = static_cast<std::int64_t>(row.size());
        const std::int64_t past = run_at[x] + run(x); // first position after the run
        std::int64_t a = pos[x], e = n;
        if (a < run_at[x]) {
            e = run_at[x];
            if (past < n && row[static_cast<std::size_t>(past)] <= k) {
                a = past; // extras on both sides: the later ones
                e = n;
            }
        }
        return {a, std::min(e, a + c)};
    }

    /// Row x's cursors at its first extra key (a pass over the block's keys starts).
    void reset(std::int64_t r) const {
        for (std::int64_t x = 0; x < r; ++x)
            pos[x] = over_run(x, 0);
    }
};

/// The cursors of rows [i0, i0 + r) from the plan's row runs (no access to the support's
/// index arrays), at their first extra keys; positions in `base` (r words).
inline RowCursors
row_cursors(const BlockKeys& plan, std::int64_t i0, std::int64_t r, std::int64_t* base) {
    const auto at = static_cast<std::size_t>(i0);
    const RowCursors cur{base,
                         plan.row_lo.data() + at,
                         plan.row_hi.data() + at,
                         plan.row_run_at.data() + at,
                         plan.row_prefix.data() + at};
    cur.reset(r);
    return cur;
}

/// The extra key of a row at position p of its keys, or none (past every key of the chunk).
inline std::int64_t extra_at(std::span<const std::int64_t> row, std::int64_t p) {
    return p < static_cast<std::int64_t>(row.size()) ? row[static_cast<std::size_t>(p)]
                                                     : std::numeric_limits<std::int64_t>::max();
}

/// The entries of a chunk some row of a range sees, in two parts: [run_lo, run_hi) covers the
/// rows' runs (and the prefixes that settle rows), [extra_lo, extra_hi) their extra keys
/// (empty parts: lo >= hi).
struct ChunkSpans {
    std::int64_t run_lo, run_hi, extra_lo, extra_hi;

    /// The entries [lo, hi) covering both parts (lo == hi: none).
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> hull() const {
        const std::int64_t lo = std::min(run_lo, extra_lo), hi = std::max(run_hi, extra_hi);
        return {lo, std::max(lo, hi)};
    }
};

/// The entries of the chunk keys[0, c) (entries [y0, y0 + c) of the block's key list)
/// that some row of [x0, x1) of the block at row i0 sees, from the row
/// prefixes, runs and the rows' extra keys in the chunk (read from their cursors: each row's
/// keys before the chunk have been consumed). Scores outside them are not computed for
/// those rows: every one of them would be masked (rows that are not one interval, a window
/// plus global keys or bigbird's, would otherwise compute every entry of the chunk).
inline ChunkSpans chunk_spans(const Support& s,
                              std::int64_t i0,
                              const RowCursors& cur,
                              std::int64_t x0,
                              std::int64_t x1,
                              const std::int64_t* keys,
                              std::int64_t y0,
                              std::int64_t c) {
    const bool interval = keys[c - 1] - keys[0] + 1 == c;
    const auto first_at = [&](std::int64_t j) { // the first entry >= key j
        return interval ? j - keys[0] : std::lower_bound(keys, keys + c, j) - keys;
    };
    const auto end_at = [&](std::int64_t j) { // one past the last entry <= key j
        return interval ? j - keys[0] + 1 : std::upper_bound(keys, keys + c, j) - keys;
    };
    ChunkSpans sp{c, 0, c, 0};
    for (std::int64_t x = x0; x < x1; ++x) {
        const auto row = s.row(i0 + x);
        if (const std::int64_t e = cur.prefix_sees(x, std::ssize(row), y0, c); e >= 0) {
            if (e > 0) { // entries [0, e)
                sp.run_lo = 0;
                sp.run_hi = std::max(sp.run_hi, e);
            }
            if (sp.run_lo == 0 && sp.run_hi == c)
                break;
            continue;
        }
        // the row's keys in the chunk: its run's there, then its extras'
        const std::int64_t first = std::max(cur.lo[x], keys[0]);
        const std::int64_t last = std::min(cur.hi[x], keys[c - 1]);
        if (first <= last) {
            sp.run_lo = std::min(sp.run_lo, first_at(first));
            sp.run_hi = std::max(sp.run_hi, end_at(last));
        }
        if (const std::int64_t e = extra_at(row, cur.pos[x]); e <= keys[c - 1]) {
            const auto [a, b] = cur.extras_upto(row, x, keys[c - 1], c);
            const std::int64_t e_last = // the row's last extra in the chunk
                *(std::upper_bound(row.begin() + a, row.begin() + b, keys[c - 1]) - 1);
            sp.extra_lo = std::min(sp.extra_lo, first_at(e));
            sp.extra_hi = std::max(sp.extra_hi, end_at(e_last));
        }
        if (sp.run_lo == 0 && sp.run_hi == c)
            break; // the whole chunk (block patterns: the first row)
    }
    return sp;
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

/// Applies Omega to the chunk keys[0, c) (entries [y0, y0 + c) of the block's key list) of St
/// (st[y * ld + x] for chunk entry y and row x): entries outside Omega become -inf. A row whose
/// prefix settles the chunk keeps a prefix of it without reading its index array (two cache
/// misses a row and chunk, 8% of strided:64's tile forward under perf). A row with no extra
/// key in the chunk keeps its run only:
/// against an interval chunk that masks a prefix and a suffix (rows whose run covers the chunk
/// are left alone). A row with extra keys here merges them, from its cursor, with its run.
/// Returns whether any row was partial.
template <typename Scalar>
inline bool mask_chunk(const Support& s,
                       std::int64_t i0,
                       std::int64_t r,
                       const std::int64_t* keys,
                       std::int64_t y0,
                       std::int64_t c,
                       const RowCursors& cur,
                       Scalar* st,
                       std::int64_t ld) {
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    const bool interval = keys[c - 1] - keys[0] + 1 == c; // the chunk is keys[0] .. keys[0]+c-1
    bool partial = false;
    for (std::int64_t x = 0; x < r; ++x) {
        const std::int64_t lo = cur.lo[x], hi = cur.hi[x];
        const auto row = s.row(i0 + x);
        const auto len = std::ssize(row);
        if (const std::int64_t e = cur.prefix_sees(x, len, y0, c); e >= 0) {
            cur.pos[x] = e == c ? cur.extra_from(x, y0 + c) : len;
            if (e < c) {
                mask_outside(st, ld, x, 0, e, c);
                partial = true;
            }
            continue;
        }
        if (extra_at(row, cur.pos[x]) > keys[c - 1]) { // the run alone
            if (interval) {
                const std::int64_t a = std::clamp<std::int64_t>(lo - keys[0], 0, c);
                const std::int64_t b = std::clamp<std::int64_t>(hi - keys[0] + 1, 0, c);
                if (a == 0 && b == c)
                    continue;
                partial = true;
                mask_outside(st, ld, x, a, b, c);
                continue;
            }
            for (std::int64_t y = 0; y < c; ++y)
                if (keys[y] < lo || keys[y] > hi) {
                    st[y * ld + x] = kNegInf;
                    partial = true;
                }
            continue;
        }
        const auto [a, b] = cur.extras_upto(row, x, keys[c - 1], c);
        if (b - a == c && row[static_cast<std::size_t>(b - 1)] == keys[c - 1]) {
            cur.pos[x] = cur.over_run(x, b); // every key of the chunk
            continue;
        }
        if (interval && a == cur.pos[x] && (hi < keys[0] || lo > keys[c - 1])) {
            // the extras here alone: when they are one run of keys (strided's summary keys,
            // reordered into one), mask around it instead of merging the chunk: 1.16x on
            // strided:64's permuted forward (ioattn run --N 16384 --d 64 --pattern strided:64
            // --variant permuted --schedule fused --threads 2 --repeat 20)
            const std::int64_t e =
                std::upper_bound(row.begin() + a, row.begin() + b, keys[c - 1]) - row.begin();
            const std::int64_t first = row[static_cast<std::size_t>(a)];
            if (row[static_cast<std::size_t>(e - 1)] - first == e - 1 - a) {
                mask_outside(st, ld, x, first - keys[0], first - keys[0] + (e - a), c);
                partial = true;
                cur.pos[x] = cur.over_run(x, e);
                continue;
            }
        }
        for (std::int64_t y = 0; y < c; ++y) {
            if (extra_at(row, cur.pos[x]) == keys[y])
                cur.step(x);
            else if (keys[y] < lo || keys[y] > hi) {
                st[y * ld + x] = kNegInf;
                partial = true;
            }
        }
    }
    return partial;
}

} // namespace ioattn::sparse::detail
