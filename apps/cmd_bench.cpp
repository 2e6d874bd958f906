// ioattn bench: benchmark suites measured in one run (docs/performance.md section 1). --suite
// dense: fp32, B=1, H=8, N in {1024, 4096}, d in {64, 128}: the fused forward and backward
// (ioattn::attention, planned once: the tuned tiling), the naive OpenBLAS attention in both
// threading modes, OpenBLAS SGEMM 2048^3 as the roofline (with the OpenBLAS core that ran it) and
// the FMA peak of the kernels' instruction set, all on the same thread count; medians of --repeat
// runs after a warm-up. Every row also shows its time over this machine's time lower bound (bound
// --preset this-machine), which must never fall below 1. Then the bf16 fused forward of each
// shape against its fp32 row and the bf16 dot-product peak (bench_dense_bf16.cpp). --suite sparse: bench_sparse.cpp;
// --suite decode: bench_decode.cpp.

#include "bench_decode.hpp"
#include "bench_dense_bf16.hpp"
#include "bench_sparse.hpp"
#include "commands.hpp"
#include "machine.hpp"
#include "options.hpp"
#include "output.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <measure.hpp>
#include <timed_call.hpp>
#include <unistd.h>

namespace ioattn::app {

namespace {

constexpr const char* kBenchWhere = "bench";

struct BenchOptions {
    std::string suite = "dense";
    bool quick = false;
    bool count_io = false;
    bool json = false;
    bool csv = false;
    int threads = 2;
    int repeat = 5;
    std::uint64_t seed = 42;
    std::string plot;
    std::vector<std::int64_t> ns, ds;  ///< sparse: --N, --d
    std::vector<std::string> patterns; ///< sparse: --patterns
};

struct Result {
    std::string what;
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::string tiling;
    double seconds = 0;
    double gflops = 0;
    double ratio = 0;   ///< to SGEMM
    double speedup = 0; ///< naive (best mode) seconds / this seconds; 0 for rows it does not apply
    double bound_seconds = 0; ///< this machine's time lower bound of the row's pass; 0: none
};

class Progress {
public:
    explicit Progress(int total)
        : total_(total)
        , tty_(isatty(STDERR_FILENO) != 0) {}

    void step(const std::string& what) {
        ++done_;
        std::cerr << (tty_ ? "\r\033[K" : "") << "[" << done_ << "/" << total_ << "] " << what
                  << (tty_ ? "" : "\n") << std::flush;
    }

