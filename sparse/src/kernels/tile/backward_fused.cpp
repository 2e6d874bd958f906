// ioattn::sparse::backward_fused: fused sparse backward (FlashAttention-2 over Omega), one
// sweep over key blocks, dQ in G partial sums (dense/backward_fused.cpp on the full pattern).
// Per (batch, head): dQ, dK, dV of O = softmax(scale*Q K^T on Omega) V. Reference:
// backward_reference.cpp. R = tiling.rows (key rows resident, blocks also cut by nonzeros),
// C = tiling.cols, G = backward_dq_groups(problem, key blocks of Omega^T's plan).
//   pass 0, parallel per query block i: read O_i, dO_i; write D_i = rowsum(dO_i o O_i); then
//     the pairs of the folded key blocks (<= kFoldKeys heavy keys) with i's rows (folded_*.hpp)
//   pass A, parallel per (kv head, group g) (heavy groups first), per key block j of g's
//     runs (group_runs.hpp) not folded: read K_j, V_j; per query head, per chunk of C queries
//     that see a key of j:
//       read (gather) Q, dO rows, L, D and j's indices; S = scale Q K_j^T on Omega, P = exp(S - L)
//       dV_j += P^T dO; dP = dO V_j^T; dS = P o (dP - D); dK_j += scale dS^T Q
//       dQ^g rows += scale dS K_j (read first where group g reached the row before)
//     write dK_j, dV_j; then the folds' merge writes the folded blocks' dK, dV
//   pass R, parallel per query block i: dQ_i = the partials of the groups that reached its
//     rows, in group order, + the folded blocks' dS (scale K); write dQ_i
// Resident: Tiling::resident_words(p, backward, Kernels::sparse) <= M: max(pass 0 r(2 d_v + 1),
//   pass A's scratch at lane_padded lanes + rows streamed + indices walked, pass R 2 r d).
// I/O = io_cost_backward_fused, per head with S = sum_j |queries(j)|: reads 2 n_q d_v
//   + S (2 d + d_v + 2) + index words (a partial row is read once, in pass A or R), writes
//   n_q + S d + n_q d; per kv head n_k (d + d_v) read and written; a folded block moves
//   fold_segment_words instead. With the full or causal pattern: dense io_cost_backward_fused.
// Why: as the dense kernel (no atomics, no second sweep), over the keys Omega^T streams. A chunk
// whose key vectors see different spans runs span by span (staggered_chunk.hpp); a key block
// of <= kLanes / 4 keys that cannot fold runs pair by pair, queries as lanes (narrow_chunk.hpp);
// masked entries have P = dS = 0 and a non-finite row meets only its allowed pairs. dK, dV
// leave through streamed stores: 1.06x on strided:64 (ioattn run --N 16384 --d 64 --pattern
// strided:64 --pass backward --schedule fused --threads 2 --repeat 10). Sparse Q, K, V count
// their stored words; `maps` (permuted variant) reads and writes a reordered problem in place.
// One task per (kv head, group); thread-count invariant. Tests: tests/sparse/backward_test.cpp,
// sparse_inputs_test.cpp, variants_test.cpp, staggered_test.cpp, narrow_test.cpp, folded_test.cpp

#include "kernels/tile/chunks.hpp"
#include "kernels/tile/folded_keys.hpp"
#include "kernels/tile/group_runs.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/row_products.hpp"
#include "kernels/common/validate.hpp"
#include "kernels/tile/backward_fused_parts.hpp"
#include "kernels/tile/backward_fused_passes.hpp"
#include "kernels/tile/folded_pass.hpp"
#include "kernels/tile/narrow_chunk.hpp"
#include "kernels/tile/staggered_chunk.hpp"

#include <ioattn/kernels/dq_partials.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::delta_block;
using detail::Maps;
using detail::Partials;
using detail::reduce_block;
using detail::rows_allowed;
using detail::Scratch;
using detail::stream_rows;
using kernels::Simd;

