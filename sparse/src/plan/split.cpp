// ioattn::sparse split variant: Omega = T + E (disjoint; structure.hpp splits it per block of
// tiling.rows by column fill), T through the tile kernels, E through the element kernels,
// one softmax. Reference: forward_reference.cpp, backward_reference.cpp.
//   forward, both parts, when the tile scratch and the element rows' state fit M
//             (VariantPlan::element_in_tiles): forward_fused over T whose every block, after
//             its chunks, takes its rows' E pairs from its resident state (block_element.hpp)
//             and then writes O and L once (1.04x over the second pass below on
//             bigbird:64:2:3: block_element.hpp);
//   forward, otherwise: forward_fused over T (writes O_T, L_T; O = 0, L = -inf where T has
//             no pair); forward_element over E resuming from (O_T, L_T): a finished row is the
//             online softmax state m = L (base 2), l = 1, O_T, so the result is softmax over
//             T + E.
//   backward: backward_fused over T (dQ, dK, dV of T's pairs, with the full O and L: D and
//             P = exp(S - L) are those of Omega); backward_element over E adds its pairs'
//             terms (P, dS of a pair need only L and D, so the parts are independent sums).
//   Either part alone runs alone (the tile or element variant).
// Resident: the larger of the two kernels' (with the element pairs inside the blocks, the tile
// kernel's plus block_element_words).
// I/O = io_cost_forward_fused(T) + |E| (d + d_v + index words) per head, resident +
//   block_element_words, with the element pairs inside the blocks; else
//   io_cost_forward_fused(T) + io_cost_forward_element(E, resume) (each only when it runs);
//   backward: io_cost_backward_fused(T) + io_cost_backward_element(E, accumulate).
// Flops: 2 Z_T' (d + d_v) in tiles (Z_T' >= |T|: masked entries of a tile) + 2 |E| (d + d_v).
// Deterministic: the parts run one after the other, each thread-count invariant.
// Tests: tests/sparse/variants_test.cpp, tests/sparse/split_forward_test.cpp

#include "kernels/tile/folded_keys.hpp"
#include "plan/variant_parts.hpp"

#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <algorithm>
#include <string>