    void finish() const {
        if (tty_)
            std::cerr << "\r\033[K" << std::flush;
    }

private:
    int total_;
    int done_ = 0;
    bool tty_;
};

/// The fp32 rows and the bf16 rows with the bf16 dot peak.
struct DenseRows {
    std::vector<Result> rows;
    std::vector<Bf16Row> bf16;
    double bf16_peak = 0;
};

void print_dense(const BenchOptions& o,
                 const DenseRows& all,
                 const Roofline& roof,
                 const Machine& machine,
                 const std::string& faster,
                 bool below_bound);

/// GFLOP/s of every row but the roofline's, grouped by shape.
BarPlot dense_plot(const std::vector<Result>& rows, int threads) {
    std::vector<Bar> bars;
    for (const Result& r : rows)
        if (!r.what.starts_with("sgemm"))
            bars.push_back(
                {"N=" + std::to_string(r.n) + " d=" + std::to_string(r.d), r.what, r.gflops});
    return bar_plot_of("ioattn bench --suite dense: fp32, B=1, H=8, " + std::to_string(threads) +
                           " threads, GFLOP/s = 4 B H N^2 d / s (backward 2.5x)",
                       "GFLOP/s",
                       bars);
}

void run(const BenchOptions& o) {
    const std::optional<PlotFiles> files =
        o.plot.empty() ? std::nullopt : std::optional(plot_files(o.plot, kBenchWhere));
    if (o.suite == "sparse") {
        run_sparse_suite(
            {o.quick, o.json, o.csv, o.count_io, o.repeat, o.seed, o.plot, o.ns, o.ds, o.patterns});
        return;
    }
    if (o.suite == "decode") {
        if (files)
            throw UsageError(std::string(kBenchWhere) +
                             ": --plot draws the dense and sparse suites, not decode");
        run_decode_suite({o.quick, o.json, o.csv, o.threads, o.repeat, o.seed});
        return;
    }
    if (o.suite != "dense")
        throw UsageError(std::string(kBenchWhere) + ": --suite " + o.suite +
                         " is unknown (expected dense, sparse or decode)");
    const std::vector<std::int64_t> ns =
        o.quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{1024, 4096};
    const std::vector<std::int64_t> ds{64, 128};
    const int threads = o.threads;
    Progress progress(2 + 6 * static_cast<int>(ns.size() * ds.size()));
    DenseRows all;
    std::vector<Result>& rows = all.rows;

    progress.step("sgemm 2048^3 and the FMA peak (roofline)");
    const Roofline roof = measure_roofline(threads, o.repeat);
    const double peak = roof.gemm_gflops;
    rows.push_back({"sgemm-2048 (roofline)",
                    2048,
                    2048,
                    "-",
                    2.0 * 2048.0 * 2048.0 * 2048.0 / (peak * 1e9),
                    peak,
                    1.0,
                    0.0});
    progress.step("this machine's bandwidth (time bound)");
    const Machine machine = this_machine(threads);
    const MemoryModel l2{machine.fast_bytes > 0 ? machine.fast_bytes / 4 : std::int64_t{1} << 18};
    all.bf16_peak = bf16_peak_or_zero(threads);

    double naive_wins[2] = {0, 0};
    for (std::int64_t n : ns)
        for (std::int64_t d : ds) {
            Problem p;
            p.batch = 1;
            p.heads = 8;
            p.n_q = n;
            p.n_k = n;
            p.d = d;
            p = p.resolved(kBenchWhere);
            const double flops = flop_count_convention(p, Pass::forward);
            const double forward_bound = time_bound(p, Pass::forward, l2, machine).seconds();
            const double backward_bound = time_bound(p, Pass::backward, l2, machine).seconds();
            measure::ForwardData<float> data(p, o.seed);
            const ForwardArgs<float> args = data.args();

            // --- naive OpenBLAS attention, both threading modes ---
            double naive_s[2];
            for (int mode = 0; mode < 2; ++mode) {
                const auto m = mode == 0 ? measure::NaiveMode::heads_parallel
                                         : measure::NaiveMode::blas_threads;
                progress.step("naive " + std::string(measure::to_string(m)) +
                              " N=" + std::to_string(n) + " d=" + std::to_string(d));
                measure::NaiveAttention naive(p, m, threads);
                naive_s[mode] = measure::median_seconds(o.repeat, [&] {
                    naive.run(data.q.data(), data.k.data(), data.v.data(), data.o.data());
                });
                rows.push_back({"naive-blas " + std::string(measure::to_string(m)),
                                n,
                                d,
                                "-",
                                naive_s[mode],
                                flops / naive_s[mode] * 1e-9,
                                0.0,
                                0.0,
                                forward_bound});
            }
            const double best_naive = std::min(naive_s[0], naive_s[1]);
            naive_wins[naive_s[0] <= naive_s[1] ? 0 : 1] += 1;
            measure::park_blas_threads(); // not spinning beside the oneTBB runs next

            // --- fused forward, tuned tiling ---
            progress.step("fused N=" + std::to_string(n) + " d=" + std::to_string(d));
            // through the entry point, planned once, as a user's timed loop calls it
            const AttentionOptions opts = measure::timed_options(
                Schedule::fused, MemoryModel::per_core_l2(sizeof(float)), threads, "ioattn bench");
            const AttentionPlan fplan = plan_attention<float>(p, Pass::forward, {}, opts);
            const Tiling& tiling = fplan.tiling;
            const double fused_s =
                measure::median_seconds(o.repeat, [&] { (void)attention(args, {}, fplan, opts); });
            rows.push_back({"fused",
                            n,
                            d,
                            std::to_string(tiling.rows) + "x" + std::to_string(tiling.cols),
                            fused_s,
                            flops / fused_s * 1e-9,
                            0.0,
                            best_naive / fused_s,
                            forward_bound});
            for (std::size_t i = rows.size() - 3; i < rows.size() - 1; ++i)
                rows[i].speedup = best_naive / rows[i].seconds;
            progress.step("fused bf16 N=" + std::to_string(n) + " d=" + std::to_string(d));
            all.bf16.push_back(bench_bf16_forward(data, opts, o.repeat, fused_s, all.bf16_peak));

            // --- backward: fused (dQ in partial sums) against naive OpenBLAS (P in memory) ---
            const double bflops = flop_count_convention(p, Pass::backward);
            std::vector<float> d_o(data.o.size(), 0.5F), d_q(data.q.size()), d_k(data.k.size()),
                d_v(data.v.size());
            BackwardArgs<float> bargs;
            static_cast<ForwardArgs<float>&>(bargs) = args;
            bargs.d_o = TensorView<const float>::packed(d_o.data(), 1, 8, n, d);
            bargs.d_q = TensorView<float>::packed(d_q.data(), 1, 8, n, d);
            bargs.d_k = TensorView<float>::packed(d_k.data(), 1, 8, n, d);
            bargs.d_v = TensorView<float>::packed(d_v.data(), 1, 8, n, d);
            progress.step("naive backward N=" + std::to_string(n) + " d=" + std::to_string(d));
            measure::NaiveBackward naive_b(p, threads);
            const double naive_bs = measure::median_seconds(o.repeat, [&] {
                naive_b.run(data.q.data(),
                            data.k.data(),
                            data.v.data(),
                            data.o.data(),
                            d_o.data(),
                            d_q.data(),
                            d_k.data(),
                            d_v.data());
            });
            measure::park_blas_threads(); // not spinning beside the oneTBB runs next
            progress.step("fused backward N=" + std::to_string(n) + " d=" + std::to_string(d));
            const AttentionPlan bplan = plan_attention<float>(p, Pass::backward, {}, opts);
            const Tiling& btiling = bplan.tiling;
            const double fused_bs = measure::median_seconds(
                o.repeat, [&] { (void)attention_backward(bargs, {}, bplan, opts); });
            rows.push_back({"naive-blas backward",
                            n,
                            d,
                            "-",
                            naive_bs,
                            bflops / naive_bs * 1e-9,
                            0.0,
                            1.0,
                            backward_bound});
            rows.push_back({"fused backward",
                            n,
                            d,
                            std::to_string(btiling.rows) + "x" + std::to_string(btiling.cols),
                            fused_bs,
                            bflops / fused_bs * 1e-9,
                            0.0,
                            naive_bs / fused_bs,
                            backward_bound});
        }
    progress.finish();
    bool below_bound = false;
    for (Result& r : rows) {
        r.ratio = r.gflops / peak;
        below_bound = below_bound || (r.bound_seconds > 0 && r.seconds < r.bound_seconds);
    }
    const std::string faster = naive_wins[0] >= naive_wins[1] ? "heads-parallel" : "blas-threads";
    print_dense(o, all, roof, machine, faster, below_bound);
    if (files)
        render_bench_plot(dense_plot(rows, threads), roof, *files);
}

/// The dense suite's table (or JSON, CSV).
void print_dense(const BenchOptions& o,
                 const DenseRows& all,
                 const Roofline& roof,
                 const Machine& machine,
                 const std::string& faster,
                 bool below_bound) {
    const std::vector<Result>& rows = all.rows;
    const int threads = o.threads;
    if (o.json) {
        nlohmann::json j;
        j["suite"] = o.suite;
        j["dtype"] = "float";
        j["batch"] = 1;
        j["heads"] = 8;
        j["threads"] = threads;
        j["repeat"] = o.repeat;
        add_roofline_json(j, roof);
        j["bandwidth_gbs"] = machine.bandwidth_gbs;
        j["naive_faster_mode"] = faster;
        j["rows"] = nlohmann::json::array();
        for (const Result& r : rows)
            j["rows"].push_back(
                {{"what", r.what},
                 {"N", r.n},
                 {"d", r.d},
                 {"tiling", r.tiling},
                 {"seconds", r.seconds},
                 {"gflops", r.gflops},
                 {"ratio_to_sgemm", r.ratio},
                 {"ratio_to_peak", r.gflops / roof.peak_gflops},
                 {"speedup_vs_naive",
                  r.speedup > 0 ? nlohmann::json(r.speedup) : nlohmann::json(nullptr)},
                 {"bound_seconds",
                  r.bound_seconds > 0 ? nlohmann::json(r.bound_seconds) : nlohmann::json(nullptr)},
                 {"time_over_bound",
                  r.bound_seconds > 0 ? nlohmann::json(r.seconds / r.bound_seconds)
                                      : nlohmann::json(nullptr)}});
        j["bf16"] = bf16_rows_json(all.bf16, all.bf16_peak);
        std::cout << j.dump(2) << '\n';
        return;
    }
    Table t({"what",
             "N",
             "d",
             "tiling",
             "seconds",
             "GFLOP/s",
             "x SGEMM",
             "x peak",
             "vs naive",
             "time / bound"});
    for (const Result& r : rows)
        t.add({r.what,
               r.what.starts_with("sgemm") ? "2048^3" : std::to_string(r.n),
               r.what.starts_with("sgemm") ? "-" : std::to_string(r.d),
               r.tiling,
               sig(r.seconds),
               fixed(r.gflops, 1),
               fixed(r.ratio, 3),
               fixed(r.gflops / roof.peak_gflops, 3),
               r.speedup > 0 ? fixed(r.speedup, 2) : std::string("-"),
               r.bound_seconds > 0 ? fixed(r.seconds / r.bound_seconds, 2) : std::string("-")});
    if (o.csv) {
        t.print_csv(std::cout);
        return;
    }
    std::cout << "ioattn bench --suite dense: fp32, B=1, H=8, " << threads << " threads, median of "
              << o.repeat
              << " runs after a warm-up; GFLOP/s = 4 B H N^2 d / s (backward rows: 2.5x that)\n";
    print_roofline(std::cout, roof);
    t.print(std::cout);
    std::cout << "vs naive = the faster naive mode's time / this time (faster mode here: mostly "
              << faster << "); x SGEMM = GFLOP/s / same-run SGEMM 2048^3 GFLOP/s; x peak = "
              << "GFLOP/s / FMA peak; time / bound = seconds / max(w L / beta, F / P) of "
              << "`bound --preset this-machine` (beta " << fixed(machine.bandwidth_gbs, 1)
              << " GB/s, P = the FMA peak, M = per-core L2)\n";
    if (below_bound)
        std::cout << "WARNING: a row ran faster than this machine's time lower bound: the bound "
                     "is wrong (its beta or P is below what this machine does)\n";
    print_bf16_rows(std::cout, all.bf16, all.bf16_peak);
}

} // namespace

} // namespace ioattn::app

