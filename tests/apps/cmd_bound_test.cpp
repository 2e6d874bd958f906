// Tests of apps/cmd_bound.cpp through the built program: `ioattn bound` with a documented
// preset (no measurement) prints JSON whose time bound is max(w L / beta, F / P) (DESIGN.md
// §2.4), and asks for the machine figures when none are given.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

TEST_CASE("bound --preset a100 --json gives the time bound max of w L over beta and F over P",
          "[apps][bound]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const auto r = run_ioattn(
        {"bound", "--N", "256", "--d", "16", "--pass", pass, "--preset", "a100", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    CHECK(j.at("pass") == pass);
    CHECK(j.at("preset") == "a100");
    CHECK(j.at("word_bytes") == 2);
    CHECK(j.at("M") == 192 * 1024 / 2); // 192 KiB of fp16 words
    const double w = j.at("word_bytes").get<double>();
    const double words = j.at("bound").at("asymptotic").get<double>();
    const double beta = j.at("bandwidth_gbs").get<double>() * 1e9;
    const double peak = j.at("peak_gflops").get<double>() * 1e9;
    const json& t = j.at("time");
    CHECK(t.at("io_seconds").get<double>() == Approx(w * words / beta));
    CHECK(t.at("compute_seconds").get<double>() == Approx(j.at("flops").get<double>() / peak));
    CHECK(
        t.at("bound_seconds").get<double>() ==
        Approx(std::max(t.at("io_seconds").get<double>(), t.at("compute_seconds").get<double>())));
    const json& s = j.at("schedule");
    CHECK(s.at("predicted_io").get<double>() >= j.at("bound").at("compulsory").get<double>());
}

TEST_CASE("bound without machine figures is a usage error", "[apps][bound]") {
    require_one_line_error({"bound", "--N", "256", "--d", "16"}, "--bandwidth");
    require_one_line_error({"bound", "--N", "256", "--d", "16", "--preset", "tpu"}, "tpu");
}
