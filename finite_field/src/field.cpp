// ioattn::ff::Prime, is_prime: the modulus of F_p and its validation
// Field: integers mod p, 2 <= p < 2^60; validated here because Debian's NTL aborts on errors.
// Exactness: Miller-Rabin with bases 2..37 is deterministic below 3.3 * 10^24 > 2^63.
// Ops: is_prime O(12 log n) multiplications mod n (128-bit products).
// Tests: tests/finite_field/field_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/field.hpp>

#include <array>
#include <string>

namespace ioattn::ff {

namespace {

__extension__ using U128 = unsigned __int128;

std::uint64_t mulmod_u(std::uint64_t a, std::uint64_t b, std::uint64_t n) {
    return static_cast<std::uint64_t>(static_cast<U128>(a) * b % n);
}

std::uint64_t powmod_u(std::uint64_t a, std::uint64_t e, std::uint64_t n) {
    std::uint64_t r = 1 % n;
    a %= n;
    while (e > 0) {
        if (e & 1U)
            r = mulmod_u(r, a, n);
        a = mulmod_u(a, a, n);
        e >>= 1U;
    }
    return r;
}

} // namespace

bool is_prime(std::int64_t n) {
    if (n < 2)
        return false;
    const auto u = static_cast<std::uint64_t>(n);
    constexpr std::array<std::uint64_t, 12> kBases{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    for (std::uint64_t b : kBases) {
        if (u == b)
            return true;
        if (u % b == 0)
            return false;
    }
    // --- n - 1 = 2^s * q, q odd ---
    std::uint64_t q = u - 1;
    int s = 0;
    while ((q & 1U) == 0) {
        q >>= 1U;
        ++s;
    }
    for (std::uint64_t b : kBases) {
        std::uint64_t x = powmod_u(b, q, u);
        if (x == 1 || x == u - 1)
            continue;
        bool composite = true;
        for (int r = 1; r < s && composite; ++r) {
            x = mulmod_u(x, x, u);
            if (x == u - 1)
                composite = false;
        }
        if (composite)
            return false;
    }
    return true;
}

std::int64_t next_prime(std::int64_t n) {
    constexpr std::int64_t kLimit = std::int64_t{1} << kMaxPrimeBits;
    if (n < 0 || n >= kLimit - 93) // 2^60 - 93 is the largest prime below 2^60
        throw InvalidArgument("ioattn::ff::next_prime: n = " + std::to_string(n) +
                              " (expected 0 <= n < 2^60 - 93)");
    std::int64_t c = n + 1;
    while (!is_prime(c))
        ++c;
    return c;
}

Prime Prime::checked(std::int64_t p, std::string_view where) {
    if (p >= (std::int64_t{1} << kMaxPrimeBits))
        throw InvalidArgument(std::string(where) + ": p = " + std::to_string(p) +
                              " is too large (expected p < 2^60)");
    if (!is_prime(p))
        throw InvalidArgument(std::string(where) + ": p = " + std::to_string(p) + " is not prime");
    return Prime{p};
}

Prime Prime::for_size(std::int64_t p, std::int64_t n, bool allow_small, std::string_view where) {
    const Prime r = checked(p, where);
    if (!allow_small && p <= n)
        throw InvalidArgument(std::string(where) + ": p = " + std::to_string(p) +
                              " <= N = " + std::to_string(n) +
                              " (expected p > N; p <= N is a negative control)");
    return r;
}

std::int64_t mul_mod(std::int64_t a, std::int64_t b, const Prime& p) {
    return static_cast<std::int64_t>(mulmod_u(static_cast<std::uint64_t>(a),
                                              static_cast<std::uint64_t>(b),
                                              static_cast<std::uint64_t>(p.p)));
}

std::int64_t pow_mod(std::int64_t a, std::int64_t e, const Prime& p) {
    return static_cast<std::int64_t>(powmod_u(static_cast<std::uint64_t>(a),
                                              static_cast<std::uint64_t>(e),
                                              static_cast<std::uint64_t>(p.p)));
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    std::uint64_t z =
        seed * 0x9E3779B97F4A7C15ULL ^ (stream + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL;
    z ^= index * 0x94D049BB133111EBULL + 0x2545F4914F6CDD1DULL;
    // SplitMix64 finaliser
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

} // namespace ioattn::ff
