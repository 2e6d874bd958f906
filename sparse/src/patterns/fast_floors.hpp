#pragma once
// The floors the seeded pattern builders take once per drawn pair or per row, fast and bit for
// bit those of their formulas (so every seed's pattern is the one the formula gives):
//   geometric_skip(u, log_keep, 1 / log_keep) = floor(log1p(-u) / log_keep)  (log_keep < 0)
//     for u = k 2^-53 (RowRng::uniform), so that 1 - u is exact and log1p(-u) = log(1 - u):
//     random's and powerlaw's geometric gaps;
//   floor_of_power(a) = floor(min(pow(a, 1.5), 1e18))  (a >= 0): powerlaw's bisection.
// Each computes its quotient q another way (log_unit, fdlibm's log, within about 1 ulp of log x
// as glibc's log1p is of the same value; a sqrt(a) within 2 ulp of the power), so the two
// quotients are within 2^-49 of each other, relatively. Where q (1 - 2^-40) and q (1 + 2^-40)
// have the same floor, that is the formula's floor too; else (a quotient within 2^-40 of an
// integer: about one in 10^11) the formula itself is taken. The floors are truncations below
// 2^52 (q >= 0; the baseline x86-64 has no floor instruction). random:0.02 at N = 16384 builds
// in 48 ms against 75 with a log1p per pair, powerlaw:32 in 22 ms against 37 (docs/performance.md
// section 4).
// Tests: tests/sparse/fast_floors_whitebox_test.cpp

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ioattn::sparse::detail {

/// fdlibm's e_log.c constants: ln 2 in two parts and the coefficients of its polynomial (log_unit
/// here, its vector form in geometric_gaps.cpp).
struct LogUnit {
    static constexpr double kLn2Hi = 6.93147180369123816490e-01;
    static constexpr double kLn2Lo = 1.90821492927058770002e-10;
    static constexpr double kLg1 = 6.666666666666735130e-01, kLg2 = 3.999999999940941908e-01;
    static constexpr double kLg3 = 2.857142874366239149e-01, kLg4 = 2.222219843214978396e-01;
    static constexpr double kLg5 = 1.818357216161805012e-01, kLg6 = 1.531383769920937332e-01;
    static constexpr double kLg7 = 1.479819860511658591e-01;
};

/// log x for x in [2^-1022, 1] (normal, positive), within about 1 ulp (fdlibm's e_log.c,
/// without its special cases).
inline double log_unit(double x) {
    using L = LogUnit;
    constexpr double kLn2Hi = L::kLn2Hi, kLn2Lo = L::kLn2Lo, kLg1 = L::kLg1, kLg2 = L::kLg2;
    constexpr double kLg3 = L::kLg3, kLg4 = L::kLg4, kLg5 = L::kLg5, kLg6 = L::kLg6;
    constexpr double kLg7 = L::kLg7;
    const auto bits = std::bit_cast<std::uint64_t>(x);
    const auto hx = static_cast<std::uint32_t>(bits >> 32U);
    std::int32_t k = static_cast<std::int32_t>(hx >> 20U) - 1023;
    const std::uint32_t man = hx & 0x000FFFFFU;
    const std::uint32_t i = (man + 0x95F64U) & 0x100000U; // m >= sqrt(2): halve it
    const std::uint64_t high = static_cast<std::uint64_t>(man | (i ^ 0x3FF00000U)) << 32U;
    const double m = std::bit_cast<double>(high | (bits & 0xFFFFFFFFU));
    k += static_cast<std::int32_t>(i >> 20U);
    const double f = m - 1.0; // exact
    const double s = f / (2.0 + f), z = s * s, w = z * z;
    const double r =
        z * (kLg1 + w * (kLg3 + w * (kLg5 + w * kLg7))) + w * (kLg2 + w * (kLg4 + w * kLg6));
    const double hfsq = 0.5 * f * f, dk = static_cast<double>(k);
    return dk * kLn2Hi - ((hfsq - (s * (hfsq + r) + dk * kLn2Lo)) - f);
}

/// floor(q), q >= 0, when q (1 - 2^-40) and q (1 + 2^-40) have one floor below 2^52; else -1.
inline std::int64_t sure_floor(double q) {
    if (!(q < 0x1p52))
        return -1;
    const auto lo = static_cast<std::int64_t>(q * (1.0 - 0x1p-40));
    return lo == static_cast<std::int64_t>(q * (1.0 + 0x1p-40)) ? lo : -1;
}

/// floor(log1p(-u) / log_keep) for u = k 2^-53 in [0, 1) and log_keep < 0, as the formula
/// computes it; inverse = 1 / log_keep.
inline double geometric_skip(double u, double log_keep, double inverse) {
    if (std::isfinite(inverse)) {
        const std::int64_t fast = sure_floor(log_unit(1.0 - u) * inverse); // q >= 0
        if (fast >= 0)
            return static_cast<double>(fast);
    }
    return std::floor(std::log1p(-u) / log_keep);
}

/// The gaps geometric_gaps (patterns/geometric_gaps.cpp) draws at once: a row of random:0.02
/// at N = 16384 takes about 330, and draws it does not use are dropped with its stream.
inline constexpr std::size_t kGapBatch = 32;

/// floor(min(pow(a, 1.5), 1e18)) for a >= 0, as the formula computes it.
inline std::int64_t floor_of_power(double a) {
    const std::int64_t fast = sure_floor(a * std::sqrt(a));
    if (fast >= 0)
        return fast;
    return static_cast<std::int64_t>(std::floor(std::min(std::pow(a, 1.5), 1e18)));
}

} // namespace ioattn::sparse::detail
