// ioattn::sparse::pattern_varlen: packed variable-length sequences (a batch given by its
// lengths, cu_seqlens = their prefix sums), laid end to end on both axes. Row i of the
// sequence [s, e) sees the keys [s, e), cut to j <= i (causal) and to |i - j| <= w (windowed):
// one index range per row, written in place in parallel (build_sized): O(n_q log S + Z_QK) work
// for S sequences.
// Tests: tests/sparse/pattern_varlen_test.cpp

#include "patterns/parallel_rows.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <limits>
#include <numeric>
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
    // row i lies in the sequence [start, end) whose end is the first prefix sum above i
    std::vector<std::int64_t> ends(lengths.size());
    std::partial_sum(lengths.begin(), lengths.end(), ends.begin());
    const auto row_range = [&](std::int64_t i) {
        const auto at = std::upper_bound(ends.begin(), ends.end(), i); // skips empty sequences
        const std::int64_t end = *at,
                           start = end - lengths[static_cast<std::size_t>(at - ends.begin())];
        return std::pair{std::max(start, i - w), causal ? i : std::min(end - 1, i + w)};
    };
    return detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t i) {
            const auto [lo, hi] = row_range(i);
            return detail::range_size(lo, hi, n_k);
        },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            const auto [lo, hi] = row_range(i);
            detail::write_range(out, lo, hi);
        }));
}

} // namespace ioattn::sparse
