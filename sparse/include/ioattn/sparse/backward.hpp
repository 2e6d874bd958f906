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
IoReport io_cost_backward_fused(const Problem& problem, const Support& support, const Tiling& tiling);

} // namespace ioattn::sparse
