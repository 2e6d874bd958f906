#pragma once
// The SpMM phases of sparse backward_materialized (backward_materialized.cpp states the
// schedule and its I/O): dQ = scale * dS K per row tile, and dV = P^T dO, dK = scale * dS^T Q
// per key tile over Omega^T, each reading only the touched rows of its dense operand. A kernel
// header: compiled once per instruction set inside that file.

#include "kernels/common/row_source.hpp"
#include "kernels/materialized/backward_materialized_slice.hpp"
#include "kernels/materialized/tile_ops.hpp"

#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/strip.hpp>
#include <ioattn/kernels/write_dkv.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// dQ phase for head k, row tile blk, d chunk k0: dQ_ik = scale * sum_j dS_ij K_j[:,k].
template <typename Scalar, typename Counter>
void d_q_chunk(const Slice<Scalar>& w,
               std::int64_t k,
               std::int64_t blk,
               std::int64_t k0,
               int worker,
               Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t i0 = blk * w.b, r = w.rows(i0), kw = std::min(w.w, p.d - k0);
    const std::int64_t qs = w.q_slice(k), h = w.head(k);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.acc(worker);
        std::fill(acc, acc + r * kw, Scalar(0));
    }
    io.acquire(r * kw);
    [[maybe_unused]] std::int64_t at =
        w.s->row_offsets()[static_cast<std::size_t>(i0)]; // the tile's dS
    for (const BlockTile& t : w.rows_view->tiles_of(blk)) {
        const std::int64_t j0 = t.col_block * w.b, c = w.cols(j0);
        const auto keys = w.touched_keys(i0, j0, c);
        io.acquire(r * c + c * kw);
        io.read({Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
        io.read({Operand::index, qs, i0, 1, j0, kIndexReadWords<Scalar> * t.nonzeros}); // keys
        read_gathered(io,
                      Operand::k,
                      w.kv_slice(),
                      w.src->k,
                      w.bb,
                      w.g,
                      keys.data(),
                      static_cast<std::int64_t>(keys.size()),
                      k0,
                      kw);
        if constexpr (Counter::kComputes) { // the touched keys' rows (scattered when sparse)
            const auto kj = w.src->k.rows(w.bb, w.g, j0, k0, kw, w.kv_chunk(worker), keys);
            for (std::int64_t x = 0; x < r; ++x) { // --- dQ_ik += dS_ij K_j[:,k] on Omega ---
                const auto [lo, hi] = w.segment(i0 + x, j0, c);
                kernels::spmm_row(
                    &w.store(k, at),
                    hi - lo,
                    [&, lo = lo](std::int64_t e) { return kj.row(w.key(lo + e) - j0); },
                    acc + x * kw,
                    kw);
                at += hi - lo;
            }
        }
        io.release(r * c + c * kw);
    }
    if constexpr (Counter::kComputes) {
        const auto scale = static_cast<Scalar>(p.scale);
        for (std::int64_t x = 0; x < r; ++x)
            for (std::int64_t z = 0; z < kw; ++z) // dQ = scale * dS K
                a.d_q.row(w.bb, h, i0 + x)[k0 + z] = scale * acc[x * kw + z];
    }
    io.write({Operand::d_q, qs, i0, r, k0, kw});
    io.release(r * kw);
}

/// dV (values = true) or dK phase for key tile jblk and column chunk z0:
/// dV_jx = sum P_ij^T dO_i[:,x] or dK_jk = scale * sum dS_ij^T Q_i[:,k], over the heads of the
/// group and the row tiles with a pair in tile (i, j), in order.
template <typename Scalar, typename Counter>
void d_kv_chunk(const Slice<Scalar>& w,
                bool values,
                std::int64_t jblk,
                std::int64_t z0,
                int worker,
                Counter& io) {
    const Problem& p = w.p();
    const BackwardArgs<Scalar>& a = *w.a;
    const std::int64_t j0 = jblk * w.b, c = w.cols(j0);
    const std::int64_t zw = std::min(w.w, (values ? p.d_v : p.d) - z0);
    Scalar* acc = nullptr;
    if constexpr (Counter::kComputes) {
        acc = w.acc(worker);
        std::fill(acc, acc + c * zw, Scalar(0));
    }
    const Support& st = w.s->transposed(); // keys' columns, and each entry's place in Omega

    io.acquire(c * zw);
    for (std::int64_t k = 0; k < p.group(); ++k) {
        const std::int64_t qs = w.q_slice(k), h = w.head(k);
        for (const BlockTile& t : w.keys_view->tiles_of(jblk)) {
            const std::int64_t i0 = t.col_block * w.b, r = w.rows(i0);
            const auto queries = w.touched_queries(j0, i0, r);
            io.acquire(r * c + r * zw);
            io.read({values ? Operand::probs : Operand::d_scores, qs, i0, t.nonzeros, j0, 1});
            // Omega^T's column indices (the queries) and each entry's position in Omega
            io.read({Operand::index, qs, i0, 2, j0, kIndexReadWords<Scalar> * t.nonzeros});
            const RowSource<Scalar> d_o{a.d_o, nullptr};
            read_gathered(io, // the touched queries' dO or Q rows only
                          values ? Operand::d_o : Operand::q,
                          qs,
                          values ? d_o : w.src->q,
                          w.bb,
                          h,
                          queries.data(),
                          static_cast<std::int64_t>(queries.size()),
                          z0,
                          zw);
            if constexpr (Counter::kComputes) {
                const RowBlock<Scalar> rows =
                    values ? RowBlock<Scalar>{a.d_o.row(w.bb, h, i0) + z0, a.d_o.stride_row}
                           : w.src->q.rows(w.bb, h, i0, z0, zw, w.q_chunk(worker), queries);
                Scalar* pv = w.column(worker);
                for (std::int64_t y = 0; y < c; ++y) { // --- acc_y += P^T dO or dS^T Q on Omega,
                    // key y's stored values gathered down its column, its row in registers ---
                    const auto col = st.row(j0 + y);
                    const std::int64_t base = st.row_offsets()[static_cast<std::size_t>(j0 + y)];
                    const auto [lo, hi] = keys_in(col, i0, r);
                    for (std::int64_t e = lo; e < hi; ++e)
                        pv[e - lo] = w.store(k, w.at_t[base + e]);
                    kernels::spmm_row(
                        pv,
                        hi - lo,
                        [&, lo = lo](std::int64_t e) {
                            return rows.row(col[static_cast<std::size_t>(lo + e)] - i0);
                        },
                        acc + y * zw,
                        zw);
                }
            }
            io.release(r * c + r * zw);
        }
    }
    kernels::write_dkv(a, values, w.bb, w.g, w.kv_slice(), j0, c, z0, zw, acc, io);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
