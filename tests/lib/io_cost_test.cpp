// Tests of the closed-form costs, flop counts, bounds and schedule selection (ioattn/io_cost.hpp).
// The kernels' counted I/O is held to these formulas in tests/lib/dense/*; here the formulas are
// held to independent restatements of docs/design.md sections 3 to 5.

#include "ceil_div.hpp"
#include "printing.hpp"
#include "random.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/tiling.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

using ioattn::InvalidArgument;
using ioattn::IoReport;
using ioattn::MemoryModel;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Select;
using ioattn::Tiling;

using ioattn::test::ceil_div;

namespace {

Problem random_problem(ioattn::test::Rng& rng, bool causal) {
    Problem p;
    p.batch = rng.uniform_int(1, 3);
    p.kv_heads = rng.uniform_int(1, 2);
    p.heads = p.kv_heads * rng.uniform_int(1, 2);
    p.n_q = rng.uniform_int(1, 300);
    p.n_k = rng.uniform_int(1, 300);
    p.d = rng.uniform_int(1, 64);
    p.d_v = rng.uniform_int(1, 64);
    p.causal = causal;
    return p.resolved();
}

/// Keys visible to some row of the block [i0, i0 + r): its last row sees the most.
std::int64_t block_keys(const Problem& p, std::int64_t i0, std::int64_t r) {
    if (!p.causal)
        return p.n_k;
    return std::clamp<std::int64_t>(i0 + r - 1 + (p.n_k - p.n_q) + 1, 0, p.n_k);
}

} // namespace

TEST_CASE("io_cost_forward_fused: Q once, K and V per row block, O and L once", "[io_cost]") {
    ioattn::test::Rng rng(21);
    for (int n = 0; n < 60; ++n) {
        const Problem p = random_problem(rng, n % 2 == 1);
        const Tiling t{Schedule::fused, rng.uniform_int(1, p.n_q + 3), rng.uniform_int(1, p.n_k)};
        CAPTURE(p, t);
        std::int64_t reads = 0;
        for (std::int64_t i0 = 0; i0 < p.n_q; i0 += t.rows)
            reads += block_keys(p, i0, std::min(t.rows, p.n_q - i0)) * (p.d + p.d_v);
        reads += p.n_q * p.d;
        const IoReport r = ioattn::io_cost_forward_fused(p, t);
        CHECK(r.reads == p.batch_heads() * reads);
        CHECK(r.writes == p.batch_heads() * (p.n_q * p.d_v + p.n_q));
        CHECK(r.peak == t.resident_words(p));
        if (!p.causal)
            CHECK(r.reads == p.batch_heads() *
                                 (p.n_q * p.d + ceil_div(p.n_q, t.rows) * p.n_k * (p.d + p.d_v)));
        CHECK(ioattn::io_cost_forward(p, t) == r);
    }
}

TEST_CASE("io_cost_forward_materialized: Saha & Ye Algorithm 1 with square tiles", "[io_cost]") {
    ioattn::test::Rng rng(22);
    for (int n = 0; n < 60; ++n) {
        const Problem p = random_problem(rng, false);
        const std::int64_t b = rng.uniform_int(1, 80);
        const Tiling t{Schedule::materialized, b, b};
        CAPTURE(p, t);
        // per row block of r rows: phase 1 reads a d-chunk of Q_i and of K_j for each of the
        // ceil(n_k/b) score tiles (Q_i only once when d <= b: one chunk, held) and writes the
        // r x n_k scores; phase 2 reads the scores once per d_v-chunk and V once, and writes
        // O_i and L_i.
        std::int64_t reads = 0;
        std::int64_t writes = 0;
        for (std::int64_t i0 = 0; i0 < p.n_q; i0 += b) {
            const std::int64_t r = std::min(b, p.n_q - i0);
            reads += (p.d <= b ? 1 : ceil_div(p.n_k, b)) * r * p.d + p.n_k * p.d;
            writes += r * p.n_k;
            reads += ceil_div(p.d_v, b) * r * p.n_k + p.n_k * p.d_v;
            writes += r * p.d_v + r;
        }
        const IoReport r = ioattn::io_cost_forward_materialized(p, t);
        CHECK(r.reads == p.batch_heads() * reads);
        CHECK(r.writes == p.batch_heads() * writes);
        CHECK(r.peak == t.resident_words(p));
        CHECK(ioattn::io_cost_forward(p, t) == r);
    }
}

