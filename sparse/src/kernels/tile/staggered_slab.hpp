#pragma once
// A staggered slab of the fused sparse forward (forward_fused.cpp): a slab of lane vectors
// whose rows see different spans of a chunk (a band's diagonal, a causal block, a window with
// global keys) computed span by span instead of over the slab's union.
//   per lane vector v of the slab: the hull [lo_v, hi_v) of the chunk entries its rows see,
//     and the parts of it that hold them, its rows' runs and their extra keys (chunk_spans)
//   cut the union [lo, hi) at every part's ends: on each segment a fixed set of vectors is
//     active; S^T = K Q^T over the segment, per run of consecutive active vectors
//   mask each vector's hull to Omega; the online softmax of each vector over its hull alone
//     (kernels::online_softmax_spans: the hulls' common range interleaved)
//   O^T = alpha O^T + V^T P^T per segment and run of active vectors, alpha applied by each
//     vector's first segment (a vector without entries keeps alpha = 1)
// Every entry a vector sees is the same dot product as on the union path, and every entry it
// skips would have been -inf there (P = 0): the results are the union path's. Taken when the
// parts hold at most kStaggerShare of the union's entries (the union path runs otherwise).
// Against the union path: 1.06x on window:64 (ioattn run --N 16384 --d 64 --pattern window:64
// --schedule fused --threads 2 --repeat 30).
// I/O: none of its own; the chunk's K and V rows are the kernel's reads.
// Tests: tests/sparse/staggered_test.cpp

#include "kernels/common/row_products.hpp"
#include "kernels/tile/slab_parts.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Lanes of a slab of kTileVecs vectors.
template <typename Scalar>
inline constexpr auto
    kSlabLanes = static_cast<std::size_t>(kernels::kTileVecs* kernels::Simd<Scalar>::kLanes);

/// The forward scratch a slab works on, lanes at stride rp: Q^T (d x rp), S^T (chunk x rp),
/// O^T (d_v x rp), m, l, alpha (rp each).
template <typename Scalar>
struct SlabScratch {
    std::int64_t rp = 0;
    Scalar *qt = nullptr, *st = nullptr, *ot = nullptr, *m = nullptr, *l = nullptr,
           *alpha = nullptr;
};

/// O^T = alpha O^T on lanes [0, n_lanes) (O^T, S^T at stride rp), then each lane's row adds
/// P V over the chunk entries y < c that allowed(x, y) grants it (accumulate_allowed): a
/// chunk whose V holds a non-finite value, exact (NaN never reaches a row that cannot see it).
/// The union and the staggered slabs of the forward take it.
template <typename Scalar, typename Allowed>
void rescale_accumulate_allowed(const Scalar* st,
                                const Scalar* alpha,
                                Scalar* ot,
                                std::int64_t rp,
                                std::int64_t n_lanes,
                                std::int64_t c,
                                const Rows<Scalar>& vr,
                                std::int64_t d_v,
                                Allowed allowed) {
    for (std::int64_t z = 0; z < d_v; ++z)
        for (std::int64_t x = 0; x < n_lanes; ++x)
            ot[z * rp + x] *= alpha[x];
    accumulate_allowed(st, rp, vr, d_v, n_lanes, c, ot, allowed);
}

