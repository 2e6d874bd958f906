#pragma once
/// Tier 1: the one entry point of ioattn. attention() and attention_backward() take the views of
/// a problem, optionally a support (Omega) and operands stored sparse, and a schedule or a way
/// to select one; they plan (schedule, tiling), validate once, run, and report what they chose
/// and, when asked, the counted I/O beside its closed form and the lower bounds. The ioattn
/// program and the Python module call these; the named kernels and dense::forward / backward,
/// sparse::forward / backward (which route by schedule) stay available underneath for callers
/// that fix a tiling themselves.
///
/// It lives in ioattn::sparse because it calls into both libraries and only ioattn::sparse
/// sees both (sparse depends on core, never the reverse).

#include <ioattn/bf16.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/sparse/variants.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace ioattn {

/// The allowed pairs and the storage of the operands of one call.
template <typename Scalar>
struct Structure {
    /// Omega (n_q x n_k), shared by every (batch, head); null: every pair, or the causal pairs
    /// (bottom-right aligned) when problem.causal. Must outlive the call and its plan.
    const sparse::Support* support = nullptr;
    /// Q, K, V stored as CSR rows over d (sparse::SparseInputs; null members: the dense views).
    /// Sparse operands need a support (sparse::pattern_dense for every pair).
    sparse::SparseInputs<Scalar> inputs{};

    /// Whether the sparse kernels run: a support or a sparse operand is given.
    [[nodiscard]] bool sparse() const {
        return support != nullptr || inputs.q != nullptr || inputs.k != nullptr ||
               inputs.v != nullptr;
    }
};

/// What the planner minimises (docs/design.md section 7.1).
enum class Objective : std::uint8_t {
    /// Time: the schedule by `select`, tilings tuned for this CPU, the variant by the cost
    /// model's time estimate (sparse::plan_variants). Timed runs.
    speed,
    /// Counted words: among the plans made for the grid memories M' <= M
    /// (sparse::memory_grid) of every schedule (or the given one) and, for the sparse fused
    /// schedule, every variant (sparse::plan_fewest_words), the one with the fewest counted
    /// words; non-increasing in M. The I/O views (ioattn io, io_count, run --count-io).
    io
};

std::string_view to_string(Objective o);

/// Parses "speed", "io"; throws InvalidArgument otherwise.
Objective parse_objective(std::string_view text);

/// How a call chooses, sizes, counts and runs its schedule.
struct AttentionOptions {
    std::optional<Schedule> schedule; ///< nullopt: auto, chosen by `select` (speed objective)
    Select select = Select::cost;
    /// nullopt: speed for attention() and attention_backward(), io for io_count(). Under io,
    /// `select` and `tuned` are not read.
    std::optional<Objective> objective;
    /// nullopt: MemoryModel::for_cache(cache_bytes, sizeof(Scalar)) when cache_bytes is given,
    /// else MemoryModel::per_core_l2(sizeof(Scalar)).
    std::optional<MemoryModel> memory;
    /// Plan for a real cache of this many bytes (the tilings leave it the slack an LRU cache
    /// needs: MemoryModel::for_cache); exclusive with `memory`.
    std::optional<std::int64_t> cache_bytes;
    bool tuned = true; ///< the tiling tuned for this CPU; false: Tiling::for_memory's
    /// The sparse fused schedule over dense operands runs the variant planner's plan
    /// (sparse::plan_variants): nullopt lets it pick the variant, a value forces one (it then
    /// needs a support, dense operands and the fused schedule: InvalidArgument otherwise).
    std::optional<sparse::Variant> variant;
    /// false: the sparse fused schedule runs forward_fused / backward_fused alone (no variant
    /// planner), as the named kernels of sparse/ do.
    bool dispatch = true;
    bool count_io = false;        ///< count the run with an IoCounter of M
    IoCounter* counter = nullptr; ///< count into this one instead (e.g. one recording a trace)
    int threads = 0;              ///< at most this many workers (a task_arena); <= 0: all
    std::string_view where = "ioattn::attention"; ///< the caller named in error messages
};