TEST_CASE("io_cost: causal never costs more than the full mask", "[io_cost]") {
    ioattn::test::Rng rng(23);
    for (int n = 0; n < 40; ++n) {
        Problem p = random_problem(rng, false);
        const std::int64_t b = rng.uniform_int(1, 40);
        const Tiling f{Schedule::fused, b, rng.uniform_int(1, 40)};
        const Tiling m{Schedule::materialized, b, b};
        Problem c = p;
        c.causal = true;
        CAPTURE(p, b);
        CHECK(ioattn::io_cost_forward_fused(c, f).total() <=
              ioattn::io_cost_forward_fused(p, f).total());
        CHECK(ioattn::io_cost_forward_materialized(c, m).total() <=
              ioattn::io_cost_forward_materialized(p, m).total());
        // the compulsory traffic is always paid
        const std::int64_t compulsory = p.batch_heads() * (p.n_q * (p.d + p.d_v + 1));
        CHECK(ioattn::io_cost_forward_fused(c, f).total() >= compulsory);
    }
}

TEST_CASE("io_cost: wrong schedule and reference throw", "[io_cost][throws]") {
    Problem p;
    p.n_q = 8;
    p.n_k = 8;
    p.d = 4;
    CHECK_THROWS_AS(ioattn::io_cost_forward_fused(p, Tiling{Schedule::materialized, 2, 2}),
                    InvalidArgument);
    CHECK_THROWS_AS(ioattn::io_cost_forward_materialized(p, Tiling{Schedule::fused, 2, 2}),
                    InvalidArgument);
    CHECK_THROWS_AS(ioattn::io_cost_forward(p, Tiling{Schedule::reference, 8, 8}), InvalidArgument);
    Problem bad = p;
    bad.n_q = 0;
    CHECK_THROWS_AS(ioattn::io_cost_forward_fused(bad, Tiling{Schedule::fused, 2, 2}),
                    InvalidArgument);
}

TEST_CASE("flop counts", "[io_cost]") {
    Problem p;
    p.batch = 2;
    p.heads = 3;
    p.n_q = 10;
    p.n_k = 12;
    p.d = 8;
    p.d_v = 4;
    CHECK(ioattn::flop_count_forward(p) == 2.0 * 6 * 10 * 12 * 12);
    p.d_v = 8;
    CHECK(ioattn::flop_count_convention(p) == 4.0 * 6 * 10 * 12 * 8);
    CHECK(ioattn::flop_count_convention(p, ioattn::Pass::backward) == 2.5 * 4.0 * 6 * 10 * 12 * 8);
    p.causal = true;
    CHECK(ioattn::flop_count_convention(p) == 2.0 * 6 * 10 * 12 * 8);
    // causal exact count: row i sees i + 3 keys
    double pairs = 0;
    for (int i = 0; i < 10; ++i)
        pairs += i + 3;
    CHECK(ioattn::flop_count_forward(p) == 2.0 * 6 * pairs * 16);
}

TEST_CASE("epoch_entry_limit = max(8 M^2 / d^2, 8 M)", "[io_cost][bound]") {
    CHECK(ioattn::epoch_entry_limit(1024, 32) == 8.0 * 1024 * 1024 / (32.0 * 32.0));
    CHECK(ioattn::epoch_entry_limit(100, 32) == 800.0);
    CHECK(ioattn::epoch_entry_limit(64 * 64, 64) == 8.0 * 4096);
    CHECK(ioattn::epoch_entry_limit(1 << 20, 64) == 8.0 * std::pow(2.0, 40) / 4096.0);
}

TEST_CASE("forward_bound: regime, compulsory, leading and explicit terms", "[io_cost][bound]") {
    ioattn::test::Rng rng(24);
    for (int n = 0; n < 40; ++n) {
        Problem p;
        p.batch = rng.uniform_int(1, 2);
        p.heads = rng.uniform_int(1, 3);
        p.n_q = rng.uniform_int(16, 3000);
        p.n_k = p.n_q;
        p.d = rng.uniform_int(1, 128);
        p = p.resolved();
        const std::int64_t m = rng.uniform_int(1, 100000);
        CAPTURE(p, m);
        const ioattn::Bound b = ioattn::forward_bound(p, MemoryModel{m});
        const double bh = static_cast<double>(p.batch_heads());
        const double nn = static_cast<double>(p.n_q) * static_cast<double>(p.n_k);
        const double d = static_cast<double>(p.d);
        const double md = static_cast<double>(m);
        CHECK(b.regime == (md >= d * d ? "large-cache" : "small-cache"));
        // 3Nd in, Nd + N out
        CHECK(b.compulsory == Approx(bh * static_cast<double>(4 * p.n_q * p.d + p.n_q)));
        CHECK(b.leading == Approx(bh * std::min(nn * d * d / md, nn * d / std::sqrt(md))));
        const double bmax = std::max(8.0 * md * md / (d * d), 8.0 * md);
        CHECK(b.explicit_bound == Approx(md * std::max(0.0, std::ceil(bh * nn / bmax) - 1.0)));
        CHECK(b.asymptotic() == std::max(b.compulsory, b.leading));
        // the two leading terms meet at M = d^2
        const Problem q = p;
        const ioattn::Bound at = ioattn::forward_bound(q, MemoryModel{p.d * p.d});
        CHECK(at.leading == Approx(bh * nn)); // N^2 d^2/d^2 = N^2 d/d
    }
    Problem bad;
    bad.n_q = 4;
    bad.n_k = 4;
    bad.d = 4;
    CHECK_THROWS_AS(ioattn::forward_bound(bad, MemoryModel{0}), InvalidArgument);
}

