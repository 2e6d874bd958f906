// Tests of the pattern builders' fast floors (sparse/src/patterns/fast_floors.hpp): log_unit is
// within 2 ulp of std::log over (0, 1]; geometric_skip and floor_of_power equal their formulas
// (floor(log1p(-u) / log_keep), floor(min(pow(a, 1.5), 1e18))) bit for bit, on random
// arguments and on the arguments whose quotients lie within a few ulp of an integer, where
// the fast quotient alone would floor to the wrong side; the active ISA target's batched
// gaps (geometric_gaps.cpp, on vectors) are geometric_skip's, given draws and a row's own, and
// its keys (geometric_keys) the gaps added up one at a time, cut at each possible row end.

#include "patterns/fast_floors.hpp"
#include "patterns/pattern_util.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace sp = ioattn::sparse;

namespace {

/// u = k 2^-53, as RowRng::uniform draws it.
double unit(std::uint64_t k) {
    return static_cast<double>(k) * 0x1.0p-53;
}

double skip_formula(double u, double log_keep) {
    return std::floor(std::log1p(-u) / log_keep);
}

} // namespace

TEST_CASE("log_unit is within 2 ulp of log for 0 < x <= 1", "[sparse][patterns]") {
    std::mt19937_64 rng(7);
    const auto check = [](double x) {
        const double want = std::log(x), got = sp::detail::log_unit(x);
        CAPTURE(x, want, got);
        REQUIRE(std::abs(got - want) <= 2 * std::abs(want) * 0x1p-52);
    };
    check(1.0);
    CHECK(sp::detail::log_unit(1.0) == 0.0);
    for (int e = 1; e <= 1022; ++e) // the powers of two and their neighbours
        for (const double x : {std::ldexp(1.0, -e), std::nextafter(std::ldexp(1.0, -e), 1.0)})
            check(x);
    for (int i = 0; i < 200000; ++i) {
        check(1.0 - unit(rng() >> 11U)); // the builders' arguments
        check(std::ldexp(0.5 + unit(rng() >> 11U) / 2, -static_cast<int>(rng() % 1000)));
    }
}

TEST_CASE("geometric_skip is the formula's floor, also where the quotient is near an integer",
          "[sparse][patterns]") {
    std::mt19937_64 rng(11);
    for (const double p : {0.02, 0.5, 0.999, 1e-3, 1e-9, 0.3}) {
        const double log_keep = std::log1p(-p);
        CAPTURE(p);
        for (int i = 0; i < 100000; ++i) {
            const double u = unit(rng() >> 11U);
            REQUIRE(sp::detail::geometric_skip(u, log_keep, 1 / log_keep) ==
                    skip_formula(u, log_keep));
        }
        // u where log1p(-u) / log_keep crosses the integer s: 1 - (1 - p)^s, and the grid
        // points around it
        for (std::int64_t s = 0; s < 3000; ++s) {
            const double at = -std::expm1(static_cast<double>(s) * log_keep);
            const auto k = static_cast<std::int64_t>(std::llround(at * 0x1p53));
            for (std::int64_t dk = -4; dk <= 4; ++dk) {
                if (k + dk < 0 || k + dk >= (std::int64_t{1} << 53))
                    continue;
                const double u = unit(static_cast<std::uint64_t>(k + dk));
                CAPTURE(s, dk, u);
                REQUIRE(sp::detail::geometric_skip(u, log_keep, 1 / log_keep) ==
                        skip_formula(u, log_keep));
            }
        }
    }
    // a log_keep whose inverse overflows: the formula itself
    const double tiny = -0x1p-1070;
    CHECK(sp::detail::geometric_skip(0.5, tiny, 1 / tiny) == skip_formula(0.5, tiny));
}

TEST_CASE("floor_of_power is floor(min(pow(a, 1.5), 1e18)), also at the integers' edges",
          "[sparse][patterns]") {
    const auto formula = [](double a) {
        return static_cast<std::int64_t>(std::floor(std::min(std::pow(a, 1.5), 1e18)));
    };
    std::mt19937_64 rng(13);
    for (int i = 0; i < 200000; ++i) {
        const double a =
            std::ldexp(0.5 + unit(rng() >> 11U) / 2, static_cast<int>(rng() % 80) - 40);
        CAPTURE(a);
        REQUIRE(sp::detail::floor_of_power(a) == formula(a));
    }
    for (std::int64_t n = 0; n < 200000; ++n) { // a = n^(2/3) and its neighbours
        double a = std::cbrt(static_cast<double>(n) * static_cast<double>(n));
        for (int step = 0; step < 3; ++step)
            a = std::nextafter(a, 0.0);
        for (int step = 0; step < 7; ++step, a = std::nextafter(a, 1e300)) {
            CAPTURE(n, a);
            REQUIRE(sp::detail::floor_of_power(a) == formula(a));
        }
    }
    CHECK(sp::detail::floor_of_power(0.0) == 0);
    CHECK(sp::detail::floor_of_power(1e13) == formula(1e13)); // past 2^52: the formula
    CHECK(sp::detail::floor_of_power(1e300) == formula(1e300));
}

