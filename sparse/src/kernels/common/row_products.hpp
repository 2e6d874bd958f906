#pragma once
// Products over row sources (row_source.hpp), sparse-aware: a chunk's dot products and the
// double-precision dot and axpy of the references, and the streamed score and accumulation
// blocks of the fused kernels, which multiply a sparse K, V or Q as stored.

#include "kernels/common/row_source.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/strip.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Row (b, h, i) of x dotted with row (b, g, j) of y over columns [c0, c0 + cw), accumulated
/// in Acc: over the stored entries of a sparse side (merged when both are sparse); two dense
/// rows by vector loads when Acc is Scalar (the kernels), term by term otherwise.
template <typename Acc, typename Scalar>
Acc chunk_dot(const RowSource<Scalar>& x,
              std::int64_t b,
              std::int64_t h,
              std::int64_t i,
              const RowSource<Scalar>& y,
              std::int64_t g,
              std::int64_t j,
              std::int64_t c0,
              std::int64_t cw) {
    Acc acc = 0;
    if (x.sparse == nullptr && y.sparse == nullptr) {
        const Scalar* u = x.dense.row(b, h, i) + c0;
        const Scalar* v = y.dense.row(b, g, j) + c0;
        if constexpr (std::is_same_v<Acc, Scalar>)
            return kernels::dot(u, v, cw);
        for (std::int64_t z = 0; z < cw; ++z)
            acc += static_cast<Acc>(u[z]) * static_cast<Acc>(v[z]);
        return acc;
    }
    if (x.sparse != nullptr && y.sparse != nullptr) {
        const auto [xlo, xhi] = x.range(x.index(b, h, i), c0, cw);
        const auto [ylo, yhi] = y.range(y.index(b, g, j), c0, cw);
        const std::int64_t *xi = x.sparse->indices().data(), *yi = y.sparse->indices().data();
        const Scalar *xv = x.sparse->values().data(), *yv = y.sparse->values().data();
        for (std::int64_t u = xlo, v = ylo; u < xhi && v < yhi;) {
            if (xi[u] < yi[v])
                ++u;
            else if (yi[v] < xi[u])
                ++v;
            else
                acc += static_cast<Acc>(xv[u++]) * static_cast<Acc>(yv[v++]);
        }
        return acc;
    }
    const bool xs = x.sparse != nullptr;
    const RowSource<Scalar>& sp = xs ? x : y;
    const auto [lo, hi] =
        xs ? x.range(x.index(b, h, i), c0, cw) : y.range(y.index(b, g, j), c0, cw);
    const Scalar* d = xs ? y.dense.row(b, g, j) : x.dense.row(b, h, i);
    const std::int64_t* si = sp.sparse->indices().data();
    const Scalar* sv = sp.sparse->values().data();
    for (std::int64_t e = lo; e < hi; ++e)
        acc += static_cast<Acc>(sv[e]) * static_cast<Acc>(d[si[e]]);
    return acc;
}

/// x . y in double for row (b, h, i) of x and row (b, g, j) of y (the references).
template <typename Scalar>
double dot(const RowSource<Scalar>& x,
           std::int64_t b,
           std::int64_t h,
           std::int64_t i,
           const RowSource<Scalar>& y,
           std::int64_t g,
           std::int64_t j) {
    return chunk_dot<double>(x, b, h, i, y, g, j, 0, x.dense.cols);
}

/// acc[x] += alpha * row(b, h, i)[x] in double, over the stored entries only.
template <typename Scalar>
void axpy(double* acc,
          double alpha,
          const RowSource<Scalar>& src,
          std::int64_t b,
          std::int64_t h,
          std::int64_t i) {
    if (src.sparse == nullptr) {
        const Scalar* row = src.dense.row(b, h, i);
        for (std::int64_t x = 0; x < src.dense.cols; ++x)
            acc[x] += alpha * static_cast<double>(row[x]);
        return;
    }
    const std::int64_t r = src.index(b, h, i);
    const auto idx = src.sparse->row_indices(r);
    const auto val = src.sparse->row_values(r);
    for (std::size_t e = 0; e < idx.size(); ++e)
        acc[idx[e]] += alpha * static_cast<double>(val[e]);
}

