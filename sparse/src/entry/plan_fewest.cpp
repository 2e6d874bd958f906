// ioattn::detail::plan_fewest: the io objective of plan_attention (docs/design.md
// section 7.1), and io_cost of an AttentionPlan. Over the grid memories M' <= M (sparse::memory_grid,
// largest first), the candidates are each schedule's Tiling::for_memory(M') and tuned tiling
// (the speed objective's) through its plain kernel (dense::forward / backward,
// sparse::forward / backward) and the variant planner's
// fewest-words plan (sparse::plan_fewest_words, itself a minimum over the same grid); the fewest
// counted words win, ties to the largest M'. Every candidate for a smaller M is a candidate for
// M and its words do not depend on M, so the counted I/O of the plan is non-increasing in M.
// Cost: closed forms per grid point (the sparse ones over the structure's cached block views);
// the variant candidates are planned once per support.
// Tests: tests/sparse/monotone_io_test.cpp

#include "entry/plan_fewest.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <string>
#include <vector>

namespace ioattn {

std::string_view to_string(Objective o) {
    return o == Objective::io ? "io" : "speed";
}

Objective parse_objective(std::string_view text) {
    for (const Objective o : {Objective::speed, Objective::io})
        if (text == to_string(o))
            return o;
    throw InvalidArgument("ioattn::parse_objective: '" + std::string(text) +
                          "' (expected speed or io)");
}

template <typename Scalar>
IoReport io_cost(const AttentionPlan& plan, const Structure<Scalar>& s) {
    const Problem& p = plan.problem;
    if (plan.schedule == Schedule::reference)
        throw InvalidArgument("ioattn::io_cost: the reference schedule has no I/O model");
    if (!plan.sparse)
        return io_cost(p, plan.tiling, plan.pass);
    if (plan.variants)
        return sparse::io_cost<Scalar>(p, *s.support, *plan.variants);
    if (plan.pass == Pass::forward)
        return sparse::io_cost_forward(p, *s.support, s.inputs, plan.tiling);
    return plan.tiling.schedule == Schedule::fused
               ? sparse::io_cost_backward_fused(p, *s.support, s.inputs, plan.tiling)
               : sparse::io_cost_backward_materialized(p, *s.support, s.inputs, plan.tiling);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost<Scalar>(const AttentionPlan&, const Structure<Scalar>&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

namespace {

/// The tiling the speed objective gives `schedule` at M' (plan_attention's tuned tilings).
template <typename Scalar>
Tiling speed_tiling(const AttentionPlan& plan,
                    const Structure<Scalar>& s,
                    Schedule schedule,
                    const MemoryModel& m) {
    const Problem& p = plan.problem;
    if (!plan.sparse)
        return Tiling::tuned(schedule, m, p, plan.pass);
    if (schedule == Schedule::materialized && s.support != nullptr)
        return sparse::materialized_tiling(*s.support, m, p, plan.pass);
    return sparse::tuned_tiling(schedule, m, p, plan.pass);
}

} // namespace

template <typename Scalar>
void detail::plan_fewest(AttentionPlan& plan,
                         const Structure<Scalar>& s,
                         const AttentionOptions& o) {
    const Problem& p = plan.problem;
    const auto& in = s.inputs;
    const bool planner =
        s.support != nullptr && in.q == nullptr && in.k == nullptr && in.v == nullptr && o.dispatch;
    if (o.variant && (!planner || (o.schedule && *o.schedule != Schedule::fused)))
        throw InvalidArgument(std::string(o.where) + ": variant " +
                              std::string(sparse::to_string(*o.variant)) +
                              " needs a support, dense operands and the fused schedule");
    // a forced variant runs the fused schedule's planner only
    const std::vector<Schedule> schedules =
        o.schedule || o.variant ? std::vector<Schedule>{o.schedule.value_or(Schedule::fused)}
                                : std::vector<Schedule>{Schedule::fused, Schedule::materialized};
    std::optional<AttentionPlan> best;
    std::int64_t best_words = 0;
    const auto consider = [&](const AttentionPlan& c) {
        const std::int64_t words = io_cost(c, s).total();
        if (!best || words < best_words ||
            (words == best_words && c.planned_for > best->planned_for)) {
            best = c;
            best_words = words;
        }
    };
    for (const Schedule schedule : schedules) {
        if (schedule == Schedule::fused && planner) {
            try {
                AttentionPlan c = plan;
                c.schedule = Schedule::fused;
                c.variants = sparse::plan_fewest_words<Scalar>(
                    p, *s.support, plan.memory, plan.pass, o.variant);
                c.tiling = c.variants->tile;
                c.planned_for = c.variants->planned_for;
                consider(c);
            } catch (const CapacityError&) {
                if (o.variant)
                    throw;
            }
            if (o.variant)
                continue; // a forced variant runs the planner's plans only
        }
        for (const std::int64_t m :
             sparse::memory_grid(p, plan.pass, plan.kernels(), plan.memory.fast_words)) {
            const MemoryModel mm{m};
            const auto t = Tiling::try_for_memory(schedule, mm, p, plan.pass, plan.kernels());
            if (!t)
                continue;
            AttentionPlan c = plan;
            c.schedule = schedule;
            c.variants.reset();
            c.planned_for = m;
            for (const Tiling& tiling : {*t, speed_tiling(plan, s, schedule, mm)}) {
                c.tiling = tiling;
                consider(c);
            }
        }
    }
    if (!best)
        throw CapacityError(std::string(o.where) + ": no plan fits M = " +
                            std::to_string(plan.memory.fast_words) + " words");
    plan.schedule = best->schedule;
    plan.tiling = best->tiling;
    plan.variants = std::move(best->variants);
    plan.planned_for = best->planned_for;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void detail::plan_fewest<Scalar>(                                                     \
        AttentionPlan&, const Structure<Scalar>&, const AttentionOptions&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn
