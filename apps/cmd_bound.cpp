// ioattn bound: the estimator of docs/design.md section 9. If at least L words of w bytes must
// cross a boundary of bandwidth beta, and the algorithm needs F flops on hardware of peak P, then
// time >= max(w L / beta, F / P): an optimistic lower bound, not a prediction. Prints the regime (M
// against d^2), both I/O bound terms, the chosen schedule's exact predicted I/O, and the time
// bound. Rectangular shapes (decode: n_q = 1 against n_k keys) use n_q * n_k score entries in place
// of N^2; the compulsory traffic then usually dominates.

#include "bound_decode.hpp"
#include "commands.hpp"
#include "machine.hpp"
#include "options.hpp"
#include "output.hpp"
#ifdef IOATTN_WITH_MPI
#include "bound_dist.hpp"
#endif

#include <ioattn/dense.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kBoundWhere = "bound";

/// Documented figures of well-known parts (see the --preset help for sources).
struct Preset {
    const char* name;
    std::int64_t fast_bytes; ///< on-chip fast memory per core / SM
    std::int64_t word_bytes;
    double bandwidth_gbs; ///< slow-memory bandwidth
    double peak_gflops;   ///< peak of the working type's multiply-add units
    const char* source;
};

constexpr Preset kPresets[] = {
    {"a100",
     std::int64_t{192} * 1024,
     2,
     1555.0,
     312000.0,
     "NVIDIA A100 SXM4 40GB, fp16: HBM2 1555 GB/s, 312 TFLOP/s dense tensor-core fp16 (NVIDIA "
     "A100 datasheet / Ampere GA100 whitepaper), 192 KiB L1+shared SRAM per SM (as in "
     "FlashAttention, arXiv 2205.14135, Fig. 1)"},
    {"h100",
     std::int64_t{228} * 1024,
     2,
     3350.0,
     989000.0,
     "NVIDIA H100 SXM5 80GB, fp16: HBM3 3.35 TB/s, 989 TFLOP/s dense tensor-core fp16 (NVIDIA "
     "H100 datasheet), 228 KiB shared memory per SM (Hopper H100 architecture whitepaper)"},
    {"h200",
     std::int64_t{228} * 1024,
     2,
     4800.0,
     989000.0,
     "NVIDIA H200 SXM 141GB, fp16: HBM3e 4.8 TB/s, 989 TFLOP/s dense tensor-core fp16/bf16 (the "
     "1,979 TFLOP/s of the datasheet is with 2:4 sparsity; NVIDIA H200 datasheet, "
     "https://www.nvidia.com/en-us/data-center/h200/), 228 KiB shared memory per SM (the "
     "Hopper SM of the H100: Hopper architecture whitepaper)"},
    {"m1-max",
     std::int64_t{32} * 1024,
     4,
     400.0,
     10400.0,
     "Apple M1 Max, 32-core GPU, fp32: 400 GB/s unified memory (Apple Newsroom, 'Introducing M1 "
     "Pro and M1 Max', 2021-10-18, https://www.apple.com/newsroom/2021/10/"
     "introducing-m1-pro-and-m1-max-the-most-powerful-chips-apple-has-ever-built/), 10.4 "
     "TFLOP/s fp32 GPU peak (Apple's 'Unleashed' event, 2021-10-18), 32 KiB threadgroup memory "
     "per threadgroup as the fast memory (Apple Metal Feature Set Tables, "
     "https://developer.apple.com/metal/Metal-Feature-Set-Tables.pdf)"},
};

struct BoundOptions {
    SharedOptions shared;
    std::string preset;
    std::int64_t word_bytes = 0;
    double bandwidth = 0;
    double peak = 0;
#ifdef IOATTN_WITH_MPI
    DistBoundOptions dist; ///< --ranks ...: the distributed bound and simulation
#else
    std::string ranks; ///< --ranks in a build without MPI: one usage line, as run --dist
#endif
    bool decode = false; ///< --decode: one decode step (bound_decode.hpp)
};

