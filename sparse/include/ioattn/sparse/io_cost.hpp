#pragma once
/// I/O of the sparse schedules, the sparse lower bound (Li et al., Thm 4.5) and selection.

#include <ioattn/io_cost.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::sparse {

// Counts are in words of the call's Scalar. The sparse kernels also read index arrays
// (Operand::index: keys, column indices, positions), an int64 costing kIndexReadWords<Scalar>
// words (two in float, one in double): the overloads without SparseInputs count a float call.

/// Row blocks of the fused schedule: consecutive query rows, at most `rows` per block, and a
/// block is closed early once it holds 4 * rows * ceil(Z_QK / n_q) allowed pairs, so that light
/// rows do not stream the keys of heavy ones (global tokens), except that a run of heavy rows
/// (each above 4 * ceil(Z_QK / n_q) pairs) fills whole blocks, and a block that holds only
/// heavy rows closes at the first light row. Returns the n_blocks + 1 boundaries.
std::vector<std::int64_t> row_blocks(const Support& support, std::int64_t rows);

/// Exact I/O of forward_fused, from the structure: per head, per row block, read Q_i, the
/// block's visible keys' K and V rows, write O_i and L_i.
IoReport
io_cost_forward_fused(const Problem& problem, const Support& support, const Tiling& tiling);

/// Exact I/O of forward_fused with some operands stored sparse: each sparse row read costs its
/// stored entries instead of d (or d_v) words.
template <typename Scalar>
IoReport io_cost_forward_fused(const Problem& problem,
                               const Support& support,
                               const SparseInputs<Scalar>& inputs,
                               const Tiling& tiling);

/// Exact I/O of forward_materialized, from the structure (non-empty b x b tiles and their
/// nonzeros), with the keys it reads once per pass over a tile's stored scores.
IoReport
io_cost_forward_materialized(const Problem& problem, const Support& support, const Tiling& tiling);

/// Exact I/O of forward_materialized with some operands stored sparse: per slice and row block
/// i, T_i reads of nnz(Q_i), and per non-empty tile j nnz(K_j) + nnz(V_j), instead of T_i*r*d,
/// C_i*d and C_i*d_v; scores, O, L and the peak as with dense inputs.
template <typename Scalar>
IoReport io_cost_forward_materialized(const Problem& problem,
                                      const Support& support,
                                      const SparseInputs<Scalar>& inputs,
                                      const Tiling& tiling);

/// The tiling timed sparse runs use: fused 96 x 96 (smaller query blocks than the dense 192 x 96
/// waste fewer score tiles on banded patterns), materialized as the dense tuned tiling; falls
/// back to Tiling::for_memory when that does not fit M.
Tiling
tuned_tiling(Schedule schedule, const MemoryModel& memory, const Problem& problem, Pass pass);

/// The materialized tiling timed runs use over `support`: tuned_tiling's, unless most of its
/// non-empty tiles are under 1/16 full (scattered rows: a pair or so per row and tile); then
/// the largest squares that fit M (Tiling::for_memory), which hold more of a row's pairs per
/// tile. O(Z_QK) the first time (the block view is cached
/// by the support). Throws as Tiling::for_memory.
Tiling materialized_tiling(const Support& support,
                           const MemoryModel& memory,
                           const Problem& problem,
                           Pass pass);

/// Routes by tiling.schedule.
IoReport io_cost_forward(const Problem& problem, const Support& support, const Tiling& tiling);

/// io_cost_forward with some operands stored sparse.
template <typename Scalar>
IoReport io_cost_forward(const Problem& problem,
                         const Support& support,
                         const SparseInputs<Scalar>& inputs,
                         const Tiling& tiling);

/// Z_input of dense Q, K, V: (n_q + n_k) d + n_k d_v, times the heads.
std::int64_t dense_z_input(const Problem& problem);

/// The input words a pass over `support` must read at least once, per (batch, head) as
/// z_input counts them: the rows of Q (and in the backward O, dO and L) with an allowed key,
/// and the rows of K and V some query may see, each as stored (a sparse operand's row counts
/// its entries; averaged over the operand's slices). Rows the pattern never uses are not
/// compulsory traffic: a kernel over Omega need not read them.
std::int64_t used_input_words(const Problem& problem, const Support& support, Pass pass);

/// used_input_words with some operands stored sparse.
template <typename Scalar>
std::int64_t used_input_words(const Problem& problem,
                              const Support& support,
                              const SparseInputs<Scalar>& inputs,
                              Pass pass);

/// Li et al. Thm 4.5 for `pass`: leading min(Z_input^2 / M, Z_input sqrt(Z_QK) / sqrt(M)) per
/// head summed; compulsory the used input words (`used_input`: used_input_words, per head)
/// plus the outputs (forward O and L of every row; backward dQ, dK and dV); regime
/// "large-cache" when M >= M* = Z_input^2 / Z_QK. explicit_bound is 0 (no explicit constant is
/// proved for sparse structures).
Bound bound(const Problem& problem,
            const Support& support,
            const MemoryModel& memory,
            std::int64_t z_input,
            std::int64_t used_input,
            Pass pass);

/// The forward bound with dense inputs: bound(..., used_input_words(problem, support,
/// Pass::forward), Pass::forward).
Bound forward_bound(const Problem& problem,
                    const Support& support,
                    const MemoryModel& memory,
                    std::int64_t z_input);

/// The crossover M* = Z_input^2 / Z_QK (per head).
double crossover(const Support& support, std::int64_t z_input_per_head);

/// Theory: fused iff M >= M*; Cost: the schedule with fewer counted words for this structure.
Schedule select_schedule(const Problem& problem,
                         const Support& support,
                         const MemoryModel& memory,
                         Select select,
                         std::int64_t z_input);

} // namespace ioattn::sparse
