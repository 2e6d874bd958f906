// ioattn::dense::backward_fused: fused backward (FlashAttention-2, Dao 2023, Alg. 2) in one
// sweep over key blocks, with dQ accumulated in G partial sums reduced in a fixed order (no
// atomics; bitwise thread-count invariant). R = tiling.rows (resident key block), C =
// tiling.cols (streamed query block), G = backward_dq_groups (a function of the shape only).
// Reference: backward_reference.cpp.
//   pass 0, parallel for each row block i: read O_i, dO_i; D_i = rowsum(dO_i o O_i); write D_i
//   pass A, parallel for each (kv head, group g): for each key block j = g, g + G, ...:
//     read K_j, V_j; dK_j = dV_j = 0
//     for each query head of the group, for each query block i from first_row(j): read Q_i,
//       dO_i, L_i, D_i
//       S = scale Q_i K_j^T; P = exp(S - L_i); dV_j += P^T dO_i
//       dP = dO_i V_j^T; dS = P o (dP - D_i); dK_j += scale dS^T Q_i
//       dQ^g_i = scale dS K_j (j the first block of g), else read dQ^g_i, add, write dQ^g_i
//     write dK_j, dV_j
//   pass R, parallel for each row block i: read dQ^g_i for each group g that reached it;
//     dQ_i = sum over g in order (0 where none did); write dQ_i
// Why partial sums: the FlashAttention-2 paper's single sweep adds dQ with atomics (not
// reproducible); a second sweep over row blocks recomputes S and dP, 7 products instead of 5.
// G partials cost G N d words of memory (written before they are read, never zeroed) and one
// reduction; one sweep runs 1.25x-1.35x faster than two (ioattn run --N 4096 --d 64 --heads 8
// --pass backward --schedule fused --threads 2 --repeat 5).
// Resident (rp, cp, dw: R, C, d lane-padded; Tiling::resident_words):
//   max(pass 0: R(2 d_v + 1),
//       pass A: 2(d + d_v) rp + 2 cp rp + rp dw + 3 max(rp, cp, dw)    the scratch
//               + max(R(d + d_v), C(d + d_v + 2 + dw)),                what streams at a time
//       pass R: R(d + dw)) <= M
// I/O = io_cost_backward_fused. Flops: 2*allowed_pairs*(3d + 2d_v) per query head.
// Masked entries have P = dS = 0 exactly; on a mask edge whose streamed or resident rows hold a
// non-finite value, those rows are never multiplied into a gradient that cannot see them.
// Tests: tests/lib/dense/backward_fused_test.cpp

