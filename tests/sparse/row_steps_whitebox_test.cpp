// Whitebox test of what the planner reads from a row's ends: dilated's declared steps
// (Support::row_step, keep_steps) and strided's chains (support/chains.hpp). With the steps
// declared, the block keys (sparse/src/plan/block_columns.cpp), pricing (plan/structure.cpp),
// residue classes and reordering (plan/reorder.cpp) and the keys the bound counts
// (cost/io_cost.cpp) equal those of the same pairs with nothing declared (a detached copy);
// the chain links equal a comparison of each row with the one before, and the bound's keys
// equal a walk of every pair.

#include "plan/block_columns.hpp"
#include "plan/structure.hpp"
#include "same_planning.hpp"
#include "support/chains.hpp"

#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

ioattn::Problem problem(std::int64_t n_q, std::int64_t n_k) {
    ioattn::Problem p;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = 8;
    return p.resolved();
}

/// The K/V words a pass reads when every key some row sees is read once (d = d_v = 8), and the
/// Q, O, L (and dO, dQ, D) words of the rows that see a key: the bound's count by a walk.
std::int64_t walked_input_words(const sp::Support& s, ioattn::Pass pass) {
    std::set<std::int64_t> keys;
    std::int64_t rows = 0;
    for (std::int64_t i = 0; i < s.n_q(); ++i) {
        keys.insert(s.row(i).begin(), s.row(i).end());
        rows += s.row(i).empty() ? 0 : 1;
    }
    return rows * (8 + (pass == ioattn::Pass::backward ? 2 * 8 + 1 : 0)) +
           static_cast<std::int64_t>(keys.size()) * 16;
}

} // namespace

TEST_CASE("declared steps: dilated's planning from its rows' ends equals the walk's",
          "[sparse][whitebox]") {
    for (const std::string spec : {"dilated:8:3", "dilated:40:4", "dilated:3:11"})
        // two rows: their keys are the ones the bound reads (no other row covers them)
        for (const auto& [n_q, n_k] :
             {std::pair<std::int64_t, std::int64_t>{300, 300}, {300, 257}, {250, 333}, {2, 333}}) {
            CAPTURE(spec, n_q, n_k);
            const sp::Support s = sp::parse_pattern(spec, n_q, n_k, 7);
            const sp::Support plain = s.detached(); // the same pairs, no step declared
            const std::int64_t step = std::stoll(spec.substr(spec.rfind(':') + 1));
            REQUIRE(s.row_step() == step);
            REQUIRE(s.transposed().row_step() == step);
            const sp::Support copy = s; // copies keep the step
            CHECK(copy.row_step() == step);
            REQUIRE(plain.row_step() == 0);
            REQUIRE(plain.transposed().row_step() == 0);
            CHECK(spd::offset_gcd(s) == spd::offset_gcd(plain));
            CHECK(spd::offset_gcd(s.transposed()) == spd::offset_gcd(plain.transposed()));
            for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward}) {
                CHECK(sp::used_input_words(problem(n_q, n_k), s, pass) ==
                      sp::used_input_words(problem(n_q, n_k), plain, pass));
                CHECK(sp::used_input_words(problem(n_q, n_k), s, pass) ==
                      walked_input_words(s, pass));
            }
            for (const std::int64_t rows : {16, 5, 64}) {
                CAPTURE(rows);
                for (const bool transposed : {false, true}) {
                    const sp::Support& a = transposed ? s.transposed() : s;
                    const sp::Support& b = transposed ? plain.transposed() : plain;
                    check_same_pricing(a, b, rows);
                    check_same_block_keys(a, b, rows);
                }
                // the residue classes and the reordered structure, rows written as intervals
                spd::Residues rs, rp;
                const spd::Orders os = spd::find_orders(s, rows, spd::CostModel{}, &rs);
                const spd::Orders op = spd::find_orders(plain, rows, spd::CostModel{}, &rp);
                CHECK(rs.g == rp.g);
                CHECK(os.rows == op.rows);
                CHECK(os.keys == op.keys);
                CHECK(os.floor == op.floor);
                REQUIRE((rs.reordered == nullptr) == (rp.reordered == nullptr));
                if (rs.reordered != nullptr)
                    CHECK(*rs.reordered == *rp.reordered);
            }
        }
}

TEST_CASE("chain links: each row against the one before; the bound's keys of chains are the "
          "walk's",
          "[sparse][whitebox]") {
    for (const std::string spec : {"strided:16",
                                   "strided:5",
                                   "global:3+strided:7",
                                   "random:0.05",
                                   "causal",
                                   "window:4",
                                   "block:16:0.3"}) {
        for (const auto& [n_q, n_k] :
             {std::pair<std::int64_t, std::int64_t>{300, 300}, {250, 333}}) {
            CAPTURE(spec, n_q, n_k);
            const sp::Support s = sp::parse_pattern(spec, n_q, n_k, 7);
            const auto links = spd::chain_links(s);
            REQUIRE(static_cast<std::int64_t>(links->size()) == n_q);
            std::int64_t linked = 0;
            for (std::int64_t i = 0; i < n_q; ++i) {
                const auto row = s.row(i);
                const bool interval = !row.empty() && row.back() - row.front() + 1 ==
                                                          static_cast<std::int64_t>(row.size());
                // a row of a declared run of equal rows (block's) or of a declared chain
                // (strided's) is linked uncompared; a declared chain is one
                const bool chain =
                    i > 0 && s.chain_runs().period > 1 && s.chain_runs().one_run(i - 1, i + 1);
                if (chain)
                    CHECK(std::equal(s.row(i - 1).begin(), s.row(i - 1).end(), row.begin()));
                const bool run = chain || (i > 0 && s.row_runs().period > 1 &&
                                           s.row_runs().one_run(i - 1, i + 1));
                std::int64_t want = run ? static_cast<std::int64_t>(s.row(i - 1).size()) : 0;
                if (i > 0 && !run && !interval && !s.row(i - 1).empty() &&
                    s.row(i - 1).size() <= row.size() &&
                    std::equal(s.row(i - 1).begin(), s.row(i - 1).end(), row.begin()))
                    want = static_cast<std::int64_t>(s.row(i - 1).size());
                CHECK((*links)[static_cast<std::size_t>(i)] == want);
                linked += want > 0 ? 1 : 0;
            }
            if (spec.rfind("strided", 0) == 0) {
                CHECK(linked > n_q / 2); // most of strided's rows extend the row before
                REQUIRE(s.chain_runs().period > 1);
                CHECK(s.detached().chain_runs().period == 0);
                CHECK(s.transposed().chain_runs().period == 0);
            }
            for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward})
                CHECK(sp::used_input_words(problem(n_q, n_k), s, pass) ==
                      walked_input_words(s, pass));
        }
    }
}
