#pragma once
// Private: the strict line-by-line check of a Matrix Market coordinate file that runs before
// CHOLMOD reads it (CHOLMOD reports no line numbers and trusts its input).

#include <cstdint>
#include <string_view>

namespace ioattn::sparse::detail {

/// What the scan learned from a well-formed file.
struct MatrixMarketInfo {
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t entries = 0; ///< declared (and present) entry lines
    bool pattern = false;     ///< field "pattern"
    bool integer = false;     ///< field "integer" (neither: "real")
    bool symmetric = false;   ///< symmetry "symmetric" (else general)
};

/// Checks the file at `path`; throws InvalidArgument("<where>: <path>:<line>: <reason>")
/// on the first problem (see read_matrix_market). Cost: one pass, O(1) memory.
MatrixMarketInfo scan_matrix_market(std::string_view where, std::string_view path);

} // namespace ioattn::sparse::detail
