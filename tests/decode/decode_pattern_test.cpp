// ioattn::decode with a support pattern beyond windows over the cached positions (global
// tokens with a window, strided, dilated, block-sparse, random, and their unions and
// intersections) against ioattn::attention in double with the mask built here: the pattern
// on each sequence's n_new x len problem (ioattn::sparse::parse_pattern) with the causal rule
// applied row by row, not through decode_pattern_rows. Contiguous and paged, fp32 and bf16
// caches, n_new 1 and 5, ragged lengths with 0 and n_new, GQA; counted I/O == closed form ==
// dry run over exactly the rows some token sees; a row no token sees never read and a row one
// token does not see never reaching it; bitwise independent of the thread count; a window spec
// given as a pattern is the window; the errors.

#include "decode_case.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace {

using ioattn::test::DecodeCase;

constexpr double kPatternTolFloat = 2e-5;

const std::vector<std::string> kPatterns = {"causal-window:40+global:4",
                                            "strided:16",
                                            "dilated:8:4",
                                            "block:16:0.3",
                                            "random:0.2",
                                            "(causal-window:64+global:8)&random:0.5"};

/// Token t of sequence s: the keys of row t of the pattern that are <= len - n_new + t.
template <typename Scalar, typename Cache>
ioattn::sparse::Support causal_rows(const DecodeCase<Scalar, Cache>& c, std::int64_t s) {
    const std::int64_t len = c.lens[static_cast<std::size_t>(s)];
    const ioattn::sparse::Support full =
        ioattn::sparse::parse_pattern(c.pattern, c.n_new, len, c.pattern_seed);
    std::vector<std::int64_t> offsets{0}, keys;
    for (std::int64_t t = 0; t < c.n_new; ++t) {
        for (const std::int64_t j : full.row(t))
            if (j <= len - c.n_new + t)
                keys.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(keys.size()));
    }
    return {c.n_new, len, std::move(offsets), std::move(keys)};
}

/// Max |O - O_ref| and |L - L_ref| over every sequence, the reference ioattn::attention in
/// double over the sequence's cached rows with causal_rows as its support (an empty sequence:
/// O = 0, L = -inf); NaN anywhere: +inf.
template <typename Scalar, typename Cache>
double pattern_error(const DecodeCase<Scalar, Cache>& c) {
    double worst = 0;
    const auto take = [&](double got, double want) {
        if (std::isinf(want) && got == want)
            return;
        const double err = std::abs(got - want);
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    };
    for (std::int64_t s = 0; s < c.batch; ++s) {
        const std::int64_t len = c.lens[static_cast<std::size_t>(s)];
        const std::int64_t rows = c.heads * c.n_new;
        std::vector<double> o(static_cast<std::size_t>(rows * c.d_v), 0.0);
        std::vector<double> l(static_cast<std::size_t>(rows),
                              -std::numeric_limits<double>::infinity());
        if (len > 0) {
            std::vector<double> q(static_cast<std::size_t>(rows * c.d)), k, v;
            for (std::size_t e = 0; e < q.size(); ++e)
                q[e] = static_cast<double>(c.q[static_cast<std::size_t>(s * rows * c.d) + e]);
            for (std::int64_t g = 0; g < c.kv_heads; ++g)
                for (std::int64_t j = 0; j < len; ++j) {
                    for (std::int64_t x = 0; x < c.d; ++x)
                        k.push_back(static_cast<double>(c.widen(c.k[c.idx(s, g, j, x, c.d)])));
                    for (std::int64_t x = 0; x < c.d_v; ++x)
                        v.push_back(static_cast<double>(c.widen(c.v[c.idx(s, g, j, x, c.d_v)])));
                }
            ioattn::Problem p;
            p.heads = c.heads;
            p.kv_heads = c.kv_heads;
            p.n_q = c.n_new;
            p.n_k = len;
            p.d = c.d;
            p.d_v = c.d_v;
            const ioattn::sparse::Support support = causal_rows(c, s);
            ioattn::Structure<double> st;
            st.support = &support;
            ioattn::AttentionOptions opts;
            opts.schedule = ioattn::Schedule::fused;
            ioattn::attention(ioattn::ForwardArgs<double>::packed(
                                  p, q.data(), k.data(), v.data(), o.data(), l.data()),
                              st,
                              opts);
        }
        for (std::size_t e = 0; e < o.size(); ++e)
            take(static_cast<double>(c.o[static_cast<std::size_t>(s) * o.size() + e]), o[e]);
        for (std::size_t e = 0; e < l.size(); ++e)
            take(static_cast<double>(c.lse[static_cast<std::size_t>(s) * l.size() + e]), l[e]);
    }
    return worst;
}

