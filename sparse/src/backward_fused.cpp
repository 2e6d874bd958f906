// ioattn::sparse::backward_fused: fused sparse backward (FlashAttention-2 over Omega, dQ sweep)
// Per (batch, head): dQ, dK, dV of O = softmax(scale*Q K^T on Omega) V. Reference:
// backward_reference.cpp. R = tiling.rows (resident block, also cut by nonzeros), C = tiling.cols.
//   pass 0, parallel for each query block i: read O_i, dO_i; D_i = rowsum(dO_i o O_i); write D_i
//   pass A, parallel for each (kv head, key block j of Omega^T's plan): read K_j, V_j
//     for each query head of the group, for each chunk of C queries that see a key of j:
//       read (gather) Q, dO rows, L, D;  S = scale Q K_j^T on Omega; P = exp(S - L)
//       dV_j += P^T dO; dP = dO V_j^T; dS = P o (dP - D); dK_j += scale dS^T Q
//     write dK_j, dV_j
//   pass B, parallel for each query block i of Omega's plan: read Q_i, dO_i, L_i, D_i
//     for each chunk of C keys the block sees: read (gather) K, V rows; S, P, dP, dS as above
//       (keys x queries); dQ_i += scale dS K
//     write dQ_i
// Resident: max(pass 0: r(2 d_v + 1), pass A: r(2d + 2d_v) + c(d + d_v + 2) + 2rc,
//               pass B: r(2d + d_v + 2) + c(d + d_v) + 2rc) <= M, c = min(C, streamed set)
// I/O = io_cost_backward_fused (per head): 2 n_q d_v + n_q (D) + sum_j |queries(j)|(d + d_v + 2)
//   + n_q(d + d_v + 2) + sum_i |keys(i)|(d + d_v) + n_q d, and n_k(d + d_v) read and written per
//   kv head; with the full or causal pattern it equals ioattn::io_cost_backward_fused.
// Masked entries: P = dS = 0; a gathered chunk with a non-finite value multiplies only allowed
// pairs. One task per block; no atomics; thread-count invariant.
// Sparse inputs (Q, K, V as CSR rows over d, SparseInputs): each read of a sparse operand's
// rows counts their stored words (nnz instead of d or d_v per row; io_cost_backward_fused with
// the inputs); rows are scattered into the same dense buffers, so residency is unchanged, and a
// scattered chunk is non-finite exactly when a stored value is. dQ, dK, dV are written dense.
// Tests: tests/sparse/backward_test.cpp, sparse_inputs_test.cpp

#include "plan.hpp"
#include "row_source.hpp"
#include "validate.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace ioattn::sparse {

namespace {

using kernels::Simd;

std::int64_t padded(std::int64_t n, int lanes) {
    return (n + lanes - 1) / lanes * lanes;
}

/// Per-worker scratch: packed resident operands (d x rp, d_v x rp), score tiles (C x rp), the
/// transposed accumulators (d x rp, d_v x rp: resident rows are lanes, as in the dense
/// backward), gathered streamed rows (C x d, C x d_v), lanes (3 x cp).
template <typename Scalar>
struct Scratch {
    std::int64_t rp = 0;
    Scalar *ta = nullptr, *tb = nullptr, *s = nullptr, *dp = nullptr, *acc_a = nullptr,
           *acc_b = nullptr, *ga = nullptr, *gb = nullptr, *l2 = nullptr, *dd = nullptr,
           *ones = nullptr;

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = padded(t.rows, Simd<Scalar>::kLanes);
        const std::int64_t cp = padded(std::max(t.cols, t.rows), Simd<Scalar>::kLanes);
        return 2 * (p.d + p.d_v) * rp + 2 * cp * rp + t.cols * (p.d + p.d_v) + 3 * cp;
    }

    Scratch() = default;

    Scratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(padded(t.rows, Simd<Scalar>::kLanes)) {
        const std::int64_t cp = padded(std::max(t.cols, t.rows), Simd<Scalar>::kLanes);
        ta = base;
        tb = ta + p.d * rp;
        s = tb + p.d_v * rp;
        dp = s + cp * rp;
        acc_a = dp + cp * rp;
        acc_b = acc_a + p.d * rp;
        ga = acc_b + p.d_v * rp;
        gb = ga + t.cols * p.d;
        l2 = gb + t.cols * p.d_v;
        dd = l2 + cp;
        ones = dd + cp;
        std::fill(ones, ones + cp, Scalar(1));
    }
};

/// Streamed rows idx[0, c) of a view: read in place when they are consecutive, else gathered
/// into g (c x cols); `finite` says whether every value is finite.
template <typename Scalar>
detail::Rows<Scalar> stream_rows(const detail::RowSource<Scalar>& src,
                                 std::int64_t b,
                                 std::int64_t h,
                                 const std::int64_t* idx,
                                 std::int64_t c,
                                 Scalar* g) {
    detail::Rows<Scalar> rows;
    const TensorView<const Scalar>& x = src.dense;
    if (src.sparse != nullptr) { // scattered into g
        rows.p = g;
        rows.ld = x.cols;
        for (std::int64_t y = 0; y < c; ++y)
            rows.finite = src.copy(b, h, idx[y], Scalar(1), g + y * x.cols, 1) && rows.finite;
        return rows;
    }
    const bool direct = idx[c - 1] - idx[0] + 1 == c;
    rows.p = direct ? x.row(b, h, idx[0]) : g;
    rows.ld = direct ? x.stride_row : x.cols;
    if (!direct)
        for (std::int64_t y = 0; y < c; ++y)
            std::copy_n(x.row(b, h, idx[y]), x.cols, g + y * x.cols);
    rows.finite = kernels::all_finite(rows.p, rows.ld, c, x.cols);
    return rows;
}

/// acc^T[:][x] += sum over allowed (x, y) of t[y][x] g[y][:] (the careful path for non-finite
/// streamed rows; acc^T at stride ld): `allowed(x, y)` says whether lane x and chunk entry y
/// form a pair of Omega.
template <typename Scalar, typename Allowed>
void accumulate_allowed(const Scalar* t,
                        std::int64_t ld,
                        const detail::Rows<Scalar>& g,
                        std::int64_t cols,
                        std::int64_t n_lanes,
                        std::int64_t c,
                        Scalar* acc,
                        Allowed allowed) {
    for (std::int64_t x = 0; x < n_lanes; ++x)
        for (std::int64_t y = 0; y < c; ++y)
            if (allowed(x, y))
                for (std::int64_t z = 0; z < cols; ++z)
                    acc[z * ld + x] += t[y * ld + x] * g.p[y * g.ld + z];
}

// --- pass 0: D_i = rowsum(dO_i o O_i) ---
template <typename Scalar, typename Counter>
void delta_block(const BackwardArgs<Scalar>& a,
                 const detail::FusedPlan& plan,
                 std::int64_t slice,
                 std::int64_t blk,
                 Scalar* delta,
                 Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    io.acquire(r * (2 * p.d_v + 1));
    io.read({Operand::o, slice, i0, r, 0, p.d_v});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    if constexpr (Counter::kComputes)
        for (std::int64_t x = 0; x < r; ++x)
            delta[slice * p.n_q + i0 + x] =
                kernels::row_delta(a.o.row(b, h, i0 + x), a.d_o.row(b, h, i0 + x), p.d_v);
    io.write({Operand::delta, slice, i0, r, 0, 1});
    io.release(r * (2 * p.d_v + 1));
}

