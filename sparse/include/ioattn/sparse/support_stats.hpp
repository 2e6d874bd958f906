#pragma once
/// Statistics of a support for benchmarks and work partitioning.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::sparse {

/// Per-row nonzero distribution of a support.
struct RowNonzeroStats {
    std::int64_t min = 0;        ///< fewest allowed keys in a row (0 if n_q = 0)
    std::int64_t max = 0;        ///< most allowed keys in a row
    double mean = 0.0;           ///< Z_QK / n_q (0 if n_q = 0)
    std::int64_t empty_rows = 0; ///< rows with no allowed key
};

/// Z_QK / (n_q n_k); 0 for an empty shape.
double density(const Support& support);

/// min, max, mean and empty rows of the per-row counts. O(n_q).
RowNonzeroStats row_nonzero_stats(const Support& support);

/// Splits the rows into `parts` contiguous ranges of about Z_QK / parts allowed pairs each:
/// returns parts + 1 non-decreasing boundaries b with b[0] = 0, b[parts] = n_q; part p holds
/// rows [b[p], b[p+1]) (possibly none). Boundary p is the first row whose offset reaches
/// ceil(p Z_QK / parts), so every part holds at most ceil(Z_QK / parts) + (max row nonzeros)
/// pairs. Deterministic, O(parts log n_q). Throws InvalidArgument if parts < 1.
std::vector<std::int64_t> partition_rows_by_nonzeros(const Support& support, std::int64_t parts);

} // namespace ioattn::sparse
