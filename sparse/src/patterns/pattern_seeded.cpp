// ioattn::sparse::pattern_{bigbird_block,powerlaw}: seeded patterns built as their sources do.
//   bigbird_block: BigBird's block-sparse attention (Zaheer et al. 2020, and the Hugging Face
//            implementation: block_size 64, 3 sliding, 2 global, 3 random blocks): per block row
//            (drawn in parallel, the rows then written in place in parallel)
//            of b queries, w sliding key blocks around its own, g global blocks (the first
//            ceil(g/2) and the last floor(g/2), which also see every key), and r random key
//            blocks drawn by Floyd's sampling from the blocks the row does not see yet; one
//            RowRng stream per block row. O(n_q + Z_QK + n_blocks r log r).
//   powerlaw: Chung-Lu graph (Chung & Lu 2002) with a power-law expected degree sequence of
//            exponent gamma = 2.5: node of rank t has weight (t + 1)^(-1/(gamma - 1)); pair (i, j)
//            kept with probability min(1, c w_i u_j), c set by bisection so that the expected
//            number of pairs is avg_degree * n_q (computed exactly from prefix sums). Ranks are
//            a seeded permutation of the indices (hubs anywhere); each row is sampled with the
//            Miller-Hagberg skip over its keys in rank order (probabilities non-increasing),
//            O(1 + its pairs) expected, then sorted. O(n_q log n_k + Z_QK log). The floors of
//            the skips and of the bisection's powers: fast_floors.hpp (the formulas' own).
// Tests: tests/sparse/pattern_seeded_test.cpp

#include "patterns/fast_floors.hpp"
#include "patterns/parallel_rows.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace ioattn::sparse {

namespace {

constexpr std::uint64_t kSaltBlocks = 0x62626c6f636bULL; // "bblock"
constexpr std::uint64_t kSaltRanks = 0x72616e6b73ULL;    // "ranks"
constexpr std::uint64_t kSaltPowerlaw = 0x706f776572ULL; // "power"
constexpr double kWeightExponent = 1.0 / (2.5 - 1.0);    // gamma = 2.5

using detail::floor_div;

/// The blocks of [0, n_blocks) not in `taken` (sorted), r of them drawn uniformly without
/// replacement (all of them when fewer remain), appended to `out` unsorted.
void draw_blocks(detail::RowRng& rng,
                 std::int64_t n_blocks,
                 const std::vector<std::int64_t>& taken,
                 std::int64_t r,
                 std::vector<std::int64_t>& out) {
    const std::int64_t avail = n_blocks - static_cast<std::int64_t>(taken.size());
    std::vector<std::int64_t> ranks;
    if (r >= avail) {
        ranks.resize(static_cast<std::size_t>(avail));
        std::iota(ranks.begin(), ranks.end(), std::int64_t{0});
    } else {
        detail::floyd_sample(rng, avail, r, ranks);
    }
    std::size_t below = 0; // rank t of the complement -> block
    for (const std::int64_t t : ranks) {
        while (below < taken.size() && taken[below] <= t + static_cast<std::int64_t>(below))
            ++below;
        out.push_back(t + static_cast<std::int64_t>(below));
    }
}

/// A seeded permutation of [0, n) (Fisher-Yates on one RowRng stream).
std::vector<std::int64_t> ranks_of(std::int64_t n, std::uint64_t seed) {
    std::vector<std::int64_t> r(static_cast<std::size_t>(n));
    std::iota(r.begin(), r.end(), std::int64_t{0});
    detail::RowRng rng(seed, kSaltRanks, n);
    for (std::int64_t i = n - 1; i > 0; --i)
        std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(rng.below(i + 1))]);
    return r;
}

