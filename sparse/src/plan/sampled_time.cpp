// ioattn::sparse::detail::pick and sampled_time (see plan/structure.hpp): the single-kernel
// rule of a priced split, and the estimate on a sample of row blocks by which the variant
// planner (variant_plan.cpp) decides which other tile heights to price whole. Pricing the two
// other heights took 40-65% of the forward plan of the suite's tiled patterns at N = 16384
// (bigbird, strided, dilated, block, bigbird-block); a sample of the tuned height's blocks
// costs an eighth of a height there.
// Tests: tests/sparse/variants_test.cpp

#include "plan/structure.hpp"
#include "support/block_keys.hpp"

#include <algorithm>

namespace ioattn::sparse::detail {

Pick pick(const Split& priced, double all_element) {
    Pick p = Pick::split;
    double cost = priced.cost;
    for (const bool tiles : {true, false}) {
        const double all = tiles ? priced.all_tiles_cost : all_element;
        if (all * kSplitGain > cost)
            continue;
        p = tiles ? Pick::all_tiles : Pick::all_element;
        cost = all;
    }
    return p;
}

double sampled_time(const Support& s,
                    std::int64_t rows,
                    Pass pass,
                    const CostModel& cm,
                    const std::vector<std::pair<std::int64_t, std::int64_t>>& windows) {
    const Support& view = pass == Pass::forward ? s : s.transposed();
    const std::int64_t n_q = view.n_q(), nb = (n_q + rows - 1) / rows;
    // a heavy row's block is priced whole and not scaled: as one block of the sample it would
    // count stride times (bigbird:64:2:3's height 32 at 1.5x its whole price)
    const std::int64_t heavy_z = heavy_above(view);
    std::vector<std::int64_t> heavy, light; // blocks priced whole; blocks of the sample
    std::int64_t heavy_rows = 0, light_rows = 0;
    std::size_t w = 0;
    for (std::int64_t b = 0; b < nb; ++b) {
        const std::int64_t i0 = b * rows, i1 = std::min(n_q, i0 + rows);
        bool is_heavy = false;
        for (std::int64_t i = i0; i < i1 && !is_heavy; ++i)
            is_heavy = view.row_nonzeros(i) > heavy_z;
        while (w < windows.size() && windows[w].second <= i0)
            ++w;
        if (is_heavy) {
            heavy.push_back(b);
            heavy_rows += i1 - i0;
        } else if (w < windows.size() && windows[w].first <= i0) { // it starts in the window
            light.push_back(b);
            light_rows += i1 - i0;
        }
    }
    const Split h = heavy.empty() ? Split{} : price_by_fill(view, rows, cm, nullptr, heavy);
    const Split l = light.empty() ? Split{} : price_by_fill(view, rows, cm, nullptr, light);
    const double scale =
        light_rows > 0 ? static_cast<double>(n_q - heavy_rows) / static_cast<double>(light_rows)
                       : 0.0;
    const auto whole = [&](auto x, auto y) {
        return static_cast<double>(x) + scale * static_cast<double>(y);
    };
    Split e; // the estimate of the whole, for the pick
    e.cost = whole(h.cost, l.cost);
    e.all_tiles_cost = whole(h.all_tiles_cost, l.all_tiles_cost);
    const double pairs = whole(h.pairs, l.pairs);
    double time = e.cost + whole(h.tile_columns, l.tile_columns) * cm.tile_column;
    switch (pick(e, pairs * cm.element_pair)) {
    case Pick::all_tiles:
        time = e.all_tiles_cost + whole(h.all_tiles_columns, l.all_tiles_columns) * cm.tile_column;
        break;
    case Pick::all_element:
        time = pairs * cm.element_pair;
        break;
    case Pick::split:
        break;
    }
    return n_q > 0 ? time / static_cast<double>(n_q) : 0.0;
}

} // namespace ioattn::sparse::detail
