// ioattn::fp16 (IEEE half storage) and decode over an fp16 cache: every half widens exactly
// (all 65,536 bit patterns against the value of their fields); narrowing rounds to the nearest
// half, ties to even (random floats over the whole half range against the nearest of all finite
// halves, and the edges: the largest half, overflow, subnormals, NaN); an fp16 cache decodes bit
// for bit as an fp32 cache of the same rounded values, contiguous and paged, with and without a
// pattern, and agrees with ioattn::attention on them.

#include "decode_case.hpp"

#include <ioattn/decode.hpp>
#include <ioattn/fp16.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace {

using ioattn::fp16;
using ioattn::test::DecodeCase;

/// The value of half bits h from their fields, in double.
double half_value(std::uint16_t h) {
    const int exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
    if (exp == 0)
        return sign * std::ldexp(man, -24);
    if (exp == 31)
        return man == 0 ? sign * std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::quiet_NaN();
    return sign * std::ldexp(1024 + man, exp - 25);
}

/// The nearest finite half to x (|x| < 65520), ties to the even bit pattern, by search over
/// the sorted non-negative halves.
std::uint16_t nearest_half(float x) {
    static const std::vector<std::pair<double, std::uint16_t>> halves = [] {
        std::vector<std::pair<double, std::uint16_t>> v;
        for (std::uint32_t h = 0; h < 0x7C00; ++h)
            v.emplace_back(half_value(static_cast<std::uint16_t>(h)),
                           static_cast<std::uint16_t>(h));
        return v;
    }();
    const double a = std::abs(static_cast<double>(x));
    const auto hi = std::lower_bound(halves.begin(), halves.end(), std::pair{a, std::uint16_t{0}});
    std::uint16_t bits = 0;
    if (hi == halves.end()) {
        bits = 0x7BFF; // above the largest half, below the overflow threshold
    } else if (hi->first == a || hi == halves.begin()) {
        bits = hi->second;
    } else {
        const auto lo = hi - 1;
        const double below = a - lo->first, above = hi->first - a;
        bits = below < above           ? lo->second
               : above < below         ? hi->second
               : (lo->second & 1) == 0 ? lo->second
                                       : hi->second;
    }
    return static_cast<std::uint16_t>(bits | (std::signbit(x) ? 0x8000 : 0));
}

} // namespace

TEST_CASE("fp16 widens every half exactly", "[decode][fp16]") {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto b = static_cast<std::uint16_t>(h);
        const float f = fp16::widen(b);
        const double want = half_value(b);
        CAPTURE(h);
        if (std::isnan(want)) {
            REQUIRE(std::isnan(f));
            REQUIRE(std::signbit(f) == ((h & 0x8000) != 0));
            REQUIRE((std::bit_cast<std::uint32_t>(f) & 0x00400000U) != 0); // quiet
        } else {
            REQUIRE(static_cast<double>(f) == want);
            REQUIRE(std::signbit(f) == ((h & 0x8000) != 0));
            REQUIRE(fp16(f).bits == b); // and back
        }
    }
}

TEST_CASE("fp16 rounds to the nearest half, ties to even", "[decode][fp16]") {
    CHECK(fp16(65504.0F).bits == 0x7BFF);
    CHECK(fp16(65519.996F).bits == 0x7BFF);
    CHECK(fp16(65520.0F).bits == 0x7C00); // the tie with 65536: to even, infinity
    CHECK(fp16(-1e6F).bits == 0xFC00);
    CHECK(fp16(0x1p-24F).bits == 0x0001);            // the smallest subnormal
    CHECK(fp16(0x1p-25F).bits == 0x0000);            // a tie with 0: to even
    CHECK(fp16(0x1.002p-25F).bits == 0x0001);        // above the tie
    CHECK(fp16(3 * 0x1p-25F).bits == 0x0002);        // a tie between 1 and 2 units: to 2
    CHECK(fp16(1023.5F * 0x1p-24F).bits == 0x0400);  // carries into the smallest normal
    CHECK(fp16(1.0F + 0x1p-11F).bits == 0x3C00);     // a tie: to even
    CHECK(fp16(1.0F + 3 * 0x1p-11F).bits == 0x3C02); // a tie: to even (up)
    CHECK(fp16(-0.0F).bits == 0x8000);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(static_cast<float>(fp16(nan))));
    CHECK(std::isnan(static_cast<float>(fp16(-nan))));
    CHECK(std::signbit(static_cast<float>(fp16(-nan))));
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> exponent(-27.0, 15.99);
    for (int i = 0; i < 300000; ++i) {
        const auto x = static_cast<float>(std::exp2(exponent(rng)) * ((i & 1) != 0 ? -1 : 1));
        CAPTURE(x);
        REQUIRE(fp16(x).bits == nearest_half(x));
    }
}

TEST_CASE("decode over an fp16 cache equals fp32 of the same rounded values", "[decode][fp16]") {
    for (const char* pattern : {"", "causal-window:40+global:4"}) {
        DecodeCase<float, fp16> h(3, 8, 2, 2, 64, 48, 600, {600, 2, 129}, 31);
        h.pattern = pattern;
        DecodeCase<float> f = ioattn::test::widened(h);
        ioattn::decode(h.args());
        ioattn::decode(f.args());
        CAPTURE(pattern);
        CHECK(std::memcmp(h.o.data(), f.o.data(), f.o.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(h.lse.data(), f.lse.data(), f.lse.size() * sizeof(float)) == 0);
        for (std::int64_t s = 0; s < 3; ++s) { // and attention on the same values
            const auto [oo, ll] = h.oracle(s);
            for (std::size_t e = 0; e < oo.size(); ++e)
                CHECK(std::abs(h.o[static_cast<std::size_t>(s) * oo.size() + e] - oo[e]) <= 2e-5F);
        }
        h.build_paged(16, 3);
        std::fill(h.o.begin(), h.o.end(), 0.0F);
        ioattn::decode(h.args(true));
        CHECK(std::memcmp(h.o.data(), f.o.data(), f.o.size() * sizeof(float)) == 0);
    }
}
