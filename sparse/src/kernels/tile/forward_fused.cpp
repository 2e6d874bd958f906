// ioattn::sparse::forward_fused: fused sparse forward (FlashAttention-2 order over Omega)
// Per (batch, head): O = softmax(scale*Q K^T on Omega) V, L = row logsumexp over Omega.
// Reference: forward_reference.cpp. Br = tiling.rows (max rows per block), Bc = tiling.cols.
//   parallel for each row block i (cut by rows and by nonzeros: support/block_keys.hpp):
//     read Q_i; the block's indices (BlockKeys::index_words)     r*d + index words(i)
//     for each chunk of <= Bc of the keys the block may see (kernels/tile/chunks.hpp):
//       read (gather) K rows, V rows                                        c*(d + d_v)
//       S = scale*Q_i K_c^T; entries outside Omega -> -inf; online softmax; O_i += P V_c
//     [element part: the rows' pairs E from the resident state (block_element.hpp)]
//     write O_i / l_i, L_i                                                  r*d_v + r
// Resident: Tiling::resident_words(p, forward, Kernels::sparse) <= M: Q_i^T, S^T, O_i^T, m, l,
//   alpha at lane_padded(Br) lanes, the gathered K_c, V_c, the rows streamed at a time and the
//   indices walked (lib/src/tiling.cpp); + block_element_words with an element part.
// I/O = io_cost_forward_fused = n_q*d + sum_i (|keys(i)|*(d + d_v) + index words(i))
//   + n_q*(d_v + 1) per head; with the full pattern and equal Br, dense::io_cost_forward_fused.
//   Element part (split variant): + |E|*(d + d_v) + |E| index words (io_cost_split); orders
//   (`maps`, permuted variant read in place): + BlockKeys::map_words.
// Flops: 2*Z_QK*(d + d_v) useful, plus the masked entries of the chunk spans computed.
// Why: K and V rows are read once per block, as in the dense kernel, and only where a row of
// the block may see them. A slab computes only the chunk entries its rows see, per lane vector
// when their spans differ (staggered_slab.hpp); a block of <= kLanes / 4 rows that all see its
// every key shares batches of keys instead (narrow_block.hpp). Dense rows are read in place when
// the chunk is an interval or the V slice is finite (the counted words are the same, only the
// copy goes); a non-finite V chunk makes partial rows sum over their allowed keys, so NaN never
// reaches a row that cannot see it. Sparse K, V are multiplied as stored (row_products.hpp).
// The next block's rows are prefetched (next_block.hpp) and O is stored past the caches: 1.10x
// on window:64 (ioattn run --N 16384 --d 64 --pattern window:64 --schedule fused --threads 2
// --repeat 30). One task per (batch, head, row block); thread-count invariant.
// Tests: tests/sparse/forward_test.cpp, staggered_test.cpp, split_forward_test.cpp

#include "kernels/element/panels.hpp"
#include "kernels/tile/chunks.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <string>
#include <vector>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/validate.hpp"
#include "kernels/tile/block_element.hpp"
#include "kernels/tile/forward_setup.hpp"
#include "kernels/tile/forward_tiles.hpp"
#include "kernels/tile/narrow_block.hpp"
#include "kernels/tile/next_block.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::Maps;
using detail::NextBlock;
using detail::TileBlock;
using detail::TileScratch;

/// What every row block of one call reads: the operands, the support and its plan, the
/// tiling, the orders, the split's element part (null without), and what the call sized.
template <typename Scalar>
struct Call {
    const ForwardArgs<Scalar>& a;
    const detail::Operands<Scalar>& src;
    const Support& s;
    const detail::BlockKeys& plan;
    const Tiling& t;
    const Maps& maps;
    const Support* element;
    const char* v_finite_slices; // per (batch, kv head): every V value finite
    std::int64_t resident;       // Tiling::resident_words
    std::int64_t element_words;  // block_element_words, 0 without an element part
};

/// A worker's scratch: the tile block's (TileScratch), a chunk's row pointers, the rows'
/// cursors, and the element part's row state.
template <typename Scalar>
struct WorkerScratch {
    Scalar* base;
    const Scalar** pointers;
    std::int64_t* cursor;
    Scalar* element_base;
};

