#pragma once
// `ioattn bench --suite sparse`: the sparse benchmark suite (issue 4), in one process and run.

#include <cstdint>

namespace ioattn::app {

struct SparseSuiteOptions {
    bool quick = false; ///< N = 4096, d = 64, three patterns, 3 runs: about 30 seconds
    bool json = false;
    bool csv = false;
    bool count_io = false; ///< add the counted I/O of each row (dry run) and its bound
    int repeat = 5;
    std::uint64_t seed = 42;
};

/// Runs the suite and prints the table (or CSV / JSON) on stdout, progress on stderr.
void run_sparse_suite(const SparseSuiteOptions& o);

} // namespace ioattn::app
