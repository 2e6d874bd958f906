#pragma once
// The tile path of the fused sparse forward's row blocks (forward_fused.cpp, whose opening
// block states the schedule and its I/O): the block's scratch (TileScratch), the K and V rows
// of a chunk as the products read them (chunk_rows), the block's state (start_tiles) and one
// chunk's slabs (chunk_products: scores, mask, online softmax, O^T += V^T P^T; a staggered
// slab through staggered_slab.hpp). No I/O of its own: the kernel counts the chunk's reads.
// Compiled once per instruction set, like the kernel that includes it.
// Tests: tests/sparse/forward_test.cpp, tests/sparse/staggered_test.cpp

#include "kernels/common/row_products.hpp"
#include "kernels/tile/chunks.hpp"
#include "kernels/tile/staggered_slab.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

using kernels::Simd;

/// Lane slab of the per-slab key spans: the micro-kernels' 4 vectors (64 floats).
constexpr std::int64_t kSlabVecs = kernels::kTileVecs;

/// Per-worker scratch of a tile block: Q_i^T, S^T, O_i^T, m, l, alpha at rp = lane_padded(Br)
/// lanes, the gathered K_c, V_c, and (rows) a chunk's row pointers.
template <typename Scalar>
struct TileScratch {
    std::int64_t rp = 0;
    Scalar *qt = nullptr, *st = nullptr, *ot = nullptr, *m = nullptr, *l = nullptr,
           *alpha = nullptr, *kg = nullptr, *vg = nullptr;
    const Scalar** rows = nullptr; // a chunk's K row pointers, then its V row pointers

    /// Within Tiling::resident_words(p, forward, Kernels::sparse) (lane_padded rows, as
    /// the dense kernel: the footprint is the same under every instruction set).
    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = lane_padded(std::min(t.rows, p.n_q)), c = std::min(t.cols, p.n_k);
        return (p.d + c + p.d_v + 3) * rp + c * (p.d + p.d_v);
    }

    /// The arrays a staggered slab works on (staggered_slab.hpp).
    [[nodiscard]] detail::SlabScratch<Scalar> slab() const { return {rp, qt, st, ot, m, l, alpha}; }

    TileScratch() = default;

    TileScratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(lane_padded(std::min(t.rows, p.n_q))) {
        const std::int64_t c = std::min(t.cols, p.n_k);
        qt = base;
        st = qt + p.d * rp;
        ot = st + c * rp;
        m = ot + p.d_v * rp;
        l = m + rp;
        alpha = l + rp;
        kg = alpha + rp;
        vg = kg + c * p.d;
    }
};

/// The K and V rows of the chunk kc[0, c) as the products read them: in place when the chunk
/// is an interval of dense rows; through row pointers, in place too, when its rows are dense
/// and the V slice is finite; else gathered into w.kg, w.vg (a sparse K is multiplied as
/// stored, never scattered), V's finiteness checked row by row. Reading in place saves the
/// copies, 14% of strided:64's tile forward under perf. With a key order, key j is row
/// maps.key(j) of K and V (never an interval then).
template <typename Scalar>
std::pair<detail::Rows<Scalar>, detail::Rows<Scalar>>
chunk_rows(const ForwardArgs<Scalar>& a,
           const detail::Operands<Scalar>& src,
           std::int64_t b,
           std::int64_t g,
           const std::int64_t* kc,
           std::int64_t c,
           const Maps& maps,
           bool v_finite,
           const TileScratch<Scalar>& w) {
    const Problem& p = a.problem;
    const bool dense = src.k.sparse == nullptr && src.v.sparse == nullptr;
    if (dense && maps.keys == nullptr && kc[c - 1] - kc[0] + 1 == c)
        return {{a.k.row(b, g, kc[0]), a.k.stride_row, true},
                {a.v.row(b, g, kc[0]), a.v.stride_row, v_finite}};
    const auto key = [&](std::int64_t y) { return maps.key(kc[y]); };
    if (dense && v_finite) {
        const Scalar** kp = w.rows;
        const Scalar** vp = w.rows + c;
        for (std::int64_t y = 0; y < c; ++y) {
            kp[y] = a.k.row(b, g, key(y));
            vp[y] = a.v.row(b, g, key(y));
        }
        return {{nullptr, 0, true, kp}, {nullptr, 0, true, vp}};
    }
    bool finite_v = true;
    for (std::int64_t y = 0; y < c; ++y) {
        if (src.k.sparse == nullptr)
            src.k.copy(b, g, key(y), Scalar(1), w.kg + y * p.d, 1);
        finite_v = src.v.copy(b, g, key(y), Scalar(1), w.vg + y * p.d_v, 1) && finite_v;
    }
    return {{w.kg, p.d, true}, {w.vg, p.d_v, finite_v}};
}

