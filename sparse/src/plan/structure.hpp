#pragma once
// What the variant planner reads from a support (variant_plan.cpp): per block of rows, which
// key columns are dense enough for tiles; the split of Omega into a tile part and an element
// part; the reorderings that make strided and dilated patterns banded; and the cost estimate
// the planner compares. Structure only, O(Z_QK) per pass over it.

#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

/// Time per unit of work of the variants, relative, fitted to the kernels' rates (AVX-512,
/// N = 16384, d = 64, 2 threads; the values per pass: variant_plan.cpp).
struct CostModel {
    double tile_lane = 1.0; ///< one (query lane, key) entry of a tile, allowed or masked
    /// One pair through the element kernel: a dense fused entry takes 0.74 ns, an element pair
    /// of random:0.02 7.2 ns (ratio 9.8). 9 over 3: 1.17x on window:64, whose band-edge keys
    /// then go through tiles (ioattn run --N 16384 --d 64 --pattern window:64 --schedule fused
    /// --threads 2 --repeat 20).
    double element_pair = 9.0;
    /// One K/V row copied into a gathered tile chunk (in cache, unlike a permuted copy). 16
    /// over 24: strided:64's forward goes to tiles, 1.13x (ioattn run --N 16384 --d 64
    /// --pattern strided:64 --schedule fused --threads 2 --repeat 20).
    double gather_row = 16.0;
    /// One row of one operand reordered (permuted variant): 20 ns, 22 dense entries (strided:64's
    /// permuted forward against its reordered structure through tiles: 6.0 against 5.3 ms for
    /// 32768 rows). With it strided:64's forward takes tiles with gathered summary keys, 1.20x
    /// over 4 (same command as gather_row); its backward stays permuted (tiles: 0.05x).
    double copy_row = 22.0;
    /// One key column of a block's tile in the tile kernels' passes over it (packing its K
    /// and V rows, a chunk's share of the softmax), in entries. It picks the tile height only
    /// (plan_variants); the splits above are priced in entries, as they were fitted. Fitted to
    /// the forward and backward rates at heights 64 and 32 of window:64, window:256,
    /// dilated:256:4, bigbird:64:2:3 and strided:64 (ioattn run --N 16384 --d 64 --pattern P
    /// [--pass backward] --schedule fused --threads 2 --repeat 20).
    double tile_column = 0.0;

    /// Rows per lane group of a tile whose groups compute only the columns their rows see
    /// (the staggered slabs of the forward and the staggered chunks of the backward, whose rows
    /// are keys: 16, a 64-byte vector of floats under any instruction set, so that plans and
    /// counts do not depend on it); 0: every row of a block computes every column of its tile.
    std::int64_t lane_group = 0;

    /// The lanes of a key column seen by one lane group of a block of r rows.
    [[nodiscard]] std::int64_t lanes(std::int64_t r) const {
        return lane_group > 0 ? std::min(r, lane_group) : r;
    }

    /// A key column seen by `count` rows of a block goes to tiles when the tile's `lanes`
    /// lanes that compute it (the block's rows, or its lane groups that see it) cost less than
    /// the count element pairs.
    [[nodiscard]] bool tile_worthy(std::int64_t count, std::int64_t lanes) const {
        return static_cast<double>(count) * element_pair >= static_cast<double>(lanes) * tile_lane;
    }
};

/// The model's constants for a pass (variant_plan.cpp): a tile column costs 6 forward and 30
/// backward, lanes come in groups of 16 rows.
CostModel cost_model(Pass pass);

/// Omega = tile + element (disjoint), cut by blocks of `rows` consecutive rows, and how many
/// blocks have only tile pairs, only element pairs, or both; `cost` is the model's estimate.
struct Split {
    /// How the parts follow from the pricing: per block by fill (block_tile), every pair
    /// through tiles, or every pair element by element.
    enum class Kind { fill, all_tiles, all_element };
    Kind kind = Kind::fill;
    Support tile;
    Support element;
    /// kind fill, priced only: per block, its sorted tile keys (split_parts builds the parts)
    std::vector<std::vector<std::int64_t>> block_tile;
    std::int64_t tile_columns = 0; ///< key columns of the tile part, summed over its blocks
    /// split_by_fill: split_all's estimate and columns with every pair in tiles (one pass over
    /// the blocks' keys prices both)
    double all_tiles_cost = 0;
    std::int64_t all_tiles_columns = 0;
    std::int64_t tile_blocks = 0;
    std::int64_t element_blocks = 0;
    std::int64_t split_blocks = 0;
    /// split_by_fill: the global rows it found; without them every pair is priced at least
    /// one tile lane, so no reordering prices below Z_QK tile lanes
    std::int64_t global_rows = 0;
    std::int64_t pairs = 0; ///< the pairs of the blocks priced (price_by_fill)
    double cost = 0;
};

