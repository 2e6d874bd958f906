// ioattn::sparse::detail::block_keys, block_columns: the keys each row block of a support sees,
// with how many rows (or lanes) see each, in parallel-safe per-worker arrays (see
// block_columns.hpp). Tests: tests/sparse/variants_test.cpp,
// block_keys_whitebox_test.cpp

#include "plan/block_columns.hpp"

#include "support/chains.hpp"

#include <algorithm>
#include <bit>
#include <utility>

namespace ioattn::sparse::detail {

/// Every key is stored and kept when counted, with no branch: a random
/// block's keys fill 3 in 4 of its range, and a branch on each mispredicted.
std::int64_t counted_keys(const std::int64_t* count,
                          std::int64_t lo,
                          std::int64_t hi,
                          std::int64_t most,
                          std::int64_t* out) {
    std::int64_t at = 0;
    for (std::int64_t j = lo; j <= hi && at < most; ++j) { // at < most: no store past the last
        out[at] = j;
        at += count[j] > 0 ? 1 : 0;
    }
    return at;
}

namespace {

/// keys (distinct) sorted: by a scan of the counts (counted_keys) when the keys fill an eighth
/// of their range [lo, hi] (scattered blocks see thousands of keys: sorting them was the largest
/// part of random:0.02's planning); by a bit a key over the range, its words scanned, while the
/// range has at most 64 words a key (powerlaw:32's blocks: a sort was 7% of its fresh plan);
/// else by a sort.
void sort_keys(std::vector<std::int64_t>& keys,
               const std::int64_t* count,
               std::int64_t lo,
               std::int64_t hi) {
    const auto k = static_cast<std::int64_t>(keys.size());
    if (k > 64 && hi - lo + 1 <= 8 * k) {
        counted_keys(count, lo, hi, k, keys.data());
    } else if (k > 64 && hi - lo + 1 <= 64 * 64 * k) {
        std::vector<std::uint64_t> bits(static_cast<std::size_t>((hi - lo) / 64 + 1), 0);
        for (const std::int64_t j : keys)
            bits[static_cast<std::size_t>((j - lo) / 64)] |= std::uint64_t{1} << ((j - lo) % 64);
        std::int64_t* out = keys.data();
        for (std::size_t w = 0; w < bits.size(); ++w)
            for (std::uint64_t b = bits[w]; b != 0; b &= b - 1)
                *out++ = lo + 64 * static_cast<std::int64_t>(w) + std::countr_zero(b);
    } else {
        std::sort(keys.begin(), keys.end());
    }
}

/// block_keys of a block whose rows are arithmetic progressions of one step t (t = 1: intervals
/// of keys, as windows, bands and causal rows are; t = S: dilated:W:S's rows), when their range
/// [lo, hi] holds no more keys than the block's pairs: counts by a difference array over the
/// range, summed along each residue class modulo t, and each lane group's lanes by the union of
/// its rows' progressions, in O(rows + range) instead of O(pairs). The same keys, counts and
/// lanes as the walk. dilated:256:4 at N = 16384: 8.4 million pairs walked per tile height
/// priced on the structure as given, before its residue order is found.
std::vector<std::int64_t> progression_keys(const OrderedView& s,
                                           std::int64_t i0,
                                           std::int64_t i1,
                                           std::int64_t lo,
                                           std::int64_t hi,
                                           std::int64_t t,
                                           std::int64_t* count,
                                           std::int64_t group,
                                           std::int64_t* lanes) {
    // keys front, front + t, ..., back: +x at front, -x at back + t, then summed along t
    const auto add = [&](std::int64_t* acc, std::int64_t front, std::int64_t back, std::int64_t x) {
        acc[front] += x;
        if (back + t <= hi)
            acc[back + t] -= x;
    };
    const auto sum = [&](std::int64_t* acc) {
        for (std::int64_t j = lo + t; j <= hi; ++j)
            acc[j] += acc[j - t];
    };
    for (std::int64_t i = i0; i < i1; ++i)
        if (const auto row = s.row(i); !row.empty())
            add(count, row.front(), row.back(), 1);
    sum(count);
    std::vector<std::int64_t> keys(static_cast<std::size_t>(hi - lo + 1));
    keys.resize(static_cast<std::size_t>(counted_keys(count, lo, hi, hi - lo + 1, keys.data())));
    if (lanes == nullptr)
        return keys;
    std::fill(lanes + lo, lanes + hi + 1, std::int64_t{0});

    struct Span {
        std::int64_t residue, front, back;
        auto operator<=>(const Span&) const = default;
    };

    std::vector<Span> spans; // a group's rows, by residue modulo t
    for (std::int64_t g0 = i0; g0 < i1; g0 += group) {
        const std::int64_t g1 = std::min(i1, g0 + group);
        spans.clear();
        for (std::int64_t i = g0; i < g1; ++i)
            if (const auto row = s.row(i); !row.empty())
                spans.push_back({row.front() % t, row.front(), row.back()});
        std::sort(spans.begin(), spans.end());
        // the group's union: progressions of one residue that meet or touch merge
        for (std::size_t a = 0, e = 0; a < spans.size(); a = e) {
            std::int64_t back = spans[a].back;
            for (e = a + 1; e < spans.size() && spans[e].residue == spans[a].residue &&
                            spans[e].front <= back + t;
                 ++e)
                back = std::max(back, spans[e].back);
            add(lanes, spans[a].front, back, g1 - g0);
        }
    }
    sum(lanes);
    return keys;
}

/// The first rows of the chains of rows [i0, i1) (support/chains.hpp): from the structure's
/// kept links, or for a view in another row order by comparing each row with the one before.
std::vector<std::int64_t> chain_starts(const OrderedView& s, std::int64_t i0, std::int64_t i1) {
    std::vector<std::int64_t> starts{i0};
    if (s.rows.empty()) {
        const auto links = chain_links(*s.s);
        for (std::int64_t i = i0 + 1; i < i1; ++i)
            if ((*links)[static_cast<std::size_t>(i)] == 0)
                starts.push_back(i);
        return starts;
    }
    for (std::int64_t i = i0 + 1; i < i1; ++i) {
        const auto before = s.row(i - 1), row = s.row(i);
        if (row.size() < before.size() || !std::equal(before.begin(), before.end(), row.begin()))
            starts.push_back(i);
    }
    return starts;
}

/// block_keys of rows in chains (chain_starts): a key first seen in a chain at row i is seen by
/// every later row of the chain, so each chain's keys are walked once, at the row that adds
/// them, its count the rows from there to the chain's end and its lanes those of the groups
/// they meet (less the groups an earlier chain counted for it). The same keys, counts and lanes
/// as the walk, in O(keys of each chain) instead of O(pairs). strided:64 at N = 16384: 2.6
/// million pairs walked per tile height priced.
std::vector<std::int64_t> chain_keys(const OrderedView& s,
                                     std::int64_t i0,
                                     std::int64_t i1,
                                     const std::vector<std::int64_t>& starts,
                                     std::int64_t lo,
                                     std::int64_t hi,
                                     std::int64_t* count,
                                     std::int64_t group,
                                     std::int64_t* lanes) {
    std::vector<std::int64_t> keys;
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group counted
    const auto group_of = [&](std::int64_t i) { return group > 0 ? (i - i0) / group : 0; };
    const auto rows_to = [&](std::int64_t g) { // the rows of groups 0 .. g - 1
        return std::min(i1 - i0, g * group);
    };
    for (std::size_t c = 0; c < starts.size(); ++c) {
        const std::int64_t e = c + 1 < starts.size() ? starts[c + 1] : i1;
        const std::int64_t last = group_of(e - 1);
        std::size_t known = 0; // the keys of the chain's row before
        for (std::int64_t i = starts[c]; i < e; ++i) {
            const auto row = s.row(i);
            for (std::size_t k = known; k < row.size(); ++k) {
                const std::int64_t j = row[k];
                if (count[j] == 0) {
                    keys.push_back(j);
                    if (lanes != nullptr) {
                        lanes[j] = 0;
                        mark[j] = -1;
                    }
                }
                count[j] += e - i;
                if (const std::int64_t first =
                        lanes != nullptr ? std::max(group_of(i), mark[j] + 1) : last + 1;
                    first <= last) {
                    lanes[j] += rows_to(last + 1) - rows_to(first);
                    mark[j] = last;
                }
            }
            known = row.size();
        }
    }
    if (starts.size() > 1) // one chain's keys come in order
        sort_keys(keys, count, lo, hi);
    return keys;
}

/// block_keys of a block whose keys are dense in their range [lo, hi] (at most 8 per pair):
/// counts and lanes by a walk with no branch on whether a key was seen (random:0.02's blocks
/// see each key about once, and that branch mispredicted on every other pair), the range's
/// marks cleared first, the keys found by a scan of the counts.
std::vector<std::int64_t> dense_keys(const OrderedView& s,
                                     std::int64_t i0,
                                     std::int64_t i1,
                                     std::int64_t lo,
                                     std::int64_t hi,
                                     std::int64_t* count,
                                     std::int64_t group,
                                     std::int64_t* lanes) {
    if (lanes != nullptr) {
        std::int64_t* mark = lanes + s.n_k(); // the last group seeing j
        std::fill(lanes + lo, lanes + hi + 1, std::int64_t{0});
        std::fill(mark + lo, mark + hi + 1, std::int64_t{-1});
        for (std::int64_t i = i0; i < i1; ++i) {
            const std::int64_t g = group > 0 ? (i - i0) / group : 0;
            const std::int64_t in_group = group > 0 ? std::min(group, i1 - i0 - g * group) : 0;
            for (const std::int64_t j : s.row(i)) {
                ++count[j];
                // a mask, not a select: the compiler made the select a branch
                lanes[j] += in_group & -static_cast<std::int64_t>(mark[j] != g);
                mark[j] = g;
            }
        }
    } else {
        for (std::int64_t i = i0; i < i1; ++i)
            for (const std::int64_t j : s.row(i))
                ++count[j];
    }
    std::vector<std::int64_t> keys(static_cast<std::size_t>(hi - lo + 1));
    keys.resize(static_cast<std::size_t>(counted_keys(count, lo, hi, hi - lo + 1, keys.data())));
    return keys;
}

/// block_keys of rows that come in runs of equal rows (a block pattern's: Support::row_runs):
/// each run's first row walked once for all its rows in the block, its lanes added for each
/// lane group the run meets; the same keys, counts and lanes as the walk. block:64:0.1 at
/// N = 16384 walked 27 million pairs per tile height priced, bigbird-block:64:3:2:3's sampled
/// other heights 8 ms of its 21 ms plan.
std::vector<std::int64_t> run_keys(const OrderedView& s,
                                   std::int64_t i0,
                                   std::int64_t i1,
                                   const RowRuns& runs,
                                   std::int64_t* count,
                                   std::int64_t group,
                                   std::int64_t* lanes) {
    std::vector<std::int64_t> keys;
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group seeing j
    for (std::int64_t a = i0; a < i1;) {
        const std::int64_t e = std::min(i1, (runs.run(a) + 1) * runs.period - runs.shift);
        const std::int64_t g0 = group > 0 ? (a - i0) / group : 0;
        const std::int64_t g1 = group > 0 ? (e - 1 - i0) / group : -1;
        for (const std::int64_t j : s.row(a)) {
            if (count[j] == 0) {
                keys.push_back(j);
                if (lanes != nullptr) {
                    lanes[j] = 0;
                    mark[j] = -1;
                }
            }
            count[j] += e - a;
            for (std::int64_t g = g0; lanes != nullptr && g <= g1; ++g)
                if (mark[j] != g) {
                    mark[j] = g;
                    lanes[j] += std::min(group, i1 - i0 - g * group);
                }
        }
        if (a == i0 && e == i1) // one run: its row's keys, sorted
            return keys;
        a = e;
    }
    std::sort(keys.begin(), keys.end());
    return keys;
}

} // namespace

std::vector<std::int64_t> block_keys(const OrderedView& s,
                                     std::int64_t rows,
                                     std::int64_t b,
                                     std::int64_t* count,
                                     std::int64_t group,
                                     std::int64_t* lanes) {
    const std::int64_t i0 = b * rows, i1 = std::min(s.n_q(), (b + 1) * rows);
    if (const RowRuns runs = s.s->row_runs(); i0 < i1 && s.rows.empty() && runs.period > 1)
        return run_keys(s, i0, i1, runs, count, group, lanes);
    // the rows' common step (0: none seen yet), while every row may be a progression of it
    std::int64_t lo = s.n_k(), hi = -1, pairs = 0, step = 0;
    bool progressions = lanes == nullptr || group > 0;
    for (std::int64_t i = i0; i < i1; ++i) {
        const auto row = s.row(i);
        if (row.empty())
            continue;
        const auto n = static_cast<std::int64_t>(row.size());
        if (n > 1) {
            const std::int64_t t = row[1] - row[0];
            step = step == 0 ? t : step;
            progressions = progressions && t == step && row.back() - row.front() == (n - 1) * t;
        }
        lo = std::min(lo, row.front());
        hi = std::max(hi, row.back());
        pairs += n;
    }
    if (pairs == 0)
        return {};
    step = std::max<std::int64_t>(step, 1);
    // sorted unique keys spanning (n - 1) steps of 1 are an interval; of t > 1, a progression
    // when the builder declared that step (a check would read every pair)
    if (progressions && hi - lo + 1 <= pairs && (step == 1 || s.s->row_step() == step))
        return progression_keys(s, i0, i1, lo, hi, step, count, group, lanes);
    // chains of four rows and more on average
    if (const auto starts = chain_starts(s, i0, i1);
        4 * static_cast<std::int64_t>(starts.size()) <= i1 - i0)
        return chain_keys(s, i0, i1, starts, lo, hi, count, group, lanes);
    // rows mostly one run each (a band with a few other keys)
    if (auto keys = band_keys(s, i0, i1, pairs, count, group, lanes))
        return std::move(*keys);
    if (hi - lo + 1 <= 8 * pairs)
        return dense_keys(s, i0, i1, lo, hi, count, group, lanes);
    std::vector<std::int64_t> keys;
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group seeing j
    for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t g = group > 0 ? (i - i0) / group : 0;
        const std::int64_t in_group = group > 0 ? std::min(group, i1 - i0 - g * group) : 0;
        for (const std::int64_t j : s.row(i)) {
            if (count[j]++ == 0) {
                keys.push_back(j);
                if (lanes != nullptr) {
                    lanes[j] = 0;
                    mark[j] = -1;
                }
            }
            if (lanes != nullptr && mark[j] != g) {
                mark[j] = g;
                lanes[j] += in_group;
            }
        }
    }
    sort_keys(keys, count, lo, hi);
    return keys;
}

