#pragma once
/// Matrix Market coordinate files as supports: rows are queries, columns are keys.

#include <ioattn/sparse/support.hpp>

#include <string_view>

namespace ioattn::sparse {

/// Reads a Matrix Market coordinate file (https://math.nist.gov/MatrixMarket/formats.html)
/// as a Support of the file's shape. Accepted header:
///   %%MatrixMarket matrix coordinate {pattern|real|integer} {general|symmetric}
/// (keywords case-insensitive), then `%` comment lines and blank lines, the size line
/// `rows cols entries`, and exactly `entries` lines `i j` (pattern) or `i j value`, 1-based.
/// Every stored entry is an allowed pair whatever its value (explicit zeros included);
/// repeated entries count once. A symmetric file must be square, store only the lower
/// triangle (i >= j) and is mirrored. Lines may not exceed 1024 characters.
///
/// The file is first checked line by line, then read through SuiteSparse (CHOLMOD's
/// cholmod_l_read_triplet), so CHOLMOD only ever sees well-formed input. Cost: two passes
/// over the file, O(entries log entries) time and O(entries) memory.
///
/// Throws InvalidArgument naming the path and the line (or the token) for: a file that
/// cannot be opened; a missing or wrong header; the array format; a complex, pattern-less or
/// unknown field; a hermitian, skew-symmetric or unknown symmetry; a bad size line; an entry
/// with the wrong number of fields, a non-numeric field, or an index out of [1, rows] x
/// [1, cols]; an upper-triangle entry of a symmetric file; fewer or more entries than
/// declared (a truncated file); an over-long line.
Support read_matrix_market(std::string_view path);

/// Writes `support` as `%%MatrixMarket matrix coordinate pattern general`, rows in order.
/// Throws InvalidArgument if the file cannot be written.
void write_matrix_market(std::string_view path, const Support& support);

} // namespace ioattn::sparse
