// ioattn::ff::bch_parity_check: the binary construction of Saha & Ye Lemma 4.9
// Field: F_2 (and GF(2^m) = F_2[x]/(f), f primitive: x^3+x+1, x^4+x+1, x^5+x^2+1, x^6+x+1).
// Row i of K (i < N = 2^m - 1) is the bit expansion of (alpha^i, alpha^(3i), ...,
//   alpha^((2t-1)i)): the transposed parity-check matrix of the narrow-sense binary BCH code
//   of designed distance s = 2t + 1. A binary c with sum_i c_i alpha^(ji) = 0 for odd j also
//   vanishes at even j (squares in characteristic 2), so the code has distance >= s and every
//   s - 1 rows of K are independent over F_2; exp_binary.cpp checks it.
// Ops: N t GF(2^m) multiplications (shift-and-reduce). No NTL.
// Tests: tests/finite_field/construct_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/construct.hpp>

#include <array>
#include <string>

namespace ioattn::ff {

namespace {

// Primitive polynomials of degree 3..6 (bit k = coefficient of x^k).
constexpr std::array<unsigned, 7> kPrimitive{0, 0, 0, 0b1011U, 0b10011U, 0b100101U, 0b1000011U};

// alpha^e in GF(2^m) as an m-bit vector, by repeated multiplication by x.
unsigned alpha_pow(int m, long e) {
    const long order = (1L << m) - 1;
    e %= order;
    unsigned v = 1;
    for (long k = 0; k < e; ++k) {
        v <<= 1U; // v = v * x
        if (v & (1U << static_cast<unsigned>(m)))
            v ^= kPrimitive[static_cast<std::size_t>(m)]; // reduce mod f
    }
    return v;
}

} // namespace

Matrix bch_parity_check(int m, int t) {
    const long n = (1L << m) - 1;
    if (m < 3 || m > 6 || t < 1 || 2L * t + 1 > n || m * t > 64)
        throw InvalidArgument("ioattn::ff::bch_parity_check: m = " + std::to_string(m) +
                              ", t = " + std::to_string(t) +
                              " (expected 3 <= m <= 6, t >= 1, 2t + 1 <= 2^m - 1)");
    Matrix k(n, static_cast<std::int64_t>(m) * t);
    for (long i = 0; i < n; ++i)
        for (int s = 0; s < t; ++s) {
            const unsigned v = alpha_pow(m, (2L * s + 1) * i); // alpha^((2s+1) i)
            for (int b = 0; b < m; ++b)
                k(i, static_cast<std::int64_t>(s) * m + b) = (v >> static_cast<unsigned>(b)) & 1U;
        }
    return k;
}

} // namespace ioattn::ff
