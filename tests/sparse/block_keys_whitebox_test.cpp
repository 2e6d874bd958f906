// Whitebox tests of the block keys' shortcuts, each against a reference walk of the pairs: the
// progression rows (intervals, dilated), chains (strided) and bands with other keys (bigbird) of
// block_keys (sparse/src/plan/block_columns.cpp, band_keys.cpp), its sort of scattered keys, and
// the interval rows and chains of BlockKeys::build (sparse/src/support/block_keys.cpp). The
// block patterns' runs of equal rows: row_runs_whitebox_test.cpp.

#include "plan/block_columns.hpp"
#include "support/block_keys.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

/// Per key of rows [i0, i1): how many rows see it, and the lanes of the groups of `group` rows
/// (0: none) that have a row seeing it.
struct Seen {
    std::map<std::int64_t, std::int64_t> count, lanes;
};

Seen seen_by(const sp::Support& s, std::int64_t i0, std::int64_t i1, std::int64_t group) {
    Seen out;
    for (std::int64_t g0 = i0; g0<i1; g0 += group> 0 ? group : i1 - i0) {
        const std::int64_t g1 = group > 0 ? std::min(i1, g0 + group) : i1;
        std::set<std::int64_t> any;
        for (std::int64_t i = g0; i < g1; ++i)
            for (const std::int64_t j : s.row(i)) {
                ++out.count[j];
                any.insert(j);
            }
        for (const std::int64_t j : any)
            out.lanes[j] += g1 - g0;
    }
    return out;
}

/// 512 x 512 rows of four keys j, j + 2, j + 3, j + 6 (first to last, three steps of 2, but not a
/// progression) among progressions of step 2, and of step 3 from row 300 on.
sp::Support near_progressions() {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 512; ++i) {
        const std::int64_t j = i % 400;
        const std::vector<std::int64_t> row =
            i % 37 == 5 ? std::vector<std::int64_t>{j, j + 2, j + 3, j + 6}
            : i < 300   ? std::vector<std::int64_t>{j, j + 2, j + 4, j + 6}
                        : std::vector<std::int64_t>{j, j + 3, j + 6, j + 9};
        cols.insert(cols.end(), row.begin(), row.end());
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {512, 512, offsets, cols};
}

/// Rows mostly one run of keys each (band_keys' case), with runs starting or ending a row, other
/// keys far off, just past a run, touching it (a longer run) or inside another row's run, empty
/// rows and rows mostly of other keys.
sp::Support bands_with_others() {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 512; ++i) {
        std::set<std::int64_t> row;
        if (i % 29 != 7) {
            const std::int64_t c = 30 + (i * 7) % 440, r = 3 + i % 23;
            for (std::int64_t j = c - r; j <= c + r; ++j)
                row.insert(j);
            if (i % 3 == 0)
                row.insert((i * 131) % 512);
            if (i % 5 == 1)
                row.insert(c + r + 2);
            if (i % 4 == 2)
                row.insert(c - r - 1);
            if (i % 11 == 3)
                row.insert((c + 40) % 512);
            for (std::int64_t k = 0; i % 13 == 4 && k < 3 * r; ++k)
                row.insert((i * 17 + 5 * k) % 512);
        }
        cols.insert(cols.end(), row.begin(), row.end());
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {512, 512, offsets, cols};
}

} // namespace

