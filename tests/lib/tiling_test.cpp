// Tests of ioattn::Tiling: residency, the I/O-optimal tiling for M, the tuned tiling, validation.

#include "ceil_div.hpp"
#include "random.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/tiling.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <utility>

using ioattn::CapacityError;
using ioattn::InvalidArgument;
using ioattn::MemoryModel;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;

using ioattn::test::ceil_div;

namespace {

Problem random_problem(ioattn::test::Rng& rng) {
    Problem p;
    p.batch = rng.uniform_int(1, 2);
    p.heads = 2;
    p.kv_heads = rng.uniform_int(1, 2);
    p.n_q = rng.uniform_int(1, 90);
    p.n_k = rng.uniform_int(1, 90);
    p.d = rng.uniform_int(1, 48);
    p.d_v = rng.uniform_int(0, 1) == 0 ? 0 : rng.uniform_int(1, 48);
    p.causal = rng.uniform_int(0, 1) == 1;
    return p.resolved();
}

} // namespace

TEST_CASE("Tiling::resident_words of the fused forward", "[tiling]") {
    ioattn::test::Rng rng(11);
    for (int n = 0; n < 50; ++n) {
        const Problem p = random_problem(rng);
        const std::int64_t br = rng.uniform_int(1, p.n_q);
        const std::int64_t bc = rng.uniform_int(1, p.n_k);
        CAPTURE(p, br, bc);
        // the scratch: Q_i^T, S^T, O_i^T, m_i, l_i, alpha with Br lane-padded; and what
        // streams at a time: Q_i (packing), K_j and V_j, O_i and L_i (writing)
        const std::int64_t rp = (br + 15) / 16 * 16;
        CHECK(Tiling{Schedule::fused, br, bc}.resident_words(p) ==
              rp * (p.d + bc + p.d_v + 3) +
                  std::max({br * p.d, bc * (p.d + p.d_v), br * (p.d_v + 1)}));
        // under every instruction set: padded to kLanePad = 16 words
        CHECK(ioattn::kLanePad == 16);
        // tiles larger than the problem hold no more than the problem-sized tile
        CHECK(Tiling{Schedule::fused, p.n_q + 7, p.n_k + 3}.resident_words(p) ==
              Tiling{Schedule::fused, p.n_q, p.n_k}.resident_words(p));
    }
}

TEST_CASE("Tiling::resident_words of the materialized forward", "[tiling]") {
    ioattn::test::Rng rng(12);
    for (int n = 0; n < 50; ++n) {
        const Problem p = random_problem(rng);
        const std::int64_t b = rng.uniform_int(1, 60);
        CAPTURE(p, b);
        const std::int64_t words = Tiling{Schedule::materialized, b, b}.resident_words(p);
        // at least one score tile plus the row statistics, at most a score tile, two operand
        // chunks and the statistics
        const std::int64_t r = std::min(b, p.n_q);
        const std::int64_t c = std::min(b, p.n_k);
        CHECK(words >= r * c + 2 * r);
        CHECK(words <= 3 * b * b + 2 * b);
    }
}

TEST_CASE("Tiling::for_memory fused: fits M and minimises the fused I/O", "[tiling]") {
    ioattn::test::Rng rng(13);
    for (int n = 0; n < 30 * ioattn::test::test_multiplier(); ++n) {
        const Problem p = random_problem(rng);
        const MemoryModel m{rng.uniform_int(1, 40 * (p.d + p.d_v) * 4)};
        CAPTURE(p, m.fast_words);
        const auto t = Tiling::try_for_memory(Schedule::fused, m, p);
        if (!t) {
            CHECK_THROWS_AS(Tiling::for_memory(Schedule::fused, m, p), CapacityError);
            // not even a single row and key fit
            CHECK(Tiling{Schedule::fused, 1, 1}.resident_words(p) > m.fast_words);
            continue;
        }
        CAPTURE(*t);
        CHECK(t->schedule == Schedule::fused);
        CHECK(Tiling::for_memory(Schedule::fused, m, p) == *t);
        CHECK(t->rows >= 1);
        CHECK(t->cols >= 1);
        CHECK(t->rows <= p.n_q);
        CHECK(t->cols <= p.n_k);
        CHECK(t->resident_words(p) <= m.fast_words);
        CHECK_NOTHROW(t->validate("test", m, p));
        // no valid fused tiling (any Br, Bc = 1 is the cheapest residency) moves fewer words
        const std::int64_t best = ioattn::io_cost_forward_fused(p, *t).total();
        for (std::int64_t br = 1; br <= p.n_q; ++br) {
            const Tiling other{Schedule::fused, br, 1};
            if (other.resident_words(p) > m.fast_words)
                break;
            CAPTURE(br);
            CHECK(ioattn::io_cost_forward_fused(p, other).total() >= best);
        }
        // with fewer row blocks the residency would exceed M
        const std::int64_t blocks = ceil_div(p.n_q, t->rows);
        if (blocks > 1)
            CHECK(Tiling{Schedule::fused, ceil_div(p.n_q, blocks - 1), 1}.resident_words(p) >
                  m.fast_words);
    }
}

