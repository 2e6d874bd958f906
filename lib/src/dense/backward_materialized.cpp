// ioattn::dense::backward_materialized: small-cache backward (the Algorithm-6 idea of Li et al.)
// Per (batch, kv head) in turn, for the group of query heads that share it, square tiles b x b,
// P and dS stored in slow memory (one group*n_q*n_k buffer, dS overwriting P). Reference:
// backward_reference.cpp. b = tiling.rows = tiling.cols; r, c: tile heights and widths; the
// visible column tiles of row tile i are j0 < visible_keys(last row of i), each full width.
//   P:  parallel per (head, row tile i) with a visible key: read L_i                   r
//         per visible tile j: per d chunk: read Q_i[:,k], K_j[:,k]         (r + c) * kw
//         P_ij = exp(scale*S_ij - L_i), masked entries 0; write P_ij              r*c
//   dV: parallel per (key tile j, d_v chunk x), per head, per row tile i that sees j:
//         read P_ij, dO_i[:,x]; dV_jx += P_ij^T dO_i[:,x]; then write dV_jx  r*c + r*xw, c*xw
//   dS: parallel per (head, row tile i) with a visible key: D_i = rowsum(dO o O)   2*r*d_v
//         per visible tile j, d_v chunk: read dO_i[:,x], V_j[:,x]        (r + c)*xw
//           dP_ij += dO_i[:,x] V_j[:,x]^T
//         read P_ij; dS_ij = P_ij o (dP_ij - D_i), masked entries 0; write dS_ij   r*c, r*c
//   dQ: parallel per (head, row tile i, d chunk k), per visible tile j: read dS_ij, K_j[:,k];
//         dQ_ik += dS_ij K_j[:,k]; then write scale * dQ_ik            r*c + c*kw, r*kw
//   dK: parallel per (key tile j, d chunk k), per head, per row tile i that sees j:
//         read dS_ij, Q_i[:,k]; dK_jk += dS_ij^T Q_i[:,k]; then write scale * dK_jk
//                                                                      r*c + r*kw, c*kw
// Resident: L_i and D_i stay for their row tile; the largest phase is
//   max(P: r + rc + r kd + c kd, dV: c kv + rc + r kv, dS: r + max(2 r kv, rc + r kv + c kv, 2rc),
//       dQ/dK: max(r_all kd, r kd + rc + c kd)) <= 3b^2 + b <= 4b^2
//   (materialized_backward_resident; r is the tallest row tile with a visible key).
// I/O = io_cost_backward_materialized: per (head, row tile) with T visible tiles of width C,
//   vch = ceil(d_v/b), dch = ceil(d/b): T r d + C d + r  +  vch r C + T r d_v  +  2 r d_v
//   + T r d_v + C d_v + r C  +  dch r C + C d  +  dch r C + T r d;  writes 2 r C + r d (dQ),
//   and n_k (d + d_v) per kv slice.
// Masked pairs are never formed, so NaN in a hidden row cannot leak; a row with L = -inf has
// P = 0. Flops: about 4*allowed_pairs*(d + d_v). Each output chunk is summed by one task in a
// fixed order: thread-count invariant. Tests: tests/lib/dense/backward_materialized_test.cpp

#include "dense/kernel_entry.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
#include <ioattn/kernels/write_dkv.hpp>

// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/strip.hpp>

namespace ioattn::dense::IOATTN_ISA {

namespace {

/// One kv slice (batch bb, kv head g) and its group of query heads; `probs` is the slow-memory
/// P/dS buffer [group][n_q][n_k] and `fast` the per-worker fast-memory scratch: a row vector
/// (rb) then a tile (rb x cb), the accumulators of dQ, dV and dK (max(rb, cb) x wb) reusing
/// both, with rb = min(b, n_q), cb = min(b, n_k), wb = min(b, max(d, d_v)).
template <typename Scalar>
struct Group {
    const BackwardArgs<Scalar>* a;
    std::int64_t b, bb, g;
    Scalar* probs;
    const kernels::Workspace<Scalar>* fast;

