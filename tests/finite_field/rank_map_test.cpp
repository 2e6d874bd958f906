// Tests of ioattn/ff/rank_map.hpp: the maps Q -> (Q K^T)|_I and K -> (Q K^T)|_I against naive
// products, their NTL ranks against r_R, r_C and the naive rank, over several primes.

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/rank_map.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

namespace {

// vec(Q) as a column.
Matrix column(const Matrix& q) {
    Matrix c(q.rows() * q.cols(), 1);
    for (std::int64_t i = 0; i < q.rows(); ++i)
        for (std::int64_t j = 0; j < q.cols(); ++j)
            c(i * q.cols() + j, 0) = q(i, j);
    return c;
}

} // namespace

TEST_CASE("query_map and key_map apply to vec(Q), vec(K) as the restricted product",
          "[ff][rank_map]") {
    for (std::int64_t pv : {11, 65537, 2147483647}) {
        const Prime p{pv};
        for (std::uint64_t seed = 1; seed < 6; ++seed) {
            const IndexSet s = uniform_random(6, 14, seed);
            const Matrix q = random_matrix(6, 3, p, seed + 100);
            const Matrix k = random_matrix(6, 3, p, seed + 200);
            const std::vector<std::int64_t> want = restricted_product(q, k, s, p);
            const Matrix full = multiply(q, k.transpose(), p);
            for (std::size_t e = 0; e < want.size(); ++e)
                REQUIRE(want[e] == full(s.entries()[e].row, s.entries()[e].col));
            const Matrix via_q = multiply(query_map(s, k, p), column(q), p);
            const Matrix via_k = multiply(key_map(s, q, p), column(k), p);
            for (std::size_t e = 0; e < want.size(); ++e) {
                REQUIRE(via_q(static_cast<std::int64_t>(e), 0) == want[e]);
                REQUIRE(via_k(static_cast<std::int64_t>(e), 0) == want[e]);
            }
        }
    }
}

TEST_CASE("rank of the maps = r_R, r_C for Vandermonde operands (full, blocks, naive)",
          "[ff][rank_map]") {
    for (std::int64_t pv : {std::int64_t{11}, std::int64_t{257}, (std::int64_t{1} << 60) - 93}) {
        const Prime p{pv};
        for (std::int64_t d = 1; d <= 4; ++d) {
            const Matrix k = vandermonde(8, d, p);
            for (std::uint64_t seed = 0; seed < 8; ++seed) {
                const IndexSet s = uniform_random(8, static_cast<std::int64_t>(seed * 8), seed);
                CAPTURE(pv, d, seed);
                const Matrix qm = query_map(s, k, p);
                REQUIRE(rank(qm, p) == rank_rows(s, d));
                REQUIRE(rank_naive(qm, p) == rank_rows(s, d));
                REQUIRE(query_map_rank_blocks(s, k, p) == rank_rows(s, d));
                REQUIRE(rank(key_map(s, k, p), p) == rank_cols(s, d));
                REQUIRE(key_map_rank_blocks(s, k, p) == rank_cols(s, d));
            }
        }
    }
}

TEST_CASE("the formula fails for a rank-deficient K (negative control)", "[ff][rank_map]") {
    const Prime p{101};
    const Matrix k = rank_deficient(6, 3, 2, p, 4);
    const IndexSet row = full_rows(6, 0, 1);
    CHECK(rank_rows(row, 3) == 3);
    CHECK(rank(query_map(row, k, p), p) == 2);
    CHECK(query_map_rank_blocks(row, k, p) == 2);
}

TEST_CASE("rank_map bad input", "[ff][rank_map]") {
    const Prime p{11};
    const IndexSet s = full_rows(4, 0, 1);
    CHECK_THROWS_AS(query_map(s, Matrix(3, 2), p), InvalidArgument);
    CHECK_THROWS_AS(key_map(s, Matrix(5, 2), p), InvalidArgument);
    CHECK_THROWS_AS(restricted_product(Matrix(4, 2), Matrix(4, 3), s, p), InvalidArgument);
}
