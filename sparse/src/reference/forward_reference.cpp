// ioattn::sparse::forward_reference: the oracle over Omega, double accumulation.
// Per (batch, head, query row i) over its allowed keys j: s_j = scale q_i . k_j (a sparse dot
// product where an operand is stored sparse), m = max s, p_j = exp(s_j - m) (1 where
// s_j = m = +inf), o_i = sum p_j v_j / sum p_j, L_i = m + ln sum p. A row with no allowed key:
// o_i = 0, L_i = -inf. I/O: not modelled. Flops: 2*Z_QK*(d + d_v) per head (fewer with sparse
// operands). Parallel over (batch, head, row); thread-count invariant.
// Tests: tests/sparse/forward_test.cpp

#include "kernels/common/row_products.hpp"
#include "kernels/common/validate.hpp"

#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <cmath>
#include <limits>

namespace ioattn::sparse {

namespace {

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
        s[n] = p.scale * detail::dot(src.q, b, h, i, src.k, g, j);
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
    for (std::size_t y = 0; y < n; ++y)
        detail::axpy(o, s[y], src.v, b, g, cols[y]);
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
    CallMemory alloc(kWhere);
    const kernels::Workspace<double> ws(max_concurrency(), p.n_k + p.d_v);
    alloc.allocate();
    parallel_for_tiles(p.batch_heads() * p.n_q, [&](std::int64_t task, int worker) {
        double* scratch = ws.slab(worker);
        reference_row(a, src, support, task / p.n_q, task % p.n_q, scratch, scratch + p.n_k);
    });
}

template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args, const Support& support) {
    forward_reference(args, support, SparseInputs<Scalar>{});
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void forward_reference<Scalar>(const ForwardArgs<Scalar>&, const Support&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void forward_reference<Scalar>(                                                       \
        const ForwardArgs<Scalar>&, const Support&, const SparseInputs<Scalar>&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
