// ioattn::sparse I/O: exact costs of the sparse schedules from the structure, the sparse bound
// (Li et al., Thm 4.5), the crossover M* = Z_input^2 / Z_QK and selection.

#include "fail.hpp"
#include "kernels/common/row_source.hpp"
#include "kernels/materialized/tile_rule.hpp"
#include "support/block_keys.hpp"
#include "support/chains.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/io_cost.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace ioattn::sparse {

namespace {

void require(const Problem& p, const Support& s, const Tiling& t, Schedule sch, const char* where) {
    if (s.n_q() != p.n_q || s.n_k() != p.n_k)
        throw InvalidArgument(std::string(where) + ": support shape does not match the problem");
    if (t.schedule != sch)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(t.schedule)) + " schedule");
    if (t.rows < 1 || t.cols < 1)
        throw InvalidArgument(std::string(where) + ": tiling sizes must be >= 1");
}

} // namespace

template <typename Scalar>
IoReport io_cost_forward_fused(const Problem& problem,
                               const Support& support,
                               const SparseInputs<Scalar>& inputs,
                               const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::sparse::io_cost_forward_fused");
    require(p, support, tiling, Schedule::fused, "ioattn::sparse::io_cost_forward_fused");
    const auto [q, k, v] =
        detail::shape_operands(p, inputs, "ioattn::sparse::io_cost_forward_fused");
    const detail::BlockKeys& plan = support.cached_block_keys(tiling.rows);
    std::int64_t reads = 0;
    for (std::int64_t slice = 0; slice < p.batch_heads(); ++slice) {
        const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
        for (std::int64_t blk = 0; blk < plan.blocks(); ++blk) {
            reads += q.words(b, h, plan.row0(blk), plan.rows(blk)) + plan.index_words<Scalar>(blk);
            for (const std::int64_t j : plan.keys_of(blk))
                reads += k.words(b, g, j) + v.words(b, g, j);
        }
    }
    const std::int64_t peak = plan.blocks() > 0 && p.batch_heads() > 0
                                  ? tiling.resident_words(p, Pass::forward, Kernels::sparse)
                                  : 0;
    return {reads, p.n_q * (p.d_v + 1) * p.batch_heads(), peak};
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_forward_fused<Scalar>(                                               \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

IoReport
io_cost_forward_fused(const Problem& problem, const Support& support, const Tiling& tiling) {
    return io_cost_forward_fused(problem, support, SparseInputs<float>{}, tiling);
}

template <typename Scalar>
IoReport io_cost_forward_materialized(const Problem& problem,
                                      const Support& support,
                                      const SparseInputs<Scalar>& inputs,
                                      const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::sparse::io_cost_forward_materialized");
    require(
        p, support, tiling, Schedule::materialized, "ioattn::sparse::io_cost_forward_materialized");
    const auto [q, k, v] =
        detail::shape_operands(p, inputs, "ioattn::sparse::io_cost_forward_materialized");
    // dense operands cost the same in every slice: count one and multiply
    const std::int64_t slices = detail::any_sparse(inputs) ? p.batch_heads() : 1;
    const std::int64_t b = tiling.rows, w = tiling.feature_chunk();
    const BlockView& view = support.cached_block_view(b, b);
    const std::int64_t kd = std::min(w, p.d), kv = std::min(w, p.d_v);
    const std::int64_t vch = (p.d_v + w - 1) / w, dch = (p.d + w - 1) / w;
    std::int64_t reads = 0, writes = 0, peak = 0;
    for (std::int64_t i = 0; i < view.row_blocks; ++i) {
        const std::int64_t r = view.block_rows(i), i0 = i * b;
        const auto tiles = view.tiles_of(i);
        std::int64_t nnz = 0, cmax = 0, per_pair = 0; // per_pair: the pairs of per-pair tiles
        for (const BlockTile& t : tiles) {
            const std::int64_t c = view.block_cols(t.col_block);
            nnz += t.nonzeros;
            cmax = std::max(cmax, c);
            per_pair += detail::per_pair_tile(t.nonzeros, r, c) ? t.nonzeros : 0;
        }
        const auto n_tiles = static_cast<std::int64_t>(tiles.size());
        // Q_i once when d <= w (held over the tiles), else once per tile
        const std::int64_t q_reads = p.d <= w ? std::min<std::int64_t>(n_tiles, 1) : n_tiles;
        for (std::int64_t slice = 0; slice < slices; ++slice) {
            const std::int64_t bb = slice / p.heads, h = slice % p.heads, g = h / p.group();
            reads += q_reads * q.words(bb, h, i0, r) + vch * nnz; // Q_i, scores
            // keys: the keep step, each SpMM chunk, each SDDMM chunk of a per-pair tile
            reads += kIndexReadWords<Scalar> * ((1 + vch) * nnz + dch * per_pair);
            // K_j, V_j: the rows of the keys the row block sees (each tile's touched keys)
            for (const std::int64_t j : view.keys_of(i))
                reads += k.words(bb, g, j) + v.words(bb, g, j);
        }
        writes += nnz + r * p.d_v + r;
        peak = std::max({peak,
                         2 * r + r * kv,
                         2 * r + r * cmax + (r + cmax) * kd,
                         2 * r + r * kv + r * cmax + cmax * kv});
    }
    return {reads * (p.batch_heads() / slices), writes * p.batch_heads(), peak};
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_forward_materialized<Scalar>(                                        \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

IoReport
io_cost_forward_materialized(const Problem& problem, const Support& support, const Tiling& tiling) {
    return io_cost_forward_materialized(problem, support, SparseInputs<float>{}, tiling);
}

template <typename Scalar>
IoReport io_cost_forward(const Problem& problem,
                         const Support& support,
                         const SparseInputs<Scalar>& inputs,
                         const Tiling& tiling) {
    switch (tiling.schedule) {
    case Schedule::fused:
        return io_cost_forward_fused(problem, support, inputs, tiling);
    case Schedule::materialized:
        return io_cost_forward_materialized(problem, support, inputs, tiling);
    case Schedule::reference:
        break;
    }
    throw InvalidArgument(
        "ioattn::sparse::io_cost_forward: the reference schedule has no I/O model");
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_forward<Scalar>(                                                     \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

IoReport io_cost_forward(const Problem& problem, const Support& support, const Tiling& tiling) {
    return io_cost_forward(problem, support, SparseInputs<float>{}, tiling);
}

Tiling
tuned_tiling(Schedule schedule, const MemoryModel& memory, const Problem& problem, Pass pass) {
    const Problem p = problem.resolved("ioattn::sparse::tuned_tiling");
    if (schedule == Schedule::fused) {
        // Br = 64: one whole 64-lane slab (a block's masked triangles are one slab wide
        // whatever Br is) and the smallest working set. Forward chunks of 256 keys: a 64-row
        // block of a 64-wide band with its global keys (194 keys) is one chunk, one softmax
        // pass and one rescale of O^T; 256 over 128: 1.04x on bigbird:64:2:3 (ioattn run --N
        // 16384 --d 64 --pattern bigbird:64:2:3 --schedule fused --threads 2 --repeat 30).
        // Backward chunks of 96: 128 runs dilated:256:4's backward at 0.95x.
        const std::int64_t cols = pass == Pass::forward ? 256 : 96;
        const Tiling t{Schedule::fused,
                       std::min<std::int64_t>(64, p.n_q),
                       std::min<std::int64_t>(cols, p.n_k)};
        if (t.resident_words(p, pass, Kernels::sparse) <= memory.fast_words)
            return t;
    }
    return Tiling::tuned(schedule, memory, p, pass, Kernels::sparse);
}

Tiling materialized_tiling(const Support& support,
                           const MemoryModel& memory,
                           const Problem& problem,
                           Pass pass) {
    const Problem p = problem.resolved("ioattn::sparse::materialized_tiling");
    const Tiling tuned = tuned_tiling(Schedule::materialized, memory, p, pass);
    // A tile taken pair by pair costs a walk of each of its rows (three, with the SDDMM, the
    // keep step and the SpMM): when most non-empty tiles hold a pair or so per row (fill below
    // 1/16: random keys, graph edges, strided columns; not the edges of a band, about 1/4),
    // the largest tiles win (fewer tiles, more pairs per row and tile), while bands and blocks
    // keep the tuned side. 256 over 64: 2.2x on random:0.02 (ioattn run --N 16384 --d 64
    // --pattern random:0.02 --schedule materialized --threads 1 --repeat 3).
    constexpr std::int64_t kScatteredFill = 16;
    const BlockView& view = support.cached_block_view(tuned.rows, tuned.cols);
    std::int64_t scattered = 0;
    for (std::int64_t b = 0; b < view.row_blocks; ++b)
        for (const BlockTile& t : view.tiles_of(b))
            if (t.nonzeros * kScatteredFill < view.block_rows(b) * view.block_cols(t.col_block))
                ++scattered;
    if (2 * scattered <= static_cast<std::int64_t>(view.tiles.size()))
        return tuned;
    return Tiling::for_memory(Schedule::materialized, memory, p, pass, Kernels::sparse);
}

std::int64_t dense_z_input(const Problem& problem) {
    const Problem p = problem.resolved("ioattn::sparse::dense_z_input");
    return (p.n_q + p.n_k) * p.d + p.n_k * p.d_v;
}

double crossover(const Support& support, std::int64_t z_input_per_head) {
    const double z = static_cast<double>(z_input_per_head);
    return support.z_qk() > 0 ? z * z / static_cast<double>(support.z_qk())
                              : std::numeric_limits<double>::infinity();
}

namespace {

/// Per key, whether some row sees it: parts of rows marked in parallel, then or-ed.
std::vector<char> mark_keys_seen(const Support& s) {
    const std::int64_t n_q = s.n_q(), n_k = s.n_k();
    const std::int64_t parts =
        std::clamp<std::int64_t>(s.z_qk() / std::max<std::int64_t>(n_k, 1), 1, 8);
    const std::int64_t step = (n_q + parts - 1) / parts;
    std::vector<char> seen(static_cast<std::size_t>(parts * n_k), 0);
    const RowRuns runs = s.row_runs(); // a row of the run of the row before marks nothing new
    const std::int64_t declared = s.row_step(); // rows of a declared step: marked from their ends
    const auto links = detail::chain_links(s);
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        char* mark = seen.data() + t * n_k;
        for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
            if (i > t * step && runs.period > 1 && runs.one_run(i - 1, i + 1))
                continue;
            const auto row = s.row(i);
            const auto len = static_cast<std::int64_t>(row.size());
            if (len > 0 && row.back() - row.front() + 1 == len) { // an interval: no index reads
                std::fill(mark + row.front(), mark + row.back() + 1, char{1});
                continue;
            }
            if (const std::int64_t known = i > t * step ? (*links)[static_cast<std::size_t>(i)] : 0;
                known > 0) { // a chain's row: the keys it adds to the row before
                for (const std::int64_t j : row.subspan(static_cast<std::size_t>(known)))
                    mark[j] = 1;
                continue;
            }
            if (len > 0 && declared > 1) {
                for (std::int64_t j = row.front(); j <= row.back(); j += declared)
                    mark[j] = 1;
                continue;
            }
            for (const std::int64_t j : row)
                mark[j] = 1;
        }
    });
    for (std::int64_t t = 1; t < parts; ++t)
        for (std::int64_t j = 0; j < n_k; ++j)
            seen[static_cast<std::size_t>(j)] |= seen[static_cast<std::size_t>(t * n_k + j)];
    seen.resize(static_cast<std::size_t>(n_k));
    return seen;
}

/// mark_keys_seen(s), built once and kept with the structure (Support::cached_value): every
/// planned call states its bound, and walking Omega for it was 14% of a window:256 forward
/// through the Python module (N = 16384, d = 64, the mask and its plans reused).
std::shared_ptr<const std::vector<char>> keys_seen(const Support& s) {
    return std::static_pointer_cast<const std::vector<char>>(s.cached_value(
        "keys-seen", [&] { return std::make_shared<const std::vector<char>>(mark_keys_seen(s)); }));
}

} // namespace

template <typename Scalar>
std::int64_t used_input_words(const Problem& problem,
                              const Support& support,
                              const SparseInputs<Scalar>& inputs,
                              Pass pass) {
    constexpr const char* kWhere = "ioattn::sparse::used_input_words";
    const Problem p = problem.resolved(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        detail::fail(kWhere,
                     "support is ",
                     support.n_q(),
                     " x ",
                     support.n_k(),
                     ", problem n_q x n_k = ",
                     p.n_q,
                     " x ",
                     p.n_k);
    const auto [q, k, v] = detail::shape_operands(p, inputs, kWhere);
    const auto kept = keys_seen(support);
    const std::vector<char>& used = *kept;
    std::int64_t q_words = 0, kv_words = 0;
    for (std::int64_t slice = 0; slice < p.batch_heads(); ++slice) { // Q (and O, dO, L) rows
        const std::int64_t b = slice / p.heads, h = slice % p.heads;
        for (std::int64_t i = 0; i < p.n_q; ++i)
            if (!support.row(i).empty())
                q_words += q.words(b, h, i) + (pass == Pass::backward ? 2 * p.d_v + 1 : 0);
    }
    for (std::int64_t kv = 0; kv < p.batch * p.kv_heads; ++kv) { // K and V rows
        const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
        for (std::int64_t j = 0; j < p.n_k; ++j)
            if (used[static_cast<std::size_t>(j)] != 0)
                kv_words += k.words(b, g, j) + v.words(b, g, j);
    }
    return q_words / p.batch_heads() + kv_words / (p.batch * p.kv_heads);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template std::int64_t used_input_words<Scalar>(                                                \
        const Problem&, const Support&, const SparseInputs<Scalar>&, Pass);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

std::int64_t used_input_words(const Problem& problem, const Support& support, Pass pass) {
    return used_input_words(problem, support, SparseInputs<float>{}, pass);
}

Bound bound(const Problem& problem,
            const Support& support,
            const MemoryModel& memory,
            std::int64_t z_input,
            std::int64_t used_input,
            Pass pass) {
    const Problem p = problem.resolved("ioattn::sparse::bound");
    memory.validate("ioattn::sparse::bound");
    const double m = static_cast<double>(memory.fast_words);
    const double z = static_cast<double>(z_input);
    const double zqk = static_cast<double>(support.z_qk());
    const double bh = static_cast<double>(p.batch_heads());
    // outputs per (batch, head): O and L of every row, or dQ and the head's share of dK, dV
    const double outputs = pass == Pass::forward ? static_cast<double>(p.n_q * (p.d_v + 1))
                                                 : static_cast<double>(p.n_q * p.d) +
                                                       static_cast<double>(p.n_k * (p.d + p.d_v)) *
                                                           static_cast<double>(p.kv_heads) /
                                                           static_cast<double>(p.heads);
    Bound b;
    b.regime = m >= crossover(support, z_input) ? "large-cache" : "small-cache";
    b.compulsory = bh * (static_cast<double>(used_input) + outputs);
    b.leading = bh * std::min(z * z / m, z * std::sqrt(zqk) / std::sqrt(m));
    return b;
}

Bound forward_bound(const Problem& problem,
                    const Support& support,
                    const MemoryModel& memory,
                    std::int64_t z_input) {
    return bound(problem,
                 support,
                 memory,
                 z_input,
                 used_input_words(problem, support, Pass::forward),
                 Pass::forward);
}

Schedule select_schedule(const Problem& problem,
                         const Support& support,
                         const MemoryModel& memory,
                         Select select,
                         std::int64_t z_input) {
    const Problem p = problem.resolved("ioattn::sparse::select_schedule");
    const auto fused =
        Tiling::try_for_memory(Schedule::fused, memory, p, Pass::forward, Kernels::sparse);
    const auto mat =
        Tiling::try_for_memory(Schedule::materialized, memory, p, Pass::forward, Kernels::sparse);
    if (!fused && !mat)
        throw CapacityError(
            "ioattn::sparse::select_schedule: M = " + std::to_string(memory.fast_words) +
            " words is too small for any tiling with d = " + std::to_string(p.d));
    if (!fused || !mat)
        return fused ? Schedule::fused : Schedule::materialized;
    if (select == Select::theory)
        return static_cast<double>(memory.fast_words) >= crossover(support, z_input)
                   ? Schedule::fused
                   : Schedule::materialized;
    return io_cost_forward_fused(p, support, *fused).total() <=
                   io_cost_forward_materialized(p, support, *mat).total()
               ? Schedule::fused
               : Schedule::materialized;
}

} // namespace ioattn::sparse
