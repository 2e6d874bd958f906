// Tests of ioattn::sparse::parse_pattern (sparse/src/patterns/parse_pattern.cpp): every term equals
// its builder, operators and precedence, seeds, and one clear error per bad spec naming the token.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/matrix_market.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace sp = ioattn::sparse;
using ioattn::sparse::parse_pattern;
using ioattn::sparse::Support;

TEST_CASE("parse_pattern: each term equals its builder", "[parse_pattern]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        CAPTURE(n_q, n_k);
        const std::uint64_t seed = 17;
        CHECK(parse_pattern("dense", n_q, n_k, seed) == sp::pattern_dense(n_q, n_k));
        CHECK(parse_pattern("causal", n_q, n_k, seed) == sp::pattern_causal(n_q, n_k));
        CHECK(parse_pattern("window:2", n_q, n_k, seed) == sp::pattern_window(n_q, n_k, 2));
        CHECK(parse_pattern("causal-window:3", n_q, n_k, seed) ==
              sp::pattern_causal_window(n_q, n_k, 3));
        CHECK(parse_pattern("dilated:2:3", n_q, n_k, seed) == sp::pattern_dilated(n_q, n_k, 2, 3));
        CHECK(parse_pattern("global:1", n_q, n_k, seed) == sp::pattern_global(n_q, n_k, 1));
        CHECK(parse_pattern("strided:3", n_q, n_k, seed) == sp::pattern_strided(n_q, n_k, 3));
        CHECK(parse_pattern("bigbird:1:1:2", n_q, n_k, seed) ==
              sp::pattern_bigbird(n_q, n_k, 1, 1, 2, seed));
        CHECK(parse_pattern("block:2:0.5", n_q, n_k, seed) ==
              sp::pattern_block(n_q, n_k, 2, 0.5, seed));
        CHECK(parse_pattern("random:0.25", n_q, n_k, seed) ==
              sp::pattern_random(n_q, n_k, 0.25, seed));
        CHECK(parse_pattern("random:1", n_q, n_k, seed) == sp::pattern_dense(n_q, n_k));
        CHECK(parse_pattern("bigbird-block:2:3:2:1", n_q, n_k, seed) ==
              sp::pattern_bigbird_block(n_q, n_k, 2, 3, 2, 1, seed));
        CHECK(parse_pattern("powerlaw:2.5", n_q, n_k, seed) ==
              sp::pattern_powerlaw(n_q, n_k, 2.5, seed));
    }
}

TEST_CASE("parse_pattern: union, intersection, precedence, parentheses", "[parse_pattern]") {
    const std::int64_t n = 12;
    const Support w = sp::pattern_window(n, n, 2);
    const Support g = sp::pattern_global(n, n, 1);
    const Support c = sp::pattern_causal(n, n);
    CHECK(parse_pattern("window:2+global:1", n, n, 0) == sp::union_of(w, g));
    CHECK(parse_pattern("window:2&causal", n, n, 0) == sp::intersection_of(w, c));
    CHECK(parse_pattern("window:2&causal", n, n, 0) == parse_pattern("causal-window:2", n, n, 0));
    // & binds tighter than +
    CHECK(parse_pattern("window:2+global:1&causal", n, n, 0) ==
          sp::union_of(w, sp::intersection_of(g, c)));
    CHECK(parse_pattern("(window:2+global:1)&causal", n, n, 0) ==
          sp::intersection_of(sp::union_of(w, g), c));
    CHECK(parse_pattern("  window:2 +  global:1 ", n, n, 0) == sp::union_of(w, g));
    CHECK(parse_pattern("((causal))", n, n, 0) == c);
}

TEST_CASE("parse_pattern: random terms after the first get derived seeds", "[parse_pattern]") {
    const Support a = parse_pattern("random:0.3", 20, 20, 5);
    const Support twice = parse_pattern("random:0.3+random:0.3", 20, 20, 5);
    CHECK(sp::intersection_of(twice, a) == a);
    CHECK(twice.z_qk() > a.z_qk());
    CHECK(twice == parse_pattern("random:0.3+random:0.3", 20, 20, 5));
}

TEST_CASE("parse_pattern: file term reads Matrix Market and checks the shape", "[parse_pattern]") {
    const Support s = sp::pattern_window(6, 8, 1);
    const sp::test::TempFile f("parse_file.mtx", "");
    sp::write_matrix_market(f.path(), s);
    CHECK(parse_pattern("file:" + f.path(), 6, 8, 0) == s);
    CHECK(parse_pattern("file:" + f.path() + "&causal", 6, 8, 0) ==
          sp::intersection_of(s, sp::pattern_causal(6, 8)));
    CHECK_THROWS_WITH(parse_pattern("file:" + f.path(), 8, 6, 0),
                      Catch::Contains("is 6 x 8 (expected n_q x n_k = 8 x 6)"));
    CHECK_THROWS_WITH(parse_pattern("file:/nonexistent/x.mtx", 6, 8, 0),
                      Catch::Contains("'file:/nonexistent/x.mtx'") &&
                          Catch::Contains("cannot open"));
    CHECK_THROWS_WITH(parse_pattern("file:", 6, 8, 0), Catch::Contains("missing PATH"));
}

