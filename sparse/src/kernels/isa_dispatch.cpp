// ioattn::sparse::{forward,backward}_{fused,materialized}: the public entry of each sparse kernel
// calls the variant of the active instruction set (ioattn/isa.hpp). The kernels are defined
// once, in <kernel>.cpp, and compiled once per instruction set into the namespaces
// ioattn::sparse::isa_avx512, isa_avx2 and isa_sse2. The overloads without sparse inputs pass
// empty ones. No algorithm lives here.

#include "plan/variant_parts.hpp"

#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

namespace ioattn::sparse {

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are names and types
#define IOATTN_DECLARE_KERNEL(name, Args)                                                          \
    template <typename Scalar, typename Counter>                                                   \
    void name(const Args<Scalar>&,                                                                 \
              const Support&,                                                                      \
              const SparseInputs<Scalar>&,                                                         \
              const Tiling&,                                                                       \
              const MemoryModel&,                                                                  \
              Counter&);
/// A fused kernel also reads a reordered problem in place through row and key orders (Maps;
/// the identity by default); the forward's blocks also take the split's element part of their
/// rows (null: none).
#define IOATTN_DECLARE_FUSED(name, Args, ...)                                                      \
    template <typename Scalar, typename Counter>                                                   \
    void name(                                                                                     \
        const Args<Scalar>&,                                                                       \
        const Support&,                                                                            \
        const SparseInputs<Scalar>&,                                                               \
        const Tiling&,                                                                             \
        const MemoryModel&,                                                                        \
        Counter&,                                                                                  \
        const detail::Maps& = {} __VA_OPT__(, ) __VA_ARGS__);
#define IOATTN_DECLARE_VARIANT(isa)                                                                \
    namespace isa {                                                                                \
    IOATTN_DECLARE_FUSED(forward_fused, ForwardArgs, const Support* = nullptr)                     \
    IOATTN_DECLARE_KERNEL(forward_materialized, ForwardArgs)                                       \
    IOATTN_DECLARE_FUSED(backward_fused, BackwardArgs)                                             \
    IOATTN_DECLARE_KERNEL(backward_materialized, BackwardArgs)                                     \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_VARIANT)
#undef IOATTN_DECLARE_VARIANT
#undef IOATTN_DECLARE_FUSED
#undef IOATTN_DECLARE_KERNEL

/// The dispatching entry with sparse inputs and the one without, of kernel `name`.
#define IOATTN_DEFINE_KERNEL(name, Args)                                                           \
    template <typename Scalar, typename Counter>                                                   \
    void name(const Args<Scalar>& args,                                                            \
              const Support& support,                                                              \
              const SparseInputs<Scalar>& inputs,                                                  \
              const Tiling& tiling,                                                                \
              const MemoryModel& memory,                                                           \
              Counter& counter) {                                                                  \
        IOATTN_DISPATCH(name<Scalar, Counter>(args, support, inputs, tiling, memory, counter));    \
    }                                                                                              \
    template <typename Scalar, typename Counter>                                                   \
    void name(const Args<Scalar>& args,                                                            \
              const Support& support,                                                              \
              const Tiling& tiling,                                                                \
              const MemoryModel& memory,                                                           \
              Counter& counter) {                                                                  \
        name(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);                      \
    }
IOATTN_DEFINE_KERNEL(forward_fused, ForwardArgs)
IOATTN_DEFINE_KERNEL(forward_materialized, ForwardArgs)
IOATTN_DEFINE_KERNEL(backward_fused, BackwardArgs)
IOATTN_DEFINE_KERNEL(backward_materialized, BackwardArgs)
#undef IOATTN_DEFINE_KERNEL

template <typename Scalar, typename Counter>
void detail::forward_fused_ordered(const ForwardArgs<Scalar>& args,
                                   const Support& support,
                                   const Maps& maps,
                                   const Tiling& tiling,
                                   const MemoryModel& memory,
                                   Counter& counter) {
    IOATTN_DISPATCH(forward_fused<Scalar, Counter>(
        args, support, SparseInputs<Scalar>{}, tiling, memory, counter, maps));
}

template <typename Scalar, typename Counter>
void detail::forward_fused_split(const ForwardArgs<Scalar>& args,
                                 const Support& tile,
                                 const Support& element,
                                 const Tiling& tiling,
                                 const MemoryModel& memory,
                                 Counter& counter) {
    IOATTN_DISPATCH(forward_fused<Scalar, Counter>(
        args, tile, SparseInputs<Scalar>{}, tiling, memory, counter, Maps{}, &element));
}

template <typename Scalar, typename Counter>
void detail::backward_fused_ordered(const BackwardArgs<Scalar>& args,
                                    const Support& support,
                                    const Maps& maps,
                                    const Tiling& tiling,
                                    const MemoryModel& memory,
                                    Counter& counter) {
    IOATTN_DISPATCH(backward_fused<Scalar, Counter>(
        args, support, SparseInputs<Scalar>{}, tiling, memory, counter, maps));
}

#define IOATTN_INSTANTIATE_KERNEL(name, Args, Scalar, Counter)                                     \
    template void name<Scalar, Counter>(const Args<Scalar>&,                                       \
                                        const Support&,                                            \
                                        const SparseInputs<Scalar>&,                               \
                                        const Tiling&,                                             \
                                        const MemoryModel&,                                        \
                                        Counter&);                                                 \
    template void name<Scalar, Counter>(                                                           \
        const Args<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);
#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void detail::forward_fused_ordered<Scalar, Counter>(const ForwardArgs<Scalar>&,       \
                                                                 const Support&,                   \
                                                                 const detail::Maps&,              \
                                                                 const Tiling&,                    \
                                                                 const MemoryModel&,               \
                                                                 Counter&);                        \
    template void detail::forward_fused_split<Scalar, Counter>(const ForwardArgs<Scalar>&,         \
                                                               const Support&,                     \
                                                               const Support&,                     \
                                                               const Tiling&,                      \
                                                               const MemoryModel&,                 \
                                                               Counter&);                          \
    template void detail::backward_fused_ordered<Scalar, Counter>(const BackwardArgs<Scalar>&,     \
                                                                  const Support&,                  \
                                                                  const detail::Maps&,             \
                                                                  const Tiling&,                   \
                                                                  const MemoryModel&,              \
                                                                  Counter&);                       \
    IOATTN_INSTANTIATE_KERNEL(forward_fused, ForwardArgs, Scalar, Counter)                         \
    IOATTN_INSTANTIATE_KERNEL(forward_materialized, ForwardArgs, Scalar, Counter)                  \
    IOATTN_INSTANTIATE_KERNEL(backward_fused, BackwardArgs, Scalar, Counter)                       \
    IOATTN_INSTANTIATE_KERNEL(backward_materialized, BackwardArgs, Scalar, Counter)
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE
#undef IOATTN_INSTANTIATE_KERNEL
// NOLINTEND(bugprone-macro-parentheses)

} // namespace ioattn::sparse
