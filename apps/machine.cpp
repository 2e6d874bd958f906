// Rooflines, the this-machine preset and the time bound (see machine.hpp).

#include "machine.hpp"

#include "output.hpp"

#include <ioattn/parallel.hpp>

#include <nlohmann/json.hpp>

#include <ostream>

#include <measure.hpp>

namespace ioattn::app {

Roofline measure_roofline(int threads, int repeat, bool double_precision) {
    Roofline r;
    r.threads = threads;
    r.blas_core = measure::blas_core();
    r.isa = active_isa();
    if (double_precision) {
        measure::SquareGemm<double> gemm(2048, threads);
        r.gemm_gflops = gemm.flops() / measure::median_seconds(repeat, [&] { gemm.run(); }) * 1e-9;
    } else {
        measure::SquareGemm<float> gemm(2048, threads);
        r.gemm_gflops = gemm.flops() / measure::median_seconds(repeat, [&] { gemm.run(); }) * 1e-9;
    }
    r.peak_gflops = measure_fma_peak(r.isa, threads, double_precision);
    measure::park_blas_threads(); // not spinning beside the kernels timed next
    return r;
}

void print_roofline(std::ostream& os, const Roofline& r) {
    os << "roofline: OpenBLAS GEMM 2048^3 " << fixed(r.gemm_gflops, 1) << " GFLOP/s (core "
       << r.blas_core << "), FMA peak of " << to_string(r.isa) << " " << fixed(r.peak_gflops, 1)
       << " GFLOP/s, " << r.threads << " threads\n";
    if (r.gemm_suspect())
        os << "WARNING: the GEMM roofline runs at " << fixed(r.gemm_gflops / r.peak_gflops, 2)
           << "x the FMA peak: OpenBLAS's " << r.blas_core
           << " kernels (or a busy machine) make every 'x SGEMM' ratio and BLAS peer look "
              "better than they are; read the 'x peak' column\n";
}

void add_roofline_json(nlohmann::json& j, const Roofline& r) {
    j["sgemm_gflops"] = r.gemm_gflops;
    j["peak_gflops"] = r.peak_gflops;
    j["blas_core"] = r.blas_core;
    j["isa"] = std::string(to_string(r.isa));
    j["roofline_suspect"] = r.gemm_suspect();
}

Machine this_machine(int threads, const std::string& dtype) {
    Machine m;
    m.preset = "this-machine";
    m.fast_bytes = l2_cache_bytes();
    m.word_bytes = dtype == "double" ? 8 : dtype == "bf16" ? 2 : 4;
    const int t = with_threads(threads, [] { return max_concurrency(); });
    m.bandwidth_gbs = measure::measure_read_bandwidth(std::int64_t{512} << 20, t);
    const Isa isa = active_isa();
    const std::string on = " measured now (register-only, " + std::to_string(t) + " threads)";
    std::string peak;
    if (dtype == "bf16" && cpu_supports_avx512_bf16() && bf16_kernels_native()) {
        m.peak_gflops = measure_bf16_dot_peak(t);
        peak = "the bf16 dot-product peak (vdpbf16ps)" + on;
    } else {
        m.peak_gflops = measure_fma_peak(isa, t, dtype == "double");
        peak = "the " + std::string(dtype == "double" ? "fp64" : "fp32") + " FMA peak of " +
               std::string(to_string(isa)) + on;
    }
    m.source = "this machine, " + dtype + " operands (" + std::to_string(m.word_bytes) +
               " bytes): M = per-core L2 from sysfs (" + std::to_string(m.fast_bytes / 1024) +
               " KiB); beta measured now (sum over 512 MiB, " + std::to_string(t) +
               " threads); P = " + peak;
    return m;
}

TimeBound
time_bound(const Problem& problem, Pass pass, const MemoryModel& memory, const Machine& machine) {
    const Bound b = bound(problem, memory, pass);
    TimeBound t;
    t.flops = flop_count_forward(problem) * (pass == Pass::backward ? 2.5 : 1.0);
    t.io_seconds =
        static_cast<double>(machine.word_bytes) * b.asymptotic() / (machine.bandwidth_gbs * 1e9);
    t.compute_seconds = t.flops / (machine.peak_gflops * 1e9);
    return t;
}

} // namespace ioattn::app
