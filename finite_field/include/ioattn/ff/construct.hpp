#pragma once
/// Constructions of key matrices K for the verifier (docs/design.md section 10.2).

#include <ioattn/ff/field.hpp>
#include <ioattn/ff/matrix.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::ff {

/// N x d Vandermonde matrix, row i = (1, a_i, a_i^2, ..., a_i^(d-1)) with a_i = i mod p.
/// The a_i are distinct iff p >= N; Lemma 4.7 (every d rows independent) needs that, and the
/// verifier asks p > N. With `allow_repeated_points` (negative controls) p <= N is accepted.
/// Throws InvalidArgument for n < 1, d < 1, d > n, or p <= n without the flag.
Matrix
vandermonde(std::int64_t n, std::int64_t d, const Prime& p, bool allow_repeated_points = false);

/// Vandermonde matrix on the given points (reduced mod p): row i = powers of points[i].
Matrix vandermonde_on(const std::vector<std::int64_t>& points, std::int64_t d, const Prime& p);

/// rows x cols matrix with independent uniform entries in [0, p) from mt19937_64(seed).
Matrix random_matrix(std::int64_t rows, std::int64_t cols, const Prime& p, std::uint64_t seed);

/// The negative control: an n x d matrix of rank exactly `rank_k` < d (a product of random
/// n x rank_k and rank_k x d factors, redrawn until the rank is exact). Throws InvalidArgument
/// unless 1 <= rank_k < d <= n.
Matrix rank_deficient(
    std::int64_t n, std::int64_t d, std::int64_t rank_k, const Prime& p, std::uint64_t seed);

/// The binary case (Saha & Ye Lemma 4.9): the transpose of the parity-check matrix of the
/// narrow-sense binary BCH code of length N = 2^m - 1 and designed distance s = 2t + 1.
/// Row i (i < N) is the bit expansion of (alpha^i, alpha^(3i), ..., alpha^((2t-1)i)) over
/// GF(2^m), so the result is N x (m t) over F_2 and every s - 1 = 2t rows are independent.
/// Throws InvalidArgument unless 3 <= m <= 6 and 1 <= t with 2t < 2^m - 1 and m t <= 64.
Matrix bch_parity_check(int m, int t);

} // namespace ioattn::ff