/// The staggered slab (this file's opening block) for the chunk's dense K and V rows kr, vr
/// (vr.finite: every V value of the chunk is finite), its vectors' parts sp (slab_parts, which
/// SlabParts::staggers; the caller runs the union [sp.lo, sp.hi) otherwise).
template <typename Scalar>
void staggered_slab(const Problem& p,
                    const Support& s,
                    std::int64_t i0,
                    const RowCursors& cur,
                    const SlabRange& sr,
                    const ChunkRef& ch,
                    const SlabParts& sp,
                    const Rows<Scalar>& kr,
                    const Rows<Scalar>& vr,
                    const SlabScratch<Scalar>& w) {
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    alignas(64) static const std::array<Scalar, kSlabLanes<Scalar>> ones = [] {
        std::array<Scalar, kSlabLanes<Scalar>> o{};
        o.fill(Scalar(1));
        return o;
    }();
    const std::int64_t x0 = sr.x0, rp = w.rp;
    const auto st_at = [&](std::int64_t y, std::int64_t v) { return w.st + y * rp + x0 + v * kL; };
    // --- S^T = K Q^T over each segment's active vectors ---
    sp.for_each_segment([&](std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
        const Scalar* qt = w.qt + x0 + va * kL;
        if (kr.at != nullptr)
            kernels::scores_rows(kr.at + ya, yb - ya, qt, rp, p.d, vb - va, st_at(ya, va), rp);
        else
            kernels::scores_block(
                kr.row(ya), kr.ld, yb - ya, qt, rp, p.d, vb - va, st_at(ya, va), rp);
    });
    // --- each vector's hull masked to Omega; the online softmax over the hulls alone ---
    bool partial = false, empty = false;
    std::array<std::int64_t, SlabParts::kMaxVecs> a0{}, a1{};
    for (std::int64_t v = 0; v < sr.nv; ++v) {
        const auto u = static_cast<std::size_t>(v);
        std::tie(a0[u], a1[u]) = sp.hull[u];
        empty = empty || a0[u] >= a1[u];
        partial = mask_hull(s, i0, cur, sp, v, x0 + v * kL, sr.x1, ch, w.st, rp) || partial;
    }
    if (!empty) {
        kernels::with_count<SlabParts::kMaxVecs>(sr.nv, [&](auto nv) {
            kernels::online_softmax_spans<Scalar, decltype(nv)::value>(
                w.st + x0, rp, a0.data(), a1.data(), w.m + x0, w.l + x0, w.alpha + x0);
        });
    } else { // a vector without entries keeps its state (alpha = 1)
        for (std::int64_t v = 0; v < sr.nv; ++v) {
            const auto u = static_cast<std::size_t>(v);
            const std::int64_t x = x0 + v * kL;
            if (a0[u] < a1[u])
                kernels::online_softmax_spans<Scalar, 1>(
                    w.st + x, rp, &a0[u], &a1[u], w.m + x, w.l + x, w.alpha + x);
            else
                kernels::store(w.alpha + x, kernels::splat<Scalar>(Scalar(1)));
        }
    }
    if (!vr.finite && partial) { // non-finite V: each row over its hull's allowed keys only
        rescale_accumulate_allowed(w.st + x0,
                                   w.alpha + x0,
                                   w.ot + x0,
                                   rp,
                                   sr.x1 - x0,
                                   ch.c,
                                   vr,
                                   p.d_v,
                                   [&](auto x, auto y) {
                                       const auto u = static_cast<std::size_t>(x / kL);
                                       return y >= a0[u] && y < a1[u] &&
                                              s.contains(i0 + x0 + x, ch.keys[y]);
                                   });
        return;
    }
    // --- O^T = alpha O^T + V^T P^T per segment into its active vectors: a vector's first
    // segment scales its O^T (every vector with entries has one; one without keeps alpha =
    // 1), as the dense kernel folds it, not a pass of its own over O^T ---
    alignas(64) Scalar scale[kSlabLanes<Scalar>];
    std::array<bool, SlabParts::kMaxVecs> scaled{};
    sp.for_each_segment([&](std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
        for (std::int64_t v = va; v < vb; ++v) {
            const auto u = static_cast<std::size_t>(v);
            kernels::store(scale + v * kL,
                           kernels::load(scaled[u] ? ones.data() : w.alpha + x0 + v * kL));
            scaled[u] = true;
        }
        Scalar* ot = w.ot + x0 + va * kL;
        const Scalar* sv = scale + va * kL;
        if (vr.at != nullptr)
            kernels::pvt_rows(st_at(ya, va), rp, vr.at + ya, yb - ya, p.d_v, vb - va, sv, ot, rp);
        else
            kernels::pvt_block(
                st_at(ya, va), rp, vr.row(ya), vr.ld, yb - ya, p.d_v, vb - va, sv, ot, rp);
    });
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
