// Tests of ioattn/ff/matrix.hpp: NTL rank, kernel, inverse against naive code over several
// primes, and every documented throw.

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/matrix.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

namespace {

const std::vector<std::int64_t> kPrimes{2, 3, 7, 65537, 2147483647, (std::int64_t{1} << 60) - 93};

Matrix identity(std::int64_t n) {
    Matrix m(n, n);
    for (std::int64_t i = 0; i < n; ++i)
        m(i, i) = 1;
    return m;
}

} // namespace

TEST_CASE("rank: NTL equals naive elimination", "[ff][matrix]") {
    std::uint64_t seed = 1;
    for (std::int64_t pv : kPrimes) {
        const Prime p{pv};
        for (std::int64_t r : {1, 2, 5, 9})
            for (std::int64_t c : {1, 3, 5, 8}) {
                const Matrix a = random_matrix(r, c, p, ++seed);
                CAPTURE(pv, r, c, a);
                REQUIRE(rank(a, p) == rank_naive(a, p));
                // a low-rank product: rank <= 2
                seed += 2;
                const Matrix low =
                    multiply(random_matrix(r, 2, p, seed + 1), random_matrix(2, c, p, seed + 2), p);
                REQUIRE(rank(low, p) == rank_naive(low, p));
                REQUIRE(rank(low, p) <= 2);
            }
        CHECK(rank(Matrix(4, 3), p) == 0);
        CHECK(rank(Matrix(0, 3), p) == 0);
        CHECK(rank(identity(6), p) == 6);
    }
}

TEST_CASE("kernel: a basis of {x : a x = 0}", "[ff][matrix]") {
    std::uint64_t seed = 100;
    for (std::int64_t pv : kPrimes) {
        const Prime p{pv};
        for (std::int64_t r : {0, 1, 3, 6})
            for (std::int64_t c : {1, 4, 7}) {
                seed += 2;
                const Matrix a = r == 0 ? Matrix(0, c)
                                        : multiply(random_matrix(r, 2, p, seed + 1),
                                                   random_matrix(2, c, p, seed + 2),
                                                   p);
                const Matrix k = kernel(a, p);
                CAPTURE(pv, r, c, a, k);
                REQUIRE(k.cols() == c);
                REQUIRE(k.rows() == c - rank_naive(a, p));
                REQUIRE(rank_naive(k, p) == k.rows()); // independent
                if (a.rows() > 0 && k.rows() > 0)
                    REQUIRE(multiply(a, k.transpose(), p) == Matrix(a.rows(), k.rows()));
            }
    }
}

TEST_CASE("inverse: a a^-1 = I, singular and non-square throw", "[ff][matrix]") {
    std::uint64_t seed = 200;
    for (std::int64_t pv : kPrimes) {
        const Prime p{pv};
        for (std::int64_t n : {1, 2, 5}) {
            Matrix a = random_matrix(n, n, p, ++seed);
            while (rank_naive(a, p) < n)
                a = random_matrix(n, n, p, ++seed);
            CAPTURE(pv, n, a);
            REQUIRE(multiply(a, inverse(a, p), p) == identity(n));
            REQUIRE(multiply(inverse(a, p), a, p) == identity(n));
        }
        CHECK_THROWS_AS(inverse(Matrix(3, 3), p), InvalidArgument);
        CHECK_THROWS_WITH(inverse(Matrix(3, 3), p), Catch::Contains("singular"));
        CHECK_THROWS_AS(inverse(Matrix(2, 3), p), InvalidArgument);
    }
}

TEST_CASE("vandermonde d x d minors are invertible (Lemma 4.7, small)", "[ff][matrix]") {
    const Prime p{11};
    const Matrix k = vandermonde(10, 3, p);
    for (std::int64_t a = 0; a < 10; ++a)
        for (std::int64_t b = a + 1; b < 10; ++b)
            for (std::int64_t c = b + 1; c < 10; ++c)
                REQUIRE(rank_naive(k.select_rows({a, b, c}), p) == 3);
}

TEST_CASE("matrix bad input throws InvalidArgument", "[ff][matrix]") {
    const Prime p{7};
    CHECK_THROWS_AS(Matrix(-1, 2), InvalidArgument);
    Matrix bad(2, 2);
    bad(0, 0) = 7; // not reduced mod 7
    CHECK_THROWS_AS(rank(bad, p), InvalidArgument);
    CHECK_THROWS_AS(kernel(bad, p), InvalidArgument);
    CHECK_THROWS_AS(inverse(bad, p), InvalidArgument);
    bad(0, 0) = -1;
    CHECK_THROWS_AS(rank(bad, p), InvalidArgument);
    CHECK_THROWS_AS(multiply(Matrix(2, 3), Matrix(2, 3), p), InvalidArgument);
    CHECK_THROWS_AS(Matrix(2, 2).select_rows({2}), InvalidArgument);
}