template <typename Scalar, typename Counter>
void row_block(const Call<Scalar>& call,
               std::int64_t slice,
               std::int64_t blk,
               const WorkerScratch<Scalar>& ws,
               Counter& io) {
    const ForwardArgs<Scalar>& a = call.a;
    const detail::Operands<Scalar>& src = call.src;
    const detail::BlockKeys& plan = call.plan;
    const Maps& maps = call.maps;
    const Support* e = call.element;
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = b * p.kv_heads + g;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    const auto keys = plan.keys_of(blk);
    const auto nk = static_cast<std::int64_t>(keys.size());
    io.acquire(call.resident);
    detail::read_rows(io, Operand::q, slice, src.q, b, h, i0, r);
    const std::int64_t iw = plan.index_words<Scalar>(blk) +
                            plan.map_words<Scalar>(blk, maps.rows != nullptr, maps.keys != nullptr);
    if (iw > 0)
        io.read({Operand::index, slice, blk, 1, 0, iw});
    TileBlock<Scalar> tb;
    bool narrow = false; // the block's few rows share batches of keys (narrow_block)
    NextBlock next;      // prefetched a share per chunk while this block computes
    if constexpr (Counter::kComputes) {
        TileScratch<Scalar> w(ws.base, p, call.t);
        const bool dense = src.k.sparse == nullptr && src.v.sparse == nullptr;
        narrow =
            detail::narrow_rows<Scalar>(call.s, i0, r, nk, dense && src.q.sparse == nullptr, maps);
        if (!narrow) {
            w.rows = ws.pointers;
            tb = start_tiles(src, p, plan, b, h, i0, r, maps, w, ws.cursor);
        } else {
            tb.w = w;
        }
        next = detail::next_block(a, src, plan, b, h, g, blk, maps);
    }
    const std::int64_t cols = call.t.cols;
    const std::int64_t chunks = std::max<std::int64_t>(1, (nk + cols - 1) / cols); // about
    for (std::int64_t y0 = 0, c = 0, chunk = 1; y0 < nk; y0 += c, ++chunk) {
        c = detail::chunk_length(keys.data(), nk, y0, cols); // runs in place (chunks.hpp)
        next.upto(chunk, chunks);
        const std::int64_t* kc = keys.data() + y0;
        detail::read_gathered(io, Operand::k, kv_slice, src.k, b, g, kc, c);
        detail::read_gathered(io, Operand::v, kv_slice, src.v, b, g, kc, c);
        io.complete({Operand::scores, slice, i0, r, kc[0], kc[c - 1] - kc[0] + 1}); // its Omega
        if (!Counter::kComputes || narrow)
            continue;
        // K_c, V_c: in place when the chunk is an interval of dense rows or its rows are
        // dense with a finite V slice (read through row pointers), else gathered
        const auto [kr, vr] =
            chunk_rows(a, src, b, g, kc, c, maps, call.v_finite_slices[kv_slice] != 0, tb.w);
        chunk_products(p, src, call.s, b, g, tb, kc, y0, c, kr, vr);
    }
    next.upto(1, 1); // all of it, when the block had fewer chunks
    // --- the split's element pairs of these rows, from the block's state (block_element.hpp) ---
    if (e != nullptr) {
        io.acquire(call.element_words);
        detail::read_block_element(io, *e, src, slice, b, g, kv_slice, blk, i0, r);
    }
    if constexpr (Counter::kComputes) {
        const TileScratch<Scalar>& w = tb.w;
        if (narrow) {
            detail::narrow_block(a, b, h, g, i0, r, keys, w.qt, e, ws.element_base);
        } else if (e != nullptr) {
            const detail::ForwardState<Scalar> rows(ws.element_base, p, r);
            detail::rows_of_transposed(p, r, w.qt, w.ot, w.rp, w.m, w.l, rows);
            detail::block_element_pairs(a, *e, b, h, g, i0, r, rows);
        } else {
            kernels::finish_rows(
                w.ot, w.rp, w.m, w.l, w.alpha, a.o, a.lse, b, h, i0, r, maps.rows, true);
        }
    }
    if (e != nullptr)
        io.release(call.element_words);
    io.write({Operand::o, slice, i0, r, 0, p.d_v});
    io.write({Operand::lse, slice, i0, r, 0, 1});
    io.release(call.resident);
}

} // namespace

template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const SparseInputs<Scalar>& inputs,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter,
                   const Maps& maps,
                   const Support* element) {
    constexpr const char* kWhere = "ioattn::sparse::forward_fused";
    ForwardArgs<Scalar> a = args;
    const detail::Operands<Scalar> src =
        detail::validate_inputs(a, support, inputs, kWhere, !Counter::kComputes);
    detail::validate(a, support, &tiling, Schedule::fused, memory, kWhere, true);
    const Problem& p = a.problem;
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const detail::TileWorkspaces<Scalar> ws(
        p, support, tiling, Counter::kComputes, TileScratch<Scalar>::words(p, tiling));
    const int workers = ws.workers;
    const kernels::Workspace<const Scalar*> pointers(workers, 2 * std::min(tiling.cols, p.n_k));
    // the split's element pairs inside the blocks (`element`): their rows' state
    if (element != nullptr &&
        (maps.rows != nullptr || maps.keys != nullptr || src.q.sparse != nullptr ||
         src.k.sparse != nullptr || src.v.sparse != nullptr))
        throw InvalidArgument(std::string(kWhere) +
                              ": an element part runs only with dense operands and no orders");
    const std::int64_t rows_max = std::min(tiling.rows, p.n_q);
    const std::int64_t element_words =
        element != nullptr
            ? detail::block_element_words(p, rows_max, detail::ElementWords::of(sizeof(Scalar)))
            : 0;
    const kernels::Workspace<Scalar> element_ws(element != nullptr ? workers : 0,
                                                detail::ForwardState<Scalar>::words(p, rows_max));
    alloc.allocate();
    const std::vector<char> v_finite =
        detail::v_finite_slices(a, Counter::kComputes && src.v.sparse == nullptr);
    const Call<Scalar> call{a,
                            src,
                            support,
                            ws.plan,
                            tiling,
                            maps,
                            element,
                            v_finite.data(),
                            ws.resident,
                            element_words};
    // timed runs take each head's heavy blocks first, counting runs index order
    detail::parallel_for_row_blocks(
        p.batch_heads(),
        ws.plan,
        counter,
        [&](std::int64_t slice, std::int64_t blk, int worker, Counter& io) {
            row_block(call,
                      slice,
                      blk,
                      WorkerScratch<Scalar>{ws.scratch.slab(worker),
                                            pointers.slab(worker),
                                            ws.cursors.slab(worker),
                                            element_ws.slab(worker)},
                      io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_fused<Scalar, Counter>(const ForwardArgs<Scalar>&,                       \
                                                 const Support&,                                   \
                                                 const SparseInputs<Scalar>&,                      \
                                                 const Tiling&,                                    \
                                                 const MemoryModel&,                               \
                                                 Counter&,                                         \
                                                 const Maps&,                                      \
                                                 const Support*);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::IOATTN_ISA
