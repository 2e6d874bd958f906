#pragma once
// `ioattn bound --ranks P|lo:hi --link-bandwidth GB/s`: the distributed time bound and the ring's
// simulated scaling (docs/design.md sections 9 and 12.4). For P ranks the time bound is max(local
// compute bound F_rank / peak, w * words / link bandwidth) with `words` the sharding's lower bound
// of the busiest rank. The simulation takes the ring's exact per-step work and counted words (the
// closed forms) and a measured per-rank kernel rate, overlaps each step's transfer with its
// compute, and predicts the time per pass, the parallel efficiency T_1 / (P T_P) and the rows per
// rank from which the transfers hide under compute.

#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace ioattn::app {

struct DistBoundOptions {
    std::string ranks;          ///< "P" or "lo:hi" (powers of two from lo to hi); empty: off
    double link_gbs = 0;        ///< --link-bandwidth, GB/s per direction of a rank's link
    double link_latency_us = 5; ///< --link-latency, microseconds per message
    double kernel_gflops = 0;   ///< --kernel-gflops; 0: measured now on this machine
    std::string dist = "ring";  ///< --dist ring (contiguous) or zigzag
};

/// The local machine of `bound` (its preset or --bandwidth / --peak).
struct LocalMachine {
    std::int64_t word_bytes = 4;
    double peak_gflops = 0;
    int threads = 0; ///< for measuring the kernel rate
};

/// --ranks, --link-bandwidth, --link-latency, --kernel-gflops, --dist.
void add_dist_bound_options(CLI::App& cmd, DistBoundOptions& o);

/// Prints the bound and the simulation (a table for a range of P). Throws UsageError without
/// --link-bandwidth, InvalidArgument for a bad --ranks or a sequence shorter than the shards.
void run_dist_bound(const DistBoundOptions& o,
                    const Problem& problem,
                    Pass pass,
                    const LocalMachine& machine,
                    bool json);

} // namespace ioattn::app
