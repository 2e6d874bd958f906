#pragma once
// The native bf16 sparse kernels (ISA target avx512 with AVX512_BF16, namespace
// isa_avx512bf16), declared for the bf16 entry (entry/attention_bf16.cpp). Built only when the
// build holds that target (IOATTN_BUILT_AVX512BF16, lib/cmake/ioattn_isa.cmake); the entry runs
// them only when bf16_kernels_native() (ioattn/isa.hpp).

#include <ioattn/bf16.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>

namespace ioattn::sparse::isa_avx512bf16 {

/// kernels/tile/forward_fused_bf16.cpp: forward_fused (the tile variant, dense operands, no
/// orders or element part) on bf16 views without fp32 copies (NullCounter: the timed run;
/// DryRunCounter: the same loops' counts, the float kernel's).
template <typename Counter>
void forward_fused_bf16(const ForwardArgs<bf16>& args,
                        const Support& support,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter);

/// kernels/element/forward_element.cpp compiled for this region: forward_element (the element
/// variant; Scalar = bf16 only) on bf16 views without fp32 copies, computing as the float
/// kernel on the widened operands (NullCounter: the timed run; DryRunCounter: the float
/// kernel's counts).
template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter,
                     bool resume);

} // namespace ioattn::sparse::isa_avx512bf16
