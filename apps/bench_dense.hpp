#pragma once
// `ioattn bench --suite dense`: the fused forward and backward (fp32, B = 1, H = 8) against
// naive attention on OpenBLAS, the same-run SGEMM roofline and FMA peak, and the bf16 rows.

#include <cstdint>
#include <string>

namespace ioattn::app {

struct DenseSuiteOptions {
    bool quick = false; ///< N = 1024 only
    bool json = false;
    bool csv = false;
    int threads = 2;
    int repeat = 5;
    std::uint64_t seed = 42;
    std::string plot; ///< FILE.svg of the bar plot, or empty
};

/// Runs the suite and prints the table (or CSV / JSON) on stdout; with a plot, draws it.
void run_dense_suite(const DenseSuiteOptions& o);

} // namespace ioattn::app
