// Tests of ioattn/ff/index_set.hpp: measures against brute force, the exact Lemma 4.6 test,
// the families and the adversarial search.

#include <ioattn/error.hpp>
#include <ioattn/ff/index_set.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

using ioattn::InvalidArgument;
using namespace ioattn::ff;

namespace {

// r_R by definition: for each row, min(#columns in I, d).
std::int64_t brute_rank_rows(const IndexSet& s, std::int64_t d) {
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < s.n_rows(); ++i) {
        std::int64_t c = 0;
        for (std::int64_t j = 0; j < s.n_cols(); ++j)
            c += s.contains({i, j}) ? 1 : 0;
        total += std::min(c, d);
    }
    return total;
}

std::int64_t brute_rank_cols(const IndexSet& s, std::int64_t d) {
    std::int64_t total = 0;
    for (std::int64_t j = 0; j < s.n_cols(); ++j) {
        std::int64_t c = 0;
        for (std::int64_t i = 0; i < s.n_rows(); ++i)
            c += s.contains({i, j}) ? 1 : 0;
        total += std::min(c, d);
    }
    return total;
}

} // namespace

TEST_CASE("IndexSet sorts, deduplicates and validates", "[ff][index_set]") {
    const IndexSet s(3, 4, {{2, 1}, {0, 3}, {2, 1}, {0, 0}});
    CHECK(s.size() == 3);
    CHECK(s.entries().front() == Entry{0, 0});
    CHECK(s.row_support(0) == std::vector<std::int64_t>{0, 3});
    CHECK(s.col_support(1) == std::vector<std::int64_t>{2});
    CHECK(s.distinct_rows() == 2);
    CHECK(s.distinct_cols() == 3);
    CHECK_THROWS_AS(IndexSet(3, 3, {{3, 0}}), InvalidArgument);
    CHECK_THROWS_AS(IndexSet(3, 3, {{0, -1}}), InvalidArgument);
    CHECK_THROWS_AS(IndexSet(0, 3, {}), InvalidArgument);
}

TEST_CASE("r_R, r_C, U(I) against brute force on all sets of 3x3 and random sets",
          "[ff][index_set]") {
    for (std::uint64_t mask = 0; mask < 512; ++mask) {
        const IndexSet s = from_mask(3, mask);
        for (std::int64_t d = 1; d <= 3; ++d) {
            CAPTURE(mask, d);
            REQUIRE(rank_rows(s, d) == brute_rank_rows(s, d));
            REQUIRE(rank_cols(s, d) == brute_rank_cols(s, d));
            std::set<std::int64_t> rows;
            std::set<std::int64_t> cols;
            for (const Entry& e : s.entries()) {
                rows.insert(e.row);
                cols.insert(e.col);
            }
            REQUIRE(protocol_cost(s, d) ==
                    std::min<std::int64_t>(
                        s.size(), d * static_cast<std::int64_t>(rows.size() + cols.size())));
        }
    }
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
        const IndexSet s = uniform_random(12, static_cast<std::int64_t>(seed * 7), seed);
        REQUIRE(s.size() == static_cast<std::int64_t>(seed * 7));
        REQUIRE(rank_rows(s, 4) == brute_rank_rows(s, 4));
        REQUIRE(rank_cols(s, 4) == brute_rank_cols(s, 4));
    }
    CHECK_THROWS_AS(rank_rows(from_mask(2, 3), 0), InvalidArgument);
}

TEST_CASE("meets_lemma46 is the exact form of value >= lemma46_bound", "[ff][index_set]") {
    CHECK(lemma46_bound(8, 2) == Approx(2.0));    // min(2*2, 2)
    CHECK(lemma46_bound(800, 2) == Approx(40.0)); // min(2*20, 200)
    std::int64_t mismatches = 0;
    for (std::int64_t d = 1; d <= 8; ++d)
        for (std::int64_t size = 0; size <= 300; ++size)
            for (std::int64_t v = 0; v <= 80; ++v) {
                const double b = lemma46_bound(size, d);
                if (std::abs(static_cast<double>(v) - b) > 1e-9 &&
                    meets_lemma46(v, size, d) != (static_cast<double>(v) >= b))
                    ++mismatches;
            }
    CHECK(mismatches == 0);
    CHECK(meets_lemma46(2, 8, 2)); // equality: 2 = min(4, 2)
}

TEST_CASE("families have the documented shapes", "[ff][index_set]") {
    const IndexSet r = rectangle(8, 1, 2, 3, 4);
    CHECK(r.size() == 12);
    CHECK(rank_rows(r, 2) == 6);
    CHECK(rank_cols(r, 2) == 8);
    CHECK(full_rows(8, 0, 2).size() == 16);
    CHECK(full_cols(8, 6, 2).size() == 16);
    const IndexSet dg = diagonals(8, 3);
    CHECK(dg.size() == 24);
    for (std::int64_t c : dg.row_counts())
        CHECK(c == 3);
    for (std::int64_t c : dg.col_counts())
        CHECK(c == 3);
    CHECK(block_diagonal(8, 3, 3).size() == 18); // two blocks fit
    CHECK(from_mask(2, 0b1001).entries() == std::vector<Entry>{{0, 0}, {1, 1}});
    CHECK_THROWS_AS(rectangle(8, 6, 0, 3, 1), InvalidArgument);
    CHECK_THROWS_AS(uniform_random(4, 17, 1), InvalidArgument);
    CHECK_THROWS_AS(from_mask(8, 1), InvalidArgument);
    CHECK_THROWS_AS(standard_families(4, 5, 1, 1, 1, 1), InvalidArgument);
    const auto fam = standard_families(16, 4, 7, 3, 2, 200);
    CHECK(fam.size() > 20);
    const auto again = standard_families(16, 4, 7, 3, 2, 200);
    REQUIRE(fam.size() == again.size());
    for (std::size_t i = 0; i < fam.size(); ++i) {
        CHECK(fam[i].name == again[i].name);
        CHECK(fam[i].set == again[i].set);
    }
}

TEST_CASE("adversarial_search keeps |I| and does not worsen the objective", "[ff][index_set]") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed)
        for (std::int64_t size : {1, 10, 64, 200, 256}) {
            const IndexSet start = uniform_random(16, size, seed);
            const IndexSet best = adversarial_search(16, size, 4, seed, 3000);
            CAPTURE(seed, size);
            REQUIRE(best.size() == size);
            const auto f = [](const IndexSet& s) {
                return std::max(rank_rows(s, 4), rank_cols(s, 4));
            };
            REQUIRE(f(best) <= f(start));
            REQUIRE(meets_lemma46(f(best), size, 4));
            REQUIRE(best == adversarial_search(16, size, 4, seed, 3000)); // reproducible
        }
    // a 64-entry set can reach max(r_R, r_C) = 32 (an 8 x 8 square) from a random start
    CHECK(std::max(rank_rows(adversarial_search(16, 64, 4, 3, 20000), 4),
                   rank_cols(adversarial_search(16, 64, 4, 3, 20000), 4)) < 64);
    CHECK_THROWS_AS(adversarial_search(4, 17, 2, 1, 10), InvalidArgument);
    CHECK_THROWS_AS(adversarial_search(4, 3, 0, 1, 10), InvalidArgument);
}
