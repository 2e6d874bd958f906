#pragma once
// The element kernels' plan (forward_element.cpp, backward_element.cpp): row blocks balanced by
// nonzeros, and for each block the key panels its rows touch, with the distinct keys it reads
// in each and the longest run of one row's keys there. Structure only; built in parallel in
// O(Z_QK + blocks * panels); the same for every thread count.
//
// 2-D cache blocking: a block's per-row state stays resident while the panels of keys [p P,
// (p + 1) P) pass one after the other; within a panel every row of the block consumes its run
// of keys there, so the panel's K and V rows are read from slow memory once per block and
// reused from fast memory by every row that sees them. A block visits adjacent panels at once
// while they hold no more of its distinct keys than the fullest panel of any block: a power
// law's hubs fill their panels, so the plan's P is narrow, and light blocks walk each row
// once instead of once per panel (PanelVisit::span).

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace ioattn::sparse::detail {

/// One visit of a block to its keys in a range of panels [panel, panel + span): the distinct
/// keys of the block there, the most indices one row's walk reads there (its run of keys, plus
/// the first key past the range that ends the run when the row goes on), and the indices all
/// rows' walks read there (the block's pairs in the range plus one per row with keys past it):
/// the kernels count those as index reads.
struct PanelVisit {
    std::int64_t panel = 0;
    std::int64_t keys = 0;
    std::int64_t run = 0;
    std::int64_t reads = 0;
    std::int64_t span = 1;
};

struct ElementPanels {
    std::int64_t panel = 1;            ///< P: keys per panel
    std::vector<std::int64_t> bounds;  ///< n_blocks + 1 row boundaries
    std::vector<std::int64_t> offsets; ///< n_blocks + 1 offsets into visits
    std::vector<PanelVisit> visits;    ///< per block, its panels in increasing order

    [[nodiscard]] std::int64_t blocks() const {
        return static_cast<std::int64_t>(bounds.size()) - 1;
    }

    [[nodiscard]] std::int64_t row0(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b)];
    }

    [[nodiscard]] std::int64_t rows(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b) + 1] - bounds[static_cast<std::size_t>(b)];
    }

    /// The key range [first_key, end_key) of a visit.
    [[nodiscard]] std::int64_t first_key(const PanelVisit& v) const { return v.panel * panel; }

    [[nodiscard]] std::int64_t end_key(const PanelVisit& v) const {
        return (v.panel + v.span) * panel;
    }

    [[nodiscard]] std::span<const PanelVisit> visits_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const PanelVisit>(visits).subspan(lo, hi - lo);
    }

    /// Blocks of at most max_rows rows, closed once they hold max_rows * ceil(Z_QK / n_q)
    /// pairs (so every block has about the same work), panels of `panel` keys; a block visits
    /// adjacent panels at once while together they hold no more distinct keys of it than the
    /// fullest panel of any block (so the visits' residency stays within the panels'). Throws
    /// InvalidArgument if max_rows < 1 or panel < 1.
    static ElementPanels build(const Support& support, std::int64_t max_rows, std::int64_t panel);
};

/// Fast-memory words of the element kernels' layout, counted as laid out: every row of an
/// operand padded to 64 bytes (16 floats, 8 doubles) whatever the vector width, so counts are
/// the same under every instruction set; an index (std::int64_t) is 8 bytes of words.
struct ElementWords {
    std::int64_t line = 16; ///< words per 64 bytes
    std::int64_t index = 2; ///< words per index

    static ElementWords of(std::int64_t word_bytes) { return {64 / word_bytes, 8 / word_bytes}; }

    /// n words rounded up to whole 64-byte lines.
    [[nodiscard]] std::int64_t pad(std::int64_t n) const { return (n + line - 1) / line * line; }

    /// n indices, rounded up to whole lines.
    [[nodiscard]] std::int64_t indices(std::int64_t n) const { return pad(n * index); }
};

/// Words the split forward's element pairs keep resident inside a tile block
/// (block_element.hpp) beside the tile scratch, the same under every instruction set: the row
/// state of `rows` rows (q, O rows padded to 64-byte lines, m, l) and one batch's K and V
/// rows, at most kBlockBatchKeys of them (kLanes rows of kShortRun keys, or 2 kLanes keys of one
/// row, for up to 16 lanes).
inline constexpr std::int64_t kBlockBatchKeys = 64;

inline std::int64_t block_element_words(const Problem& p, std::int64_t rows, ElementWords w) {
    return rows * (w.pad(p.d) + w.pad(p.d_v)) + 2 * w.pad(rows) +
           kBlockBatchKeys * (w.pad(p.d) + w.pad(p.d_v));
}

/// Peak residency of forward_element on the plan (see forward_element.cpp).
std::int64_t forward_element_peak(const Problem& p, const ElementPanels& plan, ElementWords w);

/// Peak residency of backward_element on the plans of Omega (rows) and Omega^T (keys).
std::int64_t backward_element_peak(const Problem& p,
                                   const ElementPanels& rows,
                                   const ElementPanels& keys,
                                   ElementWords w);

/// Checks an element tiling (fused schedule, rows and cols >= 1; InvalidArgument naming
/// `where`) and returns its plan over `support` (Support::cached_element_panels: built once).
const ElementPanels&
element_panels(const Support& support, const Tiling& tiling, const char* where);

/// `base` (element_tiling: panels sized for the worst case, P distinct keys each) with its
/// panels widened, doubling up to n_k, while the kernels' peak for `pass` over this structure's
/// own plans still fits M: a panel holds only the keys some row of the block sees there, so
/// scattered rows fit far wider panels, and each (row, panel) a row has keys in costs a
/// softmax update. Tried only when a row has few keys per base panel (fewer than
/// kWidenBelow on average). The counted I/O does not depend on the width (a block reads each
/// of its keys once, in its panel) but for the index walks, which it shortens.
template <typename Scalar>
Tiling widened_element_tiling(const Problem& p,
                              const Support& support,
                              const Tiling& base,
                              const MemoryModel& memory,
                              Pass pass);

/// Whether the element kernels' peak for `pass` over this structure's own panels under t (built
/// and kept with the support and, for the backward, its transpose: the kernels' own) fits M.
template <typename Scalar>
bool element_tiling_fits(const Problem& p,
                         const Support& support,
                         const Tiling& t,
                         const MemoryModel& memory,
                         Pass pass);

/// Throws CapacityError naming `where` when `peak` words exceed M.
void check_element_peak(std::int64_t peak, const MemoryModel& memory, const char* where);

/// forward_element that starts from args.o and args.lse as the softmax state of every row
/// (resume: the outputs of another kernel over the other pairs), and backward_element that
/// adds into d_q, d_k, d_v (accumulate); kernels/isa_dispatch.cpp.
template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter,
                     bool resume);

template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter,
                      bool accumulate);

/// Their I/O: resume adds n_q (d_v + 1) reads per head, accumulate n_q d per head and
/// n_k (d + d_v) per kv head (io_cost_element.cpp).
template <typename Scalar>
IoReport io_cost_forward_element(const Problem& problem,
                                 const Support& support,
                                 const Tiling& tiling,
                                 bool resume);

template <typename Scalar>
IoReport io_cost_backward_element(const Problem& problem,
                                  const Support& support,
                                  const Tiling& tiling,
                                  bool accumulate);

} // namespace ioattn::sparse::detail
