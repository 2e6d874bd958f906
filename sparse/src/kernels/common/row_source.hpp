#pragma once
// One operand of a sparse kernel, dense (a TensorView) or stored as CSR rows over d
// (SparseRows, slices stacked: row (b, h, i) is row (b*heads + h)*n + i). Kernels copy rows into
// dense fast-memory buffers through it and count the words actually stored: d per dense row,
// the row's nonzeros per sparse row, which is what Z_input counts. Column ranges [c0, c0 + cw)
// serve the materializing kernels, which move operands in chunks of columns. The products
// over row sources are in row_products.hpp.

#include <ioattn/error.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Rows of an operand in fast memory: row x at p + x * ld.
template <typename Scalar>
struct RowBlock {
    const Scalar* p = nullptr;
    std::int64_t ld = 0;

    [[nodiscard]] const Scalar* row(std::int64_t x) const { return p + x * ld; }
};

template <typename Scalar>
struct RowSource {
    TensorView<const Scalar> dense;
    const SparseRows<Scalar>* sparse = nullptr;

    [[nodiscard]] std::int64_t index(std::int64_t b, std::int64_t h, std::int64_t i) const {
        return (b * dense.heads + h) * dense.rows + i;
    }

    /// Stored positions [lo, hi) (into indices()/values()) of row r within columns
    /// [c0, c0 + cw). Sparse only.
    [[nodiscard]] std::pair<std::int64_t, std::int64_t>
    range(std::int64_t r, std::int64_t c0, std::int64_t cw) const {
        const auto at = static_cast<std::size_t>(r);
        const std::int64_t lo = sparse->offsets()[at], hi = sparse->offsets()[at + 1];
        if (c0 == 0 && cw >= dense.cols)
            return {lo, hi};
        const auto idx = sparse->indices();
        const auto* first = idx.data() + lo;
        const auto* a = std::lower_bound(first, idx.data() + hi, c0);
        const auto* z = std::lower_bound(a, idx.data() + hi, c0 + cw);
        return {lo + (a - first), lo + (z - first)};
    }

    /// Row (b, h, i) of a sparse operand as stored (precondition: sparse != nullptr).
    [[nodiscard]] kernels::SparseRow<Scalar>
    stored(std::int64_t b, std::int64_t h, std::int64_t i) const {
        const auto at = static_cast<std::size_t>(index(b, h, i));
        const std::int64_t lo = sparse->offsets()[at], hi = sparse->offsets()[at + 1];
        const auto from = static_cast<std::size_t>(lo);
        return {sparse->indices().data() + from, sparse->values().data() + from, hi - lo};
    }

    /// Words stored for row (b, h, i).
    [[nodiscard]] std::int64_t words(std::int64_t b, std::int64_t h, std::int64_t i) const {
        if (sparse == nullptr)
            return dense.cols;
        const auto at = static_cast<std::size_t>(index(b, h, i));
        return sparse->offsets()[at + 1] - sparse->offsets()[at];
    }

    /// Words stored for rows [i0, i0 + n).
    [[nodiscard]] std::int64_t
    words(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t n) const {
        if (sparse == nullptr)
            return n * dense.cols;
        const auto lo = static_cast<std::size_t>(index(b, h, i0));
        return sparse->offsets()[lo + static_cast<std::size_t>(n)] - sparse->offsets()[lo];
    }

    /// Words stored for rows [i0, i0 + n), columns [c0, c0 + cw).
    [[nodiscard]] std::int64_t words(std::int64_t b,
                                     std::int64_t h,
                                     std::int64_t i0,
                                     std::int64_t n,
                                     std::int64_t c0,
                                     std::int64_t cw) const {
        if (sparse == nullptr)
            return n * cw;
        if (c0 == 0 && cw >= dense.cols)
            return words(b, h, i0, n);
        std::int64_t total = 0;
        for (std::int64_t x = 0; x < n; ++x) {
            const auto [lo, hi] = range(index(b, h, i0 + x), c0, cw);
            total += hi - lo;
        }
        return total;
    }

