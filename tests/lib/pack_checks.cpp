// The checks behind pack_test.cpp, compiled once per ISA target like the kernels
// (tests/CMakeLists.txt): kernels::pack_rows_transposed against a plain transpose on shapes
// that take the 16 x 16 register blocks and the scalar edges (rows and columns below, at and
// past a block, padding rows zero, rows read through an accessor), and kernels::row_delta
// against the dot product summed in long double on every length 0..3 vectors + 1.

#include "check_values.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/softmax_grad.hpp>

namespace pack_checks::IOATTN_ISA {

namespace k = ioattn::kernels;

template <typename T>
void transposed_rows() {
    const T scale = T(0.5); // a power of two: every scaled value exact
    for (const std::int64_t n :
         {std::int64_t{1}, std::int64_t{15}, std::int64_t{16}, std::int64_t{17}, std::int64_t{40}})
        for (const std::int64_t cols :
             {std::int64_t{1}, std::int64_t{16}, std::int64_t{33}, std::int64_t{64}}) {
            CAPTURE(n, cols);
            const std::int64_t ld = (n + 15) / 16 * 16 + 16; // padding rows past n
            const std::int64_t stride = cols + 3;            // rows apart in memory
            const auto x = random_values<T>(n * stride, 7);
            std::vector<T> t(static_cast<std::size_t>(cols * ld),
                             std::numeric_limits<T>::quiet_NaN());
            k::pack_rows_transposed([&](std::int64_t r) { return x.data() + r * stride; },
                                    n,
                                    cols,
                                    scale,
                                    t.data(),
                                    ld);
            bool exact = true;
            for (std::int64_t c = 0; c < cols; ++c)
                for (std::int64_t r = 0; r < ld; ++r) {
                    const T want =
                        r < n ? x[static_cast<std::size_t>(r * stride + c)] * scale : T(0);
                    exact = exact && t[static_cast<std::size_t>(c * ld + r)] == want;
                }
            CHECK(exact);
        }
}

template <typename T>
void row_delta_in_double() {
    constexpr std::int64_t kL = k::Simd<T>::kLanes;
    for (std::int64_t n = 0; n <= 3 * kL + 1; ++n) {
        CAPTURE(n);
        const auto o = random_values<T>(n, 11);
        const auto d_o = random_values<T>(n, 12);
        long double sum = 0;
        for (std::int64_t z = 0; z < n; ++z)
            sum += static_cast<long double>(o[static_cast<std::size_t>(z)]) *
                   static_cast<long double>(d_o[static_cast<std::size_t>(z)]);
        // products exact in double for float inputs; the sums' error within a few ulps of the
        // largest partial sum (|terms| <= 4, n <= 3 kLanes + 1)
        const double bound = 1e-14 * 4.0 * static_cast<double>(n + 1);
        const auto got = static_cast<long double>(k::row_delta(o.data(), d_o.data(), n));
        const long double rounded = static_cast<long double>(static_cast<T>(sum));
        CHECK(std::fabs(static_cast<double>(got - rounded)) <=
              bound + static_cast<double>(std::fabs(rounded)) *
                          static_cast<double>(std::numeric_limits<T>::epsilon()));
    }
    CHECK(k::row_delta(static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), 0) == T(0));
}

template void transposed_rows<float>();
template void transposed_rows<double>();
template void row_delta_in_double<float>();
template void row_delta_in_double<double>();

} // namespace pack_checks::IOATTN_ISA
