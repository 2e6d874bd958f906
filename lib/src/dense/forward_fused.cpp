// ioattn::dense::forward_fused: fused tiled forward (FlashAttention-2 order)
// Per (batch, head): O = softmax(scale*Q K^T + mask) V, L = row logsumexp.
// Reference: forward_reference.cpp. Br = tiling.rows, Bc = tiling.cols.
//   parallel for each row block i: read Q_i             Br*d
//     for each column block j with a visible key: read K_j, V_j    Bc*(d + d_v)
//       S = scale*Q_i K_j^T; online-softmax update of m_i, l_i, O_i
//     write O_i / l_i, L_i                              Br*d_v + Br
// Causal: column blocks end at the last key visible to the block's last row (the final block
// is cut there), so fully masked keys are never read.
// Resident: rp*(d + Bc + d_v + 3) + max(Br*d, Bc*(d + d_v), Br*(d_v + 1)) <= M, the scratch
// (Q_i^T, S^T, O_i^T, m, l, alpha with Br lane-padded to rp) and the rows streamed at a time
// I/O = io_cost_forward_fused = n_q*d + sum_i kv_end(i)*(d + d_v) + n_q*d_v + n_q  (per head)
// Flops: 2*allowed_pairs*(d + d_v). One task per (batch, head, row block); thread-count
// invariant: each task owns its rows of O and L and runs a fixed sequence of operations.
// Tests: tests/lib/dense/forward_fused_test.cpp

#include "dense/kernel_entry.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <limits>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::dense::IOATTN_ISA {

namespace {

using kernels::Simd;

/// Per-worker scratch layout of one row block: Qt (d x rp), St (c x rp), Ot (d_v x rp), m, l,
/// alpha (rp each), with r = min(Br, n_q) lane-padded to rp (kLanePad: the same under every
/// instruction set) and c = min(Bc, n_k). O is kept transposed (see kernels/tile.hpp: P V then
/// reads P^T rows as vectors, as the score kernel reads Q^T).
template <typename Scalar>
struct Scratch {
    std::int64_t rp = 0;
    Scalar* qt = nullptr;
    Scalar* st = nullptr;
    Scalar* ot = nullptr;
    Scalar* m = nullptr;
    Scalar* l = nullptr;
    Scalar* alpha = nullptr;

    static std::int64_t lanes(const Problem& p, const Tiling& t) {
        return lane_padded(std::min(t.rows, p.n_q));
    }

    static std::int64_t words(const Problem& p, const Tiling& t) {
        return (p.d + std::min(t.cols, p.n_k) + p.d_v + 3) * lanes(p, t);
    }

    Scratch() = default;

    Scratch(Scalar* base, const Problem& p, const Tiling& t)
        : rp(lanes(p, t)) {
        qt = base;
        st = qt + p.d * rp;
        ot = st + std::min(t.cols, p.n_k) * rp;
        m = ot + p.d_v * rp;
        l = m + rp;
        alpha = l + rp;
    }
};

/// The serial body: one (slice, row block) task.
template <typename Scalar, typename Counter>
void row_block(const ForwardArgs<Scalar>& a,
               const Tiling& t,
               std::int64_t slice,
               std::int64_t i0,
               Scalar* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = b * p.kv_heads + g;
    const std::int64_t rows = std::min(t.rows, p.n_q - i0);
    const std::int64_t cols = std::min(t.cols, p.n_k);
    const std::int64_t kv_end = p.visible_keys(i0 + rows - 1);
    // the scratch, and the most the task streams at a time: Q_i while packing, K_j and V_j,
    // O_i and L_i while writing (Tiling::resident_words)
    const std::int64_t resident = Scratch<Scalar>::words(p, t) +
                                  std::max({rows * p.d, cols * (p.d + p.d_v), rows * (p.d_v + 1)});
    io.acquire(resident);

    // --- read Q_i, pack Qt = (scale log2 e) Q_i^T ---
    io.read({Operand::q, slice, i0, rows, 0, p.d});
    Scratch<Scalar> w{};
    std::int64_t n_vec = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = lane_padded(rows) / Simd<Scalar>::kLanes; // a short last block: its lanes only
        const auto qs = static_cast<Scalar>(p.scale * 1.4426950408889634);
        kernels::pack_transposed(a.q, b, h, i0, rows, qs, w.qt, w.rp);
        std::fill(w.ot, w.ot + p.d_v * w.rp, Scalar(0));
        std::fill(w.m, w.m + w.rp, -std::numeric_limits<Scalar>::infinity());
        std::fill(w.l, w.l + w.rp, Scalar(0));
    }

