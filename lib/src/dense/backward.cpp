// ioattn::dense::backward: the dispatcher over the backward schedules, and the dry run that walks
// a schedule without data. No algorithm lives here.

#include <ioattn/dense/backward.hpp>
#include <ioattn/error.hpp>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        if constexpr (Counter::kComputes) {
            backward_reference(args);
            return;
        } else {
            throw InvalidArgument("ioattn::dense::backward: the reference schedule has no dry run");
        }
    case Schedule::fused:
        backward_fused(args, tiling, memory, counter);
        return;
    case Schedule::materialized:
        backward_materialized(args, tiling, memory, counter);
        return;
    }
}

template <typename Scalar>
Tiling backward(const BackwardArgs<Scalar>& args, Schedule schedule, const MemoryModel& memory) {
    const Tiling tiling = schedule == Schedule::reference
                              ? Tiling{Schedule::reference, 1, 1}
                              : Tiling::tuned(schedule, memory, args.problem, Pass::backward);
    NullCounter counter;
    backward(args, tiling, memory, counter);
    return tiling;
}

IoReport dry_run_backward(const Problem& problem, const Tiling& tiling, const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::dense::dry_run_backward");
    const auto a = BackwardArgs<float>::shape_only(p);
    DryRunCounter counter(memory.fast_words);
    backward(a, tiling, memory, counter);
    return counter.report();
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward<Scalar, Counter>(                                                       \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

template Tiling backward<float>(const BackwardArgs<float>&, Schedule, const MemoryModel&);
template Tiling backward<double>(const BackwardArgs<double>&, Schedule, const MemoryModel&);

} // namespace ioattn::dense
