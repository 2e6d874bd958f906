// The checks behind softmax_bf16_test.cpp, compiled for the avx512bf16 region only
// (tests/CMakeLists.txt): kernels/softmax_bf16.hpp's exp2_p6 against exp2 in double over
// [-126, 0] and at its special values, and softmax_pairs against the float kernels'
// online_softmax_block followed by pack_p on blocks with -inf, +inf and NaN scores, odd key
// counts and a lane-vector count that takes both the 4-vector and the 1-vector paths.

#include "check_values.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

// The rest of this file is compiled for the avx512bf16 region (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/softmax_bf16.hpp>

namespace softmax_bf16_checks::IOATTN_ISA {

namespace k = ioattn::kernels;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// exp2_p6 of 16 copies of x, lane 0.
float exp2_p6_at(float x) {
    return k::exp2_p6(k::splat<float>(x))[0];
}

/// The bf16 element `row` of lane r of pack_p's pairs, as bits.
std::uint16_t
pair_bits(const std::vector<float>& t, std::int64_t ld, std::int64_t row, std::int64_t r) {
    std::uint32_t w = 0;
    std::memcpy(&w, &t[static_cast<std::size_t>(row / 2 * ld + r)], sizeof(w));
    return static_cast<std::uint16_t>(row % 2 == 0 ? w : w >> 16U);
}

/// |a - b| in units of bf16's last place, for finite bf16 bits of one sign.
int ulps(std::uint16_t a, std::uint16_t b) {
    return std::abs(static_cast<int>(a) - static_cast<int>(b));
}

} // namespace

void exp2_within_two_roundings() {
    const double bound = std::ldexp(1.0, -23);
    double worst = 0;
    for (std::int64_t i = 0; i <= 2'000'000; ++i) {
        const float x = static_cast<float>(-126.0 * static_cast<double>(i) / 2e6);
        const double want = std::exp2(static_cast<double>(x));
        worst = std::max(worst, std::fabs(static_cast<double>(exp2_p6_at(x)) - want) / want);
    }
    CAPTURE(worst);
    CHECK(worst <= bound);
    CHECK(exp2_p6_at(0.0F) == 1.0F);
    CHECK(exp2_p6_at(-kInf) == 0.0F);
    CHECK(exp2_p6_at(-3000.0F) == 0.0F);
    CHECK(exp2_p6_at(-127.5F) < std::ldexp(1.0F, -126));
    CHECK(std::isnan(exp2_p6_at(std::numeric_limits<float>::quiet_NaN())));
}

void pairs_as_block_then_pack() {
    for (const std::int64_t n :
         {std::int64_t{1}, std::int64_t{2}, std::int64_t{7}, std::int64_t{40}}) {
        CAPTURE(n);
        const std::int64_t n_vec = 5, ld = n_vec * 16;
        std::vector<float> s = random_values<float>(n * ld, 11);
        for (auto& x : s)
            x *= 8.0F; // weights from 2^-16 to 1
        // lane 3: every key masked; lane 17: +inf at key 0 (and at every key of lane 18);
        // lane 33: NaN at the last key; lane 72: -inf at every key but one
        for (std::int64_t c = 0; c < n; ++c) {
            s[static_cast<std::size_t>(c * ld + 3)] = -kInf;
            s[static_cast<std::size_t>(c * ld + 18)] = kInf;
            if (c + 1 < n)
                s[static_cast<std::size_t>(c * ld + 72)] = -kInf;
        }
        s[17] = kInf;
        s[static_cast<std::size_t>((n - 1) * ld + 33)] = std::numeric_limits<float>::quiet_NaN();
        // a running state from an earlier block: m finite, -inf, or above every score
        std::vector<float> m(static_cast<std::size_t>(ld)), l(m.size()), al(m.size());
        for (std::int64_t r = 0; r < ld; ++r) {
            m[static_cast<std::size_t>(r)] = r % 3 == 0 ? -kInf : static_cast<float>(r % 7) - 2.0F;
            l[static_cast<std::size_t>(r)] = r % 3 == 0 ? 0.0F : 1.5F;
        }
        std::vector<float> t_ref = s, m_ref = m, l_ref = l, al_ref = al;
        k::online_softmax_block(
            t_ref.data(), ld, n, n_vec, m_ref.data(), l_ref.data(), al_ref.data());
        k::pack_p(t_ref.data(), ld, n, n_vec);
        k::softmax_pairs(s.data(), ld, n, n_vec, m.data(), l.data(), al.data());

        bool state_ok = true, l_ok = true, p_ok = true;
        for (std::int64_t r = 0; r < ld; ++r) {
            const auto i = static_cast<std::size_t>(r);
            state_ok = state_ok && m[i] == m_ref[i] && al[i] == al_ref[i];
            // each weight within 2^-23 of exp2 and the reference's within 2^-24 of it
            l_ok = l_ok && (l[i] == l_ref[i] || (std::isnan(l[i]) && std::isnan(l_ref[i])) ||
                            std::fabs(l[i] - l_ref[i]) <= 4e-7F * l_ref[i]);
            for (std::int64_t c = 0; c < n; ++c) {
                const std::uint16_t got = pair_bits(s, ld, c, r), want = pair_bits(t_ref, ld, c, r);
                const bool nan = (want & 0x7F80U) == 0x7F80U && (want & 0x7FU) != 0;
                p_ok = p_ok && (nan ? (got & 0x7F80U) == 0x7F80U && (got & 0x7FU) != 0
                                    : ulps(got, want) <= 1);
            }
        }
        CHECK(state_ok);
        CHECK(l_ok);
        CHECK(p_ok);
        CHECK(pair_bits(s, ld, 0, 17) == 0x3F80U); // +inf against a +inf max: P = 1, not NaN
        if (n > 1)
            CHECK(pair_bits(s, ld, 1, 17) == 0U);
        CHECK(pair_bits(s, ld, n - 1, 72) == 0x3F80U); // its one visible key (m was -inf)
    }
}

} // namespace softmax_bf16_checks::IOATTN_ISA
