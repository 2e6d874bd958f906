#pragma once
// Omega^T of a support: its row offsets and, per entry, the key's query (Support::transposed)
// or the entry's position in the support (Support::transposed_positions).

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::sparse::detail {

/// Omega^T's row offsets and, per entry of it, its row (the key's query) or, with `positions`,
/// the entry's position in s instead (Support::transposed, transposed_positions).
struct TransposeParts {
    std::vector<std::int64_t> offsets;
    std::vector<std::int64_t> entries; ///< rows, or positions in s
};

/// The transpose of s: monotone interval rows written key row by key row
/// (interval_transpose.hpp), others counted and scattered by parts of rows in parallel, each
/// key's rows ascending. Throws ResourceError before allocating when it does not fit.
TransposeParts transpose_of(const Support& s, bool positions);

} // namespace ioattn::sparse::detail