/// A support read through a reordering without its copy: row a of the view is row rows[a] of
/// s, key j of s is key key_new[j] of the view (an empty span: the identity). It reads as the
/// structure reorder() builds (whose rows are sorted), so the planner prices a key order through
/// it and copies the structure only for the order that wins: for random:0.02, whose key order
/// both passes reject, building the copy (its rows' sorts, its fresh pages) takes a fifth of a
/// fresh step's samples; priced in place its forward plan takes 0.25 s, built 0.33 s (bench/
/// plan_time_bench.py --patterns random:0.02, N = 16384, 2 threads, a loaded machine).
struct OrderedView {
    const Support* s = nullptr;
    std::span<const std::int64_t> rows;    ///< view row -> row of s
    std::span<const std::int64_t> key_new; ///< key of s -> view key

    OrderedView(const Support& support)
        : s(&support) {} // NOLINT: a support is its own view

    OrderedView(const Support& support,
                std::span<const std::int64_t> row_order,
                std::span<const std::int64_t> key_labels)
        : s(&support)
        , rows(row_order)
        , key_new(key_labels) {}

    [[nodiscard]] std::int64_t n_q() const { return s->n_q(); }

    [[nodiscard]] std::int64_t n_k() const { return s->n_k(); }

    [[nodiscard]] std::int64_t z_qk() const { return s->z_qk(); }

    [[nodiscard]] bool relabeled() const { return !key_new.empty(); }

    /// The keys of view row a, in the labels of s (key() relabels them).
    [[nodiscard]] std::span<const std::int64_t> row(std::int64_t a) const {
        return s->row(rows.empty() ? a : rows[static_cast<std::size_t>(a)]);
    }

    [[nodiscard]] std::int64_t row_nonzeros(std::int64_t a) const {
        return s->row_nonzeros(rows.empty() ? a : rows[static_cast<std::size_t>(a)]);
    }

    [[nodiscard]] std::int64_t key(std::int64_t j) const {
        return key_new.empty() ? j : key_new[static_cast<std::size_t>(j)];
    }
};

/// Everything through tiles (all = true) or everything element by element, with the estimate.
/// With parts = false only the estimate and the counts are filled (pricing a tile height).
Split split_all(
    const Support& s, std::int64_t rows, bool tiles, const CostModel& cm, bool parts = true);

/// Per block of `rows` rows, each key column through tiles if tile_worthy (and, when it is not
/// part of a run of kMinRun tile columns, worth its gather too), else its pairs element by
/// element; a global row (more than 4x the mean row's pairs, at least half the keys) through
/// tiles whole. With parts = false only priced, each block's tile keys kept in block_tile.
Split split_by_fill(const Support& s, std::int64_t rows, const CostModel& cm, bool parts = true);

/// What find_orders reads from each block of `rows` rows of a support: the block's keys,
/// ascending, each as j when tile-worthy and as -1 - j otherwise, and its part of
/// Orders::floor. price_by_fill records it from the columns it prices (`seen`), so that
/// find_orders at the same height does not walk the pairs again: on random:0.02's forward
/// (N = 16384), find_orders took a third of the plan's time.
struct BlockSeen {
    std::int64_t rows = 0;
    std::vector<std::vector<std::int64_t>> keys;
    std::vector<double> floors;
};

