// Tests of ioattn::sparse::{density, row_nonzero_stats, partition_rows_by_nonzeros}
// (sparse/src/support/support_stats.cpp).

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_stats.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace sp = ioattn::sparse;
using ioattn::sparse::Support;

TEST_CASE("density and row_nonzero_stats", "[support_stats]") {
    const Support s(3, 4, {0, 2, 2, 6}, {1, 3, 0, 1, 2, 3});
    CHECK(sp::density(s) == Approx(0.5));
    const auto st = sp::row_nonzero_stats(s);
    CHECK(st.min == 0);
    CHECK(st.max == 4);
    CHECK(st.mean == Approx(2.0));
    CHECK(st.empty_rows == 1);
    CHECK(sp::density(Support::none(0, 5)) == 0.0);
    CHECK(sp::row_nonzero_stats(Support()).max == 0);
    CHECK(sp::density(sp::pattern_dense(7, 3)) == 1.0);
}

TEST_CASE("partition_rows_by_nonzeros balances nonzeros", "[support_stats]") {
    std::vector<Support> supports;
    for (const auto& [n_q, n_k] : sp::test::small_shapes()) {
        supports.push_back(sp::pattern_random(n_q, n_k, 0.4, 3));
        supports.push_back(sp::pattern_causal(n_q, n_k));
    }
    supports.push_back(sp::pattern_bigbird(500, 500, 8, 4, 3, 1)); // dense global rows
    supports.push_back(sp::pattern_global(300, 300, 2));
    supports.push_back(Support::none(10, 10));
    for (std::size_t c = 0; c < supports.size(); ++c) {
        const Support& s = supports[c];
        const std::int64_t max_row = sp::row_nonzero_stats(s).max;
        for (const std::int64_t k : {1, 2, 3, 7, 64}) {
            CAPTURE(c, s.n_q(), s.z_qk(), k);
            const auto b = sp::partition_rows_by_nonzeros(s, k);
            REQUIRE(b.size() == static_cast<std::size_t>(k) + 1);
            CHECK(b.front() == 0);
            CHECK(b.back() == s.n_q());
            const std::int64_t cap = (s.z_qk() + k - 1) / k + max_row;
            std::int64_t sum = 0;
            for (std::size_t p = 0; p + 1 < b.size(); ++p) {
                CHECK(b[p] <= b[p + 1]);
                const auto offs = s.row_offsets();
                const std::int64_t part =
                    offs[static_cast<std::size_t>(b[p + 1])] - offs[static_cast<std::size_t>(b[p])];
                CHECK(part <= cap);
                sum += part;
            }
            CHECK(sum == s.z_qk());
            CHECK(sp::partition_rows_by_nonzeros(s, k) == b); // deterministic
        }
    }
    CHECK_THROWS_WITH(sp::partition_rows_by_nonzeros(Support::none(2, 2), 0),
                      Catch::Contains("parts = 0"));
}
