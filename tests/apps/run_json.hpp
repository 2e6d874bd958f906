#pragma once
// `ioattn run ... --json` for the tests of ioattn_tests_apps (cmd_run_test.cpp,
// cmd_run_sparse_test.cpp): the parsed report of a run that must succeed quietly.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace ioattn::app::test {

/// Runs `ioattn run args... --json`, requires exit 0 and an empty stderr, and parses stdout.
inline nlohmann::json run_json(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    args.emplace_back("--json");
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
    REQUIRE(j.is_object());
    return j;
}

/// A finite number (nlohmann writes NaN and infinities as null).
inline bool finite_number(const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>());
}

} // namespace ioattn::app::test
