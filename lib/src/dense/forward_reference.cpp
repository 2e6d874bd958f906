// ioattn::dense::forward_reference: the oracle. Materialized scores, double accumulation.
// Per (batch, head, query row i): s_j = scale * q_i . k_j over visible j (double),
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j, o_i = sum_j p_j v_j / l, L_i = m + ln l.
// A row with no visible key: o_i = 0, L_i = -inf. A +inf score takes the whole weight
// (exp(s - m) := 1 where s = m = +inf), the limit of the softmax.
// I/O: not modelled (the reference has no schedule). Workspace: n_k doubles per worker.
// Flops: 2*allowed_pairs*(d + d_v). Parallel over (batch, head, row); thread-count invariant.
// Tests: tests/lib/dense/forward_reference_test.cpp

#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <cmath>
#include <limits>

namespace ioattn::dense {

namespace {

/// One query row.
template <typename Scalar>
void reference_row(const ForwardArgs<Scalar>& a, std::int64_t slice, std::int64_t i, double* s) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t n = p.visible_keys(i);
    const Scalar* q = a.q.row(b, h, i);
    // --- s = scale * q K^T, m = max s ---
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
        const Scalar* k = a.k.row(b, g, j);
        double dot = 0.0;
        for (std::int64_t x = 0; x < p.d; ++x)
            dot += static_cast<double>(q[x]) * static_cast<double>(k[x]);
        s[j] = p.scale * dot;
        if (s[j] > m)
            m = s[j];
    }
    const double m_safe = std::isinf(m) && m < 0 ? 0.0 : m;
    // --- p = exp(s - m), l = sum p ---
    double l = 0.0;
    for (std::int64_t j = 0; j < n; ++j) {
        s[j] = s[j] == m_safe ? 1.0 : std::exp(s[j] - m_safe);
        l += s[j];
    }
    // --- o = p V / l, L = m + ln l ---
    Scalar* o = a.o.row(b, h, i);
    for (std::int64_t x = 0; x < p.d_v; ++x) {
        double acc = 0.0;
        for (std::int64_t j = 0; j < n; ++j)
            acc += s[j] * static_cast<double>(a.v.row(b, g, j)[x]);
        o[x] = l == 0.0 ? Scalar(0) : static_cast<Scalar>(acc / l);
    }
    *a.lse.row(b, h, i) =
        l == 0.0 ? -std::numeric_limits<Scalar>::infinity() : static_cast<Scalar>(m + std::log(l));
}

} // namespace

template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args) {
    ForwardArgs<Scalar> a = args;
    constexpr const char* kWhere = "ioattn::dense::forward_reference";
    a.validate(kWhere);
    const Problem& p = a.problem;
    CallMemory alloc(kWhere);
    const kernels::Workspace<double> ws(max_concurrency(), p.n_k);
    alloc.allocate();
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int worker) {
        reference_row(a, task / p.n_q, task % p.n_q, ws.slab(worker));
    });
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void forward_reference<Scalar>(const ForwardArgs<Scalar>&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
