// ioattn::dense::backward_reference: the gradient oracle. Materialized P and dS, double
// accumulation, obvious loops (docs/design.md section 4.1).
// Per (batch, head, query row i) with n_i = visible_keys(i) keys and L_i > -inf:
//   D_i = dO_i . O_i;  for j < n_i: p_ij = exp(scale * q_i . k_j - L_i), dp_ij = dO_i . v_j,
//   ds_ij = p_ij (dp_ij - D_i);  dQ_i = scale * sum_j ds_ij k_j.
// Per (batch, kv head g, key j), over the query heads h of the group in order, then the rows i
// that see j in order: dK_j = scale * sum ds_ij q_i, dV_j = sum p_ij dO_i.
// A row with no visible key (or L_i = -inf) contributes nothing: dQ_i = 0 and no term in dK, dV;
// masked pairs are never formed, so NaN in a hidden row of K, V or dO cannot leak.
// I/O: not modelled (the reference has no schedule). Workspace: batch*heads*n_q doubles for D,
// d + d_v doubles per worker.
// Flops: about 4*allowed_pairs*(d + d_v) per slice (S and dP are formed twice, once per pass).
// Parallel over (slice, row) for D and dQ, then over (kv slice, key) for dK and dV; every output
// element is written by one task in a fixed order, so results are thread-count invariant.
// Tests: tests/lib/dense/backward_reference_test.cpp

#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <cmath>
#include <limits>

namespace ioattn::dense {

namespace {

/// Indices of one query row: batch bb, head h, its kv head g, row i.
struct Row {
    std::int64_t bb, h, g, i;
};

template <typename Scalar>
double dot(const Scalar* x, const Scalar* y, std::int64_t n) {
    double acc = 0.0;
    for (std::int64_t z = 0; z < n; ++z)
        acc += static_cast<double>(x[z]) * static_cast<double>(y[z]);
    return acc;
}

/// Whether row r takes part at all (a visible key and a finite-or-NaN L).
template <typename Scalar>
bool row_active(const BackwardArgs<Scalar>& a, const Row& r) {
    const double lse = static_cast<double>(*a.lse.row(r.bb, r.h, r.i));
    return a.problem.visible_keys(r.i) > 0 && lse != -std::numeric_limits<double>::infinity();
}

/// p_ij and ds_ij of one visible pair (row r, key j), given D_i.
template <typename Scalar>
void pair_terms(const BackwardArgs<Scalar>& a,
                const Row& r,
                std::int64_t j,
                double delta,
                double& prob,
                double& d_score) {
    const Problem& p = a.problem;
    // --- p = exp(scale * q . k - L) ---
    const double s = p.scale * dot(a.q.row(r.bb, r.h, r.i), a.k.row(r.bb, r.g, j), p.d);
    prob = std::exp(s - static_cast<double>(*a.lse.row(r.bb, r.h, r.i)));
    // --- dp = dO . v, ds = p (dp - D) ---
    const double dp = dot(a.d_o.row(r.bb, r.h, r.i), a.v.row(r.bb, r.g, j), p.d_v);
    d_score = prob * (dp - delta);
}

/// D_i = dO_i . O_i for one row.
template <typename Scalar>
void delta_row(const BackwardArgs<Scalar>& a, const Row& r, double* delta) {
    const Problem& p = a.problem;
    *delta =
        dot(a.d_o.row(r.bb, r.h, r.i), static_cast<const Scalar*>(a.o.row(r.bb, r.h, r.i)), p.d_v);
}

/// dQ_i = scale * sum_j ds_ij k_j for one row; acc holds d doubles.
template <typename Scalar>
void dq_row(const BackwardArgs<Scalar>& a, const Row& r, double delta, double* acc) {
    const Problem& p = a.problem;
    for (std::int64_t x = 0; x < p.d; ++x)
        acc[x] = 0.0;
    if (row_active(a, r)) {
        for (std::int64_t j = 0; j < p.visible_keys(r.i); ++j) {
            double prob = 0.0, d_score = 0.0;
            pair_terms(a, r, j, delta, prob, d_score);
            const Scalar* k = a.k.row(r.bb, r.g, j);
            for (std::int64_t x = 0; x < p.d; ++x)
                acc[x] += d_score * static_cast<double>(k[x]);
        }
    }
    Scalar* dq = a.d_q.row(r.bb, r.h, r.i);
    for (std::int64_t x = 0; x < p.d; ++x)
        dq[x] = static_cast<Scalar>(p.scale * acc[x]);
}

/// dK_j = scale * sum ds_ij q_i and dV_j = sum p_ij dO_i over the group's heads and the rows that
/// see key j; acc holds d + d_v doubles.
template <typename Scalar>
void dkv_row(const BackwardArgs<Scalar>& a,
             std::int64_t bb,
             std::int64_t g,
             std::int64_t j,
             const double* delta,
             double* acc) {
    const Problem& p = a.problem;
    double* dk = acc;
    double* dv = acc + p.d;
    for (std::int64_t x = 0; x < p.d + p.d_v; ++x)
        acc[x] = 0.0;
    for (std::int64_t h = g * p.group(); h < (g + 1) * p.group(); ++h) {
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const Row r{bb, h, g, i};
            if (j >= p.visible_keys(i) || !row_active(a, r))
                continue; // masked pair: never formed
            double prob = 0.0, d_score = 0.0;
            pair_terms(a, r, j, delta[(bb * p.heads + h) * p.n_q + i], prob, d_score);
            const Scalar* q = a.q.row(bb, h, i);
            const Scalar* d_o = a.d_o.row(bb, h, i);
            for (std::int64_t x = 0; x < p.d; ++x)
                dk[x] += d_score * static_cast<double>(q[x]);
            for (std::int64_t x = 0; x < p.d_v; ++x)
                dv[x] += prob * static_cast<double>(d_o[x]);
        }
    }
    Scalar* out_k = a.d_k.row(bb, g, j);
    Scalar* out_v = a.d_v.row(bb, g, j);
    for (std::int64_t x = 0; x < p.d; ++x)
        out_k[x] = static_cast<Scalar>(p.scale * dk[x]);
    for (std::int64_t x = 0; x < p.d_v; ++x)
        out_v[x] = static_cast<Scalar>(dv[x]);
}

} // namespace

