// ioattn::sparse::detail::block_keys, block_columns: the keys each row block of a support sees,
// with how many rows (or lanes) see each, in parallel-safe per-worker arrays (see
// block_columns.hpp). Tests: tests/sparse/variants_test.cpp

#include "plan/block_columns.hpp"

#include <algorithm>

namespace ioattn::sparse::detail {

std::vector<std::int64_t> block_keys(const Support& s,
                                     std::int64_t rows,
                                     std::int64_t b,
                                     std::int64_t* count,
                                     std::int64_t group,
                                     std::int64_t* lanes) {
    std::vector<std::int64_t> keys;
    const std::int64_t i0 = b * rows, i1 = std::min(s.n_q(), (b + 1) * rows);
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group seeing j
    std::int64_t lo = s.n_k(), hi = -1;                                // the keys' range
    for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t g = group > 0 ? (i - i0) / group : 0;
        const std::int64_t in_group = group > 0 ? std::min(group, i1 - i0 - g * group) : 0;
        for (const std::int64_t j : s.row(i)) {
            if (count[j]++ == 0) {
                keys.push_back(j);
                lo = std::min(lo, j);
                hi = std::max(hi, j);
                if (lanes != nullptr) {
                    lanes[j] = 0;
                    mark[j] = -1;
                }
            }
            if (lanes != nullptr && mark[j] != g) {
                mark[j] = g;
                lanes[j] += in_group;
            }
        }
    }
    // sorted: by a scan of the counts when the keys fill an eighth of their range (scattered
    // blocks see thousands of keys: sorting them was the largest part of random:0.02's planning)
    const auto k = static_cast<std::int64_t>(keys.size());
    if (k > 64 && hi - lo + 1 <= 8 * k) {
        std::int64_t at = 0;
        for (std::int64_t j = lo; j <= hi; ++j)
            if (count[j] > 0)
                keys[static_cast<std::size_t>(at++)] = j;
    } else {
        std::sort(keys.begin(), keys.end());
    }
    return keys;
}

std::pair<std::vector<std::int64_t>, ColumnLanes> block_columns(
    const Support& s, std::int64_t rows, std::int64_t b, std::int64_t* work, const CostModel& cm) {
    const std::int64_t r = std::min(rows, s.n_q() - b * rows);
    std::int64_t* lanes = cm.lane_group > 0 && cm.lane_group < r ? work + s.n_k() : nullptr;
    auto keys = block_keys(s, rows, b, work, cm.lane_group, lanes);
    return {std::move(keys), ColumnLanes{r, lanes}};
}

} // namespace ioattn::sparse::detail