// --- pass A: a key block resident with dK, dV; the queries that see it streamed ---
template <typename Scalar, typename Counter>
void key_block(const BackwardArgs<Scalar>& a,
               const detail::Operands<Scalar>& src,
               const Support& st,
               const detail::FusedPlan& plan,
               const Tiling& t,
               std::int64_t kv_slice,
               std::int64_t blk,
               const Scalar* delta,
               Scalar* base,
               std::int64_t* cursor,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv_slice / p.kv_heads, g = kv_slice % p.kv_heads;
    const std::int64_t j0 = plan.row0(blk), r = plan.rows(blk);
    const auto queries = plan.keys_of(blk);
    const auto nq = static_cast<std::int64_t>(queries.size());
    const std::int64_t cs = std::min(t.cols, nq);
    const std::int64_t resident = r * (2 * p.d + 2 * p.d_v) + cs * (p.d + p.d_v + 2) + 2 * r * cs;
    io.acquire(resident);
    detail::read_rows(io, Operand::k, kv_slice, src.k, b, g, j0, r);
    detail::read_rows(io, Operand::v, kv_slice, src.v, b, g, j0, r);
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = w.rp / Simd<Scalar>::kLanes;
        detail::pack_transposed(
            src.k, b, g, j0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.ta, w.rp);
        detail::pack_transposed(src.v, b, g, j0, r, Scalar(1), w.tb, w.rp);
        std::fill(w.acc_a, w.acc_a + (p.d + p.d_v) * w.rp, Scalar(0));
    }
    Scalar* dkt = w.acc_a;
    Scalar* dvt = w.acc_b;
    detail::RowCursors cur;
    if constexpr (Counter::kComputes)
        cur = detail::row_cursors(plan, j0, r, cursor);
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
        if constexpr (Counter::kComputes)
            std::fill(cur.pos, cur.pos + r, std::int64_t{0});
        for (std::int64_t x0 = 0; x0 < nq; x0 += t.cols) {
            const std::int64_t c = std::min(t.cols, nq - x0);
            const std::int64_t* qc = queries.data() + x0;
            detail::read_gathered(io, Operand::q, slice, src.q, b, h, qc, c);
            io.read({Operand::d_o, slice, qc[0], c, 0, p.d_v});
            io.read({Operand::lse, slice, qc[0], c, 0, 1});
            io.read({Operand::delta, slice, qc[0], c, 0, 1});
            if constexpr (!Counter::kComputes)
                continue;
            const detail::Rows<Scalar> qr = stream_rows(src.q, b, h, qc, c, w.ga);
            const detail::Rows<Scalar> dor =
                stream_rows(detail::RowSource<Scalar>{a.d_o, nullptr}, b, h, qc, c, w.gb);
            const bool finite = qr.finite && dor.finite;
            for (std::int64_t y = 0; y < c; ++y) {
                w.l2[y] = kernels::lse2(*a.lse.row(b, h, qc[y]));
                w.dd[y] = delta[slice * p.n_q + qc[y]];
            }
            // --- S = scale Q K_j^T on Omega (queries x keys), P = exp(S - L) ---
            detail::streamed_scores(src.q, b, h, qc, qr, c, w.ta, w.rp, p.d, n_vec, w.s);
            const bool partial = detail::mask_chunk(st, j0, r, qc, c, cur, w.s, w.rp);
            kernels::probabilities(w.s, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.l2);
            // --- dP = dO V_j^T, dS = P o (dP - D) ---
            kernels::scores_block(dor.p, dor.ld, c, w.tb, w.rp, p.d_v, n_vec, w.dp, w.rp);
            kernels::softmax_grad<Scalar, true>(
                w.s, w.dp, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.dd);
            // --- dV_j^T += dO^T P, dK_j^T += Q^T dS (scale at the end) ---
            if (finite || !partial) {
                kernels::pvt_block(w.s, w.rp, dor.p, dor.ld, c, p.d_v, n_vec, w.ones, dvt, w.rp);
                detail::streamed_accumulate(
                    src.q, b, h, qc, qr, c, w.dp, w.rp, p.d, n_vec, w.ones, dkt);
            } else {
                const auto allowed = [&](std::int64_t x, std::int64_t y) {
                    return st.contains(j0 + x, qc[y]);
                };
                accumulate_allowed(w.s, w.rp, dor, p.d_v, r, c, dvt, allowed);
                accumulate_allowed(w.dp, w.rp, qr, p.d, r, c, dkt, allowed);
            }
        }
    }
    if constexpr (Counter::kComputes) {
        const auto scale = static_cast<Scalar>(p.scale);
        kernels::unpack_transposed(
            dkt, w.rp, [scale](std::int64_t) { return scale; }, a.d_k, b, g, j0, r);
        kernels::unpack_transposed(
            dvt, w.rp, [](std::int64_t) { return Scalar(1); }, a.d_v, b, g, j0, r);
    }
    io.write({Operand::d_k, kv_slice, j0, r, 0, p.d});
    io.write({Operand::d_v, kv_slice, j0, r, 0, p.d_v});
    io.release(resident);
}

