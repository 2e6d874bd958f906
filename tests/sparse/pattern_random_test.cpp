// Tests of the seeded builders (sparse/src/patterns/pattern_random.cpp): structure against
// brute-force predicates, edge densities, reproducibility by seed and across thread counts, row
// independence, and pinned outputs (the generator is part of the format of a seed).

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::sparse::Support;

TEST_CASE("pattern_random: edge densities, rate and reproducibility", "[pattern_random]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        CAPTURE(n_q, n_k);
        CHECK(sp::pattern_random(n_q, n_k, 0.0, 3) == Support::none(n_q, n_k));
        CHECK(sp::pattern_random(n_q, n_k, 1.0, 3) == sp::pattern_dense(n_q, n_k));
        CHECK(sp::pattern_random(n_q, n_k, 0.3, 3) == sp::pattern_random(n_q, n_k, 0.3, 3));
    }
    const std::int64_t n = 300;
    for (const double p : {0.01, 0.1, 0.5, 0.9}) {
        CAPTURE(p);
        const Support s = sp::pattern_random(n, n, p, 12345);
        const double expected = p * n * n;
        const double sigma = std::sqrt(n * n * p * (1 - p));
        CHECK(std::abs(static_cast<double>(s.z_qk()) - expected) < 6 * sigma);
        CHECK_FALSE(s == sp::pattern_random(n, n, p, 12346));
    }
}

TEST_CASE("pattern_random: rows do not depend on other rows or threads", "[pattern_random]") {
    const Support big = sp::pattern_random(40, 50, 0.2, 9);
    const Support small = sp::pattern_random(10, 50, 0.2, 9);
    for (std::int64_t i = 0; i < 10; ++i) {
        const auto a = big.row(i);
        const auto b = small.row(i);
        CHECK(std::vector<std::int64_t>(a.begin(), a.end()) ==
              std::vector<std::int64_t>(b.begin(), b.end()));
    }
    const auto build = [] {
        return sp::union_of(sp::pattern_bigbird(64, 64, 2, 1, 3, 5),
                            sp::pattern_block(64, 64, 8, 0.3, 5));
    };
    CHECK(ioattn::with_threads(1, build) == ioattn::with_threads(2, build));
}

TEST_CASE("pattern_random / pattern_block / pattern_bigbird: pinned outputs", "[pattern_random]") {
    // Changing these means every stored seed now names a different structure.
    const Support r = sp::pattern_random(3, 8, 0.5, 42);
    const Support b = sp::pattern_block(4, 4, 2, 0.5, 42);
    const Support g = sp::pattern_bigbird(3, 8, 0, 0, 2, 42);
    const auto cols = [](const Support& s) {
        return std::vector<std::int64_t>(s.col_indices().begin(), s.col_indices().end());
    };
    CHECK(cols(r) == std::vector<std::int64_t>{0, 1, 2, 4, 6, 7, 3, 4, 6, 7, 0, 2, 7});
    CHECK(cols(b) == std::vector<std::int64_t>{2, 3, 2, 3});
    CHECK(cols(g) == std::vector<std::int64_t>{0, 5, 6, 0, 6, 7, 5, 6, 7});
}

TEST_CASE("pattern_block: whole blocks, edge densities", "[pattern_random]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        for (const std::int64_t bs : {1, 2, 3, 5, 100}) {
            CAPTURE(n_q, n_k, bs);
            const Support s = sp::pattern_block(n_q, n_k, bs, 0.5, 77);
            // membership is constant on every bs x bs block anchored at (0, 0)
            CHECK(s == sp::test::from_predicate(n_q, n_k, [&](auto i, auto j) {
                      return s.contains((i / bs) * bs, (j / bs) * bs);
                  }));
            CHECK(sp::pattern_block(n_q, n_k, bs, 0.0, 1) == Support::none(n_q, n_k));
            CHECK(sp::pattern_block(n_q, n_k, bs, 1.0, 1) == sp::pattern_dense(n_q, n_k));
            CHECK(s == sp::pattern_block(n_q, n_k, bs, 0.5, 77));
        }
    }
    const Support big = sp::pattern_block(256, 256, 16, 0.25, 4);
    CHECK(big.z_qk() > 0);
    CHECK_FALSE(big == sp::pattern_block(256, 256, 16, 0.25, 5));
}

TEST_CASE("pattern_bigbird: window + global + R random keys per row", "[pattern_random]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        for (const std::int64_t r : {0, 1, 3, 50}) {
            CAPTURE(n_q, n_k, r);
            const std::int64_t w = 1;
            const std::int64_t g = 2;
            const Support base =
                sp::union_of(sp::pattern_window(n_q, n_k, w), sp::pattern_global(n_q, n_k, g));
            const Support s = sp::pattern_bigbird(n_q, n_k, w, g, r, 31);
            CHECK(sp::intersection_of(s, base) == base);
            for (std::int64_t i = 0; i < n_q; ++i)
                CHECK(s.row_nonzeros(i) == std::min(n_k, base.row_nonzeros(i) + r));
            if (r == 0)
                CHECK(s == base);
            CHECK(s == sp::pattern_bigbird(n_q, n_k, w, g, r, 31));
        }
    }
    // the random keys are spread: over many rows every non-window key gets picked
    const Support s = sp::pattern_bigbird(400, 20, 0, 0, 1, 8);
    std::vector<int> hit(20, 0);
    for (const std::int64_t j : s.col_indices())
        hit[static_cast<std::size_t>(j)] = 1;
    CHECK(std::count(hit.begin(), hit.end(), 1) == 20);
}

TEST_CASE("seeded builders: bad arguments throw InvalidArgument", "[pattern_random][throws]") {
    CHECK_THROWS_WITH(sp::pattern_random(3, 3, 2.0, 1), Catch::Contains("DENSITY = 2"));
    CHECK_THROWS_WITH(sp::pattern_random(3, 3, -0.1, 1), Catch::Contains("DENSITY"));
    CHECK_THROWS_AS(sp::pattern_random(3, 3, std::nan(""), 1), ioattn::InvalidArgument);
    CHECK_THROWS_WITH(sp::pattern_block(3, 3, 0, 0.5, 1), Catch::Contains("B = 0"));
    CHECK_THROWS_WITH(sp::pattern_block(3, 3, 2, 1.5, 1), Catch::Contains("DENSITY"));
    CHECK_THROWS_WITH(sp::pattern_bigbird(3, 3, -1, 0, 0, 1), Catch::Contains("W = -1"));
    CHECK_THROWS_WITH(sp::pattern_bigbird(3, 3, 0, -1, 0, 1), Catch::Contains("G = -1"));
    CHECK_THROWS_WITH(sp::pattern_bigbird(3, 3, 0, 0, -1, 1), Catch::Contains("R = -1"));
    CHECK_THROWS_WITH(sp::pattern_random(-3, 3, 0.5, 1), Catch::Contains("n_q = -3"));
}
