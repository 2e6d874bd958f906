// ioattn::sparse::forward_materialized: materializing sparse forward (SDDMM, row softmax, SpMM)
// Per (batch, head), square tiles of side b = tiling.rows over the n_q x n_k grid; only tiles
// with an allowed pair are touched (Support::block_view(b, b)); feature chunks of width
// w = tiling.feature_chunk() (b, or max(d, d_v) when whole rows fit M: Tiling::for_memory).
// A tile's touched keys are those some row of the block pairs with (BlockView::keys_of).
// Reference: forward_reference.cpp.
//   parallel for each row block i (b rows), stats m_i, l_i resident (2r):
//     when d <= w: read Q_i once and keep it                                r*d
//     phase 1 (SDDMM), for each non-empty tile j: for each d-chunk: read Q_i (unless kept) and
//       the touched keys' K rows (r + u_ij)*kw; S_ij = scale Q_i K_j^T; keep the allowed
//       entries, update m_i, l_i (online, base 2); write them (CSR order)  nnz_ij
//     phase 2 (SpMM), for each d_v chunk x: for each non-empty tile j: read its nnz_ij scores
//       and the touched keys' V_j[:,x]; O_ix += exp(S - m)/l V             nnz_ij + u_ij*xw
//       write O_ix                                                          r*xw
//     write L_i                                                             r
// Resident: as dense::forward_materialized (a dense b x c tile buffer, c x kw K chunk although
//   u_ij rows move) <= 4b^2 for w = b.
// I/O = io_cost_forward_materialized (per row block: T tiles, Z nonzeros, U = sum of u_ij =
//   the keys the block sees, vch = ceil(d_v/w), dch = ceil(d/w)):
//   T'*r*d + U*d + Z  +  vch*Z + U*d_v + r*d_v + r  +  iw*((1 + vch)*Z + dch*Z_pp),
//   T' = 1 when d <= w (Q_i kept), else T; with the full pattern this is
//   dense::io_cost_forward_materialized plus the index words. Stored scores: Z_QK words per head.
// A dense tile packs untouched keys as zero rows (their columns are never kept), so neither
//   product reads a K or V row no pair needs: what a cache would keep of Q_i and skip of K_j,
//   V_j is what the count leaves out (docs/design.md section 8).
// Indices (iw = kIndexReadWords<Scalar> words per int64): every pass over a tile's stored scores
//   reads their keys: the keep step, each d_v chunk of phase 2, and each d chunk of a tile
//   computed pair by pair (tile_rule.hpp; Z_pp: its pairs). Row offsets, run searches and the
//   rows' cursors and per-tile lists (tile_rows.hpp) are not counted.
// Sparse inputs (CSR rows over d): a chunk of a sparse operand is read as its stored nonzeros
//   (r*d, U*d, U*d_v become nnz(Q_i) and the sums of nnz over the touched K, V rows) and
//   scattered into the same dense buffers, or multiplied as stored on a tile with few pairs.
// Arithmetic: a tile with at least 1/kDenseTileFill of its pairs allowed runs S_ij in the
//   broadcast micro-kernel, a sparser one a dot product per allowed pair (tile_ops.hpp); the row
//   softmax and the SpMM run on kernels/strip.hpp. Only allowed entries are kept, so NaN in a row
//   no query of the tile may see never reaches O. One task per (batch, head, row block);
//   thread-count invariant.
// Tests: tests/sparse/forward_test.cpp, sparse_inputs_test.cpp

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <utility>
#include <vector>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/row_source.hpp"
#include "kernels/common/validate.hpp"
#include "kernels/materialized/tile_ops.hpp"
#include "kernels/materialized/tile_rows.hpp"

#include <ioattn/kernels/strip.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

template <typename Scalar>
constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();

/// Per-worker buffers: dense b x bp tile (bp: b padded to whole vectors), scattered Q and K
/// chunks of sparse inputs (b x w each, w the feature chunk up to max(d, d_v); the Q buffer
/// also holds the O chunk), K^T for a dense tile (w x bp), stats, probabilities of one row's run
/// (bp), ones (bp), zeros (w: the untouched keys of a dense tile), the block's score strip; the
/// rows with keys per tile.
template <typename Scalar>
struct Buffers {
    Scalar *tile, *q, *kr, *kt, *m, *l, *probs, *ones, *zeros, *strip;
    detail::TileRows rows;
    std::int64_t bp;

