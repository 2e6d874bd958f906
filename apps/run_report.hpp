#pragma once
// The report of `ioattn run` as text and CSV, from the JSON the run builds (cmd_run.cpp): the
// problem, M and the plan, the time, the check, the counted I/O beside its closed form and the
// bounds.

#include "options.hpp"

#include <nlohmann/json.hpp>

namespace ioattn::app {

/// The human-readable report on stdout; `repeat` calls were timed.
void print_run_text(const nlohmann::json& j, const SharedOptions& shared, int repeat);

/// One header and one row of the report's scalar fields on stdout.
void print_run_csv(const nlohmann::json& j);

} // namespace ioattn::app
