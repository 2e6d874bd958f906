#pragma once
// Shared machinery of the experiments (private): the size grid, the per-instance outcome, the
// parallel instance loop and the deterministic reduction into a Result.

#include <ioattn/ff/experiments.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/matrix.hpp>
#include <ioattn/parallel.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace ioattn::ff::detail {

/// What one instance found. One task writes one Outcome; the reduction is serial, in index
/// order, so a Result does not depend on the thread count.
struct Outcome {
    bool ok = true;
    double slack = std::numeric_limits<double>::quiet_NaN();
    double tightness = std::numeric_limits<double>::quiet_NaN();
    double epoch_ratio = std::numeric_limits<double>::quiet_NaN();
    double message_ratio = std::numeric_limits<double>::quiet_NaN();
    std::int64_t row = -1; ///< the line of Result::rows it counts in (-1: none)
    std::string failure;   ///< set when !ok: the instance and what went wrong
};

/// Shapes (N, d) of a sweep: N over powers of two in [n_min, n] plus n, d over powers of two in
/// [1, min(d, N)] plus min(d, N).
std::vector<std::pair<std::int64_t, std::int64_t>>
shape_grid(std::int64_t n_max, std::int64_t d_max, std::int64_t n_min = 4);

/// Runs body(i) -> Outcome for i in [0, count) in parallel (config.threads workers), updating
/// config.progress.
template <typename Body>
std::vector<Outcome> run_instances(const Config& config, std::int64_t count, const Body& body) {
    std::vector<Outcome> out(static_cast<std::size_t>(count));
    if (config.progress != nullptr)
        config.progress->total += count;
    with_threads(config.threads, [&] {
        parallel_for_tiles(count, [&](std::int64_t i, int /*worker*/) {
            out[static_cast<std::size_t>(i)] = body(i);
            if (config.progress != nullptr)
                config.progress->done.fetch_add(1, std::memory_order_relaxed);
        });
    });
    return out;
}

/// Adds outcomes to a result in order (instances, passed, failed, extrema, first failure, and
/// the rows of result.rows they name).
void tally(Result& result, const std::vector<Outcome>& outcomes);

/// Wall-clock stopwatch.
class Stopwatch {
public:
    [[nodiscard]] double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// "a,b,c" of a list of integers.
std::string join(const std::vector<std::int64_t>& v);

/// A uniformly random k-subset of [0, n), ascending, from mt19937_64(seed).
std::vector<std::int64_t> random_subset(std::int64_t n, std::int64_t k, std::uint64_t seed);

/// All k-subsets of [0, n) in lexicographic order (caller keeps binomial(n, k) small).
std::vector<std::vector<std::int64_t>> all_subsets(std::int64_t n, std::int64_t k);

/// binomial(n, k), saturating at `cap`.
std::int64_t binomial_capped(std::int64_t n, std::int64_t k, std::int64_t cap);

/// The rank-formula checks of one index set with K (and Q = K) as the fixed operand: NTL ranks
/// of the block route, and of the full map where small, against r_R and r_C (exp_rank_formula).
Outcome rank_formula_check(const NamedSet& named, const Matrix& k, const Prime& p);

/// trials, or the experiment's default when trials == 0.
inline std::int64_t trials_or(const Config& config, std::int64_t fallback) {
    return config.trials > 0 ? config.trials : fallback;
}

} // namespace ioattn::ff::detail
