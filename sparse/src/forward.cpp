// ioattn::sparse::forward: the dispatcher over the sparse forward schedules and the dry run.

#include <ioattn/error.hpp>
#include <ioattn/sparse/forward.hpp>

namespace ioattn::sparse {

template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        if constexpr (Counter::kComputes) {
            forward_reference(args, support);
            return;
        } else {
            throw InvalidArgument("ioattn::sparse::forward: the reference schedule has no dry run");
        }
    case Schedule::fused:
        forward_fused(args, support, tiling, memory, counter);
        return;
    case Schedule::materialized:
        forward_materialized(args, support, tiling, memory, counter);
        return;
    }
}

IoReport dry_run_forward(const Problem& problem,
                         const Support& support,
                         const Tiling& tiling,
                         const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::sparse::dry_run_forward");
    const auto a = ForwardArgs<float>::packed(p, nullptr, nullptr, nullptr, nullptr, nullptr);
    DryRunCounter counter(memory.fast_words);
    forward(a, support, tiling, memory, counter);
    return counter.report();
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward<Scalar, Counter>(                                                        \
        const ForwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
