// ioattn::sparse::detail::split_all, split_by_fill, split_parts: the split of a support into the
// tile and element parts of the split variant, priced per row block (see structure.hpp).
// Tests: tests/sparse/variants_test.cpp

#include "plan/structure.hpp"

#include "plan/block_columns.hpp"
#include "support/block_keys.hpp"
#include "support/huge_pages.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <numeric>
#include <utility>

namespace ioattn::sparse::detail {

namespace {

/// Assembles the two parts from each block's sorted tile keys; every pair of a global row goes
/// to the tile part. A block's tile keys are flagged in its worker's bytes, and each row's keys
/// looked up there: merged with the block's keys, a key waited on a branch on where the merge
/// stood (a tenth of bigbird:64:2:3's fresh plan at N = 16384, counted and written).
Split assemble(const Support& s,
               std::int64_t rows,
               const std::vector<std::vector<std::int64_t>>& tile) {
    const std::int64_t n_q = s.n_q(), heavy_z = heavy_above(s);
    const std::int64_t nb = (n_q + rows - 1) / rows;
    const kernels::Workspace<std::uint8_t> flags(max_concurrency(), s.n_k()); // all 0
    // body(i, in, global) for each row i of each block: in[j] = 1 for the block's tile keys, and
    // whether row i is a global row (all its keys go to the tile part)
    const auto by_block = [&](auto&& body) {
        parallel_for_tiles(nb, [&](std::int64_t b, int w) {
            std::uint8_t* in = flags.slab(w);
            const auto& t = tile[static_cast<std::size_t>(b)];
            for (const std::int64_t j : t)
                in[j] = 1;
            for (std::int64_t i = b * rows; i < std::min(n_q, (b + 1) * rows); ++i)
                body(i, in, global_row(s, i, heavy_z));
            for (const std::int64_t j : t)
                in[j] = 0;
        });
    };
    std::vector<std::int64_t> to(static_cast<std::size_t>(n_q) + 1, 0), eo(to.size(), 0);
    by_block([&](std::int64_t i, const std::uint8_t* in, bool global) {
        const auto row = s.row(i);
        std::int64_t nt = 0; // the row's tile keys
        if (global)
            nt = static_cast<std::int64_t>(row.size());
        else
            for (const std::int64_t j : row)
                nt += in[j];
        to[static_cast<std::size_t>(i) + 1] = nt;
        eo[static_cast<std::size_t>(i) + 1] = static_cast<std::int64_t>(row.size()) - nt;
    });
    std::partial_sum(to.begin(), to.end(), to.begin());
    std::partial_sum(eo.begin(), eo.end(), eo.begin());
    std::vector<std::int64_t> tc = index_words(to.back());
    std::vector<std::int64_t> ec = index_words(eo.back());
    by_block([&](std::int64_t i, const std::uint8_t* in, bool global) {
        std::int64_t at = to[static_cast<std::size_t>(i)], ae = eo[static_cast<std::size_t>(i)];
        for (const std::int64_t j : s.row(i))
            (global || in[j] != 0 ? tc[static_cast<std::size_t>(at++)]
                                  : ec[static_cast<std::size_t>(ae++)]) = j;
    });
    Split out;
    out.tile = Support(BuiltRows{}, n_q, s.n_k(), std::move(to), std::move(tc));
    out.element = Support(BuiltRows{}, n_q, s.n_k(), std::move(eo), std::move(ec));
    return out;
}

/// The cost of a block's keys all through tiles: their lanes each, and a gather for the keys of
/// runs shorter than kMinRun. Summed as counts, then priced once: a double sum per key waited on
/// the last key's add (the model's constants are whole numbers, so the price is the same).
double all_tiles_cost(const std::vector<std::int64_t>& keys,
                      const ColumnLanes& lanes,
                      const CostModel& cm) {
    std::int64_t lane_sum = 0, gathered = 0;
    for (const std::int64_t j : keys)
        lane_sum += lanes(j);
    for (std::size_t y = 0; y < keys.size();) {
        std::size_t e = y + 1;
        while (e < keys.size() && keys[e] == keys[e - 1] + 1)
            ++e;
        if (static_cast<std::int64_t>(e - y) < kMinRun)
            gathered += static_cast<std::int64_t>(e - y);
        y = e;
    }
    return static_cast<double>(lane_sum) * cm.tile_lane +
           static_cast<double>(gathered) * cm.gather_row;
}

/// A block's tile columns by fill: of its tile-worthy keys (ascending), every key of a run of
/// at least kMinRun, and a key of a shorter run (gathered) only when its count of element
/// pairs costs at least its lanes and its gather; written to t (sized for every worthy key and
/// cut to those kept). Returns the kept keys' cost and pairs, summed as counts and priced once,
/// as all_tiles_cost.
std::pair<double, std::int64_t> fill_tiles(const std::vector<std::int64_t>& worthy,
                                           std::size_t n_worthy,
                                           const std::int64_t* count,
                                           const ColumnLanes& lanes,
                                           const CostModel& cm,
                                           std::vector<std::int64_t>& t) {
    t.resize(n_worthy);
    std::size_t n_tile = 0;
    std::int64_t lane_sum = 0, gathered = 0, tile_pairs = 0;
    for (std::size_t y = 0; y < n_worthy;) {
        std::size_t e = y + 1;
        while (e < n_worthy && worthy[e] == worthy[e - 1] + 1)
            ++e;
        const bool gather = static_cast<std::int64_t>(e - y) < kMinRun;
        for (std::size_t u = y; u < e; ++u) {
            const std::int64_t j = worthy[u];
            const double as_tile =
                static_cast<double>(lanes(j)) * cm.tile_lane + (gather ? cm.gather_row : 0.0);
            if (!gather || static_cast<double>(count[j]) * cm.element_pair >= as_tile) {
                t[n_tile++] = j;
                tile_pairs += count[j];
                lane_sum += lanes(j);
                gathered += gather ? 1 : 0;
            }
        }
        y = e;
    }
    t.resize(n_tile);
    return {static_cast<double>(lane_sum) * cm.tile_lane +
                static_cast<double>(gathered) * cm.gather_row,
            tile_pairs};
}

} // namespace

Split split_all(const Support& s, std::int64_t rows, bool tiles, const CostModel& cm, bool parts) {
    Split out;
    out.kind = tiles ? Split::Kind::all_tiles : Split::Kind::all_element;
    const std::int64_t nb = n_blocks(s, rows);
    const kernels::Workspace<std::int64_t> counts(max_concurrency(), 3 * s.n_k());
    std::vector<double> cost(static_cast<std::size_t>(nb), 0.0);
    std::vector<std::int64_t> columns(static_cast<std::size_t>(nb), 0);
    if (tiles) {
        parallel_for_tiles(nb, [&](std::int64_t b, int w) {
            std::int64_t* count = counts.slab(w);
            const auto [keys, lanes] = block_columns(s, rows, b, count, cm);
            cost[static_cast<std::size_t>(b)] = all_tiles_cost(keys, lanes, cm);
            for (const std::int64_t j : keys)
                count[j] = 0;
            columns[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(keys.size());
        });
        if (parts) { // detached: the plan is kept in s's cache (variant_plan.cpp)
            out.tile = s.detached();
            out.element = Support::none(s.n_q(), s.n_k());
        }
        out.tile_blocks = nb;
    } else {
        if (parts) {
            out.tile = Support::none(s.n_q(), s.n_k());
            out.element = s.detached();
        }
        out.element_blocks = nb;
        cost.assign(1, static_cast<double>(s.z_qk()) * cm.element_pair);
    }
    out.cost = std::accumulate(cost.begin(), cost.end(), 0.0);
    out.tile_columns = std::accumulate(columns.begin(), columns.end(), std::int64_t{0});
    return out;
}

namespace {

/// The tile part's pairs and added columns of block b's global rows (every pair of a global row
/// goes through tiles): t holds the block's tile keys, count is 0 on entry and left so.
struct GlobalPairs {
    std::int64_t rows = 0;  ///< global rows of the block
    std::int64_t moved = 0; ///< their pairs outside t
    std::int64_t added = 0; ///< distinct keys of those pairs
};

GlobalPairs global_pairs(const OrderedView& s,
                         std::int64_t i0,
                         std::int64_t i1,
                         std::int64_t heavy_z,
                         const std::vector<std::int64_t>& t,
                         std::int64_t* count,
                         std::vector<std::int64_t>& added) {
    GlobalPairs g;
    for (std::int64_t i = i0; i < i1; ++i)
        g.rows += global_row(s, i, heavy_z) ? 1 : 0;
    if (g.rows == 0)
        return g;
    // marks, not a merge of sorted lists: a relabeled view's rows are not sorted in its labels
    for (const std::int64_t j : t)
        count[j] = -1;
    added.clear();
    // a row of the run of the row before (a block pattern's global block rows: Support::row_runs)
    // moves what that row moved and adds no key
    const RowRuns runs = s.rows.empty() ? s.s->row_runs() : RowRuns{};
    std::int64_t row_moved = 0;
    for (std::int64_t i = i0; i < i1; ++i) {
        if (!global_row(s, i, heavy_z))
            continue;
        if (i > i0 && runs.period > 1 && runs.one_run(i - 1, i + 1)) {
            g.moved += row_moved;
            continue;
        }
        row_moved = 0;
        for (const std::int64_t j0 : s.row(i)) {
            const std::int64_t j = s.key(j0);
            if (count[j] < 0)
                continue;
            ++row_moved;
            if (count[j]++ == 0)
                added.push_back(j);
        }
        g.moved += row_moved;
    }
    for (const std::int64_t j : t)
        count[j] = 0;
    for (const std::int64_t j : added)
        count[j] = 0;
    g.added = static_cast<std::int64_t>(added.size());
    return g;
}

} // namespace

Split price_by_fill(const OrderedView& s,
                    std::int64_t rows,
                    const CostModel& cm,
                    BlockSeen* seen,
                    std::span<const std::int64_t> only) {
    const std::int64_t nb = n_blocks(s, rows), heavy_z = heavy_above(*s.s);
    if (s.relabeled() || !s.rows.empty() || !only.empty())
        seen = nullptr; // find_orders reads a support's own blocks, every one
    if (seen != nullptr) {
        seen->rows = rows;
        seen->keys.assign(static_cast<std::size_t>(nb), {});
        seen->floors.assign(static_cast<std::size_t>(nb), 0.0);
    }
    const kernels::Workspace<std::int64_t> counts(max_concurrency(), column_work(s));
    std::vector<std::vector<std::int64_t>> tile(static_cast<std::size_t>(nb));
    std::vector<double> cost(static_cast<std::size_t>(nb), 0.0);
    std::vector<int> kind(static_cast<std::size_t>(nb), 0); // 1 tile, 2 element, 3 both
    std::vector<std::int64_t> columns(static_cast<std::size_t>(nb), 0);
    std::vector<double> all_cost(static_cast<std::size_t>(nb), 0.0); // split_all's, tiles
    std::vector<std::int64_t> all_columns(static_cast<std::size_t>(nb), 0);
    std::vector<std::int64_t> globals(static_cast<std::size_t>(nb), 0);
    std::vector<std::int64_t> block_pairs(static_cast<std::size_t>(nb), 0);
    const auto priced = only.empty() ? nb : static_cast<std::int64_t>(only.size());
    parallel_for_tiles(priced, [&](std::int64_t x, int w) {
        const std::int64_t b = only.empty() ? x : only[static_cast<std::size_t>(x)];
        std::int64_t* count = counts.slab(w);
        const auto [keys, lanes] = block_columns(s, rows, b, count, cm);
        const std::int64_t r = lanes.r;
        all_cost[static_cast<std::size_t>(b)] = all_tiles_cost(keys, lanes, cm);
        all_columns[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(keys.size());
        if (seen != nullptr)
            seen->floors[static_cast<std::size_t>(b)] = block_seen(
                s, rows, b, keys, count, lanes, cm, seen->keys[static_cast<std::size_t>(b)]);
        // the loops write into arrays sized first: a push_back per key kept the sums in
        // memory, each key waiting on the last (a third of window:256's pricing)
        std::vector<std::int64_t> worthy(keys.size());
        std::size_t n_worthy = 0;
        for (const std::int64_t j : keys)
            if (cm.tile_worthy(count[j], lanes(j)))
                worthy[n_worthy++] = j;
        // --- a short run of tile columns is gathered: it must be worth the copy too ---
        auto& t = tile[static_cast<std::size_t>(b)];
        auto [c, tile_pairs] = fill_tiles(worthy, n_worthy, count, lanes, cm, t);
        std::int64_t pairs = 0;
        for (const std::int64_t j : keys) {
            pairs += count[j];
            count[j] = 0;
        }
        // a global row's other pairs go through tiles too, in blocks of heavy rows (row_blocks):
        // as element pairs they would fill every panel of their block, so the element part's
        // panels could not widen (widened_element_tiling): 1.20x on bigbird:64:2:3 (ioattn run
        // --N 16384 --d 64 --pattern bigbird:64:2:3 --schedule fused --threads 2 --repeat 20).
        // Its cost: every row of the block computes the keys it adds to the block's tile
        // columns (the slab's span is the union of its rows' keys), so r lanes per added key,
        // not one per moved pair (priced per pair, strided:64's backward, whose transposed
        // summary keys are global rows one per block, takes a split 5x slower than permuted)
        std::vector<std::int64_t> added; // keys of the block's global rows outside t
        const GlobalPairs g =
            global_pairs(s, b * rows, std::min(s.n_q(), (b + 1) * rows), heavy_z, t, count, added);
        globals[static_cast<std::size_t>(b)] = g.rows;
        tile_pairs += g.moved;
        c += static_cast<double>(cm.lanes(r) * g.added) * cm.tile_lane;
        c += static_cast<double>(pairs - tile_pairs) * cm.element_pair;
        cost[static_cast<std::size_t>(b)] = c;
        block_pairs[static_cast<std::size_t>(b)] = pairs;
        columns[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(t.size()) + g.added;
        kind[static_cast<std::size_t>(b)] = (tile_pairs > 0 ? 1 : 0) + (pairs > tile_pairs ? 2 : 0);
    });
    Split out;
    out.block_tile = std::move(tile);
    for (const int k : kind) {
        out.tile_blocks += k == 1 ? 1 : 0;
        out.element_blocks += k == 2 ? 1 : 0;
        out.split_blocks += k == 3 ? 1 : 0;
    }
    out.cost = std::accumulate(cost.begin(), cost.end(), 0.0);
    out.global_rows = std::accumulate(globals.begin(), globals.end(), std::int64_t{0});
    out.tile_columns = std::accumulate(columns.begin(), columns.end(), std::int64_t{0});
    out.all_tiles_cost = std::accumulate(all_cost.begin(), all_cost.end(), 0.0);
    out.all_tiles_columns =
        std::accumulate(all_columns.begin(), all_columns.end(), std::int64_t{0});
    out.pairs = std::accumulate(block_pairs.begin(), block_pairs.end(), std::int64_t{0});
    return out;
}

Split split_by_fill(const Support& s, std::int64_t rows, const CostModel& cm, bool parts) {
    Split out = price_by_fill(s, rows, cm);
    if (parts)
        split_parts(out, s, rows);
    return out;
}

void split_parts(Split& split, const Support& s, std::int64_t rows) {
    Split parts = assemble(s, rows, split.block_tile);
    split.tile = std::move(parts.tile);
    split.element = std::move(parts.element);
    split.block_tile.clear();
}

} // namespace ioattn::sparse::detail
