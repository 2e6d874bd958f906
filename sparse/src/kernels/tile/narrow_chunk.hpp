#pragma once
// A narrow key block of the fused sparse backward (backward_fused.cpp): a resident block of a
// few keys (global keys: 2 keys that every query sees) whose chunks of queries are computed
// pair by pair, queries as lanes, instead of with the block's keys as lanes (16 lanes for 2
// keys: 8 times the work, on one task that streams every query).
//   at the block's start: its K and V rows unpacked from the caller's packed K^T (scaled by
//     scale log2(e)) and V^T; dK, dV rows 0
//   per chunk of queries: Omega's entries of the chunk (mask_chunk on the dS tile, which the
//     caller's dQ = dS K reads); per key x, its allowed queries in batches of 2 kLanes:
//     s = q . (scale log2(e) K_x), dP = dO . V_x, P = 2^(min(s, L2) - L2) (<= 1, as the
//     tile path's), dS = P o (dP - D)
//     (the element kernels' transposing batch dot products); dV_x += P dO, dK_x += dS Q;
//     dS into the tile, 0 outside Omega
//   at the block's end: dK, dV rows added into the transposed sums the caller unpacks
// Only allowed pairs are touched: a non-finite streamed row reaches only the keys that see it.
// The same sums as the tile path's, in another order (float rounding differs).
// I/O: none of its own; the chunk's rows are the kernel's reads (the same words).
// Tests: tests/sparse/narrow_test.cpp

#include "kernels/element/element_ops.hpp"
#include "kernels/tile/backward_fused_parts.hpp"
#include "kernels/tile/chunks.hpp"

#include <algorithm>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Key blocks of at most kLanes / kNarrowShare keys take the narrow path.
inline constexpr std::int64_t kNarrowShare = 4;

/// The narrow block's rows, in w.s: K and V (the block's, unpacked: the tile path's operands,
/// so that a pair's score rounds as there), dK and dV sums (r rows each, padded to whole
/// vectors).
template <typename Scalar>
struct NarrowRows {
    std::int64_t dw = 0, dvw = 0;
    Scalar *k = nullptr, *v = nullptr, *dk = nullptr, *dv = nullptr;

    /// Whether a block of r keys takes the narrow path and its rows fit in w.s (cp * rp words).
    static bool fits(const Problem& p, const Tiling& t, std::int64_t r, const Scratch<Scalar>& w) {
        const std::int64_t cp =
            lane_padded(std::max(Scratch<Scalar>::str(p, t), Scratch<Scalar>::res(p, t)));
        return r * kNarrowShare <= kernels::Simd<Scalar>::kLanes &&
               r * 2 * (w.dw + lane_padded(p.d_v)) <= cp * w.rp;
    }

    NarrowRows() = default;

    NarrowRows(const Problem& p, std::int64_t r, const Scratch<Scalar>& w)
        : dw(w.dw)
        , dvw(lane_padded(p.d_v)) {
        k = w.s;
        v = k + r * dw;
        dk = v + r * dvw;
        dv = dk + r * dw;
        std::fill(k, dv + r * dvw, Scalar(0));
        for (std::int64_t x = 0; x < r; ++x) {
            for (std::int64_t z = 0; z < p.d; ++z)
                k[x * dw + z] = w.ta[z * w.rp + x];
            for (std::int64_t z = 0; z < p.d_v; ++z)
                v[x * dvw + z] = w.tb[z * w.rp + x];
        }
    }

    /// dK^T, dV^T (w.acc_a, w.acc_b, lanes at stride rp) += the rows' sums.
    void flush(const Problem& p, std::int64_t r, const Scratch<Scalar>& w) const {
        for (std::int64_t x = 0; x < r; ++x) {
            for (std::int64_t z = 0; z < p.d; ++z)
                w.acc_a[z * w.rp + x] += dk[x * dw + z];
            for (std::int64_t z = 0; z < p.d_v; ++z)
                w.acc_b[z * w.rp + x] += dv[x * dvw + z];
        }
    }
};

/// The narrow chunk (this file's opening block) over the chunk ch of queries, rows in.qr,
/// in.dor, w.l2, w.dd; the r keys' rows in nr. dS lands in w.dp
/// (entry y, key x at y * rp + x). Returns whether an entry was masked.
template <typename Scalar>
bool narrow_chunk(const Problem& p,
                  const Support& st,
                  std::int64_t j0,
                  std::int64_t r,
                  const RowCursors& cur,
                  const ChunkRef& ch,
                  const ChunkOperands<Scalar>& in,
                  const Scratch<Scalar>& w,
                  const NarrowRows<Scalar>& nr) {
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    const std::int64_t c = ch.c, rp = w.rp;
    for (std::int64_t y = 0; y < c; ++y)
        std::fill(w.dp + y * rp, w.dp + y * rp + r, Scalar(0));
    const bool partial = mask_chunk(st, j0, r, ch.keys, ch.y0, c, cur, w.dp, rp);
    const Scalar* q_rows[kB];
    const Scalar* do_rows[kB];
    std::int64_t at[kB];
    alignas(64) Scalar l2[kB];
    alignas(64) Scalar dd[kB];
    alignas(64) Scalar ds[kB];
    for (std::int64_t x = 0; x < r; ++x) {
        const Scalar* k = nr.k + x * nr.dw;
        const Scalar* v = nr.v + x * nr.dvw;
        std::int64_t n = 0;
        const auto batch = [&] { // --- the n queries gathered so far ---
            key_batch(
                p, k, v, q_rows, do_rows, n, l2, dd, nr.dk + x * nr.dw, nr.dv + x * nr.dvw, ds);
            for (std::int64_t u = 0; u < n; ++u)
                w.dp[at[u] * rp + x] = ds[u];
            n = 0;
        };
        for (std::int64_t y = 0; y < c; ++y) {
            Scalar& e = w.dp[y * rp + x];
            if (e != Scalar(0)) { // -inf: outside Omega, dS = 0
                e = Scalar(0);
                continue;
            }
            q_rows[n] = in.qr.row(y);
            do_rows[n] = in.dor.row(y);
            l2[n] = w.l2[y];
            dd[n] = w.dd[y];
            at[n++] = y;
            if (n == static_cast<std::int64_t>(kB))
                batch();
        }
        if (n > 0)
            batch();
    }
    return partial;
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
