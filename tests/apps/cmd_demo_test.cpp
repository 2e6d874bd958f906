// Tests of apps/cmd_demo.cpp through the built program: `ioattn demo` needs no files, exits 0,
// prints its four parts, and every check in its tables says yes (no timing is asserted).

#include "cli.hpp"

#include <catch2/catch.hpp>

#include <string>

using ioattn::app::test::has_word;
using ioattn::app::test::run_ioattn;

TEST_CASE("demo exits 0 and every check in it passes", "[apps][demo]") {
    const auto r = run_ioattn({"demo", "--threads", "2"});
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    for (const char* part : {"\n1. ", "\n2. ", "\n3. ", "\n4. "}) {
        INFO("part: " << part);
        CHECK(("\n" + r.out).find(part) != std::string::npos);
    }
    CHECK(r.out.find("yes") != std::string::npos);
    CHECK(!has_word(r.out, "NO", false));
    CHECK(!has_word(r.out, "nan", true));
    CHECK(!has_word(r.out, "inf", true));
    CHECK(r.out.find("measured crossover: M = ") != std::string::npos);
}
