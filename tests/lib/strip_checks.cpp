// The checks behind strip_test.cpp, compiled once per ISA target like the
// kernels (tests/CMakeLists.txt), so each variant of ioattn/kernels/strip.hpp is tested on the
// CPUs that can run it: each vector kernel (dot4 too) against a plain scalar loop in double on
// every length 0..3 vectors + 1 (so whole vectors and every tail), NaN and -inf handling of the
// softmax pieces, and spmm_row against the same multiply-adds done term by term.

#include "check_values.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/strip.hpp>

namespace strip_checks::IOATTN_ISA {

namespace k = ioattn::kernels;

namespace {

/// v[z] in double.
template <typename T>
double at(const std::vector<T>& v, std::int64_t z) {
    return static_cast<double>(v[static_cast<std::size_t>(z)]);
}

/// |got - want| within a few units of rounding of a sum of n terms of size ~ scale.
template <typename T>
bool near(T got, double want, std::int64_t n, double scale) {
    const double eps = std::numeric_limits<T>::epsilon();
    return std::abs(static_cast<double>(got) - want) <=
           4.0 * eps * static_cast<double>(n + 1) * scale;
}

} // namespace

template <typename T>
void tails() {
    constexpr std::int64_t kL = k::Simd<T>::kLanes;
    for (std::int64_t n = 0; n <= 3 * kL + 1; ++n) {
        CAPTURE(n);
        const auto a = random_values<T>(n, 1);
        const auto b = random_values<T>(n, 2);
        double dot = 0, sum = 0, mx = -1.0;
        for (std::int64_t z = 0; z < n; ++z) {
            dot += at(a, z) * at(b, z);
            mx = std::max(mx, at(a, z));
        }
        for (std::int64_t z = 0; z < n; ++z)
            sum += std::exp2(at(a, z) - mx);
        CHECK(near<T>(k::dot(a.data(), b.data(), n), dot, n, 4.0));
        // dot4: four rows against a, each sum its own (lanes of one row never reach another's)
        const auto c = random_values<T>(n, 3), e = random_values<T>(n, 4);
        const std::vector<T> zero(static_cast<std::size_t>(n), T(0));
        const T* rows4[4] = {b.data(), zero.data(), c.data(), e.data()};
        T got[4] = {T(9), T(9), T(9), T(9)};
        k::dot4(a.data(), rows4, n, got);
        double dc = 0, de = 0;
        for (std::int64_t z = 0; z < n; ++z) {
            dc += at(a, z) * at(c, z);
            de += at(a, z) * at(e, z);
        }
        CHECK(near<T>(got[0], dot, n, 4.0));
        CHECK(got[1] == T(0));
        CHECK(near<T>(got[2], dc, n, 4.0));
        CHECK(near<T>(got[3], de, n, 4.0));
        CHECK(k::strip_max(a.data(), n, T(-1)) == static_cast<T>(mx));
        CHECK(near<T>(k::strip_exp2_sum(a.data(), n, static_cast<T>(mx)), sum, n, 8.0));
        std::vector<T> p(static_cast<std::size_t>(n) + 1, T(7)); // p[n] must stay untouched
        k::strip_probabilities(a.data(), n, static_cast<T>(mx), T(0.5), p.data());
        for (std::int64_t z = 0; z < n; ++z)
            CHECK(near<T>(p[static_cast<std::size_t>(z)], 0.5 * std::exp2(at(a, z) - mx), 1, 8.0));
        CHECK(p[static_cast<std::size_t>(n)] == T(7));
        std::vector<T> y = b, want = b;
        k::axpy(T(3), a.data(), y.data(), n);
        for (std::int64_t z = 0; z < n; ++z)
            CHECK(near<T>(y[static_cast<std::size_t>(z)], at(want, z) + 3.0 * at(a, z), 1, 8.0));
    }
}

template <typename T>
void softmax_pieces() {
    constexpr T kInf = std::numeric_limits<T>::infinity();
    const std::vector<T> s = {T(1), std::numeric_limits<T>::quiet_NaN(), T(3), -kInf, T(2)};
    CHECK(k::strip_max(s.data(), 5, -kInf) == T(3));
    CHECK(std::isnan(k::strip_exp2_sum(s.data(), 5, T(3))));
    const std::vector<T> f = {T(3), -kInf, kInf};
    std::vector<T> p(3);
    k::strip_probabilities(f.data(), 2, T(3), T(1), p.data());
    CHECK(p[0] == T(1));
    CHECK(p[1] == T(0));
    k::strip_probabilities(f.data() + 2, 1, kInf, T(1), p.data()); // +inf at the max: 1, not NaN
    CHECK(p[0] == T(1));
    CHECK(k::strip_max(f.data(), 0, -kInf) == -kInf);
    CHECK(k::strip_exp2_sum(f.data(), 0, T(0)) == T(0));
}

template <typename T>
void spmm_row_in_order() {
    constexpr std::int64_t kL = k::Simd<T>::kLanes;
    const std::int64_t rows = 9;
    for (const std::int64_t n : {std::int64_t{1}, kL - 1, kL, 4 * kL + 3, 9 * kL}) {
        CAPTURE(n);
        const auto x = random_values<T>(rows * n, 3);
        const auto p = random_values<T>(rows, 4);
        const std::vector<std::int64_t> pick = {4, 0, 8, 8, 2};
        std::vector<T> y = random_values<T>(n, 5), want = y;
        for (std::size_t e = 0; e < pick.size(); ++e)
            for (std::int64_t z = 0; z < n; ++z)
                want[static_cast<std::size_t>(z)] =
                    k::fmadd(p[e],
                             x[static_cast<std::size_t>(pick[e] * n + z)],
                             want[static_cast<std::size_t>(z)]);
        k::spmm_row(
            p.data(),
            static_cast<std::int64_t>(pick.size()),
            [&](std::int64_t e) { return x.data() + pick[static_cast<std::size_t>(e)] * n; },
            y.data(),
            n);
        CHECK(y == want);
    }
}

template void tails<float>();
template void tails<double>();
template void softmax_pieces<float>();
template void softmax_pieces<double>();
template void spmm_row_in_order<float>();
template void spmm_row_in_order<double>();

} // namespace strip_checks::IOATTN_ISA
