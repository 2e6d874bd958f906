#pragma once
/// Index sets I of entries of the n_q x n_k matrix Q K^T, their measures (docs/design.md section
/// 10.2) and the families the experiments draw them from.
///
/// r_R(I) = sum over rows i of min(|R_i|, d), R_i the columns of row i in I: the rank of
/// Q -> (Q K^T)|_I for Vandermonde K. r_C(I) symmetrically over columns. Lemma 4.6 (Saha & Ye):
/// max(r_R, r_C) >= min(d sqrt(|I|/2), |I|/4). U(I) = min(|I|, d (|R_I| + |C_I|)) is the cost
/// of the protocol that sends either the entries or the rows of Q and K they need.

#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::ff {

/// One entry (row, col) of Q K^T.
struct Entry {
    std::int64_t row = 0;
    std::int64_t col = 0;

    bool operator==(const Entry&) const = default;

    /// Row-major order.
    bool operator<(const Entry& o) const { return row != o.row ? row < o.row : col < o.col; }
};

/// A set of entries of an n_rows x n_cols matrix, kept sorted and without duplicates.
class IndexSet {
public:
    IndexSet() = default;

    /// Sorts and deduplicates. Throws InvalidArgument for an entry outside the matrix or
    /// non-positive sizes.
    IndexSet(std::int64_t n_rows, std::int64_t n_cols, std::vector<Entry> entries);

    [[nodiscard]] std::int64_t n_rows() const { return n_rows_; }

    [[nodiscard]] std::int64_t n_cols() const { return n_cols_; }

    [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }

    /// |I|.
    [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(entries_.size()); }

    /// |R_i| for every row i (length n_rows).
    [[nodiscard]] std::vector<std::int64_t> row_counts() const;

    /// |C_j| for every column j (length n_cols).
    [[nodiscard]] std::vector<std::int64_t> col_counts() const;

    /// The columns of row i in I, ascending.
    [[nodiscard]] std::vector<std::int64_t> row_support(std::int64_t i) const;

    /// The rows of column j in I, ascending.
    [[nodiscard]] std::vector<std::int64_t> col_support(std::int64_t j) const;

    /// Number of rows (columns) with at least one entry: |R_I| (|C_I|).
    [[nodiscard]] std::int64_t distinct_rows() const;
    [[nodiscard]] std::int64_t distinct_cols() const;

    [[nodiscard]] bool contains(Entry e) const;

    bool operator==(const IndexSet&) const = default;

private:
    std::int64_t n_rows_ = 0;
    std::int64_t n_cols_ = 0;
    std::vector<Entry> entries_;
};

/// sum over i of min(count_i, d): r_R from row counts (or r_C from column counts).
std::int64_t capped_sum(const std::vector<std::int64_t>& counts, std::int64_t d);

/// r_R(I) for head dimension d >= 1.
std::int64_t rank_rows(const IndexSet& set, std::int64_t d);

/// r_C(I) for head dimension d >= 1.
std::int64_t rank_cols(const IndexSet& set, std::int64_t d);

/// min(d sqrt(size/2), size/4): the Lemma 4.6 lower bound, in field elements.
double lemma46_bound(std::int64_t size, std::int64_t d);

/// Exact integer test of value >= lemma46_bound(size, d): 2 value^2 >= d^2 size or
/// 4 value >= size.
bool meets_lemma46(std::int64_t value, std::int64_t size, std::int64_t d);

/// U(I) = min(|I|, d (|R_I| + |C_I|)).
std::int64_t protocol_cost(const IndexSet& set, std::int64_t d);

/// An index set with the name of the family member it came from (to rerun a failure).
struct NamedSet {
    std::string name;
    IndexSet set;
};

// --- families (index_set_families.cpp) ---

/// rows x cols rectangle with top-left (row0, col0) in an n x n matrix.
IndexSet rectangle(
    std::int64_t n, std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols);

/// `count` full rows (all n columns) starting at row0.
IndexSet full_rows(std::int64_t n, std::int64_t row0, std::int64_t count);

/// `count` full columns starting at col0.
IndexSet full_cols(std::int64_t n, std::int64_t col0, std::int64_t count);

/// k wrapped diagonals {(i, (i + s) mod n) : s < k}: exactly k entries per row and column.
IndexSet diagonals(std::int64_t n, std::int64_t k);

/// `blocks` disjoint side x side squares along the diagonal (fewer if they do not fit).
IndexSet block_diagonal(std::int64_t n, std::int64_t blocks, std::int64_t side);

/// `size` distinct entries uniform over the n x n matrix (mt19937_64(seed)).
IndexSet uniform_random(std::int64_t n, std::int64_t size, std::uint64_t seed);

/// The index set whose membership bitmask over the n*n entries (row-major) is `mask`
/// (n*n <= 62): enumerating masks enumerates all sets of a tiny matrix.
IndexSet from_mask(std::int64_t n, std::uint64_t mask);

/// Seeded local search for a set of `size` entries in an n x n matrix that minimises
/// max(r_R, r_C) for head dimension d: random single-entry moves (biased toward rows and
/// columns already holding >= d entries), accepted when not worse, `steps` moves. Returns the
/// best set seen.
IndexSet adversarial_search(
    std::int64_t n, std::int64_t size, std::int64_t d, std::uint64_t seed, std::int64_t steps);

/// The standard family list of the experiments for an n x n matrix and head dimension d:
/// rectangles, squares below and above d, full rows and columns, sets with fewer than d entries
/// per row and column, block-diagonal unions, uniform random sets (`random_sets` of them) and
/// adversarial searches (`adversarial` of them, at sizes spread over [1, n^2]).
std::vector<NamedSet> standard_families(std::int64_t n,
                                        std::int64_t d,
                                        std::uint64_t seed,
                                        std::int64_t random_sets,
                                        std::int64_t adversarial,
                                        std::int64_t adversarial_steps);

} // namespace ioattn::ff
