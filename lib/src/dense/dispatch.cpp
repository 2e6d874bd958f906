// ioattn::dense::{forward,backward}_{fused,materialized}: the public entry of each dense kernel
// calls the variant of the active instruction set (ioattn/isa.hpp). The kernels are defined
// once, in <kernel>.cpp, and compiled once per instruction set into the namespaces
// ioattn::dense::isa_avx512, isa_avx2 and isa_sse2. No algorithm lives here.

#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/dispatch.hpp>

namespace ioattn::dense {

#define IOATTN_DECLARE_VARIANT(isa)                                                                \
    namespace isa {                                                                                \
    template <typename Scalar, typename Counter>                                                   \
    void forward_fused(const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);   \
    template <typename Scalar, typename Counter>                                                   \
    void                                                                                           \
    forward_materialized(const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&); \
    template <typename Scalar, typename Counter>                                                   \
    void backward_fused(const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&); \
    template <typename Scalar, typename Counter>                                                   \
    void backward_materialized(const BackwardArgs<Scalar>&,                                        \
                               const Tiling&,                                                      \
                               const MemoryModel&,                                                 \
                               Counter&);                                                          \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_VARIANT)
#undef IOATTN_DECLARE_VARIANT

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    IOATTN_DISPATCH(forward_fused<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    IOATTN_DISPATCH(forward_materialized<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    IOATTN_DISPATCH(backward_fused<Scalar, Counter>(args, tiling, memory, counter));
}

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    IOATTN_DISPATCH(backward_materialized<Scalar, Counter>(args, tiling, memory, counter));
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
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
