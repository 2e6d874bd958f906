// ioattn::sparse::memory_grid and plan_fewest_words: the io objective of the variant planner
// (docs/design.md section 7.1). The speed objective tiles for this CPU: 64-row tile blocks
// once they fit, whatever M is, so a larger M can run shorter blocks that read each key more
// often (window:256 at N = 4096: 1.97M words at M = 65,536, 5.08M at M = 131,072). The io
// objective instead takes, over a fixed grid of memories M' <= M (powers of two and each
// schedule's smallest M), each variant's plan for M' with its tile part tiled the timed way
// and the Tiling::for_memory way, and keeps the one with the fewest counted words:
//   for M' in memory_grid(M), largest first:
//     for each variant v (or the forced one), tile in {tuned, for_memory(M')},
//     and unforced the speed objective's own plan for M':
//       words = io_cost(plan_variants(M', v, tile))      kept with the support
//   the fewest words (ties: the largest M')
// A plan made for M' fits M >= M' and its counted words do not depend on M, and the grid
// points up to M grow with M, so the result's counted I/O is non-increasing in M.
// Cost: each candidate is planned once per support (O(Z_QK log) each), then a lookup.
// Tests: tests/sparse/monotone_io_test.cpp

#include "plan/variant_parts.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/variants.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace ioattn::sparse {

namespace {

/// The counted words of each candidate planned so far (-1: no plan fits its memory), by key.
struct WordsTable {
    mutable std::mutex mutex;
    mutable std::map<std::string, std::int64_t> words;
};

const WordsTable& words_table(const Support& s) {
    return *std::static_pointer_cast<const WordsTable>(
        s.cached_value("fewest-words", [] { return std::make_shared<const WordsTable>(); }));
}

/// The counted words of plan_fresh(p, s, {m}, pass, force, tile), or -1 if it does not fit.
template <typename Scalar>
std::int64_t candidate_words(const Problem& p,
                             const Support& s,
                             std::int64_t m,
                             Pass pass,
                             std::optional<Variant> force,
                             const std::optional<Tiling>& tile) {
    const auto number = [](std::int64_t x) { return std::to_string(x) + ","; };
    const std::string key = number(static_cast<std::int64_t>(pass)) +
                            number(static_cast<std::int64_t>(sizeof(Scalar))) + number(p.batch) +
                            number(p.heads) + number(p.kv_heads) + number(p.n_q) + number(p.n_k) +
                            number(p.d) + number(p.d_v) + number(m) +
                            number(force ? static_cast<std::int64_t>(*force) : -1) +
                            (tile ? number(tile->rows) + number(tile->cols) : "tuned");
    const WordsTable& table = words_table(s);
    {
        const std::lock_guard<std::mutex> lock(table.mutex);
        if (const auto it = table.words.find(key); it != table.words.end())
            return it->second;
    }
    std::int64_t words = -1;
    try { // planned outside the lock: it runs parallel loops
        const VariantPlan plan =
            detail::plan_fresh<Scalar>(p, s, MemoryModel{m}, pass, force, tile);
        words = io_cost<Scalar>(p, s, plan).total();
    } catch (const CapacityError&) {
        words = -1;
    }
    const std::lock_guard<std::mutex> lock(table.mutex);
    table.words.emplace(key, words);
    return words;
}

} // namespace

std::vector<std::int64_t>
memory_grid(const Problem& problem, Pass pass, Kernels kernels, std::int64_t m) {
    const Problem p = problem.resolved("ioattn::sparse::memory_grid");
    std::vector<std::int64_t> grid;
    std::int64_t first = 0;
    for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
        const std::int64_t smallest = smallest_memory(p, pass, s, kernels);
        if (smallest > 0 && smallest <= m)
            grid.push_back(smallest);
        if (smallest > 0)
            first = first == 0 ? smallest : std::min(first, smallest);
    }
    for (std::int64_t g = 1; first > 0 && g <= m; g *= 2) {
        if (g > first)
            grid.push_back(g);
        if (g > m / 2)
            break;
    }
    std::sort(grid.begin(), grid.end(), std::greater<>());
    grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
    return grid;
}

template <typename Scalar>
VariantPlan plan_fewest_words(const Problem& problem,
                              const Support& support,
                              const MemoryModel& memory,
                              Pass pass,
                              std::optional<Variant> force) {
    constexpr const char* kWhere = "ioattn::sparse::plan_fewest_words";
    const Problem p = problem.resolved(kWhere);
    memory.validate(kWhere);
    // the checks of plan_variants, once (its plan for M is a candidate's shape too)
    if (support.n_q() != p.n_q || support.n_k() != p.n_k || p.causal)
        (void)plan_variants<Scalar>(p, support, memory, pass, force);
    std::int64_t best_words = -1, best_m = 0;
    std::optional<Variant> best_variant;
    std::optional<Tiling> best_tile;
    // unforced, the speed objective's own plan for M' too (the planner's pick, tuned)
    const auto variants =
        force
            ? std::vector<std::optional<Variant>>{*force}
            : std::vector<std::optional<Variant>>{
                  std::nullopt, Variant::tile, Variant::element, Variant::split, Variant::permuted};
    for (const std::int64_t m : memory_grid(p, pass, Kernels::sparse, memory.fast_words)) {
        const auto tall =
            Tiling::try_for_memory(Schedule::fused, MemoryModel{m}, p, pass, Kernels::sparse);
        for (const std::optional<Variant> v : variants)
            for (const bool tuned : {true, false}) {
                if (!tuned && (!tall || !v || v == Variant::element)) // element: no tile part
                    continue;
                const std::optional<Tiling> tile = tuned ? std::nullopt : tall;
                const std::int64_t words = candidate_words<Scalar>(p, support, m, pass, v, tile);
                if (words >= 0 && (best_words < 0 || words < best_words)) {
                    best_words = words;
                    best_m = m;
                    best_variant = v;
                    best_tile = tile;
                }
            }
    }
    if (best_words < 0)
        throw CapacityError(std::string(kWhere) + ": no plan of the fused schedule fits M = " +
                            std::to_string(memory.fast_words) + " words");
    return plan_variants<Scalar>(p, support, MemoryModel{best_m}, pass, best_variant, best_tile);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template VariantPlan plan_fewest_words<Scalar>(                                                \
        const Problem&, const Support&, const MemoryModel&, Pass, std::optional<Variant>);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse
