// ioattn run: one problem, one schedule. Times it (--repeat r: median), optionally checks it
// against the double reference (--check) and counts its I/O in a separate run of the same
// tiling with IoCounter (--count-io), next to the closed form and the lower bounds.

#include "check.hpp"
#include "commands.hpp"
#include "digest.hpp"
#include "options.hpp"
#include "output.hpp"
#include "run_report.hpp"
#include "run_variants.hpp"
#ifdef IOATTN_WITH_MPI
#include "run_dist.hpp"
#endif

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/resources.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace ioattn::app {

namespace {

constexpr const char* kRunWhere = "run";

struct RunOptions {
    SharedOptions shared;
    bool check = false;
    bool count_io = false;
    int repeat = 1;
    double input_density = 1.0;
    std::string variant = "auto";
    std::string objective; ///< --objective speed|io; empty: io with --count-io, else speed
    std::string dist;      ///< --dist: empty, or ring, zigzag, sparse (run_dist.hpp)
};

/// The memory the entry point plans for: --cache-bytes goes to the library as a cache size
/// (it picks M for it), --M / --M-bytes as M; neither: M = the per-core L2.
std::pair<std::optional<MemoryModel>, std::optional<std::int64_t>>
memory_request(const SharedOptions& o) {
    if (o.cache_bytes != kUnset)
        return {std::nullopt, o.cache_bytes};
    return {memory_of(o, kRunWhere), std::nullopt};
}

/// --objective, by default io for a counted run (it plans for the fewest words) and speed.
Objective objective_of(const RunOptions& o) {
    if (!o.objective.empty())
        return parse_objective(o.objective);
    return o.count_io ? Objective::io : Objective::speed;
}

/// The options of the entry point (ioattn/attention.hpp) for the dense forward run: it plans
/// the schedule and tiling and names the smallest M when the given one is too small.
AttentionOptions attention_options(const RunOptions& o) {
    AttentionOptions a;
    a.schedule = schedule_of(o.shared);
    a.select = select_of(o.shared);
    // a counted run plans for the fewest words unless told otherwise
    a.objective = objective_of(o);
    std::tie(a.memory, a.cache_bytes) = memory_request(o.shared);
    a.threads = o.shared.threads;
    a.where = kRunWhere;
    return a;
}

nlohmann::json problem_json(const Problem& p) {
    return {{"batch", p.batch},
            {"heads", p.heads},
            {"kv_heads", p.kv_heads},
            {"n_q", p.n_q},
            {"n_k", p.n_k},
            {"d", p.d},
            {"d_v", p.d_v},
            {"causal", p.causal},
            {"scale", p.scale}};
}

template <typename Scalar>
nlohmann::json run_typed(const RunOptions& o) {
    const Problem problem = problem_of(o.shared, kRunWhere);
    const AttentionOptions opts = attention_options(o);
    const AttentionPlan plan = plan_attention<Scalar>(problem, Pass::forward, {}, opts);
    if (o.count_io && plan.schedule == Schedule::reference)
        throw UsageError(std::string(kRunWhere) +
                         ": --count-io needs --schedule fused, materialized or auto (the "
                         "reference schedule has no I/O model)");
    measure::ForwardData<Scalar> data(plan.problem, o.shared.seed);
    const ForwardArgs<Scalar> args = data.args();
    const auto once = [&] { (void)attention(args, {}, plan, opts); };
    const double seconds = measure::median_seconds(o.repeat, once, o.repeat > 1);
    const double flops = flop_count_convention(plan.problem, Pass::forward);
    const Bound& bound = plan.bound;

    nlohmann::json j = problem_json(plan.problem);
    j["pass"] = "forward";
    j["pattern"] = "dense";
    j["dtype"] = o.shared.dtype;
    j["schedule"] = std::string(to_string(plan.schedule));
    j["selected_by"] = plan.selected_by ? nlohmann::json(std::string(to_string(*plan.selected_by)))
                                        : nlohmann::json(nullptr);
    j["objective"] = std::string(to_string(plan.objective));
    j["planned_for"] = plan.planned_for;
    j["M"] = plan.memory.fast_words;
    j["threads"] = with_threads(o.shared.threads, [] { return max_concurrency(); });
    j["seed"] = o.shared.seed;
    j["repeat"] = o.repeat;
    j["seconds"] = seconds;
    j["gflops"] = flops / seconds * 1e-9;
    j["output_digest"] = output_digest<Scalar>({&data.o, &data.lse});
    j["tiling"] = {{"schedule", std::string(to_string(plan.tiling.schedule))},
                   {"rows", plan.tiling.rows},
                   {"cols", plan.tiling.cols},
                   {"resident_words", plan.tiling.resident_words(plan.problem)}};
    if (plan.tiling.depth > 0)
        j["tiling"]["depth"] = plan.tiling.depth;
    j["bound"] = {{"regime", std::string(bound.regime)},
                  {"compulsory", bound.compulsory},
                  {"leading", bound.leading},
                  {"asymptotic", bound.asymptotic()},
                  {"explicit", bound.explicit_bound}};
    j["check"] = nullptr;
    j["io"] = nullptr;
    if (o.check) {
        const Reference ref = reference_of(data, o.shared.threads);
        const CheckResult c = check_forward(data, ref, o.shared.threads);
        j["check"] = {{"max_abs_error", c.max_abs_error},
                      {"naive_error", c.naive_error},
                      {"tiny", c.tiny},
                      {"error_ratio", c.error_ratio},
                      {"passed", c.passed}};
    }
    if (o.count_io) {
        AttentionOptions counted = opts;
        IoCounter counter(plan.memory.fast_words);
        counted.counter = &counter;
        const AttentionReport report = attention(args, {}, plan, counted);
        constexpr auto kBytes = static_cast<std::int64_t>(sizeof(Scalar));
        j["io"] = counted_io_json(counter, *report.closed_form, bound, kBytes, kBytes);
    }
    return j;
}

/// Refuses a run whose operands cannot fit, before any is allocated (ResourceError, exit 1).
/// The dense forward holds Q, K, V, O, L in --dtype, and with --check a double reference (Q, K,
/// V, O, L) and a naive copy; the other runs (run_variants.cpp) hold the forward's and the
/// backward's operands (dO, dQ, dK, dV), a transient copy of the forward's while they are
/// drawn, and with --check a double and a naive copy of all of them. The kernels check their
/// own workspaces (ioattn::CallMemory); the sparse support checks itself as it is built.
void require_operand_memory(const RunOptions& o, const Problem& p, bool dense_forward) {
    // element counts, each below 2^62 (Problem::validate); their sums saturate
    const auto count = [](std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
        return static_cast<std::uint64_t>(a * b * c * d);
    };
    const std::uint64_t q = count(p.batch, p.heads, p.n_q, p.d);
    const std::uint64_t k = count(p.batch, p.kv_heads, p.n_k, p.d);
    const std::uint64_t v = count(p.batch, p.kv_heads, p.n_k, p.d_v);
    const std::uint64_t out = count(p.batch, p.heads, p.n_q, p.d_v);
    const auto sum = [](std::initializer_list<std::uint64_t> terms) {
        std::uint64_t total = 0;
        for (const std::uint64_t t : terms)
            total = ioattn::add_bytes(total, t);
        return total;
    };
    const std::uint64_t fwd = sum({q, k, v, out, count(p.batch, p.heads, p.n_q, 1)});
    const std::uint64_t held = dense_forward ? fwd : sum({fwd, q, k, v, out});
    const auto bytes = [](std::uint64_t words, std::int64_t word) {
        return ioattn::bytes_of(static_cast<std::int64_t>(words), static_cast<std::size_t>(word));
    };
    // bf16: the operands are drawn in float and held in bf16 too (the library checks its
    // fp32 copies itself)
    const std::int64_t wb = o.shared.dtype == "bf16" ? 4 + 2 : word_bytes(o.shared);
    std::uint64_t need = bytes(held, wb);
    if (!dense_forward) // the forward's operands are drawn into a transient copy
        need = ioattn::add_bytes(need, bytes(fwd, wb));
    if (o.check) // a double reference and a naive copy in --dtype
        need = ioattn::add_bytes(need, bytes(held, 8 + wb));
    require_memory(kRunWhere, need, "operands (inputs, outputs, copies)");
}

nlohmann::json run_json(const RunOptions& o) {
    const Pass pass = pass_of(o.shared, kRunWhere);
    if (!(o.input_density > 0.0 && o.input_density <= 1.0)) // NaN too
        throw UsageError(std::string(kRunWhere) + ": --input-density " + sig(o.input_density) +
                         " (expected 0 < density <= 1)");
    if (o.variant != "auto" && o.shared.pattern == "dense")
        throw UsageError(std::string(kRunWhere) + ": --variant " + o.variant +
                         " needs a sparse --pattern (the variants are the sparse fused kernels')");
    const bool is_bf16 = o.shared.dtype == "bf16";
    if (!is_bf16 && pass == Pass::forward && o.shared.pattern == "dense" &&
        o.input_density == 1.0) {
        require_operand_memory(o, problem_of(o.shared, kRunWhere), true);
        return o.shared.dtype == "double" ? run_typed<double>(o) : run_typed<float>(o);
    }
    require_operand_memory(o, problem_of(o.shared, kRunWhere), false);
    VariantRun r;
    r.problem = problem_of(o.shared, kRunWhere);
    std::tie(r.memory, r.cache_bytes) = memory_request(o.shared);
    r.pass = pass;
    r.pattern = o.shared.pattern;
    r.schedule = o.shared.schedule;
    r.select = select_of(o.shared);
    r.objective = objective_of(o);
    r.threads = o.shared.threads;
    r.seed = o.shared.seed;
    r.check = o.check;
    r.count_io = o.count_io;
    r.repeat = o.repeat;
    r.input_density = o.input_density;
    r.variant = o.variant;
    if (is_bf16)
        return run_bf16(r);
    return o.shared.dtype == "double" ? run_variant<double>(r) : run_variant<float>(r);
}

void run(const RunOptions& o) {
    if (!o.dist.empty()) {
        if (o.input_density != 1.0)
            throw UsageError(std::string(kRunWhere) +
                             ": --input-density with --dist is not supported");
#ifdef IOATTN_WITH_MPI
        run_distributed({o.shared, o.dist, o.check, o.count_io, o.repeat});
        return;
#else
        throw_built_without_mpi(kRunWhere, "--dist", o.dist);
#endif
    }
    nlohmann::json j = run_json(o);
    j["isa"] = std::string(to_string(active_isa())); // the kernels' instruction set
    j["avx512_bf16"] = cpu_supports_avx512_bf16();   // for native bf16 kernels
    if (o.shared.cache_bytes != kUnset)              // M was planned for a real cache of this size
        j["cache_bytes"] = o.shared.cache_bytes;
    if (o.shared.json)
        std::cout << j.dump(2) << '\n';
    else if (o.shared.csv)
        print_run_csv(j);
    else
        print_run_text(j, o.shared, o.repeat);
    if (!j["io"].is_null() && !j["io"]["matches_closed_form"].get<bool>())
        throw CheckFailed(std::string(kRunWhere) + ": counted I/O differs from io_cost_" +
                          j["pass"].get<std::string>());
    if (!j["check"].is_null() && !j["check"]["passed"].get<bool>()) {
        const auto& c = j["check"];
        if (c.contains("tolerance")) // bf16
            throw CheckFailed(std::string(kRunWhere) + ": --check failed: error " +
                              sig(c.value("max_abs_error", c.value("max_relative_error", 0.0))) +
                              " above the bf16 tolerance " + sig(c["tolerance"].get<double>()));
        throw CheckFailed(std::string(kRunWhere) + ": --check failed: max_abs_error " +
                          sig(c["max_abs_error"].get<double>()) + " > 2 * naive " +
                          sig(c["naive_error"].get<double>()) + " + tiny");
    }
}

} // namespace

} // namespace ioattn::app

