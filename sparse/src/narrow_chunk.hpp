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

#include "backward_fused_parts.hpp"
#include "element_ops.hpp"
#include "plan.hpp"

#include <ioattn/kernels/online_softmax.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

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

/// Key row k (scaled by scale log2(e), zero-padded) and value row v against nb <= 2 kLanes
/// gathered queries (their Q, dO rows, L in base 2 and D in l2, dd, whose lanes past nb this
/// sets to +inf and 0: P = dS = 0 there): s = q . k, P = 2^(min(s, L2) - L2) (<= 1, as
/// kernels::probabilities makes it), dP = dO . v, dS = P o (dP - D); dv += P dO, dk += dS Q;
/// dS of the nb pairs in ds. A narrow chunk's key and a folded block's key (folded_pass.hpp)
/// run their pairs through it.
template <typename Scalar>
void key_batch(const Problem& p,
               const Scalar* k,
               const Scalar* v,
               const Scalar* const* q_rows,
               const Scalar* const* do_rows,
               std::int64_t nb,
               Scalar* l2,
               Scalar* dd,
               Scalar* dk,
               Scalar* dv,
               Scalar* ds) {
    using kernels::Vec;
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    alignas(64) Scalar pr[kB];
    for (auto u = static_cast<std::size_t>(nb); u < kB; ++u) {
        l2[u] = std::numeric_limits<Scalar>::infinity();
        dd[u] = Scalar(0);
    }
    const auto sc = pair_dots(k, q_rows, nb, p.d, Scalar(0));
    const auto dp = pair_dots(v, do_rows, nb, p.d_v, Scalar(0));
    const Vec<Scalar> l_lo = kernels::load(l2), l_hi = kernels::load(l2 + kL);
    const Vec<Scalar> p_lo = kernels::exp2_diff<Scalar>(sc.lo > l_lo ? l_lo : sc.lo, l_lo);
    const Vec<Scalar> p_hi = kernels::exp2_diff<Scalar>(sc.hi > l_hi ? l_hi : sc.hi, l_hi);
    kernels::store(pr, p_lo);
    kernels::store(pr + kL, p_hi);
    kernels::store(ds, p_lo * (dp.lo - kernels::load(dd)));
    kernels::store(ds + kL, p_hi * (dp.hi - kernels::load(dd + kL)));
    pair_axpy(dv, static_cast<const Scalar*>(nullptr), pr, do_rows, nb, p.d_v);
    pair_axpy(dk, static_cast<const Scalar*>(nullptr), ds, q_rows, nb, p.d);
}

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
    using kernels::Vec;
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
