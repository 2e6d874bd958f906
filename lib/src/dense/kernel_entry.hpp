#pragma once
// What every dense kernel does before its loops: check its views and its tiling once, at entry,
// and size its per-worker scratch (none for a dry run, which walks the loops without data); and
// the task loops of the fused forward and backward, shared by the float kernels
// (forward_fused.cpp, backward_fused.cpp) and the native bf16 ones (*_bf16.cpp), which differ
// only in what a task computes.

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <string>

namespace ioattn::dense::detail {

/// The views `args` checked for the kernel `where` (their data may be null in a dry run), its
/// tiling checked to be of `schedule` and to fit `memory` for `pass`. Throws InvalidArgument
/// naming `where`, or CapacityError when the tiling does not fit.
template <typename Counter, typename Args>
Args checked_entry(const Args& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Schedule schedule,
                   Pass pass,
                   const char* where) {
    Args a = args;
    a.validate(where, !Counter::kComputes);
    if (tiling.schedule != schedule)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    tiling.validate(where, memory, a.problem, pass);
    return a;
}

/// `slabs` slabs of `words` each when the counter computes, none for a dry run. Allocated
/// under the kernel's CallMemory (resources.hpp), before its parallel loops.
template <typename Scalar, typename Counter>
kernels::Workspace<Scalar> scratch(std::int64_t slabs, std::int64_t words, bool zeroed = true) {
    return kernels::Workspace<Scalar>(
        Counter::kComputes ? static_cast<int>(slabs) : 0, words, zeroed);
}

/// One slab per worker thread.
template <typename Scalar, typename Counter>
kernels::Workspace<Scalar> worker_scratch(std::int64_t words) {
    return scratch<Scalar, Counter>(max_concurrency(), words);
}

/// The fused forward's tasks: one per (batch x head slice, block of tiling.rows query rows),
/// each given its worker's scratch slab of `scratch_words` Acc:
/// row_block(slice, first row, slab, task counter).
template <typename Acc, typename Counter, typename RowBlock>
void forward_fused_tasks(const Problem& p,
                         const Tiling& tiling,
                         std::int64_t scratch_words,
                         const char* where,
                         Counter& counter,
                         const RowBlock& row_block) {
    const std::int64_t blocks = (p.n_q + tiling.rows - 1) / tiling.rows;
    CallMemory alloc(where); // sizes the workspaces below, then allocates them
    const auto ws = worker_scratch<Acc, Counter>(scratch_words);
    alloc.allocate();
    parallel_for_counted(
        p.batch_heads() * blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
            row_block(task / blocks, task % blocks * tiling.rows, ws.slab(worker), io);
        });
}

/// The fused backward's three passes (backward_fused.cpp's opening comment), each a parallel
/// loop, over R = tiling.rows rows:
///   pass 0, per (slice, row block):  delta_block(slice, i0, D, io)
///   pass A, per (batch x kv head, dQ group g of G = backward_dq_groups), over key blocks
///     j = g, g + G, ... in order:   key_block(kv slice, j0, g, j == g, dQ partials, D, slab, io)
///   pass R, per (slice, row block):  reduce_block(slice, i0, dQ partials, io)
/// D holds batch x heads x n_q Acc; the G partials (Partials: kernels::DqPartials<Acc>) rows of
/// d lane-padded words, written before they are read; each worker a slab of `scratch_words`.
template <typename Acc,
          typename Partials,
          typename Counter,
          typename Delta,
          typename Keys,
          typename Reduce>
void backward_fused_passes(const Problem& p,
                           const Tiling& tiling,
                           std::int64_t scratch_words,
                           const char* where,
                           Counter& counter,
                           const Delta& delta_block,
                           const Keys& key_block,
                           const Reduce& reduce_block) {
    const std::int64_t rs = tiling.rows;
    const std::int64_t q_blocks = (p.n_q + rs - 1) / rs, k_blocks = (p.n_k + rs - 1) / rs;
    const std::int64_t groups = backward_dq_groups(p, k_blocks);
    const std::int64_t dw = lane_padded(p.d);
    CallMemory alloc(where); // sizes the workspaces below, then allocates them
    const auto delta = scratch<Acc, Counter>(1, p.batch_heads() * p.n_q);
    const auto ws = worker_scratch<Acc, Counter>(scratch_words);
    const auto partials = scratch<Acc, Counter>( // every row is written before read
        1,
        groups * p.batch_heads() * p.n_q * dw,
        false);
    alloc.allocate();
    const Partials dq{groups, dw, p.n_q, p.batch_heads(), partials.slab(0)};
    Acc* const d = delta.slab(0);
    parallel_for_counted(
        p.batch_heads() * q_blocks, counter, [&](std::int64_t task, int, Counter& io) {
            delta_block(task / q_blocks, task % q_blocks * rs, d, io);
        });
    parallel_for_counted( // group g takes key blocks g, g + G, ... in order
        p.batch * p.kv_heads * groups,
        counter,
        [&](std::int64_t task, int worker, Counter& io) {
            const std::int64_t g = task % groups;
            for (std::int64_t j = g; j < k_blocks; j += groups)
                key_block(task / groups, j * rs, g, j == g, dq, d, ws.slab(worker), io);
        });
    parallel_for_counted(
        p.batch_heads() * q_blocks, counter, [&](std::int64_t task, int, Counter& io) {
            reduce_block(task / q_blocks, task % q_blocks * rs, dq, io);
        });
}

} // namespace ioattn::dense::detail
