// ioattn::sparse::pattern_varlen: packed variable-length sequences (a batch given by its
// lengths, cu_seqlens = their prefix sums), laid end to end on both axes. Row i of the
// sequence [s, e) sees the keys [s, e), cut to j <= i (causal) and to |i - j| <= w (windowed):
// one index range per row, so O(n_q + Z_QK) time, serial, as the other deterministic builders.
// Tests: tests/sparse/pattern_varlen_test.cpp

#include "patterns/pattern_util.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace ioattn::sparse {

Support pattern_varlen(std::int64_t n_q,
                       std::int64_t n_k,
                       std::span<const std::int64_t> lengths,
                       bool causal,
                       std::int64_t window) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_varlen";
    detail::check_shape(kWhere, n_q, n_k);
    if (n_q != n_k)
        detail::fail(kWhere, "n_q = ", n_q, ", n_k = ", n_k, " (expected n_q = n_k)");
    if (lengths.empty())
        detail::fail(kWhere, "no sequence lengths (expected at least one)");
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    std::int64_t total = 0; // saturated at kMax
    for (std::size_t s = 0; s < lengths.size(); ++s) {
        if (lengths[s] < 0)
            detail::fail(kWhere, "length ", s, " = ", lengths[s], " (expected >= 0)");
        total = lengths[s] > kMax - total ? kMax : total + lengths[s];
    }
    if (total != n_q)
        detail::fail(kWhere,
                     "the ",
                     lengths.size(),
                     " sequence lengths sum to ",
                     total == kMax ? "more than 2^63" : std::to_string(total),
                     " (expected n_q = n_k = ",
                     n_q,
                     ")");
    const std::int64_t w = window < 0 ? n_q : std::min(window, n_q);
    // the first position of row i's sequence, walked forward as the rows go
    std::size_t seq = 0;
    std::int64_t start = 0;
    return detail::build_rows(
        kWhere, n_q, n_k, [&](std::int64_t i, std::vector<std::int64_t>& cols) {
            while (i >= start + lengths[seq]) // skips empty sequences too
                start += lengths[seq++];
            const std::int64_t end = start + lengths[seq]; // row i is in [start, end)
            const std::int64_t lo = std::max(start, i - w);
            const std::int64_t hi = causal ? i : std::min(end - 1, i + w);
            detail::append_range(cols, lo, hi, n_k);
        });
}

} // namespace ioattn::sparse
