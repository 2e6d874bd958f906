// Tests of apps/options.cpp through the built program: bad values of the shared options (sizes,
// heads, M, --pattern specs and Matrix Market files) are usage errors: exit 2, nothing on stdout,
// one line on stderr naming the value (docs/design.md section 13; InvalidArgument -> 2 in
// apps/commands.hpp).

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;
using ioattn::app::test::write_scratch;

namespace {

/// `run` on a small problem followed by `extra`.
std::vector<std::string> small_run(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"run", "--N", "64", "--d", "16"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

} // namespace

TEST_CASE("sizes below one are usage errors naming the size", "[apps][options]") {
    require_one_line_error({"run", "--N", "0"}, "n_q = 0");
    require_one_line_error({"run", "--n-q", "0", "--n-k", "4"}, "n_q = 0");
    require_one_line_error(small_run({"--d-v", "0"}), "d_v = 0");
    require_one_line_error({"run", "--N", "64", "--d", "0"}, "d = 0");
    require_one_line_error(small_run({"--batch", "0"}), "batch = 0");
}

TEST_CASE("kv-heads that do not divide heads are a usage error", "[apps][options]") {
    require_one_line_error(small_run({"--kv-heads", "3", "--heads", "4"}), "kv_heads = 3");
    require_one_line_error({"io", "--N", "128", "--d", "16", "--kv-heads", "3", "--heads", "4"},
                           "kv_heads = 3");
    require_one_line_error(
        {"bound", "--N", "128", "--d", "16", "--kv-heads", "3", "--heads", "4", "--preset", "a100"},
        "kv_heads = 3");
}

TEST_CASE("a fast memory below one word is a usage error", "[apps][options]") {
    require_one_line_error(small_run({"--M", "0"}), "M = 0");
    require_one_line_error(small_run({"--M-bytes", "2"}), "--M-bytes 2");
}

TEST_CASE("run --cache-bytes plans for half the cache; too small or beside --M is a usage error",
          "[apps][options]") {
    const auto r = run_ioattn(small_run({"--cache-bytes", "256KiB", "--json"}));
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("M") == 256 * 1024 / 4 / 2);
    CHECK(j.at("cache_bytes") == 256 * 1024);
    require_one_line_error(small_run({"--cache-bytes", "7"}), "7 bytes");
    require_one_line_error(small_run({"--cache-bytes", "1MiB", "--M", "100"}), "--cache-bytes");
}

// ioattn::plan_attention (attention.hpp, which `run` calls) "throws InvalidArgument (usage)
// when M is below the smallest tiling of the schedule, naming the smallest M". For d = 16 the
// smallest materialized tiling needs M = 5, the smallest fused forward M = 608 (one row
// lane-padded to 16: 16 (2d + 4) words of scratch, and one key's K and V rows streaming) and the
// fused backward M = 1890 (Tiling::resident_words).
TEST_CASE("run: --M below every tiling is a usage error naming the smallest M", "[apps][options]") {
    require_one_line_error(small_run({"--M", "4"}), "M = 4 words");
    require_one_line_error(small_run({"--M", "4"}), "needs M >= 5");
    require_one_line_error(small_run({"--M", "607", "--schedule", "fused"}), "needs M >= 608");
    require_one_line_error( // the backward's own smallest fused tiling, not the forward's
        small_run({"--M", "1889", "--schedule", "fused", "--pass", "backward"}),
        "needs M >= 1890");
    CHECK(ioattn::app::test::run_ioattn(
              small_run({"--M", "1890", "--schedule", "fused", "--pass", "backward"}))
              .status == 0); // and that M is enough
    require_one_line_error(
        small_run({"--M", "4", "--schedule", "materialized", "--pattern", "window:8"}),
        "needs M >= 5");
}

