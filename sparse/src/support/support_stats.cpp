// ioattn::sparse::{density, row_nonzero_stats, partition_rows_by_nonzeros}: statistics of a
// support for the benchmarks and the nonzero-balanced work split of the sparse kernels.
// Stats are one pass over the row offsets, O(n_q). The partition places boundary p at the
// first row whose CSR offset reaches t_p = ceil(p Z_QK / parts) (a lower_bound on the
// monotone offsets), so part p holds fewer than t_{p+1} - t_p + (max row nonzeros) <=
// ceil(Z_QK / parts) + (max row nonzeros) pairs; O(parts log n_q), deterministic.
// Tests: tests/sparse/support_stats_test.cpp

#include "fail.hpp"

#include <ioattn/sparse/support_stats.hpp>

#include <algorithm>

namespace ioattn::sparse {

double density(const Support& support) {
    const std::int64_t cells = support.n_q() * support.n_k();
    return cells == 0 ? 0.0 : static_cast<double>(support.z_qk()) / static_cast<double>(cells);
}

RowNonzeroStats row_nonzero_stats(const Support& support) {
    RowNonzeroStats s;
    if (support.n_q() == 0)
        return s;
    s.min = support.row_nonzeros(0);
    for (std::int64_t i = 0; i < support.n_q(); ++i) {
        const std::int64_t z = support.row_nonzeros(i);
        s.min = std::min(s.min, z);
        s.max = std::max(s.max, z);
        s.empty_rows += z == 0 ? 1 : 0;
    }
    s.mean = static_cast<double>(support.z_qk()) / static_cast<double>(support.n_q());
    return s;
}

std::vector<std::int64_t> partition_rows_by_nonzeros(const Support& support, std::int64_t parts) {
    if (parts < 1)
        detail::fail(
            "ioattn::sparse::partition_rows_by_nonzeros", "parts = ", parts, " (expected >= 1)");
    const std::int64_t total = support.z_qk();
    const std::int64_t quot = total / parts;
    const std::int64_t rem = total % parts;
    const auto offsets = support.row_offsets(); // n_q + 1 non-decreasing values, last = total
    std::vector<std::int64_t> bounds(static_cast<std::size_t>(parts) + 1, 0);
    for (std::int64_t p = 1; p < parts; ++p) {
        // t_p = ceil(p * total / parts) without overflowing p * total
        const std::int64_t target = p * quot + (p * rem + parts - 1) / parts;
        const auto it = std::lower_bound(offsets.begin(), offsets.end() - 1, target);
        bounds[static_cast<std::size_t>(p)] = it - offsets.begin();
    }
    bounds[static_cast<std::size_t>(parts)] = support.n_q();
    return bounds;
}

} // namespace ioattn::sparse