/// What a call runs: the resolved problem, its schedule and tiling, and the sizes its bound
/// depends on.
struct AttentionPlan {
    Problem problem; ///< resolved
    Pass pass = Pass::forward;
    MemoryModel memory;
    Schedule schedule = Schedule::fused;
    std::optional<Select> selected_by;      ///< set when auto chose the schedule (speed objective)
    Objective objective = Objective::speed; ///< what chose the schedule, variant and tiling
    /// The fast memory the tiling (and variant plan) was made for: memory.fast_words, or under
    /// the io objective the grid memory M' <= M whose plan moves the fewest words.
    std::int64_t planned_for = 0;
    Tiling tiling;
    bool sparse = false; ///< the sparse kernels run (Structure::sparse())

    /// The kernels' footprint the plan's tiling is for.
    [[nodiscard]] Kernels kernels() const { return sparse ? Kernels::sparse : Kernels::dense; }

    /// The variant planner's plan (sparse fused schedule, dense operands, `dispatch` on):
    /// which variant runs over which pairs (sparse/variants.hpp); tiling is then its tile part's.
    std::optional<sparse::VariantPlan> variants;

    std::int64_t z_qk = 0;    ///< allowed pairs per (batch, head)
    std::int64_t z_input = 0; ///< Z_input per (batch, head): nnz of Q, K, V (backward: + dO)
    /// Dense: bound(problem, memory, pass); sparse: sparse::bound of the pass with z_input and
    /// the used input words (Li et al. Thm 4.5; compulsory counts only rows and keys in use).
    Bound bound;
};

/// What a call ran and, when counted, moved.
struct AttentionReport {
    AttentionPlan plan;
    std::optional<IoReport> io;          ///< the counted words (count_io or a counter given)
    std::optional<IoReport> closed_form; ///< io_cost of the plan, beside io
};

/// The plan attention() or attention_backward() would run. Auto (options.schedule nullopt)
/// selects with options.select: dense by select_schedule, the sparse forward by
/// sparse::select_schedule, the sparse backward by the exact costs of both schedules (cost) or
/// M >= Z_input^2 / Z_QK (theory). The tiling is the tuned one (sparse::tuned_tiling for sparse
/// plans) or Tiling::for_memory; the reference schedule's is n_q x n_k. A sparse fused plan
/// over dense operands holds the variant planner's plan (variants; O(Z_QK log) to build), and
/// its tiling is the variants' tile tiling (tuned: the planner may lower its height).
/// Under Objective::io the schedule (auto: either), variant and tiling are instead those of the
/// fewest counted words among the plans for the grid memories M' <= M (planned_for = M').
/// Throws InvalidArgument naming options.where: a bad problem or M; both memory and cache_bytes,
/// a forced variant without a support, with sparse operands or another schedule,
/// or a cache below two words; M below the smallest tiling
/// of the schedule (of either schedule under auto), naming the smallest M that fits; a support
/// of another shape; a support with problem.causal (intersect it with sparse::pattern_causal);
/// sparse operands without a support or of the wrong shape. Cost: O(1) dense; O(n_q + Z_QK)
/// sparse under auto with Select::cost. Thread-safe.
template <typename Scalar>
AttentionPlan plan_attention(const Problem& problem,
                             Pass pass,
                             const Structure<Scalar>& structure = {},
                             const AttentionOptions& options = {});

/// The exact I/O of a plan (io_cost_<kernel> of its schedule, tiling, variant plan and
/// structure): what a counted run of it reports. Throws InvalidArgument for the reference
/// schedule.
template <typename Scalar>
IoReport io_cost(const AttentionPlan& plan, const Structure<Scalar>& structure = {});

/// Plans (plan_attention) and runs the forward: writes args.o and args.lse (natural log; a row
/// with no allowed key gets O = 0 and L = -inf). Counts when options.count_io or
/// options.counter (then io and closed_form are set). Throws as plan_attention, InvalidArgument
/// for bad views or counting the reference schedule, CapacityError if a counted run exceeds M.
/// Results are bitwise independent of options.threads. Thread-safe for distinct outputs.
template <typename Scalar>
AttentionReport attention(const ForwardArgs<Scalar>& args,
                          const Structure<Scalar>& structure = {},
                          const AttentionOptions& options = {});

/// Runs a plan made by plan_attention for this problem, Pass::forward and structure (timed
/// loops plan once); of `options` only count_io, counter, threads and where are read.
/// Throws InvalidArgument when the plan is of another problem or pass.
template <typename Scalar>
AttentionReport attention(const ForwardArgs<Scalar>& args,
                          const Structure<Scalar>& structure,
                          const AttentionPlan& plan,
                          const AttentionOptions& options = {});

