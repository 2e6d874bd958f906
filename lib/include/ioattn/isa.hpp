#pragma once
/// Run-time choice of the instruction set the kernels execute.
///
/// The library holds every kernel (dense and sparse, each schedule and pass, float and double)
/// compiled once per instruction set: AVX-512 (F/BW/VL/DQ), AVX2+FMA and the SSE2 baseline of
/// x86-64. At first use it takes the best one that both the CPU (cpuid) and the operating
/// system (XGETBV: the AVX and AVX-512 register state is saved) support. The environment
/// variable IOATTN_ISA=avx512bf16|avx512|avx2|sse2 forces one: avx512bf16 is the avx512 target
/// with the native bf16 kernels (the default where the CPU has AVX512_BF16), avx512 the same
/// target with bf16 widened to fp32 (bf16_kernels_native). An IOATTN_NATIVE build holds a single
/// ISA target compiled with -march=native. Counted I/O does not depend on the instruction set;
/// results agree with the reference under each.

#include <cstdint>
#include <string_view>
#include <vector>

namespace ioattn {

/// An ISA target of the kernels, in increasing order of capability.
enum class Isa { sse2, avx2, avx512 };

/// "sse2", "avx2", "avx512".
std::string_view to_string(Isa isa);

/// Parses "sse2", "avx2" or "avx512"; throws InvalidArgument naming the text otherwise.
Isa parse_isa(std::string_view text);

/// Whether this CPU and its operating system can execute `isa` (cpuid and XGETBV; the
/// baseline is always supported).
bool cpu_supports(Isa isa);

/// Whether this CPU and its operating system execute AVX512_BF16 (vdpbf16ps: bf16 pairs
/// multiplied and added into fp32 lanes): cpuid leaf 7 subleaf 1, EAX bit 5, on top of
/// cpu_supports(Isa::avx512). What the native bf16 kernels need (docs/design.md section 16).
bool cpu_supports_avx512_bf16();

/// Whether a bf16 call of the dense fused forward runs the native AVX512_BF16 kernel now
/// (otherwise bf16 runs widened to fp32 through the float kernels, docs/design.md section 16):
/// the library holds the kernel, active_isa() is avx512, the CPU supports AVX512_BF16, and
/// IOATTN_ISA is unset, empty or `avx512bf16`. IOATTN_ISA=avx512 keeps the avx512 float
/// kernels and the widening path. Unlike active_isa(), IOATTN_ISA is read at every call here.
bool bf16_kernels_native();

/// The ISA targets compiled into this library, best first.
std::vector<Isa> built_isas();

/// The ISA target the kernels run: IOATTN_ISA from the environment if set, else the best built
/// target the CPU supports. Decided once, at the first call that succeeds; thread-safe.
/// Throws InvalidArgument if IOATTN_ISA is not a known name, names a target this library
/// was not built with, or one the CPU cannot execute.
Isa active_isa();

/// The bf16 dot-product peak in GFLOP/s measured on `threads` workers (<= 0: all of the current
/// arena): each worker runs a register-only loop of independent vdpbf16ps (32 bf16 products
/// added into 16 fp32 lanes, 4 flops per lane) for about `seconds`. The figure the native bf16
/// kernels are held against. Throws InvalidArgument when the library holds no native bf16
/// kernels or the CPU lacks AVX512_BF16, or seconds <= 0.
double measure_bf16_dot_peak(int threads, double seconds = 0.2);

/// The fused multiply-add peak of `isa` in GFLOP/s measured on `threads` workers (<= 0: all of
/// the current arena): each worker runs a register-only loop of independent multiply-adds on
/// whole vectors (float or double) for about `seconds`; 2 flops per lane and multiply-add.
/// The figure a roofline of this instruction set divides by. Throws InvalidArgument for an
/// unsupported or unbuilt `isa` or seconds <= 0.
double measure_fma_peak(Isa isa, int threads, bool double_precision, double seconds = 0.2);

} // namespace ioattn
