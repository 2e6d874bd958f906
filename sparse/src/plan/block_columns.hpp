#pragma once
// The keys each row block of a support sees, as the variant planner prices them: shared by the
// split (plan/structure.cpp) and the key order of the permuted variant (plan/reorder.cpp).

#include "plan/structure.hpp"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

/// The words of work block_columns takes per worker: 3 n_k, 6 n_k for a relabeled view.
inline std::int64_t column_work(const OrderedView& v) {
    return (v.relabeled() ? 6 : 3) * v.n_k();
}

/// Row blocks of `rows` rows over the support's query rows.
inline std::int64_t n_blocks(const OrderedView& s, std::int64_t rows) {
    return (s.n_q() + rows - 1) / rows;
}

/// For block b of `rows` rows (of the view's row order; keys in the labels of s, which
/// block_columns relabels): the sorted keys its rows see and how many rows see each
/// (count[j] left set for the block's keys; the caller's array is reset to 0 afterwards).
/// With lane groups (group > 0, lanes: 2 n_k words, no reset needed): lanes[j] = the rows of
/// the block's groups of `group` consecutive rows that have a row seeing j, the lanes a
/// staggered tile computes for key j (staggered_slab.hpp, staggered_chunk.hpp).
std::vector<std::int64_t> block_keys(const OrderedView& s,
                                     std::int64_t rows,
                                     std::int64_t b,
                                     std::int64_t* count,
                                     std::int64_t group = 0,
                                     std::int64_t* lanes = nullptr);

/// The lanes of block b's tile that compute key column j: every row of the block, or under lane
/// groups (CostModel::lane_group) the rows of the groups that see it (block_keys).
struct ColumnLanes {
    std::int64_t r = 0;
    const std::int64_t* lanes = nullptr;

    [[nodiscard]] std::int64_t operator()(std::int64_t j) const {
        return lanes != nullptr ? lanes[j] : r;
    }
};

/// The keys of [lo, hi] counted (count[j] > 0), ascending, written at out, at most `most` of
/// them; returns how many.
std::int64_t counted_keys(const std::int64_t* count,
                          std::int64_t lo,
                          std::int64_t hi,
                          std::int64_t most,
                          std::int64_t* out);

/// block_keys of rows [i0, i1) (`pairs` pairs) when each row is mostly one run of consecutive
/// keys: its keys outside the run through its middle key at most a quarter of the pairs, the
/// runs' key range at most `pairs` long (band_keys.cpp); else nothing, and count and lanes are
/// as they were. The same keys, counts and lanes as block_keys' walk.
std::optional<std::vector<std::int64_t>> band_keys(const OrderedView& s,
                                                   std::int64_t i0,
                                                   std::int64_t i1,
                                                   std::int64_t pairs,
                                                   std::int64_t* count,
                                                   std::int64_t group,
                                                   std::int64_t* lanes);

/// block_keys with its lanes under the model's lane groups, in the view's key labels (count[j]
/// = work[j], the lanes in work[n_k, 2 n_k)); `work`: column_work(s) words of the worker.
std::pair<std::vector<std::int64_t>, ColumnLanes> block_columns(const OrderedView& s,
                                                                std::int64_t rows,
                                                                std::int64_t b,
                                                                std::int64_t* work,
                                                                const CostModel& cm);

/// Block b's BlockSeen (structure.hpp) from its columns (block_columns: keys ascending, count
/// and lanes): out = each key as j when tile-worthy, else -1 - j; returns the block's part of
/// Orders::floor, each column at the cheaper of its tile lanes (at most one lane group's in a
/// block with a global row) and its element pairs, no gathers, summed in key order.
double block_seen(const OrderedView& s,
                  std::int64_t rows,
                  std::int64_t b,
                  const std::vector<std::int64_t>& keys,
                  const std::int64_t* count,
                  const ColumnLanes& lanes,
                  const CostModel& cm,
                  std::vector<std::int64_t>& out);

/// Whether row i is a global row: heavy (above heavy_z = heavy_above(s) pairs, as row_blocks
/// counts it) and seeing at least half the keys (global tokens; a graph's hubs see far fewer,
/// and alone in a tile block they would stream their keys for one row: powerlaw:32's forward
/// runs 3.5x slower with every heavy row through tiles).
inline bool global_row(const OrderedView& s, std::int64_t i, std::int64_t heavy_z) {
    const std::int64_t z = s.row_nonzeros(i);
    return z > heavy_z && 2 * z >= s.n_k();
}

} // namespace ioattn::sparse::detail
