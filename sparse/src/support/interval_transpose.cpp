// ioattn::sparse::detail::interval_transpose: Omega^T of a support of monotone interval rows
// (see interval_transpose.hpp). Key j is seen by the rows i with lo_i <= j <= hi_i; with both
// ends non-decreasing those are the rows [a_j, b_j), a_j the first row with hi_i >= j and b_j
// the first with lo_i > j, so each key row of the transpose is one run a_j, a_j + 1, ...,
// b_j - 1, written in order by parallel parts of the keys. The scatter it replaces streams one
// column per key of a row (window:256: 513 streams that miss the caches).
// O(n_q + n_k + Z_QK), the writes sequential. interval_symmetric compares those runs with the
// rows themselves, O(n_q + n_k). Tests: tests/sparse/interval_transpose_test.cpp

#include "support/interval_transpose.hpp"

#include "support/huge_pages.hpp"

#include <ioattn/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <numeric>

namespace ioattn::sparse::detail {

namespace {

/// Whether every row is a non-empty interval and the rows' ends do not decrease: by parts of
/// rows in parallel, each part also checking its first row against the row before it.
bool monotone_intervals(const Support& s) {
    const std::int64_t n_q = s.n_q();
    const std::int64_t step = std::max<std::int64_t>(1024, (n_q + 63) / 64);
    std::atomic<bool> ok{true};
    parallel_for_tiles((n_q + step - 1) / step, [&](std::int64_t t, int) {
        for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
            if (!ok.load(std::memory_order_relaxed))
                return;
            const auto row = s.row(i);
            bool good = !row.empty() &&
                        row.back() - row.front() + 1 == static_cast<std::int64_t>(row.size());
            if (good && i > 0) {
                const auto prev = s.row(i - 1);
                good = !prev.empty() && prev.front() <= row.front() && prev.back() <= row.back();
            }
            if (!good)
                ok.store(false, std::memory_order_relaxed);
        }
    });
    return ok.load();
}

/// f(j, a_j, b_j) for keys j = 0, 1, .. while f returns true: key j's rows are [a_j, b_j), a_j
/// the first row with hi_i >= j and b_j the first with lo_i > j (monotone interval rows), by one
/// sweep of the rows' ends.
template <typename F>
void for_key_runs(const Support& s, F&& f) {
    const std::int64_t n_q = s.n_q();
    std::int64_t a = 0, b = 0;
    for (std::int64_t j = 0; j < s.n_k(); ++j) {
        while (a < n_q && s.row(a).back() < j)
            ++a;
        while (b < n_q && s.row(b).front() <= j)
            ++b;
        if (!f(j, a, b))
            return;
    }
}

} // namespace

bool interval_symmetric(const Support& s) {
    const std::int64_t n = s.n_q();
    if (n < 1 || s.n_k() != n || !monotone_intervals(s))
        return false;
    bool same = true;
    for_key_runs(s, [&](std::int64_t j, std::int64_t a, std::int64_t b) {
        const auto row = s.row(j);
        same = a == row.front() && b == row.back() + 1;
        return same;
    });
    return same;
}

bool interval_transpose(const Support& s,
                        std::vector<std::int64_t>& offsets,
                        std::vector<std::int64_t>& rows) {
    const std::int64_t n_q = s.n_q(), n_k = s.n_k();
    if (n_q < 1 || !monotone_intervals(s))
        return false;
    // --- a_j, b_j by one sweep of the rows' ends, the offsets their prefix sums ---
    std::vector<std::int64_t> first(static_cast<std::size_t>(n_k));
    offsets.assign(static_cast<std::size_t>(n_k) + 1, 0);
    for_key_runs(s, [&](std::int64_t j, std::int64_t a, std::int64_t b) {
        first[static_cast<std::size_t>(j)] = a;
        offsets[static_cast<std::size_t>(j) + 1] =
            offsets[static_cast<std::size_t>(j)] + std::max<std::int64_t>(0, b - a);
        return true;
    });
    // --- each key's run of rows, by parts of keys ---
    rows = index_words(offsets.back());
    const std::int64_t step = std::max<std::int64_t>(64, (n_k + 63) / 64);
    parallel_for_tiles((n_k + step - 1) / step, [&](std::int64_t t, int) {
        for (std::int64_t j = t * step; j < std::min(n_k, (t + 1) * step); ++j) {
            const auto e0 = static_cast<std::size_t>(offsets[static_cast<std::size_t>(j)]);
            const auto e1 = static_cast<std::size_t>(offsets[static_cast<std::size_t>(j) + 1]);
            std::iota(rows.begin() + static_cast<std::ptrdiff_t>(e0),
                      rows.begin() + static_cast<std::ptrdiff_t>(e1),
                      first[static_cast<std::size_t>(j)]);
        }
    });
    return true;
}

} // namespace ioattn::sparse::detail