std::pair<std::vector<std::int64_t>, ColumnLanes> block_columns(const OrderedView& s,
                                                                std::int64_t rows,
                                                                std::int64_t b,
                                                                std::int64_t* work,
                                                                const CostModel& cm) {
    const std::int64_t r = std::min(rows, s.n_q() - b * rows), n_k = s.n_k();
    const bool grouped = cm.lane_group > 0 && cm.lane_group < r;
    std::int64_t* lanes = grouped ? work + n_k : nullptr;
    if (!s.relabeled())
        return {block_keys(s, rows, b, work, cm.lane_group, lanes), ColumnLanes{r, lanes}};
    // --- a relabeled view: the block's keys in the labels of s (work[3 n_k, 6 n_k)), their
    // counts and lanes moved to the view's labels, the keys sorted in them ---
    std::int64_t* count0 = work + 3 * n_k;
    std::int64_t* lanes0 = grouped ? work + 4 * n_k : nullptr;
    std::vector<std::int64_t> keys = block_keys(s, rows, b, count0, cm.lane_group, lanes0);
    std::int64_t lo = n_k, hi = -1;
    for (std::int64_t& j : keys) {
        const std::int64_t v = s.key(j);
        work[v] = count0[j];
        count0[j] = 0;
        if (grouped)
            lanes[v] = lanes0[j];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        j = v;
    }
    sort_keys(keys, work, lo, hi);
    return {std::move(keys), ColumnLanes{r, lanes}};
}

double block_seen(const OrderedView& s,
                  std::int64_t rows,
                  std::int64_t b,
                  const std::vector<std::int64_t>& keys,
                  const std::int64_t* count,
                  const ColumnLanes& lanes,
                  const CostModel& cm,
                  std::vector<std::int64_t>& out) {
    const std::int64_t heavy_z = heavy_above(*s.s);
    bool global = false;
    for (std::int64_t i = b * rows; i < std::min(s.n_q(), (b + 1) * rows) && !global; ++i)
        global = global_row(s, i, heavy_z);
    out.clear();
    out.reserve(keys.size());
    double floor = 0;
    for (const std::int64_t j : keys) {
        const auto u = static_cast<std::size_t>(j);
        out.push_back(cm.tile_worthy(count[u], lanes(j)) ? j : -1 - j);
        // a column through tiles takes its lanes, or in a block with a global row one lane
        // group's, as price_by_fill prices the columns a global row adds
        const std::int64_t tile = global ? std::min(lanes(j), cm.lanes(lanes.r)) : lanes(j);
        floor += std::min(static_cast<double>(count[u]) * cm.element_pair,
                          static_cast<double>(tile) * cm.tile_lane);
    }
    return floor;
}

} // namespace ioattn::sparse::detail