// Under --schedule auto every run path (a sparse pattern, sparse inputs, the backward) checks
// that some tiling fits M before it selects, so a too-small M is a usage error naming M (it
// exited 1 with a library message on those paths before the check existed).
TEST_CASE("run: --M below every tiling is a usage error on every run path", "[apps][options]") {
    require_one_line_error(small_run({"--M", "4", "--pattern", "window:8"}), "M = 4 words");
    require_one_line_error(small_run({"--M", "4", "--input-density", "0.5"}), "M = 4 words");
    require_one_line_error(small_run({"--M", "3", "--pass", "backward"}), "needs M >= 4");
    CHECK(run_ioattn(small_run({"--M", "4", "--pass", "backward"})).status == 0);
}

TEST_CASE("bad --pattern specs are usage errors naming the token", "[apps][options]") {
    require_one_line_error(small_run({"--pattern", "window:-3"}), "window:-3");
    require_one_line_error(small_run({"--pattern", "window:x"}), "window:x");
    require_one_line_error(small_run({"--pattern", "random:2"}), "random:2");
    require_one_line_error(small_run({"--pattern", "random:-0.5"}), "random:-0.5");
    require_one_line_error(small_run({"--pattern", "nosuch:3"}), "nosuch");
    require_one_line_error(small_run({"--pattern", "window:8&"}), "window:8&");
    require_one_line_error(small_run({"--pattern", "(window:8"}), "(window:8");
    require_one_line_error(small_run({"--pattern", "bigbird:4:2"}), "bigbird:4:2");
}

TEST_CASE("a sparse pattern on a dense-only subcommand is a usage error", "[apps][options]") {
    // io takes a pattern (each variant of the sparse fused schedule), not with --causal
    require_one_line_error({"io", "--N", "128", "--d", "16", "--pattern", "window:8", "--causal"},
                           "--pattern does not take --causal");
    require_one_line_error(
        {"bound", "--N", "128", "--d", "16", "--pattern", "window:8", "--preset", "a100"},
        "--pattern window:8");
}

// parse_pattern reports a file it cannot read as InvalidArgument, which main.cpp maps to 2.
TEST_CASE("pattern file: of a missing file is a usage error naming the path", "[apps][options]") {
    require_one_line_error(small_run({"--pattern", "file:/nonexistent.mtx"}), "/nonexistent.mtx");
    require_one_line_error(small_run({"--pattern", "file:"}), "PATH");
}

TEST_CASE("a malformed Matrix Market file is one line naming the file and the line",
          "[apps][options]") {
    struct Bad {
        std::string name;
        std::string content;
        std::string names; ///< file:line in the message
    };

    const std::string header = "%%MatrixMarket matrix coordinate pattern general\n";
    const std::vector<Bad> bad{
        {"not_an_integer.mtx", header + "% comment\n4 4 3\n1 1\n2 x\n3 3\n", ":5:"},
        {"out_of_range.mtx", header + "4 4 2\n1 1\n9 2\n", ":4:"},
        {"truncated.mtx", header + "4 4 5\n1 1\n2 2\n", ":4:"},
        {"no_header.mtx", "hello\n4 4 1\n1 1\n", ":1:"},
        {"bad_size.mtx", header + "4 four 1\n1 1\n", ":2:"},
        {"array.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", ":1:"},
    };
    for (const Bad& b : bad) {
        const std::string path = write_scratch(b.name, b.content);
        for (const std::string pass : {"forward", "backward"}) {
            require_one_line_error(small_run({"--pattern", "file:" + path, "--pass", pass}),
                                   b.name + b.names);
        }
    }
}

TEST_CASE("a Matrix Market file of the wrong shape is a usage error naming both shapes",
          "[apps][options]") {
    const std::string path = write_scratch(
        "shape.mtx", "%%MatrixMarket matrix coordinate pattern general\n4 4 1\n1 1\n");
    require_one_line_error(small_run({"--pattern", "file:" + path}), "4 x 4");
    require_one_line_error(small_run({"--pattern", "file:" + path}), "64 x 64");
}
