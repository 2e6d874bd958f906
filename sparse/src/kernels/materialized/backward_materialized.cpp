// ioattn::sparse::backward_materialized: materializing sparse backward (SDDMM over Omega, P and
// dS stored, SpMM and transposed SpMM). Per (batch, kv head) in turn, for its group of query
// heads, square tiles of side b = tiling.rows, only the non-empty tiles of Omega (of Omega^T per
// key tile); P, then dS over it, in slow memory (group * Z_QK values, tile-major: a tile's
// values as one run, so that dV and dK, which walk Omega^T, gather within it).
// Feature chunks of width w = tiling.feature_chunk(). A tile (i, j) reads only its touched
// rows: the keys of K_j, V_j some row of i pairs with, the queries of Q_i, dO_i in dV and dK
// with a key in j (u_ij keys, u'_ij queries; a dense tile packs the others as zero rows).
// Reference: backward_reference.cpp. r, c: tile sides; row tile i: T_i tiles, Z_i pairs.
//   P:  per (head, row tile i): read L_i (and Q_i when d <= w, kept)       r (+ r d)
//         per tile j, d chunk: read Q_i[:,k] (unless kept), K_j[:,k]   (r + u_ij) * kw
//         P_ij = exp(scale*S_ij - L_i); write P_ij                                 nnz_ij
//   dV: per (key tile j, d_v chunk x), per head, per row tile i with a pair in (i, j):
//         read P_ij, dO_i[:,x]; dV_jx += P_ij^T dO_i[:,x]; write dV_jx  nnz_ij + u'_ij xw, c xw
//   dS: per (head, row tile i): read O_i, dO_i (dO_i once, kept, when d_v <= w); D_i  2 r d_v
//         per tile j, d_v chunk: read dO_i[:,x] (unless kept), V_j[:,x]  (r + u_ij) * xw
//         read P_ij; dS_ij = P_ij o (dP_ij - D_i); write dS_ij                  2*nnz_ij
//   dQ: per (head, row tile i, d chunk k), per tile j: read dS_ij, K_j[:,k];
//         dQ_ik += dS_ij K_j[:,k]; then write scale * dQ_ik           nnz_ij + u_ij kw, r kw
//   dK: per (key tile j, d chunk k): as dV with dS_ij, Q_i[:,k]; write scale*dK_jk
// Resident: a dense r x c buffer per tile (r*c acquired although nnz_ij words move), c x kw
//   chunks: materialized_backward_resident, <= 4b^2 for w = b (dO_i kept beside dS's tiles).
// I/O = io_cost_backward_materialized, per query head and row tile with T_i > 0 (vch =
//   ceil(d_v/w), dch = ceil(d/w), U_i = sum_j u_ij = the keys i sees, R_i = sum_j u'_ij = its
//   (row, key tile) pairs): reads r + T' r d + U d + vch Z + R d_v + 2 r d_v + T'' r d_v + U d_v
//   + Z + dch Z + U d + dch Z + R d + iw ((2 + dch + 2 (vch + dch)) Z + (dch + vch) Z_pp),
//   T' = 1 if d <= w else T, T'' = 0 if d_v <= w else T; writes 2 Z, plus n_q d per head and
//   n_k (d + d_v) per kv slice. Indices, iw words each: a pass over a tile's values reads their
//   keys (P, dS, each d chunk of dQ) or Omega^T's queries and places (each chunk of dV, dK);
//   a per-pair tile's SDDMMs read its keys per chunk (tile_rule.hpp, Z_pp its pairs).
// Sparse inputs count their stored words (nnz(Q_i), nnz of the touched rows) and are
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
#include <memory>
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
#include "kernels/materialized/backward_materialized_spmm.hpp"
#include "kernels/materialized/tile_ops.hpp"