// --- pass B: a query block resident with dQ; the keys it sees streamed ---
template <typename Scalar, typename Counter>
void query_block(const BackwardArgs<Scalar>& a,
                 const detail::Operands<Scalar>& src,
                 const Support& s,
                 const detail::FusedPlan& plan,
                 const Tiling& t,
                 std::int64_t slice,
                 std::int64_t blk,
                 const Scalar* delta,
                 Scalar* base,
                 std::int64_t* cursor,
                 Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = b * p.kv_heads + g;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    const auto keys = plan.keys_of(blk);
    const auto nk = static_cast<std::int64_t>(keys.size());
    const std::int64_t cs = std::min(t.cols, nk);
    const std::int64_t resident = r * (2 * p.d + p.d_v + 2) + cs * (p.d + p.d_v) + 2 * r * cs;
    io.acquire(resident);
    detail::read_rows(io, Operand::q, slice, src.q, b, h, i0, r);
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    io.read({Operand::lse, slice, i0, r, 0, 1});
    io.read({Operand::delta, slice, i0, r, 0, 1});
    detail::RowCursors cur;
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = w.rp / Simd<Scalar>::kLanes;
        detail::pack_transposed(
            src.q, b, h, i0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.ta, w.rp);
        kernels::pack_transposed(a.d_o, b, h, i0, r, Scalar(1), w.tb, w.rp);
        std::fill(w.acc_a, w.acc_a + p.d * w.rp, Scalar(0));
        cur = detail::row_cursors(plan, i0, r, cursor);
        for (std::int64_t x = 0; x < w.rp; ++x) {
            w.l2[x] = x < r ? kernels::lse2(*a.lse.row(b, h, i0 + x))
                            : std::numeric_limits<Scalar>::infinity();
            w.dd[x] = x < r ? delta[slice * p.n_q + i0 + x] : Scalar(0);
        }
    }
    for (std::int64_t x0 = 0; x0 < nk; x0 += t.cols) {
        const std::int64_t c = std::min(t.cols, nk - x0);
        const std::int64_t* kc = keys.data() + x0;
        detail::read_gathered(io, Operand::k, kv_slice, src.k, b, g, kc, c);
        detail::read_gathered(io, Operand::v, kv_slice, src.v, b, g, kc, c);
        if constexpr (!Counter::kComputes)
            continue;
        const detail::Rows<Scalar> kr = stream_rows(src.k, b, g, kc, c, w.ga);
        const detail::Rows<Scalar> vr = stream_rows(src.v, b, g, kc, c, w.gb);
        const bool finite = kr.finite;
        // --- S^T = scale K Q_i^T on Omega (keys x queries), P^T = exp(S^T - L) ---
        detail::streamed_scores(src.k, b, g, kc, kr, c, w.ta, w.rp, p.d, n_vec, w.s);
        const bool partial = detail::mask_chunk(s, i0, r, kc, c, cur, w.s, w.rp);
        kernels::probabilities(w.s, w.rp, c, n_vec, w.l2, static_cast<const Scalar*>(nullptr));
        // --- dP^T = V dO_i^T, dS^T = P^T o (dP^T - D) ---
        detail::streamed_scores(src.v, b, g, kc, vr, c, w.tb, w.rp, p.d_v, n_vec, w.dp);
        kernels::softmax_grad<Scalar, true>(
            w.s, w.dp, w.rp, c, n_vec, w.dd, static_cast<const Scalar*>(nullptr));
        // --- dQ_i += dS K (scale at the end) ---
        if (finite || !partial)
            detail::streamed_accumulate(
                src.k, b, g, kc, kr, c, w.dp, w.rp, p.d, n_vec, w.ones, w.acc_a);
        else
            accumulate_allowed(
                w.dp, w.rp, kr, p.d, r, c, w.acc_a, [&](std::int64_t x, std::int64_t y) {
                    return s.contains(i0 + x, kc[y]);
                });
    }
    if constexpr (Counter::kComputes) { // dQ = scale dS K
        const auto scale = static_cast<Scalar>(p.scale);
        kernels::unpack_transposed(
            w.acc_a, w.rp, [scale](std::int64_t) { return scale; }, a.d_q, b, h, i0, r);
    }
    io.write({Operand::d_q, slice, i0, r, 0, p.d});
    io.release(resident);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const SparseInputs<Scalar>& inputs,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    constexpr const char* kWhere = "ioattn::sparse::backward_fused";
    BackwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src =
        detail::validate_inputs(a, support, inputs, kWhere, !Counter::kComputes);
    detail::validate(a, support, &tiling, Schedule::fused, memory, kWhere, true, Pass::backward);
    const Problem& p = a.problem;
    const Support& transposed = support.transposed();
    const detail::FusedPlan qplan = detail::FusedPlan::build(support, tiling.rows);
    const detail::FusedPlan kplan = detail::FusedPlan::build(transposed, tiling.rows);
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    const kernels::Workspace<Scalar> delta(Counter::kComputes ? 1 : 0, p.batch_heads() * p.n_q);
    const kernels::Workspace<Scalar> ws(workers, Scratch<Scalar>::words(p, tiling));
    const kernels::Workspace<std::int64_t> cursors(workers, tiling.rows);
    const std::int64_t qb = qplan.blocks(), kb = kplan.blocks();
    parallel_for_counted(p.batch_heads() * qb, counter, [&](std::int64_t task, int, Counter& io) {
        delta_block(a, qplan, task / qb, task % qb, delta.slab(0), io);
    });
    parallel_for_counted(
        p.batch * p.kv_heads * kb, counter, [&](std::int64_t task, int worker, Counter& io) {
            key_block(a,
                      src,
                      transposed,
                      kplan,
                      tiling,
                      task / kb,
                      task % kb,
                      delta.slab(0),
                      ws.slab(worker),
                      cursors.slab(worker),
                      io);
        });
    parallel_for_counted(
        p.batch_heads() * qb, counter, [&](std::int64_t task, int worker, Counter& io) {
            query_block(a,
                        src,
                        support,
                        qplan,
                        tiling,
                        task / qb,
                        task % qb,
                        delta.slab(0),
                        ws.slab(worker),
                        cursors.slab(worker),
                        io);
        });
}

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    backward_fused(args, support, SparseInputs<Scalar>{}, tiling, memory, counter);
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_fused<Scalar, Counter>(                                                 \
        const BackwardArgs<Scalar>&, const Support&, const Tiling&, const MemoryModel&, Counter&); \
    template void backward_fused<Scalar, Counter>(const BackwardArgs<Scalar>&,                     \
                                                  const Support&,                                  \
                                                  const SparseInputs<Scalar>&,                     \
                                                  const Tiling&,                                   \
                                                  const MemoryModel&,                              \
                                                  Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
