// ioattn::sparse structure analysis for the variant planner (see structure.hpp).
// Tests: tests/sparse/variants_test.cpp

#include "plan/structure.hpp"

#include "support/block_keys.hpp"
#include "support/huge_pages.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

namespace ioattn::sparse::detail {

namespace {

std::int64_t n_blocks(const Support& s, std::int64_t rows) {
    return (s.n_q() + rows - 1) / rows;
}

/// For block b of `rows` rows: the sorted keys its rows see and how many rows see each
/// (count[j] left set for the block's keys; the caller's array is reset to 0 afterwards).
/// With lane groups (group > 0, lanes: 2 n_k words, no reset needed): lanes[j] = the rows of
/// the block's groups of `group` consecutive rows that have a row seeing j, the lanes a
/// staggered tile computes for key j (staggered_slab.hpp, staggered_chunk.hpp).
std::vector<std::int64_t> block_keys(const Support& s,
                                     std::int64_t rows,
                                     std::int64_t b,
                                     std::int64_t* count,
                                     std::int64_t group = 0,
                                     std::int64_t* lanes = nullptr) {
    std::vector<std::int64_t> keys;
    const std::int64_t i0 = b * rows, i1 = std::min(s.n_q(), (b + 1) * rows);
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group seeing j
    std::int64_t lo = s.n_k(), hi = -1;                                // the keys' range
    for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t g = group > 0 ? (i - i0) / group : 0;
        const std::int64_t in_group = group > 0 ? std::min(group, i1 - i0 - g * group) : 0;
        for (const std::int64_t j : s.row(i)) {
            if (count[j]++ == 0) {
                keys.push_back(j);
                lo = std::min(lo, j);
                hi = std::max(hi, j);
                if (lanes != nullptr) {
                    lanes[j] = 0;
                    mark[j] = -1;
                }
            }
            if (lanes != nullptr && mark[j] != g) {
                mark[j] = g;
                lanes[j] += in_group;
            }
        }
    }
    // sorted: by a scan of the counts when the keys fill an eighth of their range (scattered
    // blocks see thousands of keys: sorting them was the largest part of random:0.02's planning)
    const auto k = static_cast<std::int64_t>(keys.size());
    if (k > 64 && hi - lo + 1 <= 8 * k) {
        std::int64_t at = 0;
        for (std::int64_t j = lo; j <= hi; ++j)
            if (count[j] > 0)
                keys[static_cast<std::size_t>(at++)] = j;
    } else {
        std::sort(keys.begin(), keys.end());
    }
    return keys;
}

/// The lanes of block b's tile that compute key column j: every row of the block, or under lane
/// groups (CostModel::lane_group) the rows of the groups that see it (block_keys).
struct ColumnLanes {
    std::int64_t r = 0;
    const std::int64_t* lanes = nullptr;