#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/strip.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::d_kv_chunk;
using detail::d_q_chunk;
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
    const bool q_held = p.d <= w.w; // Q_i read once, kept over the row tile's tiles
    io.acquire(r);
    io.read({Operand::lse, qs, i0, r, 0, 1});
    if (q_held) {
        io.acquire(r * p.d);
        detail::read_rows(io, Operand::q, qs, w.src->q, w.bb, h, i0, r);
    }
    [[maybe_unused]] std::int64_t at =
        w.s->row_offsets()[static_cast<std::size_t>(i0)]; // the tile's P
    for (const BlockTile& t : tiles) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        const auto keys = w.touched_keys(i0, j0, c);
        io.acquire(r * c);
        for (std::int64_t k0 = 0; k0 < p.d; k0 += w.w) {
            const std::int64_t kw = std::min(w.w, p.d - k0), q_words = q_held ? 0 : r * kw;
            io.acquire(q_words + c * kw);
            if (!q_held)
                detail::read_cols(io, Operand::q, qs, w.src->q, w.bb, h, i0, r, k0, kw);
            detail::read_gathered(io,
                                  Operand::k,
                                  w.kv_slice(),
                                  w.src->k,
                                  w.bb,
                                  w.g,
                                  keys.data(),
                                  static_cast<std::int64_t>(keys.size()),
                                  k0,
                                  kw);
            if (detail::per_pair_tile(t.nonzeros, r, c)) // the pairs' keys, once per chunk
                io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros});
            if constexpr (Counter::kComputes) { // --- S_ij += Q_i[:,k] K_j[:,k]^T on Omega ---
                detail::sddmm_chunk(
                    *w.s,
                    w.target(worker, i0, r, j0, c, t.nonzeros, keys),
                    detail::ChunkRows<Scalar>{&w.src->q, w.bb, h, i0, r, w.q_chunk(worker)},
                    detail::ChunkRows<Scalar>{
                        &w.src->k, w.bb, w.g, j0, c, w.kv_chunk(worker), keys},
                    k0,
                    kw,
                    k0 == 0);
            }
            io.release(q_words + c * kw);
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
                Scalar* out = &w.store(k, at);
                at += hi - lo;
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
    io.release(r + (q_held ? r * p.d : 0));
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
    const bool held = p.d_v <= w.w; // dO_i read once, kept for D_i and the row tile's tiles
    io.acquire(r);
    if (held) {
        io.acquire(r * p.d_v);
        io.read({Operand::d_o, qs, i0, r, 0, p.d_v});
    }
    for (std::int64_t x0 = 0; x0 < p.d_v; x0 += w.w) {
        const std::int64_t xw = std::min(w.w, p.d_v - x0), d_o_words = held ? 0 : r * xw;
        io.acquire(r * xw + d_o_words);
        io.read({Operand::o, qs, i0, r, x0, xw});
        if (!held)
            io.read({Operand::d_o, qs, i0, r, x0, xw});
        if constexpr (Counter::kComputes)
            for (std::int64_t x = 0; x < r; ++x) // --- D_i += rowsum(dO_i o O_i) ---
                delta[x] += kernels::dot(a.d_o.row(w.bb, h, i0 + x) + x0,
                                         static_cast<const Scalar*>(a.o.row(w.bb, h, i0 + x)) + x0,
                                         xw);
        io.release(r * xw + d_o_words);
    }
    [[maybe_unused]] std::int64_t at =
        w.s->row_offsets()[static_cast<std::size_t>(i0)]; // the tile's P, dS
    for (const BlockTile& t : tiles) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        const auto keys = w.touched_keys(i0, j0, c);
        io.acquire(r * c);
        for (std::int64_t x0 = 0; x0 < p.d_v; x0 += w.w) {
            const std::int64_t xw = std::min(w.w, p.d_v - x0), d_o_words = held ? 0 : r * xw;
            io.acquire(d_o_words + c * xw);
            if (!held)
                io.read({Operand::d_o, qs, i0, r, x0, xw});
            detail::read_gathered(io,
                                  Operand::v,
                                  w.kv_slice(),
                                  w.src->v,
                                  w.bb,
                                  w.g,
                                  keys.data(),
                                  static_cast<std::int64_t>(keys.size()),
                                  x0,
                                  xw);
            if (detail::per_pair_tile(t.nonzeros, r, c)) // the pairs' keys, once per chunk
                io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros});
            if constexpr (Counter::kComputes) { // --- dP_ij += dO_i[:,x] V_j[:,x]^T on Omega ---
                const detail::RowSource<Scalar> d_o{a.d_o, nullptr};
                detail::sddmm_chunk(*w.s,
                                    w.target(worker, i0, r, j0, c, t.nonzeros, keys),
                                    detail::ChunkRows<Scalar>{&d_o, w.bb, h, i0, r, nullptr},
                                    detail::ChunkRows<Scalar>{
                                        &w.src->v, w.bb, w.g, j0, c, w.kv_chunk(worker), keys},
                                    x0,
                                    xw,
                                    x0 == 0);
            }
            io.release(d_o_words + c * xw);
        }
        io.acquire(r * c);
        io.read({Operand::probs, qs, i0, t.nonzeros, j0, 1});
        io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros}); // keys
        if constexpr (Counter::kComputes) {
            const std::int64_t ld = w.ld();
            for (std::int64_t x = 0; x < r; ++x) { // --- dS_ij = P_ij o (dP_ij - D_i) ---
                const auto [lo, hi] = w.segment(i0 + x, j0, c);
                for (std::int64_t e = lo; e < hi; ++e)
                    w.store(k, at + e - lo) *= dp[x * ld + w.key(e) - j0] - delta[x];
                at += hi - lo;
            }
        }
        io.write({Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
        io.release(2 * r * c);
    }
    io.release(r + (held ? r * p.d_v : 0));
}

