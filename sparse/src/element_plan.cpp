// ioattn::sparse element plan (see element_plan.hpp). Tests: tests/sparse/element_test.cpp

#include "element_plan.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <string>

namespace ioattn::sparse::detail {

ElementPlan ElementPlan::build(const Support& support, std::int64_t max_rows, std::int64_t panel) {
    if (max_rows < 1 || panel < 1)
        throw InvalidArgument("ioattn::sparse::ElementPlan: rows = " + std::to_string(max_rows) +
                              ", panel = " + std::to_string(panel) + " (expected >= 1)");
    ElementPlan plan;
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
    // --- per block, per panel: distinct keys (stamped with the block) and the longest run ---
    const std::int64_t n = plan.blocks();
    const std::int64_t n_panels = (support.n_k() + panel - 1) / panel;
    std::vector<std::vector<PanelVisit>> per_block(static_cast<std::size_t>(n));
    const int workers = max_concurrency();
    const kernels::Workspace<std::int64_t> stamps(workers, support.n_k());
    const kernels::Workspace<std::int64_t> keys(workers, n_panels);
    const kernels::Workspace<std::int64_t> runs(workers, n_panels);
    const kernels::Workspace<std::int64_t> reads(workers, n_panels);
    const kernels::Workspace<std::int64_t> ends(workers, n_panels); // rows ending in a panel
    parallel_for_tiles(n, [&](std::int64_t b, int w) {
        std::int64_t* stamp = stamps.slab(w);
        std::int64_t* nk = keys.slab(w);
        std::int64_t* run = runs.slab(w);
        std::int64_t* rd = reads.slab(w);
        std::int64_t* end = ends.slab(w);
        for (std::int64_t* x : {nk, run, rd, end})
            std::fill(x, x + n_panels, std::int64_t{0});
        for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
            const auto row = support.row(i);
            for (std::size_t e = 0; e < row.size();) {
                const std::int64_t p = row[e] / panel;
                std::size_t f = e;
                for (; f < row.size() && row[f] / panel == p; ++f)
                    if (stamp[row[f]] != b + 1) {
                        stamp[row[f]] = b + 1;
                        ++nk[p];
                    }
                const auto walked = static_cast<std::int64_t>(f - e + (f < row.size() ? 1 : 0));
                run[p] = std::max(run[p], walked);
                rd[p] += static_cast<std::int64_t>(f - e);
                e = f;
            }
            if (!row.empty())
                ++end[row.back() / panel];
        }
        // every row whose last key lies past panel p reads one index there to end its run
        std::int64_t going_on = 0;
        for (std::int64_t p = n_panels - 1; p >= 0; --p) {
            rd[p] += going_on;
            going_on += end[p];
        }
        auto& out = per_block[static_cast<std::size_t>(b)];
        for (std::int64_t p = 0; p < n_panels; ++p)
            if (nk[p] > 0)
                out.push_back({p, nk[p], std::max<std::int64_t>(run[p], 1), rd[p]});
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
