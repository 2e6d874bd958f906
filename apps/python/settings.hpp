#pragma once
// The keyword options of the Python calls (schedule, select, M, num_threads, scale, tuned,
// variant, objective) as
// the entry point's AttentionOptions, validated with the caller's name: bad values are
// InvalidArgument, which reaches Python as ValueError.

#include <ioattn/attention.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ioattn::python {

/// The options of one call as Python passed them.
struct Settings {
    std::optional<double> scale;        ///< None: 1/sqrt(d)
    std::string schedule = "auto";      ///< auto, fused, materialized, reference
    std::string select = "cost";        ///< cost or theory
    std::optional<std::int64_t> memory; ///< M in words; None: the per-core L2
    std::optional<int> threads;         ///< None: every core
    bool tuned = true;
    std::optional<std::int64_t> cache_bytes; ///< a real cache: MemoryModel::for_cache; not with M
    std::string variant = "auto"; ///< the sparse fused variant: auto (the planner) or forced
    std::optional<std::string> objective; ///< speed or io; None: the call's default
};

/// The entry point's options for a float64 (`f64`) or float32 call named `where`. Throws
/// InvalidArgument for an unknown schedule, select, variant or objective, for num_threads < 1,
/// for both M
/// and cache_bytes, and for a cache too small for one word.
AttentionOptions options_of(const Settings& s, bool f64, const char* where);

/// Problem::scale of a Python scale: 0 (the default 1/sqrt(d)) for None. Throws
/// InvalidArgument unless a given scale is > 0.
double scale_of(std::optional<double> scale, const char* where);

} // namespace ioattn::python
