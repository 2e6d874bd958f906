// ioattn::ff::Matrix, rank, kernel, inverse, multiply: exact linear algebra over F_p
// Field: F_p, p a validated Prime; entries checked to lie in [0, p) before NTL sees them.
// Exactness: NTL mat_zz_p (gauss, kernel, inv with determinant); rank_naive and multiply are
//   the NTL-free oracles the tests compare with.
// Ops: rank, kernel, inverse, rank_naive O(r c min(r, c)); multiply O(r k c) mul_mod.
// Every NTL call runs under NTL::zz_pPush, so it is safe from any thread or TBB task.
// Tests: tests/finite_field/matrix_test.cpp

#include "ntl.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/matrix.hpp>

#include <ostream>
#include <string>
#include <utility>

namespace ioattn::ff {

Matrix::Matrix(std::int64_t rows, std::int64_t cols)
    : rows_(rows)
    , cols_(cols) {
    if (rows < 0 || cols < 0)
        throw InvalidArgument("ioattn::ff::Matrix: shape " + std::to_string(rows) + " x " +
                              std::to_string(cols) + " (expected sizes >= 0)");
    data_.assign(static_cast<std::size_t>(rows * cols), 0);
}

Matrix Matrix::select_rows(const std::vector<std::int64_t>& rows) const {
    for (std::int64_t r : rows)
        if (r < 0 || r >= rows_)
            throw InvalidArgument("ioattn::ff::Matrix::select_rows: row " + std::to_string(r) +
                                  " outside [0, " + std::to_string(rows_) + ")");
    Matrix out(static_cast<std::int64_t>(rows.size()), cols_);
    for (std::size_t i = 0; i < rows.size(); ++i)
        for (std::int64_t j = 0; j < cols_; ++j)
            out(static_cast<std::int64_t>(i), j) = (*this)(rows[i], j);
    return out;
}

Matrix Matrix::transpose() const {
    Matrix t(cols_, rows_);
    for (std::int64_t i = 0; i < rows_; ++i)
        for (std::int64_t j = 0; j < cols_; ++j)
            t(j, i) = (*this)(i, j);
    return t;
}

std::ostream& operator<<(std::ostream& os, const Matrix& m) {
    os << '[';
    for (std::int64_t i = 0; i < m.rows(); ++i) {
        os << (i == 0 ? "[" : " [");
        for (std::int64_t j = 0; j < m.cols(); ++j)
            os << (j == 0 ? "" : " ") << m(i, j);
        os << ']';
    }
    return os << ']';
}

void check_entries(const Matrix& a, const Prime& p, const char* where) {
    for (std::int64_t v : a.data())
        if (v < 0 || v >= p.p)
            throw InvalidArgument(std::string(where) + ": entry " + std::to_string(v) +
                                  " outside [0, p = " + std::to_string(p.p) + ")");
}

std::int64_t rank(const Matrix& a, const Prime& p) {
    check_entries(a, p, "ioattn::ff::rank");
    if (a.rows() == 0 || a.cols() == 0)
        return 0;
    NTL::zz_pPush push(static_cast<long>(p.p));
    NTL::mat_zz_p m = detail::to_ntl(a);
    return NTL::gauss(m);
}

Matrix kernel(const Matrix& a, const Prime& p) {
    check_entries(a, p, "ioattn::ff::kernel");
    if (a.rows() == 0) {
        // every vector: the identity basis
        Matrix id(a.cols(), a.cols());
        for (std::int64_t i = 0; i < a.cols(); ++i)
            id(i, i) = 1;
        return id;
    }
    if (a.cols() == 0)
        return Matrix(0, 0);
    NTL::zz_pPush push(static_cast<long>(p.p));
    // --- x a^T... : rows x with x (a^T) = 0 are the right kernel of a ---
    const NTL::mat_zz_p at = detail::to_ntl(a.transpose());
    NTL::mat_zz_p x;
    NTL::kernel(x, at);
    Matrix out = detail::from_ntl(x);
    if (out.rows() == 0)
        return Matrix(0, a.cols());
    return out;
}

Matrix inverse(const Matrix& a, const Prime& p) {
    check_entries(a, p, "ioattn::ff::inverse");
    if (a.rows() != a.cols())
        throw InvalidArgument("ioattn::ff::inverse: matrix is " + std::to_string(a.rows()) + " x " +
                              std::to_string(a.cols()) + " (expected square)");
    if (a.rows() == 0)
        return a;
    NTL::zz_pPush push(static_cast<long>(p.p));
    const NTL::mat_zz_p m = detail::to_ntl(a);
    NTL::mat_zz_p x;
    NTL::zz_p det;
    NTL::inv(det, x, m); // sets det = 0 for a singular matrix instead of failing
    if (NTL::IsZero(det))
        throw InvalidArgument("ioattn::ff::inverse: the " + std::to_string(a.rows()) + " x " +
                              std::to_string(a.cols()) + " matrix is singular mod " +
                              std::to_string(p.p));
    return detail::from_ntl(x);
}

Matrix multiply(const Matrix& a, const Matrix& b, const Prime& p) {
    if (a.cols() != b.rows())
        throw InvalidArgument("ioattn::ff::multiply: shapes " + std::to_string(a.rows()) + " x " +
                              std::to_string(a.cols()) + " and " + std::to_string(b.rows()) +
                              " x " + std::to_string(b.cols()) + " do not chain");
    check_entries(a, p, "ioattn::ff::multiply");
    check_entries(b, p, "ioattn::ff::multiply");
    Matrix c(a.rows(), b.cols());
    for (std::int64_t i = 0; i < a.rows(); ++i)
        for (std::int64_t k = 0; k < a.cols(); ++k) {
            const std::int64_t aik = a(i, k);
            if (aik == 0)
                continue;
            for (std::int64_t j = 0; j < b.cols(); ++j)
                c(i, j) = add_mod(c(i, j), mul_mod(aik, b(k, j), p), p);
        }
    return c;
}

std::int64_t rank_naive(Matrix a, const Prime& p) {
    check_entries(a, p, "ioattn::ff::rank_naive");
    std::int64_t r = 0;
    for (std::int64_t c = 0; c < a.cols() && r < a.rows(); ++c) {
        // --- find a pivot in column c at or below row r ---
        std::int64_t piv = r;
        while (piv < a.rows() && a(piv, c) == 0)
            ++piv;
        if (piv == a.rows())
            continue;
        for (std::int64_t j = 0; j < a.cols(); ++j)
            std::swap(a(r, j), a(piv, j));
        // --- eliminate below: row_i -= (a_ic / a_rc) row_r ---
        const std::int64_t inv = pow_mod(a(r, c), p.p - 2, p);
        for (std::int64_t i = r + 1; i < a.rows(); ++i) {
            const std::int64_t f = mul_mod(a(i, c), inv, p);
            if (f == 0)
                continue;
            for (std::int64_t j = c; j < a.cols(); ++j)
                a(i, j) = sub_mod(a(i, j), mul_mod(f, a(r, j), p), p);
        }
        ++r;
    }
    return r;
}

} // namespace ioattn::ff
