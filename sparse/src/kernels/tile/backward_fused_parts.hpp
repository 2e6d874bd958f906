#pragma once
// The per-worker scratch layout of sparse backward_fused and the helpers its passes share:
// streamed rows read in place or gathered, and the careful paths that add only the allowed
// pairs when a streamed or resident block holds a non-finite value (see backward_fused.cpp,
// whose opening block states the schedule and its I/O). A kernel header: compiled once per
// instruction set inside that file.

#include "kernels/common/row_products.hpp"
#include "kernels/tile/chunks.hpp"
#include "kernels/tile/slab_parts.hpp"

#include <ioattn/kernels/dq_partials.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

using kernels::Simd;

/// Per-worker scratch: packed resident operands (d x rp, d_v x rp), score tiles (C x rp), the
/// transposed accumulators (d x rp, d_v x rp: resident rows are lanes, as in the dense
/// backward), the resident K rows row-major (rp x dw, d padded to whole vectors: the lanes of
/// dQ = dS K) and a dQ tile (C x dw), gathered streamed rows (C x d, C x d_v), lanes (3 x cp).
template <typename Scalar>
struct Scratch {
    std::int64_t rp = 0, dw = 0;
    Scalar *ta = nullptr, *tb = nullptr, *s = nullptr, *dp = nullptr, *acc_a = nullptr,
           *acc_b = nullptr, *k_rows = nullptr, *dq = nullptr, *ga = nullptr, *gb = nullptr,
           *l2 = nullptr, *dd = nullptr, *ones = nullptr;

    /// Resident key rows and streamed queries: the tiling's, at most n_k and n_q.
    static std::int64_t res(const Problem& p, const Tiling& t) { return std::min(t.rows, p.n_k); }

    static std::int64_t str(const Problem& p, const Tiling& t) { return std::min(t.cols, p.n_q); }

    static std::int64_t lanes(const Problem& p, const Tiling& t) {
        return std::max(lane_padded(std::max(str(p, t), res(p, t))), lane_padded(p.d));
    }

    /// Within Tiling::resident_words(p, backward, Kernels::sparse) (lane_padded rows, as the
    /// dense kernel: the footprint is the same under every instruction set).
    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = lane_padded(res(p, t)), c = str(p, t);
        const std::int64_t cp = lane_padded(std::max(c, res(p, t)));
        const std::int64_t dw = lane_padded(p.d);
        return 2 * (p.d + p.d_v) * rp + 2 * cp * rp + (rp + c) * dw + c * (p.d + p.d_v) +
               3 * lanes(p, t);
    }

    Scratch() = default;

    Scratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(lane_padded(res(p, t)))
        , dw(lane_padded(p.d)) {
        const std::int64_t cp = lane_padded(std::max(str(p, t), res(p, t)));
        ta = base;
        tb = ta + p.d * rp;
        s = tb + p.d_v * rp;
        dp = s + cp * rp;
        acc_a = dp + cp * rp;
        acc_b = acc_a + p.d * rp;
        k_rows = acc_b + p.d_v * rp;
        dq = k_rows + rp * dw;
        ga = dq + str(p, t) * dw;
        gb = ga + str(p, t) * p.d;
        l2 = gb + str(p, t) * p.d_v;
        dd = l2 + lanes(p, t);
        ones = dd + lanes(p, t);
        std::fill(ones, ones + lanes(p, t), Scalar(1));
    }
};

template <typename Scalar>
using Partials = kernels::DqPartials<Scalar>;

/// Streamed rows idx[0, c) of a view: read in place when they are consecutive, else gathered
/// into g (c x cols); for a sparse source `finite` says whether every value is finite (found
/// while scattering; dense rows: rows_finite, asked only by a chunk with masked pairs). With
/// `map`, row idx[y] is the view's row map[idx[y]] (never consecutive then).
template <typename Scalar>
Rows<Scalar> stream_rows(const RowSource<Scalar>& src,
                         std::int64_t b,
                         std::int64_t h,
                         const std::int64_t* idx,
                         std::int64_t c,
                         Scalar* g,
                         const std::int64_t* map = nullptr) {
    Rows<Scalar> rows;
    const TensorView<const Scalar>& x = src.dense;
    if (src.sparse != nullptr) { // scattered into g
        IOATTN_ASSERT(map == nullptr);
        rows.p = g;
        rows.ld = x.cols;
        for (std::int64_t y = 0; y < c; ++y)
            rows.finite = src.copy(b, h, idx[y], Scalar(1), g + y * x.cols, 1) && rows.finite;
        return rows;
    }
    const bool direct = map == nullptr && idx[c - 1] - idx[0] + 1 == c;
    rows.p = direct ? x.row(b, h, idx[0]) : g;
    rows.ld = direct ? x.stride_row : x.cols;
    if (!direct)
        for (std::int64_t y = 0; y < c; ++y)
            std::copy_n(x.row(b, h, kernels::mapped(map, idx[y])), x.cols, g + y * x.cols);
    return rows;
}