TEST_CASE("parse_pattern: bad specs give one error naming the token", "[parse_pattern][throws]") {
    const auto err = [](const std::string& spec) {
        try {
            (void)parse_pattern(spec, 8, 8, 0);
        } catch (const ioattn::InvalidArgument& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK_THAT(err("window:-3"), Catch::Contains("'window:-3'") && Catch::Contains("W = -3"));
    CHECK_THAT(err("random:2"), Catch::Contains("'random:2'") && Catch::Contains("[0, 1]"));
    CHECK_THAT(err("window:"),
               Catch::Contains("'window:'") && Catch::Contains("missing value of W"));
    CHECK_THAT(err("foo:1"),
               Catch::Contains("unknown pattern 'foo'") && Catch::Contains("'foo:1'"));
    CHECK_THAT(err("block:0:0.5"), Catch::Contains("'block:0:0.5'") && Catch::Contains("B = 0"));
    CHECK_THAT(err("bigbird:1:2"),
               Catch::Contains("'bigbird:1:2'") && Catch::Contains("bigbird:W:G:R"));
    CHECK_THAT(err("window:abc"), Catch::Contains("'abc' is not an integer"));
    CHECK_THAT(err("window:3.5"), Catch::Contains("not an integer"));
    CHECK_THAT(err("window:99999999999999999999"), Catch::Contains("not an integer"));
    CHECK_THAT(err("random:nan"), Catch::Contains("not a number"));
    CHECK_THAT(err("random:0.5x"), Catch::Contains("not a number"));
    CHECK_THAT(err("dense:1"), Catch::Contains("'dense:1' has 1 argument"));
    CHECK_THAT(err("window"), Catch::Contains("'window' has 0 argument"));
    CHECK_THAT(err("dilated:1:0"), Catch::Contains("S = 0"));
    CHECK_THAT(err("strided:0"), Catch::Contains("L = 0"));
    CHECK_THAT(err(""), Catch::Contains("empty pattern spec"));
    CHECK_THAT(err("   "), Catch::Contains("empty pattern spec"));
    CHECK_THAT(err("window:2+"), Catch::Contains("empty term at position 9"));
    CHECK_THAT(err("+causal"), Catch::Contains("empty term at position 0"));
    CHECK_THAT(err("causal&&dense"), Catch::Contains("empty term"));
    CHECK_THAT(err("(causal"), Catch::Contains("'(' at position 0 is not closed"));
    CHECK_THAT(err("causal)"), Catch::Contains("unexpected ')' at position 6"));
    CHECK_THAT(err("()"), Catch::Contains("empty term"));
    CHECK_THAT(err("powerlaw:0"),
               Catch::Contains("'powerlaw:0'") && Catch::Contains("AVG_DEGREE = 0 (expected > 0)"));
    CHECK_THAT(err("powerlaw:-1"),
               Catch::Contains("'powerlaw:-1'") &&
                   Catch::Contains("AVG_DEGREE = -1 (expected > 0)"));
    CHECK_THAT(err("powerlaw:x"), Catch::Contains("'x' is not a number"));
    CHECK_THAT(err("powerlaw"), Catch::Contains("powerlaw:AVG_DEGREE"));
    CHECK_THAT(err("bigbird-block:0:1:1:1"),
               Catch::Contains("'bigbird-block:0:1:1:1'") &&
                   Catch::Contains("B = 0 (expected >= 1)"));
    CHECK_THAT(err("bigbird-block:64:3:2"), Catch::Contains("bigbird-block:B:W:G:R"));
    CHECK_THAT(err("bigbird-block:64:-3:2:1"), Catch::Contains("W = -3"));
    CHECK_THAT(err("window:-3"), Catch::StartsWith("ioattn::sparse::parse_pattern: "));
    CHECK_THROWS_AS(parse_pattern("dense", -1, 3, 0), ioattn::InvalidArgument);
}

TEST_CASE("parse_pattern: deep nesting is an error, not a stack overflow",
          "[parse_pattern][throws]") {
    // regression: 60000 levels of parentheses crashed the recursive descent (SIGSEGV)
    const auto nested = [](int levels) {
        return std::string(static_cast<std::size_t>(levels), '(') + "window:1" +
               std::string(static_cast<std::size_t>(levels), ')');
    };
    CHECK(parse_pattern(nested(256), 5, 5, 0) == sp::pattern_window(5, 5, 1));
    CHECK_THROWS_WITH(parse_pattern(nested(257), 5, 5, 0),
                      Catch::Contains("parentheses nested deeper than 256 at position 256"));
    CHECK_THROWS_AS(parse_pattern(nested(60000), 5, 5, 0), ioattn::InvalidArgument);
    CHECK_THROWS_AS(parse_pattern(std::string(60000, '('), 5, 5, 0), ioattn::InvalidArgument);
}
