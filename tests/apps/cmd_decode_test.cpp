// Tests of apps/cmd_decode.cpp and decode_run.cpp through the built program: `ioattn decode
// --json` with --check and --count-io over contiguous and paged, fp32, bf16 and fp16 caches,
// with and without a window or a pattern beyond windows (--pattern), passes its check and counts
// exactly the closed form, the window and the pattern reading only their rows; bad usage is one
// line on stderr and exit 2.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ioattn::app::test::require_one_line_error;
using ioattn::app::test::run_ioattn;

namespace {

nlohmann::json decode_json(std::vector<std::string> args) {
    args.insert(args.begin(), "decode");
    for (const char* a : {"--heads",
                          "8",
                          "--kv-heads",
                          "2",
                          "--d",
                          "32",
                          "--kv-lens",
                          "300,0,77",
                          "--new-tokens",
                          "3",
                          "--repeat",
                          "1",
                          "--no-bandwidth",
                          "--check",
                          "--count-io",
                          "--json"})
        args.emplace_back(a);
    const auto r = run_ioattn(args);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
}

} // namespace

TEST_CASE("decode --json checks and counts every layout, type and window", "[apps][decode]") {
    std::int64_t full_bytes = 0;
    for (const char* dtype : {"float", "bf16", "fp16"})
        for (const char* page : {"0", "16"})
            for (const char* pattern :
                 {"causal", "causal-window:40", "causal-window:40+global:4"}) {
                CAPTURE(dtype, page, pattern);
                const auto j =
                    decode_json({"--dtype", dtype, "--page-size", page, "--pattern", pattern});
                CHECK(j.at("check").at("passed") == true);
                CHECK(j.at("io").at("agrees") == true);
                CHECK(j.at("kv_lens") == nlohmann::json::array({300, 0, 77}));
                const std::string p = pattern;
                const auto bytes = j.at("kv_bytes").get<std::int64_t>();
                const std::int64_t word = std::string(dtype) == "float" ? 4 : 2;
                if (p == "causal") {
                    CHECK(j.at("window") == 0);
                    CHECK(bytes == (300 + 77) * 2 * 64 * word);
                    full_bytes = bytes;
                } else if (p == "causal-window:40") { // 41 keys per token, 3 tokens: rows
                    CHECK(j.at("window") == 41);      // 257..299 and 34..76
                    CHECK(bytes == (43 + 43) * 2 * 64 * word);
                    CHECK(bytes < full_bytes);
                } else { // and the 4 global rows 0..3 of each sequence, nothing between
                    CHECK(j.at("window") == 0);
                    CHECK(j.at("pattern") == p);
                    CHECK(bytes == (47 + 47) * 2 * 64 * word);
                }
            }
}

TEST_CASE("decode rejects bad usage with one line", "[apps][decode]") {
    require_one_line_error({"decode", "--pattern", "glob:4"}, "glob:4");
    require_one_line_error({"decode", "--pattern", "strided:0"}, "strided:0");
    require_one_line_error({"decode", "--kv-lens", "4,x"}, "--kv-lens");
    require_one_line_error({"decode", "--kv-lens", "10", "--new-tokens", "17"}, "n_new = 17");
    require_one_line_error({"decode", "--heads", "6", "--kv-heads", "4"}, "heads = 6");
}
