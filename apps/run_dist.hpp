#pragma once
// `mpirun -np P ioattn run --dist ring|zigzag|sparse ...`: one problem sharded over the MPI ranks
// (docs/design.md section 12.4). ring: dense (or --causal) attention, contiguous shards; zigzag:
// the same ring with zigzag shards (balanced causal work); sparse: --pattern SPEC through the
// structure-driven exchange. Every rank generates the same seeded inputs and keeps its shard; rank
// 0 prints. --check compares, on rank 0, with a single-process run and the double reference;
// --count-io lists every rank's counted words against the closed forms and the sharding's lower
// bound. Each run also times the communication alone, so the share of it that compute did not hide
// is reported.

#include "options.hpp"

#include <CLI/CLI.hpp>

#include <string>

namespace ioattn::app {

struct DistRun {
    SharedOptions shared;
    std::string dist; ///< ring, zigzag or sparse
    bool check = false;
    bool count_io = false;
    int repeat = 1;
};

/// Adds --dist to `run`.
void add_dist_option(CLI::App& cmd, std::string& dist);

/// Runs the problem on the ranks of MPI_COMM_WORLD (initialising MPI with MPI_THREAD_FUNNELED
/// if needed, finalising it after). Collective; rank 0 prints, the other ranks print nothing
/// (their errors are rank 0's: every check is made on every rank alike). Throws UsageError /
/// InvalidArgument for bad options, CheckFailed (rank 0) when --check or the counted words fail.
void run_distributed(const DistRun& run);

} // namespace ioattn::app
