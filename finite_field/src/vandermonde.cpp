// ioattn::ff::vandermonde: the key matrix of Lemma 4.7
// Field: F_p; row i = (1, a_i, ..., a_i^(d-1)), a_i = i mod p, distinct iff p >= N.
// Exactness: with distinct a_i every d rows form an invertible Vandermonde matrix (Lemma 4.7);
//   exp_vandermonde.cpp checks it through NTL.
// Ops: N (d - 1) mul_mod. No NTL.
// Tests: tests/finite_field/construct_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>

#include <string>

namespace ioattn::ff {

Matrix vandermonde_on(const std::vector<std::int64_t>& points, std::int64_t d, const Prime& p) {
    if (d < 1)
        throw InvalidArgument("ioattn::ff::vandermonde_on: d = " + std::to_string(d) +
                              " (expected >= 1)");
    Matrix k(static_cast<std::int64_t>(points.size()), d);
    for (std::size_t i = 0; i < points.size(); ++i) {
        const std::int64_t a = ((points[i] % p.p) + p.p) % p.p;
        std::int64_t power = 1 % p.p;
        for (std::int64_t j = 0; j < d; ++j) {
            k(static_cast<std::int64_t>(i), j) = power; // K_ij = a_i^j
            power = mul_mod(power, a, p);
        }
    }
    return k;
}

Matrix vandermonde(std::int64_t n, std::int64_t d, const Prime& p, bool allow_repeated_points) {
    if (n < 1 || d < 1 || d > n)
        throw InvalidArgument("ioattn::ff::vandermonde: N = " + std::to_string(n) +
                              ", d = " + std::to_string(d) + " (expected 1 <= d <= N)");
    if (!allow_repeated_points && p.p <= n)
        throw InvalidArgument("ioattn::ff::vandermonde: p = " + std::to_string(p.p) + " <= N = " +
                              std::to_string(n) + " (the points would repeat; expected p > N)");
    std::vector<std::int64_t> points(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        points[static_cast<std::size_t>(i)] = i;
    return vandermonde_on(points, d, p);
}

} // namespace ioattn::ff
