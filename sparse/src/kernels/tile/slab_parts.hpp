#pragma once
// The parts of a slab of lane vectors in a chunk, for the staggered paths of the fused sparse
// kernels (staggered_slab.hpp: the forward's query lanes; staggered_chunk.hpp: the backward's
// key lanes): per lane vector, the hull of the chunk entries its rows see and the one or two
// parts of it that hold them (its rows' runs, their extra keys), the union of the hulls, and
// the cuts that split the union into segments, each with a fixed set of active vectors.
// O(rows of the slab) per chunk through chunk_spans, plus a sort of at most 4 kTileVecs cuts.
// I/O: none counted of its own. chunk_spans reads the rows' runs from the plan and their extra
// keys from the index arrays the masks read too (BlockKeys::index_reads counts those once per
// pass); may_stagger keeps blocks that cannot stagger from reading them twice.
// Tests: tests/sparse/staggered_test.cpp

#include "kernels/tile/chunks.hpp"

#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// A slab staggers when its vectors' parts hold at most this share of the entries of their
/// union: at least 1/8 saved pays for the extra calls (window:256's 64-row forward slabs save
/// 8.5% and run within the noise of the union path).
inline constexpr double kStaggerShare = 7.0 / 8.0;

/// The mean run length below which a block does not try to stagger (may_stagger): a band's
/// rows run 33-513 keys, strided:64's own blocks 32 on average, a random row's 1-2.
inline constexpr std::int64_t kMinStaggerRun = 4;

/// Rows [x0, x1) of a block as nv lane vectors.
struct SlabRange {
    std::int64_t x0 = 0, x1 = 0, nv = 0;
};

/// A chunk: keys[0, c), entries [y0, y0 + c) of the block's key list.
struct ChunkRef {
    const std::int64_t* keys = nullptr;
    std::int64_t y0 = 0, c = 0;
};

/// Per lane vector of a slab: the hull of its entries and its one or two computed parts.
struct SlabParts {
    static constexpr int kMaxVecs = kernels::kTileVecs;
    std::int64_t nv = 0, lo = 0, hi = 0; // the union [lo, hi)
    std::array<std::pair<std::int64_t, std::int64_t>, kMaxVecs> hull{};
    std::array<std::array<std::pair<std::int64_t, std::int64_t>, 2>, kMaxVecs> part{};
    std::array<std::int64_t, 4 * kMaxVecs> cuts{}; // the parts' ends, sorted, distinct
    std::int64_t n_cuts = 0;
    std::int64_t work = 0; // entries in the parts

    /// Whether the parts hold at most kStaggerShare of the union's entries (not empty).
    [[nodiscard]] bool staggers() const {
        return lo < hi &&
               static_cast<double>(work) <= kStaggerShare * static_cast<double>((hi - lo) * nv);
    }

    /// Whether vector v computes entry y.
    [[nodiscard]] bool computes(std::int64_t v, std::int64_t y) const {
        return active(v, y, y + 1);
    }

    /// Every vector's hull and parts replaced by the union [lo, hi): one segment, every
    /// vector active (and masked) on it.
    void merge() {
        for (std::int64_t v = 0; v < nv; ++v) {
            hull[static_cast<std::size_t>(v)] = {lo, hi};
            part[static_cast<std::size_t>(v)] = {std::pair{lo, hi}, std::pair{hi, hi}};
        }
        cuts[0] = lo;
        cuts[1] = hi;
        n_cuts = lo < hi ? 2 : 0;
        work = (hi - lo) * nv;
    }

    /// Whether vector v computes every entry of [ya, yb) (inside one of its parts).
    [[nodiscard]] bool active(std::int64_t v, std::int64_t ya, std::int64_t yb) const {
        const auto& pv = part[static_cast<std::size_t>(v)];
        return (pv[0].first <= ya && yb <= pv[0].second) ||
               (pv[1].first <= ya && yb <= pv[1].second);
    }

    /// f(ya, yb, va, vb) for each segment [ya, yb) between two cuts and each run [va, vb) of
    /// consecutive vectors active on it.
    template <typename F>
    void for_each_segment(F&& f) const {
        for (std::int64_t t = 0; t + 1 < n_cuts; ++t) {
            const std::int64_t ya = cuts[static_cast<std::size_t>(t)];
            const std::int64_t yb = cuts[static_cast<std::size_t>(t) + 1];
            for (std::int64_t va = 0; va < nv;) {
                while (va < nv && !active(va, ya, yb))
                    ++va;
                std::int64_t vb = va;
                while (vb < nv && active(vb, ya, yb))
                    ++vb;
                if (va < vb)
                    f(ya, yb, va, vb);
                va = vb;
            }
        }
    }
};

