#pragma once
/// The prime field F_p of the verifier (docs/design.md section 10.6). Units are field elements.
///
/// A `Prime` is a validated modulus: p prime and 2 <= p < 2^60 (NTL's single-precision limit on
/// 64-bit targets). Debian's NTL aborts on errors, so every ff entry point validates its
/// modulus and sizes here, before NTL is called, and throws ioattn::InvalidArgument.

#include <cstdint>
#include <string_view>

namespace ioattn::ff {

/// Moduli must be below 2^kMaxPrimeBits.
inline constexpr int kMaxPrimeBits = 60;

/// Deterministic primality test for 0 <= n < 2^63 (Miller-Rabin with the first twelve primes
/// as bases, exact for 64-bit n). No NTL. Thread-safe.
bool is_prime(std::int64_t n);

/// The smallest prime > n (n >= 0, result < 2^60; throws InvalidArgument otherwise).
std::int64_t next_prime(std::int64_t n);

/// A validated prime modulus.
struct Prime {
    std::int64_t p = 2;

    /// Throws InvalidArgument("<where>: p = 6 is not prime") unless p is prime and p < 2^60.
    static Prime checked(std::int64_t p, std::string_view where = "ioattn::ff::Prime");

    /// As checked(), and additionally p > n (the Vandermonde points 0..n-1 are then distinct),
    /// unless `allow_small` (negative controls).
    static Prime for_size(std::int64_t p,
                          std::int64_t n,
                          bool allow_small = false,
                          std::string_view where = "ioattn::ff::Prime");

    bool operator==(const Prime&) const = default;
};

/// (a * b) mod p for 0 <= a, b < p.
std::int64_t mul_mod(std::int64_t a, std::int64_t b, const Prime& p);

/// (a + b) mod p for 0 <= a, b < p.
inline std::int64_t add_mod(std::int64_t a, std::int64_t b, const Prime& p) {
    const std::int64_t s = a + b;
    return s >= p.p ? s - p.p : s;
}

/// (a - b) mod p for 0 <= a, b < p.
inline std::int64_t sub_mod(std::int64_t a, std::int64_t b, const Prime& p) {
    return a >= b ? a - b : a - b + p.p;
}

/// a^e mod p for e >= 0.
std::int64_t pow_mod(std::int64_t a, std::int64_t e, const Prime& p);

/// Deterministic 64-bit seed of (seed, stream, index): SplitMix64 of their combination, so every
/// instance of every experiment draws an independent, thread-count-independent stream.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

} // namespace ioattn::ff
