// `ioattn run --pass backward` and `ioattn run --pattern SPEC` (see run_variants.hpp). The check
// compares with the double reference, relative to a naive computation in the working type over
// the same allowed pairs: passed iff err(kernel) <= 2 err(naive) + tiny.

#include "run_variants.hpp"

#include "commands.hpp"
#include "digest.hpp"
#include "run_check.hpp"
#include "run_operands.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kRunVariantsWhere = "run";

} // namespace

AttentionOptions attention_options(const VariantRun& r) {
    AttentionOptions a;
    if (r.schedule != "auto")
        a.schedule = parse_schedule(r.schedule);
    a.select = r.select;
    a.objective = r.objective;
    a.memory = r.memory;
    a.cache_bytes = r.cache_bytes;
    a.threads = r.threads;
    a.where = kRunVariantsWhere;
    if (r.variant != "auto")
        a.variant = sparse::parse_variant(r.variant);
    return a;
}

nlohmann::json plan_json(const VariantRun& r, const AttentionPlan& plan) {
    const Problem& p = plan.problem;
    const Bound& b = plan.bound;
    nlohmann::json j = {{"batch", p.batch},
                        {"heads", p.heads},
                        {"kv_heads", p.kv_heads},
                        {"n_q", p.n_q},
                        {"n_k", p.n_k},
                        {"d", p.d},
                        {"d_v", p.d_v},
                        {"causal", p.causal},
                        {"scale", p.scale}};
    j["pass"] = std::string(to_string(r.pass));
    j["pattern"] = r.pattern;
    if (plan.sparse) {
        j["z_qk"] = plan.z_qk;
        j["input_density"] = r.input_density;
        j["z_input"] = plan.z_input; // per (batch, head)
    }
    j["schedule"] = std::string(to_string(plan.schedule));
    if (const auto& v = plan.variants) { // keys only when the variant planner ran
        const auto tiling_json = [](const Tiling& t) {
            return nlohmann::json{{"rows", t.rows}, {"cols", t.cols}};
        };
        j["variant"] = std::string(sparse::to_string(v->variant));
        j["variant_plan"] = {{"inner", std::string(sparse::to_string(v->inner))},
                             {"forced", r.variant != "auto"},
                             {"tile_blocks", v->tile_blocks},
                             {"element_blocks", v->element_blocks},
                             {"split_blocks", v->split_blocks},
                             {"tile_pairs", v->tile_pairs},
                             {"element_pairs", v->element_pairs},
                             {"rows_reordered", v->rows_reordered},
                             {"keys_reordered", v->keys_reordered},
                             {"element_in_tiles", v->element_in_tiles},
                             {"tile_tiling", tiling_json(v->tile)},
                             {"element_tiling", tiling_json(v->element)}};
    }
    j["selected_by"] = plan.selected_by ? nlohmann::json(std::string(to_string(*plan.selected_by)))
                                        : nlohmann::json(nullptr);
    j["objective"] = std::string(to_string(plan.objective));
    j["planned_for"] = plan.planned_for;
    j["M"] = plan.memory.fast_words;
    j["threads"] = with_threads(r.threads, [] { return max_concurrency(); });
    j["seed"] = r.seed;
    j["repeat"] = r.repeat;
    j["tiling"] = {{"schedule", std::string(to_string(plan.tiling.schedule))},
                   {"rows", plan.tiling.rows},
                   {"cols", plan.tiling.cols}};
    j["bound"] = {{"regime", std::string(b.regime)},
                  {"compulsory", b.compulsory},
                  {"leading", b.leading},
                  {"asymptotic", b.asymptotic()},
                  {"explicit", b.explicit_bound}};
    if (r.pass == Pass::backward && !plan.sparse)
        j["bound"]["theorem_1_1"] = b.theorem;
    return j;
}

