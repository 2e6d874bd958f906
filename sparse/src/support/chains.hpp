#pragma once
// Chains of rows: a row that is the row before with keys added after its last (strided:L's rows
// within one of its blocks: the summary keys, then their own causal part). A walk over a chain
// visits each key once, at the row that adds it, instead of once per row that sees it: the
// planner's block keys (plan/block_columns.cpp), the tile kernels' key lists (BlockKeys) and
// the keys the bound counts (cost/io_cost.cpp). Tests: tests/sparse/block_keys_whitebox_test.cpp

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace ioattn::sparse::detail {

/// Per row i of s, how many of its first keys are row i - 1's whole list when row i is that row
/// with keys added after its last (row i - 1 not empty, row i not an interval: an interval is
/// read at its ends, never compared), else 0; a row of a declared run of equal rows
/// (Support::row_runs) or of a declared chain (Support::chain_runs: strided's) is linked
/// uncompared. Found once per structure by comparing
/// each row with the row before, in parallel, and kept with it (Support::cached_value; the
/// caller holds the array, which the cache may drop).
std::shared_ptr<const std::vector<std::int64_t>> chain_links(const Support& s);

} // namespace ioattn::sparse::detail
