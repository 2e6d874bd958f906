// Tests of apps/cmd_run.cpp and apps/run_variants.cpp through the built program: `ioattn run`
// prints the JSON keys of docs/design.md section 13, --check passes for every pass, pattern and
// schedule, --count-io is consistent with the bounds, --csv is one header and one row, the text
// report is readable. The sparse inputs and supports: cmd_run_sparse_test.cpp. No timing is
// asserted.

#include "cli.hpp"
#include "run_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::csv_fields;
using ioattn::app::test::finite_number;
using ioattn::app::test::has_word;
using ioattn::app::test::lines_of;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using ioattn::app::test::run_json;
using nlohmann::json;

TEST_CASE("run --json prints the documented keys", "[apps][run]") {
    const json j = run_json({"--N", "64", "--d", "16"});
    CHECK(j.at("pass") == "forward");
    CHECK(j.at("pattern") == "dense");
    CHECK(j.at("dtype") == "float");
    CHECK(j.at("n_q") == 64);
    CHECK(j.at("n_k") == 64);
    CHECK(j.at("d") == 16);
    CHECK(j.at("d_v") == 16);
    CHECK(j.at("batch") == 1);
    CHECK(j.at("heads") == 1);
    CHECK(j.at("kv_heads") == 1);
    CHECK(j.at("scale").get<double>() == Approx(0.25)); // 1 / sqrt(d)
    const std::string schedule = j.at("schedule").get<std::string>();
    CHECK((schedule == "fused" || schedule == "materialized"));
    CHECK(j.at("selected_by") == "cost");
    CHECK(finite_number(j.at("seconds")));
    CHECK(j.at("seconds").get<double>() > 0.0);
    CHECK(finite_number(j.at("gflops")));
    CHECK(j.at("gflops").get<double>() > 0.0);
    CHECK(j.at("M").get<std::int64_t>() > 0);
    CHECK(j.at("threads").get<int>() >= 1);
    CHECK(j.at("repeat") == 1);
    const json& t = j.at("tiling");
    CHECK(t.at("schedule") == schedule);
    CHECK(t.at("rows").get<std::int64_t>() >= 1);
    CHECK(t.at("cols").get<std::int64_t>() >= 1);
    const json& b = j.at("bound");
    CHECK(b.at("regime").is_string());
    CHECK(finite_number(b.at("leading")));
    CHECK(finite_number(b.at("explicit")));
    CHECK(finite_number(b.at("compulsory")));
    // without --check and --count-io both are present and null
    CHECK(j.at("check").is_null());
    CHECK(j.at("io").is_null());
}

TEST_CASE("run --json keeps the keys on the backward and sparse paths", "[apps][run]") {
    const auto [pass, pattern] = GENERATE(table<std::string, std::string>(
        {{"backward", "dense"}, {"forward", "window:8"}, {"backward", "window:8"}}));
    CAPTURE(pass, pattern);
    const json j = run_json({"--N", "64", "--d", "16", "--pass", pass, "--pattern", pattern});
    CHECK(j.at("pass") == pass);
    CHECK(j.at("pattern") == pattern);
    for (const char* key : {"schedule", "seconds", "gflops", "tiling", "bound", "check", "io"}) {
        INFO("key: " << key);
        CHECK(j.contains(key));
    }
    CHECK(finite_number(j.at("seconds")));
    CHECK(finite_number(j.at("gflops")));
    for (const char* key : {"regime", "leading", "explicit"}) {
        INFO("bound key: " << key);
        CHECK(j.at("bound").contains(key));
    }
    if (pattern != "dense") {
        CHECK(j.at("z_qk").get<std::int64_t>() > 0);
        CHECK(j.at("z_qk").get<std::int64_t>() < 64 * 64);
    }
}

