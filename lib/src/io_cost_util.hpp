#pragma once
// Helpers the dense closed forms (io_cost.cpp, io_cost_backward.cpp) and the tilings
// (tiling.cpp) share.

#include <ioattn/error.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <string>

namespace ioattn::detail {

/// ceil(a / b) for a >= 0, b >= 1.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

/// Throws InvalidArgument naming `where` unless the tiling is for schedule s.
inline void require_schedule(const Tiling& t, Schedule s, const char* where) {
    if (t.schedule != s)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(t.schedule)) + " schedule");
}

} // namespace ioattn::detail
