// ioattn::sparse::detail::plan_by_family: the variant plan of a structure whose family (the
// spec and shape it was drawn from, any seed: Support::family) was planned before. The family
// keeps, per plan key, the decision of its first fresh plan: the tile height and how the pairs
// split (every pair through tiles, every pair element by element, or split by fill), and the
// element kernels' tiling. A structure of the family with about as many pairs is planned by
// it: the split priced at that height alone when it is a fill, nothing priced otherwise, the
// parts built for its own pairs, the element tiling kept where it fits them (finish_plan). Plans under a reordering or a forced variant are always made fresh (the
// orders are the structure's own). A random mask drawn afresh every step paid its forward's
// and backward's pricing each step: random:0.02 at N = 16384 priced its split and its rejected
// key order at 40 ms per pass, a third of a fresh training step (docs/performance.md section 4).
// Tests: tests/sparse/support_cache_test.cpp

#include "plan/variant_parts.hpp"
#include "support/family.hpp"

#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/variants.hpp>

#include <cmath>
#include <memory>
#include <optional>
#include <utility>

namespace ioattn::sparse {

namespace {

/// What a family keeps of a plan: its tile height, how its pairs split, and the structure it
/// was taken for (its pairs, the estimate per pair).
struct Decision {
    std::int64_t rows = 0;
    detail::Split::Kind kind = detail::Split::Kind::fill;
    std::int64_t z_qk = 0;
    double estimate_per_pair = 0;
    Tiling element; ///< the element kernels' tiling, taken where it fits (finish_plan)

    /// Whether it is taken for s: a structure within 5% of the decision's pairs.
    [[nodiscard]] bool fits(const Support& s) const {
        const auto z = static_cast<double>(s.z_qk()), z0 = static_cast<double>(z_qk);
        return z0 > 0 && std::abs(z - z0) <= 0.05 * z0;
    }
};

/// The decision of a fresh plan of s; none under a reordering.
std::optional<Decision> decision_of(const VariantPlan& plan, const Support& s) {
    const detail::VariantParts& parts = *plan.parts;
    if (!parts.orders.identity() || s.z_qk() == 0)
        return std::nullopt;
    using Whole = detail::VariantParts::Whole;
    Decision d;
    d.rows = plan.tile.rows;
    d.kind = parts.whole == Whole::tile      ? detail::Split::Kind::all_tiles
             : parts.whole == Whole::element ? detail::Split::Kind::all_element
                                             : detail::Split::Kind::fill;
    d.z_qk = s.z_qk();
    d.estimate_per_pair = plan.estimate / static_cast<double>(s.z_qk());
    d.element = plan.element;
    return d;
}

/// plan_fresh's plan of s had it decided as d: the split at d's height, by d's kind.
template <typename Scalar>
VariantPlan plan_decided(const Problem& p,
                         const Support& s,
                         const MemoryModel& memory,
                         Pass pass,
                         std::optional<Tiling> tile,
                         const Decision& d) {
    VariantPlan plan = detail::start_plan<Scalar>(p, memory, pass, tile);
    plan.tile.rows = d.rows;
    const Support& view = pass == Pass::forward ? s : s.transposed();
    const std::int64_t blocks = (view.n_q() + d.rows - 1) / d.rows;
    detail::Split split;
    switch (d.kind) {
    case detail::Split::Kind::fill:
        split = detail::price_by_fill(view, d.rows, detail::cost_model(pass));
        break;
    case detail::Split::Kind::all_tiles:
        split.kind = d.kind;
        split.tile_blocks = blocks;
        break;
    case detail::Split::Kind::all_element:
        split.kind = d.kind;
        split.element_blocks = blocks;
        break;
    }
    detail::finish_plan<Scalar>(plan,
                                std::move(split),
                                {},
                                nullptr,
                                d.estimate_per_pair * static_cast<double>(s.z_qk()),
                                p,
                                s,
                                memory,
                                std::nullopt,
                                &d.element);
    return plan;
}

} // namespace

template <typename Scalar>
VariantPlan detail::plan_by_family(const Problem& p,
                                   const Support& support,
                                   const MemoryModel& memory,
                                   Pass pass,
                                   std::optional<Variant> force,
                                   std::optional<Tiling> tile,
                                   const std::string& key) {
    const std::shared_ptr<SupportFamily> family = support.family();
    if (family == nullptr || force)
        return plan_fresh<Scalar>(p, support, memory, pass, force, tile);
    if (const auto kept = family->find(key)) {
        const auto& d = *std::static_pointer_cast<const Decision>(kept);
        if (d.fits(support)) {
            ++family_plans();
            return plan_decided<Scalar>(p, support, memory, pass, tile, d);
        }
    }
    VariantPlan plan = plan_fresh<Scalar>(p, support, memory, pass, force, tile);
    if (const auto d = decision_of(plan, support))
        family->keep(key, std::make_shared<const Decision>(*d));
    return plan;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template VariantPlan detail::plan_by_family<Scalar>(const Problem&,                            \
                                                        const Support&,                            \
                                                        const MemoryModel&,                        \
                                                        Pass,                                      \
                                                        std::optional<Variant>,                    \
                                                        std::optional<Tiling>,                     \
                                                        const std::string&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
