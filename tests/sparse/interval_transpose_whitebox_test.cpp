// Whitebox test of the transpose of monotone interval rows (sparse/src/support/
// interval_transpose.cpp): the CSR of a pair-by-pair transpose for bands, causal and
// variable-length causal supports, and false (nothing written) where a row is empty, not an
// interval, or its ends decrease. interval_symmetric: true, and transposed() the support
// itself, exactly for the square bands that equal their pair-by-pair transpose.

#include "support/interval_transpose.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

/// Omega^T pair by pair: offsets and rows.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> walked(const sp::Support& s) {
    std::vector<std::vector<std::int64_t>> by_key(static_cast<std::size_t>(s.n_k()));
    for (std::int64_t i = 0; i < s.n_q(); ++i)
        for (const std::int64_t j : s.row(i))
            by_key[static_cast<std::size_t>(j)].push_back(i);
    std::vector<std::int64_t> offsets{0}, rows;
    for (const auto& k : by_key) {
        rows.insert(rows.end(), k.begin(), k.end());
        offsets.push_back(static_cast<std::int64_t>(rows.size()));
    }
    return {offsets, rows};
}

} // namespace

TEST_CASE("interval_transpose: the pair-by-pair transpose of monotone interval rows",
          "[sparse][support][whitebox]") {
    for (const std::string spec : {"window:16",
                                   "window:1",
                                   "causal-window:24",
                                   "causal",
                                   "dense",
                                   "causal-varlen:200,100,212"}) {
        for (const auto& [n_q, n_k] :
             {std::pair<std::int64_t, std::int64_t>{512, 512}, {300, 512}, {512, 300}}) {
            CAPTURE(spec, n_q, n_k);
            if (spec.rfind("causal-varlen", 0) == 0 && n_q != n_k)
                continue;
            const sp::Support s = sp::parse_pattern(spec, n_q, n_k, 3);
            std::vector<std::int64_t> offsets, rows;
            const bool done = spd::interval_transpose(s, offsets, rows);
            if (s.empty_rows() > 0) { // causal rows before the first key
                CHECK(!done);
                continue;
            }
            REQUIRE(done);
            const auto [want_offsets, want_rows] = walked(s);
            CHECK(offsets == want_offsets);
            CHECK(rows == want_rows);
        }
    }
}

TEST_CASE("interval_transpose: declines rows that are not monotone intervals",
          "[sparse][support][whitebox]") {
    const auto declined = [](const sp::Support& s) {
        std::vector<std::int64_t> offsets, rows;
        const bool done = spd::interval_transpose(s, offsets, rows);
        return !done && offsets.empty() && rows.empty();
    };
    CHECK(declined(sp::parse_pattern("random:0.05", 512, 512, 3))); // not intervals
    CHECK(declined(sp::parse_pattern("strided:16", 512, 512, 3)));
    // intervals whose ends decrease: row 1 ends before row 0
    CHECK(declined(sp::Support(3, 8, {0, 3, 4, 6}, {2, 3, 4, 1, 5, 6})));
    // an empty row between two intervals
    CHECK(declined(sp::Support(3, 8, {0, 2, 2, 4}, {0, 1, 1, 2})));
    CHECK(declined(sp::Support(0, 8, {0}, {})));
}

TEST_CASE("interval_symmetric: a symmetric band is its own transpose",
          "[sparse][support][whitebox]") {
    const auto symmetric_by_pairs = [](const sp::Support& s) {
        const auto [offsets, rows] = walked(s);
        return s.n_q() == s.n_k() &&
               offsets ==
                   std::vector<std::int64_t>(s.row_offsets().begin(), s.row_offsets().end()) &&
               rows == std::vector<std::int64_t>(s.col_indices().begin(), s.col_indices().end());
    };
    for (const std::string spec : {"window:16", "window:0", "window:200", "window:3+global:0"}) {
        const sp::Support s = sp::parse_pattern(spec, 300, 300, 1);
        CAPTURE(spec);
        REQUIRE(symmetric_by_pairs(s));
        CHECK(spd::interval_symmetric(s));
        CHECK(&s.transposed() == &s); // nothing built: the support itself
    }
    // not symmetric, or not intervals: false, and the transpose is built as before
    for (const std::string spec :
         {"causal-window:16", "causal", "window:4&causal", "dilated:4:2"}) {
        const sp::Support s = sp::parse_pattern(spec, 300, 300, 1);
        CAPTURE(spec);
        CHECK_FALSE(spd::interval_symmetric(s));
        CHECK(&s.transposed() != &s);
        const auto [offsets, rows] = walked(s);
        CHECK(std::vector<std::int64_t>(s.transposed().col_indices().begin(),
                                        s.transposed().col_indices().end()) == rows);
    }
    CHECK(symmetric_by_pairs(sp::parse_pattern("dilated:4:2", 300, 300, 1))); // symmetric, gaps
    CHECK_FALSE(spd::interval_symmetric(sp::parse_pattern("window:4", 300, 301, 1)));
    { // a symmetric band with one more key column, empty: not square, so not its own transpose
        const sp::Support band = sp::parse_pattern("window:4", 300, 300, 1);
        const sp::Support wider(300,
                                301,
                                {band.row_offsets().begin(), band.row_offsets().end()},
                                {band.col_indices().begin(), band.col_indices().end()});
        CHECK_FALSE(spd::interval_symmetric(wider));
        CHECK(wider.transposed().n_q() == 301);
    }
    // a band one key wider on one side of one row (the right, then the left): intervals,
    // monotone, not symmetric
    for (const bool right : {true, false}) {
        std::vector<std::int64_t> offsets{0}, cols;
        for (std::int64_t i = 0; i < 50; ++i) {
            const std::int64_t lo = i - (i == 20 && !right ? 3 : 2);
            const std::int64_t hi = i + (i == 20 && right ? 3 : 2);
            for (std::int64_t j = std::max<std::int64_t>(0, lo);
                 j <= std::min<std::int64_t>(49, hi);
                 ++j)
                cols.push_back(j);
            offsets.push_back(static_cast<std::int64_t>(cols.size()));
        }
        const sp::Support skewed(50, 50, offsets, cols);
        CAPTURE(right);
        CHECK_FALSE(spd::interval_symmetric(skewed));
        const auto [t_offsets, t_rows] = walked(skewed);
        CHECK(std::vector<std::int64_t>(skewed.transposed().col_indices().begin(),
                                        skewed.transposed().col_indices().end()) == t_rows);
    }
}
