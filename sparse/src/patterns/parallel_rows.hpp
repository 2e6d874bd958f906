#pragma once
// Parallel CSR assembly for the pattern builders whose rows do not depend on each other.
//   build_sized:  the row sizes first (a closed form per row), their prefix sums, then every
//                 row written in place: O(n_q + Z_QK) work, no copy, the support's bytes
//                 checked against memory_limit() before anything is written.
//   build_chunks: rows whose size is known only once drawn (random, powerlaw): chunks of rows
//                 built into chunk-local arrays in parallel, then copied into place.
// Both give the arrays the serial build_rows gives, for every thread count (rows are written
// where their offsets say, and chunks are cut by row count alone).
// Tests: tests/sparse/parallel_rows_test.cpp

#include "patterns/pattern_util.hpp"
#include "support/huge_pages.hpp"

#include <ioattn/parallel.hpp>

#include <atomic>

namespace ioattn::sparse::detail {

/// A row writer without scratch: what make_fill returns for fill(i, out).
template <typename Fill>
auto stateless(const Fill& fill) {
    return [&fill] { return fill; };
}

/// Writes lo, lo + 1, ..., hi at out (nothing when hi < lo); returns the end.
inline std::int64_t* write_range(std::int64_t* out, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t j = lo; j <= hi; ++j)
        *out++ = j;
    return out;
}

/// How many of [lo, hi] lie in [0, n).
inline std::int64_t range_size(std::int64_t lo, std::int64_t hi, std::int64_t n) {
    return std::max<std::int64_t>(0, std::min(hi, n - 1) - std::max<std::int64_t>(lo, 0) + 1);
}

/// Rows per task of the parallel builders: at least 256, and about 512 tasks over n_q.
inline std::int64_t rows_per_task(std::int64_t n_q) {
    return std::max<std::int64_t>(256, (n_q + 511) / 512);
}

/// Assembles a Support from size(i), the number of row i's keys, and the row writers make_fill()
/// gives (one per task, its scratch with it): fill(i, out) writes exactly size(i) sorted unique
/// keys at out. Throws ResourceError naming `where` when the support does not fit
/// memory_limit(), before allocating its columns.
template <typename Size, typename MakeFill>
Support build_sized(std::string_view where,
                    std::int64_t n_q,
                    std::int64_t n_k,
                    const Size& size,
                    const MakeFill& make_fill) {
    constexpr std::string_view kWhat = "support (CSR column indices and row offsets)";
    const std::uint64_t offset_bytes =
        add_bytes(bytes_of(n_q, sizeof(std::int64_t)), sizeof(std::int64_t));
    require_memory(where, offset_bytes, kWhat);
    try {
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_q) + 1, 0);
        const std::int64_t step = rows_per_task(n_q), tasks = (n_q + step - 1) / step;
        parallel_for_tiles(tasks, [&](std::int64_t t, int) {
            for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i)
                offsets[static_cast<std::size_t>(i) + 1] = size(i);
        });
        for (std::size_t i = 1; i < offsets.size(); ++i)
            offsets[i] += offsets[i - 1];
        require_memory(
            where, add_bytes(offset_bytes, bytes_of(offsets.back(), sizeof(std::int64_t))), kWhat);
        std::vector<std::int64_t> cols = index_words(offsets.back());
        parallel_for_tiles(tasks, [&](std::int64_t t, int) {
            auto fill = make_fill();
            for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i)
                fill(i, cols.data() + offsets[static_cast<std::size_t>(i)]);
        });
        return Support(BuiltRows{}, n_q, n_k, std::move(offsets), std::move(cols));
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, offset_bytes, kWhat);
    }
}

/// The row offsets of chunks of `step` rows from each row's end within its chunk (offsets[i + 1]
/// of row i, counted from its chunk's first row), in chunk order.
inline void chunk_ends_to_offsets(std::vector<std::int64_t>& offsets, std::int64_t step) {
    const auto n_q = static_cast<std::int64_t>(offsets.size()) - 1;
    for (std::int64_t t0 = 0; t0 < n_q; t0 += step) {
        const std::int64_t base = offsets[static_cast<std::size_t>(t0)];
        for (std::int64_t i = t0; i < std::min(n_q, t0 + step); ++i)
            offsets[static_cast<std::size_t>(i) + 1] += base;
    }
}

