// ioattn::ff::experiment_lemma46: max(r_R(I), r_C(I)) >= min(d sqrt(|I|/2), |I|/4) (Saha & Ye
// Lemma 4.6) on every instance, its slack, and the tightness U(I) / bound of the protocol
// Field: none beyond the rank formula (r_R, r_C are the ranks for Vandermonde operands, which
//   rank-formula checks against NTL on the same families).
// Check per instance: meets_lemma46 in exact integers. Instances: the standard families with
//   `trials` (default 16) random sets and 12 adversarial searches of 20000 steps per shape, and
//   every index set of the 2x2, 3x3 and 4x4 matrices for each d <= N.
// Reported: min slack = max(r_R, r_C) - bound, max tightness = U(I) / bound (bound > 0).
// Ops: O(|I|) per instance, plus the searches.
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/index_set.hpp>

#include <algorithm>
#include <string>

namespace ioattn::ff {

namespace {

detail::Outcome check(const NamedSet& named, std::int64_t d) {
    const IndexSet& set = named.set;
    const std::int64_t best = std::max(rank_rows(set, d), rank_cols(set, d));
    const double bound = lemma46_bound(set.size(), d);
    detail::Outcome o;
    o.slack = static_cast<double>(best) - bound;
    if (bound > 0)
        o.tightness = static_cast<double>(protocol_cost(set, d)) / bound;
    if (!meets_lemma46(best, set.size(), d)) {
        o.ok = false;
        o.failure = "lemma-4.6 " + named.name + " d=" + std::to_string(d) +
                    ": |I|=" + std::to_string(set.size()) +
                    " max(r_R,r_C)=" + std::to_string(best) + " < bound " + std::to_string(bound);
    }
    return o;
}

} // namespace

Result experiment_lemma46(const Config& given) {
    const Config config = given.sized_for("lemma-4.6");
    config.validate("ioattn::ff::experiment_lemma46");
    const detail::Stopwatch clock;
    const std::int64_t random_sets = detail::trials_or(config, 16);
    Result result;
    result.name = "lemma-4.6";
    auto run_batch = [&](const std::vector<NamedSet>& sets, std::int64_t d) {
        detail::tally(result,
                      detail::run_instances(
                          config, static_cast<std::int64_t>(sets.size()), [&](std::int64_t i) {
                              return check(sets[static_cast<std::size_t>(i)], d);
                          }));
    };
    // --- the families, one shape at a time ---
    const auto grid = detail::shape_grid(config.n, config.d);
    for (std::size_t s = 0; s < grid.size(); ++s) {
        const auto [n, d] = grid[s];
        run_batch(standard_families(n, d, derive_seed(config.seed, 40, s), random_sets, 12, 20000),
                  d);
    }
    // --- every index set of the tiny matrices ---
    for (std::int64_t n = 2; n <= std::min<std::int64_t>(4, config.n); ++n) {
        std::vector<NamedSet> sets;
        const std::uint64_t count = std::uint64_t{1} << static_cast<unsigned>(n * n);
        sets.reserve(count);
        for (std::uint64_t mask = 0; mask < count; ++mask)
            sets.push_back(
                {"from_mask(n=" + std::to_string(n) + ",mask=" + std::to_string(mask) + ")",
                 from_mask(n, mask)});
        for (std::int64_t d = 1; d <= std::min(n, config.d); ++d)
            run_batch(sets, d);
    }
    result.note = std::to_string(grid.size()) + " shapes N<=" + std::to_string(config.n) +
                  " d<=" + std::to_string(config.d) + " x families, all sets of 2x2..4x4";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