// N = 100 and M = 2400 make several tiles with ragged edges, so the check covers the tiling.
TEST_CASE("run --check passes for every pass pattern and schedule", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    const std::string pattern = GENERATE("dense", "window:8", "bigbird:4:2:3");
    const std::string schedule = GENERATE("fused", "materialized");
    CAPTURE(pass, pattern, schedule);
    const json j = run_json({"--N",
                             "100",
                             "--d",
                             "16",
                             "--M",
                             "2400",
                             "--pass",
                             pass,
                             "--pattern",
                             pattern,
                             "--schedule",
                             schedule,
                             "--check"});
    CHECK(j.at("schedule") == schedule);
    CHECK(j.at("tiling").at("schedule") == schedule);
    CHECK(j.at("tiling").at("rows").get<std::int64_t>() < 100);
    const json& c = j.at("check");
    REQUIRE(c.is_object());
    CHECK(c.at("passed") == true);
    CHECK(finite_number(c.at("max_abs_error")));
    CHECK(c.at("max_abs_error").get<double>() < 1e-4);
    CHECK(finite_number(c.at("error_ratio")));
    CHECK(c.at("error_ratio").get<double>() >= 0.0);
}

TEST_CASE("run --check passes with GQA and rectangular causal in float and double", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    const std::string schedule = GENERATE("fused", "materialized");
    const std::string dtype = GENERATE("float", "double");
    CAPTURE(pass, schedule, dtype);
    const json j =
        run_json({"--n-q",      "70",         "--n-k",    "130",     "--d",     "16",
                  "--d-v",      "8",          "--batch",  "2",       "--heads", "4",
                  "--kv-heads", "2",          "--causal", "--M",     "2400",    "--pass",
                  pass,         "--schedule", schedule,   "--dtype", dtype,     "--check"});
    CHECK(j.at("n_q") == 70);
    CHECK(j.at("n_k") == 130);
    CHECK(j.at("d_v") == 8);
    CHECK(j.at("kv_heads") == 2);
    CHECK(j.at("causal") == true);
    CHECK(j.at("dtype") == dtype);
    CHECK(j.at("check").at("passed") == true);
    CHECK(j.at("check").at("max_abs_error").get<double>() < (dtype == "float" ? 1e-4 : 1e-12));
}

TEST_CASE("run --count-io total is reads plus writes and at least the bounds", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    // block:8:0.1 leaves rows and keys unused: the compulsory term counts only the used ones
    // (it counted every row, above what the fused kernel moved)
    const std::string pattern = GENERATE("dense", "window:8", "block:8:0.1");
    const std::string schedule = GENERATE("fused", "materialized");
    CAPTURE(pass, pattern, schedule);
    // M = 12288 < d^2 = 16384: the small-cache regime, where the explicit bound is positive at
    // N = 512 and the fused tilings still fit (the backward's smallest needs 11522 words)
    const json j = run_json({"--N",
                             "512",
                             "--d",
                             "128",
                             "--M",
                             "12288",
                             "--pass",
                             pass,
                             "--pattern",
                             pattern,
                             "--schedule",
                             schedule,
                             "--count-io"});
    const json& io = j.at("io");
    REQUIRE(io.is_object());
    const auto reads = io.at("reads").get<std::int64_t>();
    const auto writes = io.at("writes").get<std::int64_t>();
    const auto total = io.at("total").get<std::int64_t>();
    CHECK(reads > 0);
    CHECK(writes > 0);
    CHECK(total == reads + writes);
    CHECK(io.at("matches_closed_form") == true);
    CHECK(io.at("closed_form_total") == total);
    CHECK(io.at("peak_resident").get<std::int64_t>() >= 1);
    CHECK(io.at("peak_resident").get<std::int64_t>() <= 12288);
    const json& b = j.at("bound");
    CHECK(b.at("regime") == "small-cache");
    CHECK(static_cast<double>(total) >= b.at("explicit").get<double>());
    CHECK(static_cast<double>(total) >= b.at("compulsory").get<double>());
    if (pattern == "dense")
        CHECK(b.at("explicit").get<double>() > 0.0); // so the check above is not vacuous
    CHECK(finite_number(io.at("ratio_to_bound")));
}

