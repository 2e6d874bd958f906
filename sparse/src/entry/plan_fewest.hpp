#pragma once
// The io objective of the entry point (plan_fewest.cpp), called by plan_attention.

#include <ioattn/attention.hpp>

namespace ioattn::detail {

/// Sets plan.schedule (auto: options.schedule nullopt), tiling, variants and planned_for to the
/// plan with the fewest counted words among those made for the grid memories M' <= M
/// (sparse::memory_grid): per M', each schedule's Tiling::for_memory(M') and tuned tiling run by
/// its plain kernel
/// and, when the variant planner runs (a support, dense operands, options.dispatch), its
/// sparse::plan_fewest_words plan; a forced variant keeps only those. plan.problem, pass,
/// memory and sparse are set and M was checked against the smallest tilings. Throws
/// InvalidArgument for a forced variant without the planner or with another schedule, and
/// CapacityError when a forced variant has no plan that fits M.
template <typename Scalar>
void plan_fewest(AttentionPlan& plan,
                 const Structure<Scalar>& structure,
                 const AttentionOptions& options);

} // namespace ioattn::detail
