#pragma once
/// Dense matrices over F_p with integer entries in [0, p), and the exact linear algebra the
/// verifier needs (rank, kernel, inverse through NTL's mat_zz_p, kept private).
///
/// All functions validate shapes and entries at entry and throw ioattn::InvalidArgument; none
/// calls NTL on an input it would abort on. Thread-safe: each call installs the modulus in the
/// calling thread (NTL::zz_pPush) and restores the previous one.

#include <ioattn/ff/field.hpp>

#include <cstdint>
#include <iosfwd>
#include <vector>

namespace ioattn::ff {

/// A rows x cols matrix over F_p, row-major, entries in [0, p).
class Matrix {
public:
    Matrix() = default;

    /// rows x cols zeros. Throws InvalidArgument for negative sizes.
    Matrix(std::int64_t rows, std::int64_t cols);

    [[nodiscard]] std::int64_t rows() const { return rows_; }

    [[nodiscard]] std::int64_t cols() const { return cols_; }

    std::int64_t& operator()(std::int64_t i, std::int64_t j) {
        return data_[static_cast<std::size_t>(i * cols_ + j)];
    }

    std::int64_t operator()(std::int64_t i, std::int64_t j) const {
        return data_[static_cast<std::size_t>(i * cols_ + j)];
    }

    [[nodiscard]] const std::vector<std::int64_t>& data() const { return data_; }

    /// The rows listed in `rows` (each in [0, rows())), in that order.
    [[nodiscard]] Matrix select_rows(const std::vector<std::int64_t>& rows) const;

    [[nodiscard]] Matrix transpose() const;

    bool operator==(const Matrix&) const = default;

private:
    std::int64_t rows_ = 0;
    std::int64_t cols_ = 0;
    std::vector<std::int64_t> data_;
};

std::ostream& operator<<(std::ostream& os, const Matrix& m);

/// Throws InvalidArgument naming `where` if an entry is outside [0, p).
void check_entries(const Matrix& a, const Prime& p, const char* where);

/// Rank over F_p (NTL gauss). O(rows * cols * min(rows, cols)) field operations.
std::int64_t rank(const Matrix& a, const Prime& p);

/// A basis (as rows) of the right kernel {x : a x = 0}; cols() - rank(a) rows of length cols()
/// (NTL kernel of the transpose). A 0 x cols matrix when a has full column rank.
Matrix kernel(const Matrix& a, const Prime& p);

/// a^{-1} over F_p (NTL inv). Throws InvalidArgument if a is not square or is singular.
Matrix inverse(const Matrix& a, const Prime& p);

/// a * b over F_p, naive (no NTL; the oracle for the rest). Throws on mismatched shapes.
Matrix multiply(const Matrix& a, const Matrix& b, const Prime& p);

/// The rank of a computed without NTL by naive Gaussian elimination: the brute-force oracle.
std::int64_t rank_naive(Matrix a, const Prime& p);

} // namespace ioattn::ff