TEST_CASE("run --count-io with the reference schedule is a usage error", "[apps][run]") {
    require_one_line_error(
        {"run", "--N", "64", "--d", "16", "--count-io", "--schedule", "reference"}, "--count-io");
    require_one_line_error({"run",
                            "--N",
                            "64",
                            "--d",
                            "16",
                            "--count-io",
                            "--schedule",
                            "reference",
                            "--pattern",
                            "window:8"},
                           "--count-io");
}

TEST_CASE("run --causal with a sparse --pattern is a usage error", "[apps][run]") {
    require_one_line_error({"run", "--N", "64", "--d", "16", "--causal", "--pattern", "window:8"},
                           "--causal");
}

TEST_CASE("run: results and counts do not depend on --threads", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    const std::string pattern = GENERATE("dense", "window:8");
    CAPTURE(pass, pattern);
    const auto at = [&](const std::string& threads) {
        return run_json({"--N",
                         "100",
                         "--d",
                         "16",
                         "--M",
                         "2400",
                         "--pass",
                         pass,
                         "--pattern",
                         pattern,
                         "--threads",
                         threads,
                         "--check",
                         "--count-io"});
    };
    const json one = at("1");
    const json two = at("2");
    CHECK(one.at("threads") == 1);
    CHECK(two.at("threads") == 2);
    CHECK(one.at("tiling") == two.at("tiling"));
    CHECK(one.at("check").at("max_abs_error") == two.at("check").at("max_abs_error"));
    CHECK(one.at("io") == two.at("io"));
}

TEST_CASE("run --repeat reports the repeat count and still checks", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const json j = run_json(
        {"--N", "64", "--d", "16", "--M", "2400", "--pass", pass, "--repeat", "3", "--check"});
    CHECK(j.at("repeat") == 3);
    CHECK(finite_number(j.at("seconds")));
    CHECK(j.at("check").at("passed") == true);
}

TEST_CASE("run --csv prints a header and one row of the same width", "[apps][run]") {
    const auto [pass, pattern] = GENERATE(table<std::string, std::string>(
        {{"forward", "dense"}, {"backward", "dense"}, {"backward", "window:8"}}));
    CAPTURE(pass, pattern);
    const std::vector<std::string> args{"run",
                                        "--N",
                                        "64",
                                        "--d",
                                        "16",
                                        "--pass",
                                        pass,
                                        "--pattern",
                                        pattern,
                                        "--check",
                                        "--count-io",
                                        "--csv"};
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);
    const auto head = csv_fields(lines[0]);
    const auto row = csv_fields(lines[1]);
    REQUIRE(head.size() == row.size());
    const auto field = [&](const std::string& name) {
        for (std::size_t i = 0; i < head.size(); ++i)
            if (head[i] == name)
                return row[i];
        FAIL("no CSV column " << name);
        return std::string();
    };
    CHECK(field("pass") == pass);
    CHECK(field("pattern") == pattern);
    CHECK(field("n_q") == "64");
    CHECK(field("check.passed") == "true");
    CHECK(field("io.matches_closed_form") == "true");
    CHECK(std::stoll(field("io.total")) ==
          std::stoll(field("io.reads")) + std::stoll(field("io.writes")));
    CHECK(std::stod(field("seconds")) > 0.0);
    const std::string schedule = field("schedule");
    CHECK((schedule == "fused" || schedule == "materialized"));
    for (const auto& v : row) {
        INFO("field: " << v);
        CHECK(!v.empty());
        CHECK(v != "null"); // --check and --count-io fill every column
    }
}

TEST_CASE("run prints a readable report without NaN or infinities", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const std::vector<std::string> args{
        "run", "--N", "64", "--d", "16", "--M", "2400", "--pass", pass, "--check", "--count-io"};
    const auto r = run_ioattn(args);
    INFO("command: " << command_of(args));
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("ioattn run: " + pass, 0) == 0);
    for (const char* label : {"  schedule ", "  time ", "  bound ", "  io ", "  check "}) {
        INFO("label: " << label);
        CHECK(r.out.find(label) != std::string::npos);
    }
    CHECK(r.out.find("passed") != std::string::npos);
    CHECK(!has_word(r.out, "nan", true));
    CHECK(!has_word(r.out, "inf", true));
}
