// Tests of ioattn/ff/construct.hpp: Vandermonde, random, rank-deficient and BCH matrices
// against their definitions.

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <vector>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

TEST_CASE("vandermonde rows are powers of distinct points", "[ff][construct]") {
    for (std::int64_t pv : {17, 257, 1000003}) {
        const Prime p{pv};
        const Matrix k = vandermonde(16, 5, p);
        REQUIRE(k.rows() == 16);
        REQUIRE(k.cols() == 5);
        for (std::int64_t i = 0; i < 16; ++i)
            for (std::int64_t j = 0; j < 5; ++j)
                REQUIRE(k(i, j) == pow_mod(i, j, p));
    }
    CHECK(vandermonde_on({-1}, 3, Prime{5}) == vandermonde_on({4}, 3, Prime{5}));
}

TEST_CASE("vandermonde bad input", "[ff][construct]") {
    CHECK_THROWS_AS(vandermonde(4, 5, Prime{7}), InvalidArgument); // d > N
    CHECK_THROWS_AS(vandermonde(4, 0, Prime{7}), InvalidArgument); // d < 1
    CHECK_THROWS_AS(vandermonde(0, 1, Prime{7}), InvalidArgument); // N < 1
    CHECK_THROWS_AS(vandermonde(8, 2, Prime{7}), InvalidArgument); // p <= N
    CHECK_THROWS_AS(vandermonde(7, 2, Prime{7}), InvalidArgument); // p = N
    const Matrix k = vandermonde(8, 2, Prime{7}, true);            // negative control
    CHECK(k(7, 1) == 0);                                           // 7 mod 7 repeats point 0
}

TEST_CASE("random_matrix is reproducible and reduced", "[ff][construct]") {
    const Prime p{65537};
    const Matrix a = random_matrix(5, 7, p, 3);
    CHECK(a == random_matrix(5, 7, p, 3));
    CHECK_FALSE(a == random_matrix(5, 7, p, 4));
    for (std::int64_t v : a.data())
        CHECK((v >= 0 && v < 65537));
    CHECK_THROWS_AS(random_matrix(-1, 2, p, 1), InvalidArgument);
}

TEST_CASE("rank_deficient has exactly the requested rank", "[ff][construct]") {
    for (std::int64_t pv : {2, 5, 65537}) {
        const Prime p{pv};
        for (std::int64_t r = 1; r < 4; ++r) {
            const Matrix k = rank_deficient(8, 4, r, p, 9);
            CAPTURE(pv, r);
            CHECK(rank_naive(k, p) == r);
        }
    }
    CHECK_THROWS_AS(rank_deficient(8, 4, 4, Prime{7}, 1), InvalidArgument);
    CHECK_THROWS_AS(rank_deficient(8, 4, 0, Prime{7}, 1), InvalidArgument);
    CHECK_THROWS_AS(rank_deficient(3, 4, 2, Prime{7}, 1), InvalidArgument);
}

TEST_CASE("bch_parity_check: shape, bits, every 2t rows independent (brute force)",
          "[ff][construct]") {
    const Prime two{2};
    for (int m = 3; m <= 6; ++m) {
        const std::int64_t n = (std::int64_t{1} << m) - 1;
        const Matrix k1 = bch_parity_check(m, 1);
        REQUIRE(k1.rows() == n);
        REQUIRE(k1.cols() == m);
        // t = 1: the rows are the n distinct nonzero vectors of F_2^m (alpha is primitive)
        std::set<std::vector<std::int64_t>> rows;
        for (std::int64_t i = 0; i < n; ++i) {
            std::vector<std::int64_t> r;
            for (std::int64_t j = 0; j < m; ++j) {
                REQUIRE((k1(i, j) == 0 || k1(i, j) == 1));
                r.push_back(k1(i, j));
            }
            REQUIRE(r != std::vector<std::int64_t>(static_cast<std::size_t>(m), 0));
            rows.insert(r);
        }
        REQUIRE(static_cast<std::int64_t>(rows.size()) == n);
    }
    // t = 2, m = 4: all 4-subsets of the 15 rows independent over F_2
    const Matrix k = bch_parity_check(4, 2);
    REQUIRE(k.cols() == 8);
    for (std::int64_t a = 0; a < 15; ++a)
        for (std::int64_t b = a + 1; b < 15; ++b)
            for (std::int64_t c = b + 1; c < 15; ++c)
                for (std::int64_t e = c + 1; e < 15; ++e)
                    REQUIRE(rank_naive(k.select_rows({a, b, c, e}), two) == 4);
    CHECK_THROWS_AS(bch_parity_check(2, 1), InvalidArgument);
    CHECK_THROWS_AS(bch_parity_check(7, 1), InvalidArgument);
    CHECK_THROWS_AS(bch_parity_check(3, 0), InvalidArgument);
    CHECK_THROWS_AS(bch_parity_check(3, 4), InvalidArgument);
}