    [[nodiscard]] static std::int64_t scratch_words(const Problem& p, std::int64_t b) {
        const std::int64_t rb = std::min(b, p.n_q), cb = std::min(b, p.n_k);
        return rb + std::max(rb * cb, std::max(rb, cb) * std::min(b, std::max(p.d, p.d_v)));
    }

    [[nodiscard]] Scalar* vec(int worker) const { return fast->slab(worker); }

    [[nodiscard]] Scalar* tile(int worker) const { return vec(worker) + std::min(b, p().n_q); }

    [[nodiscard]] const Problem& p() const { return a->problem; }

    [[nodiscard]] std::int64_t head(std::int64_t k) const { return g * p().group() + k; }

    [[nodiscard]] std::int64_t q_slice(std::int64_t k) const { return bb * p().heads + head(k); }

    [[nodiscard]] std::int64_t kv_slice() const { return bb * p().kv_heads + g; }

    [[nodiscard]] std::int64_t rows(std::int64_t i0) const { return std::min(b, p().n_q - i0); }

    [[nodiscard]] std::int64_t cols(std::int64_t j0) const { return std::min(b, p().n_k - j0); }

    /// Keys visible to the last row of row tile i0: its visible tiles are j0 < kv_end.
    [[nodiscard]] std::int64_t kv_end(std::int64_t i0) const {
        return p().visible_keys(i0 + rows(i0) - 1);
    }

    /// Columns of tile j0 (width c) that row i sees.
    [[nodiscard]] std::int64_t seen(std::int64_t i, std::int64_t j0, std::int64_t c) const {
        return std::clamp<std::int64_t>(p().visible_keys(i) - j0, 0, c);
    }

