// ioattn bench --suite sparse: patterns x N x d x {fused, materialized} x threads {1, 2}, forward
// and backward, each beside the dense fused kernel on the same shape, the GraphBLAS
// pipeline (graphblas_peer.hpp) and the SGEMM 2048^3 roofline, all measured in this run.
// The fused rows run the variant planner's plan (variants.hpp; column `variant`); the
// column `fastest < dense` says, per pattern and pass with Z_QK <= N^2/4, whether the fastest
// sparse schedule (2 threads) took less time than the dense fused kernel on the same shape.
// GFLOP/s counts 4 Z_QK d (backward 2.5x); medians of --repeat runs after a warm-up; B = H = 1.
// Each schedule's 1- and 2-thread runs alternate round by round, and for the fused schedule the
// dense fused kernel's 1- and 2-thread runs on the same shape and pass take turns with them, so
// a noisy phase of the machine hits both: the 2-thread rows print each round's 1-to-2-thread
// ratio (median, min-max) beside the dense kernel's from the same rounds, and whether the sparse
// one reaches 1.8x where the dense one reaches 1.9x.

#include "bench_sparse.hpp"

#include "bench_sparse_rows.hpp"
#include "graphblas_peer.hpp"
#include "machine.hpp"
#include "output.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_stats.hpp>
#include <ioattn/sparse/variants.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <measure.hpp>
#include <timed_call.hpp>
#include <unistd.h>

namespace ioattn::app {

using sparse_suite::Row;
using sparse_suite::Spread;

namespace {

/// Per round, each of fns timed once in turn (after one warm-up call of each): seconds[f][r].
std::vector<std::vector<double>> alternated(int repeat,
                                            const std::vector<std::function<void()>>& fns) {
    for (const auto& fn : fns)
        fn();
    std::vector<std::vector<double>> seconds(fns.size());
    for (int r = 0; r < std::max(repeat, 1); ++r)
        for (std::size_t f = 0; f < fns.size(); ++f)
            seconds[f].push_back(measure::seconds_of(fns[f]));
    return seconds;
}

/// Per round, a[r] / b[r].
std::vector<double> ratios(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> r;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        r.push_back(a[i] / b[i]);
    return r;
}

/// Operands and gradients of one B = H = 1 problem: Q, K, V from `seed`, dO = 0.5.
measure::OwnedArgs<float> bench_data(const Problem& p, std::uint64_t seed) {
    measure::ForwardData<float> f(p, seed);
    measure::OwnedArgs<float> x;
    x.p = f.problem;
    x.q = std::move(f.q);
    x.k = std::move(f.k);
    x.v = std::move(f.v);
    x.o = std::move(f.o);
    x.lse = std::move(f.lse);
    x.d_o.assign(x.o.size(), 0.5F);
    x.d_q.resize(x.q.size());
    x.d_k.resize(x.k.size());
    x.d_v.resize(x.v.size());
    return x;
}

void progress(const std::string& what) {
    const bool tty = isatty(STDERR_FILENO) != 0;
    std::cerr << (tty ? "\r\033[K" : "") << "bench sparse: " << what << (tty ? "" : "\n")
              << std::flush;
}

/// The dense fused kernel on one shape, planned for 1 and 2 threads, forward and backward: the
/// reference each pattern's runs alternate with.
struct DenseRuns {
    measure::OwnedArgs<float>& data;
    const Problem& p;
    AttentionOptions opts[2];
    AttentionPlan fwd[2], bwd[2];

    DenseRuns(measure::OwnedArgs<float>& d, const Problem& problem, const MemoryModel& mem)
        : data(d)
        , p(problem) {
        for (const int t : {1, 2}) {
            const auto at = static_cast<std::size_t>(t - 1);
            opts[at] = measure::timed_options(Schedule::fused, mem, t, "ioattn bench");
            fwd[at] = plan_attention<float>(p, Pass::forward, {}, opts[at]);
            bwd[at] = plan_attention<float>(p, Pass::backward, {}, opts[at]);
        }
    }

    [[nodiscard]] std::function<void()> run(Pass pass, int threads) {
        const auto at = static_cast<std::size_t>(threads - 1);
        if (pass == Pass::forward)
            return [this, at] { (void)attention(data.forward(), {}, fwd[at], opts[at]); };
        return [this, at] { (void)attention_backward(data.backward(), {}, bwd[at], opts[at]); };
    }
};

/// One pattern on one shape: its schedules timed, forward and backward, with the verdict
/// against the dense fused kernel's seconds.
struct PatternRun {
    const SparseSuiteOptions& o;
    const Problem& p;
    measure::OwnedArgs<float>& data;
    DenseRuns& dense;
    const MemoryModel& mem;
    double dense_f, dense_b; ///< dense fused seconds, forward and backward (2 threads)
    int repeat;
    double peak;