/// Assembles a Support from rows drawn chunk by chunk: make_row() gives a row function of its
/// own (its scratch with it) for each chunk of rows_per_task rows; row(i, cols) appends row i's
/// sorted unique keys. Throws ResourceError naming `where` once the rows built so far outgrow
/// memory_limit().
template <typename MakeRow>
Support
build_chunks(std::string_view where, std::int64_t n_q, std::int64_t n_k, const MakeRow& make_row) {
    constexpr std::string_view kWhat = "support (CSR column indices and row offsets)";
    const std::uint64_t limit = memory_limit().bytes;
    const std::uint64_t offset_bytes =
        add_bytes(bytes_of(n_q, sizeof(std::int64_t)), sizeof(std::int64_t));
    require_memory(where, offset_bytes, kWhat);
    try {
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_q) + 1, 0);
        const std::int64_t step = rows_per_task(n_q), tasks = (n_q + step - 1) / step;
        std::vector<std::vector<std::int64_t>> chunk(static_cast<std::size_t>(tasks));
        std::atomic<std::uint64_t> built{0}; // column bytes of every chunk so far
        parallel_for_tiles(tasks, [&](std::int64_t t, int) {
            auto row = make_row();
            auto& cols = chunk[static_cast<std::size_t>(t)];
            for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
                const std::size_t before = cols.size();
                row(i, cols);
                offsets[static_cast<std::size_t>(i) + 1] = static_cast<std::int64_t>(cols.size());
                const std::uint64_t add = (cols.size() - before) * sizeof(std::int64_t);
                const std::uint64_t bytes = add_bytes(offset_bytes, built += add);
                if (bytes > limit) // at least this much: other rows are not built yet
                    require_memory(where, bytes, std::string(kWhat) + " (rows built so far)");
            }
        });
        chunk_ends_to_offsets(offsets, step);
        std::vector<std::int64_t> cols = index_words(offsets.back());
        parallel_for_tiles(tasks, [&](std::int64_t t, int) {
            auto& c = chunk[static_cast<std::size_t>(t)];
            std::copy(
                c.begin(), c.end(), cols.begin() + offsets[static_cast<std::size_t>(t * step)]);
            std::vector<std::int64_t>().swap(c);
        });
        return Support(BuiltRows{}, n_q, n_k, std::move(offsets), std::move(cols));
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, offset_bytes, kWhat);
    }
}

/// build_chunks for rows of about `per_row` keys each (random's): each chunk's rows are drawn
/// into its worker's array and copied to the chunk's slot, room for 1.05 per_row keys a row,
/// of one array from the index pool, whose slots are then closed up in order. A mask drawn
/// every step then writes no fresh pages: its 64 chunk arrays, freed by each build, were
/// faulted in again by the next (a third of random:0.02's build at N = 16384). A chunk that
/// outgrows its slot keeps its own array, and the chunks are then copied as build_chunks does.
template <typename MakeRow>
Support build_chunks_expected(std::string_view where,
                              std::int64_t n_q,
                              std::int64_t n_k,
                              const MakeRow& make_row,
                              double per_row) {
    constexpr std::string_view kWhat = "support (CSR column indices and row offsets)";
    const std::int64_t step = rows_per_task(n_q), tasks = (n_q + step - 1) / step;
    const double room = 1.05 * per_row * static_cast<double>(step) + 64.0;
    const std::uint64_t limit = memory_limit().bytes;
    const std::uint64_t offset_bytes =
        add_bytes(bytes_of(n_q, sizeof(std::int64_t)), sizeof(std::int64_t));
    if (!(room * static_cast<double>(tasks) * sizeof(std::int64_t) <
          static_cast<double>(limit - std::min(limit, offset_bytes))))
        return build_chunks(where, n_q, n_k, make_row); // the slots alone would not fit
    require_memory(where, offset_bytes, kWhat);
    const auto slot = static_cast<std::int64_t>(room);
    try {
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_q) + 1, 0);
        std::vector<std::int64_t> cols = index_words(slot * tasks);
        std::vector<std::vector<std::int64_t>> drawn(static_cast<std::size_t>(max_concurrency()));
        std::vector<std::vector<std::int64_t>> outgrown(static_cast<std::size_t>(tasks));
        std::atomic<std::uint64_t> built{0}; // column bytes of every chunk so far
        parallel_for_tiles(tasks, [&](std::int64_t t, int w) {
            auto row = make_row();
            auto& c = drawn[static_cast<std::size_t>(w)];
            c.clear();
            for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
                row(i, c);
                offsets[static_cast<std::size_t>(i) + 1] = static_cast<std::int64_t>(c.size());
            }
            const std::uint64_t bytes =
                add_bytes(offset_bytes, built += bytes_of(std::ssize(c), sizeof(std::int64_t)));
            if (bytes > limit) // at least this much: other chunks may not be built yet
                require_memory(where, bytes, std::string(kWhat) + " (rows built so far)");
            if (std::ssize(c) <= slot)
                std::copy(c.begin(), c.end(), cols.begin() + t * slot);
            else
                outgrown[static_cast<std::size_t>(t)] = c;
        });
        chunk_ends_to_offsets(offsets, step);
        const auto size_of = [&](std::int64_t t) {
            return offsets[static_cast<std::size_t>(std::min(n_q, (t + 1) * step))] -
                   offsets[static_cast<std::size_t>(t * step)];
        };
        if (std::any_of(
                outgrown.begin(), outgrown.end(), [](const auto& c) { return !c.empty(); })) {
            std::vector<std::int64_t> all = index_words(offsets.back());
            parallel_for_tiles(tasks, [&](std::int64_t t, int) {
                const auto& c = outgrown[static_cast<std::size_t>(t)];
                const std::int64_t* from = c.empty() ? cols.data() + t * slot : c.data();
                std::copy(from,
                          from + size_of(t),
                          all.begin() + offsets[static_cast<std::size_t>(t * step)]);
            });
            give_index_array(cols);
            cols = std::move(all);
        } else { // close up the slots: every chunk moves left, in order
            for (std::int64_t t = 1; t < tasks; ++t)
                std::copy(cols.begin() + t * slot,
                          cols.begin() + t * slot + size_of(t),
                          cols.begin() + offsets[static_cast<std::size_t>(t * step)]);
            cols.resize(static_cast<std::size_t>(offsets.back()));
        }
        return Support(BuiltRows{}, n_q, n_k, std::move(offsets), std::move(cols));
    } catch (const std::bad_alloc&) {
        throw_allocation_failed(where, offset_bytes, kWhat);
    }
}

} // namespace ioattn::sparse::detail
