// Tests of ioattn::sparse::Support::block_view (sparse/src/support/block_view.cpp): tile lists,
// classification and per-block keys against a brute-force count over every tile.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <vector>

using ioattn::sparse::BlockView;
using ioattn::sparse::Support;
using ioattn::sparse::TileKind;

namespace {

/// Checks v against counts of every (row block, column tile) of s.
void check_against_brute_force(const Support& s, const BlockView& v) {
    const std::int64_t br = v.rows;
    const std::int64_t bc = v.cols;
    REQUIRE(v.row_blocks == (s.n_q() + br - 1) / br);
    REQUIRE(v.col_blocks == (s.n_k() + bc - 1) / bc);
    REQUIRE(v.tile_offsets.size() == static_cast<std::size_t>(v.row_blocks) + 1);
    REQUIRE(v.key_offsets.size() == static_cast<std::size_t>(v.row_blocks) + 1);
    for (std::int64_t b = 0; b < v.row_blocks; ++b) {
        std::vector<ioattn::sparse::BlockTile> expected_tiles;
        std::set<std::int64_t> expected_keys;
        for (std::int64_t c = 0; c < v.col_blocks; ++c) {
            std::int64_t count = 0;
            std::int64_t area = 0;
            for (std::int64_t i = b * br; i < std::min((b + 1) * br, s.n_q()); ++i)
                for (std::int64_t j = c * bc; j < std::min((c + 1) * bc, s.n_k()); ++j) {
                    ++area;
                    if (s.contains(i, j)) {
                        ++count;
                        expected_keys.insert(j);
                    }
                }
            const TileKind kind = count == 0      ? TileKind::empty
                                  : count == area ? TileKind::full
                                                  : TileKind::partial;
            CHECK(v.kind(b, c) == kind);
            if (count > 0)
                expected_tiles.push_back({c, count, kind});
        }
        const auto tiles = v.tiles_of(b);
        CHECK(std::vector<ioattn::sparse::BlockTile>(tiles.begin(), tiles.end()) == expected_tiles);
        const auto keys = v.keys_of(b);
        CHECK(std::vector<std::int64_t>(keys.begin(), keys.end()) ==
              std::vector<std::int64_t>(expected_keys.begin(), expected_keys.end()));
    }
}

} // namespace

TEST_CASE("block_view: matches brute force on patterns, shapes and tilings", "[block_view]") {
    const auto shapes = ioattn::sparse::test::small_shapes();
    const std::vector<std::pair<std::int64_t, std::int64_t>> tilings = {
        {1, 1}, {2, 3}, {4, 4}, {3, 5}, {16, 2}, {7, 64}};
    for (const auto& [n_q, n_k] : shapes) {
        const std::vector<Support> supports = {
            ioattn::sparse::pattern_dense(n_q, n_k),
            ioattn::sparse::pattern_causal(n_q, n_k),
            ioattn::sparse::pattern_window(n_q, n_k, 2),
            ioattn::sparse::pattern_random(n_q, n_k, 0.3, 7),
            ioattn::sparse::pattern_block(n_q, n_k, 3, 0.5, 11),
            Support::none(n_q, n_k),
        };
        for (const auto& [br, bc] : tilings) {
            for (std::size_t p = 0; p < supports.size(); ++p) {
                CAPTURE(n_q, n_k, br, bc, p);
                check_against_brute_force(supports[p], supports[p].block_view(br, bc));
            }
        }
    }
}

TEST_CASE("block_view: dense support is all full tiles, edges clipped", "[block_view]") {
    const Support s = ioattn::sparse::pattern_dense(5, 7);
    const BlockView v = s.block_view(2, 3);
    CHECK(v.row_blocks == 3);
    CHECK(v.col_blocks == 3);
    CHECK(v.tiles.size() == 9);
    for (const auto& t : v.tiles)
        CHECK(t.kind == TileKind::full);
    CHECK(v.block_rows(2) == 1);
    CHECK(v.block_cols(2) == 1);
    CHECK(v.keys_of(0).size() == 7);
}

TEST_CASE("block_view: non-positive tile sizes throw", "[block_view][throws]") {
    const Support s = ioattn::sparse::pattern_dense(3, 3);
    CHECK_THROWS_WITH(s.block_view(0, 2), Catch::Contains("Br = 0"));
    CHECK_THROWS_WITH(s.block_view(2, -1), Catch::Contains("Bc = -1"));
    CHECK_THROWS_AS(s.block_view(0, 2), ioattn::InvalidArgument);
}

TEST_CASE("cached_block_view: built once per tiling, shared by copies, equal to block_view",
          "[block_view]") {
    const Support s = ioattn::sparse::pattern_random(40, 30, 0.2, 5);
    const BlockView& a = s.cached_block_view(4, 8);
    const Support copy = s; // NOLINT(performance-unnecessary-copy-initialization): shares the cache
    CHECK(&copy.cached_block_view(4, 8) == &a);
    CHECK(&s.cached_block_view(8, 4) != &a);
    check_against_brute_force(s, a);
    check_against_brute_force(s, s.cached_block_view(8, 4));
    CHECK(&s.cached_block_view(4, 8) == &a); // still the first one after another was added
    CHECK_THROWS_AS(s.cached_block_view(0, 2), ioattn::InvalidArgument);
}