TEST_CASE("Tiling::for_memory materialized: b = floor(sqrt(M/4)), whole lines from 16 on",
          "[tiling]") {
    ioattn::test::Rng rng(14);
    for (int n = 0; n < 60; ++n) {
        const Problem p = random_problem(rng);
        const MemoryModel m{rng.uniform_int(1, 20000)};
        CAPTURE(p, m.fast_words);
        const auto t = Tiling::try_for_memory(Schedule::materialized, m, p);
        auto b = static_cast<std::int64_t>(
            std::floor(std::sqrt(static_cast<double>(m.fast_words) / 4.0)));
        if (b >= 16)
            b -= b % 16; // tile rows fill whole 16-word lines of the stored scores
        if (!t) {
            CHECK_THROWS_AS(Tiling::for_memory(Schedule::materialized, m, p), CapacityError);
            CHECK(m.fast_words < 16); // from b = 2 on, 3b^2 + 2b <= 4b^2 always fits
            continue;
        }
        CHECK(t->schedule == Schedule::materialized);
        CHECK(t->rows == b);
        CHECK(t->cols == b);
        CHECK(t->resident_words(p) <= m.fast_words);
        // whole feature rows exactly when they fit beside the tiles, and never more words
        const Problem r = p.resolved();
        const std::int64_t full = std::max(r.d, r.d_v);
        Tiling chunked = *t;
        chunked.depth = 0;
        Tiling whole = chunked;
        whole.depth = full;
        const bool fits = full > b && whole.resident_words(p) <= m.fast_words;
        CHECK(t->depth == (fits ? full : 0));
        CHECK(ioattn::io_cost_forward(p, *t).total() <=
              ioattn::io_cost_forward(p, chunked).total());
        // the dense backward keeps chunks of b; the sparse kernels take whole feature rows
        // exactly when they fit their footprint, both ways
        const auto dense_back =
            Tiling::try_for_memory(Schedule::materialized, m, p, ioattn::Pass::backward);
        if (dense_back)
            CHECK(dense_back->depth == 0);
        for (const auto pass : {ioattn::Pass::forward, ioattn::Pass::backward}) {
            const auto sp =
                Tiling::try_for_memory(Schedule::materialized, m, p, pass, ioattn::Kernels::sparse);
            if (!sp)
                continue;
            Tiling sp_whole = *sp;
            sp_whole.depth = full;
            CHECK(sp->depth == (full > b && sp_whole.resident_words(
                                                p, pass, ioattn::Kernels::sparse) <= m.fast_words
                                    ? full
                                    : 0));
            CHECK(sp->resident_words(p, pass, ioattn::Kernels::sparse) <= m.fast_words);
        }
    }
}

TEST_CASE("Tiling::for_memory materialized forward: d = 64 at M = 8192 holds Q_i and O_i whole",
          "[tiling]") {
    // b = 32 leaves 4096 of 8192 words: Q_i (32 x 64) stays over its 16 tiles and O_i is one
    // pass over the stored scores. Per row block (r = 32 rows, C = 512 keys): r d + C d + r C
    // (phase 1) + r C + C d_v + r d_v + r (phase 2) = 102,432 words, 16 blocks; with chunks
    // of 32: 16 r d + C d + r C + 2 r C + C d_v + r d_v + r = 149,536.
    Problem p;
    p.n_q = 512;
    p.n_k = 512;
    p.d = 64;
    const Tiling t = Tiling::for_memory(Schedule::materialized, MemoryModel{8192}, p);
    CHECK(t.rows == 32);
    CHECK(t.depth == 64);
    CHECK(ioattn::io_cost_forward(p, t).total() == 16 * 102432);
    Tiling chunked = t;
    chunked.depth = 0;
    CHECK(ioattn::io_cost_forward(p, chunked).total() == 16 * 149536);
    CHECK(t.resident_words(p) == 32 * 32 + 2 * 32 * 64 + 2 * 32);
}

TEST_CASE("Tiling::for_memory: the smallest M, and CapacityError below it", "[tiling][throws]") {
    for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
        Problem p;
        p.n_q = 50;
        p.n_k = 40;
        p.d = 16;
        p.d_v = 8;
        CAPTURE(ioattn::to_string(s));
        std::int64_t first = 0;
        for (std::int64_t m = 1; m < 10000 && first == 0; ++m)
            if (Tiling::try_for_memory(s, MemoryModel{m}, p))
                first = m;
        REQUIRE(first > 1);
        CHECK_FALSE(Tiling::try_for_memory(s, MemoryModel{first - 1}, p).has_value());
        CHECK_THROWS_AS(Tiling::for_memory(s, MemoryModel{first - 1}, p), CapacityError);
        CHECK_THROWS_WITH(Tiling::for_memory(s, MemoryModel{first - 1}, p),
                          Catch::Contains(std::to_string(first - 1)));
        for (std::int64_t m = first; m < first + 200; ++m)
            CHECK(Tiling::try_for_memory(s, MemoryModel{m}, p).has_value());
    }
    Problem p;
    p.n_q = 10;
    p.n_k = 10;
    p.d = 64;
    // below one row of Q plus one key and value row nothing fits
    CHECK_FALSE(Tiling::try_for_memory(Schedule::fused, MemoryModel{64}, p).has_value());
    CHECK_THROWS_AS(Tiling::for_memory(Schedule::fused, MemoryModel{0}, p), InvalidArgument);
    Problem bad = p;
    bad.d = 0;
    CHECK_THROWS_AS(Tiling::for_memory(Schedule::fused, MemoryModel{1000}, bad), InvalidArgument);
}

