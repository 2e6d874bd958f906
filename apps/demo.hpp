#pragma once
// The parts of `ioattn demo` (cmd_demo.cpp): each runs on built-in seeded inputs, prints its
// table when `text` (the opening paragraph and the next command are cmd_demo.cpp's) and
// returns its results as JSON, with "passed" true iff every check in it held.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace ioattn::app {

struct DemoOptions {
    int threads = 0;
    std::uint64_t seed = 42;
    std::string plot; ///< --plot FILE.svg for the I/O sweep; empty: none
    bool json = false;
};

/// 1. The dense forward and backward of both schedules against the double reference, each
/// with its counted I/O against the closed form and the bound.
nlohmann::json demo_dense(const DemoOptions& o, bool text);

/// 2. The I/O sweep over M around d^2: both schedules, both bounds, the picks, the crossover,
/// and the plot when --plot was given.
nlohmann::json demo_io_sweep(const DemoOptions& o, bool text);

/// 3. A sparse pattern: checked against the reference, then timed against the GraphBLAS
/// pipeline (whose output it must match) and against the dense fused kernel on the same shape.
nlohmann::json demo_sparse(const DemoOptions& o, bool text);

/// 4. The finite-field verifier's quick experiments (needs the NTL build; else skipped).
nlohmann::json demo_verify(const DemoOptions& o, bool text);

/// 5. The dense fused forward timed against naive attention on OpenBLAS (same output).
nlohmann::json demo_speed(const DemoOptions& o, bool text);

/// 6. Decode over a paged cache: checked, its I/O exact, timed against the read bandwidth.
nlohmann::json demo_decode(const DemoOptions& o, bool text);

} // namespace ioattn::app
