// ioattn::sparse::backward_materialized: materializing sparse backward (SDDMM over Omega, P and
// dS stored, SpMM and transposed SpMM). Per (batch, kv head) in turn, for its group of query
// heads, square tiles of side b = tiling.rows, only the non-empty tiles of Omega (of Omega^T per
// key tile); P, then dS over it, in slow memory (group * Z_QK values in Omega's CSR order).
// Reference: backward_reference.cpp. r, c: tile sides; row tile i: T_i tiles, width C_i, Z_i pairs.
//   P:  parallel per (head, row tile i): read L_i                                      r
//         per tile j, d chunk: read Q_i[:,k], K_j[:,k]; S_ij on Omega        (r + c) * kw
//         P_ij = exp(scale*S_ij - L_i); write P_ij                                 nnz_ij
//   dV: parallel per (key tile j, d_v chunk x), per head, per row tile i with a pair in (i, j):
//         read P_ij, dO_i[:,x]; dV_jx += P_ij^T dO_i[:,x]; then write dV_jx  nnz_ij + r*xw, c*xw
//   dS: parallel per (head, row tile i): read O_i, dO_i chunks; D_i = rowsum(dO o O)    2*r*d_v
//         per tile j, d_v chunk: read dO_i[:,x], V_j[:,x]; dP_ij on Omega    (r + c)*xw
//         read P_ij; dS_ij = P_ij o (dP_ij - D_i); write dS_ij                  2*nnz_ij
//   dQ: parallel per (head, row tile i, d chunk k), per tile j: read dS_ij, K_j[:,k];
//         dQ_ik += dS_ij K_j[:,k]; then write scale * dQ_ik              nnz_ij + c*kw, r*kw
//   dK: parallel per (key tile j, d chunk k): as dV with dS_ij, Q_i[:,k]; write scale*dK_jk
// Resident: a dense r x c buffer per tile (r*c acquired although nnz_ij words move), so every
//   phase is within dense::backward_materialized's (materialized_backward_resident) <= 4b^2.
// I/O = io_cost_backward_materialized, per query head and row tile with T_i > 0 (vch =
//   ceil(d_v/b), dch = ceil(d/b)): reads r + T r d + C d + vch Z + T r d_v + 2 r d_v + T r d_v
//   + C d_v + Z + dch Z + C d + dch Z + T r d + iw ((2 + dch + 2 (vch + dch)) Z + (dch + vch)
//   Z_pp); writes 2 Z, plus n_q d per head and n_k (d + d_v) per kv slice. Indices, iw words
//   each: a pass over a tile's values reads their keys (P, dS, each d chunk of dQ) or Omega^T's
//   queries and positions (each chunk of dV, dK); a per-pair tile's SDDMMs read its keys per
//   chunk (tile_rule.hpp, Z_pp its pairs). The full pattern: the dense cost plus index words.
// Sparse inputs count their stored words (T nnz(Q_i), sums of nnz(K_j), nnz(V_j)) and are
//   scattered into the same buffers, or multiplied as stored on a tile with few pairs. Pairs
//   outside Omega are never multiplied; a row with L = -inf contributes zero. Flops: about
//   4 Z_QK (d + d_v) per head. Each output chunk is summed by one task in a fixed order.
// Tests: tests/sparse/backward_materialized_test.cpp, sparse_inputs_test.cpp

#include "support/block_keys.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
#include <ioattn/kernels/write_dkv.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/row_products.hpp"
#include "kernels/common/validate.hpp"
#include "kernels/materialized/backward_materialized_slice.hpp"
#include "kernels/materialized/tile_ops.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/strip.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::Slice;

