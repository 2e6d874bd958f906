#pragma once
// Seeded values for the per-instruction-set kernel checks (strip_checks.cpp, pack_checks.cpp),
// with internal linkage: each variant's translation unit compiles its own copy for its own
// instruction set.

#include <cstdint>
#include <random>
#include <vector>

namespace {

/// n values uniform in [-2, 2) from a seeded generator.
template <typename T>
std::vector<T> random_values(std::int64_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v)
        x = static_cast<T>(u(gen));
    return v;
}

} // namespace