    for (std::int64_t j0 = 0; j0 < kv_end; j0 += t.cols) {
        const std::int64_t c = std::min(t.cols, kv_end - j0);
        io.read({Operand::k, kv_slice, j0, c, 0, p.d});
        io.read({Operand::v, kv_slice, j0, c, 0, p.d_v});
        io.complete({Operand::scores, slice, i0, rows, j0, c});
        if constexpr (Counter::kComputes) {
            const Scalar* k = a.k.row(b, g, j0);
            const Scalar* v = a.v.row(b, g, j0);
            // --- St = K_j Qt (scores of the block, transposed) ---
            kernels::scores_block(k, a.k.stride_row, c, w.qt, w.rp, p.d, n_vec, w.st, w.rp);
            // --- causal mask: key j0+x is hidden from rows r < j0 + x - offset - i0 ---
            const bool diagonal = p.causal && j0 + c - 1 > i0 + p.causal_offset();
            if (diagonal) {
                for (std::int64_t x = 0; x < c; ++x) {
                    const std::int64_t hidden =
                        std::clamp<std::int64_t>(j0 + x - p.causal_offset() - i0, 0, rows);
                    std::fill(w.st + x * w.rp,
                              w.st + x * w.rp + hidden,
                              -std::numeric_limits<Scalar>::infinity());
                }
            }
            // --- online softmax: m, l, alpha; St becomes Pt ---
            kernels::online_softmax_block(w.st, w.rp, c, n_vec, w.m, w.l, w.alpha);
            // --- O_i^T = alpha O_i^T + V_j^T P^T (hidden keys have P = 0: exact while V_j is
            // finite; otherwise each lane on the mask edge stops at its last visible key) ---
            if (!diagonal || kernels::all_finite(v, a.v.stride_row, c, p.d_v)) {
                kernels::pvt_block(
                    w.st, w.rp, v, a.v.stride_row, c, p.d_v, n_vec, w.alpha, w.ot, w.rp);
            } else {
                for (std::int64_t r = 0; r < rows; ++r) {
                    const std::int64_t seen =
                        std::clamp<std::int64_t>(i0 + r + p.causal_offset() + 1 - j0, 0, c);
                    kernels::pvt_lane(
                        w.st + r, w.rp, v, a.v.stride_row, seen, p.d_v, w.alpha[r], w.ot + r, w.rp);
                }
            }
        }
    }

    // --- write O_i / l_i and L_i ---
    if constexpr (Counter::kComputes) {
        kernels::finish_rows(w.ot, w.rp, w.m, w.l, w.alpha, a.o, a.lse, b, h, i0, rows);
    }
    io.write({Operand::o, slice, i0, rows, 0, p.d_v});
    io.write({Operand::lse, slice, i0, rows, 0, 1});
    io.release(resident);
}

} // namespace

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::forward_fused";
    const ForwardArgs<Scalar> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::fused, Pass::forward, kWhere);
    detail::forward_fused_tasks<Scalar>(a.problem,
                                        tiling,
                                        Scratch<Scalar>::words(a.problem, tiling),
                                        kWhere,
                                        counter,
                                        [&](auto&&... x) { row_block(a, tiling, x...); });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_fused<Scalar, Counter>(                                                  \
        const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense::IOATTN_ISA
