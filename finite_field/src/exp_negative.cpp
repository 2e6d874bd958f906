// ioattn::ff::experiment_negative: negative controls that must fail, reported as expected
// failures (an instance passes when its check fails as predicted)
// Field: F_p with p <= N (the Vandermonde points i mod p repeat), and F_p with p > N but a
//   rank-deficient K (rank d - 1).
// Controls:
//   repeated points, p in {2, 3, 5, 7}, N in {p + 1, 2p}, d in {2, 3} (d <= N): Lemma 4.7 fails
//     on the d-subset {0, p, 1, ...} and rank-formula fails on the set with those columns in one
//     row (standard families need not hit a repeated pair inside a row with <= d entries);
//   rank-deficient K, N in {8, 16}, d in {2, 4, 8}: rank-formula fails on some set.
// The run fails if any control passes its check: the checks would then not detect the very
//   conditions (p > N, full-rank Vandermonde K) the theorem needs.
// Ops: the rank-formula checks of the standard families of small shapes.
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/index_set.hpp>

#include <string>

namespace ioattn::ff {

namespace {

struct Control {
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::int64_t p = 0;
    bool deficient = false; // false: repeated points
    std::uint64_t seed = 0;
};

detail::Outcome run_control(const Control& c) {
    const Prime p{c.p};
    const Matrix k = c.deficient ? rank_deficient(c.n, c.d, c.d - 1, p, c.seed)
                                 : vandermonde(c.n, c.d, p, /*allow_repeated_points=*/true);
    const std::string what = std::string(c.deficient ? "rank-deficient K" : "repeated points") +
                             " N=" + std::to_string(c.n) + " d=" + std::to_string(c.d) +
                             " p=" + std::to_string(c.p);
    // --- Lemma 4.7 on rows {0, p, 1, 2, ...}: rows 0 and p coincide when p <= N - 1 ---
    std::vector<std::int64_t> witness{0, c.p};
    for (std::int64_t r = 1; static_cast<std::int64_t>(witness.size()) < c.d; ++r)
        witness.push_back(r);
    const bool lemma47_broken = c.deficient || rank(k.select_rows(witness), p) < c.d;
    // --- rank-formula on the families plus, for repeated points, the row (and column) of I
    //     that meets the witness rows: at least one set must break the formula ---
    std::vector<NamedSet> sets = standard_families(c.n, c.d, c.seed, 4, 2, 500);
    if (!c.deficient) {
        std::vector<Entry> row;
        std::vector<Entry> col;
        for (std::int64_t j : witness) {
            row.push_back({0, j});
            col.push_back({j, 0});
        }
        sets.push_back({"witness_row(" + detail::join(witness) + ")", IndexSet(c.n, c.n, row)});
        sets.push_back({"witness_col(" + detail::join(witness) + ")", IndexSet(c.n, c.n, col)});
    }
    std::int64_t broken = 0;
    for (const NamedSet& s : sets)
        if (!detail::rank_formula_check(s, k, p).ok)
            ++broken;
    detail::Outcome o;
    if (broken == 0 || !lemma47_broken) {
        o.ok = false;
        o.failure = "negative control passed unexpectedly: " + what +
                    (broken == 0 ? " (rank formula held on every set)" : " (Lemma 4.7 held)");
    }
    return o;
}

} // namespace

Result experiment_negative(const Config& given) {
    const Config config = given.sized_for("negative");
    config.validate("ioattn::ff::experiment_negative");
    const detail::Stopwatch clock;
    std::vector<Control> controls;
    for (std::int64_t p : {2, 3, 5, 7})
        for (std::int64_t n : {p + 1, 2 * p})
            for (std::int64_t d : {2, 3})
                if (d <= n)
                    controls.push_back({n, d, p, false, 0});
    const Prime big = Prime::for_size(config.prime(), 16, config.negative_control);
    for (std::int64_t n : {8, 16})
        for (std::int64_t d : {2, 4, 8})
            controls.push_back(
                {n,
                 d,
                 big.p,
                 true,
                 derive_seed(config.seed, 60, static_cast<std::uint64_t>(controls.size()))});
    Result result;
    result.name = "negative";
    detail::tally(result,
                  detail::run_instances(
                      config, static_cast<std::int64_t>(controls.size()), [&](std::int64_t i) {
                          return run_control(controls[static_cast<std::size_t>(i)]);
                      }));
    result.note = "expected failures: p <= N (repeated points), rank-deficient K";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
