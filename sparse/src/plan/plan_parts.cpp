// ioattn::sparse::detail::finish_plan: a variant plan completed from the split its planner chose
// (plan_fresh, or plan_by_family for a structure of a family already planned): the split's
// parts built in Omega's orientation (none for a part that is every pair), the variant, the
// counts, the element tiling widened within M and the split's fused element rows. A backward
// split is priced on Omega^T; its parts are turned back and keep the orientation they were
// split in as their transposed(), which the backward kernels read (a bigbird:64:2:3 backward
// at N = 16384 transposed 5 times, now 3: docs/performance.md section 4).
// Tests: tests/sparse/variants_test.cpp, support_test.cpp (keep_transposed)

#include "plan/variant_parts.hpp"
#include "support/transpose.hpp"

#include <ioattn/kernels/instantiate.hpp>

#include <memory>
#include <utility>

namespace ioattn::sparse {

namespace {

/// A part t split in the transposed orientation (n_k x n_q), turned back to Omega's, with t kept
/// as its transposed(): the backward kernels read it transposed, and would otherwise transpose
/// it again.
Support turned_back(Support t) {
    detail::TransposeParts back = detail::transpose_of(t, false);
    Support out(
        detail::BuiltRows{}, t.n_k(), t.n_q(), std::move(back.offsets), std::move(back.entries));
    out.keep_transposed(detail::BuiltRows{}, std::move(t));
    return out;
}

/// The parts of a split priced on s, in Omega's orientation; a part that is all of s is not
/// built (the plan's runners read s itself: VariantParts::whole).
detail::VariantParts::Whole
build_parts(detail::Split& split, const Support& s, std::int64_t rows, Pass pass) {
    using Whole = detail::VariantParts::Whole;
    switch (split.kind) {
    case detail::Split::Kind::all_tiles:
        split.element = Support::none(s.n_q(), s.n_k());
        return Whole::tile;
    case detail::Split::Kind::all_element:
        split.tile = Support::none(s.n_q(), s.n_k());
        return Whole::element;
    case detail::Split::Kind::fill:
        break;
    }
    const bool fwd = pass == Pass::forward;
    detail::split_parts(split, fwd ? s : s.transposed(), rows);
    if (!fwd) { // parts back in Omega's orientation
        split.tile = turned_back(std::move(split.tile));
        split.element = turned_back(std::move(split.element));
    }
    return Whole::none;
}

Variant variant_of(const detail::PartsView& s) {
    if (s.element.z_qk() == 0)
        return Variant::tile;
    return s.tile.z_qk() == 0 ? Variant::element : Variant::split;
}

} // namespace

template <typename Scalar>
VariantPlan detail::start_plan(const Problem& p,
                               const MemoryModel& memory,
                               Pass pass,
                               const std::optional<Tiling>& tile) {
    VariantPlan plan;
    plan.pass = pass;
    plan.planned_for = memory.fast_words;
    plan.tile = tile ? *tile : tuned_tiling(Schedule::fused, memory, p, pass);
    plan.element = element_tiling<Scalar>(p, memory, pass);
    return plan;
}

template <typename Scalar>
void detail::finish_plan(VariantPlan& plan,
                         Split split,
                         Orders orders,
                         std::shared_ptr<const Support> reordered,
                         double estimate,
                         const Problem& p,
                         const Support& support,
                         const MemoryModel& memory,
                         std::optional<Variant> force,
                         const Tiling* element_kept) {
    const Pass pass = plan.pass;
    auto parts = std::make_shared<VariantParts>();
    if (!orders.identity())
        parts->reordered = std::move(reordered);
    parts->whole =
        build_parts(split, parts->reordered ? *parts->reordered : support, plan.tile.rows, pass);
    parts->orders = std::move(orders);
    parts->tile = std::move(split.tile);
    parts->element = std::move(split.element);
    const PartsView view = view_of(*parts, support);
    plan.rows_reordered = !parts->orders.rows.empty();
    plan.keys_reordered = !parts->orders.keys.empty();
    plan.inner = variant_of(view);
    plan.variant =
        force == Variant::permuted || !parts->orders.identity() ? Variant::permuted : plan.inner;
    plan.tile_blocks = split.tile_blocks;
    plan.element_blocks = split.element_blocks;
    plan.split_blocks = split.split_blocks;
    plan.tile_pairs = view.tile.z_qk();
    plan.element_pairs = view.element.z_qk();
    // a family's kept element tiling, where it fits this structure's own panels (which the
    // kernels then take as built), else the search: 9 and 18 ms of a fresh random:0.02's
    // forward and backward at N = 16384 went to searching the widths again
    plan.element =
        element_kept != nullptr && view.element.z_qk() > 0 &&
                element_tiling_fits<Scalar>(p, view.element, *element_kept, memory, pass)
            ? *element_kept
            : widened_element_tiling<Scalar>(p, view.element, plan.element, memory, pass);
    plan.estimate = estimate;
    plan.parts = std::move(parts);
    plan.element_in_tiles = fused_split<Scalar>(p, view, plan, memory);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template VariantPlan detail::start_plan<Scalar>(                                               \
        const Problem&, const MemoryModel&, Pass, const std::optional<Tiling>&);                   \
    template void detail::finish_plan<Scalar>(VariantPlan&,                                        \
                                              Split,                                               \
                                              Orders,                                              \
                                              std::shared_ptr<const Support>,                      \
                                              double,                                              \
                                              const Problem&,                                      \
                                              const Support&,                                      \
                                              const MemoryModel&,                                  \
                                              std::optional<Variant>,                              \
                                              const Tiling*);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