    /// dst[x * stride] = scale * row(b, h, i)[c0 + x] for x < cw (zeros where nothing is
    /// stored); returns whether every value read is finite.
    bool copy(std::int64_t b,
              std::int64_t h,
              std::int64_t i,
              std::int64_t c0,
              std::int64_t cw,
              Scalar scale,
              Scalar* dst,
              std::int64_t stride) const {
        bool finite = true;
        if (sparse == nullptr) {
            const Scalar* row = dense.row(b, h, i) + c0;
            if (stride == 1) { // a gathered row: whole vectors, then one finiteness pass over
                // it (the loop below checks each value in turn and does not vectorize: 26% of
                // strided:64's tile forward, callgrind)
                for (std::int64_t x = 0; x < cw; ++x)
                    dst[x] = row[x] * scale;
                return kernels::all_finite(row, cw, 1, cw);
            }
            for (std::int64_t x = 0; x < cw; ++x) {
                dst[x * stride] = row[x] * scale;
                finite = finite && std::isfinite(row[x]);
            }
            return finite;
        }
        for (std::int64_t x = 0; x < cw; ++x)
            dst[x * stride] = Scalar(0);
        const auto [lo, hi] = range(index(b, h, i), c0, cw);
        const std::int64_t* idx = sparse->indices().data();
        const Scalar* val = sparse->values().data();
        for (std::int64_t e = lo; e < hi; ++e) {
            dst[(idx[e] - c0) * stride] = val[e] * scale;
            finite = finite && std::isfinite(val[e]);
        }
        return finite;
    }

    /// copy of the whole row.
    bool copy(std::int64_t b,
              std::int64_t h,
              std::int64_t i,
              Scalar scale,
              Scalar* dst,
              std::int64_t stride) const {
        return copy(b, h, i, 0, dense.cols, scale, dst, stride);
    }

    /// Rows [i0, i0 + n), columns [c0, c0 + cw) in fast memory: in place for a dense operand,
    /// scattered into buf (n x cw) for a sparse one.
    RowBlock<Scalar> rows(std::int64_t b,
                          std::int64_t h,
                          std::int64_t i0,
                          std::int64_t n,
                          std::int64_t c0,
                          std::int64_t cw,
                          Scalar* buf) const {
        if (sparse == nullptr)
            return {dense.row(b, h, i0) + c0, dense.stride_row};
        for (std::int64_t x = 0; x < n; ++x)
            copy(b, h, i0 + x, c0, cw, Scalar(1), buf + x * cw, 1);
        return {buf, cw};
    }

    /// As rows, for the rows `only` (absolute, >= i0) of the block at i0: a sparse operand
    /// scatters just those, each to its place in buf; the other rows of buf are not set.
    RowBlock<Scalar> rows(std::int64_t b,
                          std::int64_t h,
                          std::int64_t i0,
                          std::int64_t c0,
                          std::int64_t cw,
                          Scalar* buf,
                          std::span<const std::int64_t> only) const {
        if (sparse == nullptr)
            return {dense.row(b, h, i0) + c0, dense.stride_row};
        for (const std::int64_t i : only)
            copy(b, h, i, c0, cw, Scalar(1), buf + (i - i0) * cw, 1);
        return {buf, cw};
    }
};

/// The three operands of a pass (dO, when there is one, is always dense).
template <typename Scalar>
struct Operands {
    RowSource<Scalar> q, k, v;
};

/// Throws InvalidArgument naming `where` unless every sparse operand has the stacked shape of
/// the resolved problem: batch*heads*n_q x d (Q), batch*kv_heads*n_k x d (K), ... x d_v (V).
template <typename Scalar>
void check_input_shapes(const Problem& p, const SparseInputs<Scalar>& in, const char* where) {
    const auto check =
        [&](const char* name, const SparseRows<Scalar>* m, std::int64_t rows, std::int64_t cols) {
            if (m != nullptr && (m->rows() != rows || m->cols() != cols))
                throw InvalidArgument(
                    std::string(where) + ": sparse " + name + " is " + std::to_string(m->rows()) +
                    " x " + std::to_string(m->cols()) + ", expected " + std::to_string(rows) +
                    " x " + std::to_string(cols) + " (slices stacked)");
        };
    check("q", in.q, p.batch_heads() * p.n_q, p.d);
    check("k", in.k, p.batch * p.kv_heads * p.n_k, p.d);
    check("v", in.v, p.batch * p.kv_heads * p.n_k, p.d_v);
}

/// Shape-only operands of a resolved problem (null dense data) with the given sparse inputs,
/// after check_input_shapes: what the structural I/O costs count with.
template <typename Scalar>
Operands<Scalar>
shape_operands(const Problem& p, const SparseInputs<Scalar>& in, const char* where) {
    check_input_shapes(p, in, where);
    using View = TensorView<const Scalar>;
    return {{View::packed(nullptr, p.batch, p.heads, p.n_q, p.d), in.q},
            {View::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d), in.k},
            {View::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d_v), in.v}};
}

/// Whether any operand is stored sparse (costs then differ between slices).
template <typename Scalar>
bool any_sparse(const SparseInputs<Scalar>& in) {
    return in.q != nullptr || in.k != nullptr || in.v != nullptr;
}

/// Counts the read of rows [i0, i0 + n) of an operand: a dense block, or its stored nonzeros.
template <typename Scalar, typename Counter>
void read_rows(Counter& io,
               Operand op,
               std::int64_t slice,
               const RowSource<Scalar>& src,
               std::int64_t b,
               std::int64_t h,
               std::int64_t i0,
               std::int64_t n) {
    if (src.sparse == nullptr)
        io.read({op, slice, i0, n, 0, src.dense.cols});
    else
        io.read({op, slice, i0, n, 0, src.dense.cols}, src.words(b, h, i0, n));
}

