#pragma once
// Omega^T of a support whose rows are intervals with ends that do not decrease (windows, bands,
// causal, variable-length causal sequences), written key row by key row instead of scattered
// (support.cpp's transpose_of): each key's queries are one interval of rows.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::sparse::detail {

/// Omega^T's n_k + 1 row offsets and, per entry, its query row, when every row of s is a
/// non-empty interval of keys [lo_i, hi_i] with lo_i and hi_i non-decreasing in i (n_q >= 1);
/// false, and nothing written, otherwise. The same CSR as the scatter of transpose_of.
bool interval_transpose(const Support& s,
                        std::vector<std::int64_t>& offsets,
                        std::vector<std::int64_t>& rows);

/// Whether s, square with rows as interval_transpose takes them, is its own transpose (a
/// symmetric window or band): each key's run of rows is its own row's interval.
bool interval_symmetric(const Support& s);

} // namespace ioattn::sparse::detail
