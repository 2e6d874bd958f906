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

#include <type_traits>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, forward_fused<Scalar, C>(args, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, forward_materialized<Scalar, C>(args, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, backward_fused<Scalar, C>(args, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, backward_materialized<Scalar, C>(args, tiling, memory, c));
    });
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
