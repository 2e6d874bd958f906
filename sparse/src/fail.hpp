#pragma once
// Private: throwing ioattn::InvalidArgument with a message built from pieces.

#include <ioattn/error.hpp>

#include <sstream>
#include <string_view>

namespace ioattn::sparse::detail {

/// Throws InvalidArgument("<where>: <parts...>").
template <typename... Parts>
[[noreturn]] void fail(std::string_view where, const Parts&... parts) {
    std::ostringstream os;
    os << where << ": ";
    (os << ... << parts);
    throw InvalidArgument(os.str());
}

} // namespace ioattn::sparse::detail
