#pragma once
// A staggered chunk of the fused sparse backward (backward_fused.cpp): a chunk of streamed
// queries against a resident key block whose lane vectors (16-key groups, as lanes) see
// different spans of the chunk (a band's diagonal, a causal block), computed span by span.
//   per slab of kTileVecs key vectors: the parts of each vector in the chunk (slab_parts.hpp,
//     over Omega^T's rows); on each segment of queries, for each run of active vectors:
//     S = Q K^T, dP = dO V^T
//   each vector's hull masked to Omega; on the segments: P = exp(S - L), dS = P o (dP - D),
//     dV^T += dO^T P, dK^T += Q^T dS (scaled at the end by the kernel)
//   dS = 0 on every entry a vector does not compute, so that the kernel's dQ = dS K runs over
//     the whole block as before (K finite: the staggered path is not taken otherwise)
// Entries a vector skips are outside Omega, where the whole-block path has P = dS = 0, and
// every entry it computes is the same dot product: the results are the whole block's.
// Taken when some slab staggers (SlabParts::staggers); slabs that do not compute their union.
// Measured (N = 16384, d = 64, 2 threads, backward GFLOP/s, medians of 4 alternated runs of
// `ioattn run --pass backward --repeat 20` against the whole-block path): strided:64 (its
// permuted variant) 158.0 -> 177.2, window:64 141.2 -> 158.0, dilated:256:4 210.9 -> 220.6,
// bigbird:64:2:3 87.8 -> 91.6, window:256 1.02x, bigbird-block 1.00x, the dense pattern 0.98x.
// I/O: none of its own; the chunk's Q and dO rows are the kernel's reads.
// Tests: tests/sparse/staggered_test.cpp

