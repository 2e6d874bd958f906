#pragma once
// `ioattn bench --suite decode`: the decode step over a key/value cache against the memory's
// read bandwidth, in one process and run.

#include <cstdint>

namespace ioattn::app {

struct DecodeSuiteOptions {
    bool quick = false; ///< B = 1 with n_k = 16384 and the ragged batch a quarter as long
    bool json = false;
    bool csv = false;
    int threads = 2;
    int repeat = 5;
    std::uint64_t seed = 42;
};

/// Runs the suite and prints the table (or CSV / JSON) on stdout.
void run_decode_suite(const DecodeSuiteOptions& o);

} // namespace ioattn::app
