// ioattn::ff::experiment_binary: the binary case (Saha & Ye Lemma 4.9): the BCH construction's
// every s - 1 rows are independent over F_2
// Field: F_2. K = bch_parity_check(m, t), N = 2^m - 1 rows, d = m t columns, s - 1 = 2t.
// Check: for m in 3..6 and t = 1, 2, 3 (2t + 1 <= N): rank over F_2 (NTL) of every 2t-subset of
//   rows is 2t, all subsets when binomial(N, 2t) <= 20000, else `trials` (default 2000) seeded
//   random ones. So over F_2, with d = m t = (s - 1) log2(N + 1) / 2, every 2d / log2(N + 1)
//   rows are independent: the substitute for Lemma 4.7 when p > N is impossible.
// Ops: one 2t x m t rank over F_2 per instance.
// Tests: tests/finite_field/experiments_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/matrix.hpp>

#include <string>

namespace ioattn::ff {

namespace {

struct BinaryInstance {
    std::int64_t code = 0; // index into keys
    std::vector<std::int64_t> rows;
};

} // namespace

Result experiment_binary(const Config& given) {
    const Config config = given.sized_for("binary");
    config.validate("ioattn::ff::experiment_binary");
    const detail::Stopwatch clock;
    constexpr std::int64_t kExhaustive = 20000;
    const std::int64_t trials = detail::trials_or(config, 2000);
    const Prime two{2};
    std::vector<Matrix> keys;
    std::vector<std::string> names;
    std::vector<BinaryInstance> inst;
    for (int m = 3; m <= 6; ++m)
        for (int t = 1; t <= 3 && 2 * t + 1 <= (1 << m) - 1; ++t) {
            keys.push_back(bch_parity_check(m, t));
            names.push_back("binary bch(m=" + std::to_string(m) + ",t=" + std::to_string(t) + ")");
            const auto code = static_cast<std::int64_t>(keys.size()) - 1;
            const std::int64_t n = (std::int64_t{1} << m) - 1;
            const std::int64_t rows_checked = 2 * std::int64_t{t}; // s - 1 = 2t
            if (detail::binomial_capped(n, rows_checked, kExhaustive + 1) <= kExhaustive) {
                for (auto& rows : detail::all_subsets(n, rows_checked))
                    inst.push_back({code, std::move(rows)});
            } else {
                for (std::int64_t r = 0; r < trials; ++r)
                    inst.push_back(
                        {code,
                         detail::random_subset(n,
                                               rows_checked,
                                               derive_seed(config.seed,
                                                           80 + static_cast<std::uint64_t>(code),
                                                           static_cast<std::uint64_t>(r)))});
            }
        }
    Result result;
    result.name = "binary";
    detail::tally(
        result,
        detail::run_instances(config, static_cast<std::int64_t>(inst.size()), [&](std::int64_t i) {
            const BinaryInstance& in = inst[static_cast<std::size_t>(i)];
            const Matrix& k = keys[static_cast<std::size_t>(in.code)];
            detail::Outcome o;
            const std::int64_t r = rank(k.select_rows(in.rows), two);
            if (r != static_cast<std::int64_t>(in.rows.size())) {
                o.ok = false;
                o.failure = names[static_cast<std::size_t>(in.code)] + " rows={" +
                            detail::join(in.rows) + "}: rank " + std::to_string(r) + " over F_2";
            }
            return o;
        }));
    result.note = "BCH m=3..6, t=1..3, every 2t rows independent over F_2";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