/// Expected pairs of Chung-Lu with factor c: sum_i sum_t min(1, c w_i u_t), u sorted
/// descending with prefix sums `prefix` (prefix[t] = u_0 + ... + u_{t-1}).
double expected_pairs(double c, const std::vector<double>& w, const std::vector<double>& prefix) {
    const auto n_k = static_cast<std::int64_t>(prefix.size()) - 1;
    double total = 0;
    for (const double wi : w) {
        const double a = c * wi; // keys with a u_t >= 1, i.e. (t + 1) <= a^(1/exponent)
        static_assert(1.0 / kWeightExponent == 1.5); // cut = a^1.5: fast_floors.hpp
        const std::int64_t full = std::clamp<std::int64_t>(detail::floor_of_power(a), 0, n_k);
        total += static_cast<double>(full) + a * (prefix[static_cast<std::size_t>(n_k)] -
                                                  prefix[static_cast<std::size_t>(full)]);
    }
    return total;
}

} // namespace

Support pattern_bigbird_block(std::int64_t n_q,
                              std::int64_t n_k,
                              std::int64_t b,
                              std::int64_t w,
                              std::int64_t g,
                              std::int64_t r,
                              std::uint64_t seed) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_bigbird_block";
    detail::check_shape(kWhere, n_q, n_k);
    if (b < 1)
        detail::fail(kWhere, "B = ", b, " (expected >= 1)");
    for (const auto& [name, v] : {std::pair{"W", w}, std::pair{"G", g}, std::pair{"R", r}})
        if (v < 0)
            detail::fail(kWhere, name, " = ", v, " (expected >= 0)");
    const std::int64_t nb = (n_k + b - 1) / b;
    w = std::min(w, 2 * nb + 1);
    const std::int64_t g_first = std::min((g + 1) / 2, nb), g_last = std::min(g / 2, nb - g_first);
    const auto global = [&](std::int64_t blk) {
        return (blk >= 0 && blk < g_first) || (blk >= nb - g_last && blk < nb);
    };
    // --- the key blocks of each block row qb (window, global, then r random), in parallel ---
    const std::int64_t qb_first = n_q > 0 ? floor_div(n_k - n_q, b) : 0;
    const std::int64_t qb_count = n_q > 0 ? floor_div(n_k - 1, b) - qb_first + 1 : 0;
    std::vector<std::vector<std::int64_t>> row_blocks(static_cast<std::size_t>(qb_count));
    std::vector<std::int64_t> row_keys(row_blocks.size(), 0);
    parallel_for_tiles(qb_count, [&](std::int64_t at, int) {
        const std::int64_t qb = qb_first + at;
        auto& blocks = row_blocks[static_cast<std::size_t>(at)];
        if (global(qb)) {
            for (std::int64_t c = 0; c < nb; ++c)
                blocks.push_back(c);
        } else {
            for (std::int64_t c = qb - (w - 1) / 2; c <= qb + w / 2; ++c)
                if (c >= 0 && c < nb)
                    blocks.push_back(c);
            for (std::int64_t c = 0; c < nb; ++c)
                if (global(c))
                    blocks.push_back(c);
            std::sort(blocks.begin(), blocks.end());
            blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
            detail::RowRng rng(seed, kSaltBlocks, qb);
            const std::vector<std::int64_t> taken = blocks;
            draw_blocks(rng, nb, taken, r, blocks);
            std::sort(blocks.begin(), blocks.end());
        }
        for (const std::int64_t c : blocks)
            row_keys[static_cast<std::size_t>(at)] += std::min(b, n_k - c * b);
    });
    const auto at = [&](std::int64_t i) {
        return static_cast<std::size_t>(floor_div(i + n_k - n_q, b) - qb_first);
    };
    Support s = detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t i) { return row_keys[at(i)]; },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            for (const std::int64_t c : row_blocks[at(i)])
                out = detail::write_range(out, c * b, std::min(c * b + b, n_k) - 1);
        }));
    // a block row's rows see the same keys, a key block's keys the same rows
    s.keep_runs(detail::BuiltRows{}, RowRuns{b, n_k - n_q}, RowRuns{b, 0});
    return s;
}

