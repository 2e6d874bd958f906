#pragma once
// Passes 0 and R of sparse backward_fused (see backward_fused.cpp, whose opening block states
// the schedule and its I/O): D = rowsum(dO o O) per query block, and dQ as the sum of the
// partials of the groups that reached each row. A kernel header: compiled once per instruction
// set inside that file.

#include "support/block_keys.hpp"

#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/dq_partials.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

// --- pass 0: D_i = rowsum(dO_i o O_i); then fold(io), the folded key blocks' pairs of the
// block's rows (folded_pass.hpp) while its D rows are resident ---
template <typename Scalar, typename Counter, typename Fold>
void delta_block(const BackwardArgs<Scalar>& a,
                 const BlockKeys& plan,
                 std::int64_t slice,
                 std::int64_t blk,
                 Scalar* delta,
                 const Maps& maps,
                 Counter& io,
                 const Fold& fold) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    io.acquire(r * (2 * p.d_v + 1));
    io.read({Operand::o, slice, i0, r, 0, p.d_v});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    if (maps.rows != nullptr) // the row order of the block
        io.read({Operand::index, slice, blk, 1, 0, r * kIndexReadWords<Scalar>});
    if constexpr (Counter::kComputes)
        for (std::int64_t x = 0; x < r; ++x)
            delta[slice * p.n_q + i0 + x] = kernels::row_delta(
                a.o.row(b, h, maps.row(i0 + x)), a.d_o.row(b, h, maps.row(i0 + x)), p.d_v);
    fold(io);
    io.write({Operand::delta, slice, i0, r, 0, 1});
    io.release(r * (2 * p.d_v + 1));
}

// --- pass R: dQ_i = the partial sums of the groups that reached each row, in group order;
// then fold(io) adds the folded key blocks' terms ---
template <typename Scalar, typename Counter, typename Fold>
void reduce_block(const BackwardArgs<Scalar>& a,
                  const BlockKeys& plan,
                  std::int64_t slice,
                  std::int64_t blk,
                  const kernels::DqPartials<Scalar>& dq,
                  const Maps& maps,
                  Counter& io,
                  const Fold& fold) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    io.acquire(2 * r * p.d);
    for (std::int64_t g = 0; g < dq.groups; ++g) {
        const std::uint8_t* reached = dq.reached + dq.at(g, slice, i0);
        const auto n = static_cast<std::int64_t>(std::count(reached, reached + r, 1));
        if (n > 0)
            io.read({Operand::d_q_partial, g * p.batch_heads() + slice, i0, n, 0, p.d});
    }
    if (maps.rows != nullptr) // the row order of the block
        io.read({Operand::index, slice, blk, 1, 0, r * kIndexReadWords<Scalar>});
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = i0; x < i0 + r; ++x) {
            Scalar* out = a.d_q.row(b, h, maps.row(x));
            std::fill(out, out + p.d, Scalar(0));
            for (std::int64_t g = 0; g < dq.groups; ++g)
                if (dq.reached[dq.at(g, slice, x)] != 0)
                    std::transform(out, out + p.d, dq.row(g, slice, x), out, std::plus<>());
        }
    }
    fold(io);
    io.write({Operand::d_q, slice, i0, r, 0, p.d});
    io.release(2 * r * p.d);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
