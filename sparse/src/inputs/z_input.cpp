// ioattn::sparse::z_input / dense_nonzeros: Z_input of docs/design.md section 6.2, the input
// nonzeros in the sparse I/O bound min(Z_input^2 / M, Z_input sqrt(Z_QK) / sqrt(M)): nnz(Q) +
// nnz(K) + nnz(V), plus nnz(dO) for the backward; a dense operand counts rows * cols. O(1).
// Tests: tests/sparse/z_input_test.cpp

#include "fail.hpp"

#include <ioattn/sparse/sparse_rows.hpp>

namespace ioattn::sparse {

std::int64_t dense_nonzeros(std::int64_t rows, std::int64_t cols) {
    if (rows < 0 || cols < 0)
        detail::fail("ioattn::sparse::dense_nonzeros",
                     "shape ",
                     rows,
                     " x ",
                     cols,
                     " (expected non-negative)");
    return rows * cols;
}

std::int64_t z_input(const InputNonzeros& nnz, Pass pass) {
    constexpr std::string_view kWhere = "ioattn::sparse::z_input";
    if (nnz.q < 0 || nnz.k < 0 || nnz.v < 0 || nnz.d_o < 0)
        detail::fail(kWhere,
                     "negative count: q = ",
                     nnz.q,
                     ", k = ",
                     nnz.k,
                     ", v = ",
                     nnz.v,
                     ", d_o = ",
                     nnz.d_o);
    const std::int64_t forward = nnz.q + nnz.k + nnz.v;
    return pass == Pass::backward ? forward + nnz.d_o : forward;
}

std::int64_t z_input(const Problem& problem, Pass pass) {
    constexpr std::string_view kWhere = "ioattn::sparse::z_input";
    const std::int64_t d_v = problem.d_v == 0 ? problem.d : problem.d_v;
    if (problem.n_q < 1 || problem.n_k < 1 || problem.d < 1 || d_v < 1)
        detail::fail(kWhere,
                     "n_q = ",
                     problem.n_q,
                     ", n_k = ",
                     problem.n_k,
                     ", d = ",
                     problem.d,
                     ", d_v = ",
                     d_v,
                     " (expected >= 1)");
    const InputNonzeros nnz{dense_nonzeros(problem.n_q, problem.d),
                            dense_nonzeros(problem.n_k, problem.d),
                            dense_nonzeros(problem.n_k, d_v),
                            dense_nonzeros(problem.n_q, d_v)};
    return z_input(nnz, pass);
}

} // namespace ioattn::sparse