Support
pattern_powerlaw(std::int64_t n_q, std::int64_t n_k, double avg_degree, std::uint64_t seed) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_powerlaw";
    detail::check_shape(kWhere, n_q, n_k);
    if (!(avg_degree > 0.0) || !std::isfinite(avg_degree))
        detail::fail(kWhere, "AVG_DEGREE = ", avg_degree, " (expected a number > 0)");
    if (n_q == 0 || n_k == 0)
        return Support::none(n_q, n_k);
    if (avg_degree >= static_cast<double>(n_k))
        return pattern_dense(n_q, n_k);
    // --- weights by rank, and the factor c that gives avg_degree * n_q expected pairs ---
    const auto weight = [](std::int64_t t) {
        return std::pow(static_cast<double>(t + 1), -kWeightExponent);
    };
    std::vector<double> u(static_cast<std::size_t>(n_k)), prefix(u.size() + 1, 0.0);
    for (std::int64_t t = 0; t < n_k; ++t) {
        u[static_cast<std::size_t>(t)] = weight(t);
        prefix[static_cast<std::size_t>(t) + 1] =
            prefix[static_cast<std::size_t>(t)] + u[static_cast<std::size_t>(t)];
    }
    const std::vector<std::int64_t> row_rank = ranks_of(n_q, seed);
    const std::vector<std::int64_t> key_rank = ranks_of(n_k, seed);
    std::vector<std::int64_t> key_at(static_cast<std::size_t>(n_k)); // rank -> key
    for (std::int64_t j = 0; j < n_k; ++j)
        key_at[static_cast<std::size_t>(key_rank[static_cast<std::size_t>(j)])] = j;
    std::vector<double> w(static_cast<std::size_t>(n_q));
    for (std::int64_t i = 0; i < n_q; ++i)
        w[static_cast<std::size_t>(i)] = weight(row_rank[static_cast<std::size_t>(i)]);
    const double target = avg_degree * static_cast<double>(n_q);
    double lo = 0.0, hi = 1.0;
    while (expected_pairs(hi, w, prefix) < target)
        hi *= 2.0;
    // at most 100 halvings, ended where they stop moving (adjacent doubles, after about 55):
    // every later one would leave lo and hi as they are, so c is the same; each takes n_q
    // powers, serially (the 45 saved were a fifth of powerlaw:32's build at N = 16384)
    for (int it = 0; it < 100; ++it) {
        const double mid = 0.5 * (lo + hi);
        const double was_lo = lo, was_hi = hi;
        (expected_pairs(mid, w, prefix) < target ? lo : hi) = mid;
        if (lo == was_lo && hi == was_hi)
            break;
    }
    const double c = 0.5 * (lo + hi);
    // --- each row: keys in rank order, kept with min(1, c w_i u_t) (Miller-Hagberg skip) ---
    const auto row = [&](std::int64_t i, std::vector<std::int64_t>& cols) {
        const double a = c * w[static_cast<std::size_t>(i)];
        detail::RowRng rng(seed, kSaltPowerlaw, i);
        const std::size_t first = cols.size();
        double p = std::min(1.0, a * u[0]);
        for (std::int64_t t = 0; t < n_k;) {
            if (p <= 0.0)
                break;
            if (p < 1.0) {
                const double log_keep = std::log1p(-p);
                const double skip = detail::geometric_skip(rng.uniform(), log_keep, 1.0 / log_keep);
                if (skip >= static_cast<double>(n_k - t))
                    break;
                t += static_cast<std::int64_t>(skip);
            }
            const double q = std::min(1.0, a * u[static_cast<std::size_t>(t)]);
            if (rng.uniform() * p < q)
                cols.push_back(key_at[static_cast<std::size_t>(t)]);
            p = q;
            ++t;
        }
        std::sort(cols.begin() + static_cast<std::ptrdiff_t>(first), cols.end());
    };
    return detail::build_chunks(kWhere, n_q, n_k, [&] { return row; });
}

} // namespace ioattn::sparse
