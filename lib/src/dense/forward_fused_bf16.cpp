// ioattn::dense::forward_fused_bf16: the fused tiled forward (forward_fused.cpp) on bf16 views,
// with AVX512_BF16 dot products (vdpbf16ps: 32 bf16 products per instruction into fp32 lanes).
// Schedule, tiling, counted events and resident footprint are forward_fused's:
//   parallel for each row block i: read Q_i             Br*d
//     for each column block j with a visible key: read K_j, V_j    Bc*(d + d_v)
//       S = scale*Q_i K_j^T; online-softmax update of m_i, l_i, O_i
//     write O_i / l_i, L_i                              Br*d_v + Br
// Resident: rp*(d + Bc + d_v + 3) + max(Br*d, Bc*(d + d_v), Br*(d_v + 1)) <= M words; the pairs
// of Q_i, P and V_j take at most the words of their fp32 forms (P overwrites S^T in place; V_j's
// pairs, and K_j's zero-padded copy for odd d, take at most the Bc*(d + d_v) of K_j, V_j).
// I/O = io_cost_forward_fused = n_q*d + sum_i kv_end(i)*(d + d_v) + n_q*d_v + n_q  (per head)
// Flops: 2*allowed_pairs*(d + d_v). One task per (batch, head, row block); thread-count
// invariant: each task owns its rows of O and L and runs a fixed sequence of operations.
// Precision (docs/design.md section 16): Q, K, V are used exactly (bf16 products are exact in
// fp32) and S, m, l, O accumulate in fp32, S scaled by scale*log2(e) in fp32 after the dot
// products; P = 2^(S - m) within 2^-23, written as bf16 pairs by the softmax's own pass
// (kernels/softmax_bf16.hpp). P is rounded to bf16 (nearest even) before P V: one extra
// rounding, a relative error of at most u = 2^-8 per weight, hence at most u max|V| in O. O is rounded to bf16 once,
// at the end; L is fp32. Why: the float kernels on widened copies run at the fp32 FMA rate and
// move 6 extra bytes per operand element; vdpbf16ps doubles the multiply-add rate.
// Tests: tests/lib/dense/forward_fused_bf16_test.cpp

#include "dense/kernel_entry.hpp"
#include "dense/kernels_bf16.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

// The rest of this file is compiled for the avx512bf16 region (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/softmax_bf16.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/kernels/tile_bf16.hpp>

namespace ioattn::dense::IOATTN_ISA {

using kernels::all_finite;
using kernels::dp_rows;
using kernels::p_at;
using kernels::pack_pairs;
using kernels::pair_word;
using kernels::PairCols;
using kernels::PairRows;
using kernels::pairs;
using kernels::put_word;

namespace {

constexpr std::int64_t kLanes = 16;

/// Per-worker scratch of one row block, in fp32 words: forward_fused's Qt (d x rp, of which
/// the Q pairs take ceil(d/2) x rp), St (c x rp; P's pairs overwrite its first ceil(c/2) rows),
/// Ot (d_v x rp), m, l, alpha (rp each); then V_j's pairs (ceil(c/2) x d_v) and, for odd d, K_j
/// zero-padded to d + 1 columns (c x (d + 1) bf16).
struct Scratch {
    std::int64_t rp = 0;
    float* qp = nullptr;
    float* st = nullptr;
    float* ot = nullptr;
    float* m = nullptr;
    float* l = nullptr;
    float* alpha = nullptr;
    float* vp = nullptr;
    bf16* kp = nullptr;

    static std::int64_t lanes(const Problem& p, const Tiling& t) {
        return lane_padded(std::min(t.rows, p.n_q));
    }

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t c = std::min(t.cols, p.n_k);
        return (p.d + c + p.d_v + 3) * lanes(p, t) + pairs(c) * p.d_v +
               (p.d % 2 != 0 ? c * (p.d + 1) / 2 : 0);
    }

    Scratch() = default;

