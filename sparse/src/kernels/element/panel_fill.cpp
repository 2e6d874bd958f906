// ioattn::sparse element plans' fill, PanelFill (see kernels/element/panel_fill.hpp): the row
// blocks, each block's distinct keys per panel, their sums at wider panels, and the visits
// grouped from them. Tests: tests/sparse/plan_shortcuts_whitebox_test.cpp

#include "kernels/element/panel_fill.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <string>

namespace ioattn::sparse::detail {

namespace {

/// A worker's arrays for count_keys: stamps (8 bytes a key) marked with `mark`, flags (a byte a
/// key), each key's panel.
struct BlockScratch {
    std::int64_t* stamp;
    std::int64_t mark;
    std::uint8_t* seen;
    const std::int64_t* panel_of;
};

/// The distinct keys of rows [i0, i1) per panel of `panel` keys, added to nk; returns the
/// longest row's keys.
std::int64_t count_keys(const Support& support,
                        std::int64_t i0,
                        std::int64_t i1,
                        std::int64_t panel,
                        const BlockScratch& w,
                        std::int64_t* nk) {
    std::int64_t lo = support.n_k(), hi = -1, pairs = 0, longest = 0;
    for (std::int64_t i = i0; i < i1; ++i) {
        const auto row = support.row(i);
        longest = std::max(longest, static_cast<std::int64_t>(row.size()));
        if (row.empty())
            continue;
        lo = std::min(lo, row.front());
        hi = std::max(hi, row.back());
        pairs += static_cast<std::int64_t>(row.size());
    }
    if (pairs > 0 && hi - lo + 1 <= 8 * pairs) {
        // keys dense in their range: flag them in a byte per key (n_k bytes stay in the
        // first-level cache, where 8-byte stamps did not), then sum each panel's flags over
        // the range (random:0.02's blocks see most keys once; a count per pair waited on the
        // previous pair's count of the same panel)
        std::fill(w.seen + lo, w.seen + hi + 1, std::uint8_t{0});
        for (std::int64_t i = i0; i < i1; ++i)
            for (const std::int64_t j : support.row(i))
                w.seen[j] = 1;
        for (std::int64_t p = lo / panel; p <= hi / panel; ++p) {
            const std::int64_t j0 = std::max(lo, p * panel);
            const std::int64_t j1 = std::min(hi + 1, (p + 1) * panel);
            std::int64_t c = 0;
            for (std::int64_t j = j0; j < j1; ++j)
                c += w.seen[j];
            nk[p] += c;
        }
        return longest;
    }
    for (std::int64_t i = i0; i < i1; ++i) // scattered keys: stamped pair by pair
        for (const std::int64_t j : support.row(i))
            if (w.stamp[j] != w.mark) {
                w.stamp[j] = w.mark;
                ++nk[w.panel_of[j]];
            }
    return longest;
}

} // namespace

PanelFill PanelFill::build(const Support& support, std::int64_t max_rows, std::int64_t panel) {
    if (max_rows < 1 || panel < 1)
        throw InvalidArgument("ioattn::sparse::ElementPanels: rows = " + std::to_string(max_rows) +
                              ", panel = " + std::to_string(panel) + " (expected >= 1)");
    PanelFill fill;
    fill.panel = panel;
    fill.n_k = support.n_k();
    // --- blocks: at most max_rows rows and about max_rows * mean pairs each ---
    const std::int64_t n_q = support.n_q();
    const std::int64_t mean = n_q > 0 ? (support.z_qk() + n_q - 1) / n_q : 0;
    const std::int64_t budget = std::max<std::int64_t>(1, max_rows * mean);
    fill.bounds.push_back(0);
    std::int64_t count = 0, nnz = 0;
    for (std::int64_t i = 0; i < n_q; ++i) {
        if (count == max_rows || nnz >= budget) {
            fill.bounds.push_back(i);
            count = 0;
            nnz = 0;
        }
        ++count;
        nnz += support.row_nonzeros(i);
    }
    if (n_q > 0)
        fill.bounds.push_back(n_q);
    // --- per block, per panel: distinct keys (stamped with the block) ---
    const std::int64_t n = fill.blocks();
    const std::int64_t n_panels = (support.n_k() + panel - 1) / panel;
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> filled(
        static_cast<std::size_t>(n));
    fill.longest.assign(static_cast<std::size_t>(n), 0);
    const int workers = max_concurrency();
    // each key's panel, looked up: a division per pair was a third of the build
    std::vector<std::int64_t> panel_of(static_cast<std::size_t>(support.n_k()));
    parallel_for_tiles((support.n_k() + 4095) / 4096, [&](std::int64_t t, int) {
        for (std::int64_t j = t * 4096; j < std::min(support.n_k(), (t + 1) * 4096); ++j)
            panel_of[static_cast<std::size_t>(j)] = j / panel;
    });
    const kernels::Workspace<std::int64_t> stamps(workers, support.n_k());
    const kernels::Workspace<std::uint8_t> seen_keys(workers, support.n_k());
    const kernels::Workspace<std::int64_t> keys(workers, n_panels);
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        std::int64_t* nk = keys.slab(w);
        std::fill(nk, nk + n_panels, std::int64_t{0});
        const auto u = static_cast<std::size_t>(b);
        const BlockScratch scratch{stamps.slab(w), b + 1, seen_keys.slab(w), panel_of.data()};
        fill.longest[u] =
            count_keys(support, fill.bounds[u], fill.bounds[u + 1], panel, scratch, nk);
        for (std::int64_t p = 0; p < n_panels; ++p)
            if (nk[p] > 0)
                filled[u].emplace_back(p, nk[p]);
    });
    fill.offsets.assign(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t b = 0; b < n; ++b)
        fill.offsets[static_cast<std::size_t>(b) + 1] =
            fill.offsets[static_cast<std::size_t>(b)] +
            static_cast<std::int64_t>(filled[static_cast<std::size_t>(b)].size());
    fill.cells.reserve(static_cast<std::size_t>(fill.offsets.back()));
    for (const auto& f : filled)
        fill.cells.insert(fill.cells.end(), f.begin(), f.end());
    return fill;
}

