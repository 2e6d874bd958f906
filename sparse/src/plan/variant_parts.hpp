#pragma once
// The private parts of a VariantPlan (ioattn/sparse/variants.hpp): the tile and element parts
// of the structure the plan runs on (the reordered one for the permuted variant) and the
// reordering. Also the runners of the split and permuted variants (split.cpp, permuted.cpp).

#include "kernels/element/panels.hpp"
#include "plan/structure.hpp"
#include "support/block_keys.hpp"

#include <ioattn/sparse/variants.hpp>

#include <algorithm>
#include <memory>
#include <string>

namespace ioattn::sparse::detail {

struct VariantParts {
    Support tile;    ///< pairs through the tile kernels (none kept when whole == tile)
    Support element; ///< pairs through the element kernels (none kept when whole == element)
    Orders orders;   ///< permuted: new row a = old rows[a], new key b = old keys[b]
    /// A part that is every pair of the structure the plan runs on is that structure itself,
    /// not a copy (copying it took as long as a window:256 call at N = 16384): the support the
    /// plan runs with, or `reordered` for the permuted variant. Its kept plans (block keys,
    /// panels) are then shared with every other plan of that structure.
    enum class Whole { none, tile, element };
    Whole whole = Whole::none;
    std::shared_ptr<const Support> reordered; ///< permuted: the reordered structure
};

/// The parts of a plan as the runners read them, resolved against the support it runs with.
struct PartsView {
    const Support& tile;
    const Support& element;
    const Orders& orders;
};

/// The view of `parts` for a plan run with `support` (the structure it was planned for).
inline PartsView view_of(const VariantParts& parts, const Support& support) {
    const Support& base = parts.reordered ? *parts.reordered : support;
    return {parts.whole == VariantParts::Whole::tile ? base : parts.tile,
            parts.whole == VariantParts::Whole::element ? base : parts.element,
            parts.orders};
}

/// plan_variants without its cache, on a resolved and checked problem (variant_plan.cpp).
template <typename Scalar>
VariantPlan plan_fresh(const Problem& p,
                       const Support& support,
                       const MemoryModel& memory,
                       Pass pass,
                       std::optional<Variant> force,
                       std::optional<Tiling> tile);

/// A plan before its choice: the pass, M, the given tiling or the tuned one, the element
/// tiling (plan_parts.cpp).
template <typename Scalar>
VariantPlan start_plan(const Problem& p,
                       const MemoryModel& memory,
                       Pass pass,
                       const std::optional<Tiling>& tile);

/// Completes `plan` (pass, planned_for, tile at the chosen height and element tiling set) from
/// the split chosen for it on `support` (or on `reordered` under `orders`), with its estimate
/// (plan_parts.cpp): the parts built once, the variant, the counts, the widened element tiling
/// (element_kept where it fits the structure's own panels: a family's decision).
template <typename Scalar>
void finish_plan(VariantPlan& plan,
                 Split split,
                 Orders orders,
                 std::shared_ptr<const Support> reordered,
                 double estimate,
                 const Problem& p,
                 const Support& support,
                 const MemoryModel& memory,
                 std::optional<Variant> force,
                 const Tiling* element_kept = nullptr);

/// plan_variants' plan of a structure of a family (Support::family) planned before: the
/// decision the family keeps for `key` (its tile height and how its pairs split), applied to
/// `support`'s own pairs, when there is one for a structure of about as many pairs; else
/// plan_fresh, whose decision the family then keeps (family_plan.cpp).
template <typename Scalar>
VariantPlan plan_by_family(const Problem& p,
                           const Support& support,
                           const MemoryModel& memory,
                           Pass pass,
                           std::optional<Variant> force,
                           std::optional<Tiling> tile,
                           const std::string& key);

/// The parts of a plan made by plan_variants for `pass`; throws InvalidArgument naming `where`
/// for a plan without parts or for the other pass.
const VariantParts& parts_of(const VariantPlan& plan, Pass pass, const char* where);

/// The tile and element kernels over the parts: tile first (if it has pairs, or if there is no
/// element part), then element (resuming from the tile outputs when both run).
template <typename Scalar, typename Counter>
void forward_split(const ForwardArgs<Scalar>& args,
                   const PartsView& parts,
                   const VariantPlan& plan,
                   const MemoryModel& memory,
                   Counter& counter);

template <typename Scalar, typename Counter>
void backward_split(const BackwardArgs<Scalar>& args,
                    const PartsView& parts,
                    const VariantPlan& plan,
                    const MemoryModel& memory,
                    Counter& counter);

/// forward_fused (its tile schedule, dense operands) over a reordered problem read in place:
/// query row i of `support` is row maps.row(i) of Q, O and L, key j is row maps.key(j) of K
/// and V. I/O: io_cost_forward_fused plus the order indices each block reads
/// (BlockKeys::map_words). Dispatched to the active ISA target (kernels/isa_dispatch.cpp).
template <typename Scalar, typename Counter>
void forward_fused_ordered(const ForwardArgs<Scalar>& args,
                           const Support& support,
                           const Maps& maps,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// forward_fused over the split's tile part whose blocks also take the element part's pairs of
/// their rows from their resident state (block_element.hpp), in place of forward_element's
/// second pass. I/O: io_cost_split (fused_split). Dispatched like forward_fused_ordered.
template <typename Scalar, typename Counter>
void forward_fused_split(const ForwardArgs<Scalar>& args,
                         const Support& tile,
                         const Support& element,
                         const Tiling& tiling,
                         const MemoryModel& memory,
                         Counter& counter);

/// Whether a forward split plan runs forward_fused_split: both parts have pairs and the tile
/// scratch with the element rows' state (block_element_words) fits M. Otherwise the element
/// part runs as a second pass (forward_element, resuming from the tile outputs).
template <typename Scalar>
bool fused_split(const Problem& problem,
                 const PartsView& parts,
                 const VariantPlan& plan,
                 const MemoryModel& memory);

/// backward_fused likewise over a reordered problem read in place: Q, O, L, dO, dQ rows through the
/// row order, K, V, dK, dV rows through the key order. I/O: io_cost_backward_fused plus the order
/// indices: per head, each query block's rows in pass 0 and pass R, and each key block's
/// BlockKeys::map_words of the transposed plan in pass A.
template <typename Scalar, typename Counter>
void backward_fused_ordered(const BackwardArgs<Scalar>& args,
                            const Support& support,
                            const Maps& maps,
                            const Tiling& tiling,
                            const MemoryModel& memory,
                            Counter& counter);

/// Whether the permuted variant reads and writes the reordered problem in place (every pair
/// goes through tiles, which take the orders: forward_fused_ordered, backward_fused_ordered)
/// instead of copying it (permuted.cpp).
bool in_place(const PartsView& parts);

/// I/O of forward_split / backward_split.
template <typename Scalar>
IoReport io_cost_split(const Problem& problem, const PartsView& parts, const VariantPlan& plan);

/// The reordering around forward_split / backward_split: operands copied into reordered
/// buffers, outputs back; when every pair goes through tiles, none: forward_fused_ordered /
/// backward_fused_ordered read them in place.
template <typename Scalar, typename Counter>
void forward_permuted(const ForwardArgs<Scalar>& args,
                      const PartsView& parts,
                      const VariantPlan& plan,
                      const MemoryModel& memory,
                      Counter& counter);

template <typename Scalar, typename Counter>
void backward_permuted(const BackwardArgs<Scalar>& args,
                       const PartsView& parts,
                       const VariantPlan& plan,
                       const MemoryModel& memory,
                       Counter& counter);

/// I/O of the reordering alone (add io_cost_split for the whole call): the copies, or, for a
/// forward read in place, the order indices its tile blocks read.
template <typename Scalar>
IoReport
io_cost_permutation(const Problem& problem, const PartsView& parts, const VariantPlan& plan);

/// The I/O of two phases run one after the other: words add, the peak is the larger one.
inline IoReport in_sequence(const IoReport& a, const IoReport& b) {
    return {a.reads + b.reads, a.writes + b.writes, std::max(a.peak, b.peak)};
}

} // namespace ioattn::sparse::detail
