// ioattn::sparse::{forward,backward}_{fused,materialized,element} and the fused kernels' forms
// for the planner's variants (plan/variant_parts.hpp): each runs the copy of the ISA target
// that runs its counter (kernels/dispatch.hpp): the active target's when it computes, the
// baseline's for a dry run. The kernels are defined once, in kernels/<family>/<kernel>.cpp,
// and compiled once per target into ioattn::sparse::isa_avx512, isa_avx2 and isa_sse2
// (declared in kernels/kernels.hpp). The overloads without sparse inputs pass empty ones. No
// algorithm lives here.

#include "kernels/element/panels.hpp"
#include "plan/variant_parts.hpp"

#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/forward.hpp>

#define IOATTN_TARGET_DECLARATIONS "kernels/kernels.hpp"
#include <ioattn/kernels/declare_targets.inc>

#include <type_traits>

namespace ioattn::sparse {

// --- the public kernels, with sparse inputs ---

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const SparseInputs<Scalar>& inputs,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, forward_fused<Scalar, C>(args, support, inputs, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C,
                        forward_materialized<Scalar, C>(args, support, inputs, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const SparseInputs<Scalar>& inputs,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, backward_fused<Scalar, C>(args, support, inputs, tiling, memory, c));
    });
}

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const SparseInputs<Scalar>& inputs,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C,
                        backward_materialized<Scalar, C>(args, support, inputs, tiling, memory, c));
    });
}

// --- the public kernels over dense operands ---

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    forward_fused(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    forward_materialized(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    backward_fused(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    backward_materialized(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter) {
    detail::forward_element(args, support, tiling, memory, counter, false);
}

template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter) {
    detail::backward_element(args, support, tiling, memory, counter, false);
}

// --- the kernels' forms for the planner's variants ---

template <typename Scalar, typename Counter>
void detail::forward_element(const ForwardArgs<Scalar>& args,
                             const Support& support,
                             const Tiling& tiling,
                             const MemoryModel& memory,
                             Counter& counter,
                             bool resume) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C, forward_element<Scalar, C>(args, support, tiling, memory, c, resume));
    });
}

template <typename Scalar, typename Counter>
void detail::backward_element(const BackwardArgs<Scalar>& args,
                              const Support& support,
                              const Tiling& tiling,
                              const MemoryModel& memory,
                              Counter& counter,
                              bool accumulate) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C,
                        backward_element<Scalar, C>(args, support, tiling, memory, c, accumulate));
    });
}

template <typename Scalar, typename Counter>
void detail::forward_fused_ordered(const ForwardArgs<Scalar>& args,
                                   const Support& support,
                                   const Maps& maps,
                                   const Tiling& tiling,
                                   const MemoryModel& memory,
                                   Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C,
                        forward_fused<Scalar, C>(
                            args, support, SparseInputs<Scalar>{}, tiling, memory, c, maps));
    });
}

template <typename Scalar, typename Counter>
void detail::forward_fused_split(const ForwardArgs<Scalar>& args,
                                 const Support& tile,
                                 const Support& element,
                                 const Tiling& tiling,
                                 const MemoryModel& memory,
                                 Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(
            C,
            forward_fused<Scalar, C>(
                args, tile, SparseInputs<Scalar>{}, tiling, memory, c, Maps{}, &element));
    });
}

template <typename Scalar, typename Counter>
void detail::backward_fused_ordered(const BackwardArgs<Scalar>& args,
                                    const Support& support,
                                    const Maps& maps,
                                    const Tiling& tiling,
                                    const MemoryModel& memory,
                                    Counter& counter) {
    kernels::counted(counter, [&](auto& c) {
        using C = std::remove_reference_t<decltype(c)>;
        IOATTN_DISPATCH(C,
                        backward_fused<Scalar, C>(
                            args, support, SparseInputs<Scalar>{}, tiling, memory, c, maps));
    });
}

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are types
#define IOATTN_INSTANTIATE_KERNEL(name, Args, Scalar, Counter)                                     \
    template void name<Scalar, Counter>(const Args<Scalar>&,                                       \
                                        const Support&,                                            \
                                        const SparseInputs<Scalar>&,                               \
                                        const Tiling&,                                             \
                                        const MemoryModel&,                                        \
                                        Counter&);                                                 \
    template void name<Scalar, Counter>(                                                           \
        const Args<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);
#define IOATTN_INSTANTIATE_ELEMENT(name, Args, Scalar, Counter)                                    \
    template void name<Scalar, Counter>(                                                           \
        const Args<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);         \
    template void detail::name<Scalar, Counter>(                                                   \
        const Args<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&, bool);
#define IOATTN_INSTANTIATE_ORDERED(name, Args, Scalar, Counter)                                    \
    template void detail::name<Scalar, Counter>(const Args<Scalar>&,                               \
                                                const Support&,                                    \
                                                const detail::Maps&,                               \
                                                const Tiling&,                                     \
                                                const MemoryModel&,                                \
                                                Counter&);
#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    IOATTN_INSTANTIATE_KERNEL(forward_fused, ForwardArgs, Scalar, Counter)                         \
    IOATTN_INSTANTIATE_KERNEL(forward_materialized, ForwardArgs, Scalar, Counter)                  \
    IOATTN_INSTANTIATE_KERNEL(backward_fused, BackwardArgs, Scalar, Counter)                       \
    IOATTN_INSTANTIATE_KERNEL(backward_materialized, BackwardArgs, Scalar, Counter)                \
    IOATTN_INSTANTIATE_ELEMENT(forward_element, ForwardArgs, Scalar, Counter)                      \
    IOATTN_INSTANTIATE_ELEMENT(backward_element, BackwardArgs, Scalar, Counter)                    \
    IOATTN_INSTANTIATE_ORDERED(forward_fused_ordered, ForwardArgs, Scalar, Counter)                \
    IOATTN_INSTANTIATE_ORDERED(backward_fused_ordered, BackwardArgs, Scalar, Counter)              \
    template void detail::forward_fused_split<Scalar, Counter>(const ForwardArgs<Scalar>&,         \
                                                               const Support&,                     \
                                                               const Support&,                     \
                                                               const Tiling&,                      \
                                                               const MemoryModel&,                 \
                                                               Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#undef IOATTN_INSTANTIATE_ORDERED
#undef IOATTN_INSTANTIATE_ELEMENT
#undef IOATTN_INSTANTIATE_KERNEL
// NOLINTEND(bugprone-macro-parentheses)

} // namespace ioattn::sparse
