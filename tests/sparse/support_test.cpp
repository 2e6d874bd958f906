// Tests of ioattn::sparse::Support (sparse/src/support/support.cpp): accessors, every validation
// error of the CSR constructor, every builder's rows through it, and the cached transpose with
// its position map, and a transpose the planner keeps (keep_transposed).

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using ioattn::InvalidArgument;
using ioattn::sparse::Support;

namespace {

/// The message of the InvalidArgument fn throws ("" if none).
template <typename Fn>
std::string message_of(Fn fn) {
    try {
        fn();
    } catch (const InvalidArgument& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("Support: accessors on a small CSR", "[support]") {
    // row 0: {1, 3}; row 1: {}; row 2: {0, 1, 2, 3}
    const Support s(3, 4, {0, 2, 2, 6}, {1, 3, 0, 1, 2, 3});
    CHECK(s.n_q() == 3);
    CHECK(s.n_k() == 4);
    CHECK(s.z_qk() == 6);
    CHECK(s.empty_rows() == 1);
    CHECK(s.row(0).size() == 2);
    CHECK(s.row(0)[1] == 3);
    CHECK(s.row(1).empty());
    CHECK(s.row_nonzeros(2) == 4);
    CHECK(s.contains(0, 3));
    CHECK_FALSE(s.contains(0, 2));
    CHECK_FALSE(s.contains(1, 0));
    CHECK_FALSE(s.contains(3, 0));
    CHECK_FALSE(s.contains(0, -1));
    CHECK(s.row_offsets().size() == 4);
    CHECK(s.col_indices().size() == 6);
}

TEST_CASE("Support: empty shapes and none()", "[support]") {
    const Support zero;
    CHECK(zero.n_q() == 0);
    CHECK(zero.z_qk() == 0);
    CHECK(zero.empty_rows() == 0);
    const Support none = Support::none(4, 7);
    CHECK(none.z_qk() == 0);
    CHECK(none.empty_rows() == 4);
    CHECK(Support::none(0, 0) == zero);
    const Support no_keys(2, 0, {0, 0, 0}, {});
    CHECK(no_keys.empty_rows() == 2);
    CHECK_THROWS_AS(Support::none(-1, 2), InvalidArgument);
    CHECK_THROWS_AS(Support::none(1, -2), InvalidArgument);
}

TEST_CASE("Support: equality compares shape and pairs", "[support]") {
    const Support a(2, 3, {0, 1, 2}, {0, 2});
    CHECK(a == Support(2, 3, {0, 1, 2}, {0, 2}));
    CHECK_FALSE(a == Support(2, 4, {0, 1, 2}, {0, 2}));
    CHECK_FALSE(a == Support(2, 3, {0, 1, 2}, {0, 1}));
}

TEST_CASE("Support: each malformed CSR throws InvalidArgument naming row and value",
          "[support][throws]") {
    using V = std::vector<std::int64_t>;
    SECTION("negative sizes") {
        CHECK_THROWS_WITH(Support(-1, 3, V{0}, V{}), Catch::Contains("n_q = -1"));
        CHECK_THROWS_WITH(Support(1, -3, V{0, 0}, V{}), Catch::Contains("n_k = -3"));
    }
    SECTION("offsets of the wrong size") {
        CHECK_THROWS_WITH(Support(2, 3, V{0, 1}, V{0}), Catch::Contains("expected n_q + 1 = 3"));
        CHECK_THROWS_AS(Support(2, 3, V{}, V{}), InvalidArgument);
    }
    SECTION("offsets not starting at 0") {
        CHECK_THROWS_WITH(Support(1, 3, V{1, 1}, V{0}), Catch::Contains("row_offsets[0] = 1"));
    }
    SECTION("decreasing offsets") {
        const std::string m = message_of([] { Support(3, 3, V{0, 2, 1, 3}, V{0, 1, 2}); });
        CHECK_THAT(m, Catch::Contains("row 1") && Catch::Contains("must not decrease"));
    }
    SECTION("last offset does not match the number of columns") {
        CHECK_THROWS_WITH(Support(2, 3, V{0, 1, 1}, V{0, 1}),
                          Catch::Contains("row_offsets[n_q] = 1") && Catch::Contains("2 column"));
        CHECK_THROWS_WITH(Support(2, 3, V{0, 1, 3}, V{0, 1}), Catch::Contains("exceeds"));
    }
    SECTION("column out of range") {
        CHECK_THROWS_WITH(Support(2, 3, V{0, 1, 2}, V{0, 3}),
                          Catch::Contains("row 1: column 3 out of range [0, 3)"));
        CHECK_THROWS_WITH(Support(1, 3, V{0, 1}, V{-1}), Catch::Contains("column -1"));
    }
    SECTION("unsorted columns") {
        CHECK_THROWS_WITH(Support(1, 5, V{0, 3}, V{0, 4, 2}),
                          Catch::Contains("row 0: column 2 after column 4"));
    }
    SECTION("duplicate columns") {
        CHECK_THROWS_WITH(Support(2, 5, V{0, 1, 3}, V{0, 2, 2}),
                          Catch::Contains("row 1: duplicate column 2"));
    }
    SECTION("errors name the type") {
        CHECK_THROWS_WITH(Support(1, 5, V{0, 2}, V{1, 1}),
                          Catch::StartsWith("ioattn::sparse::Support: "));
    }
}

TEST_CASE("Support: what the library builds passes the checking constructor", "[support]") {
    // the builders (patterns, transposes) construct with detail::BuiltRows, whose rows are
    // checked in Debug and sanitizer builds only: here every builder's rows are checked in
    // every build, through the constructor that checks a caller's arrays
    const auto recheck = [](const Support& s) {
        const auto o = s.row_offsets();
        const auto c = s.col_indices();
        const Support copy(s.n_q(),
                           s.n_k(),
                           std::vector<std::int64_t>(o.begin(), o.end()),
                           std::vector<std::int64_t>(c.begin(), c.end()));
        CHECK(copy == s);
    };
    for (const char* spec : {"window:7",
                             "causal-window:5",
                             "dilated:9:3",
                             "strided:6",
                             "bigbird:4:2:3",
                             "bigbird-block:4:2:1:2",
                             "block:4:0.4",
                             "random:0.1",
                             "powerlaw:3",
                             "global:2+window:3",
                             "causal-varlen:20,7,37,16",
                             "causal"}) {
        INFO(spec);
        const Support s = ioattn::sparse::parse_pattern(spec, 80, 80, 5);
        recheck(s);
        recheck(s.transposed());
    }
    using V = std::vector<std::int64_t>;
    using ioattn::sparse::detail::BuiltRows;
    CHECK_THROWS_WITH(Support(BuiltRows{}, 2, 3, V{0, 1}, V{0}),
                      Catch::Contains("expected n_q + 1 = 3"));
    CHECK_THROWS_WITH(Support(BuiltRows{}, 1, 3, V{1, 1}, V{0}),
                      Catch::Contains("row_offsets[0] = 1"));
}

TEST_CASE("Support: transposed() swaps every pair, transposed_positions() finds it here",
          "[support]") {
    for (const Support& s : {ioattn::sparse::pattern_random(23, 17, 0.3, 9),
                             ioattn::sparse::pattern_causal(9, 14),
                             Support::none(4, 6)}) {
        const Support& t = s.transposed();
        REQUIRE(t.n_q() == s.n_k());
        REQUIRE(t.n_k() == s.n_q());
        CHECK(t.z_qk() == s.z_qk());
        const auto positions = s.transposed_positions();
        REQUIRE(static_cast<std::int64_t>(positions.size()) == s.z_qk());
        std::vector<int> hit(static_cast<std::size_t>(s.z_qk()), 0);
        for (std::int64_t j = 0; j < t.n_q(); ++j) {
            const std::int64_t base = t.row_offsets()[static_cast<std::size_t>(j)];
            const auto row = t.row(j);
            for (std::size_t e = 0; e < row.size(); ++e) {
                const std::int64_t i = row[e];
                CHECK(s.contains(i, j));
                const std::int64_t at = positions[static_cast<std::size_t>(base) + e];
                REQUIRE((at >= s.row_offsets()[static_cast<std::size_t>(i)] &&
                         at < s.row_offsets()[static_cast<std::size_t>(i) + 1]));
                CHECK(s.col_indices()[static_cast<std::size_t>(at)] == j);
                ++hit[static_cast<std::size_t>(at)];
            }
        }
        CHECK(std::count(hit.begin(), hit.end(), 1) == s.z_qk()); // each pair exactly once
        const Support copy = s; // copies share the cached transpose
        CHECK(&copy.transposed() == &t);
    }
}

TEST_CASE("Support: keep_transposed keeps the given transpose, refuses another shape",
          "[support]") {
    const Support s = ioattn::sparse::pattern_random(40, 30, 0.2, 5);
    Support t = s.detached().transposed(); // a copy of Omega^T
    const std::int64_t* kept = t.col_indices().data();
    const Support u = s.detached(); // nothing built yet
    u.keep_transposed(ioattn::sparse::detail::BuiltRows{}, std::move(t));
    CHECK(u.transposed().col_indices().data() == kept); // the kept arrays: nothing rebuilt
    CHECK(u.transposed() == s.transposed());
    // one already kept stays
    u.keep_transposed(ioattn::sparse::detail::BuiltRows{}, s.detached().transposed());
    CHECK(u.transposed().col_indices().data() == kept);
    // not the transpose's shape or pair count: refused, naming both
    const Support v = s.detached();
    CHECK(message_of([&] { v.keep_transposed(ioattn::sparse::detail::BuiltRows{}, s); }) ==
          "ioattn::sparse::Support::keep_transposed: a 40 x 30 structure of " +
              std::to_string(s.z_qk()) + " pairs is not the transpose of a 40 x 30 one of " +
              std::to_string(s.z_qk()));
    CHECK_THROWS_AS(v.keep_transposed(ioattn::sparse::detail::BuiltRows{},
                                      ioattn::sparse::pattern_causal(30, 40)),
                    InvalidArgument);
    CHECK(v.transposed() == s.transposed()); // built as usual afterwards
}

TEST_CASE("Support: transposed() of n_k = INT64_MAX is refused, not an overflow",
          "[support][throws]") {
    // regression (support_fuzz, corpus/support_fuzz/regress-transpose-nk-max): sizing the
    // transpose's n_k + 1 offsets overflowed int64 (UBSan: signed integer overflow)
    const std::int64_t n_k = std::numeric_limits<std::int64_t>::max();
    const Support s(1, n_k, {0, 1}, {n_k - 1});
    CHECK(s.contains(0, n_k - 1));
    CHECK_THROWS_AS(s.transposed(), ioattn::ResourceError);
    CHECK_THROWS_WITH(s.transposed(), Catch::Contains("Support::transposed: needs"));
    CHECK_THROWS_AS(Support::none(n_k, 1), ioattn::ResourceError);
}

TEST_CASE("Support: block_view with Br or Bc near INT64_MAX counts every pair once",
          "[support][block_view]") {
    // regression (support_fuzz, corpus/support_fuzz/regress-block-view-huge-bc): the tile
    // counts (n + B - 1) / B overflowed for B = INT64_MAX (UBSan: signed overflow)
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    const Support s(3, 4, {0, 2, 3, 4}, {0, 3, 1, 2});
    for (const auto& [br, bc] :
         {std::pair{big, big}, std::pair{std::int64_t{1}, big}, std::pair{big, std::int64_t{2}}}) {
        const auto v = s.block_view(br, bc);
        CHECK(v.row_blocks == (br == big ? 1 : 3));
        CHECK(v.col_blocks == (bc == big ? 1 : 2));
        std::int64_t pairs = 0;
        for (std::int64_t b = 0; b < v.row_blocks; ++b)
            for (const auto& tile : v.tiles_of(b))
                pairs += tile.nonzeros;
        CHECK(pairs == 4);
    }
}

TEST_CASE("Support: block_view of n_k = INT64_MAX with Bc = 1 is refused, not an overflow",
          "[support][block_view][throws]") {
    // regression (support_fuzz, corpus/support_fuzz/regress-block-view-nk-max): sizing n_k / Bc
    // + 1 tile counts overflowed int64 (UBSan: signed overflow)
    const Support s(1, std::numeric_limits<std::int64_t>::max(), {0, 1}, {5});
    CHECK_THROWS_AS(s.block_view(1, 1), ioattn::ResourceError);
}

TEST_CASE("Support: cached_value builds once per key, shares it with copies, keeps the newest",
          "[support]") {
    const Support s = ioattn::sparse::parse_pattern("window:2", 8, 8, 1);
    int builds = 0;
    const auto build = [&](int v) {
        return [&builds, v] {
            ++builds;
            return std::static_pointer_cast<const void>(std::make_shared<const int>(v));
        };
    };
    const auto value = [](const std::shared_ptr<const void>& p) {
        return *std::static_pointer_cast<const int>(p);
    };
    CHECK(value(s.cached_value("a", build(1))) == 1);
    CHECK(value(s.cached_value("a", build(2))) == 1); // kept: not built again
    const Support copy = s;
    CHECK(value(copy.cached_value("a", build(3))) == 1); // copies share it
    CHECK(builds == 1);
    // a build that throws keeps nothing
    CHECK_THROWS_AS(
        s.cached_value("b",
                       []() -> std::shared_ptr<const void> { throw InvalidArgument("refused"); }),
        InvalidArgument);
    CHECK(value(s.cached_value("b", build(4))) == 4);
    CHECK(builds == 2);
    // the kKeptValues newest keys are kept: "a", the oldest, goes first
    for (std::size_t k = 0; k + 1 < Support::kKeptValues; ++k) {
        std::string key = "k"; // not "k" + to_string(k): GCC 12 -O3 warns falsely (PR 105651)
        key += std::to_string(k);
        (void)s.cached_value(key, build(5));
    }
    CHECK(value(s.cached_value("b", build(6))) == 4);
    CHECK(value(s.cached_value("a", build(7))) == 7);
    // another structure has its own
    const Support other = ioattn::sparse::parse_pattern("window:2", 8, 8, 1);
    CHECK(value(other.cached_value("b", build(8))) == 8);
}

TEST_CASE("Support: detached() copies the pairs, not the cache", "[support]") {
    const Support s = ioattn::sparse::parse_pattern("window:2", 8, 8, 1);
    (void)s.cached_value(
        "a", [] { return std::static_pointer_cast<const void>(std::make_shared<const int>(1)); });
    const Support d = s.detached();
    CHECK(d == s);
    int builds = 0;
    (void)d.cached_value("a", [&] {
        ++builds;
        return std::static_pointer_cast<const void>(std::make_shared<const int>(2));
    });
    CHECK(builds == 1);
}
