// ioattn::sparse::plan_variants and the plan's forward / backward / io_cost: the variant
// planner of the fused sparse schedule (variants.hpp). Per pass, the support (forward) or
// its transpose (backward: the tile backward keeps key blocks resident) is split per block of
// tile.rows by the cost model (structure.hpp), on the original structure and, when
// find_orders gives one, on the reordered structure plus the cost of the copies; the cheapest
// estimate wins. Under a tuned tiling the tile height is chosen too: the tuned one, one less
// or half, priced with a cost per tile column, by kHeightGain (each other height first
// estimated on a sample of rows: sampled_time.cpp). The variant of the plan is what its parts
// need: tile (no element pair), element (no tile pair), split, or permuted around one of
// those (finish_plan, plan_parts.cpp). A structure of a family planned before is planned by
// the family's decision (family_plan.cpp).
// Cost model (relative time units, fitted to the kernels' rates: structure.hpp): a tile entry
// (query lane x key, masked or not) 1, an element pair 9, a gathered K/V row 16, a reordered
// row of one operand 22, a tile column 6 (forward) or 30 (backward); a split must undercut the
// best single kernel by kSplitGain. Tile lanes come in groups of 16 rows (keys in the
// backward), each computing only the columns its rows see (staggered_slab.hpp,
// staggered_chunk.hpp), so a band's lanes cost the same at every height and its taller tiles
// win by their fewer columns (window:64's and bigbird:64:2:3's forwards take 64-row tiles).
// Tests: tests/sparse/variants_test.cpp

#include "plan/block_columns.hpp"
#include "plan/variant_parts.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/variants.hpp>

#include <memory>
#include <string>