nlohmann::json counted_io_json(const IoCounter& counter,
                               const IoReport& closed,
                               const Bound& bound,
                               std::int64_t operand_bytes,
                               std::int64_t word_bytes) {
    constexpr const char* kStreams[] = {"q",
                                        "k",
                                        "v",
                                        "o",
                                        "lse",
                                        "scores",
                                        "stats",
                                        "d_o",
                                        "d_q",
                                        "d_k",
                                        "d_v",
                                        "delta",
                                        "probs",
                                        "d_scores",
                                        "d_q_partial",
                                        "index"};
    static_assert(std::size(kStreams) == kOperandCount);
    const IoReport got = counter.report();
    nlohmann::json streams = nlohmann::json::object();
    for (int i = 0; i < kOperandCount; ++i) {
        const auto op = static_cast<Operand>(i);
        if (counter.words(op) == 0)
            continue;
        const std::int64_t size = is_operand_stream(op) ? operand_bytes : word_bytes;
        streams[kStreams[i]] = {{"words", counter.words(op)},
                                {"element_bytes", size},
                                {"bytes", counter.words(op) * size}};
    }
    return {{"reads", got.reads},
            {"writes", got.writes},
            {"total", got.total()},
            {"peak_resident", got.peak},
            {"closed_form_total", closed.total()},
            {"matches_closed_form", got == closed},
            {"ratio_to_bound", static_cast<double>(got.total()) / bound.asymptotic()},
            {"bytes", counter.bytes(operand_bytes, word_bytes)},
            {"streams", streams}};
}

template <typename Scalar>
nlohmann::json run_variant(const VariantRun& r) {
    const Problem& p = r.problem;
    const bool backward = r.pass == Pass::backward;
    Data<Scalar> data = seeded_data<Scalar>(p, r.seed);
    const Operands<Scalar> operands(r, data);
    const Structure<Scalar> structure = operands.structure();
    // --- the schedule and its tiling: the library's plan ---
    if (r.variant != "auto" &&
        (r.input_density < 1.0 || (r.schedule != "fused" && r.schedule != "auto")))
        throw UsageError(std::string(kRunVariantsWhere) + ": --variant " + r.variant +
                         " needs the fused schedule, a sparse --pattern and dense inputs");
    const AttentionOptions opts = attention_options(r);
    const AttentionPlan plan = plan_attention(p, r.pass, structure, opts);
    if (r.count_io && plan.schedule == Schedule::reference)
        throw UsageError(std::string(kRunVariantsWhere) +
                         ": --count-io needs a fused or materialized schedule");
    const auto run = [&](const AttentionOptions& o) {
        return backward ? attention_backward(data.backward(), structure, plan, o)
                        : attention(data.forward(), structure, plan, o);
    };
    if (backward) { // O and L are the backward's inputs, made under an ample M whatever M is
        AttentionOptions ample = opts; // under test
        ample.schedule =
            plan.schedule == Schedule::reference ? Schedule::reference : Schedule::fused;
        ample.memory = MemoryModel{std::max<std::int64_t>(plan.memory.fast_words, 1 << 22)};
        ample.cache_bytes.reset();
        (void)attention(data.forward(), structure, ample);
    }
    const double seconds = measure::median_seconds(
        r.repeat, [&] { (void)run(opts); }, r.repeat > 1);
    const double flops = plan.sparse ? 4.0 * static_cast<double>(plan.z_qk) *
                                           static_cast<double>(p.d * p.batch_heads()) *
                                           (backward ? 2.5 : 1.0)
                                     : flop_count_convention(p, r.pass);
    nlohmann::json j = plan_json(r, plan);
    j["dtype"] = sizeof(Scalar) == 4 ? "float" : "double";
    j["seconds"] = seconds;
    j["gflops"] = flops / seconds * 1e-9;
    j["output_digest"] = backward ? output_digest<Scalar>({&data.d_q, &data.d_k, &data.d_v})
                                  : output_digest<Scalar>({&data.o, &data.lse});
    j["check"] = r.check ? check_json(data, structure.support, backward) : nullptr;
    j["io"] = nullptr;
    if (r.count_io) {
        AttentionOptions counted = opts;
        IoCounter counter(plan.memory.fast_words);
        counted.counter = &counter;
        const AttentionReport report = run(counted);
        constexpr auto kBytes = static_cast<std::int64_t>(sizeof(Scalar));
        j["io"] = counted_io_json(counter, *report.closed_form, plan.bound, kBytes, kBytes);
    }
    return j;
}

template nlohmann::json run_variant<float>(const VariantRun&);
template nlohmann::json run_variant<double>(const VariantRun&);

} // namespace ioattn::app