/// A row block's state on the tile path (narrow_block keeps its own): the scratch, the rows'
/// key cursors, its lane vectors, and whether its slabs may stagger (staggered_slab.hpp).
template <typename Scalar>
struct TileBlock {
    TileScratch<Scalar> w;
    detail::RowCursors cur;
    std::int64_t i0 = 0, r = 0, n_vec = 0;
    bool stagger = false;
};

/// Q_i^T packed (scaled by scale * log2 e), O^T, m and l cleared, the cursors of rows
/// [i0, i0 + r) at their first key.
template <typename Scalar>
TileBlock<Scalar> start_tiles(const detail::Operands<Scalar>& src,
                              const Problem& p,
                              const detail::BlockKeys& plan,
                              std::int64_t b,
                              std::int64_t h,
                              std::int64_t i0,
                              std::int64_t r,
                              const Maps& maps,
                              TileScratch<Scalar> w,
                              std::int64_t* cursor) {
    TileBlock<Scalar> tb{w, {}, i0, r, lane_padded(r) / Simd<Scalar>::kLanes, false};
    const auto qs = static_cast<Scalar>(p.scale * kernels::kLog2e);
    detail::pack_transposed(src.q, b, h, i0, r, qs, w.qt, w.rp, maps.rows);
    std::fill(w.ot, w.ot + p.d_v * w.rp, Scalar(0));
    std::fill(w.m, w.m + w.rp, -std::numeric_limits<Scalar>::infinity());
    std::fill(w.l, w.l + w.rp, Scalar(0));
    tb.cur = detail::row_cursors(plan, i0, r, cursor);
    tb.stagger = src.k.sparse == nullptr && src.v.sparse == nullptr &&
                 detail::may_stagger<Scalar>(tb.cur, r);
    return tb;
}

/// One chunk kc[0, c) (keys y0.. of the block's list) on the tile path: per slab of 64 lanes,
/// over the chunk entries [lo, hi) some row of the slab may see, St = K Qt, mask to Omega,
/// online softmax, O^T = alpha O^T + V^T P^T.
template <typename Scalar>
void chunk_products(const Problem& p,
                    const detail::Operands<Scalar>& src,
                    const Support& s,
                    std::int64_t b,
                    std::int64_t g,
                    const TileBlock<Scalar>& tb,
                    const std::int64_t* kc,
                    std::int64_t y0,
                    std::int64_t c,
                    const detail::Rows<Scalar>& kr,
                    const detail::Rows<Scalar>& vr) {
    constexpr int kL = Simd<Scalar>::kLanes;
    const TileScratch<Scalar>& w = tb.w;
    const std::int64_t i0 = tb.i0;
    for (std::int64_t u = 0; u < tb.n_vec; u += kSlabVecs) {
        const std::int64_t nv = std::min(kSlabVecs, tb.n_vec - u), x0 = u * kL;
        const std::int64_t x1 = std::min(tb.r, x0 + nv * kL);
        // the entries [lo, hi) some row of the slab sees: the union of its vectors' parts
        // when it may stagger (computed once, staggered or not), else its rows' spans
        std::int64_t lo = 0, hi = 0;
        if (tb.stagger && nv > 1) {
            detail::SlabParts sp;
            detail::slab_parts<Scalar>(s, i0, tb.cur, {x0, x1, nv}, {kc, y0, c}, sp);
            if (sp.staggers()) {
                detail::staggered_slab(
                    p, s, i0, tb.cur, {x0, x1, nv}, {kc, y0, c}, sp, kr, vr, w.slab());
                continue;
            }
            lo = sp.lo;
            hi = std::max(sp.lo, sp.hi);
        } else {
            std::tie(lo, hi) = detail::chunk_spans(s, i0, tb.cur, x0, x1, kc, y0, c).hull();
        }
        Scalar* alpha = w.alpha + x0;
        if (lo == hi) { // nothing new for these rows
            std::fill(alpha, alpha + nv * kL, Scalar(1));
            continue;
        }
        Scalar* st = w.st + lo * w.rp + x0;
        // sparse dot products over a sparse K's stored entries
        detail::streamed_scores(
            src.k, b, g, kc + lo, kr.from(lo), hi - lo, w.qt + x0, w.rp, p.d, nv, st);
        const bool partial = detail::mask_chunk(
            s, i0 + x0, x1 - x0, kc + lo, y0 + lo, hi - lo, tb.cur.from(x0), st, w.rp);
        kernels::online_softmax_block(st, w.rp, hi - lo, nv, w.m + x0, w.l + x0, alpha);
        if (vr.finite || !partial) // P = 0 outside Omega; a sparse V as stored
            detail::streamed_accumulate(
                src.v, b, g, kc + lo, vr.from(lo), hi - lo, st, w.rp, p.d_v, nv, alpha, w.ot + x0);
        else
            detail::rescale_accumulate_allowed(
                st,
                alpha,
                w.ot + x0,
                w.rp,
                x1 - x0,
                hi - lo,
                vr.from(lo),
                p.d_v,
                [&](auto x, auto y) { return s.contains(i0 + x0 + x, kc[lo + y]); });
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
