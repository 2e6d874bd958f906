// ioattn::sparse::{forward,backward}_element: the public entries of the element kernels call
// the variant of the active instruction set (ioattn/isa.hpp), as dispatch.cpp does for the
// other kernels; the kernels' own `resume` / `accumulate` mode (starting from the outputs of
// another kernel over the rest of the pairs) lets a caller hand the element kernels part of
// the pairs. No algorithm here.

#include "kernels/element/panels.hpp"

#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/sparse/element.hpp>

namespace ioattn::sparse {

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are names and types
#define IOATTN_DECLARE_VARIANT(isa)                                                                \
    namespace isa {                                                                                \
    template <typename Scalar, typename Counter>                                                   \
    void forward_element(const ForwardArgs<Scalar>&,                                               \
                         const Support&,                                                           \
                         const Tiling&,                                                            \
                         const MemoryModel&,                                                       \
                         Counter&,                                                                 \
                         bool);                                                                    \
    template <typename Scalar, typename Counter>                                                   \
    void backward_element(const BackwardArgs<Scalar>&,                                             \
                          const Support&,                                                          \
                          const Tiling&,                                                           \
                          const MemoryModel&,                                                      \
                          Counter&,                                                                \
                          bool);                                                                   \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_VARIANT)
#undef IOATTN_DECLARE_VARIANT

namespace detail {

template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter,
                     bool resume) {
    IOATTN_DISPATCH(
        forward_element<Scalar, Counter>(args, support, tiling, memory, counter, resume));
}

template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter,
                      bool accumulate) {
    IOATTN_DISPATCH(
        backward_element<Scalar, Counter>(args, support, tiling, memory, counter, accumulate));
}

} // namespace detail

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

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void detail::forward_element<Scalar, Counter>(const ForwardArgs<Scalar>&,             \
                                                           const Support&,                         \
                                                           const Tiling&,                          \
                                                           const MemoryModel&,                     \
                                                           Counter&,                               \
                                                           bool);                                  \
    template void forward_element<Scalar, Counter>(                                                \
        const ForwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);  \
    template void detail::backward_element<Scalar, Counter>(const BackwardArgs<Scalar>&,           \
                                                            const Support&,                        \
                                                            const Tiling&,                         \
                                                            const MemoryModel&,                    \
                                                            Counter&,                              \
                                                            bool);                                 \
    template void backward_element<Scalar, Counter>(                                               \
        const BackwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

} // namespace ioattn::sparse
