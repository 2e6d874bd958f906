// ioattn::dense::forward_materialized: small-cache forward (Saha & Ye 2024, Algorithm 1)
// Per (batch, head): O = softmax(scale*Q K^T + mask) V, L = row logsumexp, square tiles b x b.
// Reference: forward_reference.cpp. b = tiling.rows = tiling.cols; feature chunks of width
// w = tiling.feature_chunk() (b, or d and beyond when whole feature rows fit M).
//   parallel for each row block i (b rows), stats m_i, l_i resident (2b):
//     phase 1 (when d <= w: read Q_i once, r*d, and keep it), for each visible column tile j:
//       for each d-chunk k: read Q_i[:,k], K_j[:,k]          (r + c) * min(w, d - k)
//         S_ij += Q_i[:,k] K_j[:,k]^T
//       mask; online update of m_i, l_i; write S_ij           r*c
//     phase 2, for each d_v-chunk x: O_ix = 0
//       for each visible column tile j: read S_ij, V_j[:,x]    r*c + c*min(w, d_v - x)
//         O_ix += exp(S_ij - m_i) / l_i V_j[:,x]
//       write O_ix                                            r*min(w, d_v - x)
//     write L_i                                               r
// Resident: max(phase 1: b^2 + 2*b*min(w,d) + 2b, phase 2: b^2 + 2*b*min(w,d_v) + 2b), which
// for w = b is <= 4b^2
// I/O = io_cost_forward_materialized = per row block, with T visible tiles of total width C:
//   T'*r*d + C*d + r*C  +  ceil(d_v/w)*r*C + C*d_v + r*d_v + r     (~8 N^2 d / sqrt(M) + N^2),
//   T' = T, or 1 when d <= w (Q_i held: a cache of M words keeps it, as the simulated one of
//   bench/cache_validate.py does)
// Scores are stored in base 2 (scaled by scale*log2 e); masked entries are -inf and their
// V rows are never touched. Flops: 2*n_q*n_k*(d + d_v) over visible tiles.
// One task per (batch, head, row block); the S strip of the block lives in per-worker scratch
// standing for slow memory. Thread-count invariant.
// Tests: tests/lib/dense/forward_materialized_test.cpp

#include "dense/kernel_entry.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/strip.hpp>

namespace ioattn::dense::IOATTN_ISA {

namespace {

template <typename Scalar>
constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();

/// Fast-memory buffers of one worker: the S tile (b x b), the O chunk of phase 2 (b x
/// min(w, d_v)), m, l (b each); and the slow-memory score strip (b rows of n_k scores, at a
/// line-aligned stride: a tile row then fills whole cache lines). Q and K chunks are read in
/// place.
template <typename Scalar>
struct Buffers {
    Scalar *s, *o, *m, *l, *strip;

    static std::int64_t stride(const Problem& p) { return lane_padded(p.n_k); }

    static std::int64_t out_width(const Problem& p, std::int64_t chunk) {
        return std::min(chunk, p.d_v);
    }