void register_run(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<RunOptions>();
    auto* cmd = app.add_subcommand("run", "Run one problem: time it, --check it, --count-io it");
    add_problem_options(*cmd, o->shared);
    add_schedule_options(*cmd, o->shared);
    add_memory_options(*cmd, o->shared);
    add_runtime_options(*cmd, o->shared);
    add_output_options(*cmd, o->shared);
    cmd->add_flag("--check",
                  o->check,
                  "Compare with the double reference: max_abs_error, error_ratio vs a naive "
                  "computation in --dtype; exit 1 if err > 2 * naive + tiny (bf16: the reference "
                  "on the bf16-rounded inputs, the tolerance of docs/design.md section 16)");
    cmd->add_flag("--count-io",
                  o->count_io,
                  "Count reads, writes, total and peak residency in a separate IoCounter run of "
                  "the same tiling, against io_cost and the bounds");
    cmd->add_option("--objective",
                    o->objective,
                    "What the plan minimises: speed (tuned tilings, the variant the cost model "
                    "times fastest; the default) or io (the fewest counted words among the plans "
                    "for M' <= M; the default with --count-io); JSON key 'objective'")
        ->check(CLI::IsMember({"speed", "io"}));
    cmd->add_option("--repeat", o->repeat, "Timed runs (after one warm-up if > 1); median")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--input-density",
                    o->input_density,
                    "Sparse inputs: Q, K and V keep each entry with this probability (the rest "
                    "are zeros, as after a ReLU) and reach the sparse kernels as CSR rows over d; "
                    "I/O counts their stored entries (Z_input). 1: dense inputs")
        ->capture_default_str();
    cmd->add_option("--variant",
                    o->variant,
                    "Variant of the sparse fused schedule: auto (the variant planner's "
                    "choice), tile, element, split or permuted (forced); JSON key 'variant'")
        ->check(CLI::IsMember({"auto", "tile", "element", "split", "permuted"}))
        ->capture_default_str();
#ifdef IOATTN_WITH_MPI
    add_dist_option(*cmd, o->dist);
#else
    cmd->add_option("--dist", o->dist, "Shard over MPI ranks (needs a build with MPI)");
#endif
    cmd->callback([o] { run(*o); });
}
