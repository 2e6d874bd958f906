// The Python calls' keyword options as AttentionOptions (see settings.hpp).

#include "settings.hpp"

#include <ioattn/error.hpp>

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
    o.memory = s.memory ? MemoryModel{*s.memory} : MemoryModel::per_core_l2(f64 ? 8 : 4);
    if (s.threads && *s.threads < 1)
        throw InvalidArgument(std::string(where) + ": num_threads = " + std::to_string(*s.threads) +
                              " (expected >= 1 or None)");
    o.threads = s.threads.value_or(0);
    o.tuned = s.tuned;
    return o;
}

double scale_of(std::optional<double> scale, const char* where) {
    if (scale && !(*scale > 0.0))
        throw InvalidArgument(std::string(where) + ": scale = " + std::to_string(*scale) +
                              " (expected > 0, or None for 1/sqrt(d))");
    return scale.value_or(0.0);
}

} // namespace ioattn::python
