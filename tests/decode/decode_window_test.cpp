// ioattn::decode with a sliding window over the cached positions against ioattn::attention
// with the same mask (causal-window:W-1, bottom-right aligned): contiguous and paged, fp32 and
// bf16, n_new 1 and 16, windows narrower and wider than a chunk, a tile, the new tokens and
// the sequence; rows before the window never read (NaN there changes nothing) and a row one
// token may not see never reaching it; counted I/O == closed form == dry run over only the
// visible rows; the pattern specs decode reads and those it refuses.

#include "decode_case.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/error.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using ioattn::test::DecodeCase;

constexpr double kWindowTolFloat = 2e-5;

template <typename Scalar, typename Cache>
double window_error(const DecodeCase<Scalar, Cache>& c) {
    double worst = 0;
    for (std::int64_t s = 0; s < c.batch; ++s) {
        const auto [oo, ll] = c.oracle(s);
        for (std::size_t e = 0; e < oo.size(); ++e) {
            const auto got = static_cast<double>(c.o[static_cast<std::size_t>(s) * oo.size() + e]);
            const double err = std::abs(got - static_cast<double>(oo[e]));
            worst =
                std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
        }
        for (std::size_t e = 0; e < ll.size(); ++e) {
            const auto got =
                static_cast<double>(c.lse[static_cast<std::size_t>(s) * ll.size() + e]);
            const auto want = static_cast<double>(ll[e]);
            if (std::isinf(want) && got == want)
                continue;
            const double err = std::abs(got - want);
            worst =
                std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
        }
    }
    return worst;
}

} // namespace

TEST_CASE("decode with a window matches attention with causal-window:W-1", "[decode][window]") {
    const std::int64_t cap = 600;
    std::uint64_t seed = 100;
    for (const std::int64_t n_new : {1, 16})
        for (const std::int64_t window : {1, 3, 16, 17, 100, 512, 700})
            for (const std::int64_t chunk : {16, 64, 0}) {
                CAPTURE(n_new, window, chunk);
                DecodeCase<float> c(5, 8, 2, n_new, 40, 24, cap, {0, n_new, 130, 513, cap}, seed++);
                c.window = window;
                ioattn::DecodeOptions opts;
                opts.chunk = chunk;
                ioattn::decode(c.args(), opts);
                CHECK(window_error(c) <= kWindowTolFloat);
                const auto o_contiguous = c.o;
                c.build_paged(16, seed);
                std::fill(c.o.begin(), c.o.end(), 5.0F);
                ioattn::decode(c.args(true), opts);
                CHECK(std::memcmp(c.o.data(), o_contiguous.data(), c.o.size() * sizeof(float)) ==
                      0);
            }
}

TEST_CASE("decode with a window over a bf16 cache matches attention", "[decode][window][bf16]") {
    DecodeCase<float, ioattn::bf16> c(3, 8, 8, 4, 64, 64, 400, {400, 4, 37}, 7);
    c.window = 33;
    ioattn::DecodeOptions opts;
    opts.chunk = 32;
    ioattn::decode(c.args(), opts);
    CHECK(window_error(c) <= kWindowTolFloat);
}

TEST_CASE("decode with a window never reads the rows before it", "[decode][window]") {
    // len 300, n_new 4, W 50: token t at p = 296 + t sees (p - 50, p]; the first row any
    // token sees is 247, seen by token 0 only.
    DecodeCase<float> c(1, 2, 1, 4, 16, 16, 300, {300}, 9);
    c.window = 50;
    ioattn::DecodeOptions opts;
    opts.chunk = 32;
    const auto report = ioattn::decode(c.args(), opts);
    CHECK(report.plan.first_row(0) == 247);
    CHECK(report.plan.visible_rows(0) == 53);
    const auto clean = c.o;
    for (std::int64_t p = 0; p < 247; ++p)
        for (std::int64_t x = 0; x < 16; ++x)
            c.k[c.idx(0, 0, p, x, 16)] = c.v[c.idx(0, 0, p, x, 16)] =
                std::numeric_limits<float>::quiet_NaN();
    ioattn::decode(c.args(), opts);
    CHECK(std::memcmp(c.o.data(), clean.data(), c.o.size() * sizeof(float)) == 0);
    for (std::int64_t x = 0; x < 16; ++x) { // row 247: token 0's only
        c.k[c.idx(0, 0, 247, x, 16)] = std::numeric_limits<float>::quiet_NaN();
        c.v[c.idx(0, 0, 247, x, 16)] = std::numeric_limits<float>::infinity();
    }
    ioattn::decode(c.args(), opts);
    for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < 4; ++t)
            for (std::int64_t x = 0; x < 16; ++x) {
                const auto e = static_cast<std::size_t>((h * 4 + t) * 16 + x);
                if (t == 0)
                    CHECK(std::isnan(c.o[e]));
                else
                    CHECK(c.o[e] == clean[e]);
            }
}

TEST_CASE("decode with a window: counted I/O == closed form == dry run, visible rows only",
          "[decode][window][io]") {
    for (const std::int64_t chunk : {16, 64, 512}) {
        CAPTURE(chunk);
        DecodeCase<float> c(3, 8, 2, 4, 48, 40, 300, {300, 0, 20}, 61);
        c.window = 50; // visible rows: 53, 0, 20
        ioattn::DecodeOptions opts;
        opts.chunk = chunk;
        opts.count_io = true;
        const auto counted = ioattn::decode(c.args(), opts);
        CHECK(*counted.io == *counted.closed_form);
        opts.count_io = false;
        opts.dry_run = true;
        CHECK(*ioattn::decode(c.args(), opts).io == *counted.io);
        const ioattn::IoReport lower = ioattn::decode_lower_bound(counted.plan);
        CHECK(lower.reads == 2 * ((53 + 20) * (48 + 40) + 2 * 16 * 48));
        if (chunk == 512)
            CHECK(counted.io->reads == lower.reads);
        CHECK(counted.plan.kv_rows() == 73);
        // flops: token t of the 300-row sequence sees 50 rows, of the 20-row one 17 + t
        CHECK(ioattn::flop_count_decode(counted.plan) ==
              2.0 * 8 * (48 + 40) * (4 * 50 + (17 + 18 + 19 + 20)));
    }
}

TEST_CASE("decode_window_of reads the window specs and refuses the rest", "[decode][window]") {
    CHECK(ioattn::decode_window_of("causal") == 0);
    CHECK(ioattn::decode_window_of("dense") == 0);
    CHECK(ioattn::decode_window_of("causal-window:7") == 8);
    CHECK(ioattn::decode_window_of("window:0") == 1);
    const auto message = [](const char* spec) {
        try {
            (void)ioattn::decode_window_of(spec, "here");
        } catch (const ioattn::InvalidArgument& e) {
            return std::string(e.what());
        }
        return std::string("no throw");
    };
    CHECK(message("global:4").find("here: pattern 'global:4'") != std::string::npos);
    CHECK(message("window:x").find("W = 'x'") != std::string::npos);
    CHECK(message("window:-2").find("W = '-2'") != std::string::npos);
    DecodeCase<float> c(1, 2, 1, 1, 8, 8, 16, {16}, 3);
    c.window = -1;
    CHECK_THROWS_WITH(ioattn::decode(c.args()), Catch::Contains("window = -1"));
}