#include "dense/kernel_entry.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/dq_partials.hpp>
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::dense::IOATTN_ISA {

namespace {

using kernels::Simd;
using kernels::Vec;

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
/// so every gradient product is the score kernel's broadcast form, see kernels/tile.hpp), the
/// resident K rows row-major (rp x dp, for dQ = dS K with d as the lanes), and per-lane L, D and
/// ones.
template <typename Scalar>
struct Scratch {
    std::int64_t rp = 0;
    std::int64_t dw = 0; // d padded to whole vectors
    Scalar* ta = nullptr;
    Scalar* tb = nullptr;
    Scalar* s = nullptr;
    Scalar* dp = nullptr;
    Scalar* acc_a = nullptr;
    Scalar* acc_b = nullptr;
    Scalar* k_rows = nullptr;
    Scalar* l2 = nullptr;
    Scalar* dd = nullptr;
    Scalar* ones = nullptr;

    /// rp, cp, dw: the resident keys, the streamed queries and d, lane-padded (kLanePad).
    static std::int64_t rows(const Problem& p, const Tiling& t) {
        return lane_padded(std::min(t.rows, p.n_k));
    }

    static std::int64_t cols(const Problem& p, const Tiling& t) {
        return lane_padded(std::min(t.cols, p.n_q));
    }

    static std::int64_t lanes(const Problem& p, const Tiling& t) {
        return std::max({rows(p, t), cols(p, t), lane_padded(p.d)});
    }

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = rows(p, t), cp = cols(p, t), dw = lane_padded(p.d);
        return 2 * (p.d + p.d_v) * rp + 2 * cp * rp + rp * dw + 3 * lanes(p, t);
    }

    Scratch() = default;

    Scratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(rows(p, t))
        , dw(lane_padded(p.d)) {
        const std::int64_t cp = cols(p, t);
        ta = base;
        tb = ta + p.d * rp;
        s = tb + p.d_v * rp;
        dp = s + cp * rp;
        acc_a = dp + cp * rp;
        acc_b = acc_a + p.d * rp;
        k_rows = acc_b + p.d_v * rp;
        l2 = k_rows + rp * dw;
        dd = l2 + lanes(p, t);
        ones = dd + lanes(p, t);
        std::fill(ones, ones + lanes(p, t), Scalar(1));
    }
};

template <typename Scalar>
using Partials = kernels::DqPartials<Scalar>;

/// First query row that sees key j (n_q if none).
std::int64_t first_row(const Problem& p, std::int64_t j) {
    return p.causal ? std::clamp<std::int64_t>(j - p.causal_offset(), 0, p.n_q) : 0;
}

// --- pass A: one key block j resident with dK_j, dV_j; query blocks streamed; dS K_j added
// into the partial dQ^group (written, not added, by the group's first block) ---
template <typename Scalar, typename Counter>
void key_block(const BackwardArgs<Scalar>& a,
               const Tiling& t,
               std::int64_t kv_slice,
               std::int64_t j0,
               std::int64_t group,
               bool first,
               const Partials<Scalar>& dq,
               const Scalar* delta,
               Scalar* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv_slice / p.kv_heads, g = kv_slice % p.kv_heads;
    const std::int64_t r = std::min(t.rows, p.n_k - j0);
    const std::int64_t cs = std::min(t.cols, p.n_q);
    // the scratch, and the most the task streams at a time: K_j, V_j while packing (and dK_j,
    // dV_j while writing), or a query block with its dw-wide dQ partial (Tiling::resident_words)
    const std::int64_t resident =
        Scratch<Scalar>::words(p, t) +
        std::max(r * (p.d + p.d_v), cs * (p.d + p.d_v + 2 + lane_padded(p.d)));
    io.acquire(resident);
    io.read({Operand::k, kv_slice, j0, r, 0, p.d});
    io.read({Operand::v, kv_slice, j0, r, 0, p.d_v});
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    bool k_finite = true;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = w.rp / Simd<Scalar>::kLanes;
        kernels::pack_transposed(
            a.k, b, g, j0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.ta, w.rp);
        kernels::pack_transposed(a.v, b, g, j0, r, Scalar(1), w.tb, w.rp);
        kernels::pack_rows(a.k, b, g, j0, r, static_cast<Scalar>(p.scale), w.k_rows, w.dw);
        k_finite = kernels::all_finite(w.k_rows, w.dw, r, p.d);
        std::fill(w.acc_a, w.acc_a + (p.d + p.d_v) * w.rp, Scalar(0));
    }
    const Scalar* keep = first ? nullptr : w.ones; // dQ^g: written by the first block, then added
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
            const Block part{Operand::d_q_partial, group * p.batch_heads() + slice, i0, c, 0, p.d};
            if (!first)
                io.read(part);
            io.complete({Operand::scores, slice, i0, c, j0, r});
            io.write(part);
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
            // --- dQ^g_i (+)= dS (scale K_j): rows of dS broadcast, d as the lanes; a K row
            // that is not finite is never multiplied into a query row that cannot see it ---
            Scalar* out = dq.row(group, slice, i0);
            const std::int64_t d_vec = w.dw / Simd<Scalar>::kLanes;
            if (!diagonal || k_finite) {
                kernels::broadcast_block(
                    w.dp, w.rp, 1, c, w.k_rows, w.dw, r, d_vec, keep, out, w.dw);
            } else {
                for (std::int64_t x = 0; x < c; ++x) {
                    const std::int64_t seen =
                        std::clamp<std::int64_t>(i0 + x + p.causal_offset() + 1 - j0, 0, r);
                    kernels::broadcast_block(w.dp + x * w.rp,
                                             w.rp,
                                             1,
                                             1,
                                             w.k_rows,
                                             w.dw,
                                             seen,
                                             d_vec,
                                             keep,
                                             out + x * w.dw,
                                             w.dw);
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

// --- pass R: dQ_i = the partial sums of the groups that reached row block i, in group order ---
template <typename Scalar, typename Counter>
void reduce_block(const BackwardArgs<Scalar>& a,
                  std::int64_t rs,
                  std::int64_t slice,
                  std::int64_t i0,
                  const Partials<Scalar>& dq,
                  Counter& io) {
    const Problem& p = a.problem;
    const Slice s(p, slice);
    const std::int64_t r = std::min(rs, p.n_q - i0);
    const std::int64_t resident = r * (p.d + lane_padded(p.d)); // dQ_i and one dw-wide partial
    io.acquire(resident);
    std::int64_t reached = 0; // groups g < reached reach rows from first_row(g R) on
    while (reached < dq.groups && first_row(p, reached * rs) < i0 + r)
        ++reached;
    for (std::int64_t g = 0; g < reached; ++g) {
        const std::int64_t from = std::max(i0, first_row(p, g * rs));
        io.read({Operand::d_q_partial, g * p.batch_heads() + slice, from, i0 + r - from, 0, p.d});
    }
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = i0; x < i0 + r; ++x) {
            Scalar* out = a.d_q.row(s.b, s.h, x);
            std::fill(out, out + p.d, Scalar(0));
            for (std::int64_t g = 0; g < reached && first_row(p, g * rs) <= x; ++g) {
                const Scalar* in = dq.row(g, slice, x);
                for (std::int64_t z = 0; z < p.d; ++z)
                    out[z] += in[z];
            }
        }
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
    const BackwardArgs<Scalar> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::fused, Pass::backward, kWhere);
    detail::backward_fused_passes<Scalar, Partials<Scalar>>(
        a.problem,
        tiling,
        Scratch<Scalar>::words(a.problem, tiling),
        kWhere,
        counter,
        [&](auto&&... x) { delta_block(a, tiling.rows, x...); },
        [&](auto&&... x) { key_block(a, tiling, x...); },
        [&](auto&&... x) { reduce_block(a, tiling.rows, x...); });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_fused<Scalar, Counter>(                                                 \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense::IOATTN_ISA