TEST_CASE("block_keys of progressions, chains and bands with other keys: the walk's keys, counts, "
          "lanes",
          "[sparse][variants][whitebox]") {
    std::vector<std::pair<std::string, sp::Support>> cases{
        {"near progressions", near_progressions()},
        {"bands with others", bands_with_others()},
        {"bigbird:16:2:3 transposed",
         sp::Support(sp::parse_pattern("bigbird:16:2:3", 512, 512, 3).transposed())}};
    for (const std::string spec : {"window:16",
                                   "causal-window:24",
                                   "causal",
                                   "causal-varlen:200,100,212",
                                   "window:3",
                                   "dilated:8:3",
                                   "dilated:40:4",
                                   "dilated:100:7",
                                   "strided:16",
                                   "strided:5",
                                   "strided:48",
                                   "block:16:0.2",
                                   "random:0.05",
                                   "global:4+window:8",
                                   "bigbird:16:2:3",
                                   "bigbird:40:1:6",
                                   "bigbird:4:0:2"})
        cases.emplace_back(spec, sp::parse_pattern(spec, 512, 512, 3));
    // keys scattered over a wide range (sorted by their bits)
    for (const std::string spec : {"random:0.0005", "powerlaw:2"})
        cases.emplace_back(spec + " of 8192 keys", sp::parse_pattern(spec, 512, 8192, 3));
    for (const auto& [spec, s] : cases) {
        const auto n_k = static_cast<std::size_t>(s.n_k());
        std::vector<std::int64_t> work(3 * n_k, 0);
        for (const std::int64_t rows : {1, 16, 40, 64}) {
            for (const std::int64_t group : {0, 16}) {
                CAPTURE(spec, rows, group);
                for (std::int64_t b = 0; b < spd::n_blocks(s, rows); ++b) {
                    const std::int64_t i1 = std::min(s.n_q(), (b + 1) * rows);
                    const bool grouped = group > 0 && group < i1 - b * rows;
                    std::int64_t* lanes = grouped ? work.data() + n_k : nullptr;
                    const auto keys = spd::block_keys(s, rows, b, work.data(), group, lanes);
                    const Seen want = seen_by(s, b * rows, i1, grouped ? group : 0);
                    REQUIRE(keys.size() == want.count.size());
                    std::size_t at = 0;
                    for (const auto& [j, c] : want.count) {
                        CHECK(keys[at++] == j);
                        CHECK(work[static_cast<std::size_t>(j)] == c);
                        if (grouped)
                            CHECK(lanes[j] == want.lanes.at(j));
                    }
                    for (const std::int64_t j : keys)
                        work[static_cast<std::size_t>(j)] = 0;
                    // every count outside the keys stayed 0
                    CHECK(std::all_of(work.begin(),
                                      work.begin() + static_cast<std::ptrdiff_t>(n_k),
                                      [](std::int64_t x) { return x == 0; }));
                }
            }
        }
    }
}

TEST_CASE("BlockKeys of interval rows and of chains: each row's run and prefix as a walk finds "
          "them",
          "[sparse][whitebox]") {
    for (const std::string spec : {"window:16",
                                   "causal-varlen:200,100,212",
                                   "strided:16",
                                   "strided:5",
                                   "strided:48",
                                   "global:3+strided:7",
                                   "random:0.05",
                                   "causal-window:24+global:2"}) {
        const sp::Support s = sp::parse_pattern(spec, 512, 512, 3);
        for (const std::int64_t rows : {16, 64}) {
            CAPTURE(spec, rows);
            const spd::BlockKeys& plan = s.cached_block_keys(rows);
            for (std::int64_t b = 0; b < plan.blocks(); ++b) {
                const auto keys = plan.keys_of(b);
                std::set<std::int64_t> seen;
                // index reads: the keys outside each row's run unless all prefix, and the key
                // list unless every row and the keys are intervals
                std::int64_t words = 0;
                bool simple = keys.empty() || keys.back() - keys.front() + 1 ==
                                                  static_cast<std::int64_t>(keys.size());
                for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
                    const auto row = s.row(i);
                    const auto u = static_cast<std::size_t>(i);
                    seen.insert(row.begin(), row.end());
                    std::int64_t best = 0, lo = 0, hi = -1, best_at = 0; // the first longest run
                    for (std::size_t a = 0; a < row.size();) {
                        std::size_t e = a + 1;
                        while (e < row.size() && row[e] == row[e - 1] + 1)
                            ++e;
                        if (static_cast<std::int64_t>(e - a) > best) {
                            best = static_cast<std::int64_t>(e - a);
                            lo = row[a];
                            hi = row[e - 1];
                            best_at = static_cast<std::int64_t>(a);
                        }
                        a = e;
                    }
                    CHECK(plan.row_lo[u] == lo);
                    CHECK(plan.row_hi[u] == hi);
                    CHECK(plan.row_run_at[u] == best_at);
                    std::int64_t prefix = 0;
                    while (prefix < static_cast<std::int64_t>(std::min(row.size(), keys.size())) &&
                           row[static_cast<std::size_t>(prefix)] ==
                               keys[static_cast<std::size_t>(prefix)])
                        ++prefix;
                    CHECK(plan.row_prefix[u] == prefix);
                    const auto len = static_cast<std::int64_t>(row.size());
                    if (best != len) {
                        simple = false;
                        words += prefix < len ? len - best : 0;
                    }
                }
                CHECK(std::vector<std::int64_t>(keys.begin(), keys.end()) ==
                      std::vector<std::int64_t>(seen.begin(), seen.end()));
                CHECK(plan.index_reads[static_cast<std::size_t>(b)] ==
                      words + (simple ? 0 : static_cast<std::int64_t>(keys.size())));
            }
        }
    }
}
