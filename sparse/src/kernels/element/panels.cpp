// ioattn::sparse element plan, ElementPanels (see kernels/element/panels.hpp).
// Tests: tests/sparse/element_test.cpp

#include "kernels/element/panels.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace ioattn::sparse::detail {

ElementPanels
ElementPanels::build(const Support& support, std::int64_t max_rows, std::int64_t panel) {
    if (max_rows < 1 || panel < 1)
        throw InvalidArgument("ioattn::sparse::ElementPanels: rows = " + std::to_string(max_rows) +
                              ", panel = " + std::to_string(panel) + " (expected >= 1)");
    ElementPanels plan;
    plan.panel = panel;
    // --- blocks: at most max_rows rows and about max_rows * mean pairs each ---
    const std::int64_t n_q = support.n_q();
    const std::int64_t mean = n_q > 0 ? (support.z_qk() + n_q - 1) / n_q : 0;
    const std::int64_t budget = std::max<std::int64_t>(1, max_rows * mean);
    plan.bounds.push_back(0);
    std::int64_t count = 0, nnz = 0;
    for (std::int64_t i = 0; i < n_q; ++i) {
        if (count == max_rows || nnz >= budget) {
            plan.bounds.push_back(i);
            count = 0;
            nnz = 0;
        }
        ++count;
        nnz += support.row_nonzeros(i);
    }
    if (n_q > 0)
        plan.bounds.push_back(n_q);
    // --- per block, per panel: distinct keys (stamped with the block) ---
    const std::int64_t n = plan.blocks();
    const std::int64_t n_panels = (support.n_k() + panel - 1) / panel;
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> filled( // (panel, keys)
        static_cast<std::size_t>(n));
    const int workers = max_concurrency();
    // each key's panel, looked up: a division per pair was a third of the build
    std::vector<std::int64_t> panel_of(static_cast<std::size_t>(support.n_k()));
    parallel_for_tiles((support.n_k() + 4095) / 4096, [&](std::int64_t t, int) {
        for (std::int64_t j = t * 4096; j < std::min(support.n_k(), (t + 1) * 4096); ++j)
            panel_of[static_cast<std::size_t>(j)] = j / panel;
    });
    const kernels::Workspace<std::int64_t> stamps(workers, support.n_k());
    const kernels::Workspace<std::int64_t> keys(workers, n_panels);
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        std::int64_t* stamp = stamps.slab(w);
        std::int64_t* nk = keys.slab(w);
        std::fill(nk, nk + n_panels, std::int64_t{0});
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i)
            for (const std::int64_t j : support.row(i))
                if (stamp[j] != b + 1) {
                    stamp[j] = b + 1;
                    ++nk[panel_of[static_cast<std::size_t>(j)]];
                }
        for (std::int64_t p = 0; p < n_panels; ++p)
            if (nk[p] > 0)
                filled[static_cast<std::size_t>(b)].emplace_back(p, nk[p]);
    });
    std::int64_t cap = 0; // the fullest panel of any block
    for (const auto& f : filled)
        for (const auto& [p, k] : f)
            cap = std::max(cap, k);
    // --- per block, its visits: runs of adjacent filled panels within the cap, then each
    // visit's longest walk and index reads (a row's run over the visit's whole range).
    // powerlaw:32's hubs fill a panel of 8192 keys that light blocks' two panels together do
    // not, so most of its blocks visit their keys once ---
    std::vector<std::vector<PanelVisit>> per_block(static_cast<std::size_t>(n));
    const kernels::Workspace<std::int64_t> visit_of(workers, n_panels); // panel -> visit
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        auto& out = per_block[static_cast<std::size_t>(b)];
        std::int64_t* seg = visit_of.slab(w);
        for (const auto& [p, k] : filled[static_cast<std::size_t>(b)]) {
            if (out.empty() || out.back().keys + k > cap) {
                out.push_back({p, 0, 0, 0, 1});
            } else {
                out.back().span = p - out.back().panel + 1;
            }
            out.back().keys += k;
            seg[p] = static_cast<std::int64_t>(out.size()) - 1;
        }
        std::vector<std::int64_t> ends(out.size(), 0); // rows whose last key is in a visit
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto row = support.row(i);
            for (std::size_t e = 0; e < row.size();) {
                const std::int64_t v = seg[panel_of[static_cast<std::size_t>(row[e])]];
                std::size_t f = e;
                while (f < row.size() && seg[panel_of[static_cast<std::size_t>(row[f])]] == v)
                    ++f;
                PanelVisit& at = out[static_cast<std::size_t>(v)];
                const auto walked = static_cast<std::int64_t>(f - e + (f < row.size() ? 1 : 0));
                at.run = std::max(at.run, walked);
                at.reads += static_cast<std::int64_t>(f - e);
                e = f;
            }
            if (!row.empty())
                ++ends[static_cast<std::size_t>(
                    seg[panel_of[static_cast<std::size_t>(row.back())]])];
        }
        // every row whose last key lies past visit v reads one index there to end its run
        std::int64_t going_on = 0;
        for (std::size_t v = out.size(); v-- > 0;) {
            out[v].reads += going_on;
            out[v].run = std::max<std::int64_t>(out[v].run, 1);
            going_on += ends[v];
        }
    });
    plan.offsets.assign(static_cast<std::size_t>(n) + 1, 0);
    for (std::int64_t b = 0; b < n; ++b)
        plan.offsets[static_cast<std::size_t>(b) + 1] =
            plan.offsets[static_cast<std::size_t>(b)] +
            static_cast<std::int64_t>(per_block[static_cast<std::size_t>(b)].size());
    plan.visits.reserve(static_cast<std::size_t>(plan.offsets.back()));
    for (const auto& v : per_block)
        plan.visits.insert(plan.visits.end(), v.begin(), v.end());
    return plan;
}

} // namespace ioattn::sparse::detail
