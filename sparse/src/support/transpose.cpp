// ioattn::sparse::detail::transpose_of (see support/transpose.hpp): Omega^T by parts of rows
// counted and scattered in parallel, or key row by key row for monotone interval rows.
// Tests: tests/sparse/support_test.cpp, parallel_rows_whitebox_test.cpp

#include "support/transpose.hpp"

#include "support/huge_pages.hpp"
#include "support/interval_transpose.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>

#include <algorithm>
#include <utility>

namespace ioattn::sparse::detail {

TransposeParts transpose_of(const Support& s, bool positions) {
    const std::int64_t n_q = s.n_q(), n_k = s.n_k(), z = s.z_qk();
    const auto from = s.row_offsets();
    const auto cols = s.col_indices();
    // rows cut into parts counted and scattered in parallel: part t's entries of key j go
    // after those of the parts before it, so each key's rows stay ascending; the parts'
    // counts take at most max(n_k, Z_QK / 4) words
    const std::int64_t parts = std::clamp<std::int64_t>(
        z / 4 / std::max<std::int64_t>(n_k, 1), 1, std::clamp<std::int64_t>(n_q, 1, 16));
    // offsets and the parts' cursors per key, rows or positions per entry
    require_memory(
        positions ? "ioattn::sparse::Support::transposed_positions"
                  : "ioattn::sparse::Support::transposed",
        add_bytes(bytes_of(n_k, (1 + static_cast<std::size_t>(parts)) * sizeof(std::int64_t)),
                  add_bytes(2 * sizeof(std::int64_t), bytes_of(z, sizeof(std::int64_t)))),
        "transpose");
    // a band's key rows are runs of queries: written in order, not scattered (with
    // index_words' populated pages, window:256's backward plan takes 0.10-0.14 s against the
    // scatter's 0.23-0.27 s, N = 16384, 2 threads, a first forward and backward after a fresh
    // Mask, alternated twice on a loaded machine)
    if (TransposeParts t; !positions && interval_transpose(s, t.offsets, t.entries))
        return t;
    const std::int64_t step = (n_q + parts - 1) / parts;
    std::vector<std::int64_t> at(static_cast<std::size_t>(parts * n_k), 0); // part x key
    const auto part_rows = [&](std::int64_t t) {
        return std::pair{std::min(n_q, t * step), std::min(n_q, (t + 1) * step)};
    };
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        std::int64_t* count = at.data() + t * n_k;
        const auto [i0, i1] = part_rows(t);
        for (std::int64_t e = from[static_cast<std::size_t>(i0)];
             e < from[static_cast<std::size_t>(i1)];
             ++e)
            ++count[cols[static_cast<std::size_t>(e)]];
    });
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_k) + 1, 0);
    for (std::int64_t j = 0; j < n_k; ++j) { // part t's first slot of key j
        std::int64_t next = offsets[static_cast<std::size_t>(j)];
        for (std::int64_t t = 0; t < parts; ++t) {
            const std::int64_t c = at[static_cast<std::size_t>(t * n_k + j)];
            at[static_cast<std::size_t>(t * n_k + j)] = next;
            next += c;
        }
        offsets[static_cast<std::size_t>(j) + 1] = next;
    }
    std::vector<std::int64_t> entries = index_words(z);
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        std::int64_t* next = at.data() + t * n_k;
        const auto [i0, i1] = part_rows(t);
        for (std::int64_t i = i0; i < i1; ++i) // rows ascending
            for (std::int64_t e = from[static_cast<std::size_t>(i)];
                 e < from[static_cast<std::size_t>(i) + 1];
                 ++e)
                entries[static_cast<std::size_t>(next[cols[static_cast<std::size_t>(e)]]++)] =
                    positions ? e : i;
    });
    return {std::move(offsets), std::move(entries)};
}

} // namespace ioattn::sparse::detail