    static std::int64_t words(std::int64_t b, std::int64_t w, std::int64_t strip) {
        const std::int64_t bp = padded(b);
        return b * bp + 2 * b * w + w * bp + 2 * b + 2 * bp + w + strip;
    }

    Buffers() = default;

    Buffers(Scalar* base, std::int64_t b, std::int64_t w, const detail::TileRows& tile_rows)
        : rows(tile_rows)
        , bp(padded(b)) {
        tile = base;
        q = tile + b * bp;
        kr = q + b * w;
        kt = kr + b * w;
        m = kt + w * bp;
        l = m + b;
        probs = l + b;
        ones = probs + bp;
        zeros = ones + bp;
        strip = zeros + w;
        std::fill(ones, ones + bp, Scalar(1));
        std::fill(zeros, zeros + w, Scalar(0));
    }

    static std::int64_t padded(std::int64_t n) {
        constexpr int kL = kernels::Simd<Scalar>::kLanes;
        return (n + kL - 1) / kL * kL;
    }
};

/// One row block: slice (b, h; kv slice, head g), rows [i0, i0 + r), view row block blk; its
/// feature chunks of width w, Q_i held over its tiles when d <= w (q_held).
struct Task {
    std::int64_t slice, b, h, g, kv, i0, r, blk, w;
    bool q_held;
};

template <typename Scalar, typename Counter>
void sddmm_tile(const ForwardArgs<Scalar>& a,
                const detail::Operands<Scalar>& src,
                const Support& s,
                Buffers<Scalar>& w,
                const Task& t,
                std::int64_t j0,
                std::int64_t c,
                std::int64_t nnz,
                std::span<const std::int64_t> keys,
                Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t ld = w.bp;
    io.acquire(t.r * c);
    for (std::int64_t k0 = 0; k0 < p.d; k0 += t.w) {
        const std::int64_t kw = std::min(t.w, p.d - k0);
        const std::int64_t q_words = t.q_held ? 0 : t.r * kw;
        io.acquire(q_words + c * kw);
        if (!t.q_held)
            detail::read_cols(io, Operand::q, t.slice, src.q, t.b, t.h, t.i0, t.r, k0, kw);
        detail::read_gathered( // the touched keys' rows only
            io,
            Operand::k,
            t.kv,
            src.k,
            t.b,
            t.g,
            keys.data(),
            static_cast<std::int64_t>(keys.size()),
            k0,
            kw);
        if (detail::per_pair_tile(nnz, t.r, c)) // the pairs' keys, once per chunk
            io.read({Operand::index, t.slice, t.i0, 1, j0, kIndexReadWords<Scalar> * nnz});
        if constexpr (Counter::kComputes) {
            // --- S_ij (+)= Q_i[:,k] K_j[:,k]^T on Omega ---
            detail::sddmm_chunk(
                s,
                detail::TileTarget<Scalar>{
                    t.i0, t.r, j0, c, nnz, w.tile, w.bp, w.kt, w.ones, keys, w.zeros},
                detail::ChunkRows<Scalar>{&src.q, t.b, t.h, t.i0, t.r, w.q},
                detail::ChunkRows<Scalar>{&src.k, t.b, t.g, j0, c, w.kr, keys},
                k0,
                kw,
                k0 == 0,
                [&](const auto& f) { w.rows.visit(j0, c, false, f); });
        }
        io.release(q_words + c * kw);
    }
    io.complete({Operand::scores, t.slice, t.i0, t.r, j0, c}); // the tile's entries of Omega
    io.read({Operand::index, t.slice, t.i0, 1, j0, kIndexReadWords<Scalar> * nnz}); // its keys
    if constexpr (Counter::kComputes) {
        // --- keep Omega's entries (base 2), online update of m, l ---
        const auto qs = static_cast<Scalar>(p.scale * 1.4426950408889634);
        const std::int64_t base = s.row_offsets()[static_cast<std::size_t>(t.i0)];
        w.rows.visit(j0, c, true, [&](std::int64_t x, std::int64_t a0, std::int64_t e) {
            const auto row = s.row(t.i0 + x);
            const std::int64_t off = s.row_offsets()[static_cast<std::size_t>(t.i0 + x)] - base;
            if (row[static_cast<std::size_t>(e - 1)] - row[static_cast<std::size_t>(a0)] ==
                e - 1 - a0) { // a contiguous run of keys
                const Scalar* from = w.tile + x * ld + (row[static_cast<std::size_t>(a0)] - j0);
                for (std::int64_t y = 0; y < e - a0; ++y)
                    w.strip[off + a0 + y] = from[y] * qs;
            } else {
                for (std::int64_t y = a0; y < e; ++y)
                    w.strip[off + y] =
                        w.tile[x * ld + (row[static_cast<std::size_t>(y)] - j0)] * qs;
            }
            const Scalar mx = kernels::strip_max(w.strip + off + a0, e - a0, w.m[x]);
            const Scalar m_safe = mx == kNegInf<Scalar> ? Scalar(0) : mx;
            const Scalar sum = kernels::strip_exp2_sum(w.strip + off + a0, e - a0, m_safe);
            const Scalar alpha = // 2^(m_old - m_new), vectorized (libm's exp2 was a call)
                w.m[x] == m_safe
                    ? Scalar(1)
                    : kernels::exp2<Scalar>(kernels::splat<Scalar>(w.m[x] - m_safe))[0];
            w.l[x] = alpha * w.l[x] + sum; // l = exp(m_old - m_new) l + rowsum(exp(S - m_new))
            w.m[x] = mx;
        });
    }
    io.write({Operand::scores, t.slice, t.i0, nnz, j0, 1}); // the tile's nnz stored scores
    io.release(t.r * c);
}

