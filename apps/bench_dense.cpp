// ioattn bench --suite dense (docs/performance.md section 1): fp32, B=1, H=8, N in {1024,
// 4096}, d in {64, 128}: the fused forward and backward (ioattn::attention, planned once: the
// tuned tiling), the naive OpenBLAS attention in both threading modes, OpenBLAS SGEMM 2048^3 as
// the roofline (with the OpenBLAS core that ran it) and the FMA peak of the kernels' instruction
// set, all on the same thread count; medians of --repeat runs after a warm-up. Every row also
// shows its time over this machine's time lower bound (bound --preset this-machine), which must
// never fall below 1. Then the bf16 fused forward of each shape against its fp32 row and the
// bf16 dot-product peak (bench_dense_bf16.cpp).

#include "bench_dense.hpp"

#include "bench_dense_bf16.hpp"
#include "machine.hpp"
#include "output.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>

#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <measure.hpp>
#include <timed_call.hpp>
#include <unistd.h>

namespace ioattn::app {

namespace {

constexpr const char* kDenseSuiteWhere = "bench";

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

/// The dense suite's table (or JSON, CSV).
void print_dense(const DenseSuiteOptions& o,
                 const DenseRows& all,
                 const Roofline& roof,
                 const Machine& machine,
                 const std::string& faster,
                 bool below_bound) {
    const std::vector<Result>& rows = all.rows;
    const int threads = o.threads;
    if (o.json) {
        nlohmann::json j;
        j["suite"] = "dense";
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

/// One shape of the suite: its problem, inputs, bounds and the rows it adds.
struct Shape {
    const DenseSuiteOptions& o;
    Problem p;
    measure::ForwardData<float> data;
    double forward_bound = 0;
    double backward_bound = 0;
    Progress& progress;
    DenseRows& all;

    std::string at() const { return " N=" + std::to_string(p.n_q) + " d=" + std::to_string(p.d); }

    std::string tiling_of(const AttentionPlan& plan) const {
        return std::to_string(plan.tiling.rows) + "x" + std::to_string(plan.tiling.cols);
    }
};

/// Naive OpenBLAS attention in both threading modes, then the fused forward (tuned tiling) and
/// its bf16 row; returns which naive mode was faster (0: heads-parallel).
int forward_rows(Shape& s, const AttentionOptions& opts) {
    std::vector<Result>& rows = s.all.rows;
    const std::int64_t n = s.p.n_q, d = s.p.d;
    const double flops = flop_count_convention(s.p, Pass::forward);
    double naive_s[2];
    for (int mode = 0; mode < 2; ++mode) {
        const auto m =
            mode == 0 ? measure::NaiveMode::heads_parallel : measure::NaiveMode::blas_threads;
        s.progress.step("naive " + std::string(measure::to_string(m)) + s.at());
        measure::NaiveAttention naive(s.p, m, s.o.threads);
        naive_s[mode] = measure::median_seconds(s.o.repeat, [&] {
            naive.run(s.data.q.data(), s.data.k.data(), s.data.v.data(), s.data.o.data());
        });
        rows.push_back({"naive-blas " + std::string(measure::to_string(m)),
                        n,
                        d,
                        "-",
                        naive_s[mode],
                        flops / naive_s[mode] * 1e-9,
                        0.0,
                        0.0,
                        s.forward_bound});
    }
    const double best_naive = std::min(naive_s[0], naive_s[1]);
    measure::park_blas_threads(); // not spinning beside the oneTBB runs next

    s.progress.step("fused" + s.at());
    // through the entry point, planned once, as a user's timed loop calls it
    const AttentionPlan plan = plan_attention<float>(s.p, Pass::forward, {}, opts);
    const ForwardArgs<float> args = s.data.args();
    const double fused_s =
        measure::median_seconds(s.o.repeat, [&] { (void)attention(args, {}, plan, opts); });
    rows.push_back({"fused",
                    n,
                    d,
                    s.tiling_of(plan),
                    fused_s,
                    flops / fused_s * 1e-9,
                    0.0,
                    best_naive / fused_s,
                    s.forward_bound});
    for (std::size_t i = rows.size() - 3; i < rows.size() - 1; ++i)
        rows[i].speedup = best_naive / rows[i].seconds;
    s.progress.step("fused bf16" + s.at());
    s.all.bf16.push_back(bench_bf16_forward(s.data, opts, s.o.repeat, fused_s, s.all.bf16_peak));
    return naive_s[0] <= naive_s[1] ? 0 : 1;
}

/// The fused backward (dQ in partial sums) against naive OpenBLAS (P in memory).
void backward_rows(Shape& s, const AttentionOptions& opts) {
    const std::int64_t n = s.p.n_q, d = s.p.d;
    const double flops = flop_count_convention(s.p, Pass::backward);
    measure::ForwardData<float>& data = s.data;
    std::vector<float> d_o(data.o.size(), 0.5F), d_q(data.q.size()), d_k(data.k.size()),
        d_v(data.v.size());
    BackwardArgs<float> args;
    static_cast<ForwardArgs<float>&>(args) = data.args();
    args.d_o = TensorView<const float>::packed(d_o.data(), 1, 8, n, d);
    args.d_q = TensorView<float>::packed(d_q.data(), 1, 8, n, d);
    args.d_k = TensorView<float>::packed(d_k.data(), 1, 8, n, d);
    args.d_v = TensorView<float>::packed(d_v.data(), 1, 8, n, d);
    s.progress.step("naive backward" + s.at());
    measure::NaiveBackward naive(s.p, s.o.threads);
    const double naive_s = measure::median_seconds(s.o.repeat, [&] {
        naive.run(data.q.data(),
                  data.k.data(),
                  data.v.data(),
                  data.o.data(),
                  d_o.data(),
                  d_q.data(),
                  d_k.data(),
                  d_v.data());
    });
    measure::park_blas_threads(); // not spinning beside the oneTBB runs next
    s.progress.step("fused backward" + s.at());
    const AttentionPlan plan = plan_attention<float>(s.p, Pass::backward, {}, opts);
    const double fused_s = measure::median_seconds(
        s.o.repeat, [&] { (void)attention_backward(args, {}, plan, opts); });
    s.all.rows.push_back({"naive-blas backward",
                          n,
                          d,
                          "-",
                          naive_s,
                          flops / naive_s * 1e-9,
                          0.0,
                          1.0,
                          s.backward_bound});
    s.all.rows.push_back({"fused backward",
                          n,
                          d,
                          s.tiling_of(plan),
                          fused_s,
                          flops / fused_s * 1e-9,
                          0.0,
                          naive_s / fused_s,
                          s.backward_bound});
}

} // namespace

void run_dense_suite(const DenseSuiteOptions& o) {
    const std::optional<PlotFiles> files =
        o.plot.empty() ? std::nullopt : std::optional(plot_files(o.plot, kDenseSuiteWhere));
    const std::vector<std::int64_t> ns =
        o.quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{1024, 4096};
    const std::vector<std::int64_t> ds{64, 128};
    const int threads = o.threads;
    Progress progress(2 + 6 * static_cast<int>(ns.size() * ds.size()));
    DenseRows all;

    progress.step("sgemm 2048^3 and the FMA peak (roofline)");
    const Roofline roof = measure_roofline(threads, o.repeat);
    const double peak = roof.gemm_gflops;
    all.rows.push_back({"sgemm-2048 (roofline)",
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
    const AttentionOptions opts = measure::timed_options(
        Schedule::fused, MemoryModel::per_core_l2(sizeof(float)), threads, "ioattn bench");

    double naive_wins[2] = {0, 0};
    for (std::int64_t n : ns)
        for (std::int64_t d : ds) {
            Problem p;
            p.batch = 1;
            p.heads = 8;
            p.n_q = n;
            p.n_k = n;
            p.d = d;
            p = p.resolved(kDenseSuiteWhere);
            Shape s{o,
                    p,
                    measure::ForwardData<float>(p, o.seed),
                    time_bound(p, Pass::forward, l2, machine).seconds(),
                    time_bound(p, Pass::backward, l2, machine).seconds(),
                    progress,
                    all};
            naive_wins[forward_rows(s, opts)] += 1;
            backward_rows(s, opts);
        }
    progress.finish();
    bool below_bound = false;
    for (Result& r : all.rows) {
        r.ratio = r.gflops / peak;
        below_bound = below_bound || (r.bound_seconds > 0 && r.seconds < r.bound_seconds);
    }
    const std::string faster = naive_wins[0] >= naive_wins[1] ? "heads-parallel" : "blas-threads";
    print_dense(o, all, roof, machine, faster, below_bound);
    if (files)
        render_bench_plot(dense_plot(all.rows, threads), roof, *files);
}

} // namespace ioattn::app
