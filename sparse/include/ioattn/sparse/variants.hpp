#pragma once
/// The variants of the fused sparse schedule and the planner that picks them by structure
/// (docs/design.md section 7). Tiles pay only where their pairs are dense, so:
///   tile      forward_fused / backward_fused: masked dense tiles over each query block's key
///             list (whole key blocks read in place): banded and block patterns;
///   element   forward_element / backward_element: one query row at a time over its own keys
///             (K_j, V_j gathered per allowed key), 2-D cache blocked: scattered rows;
///   split     per query block, the key columns dense enough for tiles (and every pair of a
///             global row) through the tile variant and the other pairs
///             through the element variant, one softmax;
///   permuted  rows and keys reordered (by residue when every allowed i' - j shares a factor,
///             keys by the query blocks that see them), so that strided and dilated patterns
///             become banded, then the variants above on the reordered structure; the
///             reordering of Q, K, V, O and the gradients is applied inside the call and
///             counted as I/O.
/// Every variant computes the same attention (up to rounding) and is bitwise independent of
/// the thread count; its counted I/O equals its closed form and is the same under every
/// instruction set.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace ioattn::sparse {

namespace detail {
struct VariantParts; // the decomposed and reordered supports of a plan (private)
} // namespace detail

/// A variant of the fused sparse schedule (see the header comment).
enum class Variant : std::uint8_t { tile, element, split, permuted };

std::string_view to_string(Variant v);

/// Parses "tile", "element", "split", "permuted"; throws InvalidArgument otherwise.
Variant parse_variant(std::string_view text);

/// The planner's decision for one pass of the fused schedule over one support: a value, as
/// a Tiling is. Blocks are tile.rows consecutive query rows (forward) or keys (backward: the
/// tile backward keeps key blocks resident); each block's key (query) columns whose tile would
/// be dense enough go to the tile part, the other pairs to the element part.
struct VariantPlan {
    Pass pass = Pass::forward;
    Variant variant = Variant::tile; ///< what the call runs
    Variant inner = Variant::tile;   ///< permuted: what runs on the reordered structure
    Tiling tile;                     ///< of the tile part (forward_fused / backward_fused)
    Tiling element;                  ///< of the element part (forward_element / ...)
    std::int64_t tile_blocks = 0;    ///< blocks whose pairs all take tiles
    std::int64_t element_blocks = 0; ///< blocks whose pairs all go element by element
    std::int64_t split_blocks = 0;   ///< blocks with both
    std::int64_t tile_pairs = 0;     ///< pairs of the tile part
    std::int64_t element_pairs = 0;  ///< pairs of the element part
    bool rows_reordered = false;     ///< permuted: rows (and Q, O, dO, L, dQ) reordered
    bool keys_reordered = false;     ///< permuted: keys (and K, V, dK, dV) reordered
    /// Forward with both parts: each tile block takes its rows' element pairs from its resident
    /// state (no second pass over Q, O and L), when that state fits M beside the tile scratch.
    bool element_in_tiles = false;
    double estimate = 0; ///< the cost model's time estimate (relative units)
    /// The fast memory the plan was made for: M, or under the io objective the grid memory
    /// M' <= M whose plan moves the fewest words (plan_fewest_words); its tilings fit M'.
    std::int64_t planned_for = 0;
    std::shared_ptr<const detail::VariantParts> parts;
};

/// Plans the fused schedule of `pass` over `support` for fast memory M (in words of Scalar): the
/// structure is split per block by the cost model (measured per-pair costs of the tile and element
/// kernels, and of gathering and reordering rows; variant_plan.cpp), the reordering of the permuted
/// variant is tried when the structure has one, and the cheapest estimate wins; `force` runs the
/// given variant instead (permuted with an identity reordering runs its inner plan unreordered).
/// `tile` is the tile part's tiling, kept (nullopt: tuned_tiling of the fused schedule, whose
/// height the planner lowers by one or halves when that cuts its estimate by 3%: strided:L's
/// backward aligns its blocks to the L - 1 own keys left once the summary keys are gathered, narrow
/// bands mask less of shorter tiles). The tilings fit M. The plan is kept with the support
/// (Support::cached_value, by shape, memory, pass, Scalar, force and tile): a second call returns
/// it without planning again. O(Z_QK log) time; the plan holds copies of the parts.
/// Throws InvalidArgument (support shape, causal problem, a tile tiling that is not fused) and
/// CapacityError (no tiling fits M).
template <typename Scalar>
VariantPlan plan_variants(const Problem& problem,
                          const Support& support,
                          const MemoryModel& memory,
                          Pass pass,
                          std::optional<Variant> force = std::nullopt,
                          std::optional<Tiling> tile = std::nullopt);

/// The memories the io objective plans for, at most m, largest first: the powers of two and
/// the smallest M of each schedule of `pass` (smallest_memory; the first points that fit), all
/// <= m. A function of the problem, so the points up to m only gain points as m grows.
std::vector<std::int64_t>
memory_grid(const Problem& problem, Pass pass, Kernels kernels, std::int64_t m);

/// The io objective's plan of `pass` (docs/design.md section 7.1): among the plans the
/// planner makes for each grid memory M' <= M (memory_grid), for each variant (or the forced
/// one) with its tile part tiled as timed runs tile it (plan_variants' tuned tiling) and as
/// Tiling::for_memory(M') tiles it (the tallest blocks M' holds), and unforced the planner's
/// own pick for M' (plan_variants(problem, support, M', pass)), the one with the fewest
/// counted words (io_cost; ties: the largest M'). A plan made for M' runs under any M >= M'
/// with the same counted words, and the candidates for M include those for every smaller M,
/// so io_cost of the result is non-increasing in M. Each candidate's words are kept with the
/// support (a sweep over M plans each once); the result is plan_variants(problem, support,
/// MemoryModel{M'}, pass, variant, tile), planned_for = M'. Throws as plan_variants, and
/// CapacityError when no candidate fits M.
template <typename Scalar>
VariantPlan plan_fewest_words(const Problem& problem,
                              const Support& support,
                              const MemoryModel& memory,
                              Pass pass,
                              std::optional<Variant> force = std::nullopt);

/// Runs a forward plan: the variants' kernels over their parts, one softmax (the element part
/// inside the tile blocks when plan.element_in_tiles, else resuming from the tile part's
/// outputs; a plan with element_in_tiles run with a memory below its residency throws
/// InvalidArgument). Same results as forward_reference up to rounding,
/// bitwise independent of the thread count. I/O = io_cost(problem, support, plan).
template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Support& support,
             const VariantPlan& plan,
             const MemoryModel& memory,
             Counter& counter);

/// Runs a backward plan (the element part adds into the tile part's gradients).
template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Support& support,
              const VariantPlan& plan,
              const MemoryModel& memory,
              Counter& counter);

/// Exact I/O of a plan: the sum of its kernels' closed forms over their parts, plus the
/// reordering's copies (permuted); peak the largest of theirs.
template <typename Scalar>
IoReport io_cost(const Problem& problem, const Support& support, const VariantPlan& plan);

} // namespace ioattn::sparse
