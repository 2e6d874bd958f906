#pragma once
// A staggered chunk of the fused sparse backward (backward_fused.cpp): a chunk of streamed
// queries against a resident key block whose lane vectors (16-key groups, as lanes) see
// different spans of the chunk (a band's diagonal, a causal block), computed span by span.
//   per slab of kTileVecs key vectors: the parts of each vector in the chunk (slab_parts.hpp,
//     over Omega^T's rows); on each segment of queries, for each run of active vectors:
//     S = Q K^T, dP = dO V^T
//   each vector's hull masked to Omega; on the segments: P = exp(S - L), dS = P o (dP - D),
//     dV^T += dO^T P, dK^T += Q^T dS (scaled at the end by the kernel)
//   then (staggered_dq, called by the kernel) dQ = dS K per segment and run of active
//     vectors, their K rows only (K finite: the staggered path is not taken otherwise)
// Entries a vector skips are outside Omega, where the whole-block path has P = dS = 0, and
// every entry it computes is the same dot product: the results are the whole block's.
// Taken when some slab staggers (SlabParts::staggers); slabs that do not compute their union.
// Against the whole-block path: 1.12x on window:64 (ioattn run --N 16384 --d 64 --pattern
// window:64 --pass backward --schedule fused --threads 2 --repeat 20).
// I/O: none of its own; the chunk's Q and dO rows are the kernel's reads.
// Tests: tests/sparse/staggered_test.cpp

#include "kernels/tile/backward_fused_parts.hpp"
#include "kernels/tile/slab_parts.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The slabs of a staggered chunk and their parts (staggered_chunk fills them, staggered_dq
/// reads them). Held by the caller across chunks: at most 8 slabs (64-key blocks of doubles in
/// 2-lane vectors); larger blocks take the whole-block path (built per chunk, 64 of them
/// would zero 23 KB a chunk).
struct ChunkSlabs {
    static constexpr std::int64_t kMax = 8;
    SlabParts parts[kMax];
    std::int64_t n = 0;
};

/// The staggered chunk (this file's opening block) for the chunk ch of Omega^T's block at key
/// j0 (r keys, n_vec lane vectors). Returns false, having done nothing, when no slab staggers;
/// else sets `partial` (some entry of the chunk and block is outside Omega) and leaves the
/// slabs' parts in `slabs` for staggered_dq.
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
                     ChunkSlabs& slabs,
                     bool& partial) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr std::int64_t kSlab = kernels::kTileVecs;
    const std::int64_t rp = w.rp, c = ch.c;
    const auto n_slabs = (n_vec + kSlab - 1) / kSlab;
    // --- the parts of every slab; nothing staggers: the caller's whole-block path ---
    if (n_slabs > ChunkSlabs::kMax)
        return false;
    slabs.n = n_slabs;
    SlabParts* parts = slabs.parts;
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
    return true;
}

/// dQ rows of the chunk (c rows of d at out, stride ld) (+)= dS scale K over the entries
/// staggered_chunk computed: per slab, segment and run of active vectors, those rows of dS
/// against those vectors' K rows only (the whole block's product also multiplies the zeros
/// of the skipped entries, a third of window:64's). add: out += dS K; else out =
/// dS K, 0 on the rows no vector computes. Each row's sum runs over the keys in order, as the
/// whole block's (whose skipped terms add exact zeros): the same results.
template <typename Scalar>
void staggered_dq(const ChunkSlabs& slabs,
                  const Scratch<Scalar>& w,
                  std::int64_t r,
                  std::int64_t c,
                  std::int64_t d_vec,
                  Scalar* out,
                  std::int64_t ld,
                  bool add) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr std::int64_t kSlab = kernels::kTileVecs;
    const auto zero_rows = [&](std::int64_t y0, std::int64_t y1) {
        for (std::int64_t y = y0; y < y1; ++y)
            std::fill_n(out + y * ld, d_vec * kL, Scalar(0));
    };
    // one slab: a segment's first run writes its rows, and rows between segments are zeroed
    // (none through backward_fused, whose chunk entries each some key of the block sees; the
    // zeroing keeps any parts exact); several slabs (their segments overlap): every row zeroed
    // first, then each run adds, slab by slab (the keys in order)
    const bool writes = !add && slabs.n == 1;
    if (!add && !writes)
        zero_rows(0, c);
    std::int64_t done = 0; // writes: the rows [0, done) are written
    for (std::int64_t u = 0; u < slabs.n; ++u) {
        std::int64_t last = -1; // the segment whose first run has written its rows
        slabs.parts[u].for_each_segment(
            [&](std::int64_t ya, std::int64_t yb, std::int64_t va, std::int64_t vb) {
                const bool first = writes && ya != last;
                if (first) {
                    zero_rows(done, ya);
                    done = yb;
                    last = ya;
                }
                const std::int64_t x0 = (u * kSlab + va) * kL;
                const std::int64_t x1 = std::min(r, (u * kSlab + vb) * kL);
                kernels::broadcast_block(w.dp + ya * w.rp + x0,
                                         w.rp,
                                         1,
                                         yb - ya,
                                         w.k_rows + x0 * w.dw,
                                         w.dw,
                                         x1 - x0,
                                         d_vec,
                                         first ? nullptr : w.ones,
                                         out + ya * ld,
                                         ld);
            });
    }
    if (writes)
        zero_rows(done, c);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
