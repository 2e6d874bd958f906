// The dense parts of `ioattn demo` (demo.hpp): 1. forward and backward of both schedules
// against the double reference with their counted I/O; 2. the I/O sweep over M with the
// crossover (and its plot); 5. the fused forward timed against naive attention on OpenBLAS.

#include "demo.hpp"
#include "io_sweep.hpp"
#include "output.hpp"
#include "run_variants.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include <measure.hpp>
#include <timed_call.hpp>

namespace ioattn::app {

namespace {

std::string tile_of(const nlohmann::json& run) {
    const nlohmann::json& t = run.at("tiling");
    return std::to_string(t.at("rows").get<std::int64_t>()) + "x" +
           std::to_string(t.at("cols").get<std::int64_t>());
}

/// B = 1, `heads` heads, n_q = n_k = n, head dimension d, resolved.
Problem square(std::int64_t heads, std::int64_t n, std::int64_t d) {
    Problem p;
    p.batch = 1;
    p.heads = heads;
    p.n_q = p.n_k = n;
    p.d = d;
    return p.resolved("demo");
}

/// One bf16 line: the fused forward of `p` with bf16 operands (fp32 arithmetic and L), checked
/// against the double reference on the bf16-rounded inputs, its I/O counted.
bool demo_bf16(const DemoOptions& o, const Problem& p, nlohmann::json& part, bool text) {
    VariantRun r;
    r.problem = p;
    r.memory = MemoryModel{4 * p.d * p.d};
    r.schedule = "fused";
    r.threads = o.threads;
    r.seed = o.seed;
    r.check = true;
    r.count_io = true;
    const nlohmann::json j = run_bf16(r);
    const nlohmann::json& c = j.at("check");
    const nlohmann::json& io = j.at("io");
    const bool ok = c.at("passed").get<bool>() && io.at("matches_closed_form").get<bool>();
    part["bf16"] = {
        {"pass", "forward"}, {"schedule", "fused"}, {"check", c}, {"io", io}, {"passed", ok}};
    if (text)
        std::cout << "bf16 operands (fp32 arithmetic and L), fused forward: max_abs_error "
                  << sig(c.at("max_abs_error").get<double>()) << " within "
                  << sig(c.at("tolerance").get<double>())
                  << " (2^-8 max|O| + fp32 sums): " << (c.at("passed").get<bool>() ? "yes" : "NO")
                  << "; counted I/O " << grouped(io.at("total").get<std::int64_t>())
                  << " words = io_cost: "
                  << (io.at("matches_closed_form").get<bool>() ? "yes" : "NO") << '\n';
    return ok;
}

} // namespace

nlohmann::json demo_dense(const DemoOptions& o, bool text) {
    Problem p; // grouped-query heads, causal, a ragged last tile
    p.batch = 1;
    p.heads = 4;
    p.kv_heads = 2;
    p.n_q = 300;
    p.n_k = 300;
    p.d = 64;
    p.causal = true;
    p = p.resolved("demo");
    const std::int64_t d2 = p.d * p.d;
    nlohmann::json part = {{"problem",
                            {{"batch", p.batch},
                             {"heads", p.heads},
                             {"kv_heads", p.kv_heads},
                             {"n_q", p.n_q},
                             {"n_k", p.n_k},
                             {"d", p.d},
                             {"causal", p.causal}}},
                           {"runs", nlohmann::json::array()}};
    Table t({"pass",
             "schedule",
             "M",
             "tiling",
             "max_abs_error",
             "error_ratio",
             "check",
             "counted I/O",
             "= io_cost",
             "counted/bound"});
    bool passed = true;
    for (const Pass pass : {Pass::forward, Pass::backward})
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            VariantRun r; // fused at M = 4 d^2 (large cache), materialized at M = d^2 / 2
            r.problem = p;
            r.memory = MemoryModel{s == Schedule::fused ? 4 * d2 : d2 / 2};
            r.pass = pass;
            r.schedule = std::string(to_string(s));
            r.threads = o.threads;
            r.seed = o.seed;
            r.check = true;
            r.count_io = true;
            const nlohmann::json j = run_variant<float>(r);
            const nlohmann::json& c = j.at("check");
            const nlohmann::json& io = j.at("io");
            const bool ok = c.at("passed").get<bool>() && io.at("matches_closed_form").get<bool>();
            passed = passed && ok;
            part["runs"].push_back({{"pass", std::string(to_string(pass))},
                                    {"schedule", r.schedule},
                                    {"M", j.at("M")},
                                    {"tiling", j.at("tiling")},
                                    {"check", c},
                                    {"io", io},
                                    {"passed", ok}});
            t.add({std::string(to_string(pass)),
                   r.schedule,
                   std::to_string(j.at("M").get<std::int64_t>()),
                   tile_of(j),
                   sig(c.at("max_abs_error").get<double>()),
                   fixed(c.at("error_ratio").get<double>(), 3),
                   c.at("passed").get<bool>() ? "yes" : "NO",
                   grouped(io.at("total").get<std::int64_t>()),
                   io.at("matches_closed_form").get<bool>() ? "yes" : "NO",
                   fixed(io.at("ratio_to_bound").get<double>(), 2)});
        }
    if (text)
        t.print(std::cout);
    const bool bf16_ok = demo_bf16(o, p, part, text);
    part["passed"] = passed && bf16_ok;
    return part;
}

