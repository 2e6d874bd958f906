// ioattn::sparse I/O of the backward schedules: exact costs of backward_fused and
// backward_materialized from the structure (and the sparse inputs' stored words), the formulas
// stated in those files' opening blocks.

#include "kernels/common/row_source.hpp"
#include "kernels/materialized/tile_rule.hpp"
#include "kernels/tile/folded_keys.hpp"
#include "support/block_keys.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace ioattn::sparse {

template <typename Scalar>
IoReport detail::io_cost_backward_fused(const Problem& problem,
                                        const Support& support,
                                        const SparseInputs<Scalar>& inputs,
                                        const Tiling& tiling,
                                        bool may_fold) {
    const Problem p = problem.resolved("ioattn::sparse::io_cost_backward_fused");
    if (support.n_q() != p.n_q || support.n_k() != p.n_k || tiling.schedule != Schedule::fused)
        throw InvalidArgument("ioattn::sparse::io_cost_backward_fused: support or tiling does not "
                              "match the problem");
    const auto [q, k, v] =
        detail::shape_operands(p, inputs, "ioattn::sparse::io_cost_backward_fused");
    const Support& st = support.transposed();
    const detail::BlockKeys& qplan = support.cached_block_keys(tiling.rows);
    const detail::BlockKeys& kplan = st.cached_block_keys(tiling.rows);
    const std::int64_t resident = tiling.resident_words(p, Pass::backward, Kernels::sparse);
    const detail::Folds folds =
        detail::fold_plan(p, st, qplan, kplan, resident, may_fold && !detail::any_sparse(inputs));
    // the dQ partials, the same in every slice: each streamed row is written, and read once:
    // in pass A when its group reached it before, else in pass R (whatever the grouping)
    std::int64_t partial_words = 0, folded_keys = 0;
    for (std::int64_t j = 0; j < kplan.blocks(); ++j) {
        if (folds.is_folded(j))
            folded_keys += kplan.rows(j);
        else
            partial_words += static_cast<std::int64_t>(kplan.keys_of(j).size());
    }
    const std::int64_t partial_reads = partial_words;
    // the folds, per slice (folded_keys.hpp): pass 0 reads K, V, the queries' Q and L and the
    // walks, writes the dS slots and the partial dK, dV; pass R reads scale K, the slots and
    // the walks; the merge reads every partial
    std::int64_t fold_reads = 0, fold_writes = 0;
    for (const detail::FoldSegment& s : folds.segments) {
        const std::int64_t rk = kplan.rows(s.block), n = s.end - s.begin;
        const std::int64_t writes = n * rk + rk * (p.d + p.d_v); // slots, partials
        fold_writes += writes;
        fold_reads +=
            detail::fold_segment_words(p, rk, n, s.walk * kIndexReadWords<Scalar>) - writes;
    }
    // dense operands cost the same in every slice: count one and multiply
    const std::int64_t slices = detail::any_sparse(inputs) ? p.batch_heads() : 1;
    std::int64_t reads = 0, peak = 0;
    for (std::int64_t slice = 0; slice < slices; ++slice) {
        const std::int64_t b = slice / p.heads, h = slice % p.heads;
        // pass 0: O, dO; pass A: the streamed queries' Q, dO, L, D rows; the partials
        reads += 2 * p.n_q * p.d_v + partial_reads * p.d + fold_reads;
        for (std::int64_t j = 0; j < kplan.blocks(); ++j) {
            if (folds.is_folded(j))
                continue;
            const auto queries = kplan.keys_of(j);
            reads += static_cast<std::int64_t>(queries.size()) * (p.d_v + 2);
            for (const std::int64_t i : queries)
                reads += q.words(b, h, i);
        }
    }
    reads *= p.batch_heads() / slices;
    for (std::int64_t j = 0; j < kplan.blocks(); ++j) // each query head walks the key block's
        if (!folds.is_folded(j))                      // indices (the transpose's)
            reads += p.batch_heads() * kplan.index_words<Scalar>(j);
    for (std::int64_t i = 0; i < qplan.blocks(); ++i) {
        const std::int64_t r = qplan.rows(i);
        peak = std::max({peak, r * (2 * p.d_v + 1), 2 * r * p.d});
    }
    if (kplan.blocks() > 0)
        peak = std::max(peak, resident);
    for (std::int64_t kv = 0; kv < p.batch * p.kv_heads; ++kv) { // pass A: K_j, V_j resident
        const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
        reads += k.words(b, g, 0, p.n_k) + v.words(b, g, 0, p.n_k) -
                 folded_keys * (p.d + p.d_v); // folds: dense inputs only
    }
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v);  // dK, dV
    const std::int64_t slice_writes = p.n_q + p.n_q * p.d + partial_words * p.d; // D, dQ, partials
    return {reads, (slice_writes + fold_writes) * p.batch_heads() + kv_words, peak};
}

