// ioattn::ff index-set families: rectangles, full rows/columns, diagonals, block-diagonal
// unions, uniform random sets, all sets of a tiny matrix, and the standard experiment list
// Field: none (sets of entries of an n x n Q K^T).
// Exactness: every family is deterministic in (n, d, seed); names encode the parameters so a
//   failing instance can be rebuilt.
// Ops: O(|I| log |I|) per set.
// Tests: tests/finite_field/index_set_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/field.hpp>
#include <ioattn/ff/index_set.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <unordered_set>

namespace ioattn::ff {

namespace {

void check_n(std::int64_t n, const char* where) {
    if (n < 1)
        throw InvalidArgument(std::string(where) + ": n = " + std::to_string(n) +
                              " (expected >= 1)");
}

std::string str(std::int64_t v) {
    return std::to_string(v);
}

} // namespace

IndexSet rectangle(
    std::int64_t n, std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols) {
    check_n(n, "ioattn::ff::rectangle");
    if (rows < 0 || cols < 0 || row0 < 0 || col0 < 0 || row0 + rows > n || col0 + cols > n)
        throw InvalidArgument("ioattn::ff::rectangle: " + str(rows) + " x " + str(cols) + " at (" +
                              str(row0) + ", " + str(col0) + ") does not fit in " + str(n) + " x " +
                              str(n));
    std::vector<Entry> e;
    e.reserve(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = row0; i < row0 + rows; ++i)
        for (std::int64_t j = col0; j < col0 + cols; ++j)
            e.push_back({i, j});
    return {n, n, std::move(e)};
}

IndexSet full_rows(std::int64_t n, std::int64_t row0, std::int64_t count) {
    return rectangle(n, row0, 0, count, n);
}

IndexSet full_cols(std::int64_t n, std::int64_t col0, std::int64_t count) {
    return rectangle(n, 0, col0, n, count);
}

IndexSet diagonals(std::int64_t n, std::int64_t k) {
    check_n(n, "ioattn::ff::diagonals");
    if (k < 0 || k > n)
        throw InvalidArgument("ioattn::ff::diagonals: k = " + str(k) +
                              " (expected 0 <= k <= n = " + str(n) + ")");
    std::vector<Entry> e;
    for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t s = 0; s < k; ++s)
            e.push_back({i, (i + s) % n});
    return {n, n, std::move(e)};
}

IndexSet block_diagonal(std::int64_t n, std::int64_t blocks, std::int64_t side) {
    check_n(n, "ioattn::ff::block_diagonal");
    if (blocks < 0 || side < 1)
        throw InvalidArgument("ioattn::ff::block_diagonal: blocks = " + str(blocks) +
                              ", side = " + str(side) + " (expected blocks >= 0, side >= 1)");
    std::vector<Entry> e;
    for (std::int64_t b = 0; b < blocks && (b + 1) * side <= n; ++b)
        for (std::int64_t i = 0; i < side; ++i)
            for (std::int64_t j = 0; j < side; ++j)
                e.push_back({b * side + i, b * side + j});
    return {n, n, std::move(e)};
}

IndexSet uniform_random(std::int64_t n, std::int64_t size, std::uint64_t seed) {
    check_n(n, "ioattn::ff::uniform_random");
    if (size < 0 || size > n * n)
        throw InvalidArgument("ioattn::ff::uniform_random: size = " + str(size) +
                              " (expected 0 <= size <= n^2 = " + str(n * n) + ")");
    // --- partial Fisher-Yates over the n^2 cells: the first `size` are the set ---
    std::vector<std::int64_t> cells(static_cast<std::size_t>(n * n));
    for (std::int64_t c = 0; c < n * n; ++c)
        cells[static_cast<std::size_t>(c)] = c;
    std::mt19937_64 rng(seed);
    std::vector<Entry> e;
    e.reserve(static_cast<std::size_t>(size));
    for (std::int64_t k = 0; k < size; ++k) {
        std::uniform_int_distribution<std::int64_t> pick(k, n * n - 1);
        std::swap(cells[static_cast<std::size_t>(k)], cells[static_cast<std::size_t>(pick(rng))]);
        const std::int64_t c = cells[static_cast<std::size_t>(k)];
        e.push_back({c / n, c % n});
    }
    return {n, n, std::move(e)};
}

