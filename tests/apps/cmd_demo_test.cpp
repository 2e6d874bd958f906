// Tests of apps/cmd_demo.cpp through the built program: `ioattn demo --json` needs no files,
// exits 0 and tours its six parts, each with its paragraph, its next command, its results and
// a pass flag that is true; every check inside each part holds (no timing is asserted, only
// that the timings are positive).

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

namespace {

void require_keys(const json& j, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
        INFO("key: " << k);
        CHECK(j.contains(k));
    }
}

} // namespace

TEST_CASE("demo --json tours six parts and every check in them passes", "[apps][demo][slow]") {
    const auto r = run_ioattn({"demo", "--threads", "2", "--json"});
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    CHECK(j.at("passed") == true);
    const json& parts = j.at("parts");
    CHECK(parts.size() == 6);
    for (const char* name : {"dense", "io_sweep", "sparse", "verify", "speed", "decode"}) {
        INFO("part: " << name);
        REQUIRE(parts.contains(name));
        const json& p = parts.at(name);
        CHECK(p.at("passed") == true);
        CHECK(!p.at("about").get<std::string>().empty());
        CHECK(p.at("next").get<std::string>().find("ioattn ") == 0);
    }
    // 1. forward and backward, both schedules: each checked and its I/O exact
    const json& runs = parts.at("dense").at("runs");
    REQUIRE(runs.size() == 4);
    for (const json& run : runs) {
        INFO(run.dump());
        require_keys(run, {"pass", "schedule", "M", "tiling", "check", "io"});
        CHECK(run.at("check").at("passed") == true);
        CHECK(run.at("io").at("matches_closed_form") == true);
        CHECK(run.at("io").at("peak_resident").get<std::int64_t>() <= run.at("M"));
    }
    // and one bf16 line: the fused forward within its tolerance, its I/O exact
    const json& half = parts.at("dense").at("bf16");
    CHECK(half.at("passed") == true);
    CHECK(half.at("check").at("max_abs_error").get<double>() <=
          half.at("check").at("tolerance").get<double>());
    CHECK(half.at("io").at("matches_closed_form") == true);
    // 2. the sweep: the materialized schedule is picked below d^2, the fused above; a crossover
    const json& sweep = parts.at("io_sweep");
    require_keys(sweep, {"d_squared", "crossover", "dry_runs_agree", "rows", "plot"});
    CHECK(sweep.at("dry_runs_agree") == true);
    const std::int64_t d2 = sweep.at("d_squared");
    const std::int64_t x = sweep.at("crossover");
    CHECK(x > d2 / 4);
    CHECK(x <= 4 * d2);
    for (const json& row : sweep.at("rows")) {
        const std::int64_t m = row.at("M");
        if (m <= d2 / 4)
            CHECK(row.at("cost_choice") == "materialized");
        if (m >= 4 * d2)
            CHECK(row.at("cost_choice") == "fused");
    }
    // 3. sparse: checked, its I/O exact, the GraphBLAS output matched, every timing positive
    const json& sp = parts.at("sparse");
    CHECK(sp.at("check").at("check_passed") == true);
    CHECK(sp.at("check").at("io").at("matches_closed_form") == true);
    CHECK(sp.at("max_abs_difference_graphblas").get<double>() <= 1e-4);
    for (const char* k : {"sparse_seconds", "graphblas_seconds", "dense_fused_seconds"})
        CHECK(sp.at("timing").at(k).get<double>() > 0);
    CHECK(sp.at("timing").at("z_qk").get<std::int64_t>() > 0);
    // 4. the verifier: every experiment with instances, none failed (or the module is absent)
    const json& v = parts.at("verify");
#ifdef IOATTN_APPS_WITH_VERIFY
    CHECK(v.at("skipped") == false);
    REQUIRE(!v.at("experiments").empty());
    for (const json& e : v.at("experiments")) {
        INFO(e.dump());
        CHECK(e.at("instances").get<std::int64_t>() > 0);
        CHECK(e.at("failed") == 0);
        CHECK(e.at("passed") == e.at("instances"));
    }
#else
    CHECK(v.at("skipped") == true);
#endif
    // 5. speed: the fused and naive outputs agree
    const json& s = parts.at("speed");
    CHECK(s.at("max_abs_difference").get<double>() <= 1e-4);
    CHECK(s.at("fused_seconds").get<double>() > 0);
    CHECK(s.at("naive_seconds").get<double>() > 0);
    // 6. decode: checked, its I/O exact and at the lower bound's order, timed against bandwidth
    const json& dec = parts.at("decode");
    CHECK(dec.at("check").at("passed") == true);
    CHECK(dec.at("io").at("agrees") == true);
    CHECK(dec.at("io").at("ratio_to_lower_bound").get<double>() < 1.1);
    CHECK(dec.at("bandwidth_gbs").get<double>() > 0);
    CHECK(dec.at("seconds").get<double>() > 0);
}

TEST_CASE("demo --plot needs a .svg name, before the tour starts", "[apps][demo]") {
    require_one_line_error({"demo", "--plot", "tour.png"}, "tour.png");
}
