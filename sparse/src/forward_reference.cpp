// ioattn::sparse::forward_reference: the oracle over Omega, double accumulation.
// Per (batch, head, query row i) over its allowed keys j: s_j = scale q_i . k_j, m = max s,
// p_j = exp(s_j - m) (1 where s_j = m = +inf), o_i = sum p_j v_j / sum p_j, L_i = m + ln sum p.
// A row with no allowed key: o_i = 0, L_i = -inf. I/O: not modelled.
// Flops: 2*Z_QK*(d + d_v) per head. Parallel over (batch, head, row); thread-count invariant.
// Tests: tests/sparse/forward_test.cpp

#include "validate.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <cmath>
#include <limits>

namespace ioattn::sparse {

namespace {

template <typename Scalar>
void reference_row(const ForwardArgs<Scalar>& a,
                   const Support& sup,
                   std::int64_t slice,
                   std::int64_t i,
                   double* s) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const auto cols = sup.row(i);
    const Scalar* q = a.q.row(b, h, i);
    // --- s = scale q K^T over Omega, m = max s ---
    double m = -std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    for (const std::int64_t j : cols) {
        const Scalar* k = a.k.row(b, g, j);
        double dot = 0.0;
        for (std::int64_t x = 0; x < p.d; ++x)
            dot += static_cast<double>(q[x]) * static_cast<double>(k[x]);
        s[n] = p.scale * dot;
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
    Scalar* o = a.o.row(b, h, i);
    for (std::int64_t x = 0; x < p.d_v; ++x) {
        double acc = 0.0;
        for (std::size_t y = 0; y < n; ++y)
            acc += s[y] * static_cast<double>(a.v.row(b, g, cols[y])[x]);
        o[x] = l == 0.0 ? Scalar(0) : static_cast<Scalar>(acc / l);
    }
    *a.lse.row(b, h, i) = l == 0.0 ? -std::numeric_limits<Scalar>::infinity()
                                   : static_cast<Scalar>(m + std::log(l));
}

} // namespace

template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args, const Support& support) {
    ForwardArgs<Scalar> a = args;
    detail::validate(a, support, nullptr, Schedule::reference, MemoryModel{1},
                     "ioattn::sparse::forward_reference", false);
    const Problem& p = a.problem;
    const kernels::Workspace<double> ws(max_concurrency(), p.n_k);
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int worker) {
        reference_row(a, support, task / p.n_q, task % p.n_q, ws.slab(worker));
    });
}

template void forward_reference<float>(const ForwardArgs<float>&, const Support&);
template void forward_reference<double>(const ForwardArgs<double>&, const Support&);

} // namespace ioattn::sparse
