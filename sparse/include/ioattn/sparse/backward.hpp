#pragma once
/// Sparse attention backward kernels over a Support (docs/design.md section 4.1 restricted to
/// Omega): from Q, K, V, the forward's O and L, and dO, compute dense dQ, dK, dV. Pairs outside
/// Omega carry no gradient; a row with no allowed key contributes zero. Shapes as
/// ioattn::BackwardArgs; problem.causal must be false. Validation, parallelism and determinism
/// as the forward.
///
/// Every kernel also takes SparseInputs (forward.hpp): Q, K, V may each be stored as CSR rows
/// over d (dO, O and L stay dense). Reads of a sparse operand count its stored words; rows or
/// column chunks are scattered into the same dense fast-memory buffers, so the residency is that
/// of dense inputs; the gradients d_q, d_k, d_v are dense views as with dense inputs (equal, up
/// to rounding, to the dense-input gradients of the densified operands). A sparse operand whose
/// shape does not match the problem throws InvalidArgument naming the kernel and both shapes.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

namespace ioattn::sparse {

/// Double-accumulation gradient oracle over Omega.
template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args, const Support& support);

/// backward_reference with some operands stored sparse (sparse dot products and sums).
template <typename Scalar>
void backward_reference(const BackwardArgs<Scalar>& args,
                        const Support& support,
                        const SparseInputs<Scalar>& inputs);

/// Fused sparse backward, the dense one's schedule over Omega: pass 0 computes D; pass A keeps
/// a block of keys with dK, dV resident, streams only the queries that see them (the
/// transposed structure) and adds dS K into the dQ partial sum of the block's group; pass R
/// sums the partials in group order. tiling.rows: resident block (at most; cut by nonzeros
/// too), tiling.cols: streamed chunk.
/// I/O = io_cost_backward_fused(problem, support, tiling).
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter);

/// backward_fused with some operands stored sparse: each read of a sparse operand's rows costs
/// their stored words. I/O = io_cost_backward_fused(problem, support, inputs, tiling).
template <typename Scalar, typename Counter>
void backward_fused(const BackwardArgs<Scalar>& args,
                    const Support& support,
                    const SparseInputs<Scalar>& inputs,
                    const Tiling& tiling,
                    const MemoryModel& memory,
                    Counter& counter);

/// Runs the backward schedule named by tiling.schedule (reference, fused, materialized).
template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter);

/// backward with some operands stored sparse.
template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const SparseInputs<Scalar>& inputs,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter);

/// Walks the backward schedule named by tiling.schedule (fused or materialized) without
/// arithmetic or data; returns its counted I/O. Throws InvalidArgument for the reference
/// schedule.
IoReport dry_run_backward(const Problem& problem,
                          const Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory);

/// dry_run_backward with some operands stored sparse (only their structure is read); equals
/// io_cost_backward_fused or io_cost_backward_materialized with the same inputs.
template <typename Scalar>
IoReport dry_run_backward(const Problem& problem,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory);

/// Exact I/O of backward_fused from the structure; with the full (or causal) pattern it equals
/// ioattn::io_cost_backward_fused.
IoReport
io_cost_backward_fused(const Problem& problem, const Support& support, const Tiling& tiling);

/// Exact I/O of backward_fused with some operands stored sparse: per query head, the stored
/// words of every streamed Q row, and nnz(K) + nnz(V) per kv head (resident blocks); dO, O, L,
/// D, the dQ partials, the writes and the peak as with dense inputs.
template <typename Scalar>
IoReport io_cost_backward_fused(const Problem& problem,
                                const Support& support,
                                const SparseInputs<Scalar>& inputs,
                                const Tiling& tiling);

/// Materializing sparse backward (docs/design.md section 4.3 on Omega): per (batch, kv head), for
/// its group of query heads, square tiles of side b = tiling.rows (tiling.cols == b); only the
/// non-empty b x b tiles of Omega are touched. Phases P = exp(scale Q K^T - L), dV = P^T dO,
/// dS = P o (dO V^T - D) with D = rowsum(dO o O), dQ = scale dS K, dK = scale dS^T Q; P and dS are
/// stored in slow memory as Z_QK values per query head in CSR order (group * Z_QK words of heap,
/// allocated at entry). Reads args.o and args.lse from the forward; writes d_q, d_k, d_v (which
/// must not alias the inputs). Resident words <= tiling.resident_words(problem, Pass::backward).
/// I/O = io_cost_backward_materialized(problem, support, tiling). Bitwise independent of the thread
/// count. Throws InvalidArgument (bad shapes, views, support shape, causal problem, tiling of
/// another schedule or not square) and CapacityError (tiling does not fit M). Counter: NullCounter,
/// IoCounter or DryRunCounter (no data touched).
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// backward_materialized with some operands stored sparse: each column chunk of a sparse
/// operand costs the nonzeros stored in it.
/// I/O = io_cost_backward_materialized(problem, support, inputs, tiling).
template <typename Scalar, typename Counter>
void backward_materialized(const BackwardArgs<Scalar>& args,
                           const Support& support,
                           const SparseInputs<Scalar>& inputs,
                           const Tiling& tiling,
                           const MemoryModel& memory,
                           Counter& counter);

/// Exact I/O of backward_materialized from the structure (per row tile: its non-empty tiles,
/// their widths and nonzeros): reads, writes and the peak residency the counter reports. With
/// the full pattern it equals ioattn::io_cost_backward_materialized. Throws InvalidArgument
/// when the support does not match the problem or the tiling is not a square materialized one.
IoReport
io_cost_backward_materialized(const Problem& problem, const Support& support, const Tiling& tiling);

/// Exact I/O of backward_materialized with some operands stored sparse: per query head and row
/// tile i with T_i tiles, 2 T_i nnz(Q_i) (P, dK), twice the sum of nnz(K_j) (P, dQ) and once
/// the sum of nnz(V_j) (dS) over its tiles, in place of the dense words; the rest as above.
template <typename Scalar>
IoReport io_cost_backward_materialized(const Problem& problem,
                                       const Support& support,
                                       const SparseInputs<Scalar>& inputs,
                                       const Tiling& tiling);

} // namespace ioattn::sparse
