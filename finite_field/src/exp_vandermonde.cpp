// ioattn::ff::experiment_vandermonde: Lemma 4.7 on instances
// Field: F_p, p = config.prime() > N. K = vandermonde(N, d, p), points 0..N-1.
// Check: for each shape (N, d) of the grid, every d-subset S of rows has rank(K_S) = d (NTL),
//   all subsets when binomial(N, d) <= 1000, else `trials` (default 300) seeded random ones.
// Ops: per instance one d x d NTL rank, O(d^3).
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/matrix.hpp>

#include <string>

namespace ioattn::ff {

namespace {

struct VandermondeInstance {
    std::int64_t shape = 0; // index into keys
    std::vector<std::int64_t> rows;
};

} // namespace

Result experiment_vandermonde(const Config& given) {
    const Config config = given.sized_for("vandermonde");
    config.validate("ioattn::ff::experiment_vandermonde");
    const detail::Stopwatch clock;
    const Prime p = Prime::for_size(config.prime(), config.n, config.negative_control);
    constexpr std::int64_t kExhaustive = 1000;
    const std::int64_t trials = detail::trials_or(config, 300);

    // --- instances: (shape, row subset), built serially from the seed ---
    const auto grid = detail::shape_grid(config.n, config.d);
    std::vector<Matrix> keys;
    std::vector<VandermondeInstance> inst;
    for (std::size_t s = 0; s < grid.size(); ++s) {
        const auto [n, d] = grid[s];
        keys.push_back(vandermonde(n, d, p, config.negative_control));
        if (detail::binomial_capped(n, d, kExhaustive + 1) <= kExhaustive) {
            for (auto& rows : detail::all_subsets(n, d))
                inst.push_back({static_cast<std::int64_t>(s), std::move(rows)});
        } else {
            for (std::int64_t t = 0; t < trials; ++t)
                inst.push_back(
                    {static_cast<std::int64_t>(s),
                     detail::random_subset(
                         n, d, derive_seed(config.seed, 1 + s, static_cast<std::uint64_t>(t)))});
        }
    }

    const auto outcomes =
        detail::run_instances(config, static_cast<std::int64_t>(inst.size()), [&](std::int64_t i) {
            const VandermondeInstance& in = inst[static_cast<std::size_t>(i)];
            const Matrix& k = keys[static_cast<std::size_t>(in.shape)];
            detail::Outcome o;
            const std::int64_t r = rank(k.select_rows(in.rows), p); // Lemma 4.7: = d
            if (r != k.cols()) {
                o.ok = false;
                o.failure = "vandermonde N=" + std::to_string(k.rows()) +
                            " d=" + std::to_string(k.cols()) + " p=" + std::to_string(p.p) +
                            " rows={" + detail::join(in.rows) + "}: rank " + std::to_string(r);
            }
            return o;
        });

    Result result;
    result.name = "vandermonde";
    detail::tally(result, outcomes);
    result.note = std::to_string(grid.size()) + " shapes N<=" + std::to_string(config.n) +
                  " d<=" + std::to_string(config.d) + ", p=" + std::to_string(p.p);
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