/// The rows the schedule must read: per sequence, the positions some token sees.
template <typename Scalar, typename Cache>
std::vector<std::int64_t> union_sizes(const DecodeCase<Scalar, Cache>& c) {
    std::vector<std::int64_t> n;
    for (std::int64_t s = 0; s < c.batch; ++s) {
        std::set<std::int64_t> seen;
        if (c.lens[static_cast<std::size_t>(s)] > 0) {
            const auto rows = causal_rows(c, s);
            for (std::int64_t t = 0; t < c.n_new; ++t)
                seen.insert(rows.row(t).begin(), rows.row(t).end());
        }
        n.push_back(static_cast<std::int64_t>(seen.size()));
    }
    return n;
}

} // namespace

TEST_CASE("decode with a pattern matches attention with the same mask", "[decode][pattern]") {
    std::uint64_t seed = 500;
    for (const std::string& spec : kPatterns)
        for (const std::int64_t n_new : {1, 5}) {
            DecodeCase<float> c(4, 8, 2, n_new, 32, 24, 700, {700, 0, n_new, 389}, ++seed);
            c.pattern = spec;
            c.pattern_seed = seed;
            ioattn::decode(c.args());
            INFO("pattern " << spec << ", n_new " << n_new);
            CHECK(pattern_error(c) <= kPatternTolFloat);
            const std::vector<float> o_contiguous = c.o;
            c.build_paged(16, seed);
            std::fill(c.o.begin(), c.o.end(), 7.0F);
            ioattn::decode(c.args(true));
            CHECK(std::memcmp(c.o.data(), o_contiguous.data(), c.o.size() * sizeof(float)) == 0);
        }
}

TEST_CASE("decode with a pattern over a bf16 cache matches attention", "[decode][pattern][bf16]") {
    for (const std::string& spec :
         {std::string("causal-window:40+global:4"), std::string("random:0.2")}) {
        DecodeCase<float, ioattn::bf16> c(2, 4, 4, 3, 64, 64, 900, {900, 130}, 77);
        c.pattern = spec;
        c.pattern_seed = 9;
        ioattn::decode(c.args());
        INFO("pattern " << spec);
        CHECK(pattern_error(c) <= kPatternTolFloat);
    }
}

TEST_CASE("decode with a pattern reads only the rows some token sees", "[decode][pattern][io]") {
    for (const std::string& spec : kPatterns) {
        DecodeCase<float> c(3, 8, 2, 5, 32, 32, 1500, {1500, 5, 777}, 31);
        c.pattern = spec;
        c.pattern_seed = 4;
        const std::vector<std::int64_t> visible = union_sizes(c);
        ioattn::DecodeOptions count;
        count.count_io = true;
        count.chunk = 128;
        const ioattn::DecodeReport counted = ioattn::decode(c.args(), count);
        ioattn::DecodeOptions dry = count;
        dry.count_io = false;
        dry.dry_run = true;
        const ioattn::DecodeReport walked = ioattn::decode(c.args(), dry);
        INFO("pattern " << spec);
        REQUIRE(counted.io);
        CHECK(counted.io->reads == counted.closed_form->reads);
        CHECK(counted.io->writes == counted.closed_form->writes);
        CHECK(walked.io->reads == counted.io->reads);
        // the closed form's rows, computed here: each chunk reads Q (R d), the rows once per
        // kv head, and with several chunks their partial states back
        std::int64_t reads = 0;
        const std::int64_t r = 4 * 5, d = 32;
        for (std::size_t s = 0; s < visible.size(); ++s) {
            CHECK(counted.plan.visible_rows(static_cast<std::int64_t>(s)) == visible[s]);
            const std::int64_t chunks = (visible[s] + 127) / 128;
            reads +=
                2 * (chunks * r * d + visible[s] * 2 * d + (chunks > 1 ? chunks * r * (d + 2) : 0));
        }
        CHECK(counted.io->reads == reads);
        // a row no token sees is never read: NaN there changes nothing
        const std::vector<float> o_clean = c.o;
        std::set<std::int64_t> seen;
        const auto rows = causal_rows(c, 0);
        for (std::int64_t t = 0; t < 5; ++t)
            seen.insert(rows.row(t).begin(), rows.row(t).end());
        for (std::int64_t j = 0; j < 1500; ++j)
            if (seen.count(j) == 0)
                for (std::int64_t g = 0; g < 2; ++g) {
                    c.k[c.idx(0, g, j, 0, 32)] = std::numeric_limits<float>::quiet_NaN();
                    c.v[c.idx(0, g, j, 0, 32)] = std::numeric_limits<float>::infinity();
                }
        ioattn::decode(c.args(), count);
        CHECK(std::memcmp(c.o.data(), o_clean.data(), c.o.size() * sizeof(float)) == 0);
        CHECK(ioattn::flop_count_decode(counted.plan) ==
              2.0 * 8 * (32 + 32) *
                  static_cast<double>(causal_rows(c, 0).z_qk() + causal_rows(c, 1).z_qk() +
                                      causal_rows(c, 2).z_qk()));
    }
}