// --- pass A: a key block resident with dK, dV; the queries that see it streamed; dS K added
// into the partial dQ^group ---
template <typename Scalar, typename Counter>
void key_block(const BackwardArgs<Scalar>& a,
               const detail::Operands<Scalar>& src,
               const Support& st,
               const detail::BlockKeys& plan,
               const Tiling& t,
               std::int64_t kv_slice,
               std::int64_t blk,
               std::int64_t group,
               const Partials<Scalar>& dq,
               const Scalar* delta,
               Scalar* base,
               std::int64_t* cursor,
               std::int64_t resident,
               const Maps& maps,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv_slice / p.kv_heads, g = kv_slice % p.kv_heads;
    const std::int64_t j0 = plan.row0(blk), r = plan.rows(blk);
    const auto queries = plan.keys_of(blk);
    const auto nq = static_cast<std::int64_t>(queries.size());
    io.acquire(resident);
    detail::read_rows(io, Operand::k, kv_slice, src.k, b, g, j0, r);
    detail::read_rows(io, Operand::v, kv_slice, src.v, b, g, j0, r);
    Scratch<Scalar> w;
    std::int64_t n_vec = 0;
    bool k_finite = true;
    if constexpr (Counter::kComputes) {
        w = Scratch<Scalar>(base, p, t);
        n_vec = lane_padded(r) / Simd<Scalar>::kLanes; // the block's key rows, not Br's
        const auto ks = static_cast<Scalar>(p.scale * kernels::kLog2e);
        detail::pack_transposed(src.k, b, g, j0, r, ks, w.ta, w.rp, maps.keys);
        detail::pack_transposed(src.v, b, g, j0, r, Scalar(1), w.tb, w.rp, maps.keys);
        k_finite = detail::pack_rows(
            src.k, b, g, j0, r, static_cast<Scalar>(p.scale), w.k_rows, w.dw, maps.keys);
        std::fill(w.acc_a, w.acc_a + (p.d + p.d_v) * w.rp, Scalar(0));
    }
    Scalar* dkt = w.acc_a;
    Scalar* dvt = w.acc_b;
    detail::RowCursors cur;
    bool stagger = false; // chunks may run span by span (staggered_chunk.hpp)
    detail::ChunkSlabs slabs;
    bool narrow = false; // or pair by pair, queries as lanes (narrow_chunk.hpp)
    detail::NarrowRows<Scalar> nr;
    if constexpr (Counter::kComputes) {
        cur = detail::row_cursors(plan, j0, r, cursor);
        narrow = detail::NarrowRows<Scalar>::fits(p, t, r, w);
        if (narrow)
            nr = detail::NarrowRows<Scalar>(p, r, w);
        stagger = !narrow && k_finite && detail::may_stagger<Scalar>(cur, r);
    }
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
        const std::int64_t iw =
            plan.index_words<Scalar>(blk) +
            plan.map_words<Scalar>(blk, maps.keys != nullptr, maps.rows != nullptr);
        if (iw > 0)
            io.read({Operand::index, slice, blk, 1, 0, iw});
        if constexpr (Counter::kComputes)
            cur.reset(r);
        for (std::int64_t x0 = 0, c = 0; x0 < nq; x0 += c) {
            c = detail::chunk_length(queries.data(), nq, x0, t.cols); // runs in place (chunks.hpp)
            const std::int64_t* qc = queries.data() + x0;
            detail::read_gathered(io, Operand::q, slice, src.q, b, h, qc, c);
            io.complete({Operand::scores, slice, qc[0], qc[c - 1] - qc[0] + 1, j0, r}); // on Omega
            io.read({Operand::d_o, slice, qc[0], c, 0, p.d_v});
            io.read({Operand::lse, slice, qc[0], c, 0, 1});
            io.read({Operand::delta, slice, qc[0], c, 0, 1});
            std::uint8_t* reached = dq.reached + dq.at(group, slice, 0);
            std::int64_t before = 0; // rows of the chunk this group has reached before
            for (std::int64_t y = 0; y < c; ++y)
                before += reached[qc[y]];
            const Block part{
                Operand::d_q_partial, group * p.batch_heads() + slice, qc[0], c, 0, p.d};
            if (before > 0)
                io.read({part.operand, part.slice, qc[0], before, 0, p.d});
            io.write(part);
            if constexpr (!Counter::kComputes) {
                for (std::int64_t y = 0; y < c; ++y)
                    reached[qc[y]] = 1;
                continue;
            }
            const detail::RowSource<Scalar> d_o{a.d_o, nullptr};
            const detail::Rows<Scalar> qr = stream_rows(src.q, b, h, qc, c, w.ga, maps.rows);
            const detail::Rows<Scalar> dor = stream_rows(d_o, b, h, qc, c, w.gb, maps.rows);
            for (std::int64_t y = 0; y < c; ++y) {
                w.l2[y] = kernels::lse2(*a.lse.row(b, h, maps.row(qc[y])));
                w.dd[y] = delta[slice * p.n_q + qc[y]];
            }
            // --- S, P, dP, dS; dV_j^T += dO^T P, dK_j^T += Q^T dS (scaled at the end): span
            // by span when the chunk's key vectors see different spans of it (and dQ below
            // likewise, staggered_chunk.hpp), else over the whole block ---
            bool partial = false, staggered = false;
            const detail::ChunkRef ch{qc, x0, c};
            const detail::ChunkOperands<Scalar> streamed{&src.q, &d_o, b, h, qr, dor};
            if (narrow)
                partial = detail::narrow_chunk(p, st, j0, r, cur, ch, streamed, w, nr);
            else if (stagger && detail::staggered_chunk(
                                    p, st, j0, r, n_vec, cur, ch, streamed, w, slabs, partial))
                staggered = true; // K finite: never `exact` below
            else
                partial = detail::whole_chunk(p, st, j0, r, n_vec, cur, ch, streamed, w);
            // --- dQ^g rows (+)= dS (scale K_j), d as the lanes: in place for a run of rows all
            // new or all reached before, else through the dQ tile ---
            const std::int64_t d_vec = w.dw / Simd<Scalar>::kLanes;
            const auto dq_product = [&](Scalar* out, bool add) { // rows at stride dw
                if (staggered)
                    detail::staggered_dq(slabs, w, r, c, d_vec, out, w.dw, add);
                else
                    kernels::broadcast_block(w.dp,
                                             w.rp,
                                             1,
                                             c,
                                             w.k_rows,
                                             w.dw,
                                             r,
                                             d_vec,
                                             add ? w.ones : static_cast<const Scalar*>(nullptr),
                                             out,
                                             w.dw);
            };
            const bool exact = !k_finite && partial;
            if (!exact && qc[c - 1] - qc[0] + 1 == c && (before == 0 || before == c)) {
                dq_product(dq.row(group, slice, qc[0]), before != 0);
            } else {
                if (exact)
                    rows_allowed(
                        w.dp,
                        w.rp,
                        w.k_rows,
                        w.dw,
                        r,
                        c,
                        w.dq,
                        [&](std::int64_t x, std::int64_t y) { return st.contains(j0 + x, qc[y]); });
                else
                    dq_product(w.dq, false);
                for (std::int64_t y = 0; y < c; ++y) {
                    Scalar* out = dq.row(group, slice, qc[y]);
                    const Scalar* in = w.dq + y * w.dw;
                    if (reached[qc[y]] != 0)
                        std::transform(out, out + w.dw, in, out, std::plus<>());
                    else
                        std::copy_n(in, w.dw, out);
                }
            }
            for (std::int64_t y = 0; y < c; ++y)
                reached[qc[y]] = 1;
        }
    }
    if constexpr (Counter::kComputes) {
        if (narrow)
            nr.flush(p, r, w);
        const auto scale = static_cast<Scalar>(p.scale);
        const auto dk_scale = [scale](std::int64_t) { return scale; };
        const auto dv_scale = [](std::int64_t) { return Scalar(1); };
        kernels::unpack_transposed(dkt, w.rp, dk_scale, a.d_k, b, g, j0, r, maps.keys, true);
        kernels::unpack_transposed(dvt, w.rp, dv_scale, a.d_v, b, g, j0, r, maps.keys, true);
    }
    io.write({Operand::d_k, kv_slice, j0, r, 0, p.d});
    io.write({Operand::d_v, kv_slice, j0, r, 0, p.d_v});
    io.release(resident);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const SparseInputs<Scalar>& inputs,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter,
                    const Maps& maps) {
    constexpr const char* kWhere = "ioattn::sparse::backward_fused";
    BackwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src =
        detail::validate_inputs(a, support, inputs, kWhere, !Counter::kComputes);
    detail::validate(a, support, &tiling, Schedule::fused, memory, kWhere, true, Pass::backward);
    const Problem& p = a.problem;
    const Support& transposed = support.transposed();
    const detail::BlockKeys& qplan = support.cached_block_keys(tiling.rows);
    const detail::BlockKeys& kplan = transposed.cached_block_keys(tiling.rows);
    const std::int64_t resident = tiling.resident_words(p, Pass::backward, Kernels::sparse);
    const std::int64_t qb = qplan.blocks(), kb = kplan.blocks();
    const std::int64_t groups = backward_dq_groups(p, kb);
    const detail::Folds folds = detail::fold_plan( // key blocks whose pairs pass 0 computes
        p,
        transposed,
        qplan,
        kplan,
        resident,
        !detail::any_sparse(inputs) && maps.rows == nullptr && maps.keys == nullptr);
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const kernels::Workspace<Scalar> delta(Counter::kComputes ? 1 : 0, p.batch_heads() * p.n_q);
    const kernels::Workspace<Scalar> ws(workers, Scratch<Scalar>::words(p, tiling));
    const kernels::Workspace<std::int64_t> cursors(workers, tiling.rows);
    const std::int64_t rows = groups * p.batch_heads() * p.n_q;
    const std::int64_t dw = lane_padded(p.d);
    const kernels::Workspace<Scalar> partials( // rows are read only where `reached` says written
        Counter::kComputes ? 1 : 0,
        rows * dw,
        false);
    const kernels::Workspace<std::uint8_t> reached(1, rows);
    const detail::FoldRun<Scalar> fold(p, folds, Counter::kComputes, workers);
    alloc.allocate();
    const Partials<Scalar> dq{
        groups, dw, p.n_q, p.batch_heads(), partials.slab(0), reached.slab(0)};
    parallel_for_counted(p.batch_heads() * qb, counter, [&](std::int64_t task, int w, Counter& io) {
        const std::int64_t slice = task / qb, blk = task % qb;
        delta_block(a, qplan, slice, blk, delta.slab(0), maps, io, [&](Counter& fio) {
            fold.pass0(a, transposed, kplan, slice, blk, delta.slab(0), w, fio);
        });
    });
    const std::vector<std::int64_t> cuts = detail::group_runs(kplan, groups);
    parallel_for_blocks( // group g takes its runs of key blocks in order; heavy groups first
        p.batch * p.kv_heads,
        groups,
        [&](std::int64_t g) { // asked only by a timed run (heavy_first), once per group
            return detail::group_entries(
                kplan, cuts, groups, g, [&](std::int64_t j) { return !folds.is_folded(j); });
        },
        counter,
        [&](std::int64_t kv_slice, std::int64_t g, int worker, Counter& io) {
            detail::for_group_blocks(cuts, groups, g, [&](std::int64_t j) {
                if (folds.is_folded(j))
                    return; // pass 0 computed its pairs
                key_block(a,
                          src,
                          transposed,
                          kplan,
                          tiling,
                          kv_slice,
                          j,
                          g,
                          dq,
                          delta.slab(0),
                          ws.slab(worker),
                          cursors.slab(worker),
                          resident,
                          maps,
                          io);
            });
        },
        detail::kHeavyGroup);
    parallel_for_counted(fold.merges(), counter, [&](std::int64_t t, int w, Counter& io) {
        fold.merge(a, kplan, t, w, io);
    });
    parallel_for_counted(p.batch_heads() * qb, counter, [&](std::int64_t task, int w, Counter& io) {
        const std::int64_t slice = task / qb, blk = task % qb;
        reduce_block(a, qplan, slice, blk, dq, maps, io, [&](Counter& fio) {
            fold.reduce(a, transposed, kplan, slice, blk, w, fio);
        });
    });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_fused<Scalar, Counter>(const BackwardArgs<Scalar>&,                     \
                                                  const Support&,                                  \
                                                  const SparseInputs<Scalar>&,                     \
                                                  const Tiling&,                                   \
                                                  const MemoryModel&,                              \
                                                  Counter&,                                        \
                                                  const Maps&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::IOATTN_ISA
