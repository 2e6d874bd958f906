#pragma once
/// Sparse attention backward kernels over a Support (DESIGN.md §2.2 restricted to Omega): from
/// Q, K, V, the forward's O and L, and dO, compute dense dQ, dK, dV. Pairs outside Omega carry
/// no gradient; a row with no allowed key contributes zero. Shapes as ioattn::BackwardArgs;
/// problem.causal must be false. Validation, parallelism and determinism as the forward.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

namespace ioattn::sparse {

/// Double-accumulation gradient oracle over Omega.
template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args, const Support& support);

/// Fused sparse backward: pass 0 computes D; pass A keeps a block of keys with dK, dV resident
/// and streams only the queries that see them (the transposed structure); pass B keeps a block
/// of queries with dQ resident and streams only the keys it sees. tiling.rows: resident block
/// (at most; cut by nonzeros too), tiling.cols: streamed chunk.
/// I/O = io_cost_backward_fused(problem, support, tiling).
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter);

/// Walks the fused backward without arithmetic or data; returns its counted I/O.
IoReport dry_run_backward(const Problem& problem,
                          const Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory);

/// Exact I/O of backward_fused from the structure; with the full (or causal) pattern it equals
/// ioattn::io_cost_backward_fused.
IoReport
io_cost_backward_fused(const Problem& problem, const Support& support, const Tiling& tiling);

/// Materializing sparse backward (DESIGN.md §2.2 on Omega): per (batch, kv head), for its group
/// of query heads, square tiles of side b = tiling.rows (tiling.cols == b); only the non-empty
/// b x b tiles of Omega are touched. Phases P = exp(scale Q K^T - L), dV = P^T dO,
/// dS = P o (dO V^T - D) with D = rowsum(dO o O), dQ = scale dS K, dK = scale dS^T Q; P and dS
/// are stored in slow memory as Z_QK values per query head in CSR order (group * Z_QK words of
/// heap, allocated at entry). Reads args.o and args.lse from the forward; writes d_q, d_k, d_v
/// (which must not alias the inputs). Resident words <= tiling.resident_words(problem,
/// Pass::backward). I/O = io_cost_backward_materialized(problem, support, tiling). Bitwise
/// independent of the thread count. Throws InvalidArgument (bad shapes, views, support shape,
/// causal problem, tiling of another schedule or not square) and CapacityError (tiling does not
/// fit M). Counter: NullCounter, IoCounter or DryRunCounter (no data touched).
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// Exact I/O of backward_materialized from the structure (per row tile: its non-empty tiles,
/// their widths and nonzeros): reads, writes and the peak residency the counter reports. With
/// the full pattern it equals ioattn::io_cost_backward_materialized. Throws InvalidArgument
/// when the support does not match the problem or the tiling is not a square materialized one.
IoReport
io_cost_backward_materialized(const Problem& problem, const Support& support, const Tiling& tiling);

} // namespace ioattn::sparse
