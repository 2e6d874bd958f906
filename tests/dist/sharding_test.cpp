// Tests of ioattn::dist::Sharding (no messages): the contiguous and zigzag cuts, sizes within
// one row of each other, owner / local_row / global_row round trips, and the documented throws.

#include <ioattn/dist/sharding.hpp>
#include <ioattn/error.hpp>

#include <catch2/catch.hpp>

#include <vector>

using namespace ioattn;
using namespace ioattn::dist;

TEST_CASE("contiguous and zigzag shards of a small sequence", "[sharding]") {
    const Sharding c(Layout::contiguous, 10, 3);
    CHECK(c.ranges(0) == std::vector<Range>{{0, 4}});
    CHECK(c.ranges(1) == std::vector<Range>{{4, 7}});
    CHECK(c.ranges(2) == std::vector<Range>{{7, 10}});
    const Sharding z(Layout::zigzag, 10, 2); // chunks of 3, 3, 2, 2
    CHECK(z.ranges(0) == std::vector<Range>{{0, 3}, {8, 10}});
    CHECK(z.ranges(1) == std::vector<Range>{{3, 6}, {6, 8}});
    CHECK(z.rows(0) == 5);
    CHECK(z.max_rows() == 5);
    const Sharding z3(Layout::zigzag, 15, 2); // chunks 4, 4, 4, 3: rank 1 holds two long ones
    CHECK(z3.rows(0) == 7);
    CHECK(z3.rows(1) == 8);
    CHECK(z3.max_rows() == 8);
}

TEST_CASE("every row has one owner and round-trips through local indices", "[sharding]") {
    for (const Layout layout : {Layout::contiguous, Layout::zigzag})
        for (int ranks = 1; ranks <= 7; ++ranks)
            for (std::int64_t n = 2 * ranks; n <= 2 * ranks + 17; ++n) {
                CAPTURE(to_string(layout), ranks, n);
                const Sharding s(layout, n, ranks);
                std::vector<int> seen(static_cast<std::size_t>(n), 0);
                std::int64_t total = 0;
                std::int64_t lo = n, hi = 0;
                for (int r = 0; r < ranks; ++r) {
                    const std::int64_t rows = s.rows(r);
                    total += rows;
                    lo = std::min(lo, rows);
                    hi = std::max(hi, rows);
                    for (std::int64_t l = 0; l < rows; ++l) {
                        const std::int64_t i = s.global_row(r, l);
                        ++seen[static_cast<std::size_t>(i)];
                        CHECK(s.owner(i) == r);
                        CHECK(s.local_row(r, i) == l);
                    }
                }
                CHECK(total == n);
                CHECK(std::count(seen.begin(), seen.end(), 1) == n);
                CHECK(hi == s.max_rows());
                CHECK(hi - lo <= (layout == Layout::zigzag ? 2 : 1));
            }
}

TEST_CASE("Sharding throws for too few rows, bad ranks and foreign rows", "[sharding]") {
    CHECK_THROWS_AS(Sharding(Layout::contiguous, 3, 4), InvalidArgument);
    CHECK_THROWS_AS(Sharding(Layout::zigzag, 7, 4), InvalidArgument);
    CHECK_THROWS_AS(Sharding(Layout::contiguous, 3, 0), InvalidArgument);
    const Sharding s(Layout::zigzag, 12, 3);
    CHECK_THROWS_AS(s.ranges(3), InvalidArgument);
    CHECK_THROWS_AS(s.ranges(-1), InvalidArgument);
    CHECK_THROWS_AS(s.owner(12), InvalidArgument);
    CHECK_THROWS_AS(s.local_row(0, 2), InvalidArgument); // row 2 is rank 1's
    CHECK_THROWS_AS(s.global_row(0, 4), InvalidArgument);
    CHECK_THROWS_AS(parse_layout("ring"), InvalidArgument);
    CHECK(parse_layout("zigzag") == Layout::zigzag);
}