Machine machine_of(const BoundOptions& o) {
    Machine m;
    m.word_bytes = word_bytes(o.shared);
    if (o.preset == "this-machine") {
        m = this_machine(o.shared.threads, o.shared.dtype);
    } else if (!o.preset.empty()) {
        for (const Preset& p : kPresets)
            if (o.preset == p.name) {
                m.preset = p.name;
                m.source = p.source;
                m.fast_bytes = p.fast_bytes;
                m.word_bytes = p.word_bytes;
                m.bandwidth_gbs = p.bandwidth_gbs;
                m.peak_gflops = p.peak_gflops;
            }
    }
    if (o.word_bytes > 0)
        m.word_bytes = o.word_bytes;
    if (o.bandwidth > 0)
        m.bandwidth_gbs = o.bandwidth;
    if (o.peak > 0)
        m.peak_gflops = o.peak;
    if (m.bandwidth_gbs <= 0 || m.peak_gflops <= 0)
        throw UsageError(std::string(kBoundWhere) +
                         ": give --bandwidth GB/s and --peak GFLOP/s, or a --preset "
                         "(this-machine, a100, h100, h200, m1-max)");
    return m;
}

MemoryModel fast_memory(const BoundOptions& o, const Machine& m) {
    if (o.shared.m_words != kUnset)
        return memory_of(o.shared, kBoundWhere);
    std::int64_t bytes = o.shared.m_bytes != kUnset ? o.shared.m_bytes : m.fast_bytes;
    if (o.shared.m_bytes == kUnset && bytes <= 0) {
        bytes = l2_cache_bytes();
        if (bytes <= 0)
            bytes = std::int64_t{1} << 20;
    }
    if (bytes < m.word_bytes)
        throw InvalidArgument(std::string(kBoundWhere) + ": fast memory of " +
                              std::to_string(bytes) + " bytes is less than one word of " +
                              std::to_string(m.word_bytes) + " bytes");
    return MemoryModel{bytes / m.word_bytes};
}

std::optional<IoReport> predicted(Schedule s, const Problem& p, const MemoryModel& mem, Pass pass) {
    const auto t = Tiling::try_for_memory(s, mem, p, pass);
    if (!t)
        return std::nullopt;
    return io_cost(p, *t, pass);
}

nlohmann::json words_or_null(const std::optional<IoReport>& r) {
    return r ? nlohmann::json(r->total()) : nlohmann::json(nullptr);
}