/// The parts of the slab's vectors in the chunk (their rows' cursors at the chunk), `s`'s
/// rows i0 + x0.. as lanes: the forward's query rows, or the backward's key rows (Omega^T).
template <typename Scalar>
void slab_parts(const Support& s,
                std::int64_t i0,
                const RowCursors& cur,
                const SlabRange& sr,
                const ChunkRef& ch,
                SlabParts& out) {
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    out.nv = sr.nv;
    out.lo = ch.c;
    out.hi = 0;
    out.n_cuts = 0;
    out.work = 0;
    for (std::int64_t v = 0; v < sr.nv; ++v) {
        const std::int64_t xa = sr.x0 + v * kL, xb = std::min(sr.x1, xa + kL);
        const ChunkSpans sp = chunk_spans(s, i0, cur, xa, xb, ch.keys, ch.y0, ch.c);
        const auto hull = sp.hull();
        auto& pv = out.part[static_cast<std::size_t>(v)];
        pv = {std::pair{sp.run_lo, sp.run_hi}, std::pair{sp.extra_lo, sp.extra_hi}};
        const bool two = sp.run_lo < sp.run_hi && sp.extra_lo < sp.extra_hi &&
                         (sp.run_hi < sp.extra_lo || sp.extra_hi < sp.run_lo);
        if (!two) // one part, the hull (parts that touch, or one of them empty)
            pv = {hull, std::pair{std::int64_t{0}, std::int64_t{0}}};
        out.hull[static_cast<std::size_t>(v)] = hull;
        if (hull.first >= hull.second)
            continue;
        out.lo = std::min(out.lo, hull.first);
        out.hi = std::max(out.hi, hull.second);
        for (const auto& [a, b] : pv)
            if (a < b) {
                out.work += b - a;
                out.cuts[static_cast<std::size_t>(out.n_cuts++)] = a;
                out.cuts[static_cast<std::size_t>(out.n_cuts++)] = b;
            }
    }
    std::int64_t* cuts = out.cuts.data();
    for (std::int64_t t = 1; t < out.n_cuts; ++t) // insertion sort of at most 4 kTileVecs
        for (std::int64_t u = t; u > 0 && cuts[u - 1] > cuts[u]; --u)
            std::swap(cuts[u - 1], cuts[u]);
    out.n_cuts = std::unique(cuts, cuts + out.n_cuts) - cuts;
}

/// Whether the block's rows [0, r) may stagger, from their runs alone (the plan's, no index
/// array): runs of kMinStaggerRun keys or more on average, whose hulls per lane vector (kLanes
/// rows each, at least two) hold at most kStaggerShare of their union's keys. Block patterns
/// (every vector sees the same keys) and scattered rows (runs of a key or two anywhere) skip
/// the per-chunk parts, whose index reads they would only pay for: with them a random:0.1
/// backward at M = 8192 moves 1.27x its counted words under an LRU cache of 2M words, past the
/// 1.25x limit (bench/cache_validate.py --check).
template <typename Scalar>
bool may_stagger(const RowCursors& cur, std::int64_t r) {
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    if (r <= kL)
        return false;
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1, sum = 0, groups = 0;
    std::int64_t runs = 0, run_keys = 0;
    for (std::int64_t x0 = 0; x0 < r; x0 += kL) {
        std::int64_t glo = std::numeric_limits<std::int64_t>::max(), ghi = -1;
        for (std::int64_t x = x0; x < std::min(r, x0 + kL); ++x)
            if (cur.lo[x] <= cur.hi[x]) {
                glo = std::min(glo, cur.lo[x]);
                ghi = std::max(ghi, cur.hi[x]);
                ++runs;
                run_keys += cur.hi[x] - cur.lo[x] + 1;
            }
        if (glo > ghi)
            continue;
        lo = std::min(lo, glo);
        hi = std::max(hi, ghi);
        sum += ghi - glo + 1;
        ++groups;
    }
    return groups >= 2 && run_keys >= kMinStaggerRun * runs &&
           static_cast<double>(sum) <= kStaggerShare * static_cast<double>(groups * (hi - lo + 1));
}

/// mask_chunk over lane vector v's hull of the chunk: its rows are lanes [xa, min(x1, xa +
/// kLanes)) of the block at row i0 of s; st holds entry y of lane x at st[y * ld + x]. Returns
/// whether any of its entries was masked (false for an empty hull).
template <typename Scalar>
bool mask_hull(const Support& s,
               std::int64_t i0,
               const RowCursors& cur,
               const SlabParts& sp,
               std::int64_t v,
               std::int64_t xa,
               std::int64_t x1,
               const ChunkRef& ch,
               Scalar* st,
               std::int64_t ld) {
    const auto [a0, a1] = sp.hull[static_cast<std::size_t>(v)];
    if (a0 >= a1)
        return false;
    const std::int64_t xb = std::min(x1, xa + kernels::Simd<Scalar>::kLanes);
    return mask_chunk(s,
                      i0 + xa,
                      xb - xa,
                      ch.keys + a0,
                      ch.y0 + a0,
                      a1 - a0,
                      cur.from(xa),
                      st + a0 * ld + xa,
                      ld);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