IndexSet from_mask(std::int64_t n, std::uint64_t mask) {
    check_n(n, "ioattn::ff::from_mask");
    if (n * n > 62)
        throw InvalidArgument("ioattn::ff::from_mask: n = " + str(n) + " (expected n^2 <= 62)");
    std::vector<Entry> e;
    for (std::int64_t c = 0; c < n * n; ++c)
        if ((mask >> static_cast<unsigned>(c)) & 1U)
            e.push_back({c / n, c % n});
    return {n, n, std::move(e)};
}

std::vector<NamedSet> standard_families(std::int64_t n,
                                        std::int64_t d,
                                        std::uint64_t seed,
                                        std::int64_t random_sets,
                                        std::int64_t adversarial,
                                        std::int64_t adversarial_steps) {
    check_n(n, "ioattn::ff::standard_families");
    if (d < 1 || d > n)
        throw InvalidArgument("ioattn::ff::standard_families: d = " + str(d) +
                              " (expected 1 <= d <= n = " + str(n) + ")");
    std::vector<NamedSet> out;
    // --- side lengths around d: below, at and above it, and the whole matrix ---
    std::vector<std::int64_t> sides{1, 2, d / 2, d - 1, d, d + 1, 2 * d, n / 2, n};
    std::erase_if(sides, [n](std::int64_t s) { return s < 1 || s > n; });
    std::sort(sides.begin(), sides.end());
    sides.erase(std::unique(sides.begin(), sides.end()), sides.end());
    for (std::int64_t a : sides)
        for (std::int64_t b : sides)
            if (a == b || b == 1 || b == d || b == n || a == 1 || a == d || a == n)
                out.push_back(
                    {"rectangle(n=" + str(n) + ",rows=" + str(a) + ",cols=" + str(b) + ")",
                     rectangle(n, n - a, 0, a, b)});
    for (std::int64_t k : {std::int64_t{1}, d, n})
        if (k <= n) {
            out.push_back({"full_rows(n=" + str(n) + ",count=" + str(k) + ")", full_rows(n, 0, k)});
            out.push_back({"full_cols(n=" + str(n) + ",count=" + str(k) + ")", full_cols(n, 0, k)});
        }
    // --- fewer than d entries in every row and column ---
    for (std::int64_t k : {std::int64_t{1}, d / 2, d - 1})
        if (k >= 1)
            out.push_back({"diagonals(n=" + str(n) + ",k=" + str(k) + ")", diagonals(n, k)});
    for (std::int64_t side : sides)
        if (side < n)
            out.push_back({"block_diagonal(n=" + str(n) + ",side=" + str(side) + ")",
                           block_diagonal(n, n / side, side)});
    // --- seeded random sets and adversarial searches, sizes log-uniform in [1, n^2] ---
    const double log_max = std::log(static_cast<double>(n * n));
    for (std::int64_t r = 0; r < random_sets; ++r) {
        const std::uint64_t s = derive_seed(seed, 11, static_cast<std::uint64_t>(r));
        std::mt19937_64 rng(s);
        const auto size = std::clamp<std::int64_t>(
            std::llround(std::exp(std::uniform_real_distribution<double>(0.0, log_max)(rng))),
            1,
            n * n);
        out.push_back({"uniform_random(n=" + str(n) + ",size=" + str(size) +
                           ",seed=" + std::to_string(s) + ")",
                       uniform_random(n, size, s)});
    }
    for (std::int64_t r = 0; r < adversarial; ++r) {
        const std::uint64_t s = derive_seed(seed, 12, static_cast<std::uint64_t>(r));
        const double frac =
            adversarial == 1 ? 0.5 : static_cast<double>(r) / static_cast<double>(adversarial - 1);
        const auto size =
            std::clamp<std::int64_t>(std::llround(std::exp(frac * log_max)), 1, n * n);
        out.push_back({"adversarial_search(n=" + str(n) + ",size=" + str(size) + ",d=" + str(d) +
                           ",seed=" + std::to_string(s) + ",steps=" + str(adversarial_steps) + ")",
                       adversarial_search(n, size, d, s, adversarial_steps)});
    }
    return out;
}

} // namespace ioattn::ff
