// ioattn::ff::adversarial_search: seeded local search for index sets that come close to
// Lemma 4.6, i.e. minimise max(r_R(I), r_C(I)) at fixed |I|
// Field: none (the objective is the rank formula, verified against NTL by exp_rank_formula).
// Exactness: integer objective, incremental: moving one entry changes one row count and one
//   column count, so r_R and r_C update in O(1).
// Ops: O(n^2 + steps).
// Tests: tests/finite_field/index_set_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/index_set.hpp>

#include <algorithm>
#include <random>
#include <string>

namespace ioattn::ff {

IndexSet adversarial_search(
    std::int64_t n, std::int64_t size, std::int64_t d, std::uint64_t seed, std::int64_t steps) {
    if (n < 1 || d < 1 || size < 0 || size > n * n || steps < 0)
        throw InvalidArgument("ioattn::ff::adversarial_search: n = " + std::to_string(n) +
                              ", size = " + std::to_string(size) + ", d = " + std::to_string(d) +
                              ", steps = " + std::to_string(steps) +
                              " (expected n, d >= 1, 0 <= size <= n^2, steps >= 0)");
    // --- start from a seeded uniform set ---
    const IndexSet start = uniform_random(n, size, seed);
    const auto un = static_cast<std::size_t>(n);
    std::vector<std::int64_t> cells;            // members as row * n + col
    std::vector<std::int64_t> pos(un * un, -1); // index in cells, -1 if absent
    std::vector<std::int64_t> rc(un, 0);
    std::vector<std::int64_t> cc(un, 0);
    for (const Entry& e : start.entries()) {
        const std::int64_t c = e.row * n + e.col;
        pos[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(cells.size());
        cells.push_back(c);
        ++rc[static_cast<std::size_t>(e.row)];
        ++cc[static_cast<std::size_t>(e.col)];
    }
    std::int64_t r_row = capped_sum(rc, d);
    std::int64_t r_col = capped_sum(cc, d);
    std::vector<std::int64_t> best = cells;
    std::int64_t best_f = std::max(r_row, r_col);
    if (size == 0 || size == n * n)
        steps = 0;

    std::mt19937_64 rng(seed ^ 0x5DEECE66DULL);
    std::uniform_int_distribution<std::int64_t> any(0, n * n - 1);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    // min(c, d) changes by delta(c, +-1): +1 when c < d (adding), -1 when c <= d (removing)
    auto gain = [d](std::int64_t c) { return c < d ? 1 : 0; };
    auto loss = [d](std::int64_t c) { return c <= d ? 1 : 0; };
    for (std::int64_t s = 0; s < steps; ++s) {
        // --- propose: drop a random member, add a cell in a row and column already in use ---
        std::uniform_int_distribution<std::int64_t> member(0, size - 1);
        const std::int64_t out_cell = cells[static_cast<std::size_t>(member(rng))];
        std::int64_t in_cell = 0;
        if (coin(rng) < 0.7) {
            const std::int64_t a = cells[static_cast<std::size_t>(member(rng))];
            const std::int64_t b = cells[static_cast<std::size_t>(member(rng))];
            in_cell = (a / n) * n + (b % n);
        } else {
            in_cell = any(rng);
        }
        if (pos[static_cast<std::size_t>(in_cell)] >= 0)
            continue;
        const auto ro = static_cast<std::size_t>(out_cell / n);
        const auto co = static_cast<std::size_t>(out_cell % n);
        const auto ri = static_cast<std::size_t>(in_cell / n);
        const auto ci = static_cast<std::size_t>(in_cell % n);
        // --- apply and evaluate incrementally ---
        const std::int64_t old_f = std::max(r_row, r_col);
        const std::int64_t old_row = r_row;
        const std::int64_t old_col = r_col;
        r_row -= loss(rc[ro]);
        --rc[ro];
        r_col -= loss(cc[co]);
        --cc[co];
        r_row += gain(rc[ri]);
        ++rc[ri];
        r_col += gain(cc[ci]);
        ++cc[ci];
        const std::int64_t f = std::max(r_row, r_col);
        if (f <= old_f || coin(rng) < 0.002) {
            const std::int64_t k = pos[static_cast<std::size_t>(out_cell)];
            cells[static_cast<std::size_t>(k)] = in_cell;
            pos[static_cast<std::size_t>(in_cell)] = k;
            pos[static_cast<std::size_t>(out_cell)] = -1;
            if (f < best_f) {
                best_f = f;
                best = cells;
            }
        } else { // undo
            --rc[ri];
            --cc[ci];
            ++rc[ro];
            ++cc[co];
            r_row = old_row;
            r_col = old_col;
        }
    }
    std::vector<Entry> e;
    e.reserve(best.size());
    for (std::int64_t c : best)
        e.push_back({c / n, c % n});
    return {n, n, std::move(e)};
}

} // namespace ioattn::ff
