// Tests of ioattn::Problem: defaults, validation, causal visibility (bottom-right aligned).

#include "random.hpp"

#include <ioattn/error.hpp>
#include <ioattn/problem.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

using ioattn::InvalidArgument;
using ioattn::Problem;

namespace {

Problem square(std::int64_t n, std::int64_t d) {
    Problem p;
    p.n_q = n;
    p.n_k = n;
    p.d = d;
    return p;
}

} // namespace

TEST_CASE("Problem::resolved fills kv_heads, d_v and scale", "[problem]") {
    Problem p = square(10, 16);
    p.heads = 6;
    const Problem r = p.resolved();
    CHECK(r.kv_heads == 6);
    CHECK(r.d_v == 16);
    CHECK(r.scale == 1.0 / std::sqrt(16.0));
    CHECK(r.batch_heads() == 6);
    CHECK(r.group() == 1);

    p.kv_heads = 2;
    p.d_v = 5;
    p.scale = 0.3;
    const Problem s = p.resolved();
    CHECK(s.kv_heads == 2);
    CHECK(s.d_v == 5);
    CHECK(s.scale == 0.3);
    CHECK(s.group() == 3);
    CHECK(s.resolved() == s);
}

TEST_CASE("Problem::validate rejects bad sizes and scales, naming the caller",
          "[problem][throws]") {
    const Problem good = square(4, 4).resolved();
    CHECK_NOTHROW(good.validate());
    // validate() sees the raw value; resolved() first fills the defaults of 0 fields
    const auto bad = [&](auto&& mutate, bool zero_is_default = false) {
        Problem p = good;
        mutate(p);
        CHECK_THROWS_AS(p.validate("my_caller"), InvalidArgument);
        CHECK_THROWS_WITH(p.validate("my_caller"), Catch::Contains("my_caller"));
        if (zero_is_default)
            CHECK_NOTHROW(p.resolved("my_caller"));
        else
            CHECK_THROWS_AS(p.resolved("my_caller"), InvalidArgument);
    };
    for (const std::int64_t v : {0, -1, -100}) {
        CAPTURE(v);
        bad([v](Problem& p) { p.batch = v; });
        bad([v](Problem& p) { p.heads = v; });
        bad([v](Problem& p) { p.kv_heads = v; }, v == 0);
        bad([v](Problem& p) { p.n_q = v; });
        bad([v](Problem& p) { p.n_k = v; });
        bad([v](Problem& p) { p.d = v; });
        bad([v](Problem& p) { p.d_v = v; }, v == 0);
    }
    bad([](Problem& p) {
        p.heads = 4;
        p.kv_heads = 3;
    });
    bad([](Problem& p) { p.scale = -1.0; });
    bad([](Problem& p) { p.scale = 0.0; }, true);
    bad([](Problem& p) { p.scale = std::numeric_limits<double>::quiet_NaN(); });
    bad([](Problem& p) { p.scale = std::numeric_limits<double>::infinity(); });
    // the message carries the offending value
    Problem p = good;
    p.n_k = -7;
    CHECK_THROWS_WITH(p.validate("f"), Catch::Contains("n_k") && Catch::Contains("-7"));
    p = good;
    p.heads = 4;
    p.kv_heads = 3;
    CHECK_THROWS_WITH(p.validate("f"), Catch::Contains("4") && Catch::Contains("3"));
}

TEST_CASE("Problem: causal visibility is bottom-right aligned", "[problem]") {
    ioattn::test::Rng rng(3);
    for (int n = 0; n < 40; ++n) {
        Problem p;
        p.n_q = rng.uniform_int(1, 40);
        p.n_k = rng.uniform_int(1, 40);
        p.d = 4;
        p.causal = rng.uniform_int(0, 1) == 1;
        p = p.resolved();
        CAPTURE(p);
        std::int64_t pairs = 0;
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            // brute force: key j visible iff j <= i + (n_k - n_q)
            std::int64_t seen = 0;
            for (std::int64_t j = 0; j < p.n_k; ++j)
                seen += (!p.causal || j <= i + (p.n_k - p.n_q)) ? 1 : 0;
            CHECK(p.visible_keys(i) == seen);
            pairs += seen;
        }
        CHECK(p.allowed_pairs() == pairs);
        CHECK(p.causal_offset() == p.n_k - p.n_q);
        if (p.causal) {
            // the last query row always sees every key
            CHECK(p.visible_keys(p.n_q - 1) == p.n_k);
        }
    }
    Problem p = square(5, 2);
    p.causal = true;
    CHECK(p.allowed_pairs() == 15);
    p.n_q = 7; // rows 0 and 1 see nothing
    CHECK(p.visible_keys(0) == 0);
    CHECK(p.visible_keys(1) == 0);
    CHECK(p.visible_keys(2) == 1);
    CHECK(p.allowed_pairs() == 15);
}

TEST_CASE("Problem prints its fields", "[problem]") {
    Problem p = square(3, 2);
    p.causal = true;
    std::ostringstream os;
    os << p.resolved();
    CHECK_THAT(os.str(), Catch::Contains("n_q=3") && Catch::Contains("causal"));
}
