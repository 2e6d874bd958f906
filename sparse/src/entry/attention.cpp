// ioattn::attention, ioattn::attention_backward and ioattn::io_count: the entry point's runs.
// Each validates the views once (naming the caller), runs the plan of attention_plan.cpp
// through dense::forward / backward or sparse::forward / backward (which route by schedule;
// a sparse fused plan over dense operands runs the variant planner's VariantPlan,
// sparse/variants.hpp) in a task_arena of options.threads workers, and when counting reports
// the counter beside the plan's closed-form I/O. No algorithm lives here.

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <string>

namespace ioattn {

namespace {

template <typename Scalar, typename Counter>
void run(const ForwardArgs<Scalar>& a,
         const Structure<Scalar>& s,
         const AttentionPlan& plan,
         Counter& counter) {
    if (plan.variants)
        sparse::forward(a, *s.support, *plan.variants, plan.memory, counter);
    else if (plan.sparse)
        sparse::forward(a, *s.support, s.inputs, plan.tiling, plan.memory, counter);
    else
        dense::forward(a, plan.tiling, plan.memory, counter);
}

template <typename Scalar, typename Counter>
void run(const BackwardArgs<Scalar>& a,
         const Structure<Scalar>& s,
         const AttentionPlan& plan,
         Counter& counter) {
    if (plan.variants)
        sparse::backward(a, *s.support, *plan.variants, plan.memory, counter);
    else if (plan.sparse)
        sparse::backward(a, *s.support, s.inputs, plan.tiling, plan.memory, counter);
    else
        dense::backward(a, plan.tiling, plan.memory, counter);
}

void require_counted_schedule(const AttentionPlan& plan, const std::string& where) {
    if (plan.schedule == Schedule::reference)
        throw InvalidArgument(where + ": counting I/O needs the fused or materialized schedule "
                                      "(the reference schedule has no I/O model)");
}

/// Validates the views (naming the caller) against the plan and runs it, counted if asked.
template <typename Args, typename Scalar>
AttentionReport execute(const Args& args,
                        const Structure<Scalar>& s,
                        const AttentionPlan& plan,
                        const AttentionOptions& o,
                        Pass pass) {
    const std::string where(o.where);
    Args a = args;
    // a sparse operand's dense view may have null data; the kernel checks the others' data
    const auto& in = s.inputs;
    a.validate(where, in.q != nullptr || in.k != nullptr || in.v != nullptr);
    if (plan.pass != pass || !(plan.problem == a.problem) || plan.sparse != s.sparse())
        throw InvalidArgument(where + ": the plan was made for another problem, pass or "
                                      "structure than these views");
    AttentionReport report{plan, std::nullopt, std::nullopt};
    if (!o.count_io && o.counter == nullptr) {
        NullCounter c;
        with_threads(o.threads, [&] { run(a, s, plan, c); });
        return report;
    }
    require_counted_schedule(plan, where);
    IoCounter local(plan.memory.fast_words);
    IoCounter& c = o.counter != nullptr ? *o.counter : local;
    with_threads(o.threads, [&] { run(a, s, plan, c); });
    report.io = c.report();
    report.closed_form = io_cost(plan, s);
    return report;
}

} // namespace

template <typename Scalar>
AttentionReport attention(const ForwardArgs<Scalar>& args,
                          const Structure<Scalar>& structure,
                          const AttentionPlan& plan,
                          const AttentionOptions& options) {
    return execute(args, structure, plan, options, Pass::forward);
}

template <typename Scalar>
AttentionReport attention(const ForwardArgs<Scalar>& args,
                          const Structure<Scalar>& structure,
                          const AttentionOptions& options) {
    const AttentionPlan plan = plan_attention(args.problem, Pass::forward, structure, options);
    return execute(args, structure, plan, options, Pass::forward);
}

template <typename Scalar>
AttentionReport attention_backward(const BackwardArgs<Scalar>& args,
                                   const Structure<Scalar>& structure,
                                   const AttentionPlan& plan,
                                   const AttentionOptions& options) {
    return execute(args, structure, plan, options, Pass::backward);
}

template <typename Scalar>
AttentionReport attention_backward(const BackwardArgs<Scalar>& args,
                                   const Structure<Scalar>& structure,
                                   const AttentionOptions& options) {
    const AttentionPlan plan = plan_attention(args.problem, Pass::backward, structure, options);
    return execute(args, structure, plan, options, Pass::backward);
}

template <typename Scalar>
AttentionReport io_count(const Problem& problem,
                         Pass pass,
                         const Structure<Scalar>& structure,
                         const AttentionOptions& options) {
    AttentionOptions o = options; // counting: the fewest words unless told otherwise
    o.objective = options.objective.value_or(Objective::io);
    const AttentionPlan plan = plan_attention(problem, pass, structure, o);
    require_counted_schedule(plan, std::string(options.where));
    const Problem& p = plan.problem;
    DryRunCounter counter(plan.memory.fast_words);
    with_threads(options.threads, [&] {
        if (pass == Pass::forward)
            run(ForwardArgs<Scalar>::shape_only(p), structure, plan, counter);
        else
            run(BackwardArgs<Scalar>::shape_only(p), structure, plan, counter);
    });
    return AttentionReport{plan, counter.report(), io_cost(plan, structure)};
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template AttentionReport attention<Scalar>(                                                    \
        const ForwardArgs<Scalar>&, const Structure<Scalar>&, const AttentionOptions&);            \
    template AttentionReport attention<Scalar>(const ForwardArgs<Scalar>&,                         \
                                               const Structure<Scalar>&,                           \
                                               const AttentionPlan&,                               \
                                               const AttentionOptions&);                           \
    template AttentionReport attention_backward<Scalar>(                                           \
        const BackwardArgs<Scalar>&, const Structure<Scalar>&, const AttentionOptions&);           \
    template AttentionReport attention_backward<Scalar>(const BackwardArgs<Scalar>&,               \
                                                        const Structure<Scalar>&,                  \
                                                        const AttentionPlan&,                      \
                                                        const AttentionOptions&);                  \
    template AttentionReport io_count<Scalar>(                                                     \
        const Problem&, Pass, const Structure<Scalar>&, const AttentionOptions&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn
