// Tests of ioattn/ff/field.hpp: primality against trial division, validation, modular ops.

#include <ioattn/error.hpp>
#include <ioattn/ff/field.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

namespace {

bool trial_division(std::int64_t n) {
    if (n < 2)
        return false;
    for (std::int64_t f = 2; f * f <= n; ++f)
        if (n % f == 0)
            return false;
    return true;
}

} // namespace

TEST_CASE("is_prime agrees with trial division below 20000", "[ff][field]") {
    for (std::int64_t n = -3; n < 20000; ++n) {
        CAPTURE(n);
        REQUIRE(is_prime(n) == trial_division(n));
    }
}

TEST_CASE("is_prime on large primes, Carmichael numbers and semiprimes", "[ff][field]") {
    CHECK(is_prime((std::int64_t{1} << 61) - 1));
    CHECK(is_prime((std::int64_t{1} << 60) - 93));
    CHECK(is_prime(2147483647));
    CHECK(is_prime(1000000007));
    CHECK_FALSE(is_prime(561));
    CHECK_FALSE(is_prime(3215031751)); // strong pseudoprime to bases 2, 3, 5, 7
    CHECK_FALSE(is_prime(std::int64_t{1000000007} * 998244353));
    CHECK_FALSE(is_prime((std::int64_t{1} << 60) - 1));
}

TEST_CASE("next_prime", "[ff][field]") {
    CHECK(next_prime(0) == 2);
    CHECK(next_prime(2) == 3);
    CHECK(next_prime(256) == 257);
    CHECK(next_prime(1 << 20) == 1048583);
    CHECK(next_prime((std::int64_t{1} << 60) - 100) == (std::int64_t{1} << 60) - 93);
    CHECK_THROWS_AS(next_prime(-1), InvalidArgument);
    CHECK_THROWS_AS(next_prime((std::int64_t{1} << 60) - 93), InvalidArgument);
}

TEST_CASE("Prime validation throws InvalidArgument", "[ff][field]") {
    CHECK(Prime::checked(7).p == 7);
    CHECK_THROWS_AS(Prime::checked(6), InvalidArgument);
    CHECK_THROWS_WITH(Prime::checked(6), Catch::Contains("p = 6 is not prime"));
    CHECK_THROWS_AS(Prime::checked(1), InvalidArgument);
    CHECK_THROWS_AS(Prime::checked(0), InvalidArgument);
    CHECK_THROWS_AS(Prime::checked(-7), InvalidArgument);
    CHECK_THROWS_AS(Prime::checked((std::int64_t{1} << 61) - 1), InvalidArgument); // prime, too big
    CHECK_THROWS_WITH(Prime::checked((std::int64_t{1} << 61) - 1), Catch::Contains("2^60"));
    CHECK(Prime::for_size(17, 16).p == 17);
    CHECK_THROWS_AS(Prime::for_size(13, 16), InvalidArgument);
    CHECK_THROWS_AS(Prime::for_size(17, 17), InvalidArgument);
    CHECK(Prime::for_size(13, 16, true).p == 13);
}

TEST_CASE("mul_mod, pow_mod against 128-bit arithmetic", "[ff][field]") {
    __extension__ using U128 = unsigned __int128;
    std::mt19937_64 rng(5);
    for (std::int64_t pv :
         {std::int64_t{2}, std::int64_t{7}, std::int64_t{65537}, (std::int64_t{1} << 60) - 93}) {
        const Prime p{pv};
        std::uniform_int_distribution<std::int64_t> dist(0, pv - 1);
        for (int t = 0; t < 200; ++t) {
            const std::int64_t a = dist(rng);
            const std::int64_t b = dist(rng);
            CAPTURE(pv, a, b);
            REQUIRE(mul_mod(a, b, p) ==
                    static_cast<std::int64_t>(static_cast<U128>(a) * static_cast<U128>(b) %
                                              static_cast<U128>(pv)));
            REQUIRE(add_mod(a, b, p) ==
                    static_cast<std::int64_t>((static_cast<U128>(a) + static_cast<U128>(b)) %
                                              static_cast<U128>(pv)));
            REQUIRE(add_mod(sub_mod(a, b, p), b, p) == a);
            std::int64_t naive = 1 % pv;
            for (int e = 0; e < 13; ++e)
                naive = mul_mod(naive, a, p);
            REQUIRE(pow_mod(a, 13, p) == naive);
        }
        if (pv > 2) // Fermat: a^(p-1) = 1
            CHECK(pow_mod(3, pv - 1, p) == 1);
    }
}

TEST_CASE("derive_seed separates streams and indices", "[ff][field]") {
    CHECK(derive_seed(1, 2, 3) == derive_seed(1, 2, 3));
    CHECK(derive_seed(1, 2, 3) != derive_seed(1, 2, 4));
    CHECK(derive_seed(1, 2, 3) != derive_seed(1, 3, 3));
    CHECK(derive_seed(1, 2, 3) != derive_seed(2, 2, 3));
}
