#pragma once
// The folded key blocks of the fused sparse backward (backward_fused.cpp): a key block of at
// most kFoldKeys keys (BigBird's global keys, a block of their own) whose pairs pass 0
// computes, query block by query block, instead of pass A streaming every query it sees
// through one task. A pair (i, x) needs only row-local data (Q_i, dO_i, L_i, D_i) and the
// block's few K, V rows, so pass 0, which holds dO_i to form D_i, reads Q_i and L_i beside it.
// Why: in pass A one task would stream all of Q and dO (8 MB at N = 16384, d = 64) for the
// 32 K pairs of 2 global keys, and write a dQ partial row for every query for pass R to read
// back.
// This file is the plan (which blocks fold, their segments per query block, the words they
// move), shared by the kernel and its closed form io_cost_backward_fused; folded_pass.hpp is
// the arithmetic.
//   fold: at most kFoldKeys keys each seen by more than 4x the mean key's queries (heavy_above),
//     dense inputs, rows and keys in their own order (no Maps), some key block left to
//     pass A, and the passes' words with the fold at most the tiling's resident words (so the
//     peak is unchanged)
//   per (slice, query block i), per folded block R with queries in i (a segment: positions
//     [begin, end) of R's query list): read K, V rows of R (rk rows), the segment's Q rows and
//     L, the indices walked (FoldSegment::walk: the segment's queries unless consecutive, and
//     the pairs there of R's keys whose rows are no interval); write dS per (query, key) slot
//     (rk per query, 0 outside Omega) and the partial dK, dV of R's rows
//   pass R, per segment of block i: read scale K of R, the segment's dS slots, the walk
//   after pass A, per (kv head, R): read the partials of R's segments over the group's heads,
//     write dK, dV of R
// Tests: tests/sparse/folded_test.cpp

#include "support/block_keys.hpp"

#include <ioattn/io_counter.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

/// Key blocks of at most this many keys fold into pass 0 (a fixed count, not a share of the
/// vector's lanes: the plan and its counted I/O do not depend on the instruction set).
inline constexpr std::int64_t kFoldKeys = 4;

/// The queries of folded block `block` at positions [begin, end) of its query list, all in one
/// query block; their dS slots start at `slot` (rk per query, in the slice's slot array).
struct FoldSegment {
    std::int64_t block = 0;
    std::int64_t begin = 0, end = 0;
    std::int64_t slot = 0;
    /// Indices walked: the segment's queries unless consecutive, and the pairs of its keys
    /// whose rows are no interval (the others are tested by their ends)
    std::int64_t walk = 0;

    /// The segment's queries: [begin, end) of its block's query list in kplan (Omega^T's).
    [[nodiscard]] std::span<const std::int64_t> queries(const BlockKeys& kplan) const {
        return kplan.keys_of(block).subspan(static_cast<std::size_t>(begin),
                                            static_cast<std::size_t>(end - begin));
    }
};

struct Folds {
    std::vector<std::uint8_t> folded;  ///< per key block of Omega^T's plan
    std::vector<std::int64_t> blocks;  ///< the folded key blocks, ascending
    std::vector<std::int64_t> seg_at;  ///< query block i's segments: [seg_at[i], seg_at[i + 1])
    std::vector<FoldSegment> segments; ///< by query block, then folded block
    std::int64_t slots = 0;            ///< dS slots per slice

    [[nodiscard]] bool any() const { return !blocks.empty(); }

    [[nodiscard]] bool is_folded(std::int64_t j) const {
        return !folded.empty() && folded[static_cast<std::size_t>(j)] != 0;
    }

    [[nodiscard]] std::span<const FoldSegment> segments_of(std::int64_t qblk) const {
        if (seg_at.empty())
            return {};
        const auto i = static_cast<std::size_t>(qblk);
        return std::span<const FoldSegment>(segments).subspan(
            static_cast<std::size_t>(seg_at[i]),
            static_cast<std::size_t>(seg_at[i + 1] - seg_at[i]));
    }
};

/// Words resident while pass 0 runs a segment of n queries of a block of rk keys, beside the
/// query block's O, dO and D rows: K, V and the partial dK, dV rows, the queries' Q rows and L.
inline std::int64_t fold_words(const Problem& p, std::int64_t rk, std::int64_t n) {
    return 2 * rk * (p.d + p.d_v) + n * (p.d + 1);
}

/// Words a segment of n queries of a block of rk keys moves per query head, walking `index`
/// words in each of passes 0 and R: pass 0 reads K, V, Q, L, writes the dS slots and the
/// partial dK, dV; pass R reads scale K and the slots; the merge reads the partials.
inline std::int64_t
fold_segment_words(const Problem& p, std::int64_t rk, std::int64_t n, std::int64_t index) {
    return 3 * rk * (p.d + p.d_v) + n * (p.d + 1) + rk * p.d + 2 * n * rk + 2 * index;
}

/// Words resident while pass R adds a segment's terms, beside its 2 r d: scale K and the slots.
inline std::int64_t fold_reduce_words(const Problem& p, std::int64_t rk, std::int64_t n) {
    return rk * p.d + n * rk;
}

/// Whether a sorted row is one interval of consecutive indices (empty: yes): the folds test
/// membership by its ends and walk no index.
inline bool interval(std::span<const std::int64_t> row) {
    return row.empty() || row.back() - row.front() + 1 == std::ssize(row);
}

