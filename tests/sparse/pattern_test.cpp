// Tests of the deterministic builders (sparse/src/patterns/pattern.cpp): each against its
// membership predicate on small shapes with n_q = n_k, n_q < n_k and n_q > n_k (bottom-right
// aligned: p = i + n_k - n_q), plus argument errors.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

namespace sp = ioattn::sparse;
using ioattn::sparse::test::from_predicate;

namespace {

std::int64_t abs64(std::int64_t x) {
    return x < 0 ? -x : x;
}

} // namespace

TEST_CASE("pattern builders match their predicates", "[pattern]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        CAPTURE(n_q, n_k);
        const std::int64_t off = n_k - n_q;
        CHECK(sp::pattern_dense(n_q, n_k) ==
              from_predicate(n_q, n_k, [](auto, auto) { return true; }));
        CHECK(sp::pattern_causal(n_q, n_k) ==
              from_predicate(n_q, n_k, [&](auto i, auto j) { return j <= i + off; }));
        for (const std::int64_t w : {0, 1, 2, 5, 40}) {
            CAPTURE(w);
            CHECK(sp::pattern_window(n_q, n_k, w) == from_predicate(n_q, n_k, [&](auto i, auto j) {
                      return abs64(i + off - j) <= w;
                  }));
            CHECK(sp::pattern_causal_window(n_q, n_k, w) ==
                  from_predicate(n_q, n_k, [&](auto i, auto j) {
                      return i + off - j >= 0 && i + off - j <= w;
                  }));
            for (const std::int64_t s : {1, 2, 3, 50}) {
                CAPTURE(s);
                CHECK(sp::pattern_dilated(n_q, n_k, w, s) ==
                      from_predicate(n_q, n_k, [&](auto i, auto j) {
                          return abs64(i + off - j) <= w * s && (i + off - j) % s == 0;
                      }));
            }
        }
        for (const std::int64_t g : {0, 1, 3, 20}) {
            CAPTURE(g);
            CHECK(sp::pattern_global(n_q, n_k, g) == from_predicate(n_q, n_k, [&](auto i, auto j) {
                      const std::int64_t p = i + off;
                      return (p >= 0 && p < g) || j < g;
                  }));
        }
        for (const std::int64_t l : {1, 2, 3, 4, 30}) {
            CAPTURE(l);
            CHECK(sp::pattern_strided(n_q, n_k, l) == from_predicate(n_q, n_k, [&](auto i, auto j) {
                      const std::int64_t p = i + off;
                      return j <= p && (j / l == p / l || j % l == l - 1);
                  }));
        }
    }
}

TEST_CASE("pattern builders: huge arguments do not overflow", "[pattern]") {
    constexpr std::int64_t kBig = std::numeric_limits<std::int64_t>::max();
    CHECK(sp::pattern_window(6, 9, kBig) == sp::pattern_dense(6, 9));
    CHECK(sp::pattern_causal_window(9, 6, kBig) == sp::pattern_causal(9, 6));
    CHECK(sp::pattern_dilated(6, 6, kBig, kBig) == sp::pattern_window(6, 6, 0));
    CHECK(sp::pattern_dilated(6, 6, kBig, 1) == sp::pattern_dense(6, 6));
    CHECK(sp::pattern_global(5, 5, kBig) == sp::pattern_dense(5, 5));
    CHECK(sp::pattern_strided(5, 5, kBig) == sp::pattern_causal(5, 5));
}

TEST_CASE("pattern builders: decode row and fully masked rows", "[pattern]") {
    // decode: one query at the last position sees every key under causal masking
    CHECK(sp::pattern_causal(1, 100).z_qk() == 100);
    CHECK(sp::pattern_causal_window(1, 100, 7).z_qk() == 8);
    // n_q > n_k: the first n_q - n_k rows see nothing
    CHECK(sp::pattern_causal(10, 4).empty_rows() == 6);
    CHECK(sp::pattern_strided(10, 4, 2).empty_rows() == 6);
}

TEST_CASE("pattern builders: bad arguments throw InvalidArgument", "[pattern][throws]") {
    using ioattn::InvalidArgument;
    CHECK_THROWS_WITH(sp::pattern_dense(-1, 3),
                      Catch::Contains("pattern_dense") && Catch::Contains("n_q = -1"));
    CHECK_THROWS_WITH(sp::pattern_causal(3, -2), Catch::Contains("n_k = -2"));
    CHECK_THROWS_WITH(sp::pattern_window(3, 3, -3), Catch::Contains("pattern_window: W = -3"));
    CHECK_THROWS_AS(sp::pattern_causal_window(3, 3, -1), InvalidArgument);
    CHECK_THROWS_WITH(sp::pattern_dilated(3, 3, 1, 0), Catch::Contains("S = 0"));
    CHECK_THROWS_WITH(sp::pattern_dilated(3, 3, -1, 1), Catch::Contains("W = -1"));
    CHECK_THROWS_WITH(sp::pattern_global(3, 3, -1), Catch::Contains("G = -1"));
    CHECK_THROWS_WITH(sp::pattern_strided(3, 3, 0), Catch::Contains("L = 0"));
}
