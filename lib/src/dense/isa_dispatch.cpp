// ioattn::dense::{forward,backward}_{fused,materialized}: each public kernel runs the copy of
// the ISA target that runs its counter (kernels/dispatch.hpp): the active target's when it
// computes, the baseline's for a dry run. The kernels are defined once, in <kernel>.cpp, and
// compiled once per target into ioattn::dense::isa_avx512, isa_avx2 and isa_sse2 (declared in
// kernels.hpp). No algorithm lives here.

#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/kernels/instantiate.hpp>

#define IOATTN_TARGET_DECLARATIONS "dense/kernels.hpp"
#include <ioattn/kernels/declare_targets.inc>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    IOATTN_DISPATCH(Counter, forward_fused<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    IOATTN_DISPATCH(Counter, forward_materialized<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    IOATTN_DISPATCH(Counter, backward_fused<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    IOATTN_DISPATCH(Counter, backward_materialized<Scalar, Counter>(args, tiling, memory, counter));
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_fused<Scalar, Counter>(                                                  \
        const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);                  \
    template void forward_materialized<Scalar, Counter>(                                           \
        const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);                  \
    template void backward_fused<Scalar, Counter>(                                                 \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);                 \
    template void backward_materialized<Scalar, Counter>(                                          \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