namespace ioattn::sparse::detail {

namespace {

/// Which kernels run: the tile one unless only the element part has pairs.
bool runs_tile(const PartsView& parts) {
    return parts.tile.z_qk() > 0 || parts.element.z_qk() == 0;
}

/// The tile scratch plus the element rows' state of forward_fused_split.
template <typename Scalar>
std::int64_t fused_split_peak(const Problem& p, const VariantPlan& plan) {
    return plan.tile.resident_words(p, Pass::forward, Kernels::sparse) +
           block_element_words(
               p, std::min(plan.tile.rows, p.n_q), ElementWords::of(sizeof(Scalar)));
}

} // namespace

template <typename Scalar>
bool fused_split(const Problem& problem,
                 const PartsView& parts,
                 const VariantPlan& plan,
                 const MemoryModel& memory) {
    return plan.pass == Pass::forward && parts.tile.z_qk() > 0 && parts.element.z_qk() > 0 &&
           fused_split_peak<Scalar>(problem, plan) <= memory.fast_words;
}

template <typename Scalar, typename Counter>
void forward_split(const ForwardArgs<Scalar>& args,
                   const PartsView& parts,
                   const VariantPlan& plan,
                   const MemoryModel& memory,
                   Counter& counter) {
    if (plan.element_in_tiles) {
        const Problem p = args.problem.resolved("ioattn::sparse::forward (split)");
        const std::int64_t peak = fused_split_peak<Scalar>(p, plan);
        if (peak > memory.fast_words)
            throw InvalidArgument("ioattn::sparse::forward (split): the plan's element pairs "
                                  "inside the tile blocks keep " +
                                  std::to_string(peak) + " words resident, M = " +
                                  std::to_string(memory.fast_words) + " (plan for this memory)");
        forward_fused_split(args, parts.tile, parts.element, plan.tile, memory, counter);
        return;
    }
    const bool tile = runs_tile(parts);
    if (tile)
        forward_fused(args, parts.tile, plan.tile, memory, counter);
    if (parts.element.z_qk() > 0)
        forward_element(args, parts.element, plan.element, memory, counter, tile);
}

template <typename Scalar, typename Counter>
void backward_split(const BackwardArgs<Scalar>& args,
                    const PartsView& parts,
                    const VariantPlan& plan,
                    const MemoryModel& memory,
                    Counter& counter) {
    const bool tile = runs_tile(parts);
    if (tile)
        backward_fused(args, parts.tile, plan.tile, memory, counter);
    if (parts.element.z_qk() > 0)
        backward_element(args, parts.element, plan.element, memory, counter, tile);
}

template <typename Scalar>
IoReport io_cost_split(const Problem& problem, const PartsView& parts, const VariantPlan& plan) {
    const bool tile = runs_tile(parts);
    const bool fwd = plan.pass == Pass::forward;
    if (fwd && plan.element_in_tiles) { // forward_fused_split: block_element.hpp
        const Problem p = problem.resolved("ioattn::sparse::io_cost (split)");
        IoReport r = io_cost_forward_fused(problem, parts.tile, SparseInputs<Scalar>{}, plan.tile);
        r.reads += p.batch_heads() * parts.element.z_qk() * (p.d + p.d_v + kIndexReadWords<Scalar>);
        r.peak = fused_split_peak<Scalar>(p, plan);
        return r;
    }
    IoReport r;
    if (tile)
        r = fwd ? io_cost_forward_fused(problem, parts.tile, SparseInputs<Scalar>{}, plan.tile)
                : io_cost_backward_fused(
                      problem,
                      parts.tile,
                      SparseInputs<Scalar>{},
                      plan.tile,
                      // a reordered problem read in place goes through Maps: no folds
                      !(in_place(parts) && (plan.rows_reordered || plan.keys_reordered)));
    if (parts.element.z_qk() > 0)
        r = in_sequence(
            r,
            fwd ? io_cost_forward_element<Scalar>(problem, parts.element, plan.element, tile)
                : io_cost_backward_element<Scalar>(problem, parts.element, plan.element, tile));
    return r;
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_split<Scalar, Counter>(const ForwardArgs<Scalar>&,                       \
                                                 const PartsView&,                                 \
                                                 const VariantPlan&,                               \
                                                 const MemoryModel&,                               \
                                                 Counter&);                                        \
    template void backward_split<Scalar, Counter>(const BackwardArgs<Scalar>&,                     \
                                                  const PartsView&,                                \
                                                  const VariantPlan&,                              \
                                                  const MemoryModel&,                              \
                                                  Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template bool fused_split<Scalar>(                                                             \
        const Problem&, const PartsView&, const VariantPlan&, const MemoryModel&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_split<Scalar>(const Problem&, const PartsView&, const VariantPlan&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::detail

namespace ioattn::sparse {

// --- the public entry of a plan (ioattn/sparse/variants.hpp): the split or permuted runner ---

template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const VariantPlan& plan,
             const MemoryModel& memory,
             Counter& counter) {
    const detail::PartsView parts =
        detail::view_of(detail::parts_of(plan, Pass::forward, "ioattn::sparse::forward"), support);
    if (support.n_q() != parts.tile.n_q() || support.n_k() != parts.tile.n_k())
        throw InvalidArgument("ioattn::sparse::forward: the plan is for another support shape");
    if (plan.variant == Variant::permuted)
        detail::forward_permuted(args, parts, plan, memory, counter);
    else
        detail::forward_split(args, parts, plan, memory, counter);
}

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const VariantPlan& plan,
              const MemoryModel& memory,
              Counter& counter) {
    const detail::PartsView parts = detail::view_of(
        detail::parts_of(plan, Pass::backward, "ioattn::sparse::backward"), support);
    if (support.n_q() != parts.tile.n_q() || support.n_k() != parts.tile.n_k())
        throw InvalidArgument("ioattn::sparse::backward: the plan is for another support shape");
    if (plan.variant == Variant::permuted)
        detail::backward_permuted(args, parts, plan, memory, counter);
    else
        detail::backward_split(args, parts, plan, memory, counter);
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward<Scalar, Counter>(const ForwardArgs<Scalar>&,                             \
                                           const Support&,                                         \
                                           const VariantPlan&,                                     \
                                           const MemoryModel&,                                     \
                                           Counter&);                                              \
    template void backward<Scalar, Counter>(const BackwardArgs<Scalar>&,                           \
                                            const Support&,                                        \
                                            const VariantPlan&,                                    \
                                            const MemoryModel&,                                    \
                                            Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