/// Dense rows of a streamed operand as a kernel reads them: at p with leading dimension ld
/// (an interval in place, or gathered), or, when `at` is set, row y at at[y] (scattered rows
/// read in place); `finite` says whether every value is finite.
template <typename Scalar>
struct Rows {
    const Scalar* p = nullptr;
    std::int64_t ld = 0;
    bool finite = true;
    const Scalar* const* at = nullptr;

    /// Row y.
    [[nodiscard]] const Scalar* row(std::int64_t y) const {
        return at != nullptr ? at[y] : p + y * ld;
    }

    /// The rows from the y0-th on.
    [[nodiscard]] Rows from(std::int64_t y0) const {
        return at != nullptr ? Rows{nullptr, 0, finite, at + y0} : Rows{p + y0 * ld, ld, finite};
    }
};

/// acc^T[:][x] += sum over allowed (x, y) of t[y][x] g_y[:] (lanes x < n_lanes, chunk entries
/// y < c; t and acc^T at stride ld): the careful path for streamed rows with a non-finite
/// value, where a masked P or dS of 0 times Inf would be NaN. `allowed(x, y)` says whether
/// lane x and chunk entry y form a pair of Omega. The fused backward's dK, dV and the fused
/// forward's O^T (union and staggered slabs) take it.
template <typename Scalar, typename Allowed>
void accumulate_allowed(const Scalar* t,
                        std::int64_t ld,
                        const Rows<Scalar>& g,
                        std::int64_t cols,
                        std::int64_t n_lanes,
                        std::int64_t c,
                        Scalar* acc,
                        Allowed allowed) {
    for (std::int64_t x = 0; x < n_lanes; ++x)
        for (std::int64_t y = 0; y < c; ++y)
            if (allowed(x, y)) {
                const Scalar* gy = g.row(y);
                for (std::int64_t z = 0; z < cols; ++z)
                    acc[z * ld + x] += t[y * ld + x] * gy[z];
            }
}

/// Scores of the streamed rows idx[0, c) of src against a packed tile t (depth x rp lanes):
/// sparse dot products over a sparse operand's stored entries, the dense kernel otherwise.
template <typename Scalar>
void streamed_scores(const RowSource<Scalar>& src,
                     std::int64_t b,
                     std::int64_t h,
                     const std::int64_t* idx,
                     const Rows<Scalar>& rows,
                     std::int64_t c,
                     const Scalar* t,
                     std::int64_t rp,
                     std::int64_t depth,
                     std::int64_t n_vec,
                     Scalar* out) {
    if (src.sparse != nullptr)
        kernels::sparse_rows_block(
            c, [&](std::int64_t y) { return src.stored(b, h, idx[y]); }, t, rp, n_vec, out, rp);
    else if (rows.at != nullptr)
        kernels::scores_rows(rows.at, c, t, rp, depth, n_vec, out, rp);
    else
        kernels::scores_block(rows.p, rows.ld, c, t, rp, depth, n_vec, out, rp);
}

/// acc^T (cols x rp lanes) += rows^T tile over the same streamed rows, likewise.
template <typename Scalar>
void streamed_accumulate(const RowSource<Scalar>& src,
                         std::int64_t b,
                         std::int64_t h,
                         const std::int64_t* idx,
                         const Rows<Scalar>& rows,
                         std::int64_t c,
                         const Scalar* tile,
                         std::int64_t rp,
                         std::int64_t cols,
                         std::int64_t n_vec,
                         const Scalar* ones,
                         Scalar* acc) {
    if (src.sparse != nullptr)
        kernels::sparse_pvt_block(
            tile,
            rp,
            [&](std::int64_t y) { return src.stored(b, h, idx[y]); },
            c,
            cols,
            n_vec,
            ones,
            acc,
            rp);
    else if (rows.at != nullptr)
        kernels::pvt_rows(tile, rp, rows.at, c, cols, n_vec, ones, acc, rp);
    else
        kernels::pvt_block(tile, rp, rows.p, rows.ld, c, cols, n_vec, ones, acc, rp);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
