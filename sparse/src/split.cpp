// ioattn::sparse split variant: Omega = T + E (disjoint; structure.hpp splits it per block of
// tiling.rows by column fill), T through the tile kernels, E through the element kernels,
// one softmax. Reference: forward_reference.cpp, backward_reference.cpp.
//   forward:  forward_fused over T (writes O_T, L_T; O = 0, L = -inf where T has no pair);
//             forward_element over E resuming from (O_T, L_T): a finished row is the online
//             softmax state m = L (base 2), l = 1, O_T, so the result is softmax over T + E.
//   backward: backward_fused over T (dQ, dK, dV of T's pairs, with the full O and L: D and
//             P = exp(S - L) are those of Omega); backward_element over E adds its pairs'
//             terms (P, dS of a pair need only L and D, so the parts are independent sums).
//   Either part alone runs alone (the tile or element variant).
// Resident: the larger of the two kernels'.
// I/O = io_cost_forward_fused(T) + io_cost_forward_element(E, resume) (each only when it
//   runs); backward: io_cost_backward_fused(T) + io_cost_backward_element(E, accumulate).
// Flops: 2 Z_T' (d + d_v) in tiles (Z_T' >= |T|: masked entries of a tile) + 2 |E| (d + d_v).
// Deterministic: the parts run one after the other, each thread-count invariant.
// Tests: tests/sparse/variants_test.cpp

#include "folded_keys.hpp"
#include "variant_parts.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <algorithm>

namespace ioattn::sparse::detail {

namespace {

/// Which kernels run: the tile one unless only the element part has pairs.
bool runs_tile(const VariantParts& parts) {
    return parts.tile.z_qk() > 0 || parts.element.z_qk() == 0;
}

} // namespace

template <typename Scalar, typename Counter>
void forward_split(const ForwardArgs<Scalar>& args,
                   const VariantParts& parts,
                   const VariantPlan& plan,
                   const MemoryModel& memory,
                   Counter& counter) {
    const bool tile = runs_tile(parts);
    if (tile)
        forward_fused(args, parts.tile, plan.tile, memory, counter);
    if (parts.element.z_qk() > 0)
        forward_element(args, parts.element, plan.element, memory, counter, tile);
}

template <typename Scalar, typename Counter>
void backward_split(const BackwardArgs<Scalar>& args,
                    const VariantParts& parts,
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
IoReport io_cost_split(const Problem& problem, const VariantParts& parts, const VariantPlan& plan) {
    const bool tile = runs_tile(parts);
    const bool fwd = plan.pass == Pass::forward;
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
                                                 const VariantParts&,                              \
                                                 const VariantPlan&,                               \
                                                 const MemoryModel&,                               \
                                                 Counter&);                                        \
    template void backward_split<Scalar, Counter>(const BackwardArgs<Scalar>&,                     \
                                                  const VariantParts&,                             \
                                                  const VariantPlan&,                              \
                                                  const MemoryModel&,                              \
                                                  Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE
template IoReport io_cost_split<float>(const Problem&, const VariantParts&, const VariantPlan&);
template IoReport io_cost_split<double>(const Problem&, const VariantParts&, const VariantPlan&);

} // namespace ioattn::sparse::detail
