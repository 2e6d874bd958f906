// Tests of apps/cmd_run_dist.cpp through the built program under mpirun (1-3 ranks, the Open MPI
// settings in the tests' environment): `ioattn run --dist ring|zigzag|sparse` passes --check on
// every rank count, its counted words match the closed forms on every rank, the ring forward and
// the sparse forward receive exactly the sharding's lower bound, the text output has the
// per-rank table and the share not hidden, and bad combinations are usage errors (exit 2) with
// one message. --dtype bf16 (ring, zigzag, sparse; forward and backward) passes the bf16 --check
// and its K/V words travel in 2 bytes. No timing is asserted.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::has_word;
using ioattn::app::test::lines_of;
using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using nlohmann::json;

namespace {

std::string launcher(int ranks) {
    return std::string(IOATTN_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe";
}

/// `mpiexec -n ranks ioattn run args... --json`: exit 0, empty stderr, the parsed JSON.
json dist_json(int ranks, std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    args.emplace_back("--json");
    const auto r = run_ioattn(args, {}, launcher(ranks));
    INFO("command: " << launcher(ranks) << " " << command_of(args));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    json j;
    REQUIRE_NOTHROW(j = json::parse(r.out));
    return j;
}

} // namespace

TEST_CASE("run --dist passes --check with counted words = closed form on 1-3 ranks",
          "[apps][dist][check]") {
    const std::vector<std::vector<std::string>> runs = {
        {"--dist", "ring", "--N", "67", "--d", "8", "--heads", "2"},
        {"--dist",
         "ring",
         "--causal",
         "--N",
         "50",
         "--d",
         "8",
         "--pass",
         "backward",
         "--dtype",
         "double"},
        {"--dist",
         "zigzag",
         "--causal",
         "--N",
         "70",
         "--d",
         "8",
         "--heads",
         "4",
         "--kv-heads",
         "2",
         "--pass",
         "backward"},
        {"--dist",
         "sparse",
         "--pattern",
         "window:4",
         "--N",
         "61",
         "--d",
         "8",
         "--pass",
         "backward"},
        {"--dist",
         "sparse",
         "--pattern",
         "bigbird:2:1:2",
         "--N",
         "64",
         "--d",
         "4",
         "--dtype",
         "double"},
        {"--dist", "ring", "--N", "67", "--d", "16", "--heads", "2", "--dtype", "bf16"},
        {"--dist",
         "zigzag",
         "--causal",
         "--N",
         "70",
         "--d",
         "8",
         "--heads",
         "4",
         "--kv-heads",
         "2",
         "--pass",
         "backward",
         "--dtype",
         "bf16"},
        {"--dist",
         "sparse",
         "--pattern",
         "window:4",
         "--N",
         "61",
         "--d",
         "8",
         "--pass",
         "backward",
         "--dtype",
         "bf16"},
    };
    for (int ranks = 1; ranks <= 3; ++ranks)
        for (std::vector<std::string> args : runs) {
            args.insert(args.end(), {"--check", "--count-io", "--threads", "1"});
            CAPTURE(ranks, command_of(args));
            const json j = dist_json(ranks, args);
            CHECK(j.at("ranks") == ranks);
            CHECK(j.at("dist") == args[1]);
            CHECK((j.at("isa") == "avx512" || j.at("isa") == "avx2" || j.at("isa") == "sse2"));
            CHECK(j.at("check").at("passed") == true);
            CHECK(j.at("comm").at("matches_closed_form") == true);
            const json& rows = j.at("comm").at("per_rank");
            REQUIRE(rows.size() == static_cast<std::size_t>(ranks));
            const bool bf16 = j.at("dtype") == "bf16";
            if (bf16)
                CHECK(j.at("check").contains("tolerance"));
            for (const json& row : rows) {
                CHECK(row.at("matches_closed_form") == true);
                CHECK(row.at("received_words") == row.at("closed_form_received"));
                CHECK(row.at("received_bytes") == row.at("closed_form_received_bytes"));
                const auto words = row.at("received_words").get<std::int64_t>();
                const auto bytes = row.at("received_bytes").get<std::int64_t>();
                if (j.at("pass") == "forward") // K/V rows only: 2 bytes a word in bf16
                    CHECK(bytes == (bf16 ? 2 : j.at("dtype") == "double" ? 8 : 4) * words);
                else if (bf16) // the dK, dV partial sums travel in fp32
                    CHECK(((bytes > 2 * words && bytes < 4 * words) || words == 0));
                const bool forward = j.at("pass") == "forward";
                const bool exact = forward && (j.at("dist") == "sparse" || j.at("causal") == false);
                if (ranks > 1 && exact) // the ring forward and the sparse forward are optimal
                    CHECK(row.at("ratio_to_bound").get<double>() == 1.0);
                if (ranks == 1)
                    CHECK(row.at("received_words") == 0);
            }
            CHECK(j.at("comm").at("share_not_hidden").get<double>() >= 0.0);
            CHECK(j.at("comm").at("share_not_hidden").get<double>() <= 1.0);
        }
}

TEST_CASE("run --dist text output: per-rank words, the bound and the share not hidden",
          "[apps][dist][text]") {
    const std::vector<std::string> args = {
        "run", "--dist", "zigzag", "--causal", "--N", "48", "--d", "8", "--count-io", "--check"};
    const auto r = run_ioattn(args, {}, launcher(2));
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("zigzag shards") != std::string::npos);
    CHECK(r.out.find("= closed form on every rank") != std::string::npos);
    CHECK(r.out.find("of the communication not hidden") != std::string::npos);
    CHECK(has_word(r.out, "passed", false));
    int table_rows = 0;
    for (const std::string& line : lines_of(r.out))
        if (line.rfind("   0 ", 0) == 0 || line.rfind("   1 ", 0) == 0)
            ++table_rows;
    CHECK(table_rows == 2);
}

TEST_CASE("run --dist usage errors exit 2 with one message", "[apps][dist][usage]") {
    // one process: MPI starts as a singleton
    require_one_line_error({"run", "--dist", "ring", "--pattern", "window:3"}, "--dist sparse");
    require_one_line_error({"run", "--dist", "sparse", "--causal", "--pattern", "window:3"},
                           "--causal");
    require_one_line_error({"run", "--dist", "ring", "--schedule", "reference"},
                           "--schedule reference");
    require_one_line_error({"run", "--dist", "ring", "--input-density", "0.5"}, "--input-density");
    require_one_line_error({"run", "--dist", "zigzag", "--N", "1"}, "n = 1");
    require_one_line_error({"run", "--dist", "hypercube"}, "--dist");
    // two ranks: the same message once (from rank 0), exit 2; Open MPI adds its own report
    const auto r = run_ioattn({"run", "--dist", "ring", "--pattern", "window:3"}, {}, launcher(2));
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    int ours = 0;
    for (const std::string& line : lines_of(r.err))
        ours += line.rfind("ioattn: ", 0) == 0 ? 1 : 0;
    CHECK(ours == 1);
}
