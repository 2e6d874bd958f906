// decode over a bf16 cache with queries that are bf16 values (a bf16 model's): where the CPU
// has AVX512_BF16, S = Q K^T runs on the bf16 words (vdpbf16ps, decode/decode_ops.hpp), and the
// result still agrees with ioattn::attention on the same values as closely as the widened path
// does, at a head dimension that is a multiple of 32 and at one that leaves a masked tail; the
// paged cache and every thread count give the same bits; a call with one query word that is
// not a bf16 value takes the widened path, bit for bit an fp32 cache of the same values.

#include "decode_case.hpp"
#include "scoped_env.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using ioattn::bf16;
using ioattn::test::DecodeCase;

/// The case's queries rounded to bf16 values (kept as float).
void round_queries(DecodeCase<float, bf16>& c) {
    for (float& e : c.q)
        e = static_cast<float>(bf16(e));
}

/// The largest |O - O*| and |L - L*| over the case's sequences (decoded into c.o, c.lse).
double worst_error(const DecodeCase<float, bf16>& c) {
    double worst = 0;
    const auto gap = [&](float got, float want) {
        worst = std::max(worst, std::abs(static_cast<double>(got) - static_cast<double>(want)));
    };
    for (std::int64_t s = 0; s < c.batch; ++s) {
        const auto [oo, ll] = c.oracle(s);
        const auto at = static_cast<std::size_t>(s);
        for (std::size_t e = 0; e < oo.size(); ++e)
            gap(c.o[at * oo.size() + e], oo[e]);
        for (std::size_t e = 0; e < ll.size(); ++e)
            if (std::isfinite(ll[e]))
                gap(c.lse[at * ll.size() + e], ll[e]);
    }
    return worst;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr double kTol = 2e-5; // the widened path's (decode_test.cpp)

} // namespace

TEST_CASE("decode over a bf16 cache with bf16 queries matches attention", "[decode][bf16]") {
    for (const std::int64_t d : {64, 40}) { // 40: a tail of 8 words after 32
        CAPTURE(d);
        DecodeCase<float, bf16> h(3, 8, 2, 2, d, 48, 600, {600, 2, 129}, 31);
        round_queries(h);
        ioattn::decode(h.args());
        CHECK(worst_error(h) <= kTol);
        const std::vector<float> o = h.o, lse = h.lse;
        h.build_paged(16, 3);
        std::fill(h.o.begin(), h.o.end(), 0.0F);
        ioattn::decode(h.args(true));
        CHECK(same_bits(h.o, o));
        for (const int threads : {1, 2}) {
            CAPTURE(threads);
            ioattn::DecodeOptions opt;
            opt.threads = threads;
            std::fill(h.o.begin(), h.o.end(), 0.0F);
            ioattn::decode(h.args(), opt);
            CHECK(same_bits(h.o, o));
            CHECK(same_bits(h.lse, lse));
        }
    }
}

TEST_CASE("decode multiplies in bf16 only when every query word is a bf16 value",
          "[decode][bf16]") {
    DecodeCase<float, bf16> h(2, 8, 2, 3, 64, 64, 300, {300, 77}, 5);
    round_queries(h);
    SECTION("one word that is not a bf16 value: the widened path, as an fp32 cache") {
        float& last = h.q.back(); // the last word of the last row
        last = std::bit_cast<float>(std::bit_cast<std::uint32_t>(last) | 1U);
        DecodeCase<float> f = ioattn::test::widened(h);
        ioattn::decode(h.args());
        ioattn::decode(f.args());
        CHECK(same_bits(h.o, f.o));
        CHECK(same_bits(h.lse, f.lse));
    }
    SECTION("bf16 values: vdpbf16ps where the CPU runs it, else the widened path") {
        DecodeCase<float> f = ioattn::test::widened(h);
        ioattn::decode(h.args());
        ioattn::decode(f.args());
        CHECK(worst_error(h) <= kTol);
        // the products in pairs of words sum in another order than the widened FMAs
        CHECK(same_bits(h.o, f.o) == !ioattn::bf16_kernels_native());
        if (ioattn::bf16_kernels_native()) { // IOATTN_ISA=avx512 keeps the widened path
            const ioattn::test::ScopedEnv widened_only("IOATTN_ISA", "avx512");
            ioattn::decode(h.args());
            CHECK(same_bits(h.o, f.o));
        }
    }
}
