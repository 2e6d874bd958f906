// ioattn::dense::backward_fused: fused backward (FlashAttention-2, Dao 2023, Alg. 2), with dQ in a
// second sweep so that no two tasks ever add into the same output (no atomics; bitwise
// thread-count invariant). R = tiling.rows (resident block), C = tiling.cols (streamed block).
// Reference: backward_reference.cpp.
//   pass 0, parallel for each row block i: read O_i, dO_i; D_i = rowsum(dO_i o O_i); write D_i
//   pass A, parallel for each (kv head, key block j): read K_j, V_j; dK_j = dV_j = 0
//     for each query head of the group, for each query block i from first_row(j): read Q_i,
//       dO_i, L_i, D_i
//       S = scale Q_i K_j^T; P = exp(S - L_i); dV_j += P^T dO_i
//       dP = dO_i V_j^T; dS = P o (dP - D_i); dK_j += scale dS^T Q_i
//     write dK_j, dV_j
//   pass B, parallel for each row block i: read Q_i, dO_i, L_i, D_i; dQ_i = 0
//     for each key block j up to kv_end(i): read K_j, V_j
//       S, P, dP, dS as above (transposed: keys x queries); dQ_i += scale dS K_j
//     write dQ_i
// Why a second sweep: partial dQ per key block would need n_k/C copies of dQ (O(N^2 d / C)
// memory, against the O(N d) promise); atomics would break bitwise reproducibility. The sweep
// costs one more S and dP product (7 GEMM-like products instead of 5).
// Resident: max(pass 0: R(2 d_v + 1), pass A: R(2d + 2d_v) + C(d + d_v + 2) + 2RC,
//               pass B: R(2d + d_v + 2) + C(d + d_v) + 2RC) <= M
// I/O = io_cost_backward_fused. Flops: 2*allowed_pairs*(4d + 3d_v) per query head.
// Masked entries have P = dS = 0 exactly; on a mask edge whose streamed rows hold a non-finite
// value, those rows are never multiplied into a gradient that cannot see them.
// Tests: tests/lib/dense/backward_fused_test.cpp

#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace ioattn::dense {

namespace {

using kernels::Simd;
using kernels::Vec;

std::int64_t padded(std::int64_t n, int lanes) {
    return (n + lanes - 1) / lanes * lanes;
}

/// Index helpers of one query-head slice.
struct Slice {
    std::int64_t b, h, g, kv;

    Slice(const Problem& p, std::int64_t slice)
        : b(slice / p.heads)
        , h(slice % p.heads)
        , g(h / p.group())
        , kv(b * p.kv_heads + g) {}
};

// --- pass 0: D_i = rowsum(dO_i o O_i) ---
template <typename Scalar, typename Counter>
void delta_block(const BackwardArgs<Scalar>& a,
                 std::int64_t rs,
                 std::int64_t slice,
                 std::int64_t i0,
                 Scalar* delta,
                 Counter& io) {
    const Problem& p = a.problem;
    const Slice s(p, slice);
    const std::int64_t r = std::min(rs, p.n_q - i0);
    io.acquire(r * (2 * p.d_v + 1));
    io.read({Operand::o, slice, i0, r, 0, p.d_v});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = 0; x < r; ++x) {
            const Scalar* o = a.o.row(s.b, s.h, i0 + x);
            const Scalar* d_o = a.d_o.row(s.b, s.h, i0 + x);
            delta[slice * p.n_q + i0 + x] = kernels::row_delta(o, d_o, p.d_v);
        }
    }
    io.write({Operand::delta, slice, i0, r, 0, 1});
    io.release(r * (2 * p.d_v + 1));
}

/// Sets [x][from, to) to `value` for each of the n rows of a tile, with per-row ranges.
template <typename Scalar, typename Range>
void fill_ranges(Scalar* t, std::int64_t ld, std::int64_t n, Range range, Scalar value) {
    for (std::int64_t x = 0; x < n; ++x) {
        const auto [from, to] = range(x);
        std::fill(t + x * ld + from, t + x * ld + to, value);
    }
}

