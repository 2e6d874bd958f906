#pragma once
// What both fused sparse forward drivers set up for a call, after validating and before their
// parallel loop over row blocks (forward_fused.cpp; forward_fused_bf16.cpp, whose opening
// blocks state the schedule and its I/O): the support's row blocks and the resident words
// (TileWorkspaces, with each worker's scratch and key cursors), and whether each (batch, kv
// head) slice of a dense V is finite (v_finite_slices), so that chunks read in place skip the
// exact non-finite path (one O(n_k d_v) pass instead of one per chunk). No I/O of its own: V's
// words are counted where the blocks read them. Compiled once per instruction set, like the
// kernels that include it.
// Tests: tests/sparse/forward_test.cpp, tests/sparse/forward_fused_bf16_test.cpp

#include "support/block_keys.hpp"

#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// A call's plan and per-worker workspaces: the support's row blocks for Br (cached), the words
/// Tiling::resident_words keeps resident, and for each worker of a timed run (`computes`; none
/// for a counting run) a scratch slab of `scratch_words` Words and Br key cursors. The
/// workspaces are sized in the caller's open CallMemory, which allocates them.
template <typename Word>
struct TileWorkspaces {
    const BlockKeys& plan;
    std::int64_t resident;
    int workers;
    kernels::Workspace<Word> scratch;
    kernels::Workspace<std::int64_t> cursors;

    TileWorkspaces(const Problem& p,
                   const Support& support,
                   const Tiling& t,
                   bool computes,
                   std::int64_t scratch_words)
        : plan(support.cached_block_keys(t.rows))
        , resident(t.resident_words(p, Pass::forward, Kernels::sparse))
        , workers(computes ? max_concurrency() : 0)
        , scratch(workers, scratch_words)
        , cursors(workers, t.rows) {}
};

/// Words of V one task of v_finite_slices checks: a single (batch, kv head) slice at
/// n_k = 16384, d_v = 64 (2^20 words) runs on 16 tasks, so every core checks a share. The
/// pass is 0.04-0.13 ms there, a few % at most of the call (window:16, 2.4 ms at 2 threads).
inline constexpr std::int64_t kFiniteWords = std::int64_t{1} << 16;

/// Per (batch, kv head) slice of V: 1 if every value of it is finite, else 0 (all 0 when not
/// `run`: a counting run, or a V given as sparse rows). Tasks over fixed ranges of
/// kFiniteWords / d_v rows of each slice, and a slice is finite when all its ranges are: the
/// result does not depend on the thread count. Both all_finite overloads (fp32 and double
/// rows, kernels/tile.hpp; bf16 rows, kernels/pack_bf16.hpp) are declared above, so the one
/// for Scalar is found here.
template <typename Scalar>
std::vector<char> v_finite_slices(const ForwardArgs<Scalar>& a, bool run) {
    const Problem& p = a.problem;
    const std::int64_t slices = p.batch * p.kv_heads;
    std::vector<char> finite(static_cast<std::size_t>(slices), 0);
    if (!run)
        return finite;
    const std::int64_t rows =
        std::max<std::int64_t>(1, kFiniteWords / std::max<std::int64_t>(1, p.d_v));
    const std::int64_t ranges = (p.n_k + rows - 1) / rows;
    std::vector<char> range_finite(static_cast<std::size_t>(slices * ranges), 0);
    parallel_for_tiles(slices * ranges, [&](std::int64_t task, int) {
        const std::int64_t kv = task / ranges, i0 = task % ranges * rows;
        const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
        const bool ok = kernels::all_finite(
            a.v.row(b, g, i0), a.v.stride_row, std::min(rows, p.n_k - i0), p.d_v);
        range_finite[static_cast<std::size_t>(task)] = ok ? 1 : 0;
    });
    for (std::int64_t kv = 0; kv < slices; ++kv) {
        const auto first = range_finite.begin() + kv * ranges;
        finite[static_cast<std::size_t>(kv)] =
            std::all_of(first, first + ranges, [](char x) { return x != 0; }) ? 1 : 0;
    }
    return finite;
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
