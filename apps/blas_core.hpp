#pragma once
// Which OpenBLAS kernels the peers and rooflines run (docs/performance.md section 1). OpenBLAS
// picks its kernel family (its "core") when the library loads, from cpuid or OPENBLAS_CORETYPE.
// OpenBLAS 0.3.21 does not know recent CPUs: on Intel family 6 model 207 (AVX-512) it runs its SSE3
// "Prescott" kernels, SGEMM 2048^3 at under a quarter of OPENBLAS_CORETYPE=SkylakeX's rate, which
// would cripple every peer and roofline measured with it.

#include <ioattn/isa.hpp>

#include <string>
#include <string_view>

namespace ioattn::app {

/// The instruction-set level of an OpenBLAS core name: 3 for its AVX-512 kernels (SkylakeX,
/// Cooperlake, SapphireRapids), 2 for AVX2 (Haswell, Zen, Excavator), 1 for AVX (Sandybridge,
/// the Bulldozer family), 0 for older or unknown ones. Case-insensitive.
int blas_core_level(std::string_view core);

/// The OPENBLAS_CORETYPE to ask for on a CPU whose best instruction set is `cpu` when OpenBLAS
/// picked `core`: "Cooperlake" on AVX-512 CPUs (OpenBLAS itself falls back to SkylakeX without
/// AVX512_BF16), "Haswell" on AVX2 ones; empty when `core` is already that good.
std::string better_blas_core(std::string_view core, Isa cpu);

/// For the subcommands that time OpenBLAS (bench, demo), called before anything else runs:
/// when the user has not set OPENBLAS_CORETYPE and OpenBLAS picked a lesser core than this CPU
/// can run, re-executes the program with OPENBLAS_CORETYPE set to the better one (OpenBLAS reads
/// it only when it loads); the re-executed process says so in one line on stderr. Returns
/// without a re-exec otherwise, or when exec fails (also said in one line).
void prefer_best_blas_core(char** argv);

} // namespace ioattn::app