    /// Row i of head k of the P/dS buffer, from column j0 (rows at a line-aligned stride, so a
    /// tile row fills whole cache lines).
    [[nodiscard]] Scalar* pds(std::int64_t k, std::int64_t i, std::int64_t j0) const {
        return probs + (k * p().n_q + i) * lane_padded(p().n_k) + j0;
    }
};

/// tile (r x c) += A_i[:,z] B_j[:,z]^T on the visible entries, each entry the dot product of
/// a chunk row of A_i and one of B_j read in place (no transposed copy: the footprint is the
/// tile and the two chunks, as counted); a_row(x) and b_row(y) point at the chunk of row x of
/// A_i and row y of B_j.
template <typename Scalar, typename RowA, typename RowB>
void add_product(const Group<Scalar>& w,
                 std::int64_t i0,
                 std::int64_t j0,
                 std::int64_t zw,
                 const RowA& a_row,
                 const RowB& b_row,
                 Scalar* tile) {
    const std::int64_t r = w.rows(i0), c = w.cols(j0);
    for (std::int64_t x = 0; x < r; ++x) {
        const Scalar* ar = a_row(x);
        Scalar* t = tile + x * c;
        const std::int64_t seen = w.seen(i0 + x, j0, c);
        for (std::int64_t y = 0; y < seen; ++y)
            t[y] += kernels::dot(ar, b_row(y), zw);
    }
}

/// P phase for head k, row tile i0: P_ij = exp(scale * Q_i K_j^T - L_i) per visible tile.
template <typename Scalar, typename Counter>
void probs_tile(const Group<Scalar>& w, std::int64_t k, std::int64_t i0, int worker, Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t r = w.rows(i0), kv_end = w.kv_end(i0), qs = w.q_slice(k);
    if (kv_end == 0)
        return;
    io.acquire(r);
    io.read({Operand::lse, qs, i0, r, 0, 1});
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += w.b) {
        const std::int64_t c = w.cols(j0);
        io.acquire(r * c);
        Scalar* s = nullptr;
        if constexpr (Counter::kComputes) {
            s = w.tile(worker);
            std::fill(s, s + r * c, Scalar(0));
        }
        for (std::int64_t k0 = 0; k0 < p.d; k0 += w.b) {
            const std::int64_t kw = std::min(w.b, p.d - k0);
            io.acquire((r + c) * kw);
            io.read({Operand::q, qs, i0, r, k0, kw});
            io.read({Operand::k, w.kv_slice(), j0, c, k0, kw});
            if constexpr (Counter::kComputes) {
                // --- S_ij += Q_i[:,k] K_j[:,k]^T (visible entries) ---
                add_product(
                    w,
                    i0,
                    j0,
                    kw,
                    [&](std::int64_t x) { return a.q.row(w.bb, w.head(k), i0 + x) + k0; },
                    [&](std::int64_t y) { return a.k.row(w.bb, w.g, j0 + y) + k0; },
                    s);
            }
            io.release((r + c) * kw);
        }
        io.complete({Operand::scores, qs, i0, r, j0, c});
        if constexpr (Counter::kComputes) {
            // --- P_ij = exp(scale * S_ij - L_i); masked and L = -inf rows: 0 ---
            const auto scale = static_cast<Scalar>(p.scale);
            for (std::int64_t x = 0; x < r; ++x) {
                const Scalar lse = *a.lse.row(w.bb, w.head(k), i0 + x);
                const std::int64_t seen =
                    lse == -std::numeric_limits<Scalar>::infinity() ? 0 : w.seen(i0 + x, j0, c);
                Scalar* out = w.pds(k, i0 + x, j0);
                for (std::int64_t y = 0; y < c; ++y)
                    out[y] = y < seen ? std::exp(std::min(scale * s[x * c + y] - lse, Scalar(0)))
                                      : Scalar(0); // P <= 1 though L is rounded (NaN passes)
            }
        }
        io.write({Operand::probs, qs, i0, r, j0, c});
        io.release(r * c);
    }
    io.release(r);
}

/// dS phase for head k, row tile i0: D_i, then dS_ij = P_ij o (dO_i V_j^T - D_i) per visible tile.
template <typename Scalar, typename Counter>
void d_scores_tile(
    const Group<Scalar>& w, std::int64_t k, std::int64_t i0, int worker, Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t r = w.rows(i0), kv_end = w.kv_end(i0), qs = w.q_slice(k), h = w.head(k);
    if (kv_end == 0)
        return;
    Scalar *delta = nullptr, *dp = nullptr;
    if constexpr (Counter::kComputes) {
        delta = w.vec(worker);
        dp = w.tile(worker);
        std::fill(delta, delta + r, Scalar(0));
    }
    io.acquire(r);
    for (std::int64_t x0 = 0; x0 < p.d_v; x0 += w.b) {
        const std::int64_t xw = std::min(w.b, p.d_v - x0);
        io.acquire(2 * r * xw);
        io.read({Operand::o, qs, i0, r, x0, xw});
        io.read({Operand::d_o, qs, i0, r, x0, xw});
        if constexpr (Counter::kComputes)
            for (std::int64_t x = 0; x < r; ++x) // --- D_i += rowsum(dO_i o O_i) ---
                delta[x] += kernels::dot(a.d_o.row(w.bb, h, i0 + x) + x0,
                                         static_cast<const Scalar*>(a.o.row(w.bb, h, i0 + x)) + x0,
                                         xw);
        io.release(2 * r * xw);
    }
    for (std::int64_t j0 = 0; j0 < kv_end; j0 += w.b) {
        const std::int64_t c = w.cols(j0);
        io.acquire(r * c);
        if constexpr (Counter::kComputes)
            std::fill(dp, dp + r * c, Scalar(0));
        for (std::int64_t x0 = 0; x0 < p.d_v; x0 += w.b) {
            const std::int64_t xw = std::min(w.b, p.d_v - x0);
            io.acquire((r + c) * xw);
            io.read({Operand::d_o, qs, i0, r, x0, xw});
            io.read({Operand::v, w.kv_slice(), j0, c, x0, xw});
            if constexpr (Counter::kComputes) {
                // --- dP_ij += dO_i[:,x] V_j[:,x]^T (visible entries) ---
                add_product(
                    w,
                    i0,
                    j0,
                    xw,
                    [&](std::int64_t x) { return a.d_o.row(w.bb, h, i0 + x) + x0; },
                    [&](std::int64_t y) { return a.v.row(w.bb, w.g, j0 + y) + x0; },
                    dp);
            }
            io.release((r + c) * xw);
        }
        io.acquire(r * c);
        io.read({Operand::probs, qs, i0, r, j0, c});
        if constexpr (Counter::kComputes) {
            // --- dS_ij = P_ij o (dP_ij - D_i), written over P_ij; masked entries 0 ---
            for (std::int64_t x = 0; x < r; ++x) {
                Scalar* ps = w.pds(k, i0 + x, j0);
                const std::int64_t seen = w.seen(i0 + x, j0, c);
                for (std::int64_t y = 0; y < c; ++y)
                    ps[y] = y < seen ? ps[y] * (dp[x * c + y] - delta[x]) : Scalar(0);
            }
        }
        io.write({Operand::d_scores, qs, i0, r, j0, c});
        io.release(2 * r * c);
    }
    io.release(r);
}

/// dQ phase for head k, row tile i0, d chunk k0: dQ_ik = scale * sum_j dS_ij K_j[:,k].
template <typename Scalar, typename Counter>
void d_q_chunk(const Group<Scalar>& w,
               std::int64_t k,
               std::int64_t i0,
               std::int64_t k0,
               int worker,
               Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t r = w.rows(i0), kw = std::min(w.b, p.d - k0), h = w.head(k);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.vec(worker);
        std::fill(acc, acc + r * kw, Scalar(0));
    }
    io.acquire(r * kw);
    for (std::int64_t j0 = 0; j0 < w.kv_end(i0); j0 += w.b) {
        const std::int64_t c = w.cols(j0);
        io.acquire(r * c + c * kw);
        io.read({Operand::d_scores, w.q_slice(k), i0, r, j0, c});
        io.read({Operand::k, w.kv_slice(), j0, c, k0, kw});
        if constexpr (Counter::kComputes) {
            // --- dQ_ik += dS_ij K_j[:,k] (visible entries) ---
            for (std::int64_t x = 0; x < r; ++x) {
                const Scalar* ds = w.pds(k, i0 + x, j0);
                const std::int64_t seen = w.seen(i0 + x, j0, c);
                for (std::int64_t y = 0; y < seen; ++y) {
                    const Scalar* key = a.k.row(w.bb, w.g, j0 + y) + k0;
                    for (std::int64_t z = 0; z < kw; ++z)
                        acc[x * kw + z] += ds[y] * key[z];
                }
            }
        }
        io.release(r * c + c * kw);
    }
    if constexpr (Counter::kComputes) {
        const auto scale = static_cast<Scalar>(p.scale);
        for (std::int64_t x = 0; x < r; ++x)
            for (std::int64_t z = 0; z < kw; ++z) // dQ = scale * dS K
                a.d_q.row(w.bb, h, i0 + x)[k0 + z] = scale * acc[x * kw + z];
    }
    io.write({Operand::d_q, w.q_slice(k), i0, r, k0, kw});
    io.release(r * kw);
}

