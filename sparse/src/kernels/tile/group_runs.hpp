#pragma once
// The fused sparse backward's split of Omega^T's key blocks into runs per group of dQ partial
// sums (backward_fused.cpp): each group takes several runs of consecutive key blocks that hold
// about the same share of the entries. Its counted I/O does not depend on the runs.

#include "support/block_keys.hpp"

#include <cstdint>
#include <vector>

namespace ioattn::sparse::detail {

/// Runs of consecutive key blocks per group of the sparse fused backward (group_runs): 4 runs
/// over 1: 1.20x on strided:64's permuted backward (ioattn run --N 16384 --d 64 --pattern
/// strided:64 --pass backward --schedule fused --threads 2 --repeat 20).
inline constexpr std::int64_t kGroupRuns = 4;

/// The sparse fused backward's runs of key blocks (backward_fused.cpp; its counted I/O does
/// not depend on them: io_cost_backward.cpp): G * kGroupRuns runs of consecutive blocks of
/// Omega^T's plan, each holding about the same share of the entries the blocks compute
/// (|queries(j)| rows(j)); run u is [cuts[u], cuts[u + 1]) and belongs to group u mod G.
/// Consecutive key blocks of a band stream overlapping queries, so a group that takes them in
/// a row adds into dQ partial rows it has just written (still in cache), and pass R sums fewer
/// partials per row; blocks j, j + G, .. (the dense kernel's groups) touch each row in up to
/// three groups. Several runs per group, spread over the plan, keep the groups' work even where
/// the entries' cost varies (gathered queries, heavy summary keys). Against blocks j, j + G,
/// ..: 1.14x on bigbird:64:2:3 (ioattn run --N 16384 --d 64 --pattern bigbird:64:2:3 --pass
/// backward --schedule fused --threads 2 --repeat 20).
inline std::vector<std::int64_t> group_runs(const BlockKeys& kplan, std::int64_t groups) {
    const std::int64_t kb = kplan.blocks(), runs = groups * kGroupRuns;
    std::vector<std::int64_t> cuts(static_cast<std::size_t>(runs) + 1, kb);
    cuts[0] = 0;
    std::int64_t total = 0;
    for (std::int64_t j = 0; j < kb; ++j)
        total += static_cast<std::int64_t>(kplan.keys_of(j).size()) * kplan.rows(j);
    std::int64_t done = 0, u = 1;
    for (std::int64_t j = 0; j < kb && u < runs; ++j) {
        // block j closes run u - 1 once the runs before u hold u / runs of the entries
        done += static_cast<std::int64_t>(kplan.keys_of(j).size()) * kplan.rows(j);
        while (u < runs && done * runs >= u * total)
            cuts[static_cast<std::size_t>(u++)] = j + 1;
    }
    return cuts;
}

/// f(j) for the key blocks of group g, in order (runs g, g + G, .. of group_runs' cuts).
template <typename F>
void for_group_blocks(const std::vector<std::int64_t>& cuts,
                      std::int64_t groups,
                      std::int64_t g,
                      F&& f) {
    const auto runs = static_cast<std::int64_t>(cuts.size()) - 1;
    for (std::int64_t u = g; u < runs; u += groups)
        for (std::int64_t j = cuts[static_cast<std::size_t>(u)];
             j < cuts[static_cast<std::size_t>(u) + 1];
             ++j)
            f(j);
}

/// The entries of group g's blocks that `computes(j)` keeps: the work by which a timed run
/// starts the heavy groups first (kHeavyGroup). A group holding a heavy block (strided:64's
/// summary keys once permuted: one block of 60 keys seen by 4,033 queries, half the entries at
/// N = 4096, 900 us of the sweep's 2.1 ms on one thread) then starts first instead of last
/// while the other worker takes the rest; the groups' blocks, the order inside each and every
/// sum stay the same.
template <typename Computes>
std::int64_t group_entries(const BlockKeys& kplan,
                           const std::vector<std::int64_t>& cuts,
                           std::int64_t groups,
                           std::int64_t g,
                           Computes&& computes) {
    std::int64_t entries = 0;
    for_group_blocks(cuts, groups, g, [&](std::int64_t j) {
        if (computes(j))
            entries += static_cast<std::int64_t>(kplan.keys_of(j).size()) * kplan.rows(j);
    });
    return entries;
}

/// A group of at least kHeavyGroup x the mean entries starts first (heavy_first,
/// ioattn/parallel.hpp); the others keep group order, in which neighbouring groups' runs are
/// neighbouring key blocks. strided:64's permuted backward at N = 4096: 0.80x (0.77-0.82) the
/// 2-thread time, from 1 to 2 threads 1.75 (1.53-1.76) against 1.40 (1.35-1.44) in group order
/// (`ioattn bench --suite sparse --N 4096 --d 64`, 3 alternated runs; dense 1.98; the other
/// backward rows 1.00-1.05x). Every group sorted by entries instead: the same for strided:64,
/// but dilated:256:4's permuted backward 1.10x the 2-thread time. 2, not heavy_first's 4: with
/// 8 groups a group holding 41% of the entries is 3.3x the mean.
inline constexpr double kHeavyGroup = 2.0;

} // namespace ioattn::sparse::detail
