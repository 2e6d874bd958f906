#pragma once
// The rows of `ioattn bench --suite sparse` (bench_sparse.cpp runs them) and their report
// (bench_sparse_report.cpp): the table, CSV or JSON, and the bar plot.

#include "bench_sparse.hpp"
#include "output.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::app::sparse_suite {

/// Median, least and largest of a sample.
struct Spread {
    double median = 0, min = 0, max = 0;

    static Spread of(std::vector<double> x) {
        if (x.empty())
            return {};
        std::sort(x.begin(), x.end());
        const std::size_t n = x.size();
        return {n % 2 == 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]), x.front(), x.back()};
    }

    [[nodiscard]] std::string text(int digits) const {
        return fixed(median, digits) + " (" + fixed(min, digits) + "-" + fixed(max, digits) + ")";
    }

    [[nodiscard]] nlohmann::json json() const {
        return {{"median", median}, {"min", min}, {"max", max}};
    }
};

struct Row {
    std::string pattern;
    std::int64_t n = 0, d = 0, z_qk = 0;
    double density = 0;
    std::string schedule, pass;
    int threads = 0;
    double seconds = 0, gflops = 0, roofline = 0, vs_dense = 0, vs_graphblas = 0;
    std::string theory, cost;
    std::int64_t io = -1;
    double bound = 0;
    std::string variant = "-", beats = "-";
    Spread spread = {};        ///< seconds over the rounds
    Spread speedup = {};       ///< 2-thread rows: per round, 1-thread over 2-thread seconds
    Spread dense_speedup = {}; ///< the same for the dense fused kernel in the same rounds
    std::string two = "-";     ///< 2-thread rows: speedup >= 1.8 where dense's >= 1.9 (yes, NO)
};

/// Prints the rows as the table (or CSV / JSON per `o`) on stdout.
void print_sparse_suite(const SparseSuiteOptions& o,
                        const std::vector<Row>& rows,
                        const Roofline& roof);

/// The forward and backward GFLOP/s of each pattern on 2 threads, beside the dense fused
/// kernel's on the same shape and pass; `one_shape`: the groups omit N and d.
BarPlot sparse_suite_plot(const std::vector<Row>& rows, bool one_shape);

} // namespace ioattn::app::sparse_suite