TEST_CASE("Tiling::tuned fits M and falls back to for_memory", "[tiling]") {
    ioattn::test::Rng rng(15);
    for (int n = 0; n < 40; ++n) {
        const Problem p = random_problem(rng);
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            const MemoryModel m{rng.uniform_int(200, 300000)};
            CAPTURE(p, m.fast_words, ioattn::to_string(s));
            const auto fm = Tiling::try_for_memory(s, m, p);
            if (!fm) {
                CHECK_THROWS_AS(Tiling::tuned(s, m, p), CapacityError);
                continue;
            }
            const Tiling t = Tiling::tuned(s, m, p);
            CAPTURE(t);
            CHECK(t.schedule == s);
            CHECK(t.resident_words(p) <= m.fast_words);
            CHECK_NOTHROW(t.validate("tuned", m, p));
            if (s == Schedule::materialized)
                CHECK(t.rows == t.cols);
        }
    }
}

TEST_CASE("Tiling::validate", "[tiling][throws]") {
    Problem p;
    p.n_q = 30;
    p.n_k = 20;
    p.d = 8;
    const Tiling f{Schedule::fused, 8, 4};
    const MemoryModel exact{f.resident_words(p)};
    CHECK_NOTHROW(f.validate("v", exact, p));
    CHECK_THROWS_AS(f.validate("v", MemoryModel{exact.fast_words - 1}, p), CapacityError);
    CHECK_THROWS_WITH(f.validate("the_kernel", MemoryModel{exact.fast_words - 1}, p),
                      Catch::Contains("the_kernel"));
    const MemoryModel big{1 << 20};
    CHECK_THROWS_AS((Tiling{Schedule::fused, 0, 4}.validate("v", big, p)), InvalidArgument);
    CHECK_THROWS_AS((Tiling{Schedule::fused, 4, 0}.validate("v", big, p)), InvalidArgument);
    CHECK_THROWS_AS((Tiling{Schedule::fused, -3, 4}.validate("v", big, p)), InvalidArgument);
    CHECK_THROWS_AS((Tiling{Schedule::materialized, 4, 5}.validate("v", big, p)), InvalidArgument);
    CHECK_NOTHROW((Tiling{Schedule::materialized, 5, 5}.validate("v", big, p)));
    // a feature-chunk depth is the materialized schedule's, but not the dense backward's
    CHECK_NOTHROW((Tiling{Schedule::materialized, 5, 5, 8}.validate("v", big, p)));
    CHECK_THROWS_AS((Tiling{Schedule::materialized, 5, 5, -1}.validate("v", big, p)),
                    InvalidArgument);
    CHECK_THROWS_AS((Tiling{Schedule::fused, 8, 4, 8}.validate("v", big, p)), InvalidArgument);
    CHECK_THROWS_WITH(
        (Tiling{Schedule::materialized, 5, 5, 8}.validate("v", big, p, ioattn::Pass::backward)),
        Catch::Contains("depth 8"));
    for (const auto pass : {ioattn::Pass::forward, ioattn::Pass::backward})
        CHECK_NOTHROW((Tiling{Schedule::materialized, 5, 5, 8}.validate(
            "v", big, p, pass, ioattn::Kernels::sparse)));
    CHECK_THROWS_AS(f.validate("v", MemoryModel{0}, p), InvalidArgument);
}

TEST_CASE("Schedule names round-trip and Tiling prints", "[tiling]") {
    for (const Schedule s : {Schedule::reference, Schedule::fused, Schedule::materialized})
        CHECK(ioattn::parse_schedule(ioattn::to_string(s)) == s);
    CHECK(ioattn::to_string(Schedule::fused) == "fused");
    CHECK(ioattn::to_string(ioattn::Select::theory) == "theory");
    CHECK(ioattn::to_string(ioattn::Select::cost) == "cost");
    CHECK(ioattn::to_string(ioattn::Pass::forward) == "forward");
    CHECK_THROWS_AS(ioattn::parse_schedule("flash"), InvalidArgument);
    CHECK_THROWS_AS(ioattn::parse_schedule(""), InvalidArgument);
    std::ostringstream os;
    os << Tiling{Schedule::materialized, 12, 12};
    CHECK_THAT(os.str(), Catch::Contains("materialized") && Catch::Contains("12"));
    CHECK(Tiling{Schedule::fused, 1, 2} == Tiling{Schedule::fused, 1, 2});
    CHECK_FALSE(Tiling{Schedule::fused, 1, 2} == Tiling{Schedule::fused, 2, 1});
}
