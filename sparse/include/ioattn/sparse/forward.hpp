#pragma once
/// Sparse attention forward kernels: O = softmax(scale*Q K^T restricted to Omega) V and
/// L = row log-sum-exp over the allowed entries only, for every (batch, head), with one Support
/// (Omega, n_q x n_k) shared by all heads. Pairs outside Omega take no part in the softmax; a
/// query row with no allowed key gets O = 0 and L = -inf.
///
/// Shapes and aliasing are those of ioattn::ForwardArgs; problem.causal must be false (the
/// support carries any mask). All kernels validate at entry (InvalidArgument naming the kernel
/// and the values; CapacityError when the tiling does not fit M; ResourceError, before anything
/// is allocated or written, when their workspace exceeds ioattn::memory_limit()), run
/// oneTBB-parallel with work
/// partitioned by nonzeros, and are bitwise independent of the thread count.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

namespace ioattn::sparse {

/// Operands given as CSR rows over d instead of dense views (null: the dense view of the args is
/// used). Slices are stacked: Q has batch*heads*n_q rows (row (b*heads + h)*n_q + i), K and V
/// have batch*kv_heads*n_k rows; columns d (Q, K) or d_v (V). The dense view of a sparse operand
/// still gives its shape and may have null data. Kernels read only the stored entries (counted
/// as such: Z_input), and their residency is that of dense inputs. The fused kernels multiply
/// a sparse streamed operand as stored: sparse dot products, 2 flops per stored entry and lane
/// (K and V in the forward, Q in the backward); a sparse resident operand is scattered into
/// its dense lane tile. The materializing kernels take the scores (and the backward's dP) of
/// a tile with few pairs as dot products over the stored entries, and scatter the column
/// chunks of fuller tiles into dense fast-memory buffers; the references take sparse dot
/// products.
/// Accepted by every forward and backward kernel (backward.hpp), whose outputs stay dense. A
/// sparse operand whose shape does not match throws InvalidArgument naming the kernel and both
/// shapes. Non-finite stored values are treated as the same values given densely.
template <typename Scalar>
struct SparseInputs {
    const SparseRows<Scalar>* q = nullptr;
    const SparseRows<Scalar>* k = nullptr;
    const SparseRows<Scalar>* v = nullptr;
};

/// Double-accumulation oracle over the allowed entries.
template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args, const Support& support);

/// Fused sparse schedule: a block of at most tiling.rows query rows (blocks are cut by nonzeros
/// too, see row_blocks) stays resident; only the keys some row of the block may see stream
/// through, tiling.cols at a time; online softmax over allowed entries.
/// I/O = io_cost_forward_fused(problem, support, tiling).
template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter);

/// forward_fused with some operands stored sparse. I/O: as forward_fused with each sparse row
/// read as its nonzeros (io_cost_forward_fused with the same inputs).
template <typename Scalar, typename Counter>
void forward_fused(const ForwardArgs<Scalar>& args,
                   const Support& support,
                   const SparseInputs<Scalar>& inputs,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Counter& counter);

/// forward_reference with some operands stored sparse (sparse dot products).
template <typename Scalar>
void forward_reference(const ForwardArgs<Scalar>& args,
                       const Support& support,
                       const SparseInputs<Scalar>& inputs);

/// Materializing sparse schedule: SDDMM over Omega into a stored score array (Z_QK words) with
/// square tiles of side b = tiling.rows, sparse row softmax, SpMM with V.
/// I/O = io_cost_forward_materialized(problem, support, tiling).
template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter);

/// forward_materialized with some operands stored sparse: each chunk of a sparse operand is
/// read as the nonzeros stored in it (io_cost_forward_materialized with the same inputs);
/// residency as with dense inputs.
template <typename Scalar, typename Counter>
void forward_materialized(const ForwardArgs<Scalar>& args,
                          const Support& support,
                          const SparseInputs<Scalar>& inputs,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter);

/// Runs the schedule named by tiling.schedule.
template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter);

/// forward with some operands stored sparse.
template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const SparseInputs<Scalar>& inputs,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter);

/// Walks the schedule without arithmetic or data; returns its counted I/O.
IoReport dry_run_forward(const Problem& problem,
                         const Support& support,
                         const Tiling& tiling,
                         const MemoryModel& memory);

/// dry_run_forward with some operands stored sparse (only their structure is read); equals
/// io_cost_forward with the same inputs. Scalar: float or double.
template <typename Scalar>
IoReport dry_run_forward(const Problem& problem,
                         const Support& support,
                         const SparseInputs<Scalar>& inputs,
                         const Tiling& tiling,
                         const MemoryModel& memory);

} // namespace ioattn::sparse
