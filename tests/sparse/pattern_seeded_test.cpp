// Tests of pattern_bigbird_block and pattern_powerlaw (sparse/src/patterns/pattern_seeded.cpp):
// block structure against brute-force predicates, the block counts of every block row, the expected
// degree and the heavy tail of the graph, reproducibility by seed and across thread counts, and the
// documented throws.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace sp = ioattn::sparse;
using ioattn::sparse::Support;

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

} // namespace

TEST_CASE("pattern_bigbird_block: window, global and R random whole blocks", "[pattern_seeded]") {
    for (const auto& [n_q, n_k] : sp::test::small_shapes())
        for (const std::int64_t b : {1, 2, 3, 64})
            for (const std::int64_t r : {0, 1, 3}) {
                CAPTURE(n_q, n_k, b, r);
                const std::int64_t w = 3, g = 2, nb = (n_k + b - 1) / b;
                const Support s = sp::pattern_bigbird_block(n_q, n_k, b, w, g, r, 9);
                CHECK(s == sp::pattern_bigbird_block(n_q, n_k, b, w, g, r, 9));
                const auto global = [&](std::int64_t c) {
                    return c == 0 || (nb > 1 && c == nb - 1);
                };
                for (std::int64_t i = 0; i < n_q; ++i) {
                    const std::int64_t qb = floor_div(i + n_k - n_q, b);
                    std::set<std::int64_t> blocks;
                    for (const std::int64_t j : s.row(i))
                        blocks.insert(j / b);
                    // whole blocks only
                    std::int64_t keys = 0;
                    for (const std::int64_t c : blocks)
                        keys += std::min(b, n_k - c * b);
                    CHECK(keys == s.row_nonzeros(i));
                    if (global(qb)) {
                        CHECK(s.row_nonzeros(i) == n_k);
                        continue;
                    }
                    std::set<std::int64_t> base;
                    for (std::int64_t c = std::max<std::int64_t>(0, qb - 1);
                         c <= std::min(nb - 1, qb + 1);
                         ++c)
                        base.insert(c);
                    for (std::int64_t c = 0; c < nb; ++c)
                        if (global(c))
                            base.insert(c);
                    for (const std::int64_t c : base)
                        CHECK(blocks.count(c) == 1);
                    CHECK(static_cast<std::int64_t>(blocks.size()) ==
                          std::min(nb, static_cast<std::int64_t>(base.size()) + r));
                    if (i > 0 && floor_div(i - 1 + n_k - n_q, b) == qb) { // one draw per block row
                        const auto a = s.row(i - 1), z = s.row(i);
                        CHECK(std::vector<std::int64_t>(a.begin(), a.end()) ==
                              std::vector<std::int64_t>(z.begin(), z.end()));
                    }
                }
            }
    const Support big = sp::pattern_bigbird_block(4096, 4096, 64, 3, 2, 3, 1);
    CHECK(big.row_nonzeros(200) == 8 * 64); // 3 window + 2 global + 3 random blocks
    CHECK(big.row_nonzeros(0) == 4096);     // the first block row is global
    CHECK_FALSE(big == sp::pattern_bigbird_block(4096, 4096, 64, 3, 2, 3, 2));
}

TEST_CASE("pattern_powerlaw: expected degree, heavy tail, reproducibility", "[pattern_seeded]") {
    const std::int64_t n = 4000;
    const Support s = sp::pattern_powerlaw(n, n, 16, 5);
    const double avg = static_cast<double>(s.z_qk()) / n;
    CHECK(avg == Approx(16).epsilon(0.05));
    std::int64_t max_row = 0;
    std::vector<std::int64_t> col(n, 0);
    for (std::int64_t i = 0; i < n; ++i) {
        max_row = std::max(max_row, s.row_nonzeros(i));
        for (const std::int64_t j : s.row(i))
            ++col[static_cast<std::size_t>(j)];
    }
    CHECK(max_row > 10 * 16); // hubs: far above the mean (a uniform graph stays near it)
    CHECK(*std::max_element(col.begin(), col.end()) > 10 * 16);
    std::vector<std::int64_t> degrees(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        degrees[static_cast<std::size_t>(i)] = s.row_nonzeros(i);
    std::sort(degrees.begin(), degrees.end());
    CHECK(degrees[static_cast<std::size_t>(n / 2)] < 16); // median below the mean
    CHECK(s == sp::pattern_powerlaw(n, n, 16, 5));
    CHECK_FALSE(s == sp::pattern_powerlaw(n, n, 16, 6));
    const auto build = [] { return sp::pattern_powerlaw(500, 300, 7.5, 3); };
    CHECK(ioattn::with_threads(1, build) == ioattn::with_threads(2, build));
    const Support rect = build();
    CHECK(static_cast<double>(rect.z_qk()) / 500 == Approx(7.5).epsilon(0.15));
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        CAPTURE(n_q, n_k);
        const Support t = sp::pattern_powerlaw(n_q, n_k, 2, 1);
        CHECK(t.n_q() == n_q);
        CHECK(t.n_k() == n_k);
        CHECK(sp::pattern_powerlaw(n_q, n_k, 1e9, 1) == sp::pattern_dense(n_q, n_k));
    }
}

TEST_CASE("seeded block and graph builders: bad arguments throw", "[pattern_seeded][throws]") {
    CHECK_THROWS_WITH(sp::pattern_bigbird_block(8, 8, 0, 1, 1, 1, 1), Catch::Contains("B = 0"));
    CHECK_THROWS_WITH(sp::pattern_bigbird_block(8, 8, 2, -1, 1, 1, 1), Catch::Contains("W = -1"));
    CHECK_THROWS_WITH(sp::pattern_bigbird_block(8, 8, 2, 1, -1, 1, 1), Catch::Contains("G = -1"));
    CHECK_THROWS_WITH(sp::pattern_bigbird_block(8, 8, 2, 1, 1, -2, 1), Catch::Contains("R = -2"));
    CHECK_THROWS_WITH(sp::pattern_powerlaw(8, 8, 0, 1), Catch::Contains("AVG_DEGREE = 0"));
    CHECK_THROWS_WITH(sp::pattern_powerlaw(8, 8, -1, 1), Catch::Contains("AVG_DEGREE = -1"));
    CHECK_THROWS_AS(sp::pattern_powerlaw(8, 8, std::nan(""), 1), ioattn::InvalidArgument);
    CHECK_THROWS_WITH(sp::pattern_powerlaw(-1, 8, 2, 1), Catch::Contains("n_q = -1"));
}
