// Whitebox test of the permuted variant's orders (sparse/src/plan/reorder.cpp) as the variant
// planner prices them (sparse/src/plan/variant_plan.cpp): the floor find_orders reports is at
// most the price of every split of the reordered structure, and without global rows at least
// one tile lane per pair (the planner skips building a reordered structure whose floor plus
// copies already costs more than the original's split); a support of whole dense blocks
// without global rows prices at exactly that many lanes (the planner then looks for no
// reordering at all). find_orders reads price_by_fill's record of the blocks as it reads its own
// walk of them. offset_gcd and the residue orders against the gcd of every pair and a stable
// sort by residue.

#include "plan/structure.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

TEST_CASE("offset_gcd and the residue orders: the gcd of every pair's offset, rows and keys "
          "stably by residue") {
    // dilated rows step by S from their own query i': g = S, whatever the shift; the others
    // reach 1
    for (const auto& [spec, n_q] :
         std::vector<std::pair<std::string, std::int64_t>>{{"dilated:8:3", 512},
                                                           {"dilated:40:4", 512},
                                                           {"dilated:40:4", 510},
                                                           {"dilated:9:6", 509},
                                                           {"dilated:100:7", 300},
                                                           {"window:4", 512},
                                                           {"strided:16", 512},
                                                           {"random:0.05", 512}}) {
        CAPTURE(spec, n_q);
        const sp::Support s = sp::parse_pattern(spec, n_q, 512, 7);
        std::int64_t want = 0;
        for (std::int64_t i = 0; i < s.n_q(); ++i)
            for (const std::int64_t j : s.row(i))
                want = std::gcd(want, i + s.n_k() - s.n_q() - j);
        CHECK(spd::offset_gcd(s) == want);
        if (want < 2)
            continue;
        spd::Residues residues;
        const spd::Orders o = spd::find_orders(s, 16, spd::CostModel{}, &residues);
        REQUIRE(residues.g == want);
        const auto stable = [&](std::int64_t n, std::int64_t shift) {
            std::vector<std::int64_t> order(static_cast<std::size_t>(n));
            std::iota(order.begin(), order.end(), std::int64_t{0});
            std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
                return (a + shift) % want < (b + shift) % want;
            });
            return order;
        };
        CHECK(o.rows == stable(s.n_q(), s.n_k() - s.n_q()));
        REQUIRE(residues.reordered != nullptr);
        CHECK(*residues.reordered == spd::reorder(s, {o.rows, stable(s.n_k(), 0)}));
    }
    // rows {i + 1, i + 3}: steps of 2, yet offsets -1 and -3 (g = 1); {i + 2, i + 6}: g = 2
    for (const std::int64_t first : {1, 2}) {
        std::vector<std::int64_t> offsets{0}, cols;
        for (std::int64_t i = 0; i < 512; ++i) {
            if (i + 3 * first < 512)
                cols.insert(cols.end(), {i + first, i + 3 * first});
            offsets.push_back(static_cast<std::int64_t>(cols.size()));
        }
        CHECK(spd::offset_gcd(sp::Support(512, 512, offsets, cols)) == first);
    }
}

TEST_CASE("find_orders: its floor bounds every split of the reordered structure from below") {
    for (const std::string spec : {"random:0.05",
                                   "strided:16",
                                   "dilated:32:4",
                                   "bigbird:16:2:3",
                                   "window:16",
                                   "block:16:0.2",
                                   "powerlaw:8"}) {
        const sp::Support s = sp::parse_pattern(spec, 512, 512, 7);
        const auto z = static_cast<double>(s.z_qk());
        for (const std::int64_t rows : {16, 32}) {
            for (const std::int64_t lane_group : {0, 16}) {
                CAPTURE(spec, rows, lane_group);
                spd::CostModel cm;
                cm.lane_group = lane_group;
                const spd::Orders o = spd::find_orders(s, rows, cm);
                const sp::Support r = o.identity() ? s : spd::reorder(s, o);
                // no global rows (a row seeing half the keys): each pair at least a tile lane
                if (spec.rfind("bigbird", 0) != 0)
                    CHECK(o.floor >= z * cm.tile_lane);
                CHECK(o.floor > 0);
                CHECK(o.floor <= z * cm.element_pair);
                CHECK(o.floor <= spd::split_by_fill(r, rows, cm, false).cost);
                CHECK(o.floor <= spd::split_all(r, rows, true, cm, false).cost);
                CHECK(o.floor <= spd::split_all(r, rows, false, cm, false).cost);
            }
        }
    }
}

TEST_CASE("find_orders: from price_by_fill's record of the blocks, the orders of its own walk") {
    for (const std::string spec : {"random:0.05",
                                   "strided:16",
                                   "dilated:32:4",
                                   "bigbird:16:2:3",
                                   "window:16+global:3",
                                   "powerlaw:8"}) {
        const sp::Support s = sp::parse_pattern(spec, 500, 520, 7);
        for (const std::int64_t rows : {16, 31}) {
            for (const std::int64_t lane_group : {0, 16}) {
                CAPTURE(spec, rows, lane_group);
                spd::CostModel cm;
                cm.lane_group = lane_group;
                spd::BlockSeen seen;
                const spd::Split priced = spd::price_by_fill(s, rows, cm, &seen);
                // recording changes no price
                CHECK(priced.cost == spd::price_by_fill(s, rows, cm).cost);
                CHECK(seen.rows == rows);
                const spd::Orders walked = spd::find_orders(s, rows, cm);
                const spd::Orders read = spd::find_orders(s, rows, cm, nullptr, &seen);
                CHECK(read.rows == walked.rows);
                CHECK(read.keys == walked.keys);
                CHECK(read.floor == walked.floor);
                CHECK(read.residue_only == walked.residue_only);
                // a record of another height is not read
                spd::BlockSeen other;
                (void)spd::price_by_fill(s, rows + 1, cm, &other);
                const spd::Orders past = spd::find_orders(s, rows, cm, nullptr, &other);
                CHECK(past.keys == walked.keys);
                CHECK(past.floor == walked.floor);
            }
        }
    }
}

TEST_CASE("split_by_fill: whole dense blocks price at one tile lane per pair") {
    const sp::Support s = sp::parse_pattern("block:16:0.3", 512, 512, 3);
    const spd::CostModel cm;
    REQUIRE(s.z_qk() > 0);
    const spd::Split split = spd::split_by_fill(s, 16, cm, false);
    CHECK(split.global_rows == 0);
    CHECK(split.cost == static_cast<double>(s.z_qk()) * cm.tile_lane);
    // bigbird's global tokens are found
    CHECK(spd::split_by_fill(sp::parse_pattern("bigbird:16:2:3", 512, 512, 3), 16, cm, false)
              .global_rows > 0);
    // a height that cuts the blocks masks lanes: above the floor, so the planner looks further
    CHECK(spd::split_by_fill(s, 24, cm, false).cost > static_cast<double>(s.z_qk()) * cm.tile_lane);
}
