// ioattn::sparse::forward: the dispatcher over the sparse forward schedules and the dry run,
// with dense or sparse (SparseInputs) operands.

#include <ioattn/error.hpp>
#include <ioattn/sparse/forward.hpp>

namespace ioattn::sparse {

template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const SparseInputs<Scalar>& inputs,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        if constexpr (Counter::kComputes) {
            forward_reference(args, support, inputs);
            return;
        } else {
            throw InvalidArgument("ioattn::sparse::forward: the reference schedule has no dry run");
        }
    case Schedule::fused:
        forward_fused(args, support, inputs, tiling, memory, counter);
        return;
    case Schedule::materialized:
        forward_materialized(args, support, inputs, tiling, memory, counter);
        return;
    }
}

template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter) {
    forward(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar>
IoReport dry_run_forward(const Problem& problem,
                         const Support& support,
                         const SparseInputs<Scalar>& inputs,
                         const Tiling& tiling,
                         const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::sparse::dry_run_forward");
    const auto a = ForwardArgs<Scalar>::shape_only(p);
    DryRunCounter counter(memory.fast_words);
    forward(a, support, inputs, tiling, memory, counter);
    return counter.report();
}

IoReport dry_run_forward(const Problem& problem,
                         const Support& support,
                         const Tiling& tiling,
                         const MemoryModel& memory) {
    return dry_run_forward(problem, support, SparseInputs<float>{}, tiling, memory);
}

template IoReport dry_run_forward<float>(
    const Problem&, const Support&, const SparseInputs<float>&, const Tiling&, const MemoryModel&);
template IoReport dry_run_forward<double>(
    const Problem&, const Support&, const SparseInputs<double>&, const Tiling&, const MemoryModel&);

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward<Scalar, Counter>(                                                        \
        const ForwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);  \
    template void forward<Scalar, Counter>(const ForwardArgs<Scalar>&,                             \
                                           const Support&,                                         \
                                           const SparseInputs<Scalar>&,                            \
                                           const Tiling&,                                          \
                                           const MemoryModel&,                                     \
                                           Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
