#pragma once
// The dense I/O sweep of `ioattn io` and `ioattn demo`: for M = lo, 2 lo, 4 lo, ... <= hi, the
// closed-form I/O of each schedule's tiling (io_cost), checked by a dry run of the kernel when
// the walk is small, against both lower bounds, with the schedule each selection rule picks;
// and the sweep as a log-log plot (plot.hpp).

#include "plot.hpp"

#include <ioattn/io_cost.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ioattn::app {

/// Bytes of an element (docs/design.md section 16): of the operand streams (Q, K, V, O and
/// their gradients) and of every other stream (L, statistics, stored S and P, partial sums).
/// float: 4, 4; double: 8, 8; bf16: 2, 4.
struct ElementBytes {
    std::int64_t operand = 4;
    std::int64_t word = 4;
};

/// One schedule at one M.
struct SweepPoint {
    std::optional<Tiling> tiling; ///< nullopt: no tiling of the schedule fits M
    IoReport cost;                ///< io_cost of the tiling
    std::string dry = "-";        ///< "=" the dry run agrees, "!=" it differs, "-" skipped
    std::int64_t bytes = -1;      ///< the dry run's counted bytes; -1 when skipped
};

/// One M of the sweep.
struct SweepRow {
    std::int64_t m = 0;
    Bound bound;
    SweepPoint fused, mat;
    std::string cost_choice = "-", theory_choice = "-"; ///< "-": no schedule fits M
};

/// The sweep over M = lo, 2 lo, ... <= hi (at least lo). A dry run checks each point whose walk
/// visits at most 2e7 tiles when `dry_run`, and counts its bytes at `sizes`.
std::vector<SweepRow> io_sweep(const Problem& problem,
                               Pass pass,
                               std::int64_t lo,
                               std::int64_t hi,
                               bool dry_run,
                               ElementBytes sizes = {});

/// The io objective's words at a row: the fewer of the two schedules' (NaN: neither fits). The
/// schedules' I/O-optimal tilings (Tiling::for_memory) are non-increasing in M already.
double fewest_or_nan(const SweepRow& r);

/// Whether a dry run of the sweep differed from its closed form.
bool any_dry_run_differs(const std::vector<SweepRow>& rows);

/// The log-log plot of a sweep: fused and materialized I/O, the io objective's (the fewer),
/// the bound max(compulsory,
/// leading) and the explicit bound against M, vertical lines at d^2 and at `crossover`
/// (0: none).
LinePlot io_sweep_plot(const Problem& problem,
                       Pass pass,
                       const std::vector<SweepRow>& rows,
                       std::int64_t crossover);

} // namespace ioattn::app
