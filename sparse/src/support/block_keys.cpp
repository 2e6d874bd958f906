// ioattn::sparse row blocks and their keys, BlockKeys (see block_keys.hpp).
// Tests: tests/sparse/forward_test.cpp, block_keys_whitebox_test.cpp

#include "support/block_keys.hpp"

#include "support/chains.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <algorithm>
#include <string>
#include <utility>

namespace ioattn::sparse {

std::vector<std::int64_t> row_blocks(const Support& support, std::int64_t rows) {
    if (rows < 1)
        throw InvalidArgument("ioattn::sparse::row_blocks: rows = " + std::to_string(rows) +
                              " (expected >= 1)");
    // A block closes early once it holds 4 * rows * mean pairs, so that a heavy row (global
    // tokens, a graph's hubs) does not make light rows stream every key it sees, except within
    // a run of heavy rows (each above 4 * mean pairs): those fill whole blocks, since a tile
    // reuses each K/V row it streams once per row of its block, and a block of a few heavy rows
    // is memory-bound. Whole blocks of heavy rows: 3.0x on global:256's forward (ioattn run
    // --N 16384 --d 64 --pattern global:256 --schedule fused --threads 2 --repeat 3).
    // A block of heavy rows also closes at the first light row: otherwise bigbird:64:2:3's two
    // global keys share a block of Omega^T with 9 band keys, and the backward streams all 16384
    // queries through 16 key lanes; alone they are a narrow key block (narrow_chunk.hpp): 1.05x
    // on global:2+window:64's backward (same command with --pass backward --repeat 20).
    const std::int64_t n_q = support.n_q();
    const std::int64_t heavy_z = detail::heavy_above(support);
    const std::int64_t budget = std::max<std::int64_t>(1, rows * heavy_z);
    std::vector<std::int64_t> bounds{0};
    std::int64_t count = 0, nnz = 0;
    bool all_heavy = true; // every row of the open block is heavy
    for (std::int64_t i = 0; i < n_q; ++i) {
        const std::int64_t z = support.row_nonzeros(i);
        const bool heavy = z > heavy_z;
        const bool over = nnz + z > budget && !(all_heavy && heavy);
        if (count == rows || (count > 0 && ((all_heavy && !heavy) || over))) {
            bounds.push_back(i);
            count = 0;
            nnz = 0;
            all_heavy = true;
        }
        ++count;
        nnz += z;
        all_heavy = all_heavy && heavy;
    }
    if (n_q > 0)
        bounds.push_back(n_q);
    return bounds;
}

namespace detail {

BlockKeys BlockKeys::build(const Support& support, std::int64_t max_rows) {
    BlockKeys plan;
    plan.bounds = row_blocks(support, max_rows);
    const std::int64_t n = plan.blocks();
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n) + 1, 0);
    CallMemory alloc("ioattn::sparse::BlockKeys::build");
    const kernels::Workspace<std::int64_t> stamps(max_concurrency(), support.n_k());
    alloc.allocate();
    // a block pattern's rows come in runs of equal rows (Support::row_runs): a row of the run
    // of the row before adds no key (the walks visit one row a run), and has that row's run and
    // prefix (block:64:0.1 at
    // N = 16384: 27 million pairs walked four times, stamped and sorted)
    const RowRuns runs = support.row_runs();
    const auto as_before = [&](std::int64_t b, std::int64_t i) {
        return i > plan.row0(b) && runs.period > 1 && runs.one_run(i - 1, i + 1);
    };
    // A row of a chain (each row the row before with keys added after its last: strided's rows
    // within one of its blocks; support/chains.hpp) has its keys past known(b, i) to walk, and the
    // row before's run and prefix to go on from (strided:64 at N = 16384: 2.6 million pairs
    // walked three times).
    const auto links = chain_links(support);
    const auto known = [&](std::int64_t b, std::int64_t i) { // the first row of a block: none
        return i > plan.row0(b) ? (*links)[static_cast<std::size_t>(i)] : std::int64_t{0};
    };
    // Stamps hold block + 1 (fill pass: -(block + 1)), so no clearing between blocks.
    const auto visit = [&](std::int64_t b, std::int64_t* stamp, std::int64_t mark, auto&& emit) {
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i)
            for (const std::int64_t j :
                 as_before(b, i) ? std::span<const std::int64_t>{}
                                 : support.row(i).subspan(static_cast<std::size_t>(known(b, i))))
                if (stamp[j] != mark) {
                    stamp[j] = mark;
                    emit(j);
                }
    };
    // Each row's run, its longest interval of keys [lo, hi] (the kernels' masks read these,
    // and the row's index array only for its keys outside the run).
    plan.row_lo.assign(static_cast<std::size_t>(support.n_q()), 0);
    plan.row_hi.assign(static_cast<std::size_t>(support.n_q()), -1);
    plan.row_run_at.assign(static_cast<std::size_t>(support.n_q()), 0);
    parallel_for_tiles(n, [&](std::int64_t b, int) {
        std::int64_t last_at = 0; // where the row before's last run of consecutive keys starts
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto at = static_cast<std::size_t>(i);
            if (as_before(b, i)) {
                plan.row_lo[at] = plan.row_lo[at - 1];
                plan.row_hi[at] = plan.row_hi[at - 1];
                plan.row_run_at[at] = plan.row_run_at[at - 1];
                continue;
            }
            const auto row = support.row(i);
            const auto len = static_cast<std::int64_t>(row.size());
            const bool interval = len > 0 && row.back() - row.front() + 1 == len;
            // the longest run, the first of that length: in a chain, the row before's runs and
            // its last run, perhaps longer, then the added keys' runs
            std::int64_t best = 0, best_at = 0, a = 0, e = 1;
            if (const std::int64_t from = known(b, i); from > 0) {
                best = plan.row_hi[at - 1] - plan.row_lo[at - 1] + 1;
                best_at = plan.row_run_at[at - 1];
                a = last_at;
                e = from;
            } else if (interval) { // one run
                best = len;
                a = len;
                last_at = 0;
            }
            for (; a < len; a = e, e = a + 1) {
                while (e < len &&
                       row[static_cast<std::size_t>(e)] == row[static_cast<std::size_t>(e - 1)] + 1)
                    ++e;
                if (e - a > best) {
                    best = e - a;
                    best_at = a;
                }
                last_at = a;
            }
            if (best > 0) {
                plan.row_lo[at] = row[static_cast<std::size_t>(best_at)];
                plan.row_hi[at] = row[static_cast<std::size_t>(best_at)] + best - 1;
                plan.row_run_at[at] = best_at;
            }
        }
    });
    const auto interval_row = [&](std::int64_t i) { // the row is its run
        const auto at = static_cast<std::size_t>(i);
        return plan.row_hi[at] - plan.row_lo[at] + 1 == support.row_nonzeros(i);
    };
    // A block whose rows are intervals that chain into one interval sees exactly that interval
    // (windows, bands, causal): no stamps, no sort.
    std::vector<std::int64_t> interval_lo(static_cast<std::size_t>(n), -1);
    const auto as_interval = [&](std::int64_t b) -> std::pair<std::int64_t, std::int64_t> {
        std::int64_t lo = -1, hi = -2;
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto at = static_cast<std::size_t>(i);
            const std::int64_t front = plan.row_lo[at], back = plan.row_hi[at];
            if (!interval_row(i))
                return {-1, -2};
            if (back < front)
                continue; // empty row
            if (lo < 0) {
                lo = front;
                hi = back;
            } else if (front >= lo && front <= hi + 1) {
                hi = std::max(hi, back);
            } else {
                return {-1, -2};
            }
        }
        return {lo, hi};
    };
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        const auto [lo, hi] = as_interval(b);
        std::int64_t c = 0;
        if (lo >= 0) { // one interval of keys
            interval_lo[static_cast<std::size_t>(b)] = lo;
            c = lo >= 0 ? hi - lo + 1 : 0;
        } else {
            visit(b, stamps.slab(w), b + 1, [&](std::int64_t) { ++c; });
        }
        counts[static_cast<std::size_t>(b) + 1] = c;
    });
    plan.key_offsets.assign(counts.size(), 0);
    for (std::size_t b = 1; b < counts.size(); ++b)
        plan.key_offsets[b] = plan.key_offsets[b - 1] + counts[b];
    require_memory("ioattn::sparse::BlockKeys::build",
                   bytes_of(plan.key_offsets.back(), sizeof(std::int64_t)),
                   "key lists");
    plan.keys.resize(static_cast<std::size_t>(plan.key_offsets.back()));
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        auto* out = plan.keys.data() + plan.key_offsets[static_cast<std::size_t>(b)];
        const std::int64_t count = plan.key_offsets[static_cast<std::size_t>(b) + 1] -
                                   plan.key_offsets[static_cast<std::size_t>(b)];
        const std::int64_t lo = interval_lo[static_cast<std::size_t>(b)];
        if (lo >= 0) {
            for (std::int64_t c = 0; c < count; ++c)
                out[c] = lo + c;
            return;
        }
        std::int64_t c = 0;
        visit(b, stamps.slab(w), -(b + 1), [&](std::int64_t j) { out[c++] = j; });
        std::sort(out, out + c);
    });
    // Each row's prefix (its first keys that are the block's first keys), and each block's
    // index reads: the extras of the rows that are not all prefix.
    plan.row_prefix.assign(static_cast<std::size_t>(support.n_q()), 0);
    plan.index_reads.assign(static_cast<std::size_t>(n), 0);
    parallel_for_tiles(n, [&](std::int64_t b, int) {
        const auto at = static_cast<std::size_t>(b);
        const auto block_keys = plan.keys_of(b);
        const auto count = static_cast<std::int64_t>(block_keys.size());
        const bool keys_interval = count > 0 && block_keys.back() - block_keys.front() + 1 == count;
        bool simple = count == 0 || keys_interval;
        std::int64_t words = 0;
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto row = support.row(i);
            const auto len = static_cast<std::int64_t>(row.size());
            // an interval row of a block whose keys are an interval: all of the shorter list
            // when they start together, else none
            const bool both = keys_interval && interval_row(i);
            // a chain's row: the row before's prefix, if it ends short of that row's end
            const std::int64_t from = known(b, i);
            const std::int64_t before =
                from > 0 ? plan.row_prefix[static_cast<std::size_t>(i) - 1] : 0;
            const auto prefix =
                as_before(b, i) || (from > 0 && before < from)
                    ? plan.row_prefix[static_cast<std::size_t>(i) - 1]
                : both ? (len > 0 && row.front() == block_keys.front() ? std::min(len, count) : 0)
                       : static_cast<std::int64_t>(std::mismatch(row.begin() + before,
                                                                 row.begin() + std::min(len, count),
                                                                 block_keys.begin() + before)
                                                       .first -
                                                   row.begin());
            plan.row_prefix[static_cast<std::size_t>(i)] = prefix;
            if (!interval_row(i)) { // its keys outside the run
                const auto r = static_cast<std::size_t>(i);
                if (prefix < len)
                    words += len - (plan.row_hi[r] - plan.row_lo[r] + 1);
                simple = false;
            }
        }
        plan.index_reads[at] = words + (simple ? 0 : count);
    });
    return plan;
}

} // namespace detail

} // namespace ioattn::sparse
