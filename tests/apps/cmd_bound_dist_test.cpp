// Tests of apps/cmd_bound_dist.cpp through the built program: `ioattn bound --ranks` prints the
// ring's closed-form words per rank, a simulation whose time falls with P and whose efficiency
// stays in (0, 1], the rows per rank from which transfers hide (the quadratic's root, recomputed
// here), a slow link that does not hide, the measured kernel rate, and usage errors.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

namespace {

json bound_json(std::vector<std::string> args) {
    args.insert(args.begin(), "bound");
    args.insert(args.end(), {"--peak", "100", "--bandwidth", "50", "--json"});
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    return j;
}

} // namespace

TEST_CASE("bound --ranks: closed-form words, falling time, the hiding point",
          "[apps][dist][bound]") {
    const json j = bound_json({"--ranks",
                               "2:16",
                               "--link-bandwidth",
                               "25",
                               "--link-latency",
                               "5",
                               "--N",
                               "4096",
                               "--d",
                               "64",
                               "--heads",
                               "8",
                               "--kernel-gflops",
                               "40"});
    const json& rows = j.at("table");
    REQUIRE(rows.size() == 4);
    const double w_row = 8 * 128; // words of one K/V row: heads (d + d_v)
    double previous = 1e300;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const json& r = rows[i];
        const int p = 2 << i;
        CHECK(r.at("ranks") == p);
        CHECK(r.at("received_words").get<double>() == (4096 - 4096 / p) * w_row);
        CHECK(r.at("lower_bound_words") == r.at("received_words")); // dense: the ring is optimal
        CHECK(r.at("seconds").get<double>() < previous);
        previous = r.at("seconds").get<double>();
        CHECK(r.at("efficiency").get<double>() > 0.0);
        CHECK(r.at("efficiency").get<double>() <= 1.0 + 1e-12);
    }
    // compute a x^2 = transfer c + b x per step: a = 2 H (d + d_v) / rate, b = 4 W / link
    const double a = 2.0 * 8 * 128 / 40e9, b = 4.0 * w_row / 25e9, c = 5e-6;
    const double x = (b + std::sqrt(b * b + 4 * a * c)) / (2 * a);
    CHECK(j.at("rows_per_rank_to_hide").get<double>() == Approx(x).epsilon(1e-12));
    CHECK(j.at("kernel_rate") == "given");
}

TEST_CASE("bound --ranks: a slow link is not hidden; zigzag causal halves the step",
          "[apps][dist][bound]") {
    const json slow = bound_json({"--ranks",
                                  "8",
                                  "--link-bandwidth",
                                  "0.001",
                                  "--N",
                                  "1024",
                                  "--d",
                                  "64",
                                  "--kernel-gflops",
                                  "40"});
    CHECK(slow.at("table")[0].at("hidden") == false);
    CHECK(slow.at("table")[0].at("efficiency").get<double>() < 0.5);
    const json ring = bound_json({"--ranks",
                                  "4",
                                  "--link-bandwidth",
                                  "25",
                                  "--N",
                                  "4096",
                                  "--d",
                                  "64",
                                  "--causal",
                                  "--kernel-gflops",
                                  "40"});
    const json zig = bound_json({"--ranks",
                                 "4",
                                 "--link-bandwidth",
                                 "25",
                                 "--N",
                                 "4096",
                                 "--d",
                                 "64",
                                 "--causal",
                                 "--dist",
                                 "zigzag",
                                 "--kernel-gflops",
                                 "40"});
    // contiguous: the last rank computes full blocks every step; zigzag: half a block per step
    const double rc = ring.at("table")[0].at("step_compute_seconds").get<double>();
    const double zc = zig.at("table")[0].at("step_compute_seconds").get<double>();
    CHECK(zc < 0.6 * rc);
    CHECK(zig.at("table")[0].at("efficiency").get<double>() >
          1.5 * ring.at("table")[0].at("efficiency").get<double>());
}

TEST_CASE("bound --ranks measures the kernel rate when not given", "[apps][dist][bound]") {
    const json j = bound_json(
        {"--ranks", "2", "--link-bandwidth", "25", "--N", "512", "--d", "16", "--threads", "1"});
    CHECK(j.at("kernel_rate") == "measured now");
    CHECK(j.at("kernel_gflops").get<double>() > 0.0);
}

TEST_CASE("bound --ranks usage errors", "[apps][dist][bound]") {
    require_one_line_error(
        {"bound", "--ranks", "4", "--N", "64", "--peak", "1", "--bandwidth", "1"},
        "--link-bandwidth");
    require_one_line_error({"bound",
                            "--ranks",
                            "0:4",
                            "--link-bandwidth",
                            "1",
                            "--N",
                            "64",
                            "--peak",
                            "1",
                            "--bandwidth",
                            "1"},
                           "--ranks");
    require_one_line_error({"bound",
                            "--ranks",
                            "128",
                            "--link-bandwidth",
                            "1",
                            "--N",
                            "64",
                            "--peak",
                            "1",
                            "--bandwidth",
                            "1"},
                           "n = 64");
}
