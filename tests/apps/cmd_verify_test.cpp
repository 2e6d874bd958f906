// Tests of apps/cmd_verify.cpp through the built program: `ioattn verify` runs the epoch and
// sparse-rank experiments on small parameters with a per-schedule breakdown in JSON, and bad
// parameters (a pattern that does not fit N, p too small, an unknown experiment) are one line
// on stderr and exit 2.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

TEST_CASE("verify epochs --json reports every schedule", "[apps][verify]") {
    const auto r = run_ioattn({"verify", "epochs", "--N", "16", "--d", "4", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    CHECK(j.at("passed") == true);
    CHECK(j.at("config").at("N") == 16);
    const json& e = j.at("experiments").at(0);
    CHECK(e.at("name") == "epochs");
    CHECK(e.at("failed") == 0);
    const json& rows = e.at("rows");
    REQUIRE(rows.size() >= 5);
    CHECK(rows.at(0).at("label") == "dense forward fused");
    for (const json& row : rows) {
        CAPTURE(row.dump());
        CHECK(row.at("instances").get<int>() > 0);
        CHECK(row.at("failed") == 0);
        if (!row.at("max_epoch_ratio").is_null())
            CHECK(row.at("max_epoch_ratio").get<double>() <= 1.0);
    }
}

TEST_CASE("verify sparse-rank with a pattern prints the breakdown", "[apps][verify]") {
    const auto r =
        run_ioattn({"verify", "sparse-rank", "--N", "16", "--d", "2", "--pattern", "causal"});
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("sparse-rank by part:") != std::string::npos);
    CHECK(r.out.find("formula control (must fail)") != std::string::npos);
    CHECK(r.out.find("all checks passed") != std::string::npos);
}

TEST_CASE("verify bad parameters are one line and exit 2", "[apps][verify]") {
    // a pattern that does not fit N, or does not parse
    require_one_line_error({"verify", "epochs", "--N", "64", "--pattern", "window:64"},
                           "does not fit N = 64");
    require_one_line_error({"verify", "all", "--N", "64", "--pattern", "block:65:0.5"}, "block");
    require_one_line_error({"verify", "sparse-rank", "--N", "64", "--pattern", "windows:3"},
                           "windows");
    // p too small (p <= N) or not prime
    require_one_line_error({"verify", "epochs", "--N", "64", "--p", "61"}, "p = 61");
    require_one_line_error({"verify", "sparse-rank", "--N", "64", "--p", "65"}, "65");
    require_one_line_error({"verify", "epochs", "--N", "64", "--d", "65"}, "d = 65");
    require_one_line_error({"verify", "nope"}, "nope");
}
