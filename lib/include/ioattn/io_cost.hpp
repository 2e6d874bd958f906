#pragma once
/// Closed-form I/O of every dense schedule, flop counts, and the lower bounds of the papers.
///
/// Costs are exact: a kernel run with IoCounter reports exactly io_cost_<kernel>(problem, tiling),
/// peak residency included. Bounds are per the two-level model of docs/design.md section 2 and
/// summed over the batch * heads independent slices.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <string_view>

namespace ioattn {

/// Fused forward: n_q*d + sum over row blocks of the visible K/V columns * (d + d_v)
/// + n_q*d_v + n_q, per slice. Peak: Br*d + Bc*(d + d_v) + Br*Bc + Br*d_v + 2*Br.
IoReport io_cost_forward_fused(const Problem& problem, const Tiling& tiling);

/// Materialized forward (Saha & Ye Algorithm 1, square tiles of side b).
IoReport io_cost_forward_materialized(const Problem& problem, const Tiling& tiling);

/// Routes by tiling.schedule (reference: throws InvalidArgument, it has no I/O model).
IoReport io_cost_forward(const Problem& problem, const Tiling& tiling);

/// Fused backward (pass 0: D; pass A: K/V blocks resident, query blocks and their dQ partial
/// sums streamed; pass R: the partials summed), per query-head slice; see backward_fused.cpp.
IoReport io_cost_backward_fused(const Problem& problem, const Tiling& tiling);

/// Materialized backward (P and dS in slow memory, square tiles); see backward_materialized.cpp.
IoReport io_cost_backward_materialized(const Problem& problem, const Tiling& tiling);

/// Routes by tiling.schedule (reference: throws InvalidArgument).
IoReport io_cost_backward(const Problem& problem, const Tiling& tiling);

/// io_cost_forward or io_cost_backward.
IoReport io_cost(const Problem& problem, const Tiling& tiling, Pass pass);

/// Exact flops of the forward: 2 * allowed_pairs * (d + d_v) per slice (exp not counted).
double flop_count_forward(const Problem& problem);

/// FlashAttention's convention for GFLOP/s: 4*B*H*n_q*n_k*d, halved when causal; backward 2.5x.
double flop_count_convention(const Problem& problem, Pass pass = Pass::forward);

/// A lower bound on the I/O of one pass, summed over slices.
struct Bound {
    std::string_view regime;   ///< "large-cache" (M >= d^2) or "small-cache"
    double compulsory = 0;     ///< read the inputs, write the outputs
    double leading = 0;        ///< min(N^2 d^2/M, N^2 d/sqrt(M)) with N^2 = n_q*n_k
    double explicit_bound = 0; ///< M*(ceil(n_q*n_k/B_max) - 1), B_max = max(8M^2/d^2, 8M)
    double theorem = 0; ///< backward only: Li et al. Thm 1.1, which also covers d x d weights

    /// max(compulsory, leading): the asymptotic bound with its compulsory floor.
    [[nodiscard]] double asymptotic() const { return compulsory > leading ? compulsory : leading; }
};

/// Bounds of the forward pass (Saha & Ye Thm 3.1/3.7 and Thm 4.8 with explicit constants).
Bound forward_bound(const Problem& problem, const MemoryModel& memory);

/// Bounds of the backward pass for gradients with respect to Q, K, V: the same leading terms
/// (N^2 d^2/M, N^2 d/sqrt(M); crossing at M = d^2) and explicit bound as the forward (the
/// backward must form every entry of QK^T again from Q and K), the compulsory traffic of reading
/// Q, K, V, O, dO, L and writing dQ, dK, dV, and in `theorem` Li et al.'s Thm 1.1 expression
/// min((N^2 d^2 + N d^3)/M, (N^2 d + N d^2)/sqrt(M)), which also covers d x d projection weights.
Bound backward_bound(const Problem& problem, const MemoryModel& memory);

/// forward_bound or backward_bound.
Bound bound(const Problem& problem, const MemoryModel& memory, Pass pass);

/// Entries of QK^T one epoch of M I/Os can complete (Lemma 4.6): max(8M^2/d^2, 8M).
double epoch_entry_limit(std::int64_t fast_words, std::int64_t d);

/// The schedule `select` picks for this problem and M. Theory: fused iff M >= d^2. Cost: the
/// schedule whose for_memory tiling has the lower exact I/O (ties go to fused); a schedule with
/// no valid tiling is never picked. Throws CapacityError if neither fits.
Schedule select_schedule(const Problem& problem,
                         const MemoryModel& memory,
                         Select select,
                         Pass pass = Pass::forward);

/// The smallest M (in words) from which the fused schedule's exact cost (for_memory tilings) is
/// at most the materialized one's, found by a geometric scan refined by bisection over
/// [lo, hi]; 0 if fused never wins there.
std::int64_t
measured_crossover(const Problem& problem, Pass pass, std::int64_t lo, std::int64_t hi);

} // namespace ioattn