void run(const BoundOptions& o) {
#ifndef IOATTN_WITH_MPI
    if (!o.ranks.empty())
        throw_built_without_mpi(kBoundWhere, "--ranks", o.ranks);
#endif
    require_dense_pattern(o.shared, kBoundWhere);
    const Problem p = problem_of(o.shared, kBoundWhere);
    const Pass pass = pass_of(o.shared, kBoundWhere);
    const Machine mach = machine_of(o);
    if (o.decode) {
        print_decode_bound(p, mach, o.shared.json);
        return;
    }
#ifdef IOATTN_WITH_MPI
    if (!o.dist.ranks.empty()) {
        run_dist_bound(
            o.dist, p, pass, {mach.word_bytes, mach.peak_gflops, o.shared.threads}, o.shared.json);
        return;
    }
#endif
    const MemoryModel mem = fast_memory(o, mach);
    const Bound b = bound(p, mem, pass);
    const double m = static_cast<double>(mem.fast_words);
    const double d = static_cast<double>(p.d);
    const double pairs =
        static_cast<double>(p.allowed_pairs()) * static_cast<double>(p.batch_heads());
    const double large_term = pairs * d * d / m;        // N^2 d^2 / M
    const double small_term = pairs * d / std::sqrt(m); // N^2 d / sqrt(M)
    const auto fused = predicted(Schedule::fused, p, mem, pass);
    const auto mat = predicted(Schedule::materialized, p, mem, pass);
    std::string chosen = "none (M below every tiling)";
    std::optional<IoReport> chosen_io;
    const auto fixed_schedule = schedule_of(o.shared);
    if (fixed_schedule == Schedule::reference)
        throw UsageError(
            std::string(kBoundWhere) +
            ": --schedule reference has no I/O model; use auto, fused or materialized");
    if (fixed_schedule) {
        chosen = std::string(to_string(*fixed_schedule));
        chosen_io = *fixed_schedule == Schedule::fused ? fused : mat;
        if (!chosen_io)
            chosen += " (no tiling fits M)";
    } else if (fused || mat) {
        const Schedule s = select_schedule(p, mem, select_of(o.shared), pass);
        chosen = std::string(to_string(s));
        chosen_io = s == Schedule::fused ? fused : mat;
    }
    const double w = static_cast<double>(mach.word_bytes);
    // the pass's exact flops: forward 2 pairs (d + d_v); the backward's five products 2.5x that
    const TimeBound tb = time_bound(p, pass, mem, mach);
    const double flops = tb.flops;
    const double io_seconds = tb.io_seconds;
    const double compute_seconds = tb.compute_seconds;
    const double bound_seconds = tb.seconds();
    const double chosen_seconds =
        chosen_io ? w * static_cast<double>(chosen_io->total()) / (mach.bandwidth_gbs * 1e9) : 0.0;
    const bool rectangular = p.n_q != p.n_k;

    if (o.shared.json) {
        nlohmann::json j;
        j["pass"] = std::string(to_string(pass));
        j["problem"] = {{"batch", p.batch},
                        {"heads", p.heads},
                        {"kv_heads", p.kv_heads},
                        {"n_q", p.n_q},
                        {"n_k", p.n_k},
                        {"d", p.d},
                        {"d_v", p.d_v},
                        {"causal", p.causal}};
        j["rectangular"] = rectangular;
        j["preset"] = mach.preset;
        j["source"] = mach.source;
        j["M"] = mem.fast_words;
        j["word_bytes"] = mach.word_bytes;
        j["bandwidth_gbs"] = mach.bandwidth_gbs;
        j["peak_gflops"] = mach.peak_gflops;
        j["regime"] = std::string(b.regime);
        j["bound"] = {{"regime", std::string(b.regime)},
                      {"compulsory", b.compulsory},
                      {"leading", b.leading},
                      {"large_cache_term", large_term},
                      {"small_cache_term", small_term},
                      {"asymptotic", b.asymptotic()},
                      {"explicit", b.explicit_bound}};
        j["schedule"] = {{"select", std::string(to_string(select_of(o.shared)))},
                         {"chosen", chosen},
                         {"predicted_io", words_or_null(chosen_io)},
                         {"fused_io", words_or_null(fused)},
                         {"materialized_io", words_or_null(mat)}};
        j["flops"] = flops;
        j["time"] = {{"io_seconds", io_seconds},
                     {"compute_seconds", compute_seconds},
                     {"bound_seconds", bound_seconds},
                     {"limited_by", io_seconds >= compute_seconds ? "memory" : "compute"},
                     {"chosen_io_seconds",
                      chosen_io ? nlohmann::json(chosen_seconds) : nlohmann::json(nullptr)}};
        std::cout << j.dump(2) << '\n';
        return;
    }
    std::ostream& os = std::cout;
    const auto d2 = p.d * p.d;
    os << "ioattn bound: " << to_string(pass) << ", B*H = " << p.batch_heads()
       << ", n_q = " << p.n_q << ", n_k = " << p.n_k << ", d = " << p.d
       << (p.causal ? ", causal" : "") << '\n';
    if (mach.preset != "none")
        os << "  preset       " << mach.preset << ": " << mach.source << '\n';
    os << "  fast memory  M = " << grouped(mem.fast_words) << " words of " << mach.word_bytes
       << " bytes (" << bytes_of(mem.fast_words, mach.word_bytes) << "); d^2 = " << grouped(d2)
       << " -> " << b.regime << '\n';
    os << "  machine      beta = " << sig(mach.bandwidth_gbs)
       << " GB/s, P = " << sig(mach.peak_gflops) << " GFLOP/s\n";
    if (rectangular)
        os << "  shape        rectangular: the N^2 of the bounds is n_q * n_k = "
           << sig(static_cast<double>(p.n_q) * static_cast<double>(p.n_k))
           << " score entries per head (not the square formula)\n";
    os << "  I/O bound    compulsory " << sig(b.compulsory)
       << "; leading min(N^2 d^2/M = " << sig(large_term) << ", N^2 d/sqrt(M) = " << sig(small_term)
       << ") = " << sig(b.leading)
       << "\n               max(compulsory, leading) = " << sig(b.asymptotic())
       << " words; explicit (any algorithm over F_p, p > N) = " << sig(b.explicit_bound)
       << " words\n";
    os << "  schedules    fused " << (fused ? sig(static_cast<double>(fused->total())) : "-")
       << " words, materialized " << (mat ? sig(static_cast<double>(mat->total())) : "-")
       << " words; chosen ("
       << (fixed_schedule ? std::string("--schedule")
                          : "--select " + std::string(to_string(select_of(o.shared))))
       << "): " << chosen << '\n';
    os << "  flops        F = " << sig(flops) << " (2 * allowed pairs * (d + d_v))\n";
    os << "  time bound   max(w L / beta, F / P) = max(" << sig(io_seconds) << " s, "
       << sig(compute_seconds) << " s) = " << sig(bound_seconds) << " s ("
       << (io_seconds >= compute_seconds ? "memory" : "compute") << "-bound)\n";
    if (chosen_io)
        os << "               the chosen schedule's exact traffic alone takes "
           << sig(chosen_seconds) << " s at beta\n";
    os << "  (an optimistic lower bound, not a prediction: docs/design.md section 9)\n";
}

} // namespace

} // namespace ioattn::app

