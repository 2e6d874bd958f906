// ioattn::sparse::forward_reference: the oracle over Omega, double accumulation.
// Per (batch, head, query row i) over its allowed keys j: s_j = scale q_i . k_j (a sparse dot
// product where an operand is stored sparse), m = max s, p_j = exp(s_j - m) (1 where
// s_j = m = +inf), o_i = sum p_j v_j / sum p_j, L_i = m + ln sum p. A row with no allowed key:
// o_i = 0, L_i = -inf. I/O: not modelled. Flops: 2*Z_QK*(d + d_v) per head (fewer with sparse
// operands). Parallel over (batch, head, row); thread-count invariant.
// Tests: tests/sparse/forward_test.cpp

#include "row_source.hpp"
#include "validate.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <cmath>
#include <limits>

namespace ioattn::sparse {

namespace {

/// x . y in double for row (b, h, i) of x and row (b, g, j) of y; merges when both are sparse.
template <typename Scalar>
double dot(const detail::RowSource<Scalar>& x,
           std::int64_t b,
           std::int64_t h,
           std::int64_t i,
           const detail::RowSource<Scalar>& y,
           std::int64_t g,
           std::int64_t j) {
    const auto entries = [](const detail::RowSource<Scalar>& s, std::int64_t r) {
        return std::pair{s.sparse->row_indices(r), s.sparse->row_values(r)};
    };
    double acc = 0.0;
    if (x.sparse != nullptr && y.sparse != nullptr) {
        const auto [xi, xv] = entries(x, x.index(b, h, i));
        const auto [yi, yv] = entries(y, y.index(b, g, j));
        for (std::size_t u = 0, v = 0; u < xi.size() && v < yi.size();) {
            if (xi[u] < yi[v]) {
                ++u;
            } else if (yi[v] < xi[u]) {
                ++v;
            } else {
                acc += static_cast<double>(xv[u++]) * static_cast<double>(yv[v++]);
            }
        }
        return acc;
    }
    if (x.sparse != nullptr || y.sparse != nullptr) {
        const bool xs = x.sparse != nullptr;
        const auto [si, sv] = xs ? entries(x, x.index(b, h, i)) : entries(y, y.index(b, g, j));
        const Scalar* d = xs ? y.dense.row(b, g, j) : x.dense.row(b, h, i);
        for (std::size_t u = 0; u < si.size(); ++u)
            acc += static_cast<double>(sv[u]) * static_cast<double>(d[si[u]]);
        return acc;
    }
    const Scalar* u = x.dense.row(b, h, i);
    const Scalar* v = y.dense.row(b, g, j);
    for (std::int64_t z = 0; z < x.dense.cols; ++z)
        acc += static_cast<double>(u[z]) * static_cast<double>(v[z]);
    return acc;
}

template <typename Scalar>
void reference_row(const ForwardArgs<Scalar>& a,
                   const detail::Operands<Scalar>& src,
                   const Support& sup,
                   std::int64_t slice,
                   std::int64_t i,
                   double* s,
                   double* o) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const auto cols = sup.row(i);
    // --- s = scale q K^T over Omega, m = max s ---
    double m = -std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    for (const std::int64_t j : cols) {
        s[n] = p.scale * dot(src.q, b, h, i, src.k, g, j);
        m = s[n] > m ? s[n] : m;
        ++n;
    }
    const double m_safe = std::isinf(m) && m < 0 ? 0.0 : m;
    // --- p = exp(s - m), l = sum p ---
    double l = 0.0;
    for (std::size_t y = 0; y < n; ++y) {
        s[y] = s[y] == m_safe ? 1.0 : std::exp(s[y] - m_safe);
        l += s[y];
    }
    // --- o = p V / l, L = m + ln l ---
    std::fill(o, o + p.d_v, 0.0);
    for (std::size_t y = 0; y < n; ++y) {
        if (src.v.sparse != nullptr) {
            const std::int64_t r = src.v.index(b, g, cols[y]);
            const auto idx = src.v.sparse->row_indices(r);
            const auto val = src.v.sparse->row_values(r);
            for (std::size_t e = 0; e < idx.size(); ++e)
                o[idx[e]] += s[y] * static_cast<double>(val[e]);
        } else {
            const Scalar* v = a.v.row(b, g, cols[y]);
            for (std::int64_t x = 0; x < p.d_v; ++x)
                o[x] += s[y] * static_cast<double>(v[x]);
        }
    }
    Scalar* out = a.o.row(b, h, i);
    for (std::int64_t x = 0; x < p.d_v; ++x)
        out[x] = l == 0.0 ? Scalar(0) : static_cast<Scalar>(o[x] / l);
    *a.lse.row(b, h, i) =
        l == 0.0 ? -std::numeric_limits<Scalar>::infinity() : static_cast<Scalar>(m + std::log(l));
}

} // namespace

template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args,
                       const Support& support,
                       const SparseInputs<Scalar>& inputs) {
    constexpr const char* kWhere = "ioattn::sparse::forward_reference";
    ForwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src = detail::validate_inputs(a, support, inputs, kWhere, false);
    detail::validate(a, support, nullptr, Schedule::reference, MemoryModel{1}, kWhere, true);
    const Problem& p = a.problem;
    const kernels::Workspace<double> ws(max_concurrency(), p.n_k + p.d_v);
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int worker) {
        double* scratch = ws.slab(worker);
        reference_row(a, src, support, task / p.n_q, task % p.n_q, scratch, scratch + p.n_k);
    });
}

template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args, const Support& support) {
    forward_reference(args, support, SparseInputs<Scalar>{});
}

template void forward_reference<float>(const ForwardArgs<float>&, const Support&);
template void forward_reference<double>(const ForwardArgs<double>&, const Support&);
template void
forward_reference<float>(const ForwardArgs<float>&, const Support&, const SparseInputs<float>&);
template void
forward_reference<double>(const ForwardArgs<double>&, const Support&, const SparseInputs<double>&);

} // namespace ioattn::sparse
