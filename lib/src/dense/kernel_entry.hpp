#pragma once
// What every dense kernel does before its loops: check its views and its tiling once, at entry,
// and size its per-worker scratch (none for a dry run, which walks the loops without data).

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <string>

namespace ioattn::dense::detail {

/// The views `args` checked for the kernel `where` (their data may be null in a dry run), its
/// tiling checked to be of `schedule` and to fit `memory` for `pass`. Throws InvalidArgument
/// naming `where`, or CapacityError when the tiling does not fit.
template <typename Counter, typename Args>
Args checked_entry(const Args& args,
                   const Tiling& tiling,
                   const MemoryModel& memory,
                   Schedule schedule,
                   Pass pass,
                   const char* where) {
    Args a = args;
    a.validate(where, !Counter::kComputes);
    if (tiling.schedule != schedule)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    tiling.validate(where, memory, a.problem, pass);
    return a;
}

/// `slabs` slabs of `words` each when the counter computes, none for a dry run. Allocated
/// under the kernel's CallMemory (resources.hpp), before its parallel loops.
template <typename Scalar, typename Counter>
kernels::Workspace<Scalar> scratch(std::int64_t slabs, std::int64_t words, bool zeroed = true) {
    return kernels::Workspace<Scalar>(
        Counter::kComputes ? static_cast<int>(slabs) : 0, words, zeroed);
}

/// One slab per worker thread.
template <typename Scalar, typename Counter>
kernels::Workspace<Scalar> worker_scratch(std::int64_t words) {
    return scratch<Scalar, Counter>(max_concurrency(), words);
}

} // namespace ioattn::dense::detail