PanelFill PanelFill::widened(std::int64_t wider) const {
    IOATTN_ASSERT(widens_to(wider));
    PanelFill out;
    out.panel = wider;
    out.n_k = n_k;
    out.bounds = bounds;
    out.longest = longest;
    out.offsets.assign(offsets.size(), 0);
    out.cells.reserve(cells.size());
    // panel p of P keys lies in panel p P / wider of the wider ones (wider = k P), or in the one
    // panel of every key
    const std::int64_t ratio = wider % panel == 0 ? wider / panel : 0;
    for (std::int64_t b = 0; b < blocks(); ++b) {
        const auto lo = static_cast<std::size_t>(offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(offsets[static_cast<std::size_t>(b) + 1]);
        const std::size_t first = out.cells.size();
        for (std::size_t c = lo; c < hi; ++c) {
            const std::int64_t p = ratio > 0 ? cells[c].first / ratio : 0;
            if (out.cells.size() > first && out.cells.back().first == p)
                out.cells.back().second += cells[c].second;
            else
                out.cells.emplace_back(p, cells[c].second);
        }
        out.offsets[static_cast<std::size_t>(b) + 1] = static_cast<std::int64_t>(out.cells.size());
    }
    return out;
}

ElementPanels PanelFill::plan(RunBound bound) const {
    ElementPanels plan;
    plan.panel = panel;
    plan.bounds = bounds;
    std::int64_t cap = 0; // the fullest panel of any block
    for (const auto& [p, k] : cells)
        cap = std::max(cap, k);
    // --- per block, its visits: runs of adjacent filled panels within the cap. powerlaw:32's
    // hubs fill a panel of 8192 keys that light blocks' two panels together do not, so most of
    // its blocks visit their keys once ---
    plan.offsets.assign(offsets.size(), 0);
    plan.visits.reserve(cells.size());
    for (std::int64_t b = 0; b < blocks(); ++b) {
        const auto u = static_cast<std::size_t>(b);
        const std::size_t first = plan.visits.size();
        for (auto c = static_cast<std::size_t>(offsets[u]);
             c < static_cast<std::size_t>(offsets[u + 1]);
             ++c) {
            const auto [p, k] = cells[c];
            if (plan.visits.size() == first || plan.visits.back().keys + k > cap) {
                plan.visits.push_back({p, 0, 0, 0, 1});
            } else {
                plan.visits.back().span = p - plan.visits.back().panel + 1;
            }
            plan.visits.back().keys += k;
        }
        // --- each visit's run, bounded: some row sees at least keys / rows of the visit's keys
        // (each key has a row), none more than the visit's keys or the longest row's, plus the
        // key that ends its run, unless the visit is the block's last ---
        const std::int64_t r = bounds[u + 1] - bounds[u];
        for (std::size_t v = first; v < plan.visits.size(); ++v) {
            PanelVisit& at = plan.visits[v];
            const std::int64_t ends = v + 1 < plan.visits.size() ? 1 : 0;
            at.run = bound == RunBound::upper ? std::min(at.keys, longest[u]) + ends
                                              : (at.keys + r - 1) / r;
            at.run = std::max<std::int64_t>(at.run, 1);
        }
        plan.offsets[u + 1] = static_cast<std::int64_t>(plan.visits.size());
    }
    return plan;
}

} // namespace ioattn::sparse::detail
