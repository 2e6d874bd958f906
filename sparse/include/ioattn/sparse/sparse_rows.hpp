#pragma once
/// Sparse operands: Q, K or V stored as CSR rows over the head dimension (for example ReLU or top-k
/// features), and Z_input, the input nonzeros of the sparse I/O bound (docs/design.md section 6.2).

#include <ioattn/bf16.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace ioattn::sparse {

/// A rows x cols matrix (rows = sequence positions, cols = d or d_v) in CSR: row i stores
/// values[offsets[i] .. offsets[i+1]) at the sorted unique columns indices[...] in [0, cols).
/// Immutable after construction; concurrent reads are safe. Scalar is float or double, or bf16
/// as storage (the constructor from CSR arrays, the accessors and to_dense; the ioattn::attention
/// entry widens bf16 rows to float).
template <typename Scalar>
class SparseRows {
public:
    SparseRows() = default;

    /// Takes ownership and validates in O(rows + nnz). Throws InvalidArgument naming the row
    /// and value: rows < 0 or cols < 0; offsets not of size rows + 1, not starting at 0,
    /// decreasing, or not ending at indices.size(); values.size() != indices.size(); a column
    /// outside [0, cols), unsorted or repeated within a row.
    SparseRows(std::int64_t rows,
               std::int64_t cols,
               std::vector<std::int64_t> offsets,
               std::vector<std::int64_t> indices,
               std::vector<Scalar> values);

    /// Keeps the entries of the row-major rows x cols matrix `dense` with |x| > threshold
    /// (threshold 0 keeps exactly the nonzeros, as after a ReLU). Throws InvalidArgument if
    /// dense.size() != rows*cols, a size is negative, or threshold is negative or NaN.
    static SparseRows from_dense_threshold(std::span<const Scalar> dense,
                                           std::int64_t rows,
                                           std::int64_t cols,
                                           Scalar threshold);

    /// Keeps, per row, the k entries of largest |x| (ties to the lower column), never storing
    /// an exact zero: at most k per row. Throws InvalidArgument if dense.size() != rows*cols,
    /// a size is negative, or k is outside [0, cols]. O(rows * cols log k).
    static SparseRows from_dense_top_k(std::span<const Scalar> dense,
                                       std::int64_t rows,
                                       std::int64_t cols,
                                       std::int64_t k);

    [[nodiscard]] std::int64_t rows() const { return rows_; }

    [[nodiscard]] std::int64_t cols() const { return cols_; }

    /// Stored entries: what Z_input counts for this operand.
    [[nodiscard]] std::int64_t nonzeros() const { return static_cast<std::int64_t>(idx_.size()); }

    [[nodiscard]] std::span<const std::int64_t> offsets() const { return offsets_; }

    [[nodiscard]] std::span<const std::int64_t> indices() const { return idx_; }

    [[nodiscard]] std::span<const Scalar> values() const { return val_; }

    /// Column indices of row i. Precondition: 0 <= i < rows (checked in Debug).
    [[nodiscard]] std::span<const std::int64_t> row_indices(std::int64_t i) const;

    /// Values of row i, aligned with row_indices(i).
    [[nodiscard]] std::span<const Scalar> row_values(std::int64_t i) const;

    /// The row-major dense matrix (zeros where nothing is stored). Throws ResourceError when
    /// rows x cols values cannot fit in memory_limit().
    [[nodiscard]] std::vector<Scalar> to_dense() const;

private:
    std::int64_t rows_ = 0;
    std::int64_t cols_ = 0;
    std::vector<std::int64_t> offsets_{0};
    std::vector<std::int64_t> idx_;
    std::vector<Scalar> val_;
};

extern template class SparseRows<float>;
extern template class SparseRows<double>;

/// Nonzeros of each operand of one (batch, head) problem, as Z_input counts them: rows*cols
/// for a dense operand (dense_nonzeros), SparseRows::nonzeros() for a sparse one.
struct InputNonzeros {
    std::int64_t q = 0;
    std::int64_t k = 0;
    std::int64_t v = 0;
    std::int64_t d_o = 0; ///< counted by the backward only
};

/// rows * cols: what a dense operand contributes. Throws InvalidArgument if negative.
std::int64_t dense_nonzeros(std::int64_t rows, std::int64_t cols);

/// Z_input = nnz(Q) + nnz(K) + nnz(V), plus nnz(dO) for Pass::backward. Throws
/// InvalidArgument if a count is negative.
std::int64_t z_input(const InputNonzeros& nnz, Pass pass);

/// Z_input of one (batch, head) of a dense problem: n_q d + n_k d + n_k d_v, plus n_q d_v
/// for the backward (d_v = 0 means d). Throws InvalidArgument for non-positive sizes.
std::int64_t z_input(const Problem& problem, Pass pass);

} // namespace ioattn::sparse