TEST_CASE("select_schedule: theory is fused iff M >= d^2 and cost picks the cheaper", "[io_cost]") {
    ioattn::test::Rng rng(25);
    for (int n = 0; n < 30; ++n) {
        Problem p;
        p.n_q = rng.uniform_int(32, 600);
        p.n_k = rng.uniform_int(32, 600);
        p.d = rng.uniform_int(4, 64);
        p.causal = rng.uniform_int(0, 1) == 1;
        p = p.resolved();
        for (std::int64_t m = 4 * p.d; m <= 4 * p.n_q * p.d; m = m * 3 / 2) {
            const MemoryModel mem{m};
            CAPTURE(p, m);
            const auto f = Tiling::try_for_memory(Schedule::fused, mem, p);
            const auto t = Tiling::try_for_memory(Schedule::materialized, mem, p);
            if (!f && !t) {
                CHECK_THROWS_AS(ioattn::select_schedule(p, mem, Select::cost),
                                ioattn::CapacityError);
                continue;
            }
            const Schedule theory = ioattn::select_schedule(p, mem, Select::theory);
            const Schedule cost = ioattn::select_schedule(p, mem, Select::cost);
            if (f && t) {
                CHECK(theory == (m >= p.d * p.d ? Schedule::fused : Schedule::materialized));
                const std::int64_t cf = ioattn::io_cost_forward(p, *f).total();
                const std::int64_t cm = ioattn::io_cost_forward(p, *t).total();
                CAPTURE(cf, cm);
                CHECK(cost == (cf <= cm ? Schedule::fused : Schedule::materialized));
            } else {
                const Schedule only = f ? Schedule::fused : Schedule::materialized;
                CHECK(theory == only);
                CHECK(cost == only);
            }
        }
    }
    Problem p;
    p.n_q = 10;
    p.n_k = 10;
    p.d = 16;
    CHECK_THROWS_AS(ioattn::select_schedule(p, MemoryModel{4}, Select::theory),
                    ioattn::CapacityError);
}

TEST_CASE("measured_crossover: the first M where fused costs no more", "[io_cost]") {
    for (const std::int64_t d : {8, 16, 32}) {
        Problem p;
        p.n_q = 512;
        p.n_k = 512;
        p.d = d;
        p = p.resolved();
        const std::int64_t lo = 4 * d;
        const std::int64_t hi = p.n_q * d;
        const std::int64_t x = ioattn::measured_crossover(p, ioattn::Pass::forward, lo, hi);
        CAPTURE(d, x);
        REQUIRE(x > lo);
        REQUIRE(x <= hi);
        const auto fused_wins = [&](std::int64_t m) {
            const auto f = Tiling::try_for_memory(Schedule::fused, MemoryModel{m}, p);
            const auto t = Tiling::try_for_memory(Schedule::materialized, MemoryModel{m}, p);
            return f && (!t || ioattn::io_cost_forward(p, *f).total() <=
                                   ioattn::io_cost_forward(p, *t).total());
        };
        CHECK(fused_wins(x));
        CHECK_FALSE(fused_wins(x - 1));
        // the range's lower end already winning returns it
        CHECK(ioattn::measured_crossover(p, ioattn::Pass::forward, x, hi) == x);
        // fused never winning inside the range gives 0
        CHECK(ioattn::measured_crossover(p, ioattn::Pass::forward, lo, lo + 1) == 0);
    }
    Problem p;
    p.n_q = 16;
    p.n_k = 16;
    p.d = 4;
    CHECK_THROWS_AS(ioattn::measured_crossover(p, ioattn::Pass::forward, 0, 10), InvalidArgument);
    CHECK_THROWS_AS(ioattn::measured_crossover(p, ioattn::Pass::forward, 20, 10), InvalidArgument);
}
