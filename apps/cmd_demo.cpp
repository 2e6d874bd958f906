// ioattn demo: a short tour on built-in seeded inputs (no files, well under a minute):
// 1. the three schedules agree with the double reference; 2. counted I/O equals the closed
// form and sits above the lower bounds, in both regimes; 3. which schedule each rule picks for
// M around d^2, and the measured crossover; 4. a timing line.

#include "check.hpp"
#include "commands.hpp"
#include "output.hpp"

#include <ioattn/dense.hpp>

#include <iostream>
#include <memory>
#include <string>

#include <bench_util.hpp>

namespace ioattn::app {

namespace {

struct DemoOptions {
    int threads = 0;
    std::uint64_t seed = 42;
};

void correctness(const DemoOptions& o) {
    Problem p;
    p.batch = 1;
    p.heads = 4;
    p.kv_heads = 2;
    p.n_q = 300;
    p.n_k = 300;
    p.d = 64;
    p.causal = true;
    p = p.resolved("demo");
    std::cout << "1. Agreement with the double reference (float; B=1, H=4 sharing 2 KV heads, "
                 "N=300, d=64, causal)\n";
    const MemoryModel mem = MemoryModel::per_core_l2(sizeof(float));
    bench::ForwardData<float> data(p, o.seed);
    const Reference ref = reference_of(data, o.threads);
    Table t({"schedule", "tiling", "max_abs_error", "naive float", "error_ratio", "passed"});
    for (Schedule s : {Schedule::reference, Schedule::fused, Schedule::materialized}) {
        const Tiling tiling =
            s == Schedule::reference ? Tiling{s, p.n_q, p.n_k} : Tiling::tuned(s, mem, p);
        NullCounter c;
        with_threads(o.threads, [&] { dense::forward(data.args(), tiling, mem, c); });
        const CheckResult r = check_forward(data, ref, o.threads);
        t.add({std::string(to_string(s)),
               s == Schedule::reference
                   ? "-"
                   : std::to_string(tiling.rows) + "x" + std::to_string(tiling.cols),
               sig(r.max_abs_error),
               sig(r.naive_error),
               fixed(r.error_ratio, 3),
               r.passed ? "yes" : "NO"});
    }
    t.print(std::cout);
}

void counted_io(const DemoOptions& o) {
    Problem p;
    p.batch = 1;
    p.heads = 2;
    p.n_q = 512;
    p.n_k = 512;
    p.d = 32;
    p = p.resolved("demo");
    const std::int64_t d2 = p.d * p.d;
    std::cout << "\n2. Counted I/O (IoCounter) = closed form io_cost >= bounds (B=1, H=2, N=512, "
                 "d=32, d^2="
              << d2 << ")\n";
    bench::ForwardData<float> data(p, o.seed);
    Table t({"M",
             "regime",
             "schedule",
             "tiling",
             "counted",
             "= io_cost",
             "peak<=M",
             "bound",
             "explicit",
             "counted/bound"});
    for (std::int64_t m : {d2 / 4, 4 * d2}) {
        const MemoryModel mem{m};
        const Bound b = forward_bound(p, mem);
        for (Schedule s : {Schedule::fused, Schedule::materialized}) {
            const auto tiling = Tiling::try_for_memory(s, mem, p);
            if (!tiling)
                continue;
            IoCounter counter(m);
            with_threads(o.threads, [&] { dense::forward(data.args(), *tiling, mem, counter); });
            const IoReport r = counter.report();
            t.add({std::to_string(m),
                   std::string(b.regime),
                   std::string(to_string(s)),
                   std::to_string(tiling->rows) + "x" + std::to_string(tiling->cols),
                   std::to_string(r.total()),
                   r == io_cost_forward(p, *tiling) ? "yes" : "NO",
                   r.peak <= m ? "yes" : "NO",
                   fixed(b.asymptotic(), 0),
                   fixed(b.explicit_bound, 0),
                   fixed(static_cast<double>(r.total()) / b.asymptotic(), 2)});
        }
    }
    t.print(std::cout);
}

void selection() {
    Problem p;
    p.batch = 1;
    p.heads = 1;
    p.n_q = 4096;
    p.n_k = 4096;
    p.d = 64;
    p = p.resolved("demo");
    const std::int64_t d2 = p.d * p.d;
    std::cout << "\n3. Which schedule moves fewer words (N=4096, d=64, d^2=" << d2 << ")\n";
    Table t({"M", "M/d^2", "fused io", "materialized io", "cost picks", "theory picks"});
    for (std::int64_t m : {d2 / 16, d2 / 4, d2, 4 * d2, 16 * d2}) {
        const MemoryModel mem{m};
        const auto cost_of = [&](Schedule s) {
            const auto tiling = Tiling::try_for_memory(s, mem, p);
            return tiling ? std::to_string(io_cost_forward(p, *tiling).total()) : std::string("-");
        };
        t.add({std::to_string(m),
               sig(static_cast<double>(m) / static_cast<double>(d2)),
               cost_of(Schedule::fused),
               cost_of(Schedule::materialized),
               std::string(to_string(select_schedule(p, mem, Select::cost))),
               std::string(to_string(select_schedule(p, mem, Select::theory)))});
    }
    t.print(std::cout);
    const std::int64_t x = measured_crossover(p, Pass::forward, 4 * p.d, p.n_k * p.d);
    std::cout << "measured crossover: M = " << x
              << " words = " << fixed(static_cast<double>(x) / static_cast<double>(d2), 3)
              << " d^2 (the papers' crossover is M = d^2)\n";
}

void timing(const DemoOptions& o) {
    Problem p;
    p.batch = 1;
    p.heads = 8;
    p.n_q = 2048;
    p.n_k = 2048;
    p.d = 64;
    p = p.resolved("demo");
    const MemoryModel mem = MemoryModel::per_core_l2(sizeof(float));
    const Tiling tiling = Tiling::tuned(Schedule::fused, mem, p);
    bench::ForwardData<float> data(p, o.seed);
    const ForwardArgs<float> args = data.args();
    const double s = bench::median_seconds(5, [&] {
        NullCounter c;
        with_threads(o.threads, [&] { dense::forward(args, tiling, mem, c); });
    });
    const int threads = with_threads(o.threads, [] { return max_concurrency(); });
    std::cout << "\n4. Timing: fused forward, float, B=1, H=8, N=2048, d=64, tiling " << tiling.rows
              << "x" << tiling.cols << ", " << threads << " threads: " << fixed(s * 1e3, 2)
              << " ms (median of 5), " << fixed(flop_count_convention(p) / s * 1e-9, 1)
              << " GFLOP/s\n"
              << "   (ioattn bench --suite dense compares with naive OpenBLAS attention and the "
                 "SGEMM roofline)\n";
}

} // namespace

} // namespace ioattn::app

void register_demo(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<DemoOptions>();
    auto* cmd = app.add_subcommand(
        "demo", "A short tour on built-in random inputs: accuracy, counted I/O, selection, speed");
    cmd->add_option("--threads", o->threads, "Worker threads (0: all cores)")
        ->check(CLI::Range(0, 1 << 16))
        ->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the random inputs")->capture_default_str();
    cmd->callback([o] {
        correctness(*o);
        counted_io(*o);
        selection();
        timing(*o);
    });
}
