// ioattn::plan_attention: the policy of the entry point (attention.hpp). Which schedule runs
// (given, or selected by cost or theory), which tiling (tuned for this CPU or I/O-optimal),
// and the one validation of M, the support and the sparse operands, with the smallest M that
// fits named when M is too small. No kernel runs here; the io objective's search is
// plan_fewest.cpp.

#include "entry/plan_fewest.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <algorithm>
#include <string>

namespace ioattn {

namespace {

bool fits(Schedule schedule, const MemoryModel& memory, const Problem& p, Pass pass, Kernels k) {
    return Tiling::try_for_memory(schedule, memory, p, pass, k).has_value();
}

/// M is below every tiling of `schedule` (nullopt: of both schedules of `pass`).
[[noreturn]] void throw_too_small(const std::string& where,
                                  const MemoryModel& memory,
                                  const Problem& p,
                                  Pass pass,
                                  std::optional<Schedule> schedule,
                                  Kernels k) {
    const std::string what(schedule ? to_string(*schedule) : to_string(pass));
    throw InvalidArgument(
        where + ": M = " + std::to_string(memory.fast_words) + " words is below the smallest " +
        what + " tiling for d = " + std::to_string(p.d) +
        " (needs M >= " + std::to_string(smallest_memory(p, pass, schedule, k)) + ")");
}

/// The fast memory a call plans for: given, for a real cache of options.cache_bytes, or the L2.
MemoryModel memory_of(const AttentionOptions& options, std::int64_t word_bytes) {
    const std::string where(options.where);
    if (!options.cache_bytes)
        return options.memory.value_or(MemoryModel::per_core_l2(word_bytes));
    const std::int64_t c = *options.cache_bytes;
    if (options.memory)
        throw InvalidArgument(where + ": a cache of " + std::to_string(c) +
                              " bytes and M = " + std::to_string(options.memory->fast_words) +
                              " words given together (give one)");
    if (c / word_bytes / kCacheSlack < 1)
        throw InvalidArgument(where + ": a cache of " + std::to_string(c) +
                              " bytes leaves M = " + std::to_string(c / word_bytes / kCacheSlack) +
                              " words of " + std::to_string(word_bytes) + " bytes (expected >= 1)");
    return MemoryModel::for_cache(c, word_bytes);
}

std::string shape(std::int64_t rows, std::int64_t cols) {
    return std::to_string(rows) + " x " + std::to_string(cols);
}

template <typename Scalar>
void check_operand(const sparse::SparseRows<Scalar>* x,
                   const char* name,
                   std::int64_t rows,
                   std::int64_t cols,
                   const std::string& where) {
    if (x != nullptr && (x->rows() != rows || x->cols() != cols))
        throw InvalidArgument(where + ": sparse " + name + " is " + shape(x->rows(), x->cols()) +
                              ", the problem needs " + shape(rows, cols));
}

template <typename Scalar>
void check_structure(const Problem& p, const Structure<Scalar>& s, const std::string& where) {
    const auto& in = s.inputs;
    if (s.support == nullptr) {
        if (s.sparse())
            throw InvalidArgument(where + ": sparse operands need a support "
                                          "(sparse::pattern_dense for every pair)");
        return;
    }
    if (p.causal)
        throw InvalidArgument(where + ": a support with causal = true (intersect the support "
                                      "with sparse::pattern_causal, the spec term '&causal')");
    if (s.support->n_q() != p.n_q || s.support->n_k() != p.n_k)
        throw InvalidArgument(where + ": the support is " +
                              shape(s.support->n_q(), s.support->n_k()) + ", the problem is " +
                              shape(p.n_q, p.n_k) + " (n_q x n_k)");
    check_operand(in.q, "Q", p.batch * p.heads * p.n_q, p.d, where);
    check_operand(in.k, "K", p.batch * p.kv_heads * p.n_k, p.d, where);
    check_operand(in.v, "V", p.batch * p.kv_heads * p.n_k, p.d_v, where);
}

/// Z_input per (batch, head): the stored entries of each sparse operand per slice, rows * cols
/// of each dense one, and dO for the backward.
template <typename Scalar>
std::int64_t z_input_of(const Problem& p, Pass pass, const sparse::SparseInputs<Scalar>& in) {
    const std::int64_t qs = p.batch * p.heads, ks = p.batch * p.kv_heads;
    const auto nnz = [](const sparse::SparseRows<Scalar>* x,
                        std::int64_t slices,
                        std::int64_t rows,
                        std::int64_t cols) {
        return x != nullptr ? x->nonzeros() / slices : sparse::dense_nonzeros(rows, cols);
    };
    return sparse::z_input(sparse::InputNonzeros{nnz(in.q, qs, p.n_q, p.d),
                                                 nnz(in.k, ks, p.n_k, p.d),
                                                 nnz(in.v, ks, p.n_k, p.d_v),
                                                 p.n_q * p.d_v},
                           pass);
}

/// The schedule auto runs (both schedules fit M or one does; checked by the caller).
template <typename Scalar>
Schedule select_of(const AttentionPlan& plan, const Structure<Scalar>& s, Select select) {
    const Problem& p = plan.problem;
    const MemoryModel& m = plan.memory;
    if (!plan.sparse)
        return select_schedule(p, m, select, plan.pass);
    if (plan.pass == Pass::forward)
        return sparse::select_schedule(p, *s.support, m, select, plan.z_input);
    const auto f = Tiling::try_for_memory(Schedule::fused, m, p, Pass::backward, Kernels::sparse);
    const auto t =
        Tiling::try_for_memory(Schedule::materialized, m, p, Pass::backward, Kernels::sparse);
    if (!f || !t)
        return f ? Schedule::fused : Schedule::materialized;
    if (select == Select::theory) // the sparse crossover M* = Z_input^2 / Z_QK
        return static_cast<double>(m.fast_words) >= sparse::crossover(*s.support, plan.z_input)
                   ? Schedule::fused
                   : Schedule::materialized;
    return sparse::io_cost_backward_fused(p, *s.support, s.inputs, *f).total() <=
                   sparse::io_cost_backward_materialized(p, *s.support, s.inputs, *t).total()
               ? Schedule::fused
               : Schedule::materialized;
}

template <typename Scalar>
Tiling tiling_of(const AttentionPlan& plan, const Structure<Scalar>& s, bool tuned) {
    const Problem& p = plan.problem;
    if (plan.schedule == Schedule::reference)
        return Tiling{Schedule::reference, p.n_q, p.n_k};
    if (!tuned)
        return Tiling::for_memory(plan.schedule, plan.memory, p, plan.pass, plan.kernels());
    if (!plan.sparse)
        return Tiling::tuned(plan.schedule, plan.memory, p, plan.pass);
    if (plan.schedule == Schedule::materialized && s.support != nullptr)
        return sparse::materialized_tiling(*s.support, plan.memory, p, plan.pass);
    return sparse::tuned_tiling(plan.schedule, plan.memory, p, plan.pass);
}

/// The variant planner's plan of a sparse fused call over dense operands (the variants
/// compute from the dense views; sparse operands run forward_fused / backward_fused, the one
/// kernel that multiplies them as stored). Under auto, an M too small for the element kernels
/// leaves the tile kernels alone; a forced variant names why it cannot run.
template <typename Scalar>
void plan_dispatch(AttentionPlan& plan, const Structure<Scalar>& s, const AttentionOptions& o) {
    const auto& in = s.inputs;
    const bool dense_operands = in.q == nullptr && in.k == nullptr && in.v == nullptr;
    const bool eligible =
        s.support != nullptr && dense_operands && plan.schedule == Schedule::fused && o.dispatch;
    if (o.variant && !eligible)
        throw InvalidArgument(std::string(o.where) + ": variant " +
                              std::string(sparse::to_string(*o.variant)) +
                              " needs a support, dense operands and the fused schedule (schedule " +
                              std::string(to_string(plan.schedule)) + ")");
    if (!eligible)
        return;
    try { // a tuned tiling leaves the tile height to the planner (plan_variants)
        plan.variants = sparse::plan_variants<Scalar>(plan.problem,
                                                      *s.support,
                                                      plan.memory,
                                                      plan.pass,
                                                      o.variant,
                                                      o.tuned ? std::nullopt
                                                              : std::optional<Tiling>(plan.tiling));
        plan.tiling = plan.variants->tile;
    } catch (const CapacityError&) {
        if (o.variant)
            throw;
    }
}

} // namespace

template <typename Scalar>
AttentionPlan plan_attention(const Problem& problem,
                             Pass pass,
                             const Structure<Scalar>& structure,
                             const AttentionOptions& options) {
    const std::string where(options.where);
    AttentionPlan plan;
    plan.problem = problem.resolved(where);
    plan.pass = pass;
    plan.memory = memory_of(options, sizeof(Scalar));
    plan.memory.validate(where.c_str());
    const Problem& p = plan.problem;
    check_structure(p, structure, where);
    plan.sparse = structure.sparse();
    plan.z_qk = structure.support != nullptr ? structure.support->z_qk() : p.allowed_pairs();
    plan.z_input = z_input_of(p, pass, structure.inputs);
    const Kernels k = plan.kernels();
    plan.objective = options.objective.value_or(Objective::speed);
    plan.planned_for = plan.memory.fast_words;
    const bool fewest = plan.objective == Objective::io && options.schedule != Schedule::reference;
    if (options.schedule) {
        plan.schedule = *options.schedule;
        if (plan.schedule != Schedule::reference && !fits(plan.schedule, plan.memory, p, pass, k))
            throw_too_small(where, plan.memory, p, pass, plan.schedule, k);
    } else {
        if (!fits(Schedule::fused, plan.memory, p, pass, k) &&
            !fits(Schedule::materialized, plan.memory, p, pass, k))
            throw_too_small(where, plan.memory, p, pass, std::nullopt, k);
        // under io the fewest words choose (the cost rule over every candidate plan)
        plan.schedule = fewest ? Schedule::fused : select_of(plan, structure, options.select);
        plan.selected_by = fewest ? Select::cost : options.select;
    }
    if (fewest) {
        detail::plan_fewest(plan, structure, options);
    } else {
        plan.tiling = tiling_of(plan, structure, options.tuned);
        plan_dispatch(plan, structure, options);
    }
    plan.bound =
        plan.sparse
            ? sparse::bound(p,
                            *structure.support,
                            plan.memory,
                            plan.z_input,
                            sparse::used_input_words(p, *structure.support, structure.inputs, pass),
                            pass)
            : bound(p, plan.memory, pass);
    return plan;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template AttentionPlan plan_attention<Scalar>(                                                 \
        const Problem&, Pass, const Structure<Scalar>&, const AttentionOptions&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn
