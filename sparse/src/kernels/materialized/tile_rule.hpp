#pragma once
// The materializing sparse kernels' rule for a tile's arithmetic, shared by the kernels
// (tile_ops.hpp) and the closed forms of their I/O (io_cost.cpp, io_cost_backward.cpp): a tile
// computed pair by pair walks its keys once per chunk of its SDDMM, a dense one does not.

#include <cstdint>

namespace ioattn::sparse::detail {

/// A tile with at least 1/kDenseTileFill of its pairs allowed computes all of S_ij in the
/// broadcast micro-kernel; a sparser one takes a dot product per allowed pair. 1/4 over 1/8:
/// 2.1x on block:64:0.1 (ioattn run --N 16384 --d 64 --pattern block:64:0.1 --schedule
/// materialized --threads 2 --repeat 3).
inline constexpr std::int64_t kDenseTileFill = 4;

/// True if an r x c tile with nnz allowed pairs takes one dot product per pair (its SDDMM reads
/// the tile's keys once per chunk); false if it runs the broadcast micro-kernel.
constexpr bool per_pair_tile(std::int64_t nnz, std::int64_t r, std::int64_t c) {
    return nnz * kDenseTileFill < r * c;
}

} // namespace ioattn::sparse::detail
