// Tests of apps/cmd_bound.cpp through the built program: `ioattn bound` with a documented
// preset (no measurement) prints JSON whose time bound is max(w L / beta, F / P) (docs/design.md
// section 9), and asks for the machine figures when none are given.

#include "cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
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

TEST_CASE("bound --preset h200 and m1-max carry their documented figures and sources",
          "[apps][bound]") {
    struct Expected {
        const char* preset;
        std::int64_t word_bytes;
        std::int64_t fast_bytes;
        double bandwidth_gbs, peak_gflops;
        const char* source; ///< a piece of the cited source
        const char* text;   ///< the machine's figures as the text output prints them
    };

    const Expected table[] = {
        {"h200",
         2,
         228 * 1024,
         4800.0,
         989000.0,
         "nvidia.com/en-us/data-center/h200",
         "M = 116,736 words of 2 bytes"},
        {"m1-max",
         4,
         32 * 1024,
         400.0,
         10400.0,
         "Metal-Feature-Set-Tables",
         "M = 8,192 words of 4 bytes"},
    };
    for (const Expected& e : table) {
        CAPTURE(e.preset);
        const auto r =
            run_ioattn({"bound", "--N", "4096", "--d", "128", "--preset", e.preset, "--json"});
        INFO("stderr: " << r.err);
        REQUIRE(r.status == 0);
        json j;
        REQUIRE_NOTHROW(j = json::parse(r.out));
        CHECK(j.at("preset") == e.preset);
        CHECK(j.at("word_bytes") == e.word_bytes);
        CHECK(j.at("M") == e.fast_bytes / e.word_bytes);
        CHECK(j.at("bandwidth_gbs").get<double>() == e.bandwidth_gbs);
        CHECK(j.at("peak_gflops").get<double>() == e.peak_gflops);
        CHECK(j.at("source").get<std::string>().find(e.source) != std::string::npos);
        // the text output names the preset, its source and its figures
        const auto t = run_ioattn({"bound", "--N", "4096", "--d", "128", "--preset", e.preset});
        REQUIRE(t.status == 0);
        CHECK(t.out.find(std::string("preset       ") + e.preset + ": ") != std::string::npos);
        CHECK(t.out.find(e.source) != std::string::npos);
        CHECK(t.out.find(e.text) != std::string::npos);
    }
    const auto help = run_ioattn({"bound", "--help"});
    for (const char* piece : {"h200", "4.8 TB/s", "m1-max", "10.4 TFLOP/s", "32 KiB threadgroup"})
        CHECK(help.out.find(piece) != std::string::npos);
}

TEST_CASE("bound --preset this-machine takes the word of --dtype: bf16 halves the bytes",
          "[apps][bound]") {
    const auto run = [](const char* dtype) {
        const auto r = run_ioattn({"bound",
                                   "--N",
                                   "1024",
                                   "--d",
                                   "64",
                                   "--preset",
                                   "this-machine",
                                   "--M-bytes",
                                   "262144",
                                   "--dtype",
                                   dtype,
                                   "--json"});
        INFO("stderr: " << r.err);
        REQUIRE(r.status == 0);
        return json::parse(r.out);
    };
    const json f = run("float"), b = run("bf16"), d = run("double");
    CHECK(f.at("word_bytes") == 4);
    CHECK(b.at("word_bytes") == 2);
    CHECK(d.at("word_bytes") == 8);
    // the same fast memory holds twice the bf16 words and half the double words
    CHECK(f.at("M") == 262144 / 4);
    CHECK(b.at("M") == 262144 / 2);
    CHECK(d.at("M") == 262144 / 8);
    CHECK(b.at("source").get<std::string>().find("bf16 operands") != std::string::npos);
    CHECK(d.at("source").get<std::string>().find("fp64 FMA peak") != std::string::npos);
}
