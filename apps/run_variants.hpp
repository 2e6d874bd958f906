#pragma once
// `ioattn run` beyond the dense forward: the backward pass (--pass backward) and sparse patterns
// (--pattern SPEC, --input-density P), with the same JSON keys as the dense forward (schedule,
// seconds, gflops, io{reads, writes, total, peak_resident}, bound{regime, leading, explicit},
// check{...}); a sparse fused run goes through the variant planner and adds `variant` and
// `variant_plan`.

#include "options.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>

namespace ioattn::app {

struct VariantRun {
    Problem problem;
    std::optional<MemoryModel> memory;       ///< --M / --M-bytes; nullopt: see cache_bytes
    std::optional<std::int64_t> cache_bytes; ///< --cache-bytes; neither: the per-core L2
    Pass pass = Pass::forward;
    std::string pattern = "dense";
    std::string schedule = "auto"; ///< as given
    Select select = Select::cost;
    Objective objective = Objective::speed; ///< --objective (default io with --count-io)
    int threads = 0;
    std::uint64_t seed = 42;
    bool check = false;
    bool count_io = false;
    int repeat = 1;
    double input_density = 1.0;   ///< < 1: Q, K, V as SparseInputs (run --input-density)
    std::string variant = "auto"; ///< sparse fused: auto or a forced variant (run --variant)
};

/// The entry point's options for this run (the schedule, selection and M as given).
AttentionOptions attention_options(const VariantRun& r);

/// The problem, the plan and the bounds, in the keys of the dense forward's JSON.
nlohmann::json plan_json(const VariantRun& r, const AttentionPlan& plan);

/// The "io" object of `ioattn run --count-io`: words read, written, total and peak of the
/// counter beside the closed form and the bound, and the bytes (IoCounter::bytes with the
/// operands at `operand_bytes` per word and every other stream at `word_bytes`) in total and
/// per stream.
nlohmann::json counted_io_json(const IoCounter& counter,
                               const IoReport& closed,
                               const Bound& bound,
                               std::int64_t operand_bytes,
                               std::int64_t word_bytes);

/// `ioattn run --dtype bf16` (run_bf16.cpp): bf16 operands, L fp32, any pass, pattern and
/// schedule; --check against the double reference on the bf16-rounded inputs with the
/// tolerance of docs/design.md section 16.
nlohmann::json run_bf16(const VariantRun& r);

/// Runs the problem and returns the JSON document `ioattn run` prints. Throws UsageError for
/// combinations that have no kernel (e.g. --count-io with the reference schedule).
template <typename Scalar>
nlohmann::json run_variant(const VariantRun& r);

extern template nlohmann::json run_variant<float>(const VariantRun&);
extern template nlohmann::json run_variant<double>(const VariantRun&);

} // namespace ioattn::app
