// ioattn::sparse::backward_reference: the gradient oracle over Omega, double accumulation.
// Per (batch, head, query row i) over its allowed keys: P_ij = exp(scale q_i.k_j - L_i) from the
// row's own softmax (recomputed in double), D_i = dO_i . O_i (recomputed), dP_ij = dO_i . v_j,
// dS_ij = P_ij (dP_ij - D_i); dQ_i = scale sum_j dS_ij k_j. dK_j and dV_j sum over the queries
// (and query heads of the group) that see key j, in a fixed order: a parallel pass over
// (kv head, key) walks Omega^T. A row with no allowed key contributes nothing.
// I/O: not modelled. Tests: tests/sparse/backward_test.cpp

#include "plan.hpp"
#include "validate.hpp"

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
              const Support& s,
              std::int64_t slice,
              std::int64_t i,
              double* p_out,
              double* ds_out) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const auto cols = s.row(i);
    const Scalar* q = a.q.row(b, h, i);
    const Scalar* d_o = a.d_o.row(b, h, i);
    double m = -std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    for (const std::int64_t j : cols) { // s = scale q K^T
        double dot = 0.0;
        for (std::int64_t x = 0; x < p.d; ++x)
            dot += static_cast<double>(q[x]) * static_cast<double>(a.k.row(b, g, j)[x]);
        p_out[n] = p.scale * dot;
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
        double dp = 0.0;
        const Scalar* v = a.v.row(b, g, cols[y]);
        for (std::int64_t x = 0; x < p.d_v; ++x)
            dp += static_cast<double>(d_o[x]) * static_cast<double>(v[x]);
        ds_out[y] = dp;
        delta += p_out[y] * dp;
    }
    for (std::size_t y = 0; y < n; ++y)
        ds_out[y] = p_out[y] * (ds_out[y] - delta); // dS = P o (dP - D)
}

} // namespace

template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args, const Support& support) {
    BackwardArgs<Scalar> a = args;
    detail::validate(a,
                     support,
                     nullptr,
                     Schedule::reference,
                     MemoryModel{1},
                     "ioattn::sparse::backward_reference",
                     false,
                     Pass::backward);
    const Problem& p = a.problem;
    const Support st = support.transposed();
    // P and dS for every slice in CSR order (Z_QK doubles each per slice).
    const auto z = static_cast<std::size_t>(support.z_qk());
    std::vector<double> pr(z * static_cast<std::size_t>(p.batch_heads()));
    std::vector<double> ds(pr.size());
    const auto offset = [&](std::int64_t slice, std::int64_t i) {
        return static_cast<std::size_t>(slice) * z +
               static_cast<std::size_t>(support.row_offsets()[static_cast<std::size_t>(i)]);
    };
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int) {
        const std::int64_t slice = task / p.n_q, i = task % p.n_q;
        row_grad(a, support, slice, i, pr.data() + offset(slice, i), ds.data() + offset(slice, i));
        const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
        const auto cols = support.row(i);
        Scalar* dq = a.d_q.row(b, h, i);
        for (std::int64_t x = 0; x < p.d; ++x) { // dQ = scale dS K
            double acc = 0.0;
            for (std::size_t y = 0; y < cols.size(); ++y)
                acc += ds[offset(slice, i) + y] * static_cast<double>(a.k.row(b, g, cols[y])[x]);
            dq[x] = static_cast<Scalar>(p.scale * acc);
        }
    });
    // Position of (i, j) in CSR order: row offset + rank of j in row i.
    const auto position = [&](std::int64_t i, std::int64_t j) {
        const auto row = support.row(i);
        return static_cast<std::size_t>(std::lower_bound(row.begin(), row.end(), j) - row.begin());
    };
    parallel_for_tiles(p.batch * p.kv_heads * p.n_k, [&](std::int64_t task, int) {
        const std::int64_t kv = task / p.n_k, j = task % p.n_k;
        const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
        std::fill_n(a.d_k.row(b, g, j), p.d, Scalar(0));
        std::fill_n(a.d_v.row(b, g, j), p.d_v, Scalar(0));
        for (std::int64_t x = 0; x < std::max(p.d, p.d_v); ++x) {
            double acc_k = 0.0, acc_v = 0.0;
            for (std::int64_t hh = 0; hh < p.group(); ++hh) {
                const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
                for (const std::int64_t i : st.row(j)) {
                    const std::size_t at = offset(slice, i) + position(i, j);
                    if (x < p.d) // dK = scale dS^T Q
                        acc_k += ds[at] * static_cast<double>(a.q.row(b, h, i)[x]);
                    if (x < p.d_v) // dV = P^T dO
                        acc_v += pr[at] * static_cast<double>(a.d_o.row(b, h, i)[x]);
                }
            }
            if (x < p.d)
                a.d_k.row(b, g, j)[x] = static_cast<Scalar>(p.scale * acc_k);
            if (x < p.d_v)
                a.d_v.row(b, g, j)[x] = static_cast<Scalar>(acc_v);
        }
    });
}

template void backward_reference<float>(const BackwardArgs<float>&, const Support&);
template void backward_reference<double>(const BackwardArgs<double>&, const Support&);

} // namespace ioattn::sparse
