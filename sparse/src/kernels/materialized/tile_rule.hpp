#pragma once
// The materializing sparse kernels' rule for a tile's arithmetic, shared by the kernels
// (tile_ops.hpp) and the closed forms of their I/O (io_cost.cpp, io_cost_backward.cpp): a tile
// computed pair by pair walks its keys once per chunk of its SDDMM, a dense one does not.

#include <cstdint>

namespace ioattn::sparse::detail {

/// A tile with at least 1/kDenseTileFill of its pairs allowed computes all of S_ij in the
/// broadcast micro-kernel; a sparser one takes a dot product per allowed pair. Measured on the
/// forward (N=16384, d=64, 2 threads, `ioattn run --schedule materialized --repeat 3`, GFLOP/s,
/// shared machine), fill 1/2, 1/4, 1/8, 1/16: window:256 63.8 / 66.6 / 68.7 / 32.1,
/// bigbird:64:2:3 11.8 / 12.2 / 13.1 / 5.7, random:0.02 5.1 / 5.1 / 3.2 / 2.6, block:64:0.1
/// 68.7 / 68.5 / 32.6 / 34.1; every tile dense: 15.0, 1.6, 1.4, 15.7 (before the in-place
/// reads), every tile by pairs: 13.5, 3.7, 1.8, 12.4.
inline constexpr std::int64_t kDenseTileFill = 4;

/// True if an r x c tile with nnz allowed pairs takes one dot product per pair (its SDDMM reads
/// the tile's keys once per chunk); false if it runs the broadcast micro-kernel.
constexpr bool per_pair_tile(std::int64_t nnz, std::int64_t r, std::int64_t c) {
    return nnz * kDenseTileFill < r * c;
}

} // namespace ioattn::sparse::detail