template <typename Scalar, typename Counter>
void spmm_chunk(const ForwardArgs<Scalar>& a,
                const detail::Operands<Scalar>& src,
                const Support& s,
                const BlockView& view,
                Buffers<Scalar>& w,
                std::int64_t bs,
                const Task& t,
                std::int64_t x0,
                Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t xw = std::min(t.w, p.d_v - x0);
    io.acquire(t.r * xw);
    Scalar* o = w.q; // the O chunk reuses the Q buffer (r x xw <= b x w)
    if constexpr (Counter::kComputes) {
        std::fill(o, o + t.r * xw, Scalar(0));
        w.rows.start();
    }
    const std::int64_t base = s.row_offsets()[static_cast<std::size_t>(t.i0)];
    for (const BlockTile& tile : view.tiles_of(t.blk)) {
        const std::int64_t j0 = tile.col_block * bs, c = view.block_cols(tile.col_block);
        const auto keys = detail::keys_within(view.keys_of(t.blk), j0, c);
        io.acquire(t.r * c + c * xw);
        io.read({Operand::scores, t.slice, t.i0, tile.nonzeros, j0, 1});
        io.read({Operand::index, t.slice, t.i0, 1, j0, kIndexReadWords<Scalar> * tile.nonzeros});
        detail::read_gathered( // the touched keys' rows only
            io,
            Operand::v,
            t.kv,
            src.v,
            t.b,
            t.g,
            keys.data(),
            static_cast<std::int64_t>(keys.size()),
            x0,
            xw);
        if constexpr (Counter::kComputes) {
            // V_j[:,x] in place, or its touched rows scattered into the K^T buffer when V is
            // stored sparse
            const detail::RowBlock<Scalar> vj = src.v.rows(t.b, t.g, j0, x0, xw, w.kt, keys);
            w.rows.visit(j0, c, true, [&](std::int64_t x, std::int64_t a0, std::int64_t e) {
                const auto row = s.row(t.i0 + x);
                const std::int64_t off = s.row_offsets()[static_cast<std::size_t>(t.i0 + x)] - base;
                const Scalar m_safe = w.m[x] == kNegInf<Scalar> ? Scalar(0) : w.m[x];
                kernels::strip_probabilities( // exp(S - m) / l of the run, then O += P V
                    w.strip + off + a0,
                    e - a0,
                    m_safe,
                    Scalar(1) / w.l[x],
                    w.probs);
                kernels::spmm_row(
                    w.probs,
                    e - a0,
                    [&](std::int64_t y) {
                        return vj.row(row[static_cast<std::size_t>(a0 + y)] - j0);
                    },
                    o + x * xw,
                    xw);
            });
        }
        io.release(t.r * c + c * xw);
    }
    if constexpr (Counter::kComputes)
        for (std::int64_t x = 0; x < t.r; ++x)
            std::copy_n(o + x * xw, xw, a.o.row(t.b, t.h, t.i0 + x) + x0);
    io.write({Operand::o, t.slice, t.i0, t.r, x0, xw});
    io.release(t.r * xw);
}