namespace ioattn::sparse {

std::string_view to_string(Variant v) {
    switch (v) {
    case Variant::tile:
        return "tile";
    case Variant::element:
        return "element";
    case Variant::split:
        return "split";
    case Variant::permuted:
        return "permuted";
    }
    return "tile";
}

Variant parse_variant(std::string_view text) {
    for (const Variant v : {Variant::tile, Variant::element, Variant::split, Variant::permuted})
        if (text == to_string(v))
            return v;
    throw InvalidArgument("ioattn::sparse::parse_variant: '" + std::string(text) +
                          "' (expected tile, element, split or permuted)");
}

detail::CostModel detail::cost_model(Pass pass) {
    CostModel cm;
    // per tile column (structure.hpp): fitted per pass, the backward's passes over a key
    // block's query rows cost more per row than the forward's per key
    cm.tile_column = pass == Pass::forward ? 6.0 : 30.0;
    cm.lane_group = 16; // both passes' tiles stagger by 16-row groups (staggered_*.hpp)
    return cm;
}

namespace {

/// The factor by which another tile height's estimate must undercut the tuned height's.
constexpr double kHeightGain = 0.97;

/// The blocks of the tuned height whose rows the other heights' estimates are sampled on, about,
/// one in at least kSampleStride (below it the samples of three heights cost more than the two
/// whole prices they may save).
constexpr std::int64_t kSampleBlocks = 32;
constexpr std::int64_t kSampleStride = 4;

/// Another height is priced whole when its sampled estimate is below this factor of the tuned
/// height's: to win it must undercut the tuned height by kHeightGain, and the sampled ratios of
/// the suite's patterns and a few more (N = 16384 and 32768, both passes, 106 cases) were within
/// 0.82-1.04 of the whole prices' ratios (an estimate too low only costs the whole price).
constexpr double kSampleSkip = 1.05;

/// The best split for the pass of a support `view` already in the pass's orientation (s
/// forward, s^T backward), priced: blocks of its rows. Its parts are built for the winning
/// candidate only (build_parts): building every candidate's parts and their transposes would
/// double the planning time of strided:64's backward at N = 16384.
detail::Split best_split_of(const detail::OrderedView& view,
                            std::int64_t rows,
                            const detail::CostModel& cm,
                            bool forced,
                            detail::BlockSeen* seen = nullptr) {
    detail::Split best = detail::price_by_fill(view, rows, cm, seen);
    const detail::Pick picked =
        forced ? detail::Pick::split
               : detail::pick(best, static_cast<double>(view.z_qk()) * cm.element_pair);
    if (picked == detail::Pick::split)
        return best;
    const bool tiles = picked == detail::Pick::all_tiles;
    detail::Split priced; // every pair through one kernel
    priced.kind = tiles ? detail::Split::Kind::all_tiles : detail::Split::Kind::all_element;
    priced.cost = tiles ? best.all_tiles_cost : static_cast<double>(view.z_qk()) * cm.element_pair;
    priced.tile_columns = tiles ? best.all_tiles_columns : 0;
    priced.global_rows = best.global_rows;
    const std::int64_t blocks = (view.n_q() + rows - 1) / rows;
    (tiles ? priced.tile_blocks : priced.element_blocks) = blocks;
    return priced;
}

/// The best split of s for the pass (blocks of s's rows forward, of its keys backward);
/// `seen`: the forward's record for find_orders (price_by_fill).
detail::Split best_split(const Support& s,
                         std::int64_t rows,
                         Pass pass,
                         const detail::CostModel& cm,
                         std::optional<Variant> force,
                         detail::BlockSeen* seen = nullptr) {
    const Support& view = pass == Pass::forward ? s : s.transposed();
    if (force == Variant::tile || force == Variant::element)
        return detail::split_all(view, rows, force == Variant::tile, cm, false);
    return best_split_of(view, rows, cm, force.has_value(), pass == Pass::forward ? seen : nullptr);
}

/// Rows copied by the reordering (the cost model's unit), per head.
double copied_rows(const Problem& p, const detail::Orders& o, Pass pass) {
    const bool fwd = pass == Pass::forward;
    double rows = 0;
    if (!o.rows.empty())
        rows += static_cast<double>(p.n_q) * (fwd ? 3 : 5);
    if (!o.keys.empty())
        rows += static_cast<double>(p.n_k) * (fwd ? 2 : 4);
    return rows;
}

/// find_orders of the support at `rows`, kept with it (Support::cached_value): the orders do not
/// depend on the pass (nor on its tile column cost), so a fresh structure's forward and backward
/// plans walk it once for them. `residues` is updated as find_orders updates it; `seen`: the
/// forward pricing's record of the blocks at `rows`, if it made one.
detail::Orders kept_orders(const Support& support,
                           std::int64_t rows,
                           const detail::CostModel& cm,
                           detail::Residues& residues,
                           const detail::BlockSeen* seen) {
    struct Found {
        detail::Orders orders;
        detail::Residues residues;
    };

    const std::string key = "orders:" + std::to_string(rows) + "," + std::to_string(cm.lane_group) +
                            "," + std::to_string(cm.tile_lane) + "," +
                            std::to_string(cm.element_pair);
    const auto kept = std::static_pointer_cast<const Found>(support.cached_value(key, [&] {
        detail::Residues r = residues;
        detail::Orders o = detail::find_orders(support, rows, cm, &r, seen);
        return std::make_shared<const Found>(Found{std::move(o), std::move(r)});
    }));
    residues = kept->residues;
    return kept->orders;
}

/// The best structure at one tile height, priced: the split of the original or, when
/// find_orders gives one and it is cheaper (or forced), of the reordered structure with its
/// copies; `time` adds the tile columns' cost to the split's. With reorder = false the
/// reordered structure is not tried.
struct Candidate {
    detail::Split split;
    detail::Orders orders;
    double time = 0;
    std::shared_ptr<const Support> reordered; ///< the reordered structure tried, if any
    detail::Residues residues;                ///< the support's residue classes, once found
};

Candidate candidate(const Problem& p,
                    const Support& support,
                    std::int64_t rows,
                    Pass pass,
                    const detail::CostModel& cm,
                    std::optional<Variant> force,
                    bool reorder,
                    const Candidate* like = nullptr) {
    const std::optional<Variant> inner_force = force == Variant::permuted ? std::nullopt : force;
    Candidate c;
    if (like != nullptr)
        c.residues = like->residues;
    // the forward's pricing records what find_orders reads, for when it looks for orders on
    // the support itself (no residue classes: recording dilated:256:4's blocks made its
    // forward's plan 1.16x)
    detail::BlockSeen seen;
    const bool record = reorder && pass == Pass::forward && inner_force != Variant::tile &&
                        inner_force != Variant::element;
    if (record && c.residues.g == 0)
        c.residues.g = detail::offset_gcd(support);
    const std::int64_t g = c.residues.g;
    const bool on_support = !(g >= 2 && g < std::max(p.n_q, p.n_k));
    c.split =
        best_split(support, rows, pass, cm, inner_force, record && on_support ? &seen : nullptr);
    // without global rows every pair costs at least one tile lane, so a split priced at Z_QK
    // lanes (whole dense blocks: block:64:0.1) has no cheaper reordering to look for
    const bool floor = !force && c.split.global_rows == 0 &&
                       c.split.cost <= static_cast<double>(support.z_qk()) * cm.tile_lane;
    if (reorder && (force == Variant::permuted || (!force && !floor))) {
        detail::Orders orders = kept_orders(support, rows, cm, c.residues, &seen);
        seen = {};
        // the reordered structure is built only when its split could be priced lower than
        // the original's (a key order keeps each block's column counts: only the gathers of
        // short runs of tile columns can go); the floor is the forward orientation's
        const bool hopeless =
            pass == Pass::forward &&
            orders.floor + copied_rows(p, orders, pass) * cm.copy_row >= c.split.cost;
        if (!orders.identity() && (force == Variant::permuted || !hopeless)) {
            // the same orders as `like`'s (dilated's residues at any height): its structure
            std::shared_ptr<const Support> built = like != nullptr && like->reordered &&
                                                           like->orders.rows == orders.rows &&
                                                           like->orders.keys == orders.keys
                                                       ? like->reordered
                                                   : orders.residue_only ? c.residues.reordered
                                                                         : nullptr;
            detail::Split alt;
            if (!built && orders.rows.empty()) {
                // a key order alone is priced through the original, its copy built only if it
                // wins: forward, keys relabeled; backward, the transpose's rows in that order
                const std::vector<std::int64_t> key_new = pass == Pass::forward
                                                              ? detail::inverse(orders.keys)
                                                              : std::vector<std::int64_t>{};
                const detail::OrderedView view =
                    pass == Pass::forward
                        ? detail::OrderedView(support, {}, key_new)
                        : detail::OrderedView(support.transposed(), orders.keys, {});
                alt = best_split_of(view, rows, cm, false);
            } else {
                if (!built)
                    built = std::make_shared<const Support>(detail::reorder(support, orders));
                alt = best_split(*built, rows, pass, cm, std::nullopt);
            }
            alt.cost += copied_rows(p, orders, pass) * cm.copy_row;
            if (force == Variant::permuted || alt.cost < c.split.cost) {
                c.reordered =
                    built ? std::move(built)
                          : std::make_shared<const Support>(detail::reorder(support, orders));
                c.split = std::move(alt);
                c.orders = std::move(orders);
            }
        }
    }
    c.time = c.split.cost + static_cast<double>(c.split.tile_columns) * cm.tile_column;
    return c;
}

} // namespace

template <typename Scalar>
VariantPlan detail::plan_fresh(const Problem& p,
                               const Support& support,
                               const MemoryModel& memory,
                               Pass pass,
                               std::optional<Variant> force,
                               std::optional<Tiling> tile) {
    VariantPlan plan = detail::start_plan<Scalar>(p, memory, pass, tile);
    const detail::CostModel cm = detail::cost_model(pass);
    Candidate best = candidate(p, support, plan.tile.rows, pass, cm, force, true);
    // --- the tile height: the tuned one, one less (blocks of L - 1 keys: strided:L's own keys
    // once its summary keys are gathered), or half (narrow bands mask less of each tile),
    // when the estimate drops by kHeightGain; a given tiling is kept, and a plan without tiles
    // has no height to choose (pricing it anyway would make random:0.02's planning 2.3x) ---
    if (!tile && best.split.tile_columns > 0) {
        const std::int64_t tuned = plan.tile.rows;
        // the other heights keep the tuned one's structure, reordered or not: pricing
        // bigbird's rejected reordering again would take 60% of its backward's planning
        const bool reorder = !best.orders.identity();
        // a height is priced whole only when its estimate on a sample of rows (the tuned
        // height's blocks of a stride: sampled_time) comes near the tuned height's there; not
        // under a reordering or a forced variant (their prices are not sampled)
        const std::int64_t n_rows = pass == Pass::forward ? p.n_q : p.n_k; // the view's
        const std::int64_t stride = (n_rows + tuned - 1) / tuned / kSampleBlocks;
        const bool sampled = !reorder && !force && stride >= kSampleStride;
        std::vector<std::pair<std::int64_t, std::int64_t>> windows;
        for (std::int64_t i0 = 0; sampled && i0 < n_rows; i0 += stride * tuned)
            windows.emplace_back(i0, std::min(n_rows, i0 + tuned));
        const double tuned_sample =
            sampled ? detail::sampled_time(support, tuned, pass, cm, windows) : 0.0;
        Candidate priced; // the cheapest other height, priced (its reordered structure kept)
        for (const std::int64_t rows : {tuned - 1, tuned / 2}) {
            if (rows < 1 || rows == tuned)
                continue;
            if (sampled && detail::sampled_time(support, rows, pass, cm, windows) >=
                               kSampleSkip * tuned_sample)
                continue;
            Candidate c = candidate(p, support, rows, pass, cm, force, reorder, &best);
            if (c.time < kHeightGain * (plan.tile.rows == tuned ? best.time : priced.time)) {
                priced = std::move(c);
                plan.tile.rows = rows;
            }
        }
        if (plan.tile.rows != tuned)
            best = std::move(priced);
    }
    detail::finish_plan<Scalar>(plan,
                                std::move(best.split),
                                std::move(best.orders),
                                std::move(best.reordered),
                                best.time,
                                p,
                                support,
                                memory,
                                force);
    return plan;
}

template <typename Scalar>
VariantPlan plan_variants(const Problem& problem,
                          const Support& support,
                          const MemoryModel& memory,
                          Pass pass,
                          std::optional<Variant> force,
                          std::optional<Tiling> tile) {
    constexpr const char* kWhere = "ioattn::sparse::plan_variants";
    const Problem p = problem.resolved(kWhere);
    memory.validate(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(
            std::string(kWhere) + ": support is " + std::to_string(support.n_q()) + " x " +
            std::to_string(support.n_k()) + " but the problem has n_q = " + std::to_string(p.n_q) +
            ", n_k = " + std::to_string(p.n_k));
    if (p.causal)
        throw InvalidArgument(std::string(kWhere) +
                              ": problem.causal = true; use the 'causal' pattern instead");
    if (tile && tile->schedule != Schedule::fused)
        throw InvalidArgument(std::string(kWhere) + ": the tile part's tiling is " +
                              std::string(ioattn::to_string(tile->schedule)) + " (expected fused)");
    // --- kept with the support per shape, memory, pass, word and request: planning takes
    // 0.13-0.97 s at N = 16384 for a 4-11 ms kernel, and a Python call plans every time ---
    const auto number = [](std::int64_t x) { return std::to_string(x) + ","; };
    const std::string key = "variants:" + number(static_cast<std::int64_t>(pass)) +
                            number(static_cast<std::int64_t>(sizeof(Scalar))) + number(p.batch) +
                            number(p.heads) + number(p.kv_heads) + number(p.n_q) + number(p.n_k) +
                            number(p.d) + number(p.d_v) + number(memory.fast_words) +
                            number(force ? static_cast<std::int64_t>(*force) : -1) +
                            (tile ? number(tile->rows) + number(tile->cols) : std::string("tuned"));
    const auto kept = support.cached_value(key, [&] {
        return std::make_shared<const VariantPlan>(
            detail::plan_by_family<Scalar>(p, support, memory, pass, force, tile, key));
    });
    return *std::static_pointer_cast<const VariantPlan>(kept);
}

const detail::VariantParts&
detail::parts_of(const VariantPlan& plan, Pass pass, const char* where) {
    if (!plan.parts)
        throw InvalidArgument(std::string(where) + ": the plan has no parts (use plan_variants)");
    if (plan.pass != pass)
        throw InvalidArgument(std::string(where) + ": the plan is for the " +
                              std::string(to_string(plan.pass)) + " pass");
    return *plan.parts;
}

template <typename Scalar>
IoReport io_cost(const Problem& problem, const Support& support, const VariantPlan& plan) {
    const detail::PartsView parts =
        detail::view_of(detail::parts_of(plan, plan.pass, "ioattn::sparse::io_cost"), support);
    IoReport r = detail::io_cost_split<Scalar>(problem, parts, plan);
    if (plan.variant == Variant::permuted)
        r = detail::in_sequence(r, detail::io_cost_permutation<Scalar>(problem, parts, plan));
    return r;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template VariantPlan detail::plan_fresh<Scalar>(const Problem&,                                \
                                                    const Support&,                                \
                                                    const MemoryModel&,                            \
                                                    Pass,                                          \
                                                    std::optional<Variant>,                        \
                                                    std::optional<Tiling>);                        \
    template VariantPlan plan_variants<Scalar>(const Problem&,                                     \
                                               const Support&,                                     \
                                               const MemoryModel&,                                 \
                                               Pass,                                               \
                                               std::optional<Variant>,                             \
                                               std::optional<Tiling>);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost<Scalar>(const Problem&, const Support&, const VariantPlan&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
