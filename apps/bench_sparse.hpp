#pragma once
// `ioattn bench --suite sparse`: the sparse benchmark suite, in one process and run.

#include "machine.hpp"
#include "plot.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::app {

struct SparseSuiteOptions {
    bool quick = false; ///< N = 4096, d = 64, three patterns, 3 runs: about 30 seconds
    bool json = false;
    bool csv = false;
    bool count_io = false; ///< add the counted I/O of each row (dry run) and its bound
    int repeat = 5;
    std::uint64_t seed = 42;
    std::string plot;                  ///< --plot FILE.svg; empty: none
    std::vector<std::int64_t> ns;      ///< --N: the sequence lengths (empty: the suite's)
    std::vector<std::int64_t> ds;      ///< --d: the head dimensions (empty: the suite's)
    std::vector<std::string> patterns; ///< --patterns: the specs (empty: the suite's)
};

/// Runs the suite and prints the table (or CSV / JSON) on stdout, progress on stderr.
void run_sparse_suite(const SparseSuiteOptions& o);

/// --plot of both suites: `plot` with the same-run SGEMM roofline and the FMA peak as
/// horizontal lines, rendered to `files` (plot.hpp); says so on stderr.
void render_bench_plot(BarPlot plot, const Roofline& roof, const PlotFiles& files);

} // namespace ioattn::app
