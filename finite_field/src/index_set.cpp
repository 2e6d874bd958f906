// ioattn::ff::IndexSet and its measures: |I|, R_I, C_I, r_R, r_C, Lemma 4.6 bound, U(I)
// Field: none (combinatorics of the entries of Q K^T); values are field-element counts.
// Exactness: r_R, r_C are integers; meets_lemma46 compares 2 v^2 >= d^2 |I| or 4 v >= |I|
//   in integers, so no rounding decides a check. lemma46_bound is only reported.
// Ops: O(|I|) per measure (O(|I| log |I|) to build).
// Tests: tests/finite_field/index_set_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/index_set.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace ioattn::ff {

IndexSet::IndexSet(std::int64_t n_rows, std::int64_t n_cols, std::vector<Entry> entries)
    : n_rows_(n_rows)
    , n_cols_(n_cols)
    , entries_(std::move(entries)) {
    if (n_rows < 1 || n_cols < 1)
        throw InvalidArgument("ioattn::ff::IndexSet: shape " + std::to_string(n_rows) + " x " +
                              std::to_string(n_cols) + " (expected sizes >= 1)");
    for (const Entry& e : entries_)
        if (e.row < 0 || e.row >= n_rows || e.col < 0 || e.col >= n_cols)
            throw InvalidArgument("ioattn::ff::IndexSet: entry (" + std::to_string(e.row) + ", " +
                                  std::to_string(e.col) + ") outside " + std::to_string(n_rows) +
                                  " x " + std::to_string(n_cols));
    std::sort(entries_.begin(), entries_.end());
    entries_.erase(std::unique(entries_.begin(), entries_.end()), entries_.end());
}

std::vector<std::int64_t> IndexSet::row_counts() const {
    std::vector<std::int64_t> c(static_cast<std::size_t>(n_rows_), 0);
    for (const Entry& e : entries_)
        ++c[static_cast<std::size_t>(e.row)];
    return c;
}

std::vector<std::int64_t> IndexSet::col_counts() const {
    std::vector<std::int64_t> c(static_cast<std::size_t>(n_cols_), 0);
    for (const Entry& e : entries_)
        ++c[static_cast<std::size_t>(e.col)];
    return c;
}

std::vector<std::int64_t> IndexSet::row_support(std::int64_t i) const {
    std::vector<std::int64_t> cols;
    auto it = std::lower_bound(entries_.begin(), entries_.end(), Entry{i, 0});
    for (; it != entries_.end() && it->row == i; ++it)
        cols.push_back(it->col);
    return cols;
}

std::vector<std::int64_t> IndexSet::col_support(std::int64_t j) const {
    std::vector<std::int64_t> rows;
    for (const Entry& e : entries_)
        if (e.col == j)
            rows.push_back(e.row);
    return rows;
}

std::int64_t IndexSet::distinct_rows() const {
    const auto c = row_counts();
    return std::count_if(c.begin(), c.end(), [](std::int64_t v) { return v > 0; });
}

std::int64_t IndexSet::distinct_cols() const {
    const auto c = col_counts();
    return std::count_if(c.begin(), c.end(), [](std::int64_t v) { return v > 0; });
}

bool IndexSet::contains(Entry e) const {
    return std::binary_search(entries_.begin(), entries_.end(), e);
}

std::int64_t capped_sum(const std::vector<std::int64_t>& counts, std::int64_t d) {
    std::int64_t s = 0;
    for (std::int64_t c : counts)
        s += std::min(c, d); // min(|R_i|, d)
    return s;
}

std::int64_t rank_rows(const IndexSet& set, std::int64_t d) {
    if (d < 1)
        throw InvalidArgument("ioattn::ff::rank_rows: d = " + std::to_string(d) +
                              " (expected >= 1)");
    return capped_sum(set.row_counts(), d);
}

std::int64_t rank_cols(const IndexSet& set, std::int64_t d) {
    if (d < 1)
        throw InvalidArgument("ioattn::ff::rank_cols: d = " + std::to_string(d) +
                              " (expected >= 1)");
    return capped_sum(set.col_counts(), d);
}

double lemma46_bound(std::int64_t size, std::int64_t d) {
    const double s = static_cast<double>(size);
    return std::min(static_cast<double>(d) * std::sqrt(s / 2.0), s / 4.0);
}

bool meets_lemma46(std::int64_t value, std::int64_t size, std::int64_t d) {
    // value >= min(A, B) iff value >= A or value >= B; squares in 128 bits avoid overflow
    __extension__ using I128 = __int128;
    const bool ge_a = 2 * static_cast<I128>(value) * value >= static_cast<I128>(d) * d * size;
    const bool ge_b = 4 * static_cast<I128>(value) >= size;
    return ge_a || ge_b;
}

std::int64_t protocol_cost(const IndexSet& set, std::int64_t d) {
    return std::min(set.size(), d * (set.distinct_rows() + set.distinct_cols()));
}

} // namespace ioattn::ff
