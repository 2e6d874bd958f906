// ioattn::ff::experiment_count: exhaustive counting, |{(Q K^T)|_I : Q in F_p^(N x d)}| = p^r_R
// Field: tiny F_p, p in {5, 7} (p > N, so K = vandermonde(N, d, p) is valid).
// Check: for N in {2, 3}, d in {1, 2}: every index set of the 2 x 2 matrix and `trials`
//   (default 24) seeded random sets of the 3 x 3 one; enumerate all p^(N d) matrices Q, count
//   the distinct restricted products, compare with p^r_R(I) and with p^rank(query_map) (NTL).
//   Both directions: K varying with Q fixed is the same count on the transposed set.
// Ops: p^(N d) |I| d mul_mod per instance (<= 7^6 * 9 * 2).
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/rank_map.hpp>

#include <algorithm>
#include <random>
#include <string>

namespace ioattn::ff {

namespace {

struct CountInstance {
    std::int64_t p = 0;
    std::int64_t d = 0;
    NamedSet set;
    bool transposed = false; // count over K with Q fixed
};

std::int64_t ipow(std::int64_t b, std::int64_t e) {
    std::int64_t r = 1;
    for (std::int64_t i = 0; i < e; ++i)
        r *= b;
    return r;
}

// The index sets of one (p, n, d): all sets of 2 x 2, or `trials` seeded sets of 3 x 3.
std::vector<NamedSet>
sets_for(std::int64_t p, std::int64_t n, std::int64_t d, std::uint64_t seed, std::int64_t trials) {
    std::vector<NamedSet> sets;
    if (n == 2) {
        for (std::uint64_t mask = 0; mask < 16; ++mask)
            sets.push_back(
                {"from_mask(n=2,mask=" + std::to_string(mask) + ")", from_mask(2, mask)});
        return sets;
    }
    std::mt19937_64 rng(derive_seed(seed, 30, static_cast<std::uint64_t>(p * 10 + d)));
    for (std::int64_t t = 0; t < trials; ++t) {
        const std::uint64_t mask = rng() & 511U;
        sets.push_back({"from_mask(n=3,mask=" + std::to_string(mask) + ")", from_mask(3, mask)});
    }
    return sets;
}

detail::Outcome count_one(const CountInstance& in) {
    const Prime p{in.p};
    const std::int64_t n = in.set.set.n_rows();
    // --- the transposed direction: (Q K^T)|_I with K varying is (K Q^T)|_{I^T} ---
    std::vector<Entry> e = in.set.set.entries();
    if (in.transposed)
        for (Entry& x : e)
            std::swap(x.row, x.col);
    const IndexSet set(n, n, e);
    const Matrix fixed = vandermonde(n, in.d, p);
    // --- enumerate all Q in F_p^(n x d) as base-p digits, collect the restricted products ---
    const std::int64_t total = ipow(in.p, n * in.d);
    std::vector<std::int64_t> codes;
    codes.reserve(static_cast<std::size_t>(total));
    Matrix q(n, in.d);
    for (std::int64_t code = 0; code < total; ++code) {
        std::int64_t c = code;
        for (std::int64_t a = 0; a < n; ++a)
            for (std::int64_t b = 0; b < in.d; ++b) {
                q(a, b) = c % in.p;
                c /= in.p;
            }
        std::int64_t key = 0;
        for (std::int64_t v : restricted_product(q, fixed, set, p))
            key = key * in.p + v;
        codes.push_back(key);
    }
    std::sort(codes.begin(), codes.end());
    const auto distinct =
        static_cast<std::int64_t>(std::unique(codes.begin(), codes.end()) - codes.begin());
    const std::int64_t formula = rank_rows(set, in.d);
    const std::int64_t ntl = rank(query_map(set, fixed, p), p);
    detail::Outcome o;
    if (distinct != ipow(in.p, formula) || ntl != formula) {
        o.ok = false;
        o.failure = "count " + in.set.name + (in.transposed ? " (K varying)" : " (Q varying)") +
                    " p=" + std::to_string(in.p) + " d=" + std::to_string(in.d) + ": " +
                    std::to_string(distinct) +
                    " distinct, p^r=" + std::to_string(ipow(in.p, formula)) + ", NTL rank " +
                    std::to_string(ntl);
    }
    return o;
}

} // namespace

Result experiment_count(const Config& given) {
    const Config config = given.sized_for("count");
    config.validate("ioattn::ff::experiment_count");
    const detail::Stopwatch clock;
    const std::int64_t trials = detail::trials_or(config, 24);
    std::vector<CountInstance> inst;
    for (std::int64_t p : {5, 7})
        for (std::int64_t n : {2, 3})
            for (std::int64_t d = 1; d <= std::min<std::int64_t>(2, config.d) && n <= config.n; ++d)
                for (const NamedSet& s : sets_for(p, n, d, config.seed, trials))
                    for (bool tr : {false, true})
                        inst.push_back({p, d, s, tr});
    const auto outcomes =
        detail::run_instances(config, static_cast<std::int64_t>(inst.size()), [&](std::int64_t i) {
            return count_one(inst[static_cast<std::size_t>(i)]);
        });

    Result result;
    result.name = "count";
    detail::tally(result, outcomes);
    result.note =
        "p in {5,7}, N in {2,3}, d <= 2, all 2x2 sets, " + std::to_string(trials) + " 3x3 sets";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