/// Whether every value of the c streamed rows (stream_rows) of src is finite, asked only by a
/// chunk with masked pairs: scanning every chunk up front would cost 5% of strided:64's
/// backward, whose chunks mostly need no mask.
template <typename Scalar>
bool rows_finite(const RowSource<Scalar>& src, const Rows<Scalar>& rows, std::int64_t c) {
    return src.sparse != nullptr ? rows.finite
                                 : kernels::all_finite(rows.p, rows.ld, c, src.dense.cols);
}

/// T[y][:] = sum over the allowed (x, y) of ds[y][x] k[x][:] (y < c, x < r, rows of dw): dQ's
/// careful path, for a resident K block with a non-finite value on a chunk with masked pairs.
template <typename Scalar, typename Allowed>
void rows_allowed(const Scalar* ds,
                  std::int64_t ld,
                  const Scalar* k,
                  std::int64_t dw,
                  std::int64_t r,
                  std::int64_t c,
                  Scalar* t,
                  Allowed allowed) {
    std::fill(t, t + c * dw, Scalar(0));
    for (std::int64_t y = 0; y < c; ++y)
        for (std::int64_t x = 0; x < r; ++x)
            if (allowed(x, y))
                for (std::int64_t z = 0; z < dw; ++z)
                    t[y * dw + z] += ds[y * ld + x] * k[x * dw + z];
}

/// A chunk's streamed operands: Q (as a row source: sparse or dense) and dO, and their rows
/// of the chunk as the products read them (qr, dor), for slice (b, h).
template <typename Scalar>
struct ChunkOperands {
    const RowSource<Scalar>* q_src = nullptr;
    const RowSource<Scalar>* d_o = nullptr;
    std::int64_t b = 0, h = 0;
    Rows<Scalar> qr, dor;
};

/// S = Q K^T, masked to Omega, P = exp(S - L), dP = dO V^T, dS = P o (dP - D), dV^T += dO^T P,
/// dK^T += Q^T dS over the chunk ch of queries and every lane of the resident key block at j0
/// (r keys, n_vec vectors; K^T, V^T packed in w.ta, w.tb; the sums in w.acc_b, w.acc_a); with
/// a masked entry and a non-finite streamed row, the sums over allowed pairs only. Returns
/// whether an entry was masked.
template <typename Scalar>
bool whole_chunk(const Problem& p,
                 const Support& st,
                 std::int64_t j0,
                 std::int64_t r,
                 std::int64_t n_vec,
                 const RowCursors& cur,
                 const ChunkRef& ch,
                 const ChunkOperands<Scalar>& in,
                 const Scratch<Scalar>& w) {
    const std::int64_t c = ch.c;
    streamed_scores(*in.q_src, in.b, in.h, ch.keys, in.qr, c, w.ta, w.rp, p.d, n_vec, w.s);
    const bool partial = mask_chunk(st, j0, r, ch.keys, ch.y0, c, cur, w.s, w.rp);
    kernels::probabilities(w.s, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.l2);
    kernels::scores_block(in.dor.p, in.dor.ld, c, w.tb, w.rp, p.d_v, n_vec, w.dp, w.rp);
    kernels::softmax_grad<Scalar, true>(
        w.s, w.dp, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.dd);
    if (!partial || (rows_finite(*in.q_src, in.qr, c) && rows_finite(*in.d_o, in.dor, c))) {
        kernels::pvt_block(w.s, w.rp, in.dor.p, in.dor.ld, c, p.d_v, n_vec, w.ones, w.acc_b, w.rp);
        streamed_accumulate(
            *in.q_src, in.b, in.h, ch.keys, in.qr, c, w.dp, w.rp, p.d, n_vec, w.ones, w.acc_a);
    } else {
        const auto allowed = [&](std::int64_t x, std::int64_t y) {
            return st.contains(j0 + x, ch.keys[y]);
        };
        accumulate_allowed(w.s, w.rp, in.dor, p.d_v, r, c, w.acc_b, allowed);
        accumulate_allowed(w.dp, w.rp, in.qr, p.d, r, c, w.acc_a, allowed);
    }
    return partial;
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
