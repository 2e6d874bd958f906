// ioattn::sparse::SparseRows: CSR rows over the head dimension for sparse Q, K, V.
// Construction validates offsets and each row's sorted unique columns in O(rows + nnz).
// from_dense_threshold keeps |x| > t in one pass, O(rows cols); from_dense_top_k keeps the
// k largest |x| per row with a partial sort, O(rows cols log k).
// Tests: tests/sparse/sparse_rows_test.cpp

#include "fail.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace ioattn::sparse {

namespace {

constexpr std::string_view kSparseRowsWhere = "ioattn::sparse::SparseRows";

template <typename Scalar>
void check_dense(std::string_view where,
                 std::span<const Scalar> dense,
                 std::int64_t rows,
                 std::int64_t cols) {
    if (rows < 0)
        detail::fail(where, "rows = ", rows, " (expected >= 0)");
    if (cols < 0)
        detail::fail(where, "cols = ", cols, " (expected >= 0)");
    std::int64_t elements = 0;
    if (__builtin_mul_overflow(rows, cols, &elements))
        detail::fail(where, "rows*cols = ", rows, " x ", cols, " overflows int64");
    if (static_cast<std::int64_t>(dense.size()) != elements)
        detail::fail(
            where, "dense has ", dense.size(), " elements (expected rows*cols = ", elements, ")");
    // rows + 1 offsets (rows may be huge when cols = 0)
    require_memory(where,
                   add_bytes(bytes_of(rows, sizeof(std::int64_t)), sizeof(std::int64_t)),
                   "row offsets");
    for (std::size_t e = 0; e < dense.size(); ++e)
        if (std::isnan(dense[e]))
            detail::fail(where,
                         "NaN at row ",
                         static_cast<std::int64_t>(e) / std::max<std::int64_t>(cols, 1),
                         ", column ",
                         static_cast<std::int64_t>(e) % std::max<std::int64_t>(cols, 1));
}

} // namespace

template <typename Scalar>
SparseRows<Scalar>::SparseRows(std::int64_t rows,
                               std::int64_t cols,
                               std::vector<std::int64_t> offsets,
                               std::vector<std::int64_t> indices,
                               std::vector<Scalar> values)
    : rows_(rows)
    , cols_(cols)
    , offsets_(std::move(offsets))
    , idx_(std::move(indices))
    , val_(std::move(values)) {
    if (rows_ < 0)
        detail::fail(kSparseRowsWhere, "rows = ", rows_, " (expected >= 0)");
    if (cols_ < 0)
        detail::fail(kSparseRowsWhere, "cols = ", cols_, " (expected >= 0)");
    if (static_cast<std::int64_t>(offsets_.size()) != rows_ + 1)
        detail::fail(kSparseRowsWhere,
                     "offsets has ",
                     offsets_.size(),
                     " entries (expected rows + 1 = ",
                     rows_ + 1,
                     ")");
    if (val_.size() != idx_.size())
        detail::fail(
            kSparseRowsWhere, "values has ", val_.size(), " entries but indices has ", idx_.size());
    if (offsets_[0] != 0)
        detail::fail(kSparseRowsWhere, "offsets[0] = ", offsets_[0], " (expected 0)");
    const auto nnz = static_cast<std::int64_t>(idx_.size());
    for (std::int64_t i = 0; i < rows_; ++i) {
        const std::int64_t lo = offsets_[static_cast<std::size_t>(i)];
        const std::int64_t hi = offsets_[static_cast<std::size_t>(i) + 1];
        if (hi < lo || hi > nnz)
            detail::fail(kSparseRowsWhere,
                         "row ",
                         i,
                         ": offsets[",
                         i + 1,
                         "] = ",
                         hi,
                         " (expected in [offsets[",
                         i,
                         "] = ",
                         lo,
                         ", ",
                         nnz,
                         "])");
        for (std::int64_t p = lo; p < hi; ++p) {
            const std::int64_t j = idx_[static_cast<std::size_t>(p)];
            if (j < 0 || j >= cols_)
                detail::fail(
                    kSparseRowsWhere, "row ", i, ": column ", j, " out of range [0, ", cols_, ")");
            if (p > lo && j <= idx_[static_cast<std::size_t>(p) - 1])
                detail::fail(kSparseRowsWhere,
                             "row ",
                             i,
                             ": column ",
                             j,
                             " after column ",
                             idx_[static_cast<std::size_t>(p) - 1],
                             " (columns must be strictly increasing)");
        }
    }
    if (offsets_[static_cast<std::size_t>(rows_)] != nnz)
        detail::fail(kSparseRowsWhere,
                     "offsets[rows] = ",
                     offsets_[static_cast<std::size_t>(rows_)],
                     " but there are ",
                     nnz,
                     " entries");
}

