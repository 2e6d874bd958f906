// Whitebox test of the order the timed fused forward runs its row blocks in
// (ioattn::parallel_for_blocks over BlockKeys::work, sparse/src/support/block_keys.hpp): every
// block once; those whose tiles compute at least 4x the mean entries (rows x visible keys)
// first, most first; then the rest in index order. The outputs do not depend on it
// (tests/sparse/forward_test.cpp runs 1 and 2 threads); what it changes is when a worker meets
// a heavy block.

#include "support/block_keys.hpp"

#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sp = ioattn::sparse;

namespace {

/// The order the timed kernels take the blocks of a head in (ioattn::parallel_for_blocks).
std::vector<std::int64_t> timed_order(const sp::detail::BlockKeys& plan) {
    return ioattn::heavy_first(plan.blocks(), [&](std::int64_t b) { return plan.work(b); });
}

} // namespace

TEST_CASE(
    "heavy_first over BlockKeys::work: each block once, the heavy ones first, the rest in order",
    "[sparse][whitebox]") {
    for (const std::string spec :
         {"bigbird-block:16:3:2:3", "window:16", "causal-window:24+global:2", "random:0.05"}) {
        const sp::Support s = sp::parse_pattern(spec, 512, 512, 3);
        for (const std::int64_t rows : {16, 64}) {
            CAPTURE(spec, rows);
            const auto& plan = s.cached_block_keys(rows);
            const std::vector<std::int64_t> order = timed_order(plan);
            REQUIRE(static_cast<std::int64_t>(order.size()) == plan.blocks());
            std::vector<std::int64_t> sorted = order;
            std::sort(sorted.begin(), sorted.end());
            for (std::size_t b = 0; b < sorted.size(); ++b)
                CHECK(sorted[b] == static_cast<std::int64_t>(b));
            const auto work = [&](std::int64_t b) { // rows x visible keys
                return static_cast<double>(plan.rows(b)) *
                       static_cast<double>(plan.keys_of(b).size());
            };
            double mean = 0;
            for (std::int64_t b = 0; b < plan.blocks(); ++b)
                mean += work(b) / static_cast<double>(plan.blocks());
            std::size_t heavy = 0;
            while (heavy < order.size() && work(order[heavy]) >= 4 * mean)
                ++heavy;
            for (std::size_t t = heavy; t < order.size(); ++t)
                CHECK(work(order[t]) < 4 * mean); // every heavy block leads
            for (std::size_t t = 1; t < order.size(); ++t) {
                if (t < heavy)
                    CHECK(work(order[t - 1]) >= work(order[t]));
                else if (t > heavy)
                    CHECK(order[t - 1] < order[t]); // the rest keep index order
            }
        }
    }
}

TEST_CASE("heavy_first over BlockKeys::work: bigbird-block's global row blocks lead",
          "[sparse][whitebox]") {
    // block 16, 3 sliding, 2 global (the first and the last block row see every key), 3 random:
    // at N = 2048 a global block computes 16x the entries of another, over 4x the mean
    const sp::Support s = sp::parse_pattern("bigbird-block:16:3:2:3", 2048, 2048, 3);
    const auto& plan = s.cached_block_keys(16);
    const std::vector<std::int64_t> order = timed_order(plan);
    REQUIRE(order.size() >= 2);
    const std::int64_t last = plan.blocks() - 1;
    CHECK(plan.keys_of(last).size() == 2048);
    CHECK(order[0] == 0);
    CHECK(order[1] == last);
}