/// acc (c x zw) += P_ij^T dO_i[:,z] (values) or dS_ij^T Q_i[:,z], visible entries only.
template <typename Scalar>
void add_transposed(const Group<Scalar>& w,
                    bool values,
                    std::int64_t k,
                    std::int64_t i0,
                    std::int64_t j0,
                    std::int64_t z0,
                    std::int64_t zw,
                    Scalar* acc) {
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t r = w.rows(i0), c = w.cols(j0);
    for (std::int64_t x = 0; x < r; ++x) {
        const Scalar* ps = w.pds(k, i0 + x, j0);
        const Scalar* row = values ? a.d_o.row(w.bb, w.head(k), i0 + x) + z0
                                   : a.q.row(w.bb, w.head(k), i0 + x) + z0;
        const std::int64_t seen = w.seen(i0 + x, j0, c);
        for (std::int64_t y = 0; y < seen; ++y)
            for (std::int64_t z = 0; z < zw; ++z)
                acc[y * zw + z] += ps[y] * row[z];
    }
}

/// dV (values = true) or dK phase for key tile j0 and one column chunk z0 of dV or dK:
/// dV_jx = sum P_ij^T dO_i[:,x] or dK_jk = scale * sum dS_ij^T Q_i[:,k], summed over the heads
/// of the group and the row tiles that see j, in order.
template <typename Scalar, typename Counter>
void d_kv_chunk(const Group<Scalar>& w,
                bool values,
                std::int64_t j0,
                std::int64_t z0,
                int worker,
                Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t c = w.cols(j0), width = values ? p.d_v : p.d;
    const std::int64_t zw = std::min(w.b, width - z0);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.vec(worker);
        std::fill(acc, acc + c * zw, Scalar(0));
    }
    io.acquire(c * zw);
    for (std::int64_t k = 0; k < p.group(); ++k) {
        for (std::int64_t i0 = 0; i0 < p.n_q; i0 += w.b) {
            if (w.kv_end(i0) <= j0)
                continue; // no row of tile i sees tile j
            const std::int64_t r = w.rows(i0);
            io.acquire(r * c + r * zw);
            io.read({values ? Operand::probs : Operand::d_scores, w.q_slice(k), i0, r, j0, c});
            io.read({values ? Operand::d_o : Operand::q, w.q_slice(k), i0, r, z0, zw});
            if constexpr (Counter::kComputes)
                add_transposed(w, values, k, i0, j0, z0, zw, acc);
            io.release(r * c + r * zw);
        }
    }
    kernels::write_dkv(a, values, w.bb, w.g, w.kv_slice(), j0, c, z0, zw, acc, io);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::backward_materialized";
    const BackwardArgs<Scalar> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::materialized, Pass::backward, kWhere);
    const Problem& p = a.problem;
    const std::int64_t b = tiling.rows;
    const std::int64_t row_tiles = (p.n_q + b - 1) / b, key_tiles = (p.n_k + b - 1) / b;
    const std::int64_t dch = (p.d + b - 1) / b, vch = (p.d_v + b - 1) / b;
    // fast memory: one b x b tile and b-wide chunks (plus D_i); slow memory: P, then dS
    const bool computes = Counter::kComputes;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const auto fast = detail::worker_scratch<Scalar, Counter>(Group<Scalar>::scratch_words(p, b));
    const auto slow = detail::scratch<Scalar, Counter>(1, p.group() * p.n_q * lane_padded(p.n_k));
    alloc.allocate();
    for (std::int64_t kv = 0; kv < p.batch * p.kv_heads; ++kv) {
        const Group<Scalar> w{
            &a, b, kv / p.kv_heads, kv % p.kv_heads, computes ? slow.slab(0) : nullptr, &fast};
        const std::int64_t per_head = p.group() * row_tiles;
        // --- P = exp(scale * Q K^T - L) ---
        parallel_for_counted(per_head, counter, [&](std::int64_t t, int worker, Counter& io) {
            probs_tile(w, t / row_tiles, t % row_tiles * b, worker, io);
        });
        // --- dV = P^T dO ---
        parallel_for_counted(
            key_tiles * vch, counter, [&](std::int64_t t, int worker, Counter& io) {
                d_kv_chunk(w, true, t / vch * b, t % vch * b, worker, io);
            });
        // --- dS = P o (dO V^T - D) ---
        parallel_for_counted(per_head, counter, [&](std::int64_t t, int worker, Counter& io) {
            d_scores_tile(w, t / row_tiles, t % row_tiles * b, worker, io);
        });
        // --- dQ = scale * dS K ---
        parallel_for_counted(per_head * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
            const std::int64_t tile = t / dch;
            d_q_chunk(w, tile / row_tiles, tile % row_tiles * b, t % dch * b, worker, io);
        });
        // --- dK = scale * dS^T Q ---
        parallel_for_counted(
            key_tiles * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
                d_kv_chunk(w, false, t / dch * b, t % dch * b, worker, io);
            });
    }
}

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are types
#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_materialized<Scalar, Counter>(                                          \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

} // namespace ioattn::dense::IOATTN_ISA
