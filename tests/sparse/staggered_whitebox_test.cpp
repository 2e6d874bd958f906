// Whitebox tests of when the fused sparse forward takes its staggered path
// (sparse/src/kernels/tile/slab_parts.hpp): the supports and tilings of staggered_test.cpp
// reach slabs that stagger, so that file's agreement checks run the staggered code, and blocks
// whose lane vectors see the same keys (dense, 64-row blocks of block:64:p) never stagger. Decided here by the kernel's
// own rule (may_stagger, slab_parts, SlabParts::staggers) under the baseline target's lanes
// (this file is compiled for the baseline), over each block's first chunk of keys.

#include "kernels/tile/slab_parts.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

using ioattn::sparse::Support;
namespace detail = ioattn::sparse::detail;

namespace {

/// Slabs of kTileVecs lane vectors that stagger in the first chunk (at most `cols` keys) of
/// each block of `rows` rows of s, as forward_fused's chunk_products finds them.
std::int64_t staggered_slabs(const Support& s, std::int64_t rows, std::int64_t cols) {
    constexpr std::int64_t kL = ioattn::kernels::Simd<float>::kLanes;
    const detail::BlockKeys& plan = s.cached_block_keys(rows);
    std::vector<std::int64_t> base(static_cast<std::size_t>(rows));
    std::int64_t slabs = 0;
    for (std::int64_t b = 0; b < plan.blocks(); ++b) {
        const auto keys = plan.keys_of(b);
        const std::int64_t r = plan.rows(b), i0 = plan.row0(b);
        if (keys.empty())
            continue;
        const detail::RowCursors cur = detail::row_cursors(plan, i0, r, base.data());
        if (!detail::may_stagger<float>(cur, r))
            continue;
        const std::int64_t c = detail::chunk_length(keys.data(), std::ssize(keys), 0, cols);
        const std::int64_t n_vec = (r + kL - 1) / kL;
        for (std::int64_t u = 0; u < n_vec; u += ioattn::kernels::kTileVecs) {
            const std::int64_t nv = std::min<std::int64_t>(ioattn::kernels::kTileVecs, n_vec - u);
            if (nv < 2)
                continue;
            detail::SlabParts sp;
            detail::slab_parts<float>(
                s, i0, cur, {u * kL, std::min(r, (u + nv) * kL), nv}, {keys.data(), 0, c}, sp);
            slabs += sp.staggers() ? 1 : 0;
        }
    }
    return slabs;
}

} // namespace

TEST_CASE("staggered_test's bands, causal blocks and windows with global keys reach slabs "
          "that stagger",
          "[sparse][staggered][whitebox]") {
    for (const std::string spec : {"window:20", "causal", "window:9&causal", "global:2+window:6"})
        for (const std::int64_t rows : {64, 48}) {
            CAPTURE(spec, rows);
            const Support s = ioattn::sparse::parse_pattern(spec, 230, 200, 3);
            CHECK(staggered_slabs(s, rows, 128) > 0);
        }
}

TEST_CASE("blocks whose lane vectors all see the same keys do not stagger",
          "[sparse][staggered][whitebox]") {
    for (const std::string spec : {"dense", "block:64:0.5"}) {
        CAPTURE(spec);
        CHECK(staggered_slabs(ioattn::sparse::parse_pattern(spec, 230, 200, 3), 64, 128) == 0);
    }
}