template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args) {
    BackwardArgs<Scalar> a = args;
    constexpr const char* kWhere = "ioattn::dense::backward_reference";
    a.validate(kWhere);
    const Problem& p = a.problem;
    const std::int64_t rows = p.batch_heads() * p.n_q;
    CallMemory alloc(kWhere);
    const kernels::Workspace<double> delta(1, rows);
    const kernels::Workspace<double> ws(max_concurrency(), p.d + p.d_v);
    alloc.allocate();
    double* const d = delta.slab(0);
    const auto row_of = [&](std::int64_t task) {
        const std::int64_t slice = task / p.n_q, h = slice % p.heads;
        return Row{slice / p.heads, h, h / p.group(), task % p.n_q};
    };
    // --- D = rowsum(dO o O) ---
    parallel_for_tiles(rows, [&](std::int64_t task, int) { delta_row(a, row_of(task), d + task); });
    // --- dQ = scale * dS K ---
    parallel_for_tiles(rows, [&](std::int64_t task, int worker) {
        dq_row(a, row_of(task), d[task], ws.slab(worker));
    });
    // --- dK = scale * dS^T Q, dV = P^T dO ---
    const std::int64_t keys = p.batch * p.kv_heads * p.n_k;
    parallel_for_tiles(keys, [&](std::int64_t task, int worker) {
        const std::int64_t kv_slice = task / p.n_k;
        dkv_row(a, kv_slice / p.kv_heads, kv_slice % p.kv_heads, task % p.n_k, d, ws.slab(worker));
    });
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void backward_reference<Scalar>(const BackwardArgs<Scalar>&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