    [[nodiscard]] std::int64_t operator()(std::int64_t j) const {
        return lanes != nullptr ? lanes[j] : r;
    }
};

/// block_keys with its lanes under the model's lane groups; `work`: 3 n_k words of the worker.
std::pair<std::vector<std::int64_t>, ColumnLanes> block_columns(
    const Support& s, std::int64_t rows, std::int64_t b, std::int64_t* work, const CostModel& cm) {
    const std::int64_t r = std::min(rows, s.n_q() - b * rows);
    std::int64_t* lanes = cm.lane_group > 0 && cm.lane_group < r ? work + s.n_k() : nullptr;
    auto keys = block_keys(s, rows, b, work, cm.lane_group, lanes);
    return {std::move(keys), ColumnLanes{r, lanes}};
}

/// Whether row i is a global row: heavy (above heavy_z = heavy_above(s) pairs, as row_blocks
/// counts it) and seeing at least half the keys (global tokens; a graph's hubs see far fewer,
/// and alone in a tile block they would stream their keys for one row: powerlaw:32's forward
/// runs 3.5x slower with every heavy row through tiles).
bool global_row(const Support& s, std::int64_t i, std::int64_t heavy_z) {
    const std::int64_t z = s.row_nonzeros(i);
    return z > heavy_z && 2 * z >= s.n_k();
}

/// emit(j, in) for each key j of row i, in = whether j is among the sorted keys t.
template <typename Emit>
void walk_row(const Support& s, std::int64_t i, const std::vector<std::int64_t>& t, Emit&& emit) {
    std::size_t u = 0;
    for (const std::int64_t j : s.row(i)) {
        while (u < t.size() && t[u] < j)
            ++u;
        emit(j, u < t.size() && t[u] == j);
    }
}

/// Assembles the two parts from each block's sorted tile keys; every pair of a global row goes
/// to the tile part.
Split assemble(const Support& s,
               std::int64_t rows,
               const std::vector<std::vector<std::int64_t>>& tile) {
    const std::int64_t n_q = s.n_q(), heavy_z = heavy_above(s);
    std::vector<std::int64_t> to(static_cast<std::size_t>(n_q) + 1, 0), eo(to.size(), 0);
    const auto walk = [&](std::int64_t i, auto&& emit) {
        if (global_row(s, i, heavy_z)) {
            for (const std::int64_t j : s.row(i))
                emit(j, true);
            return;
        }
        walk_row(s, i, tile[static_cast<std::size_t>(i / rows)], emit);
    };
    parallel_for_tiles(n_q, [&](std::int64_t i, int) {
        std::int64_t nt = 0, ne = 0;
        walk(i, [&](std::int64_t, bool in_tile) { ++(in_tile ? nt : ne); });
        to[static_cast<std::size_t>(i) + 1] = nt;
        eo[static_cast<std::size_t>(i) + 1] = ne;
    });
    std::partial_sum(to.begin(), to.end(), to.begin());
    std::partial_sum(eo.begin(), eo.end(), eo.begin());
    std::vector<std::int64_t> tc = zeroed_words(to.back());
    std::vector<std::int64_t> ec = zeroed_words(eo.back());
    parallel_for_tiles(n_q, [&](std::int64_t i, int) {
        std::int64_t at = to[static_cast<std::size_t>(i)], ae = eo[static_cast<std::size_t>(i)];
        walk(i, [&](std::int64_t j, bool in_tile) {
            (in_tile ? tc[static_cast<std::size_t>(at++)] : ec[static_cast<std::size_t>(ae++)]) = j;
        });
    });
    Split out;
    out.tile = Support(n_q, s.n_k(), std::move(to), std::move(tc));
    out.element = Support(n_q, s.n_k(), std::move(eo), std::move(ec));
    return out;
}

/// The cost of a block's keys all through tiles: their lanes each, and a gather for the keys of
/// runs shorter than kMinRun.
double all_tiles_cost(const std::vector<std::int64_t>& keys,
                      const ColumnLanes& lanes,
                      const CostModel& cm) {
    double c = 0;
    for (const std::int64_t j : keys)
        c += static_cast<double>(lanes(j)) * cm.tile_lane;
    for (std::size_t y = 0; y < keys.size();) {
        std::size_t e = y + 1;
        while (e < keys.size() && keys[e] == keys[e - 1] + 1)
            ++e;
        if (static_cast<std::int64_t>(e - y) < kMinRun)
            c += static_cast<double>(e - y) * cm.gather_row;
        y = e;
    }
    return c;
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

Split split_by_fill(const Support& s, std::int64_t rows, const CostModel& cm, bool parts) {
    const std::int64_t nb = n_blocks(s, rows), heavy_z = heavy_above(s);
    const kernels::Workspace<std::int64_t> counts(max_concurrency(), 3 * s.n_k());
    std::vector<std::vector<std::int64_t>> tile(static_cast<std::size_t>(nb));
    std::vector<double> cost(static_cast<std::size_t>(nb), 0.0);
    std::vector<int> kind(static_cast<std::size_t>(nb), 0); // 1 tile, 2 element, 3 both
    std::vector<std::int64_t> columns(static_cast<std::size_t>(nb), 0);
    std::vector<double> all_cost(static_cast<std::size_t>(nb), 0.0); // split_all's, tiles
    std::vector<std::int64_t> all_columns(static_cast<std::size_t>(nb), 0);
    parallel_for_tiles(nb, [&](std::int64_t b, int w) {
        std::int64_t* count = counts.slab(w);
        const auto [keys, lanes] = block_columns(s, rows, b, count, cm);
        const std::int64_t r = lanes.r;
        all_cost[static_cast<std::size_t>(b)] = all_tiles_cost(keys, lanes, cm);
        all_columns[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(keys.size());
        std::vector<std::int64_t> worthy;
        for (const std::int64_t j : keys)
            if (cm.tile_worthy(count[j], lanes(j)))
                worthy.push_back(j);
        // --- a short run of tile columns is gathered: it must be worth the copy too ---
        auto& t = tile[static_cast<std::size_t>(b)];
        double c = 0;
        std::int64_t tile_pairs = 0;
        for (std::size_t y = 0; y < worthy.size();) {
            std::size_t e = y + 1;
            while (e < worthy.size() && worthy[e] == worthy[e - 1] + 1)
                ++e;
            const bool gathered = static_cast<std::int64_t>(e - y) < kMinRun;
            for (std::size_t u = y; u < e; ++u) {
                const std::int64_t j = worthy[u];
                const double as_tile =
                    static_cast<double>(lanes(j)) * cm.tile_lane + (gathered ? cm.gather_row : 0.0);
                if (!gathered || static_cast<double>(count[j]) * cm.element_pair >= as_tile) {
                    t.push_back(j);
                    tile_pairs += count[j];
                    c += as_tile;
                }
            }
            y = e;
        }
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
        const std::int64_t i1 = std::min(s.n_q(), (b + 1) * rows);
        for (std::int64_t i = b * rows; i < i1; ++i)
            if (global_row(s, i, heavy_z))
                walk_row(s, i, t, [&](std::int64_t j, bool in) {
                    if (in)
                        return;
                    ++tile_pairs; // a moved pair
                    if (count[j]++ == 0)
                        added.push_back(j);
                });
        for (const std::int64_t j : added)
            count[j] = 0;
        c += static_cast<double>(cm.lanes(r) * static_cast<std::int64_t>(added.size())) *
             cm.tile_lane;
        c += static_cast<double>(pairs - tile_pairs) * cm.element_pair;
        cost[static_cast<std::size_t>(b)] = c;
        columns[static_cast<std::size_t>(b)] =
            static_cast<std::int64_t>(t.size()) + static_cast<std::int64_t>(added.size());
        kind[static_cast<std::size_t>(b)] = (tile_pairs > 0 ? 1 : 0) + (pairs > tile_pairs ? 2 : 0);
    });
    Split out = parts ? assemble(s, rows, tile) : Split{};
    if (!parts)
        out.block_tile = std::move(tile);
    for (const int k : kind) {
        out.tile_blocks += k == 1 ? 1 : 0;
        out.element_blocks += k == 2 ? 1 : 0;
        out.split_blocks += k == 3 ? 1 : 0;
    }
    out.cost = std::accumulate(cost.begin(), cost.end(), 0.0);
    out.tile_columns = std::accumulate(columns.begin(), columns.end(), std::int64_t{0});
    out.all_tiles_cost = std::accumulate(all_cost.begin(), all_cost.end(), 0.0);
    out.all_tiles_columns =
        std::accumulate(all_columns.begin(), all_columns.end(), std::int64_t{0});
    return out;
}

/// g = gcd of i' - j over Omega (0 when Omega is empty), by parts of rows in parallel; 1 as soon
/// as any part finds it.
std::int64_t offset_gcd(const Support& s) {
    const std::int64_t n_q = s.n_q(), shift = s.n_k() - s.n_q();
    const std::int64_t step = std::max<std::int64_t>(256, (n_q + 255) / 256);
    const std::int64_t parts = (n_q + step - 1) / step;
    std::vector<std::int64_t> part(static_cast<std::size_t>(parts), 0);
    std::atomic<bool> one{false};
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        std::int64_t g = 0;
        for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
            if (one.load(std::memory_order_relaxed))
                return;
            for (const std::int64_t j : s.row(i)) {
                g = std::gcd(g, i + shift - j);
                if (g == 1) {
                    one.store(true, std::memory_order_relaxed);
                    return;
                }
            }
        }
        part[static_cast<std::size_t>(t)] = g;
    });
    if (one.load())
        return 1;
    std::int64_t g = 0;
    for (const std::int64_t x : part)
        g = std::gcd(g, x);
    return g;
}