template <typename Scalar, typename Counter>
void row_block(const ForwardArgs<Scalar>& a,
               const detail::Operands<Scalar>& src,
               const Support& s,
               const BlockView& view,
               std::int64_t bs,
               Task t,
               Buffers<Scalar>& w,
               Counter& io) {
    const Problem& p = a.problem;
    if constexpr (Counter::kComputes) {
        std::fill(w.m, w.m + t.r, kNegInf<Scalar>);
        std::fill(w.l, w.l + t.r, Scalar(0));
        w.rows.start();
    }
    io.acquire(2 * t.r);
    if (t.q_held) { // Q_i read once, kept over the row block's tiles
        io.acquire(t.r * p.d);
        detail::read_rows(io, Operand::q, t.slice, src.q, t.b, t.h, t.i0, t.r);
    }
    for (const BlockTile& tile : view.tiles_of(t.blk)) {
        const std::int64_t j0 = tile.col_block * bs, c = view.block_cols(tile.col_block);
        sddmm_tile(a,
                   src,
                   s,
                   w,
                   t,
                   j0,
                   c,
                   tile.nonzeros,
                   detail::keys_within(view.keys_of(t.blk), j0, c),
                   io);
    }
    if (t.q_held)
        io.release(t.r * p.d);
    for (std::int64_t x0 = 0; x0 < p.d_v; x0 += t.w)
        spmm_chunk(a, src, s, view, w, bs, t, x0, io);
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = 0; x < t.r; ++x) {
            Scalar* o = a.o.row(t.b, t.h, t.i0 + x);
            if (w.l[x] == Scalar(0))
                std::fill(o, o + p.d_v, Scalar(0)); // no allowed key: O = 0, L = -inf
            *a.lse.row(t.b, t.h, t.i0 + x) =
                w.l[x] == Scalar(0) ? kNegInf<Scalar>
                                    : Scalar(0.6931471805599453) * (w.m[x] + std::log2(w.l[x]));
        }
    }
    io.write({Operand::lse, t.slice, t.i0, t.r, 0, 1});
    io.release(2 * t.r);
}

} // namespace

template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter) {
    constexpr const char* kWhere = "ioattn::sparse::forward_materialized";
    ForwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src =
        detail::validate_inputs(a, support, inputs, kWhere, !Counter::kComputes);
    detail::validate(a, support, &tiling, Schedule::materialized, memory, kWhere, true);
    const Problem& p = a.problem;
    const std::int64_t bs = tiling.rows;
    const BlockView& view = support.cached_block_view(bs, bs);
    const std::int64_t chunk = tiling.feature_chunk();
    const std::int64_t cw = std::min(chunk, std::max(p.d, p.d_v)); // buffers' chunk width
    std::int64_t strip = 0;
    for (std::int64_t i = 0; i < view.row_blocks; ++i) {
        const std::int64_t i0 = i * bs, i1 = std::min(p.n_q, i0 + bs);
        strip = std::max(strip,
                         support.row_offsets()[static_cast<std::size_t>(i1)] -
                             support.row_offsets()[static_cast<std::size_t>(i0)]);
    }
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const kernels::Workspace<Scalar> ws(workers, Buffers<Scalar>::words(bs, cw, strip));
    const std::int64_t row_words = detail::TileRows::words(bs, p.n_k, bs);
    const kernels::Workspace<std::int64_t> tile_rows(workers, row_words);
    alloc.allocate();
    const std::int64_t blocks = view.row_blocks;
    // timed runs take each head's row blocks of many tiles first, counting runs index order
    parallel_for_blocks(
        p.batch_heads(),
        blocks,
        [&](std::int64_t blk) { return static_cast<std::int64_t>(view.tiles_of(blk).size()); },
        counter,
        [&](std::int64_t slice, std::int64_t blk, int worker, Counter& io) {
            const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
            const bool q_held = p.d <= chunk && !view.tiles_of(blk).empty();
            const Task t{slice,
                         b,
                         h,
                         g,
                         b * p.kv_heads + g,
                         blk * bs,
                         view.block_rows(blk),
                         blk,
                         chunk,
                         q_held};
            Buffers<Scalar> w{};
            if constexpr (Counter::kComputes)
                w = Buffers<Scalar>(
                    ws.slab(worker),
                    bs,
                    cw,
                    detail::TileRows(support,
                                     t.i0,
                                     t.r,
                                     bs,
                                     detail::TileRows::bucketed(view.tiles_of(blk), t.r),
                                     tile_rows.slab(worker)));
            row_block(a, src, support, view, bs, t, w, io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_materialized<Scalar, Counter>(const ForwardArgs<Scalar>&,                \
                                                        const Support&,                            \
                                                        const SparseInputs<Scalar>&,               \
                                                        const Tiling&,                             \
                                                        const MemoryModel&,                        \
                                                        Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::IOATTN_ISA
