// Whitebox test of the runs of equal rows a block pattern's builder declares
// (Support::row_runs, keep_runs): its block keys (sparse/src/plan/block_columns.cpp), key lists
// (sparse/src/support/block_keys.cpp), pricing (plan/structure.cpp) and the keys the bound
// counts (cost/io_cost.cpp), taken a run at a time, against the same pairs walked (a copy with
// no runs declared), at shapes and tile heights that cut runs.

#include "plan/structure.hpp"
#include "same_planning.hpp"
#include "support/block_keys.hpp"

#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

TEST_CASE("row runs: a block pattern's block keys and key lists are the walk's",
          "[sparse][whitebox]") {
    std::int64_t globals = 0; // global rows priced
    // bigbird-block:16:1:2:0 at 600: its first and last block rows are global rows
    for (const std::string spec :
         {"block:16:0.3", "bigbird-block:16:3:2:1", "bigbird-block:16:1:2:0"})
        for (const auto& [n_q, n_k] : {std::pair<std::int64_t, std::int64_t>{300, 300},
                                       {300, 250},
                                       {250, 333},
                                       {600, 600}}) {
            const sp::Support s = sp::parse_pattern(spec, n_q, n_k, 7);
            const sp::Support plain = s.detached(); // the same pairs, no runs declared
            REQUIRE(s.row_runs().period == 16);
            REQUIRE(s.transposed().row_runs().period == 16);
            REQUIRE(plain.row_runs().period == 0);
            REQUIRE(plain.transposed().row_runs().period == 0);
            ioattn::Problem p;
            p.n_q = n_q;
            p.n_k = n_k;
            p.d = 8;
            p = p.resolved();
            for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward})
                CHECK(sp::used_input_words(p, s, pass) == sp::used_input_words(p, plain, pass));
            const sp::Support copy = s; // copies keep the runs, transposes swap them
            CHECK(copy.row_runs().shift == s.row_runs().shift);
            CHECK(s.transposed().transposed().row_runs().shift == s.row_runs().shift);
            for (const bool transposed : {false, true}) {
                const sp::Support& a = transposed ? s.transposed() : s;
                const sp::Support& b = transposed ? plain.transposed() : plain;
                for (const std::int64_t rows : {16, 8, 5, 32, 64}) {
                    CAPTURE(spec, n_q, n_k, transposed, rows);
                    const spd::BlockKeys& x = a.cached_block_keys(rows);
                    const spd::BlockKeys& y = b.cached_block_keys(rows);
                    CHECK(x.bounds == y.bounds);
                    CHECK(x.key_offsets == y.key_offsets);
                    CHECK(x.keys == y.keys);
                    CHECK(x.row_lo == y.row_lo);
                    CHECK(x.row_hi == y.row_hi);
                    CHECK(x.row_run_at == y.row_run_at);
                    CHECK(x.row_prefix == y.row_prefix);
                    CHECK(x.index_reads == y.index_reads);
                    // the pricing of every block, global rows' pairs included
                    globals += check_same_pricing(a, b, rows);
                    // block_keys, its counts and (in groups of 4) lanes
                    check_same_block_keys(a, b, rows);
                }
            }
        }
    CHECK(globals > 0);
}
