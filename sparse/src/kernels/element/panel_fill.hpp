#pragma once
// The first half of an element plan (panels.hpp): the row blocks and, per block, how many of its
// distinct keys each key panel holds. Everything of an ElementPanels but the rows' walks (each
// visit's longest run and index reads) follows from it, and the fill at panels of k P keys
// follows from the fill at P by summing adjacent panels (a key lies in one panel), so the element
// tiling's search over panel widths (widened_element_tiling) walks Omega once per block height
// instead of once per width tried. Built in parallel in O(Z_QK + blocks * panels); widened in
// O(filled panels); the same for every thread count.

#include "kernels/element/panels.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

/// Which bound of each visit's run PanelFill::plan writes (the run depends on the rows' walks):
/// a row's walk in a visit reads its keys there, one of them at least and at most the visit's
/// keys or the block's longest row, plus the key that ends its run when it goes on.
enum class RunBound { lower, upper };

struct PanelFill {
    std::int64_t panel = 1;            ///< P: keys per panel
    std::int64_t n_k = 0;              ///< the support's keys
    std::vector<std::int64_t> bounds;  ///< n_blocks + 1 row boundaries (ElementPanels::build's)
    std::vector<std::int64_t> longest; ///< per block, its longest row's keys
    std::vector<std::int64_t> offsets; ///< n_blocks + 1 offsets into cells
    /// per block, (panel, distinct keys of the block there) of its non-empty panels, ascending
    std::vector<std::pair<std::int64_t, std::int64_t>> cells;

    [[nodiscard]] std::int64_t blocks() const {
        return static_cast<std::int64_t>(bounds.size()) - 1;
    }

    /// Blocks of at most max_rows rows closed as ElementPanels::build closes them, panels of
    /// `panel` keys. Throws InvalidArgument if max_rows < 1 or panel < 1.
    static PanelFill build(const Support& support, std::int64_t max_rows, std::int64_t panel);

    /// Whether widened(wider) is exact: wider is a multiple of P, or one panel holds every key.
    [[nodiscard]] bool widens_to(std::int64_t wider) const {
        return wider >= 1 && (wider % panel == 0 || wider >= n_k);
    }

    /// The fill at panels of `wider` keys (precondition: widens_to(wider)).
    [[nodiscard]] PanelFill widened(std::int64_t wider) const;

    /// The element plan of this fill, its visits grouped as ElementPanels::build groups them,
    /// every visit's run set to the `bound` of its walks and its index reads left 0: the peaks
    /// of the plans of both bounds bracket the peak of the built plan (forward_element_peak
    /// and backward_element_peak grow with each run), and its blocks' visits and keys are the
    /// built plan's.
    [[nodiscard]] ElementPanels plan(RunBound bound) const;
};

} // namespace ioattn::sparse::detail