/// Scratch of one task: two packed transposed operands (a: d x rp, b: d_v x rp), two score tiles
/// (C x rp), two transposed accumulators (a: d x rp, b: d_v x rp; lanes are the resident rows,
/// so every gradient product is the score kernel's broadcast form, see kernels/tile.hpp), and
/// per-lane L, D and ones.
template <typename Scalar>
struct Scratch {
    std::int64_t rp = 0;
    Scalar* ta = nullptr;
    Scalar* tb = nullptr;
    Scalar* s = nullptr;
    Scalar* dp = nullptr;
    Scalar* acc_a = nullptr;
    Scalar* acc_b = nullptr;
    Scalar* l2 = nullptr;
    Scalar* dd = nullptr;
    Scalar* ones = nullptr;

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = padded(t.rows, Simd<Scalar>::kLanes);
        const std::int64_t cp = padded(t.cols, Simd<Scalar>::kLanes);
        return 2 * (p.d + p.d_v) * rp + 2 * cp * rp + 3 * std::max(rp, cp);
    }

    Scratch() = default;

    Scratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(padded(t.rows, Simd<Scalar>::kLanes)) {
        const std::int64_t cp = padded(t.cols, Simd<Scalar>::kLanes);
        ta = base;
        tb = ta + p.d * rp;
        s = tb + p.d_v * rp;
        dp = s + cp * rp;
        acc_a = dp + cp * rp;
        acc_b = acc_a + p.d * rp;
        l2 = acc_b + p.d_v * rp;
        dd = l2 + std::max(rp, cp);
        ones = dd + std::max(rp, cp);
        std::fill(ones, ones + std::max(rp, cp), Scalar(1));
    }
};

/// First query row that sees key j (n_q if none).
std::int64_t first_row(const Problem& p, std::int64_t j) {
    return p.causal ? std::clamp<std::int64_t>(j - p.causal_offset(), 0, p.n_q) : 0;
}

