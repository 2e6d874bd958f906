#pragma once
// `ioattn io --pattern SPEC`: the counted I/O of each variant of the sparse fused schedule
// (tile, element, split, permuted; variants.hpp) and of the materializing one across a sweep of
// M, against the sparse lower bound, with the variant the planner picks.

#include "options.hpp"

#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <string>

namespace ioattn::app {

/// Prints the sweep M = lo, 2 lo, ... <= hi (table, CSV or JSON per `o`). With `dry_run`, each
/// plan is also walked by DryRunCounter and must equal its closed form (CheckFailed otherwise).
/// A non-empty `plot` (FILE.svg) draws every variant's words, the io objective's and the bound
/// against M, with M* and the measured crossover marked (plot.hpp).
void run_sparse_io(const SharedOptions& o,
                   const Problem& p,
                   Pass pass,
                   std::int64_t lo,
                   std::int64_t hi,
                   bool dry_run,
                   const std::string& plot = {});

} // namespace ioattn::app