#include "backward_fused_parts.hpp"
#include "slab_parts.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The staggered chunk (this file's opening block) for the chunk ch of Omega^T's block at key
/// j0 (r keys, n_vec lane vectors). Returns false, having done nothing, when no slab staggers;
/// else sets `partial` (some entry of the chunk and block is outside Omega).
template <typename Scalar>
bool staggered_chunk(const Problem& p,
                     const Support& st,
                     std::int64_t j0,
                     std::int64_t r,
                     std::int64_t n_vec,
                     const RowCursors& cur,
                     const ChunkRef& ch,
                     const ChunkOperands<Scalar>& in,
                     const Scratch<Scalar>& w,
                     bool& partial) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr std::int64_t kSlab = kernels::kTileVecs;
    const std::int64_t rp = w.rp, c = ch.c;
    const auto n_slabs = (n_vec + kSlab - 1) / kSlab;
    // --- the parts of every slab; nothing staggers: the caller's whole-block path ---
    // at most 8 slabs (64-key blocks of doubles in 2-lane vectors); larger blocks take the
    // whole-block path (the parts are built per chunk: 64 of them zeroed 23 KB a chunk)
    constexpr std::int64_t kMaxSlabs = 8;
    if (n_slabs > kMaxSlabs)
        return false;
    SlabParts parts[kMaxSlabs];
    bool any = false;
    for (std::int64_t u = 0; u < n_slabs; ++u) {
        const std::int64_t nv = std::min(kSlab, n_vec - u * kSlab), x0 = u * kSlab * kL;
        slab_parts<Scalar>(st, j0, cur, {x0, std::min(r, x0 + nv * kL), nv}, ch, parts[u]);
        any = any || parts[u].staggers();
    }
    if (!any)
        return false;
    const auto at = [&](Scalar* t, std::int64_t u, std::int64_t y, std::int64_t v) {
        return t + y * rp + (u * kSlab + v) * kL;
    };
    // f(u, ya, yb, va, vb) over each slab's segments and runs of active vectors
    const auto each = [&](auto&& f) {
        for (std::int64_t u = 0; u < n_slabs; ++u)
            parts[u].for_each_segment(
                [&](std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
                    f(u, ya, yb, va, vb);
                });
    };
    for (std::int64_t u = 0; u < n_slabs; ++u)
        if (!parts[u].staggers())
            parts[u].merge();
    // --- S = Q K^T, dP = dO V^T on the segments ---
    each([&](std::int64_t u, std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
        const std::int64_t lane = (u * kSlab + va) * kL;
        streamed_scores(*in.q_src,
                        in.b,
                        in.h,
                        ch.keys + ya,
                        in.qr.from(ya),
                        yb - ya,
                        w.ta + lane,
                        rp,
                        p.d,
                        vb - va,
                        at(w.s, u, ya, va));
        kernels::scores_block(in.dor.row(ya),
                              in.dor.ld,
                              yb - ya,
                              w.tb + lane,
                              rp,
                              p.d_v,
                              vb - va,
                              at(w.dp, u, ya, va),
                              rp);
    });
    // --- each vector's hull masked to Omega; partial if any entry is outside Omega ---
    partial = false;
    for (std::int64_t u = 0; u < n_slabs; ++u)
        for (std::int64_t v = 0; v < parts[u].nv; ++v) {
            const auto [a0, a1] = parts[u].hull[static_cast<std::size_t>(v)];
            const bool masked =
                mask_hull(st, j0, cur, parts[u], v, (u * kSlab + v) * kL, r, ch, w.s, rp);
            partial = partial || masked || a0 > 0 || a1 < c;
        }
    // --- P, dS; dV^T += dO^T P, dK^T += Q^T dS on the segments ---
    each([&](std::int64_t u, std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
        kernels::probabilities(at(w.s, u, ya, va),
                               rp,
                               yb - ya,
                               vb - va,
                               static_cast<const Scalar*>(nullptr),
                               w.l2 + ya);
        kernels::softmax_grad<Scalar, true>(at(w.s, u, ya, va),
                                            at(w.dp, u, ya, va),
                                            rp,
                                            yb - ya,
                                            vb - va,
                                            static_cast<const Scalar*>(nullptr),
                                            w.dd + ya);
    });
    const bool careful =
        partial && !(rows_finite(*in.q_src, in.qr, c) && rows_finite(*in.d_o, in.dor, c));
    if (careful) { // non-finite streamed rows: each key over its allowed queries only
        const auto allowed = [&](std::int64_t x, std::int64_t y) {
            return st.contains(j0 + x, ch.keys[y]);
        };
        accumulate_allowed(w.s, rp, in.dor, p.d_v, r, c, w.acc_b, allowed);
        accumulate_allowed(w.dp, rp, in.qr, p.d, r, c, w.acc_a, allowed);
    } else {
        each([&](std::int64_t u,
                 std::int64_t ya,
                 std::int64_t yb,
                 std::int64_t va,
                 std::int64_t vb) {
            const std::int64_t lane = (u * kSlab + va) * kL;
            kernels::pvt_block(at(w.s, u, ya, va),
                               rp,
                               in.dor.row(ya),
                               in.dor.ld,
                               yb - ya,
                               p.d_v,
                               vb - va,
                               w.ones,
                               w.acc_b + lane,
                               rp);
            streamed_accumulate(*in.q_src,
                                in.b,
                                in.h,
                                ch.keys + ya,
                                in.qr.from(ya),
                                yb - ya,
                                at(w.dp, u, ya, va),
                                rp,
                                p.d,
                                vb - va,
                                w.ones,
                                w.acc_a + lane);
        });
    }
    // --- dS = 0 where a vector computes nothing (dQ = dS K runs over the whole block) ---
    for (std::int64_t u = 0; u < n_slabs; ++u)
        for (std::int64_t v = 0; v < parts[u].nv; ++v)
            for (std::int64_t y = 0; y < c; ++y)
                if (!parts[u].computes(v, y))
                    kernels::store(at(w.dp, u, y, v), kernels::Vec<Scalar>{});
    return true;
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
