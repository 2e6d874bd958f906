// ioattn::sparse::Support::block_view: the Br x Bc tile view of Omega.
// For each row block of Br query rows: count the allowed pairs per column tile of Bc keys,
// list the non-empty tiles with their kind (full when the count equals the clipped tile area),
// and collect the sorted unique keys any row of the block may see (the K/V rows a fused
// kernel streams). Scratch: one counter per column tile and one mark per key, reset through
// touched lists, so the cost is O(Z_QK + n_q + n_k + sum_b K_b log K_b) with K_b the keys of
// block b. Serial and deterministic.
// Tests: tests/sparse/block_view_test.cpp

#include "fail.hpp"

#include <ioattn/resources.hpp>
#include <ioattn/sparse/block_view.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>

namespace ioattn::sparse {

TileKind BlockView::kind(std::int64_t b, std::int64_t c) const {
    const auto t = tiles_of(b);
    const auto it = std::lower_bound(
        t.begin(), t.end(), c, [](const BlockTile& x, std::int64_t v) { return x.col_block < v; });
    return it != t.end() && it->col_block == c ? it->kind : TileKind::empty;
}

BlockView Support::block_view(std::int64_t br, std::int64_t bc) const {
    constexpr std::string_view kWhere = "ioattn::sparse::Support::block_view";
    if (br < 1)
        detail::fail(kWhere, "Br = ", br, " (expected >= 1)");
    if (bc < 1)
        detail::fail(kWhere, "Bc = ", bc, " (expected >= 1)");

    // per column tile a count, per key a mark (the view itself grows with the pairs it meets)
    require_memory(
        kWhere,
        add_bytes(add_bytes(bytes_of(n_k_ / bc, sizeof(std::int64_t)), sizeof(std::int64_t)),
                  bytes_of(n_k_, 1)),
        "scratch");
    BlockView v;
    v.rows = br;
    v.cols = bc;
    v.n_q = n_q_;
    v.n_k = n_k_;
    v.row_blocks = n_q_ / br + (n_q_ % br != 0 ? 1 : 0); // (n + b - 1) / b overflows at huge b
    v.col_blocks = n_k_ / bc + (n_k_ % bc != 0 ? 1 : 0);
    v.tile_offsets.assign(1, 0);
    v.key_offsets.assign(1, 0);
    v.tile_offsets.reserve(static_cast<std::size_t>(v.row_blocks) + 1);
    v.key_offsets.reserve(static_cast<std::size_t>(v.row_blocks) + 1);

    std::vector<std::int64_t> tile_count(static_cast<std::size_t>(v.col_blocks), 0);
    std::vector<char> key_seen(static_cast<std::size_t>(n_k_), 0);
    std::vector<std::int64_t> touched_tiles;
    for (std::int64_t b = 0; b < v.row_blocks; ++b) {
        // --- count pairs per column tile, mark visible keys ---
        const std::size_t first_key = v.keys.size();
        const std::int64_t rows_b = v.block_rows(b);
        for (std::int64_t i = b * br; i < b * br + rows_b; ++i) {
            for (const std::int64_t j : row(i)) {
                const auto c = static_cast<std::size_t>(j / bc);
                if (tile_count[c]++ == 0)
                    touched_tiles.push_back(j / bc);
                if (key_seen[static_cast<std::size_t>(j)] == 0) {
                    key_seen[static_cast<std::size_t>(j)] = 1;
                    v.keys.push_back(j);
                }
            }
        }
        // --- classify the touched tiles, sort the keys, reset the scratch ---
        std::sort(touched_tiles.begin(), touched_tiles.end());
        for (const std::int64_t c : touched_tiles) {
            const std::int64_t count = tile_count[static_cast<std::size_t>(c)];
            const bool full = count == rows_b * v.block_cols(c);
            v.tiles.push_back({c, count, full ? TileKind::full : TileKind::partial});
            tile_count[static_cast<std::size_t>(c)] = 0;
        }
        touched_tiles.clear();
        const auto key_begin = v.keys.begin() + static_cast<std::ptrdiff_t>(first_key);
        std::sort(key_begin, v.keys.end());
        for (auto it = key_begin; it != v.keys.end(); ++it)
            key_seen[static_cast<std::size_t>(*it)] = 0;
        v.tile_offsets.push_back(static_cast<std::int64_t>(v.tiles.size()));
        v.key_offsets.push_back(static_cast<std::int64_t>(v.keys.size()));
    }
    return v;
}

} // namespace ioattn::sparse