    Scratch(float* base, const Problem& p, const Tiling& t)
        : rp(lanes(p, t)) {
        const std::int64_t c = std::min(t.cols, p.n_k);
        qp = base;
        st = qp + p.d * rp;
        ot = st + c * rp;
        m = ot + p.d_v * rp;
        l = m + rp;
        alpha = l + rp;
        vp = alpha + rp;
        kp = reinterpret_cast<bf16*>(vp + pairs(c) * p.d_v);
    }
};

// --- Qp[p][r] = (Q[r][2p], Q[r][2p + 1]), lanes past `rows` zero ---
void pack_q(const ForwardArgs<bf16>& a,
            std::int64_t b,
            std::int64_t h,
            std::int64_t i0,
            std::int64_t rows,
            const Scratch& w) {
    const std::int64_t d = a.problem.d, dp = pairs(d);
    for (std::int64_t r = 0; r < w.rp; ++r) {
        const bf16* q = r < rows ? a.q.row(b, h, i0 + r) : nullptr;
        for (std::int64_t p = 0; p < dp; ++p)
            put_word(w.qp + p * w.rp + r, q != nullptr ? pair_word(q, p, d) : 0U);
    }
}

/// O^T = alpha O^T + V_j^T P^T over the pairs of P (in place over St) and of V_j (packed).
void pv_pairs(const Scratch& w,
              const bf16* v,
              std::int64_t ldv,
              std::int64_t c,
              std::int64_t d_v,
              std::int64_t n_vec) {
    pack_pairs(v, ldv, c, d_v, w.vp, d_v);
    dp_rows(PairCols{w.vp, d_v}, d_v, w.st, w.rp, pairs(c), n_vec, w.alpha, 1.0F, w.ot, w.rp);
}

/// pv_pairs lane by lane, lane r over its first min(seen0 + r, c) keys only (kernels::pvt_lane
/// with P as stored in its pairs): a hidden key's non-finite V row is never touched.
void pv_lanes(const Scratch& w,
              const bf16* v,
              std::int64_t ldv,
              std::int64_t c,
              std::int64_t d_v,
              std::int64_t seen0,
              std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t seen = std::clamp<std::int64_t>(seen0 + r, 0, c);
        for (std::int64_t x = 0; x < d_v; ++x) {
            float acc = w.ot[x * w.rp + r] * w.alpha[r];
            for (std::int64_t y = 0; y < seen; ++y)
                acc += p_at(w.st, w.rp, y, r) * static_cast<float>(v[y * ldv + x]);
            w.ot[x * w.rp + r] = acc;
        }
    }
}

/// O_i / l_i rounded to bf16 and L_i (kernels::finish_rows, with bf16 rows of O).
void finish(const Scratch& w,
            const ForwardArgs<bf16>& a,
            std::int64_t b,
            std::int64_t h,
            std::int64_t i0,
            std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float l = w.l[r];
        *a.lse.row(b, h, i0 + r) = l == 0.0F ? -std::numeric_limits<float>::infinity()
                                             : 0.6931471805599453F * (w.m[r] + std::log2(l));
        const float inv = l == 0.0F ? 0.0F : 1.0F / l;
        bf16* o = a.o.row(b, h, i0 + r);
        for (std::int64_t x = 0; x < a.problem.d_v; ++x) // 0, not 0 * (NaN of a hidden key)
            o[x] = l == 0.0F ? bf16(0.0F) : bf16(w.ot[x * w.rp + r] * inv);
    }
}

