#pragma once
/// Dense forward kernels. Each computes, per (batch, head), O = softmax(scale*Q K^T + mask) V
/// and L = row log-sum-exp, for the shapes documented on ForwardArgs.
///
/// All kernels: validate once at entry and throw InvalidArgument naming the kernel and the bad
/// values (CapacityError when the tiling does not fit M; ResourceError, before anything is
/// allocated or written, when their workspace exceeds ioattn::memory_limit()); parallel over
/// batch x head x row block
/// with oneTBB; results are bitwise independent of the thread count. A row with no visible key
/// gets O = 0 and L = -inf. NaN in an input reaches only the outputs that depend on it.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

namespace ioattn::dense {

/// Materialized scores with double accumulation: the oracle. O(n_q*n_k) workspace per slice.
template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args);

/// FlashAttention-2 order (docs/design.md section 3.1): query row block resident, K/V streamed,
/// online softmax. Counted with `counter`; I/O = io_cost_forward_fused(problem, tiling).
template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter);

/// Saha & Ye Algorithm 1: square tiles of side b = tiling.rows, scores written to slow memory.
/// I/O = io_cost_forward_materialized(problem, tiling).
template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter);

/// Runs the schedule named by tiling.schedule (reference ignores tiling, memory and counter).
template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter);

/// Convenience: the tuned tiling of `schedule` for M, no counting. Returns the tiling used.
template <typename Scalar>
Tiling forward(const ForwardArgs<Scalar>& args,
               Schedule schedule,
               const MemoryModel& memory = MemoryModel::per_core_l2(sizeof(Accumulator<Scalar>)));

/// Walks the schedule of `tiling` without arithmetic or data and returns its counted I/O.
IoReport dry_run_forward(const Problem& problem, const Tiling& tiling, const MemoryModel& memory);

} // namespace ioattn::dense
