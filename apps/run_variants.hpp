#pragma once
// `ioattn run` beyond the dense forward: the backward pass (--pass backward) and sparse patterns
// (--pattern SPEC, --input-density P), with the same JSON keys as the dense forward (schedule,
// seconds, gflops, io{reads, writes, total, peak_resident}, bound{regime, leading, explicit},
// check{...}); a sparse fused run goes through the variant planner and adds `variant` and
// `variant_plan`.

#include "options.hpp"

#include <ioattn/attention.hpp>
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

/// Runs the problem and returns the JSON document `ioattn run` prints. Throws UsageError for
/// combinations that have no kernel (e.g. --count-io with the reference schedule).
template <typename Scalar>
nlohmann::json run_variant(const VariantRun& r);

extern template nlohmann::json run_variant<float>(const VariantRun&);
extern template nlohmann::json run_variant<double>(const VariantRun&);

} // namespace ioattn::app