void split_parts(Split& split, const Support& s, std::int64_t rows) {
    Split parts = assemble(s, rows, split.block_tile);
    split.tile = std::move(parts.tile);
    split.element = std::move(parts.element);
    split.block_tile.clear();
}

Orders find_orders(const Support& s,
                   std::int64_t rows,
                   const CostModel& cm,
                   std::shared_ptr<const Support>* reordered_out) {
    Orders o;
    const std::int64_t n_q = s.n_q(), n_k = s.n_k(), shift = n_k - n_q;
    // --- g = gcd of i' - j over Omega: g >= 2 means g independent residue classes ---
    const std::int64_t g = offset_gcd(s);
    const auto residue = [g](std::int64_t x) { return ((x % g) + g) % g; };
    std::vector<std::int64_t> key_rank(static_cast<std::size_t>(n_k));
    std::iota(key_rank.begin(), key_rank.end(), std::int64_t{0});
    std::shared_ptr<const Support> reordered; // by residue
    if (g >= 2 && g < std::max(n_q, n_k)) {
        o.rows.resize(static_cast<std::size_t>(n_q));
        std::iota(o.rows.begin(), o.rows.end(), std::int64_t{0});
        std::stable_sort(o.rows.begin(), o.rows.end(), [&](std::int64_t a, std::int64_t b) {
            return residue(a + shift) < residue(b + shift);
        });
        o.keys.resize(static_cast<std::size_t>(n_k));
        std::iota(o.keys.begin(), o.keys.end(), std::int64_t{0});
        std::stable_sort(o.keys.begin(), o.keys.end(), [&](std::int64_t a, std::int64_t b) {
            return residue(a) < residue(b);
        });
        reordered = std::make_shared<const Support>(reorder(s, o));
        key_rank = o.keys;
    }
    const Support& base = reordered ? *reordered : s;
    // --- keys by (last, first) block whose tile-worthy column they are (else any block): each
    // block's keys and their worthiness in parallel, then folded in block order ---
    constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> last(static_cast<std::size_t>(n_k), -1), first(last.size(), kNever);
    std::vector<std::int64_t> any_last(last), any_first(first);
    const std::int64_t nb = n_blocks(base, rows);
    std::vector<std::vector<std::int64_t>> seen(static_cast<std::size_t>(nb)); // j, or -1 - j
    const kernels::Workspace<std::int64_t> counts(max_concurrency(), 3 * n_k);
    parallel_for_tiles(nb, [&](std::int64_t b, int w) {
        std::int64_t* count = counts.slab(w);
        const auto [keys, lanes] = block_columns(base, rows, b, count, cm);
        auto& out = seen[static_cast<std::size_t>(b)];
        out.reserve(keys.size());
        for (const std::int64_t j : keys) {
            const auto u = static_cast<std::size_t>(j);
            out.push_back(cm.tile_worthy(count[u], lanes(j)) ? j : -1 - j);
            count[u] = 0;
        }
    });
    for (std::int64_t b = 0; b < nb; ++b)
        for (const std::int64_t x : seen[static_cast<std::size_t>(b)]) {
            const auto u = static_cast<std::size_t>(x >= 0 ? x : -1 - x);
            any_last[u] = b;
            any_first[u] = std::min(any_first[u], b);
            if (x >= 0) {
                last[u] = b;
                first[u] = std::min(first[u], b);
            }
        }
    std::vector<std::int64_t> order(static_cast<std::size_t>(n_k));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    const auto sig = [&](std::int64_t j) {
        const auto u = static_cast<std::size_t>(j);
        if (last[u] >= 0)
            return std::pair{last[u], first[u]};
        return any_last[u] >= 0 ? std::pair{any_last[u], any_first[u]} : std::pair{kNever, kNever};
    };
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return sig(a) < sig(b);
    });
    bool moved = false;
    for (std::int64_t b = 0; b < n_k; ++b)
        moved = moved || order[static_cast<std::size_t>(b)] != b;
    if (moved) {
        std::vector<std::int64_t> keys(static_cast<std::size_t>(n_k));
        for (std::int64_t b = 0; b < n_k; ++b) // new key b = base key order[b]
            keys[static_cast<std::size_t>(b)] =
                key_rank[static_cast<std::size_t>(order[static_cast<std::size_t>(b)])];
        o.keys = std::move(keys);
    } else if (reordered_out != nullptr && reordered) {
        *reordered_out = std::move(reordered);
    }
    return o;
}

