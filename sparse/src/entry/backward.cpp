// ioattn::sparse::backward: routes by tiling.schedule to the sparse backward kernels; the dry
// run, with dense or sparse (SparseInputs) operands.

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>

namespace ioattn::sparse {

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const SparseInputs<Scalar>& inputs,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        if constexpr (Counter::kComputes) {
            backward_reference(args, support, inputs);
            return;
        } else {
            throw InvalidArgument(
                "ioattn::sparse::backward: the reference schedule has no dry run");
        }
    case Schedule::fused:
        backward_fused(args, support, inputs, tiling, memory, counter);
        return;
    case Schedule::materialized:
        backward_materialized(args, support, inputs, tiling, memory, counter);
        return;
    }
}

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter) {
    backward(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar>
IoReport dry_run_backward(const Problem& problem,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::sparse::dry_run_backward");
    const auto a = BackwardArgs<Scalar>::shape_only(p);
    DryRunCounter counter(memory.fast_words);
    backward(a, support, inputs, tiling, memory, counter);
    return counter.report();
}

IoReport dry_run_backward(const Problem& problem,
                          const Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory) {
    return dry_run_backward(problem, support, SparseInputs<float>{}, tiling, memory);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport dry_run_backward<Scalar>(const Problem&,                                     \
                                               const Support&,                                     \
                                               const SparseInputs<Scalar>&,                        \
                                               const Tiling&,                                      \
                                               const MemoryModel&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward<Scalar, Counter>(                                                       \
        const BackwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&); \
    template void backward<Scalar, Counter>(const BackwardArgs<Scalar>&,                           \
                                            const Support&,                                        \
                                            const SparseInputs<Scalar>&,                           \
                                            const Tiling&,                                         \
                                            const MemoryModel&,                                    \
                                            Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
