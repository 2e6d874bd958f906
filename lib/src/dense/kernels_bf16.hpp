#pragma once
// The native bf16 kernels (ISA target avx512 with AVX512_BF16, namespace isa_avx512bf16),
// declared for the dense routers (forward.cpp, backward.cpp). Built only when the build holds that target
// (IOATTN_BUILT_AVX512BF16, lib/cmake/ioattn_isa.cmake); the router runs them only when
// bf16_kernels_native() (ioattn/isa.hpp).

#include <ioattn/bf16.hpp>
#include <ioattn/dense/backward.hpp>
#include <ioattn/dense/forward.hpp>

namespace ioattn::dense::isa_avx512bf16 {

/// forward_fused_bf16.cpp: forward_fused on bf16 views without fp32 copies (NullCounter: the
/// timed run; DryRunCounter: the same loops' counts).
template <typename Counter>
void forward_fused_bf16(const ForwardArgs<bf16>& args,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter);

/// backward_fused_bf16.cpp: backward_fused on bf16 views without fp32 copies (NullCounter: the
/// timed run; DryRunCounter: the same loops' counts).
template <typename Counter>
void backward_fused_bf16(const BackwardArgs<bf16>& args,
                         const Tiling& tiling,
                         const MemoryModel& memory,
                         Counter& counter);

} // namespace ioattn::dense::isa_avx512bf16