TEST_CASE("a row one new token does not see never reaches it", "[decode][pattern]") {
    // random:0.5 on 4 new tokens: positions some tokens see and others do not
    DecodeCase<float> c(1, 2, 1, 4, 16, 16, 200, {200}, 12);
    c.pattern = "random:0.5";
    c.pattern_seed = 3;
    const auto rows = causal_rows(c, 0);
    const auto sees = [&](std::int64_t t, std::int64_t j) {
        const auto r = rows.row(t);
        return std::find(r.begin(), r.end(), j) != r.end();
    };
    std::int64_t poisoned = -1; // a position some tokens see and others do not
    for (std::int64_t j = 0; j < 200 && poisoned < 0; ++j) {
        int n = 0;
        for (std::int64_t t = 0; t < 4; ++t)
            n += sees(t, j) ? 1 : 0;
        if (n > 0 && n < 4)
            poisoned = j;
    }
    REQUIRE(poisoned >= 0);
    c.v[c.idx(0, 0, poisoned, 3, 16)] = std::numeric_limits<float>::quiet_NaN();
    ioattn::decode(c.args());
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < 4; ++t) {
            const float x = c.o[static_cast<std::size_t>((h * 4 + t) * 16 + 3)];
            INFO("head " << h << " token " << t << " sees " << sees(t, poisoned));
            CHECK(std::isnan(x) == sees(t, poisoned));
        }
}

TEST_CASE("decode with a pattern is bitwise independent of the thread count", "[decode][pattern]") {
    DecodeCase<float> c(3, 8, 2, 3, 64, 64, 3000, {3000, 1000, 2500}, 8);
    c.pattern = "causal-window:300+global:4+random:0.05";
    ioattn::DecodeOptions one;
    one.threads = 1;
    ioattn::decode(c.args(), one);
    const std::vector<float> o1 = c.o, l1 = c.lse;
    std::fill(c.o.begin(), c.o.end(), 7.0F);
    ioattn::decode(c.args());
    CHECK(std::memcmp(c.o.data(), o1.data(), o1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(c.lse.data(), l1.data(), l1.size() * sizeof(float)) == 0);
    CHECK(pattern_error(c) <= kPatternTolFloat);
}

TEST_CASE("a window spec as the pattern is the window", "[decode][pattern]") {
    DecodeCase<float> c(2, 4, 2, 2, 32, 32, 400, {400, 90}, 5);
    c.window = 51;
    ioattn::decode(c.args());
    const std::vector<float> o_window = c.o;
    c.window = 0;
    c.pattern = "causal-window:50";
    std::fill(c.o.begin(), c.o.end(), 7.0F);
    const ioattn::DecodeReport r = ioattn::decode(c.args());
    CHECK(r.plan.shape.window == 51);
    CHECK(r.plan.rows.empty());
    CHECK(std::memcmp(c.o.data(), o_window.data(), o_window.size() * sizeof(float)) == 0);
    c.window = 51; // the same window twice, or with "causal", is one window
    ioattn::decode(c.args());
    c.pattern = "causal";
    ioattn::decode(c.args());
    CHECK(std::memcmp(c.o.data(), o_window.data(), o_window.size() * sizeof(float)) == 0);
}

TEST_CASE("decode refuses bad patterns with one clear error", "[decode][pattern]") {
    DecodeCase<float> c(1, 2, 1, 1, 8, 8, 16, {16}, 3);
    c.pattern = "glob:4";
    CHECK_THROWS_WITH(
        ioattn::decode(c.args()),
        Catch::Contains("ioattn::decode: pattern 'glob:4' over the cached positions") &&
            Catch::Contains("unknown pattern 'glob'"));
    c.pattern = "strided:16";
    c.window = 4;
    CHECK_THROWS_WITH(ioattn::decode(c.args()),
                      Catch::Contains("window = 4 and pattern 'strided:16'"));
    c.pattern = "causal-window:7";
    CHECK_THROWS_WITH(ioattn::decode(c.args()),
                      Catch::Contains("window = 4 and pattern 'causal-window:7'"));
    CHECK_THROWS_WITH(ioattn::decode_pattern_rows("strided:4", 3, 2, 0, "here"),
                      Catch::Contains("here: pattern 'strided:4' on n_new = 3"));
}