nlohmann::json demo_io_sweep(const DemoOptions& o, bool text) {
    const Problem p = square(1, 4096, 64);
    const std::int64_t d2 = p.d * p.d;
    const std::int64_t lo = 4 * p.d, hi = p.n_k * p.d;
    const std::vector<SweepRow> rows = io_sweep(p, Pass::forward, lo, hi, true);
    const std::int64_t x = measured_crossover(p, Pass::forward, lo, hi);
    const bool agree = !any_dry_run_differs(rows);
    nlohmann::json part = {{"problem", {{"n_q", p.n_q}, {"n_k", p.n_k}, {"d", p.d}}},
                           {"d_squared", d2},
                           {"crossover", x == 0 ? nlohmann::json(nullptr) : nlohmann::json(x)},
                           {"dry_runs_agree", agree},
                           {"rows", nlohmann::json::array()}};
    Table t(
        {"M", "M/d^2", "fused io", "mat io", "bound", "explicit", "cost picks", "theory picks"});
    const auto total = [](const SweepPoint& pt) {
        return pt.tiling ? nlohmann::json(pt.cost.total()) : nlohmann::json(nullptr);
    };
    const auto cell = [](const SweepPoint& pt) {
        return pt.tiling ? sig(static_cast<double>(pt.cost.total())) : std::string("-");
    };
    for (const SweepRow& r : rows) {
        part["rows"].push_back({{"M", r.m},
                                {"fused", total(r.fused)},
                                {"materialized", total(r.mat)},
                                {"bound", r.bound.asymptotic()},
                                {"explicit", r.bound.explicit_bound},
                                {"cost_choice", r.cost_choice},
                                {"theory_choice", r.theory_choice}});
        t.add({std::to_string(r.m),
               sig(static_cast<double>(r.m) / static_cast<double>(d2)),
               cell(r.fused),
               cell(r.mat),
               sig(r.bound.asymptotic()),
               sig(r.bound.explicit_bound),
               r.cost_choice,
               r.theory_choice});
    }
    part["plot"] = nullptr;
    if (text) {
        t.print(std::cout);
        std::cout << "measured crossover: "
                  << (x == 0
                          ? std::string("none in range")
                          : "M = " + std::to_string(x) + " words = " +
                                fixed(static_cast<double>(x) / static_cast<double>(d2), 3) + " d^2")
                  << " (the papers put it at M = d^2 = " << d2
                  << "); every dry run of a kernel equals its closed form: "
                  << (agree ? "yes" : "NO") << '\n';
    }
    if (!o.plot.empty()) {
        const PlotFiles files = plot_files(o.plot, "demo");
        if (gnuplot_available()) {
            render(io_sweep_plot(p, Pass::forward, rows, x), files, "demo");
            part["plot"] = files.svg;
            if (text)
                std::cout << "plot: " << files.svg << " (data " << files.csv << ", script "
                          << files.script << ")\n";
        } else if (text) {
            std::cout << "plot: skipped, gnuplot is not on PATH (Debian: gnuplot-nox)\n";
        }
    }
    part["passed"] = agree && x != 0;
    return part;
}

nlohmann::json demo_speed(const DemoOptions& o, bool text) {
    const Problem p = square(8, 1024, 64);
    const int threads = with_threads(o.threads, [] { return max_concurrency(); });
    // through the library's entry point, planned once, as a user's loop calls it
    const AttentionOptions opts = measure::timed_options(
        Schedule::fused, MemoryModel::per_core_l2(sizeof(float)), threads, "ioattn demo");
    const AttentionPlan plan = plan_attention<float>(p, Pass::forward, {}, opts);
    const Tiling& tiling = plan.tiling;
    measure::ForwardData<float> data(p, o.seed);
    const ForwardArgs<float> args = data.args();
    const double fused_s =
        measure::median_seconds(3, [&] { (void)attention(args, {}, plan, opts); });
    const std::vector<float> fused_o = data.o;
    measure::NaiveAttention naive(p, measure::NaiveMode::heads_parallel, threads);
    const double naive_s = measure::median_seconds(
        3, [&] { naive.run(data.q.data(), data.k.data(), data.v.data(), data.o.data()); });
    double diff = 0; // both compute the same O in float: they agree to rounding
    for (std::size_t i = 0; i < fused_o.size(); ++i)
        diff = std::max(diff, static_cast<double>(std::fabs(fused_o[i] - data.o[i])));
    const double flops = flop_count_convention(p);
    constexpr double kAgree = 1e-4;
    nlohmann::json part = {{"problem", {{"heads", p.heads}, {"n", p.n_q}, {"d", p.d}}},
                           {"threads", threads},
                           {"tiling", {{"rows", tiling.rows}, {"cols", tiling.cols}}},
                           {"fused_seconds", fused_s},
                           {"fused_gflops", flops / fused_s * 1e-9},
                           {"naive_seconds", naive_s},
                           {"naive_gflops", flops / naive_s * 1e-9},
                           {"max_abs_difference", diff},
                           {"passed", diff <= kAgree}};
    if (text) {
        Table t({"kernel", "ms (median of 3)", "GFLOP/s", "x naive"});
        t.add({"fused " + std::to_string(tiling.rows) + "x" + std::to_string(tiling.cols),
               fixed(fused_s * 1e3, 1),
               fixed(flops / fused_s * 1e-9, 1),
               fixed(naive_s / fused_s, 2)});
        t.add({"naive OpenBLAS (heads parallel)",
               fixed(naive_s * 1e3, 1),
               fixed(flops / naive_s * 1e-9, 1),
               "1.00"});
        t.print(std::cout);
        std::cout << "max |O_fused - O_naive| = " << sig(diff) << " (<= " << sig(kAgree) << ": "
                  << (diff <= kAgree ? "yes" : "NO") << "), " << threads << " threads\n";
    }
    return part;
}

} // namespace ioattn::app