// --- pass A: one key block j resident with dK_j, dV_j; query blocks streamed ---
template <typename Scalar, typename Counter>
void key_block(const BackwardArgs<Scalar>& a,
               const Tiling& t,
               std::int64_t kv_slice,
               std::int64_t j0,
               const Scalar* delta,
               Scalar* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv_slice / p.kv_heads, g = kv_slice % p.kv_heads;
    const std::int64_t r = std::min(t.rows, p.n_k - j0);
    const std::int64_t cs = std::min(t.cols, p.n_q);
    const std::int64_t resident = r * (2 * p.d + 2 * p.d_v) + cs * (p.d + p.d_v + 2) + 2 * r * cs;
    io.acquire(resident);
    io.read({Operand::k, kv_slice, j0, r, 0, p.d});
    io.read({Operand::v, kv_slice, j0, r, 0, p.d_v});
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = w.rp / Simd<Scalar>::kLanes;
        kernels::pack_transposed(
            a.k, b, g, j0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.ta, w.rp);
        kernels::pack_transposed(a.v, b, g, j0, r, Scalar(1), w.tb, w.rp);
        std::fill(w.acc_a, w.acc_a + (p.d + p.d_v) * w.rp, Scalar(0));
    }
    Scalar* dkt = w.acc_a;
    Scalar* dvt = w.acc_b;
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
        for (std::int64_t i0 = first_row(p, j0); i0 < p.n_q; i0 += t.cols) {
            const std::int64_t c = std::min(t.cols, p.n_q - i0);
            io.read({Operand::q, slice, i0, c, 0, p.d});
            io.read({Operand::d_o, slice, i0, c, 0, p.d_v});
            io.read({Operand::lse, slice, i0, c, 0, 1});
            io.read({Operand::delta, slice, i0, c, 0, 1});
            io.complete({Operand::scores, slice, i0, c, j0, r});
            if constexpr (!Counter::kComputes)
                continue;
            const Scalar* q = a.q.row(b, h, i0);
            const Scalar* d_o = a.d_o.row(b, h, i0);
            const std::int64_t ldq = a.q.stride_row, ldo = a.d_o.stride_row;
            for (std::int64_t x = 0; x < c; ++x) {
                w.l2[x] = kernels::lse2(*a.lse.row(b, h, i0 + x));
                w.dd[x] = delta[slice * p.n_q + i0 + x];
            }
            const bool diagonal = p.causal && j0 + r - 1 > i0 + p.causal_offset();
            const auto hidden = [&](std::int64_t x) { // keys of query i0 + x that it cannot see
                return std::pair{
                    std::clamp<std::int64_t>(i0 + x + p.causal_offset() + 1 - j0, 0, r), w.rp};
            };
            // --- S = scale Q_i K_j^T (queries x keys), P = exp(S - L_i) ---
            kernels::scores_block(q, ldq, c, w.ta, w.rp, p.d, n_vec, w.s, w.rp);
            if (diagonal)
                fill_ranges(w.s, w.rp, c, hidden, -std::numeric_limits<Scalar>::infinity());
            kernels::probabilities(w.s, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.l2);
            // --- dP = dO_i V_j^T, dS = P o (dP - D_i) ---
            kernels::scores_block(d_o, ldo, c, w.tb, w.rp, p.d_v, n_vec, w.dp, w.rp);
            kernels::softmax_grad(
                w.s, w.dp, w.rp, c, n_vec, static_cast<const Scalar*>(nullptr), w.dd);
            if (diagonal)
                fill_ranges(w.dp, w.rp, c, hidden, Scalar(0));
            // --- dV_j^T += dO_i^T P, dK_j^T += Q_i^T dS (scale applied at the end); hidden
            // pairs have P = dS = 0: exact while the streamed rows are finite, otherwise each
            // key lane on the mask edge starts at the first query row that sees it ---
            if (!diagonal ||
                (kernels::all_finite(d_o, ldo, c, p.d_v) && kernels::all_finite(q, ldq, c, p.d))) {
                kernels::pvt_block(w.s, w.rp, d_o, ldo, c, p.d_v, n_vec, w.ones, dvt, w.rp);
                kernels::pvt_block(w.dp, w.rp, q, ldq, c, p.d, n_vec, w.ones, dkt, w.rp);
            } else {
                for (std::int64_t y = 0; y < r; ++y) { // key y is seen from query row `from`
                    const std::int64_t from =
                        std::clamp<std::int64_t>(j0 + y - p.causal_offset() - i0, 0, c);
                    kernels::pvt_lane(w.s + from * w.rp + y,
                                      w.rp,
                                      d_o + from * ldo,
                                      ldo,
                                      c - from,
                                      p.d_v,
                                      Scalar(1),
                                      dvt + y,
                                      w.rp);
                    kernels::pvt_lane(w.dp + from * w.rp + y,
                                      w.rp,
                                      q + from * ldq,
                                      ldq,
                                      c - from,
                                      p.d,
                                      Scalar(1),
                                      dkt + y,
                                      w.rp);
                }
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

// --- pass B: one query block i resident with dQ_i; key blocks streamed ---
template <typename Scalar, typename Counter>
void query_block(const BackwardArgs<Scalar>& a,
                 const Tiling& t,
                 std::int64_t slice,
                 std::int64_t i0,
                 const Scalar* delta,
                 Scalar* base,
                 Counter& io) {
    const Problem& p = a.problem;
    const Slice s(p, slice);
    const std::int64_t r = std::min(t.rows, p.n_q - i0);
    const std::int64_t cs = std::min(t.cols, p.n_k);
    const std::int64_t resident = r * (2 * p.d + p.d_v + 2) + cs * (p.d + p.d_v) + 2 * r * cs;
    io.acquire(resident);
    io.read({Operand::q, slice, i0, r, 0, p.d});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    io.read({Operand::lse, slice, i0, r, 0, 1});
    io.read({Operand::delta, slice, i0, r, 0, 1});
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = w.rp / Simd<Scalar>::kLanes;
        kernels::pack_transposed(
            a.q, s.b, s.h, i0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.ta, w.rp);
        kernels::pack_transposed(a.d_o, s.b, s.h, i0, r, Scalar(1), w.tb, w.rp);
        std::fill(w.acc_a, w.acc_a + p.d * w.rp, Scalar(0));
        for (std::int64_t x = 0; x < w.rp; ++x) {
            w.l2[x] = x < r ? kernels::lse2(*a.lse.row(s.b, s.h, i0 + x))
                            : std::numeric_limits<Scalar>::infinity();
            w.dd[x] = x < r ? delta[slice * p.n_q + i0 + x] : Scalar(0);
        }
    }
    const std::int64_t kv_end = p.visible_keys(i0 + r - 1);
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += t.cols) {
        const std::int64_t c = std::min(t.cols, kv_end - j0);
        io.read({Operand::k, s.kv, j0, c, 0, p.d});
        io.read({Operand::v, s.kv, j0, c, 0, p.d_v});
        if constexpr (!Counter::kComputes)
            continue;
        const Scalar* k = a.k.row(s.b, s.g, j0);
        const Scalar* v = a.v.row(s.b, s.g, j0);
        const bool diagonal = p.causal && j0 + c - 1 > i0 + p.causal_offset();
        const auto hidden = [&](std::int64_t y) { // query rows that cannot see key j0 + y
            return std::pair{std::int64_t{0},
                             std::clamp<std::int64_t>(j0 + y - p.causal_offset() - i0, 0, r)};
        };
        // --- S^T = scale K_j Q_i^T (keys x queries), P^T = exp(S^T - L_i) ---
        kernels::scores_block(k, a.k.stride_row, c, w.ta, w.rp, p.d, n_vec, w.s, w.rp);
        if (diagonal)
            fill_ranges(w.s, w.rp, c, hidden, -std::numeric_limits<Scalar>::infinity());
        kernels::probabilities(w.s, w.rp, c, n_vec, w.l2, static_cast<const Scalar*>(nullptr));
        // --- dP^T = V_j dO_i^T, dS^T = P^T o (dP^T - D_i) ---
        kernels::scores_block(v, a.v.stride_row, c, w.tb, w.rp, p.d_v, n_vec, w.dp, w.rp);
        kernels::softmax_grad(w.s, w.dp, w.rp, c, n_vec, w.dd, static_cast<const Scalar*>(nullptr));
        if (diagonal)
            fill_ranges(w.dp, w.rp, c, hidden, Scalar(0));
        // --- dQ_i^T += K_j^T dS^T (scale applied at the end; hidden pairs as in pass A) ---
        if (!diagonal || kernels::all_finite(k, a.k.stride_row, c, p.d)) {
            kernels::pvt_block(w.dp, w.rp, k, a.k.stride_row, c, p.d, n_vec, w.ones, w.acc_a, w.rp);
        } else {
            for (std::int64_t x = 0; x < r; ++x) {
                const std::int64_t seen =
                    std::clamp<std::int64_t>(i0 + x + p.causal_offset() + 1 - j0, 0, c);
                kernels::pvt_lane(
                    w.dp + x, w.rp, k, a.k.stride_row, seen, p.d, Scalar(1), w.acc_a + x, w.rp);
            }
        }
    }
    if constexpr (Counter::kComputes) { // dQ = scale dS K
        const auto scale = static_cast<Scalar>(p.scale);
        kernels::unpack_transposed(
            w.acc_a, w.rp, [scale](std::int64_t) { return scale; }, a.d_q, s.b, s.h, i0, r);
    }
    io.write({Operand::d_q, slice, i0, r, 0, p.d});
    io.release(resident);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::backward_fused";
    BackwardArgs<Scalar> a = args;
    a.validate(kWhere, !Counter::kComputes);
    if (tiling.schedule != Schedule::fused)
        throw InvalidArgument(std::string(kWhere) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    tiling.validate(kWhere, memory, a.problem, Pass::backward);
    const Problem& p = a.problem;
    const std::int64_t rs = tiling.rows;
    const std::int64_t q_blocks = (p.n_q + rs - 1) / rs, k_blocks = (p.n_k + rs - 1) / rs;
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    const kernels::Workspace<Scalar> delta(Counter::kComputes ? 1 : 0, p.batch_heads() * p.n_q);
    const kernels::Workspace<Scalar> ws(workers, Scratch<Scalar>::words(p, tiling));
    parallel_for_counted(
        p.batch_heads() * q_blocks, counter, [&](std::int64_t task, int, Counter& io) {
            delta_block(a, rs, task / q_blocks, task % q_blocks * rs, delta.slab(0), io);
        });
    parallel_for_counted(
        p.batch * p.kv_heads * k_blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
            key_block(a,
                      tiling,
                      task / k_blocks,
                      task % k_blocks * rs,
                      delta.slab(0),
                      ws.slab(worker),
                      io);
        });
    parallel_for_counted(
        p.batch_heads() * q_blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
            query_block(a,
                        tiling,
                        task / q_blocks,
                        task % q_blocks * rs,
                        delta.slab(0),
                        ws.slab(worker),
                        io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_fused<Scalar, Counter>(                                                 \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
