// ioattn::ff::random_matrix, rank_deficient: random operands and the rank-deficient control
// Field: F_p; entries uniform in [0, p) from mt19937_64(seed) (reproducible on every platform).
// Exactness: rank_deficient = A B with A n x r, B r x d random, redrawn until NTL's rank is r.
// Ops: random_matrix r c draws; rank_deficient O(n r d) per draw (expected < 1 + 2/p draws).
// Tests: tests/finite_field/construct_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>

#include <random>
#include <string>

namespace ioattn::ff {

Matrix random_matrix(std::int64_t rows, std::int64_t cols, const Prime& p, std::uint64_t seed) {
    if (rows < 0 || cols < 0)
        throw InvalidArgument("ioattn::ff::random_matrix: shape " + std::to_string(rows) + " x " +
                              std::to_string(cols) + " (expected sizes >= 0)");
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> dist(0, p.p - 1);
    Matrix m(rows, cols);
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
            m(i, j) = dist(rng);
    return m;
}

Matrix rank_deficient(
    std::int64_t n, std::int64_t d, std::int64_t rank_k, const Prime& p, std::uint64_t seed) {
    if (rank_k < 1 || rank_k >= d || d > n)
        throw InvalidArgument("ioattn::ff::rank_deficient: N = " + std::to_string(n) +
                              ", d = " + std::to_string(d) + ", rank = " + std::to_string(rank_k) +
                              " (expected 1 <= rank < d <= N)");
    for (std::uint64_t draw = 0;; ++draw) {
        // --- K = A B, A n x r, B r x d: rank <= r, equal for almost every draw ---
        const Matrix a = random_matrix(n, rank_k, p, derive_seed(seed, 1, draw));
        const Matrix b = random_matrix(rank_k, d, p, derive_seed(seed, 2, draw));
        Matrix k = multiply(a, b, p);
        if (rank(k, p) == rank_k)
            return k;
    }
}

} // namespace ioattn::ff
