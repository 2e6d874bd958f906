#pragma once
// What the timings of `ioattn bench`, `ioattn demo` and the Google Benchmark families call: the
// library's entry point (ioattn::attention / attention_backward), planned once outside the timed
// loop as a user's training loop would, so a timing includes what a user's call pays (the
// variant planner's variants, the tuned tiling, the views' checks) and nothing else.

#include <ioattn/attention.hpp>

#include <string_view>

namespace ioattn::measure {

/// Options of a timed call: this schedule, planned for `memory`, on at most `threads` workers;
/// `tuned`: the tiling tuned for this CPU, else the I/O-optimal Tiling::for_memory one.
inline AttentionOptions timed_options(Schedule schedule,
                                      const MemoryModel& memory,
                                      int threads,
                                      std::string_view where,
                                      bool tuned = true) {
    AttentionOptions o;
    o.schedule = schedule;
    o.memory = memory;
    o.threads = threads;
    o.tuned = tuned;
    o.where = where;
    return o;
}

} // namespace ioattn::measure