/// The P/dS store is tile-major (each non-empty tile's values together, row by row, in the
/// order of Omega's b x b tiles per row tile), so that every phase reads a tile's values as one
/// run. Per entry of Omega^T, its place there (dV and dK gather by it): built once per (support,
/// b) and kept with the support, as its transpose is.
inline std::shared_ptr<const std::vector<std::int64_t>> tile_places(const Support& s,
                                                                    const BlockView& view) {
    const std::int64_t b = view.rows;
    const auto kept = s.cached_value("materialized-places:" + std::to_string(b), [&] {
        std::vector<std::int64_t> at(static_cast<std::size_t>(s.z_qk()));
        for (std::int64_t i = 0; i < view.row_blocks; ++i) {
            const std::int64_t i0 = i * b, r = view.block_rows(i);
            std::int64_t next = s.row_offsets()[static_cast<std::size_t>(i0)];
            for (const BlockTile& t : view.tiles_of(i)) {
                const std::int64_t j0 = t.col_block * b, c = view.block_cols(t.col_block);
                for (std::int64_t x = 0; x < r; ++x) {
                    const std::int64_t base = s.row_offsets()[static_cast<std::size_t>(i0 + x)];
                    const auto [lo, hi] = detail::keys_in(s.row(i0 + x), j0, c);
                    for (std::int64_t e = lo; e < hi; ++e)
                        at[static_cast<std::size_t>(base + e)] = next++;
                }
            }
        }
        const auto positions = s.transposed_positions();
        auto of_t = std::make_shared<std::vector<std::int64_t>>(positions.size());
        for (std::size_t e = 0; e < positions.size(); ++e)
            (*of_t)[e] = at[static_cast<std::size_t>(positions[e])];
        return std::shared_ptr<const void>(std::move(of_t));
    });
    return std::static_pointer_cast<const std::vector<std::int64_t>>(kept);
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
    const std::int64_t chunk = tiling.feature_chunk();
    const std::int64_t dch = (p.d + chunk - 1) / chunk, vch = (p.d_v + chunk - 1) / chunk;
    // fast memory: D_i, one tile and one chunk per worker; slow memory: P, then dS (tile-major)
    const bool computes = Counter::kComputes;
    const int workers = computes ? max_concurrency() : 0;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const kernels::Workspace<Scalar> fast(workers, Slice<Scalar>::scratch_words(p, b, chunk));
    const kernels::Workspace<Scalar> slow(computes ? 1 : 0, p.group() * support.z_qk());
    alloc.allocate();
    Scalar* const pds = computes ? slow.slab(0) : nullptr;
    const auto places = computes ? tile_places(support, rows_view) : nullptr;
    const std::int64_t* const at_t = places ? places->data() : nullptr;
    Slice<Scalar> w{&a, &src, &support, &rows_view, &keys_view, b, 0, 0, pds, &fast, chunk, at_t};
    for (int worker = 0; worker < workers; ++worker) {
        std::fill(w.ones(worker), w.ones(worker) + w.ld(), Scalar(1));
        std::fill(w.zeros(worker), w.zeros(worker) + w.chunk_width(), Scalar(0));
    }
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
                d_kv_chunk(w, true, t / vch, t % vch * chunk, worker, io);
            });
        // --- dS = P o (dO V^T - D) on Omega ---
        parallel_for_counted(per_head, counter, [&](std::int64_t t, int worker, Counter& io) {
            d_scores_tile(w, t / row_tiles, t % row_tiles, worker, io);
        });
        // --- dQ = scale * dS K ---
        parallel_for_counted(per_head * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
            const std::int64_t tile = t / dch;
            d_q_chunk(w, tile / row_tiles, tile % row_tiles, t % dch * chunk, worker, io);
        });
        // --- dK = scale * dS^T Q ---
        parallel_for_counted(
            key_tiles * dch, counter, [&](std::int64_t t, int worker, Counter& io) {
                d_kv_chunk(w, false, t / dch, t % dch * chunk, worker, io);
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