template <typename Scalar>
SparseRows<Scalar> SparseRows<Scalar>::from_dense_threshold(std::span<const Scalar> dense,
                                                            std::int64_t rows,
                                                            std::int64_t cols,
                                                            Scalar threshold) {
    constexpr std::string_view kFn = "ioattn::sparse::SparseRows::from_dense_threshold";
    check_dense(kFn, dense, rows, cols);
    if (!(threshold >= Scalar(0)))
        detail::fail(kFn, "threshold = ", threshold, " (expected >= 0)");
    std::vector<std::int64_t> offsets{0};
    offsets.reserve(static_cast<std::size_t>(rows) + 1);
    std::vector<std::int64_t> idx;
    std::vector<Scalar> val;
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            const Scalar x = dense[static_cast<std::size_t>(i * cols + j)];
            if (std::abs(x) > threshold) {
                idx.push_back(j);
                val.push_back(x);
            }
        }
        offsets.push_back(static_cast<std::int64_t>(idx.size()));
    }
    return {rows, cols, std::move(offsets), std::move(idx), std::move(val)};
}

template <typename Scalar>
SparseRows<Scalar> SparseRows<Scalar>::from_dense_top_k(std::span<const Scalar> dense,
                                                        std::int64_t rows,
                                                        std::int64_t cols,
                                                        std::int64_t k) {
    constexpr std::string_view kFn = "ioattn::sparse::SparseRows::from_dense_top_k";
    check_dense(kFn, dense, rows, cols);
    if (k < 0 || k > cols)
        detail::fail(kFn, "k = ", k, " (expected in [0, cols = ", cols, "])");
    std::vector<std::int64_t> offsets{0};
    offsets.reserve(static_cast<std::size_t>(rows) + 1);
    std::vector<std::int64_t> idx;
    std::vector<Scalar> val;
    std::vector<std::int64_t> cand;
    for (std::int64_t i = 0; i < rows; ++i) {
        const Scalar* x = dense.data() + i * cols;
        cand.clear();
        for (std::int64_t j = 0; j < cols; ++j)
            if (x[j] != Scalar(0))
                cand.push_back(j);
        const auto keep = std::min<std::size_t>(cand.size(), static_cast<std::size_t>(k));
        // larger |x| first, ties to the lower column
        std::partial_sort(cand.begin(),
                          cand.begin() + static_cast<std::ptrdiff_t>(keep),
                          cand.end(),
                          [x](std::int64_t a, std::int64_t b) {
                              const Scalar fa = std::abs(x[a]);
                              const Scalar fb = std::abs(x[b]);
                              return fa != fb ? fa > fb : a < b;
                          });
        std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(keep));
        for (std::size_t e = 0; e < keep; ++e) {
            idx.push_back(cand[e]);
            val.push_back(x[cand[e]]);
        }
        offsets.push_back(static_cast<std::int64_t>(idx.size()));
    }
    return {rows, cols, std::move(offsets), std::move(idx), std::move(val)};
}

template <typename Scalar>
std::span<const std::int64_t> SparseRows<Scalar>::row_indices(std::int64_t i) const {
    IOATTN_ASSERT(i >= 0 && i < rows_);
    const auto lo = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(i)]);
    const auto hi = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(i) + 1]);
    return std::span<const std::int64_t>(idx_).subspan(lo, hi - lo);
}

template <typename Scalar>
std::span<const Scalar> SparseRows<Scalar>::row_values(std::int64_t i) const {
    IOATTN_ASSERT(i >= 0 && i < rows_);
    const auto lo = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(i)]);
    const auto hi = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(i) + 1]);
    return std::span<const Scalar>(val_).subspan(lo, hi - lo);
}

template <typename Scalar>
std::vector<Scalar> SparseRows<Scalar>::to_dense() const {
    std::int64_t elements = 0; // rows x cols may pass int64 (a valid CSR of huge cols)
    if (__builtin_mul_overflow(rows_, cols_, &elements))
        elements = std::numeric_limits<std::int64_t>::max();
    require_memory(
        "ioattn::sparse::SparseRows::to_dense", bytes_of(elements, sizeof(Scalar)), "dense copy");
    std::vector<Scalar> out(static_cast<std::size_t>(elements), Scalar(0));
    for (std::int64_t i = 0; i < rows_; ++i) {
        const auto c = row_indices(i);
        const auto v = row_values(i);
        for (std::size_t e = 0; e < c.size(); ++e)
            out[static_cast<std::size_t>(i * cols_ + c[e])] = v[e];
    }
    return out;
}

#define IOATTN_INSTANTIATE(Scalar) template class SparseRows<Scalar>;
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

// bf16 rows are storage: built from CSR arrays, widened by the bf16 entry (attention_bf16.cpp)
template SparseRows<bf16>::SparseRows(std::int64_t,
                                      std::int64_t,
                                      std::vector<std::int64_t>,
                                      std::vector<std::int64_t>,
                                      std::vector<bf16>);
template std::span<const std::int64_t> SparseRows<bf16>::row_indices(std::int64_t) const;
template std::span<const bf16> SparseRows<bf16>::row_values(std::int64_t) const;
template std::vector<bf16> SparseRows<bf16>::to_dense() const;

} // namespace ioattn::sparse