    void run(const std::string& spec, std::vector<Row>& rows) const {
        const std::int64_t n = p.n_q, d = p.d;
        const sparse::Support s = sparse::parse_pattern(spec, n, n, o.seed);
        const double flops = 4.0 * static_cast<double>(s.z_qk()) * static_cast<double>(d);
        const std::int64_t z_in = sparse::dense_z_input(p);
        const auto pick = [&](Select sel) {
            return std::string(to_string(sparse::select_schedule(p, s, mem, sel, z_in)));
        };
        const std::string theory = pick(Select::theory), cost = pick(Select::cost);
        const std::string where = spec + " N=" + std::to_string(n) + " d=" + std::to_string(d);
        progress(where + " graphblas");
        GraphBlasAttention gb(s, data.q.data(), data.k.data(), data.v.data(), d, d, 2);
        const float scale = static_cast<float>(p.scale);
        const double gb_s = measure::median_seconds(repeat, [&] { gb.run(scale, data.o.data()); });
        Row g{spec,
              n,
              d,
              s.z_qk(),
              sparse::density(s),
              "graphblas",
              "forward",
              2,
              gb_s,
              flops / gb_s * 1e-9,
              flops / gb_s * 1e-9 / peak,
              0,
              1.0,
              theory,
              cost,
              -1,
              0};
        rows.push_back(g);
        Structure<float> structure;
        structure.support = &s;
        for (const Pass pass : {Pass::forward, Pass::backward}) {
            const bool fwd = pass == Pass::forward;
            const std::size_t first = rows.size();
            double fastest = 0;
            for (const Schedule sch : {Schedule::fused, Schedule::materialized}) {
                const bool fused = sch == Schedule::fused;
                // what a user's call runs: the entry point's plan (the variant planner's
                // variants for fused, the tuned tiling), planned once per thread count
                std::vector<AttentionOptions> opts;
                std::vector<AttentionPlan> plans;
                std::vector<std::function<void()>> fns;
                for (const int threads : {1, 2}) {
                    opts.push_back(measure::timed_options(sch, mem, threads, "ioattn bench"));
                    plans.push_back(plan_attention<float>(p, pass, structure, opts.back()));
                }
                for (std::size_t t = 0; t < 2; ++t)
                    fns.emplace_back([&, t] {
                        if (fwd)
                            (void)attention(data.forward(), structure, plans[t], opts[t]);
                        else
                            (void)attention_backward(data.backward(), structure, plans[t], opts[t]);
                    });
                if (fused) { // the dense reference takes turns with the sparse runs
                    fns.push_back(dense.run(pass, 1));
                    fns.push_back(dense.run(pass, 2));
                }
                progress(where + " " + std::string(to_string(sch)) + (fwd ? "" : " backward") +
                         " t=1,2" + (fused ? " + dense" : ""));
                const auto sec = alternated(repeat, fns);
                for (const int threads : {1, 2}) {
                    const auto at = static_cast<std::size_t>(threads - 1);
                    const AttentionPlan& aplan = plans[at];
                    const Tiling& t = aplan.tiling;
                    Row r{spec,
                          n,
                          d,
                          s.z_qk(),
                          sparse::density(s),
                          std::string(to_string(sch)),
                          std::string(to_string(pass)),
                          threads,
                          0,
                          0,
                          0,
                          0,
                          0,
                          theory,
                          cost,
                          -1,
                          0};
                    r.spread = Spread::of(sec[at]);
                    r.seconds = r.spread.median;
                    r.gflops = (fwd ? 1.0 : 2.5) * flops / r.seconds * 1e-9;
                    r.vs_graphblas = fwd ? gb_s / r.seconds : 0;
                    r.roofline = r.gflops / peak;
                    // GFLOP/s over the dense fused kernel's (each with its own flop count)
                    r.vs_dense = r.gflops * 1e9 /
                                 (flop_count_convention(p, pass) / (fwd ? dense_f : dense_b));
                    if (threads == 2) {
                        r.speedup = Spread::of(ratios(sec[0], sec[1]));
                        if (fused) {
                            r.dense_speedup = Spread::of(ratios(sec[2], sec[3]));
                            r.two = r.dense_speedup.median < 1.9 ? "-"
                                    : r.speedup.median >= 1.8    ? "yes"
                                                                 : "NO";
                        }
                    }
                    if (fused && aplan.variants)
                        r.variant = std::string(sparse::to_string(aplan.variants->variant));
                    if (o.count_io) {
                        r.io = fused ? sparse::io_cost<float>(p, s, aplan.variants.value()).total()
                               : fwd ? sparse::io_cost_forward(p, s, t).total()
                                     : sparse::io_cost_backward_materialized(p, s, t).total();
                        if (fwd)
                            r.bound = sparse::forward_bound(p, s, mem, z_in).asymptotic();
                    }
                    if (threads == 2 && (fastest == 0 || r.seconds < fastest))
                        fastest = r.seconds;
                    rows.push_back(r);
                }
            }
            // --- the fastest sparse schedule against the dense fused kernel ---
            const bool quarter = 4 * s.z_qk() <= n * n;
            const std::string beats =
                !quarter ? "-" : (fastest < (fwd ? dense_f : dense_b) ? "yes" : "NO");
            for (std::size_t i = first; i < rows.size(); ++i)
                rows[i].beats = beats;
        }
    }
};

} // namespace

void run_sparse_suite(const SparseSuiteOptions& o) {
    std::vector<std::string> patterns =
        o.quick ? std::vector<std::string>{"window:256", "bigbird:64:2:3", "random:0.02"}
                : std::vector<std::string>{"window:256",
                                           "causal-window:256",
                                           "bigbird:64:2:3",
                                           "bigbird-block:64:3:2:3",
                                           "strided:64",
                                           "dilated:256:4",
                                           "block:64:0.1",
                                           "random:0.02",
                                           "powerlaw:32"};
    std::vector<std::int64_t> ns =
        o.quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{4096, 16384};
    std::vector<std::int64_t> ds =
        o.quick ? std::vector<std::int64_t>{64} : std::vector<std::int64_t>{64, 128};
    if (!o.patterns.empty())
        patterns = o.patterns;
    if (!o.ns.empty())
        ns = o.ns;
    if (!o.ds.empty())
        ds = o.ds;
    const int repeat = o.quick ? 3 : o.repeat;
    progress("sgemm 2048^3 and the FMA peak (roofline)");
    const Roofline roof = measure_roofline(2, repeat);
    const double peak = roof.gemm_gflops;
    std::vector<Row> rows;
    const MemoryModel mem = MemoryModel::per_core_l2(sizeof(float));
    for (const std::int64_t n : ns)
        for (const std::int64_t d : ds) {
            Problem p;
            p.n_q = p.n_k = n;
            p.d = d;
            p = p.resolved("ioattn bench");
            measure::OwnedArgs<float> data = bench_data(p, o.seed);
            // --- the dense fused kernel on the same shape, forward and backward ---
            const AttentionOptions dense_opts =
                measure::timed_options(Schedule::fused, mem, 2, "ioattn bench");
            const AttentionPlan dense_fwd = plan_attention<float>(p, Pass::forward, {}, dense_opts);
            const AttentionPlan dense_bwd =
                plan_attention<float>(p, Pass::backward, {}, dense_opts);
            progress("dense fused N=" + std::to_string(n) + " d=" + std::to_string(d));
            const double dense_fs = measure::median_seconds(
                repeat, [&] { (void)attention(data.forward(), {}, dense_fwd, dense_opts); });
            const double dense_bs = measure::median_seconds(repeat, [&] {
                (void)attention_backward(data.backward(), {}, dense_bwd, dense_opts);
            });
            for (const Pass pass : {Pass::forward, Pass::backward}) {
                const double sec = pass == Pass::forward ? dense_fs : dense_bs;
                const double gf = flop_count_convention(p, pass) / sec * 1e-9;
                rows.push_back({"dense",
                                n,
                                d,
                                n * n,
                                1.0,
                                "fused",
                                std::string(to_string(pass)),
                                2,
                                sec,
                                gf,
                                gf / peak,
                                1.0,
                                0,
                                "-",
                                "-",
                                -1,
                                0});
            }
            DenseRuns dense(data, p, mem);
            const PatternRun run{o, p, data, dense, mem, dense_fs, dense_bs, repeat, peak};
            for (const std::string& spec : patterns)
                run.run(spec, rows);
        }
    if (isatty(STDERR_FILENO) != 0)
        std::cerr << "\r\033[K" << std::flush;
    print_sparse_suite(o, rows, roof);
    if (!o.plot.empty())
        render_bench_plot(
            sparse_suite_plot(rows, ns.size() * ds.size() == 1), roof, plot_files(o.plot, "bench"));
}

} // namespace ioattn::app
