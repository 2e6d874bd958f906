// Tests of `ioattn run --dtype bf16` (apps/run_bf16.cpp) and `bound --dtype bf16` through the
// built program: JSON "dtype": "bf16"; --check (the double reference on the bf16-rounded
// inputs, the tolerance of docs/design.md section 16) passes for both passes, dense and sparse
// supports, forced variants and sparse operands; --count-io counts the float run's words, and
// its bytes take 2 per operand word and 4 per word of L and the statistics; the bound takes
// 2-byte words.

#include "cli.hpp"
#include "run_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

using ioattn::app::test::command_of;
using ioattn::app::test::run_ioattn;
using ioattn::app::test::run_json;
using nlohmann::json;

namespace cmd_run_bf16_test {

/// The stream bytes sum to the total; operand streams count 2 bytes, the others 4.
void check_bytes(const json& io) {
    std::int64_t sum = 0, words = 0;
    for (const auto& [name, s] : io.at("streams").items()) {
        const bool operand = name == "q" || name == "k" || name == "v" || name == "o" ||
                             name == "d_o" || name == "d_q" || name == "d_k" || name == "d_v";
        CAPTURE(name);
        CHECK(s.at("element_bytes") == (operand ? 2 : 4));
        CHECK(s.at("bytes") == s.at("words").get<std::int64_t>() * (operand ? 2 : 4));
        sum += s.at("bytes").get<std::int64_t>();
        words += s.at("words").get<std::int64_t>();
    }
    CHECK(sum == io.at("bytes"));
    CHECK(words == io.at("total"));
}

TEST_CASE("run --dtype bf16 --check passes and counts the float run's words", "[apps][bf16]") {
    const std::vector<std::vector<std::string>> runs = {
        {"--N", "300", "--d", "32", "--heads", "2", "--kv-heads", "1", "--causal"},
        {"--N",
         "200",
         "--d",
         "16",
         "--pass",
         "backward",
         "--schedule",
         "materialized",
         "--M",
         "256"},
        {"--N", "256", "--d", "16", "--pattern", "window:8+random:0.02", "--variant", "element"},
        {"--N",
         "256",
         "--d",
         "16",
         "--pattern",
         "window:8",
         "--pass",
         "backward",
         "--variant",
         "split"},
        {"--N",
         "200",
         "--d",
         "16",
         "--pattern",
         "window:6",
         "--input-density",
         "0.5",
         "--pass",
         "backward"},
    };
    for (const auto& args : runs) {
        std::vector<std::string> bf16 = args, fp32 = args;
        for (const char* a : {"--check", "--count-io", "--objective", "speed", "--dtype"}) {
            bf16.emplace_back(a);
            fp32.emplace_back(a);
        }
        bf16.emplace_back("bf16");
        fp32.emplace_back("float");
        CAPTURE(command_of(bf16));
        const json j = run_json(bf16);
        CHECK(j.at("dtype") == "bf16");
        const json& c = j.at("check");
        CHECK(c.at("passed") == true);
        CHECK(c.at("tolerance").get<double>() > 0.0);
        const json& io = j.at("io");
        CHECK(io.at("matches_closed_form") == true);
        check_bytes(io);
        const json f = run_json(fp32);
        CHECK(io.at("total") == f.at("io").at("total"));
        CHECK(f.at("io").at("bytes") == 4 * f.at("io").at("total").get<std::int64_t>());
        CHECK(io.at("bytes").get<std::int64_t>() < f.at("io").at("bytes").get<std::int64_t>());
    }
}

TEST_CASE("run --dtype bf16 text report, its output digest and thread count", "[apps][bf16]") {
    const std::vector<std::string> args = {
        "run", "--N", "128", "--d", "16", "--dtype", "bf16", "--check", "--count-io"};
    const auto out = run_ioattn(args);
    REQUIRE(out.status == 0);
    CHECK_THAT(out.out,
               Catch::Contains("forward, bf16") && Catch::Contains("bytes (bf16") &&
                   Catch::Contains("passed"));
    const json one = run_json({"--N", "256", "--d", "16", "--dtype", "bf16", "--threads", "1"});
    const json two = run_json({"--N", "256", "--d", "16", "--dtype", "bf16", "--threads", "2"});
    CHECK(one.at("output_digest") == two.at("output_digest"));
}

TEST_CASE("bound --dtype bf16 takes 2-byte words", "[apps][bf16]") {
    const auto word_bytes = [](const char* dtype) {
        const auto out = run_ioattn({"bound",
                                     "--N",
                                     "4096",
                                     "--d",
                                     "64",
                                     "--bandwidth",
                                     "100",
                                     "--peak",
                                     "1000",
                                     "--dtype",
                                     dtype,
                                     "--json"});
        REQUIRE(out.status == 0);
        return json::parse(out.out);
    };
    const json h = word_bytes("bf16"), f = word_bytes("float");
    CHECK(h.at("word_bytes") == 2);
    CHECK(f.at("word_bytes") == 4);
    CHECK(h.at("M").get<std::int64_t>() == 2 * f.at("M").get<std::int64_t>()); // same bytes
}

} // namespace cmd_run_bf16_test
