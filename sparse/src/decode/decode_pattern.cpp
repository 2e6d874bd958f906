// ioattn::decode_window_of: the support patterns over the cached positions that decode reads
// row by row, named in the grammar of `--pattern` (sparse/pattern.hpp). Decode sees the cache
// causally (new token at position p sees j <= p), so a pattern restricted by that rule is
// either every earlier position (dense, causal) or the W + 1 latest (window:W and
// causal-window:W allow 0 <= p - j <= W): a window of W + 1 keys.
// Tests: tests/decode/decode_window_test.cpp

#include "fail.hpp"

#include <ioattn/decode.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

namespace ioattn {

std::int64_t decode_window_of(std::string_view spec, std::string_view where) {
    if (spec == "dense" || spec == "causal")
        return 0;
    for (const std::string_view name : {"window:", "causal-window:"}) {
        if (!spec.starts_with(name))
            continue;
        const std::string_view arg = spec.substr(name.size());
        std::int64_t w = -1;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), w);
        if (ec != std::errc{} || end != arg.data() + arg.size() || w < 0 ||
            w == std::numeric_limits<std::int64_t>::max())
            sparse::detail::fail(
                where, "pattern '", spec, "': W = '", arg, "' is not an integer in [0, 2^63 - 1)");
        return w + 1;
    }
    sparse::detail::fail(where,
                         "pattern '",
                         spec,
                         "' over the cached positions: decode reads dense, causal, window:W "
                         "and causal-window:W (W + 1 keys: 0 <= p - j <= W)");
}

} // namespace ioattn
