// ioattn::sparse element plan, ElementPanels (see kernels/element/panels.hpp).
// Tests: tests/sparse/element_test.cpp, plan_shortcuts_whitebox_test.cpp

#include "kernels/element/panels.hpp"

#include "kernels/element/panel_fill.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace ioattn::sparse::detail {

ElementPanels
ElementPanels::build(const Support& support, std::int64_t max_rows, std::int64_t panel) {
    // --- the blocks and their visits (panel_fill.hpp), then each visit's longest walk and
    // index reads (a row's run over the visit's whole range) ---
    ElementPanels plan = PanelFill::build(support, max_rows, panel).plan(RunBound::lower);
    const std::int64_t n = plan.blocks();
    const std::int64_t n_panels = (support.n_k() + panel - 1) / panel;
    // each key's panel, looked up: a division per pair was a third of the build
    std::vector<std::int64_t> panel_of(static_cast<std::size_t>(support.n_k()));
    parallel_for_tiles((support.n_k() + 4095) / 4096, [&](std::int64_t t, int) {
        for (std::int64_t j = t * 4096; j < std::min(support.n_k(), (t + 1) * 4096); ++j)
            panel_of[static_cast<std::size_t>(j)] = j / panel;
    });
    const kernels::Workspace<std::int64_t> visit_of(max_concurrency(), n_panels); // panel -> visit
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        const auto first = static_cast<std::size_t>(plan.offsets[static_cast<std::size_t>(b)]);
        const std::span<PanelVisit> out(
            plan.visits.data() + first,
            static_cast<std::size_t>(plan.offsets[static_cast<std::size_t>(b) + 1]) - first);
        std::int64_t* seg = visit_of.slab(w);
        for (std::size_t v = 0; v < out.size(); ++v) {
            out[v].run = 0;
            for (std::int64_t p = out[v].panel; p < out[v].panel + out[v].span; ++p)
                seg[p] = static_cast<std::int64_t>(v);
        }
        std::vector<std::int64_t> ends(out.size(), 0); // rows whose last key is in a visit
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto row = support.row(i);
            for (std::size_t e = 0; e < row.size();) {
                // the row's keys in visit v: those below its end key (a key's visit looked up
                // once per visit, not per key: two dependent loads a pair were most of this walk)
                const std::int64_t v = seg[panel_of[static_cast<std::size_t>(row[e])]];
                PanelVisit& at = out[static_cast<std::size_t>(v)];
                const std::int64_t end = plan.end_key(at);
                std::size_t f = e + 1;
                while (f < row.size() && row[f] < end)
                    ++f;
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
    return plan;
}

} // namespace ioattn::sparse::detail
