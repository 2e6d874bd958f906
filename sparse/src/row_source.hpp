#pragma once
// One operand of a sparse kernel, dense (a TensorView) or stored as CSR rows over d
// (SparseRows, slices stacked: row (b, h, i) is row (b*heads + h)*n + i). Kernels copy rows into
// dense fast-memory buffers through it and count the words actually stored: d per dense row,
// the row's nonzeros per sparse row, which is what Z_input counts.

#include <ioattn/io_counter.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ioattn::sparse::detail {

template <typename Scalar>
struct RowSource {
    TensorView<const Scalar> dense;
    const SparseRows<Scalar>* sparse = nullptr;

    [[nodiscard]] std::int64_t index(std::int64_t b, std::int64_t h, std::int64_t i) const {
        return (b * dense.heads + h) * dense.rows + i;
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

    /// dst[x * stride] = scale * row(b, h, i)[x] for x < cols (zeros where nothing is stored);
    /// returns whether every value is finite.
    bool copy(std::int64_t b,
              std::int64_t h,
              std::int64_t i,
              Scalar scale,
              Scalar* dst,
              std::int64_t stride) const {
        bool finite = true;
        if (sparse == nullptr) {
            const Scalar* row = dense.row(b, h, i);
            for (std::int64_t x = 0; x < dense.cols; ++x) {
                dst[x * stride] = row[x] * scale;
                finite = finite && std::isfinite(row[x]);
            }
            return finite;
        }
        for (std::int64_t x = 0; x < dense.cols; ++x)
            dst[x * stride] = Scalar(0);
        const std::int64_t r = index(b, h, i);
        const auto idx = sparse->row_indices(r);
        const auto val = sparse->row_values(r);
        for (std::size_t e = 0; e < idx.size(); ++e) {
            dst[idx[e] * stride] = val[e] * scale;
            finite = finite && std::isfinite(val[e]);
        }
        return finite;
    }
};

/// The three operands of a forward pass.
template <typename Scalar>
struct Operands {
    RowSource<Scalar> q, k, v;
};

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
        io.read({op, slice, i0, src.words(b, h, i0, n), 0, 1});
}

/// Counts the read of the gathered rows idx[0, c): a block of c rows (dense), or their nonzeros.
template <typename Scalar, typename Counter>
void read_gathered(Counter& io,
                   Operand op,
                   std::int64_t slice,
                   const RowSource<Scalar>& src,
                   std::int64_t b,
                   std::int64_t h,
                   const std::int64_t* idx,
                   std::int64_t c) {
    if (src.sparse == nullptr) {
        io.read({op, slice, idx[0], c, 0, src.dense.cols});
        return;
    }
    std::int64_t words = 0;
    if constexpr (Counter::kCounts)
        for (std::int64_t y = 0; y < c; ++y)
            words += src.words(b, h, idx[y]);
    io.read({op, slice, idx[0], words, 0, 1});
}

} // namespace ioattn::sparse::detail
