#pragma once
// The text report of `ioattn run --dist` (run_dist_report.cpp).

#include "run_dist.hpp"

#include <nlohmann/json.hpp>

namespace ioattn::app {

/// Prints the run's JSON `j` as text on standard output (rank 0).
void print_dist_text(const nlohmann::json& j, const DistRun& r);

} // namespace ioattn::app