/// The serial body: one (slice, row block) task.
template <typename Counter>
void row_block(const ForwardArgs<bf16>& a,
               const Tiling& t,
               std::int64_t slice,
               std::int64_t i0,
               float* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = b * p.kv_heads + g;
    const std::int64_t rows = std::min(t.rows, p.n_q - i0);
    const std::int64_t cols = std::min(t.cols, p.n_k);
    const std::int64_t kv_end = p.visible_keys(i0 + rows - 1);
    // forward_fused's footprint: its scratch and the most it streams at a time
    const std::int64_t rp = Scratch::lanes(p, t);
    const std::int64_t resident = (p.d + cols + p.d_v + 3) * rp +
                                  std::max({rows * p.d, cols * (p.d + p.d_v), rows * (p.d_v + 1)});
    io.acquire(resident);

    // --- read Q_i, pack its pairs ---
    io.read({Operand::q, slice, i0, rows, 0, p.d});
    Scratch w{};
    std::int64_t n_vec = 0;
    float qs = 0;
    if constexpr (Counter::kComputes) {
        w = Scratch(base, p, t);
        n_vec = lane_padded(rows) / kLanes; // a short last block: its lanes only
        qs = static_cast<float>(p.scale * 1.4426950408889634);
        pack_q(a, b, h, i0, rows, w);
        std::fill(w.ot, w.ot + p.d_v * w.rp, 0.0F);
        std::fill(w.m, w.m + w.rp, -std::numeric_limits<float>::infinity());
        std::fill(w.l, w.l + w.rp, 0.0F);
    }

    for (std::int64_t j0 = 0; j0 < kv_end; j0 += t.cols) {
        const std::int64_t c = std::min(t.cols, kv_end - j0);
        io.read({Operand::k, kv_slice, j0, c, 0, p.d});
        io.read({Operand::v, kv_slice, j0, c, 0, p.d_v});
        io.complete({Operand::scores, slice, i0, rows, j0, c});
        if constexpr (Counter::kComputes) {
            const bf16* k = a.k.row(b, g, j0);
            const bf16* v = a.v.row(b, g, j0);
            // --- St = (scale log2 e) K_j Q_i^T, pairs over d (odd d: K_j zero-padded) ---
            PairRows kr{k, a.k.stride_row};
            if (p.d % 2 != 0) {
                for (std::int64_t x = 0; x < c; ++x) {
                    std::copy_n(k + x * a.k.stride_row, p.d, w.kp + x * (p.d + 1));
                    w.kp[x * (p.d + 1) + p.d] = bf16(0.0F);
                }
                kr = PairRows{w.kp, p.d + 1};
            }
            dp_rows(kr, c, w.qp, w.rp, pairs(p.d), n_vec, nullptr, qs, w.st, w.rp);
            // --- causal mask: key j0+x is hidden from rows r < j0 + x - offset - i0 ---
            const bool diagonal = p.causal && j0 + c - 1 > i0 + p.causal_offset();
            if (diagonal) {
                for (std::int64_t x = 0; x < c; ++x) {
                    const std::int64_t hidden =
                        std::clamp<std::int64_t>(j0 + x - p.causal_offset() - i0, 0, rows);
                    std::fill(w.st + x * w.rp,
                              w.st + x * w.rp + hidden,
                              -std::numeric_limits<float>::infinity());
                }
            }
            // --- online softmax: m, l, alpha; St becomes Pt's bf16 pairs ---
            kernels::softmax_pairs(w.st, w.rp, c, n_vec, w.m, w.l, w.alpha);
            // --- O_i^T = alpha O_i^T + V_j^T P^T, pairs over keys (hidden keys have P = 0:
            // exact while V_j is finite; otherwise each lane on the mask edge stops at its last
            // visible key) ---
            if (!diagonal || all_finite(v, a.v.stride_row, c, p.d_v))
                pv_pairs(w, v, a.v.stride_row, c, p.d_v, n_vec);
            else
                pv_lanes(w, v, a.v.stride_row, c, p.d_v, i0 + p.causal_offset() + 1 - j0, rows);
        }
    }

    // --- write O_i / l_i and L_i ---
    if constexpr (Counter::kComputes)
        finish(w, a, b, h, i0, rows);
    io.write({Operand::o, slice, i0, rows, 0, p.d_v});
    io.write({Operand::lse, slice, i0, rows, 0, 1});
    io.release(resident);
}

} // namespace

template <typename Counter>
void forward_fused_bf16(const ForwardArgs<bf16>& args,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::forward_fused";
    const ForwardArgs<bf16> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::fused, Pass::forward, kWhere);
    detail::forward_fused_tasks<float>(
        a.problem, tiling, Scratch::words(a.problem, tiling), kWhere, counter, [&](auto&&... x) {
            row_block(a, tiling, x...);
        });
}

template void forward_fused_bf16<NullCounter>(const ForwardArgs<bf16>&,
                                              const Tiling&,
                                              const MemoryModel&,
                                              NullCounter&);
template void forward_fused_bf16<DryRunCounter>(const ForwardArgs<bf16>&,
                                                const Tiling&,
                                                const MemoryModel&,
                                                DryRunCounter&);

} // namespace ioattn::dense::IOATTN_ISA