/// split_by_fill priced only (parts = false), on a support or one read through orders: the
/// same estimate, counts and block_tile (in the view's labels) as split_by_fill of the
/// reordered structure. With `seen` (a support itself, not a reordered view), its blocks'
/// BlockSeen are recorded there too. With `only` (ascending block indices) only those blocks
/// are priced, the others count nothing and keep no tile keys: a sample, for an estimate.
Split price_by_fill(const OrderedView& s,
                    std::int64_t rows,
                    const CostModel& cm,
                    BlockSeen* seen = nullptr,
                    std::span<const std::int64_t> only = {});

/// The factor by which a split's estimate must undercut the best single kernel's.
inline constexpr double kSplitGain = 0.9;

/// Which of a priced split (price_by_fill), every pair through tiles and every pair element by
/// element runs: a split runs two kernels, the second resuming from the first's outputs, so it
/// must beat running everything through one of them by kSplitGain (all tiles priced by
/// price_by_fill's pass, all element at `all_element`).
enum class Pick { split, all_tiles, all_element };
Pick pick(const Split& priced, double all_element);

/// The time (estimate plus tile columns) of the pick at `rows` of s in the pass's orientation,
/// without reordering, per row of the whole, estimated from a sample: the blocks with a heavy
/// row (heavy_above) priced whole, of the others those that start in one of `windows`
/// (ascending row ranges [lo, hi)), their price scaled by the rows they stand for. The planner filters the
/// other tile heights by it (variant_plan.cpp).
double sampled_time(const Support& s,
                    std::int64_t rows,
                    Pass pass,
                    const CostModel& cm,
                    const std::vector<std::pair<std::int64_t, std::int64_t>>& windows);

/// The two parts of a split_by_fill priced on s at `rows`, from its block_tile.
void split_parts(Split& split, const Support& s, std::int64_t rows);

/// A reordering: new row a is old row rows[a], new key b is old key keys[b] (empty: identity).
struct Orders {
    std::vector<std::int64_t> rows;
    std::vector<std::int64_t> keys;
    /// The least any split of the reordered structure is priced at: each block's columns at
    /// the cheaper of their tile lanes (at most one lane group's) and their element pairs, no
    /// gathers (find_orders).
    double floor = 0;

    /// The orders are the residue ones alone (the keys keep their residue order): reorder(s,
    /// orders) is Residues::reordered.
    bool residue_only = false;

    [[nodiscard]] bool identity() const { return rows.empty() && keys.empty(); }
};

/// The residue classes of a support: g = gcd of i' - j over Omega (0: not yet known) and, when
/// g >= 2, the support with rows and keys by residue.
struct Residues {
    std::int64_t g = 0;
    std::shared_ptr<const Support> reordered;
};

/// g = gcd of i' - j over the pairs of s (i' = i + n_k - n_q; 0 when s is empty), by parts of
/// rows in parallel, 1 as soon as any part finds it: g >= 2 (and below max(n_q, n_k)) means g
/// independent residue classes, which find_orders orders first.
std::int64_t offset_gcd(const Support& s);

/// The reordering of the permuted variant: rows (and keys) by residue modulo g when every
/// allowed pair has i' - j divisible by g >= 2 (dilated patterns: g independent bands), then keys
/// by the last and first block of `rows` rows whose tile-worthy columns they are (strided
/// patterns' summary keys gather into whole key blocks). Identity parts are left empty.
/// `residues` carries what does not depend on `rows` from one call on s to the next (the
/// planner prices several tile heights): the gcd g and the structure reordered by residue.
/// `seen`: price_by_fill's record of s at `rows`, read instead of the pairs when the keys are
/// ordered on s itself (no residue classes).
Orders find_orders(const Support& s,
                   std::int64_t rows,
                   const CostModel& cm,
                   Residues* residues = nullptr,
                   const BlockSeen* seen = nullptr);

/// The support with rows and keys reordered: (a, b) allowed iff (o.rows[a], o.keys[b]) is.
/// residue_g >= 2: o's keys are in residue order modulo residue_g (each class ascending, onto
/// consecutive labels), so a row of s declared to step by residue_g (Support::row_step) is an
/// interval of new keys, written from its first key alone.
Support reorder(const Support& s, const Orders& o, std::int64_t residue_g = 0);

/// Inverse of an order (old index -> new); empty stays empty.
std::vector<std::int64_t> inverse(const std::vector<std::int64_t>& order);

} // namespace ioattn::sparse::detail
