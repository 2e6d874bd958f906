// Whitebox tests of the fused sparse backward's groups (sparse/src/kernels/tile/group_runs.hpp):
// the runs of key blocks each group takes, and the entries by which a timed run starts the
// heavy groups first (group_entries), against sums the test makes itself over Omega^T's blocks.

#include "kernels/tile/group_runs.hpp"
#include "support/block_keys.hpp"

#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

/// Entries (queries x keys) of key block j.
std::int64_t entries(const spd::BlockKeys& plan, std::int64_t j) {
    return static_cast<std::int64_t>(plan.keys_of(j).size()) * plan.rows(j);
}

/// Each group's blocks, walked from the cuts as the test reads them: run u is [cuts[u],
/// cuts[u + 1]) and belongs to group u mod groups.
std::vector<std::vector<std::int64_t>> blocks_of_groups(const std::vector<std::int64_t>& cuts,
                                                        std::int64_t groups) {
    std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(groups));
    for (std::size_t u = 0; u + 1 < cuts.size(); ++u)
        for (std::int64_t j = cuts[u]; j < cuts[u + 1]; ++j)
            out[u % static_cast<std::size_t>(groups)].push_back(j);
    return out;
}

/// A band of width 9 plus the last `tail` keys for every query: the tail keys are one heavy
/// block at the end of Omega^T, as strided:64's summary keys are once the permuted variant has
/// gathered them there.
sp::Support band_and_tail(std::int64_t n, std::int64_t tail) {
    std::vector<std::int64_t> indptr{0}, indices;
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = std::max<std::int64_t>(0, i - 4); j <= std::min(n - tail - 1, i + 4);
             ++j)
            indices.push_back(j);
        for (std::int64_t j = n - tail; j < n; ++j)
            indices.push_back(j);
        indptr.push_back(static_cast<std::int64_t>(indices.size()));
    }
    return sp::Support(n, n, std::move(indptr), std::move(indices));
}

} // namespace

TEST_CASE("group_runs: every key block in exactly one group, runs in order",
          "[sparse][backward][whitebox]") {
    for (const std::string spec : {"strided:64", "window:48", "bigbird:16:2:3", "random:0.05"}) {
        const sp::Support s = sp::parse_pattern(spec, 1024, 1024, 5);
        const spd::BlockKeys plan = spd::BlockKeys::build(s.transposed(), 64);
        for (const std::int64_t groups : {1, 3, 8}) {
            CAPTURE(spec, groups);
            const std::vector<std::int64_t> cuts = spd::group_runs(plan, groups);
            REQUIRE(cuts.front() == 0);
            REQUIRE(cuts.back() == plan.blocks());
            CHECK(std::is_sorted(cuts.begin(), cuts.end()));
            std::vector<int> seen(static_cast<std::size_t>(plan.blocks()), 0);
            for (std::int64_t g = 0; g < groups; ++g) {
                std::vector<std::int64_t> walked;
                spd::for_group_blocks(cuts, groups, g, [&](std::int64_t j) {
                    walked.push_back(j);
                    ++seen[static_cast<std::size_t>(j)];
                });
                CHECK(walked == blocks_of_groups(cuts, groups)[static_cast<std::size_t>(g)]);
            }
            CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
        }
    }
}

TEST_CASE("group_entries: each group's entries; a heavy group starts first",
          "[sparse][backward][whitebox]") {
    for (const std::string spec : {"strided:64", "window:48", "bigbird:16:2:3", "random:0.05"}) {
        const sp::Support s = sp::parse_pattern(spec, 4096, 4096, 5);
        const spd::BlockKeys plan = spd::BlockKeys::build(s.transposed(), 64);
        const std::int64_t groups = 8;
        const std::vector<std::int64_t> cuts = spd::group_runs(plan, groups);
        const auto blocks = blocks_of_groups(cuts, groups);
        for (const bool skip_odd : {false, true}) { // blocks the pass computes: all, or even ones
            CAPTURE(spec, skip_odd);
            const auto computes = [&](std::int64_t j) { return !skip_odd || j % 2 == 0; };
            for (std::int64_t g = 0; g < groups; ++g) {
                std::int64_t want = 0;
                for (const std::int64_t j : blocks[static_cast<std::size_t>(g)])
                    if (computes(j))
                        want += entries(plan, j);
                CHECK(spd::group_entries(plan, cuts, groups, g, computes) == want);
            }
        }
    }
    // keys seen by every query at the end: their block holds over a third of the entries, its
    // group (group 2 of 8: the runs that close at the heavy block are empty) 3.3x the mean
    const sp::Support s = band_and_tail(4096, 60);
    const spd::BlockKeys plan = spd::BlockKeys::build(s.transposed(), 64);
    std::int64_t heavy = 0, total = 0;
    for (std::int64_t j = 0; j < plan.blocks(); ++j) {
        total += entries(plan, j);
        if (entries(plan, j) > entries(plan, heavy))
            heavy = j;
    }
    CHECK(heavy == plan.blocks() - 1);
    CHECK(entries(plan, heavy) * 3 > total);
    const std::int64_t groups = 8;
    const std::vector<std::int64_t> cuts = spd::group_runs(plan, groups);
    const auto blocks = blocks_of_groups(cuts, groups);
    std::vector<std::int64_t> work(static_cast<std::size_t>(groups));
    for (std::int64_t g = 0; g < groups; ++g)
        work[static_cast<std::size_t>(g)] =
            spd::group_entries(plan, cuts, groups, g, [](std::int64_t) { return true; });
    const std::vector<std::int64_t> order = ioattn::heavy_first(
        groups,
        [&](std::int64_t g) { return work[static_cast<std::size_t>(g)]; },
        spd::kHeavyGroup);
    const auto& first = blocks[static_cast<std::size_t>(order[0])];
    CHECK(std::find(first.begin(), first.end(), heavy) != first.end());
    CHECK(order[0] != 0);                          // not group order
    for (std::size_t k = 2; k < order.size(); ++k) // the light groups keep group order
        CHECK(order[k - 1] < order[k]);
}
