// The sparse kernels of one ISA target, declared once. No include guard: each kernel file
// includes it for its own target (IOATTN_TARGET_NS = IOATTN_ISA) and the dispatchers for every
// built target through <ioattn/kernels/declare_targets.inc>. The includer provides the types
// (ioattn/sparse/forward.hpp, ioattn/sparse/backward.hpp, support/block_keys.hpp).

namespace ioattn::sparse::IOATTN_TARGET_NS {

/// kernels/tile/forward_fused.cpp. `maps`: a reordered problem read in place (the permuted
/// variant; the identity by default). `element`: the split's element pairs, which each block
/// takes for its rows from its resident state (none by default).
template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const SparseInputs<Scalar>& inputs,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter,
                   const detail::Maps& maps = {},
                   const Support* element = nullptr);

/// kernels/tile/backward_fused.cpp; `maps` as in forward_fused.
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const SparseInputs<Scalar>& inputs,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter,
                    const detail::Maps& maps = {});

/// kernels/materialized/forward_materialized.cpp.
template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter);

/// kernels/materialized/backward_materialized.cpp.
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const SparseInputs<Scalar>& inputs,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// kernels/element/forward_element.cpp. `resume`: start from args.o and args.lse as every
/// row's softmax state (the outputs of another kernel over the other pairs).
template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter,
                     bool resume);

/// kernels/element/backward_element.cpp. `accumulate`: add into d_q, d_k and d_v.
template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter,
                      bool accumulate);

} // namespace ioattn::sparse::IOATTN_TARGET_NS
