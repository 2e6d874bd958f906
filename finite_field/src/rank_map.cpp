// ioattn::ff::query_map, key_map and their block ranks: the linear maps of matrix entry
// compression restricted to I (Saha & Ye Def 4.2; the rank fact of docs/design.md section 10.2)
// Field: F_p. Q -> (Q K^T)|_I is block diagonal over the rows of Q: the entries of row i only
//   see Q_i, through the rows K_j, j in R_i. So rank = sum_i rank(K_{R_i}) (query_map_rank_
//   blocks), which is min(|R_i|, d) per row when every d rows of K are independent.
// Exactness: both routes are exact NTL ranks; exp_rank_formula checks they agree.
// Ops: query_map |I| x n_q d entries; blocks: n_q ranks of |R_i| x d matrices.
// Tests: tests/finite_field/rank_map_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/rank_map.hpp>

#include <string>

namespace ioattn::ff {

namespace {

void check_operand(
    const IndexSet& set, const Matrix& m, std::int64_t rows, const Prime& p, const char* where) {
    if (m.rows() != rows || m.cols() < 1)
        throw InvalidArgument(std::string(where) + ": operand is " + std::to_string(m.rows()) +
                              " x " + std::to_string(m.cols()) + ", index set is " +
                              std::to_string(set.n_rows()) + " x " + std::to_string(set.n_cols()) +
                              " (expected " + std::to_string(rows) + " rows and d >= 1)");
    check_entries(m, p, where);
}

} // namespace

Matrix query_map(const IndexSet& set, const Matrix& k, const Prime& p) {
    check_operand(set, k, set.n_cols(), p, "ioattn::ff::query_map");
    const std::int64_t d = k.cols();
    Matrix a(set.size(), set.n_rows() * d);
    std::int64_t r = 0;
    for (const Entry& e : set.entries()) {
        for (std::int64_t c = 0; c < d; ++c)
            a(r, e.row * d + c) = k(e.col, c); // (Q K^T)_ij = sum_c Q_ic K_jc
        ++r;
    }
    return a;
}

Matrix key_map(const IndexSet& set, const Matrix& q, const Prime& p) {
    check_operand(set, q, set.n_rows(), p, "ioattn::ff::key_map");
    const std::int64_t d = q.cols();
    Matrix a(set.size(), set.n_cols() * d);
    std::int64_t r = 0;
    for (const Entry& e : set.entries()) {
        for (std::int64_t c = 0; c < d; ++c)
            a(r, e.col * d + c) = q(e.row, c);
        ++r;
    }
    return a;
}

std::int64_t query_map_rank_blocks(const IndexSet& set, const Matrix& k, const Prime& p) {
    check_operand(set, k, set.n_cols(), p, "ioattn::ff::query_map_rank_blocks");
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < set.n_rows(); ++i) {
        const std::vector<std::int64_t> cols = set.row_support(i);
        if (!cols.empty())
            total += rank(k.select_rows(cols), p); // rank of K_{R_i}
    }
    return total;
}

std::int64_t key_map_rank_blocks(const IndexSet& set, const Matrix& q, const Prime& p) {
    check_operand(set, q, set.n_rows(), p, "ioattn::ff::key_map_rank_blocks");
    // --- group the rows of each column in one pass ---
    std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(set.n_cols()));
    for (const Entry& e : set.entries())
        rows[static_cast<std::size_t>(e.col)].push_back(e.row);
    std::int64_t total = 0;
    for (const auto& r : rows)
        if (!r.empty())
            total += rank(q.select_rows(r), p); // rank of Q_{C_j}
    return total;
}

std::vector<std::int64_t>
restricted_product(const Matrix& q, const Matrix& k, const IndexSet& set, const Prime& p) {
    check_operand(set, q, set.n_rows(), p, "ioattn::ff::restricted_product");
    check_operand(set, k, set.n_cols(), p, "ioattn::ff::restricted_product");
    if (q.cols() != k.cols())
        throw InvalidArgument("ioattn::ff::restricted_product: Q has d = " +
                              std::to_string(q.cols()) + ", K has d = " + std::to_string(k.cols()));
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(set.size()));
    for (const Entry& e : set.entries()) {
        std::int64_t s = 0;
        for (std::int64_t c = 0; c < q.cols(); ++c)
            s = add_mod(s, mul_mod(q(e.row, c), k(e.col, c), p), p);
        out.push_back(s);
    }
    return out;
}

} // namespace ioattn::ff
