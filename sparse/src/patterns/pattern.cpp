// ioattn::sparse::pattern_{dense,causal,window,causal_window,dilated,global,strided}: the
// deterministic pattern builders. Each row's allowed keys are a few index ranges or an
// arithmetic progression around the aligned position i' = i + (n_k - n_q), appended in
// ascending order: O(n_q + Z_QK) time, serial.
// Tests: tests/sparse/pattern_test.cpp

#include "patterns/pattern_util.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>

namespace ioattn::sparse {

namespace {

void check_at_least(std::string_view where, const char* name, std::int64_t v, std::int64_t min) {
    if (v < min)
        detail::fail(where, name, " = ", v, " (expected >= ", min, ")");
}

} // namespace

Support pattern_dense(std::int64_t n_q, std::int64_t n_k) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_dense";
    detail::check_shape(kWhere, n_q, n_k);
    return detail::build_rows(kWhere, n_q, n_k, [&](std::int64_t, std::vector<std::int64_t>& cols) {
        detail::append_range(cols, 0, n_k - 1, n_k);
    });
}

Support pattern_causal(std::int64_t n_q, std::int64_t n_k) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_causal";
    detail::check_shape(kWhere, n_q, n_k);
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            detail::append_range(cols, 0, i + n_k - n_q, n_k); // j <= i'
        });
}

Support pattern_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_window";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    w = std::min(w, n_q + n_k); // wider windows allow the same pairs
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const std::int64_t p = i + n_k - n_q;
            detail::append_range(cols, p - w, p + w, n_k); // |i' - j| <= W
        });
}

Support pattern_causal_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_causal_window";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    w = std::min(w, n_q + n_k);
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const std::int64_t p = i + n_k - n_q;
            detail::append_range(cols, p - w, p, n_k); // 0 <= i' - j <= W
        });
}

Support pattern_dilated(std::int64_t n_q, std::int64_t n_k, std::int64_t w, std::int64_t s) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_dilated";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    check_at_least(kWhere, "S", s, 1);
    // |i' - j| <= n_q + n_k always, so clamping W and S keeps the pairs and avoids overflow.
    w = std::min(w, n_q + n_k);
    s = std::min(s, n_q + n_k + 1);
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const std::int64_t p = i + n_k - n_q;
            // j = i' + t*S for t in [-W, W], kept inside [0, n_k)
            std::int64_t t_lo = -w;
            if (p - w * s < 0)
                t_lo = -(p / s); // first t with p + t*s >= 0, or one before it when p < 0
            for (std::int64_t t = t_lo; t <= w; ++t) {
                const std::int64_t j = p + t * s;
                if (j >= n_k)
                    break;
                if (j >= 0)
                    cols.push_back(j);
            }
        });
}

Support pattern_global(std::int64_t n_q, std::int64_t n_k, std::int64_t g) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_global";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "G", g, 0);
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const std::int64_t p = i + n_k - n_q;
            if (p >= 0 && p < g)
                detail::append_range(cols, 0, n_k - 1, n_k); // a global query sees every key
            else
                detail::append_range(cols, 0, g - 1, n_k); // every query sees the global keys
        });
}

Support pattern_strided(std::int64_t n_q, std::int64_t n_k, std::int64_t l) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_strided";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "L", l, 1);
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            const std::int64_t p = i + n_k - n_q;
            if (p < 0)
                return;
            const std::int64_t block_start = (p / l) * l;
            for (std::int64_t j = l - 1; j < block_start; j += l)
                cols.push_back(j); // summary column: last key of an earlier block
            detail::append_range(cols, block_start, p, n_k); // own block, causal part
        });
}

} // namespace ioattn::sparse