/// Counts the read of rows [i0, i0 + n), columns [c0, c0 + cw): a dense block, or the nonzeros
/// stored there.
template <typename Scalar, typename Counter>
void read_cols(Counter& io,
               Operand op,
               std::int64_t slice,
               const RowSource<Scalar>& src,
               std::int64_t b,
               std::int64_t h,
               std::int64_t i0,
               std::int64_t n,
               std::int64_t c0,
               std::int64_t cw) {
    if (src.sparse == nullptr) {
        io.read({op, slice, i0, n, c0, cw});
        return;
    }
    std::int64_t words = 0;
    if constexpr (Counter::kCounts)
        words = src.words(b, h, i0, n, c0, cw);
    io.read({op, slice, i0, n, c0, cw}, words);
}

/// Counts the read of columns [c0, c0 + cw) of the gathered rows idx[0, c) (ascending): cw
/// words a row (dense), or the nonzeros stored there. A recording counter gets one event per
/// run of consecutive rows, so the trace says which rows were read.
template <typename Scalar, typename Counter>
void read_gathered(Counter& io,
                   Operand op,
                   std::int64_t slice,
                   const RowSource<Scalar>& src,
                   std::int64_t b,
                   std::int64_t h,
                   const std::int64_t* idx,
                   std::int64_t c,
                   std::int64_t c0,
                   std::int64_t cw) {
    if constexpr (Counter::kCounts) {
        for (std::int64_t y0 = 0, y = 1; y <= c; ++y) {
            if (y < c && (!io.recording() || idx[y] == idx[y - 1] + 1))
                continue;
            std::int64_t words = (y - y0) * cw; // rows idx[y0, y), one run when recording
            if (src.sparse != nullptr) {
                words = 0;
                for (std::int64_t x = y0; x < y; ++x)
                    words += src.words(b, h, idx[x], 1, c0, cw);
            }
            io.read({op, slice, idx[y0], y - y0, c0, cw}, words);
            y0 = y;
        }
    }
}

/// read_gathered of whole rows (d words a dense row).
template <typename Scalar, typename Counter>
void read_gathered(Counter& io,
                   Operand op,
                   std::int64_t slice,
                   const RowSource<Scalar>& src,
                   std::int64_t b,
                   std::int64_t h,
                   const std::int64_t* idx,
                   std::int64_t c) {
    read_gathered(io, op, slice, src, b, h, idx, c, 0, src.dense.cols);
}

/// Packs rows [row0, row0 + n) transposed and scaled into t (cols x ld), zero-padded: as
/// kernels::pack_transposed, through the row source. Returns whether every value is finite
/// (always true for a dense operand, which is not inspected).
template <typename Scalar>
bool pack_transposed(const RowSource<Scalar>& src,
                     std::int64_t b,
                     std::int64_t h,
                     std::int64_t row0,
                     std::int64_t n,
                     Scalar scale,
                     Scalar* t,
                     std::int64_t ld,
                     const std::int64_t* map = nullptr) {
    if (src.sparse == nullptr) {
        kernels::pack_transposed(src.dense, b, h, row0, n, scale, t, ld, map);
        return true;
    }
    IOATTN_ASSERT(map == nullptr); // reordered rows are read in place from dense operands only
    std::fill(t, t + src.dense.cols * ld, Scalar(0));
    bool finite = true;
    for (std::int64_t r = 0; r < n; ++r)
        finite = src.copy(b, h, row0 + r, scale, t + r, ld) && finite;
    return finite;
}

/// Packs rows [row0, row0 + n) scaled into t (n x ld, columns zero-padded to ld): as
/// kernels::pack_rows, through the row source. Returns whether every value is finite.
template <typename Scalar>
bool pack_rows(const RowSource<Scalar>& src,
               std::int64_t b,
               std::int64_t h,
               std::int64_t row0,
               std::int64_t n,
               Scalar scale,
               Scalar* t,
               std::int64_t ld,
               const std::int64_t* map = nullptr) {
    if (src.sparse == nullptr) {
        kernels::pack_rows(src.dense, b, h, row0, n, scale, t, ld, map);
        return kernels::all_finite(t, ld, n, src.dense.cols);
    }
    IOATTN_ASSERT(map == nullptr); // reordered rows are read in place from dense operands only
    std::fill(t, t + n * ld, Scalar(0));
    bool finite = true;
    for (std::int64_t r = 0; r < n; ++r)
        finite = src.copy(b, h, row0 + r, scale, t + r * ld, 1) && finite;
    return finite;
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
