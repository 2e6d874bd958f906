// Whitebox test of the planner's pricing of a key order through the original structure
// (sparse/src/plan/structure.hpp, OrderedView and price_by_fill): it equals split_by_fill of
// the structure reorder() builds, bitwise, in the forward orientation (the keys relabeled) and
// in the backward one (the transpose's rows in the key order), for the orders find_orders gives
// and for a reversal of the keys.

#include "plan/structure.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

void check_same(const spd::Split& got, const spd::Split& want) {
    CHECK(got.cost == want.cost);
    CHECK(got.all_tiles_cost == want.all_tiles_cost);
    CHECK(got.tile_columns == want.tile_columns);
    CHECK(got.all_tiles_columns == want.all_tiles_columns);
    CHECK(got.tile_blocks == want.tile_blocks);
    CHECK(got.element_blocks == want.element_blocks);
    CHECK(got.split_blocks == want.split_blocks);
    CHECK(got.global_rows == want.global_rows);
    CHECK(got.block_tile == want.block_tile);
}

} // namespace

TEST_CASE("price_by_fill through a key order: split_by_fill of the reordered structure",
          "[sparse][variants][whitebox]") {
    for (const std::string spec : {"random:0.05",
                                   "strided:16",
                                   "bigbird:16:2:3",
                                   "global:4+window:8",
                                   "powerlaw:8",
                                   "window:16"}) {
        const sp::Support s = sp::parse_pattern(spec, 512, 512, 7);
        for (const std::int64_t rows : {16, 32}) {
            for (const std::int64_t lane_group : {0, 16}) {
                spd::CostModel cm;
                cm.lane_group = lane_group;
                spd::Orders found = spd::find_orders(s, rows, cm);
                spd::Orders reversed;
                for (std::int64_t j = s.n_k() - 1; j >= 0; --j)
                    reversed.keys.push_back(j);
                for (const spd::Orders& o : {found, reversed}) {
                    if (o.keys.empty() || !o.rows.empty())
                        continue; // a key order alone is priced in place
                    CAPTURE(spec, rows, lane_group, &o == &reversed);
                    const sp::Support r = spd::reorder(s, o);
                    const std::vector<std::int64_t> key_new = spd::inverse(o.keys);
                    check_same(spd::price_by_fill(spd::OrderedView(s, {}, key_new), rows, cm),
                               spd::split_by_fill(r, rows, cm, false));
                    check_same(
                        spd::price_by_fill(spd::OrderedView(s.transposed(), o.keys, {}), rows, cm),
                        spd::split_by_fill(r.transposed(), rows, cm, false));
                }
            }
        }
    }
}