void register_bench(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<BenchOptions>();
    auto* cmd = app.add_subcommand(
        "bench",
        "Benchmark suites in one run: the fused forward against naive attention on OpenBLAS "
        "and the same-run SGEMM roofline");
    cmd->add_option("--suite",
                    o->suite,
                    "dense: fused vs naive OpenBLAS vs SGEMM, B=1 H=8; sparse: patterns x N x d x "
                    "schedules x threads vs dense fused, GraphBLAS and SGEMM, B=H=1; decode: "
                    "the decode step against the read bandwidth")
        ->check(CLI::IsMember({"dense", "sparse", "decode"}))
        ->capture_default_str();
    cmd->add_flag("--quick", o->quick, "A subset (dense: N = 1024; sparse: N = 4096, d = 64)");
    cmd->add_flag("--count-io", o->count_io, "sparse: add each row's counted I/O and its bound");
    auto* j = cmd->add_flag("--json", o->json, "Machine-readable JSON on stdout");
    cmd->add_flag("--csv", o->csv, "Machine-readable CSV on stdout")->excludes(j);
    cmd->add_option("--threads", o->threads, "Threads for every row (oneTBB and OpenBLAS)")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--repeat", o->repeat, "Timed runs per row (median)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
    cmd->add_option("--N", o->ns, "sparse: these sequence lengths instead of the suite's")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
    cmd->add_option("--d", o->ds, "sparse: these head dimensions instead of the suite's")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 12));
    cmd->add_option(
        "--patterns", o->patterns, "sparse: these pattern specs instead of the suite's");
    cmd->add_option("--plot",
                    o->plot,
                    "Also plot GFLOP/s per shape or pattern and schedule, with the peers and the "
                    "roofline, with gnuplot: FILE.svg, its data FILE.csv and script FILE.gp");
    cmd->callback([o] { run(*o); });
}
