// ioattn::sparse::detail::band_keys (see plan/block_columns.hpp): block_keys of a block whose
// rows are each mostly one run of consecutive keys, a band with a few other keys (bigbird's
// window with its global and random keys). Each row's run through its middle key is found by
// galloping from the row's ends and counted by a difference array over the runs' range, each
// lane group's lanes by the union of its rows' runs; only the keys outside the runs are walked.
// The same keys, counts and lanes as the walk, in O(rows log + range + other keys) instead of
// O(pairs + the block's whole key range): a block of bigbird:64:2:3 spans every key through its
// random ones, and walking its pairs with that range was a third of its plan at N = 16384.
// Tests: tests/sparse/block_keys_whitebox_test.cpp

#include "plan/block_columns.hpp"

#include <algorithm>
#include <iterator>
#include <span>

namespace ioattn::sparse::detail {

namespace {

/// The least x in [lo, hi] with before(x) false, before true below it and false at hi: probes
/// lo, lo + 1, lo + 3, lo + 7, ..., then halves the last gap, O(log (x - lo)) reads near lo.
template <class Before>
std::size_t gallop_up(std::size_t lo, std::size_t hi, const Before& before) {
    std::size_t first = lo, probe = lo; // before(y) for every y < first
    for (std::size_t step = 1; probe < hi && before(probe); step *= 2) {
        first = probe + 1;
        probe = std::min(hi, probe + step);
    }
    while (first < probe) {
        const std::size_t mid = first + (probe - first) / 2;
        (before(mid) ? first = mid + 1 : probe = mid);
    }
    return first;
}

/// Positions [a, b] of the longest run of consecutive keys through row[m], m = n / 2 (sorted
/// distinct keys: row[x] - x does not decrease, and is row[m] - m exactly on the run), galloped
/// to from the row's two ends: a band's run nearly fills its row, and a binary search from the
/// middle waited on a fresh line at every step (most of this file's time on bigbird:64:2:3).
std::pair<std::size_t, std::size_t> middle_run(std::span<const std::int64_t> row) {
    const std::size_t n = row.size(), m = n / 2;
    const std::int64_t base = row[m] - static_cast<std::int64_t>(m);
    const auto off = [&](std::size_t x) { return row[x] - static_cast<std::int64_t>(x); };
    const std::size_t a = gallop_up(0, m, [&](std::size_t x) { return off(x) < base; });
    // the same from the end, on positions counted from it
    const std::size_t past =
        gallop_up(0, n - 1 - m, [&](std::size_t y) { return off(n - 1 - y) > base; });
    return {a, n - 1 - past};
}

struct KeyRun {
    std::int64_t front, back; ///< keys
    auto operator<=>(const KeyRun&) const = default;
};

} // namespace

std::optional<std::vector<std::int64_t>> band_keys(const OrderedView& s,
                                                   std::int64_t i0,
                                                   std::int64_t i1,
                                                   std::int64_t pairs,
                                                   std::int64_t* count,
                                                   std::int64_t group,
                                                   std::int64_t* lanes) {
    if (lanes != nullptr && group <= 0)
        return std::nullopt;
    // --- each row's middle run, given up once the keys outside them pass a quarter ---
    std::vector<std::pair<std::size_t, std::size_t>> runs(static_cast<std::size_t>(i1 - i0));
    std::int64_t others = 0, lo = s.n_k(), hi = -1;
    for (std::int64_t i = i0; i < i1; ++i) {
        const auto row = s.row(i);
        if (row.empty())
            continue;
        const auto [a, b] = middle_run(row);
        runs[static_cast<std::size_t>(i - i0)] = {a, b + 1};
        others += static_cast<std::int64_t>(row.size() - (b + 1 - a));
        if (4 * others > pairs)
            return std::nullopt;
        lo = std::min(lo, row[a]);
        hi = std::max(hi, row[b]);
    }
    if (hi < lo || hi - lo + 1 > pairs)
        return std::nullopt;
    // --- the runs: +1 at front, -1 past back, summed over [lo, hi] ---
    const auto add = [&](std::int64_t* acc, const KeyRun& r, std::int64_t x) {
        acc[r.front] += x;
        if (r.back < hi)
            acc[r.back + 1] -= x;
    };
    const auto run_of = [&](std::int64_t i) -> std::optional<KeyRun> {
        const auto row = s.row(i);
        if (row.empty())
            return std::nullopt;
        const auto [a, e] = runs[static_cast<std::size_t>(i - i0)];
        return KeyRun{row[a], row[e - 1]};
    };
    for (std::int64_t i = i0; i < i1; ++i)
        if (const auto r = run_of(i))
            add(count, *r, 1);
    for (std::int64_t j = lo + 1; j <= hi; ++j)
        count[j] += count[j - 1];
    std::vector<std::int64_t> keys(static_cast<std::size_t>(hi - lo + 1));
    keys.resize(static_cast<std::size_t>(counted_keys(count, lo, hi, hi - lo + 1, keys.data())));
    const std::size_t run_keys = keys.size();
    // --- lanes: each group's union of runs, summed the same way ---
    std::int64_t* mark = lanes != nullptr ? lanes + s.n_k() : nullptr; // the last group seeing j
    std::vector<std::vector<KeyRun>> unions;                           // per group, merged
    if (lanes != nullptr) {
        std::fill(lanes + lo, lanes + hi + 1, std::int64_t{0});
        std::fill(mark + lo, mark + hi + 1, std::int64_t{-1});
        for (std::int64_t g0 = i0; g0 < i1; g0 += group) {
            const std::int64_t g1 = std::min(i1, g0 + group);
            std::vector<KeyRun> spans;
            for (std::int64_t i = g0; i < g1; ++i)
                if (const auto r = run_of(i))
                    spans.push_back(*r);
            std::sort(spans.begin(), spans.end());
            std::vector<KeyRun>& merged = unions.emplace_back();
            for (const KeyRun& r : spans) {
                if (!merged.empty() && r.front <= merged.back().back + 1)
                    merged.back().back = std::max(merged.back().back, r.back);
                else
                    merged.push_back(r);
            }
            for (const KeyRun& r : merged)
                add(lanes, r, g1 - g0);
        }
        for (std::int64_t j = lo + 1; j <= hi; ++j)
            lanes[j] += lanes[j - 1];
    }
    // --- the other keys, walked: counted, and their groups' lanes where no run of the group
    // holds them ---
    for (std::int64_t i = i0; i < i1; ++i) {
        const auto row = s.row(i);
        const auto [a, e] = runs[static_cast<std::size_t>(i - i0)];
        const std::int64_t g = group > 0 ? (i - i0) / group : 0;
        const std::int64_t in_group = group > 0 ? std::min(group, i1 - i0 - g * group) : 0;
        const auto other = [&](std::int64_t j) {
            if (count[j]++ == 0) {
                keys.push_back(j);
                if (lanes != nullptr && (j < lo || j > hi)) {
                    lanes[j] = 0;
                    mark[j] = -1;
                }
            }
            if (lanes == nullptr || mark[j] == g)
                return;
            const auto& u = unions[static_cast<std::size_t>(g)];
            const auto at = std::upper_bound(
                u.begin(), u.end(), j, [](std::int64_t k, const KeyRun& r) { return k < r.front; });
            if (at == u.begin() || std::prev(at)->back < j) // else the group's runs counted it
                lanes[j] += in_group;
            mark[j] = g;
        };
        for (std::size_t x = 0; x < a; ++x)
            other(row[x]);
        for (std::size_t x = e; x < row.size(); ++x)
            other(row[x]);
    }
    std::sort(keys.begin() + static_cast<std::ptrdiff_t>(run_keys), keys.end());
    std::inplace_merge(
        keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(run_keys), keys.end());
    return keys;
}

} // namespace ioattn::sparse::detail