/// P phase for head k, row tile blk: P_ij = exp(scale * Q_i K_j^T - L_i) on Omega per tile.
template <typename Scalar, typename Counter>
void probs_tile(const Slice<Scalar>& w, std::int64_t k, std::int64_t blk, int worker, Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const auto tiles = w.rows_view->tiles_of(blk);
    const std::int64_t i0 = blk * w.b, r = w.rows(i0), qs = w.q_slice(k), h = w.head(k);
    if (tiles.empty())
        return;
    io.acquire(r);
    io.read({Operand::lse, qs, i0, r, 0, 1});
    for (const BlockTile& t : tiles) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        io.acquire(r * c);
        for (std::int64_t k0 = 0; k0 < p.d; k0 += w.b) {
            const std::int64_t kw = std::min(w.b, p.d - k0);
            io.acquire((r + c) * kw);
            detail::read_cols(io, Operand::q, qs, w.src->q, w.bb, h, i0, r, k0, kw);
            detail::read_cols(io, Operand::k, w.kv_slice(), w.src->k, w.bb, w.g, j0, c, k0, kw);
            if (detail::per_pair_tile(t.nonzeros, r, c)) // the pairs' keys, once per chunk
                io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros});
            if constexpr (Counter::kComputes) { // --- S_ij += Q_i[:,k] K_j[:,k]^T on Omega ---
                detail::sddmm_chunk(
                    *w.s,
                    w.target(worker, i0, r, j0, c, t.nonzeros),
                    detail::ChunkRows<Scalar>{&w.src->q, w.bb, h, i0, r, w.q_chunk(worker)},
                    detail::ChunkRows<Scalar>{&w.src->k, w.bb, w.g, j0, c, w.kv_chunk(worker)},
                    k0,
                    kw,
                    k0 == 0);
            }
            io.release((r + c) * kw);
        }
        io.complete({Operand::scores, qs, i0, r, j0, c}); // S recomputed on the tile's Omega
        io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros}); // keys
        if constexpr (Counter::kComputes) {
            // --- P_ij = 2^(scale log2(e) S_ij - log2(e) L_i); a row with L = -inf: 0 ---
            const Scalar* s = w.tile(worker);
            const std::int64_t ld = w.ld();
            const auto scale = static_cast<Scalar>(p.scale * kernels::kLog2e);
            for (std::int64_t x = 0; x < r; ++x) {
                const Scalar l2 = kernels::lse2(*a.lse.row(w.bb, h, i0 + x));
                const auto [lo, hi] = w.segment(i0 + x, j0, c);
                Scalar* out = &w.store(k, lo);
                for (std::int64_t e = lo; e < hi; ++e)
                    out[e - lo] = std::min(s[x * ld + w.key(e) - j0] * scale, l2); // P <= 1
                if (l2 == std::numeric_limits<Scalar>::infinity())
                    std::fill(out, out + (hi - lo), Scalar(0));
                else
                    kernels::strip_probabilities(out, hi - lo, l2, Scalar(1), out);
            }
        }
        io.write({Operand::probs, qs, i0, t.nonzeros, j0, 1});
        io.release(r * c);
    }
    io.release(r);
}

/// dS phase for head k, row tile blk: D_i, then dS_ij = P_ij o (dO_i V_j^T - D_i) on Omega.
template <typename Scalar, typename Counter>
void d_scores_tile(
    const Slice<Scalar>& w, std::int64_t k, std::int64_t blk, int worker, Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const auto tiles = w.rows_view->tiles_of(blk);
    const std::int64_t i0 = blk * w.b, r = w.rows(i0), qs = w.q_slice(k), h = w.head(k);
    if (tiles.empty())
        return;
    Scalar *delta = nullptr, *dp = nullptr;
    if constexpr (Counter::kComputes) {
        delta = w.delta(worker);
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
    for (const BlockTile& t : tiles) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        io.acquire(r * c);
        for (std::int64_t x0 = 0; x0 < p.d_v; x0 += w.b) {
            const std::int64_t xw = std::min(w.b, p.d_v - x0);
            io.acquire((r + c) * xw);
            io.read({Operand::d_o, qs, i0, r, x0, xw});
            detail::read_cols(io, Operand::v, w.kv_slice(), w.src->v, w.bb, w.g, j0, c, x0, xw);
            if (detail::per_pair_tile(t.nonzeros, r, c)) // the pairs' keys, once per chunk
                io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros});
            if constexpr (Counter::kComputes) { // --- dP_ij += dO_i[:,x] V_j[:,x]^T on Omega ---
                const detail::RowSource<Scalar> d_o{a.d_o, nullptr};
                detail::sddmm_chunk(
                    *w.s,
                    w.target(worker, i0, r, j0, c, t.nonzeros),
                    detail::ChunkRows<Scalar>{&d_o, w.bb, h, i0, r, nullptr},
                    detail::ChunkRows<Scalar>{&w.src->v, w.bb, w.g, j0, c, w.kv_chunk(worker)},
                    x0,
                    xw,
                    x0 == 0);
            }
            io.release((r + c) * xw);
        }
        io.acquire(r * c);
        io.read({Operand::probs, qs, i0, t.nonzeros, j0, 1});
        io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros}); // keys
        if constexpr (Counter::kComputes) {
            const std::int64_t ld = w.ld();
            for (std::int64_t x = 0; x < r; ++x) { // --- dS_ij = P_ij o (dP_ij - D_i) ---
                const auto [lo, hi] = w.segment(i0 + x, j0, c);
                for (std::int64_t e = lo; e < hi; ++e)
                    w.store(k, e) *= dp[x * ld + w.key(e) - j0] - delta[x];
            }
        }
        io.write({Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
        io.release(2 * r * c);
    }
    io.release(r);
}

