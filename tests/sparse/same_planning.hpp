#pragma once
// The whitebox tests' checks that two structures of the same pairs, one with what its builder
// declared (runs, steps) and one without (a detached copy), give the planner the same prices
// (plan/structure.cpp, price_by_fill) and the same block keys (plan/block_columns.cpp): keys,
// counts and, in lane groups of 4, lanes.

#include "plan/block_columns.hpp"
#include "plan/structure.hpp"

#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

/// price_by_fill of a and b at `rows`, both passes: the same prices, tile blocks and columns,
/// global rows and pairs. Returns a's global rows priced.
inline std::int64_t check_same_pricing(const ioattn::sparse::Support& a,
                                       const ioattn::sparse::Support& b,
                                       std::int64_t rows) {
    namespace spd = ioattn::sparse::detail;
    std::int64_t globals = 0;
    for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward}) {
        const spd::CostModel cm = spd::cost_model(pass);
        const spd::Split px = spd::price_by_fill(a, rows, cm);
        const spd::Split py = spd::price_by_fill(b, rows, cm);
        CHECK(px.cost == py.cost);
        CHECK(px.block_tile == py.block_tile);
        CHECK(px.tile_columns == py.tile_columns);
        CHECK(px.all_tiles_cost == py.all_tiles_cost);
        CHECK(px.global_rows == py.global_rows);
        globals += px.global_rows;
        CHECK(px.pairs == py.pairs);
    }
    return globals;
}

/// block_keys of a and b at `rows`, block by block, without and with lane groups of 4.
inline void check_same_block_keys(const ioattn::sparse::Support& a,
                                  const ioattn::sparse::Support& b,
                                  std::int64_t rows) {
    namespace spd = ioattn::sparse::detail;
    for (const std::int64_t group : {0, 4}) {
        std::vector<std::int64_t> cx(static_cast<std::size_t>(3 * a.n_k()), 0);
        std::vector<std::int64_t> cy(cx.size(), 0);
        std::int64_t* lx = group > 0 ? cx.data() + a.n_k() : nullptr;
        std::int64_t* ly = group > 0 ? cy.data() + a.n_k() : nullptr;
        for (std::int64_t blk = 0; blk < spd::n_blocks(a, rows); ++blk) {
            const auto kx = spd::block_keys(a, rows, blk, cx.data(), group, lx);
            const auto ky = spd::block_keys(b, rows, blk, cy.data(), group, ly);
            REQUIRE(kx == ky);
            for (const std::int64_t j : kx) {
                const auto u = static_cast<std::size_t>(j);
                CHECK(cx[u] == cy[u]);
                if (group > 0)
                    CHECK(lx[j] == ly[j]);
                cx[u] = 0;
                cy[u] = 0;
            }
        }
    }
}