template <typename Scalar>
IoReport io_cost_backward_fused(const Problem& problem,
                                const Support& support,
                                const SparseInputs<Scalar>& inputs,
                                const Tiling& tiling) {
    return detail::io_cost_backward_fused(problem, support, inputs, tiling, true);
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport detail::io_cost_backward_fused<Scalar>(                                      \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&, bool);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_backward_fused<Scalar>(                                              \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

IoReport
io_cost_backward_fused(const Problem& problem, const Support& support, const Tiling& tiling) {
    return io_cost_backward_fused(problem, support, SparseInputs<float>{}, tiling);
}

template <typename Scalar>
IoReport io_cost_backward_materialized(const Problem& problem,
                                       const Support& support,
                                       const SparseInputs<Scalar>& inputs,
                                       const Tiling& tiling) {
    constexpr const char* kWhere = "ioattn::sparse::io_cost_backward_materialized";
    const Problem p = problem.resolved(kWhere);
    if (support.n_q() != p.n_q || support.n_k() != p.n_k)
        throw InvalidArgument(std::string(kWhere) + ": support shape does not match the problem");
    if (tiling.schedule != Schedule::materialized)
        throw InvalidArgument(std::string(kWhere) + ": tiling is for the " +
                              std::string(to_string(tiling.schedule)) + " schedule");
    if (tiling.rows < 1 || tiling.rows != tiling.cols)
        throw InvalidArgument(std::string(kWhere) + ": tiling " + std::to_string(tiling.rows) +
                              " x " + std::to_string(tiling.cols) +
                              " is not square with side >= 1");
    const auto [q, k, v] = detail::shape_operands(p, inputs, kWhere);
    // dense operands cost the same in every slice: count one and multiply
    const std::int64_t slices = detail::any_sparse(inputs) ? p.batch_heads() : 1;
    const std::int64_t b = tiling.rows, w = tiling.feature_chunk();
    const BlockView& view = support.cached_block_view(b, b);
    const std::int64_t vch = (p.d_v + w - 1) / w, dch = (p.d + w - 1) / w;
    const std::int64_t kd = std::min(w, p.d), kv = std::min(w, p.d_v);
    const bool q_held = p.d <= w, d_o_held = p.d_v <= w; // over a row tile's tiles (P, dS)
    std::vector<std::int64_t> tallest(static_cast<std::size_t>(view.col_blocks), 0);
    std::int64_t reads = 0, writes = p.n_q * p.d, peak = 0; // writes per query head; dQ written
    for (std::int64_t i = 0; i < view.row_blocks; ++i) {
        const std::int64_t r = view.block_rows(i), i0 = i * b;
        peak = std::max(peak, r * kd); // dQ of a row tile without pairs: zeros
        std::int64_t tiles = 0, nnz = 0, cmax = 0, per_pair = 0; // pairs of per-pair tiles
        for (const BlockTile& t : view.tiles_of(i)) {
            const std::int64_t c = view.block_cols(t.col_block);
            ++tiles;
            nnz += t.nonzeros;
            per_pair += detail::per_pair_tile(t.nonzeros, r, c) ? t.nonzeros : 0;
            cmax = std::max(cmax, c);
            auto& rmax = tallest[static_cast<std::size_t>(t.col_block)];
            rmax = std::max(rmax, r);
        }
        if (tiles == 0)
            continue;
        // per row, the key tiles it has a pair in: the tiles of Omega^T whose dV and dK read
        // its dO and Q row
        std::vector<std::int64_t> row_tiles(static_cast<std::size_t>(r), 0);
        std::int64_t row_tile_pairs = 0;
        for (std::int64_t x = 0; x < r; ++x) {
            std::int64_t last = -1, n = 0;
            for (const std::int64_t j : support.row(i0 + x))
                if (j / b != last) {
                    last = j / b;
                    ++n;
                }
            row_tiles[static_cast<std::size_t>(x)] = n;
            row_tile_pairs += n;
        }
        // L (P), P (dV), dO (dV: touched rows), O and dO (D; dO kept for dS when d_v <= w),
        // dO (dS, per tile unless kept), P (dS), dS (dQ, dK)
        // keys (P, dS, dQ per d chunk; the SDDMMs of P and dS per chunk of a per-pair tile),
        // Omega^T's queries and each entry's position in Omega (dV, dK per chunk)
        const std::int64_t index = nnz * (2 + dch + 2 * (vch + dch)) + per_pair * (dch + vch);
        const std::int64_t fixed = r + vch * nnz + row_tile_pairs * p.d_v + 2 * r * p.d_v +
                                   (d_o_held ? 0 : tiles * r * p.d_v) + nnz + 2 * dch * nnz +
                                   kIndexReadWords<Scalar> * index;
        for (std::int64_t slice = 0; slice < slices; ++slice) {
            const std::int64_t bb = slice / p.heads, h = slice % p.heads, g = h / p.group();
            std::int64_t k_words = 0, v_words = 0; // the rows of the keys the row tile sees
            for (const std::int64_t j : view.keys_of(i)) {
                k_words += k.words(bb, g, j);
                v_words += v.words(bb, g, j);
            }
            std::int64_t q_rows = 0; // Q rows in dK: each row once per key tile it has a pair in
            for (std::int64_t x = 0; x < r; ++x)
                q_rows += row_tiles[static_cast<std::size_t>(x)] * q.words(bb, h, i0 + x);
            // Q_i in P (once when kept, else per tile), K in P and dQ, V in dS, Q rows in dK
            reads += fixed + (q_held ? 1 : tiles) * q.words(bb, h, i0, r) + 2 * k_words + v_words +
                     q_rows;
        }
        writes += 2 * nnz; // P, dS
        peak = std::max({peak,
                         r + r * cmax + (r + cmax) * kd, // P
                         r + std::max({2 * r * kv,
                                       r * cmax + (r + cmax) * kv,
                                       (d_o_held ? r * kv : 0) + 2 * r * cmax}), // dS
                         r * kd + r * cmax + cmax * kd});                        // dQ
    }
    for (std::int64_t j = 0; j < view.col_blocks; ++j) {
        const std::int64_t c = view.block_cols(j), r = tallest[static_cast<std::size_t>(j)];
        peak = std::max({peak, c * kv + r * c + r * kv, c * kd + r * c + r * kd}); // dV, dK
    }
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v); // dK, dV
    return {reads * (p.batch_heads() / slices), writes * p.batch_heads() + kv_words, peak};
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_backward_materialized<Scalar>(                                       \
        const Problem&, const Support&, const SparseInputs<Scalar>&, const Tiling&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

IoReport io_cost_backward_materialized(const Problem& problem,
                                       const Support& support,
                                       const Tiling& tiling) {
    return io_cost_backward_materialized(problem, support, SparseInputs<float>{}, tiling);
}

} // namespace ioattn::sparse