std::vector<std::int64_t> inverse(const std::vector<std::int64_t>& order) {
    std::vector<std::int64_t> inv(order.size());
    for (std::size_t a = 0; a < order.size(); ++a)
        inv[static_cast<std::size_t>(order[a])] = static_cast<std::int64_t>(a);
    return inv;
}

Support reorder(const Support& s, const Orders& o) {
    if (o.identity())
        return s;
    const std::int64_t n_q = s.n_q(), n_k = s.n_k();
    const std::vector<std::int64_t> key_new = inverse(o.keys);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_q) + 1, 0);
    const auto old_row = [&](std::int64_t a) {
        return o.rows.empty() ? a : o.rows[static_cast<std::size_t>(a)];
    };
    for (std::int64_t a = 0; a < n_q; ++a)
        offsets[static_cast<std::size_t>(a) + 1] =
            offsets[static_cast<std::size_t>(a)] + s.row_nonzeros(old_row(a));
    std::vector<std::int64_t> cols = zeroed_words(offsets.back());
    parallel_for_tiles(n_q, [&](std::int64_t a, int) {
        auto* out = cols.data() + offsets[static_cast<std::size_t>(a)];
        std::int64_t c = 0;
        for (const std::int64_t j : s.row(old_row(a)))
            out[c++] = key_new.empty() ? j : key_new[static_cast<std::size_t>(j)];
        std::sort(out, out + c);
    });
    return {n_q, n_k, std::move(offsets), std::move(cols)};
}

} // namespace ioattn::sparse::detail