/// The folds of a backward over `st` (Omega^T) with query plan qplan and key plan kplan: none
/// unless `eligible` (dense inputs, no Maps). A key block of at most
/// kFoldKeys heavy keys (each seen by more than heavy_above(st) queries: row_blocks gives them
/// blocks of their own) folds when every pass keeps within `resident` words with it and its
/// segments move fewer words than pass A would for it (the narrow path: per query head its
/// queries' Q, dO, L, D and a dQ partial row written and read, its index words; per kv head
/// its K, V). A short block of light keys (the last block of a partition) stays in pass A, so
/// that the full and causal patterns keep the dense kernel's I/O. Indices count one word each
/// in the comparison, so that float and double fold alike.
inline Folds fold_plan(const Problem& p,
                       const Support& st,
                       const BlockKeys& qplan,
                       const BlockKeys& kplan,
                       std::int64_t resident,
                       bool eligible) {
    Folds f;
    if (!eligible || kplan.blocks() < 2)
        return f;
    std::int64_t qmax = 0;
    for (std::int64_t i = 0; i < qplan.blocks(); ++i)
        qmax = std::max(qmax, qplan.rows(i));
    const std::int64_t pass0 = qmax * (2 * p.d_v + 1), passr = 2 * qmax * p.d;
    const std::int64_t heavy_z = heavy_above(st);
    const auto heavy = [&](std::int64_t j) { // every key of block j: a global key, a hub
        for (std::int64_t x = kplan.row0(j); x < kplan.row0(j) + kplan.rows(j); ++x)
            if (static_cast<std::int64_t>(st.row(x).size()) <= heavy_z)
                return false;
        return true;
    };
    std::vector<std::pair<std::int64_t, FoldSegment>> kept; // (query block, segment)
    for (std::int64_t j = 0; j < kplan.blocks(); ++j) {
        const std::int64_t rk = kplan.rows(j), j0 = kplan.row0(j);
        if (rk > kFoldKeys || !heavy(j) || pass0 + fold_words(p, rk, qmax) > resident ||
            passr + fold_reduce_words(p, rk, qmax) > resident || 2 * rk * (p.d + p.d_v) > resident)
            continue;
        // the block's queries cut at the query blocks' bounds
        const auto queries = kplan.keys_of(j);
        const auto n = static_cast<std::int64_t>(queries.size());
        const std::size_t first = kept.size();
        std::int64_t fold_cost = 0, qb = 0;
        for (std::int64_t begin = 0; begin < n;) {
            while (qplan.row0(qb) + qplan.rows(qb) <= queries[static_cast<std::size_t>(begin)])
                ++qb;
            const std::int64_t last = qplan.row0(qb) + qplan.rows(qb);
            std::int64_t end = begin;
            while (end < n && queries[static_cast<std::size_t>(end)] < last)
                ++end;
            const std::int64_t lo = queries[static_cast<std::size_t>(begin)];
            const std::int64_t hi = queries[static_cast<std::size_t>(end - 1)];
            FoldSegment s{
                j, begin, end, f.slots + begin * rk, hi - lo + 1 == end - begin ? 0 : end - begin};
            for (std::int64_t x = 0; x < rk; ++x) { // a key row that is no interval is walked
                const auto row = st.row(j0 + x);
                if (!interval(row))
                    s.walk += std::upper_bound(row.begin(), row.end(), hi) -
                              std::lower_bound(row.begin(), row.end(), lo);
            }
            fold_cost += fold_segment_words(p, rk, end - begin, s.walk);
            kept.emplace_back(qb, s);
            begin = end;
        }
        const std::int64_t narrow = p.group() * (n * (3 * p.d + p.d_v + 2) +
                                                 kplan.index_reads[static_cast<std::size_t>(j)]) +
                                    rk * (p.d + p.d_v);
        if (p.group() * fold_cost >= narrow) {
            kept.resize(first);
            continue;
        }
        f.blocks.push_back(j);
        f.slots += n * rk;
    }
    if (f.blocks.empty() || static_cast<std::int64_t>(f.blocks.size()) == kplan.blocks())
        return {}; // with every block folded pass A would hold nothing: the peak would change
    f.folded.assign(static_cast<std::size_t>(kplan.blocks()), 0);
    for (const std::int64_t j : f.blocks)
        f.folded[static_cast<std::size_t>(j)] = 1;
    // by query block, each block's segments in folded-block order (a stable sort)
    std::stable_sort(
        kept.begin(), kept.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    f.seg_at.assign(static_cast<std::size_t>(qplan.blocks()) + 1, 0);
    for (const auto& [i, s] : kept) {
        f.segments.push_back(s);
        ++f.seg_at[static_cast<std::size_t>(i) + 1];
    }
    for (std::size_t i = 1; i < f.seg_at.size(); ++i)
        f.seg_at[i] += f.seg_at[i - 1];
    return f;
}

/// io_cost_backward_fused, with folds only when `may_fold` (the kernel's Maps, a reordered
/// problem read in place, fold nothing).
template <typename Scalar>
IoReport io_cost_backward_fused(const Problem& problem,
                                const Support& support,
                                const SparseInputs<Scalar>& inputs,
                                const Tiling& tiling,
                                bool may_fold);

} // namespace ioattn::sparse::detail
