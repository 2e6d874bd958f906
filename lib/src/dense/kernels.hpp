// The dense kernels of one ISA target, declared once. No include guard: each kernel file
// includes it for its own target (IOATTN_TARGET_NS = IOATTN_ISA) and isa_dispatch.cpp for every
// built target through <ioattn/kernels/declare_targets.inc>. The includer provides the types
// (ioattn/dense/forward.hpp, ioattn/dense/backward.hpp).

namespace ioattn::dense::IOATTN_TARGET_NS {

/// forward_fused.cpp
template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter);

/// forward_materialized.cpp
template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter);

/// backward_fused.cpp
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter);

/// backward_materialized.cpp
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

} // namespace ioattn::dense::IOATTN_TARGET_NS
