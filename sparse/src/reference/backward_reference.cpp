// ioattn::sparse::backward_reference: the gradient oracle over Omega, double accumulation.
// Per (batch, head, query row i) over its allowed keys: P_ij = exp(scale q_i.k_j - L_i) from the
// row's own softmax (recomputed in double), D_i = dO_i . O_i (recomputed), dP_ij = dO_i . v_j,
// dS_ij = P_ij (dP_ij - D_i); dQ_i = scale sum_j dS_ij k_j. dK_j and dV_j sum over the queries
// (and query heads of the group) that see key j, in a fixed order: a parallel pass over
// (kv head, key) walks Omega^T. A row with no allowed key contributes nothing. Q, K, V may be
// stored sparse (CSR rows over d): dot products and sums then run over the stored entries; the
// gradients are dense.
// I/O: not modelled. Tests: tests/sparse/backward_test.cpp, sparse_inputs_test.cpp

#include "kernels/common/row_products.hpp"
#include "kernels/common/validate.hpp"

#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ioattn::sparse {

namespace {

/// P and dS of row i (allowed keys only), in double, written to p_out / ds_out (row nnz each).
template <typename Scalar>
void row_grad(const BackwardArgs<Scalar>& a,
              const detail::Operands<Scalar>& src,
              const Support& s,
              std::int64_t slice,
              std::int64_t i,
              double* p_out,
              double* ds_out) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const auto cols = s.row(i);
    const detail::RowSource<Scalar> d_o{a.d_o, nullptr};
    double m = -std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    for (const std::int64_t j : cols) { // s = scale q K^T
        p_out[n] = p.scale * detail::dot(src.q, b, h, i, src.k, g, j);
        m = p_out[n] > m ? p_out[n] : m;
        ++n;
    }
    double l = 0.0;
    for (std::size_t y = 0; y < n; ++y) { // P = softmax(s)
        p_out[y] = p_out[y] == m ? 1.0 : std::exp(p_out[y] - m);
        l += p_out[y];
    }
    double delta = 0.0; // D = dO . O with O = P V
    for (std::size_t y = 0; y < n; ++y) {
        p_out[y] /= l;
        const double dp = detail::dot(d_o, b, h, i, src.v, g, cols[y]);
        ds_out[y] = dp;
        delta += p_out[y] * dp;
    }
    for (std::size_t y = 0; y < n; ++y)
        ds_out[y] = p_out[y] * (ds_out[y] - delta); // dS = P o (dP - D)
}

} // namespace

template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args,
                        const Support& support,
                        const SparseInputs<Scalar>& inputs) {
    constexpr const char* kWhere = "ioattn::sparse::backward_reference";
    BackwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src = detail::validate_inputs(a, support, inputs, kWhere, false);
    detail::validate(
        a, support, nullptr, Schedule::reference, MemoryModel{1}, kWhere, true, Pass::backward);
    const Problem& p = a.problem;
    const Support st = support.transposed();
    const detail::RowSource<Scalar> d_o{a.d_o, nullptr};
    // P and dS for every slice in CSR order (Z_QK doubles each per slice).
    const auto z = static_cast<std::size_t>(support.z_qk());
    CallMemory alloc(kWhere);
    const kernels::Workspace<double> pr_slab(1, support.z_qk() * p.batch_heads());
    const kernels::Workspace<double> ds_slab(1, support.z_qk() * p.batch_heads());
    const kernels::Workspace<double> ws(max_concurrency(), p.d + p.d_v);
    alloc.allocate();
    double* const pr = pr_slab.slab(0);
    double* const ds = ds_slab.slab(0);
    const auto offset = [&](std::int64_t slice, std::int64_t i) {
        return static_cast<std::size_t>(slice) * z +
               static_cast<std::size_t>(support.row_offsets()[static_cast<std::size_t>(i)]);
    };
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int worker) {
        const std::int64_t slice = task / p.n_q, i = task % p.n_q;
        const std::size_t at = offset(slice, i);
        row_grad(a, src, support, slice, i, pr + at, ds + at);
        const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
        const auto cols = support.row(i);
        double* acc = ws.slab(worker);
        std::fill(acc, acc + p.d, 0.0);
        for (std::size_t y = 0; y < cols.size(); ++y) // dQ = scale dS K
            detail::axpy(acc, ds[at + y], src.k, b, g, cols[y]);
        Scalar* dq = a.d_q.row(b, h, i);
        for (std::int64_t x = 0; x < p.d; ++x)
            dq[x] = static_cast<Scalar>(p.scale * acc[x]);
    });
    // Position of (i, j) in CSR order: row offset + rank of j in row i.
    const auto position = [&](std::int64_t i, std::int64_t j) {
        const auto row = support.row(i);
        return static_cast<std::size_t>(std::lower_bound(row.begin(), row.end(), j) - row.begin());
    };
    parallel_for_tiles(p.batch * p.kv_heads * p.n_k, [&](std::int64_t task, int worker) {
        const std::int64_t kv = task / p.n_k, j = task % p.n_k;
        const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
        double* acc_k = ws.slab(worker);
        double* acc_v = acc_k + p.d;
        std::fill(acc_k, acc_k + p.d + p.d_v, 0.0);
        for (std::int64_t hh = 0; hh < p.group(); ++hh) {
            const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
            for (const std::int64_t i : st.row(j)) {
                const std::size_t at = offset(slice, i) + position(i, j);
                detail::axpy(acc_k, ds[at], src.q, b, h, i); // dK = scale dS^T Q
                detail::axpy(acc_v, pr[at], d_o, b, h, i);   // dV = P^T dO
            }
        }
        for (std::int64_t x = 0; x < p.d; ++x)
            a.d_k.row(b, g, j)[x] = static_cast<Scalar>(p.scale * acc_k[x]);
        for (std::int64_t x = 0; x < p.d_v; ++x)
            a.d_v.row(b, g, j)[x] = static_cast<Scalar>(acc_v[x]);
    });
}

template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args, const Support& support) {
    backward_reference(args, support, SparseInputs<Scalar>{});
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void backward_reference<Scalar>(const BackwardArgs<Scalar>&, const Support&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void backward_reference<Scalar>(                                                      \
        const BackwardArgs<Scalar>&, const Support&, const SparseInputs<Scalar>&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
