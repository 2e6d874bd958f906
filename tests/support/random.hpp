#pragma once
// Seeded test data: tensors, shapes and tilings drawn from std::mt19937_64, so every failure is
// reproducible from the seed that CAPTURE prints.

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace ioattn::test {

/// IOATTN_TEST_MULTIPLIER (>= 1, default 1) scales the number of random cases.
inline int test_multiplier() {
    const char* env = std::getenv("IOATTN_TEST_MULTIPLIER");
    if (env == nullptr)
        return 1;
    const int m = std::atoi(env);
    return m < 1 ? 1 : m;
}

/// A seeded generator.
class Rng {
public:
    explicit Rng(std::uint64_t seed)
        : engine_(seed) {}

    /// Uniform integer in [lo, hi].
    std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_);
    }

    /// Uniform real in [lo, hi).
    double uniform(double lo, double hi) {
        return std::uniform_real_distribution<double>(lo, hi)(engine_);
    }

    /// Fills `out` with uniform values in [lo, hi) converted to T.
    template <typename T>
    void fill(std::vector<T>& out, double lo = -1.0, double hi = 1.0) {
        for (T& x : out)
            x = static_cast<T>(uniform(lo, hi));
    }

    std::mt19937_64& engine() { return engine_; }

private:
    std::mt19937_64 engine_;
};

} // namespace ioattn::test
