// The report of `ioattn bench --suite sparse` (see bench_sparse_rows.hpp) and the bar plot of
// both suites (bench_sparse.hpp).

#include "bench_sparse_rows.hpp"

#include <iostream>

namespace ioattn::app {

namespace sparse_suite {

void print_sparse_suite(const SparseSuiteOptions& o,
                        const std::vector<Row>& rows,
                        const Roofline& roof) {
    const double peak = roof.gemm_gflops;
    if (o.json) {
        nlohmann::json j;
        j["suite"] = "sparse";
        j["dtype"] = "float";
        add_roofline_json(j, roof);
        j["repeat"] = o.repeat;
        j["rows"] = nlohmann::json::array();
        for (const Row& r : rows)
            j["rows"].push_back({{"pattern", r.pattern},
                                 {"N", r.n},
                                 {"d", r.d},
                                 {"z_qk", r.z_qk},
                                 {"density", r.density},
                                 {"schedule", r.schedule},
                                 {"pass", r.pass},
                                 {"threads", r.threads},
                                 {"seconds", r.seconds},
                                 {"gflops", r.gflops},
                                 {"roofline", r.roofline},
                                 {"ratio_to_peak", r.gflops / roof.peak_gflops},
                                 {"vs_dense_fused", r.vs_dense},
                                 {"vs_graphblas", r.vs_graphblas},
                                 {"theory_choice", r.theory},
                                 {"cost_choice", r.cost},
                                 {"io", r.io < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.io)},
                                 {"bound", r.bound},
                                 {"variant", r.variant},
                                 {"fastest_beats_dense", r.beats},
                                 {"seconds_spread", r.spread.json()},
                                 {"speedup_1to2", r.speedup.json()},
                                 {"dense_speedup_1to2", r.dense_speedup.json()},
                                 {"two_threads_ok", r.two}});
        std::cout << j.dump(2) << '\n';
        return;
    }
    std::vector<std::string> head{
        "pattern",   "N",      "d",       "Z_QK",           "density", "schedule",
        "variant",   "pass",   "thr",     "seconds",        "min-max", "1:2",
        "dense 1:2", "1:2 ok", "GFLOP/s", "% roof",         "% peak",  "vs dense",
        "vs GrB",    "theory", "cost",    "fastest < dense"};
    if (o.count_io) {
        head.emplace_back("I/O");
        head.emplace_back("bound");
    }
    Table t(head);
    for (const Row& r : rows) {
        std::vector<std::string> cells{
            r.pattern,
            std::to_string(r.n),
            std::to_string(r.d),
            grouped(r.z_qk),
            fixed(100 * r.density, 2) + "%",
            r.schedule,
            r.variant,
            r.pass,
            std::to_string(r.threads),
            sig(r.seconds),
            r.spread.max > 0 ? sig(r.spread.min) + "-" + sig(r.spread.max) : "-",
            r.speedup.median > 0 ? r.speedup.text(2) : "-",
            r.dense_speedup.median > 0 ? r.dense_speedup.text(2) : "-",
            r.two,
            fixed(r.gflops, 1),
            fixed(100 * r.roofline, 1),
            fixed(100 * r.gflops / roof.peak_gflops, 1),
            r.vs_dense > 0 ? fixed(r.vs_dense, 2) : "-",
            r.vs_graphblas > 0 ? fixed(r.vs_graphblas, 1) : "-",
            r.theory,
            r.cost,
            r.beats};
        if (o.count_io) {
            cells.push_back(r.io < 0 ? "-" : grouped(r.io));
            cells.push_back(r.bound > 0 ? sig(r.bound) : "-");
        }
        t.add(cells);
    }
    if (o.csv) {
        t.print_csv(std::cout);
        return;
    }
    std::cout << "ioattn bench --suite sparse: fp32, B = H = 1, median of " << o.repeat
              << " alternated rounds (min-max: their spread); 1:2 = per round, 1-thread over "
                 "2-thread seconds, median (min-max), dense 1:2 the dense fused kernel's in the "
                 "same rounds, 1:2 ok = 1:2 >= 1.8 where dense 1:2 >= 1.9; GFLOP/s = 4 Z_QK d "
                 "(backward 2.5x); % roof = of SGEMM 2048^3 ("
              << fixed(peak, 1)
              << " GFLOP/s, 2 threads) in this run; % peak = of the FMA peak; vs dense = GFLOP/s "
                 "over the dense fused kernel's; vs GrB = time of the GraphBLAS pipeline over "
                 "this time\n";
    print_roofline(std::cout, roof);
    t.print(std::cout);
}

BarPlot sparse_suite_plot(const std::vector<Row>& rows, bool one_shape) {
    std::vector<Bar> bars;
    std::vector<const Row*> dense;
    for (const Row& r : rows) {
        if (r.threads != 2)
            continue;
        if (r.pattern == "dense") {
            dense.push_back(&r);
            continue;
        }
        const std::string group =
            r.pattern + (r.pass == "forward" ? " fwd" : " bwd") +
            (one_shape ? std::string() : " N=" + std::to_string(r.n) + " d=" + std::to_string(r.d));
        bars.push_back({group, r.schedule, r.gflops});
        for (const Row* dr : dense)
            if (dr->n == r.n && dr->d == r.d && dr->pass == r.pass)
                bars.push_back({group, "dense fused", dr->gflops});
    }
    return bar_plot_of("ioattn bench --suite sparse: fp32, B = H = 1, 2 threads, GFLOP/s = 4 "
                       "Z_QK d (backward 2.5x)",
                       "GFLOP/s",
                       bars);
}

} // namespace sparse_suite

void render_bench_plot(BarPlot plot, const Roofline& roof, const PlotFiles& files) {
    plot.y_marks.push_back(
        {roof.gemm_gflops, "SGEMM 2048^3 roofline " + fixed(roof.gemm_gflops, 1) + " GFLOP/s"});
    plot.y_marks.push_back(
        {roof.peak_gflops, "FMA peak " + fixed(roof.peak_gflops, 1) + " GFLOP/s"});
    render(plot, files, "bench");
    std::cerr << "ioattn bench: wrote " << files.svg << " (data " << files.csv << ", script "
              << files.script << ")\n";
}

} // namespace ioattn::app
