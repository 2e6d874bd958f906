// Tests of `ioattn run` on sparse inputs and supports, through the built program:
// --input-density lowers Z_input (and bad values are usage errors), a split forward reports its
// element pairs inside the tile blocks, --pattern file: runs a Matrix Market support (and a file
// CHOLMOD cannot read exactly is one line of error), a materialized backward runs below the
// smallest fused tiling. No timing is asserted.

#include "cli.hpp"
#include "run_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using ioattn::app::test::run_json;
using ioattn::app::test::write_scratch;
using nlohmann::json;

TEST_CASE("run --input-density 0.5 lowers z_input below the dense count", "[apps][run]") {
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    // one objective for both runs (speed: the same planner path), so the inputs' density is
    // what differs; the io objective plans sparse operands over fewer candidates
    const auto at = [&](const std::string& density) {
        return run_json({"--N",
                         "64",
                         "--d",
                         "16",
                         "--M",
                         "2400",
                         "--pass",
                         pass,
                         "--pattern",
                         "window:8",
                         "--input-density",
                         density,
                         "--objective",
                         "speed",
                         "--check",
                         "--count-io"});
    };
    const json dense = at("1");
    const json half = at("0.5");
    // docs/design.md section 6.2: Z_input = (N_q + 2 N_k) d for dense Q, K, V; the backward adds dO
    const std::int64_t dense_count = (pass == "forward" ? 3 : 4) * 64 * 16;
    CHECK(dense.at("z_input") == dense_count);
    CHECK(half.at("input_density").get<double>() == 0.5);
    CHECK(half.at("z_input").get<std::int64_t>() > 0);
    CHECK(half.at("z_input").get<std::int64_t>() < dense_count);
    CHECK(half.at("z_qk") == dense.at("z_qk"));
    CHECK(half.at("check").at("passed") == true);
    CHECK(half.at("io").at("matches_closed_form") == true);
    CHECK(half.at("io").at("total").get<std::int64_t>() <
          dense.at("io").at("total").get<std::int64_t>());
}

TEST_CASE("run --input-density outside 0 to 1 is a usage error naming the value", "[apps][run]") {
    for (const std::string v : {"2", "0", "-0.5", "nan"}) {
        require_one_line_error({"run", "--N", "64", "--d", "16", "--input-density", v},
                               "--input-density " + v);
    }
}

TEST_CASE("run reports a split forward's element pairs inside the tile blocks", "[apps][run]") {
    // bigbird at N = 640 splits into a band through tiles and random keys element by element;
    // with the default M the element rows' state fits beside the tile scratch (the speed
    // objective's tiling: the io objective's taller blocks put every pair in tiles)
    const std::vector<std::string> args{"--N",
                                        "640",
                                        "--d",
                                        "16",
                                        "--pattern",
                                        "bigbird:64:2:3",
                                        "--schedule",
                                        "fused",
                                        "--variant",
                                        "split",
                                        "--objective",
                                        "speed",
                                        "--check",
                                        "--count-io"};
    const json j = run_json(args);
    CHECK(j.at("variant") == "split");
    CHECK(j.at("variant_plan").at("element_in_tiles") == true);
    CHECK(j.at("check").at("passed") == true);
    CHECK(j.at("io").at("matches_closed_form") == true);
    std::vector<std::string> text = args;
    text.insert(text.begin(), "run");
    const auto r = run_ioattn(text);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("element (inside the tile blocks)") != std::string::npos);
}

TEST_CASE("run --pattern file: runs a Matrix Market support", "[apps][run]") {
    // a band of half-width 3 plus the first column: every row and column has an entry
    std::string body;
    std::int64_t entries = 0;
    for (int i = 1; i <= 64; ++i)
        for (int j = 1; j <= 64; ++j)
            if (std::abs(i - j) <= 3 || j == 1) {
                body += std::to_string(i) + " " + std::to_string(j) + "\n";
                ++entries;
            }
    const std::string path =
        write_scratch("band.mtx",
                      "%%MatrixMarket matrix coordinate pattern general\n% a test band\n64 64 " +
                          std::to_string(entries) + "\n" + body);
    const std::string pass = GENERATE("forward", "backward");
    CAPTURE(pass);
    const json j = run_json({"--N",
                             "64",
                             "--d",
                             "16",
                             "--M",
                             "2400",
                             "--pass",
                             pass,
                             "--pattern",
                             "file:" + path,
                             "--check",
                             "--count-io"});
    CHECK(j.at("z_qk") == entries);
    CHECK(j.at("check").at("passed") == true);
    CHECK(j.at("io").at("matches_closed_form") == true);
}

TEST_CASE("run --pattern file: with a size CHOLMOD would round is one line of error",
          "[apps][run]") {
    // the fuzz smoke's finding: 22222222222222223 columns, above 2^53, read through doubles
    const std::string path = write_scratch("huge_cols.mtx",
                                           "%%MatrixMarket matrix coordinate pattern general\n"
                                           "4 22222222222222223 3\n1 2\n1 2\n2 3\n");
    require_one_line_error({"run", "--N", "4", "--d", "4", "--pattern", "file:" + path},
                           "cols = 22222222222222223 (expected <= 2^53");
}

// The backward's inputs O and L are made by an untimed forward under an ample M, so a
// materialized backward runs at an M below the smallest fused tiling (67 words for d = 16).
// (It exited 1 with "too small for any fused tiling" before apps/run_variants.cpp did so.)
TEST_CASE("run --pass backward runs a materialized tiling below the smallest fused one",
          "[apps][run]") {
    const std::string pattern = GENERATE("dense", "window:8");
    CAPTURE(pattern);
    const json j = run_json({"--N",
                             "64",
                             "--d",
                             "16",
                             "--M",
                             "40",
                             "--pass",
                             "backward",
                             "--pattern",
                             pattern,
                             "--schedule",
                             "materialized",
                             "--check",
                             "--count-io"});
    CHECK(j.at("schedule") == "materialized");
    CHECK(j.at("check").at("passed") == true);
    CHECK(j.at("io").at("peak_resident").get<std::int64_t>() <= 40);
}