/// dQ phase for head k, row tile blk, d chunk k0: dQ_ik = scale * sum_j dS_ij K_j[:,k].
template <typename Scalar, typename Counter>
void d_q_chunk(const Slice<Scalar>& w,
               std::int64_t k,
               std::int64_t blk,
               std::int64_t k0,
               int worker,
               Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t i0 = blk * w.b, r = w.rows(i0), kw = std::min(w.b, p.d - k0);
    const std::int64_t qs = w.q_slice(k), h = w.head(k);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.acc(worker);
        std::fill(acc, acc + r * kw, Scalar(0));
    }
    io.acquire(r * kw);
    for (const BlockTile& t : w.rows_view->tiles_of(blk)) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        io.acquire(r * c + c * kw);
        io.read({Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
        io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros}); // keys
        detail::read_cols(io, Operand::k, w.kv_slice(), w.src->k, w.bb, w.g, j0, c, k0, kw);
        if constexpr (Counter::kComputes) {
            const auto kj = w.src->k.rows(w.bb, w.g, j0, c, k0, kw, w.kv_chunk(worker));
            for (std::int64_t x = 0; x < r; ++x) { // --- dQ_ik += dS_ij K_j[:,k] on Omega ---
                const auto [lo, hi] = w.segment(i0 + x, j0, c);
                kernels::spmm_row(
                    &w.store(k, lo),
                    hi - lo,
                    [&, lo = lo](std::int64_t e) { return kj.row(w.key(lo + e) - j0); },
                    acc + x * kw,
                    kw);
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
    io.write({Operand::d_q, qs, i0, r, k0, kw});
    io.release(r * kw);
}

/// dV (values = true) or dK phase for key tile jblk and column chunk z0:
/// dV_jx = sum P_ij^T dO_i[:,x] or dK_jk = scale * sum dS_ij^T Q_i[:,k], over the heads of the
/// group and the row tiles with a pair in tile (i, j), in order.
template <typename Scalar, typename Counter>
void d_kv_chunk(const Slice<Scalar>& w,
                bool values,
                std::int64_t jblk,
                std::int64_t z0,
                int worker,
                Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t j0 = jblk * w.b, c = w.cols(j0);
    const std::int64_t zw = std::min(w.b, (values ? p.d_v : p.d) - z0);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.acc(worker);
        std::fill(acc, acc + c * zw, Scalar(0));
    }
    const Support& st = w.s->transposed(); // keys' columns, and each entry's place in Omega
    const auto positions = w.s->transposed_positions();
    io.acquire(c * zw);
    for (std::int64_t k = 0; k < p.group(); ++k) {
        const std::int64_t qs = w.q_slice(k), h = w.head(k);
        for (const BlockTile& t : w.keys_view->tiles_of(jblk)) {
            const std::int64_t i0 = t.col_block * w.b, r = w.rows(i0);
            io.acquire(r * c + r * zw);
            io.read({values ? Operand::probs : Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
            // Omega^T's column indices (the queries) and each entry's position in Omega
            io.read({Operand::index, qs, i0, 2, j0, kIndexReadWords<Scalar> * t.nonzeros});
            if (values)
                io.read({Operand::d_o, qs, i0, r, z0, zw});
            else
                detail::read_cols(io, Operand::q, qs, w.src->q, w.bb, h, i0, r, z0, zw);
            if constexpr (Counter::kComputes) {
                const detail::RowBlock<Scalar> rows =
                    values ? detail::RowBlock<Scalar>{a.d_o.row(w.bb, h, i0) + z0, a.d_o.stride_row}
                           : w.src->q.rows(w.bb, h, i0, r, z0, zw, w.q_chunk(worker));
                Scalar* pv = w.column(worker);
                for (std::int64_t y = 0; y < c; ++y) { // --- acc_y += P^T dO or dS^T Q on Omega,
                    // key y's stored values gathered down its column, its row in registers ---
                    const auto col = st.row(j0 + y);
                    const std::int64_t base = st.row_offsets()[static_cast<std::size_t>(j0 + y)];
                    const auto [lo, hi] = detail::keys_in(col, i0, r);
                    for (std::int64_t e = lo; e < hi; ++e)
                        pv[e - lo] = w.store(k, positions[static_cast<std::size_t>(base + e)]);
                    kernels::spmm_row(
                        pv,
                        hi - lo,
                        [&, lo = lo](std::int64_t e) {
                            return rows.row(col[static_cast<std::size_t>(lo + e)] - i0);
                        },
                        acc + y * zw,
                        zw);
                }
            }
            io.release(r * c + r * zw);
        }
    }
    kernels::write_dkv(a, values, w.bb, w.g, w.kv_slice(), j0, c, z0, zw, acc, io);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const SparseInputs<Scalar>& inputs,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter) {
    constexpr const char* kWhere = "ioattn::sparse::backward_materialized";
    BackwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src =
        detail::validate_inputs(a, support, inputs, kWhere, !Counter::kComputes);
    detail::validate(
        a, support, &tiling, Schedule::materialized, memory, kWhere, true, Pass::backward);
    const Problem& p = a.problem;
    const std::int64_t b = tiling.rows;
    const BlockView& rows_view = support.cached_block_view(b, b);
    const BlockView& keys_view = support.transposed().cached_block_view(b, b);
    const std::int64_t row_tiles = rows_view.row_blocks, key_tiles = keys_view.row_blocks;
    const std::int64_t dch = (p.d + b - 1) / b, vch = (p.d_v + b - 1) / b;
    // fast memory: D_i, one tile and one chunk per worker; slow memory: P, then dS (CSR order)
    const bool computes = Counter::kComputes;
    const int workers = computes ? max_concurrency() : 0;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const kernels::Workspace<Scalar> fast(workers, Slice<Scalar>::scratch_words(p, b));
    const kernels::Workspace<Scalar> slow(computes ? 1 : 0, p.group() * support.z_qk());
    alloc.allocate();
    Scalar* const pds = computes ? slow.slab(0) : nullptr;
    Slice<Scalar> w{&a, &src, &support, &rows_view, &keys_view, b, 0, 0, pds, &fast};
    for (int worker = 0; worker < workers; ++worker)
        std::fill(w.ones(worker), w.ones(worker) + w.ld(), Scalar(1));
    for (std::int64_t kv = 0; kv < p.batch * p.kv_heads; ++kv) { // kv slices in turn
        w.bb = kv / p.kv_heads;
        w.g = kv % p.kv_heads;
        const std::int64_t per_head = p.group() * row_tiles;
        // --- P = exp(scale * Q K^T - L) on Omega ---
        parallel_for_counted(per_head, counter, [&](std::int64_t t, int worker, Counter& io) {
            probs_tile(w, t / row_tiles, t % row_tiles, worker, io);
        });
        // --- dV = P^T dO ---
        parallel_for_counted(
            key_tiles * vch, counter, [&](std::int64_t t, int worker, Counter& io) {
                d_kv_chunk(w, true, t / vch, t % vch * b, worker, io);
            });
        // --- dS = P o (dO V^T - D) on Omega ---
        parallel_for_counted(per_head, counter, [&](std::int64_t t, int worker, Counter& io) {
            d_scores_tile(w, t / row_tiles, t % row_tiles, worker, io);
        });
        // --- dQ = scale * dS K ---
        parallel_for_counted(per_head * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
            const std::int64_t tile = t / dch;
            d_q_chunk(w, tile / row_tiles, tile % row_tiles, t % dch * b, worker, io);
        });
        // --- dK = scale * dS^T Q ---
        parallel_for_counted(
            key_tiles * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
                d_kv_chunk(w, false, t / dch, t % dch * b, worker, io);
            });
    }
}

// NOLINTBEGIN(bugprone-macro-parentheses): the arguments are types
#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_materialized<Scalar, Counter>(const BackwardArgs<Scalar>&,              \
                                                         const Support&,                           \
                                                         const SparseInputs<Scalar>&,              \
                                                         const Tiling&,                            \
                                                         const MemoryModel&,                       \
                                                         Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

} // namespace ioattn::sparse::IOATTN_ISA
