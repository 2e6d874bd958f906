// ioattn::sparse::pattern_{dense,causal,window,causal_window,dilated,global,strided}: the
// deterministic pattern builders. Each row's allowed keys are a few index ranges or an
// arithmetic progression around the aligned position i' = i + (n_k - n_q), appended in
// ascending order. Each row's size is a closed form, so the rows are written in place in
// parallel (build_sized): O(n_q + Z_QK) work.
// Tests: tests/sparse/pattern_test.cpp

#include "patterns/parallel_rows.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <utility>

namespace ioattn::sparse {

using detail::check_at_least;
using detail::floor_div;

Support pattern_dense(std::int64_t n_q, std::int64_t n_k) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_dense";
    detail::check_shape(kWhere, n_q, n_k);
    return detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t) { return n_k; },
        detail::stateless(
            [&](std::int64_t, std::int64_t* out) { detail::write_range(out, 0, n_k - 1); }));
}

namespace {

/// A builder whose row i is the one interval [lo(i), hi(i)] clipped to [0, n_k).
template <typename Ends>
Support
interval_rows(std::string_view where, std::int64_t n_q, std::int64_t n_k, const Ends& ends) {
    return detail::build_sized(
        where,
        n_q,
        n_k,
        [&](std::int64_t i) {
            const auto [lo, hi] = ends(i);
            return detail::range_size(lo, hi, n_k);
        },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            const auto [lo, hi] = ends(i);
            detail::write_range(out, std::max<std::int64_t>(lo, 0), std::min(hi, n_k - 1));
        }));
}

} // namespace

Support pattern_causal(std::int64_t n_q, std::int64_t n_k) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_causal";
    detail::check_shape(kWhere, n_q, n_k);
    return interval_rows(kWhere, n_q, n_k, [&](std::int64_t i) {
        return std::pair<std::int64_t, std::int64_t>{0, i + n_k - n_q}; // j <= i'
    });
}

Support pattern_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_window";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    w = std::min(w, n_q + n_k); // wider windows allow the same pairs
    return interval_rows(kWhere, n_q, n_k, [&](std::int64_t i) {
        const std::int64_t p = i + n_k - n_q;
        return std::pair{p - w, p + w}; // |i' - j| <= W
    });
}

Support pattern_causal_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_causal_window";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    w = std::min(w, n_q + n_k);
    return interval_rows(kWhere, n_q, n_k, [&](std::int64_t i) {
        const std::int64_t p = i + n_k - n_q;
        return std::pair{p - w, p}; // 0 <= i' - j <= W
    });
}

namespace {

/// ceil(a / b) for b >= 1.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return -floor_div(-a, b);
}

} // namespace

Support pattern_dilated(std::int64_t n_q, std::int64_t n_k, std::int64_t w, std::int64_t s) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_dilated";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    check_at_least(kWhere, "S", s, 1);
    // |i' - j| <= n_q + n_k always, so clamping W and S keeps the pairs and avoids overflow.
    w = std::min(w, n_q + n_k);
    s = std::min(s, n_q + n_k + 1);
    // j = i' + t*S for t in [-W, W], kept inside [0, n_k): t in [t_lo, t_hi]
    const auto steps = [&](std::int64_t i) {
        const std::int64_t p = i + n_k - n_q;
        return std::pair{std::max(-w, ceil_div(-p, s)), std::min(w, floor_div(n_k - 1 - p, s))};
    };
    Support built = detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t i) {
            const auto [lo, hi] = steps(i);
            return std::max<std::int64_t>(0, hi - lo + 1);
        },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            const std::int64_t p = i + n_k - n_q;
            const auto [lo, hi] = steps(i);
            for (std::int64_t t = lo; t <= hi; ++t)
                *out++ = p + t * s;
        }));
    built.keep_steps(detail::BuiltRows{}, s, s); // j = i' + t S: each key's queries step by S too
    return built;
}

Support pattern_global(std::int64_t n_q, std::int64_t n_k, std::int64_t g) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_global";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "G", g, 0);
    return interval_rows(kWhere, n_q, n_k, [&](std::int64_t i) {
        const std::int64_t p = i + n_k - n_q;
        // a global query sees every key; every query sees the global keys
        return p >= 0 && p < g ? std::pair<std::int64_t, std::int64_t>{0, n_k - 1}
                               : std::pair<std::int64_t, std::int64_t>{0, g - 1};
    });
}

Support pattern_strided(std::int64_t n_q, std::int64_t n_k, std::int64_t l) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_strided";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "L", l, 1);
    // row i' >= 0: the summary columns l - 1, 2l - 1, ... before its block, then its own block
    // up to i' (i' < n_k always)
    Support built = detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t i) {
            const std::int64_t p = i + n_k - n_q;
            return p < 0 ? 0 : p / l + p % l + 1;
        },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            const std::int64_t p = i + n_k - n_q;
            if (p < 0)
                return;
            const std::int64_t block_start = (p / l) * l;
            for (std::int64_t j = l - 1; j < block_start; j += l)
                *out++ = j; // summary column: last key of an earlier block
            detail::write_range(out, block_start, p);
        }));
    // within a block, each row is the row before and one key more
    built.keep_chains(detail::BuiltRows{}, RowRuns{l, n_k - n_q});
    return built;
}

} // namespace ioattn::sparse
