// ioattn::decode_window_of, decode_pattern_rows: the support patterns over the cached positions,
// named in the grammar of `--pattern` (sparse/pattern.hpp). Decode sees the cache causally (new
// token at position p sees j <= p). Restricted by that rule, dense and causal are every earlier
// position and window:W and causal-window:W the W + 1 latest (0 <= p - j <= W): windows, which
// the schedule reads as one range of rows per sequence. Any other pattern is built on the
// sequence's n_new x len problem and intersected with the causal rule: the rows its tokens see.
// Tests: tests/decode/decode_window_test.cpp, tests/decode/decode_pattern_test.cpp

#include "decode/decode_detail.hpp"
#include "fail.hpp"

#include <ioattn/decode.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ioattn {

std::optional<std::int64_t> sparse::detail::decode_window_spec(std::string_view spec,
                                                               std::string_view where) {
    if (spec == "dense" || spec == "causal")
        return 0;
    for (const std::string_view name : {"window:", "causal-window:"}) {
        if (!spec.starts_with(name))
            continue;
        const std::string_view arg = spec.substr(name.size());
        if (arg.find_first_of("+&() ") != std::string_view::npos)
            return std::nullopt; // a window combined with other patterns
        std::int64_t w = -1;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), w);
        if (ec != std::errc{} || end != arg.data() + arg.size() || w < 0 ||
            w == std::numeric_limits<std::int64_t>::max())
            sparse::detail::fail(
                where, "pattern '", spec, "': W = '", arg, "' is not an integer in [0, 2^63 - 1)");
        return w + 1;
    }
    return std::nullopt;
}

void sparse::detail::resolve_window_spec(DecodeShape& s, std::string_view where) {
    if (s.pattern.empty())
        return;
    const auto w = decode_window_spec(s.pattern, where);
    if (s.window != 0 && (!w || (*w != 0 && *w != s.window)))
        fail(where,
             "window = ",
             s.window,
             " and pattern '",
             s.pattern,
             "' (expected one of them: put the window in the pattern)");
    if (w) {
        s.window = std::max(s.window, *w);
        s.pattern.clear();
    }
}

std::int64_t decode_window_of(std::string_view spec, std::string_view where) {
    if (const auto w = sparse::detail::decode_window_spec(spec, where))
        return *w;
    sparse::detail::fail(where,
                         "pattern '",
                         spec,
                         "' is not a window: dense, causal, window:W and causal-window:W (W + 1 "
                         "keys: 0 <= p - j <= W); other patterns go in DecodeArgs::pattern");
}

sparse::Support decode_pattern_rows(std::string_view spec,
                                    std::int64_t n_new,
                                    std::int64_t len,
                                    std::uint64_t seed,
                                    std::string_view where) {
    if (n_new < 1 || len < n_new)
        sparse::detail::fail(where,
                             "pattern '",
                             spec,
                             "' on n_new = ",
                             n_new,
                             " new tokens and ",
                             len,
                             " cached rows");
    sparse::Support built;
    try {
        built = sparse::parse_pattern(spec, n_new, len, seed);
    } catch (const InvalidArgument& e) {
        sparse::detail::fail(where, "pattern '", spec, "' over the cached positions: ", e.what());
    }
    std::vector<std::int64_t> offsets{0}, keys; // row t's keys up to its own position
    keys.reserve(static_cast<std::size_t>(built.z_qk()));
    for (std::int64_t t = 0; t < n_new; ++t) {
        for (const std::int64_t j : built.row(t)) {
            if (j > len - n_new + t)
                break;
            keys.push_back(j);
        }
        offsets.push_back(static_cast<std::int64_t>(keys.size()));
    }
    return {n_new, len, std::move(offsets), std::move(keys)};
}

} // namespace ioattn
