#pragma once
// What the benchmarks measure their rows against, and the this-machine preset of `ioattn bound`
// (docs/design.md section 9, docs/performance.md section 1): the same-run OpenBLAS GEMM roofline
// with the BLAS core that ran it, the FMA peak of the instruction set the kernels run
// (ioattn::measure_fma_peak), and the time lower bound max(w L / beta, F / P) of a pass on a
// machine.

#include <ioattn/io_cost.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>

namespace ioattn::app {

/// The rates a benchmark's rows are divided by, measured in the same run on `threads` threads.
struct Roofline {
    int threads = 0;
    double gemm_gflops = 0; ///< OpenBLAS SGEMM (DGEMM for double) 2048^3, median
    std::string blas_core;  ///< the OpenBLAS kernels that ran it
    Isa isa = Isa::sse2;    ///< the kernels' instruction set
    double peak_gflops = 0; ///< FMA peak of `isa`

    /// A GEMM below half the FMA peak is not a roofline (an OpenBLAS core that does not know
    /// this CPU, a machine busy with something else).
    [[nodiscard]] bool gemm_suspect() const { return gemm_gflops < 0.5 * peak_gflops; }
};

/// Measures the roofline: GEMM 2048^3 (median of `repeat` after a warm-up) and the FMA peak.
Roofline measure_roofline(int threads, int repeat, bool double_precision = false);

/// One line naming both rates and the BLAS core, and, when gemm_suspect(), a warning line.
void print_roofline(std::ostream& os, const Roofline& r);

/// The JSON keys of a roofline: sgemm_gflops, peak_gflops, blas_core, isa.
void add_roofline_json(nlohmann::json& j, const Roofline& r);

/// A machine of the bound estimator: fast memory, word size, bandwidth and peak, and where the
/// figures come from.
struct Machine {
    std::string preset = "none";
    std::string source;
    std::int64_t fast_bytes = 0; ///< 0: take --M/--M-bytes or the L2
    std::int64_t word_bytes = 4;
    double bandwidth_gbs = 0;
    double peak_gflops = 0;
};

/// This machine for operands of `dtype` (float, double or bf16), measured now on `threads`
/// threads: M = per-core L2 (sysfs), w = the operand's bytes (4, 8, 2), beta = a 512 MiB read,
/// P = the peak of the multiply-adds the kernels run: the FMA peak of the active instruction
/// set in fp32 or fp64, for bf16 the bf16 dot-product peak when the native bf16 kernels run
/// (else the fp32 FMA peak: the widened kernels compute in fp32). Each is a register-only loop:
/// no code of that precision runs faster, so F / P never exceeds a measured run.
Machine this_machine(int threads, const std::string& dtype = "float");

/// max(w L / beta, F / P) of a pass: L = max(compulsory, leading) words of the bound at M, F the
/// pass's flops (forward 2 pairs (d + d_v), backward 2.5x).
struct TimeBound {
    double io_seconds = 0;
    double compute_seconds = 0;
    double flops = 0;

    [[nodiscard]] double seconds() const {
        return io_seconds > compute_seconds ? io_seconds : compute_seconds;
    }
};

TimeBound
time_bound(const Problem& problem, Pass pass, const MemoryModel& memory, const Machine& machine);

} // namespace ioattn::app
