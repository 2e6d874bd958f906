#pragma once
/// Dense backward kernels. Given the forward's Q, K, V, O and L (log-sum-exp) and the upstream
/// gradient dO, each computes dQ, dK, dV (docs/design.md section 4.1):
///   D = rowsum(dO o O), P = exp(scale*S - L), dV = P^T dO, dP = dO V^T, dS = P o (dP - D),
///   dQ = scale * dS K, dK = scale * dS^T Q.
/// With grouped-query attention dK and dV of a key/value head sum over the query heads that
/// share it. A row with no visible key (L = -inf) contributes exactly zero gradient.
///
/// All kernels: validate once at entry and throw InvalidArgument naming the kernel and the bad
/// values (CapacityError when the tiling does not fit M; ResourceError, before anything is
/// allocated or written, when their workspace - P and dS, dQ partials - exceeds
/// ioattn::memory_limit()); oneTBB-parallel; results bitwise independent of the thread count
/// (no atomics; fixed-order reductions). P is taken as exp(min(scale*S - L, 0)): exactly P <= 1,
/// and a rounded L below the largest score must not make it overflow.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

namespace ioattn::dense {

/// Materialized P and dS with double accumulation: the gradient oracle.
template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args);

/// FlashAttention-2 backward in one sweep, dQ in G partial sums (so no atomics and no
/// thread-count dependence): pass 0 computes D; pass A keeps K_j, V_j, dK_j, dV_j resident,
/// streams the query row blocks and adds dS K_j into the partial dQ of key block j's group
/// (j mod G, G = backward_dq_groups); pass R sums the partials in group order. tiling.rows is
/// the resident block, tiling.cols the streamed block. Extra memory: G * batch * heads * n_q * d
/// words. I/O = io_cost_backward_fused.
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter);

/// Small-cache backward (the Algorithm-6 idea of Li et al.): P and dS materialized in slow
/// memory with square tiles of side b = tiling.rows. I/O = io_cost_backward_materialized.
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// Runs the schedule named by tiling.schedule (reference ignores tiling, memory and counter).
template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter);

/// Convenience: the tuned tiling of `schedule` for M, no counting. Returns the tiling used.
template <typename Scalar>
Tiling backward(const BackwardArgs<Scalar>& args,
                Schedule schedule,
                const MemoryModel& memory = MemoryModel::per_core_l2(sizeof(Accumulator<Scalar>)));

/// Walks the backward schedule of `tiling` without arithmetic or data; returns its counted I/O.
IoReport dry_run_backward(const Problem& problem, const Tiling& tiling, const MemoryModel& memory);

} // namespace ioattn::dense