void register_bound(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<BoundOptions>();
    auto* cmd = app.add_subcommand(
        "bound",
        "Estimate the I/O and time lower bounds of a pass: max(w L / beta, F / P) (docs/design.md "
        "section 9). Decode: --n-q 1 --n-k n.");
    add_problem_options(*cmd, o->shared);
    add_schedule_options(*cmd, o->shared);
    add_memory_options(*cmd, o->shared);
    cmd->add_option("--threads", o->shared.threads, "Threads for the this-machine measurements")
        ->check(CLI::Range(0, 1 << 16));
    add_output_options(*cmd, o->shared, false);
    cmd->add_flag("--decode",
                  o->decode,
                  "One decode step: --batch sequences of --n-k cached rows, --n-q new tokens, "
                  "--heads over --kv-heads (the decode schedule, ioattn decode)");
    cmd->add_option("--word-bytes",
                    o->word_bytes,
                    "Bytes per word w (default: the preset's; this-machine or none: --dtype's)")
        ->check(CLI::Range(1, 64));
    cmd->add_option("--bandwidth", o->bandwidth, "Slow-memory bandwidth beta in GB/s")
        ->check(CLI::Range(1e-6, 1e12));
    cmd->add_option("--peak", o->peak, "Peak arithmetic rate P in GFLOP/s")
        ->check(CLI::Range(1e-6, 1e12));
    cmd->add_option("--preset",
                    o->preset,
                    "this-machine: M = per-core L2 (sysfs), fp32, beta and P MEASURED now "
                    "(a 512 MiB read sum; P = the FMA peak of the active instruction set, a "
                    "register-only multiply-add loop). a100: NVIDIA A100 SXM4 40GB, "
                    "fp16, 1555 GB/s HBM2, 312 TFLOP/s, 192 KiB SRAM/SM (NVIDIA A100 datasheet; "
                    "FlashAttention arXiv 2205.14135 Fig. 1). h100: NVIDIA H100 SXM5, fp16, "
                    "3.35 TB/s HBM3, 989 TFLOP/s dense, 228 KiB shared/SM (NVIDIA H100 "
                    "datasheet, Hopper whitepaper). h200: NVIDIA H200 SXM, fp16, 4.8 TB/s HBM3e, "
                    "989 TFLOP/s dense, 228 KiB shared/SM (NVIDIA H200 datasheet, "
                    "nvidia.com/en-us/data-center/h200; Hopper whitepaper). m1-max: Apple M1 Max "
                    "32-core GPU, fp32, 400 GB/s unified memory, 10.4 TFLOP/s, 32 KiB threadgroup "
                    "memory (Apple Newsroom 2021-10-18 'Introducing M1 Pro and M1 Max'; Apple's "
                    "Oct 2021 event; Metal Feature Set Tables). Explicit options override a "
                    "preset.")
        ->check(CLI::IsMember({"this-machine", "a100", "h100", "h200", "m1-max"}));
#ifdef IOATTN_WITH_MPI
    add_dist_bound_options(*cmd, o->dist);
#else
    cmd->add_option(
        "--ranks", o->ranks, "Distributed bound over MPI ranks (needs a build with MPI)");
#endif
    cmd->callback([o] { run(*o); });
}
