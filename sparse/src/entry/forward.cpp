// ioattn::sparse::forward: routes by tiling.schedule to the sparse forward kernels; the dry run,
// with dense or sparse (SparseInputs) operands.

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
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

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport dry_run_forward<Scalar>(const Problem&,                                      \
                                              const Support&,                                      \
                                              const SparseInputs<Scalar>&,                         \
                                              const Tiling&,                                       \
                                              const MemoryModel&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward<Scalar, Counter>(                                                        \
        const ForwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);  \
    template void forward<Scalar, Counter>(const ForwardArgs<Scalar>&,                             \
                                           const Support&,                                         \
                                           const SparseInputs<Scalar>&,                            \
                                           const Tiling&,                                          \
                                           const MemoryModel&,                                     \
                                           Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