/// Plans and runs the backward: from args.o and args.lse as the forward wrote them and args.d_o,
/// overwrites args.d_q, args.d_k, args.d_v (GQA: dK, dV of a key/value head sum over its query
/// heads). Otherwise as attention().
template <typename Scalar>
AttentionReport attention_backward(const BackwardArgs<Scalar>& args,
                                   const Structure<Scalar>& structure = {},
                                   const AttentionOptions& options = {});

/// Runs a Pass::backward plan (see the forward's overload).
template <typename Scalar>
AttentionReport attention_backward(const BackwardArgs<Scalar>& args,
                                   const Structure<Scalar>& structure,
                                   const AttentionPlan& plan,
                                   const AttentionOptions& options = {});

/// The plan of `pass` (options.objective nullopt: the io objective) walked without data or
/// arithmetic (a dry run): io is the counted I/O,
/// closed_form its io_cost; shapes with N in the millions take seconds. Sparse operands are
/// read for their structure only. Throws as plan_attention, and InvalidArgument for the
/// reference schedule (it has no I/O model).
template <typename Scalar>
AttentionReport io_count(const Problem& problem,
                         Pass pass,
                         const Structure<Scalar>& structure = {},
                         const AttentionOptions& options = {});

// --- bf16: storage bfloat16, arithmetic and accumulators fp32 (docs/design.md section 16) ---
// Every function above takes bf16 views and bf16 sparse operands. L (args.lse) is fp32. Where
// bf16_runs_native holds, the call runs a native bf16 kernel on the views as they are (bf16
// pairs multiplied into fp32, P rounded to bf16 before P V). Otherwise it widens the bf16
// operands exactly into fp32 copies (ioattn/widen.hpp; 4 bytes per element of each bf16 view,
// checked against memory_limit()), runs the plan of the float problem - every schedule,
// variant and structure that runs in float - and rounds O (dQ, dK, dV) to nearest even. The
// plan, its M (fp32 words, the widened tiles the kernels hold) and the counted words are the
// float ones, on either path; in bytes, each operand's words count at its stored element size
// (2 for bf16, 4 for L). Results are bitwise independent of options.threads.
// NaN and Inf reach the outputs as in float (widening and rounding keep them).

/// Whether a bf16 call of `plan` over `structure` runs a native bf16 kernel instead of the
/// float kernels on widened copies: when bf16_kernels_native() (ioattn/isa.hpp), for the dense
/// fused forward and backward, and for the sparse fused forward's tile and element variants
/// over dense operands (a support, no sparse operand; the variant planner's tile or element
/// variant, or no variant plan). O then differs from the widened run's within u max|V|
/// (u = 2^-8: P rounded to bf16).
bool bf16_runs_native(const AttentionPlan& plan, const Structure<bf16>& structure);

template <>
AttentionPlan plan_attention<bf16>(const Problem& problem,
                                   Pass pass,
                                   const Structure<bf16>& structure,
                                   const AttentionOptions& options);

template <>
IoReport io_cost<bf16>(const AttentionPlan& plan, const Structure<bf16>& structure);

template <>
AttentionReport attention<bf16>(const ForwardArgs<bf16>& args,
                                const Structure<bf16>& structure,
                                const AttentionOptions& options);

template <>
AttentionReport attention<bf16>(const ForwardArgs<bf16>& args,
                                const Structure<bf16>& structure,
                                const AttentionPlan& plan,
                                const AttentionOptions& options);

template <>
AttentionReport attention_backward<bf16>(const BackwardArgs<bf16>& args,
                                         const Structure<bf16>& structure,
                                         const AttentionOptions& options);

template <>
AttentionReport attention_backward<bf16>(const BackwardArgs<bf16>& args,
                                         const Structure<bf16>& structure,
                                         const AttentionPlan& plan,
                                         const AttentionOptions& options);

template <>
AttentionReport io_count<bf16>(const Problem& problem,
                               Pass pass,
                               const Structure<bf16>& structure,
                               const AttentionOptions& options);

// ioattn::smallest_memory(problem, pass, schedule, kernels): ioattn/tiling.hpp.

} // namespace ioattn
