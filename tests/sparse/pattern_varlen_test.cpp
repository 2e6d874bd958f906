// Tests of pattern_varlen and its spec terms (sparse/src/patterns/pattern_varlen.cpp): the
// builder against its predicate, the spec terms against the builder, every documented throw;
// attention over a packed batch against each sequence run alone through the dense entry point
// (the window forms through the window patterns); and the counted I/O of the fused forward,
// which equals the sum of the sequences' counts when row blocks do not straddle two sequences
// (no key of another sequence is read) and the closed form always.

#include "kernel_case.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/error.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::InvalidArgument;
using ioattn::Problem;
using sp::Support;
using sp::test::Case;
using sp::test::from_predicate;

namespace {

using Lengths = std::vector<std::int64_t>;

std::int64_t total_of(const Lengths& l) {
    return std::accumulate(l.begin(), l.end(), std::int64_t{0});
}

/// The sequence that holds position i.
std::int64_t sequence_of(const Lengths& l, std::int64_t i) {
    std::int64_t start = 0;
    for (std::size_t s = 0; s < l.size(); ++s) {
        if (i < start + l[s])
            return static_cast<std::int64_t>(s);
        start += l[s];
    }
    return -1;
}

Support varlen_predicate(const Lengths& l, bool causal, std::int64_t w) {
    const std::int64_t n = total_of(l);
    return from_predicate(n, n, [&](std::int64_t i, std::int64_t j) {
        const std::int64_t off = i - j;
        return sequence_of(l, i) == sequence_of(l, j) && (!causal || off >= 0) &&
               (w < 0 || (off <= w && off >= -w));
    });
}

std::string joined(const Lengths& l) {
    std::string s;
    for (const std::int64_t x : l)
        s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

Problem packed_shape(std::int64_t n) {
    Problem p;
    p.batch = 1;
    p.heads = 2;
    p.kv_heads = 2;
    p.n_q = n;
    p.n_k = n;
    p.d = 8;
    p.d_v = 8;
    return p.resolved();
}

} // namespace

TEST_CASE("pattern_varlen matches its predicate", "[pattern][varlen]") {
    for (const Lengths& l : {Lengths{5}, Lengths{3, 7, 1}, Lengths{0, 4, 0, 6}, Lengths{1, 1, 1}}) {
        for (const bool causal : {false, true}) {
            for (const std::int64_t w : {-1, 0, 1, 3, 100}) {
                CAPTURE(joined(l), causal, w);
                const std::int64_t n = total_of(l);
                CHECK(sp::pattern_varlen(n, n, l, causal, w) == varlen_predicate(l, causal, w));
            }
        }
    }
}

TEST_CASE("the varlen spec terms build pattern_varlen", "[pattern][varlen][parse]") {
    const Lengths l{128, 90, 33, 0, 5};
    const std::int64_t n = total_of(l);
    const std::string list = joined(l);
    CHECK(sp::parse_pattern("varlen:" + list, n, n, 0) == sp::pattern_varlen(n, n, l));
    CHECK(sp::parse_pattern("causal-varlen:" + list, n, n, 0) == sp::pattern_varlen(n, n, l, true));
    CHECK(sp::parse_pattern("window-varlen:16:" + list, n, n, 0) ==
          sp::pattern_varlen(n, n, l, false, 16));
    CHECK(sp::parse_pattern("causal-window-varlen:16:" + list, n, n, 0) ==
          sp::pattern_varlen(n, n, l, true, 16));
    CHECK(sp::parse_pattern("varlen: 128, 90,33,0 ,5 & causal", n, n, 0) ==
          sp::pattern_varlen(n, n, l, true));
}

TEST_CASE("pattern_varlen and its spec terms refuse bad lengths", "[pattern][varlen][throws]") {
    const Lengths l{3, 4};
    CHECK_THROWS_WITH(sp::pattern_varlen(8, 8, l),
                      Catch::Contains("lengths sum to 7 (expected n_q = n_k = 8)"));
    CHECK_THROWS_WITH(sp::pattern_varlen(7, 8, l), Catch::Contains("n_q = 7, n_k = 8"));
    CHECK_THROWS_WITH(sp::pattern_varlen(1, 1, Lengths{2, -1}), Catch::Contains("length 1 = -1"));
    CHECK_THROWS_WITH(sp::pattern_varlen(0, 0, Lengths{}), Catch::Contains("no sequence lengths"));
    CHECK_THROWS_WITH(sp::pattern_varlen(5, 5, Lengths{INT64_MAX, 2}),
                      Catch::Contains("more than 2^63"));
    CHECK_THROWS_AS(sp::parse_pattern("varlen:3,4", 8, 8, 0), InvalidArgument);
    CHECK_THROWS_WITH(sp::parse_pattern("varlen:3,4", 8, 8, 0),
                      Catch::Contains("'varlen:3,4'") && Catch::Contains("sum to 7"));
    CHECK_THROWS_WITH(sp::parse_pattern("causal-varlen:3,x", 8, 8, 0),
                      Catch::Contains("'x' is not an integer"));
    CHECK_THROWS_WITH(sp::parse_pattern("varlen:3,,5", 8, 8, 0),
                      Catch::Contains("missing value of a length"));
    CHECK_THROWS_WITH(sp::parse_pattern("window-varlen:3,5", 8, 8, 0),
                      Catch::Contains("expected window-varlen:W:L1,L2,..."));
    CHECK_THROWS_WITH(sp::parse_pattern("window-varlen:-1:8", 8, 8, 0), Catch::Contains("W = -1"));
}

TEMPLATE_TEST_CASE("attention over packed sequences equals each sequence run alone",
                   "[varlen][attention]",
                   float,
                   double) {
    using T = TestType;
    const Lengths l{64, 150, 1, 0, 37};
    const std::int64_t n = total_of(l);
    const Problem p = packed_shape(n);

    struct Form {
        bool causal;
        std::int64_t window;
    };

    for (const Form f : {Form{false, -1}, Form{true, -1}, Form{false, 9}, Form{true, 9}}) {
        CAPTURE(f.causal, f.window);
        const Support packed = sp::pattern_varlen(n, n, l, f.causal, f.window);
        Case<T> all(p, 17);
        ioattn::Structure<T> st;
        st.support = &packed;
        (void)ioattn::attention(all.forward(), st);
        std::int64_t start = 0;
        for (const std::int64_t len : l) {
            if (len == 0)
                continue;
            CAPTURE(start, len);
            Problem ps = packed_shape(len);
            ps.causal = f.causal && f.window < 0;
            Case<T> one(ps, 3);
            const auto rows = [&](const std::vector<T>& from, std::vector<T>& to, std::int64_t d) {
                for (std::int64_t h = 0; h < p.heads; ++h)
                    for (std::int64_t i = 0; i < len * d; ++i)
                        to[static_cast<std::size_t>(h * len * d + i)] =
                            from[static_cast<std::size_t>(h * n * d + start * d + i)];
            };
            rows(all.q, one.q, p.d);
            rows(all.k, one.k, p.d);
            rows(all.v, one.v, p.d_v);
            const std::int64_t w = std::max<std::int64_t>(f.window, 0); // used when >= 0
            const Support window =
                f.causal ? sp::pattern_causal_window(len, len, w) : sp::pattern_window(len, len, w);
            ioattn::Structure<T> alone;
            alone.support = f.window >= 0 ? &window : nullptr;
            (void)ioattn::attention(one.forward(), alone);
            const T tol =
                std::numeric_limits<T>::epsilon() * T(64) * std::sqrt(static_cast<T>(len));
            double worst = 0.0;
            for (std::int64_t h = 0; h < p.heads; ++h)
                for (std::int64_t i = 0; i < len * p.d_v; ++i)
                    worst = std::max<double>(
                        worst,
                        std::abs(
                            one.o[static_cast<std::size_t>(h * len * p.d_v + i)] -
                            all.o[static_cast<std::size_t>(h * n * p.d_v + start * p.d_v + i)]));
            CHECK(worst <= static_cast<double>(tol));
            start += len;
        }
    }
}

TEST_CASE("the fused forward over packed sequences reads no key of another sequence",
          "[varlen][io]") {
    // row blocks of 16 rows: every length a multiple of 16, so no block straddles two sequences
    const Lengths l{48, 16, 0, 112, 32};
    const std::int64_t n = total_of(l);
    const ioattn::Tiling t{ioattn::Schedule::fused, 16, 16};
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        const Problem p = packed_shape(n);
        const Support packed = sp::pattern_varlen(n, n, l, causal);
        Case<float> all(p, 5);
        ioattn::IoCounter io(sp::test::kAmple.fast_words);
        sp::forward_fused(all.forward(), packed, t, sp::test::kAmple, io);
        const ioattn::IoReport counted = io.report();
        CHECK(counted.reads == sp::io_cost_forward_fused(p, packed, t).reads);
        CHECK(counted.writes == sp::io_cost_forward_fused(p, packed, t).writes);
        std::int64_t reads = 0, writes = 0;
        for (const std::int64_t len : l) {
            if (len == 0)
                continue;
            const Support alone =
                causal ? sp::pattern_causal(len, len) : sp::pattern_dense(len, len);
            const ioattn::IoReport one = sp::io_cost_forward_fused(packed_shape(len), alone, t);
            reads += one.reads;
            writes += one.writes;
        }
        CHECK(counted.reads == reads);
        CHECK(counted.writes == writes);
        // blocks of 24 rows straddle sequences: a block reads the keys of the sequences it
        // meets, as its closed form counts
        const ioattn::Tiling t24{ioattn::Schedule::fused, 24, 16};
        ioattn::IoCounter io24(sp::test::kAmple.fast_words);
        Case<float> again(p, 5);
        sp::forward_fused(again.forward(), packed, t24, sp::test::kAmple, io24);
        CHECK(io24.report().reads == sp::io_cost_forward_fused(p, packed, t24).reads);
    }
}