TEST_CASE("geometric_gaps are geometric_skip's, batch by batch, on the active ISA target",
          "[sparse][patterns]") {
    namespace spd = sp::detail;
    const spd::GeometricGaps gaps = spd::geometric_gaps_kernel();
    constexpr std::size_t kBatch = spd::kGapBatch;
    std::mt19937_64 rng(17);
    for (const double p : {0.02, 0.5, 0.999, 1e-3, 1e-9, 0.3, 1e-300}) {
        const double log_keep = std::log1p(-p), inverse = 1 / log_keep;
        CAPTURE(p);
        // draws given: random ones, and the grid points around the crossings of the integers
        // s (u = 1 - (1 - p)^s), where only the formula floors right; u = 0 (a gap of 0)
        std::vector<double> draws{0.0, unit(1)};
        for (int i = 0; i < 20000; ++i)
            draws.push_back(unit(rng() >> 11U));
        for (std::int64_t s = 0; s < 2000; ++s) {
            const double at = -std::expm1(static_cast<double>(s) * log_keep);
            const auto k = static_cast<std::int64_t>(std::llround(at * 0x1p53));
            for (std::int64_t dk = -4; dk <= 4; ++dk)
                if (k + dk >= 0 && k + dk < (std::int64_t{1} << 53))
                    draws.push_back(unit(static_cast<std::uint64_t>(k + dk)));
        }
        draws.resize((draws.size() + kBatch - 1) / kBatch * kBatch, 0.5);
        std::array<double, kBatch> got{};
        for (std::size_t b = 0; b < draws.size(); b += kBatch) {
            gaps(nullptr, draws.data() + b, log_keep, inverse, got.data());
            for (std::size_t k = 0; k < kBatch; ++k) {
                CAPTURE(draws[b + k]);
                REQUIRE(got[k] == spd::geometric_skip(draws[b + k], log_keep, inverse));
            }
        }
        // a row's stream: its draws in order, as uniform() gives them
        spd::RowRng stream(3, 5, 7), same(3, 5, 7);
        for (int batch = 0; batch < 50; ++batch) {
            std::array<double, kBatch> u{};
            gaps(&stream, u.data(), log_keep, inverse, got.data());
            for (std::size_t k = 0; k < kBatch; ++k) {
                const double want = same.uniform();
                REQUIRE(u[k] == want);
                REQUIRE(got[k] == spd::geometric_skip(want, log_keep, inverse));
            }
        }
    }
}

TEST_CASE("geometric_keys are the gaps' keys below n_k, on the active ISA target",
          "[sparse][patterns]") {
    namespace spd = sp::detail;
    const spd::GeometricKeys keys_of = spd::geometric_keys_kernel();
    constexpr std::size_t kBatch = spd::kGapBatch;
    std::mt19937_64 rng(23);
    for (const double p : {0.02, 0.5, 0.999, 1e-3, 0.3}) {
        const double log_keep = std::log1p(-p), inverse = 1 / log_keep;
        for (int batch = 0; batch < 200; ++batch) {
            std::array<double, kBatch> u{}, given{};
            for (double& x : u)
                x = unit(rng() >> 11U);
            // the keys of a row long enough for all of them, a gap at a time
            const std::int64_t j = batch % 3 == 0 ? -1 : static_cast<std::int64_t>(rng() % 1000);
            std::array<std::int64_t, kBatch> want{};
            std::int64_t at = j;
            for (std::size_t k = 0; k < kBatch; ++k)
                want[k] = at +=
                    static_cast<std::int64_t>(spd::geometric_skip(u[k], log_keep, inverse)) + 1;
            // the row's end at, just past and just before each key, and past them all
            std::vector<std::int64_t> ends{j + 1, want.back() + 1, want.back() + 1000};
            for (const std::int64_t w : want)
                for (const std::int64_t e : {w - 1, w, w + 1})
                    if (e > j)
                        ends.push_back(e);
            for (const std::int64_t n_k : ends) {
                std::int64_t n_want = 0;
                while (n_want < std::ssize(want) && want[static_cast<std::size_t>(n_want)] < n_k)
                    ++n_want;
                std::array<std::int64_t, kBatch> got{};
                given = u;
                const std::int64_t n =
                    keys_of(nullptr, given.data(), log_keep, inverse, j, n_k, got.data());
                CAPTURE(p, j, n_k);
                REQUIRE(n == n_want);
                for (std::int64_t k = 0; k < n; ++k)
                    REQUIRE(got[static_cast<std::size_t>(k)] == want[static_cast<std::size_t>(k)]);
            }
        }
    }
}
