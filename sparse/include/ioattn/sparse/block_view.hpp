#pragma once
/// The Br x Bc tile view of a Support: which column tiles each row block touches, how full
/// each is, and which keys each row block may see (what a fused kernel streams).

#include <cstdint>
#include <span>
#include <vector>

namespace ioattn::sparse {

/// How much of a tile the support covers.
enum class TileKind : std::uint8_t {
    empty,   ///< no allowed pair: the kernel skips the tile
    partial, ///< some allowed pairs: the kernel masks per entry
    full     ///< every pair of the (possibly clipped edge) tile allowed: no masking needed
};

/// One non-empty tile of a row block.
struct BlockTile {
    std::int64_t col_block =
        0; ///< column tile index: keys [col_block*Bc, min((col_block+1)*Bc, n_k))
    std::int64_t nonzeros = 0;         ///< allowed pairs inside the tile (>= 1)
    TileKind kind = TileKind::partial; ///< partial or full (empty tiles are not listed)

    bool operator==(const BlockTile&) const = default;
};

/// The tile view built by Support::block_view(Br, Bc). Row block b holds query rows
/// [b*Br, min((b+1)*Br, n_q)); column tile c holds keys [c*Bc, min((c+1)*Bc, n_k)); edge tiles
/// are clipped, and "full" means full of the clipped tile. Immutable after construction;
/// concurrent reads are safe.
struct BlockView {
    std::int64_t rows = 0;                  ///< Br
    std::int64_t cols = 0;                  ///< Bc
    std::int64_t n_q = 0;                   ///< query rows of the support
    std::int64_t n_k = 0;                   ///< keys of the support
    std::int64_t row_blocks = 0;            ///< ceil(n_q / Br)
    std::int64_t col_blocks = 0;            ///< ceil(n_k / Bc)
    std::vector<std::int64_t> tile_offsets; ///< row_blocks + 1 offsets into `tiles`
    std::vector<BlockTile> tiles;           ///< non-empty tiles, by row block, col_block ascending
    std::vector<std::int64_t> key_offsets;  ///< row_blocks + 1 offsets into `keys`
    std::vector<std::int64_t> keys; ///< per row block: sorted unique keys some row of it may see

    /// The non-empty tiles of row block b, col_block ascending. Precondition: 0 <= b < row_blocks.
    [[nodiscard]] std::span<const BlockTile> tiles_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(tile_offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(tile_offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const BlockTile>(tiles).subspan(lo, hi - lo);
    }

    /// The sorted unique keys that some query row of row block b may see.
    [[nodiscard]] std::span<const std::int64_t> keys_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const std::int64_t>(keys).subspan(lo, hi - lo);
    }

    /// Kind of tile (b, c); empty when it is not listed. O(log tiles_of(b).size()).
    /// Precondition: 0 <= b < row_blocks, 0 <= c < col_blocks.
    [[nodiscard]] TileKind kind(std::int64_t b, std::int64_t c) const;

    /// Rows of row block b after clipping at n_q.
    [[nodiscard]] std::int64_t block_rows(std::int64_t b) const {
        const std::int64_t hi = (b + 1) * rows < n_q ? (b + 1) * rows : n_q;
        return hi - b * rows;
    }

    /// Keys of column tile c after clipping at n_k.
    [[nodiscard]] std::int64_t block_cols(std::int64_t c) const {
        const std::int64_t hi = (c + 1) * cols < n_k ? (c + 1) * cols : n_k;
        return hi - c * cols;
    }
};

} // namespace ioattn::sparse
