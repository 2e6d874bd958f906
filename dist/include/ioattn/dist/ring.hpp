#pragma once
/// Ring attention over MPI (docs/design.md section 12.4): exact dense attention, forward and
/// backward, on a sequence sharded over the ranks of a communicator. Each rank holds its rows of Q,
/// K, V (and dO, O, L for the backward) under a Sharding of n_q (queries) and of n_k (keys) with
/// the same layout; K/V blocks travel around the ring, one hop per step, by nonblocking
/// point-to-point messages, double-buffered so that the next block's transfer overlaps the current
/// block's kernels: these run on a second thread while the calling thread keeps MPI progressing
/// (PassOptions::progress_beside; otherwise it polls between pieces of the kernel work).
///
/// Requirements: MPI initialised with at least MPI_THREAD_FUNNELED, called from the main thread
/// on every rank of `comm` with the same global problem, layout, Scalar and tiling. oneTBB runs
/// inside each rank; only the calling thread talks to MPI. Bad input on any rank makes every
/// rank throw InvalidArgument (the rank at fault names the value), so a mistake cannot hang the
/// ring. Results are bitwise identical run to run for a fixed P and sharding (and any thread
/// count): partial sums are combined in a fixed order, without atomics.

#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/shard.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/tiling.hpp>

#include <mpi.h>

namespace ioattn::dist {

/// O = softmax(scale Q K^T + mask) V and L = row log-sum-exp for this rank's query rows. Each
/// step runs the tiling's kernel (dense::forward: fused or materialized; not reference) on the
/// visiting block, cut into rectangles that are fully visible or causal with the kernel's
/// bottom-right alignment, and merges the partial (O, L) by log-sum-exp in step order. Steps and
/// rectangles a causal mask hides make no kernel call. Communication =
/// comm_cost_ring_forward(problem, keys, rank). Kernel I/O is counted with `counter`.
template <typename Scalar, typename Counter>
PassStats ring_forward(MPI_Comm comm,
                       const ShardForwardArgs<Scalar>& args,
                       const Tiling& tiling,
                       const MemoryModel& memory,
                       Counter& counter,
                       const PassOptions& options = {});

/// dQ, dK, dV for this rank's rows, recomputed from (O, L): K/V blocks rotate as in the
/// forward and their dK, dV partial sums travel with them, each rank adding its contribution,
/// then return home; dQ stays local and sums the steps in order. Runs dense::backward with the
/// tiling's schedule. Communication = comm_cost_ring_backward(problem, keys, rank).
template <typename Scalar, typename Counter>
PassStats ring_backward(MPI_Comm comm,
                        const ShardBackwardArgs<Scalar>& args,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter,
                        const PassOptions& options = {});

} // namespace ioattn::dist
