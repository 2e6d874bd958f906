// The Python calls' keyword options as AttentionOptions (see settings.hpp).

#include "settings.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/variants.hpp>

namespace ioattn::python {

AttentionOptions options_of(const Settings& s, bool f64, const char* where) {
    AttentionOptions o;
    o.where = where;
    if (s.schedule != "auto")
        o.schedule = parse_schedule(s.schedule);
    if (s.select != "cost" && s.select != "theory")
        throw InvalidArgument(std::string(where) + ": select '" + s.select +
                              "' (expected cost or theory)");
    o.select = s.select == "theory" ? Select::theory : Select::cost;
    if (s.memory && s.cache_bytes)
        throw InvalidArgument(std::string(where) + ": M = " + std::to_string(*s.memory) +
                              " and cache_bytes = " + std::to_string(*s.cache_bytes) +
                              " (give one: M is the ideal fast memory in words, cache_bytes a "
                              "real cache)");
    const std::int64_t word = f64 ? 8 : 4;
    if (s.cache_bytes && *s.cache_bytes / word / kCacheSlack < 1)
        throw InvalidArgument(std::string(where) +
                              ": cache_bytes = " + std::to_string(*s.cache_bytes) +
                              " leaves no word of fast memory " + "(M = cache_bytes / " +
                              std::to_string(word) + " / " + std::to_string(kCacheSlack) + ")");
    o.memory = s.memory        ? MemoryModel{*s.memory}
               : s.cache_bytes ? MemoryModel::for_cache(*s.cache_bytes, word)
                               : MemoryModel::per_core_l2(word);
    if (s.threads && *s.threads < 1)
        throw InvalidArgument(std::string(where) + ": num_threads = " + std::to_string(*s.threads) +
                              " (expected >= 1 or None)");
    o.threads = s.threads.value_or(0);
    o.tuned = s.tuned;
    if (s.variant != "auto") // auto: the variant planner picks (sparse/variants.hpp)
        o.variant = sparse::parse_variant(s.variant);
    if (s.objective && *s.objective != "speed" && *s.objective != "io")
        throw InvalidArgument(std::string(where) + ": objective '" + *s.objective +
                              "' (expected speed or io)");
    if (s.objective)
        o.objective = parse_objective(*s.objective);
    return o;
}

double scale_of(std::optional<double> scale, const char* where) {
    if (scale && !(*scale > 0.0))
        throw InvalidArgument(std::string(where) + ": scale = " + std::to_string(*scale) +
                              " (expected > 0, or None for 1/sqrt(d))");
    return scale.value_or(0.0);
}

} // namespace ioattn::python