    static std::int64_t words(const Problem& p, std::int64_t b, std::int64_t chunk) {
        return b * b + b * out_width(p, chunk) + 2 * b + b * stride(p);
    }
};

template <typename Scalar>
Buffers<Scalar> carve(Scalar* base, const Problem& p, std::int64_t b, std::int64_t chunk) {
    Buffers<Scalar> w{};
    w.s = base;
    w.o = w.s + b * b;
    w.m = w.o + b * Buffers<Scalar>::out_width(p, chunk);
    w.l = w.m + b;
    w.strip = w.l + b;
    return w;
}

/// Phase 1 for one tile: S = Q_i K_j^T accumulated over d in chunks of w, each entry the dot
/// product of a Q chunk row and a K chunk row read in place (no copies: the tile's footprint
/// is S and the two chunks, as counted). With d <= w (one chunk) Q_i was read once for the
/// whole row block (`q_resident`) and stays.
template <typename Scalar, typename Counter>
void score_tile(const ForwardArgs<Scalar>& a,
                const Buffers<Scalar>& w,
                std::int64_t chunk,
                std::int64_t slice,
                std::int64_t i0,
                std::int64_t r,
                std::int64_t j0,
                std::int64_t c,
                bool q_resident,
                Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t bb = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = bb * p.kv_heads + g;
    if constexpr (Counter::kComputes)
        std::fill(w.s, w.s + r * c, Scalar(0));
    for (std::int64_t k0 = 0; k0 < p.d; k0 += chunk) {
        const std::int64_t kw = std::min(chunk, p.d - k0);
        const std::int64_t q_words = q_resident ? 0 : r * kw;
        io.acquire(q_words + c * kw);
        if (!q_resident)
            io.read({Operand::q, slice, i0, r, k0, kw});
        io.read({Operand::k, kv_slice, j0, c, k0, kw});
        if constexpr (Counter::kComputes) {
            // --- S_ij += Q_i[:,k] K_j[:,k]^T ---
            for (std::int64_t x = 0; x < r; ++x) {
                const Scalar* q = a.q.row(bb, h, i0 + x) + k0;
                Scalar* sx = w.s + x * c;
                for (std::int64_t y = 0; y < c; ++y)
                    sx[y] += kernels::dot(q, a.k.row(bb, g, j0 + y) + k0, kw);
            }
        }
        io.release(q_words + c * kw);
    }
    io.complete({Operand::scores, slice, i0, r, j0, c});
}

/// Phase 1 epilogue: scale, mask, update m and l (online softmax, base 2), store to the strip.
template <typename Scalar>
void finish_tile(const Problem& p,
                 const Buffers<Scalar>& w,
                 std::int64_t i0,
                 std::int64_t r,
                 std::int64_t j0,
                 std::int64_t c) {
    const auto qs = static_cast<Scalar>(p.scale * 1.4426950408889634);
    for (std::int64_t x = 0; x < r; ++x) {
        Scalar* s = w.s + x * c;
        const std::int64_t seen = std::clamp<std::int64_t>(p.visible_keys(i0 + x) - j0, 0, c);
        Scalar mx = w.m[x];
        for (std::int64_t y = 0; y < c; ++y) {
            s[y] = y < seen ? s[y] * qs : kNegInf<Scalar>; // mask
            mx = s[y] > mx ? s[y] : mx;
        }
        const Scalar m_safe = mx == kNegInf<Scalar> ? Scalar(0) : mx;
        Scalar sum = 0;
        for (std::int64_t y = 0; y < seen; ++y)
            sum += s[y] == m_safe ? Scalar(1) : std::exp2(s[y] - m_safe);
        const Scalar alpha = w.m[x] == m_safe ? Scalar(1) : std::exp2(w.m[x] - m_safe);
        w.l[x] = alpha * w.l[x] + sum; // l = exp(m_old - m_new) l + rowsum(exp(S - m_new))
        w.m[x] = mx;
        std::copy_n(s, c, w.strip + x * Buffers<Scalar>::stride(p) + j0);
    }
}

/// Phase 2 for one d_v chunk: O_ix = sum_j exp(S_ij - m_i) / l_i V_j[:,x], written to O.
template <typename Scalar, typename Counter>
void output_chunk(const ForwardArgs<Scalar>& a,
                  const Buffers<Scalar>& w,
                  std::int64_t b,
                  std::int64_t chunk,
                  std::int64_t slice,
                  std::int64_t i0,
                  std::int64_t r,
                  std::int64_t kv_end,
                  std::int64_t x0,
                  Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t bb = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = bb * p.kv_heads + g;
    const std::int64_t xw = std::min(chunk, p.d_v - x0);
    io.acquire(r * xw);
    Scalar* o = w.o;
    if constexpr (Counter::kComputes)
        std::fill(o, o + r * xw, Scalar(0));
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += b) {
        const std::int64_t c = std::min(b, p.n_k - j0);
        io.acquire(r * c + c * xw);
        io.read({Operand::scores, slice, i0, r, j0, c});
        io.read({Operand::v, kv_slice, j0, c, x0, xw});
        if constexpr (Counter::kComputes) {
            for (std::int64_t x = 0; x < r; ++x) {
                const Scalar m_safe = w.m[x] == kNegInf<Scalar> ? Scalar(0) : w.m[x];
                const Scalar inv_l = Scalar(1) / w.l[x];
                const Scalar* s = w.strip + x * Buffers<Scalar>::stride(p) + j0;
                for (std::int64_t y = 0; y < c; ++y) {
                    if (s[y] == kNegInf<Scalar>)
                        continue; // masked: P = 0 and V_j is not touched
                    const Scalar pr =
                        (s[y] == m_safe ? Scalar(1) : std::exp2(s[y] - m_safe)) * inv_l;
                    // O += exp(S - m) / l V
                    kernels::axpy(pr, a.v.row(bb, g, j0 + y) + x0, o + x * xw, xw);
                }
            }
        }
        io.release(r * c + c * xw);
    }
    if constexpr (Counter::kComputes)
        for (std::int64_t x = 0; x < r; ++x)
            std::copy_n(o + x * xw, xw, a.o.row(bb, h, i0 + x) + x0);
    io.write({Operand::o, slice, i0, r, x0, xw});
    io.release(r * xw);
}

/// The serial body: one (slice, row block) task.
template <typename Scalar, typename Counter>
void row_block(const ForwardArgs<Scalar>& a,
               std::int64_t b,
               std::int64_t chunk,
               std::int64_t slice,
               std::int64_t i0,
               Scalar* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t r = std::min(b, p.n_q - i0);
    const std::int64_t kv_end = p.visible_keys(i0 + r - 1);
    Buffers<Scalar> w{};
    if constexpr (Counter::kComputes) {
        w = carve(base, p, b, chunk);
        std::fill(w.m, w.m + r, kNegInf<Scalar>);
        std::fill(w.l, w.l + r, Scalar(0));
    }
    io.acquire(2 * r);
    // --- phase 1: S_ij tiles and the row statistics; Q_i read once when d <= w ---
    const bool q_resident = p.d <= chunk && kv_end > 0;
    if (q_resident) {
        io.acquire(r * p.d);
        io.read({Operand::q, slice, i0, r, 0, p.d});
    }
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += b) {
        const std::int64_t c = std::min(b, p.n_k - j0);
        io.acquire(r * c);
        score_tile(a, w, chunk, slice, i0, r, j0, c, q_resident, io);
        if constexpr (Counter::kComputes)
            finish_tile(p, w, i0, r, j0, c);
        io.write({Operand::scores, slice, i0, r, j0, c});
        io.release(r * c);
    }
    if (q_resident)
        io.release(r * p.d);
    // --- phase 2: O_i chunk by chunk ---
    for (std::int64_t x0 = 0; x0 < p.d_v; x0 += chunk)
        output_chunk(a, w, b, chunk, slice, i0, r, kv_end, x0, io);
    if constexpr (Counter::kComputes) {
        const std::int64_t bb = slice / p.heads, h = slice % p.heads;
        for (std::int64_t x = 0; x < r; ++x) {
            Scalar* o = a.o.row(bb, h, i0 + x);
            if (w.l[x] == Scalar(0))
                std::fill(o, o + p.d_v, Scalar(0)); // no visible key: O = 0, L = -inf
            *a.lse.row(bb, h, i0 + x) =
                w.l[x] == Scalar(0) ? kNegInf<Scalar>
                                    : Scalar(0.6931471805599453) * (w.m[x] + std::log2(w.l[x]));
        }
    }
    io.write({Operand::lse, slice, i0, r, 0, 1});
    io.release(2 * r);
}

} // namespace

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::forward_materialized";
    const ForwardArgs<Scalar> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::materialized, Pass::forward, kWhere);
    const Problem& p = a.problem;
    const std::int64_t b = tiling.rows, chunk = tiling.feature_chunk();
    const std::int64_t blocks = (p.n_q + b - 1) / b;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const auto ws = detail::worker_scratch<Scalar, Counter>(Buffers<Scalar>::words(p, b, chunk));
    alloc.allocate();
    parallel_for_counted(
        p.batch_heads() * blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
            row_block(a, b, chunk, task / blocks, task % blocks * b, ws.slab(worker), io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_materialized<Scalar, Counter>(                                           \
        const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense::IOATTN_ISA
