#pragma once
// The split forward's element pairs inside the tile forward's row blocks (forward_fused.cpp
// with an element part; split.cpp). After a block's chunks its softmax state is resident (Q^T
// scaled, O^T, m, l; a narrow block's rows row-major): the block's rows then take their element
// pairs (E) from that state as the element kernel takes a row (forward_element_rows.hpp: runs
// of up to kShortRun keys in batches of kLanes rows, longer ones in batches of 2 kLanes keys),
// and the block finishes O = O / l, L. When the state does not fit M, E runs as a second pass
// instead (split.cpp), which reads Q again and resumes from the written O and L.
//   per block: q rows, O rows (not divided), m, l from the state              (resident)
//     per row x, its E keys j (ascending): read K_j, V_j rows            |E row|*(d + d_v)
//       and the row's key list                                           |E row| indices
//       s = q . K_j; online softmax step; O += P V_j
//     write O / l, L (the tile block's writes)
// I/O beside the tile kernel's: |E|*(d + d_v) + |E| index words per head; no words of a
// second pass. Resident beside the tile scratch: block_element_words (kernels/element/
// panels.hpp: the row state of the tile height's rows and one batch's K and V rows). Against
// the second pass: 1.04x on bigbird:64:2:3 (ioattn run --N 16384 --d 64 --pattern
// bigbird:64:2:3 --schedule fused --threads 2 --repeat 30).
// Tests: tests/sparse/split_forward_test.cpp

#include "kernels/common/row_source.hpp"
#include "kernels/element/forward_element_rows.hpp"

#include <ioattn/kernels/pack.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Counts the reads of block blk's element pairs (rows [i0, i0 + r) of e): each row's K and V
/// rows, then the rows' key lists as one index read.
template <typename Scalar, typename Counter>
void read_block_element(Counter& io,
                        const Support& e,
                        const Operands<Scalar>& src,
                        std::int64_t slice,
                        std::int64_t b,
                        std::int64_t g,
                        std::int64_t kv_slice,
                        std::int64_t blk,
                        std::int64_t i0,
                        std::int64_t r) {
    if constexpr (Counter::kCounts) { // nothing to walk for a timed run
        std::int64_t pairs = 0;
        for (std::int64_t x = 0; x < r; ++x) {
            const auto row = e.row(i0 + x);
            const auto n = static_cast<std::int64_t>(row.size());
            read_gathered(io, Operand::k, kv_slice, src.k, b, g, row.data(), n);
            read_gathered(io, Operand::v, kv_slice, src.v, b, g, row.data(), n);
            pairs += n;
        }
        if (pairs > 0)
            io.read({Operand::index, slice, blk, 1, 0, pairs * kIndexReadWords<Scalar>});
    }
}

/// The rows [i0, i0 + r) of the block over their E keys, from the row state w (scaled q rows,
/// O rows, m, l of row x at x), then O and L written.
template <typename Scalar>
void block_element_pairs(const ForwardArgs<Scalar>& a,
                         const Support& e,
                         std::int64_t b,
                         std::int64_t h,
                         std::int64_t g,
                         std::int64_t i0,
                         std::int64_t r,
                         const ForwardState<Scalar>& w) {
    const Problem& p = a.problem;
    element_runs(a, b, g, r, w, [&](std::int64_t x) {
        const auto row = e.row(i0 + x);
        return std::pair{row.data(), static_cast<std::int64_t>(row.size())};
    });
    for (std::int64_t x = 0; x < r; ++x)
        finish_row(
            w.o + x * w.pdv, w.m[x], w.l[x], p.d_v, a.o.row(b, h, i0 + x), a.lse.row(b, h, i0 + x));
}

/// The row state of a tile block (qt: Q^T scaled, ot: O^T, lanes at stride ld; m, l) as rows
/// in w, zero-padded, for block_element_pairs.
template <typename Scalar>
void rows_of_transposed(const Problem& p,
                        std::int64_t r,
                        const Scalar* qt,
                        const Scalar* ot,
                        std::int64_t ld,
                        const Scalar* m,
                        const Scalar* l,
                        const ForwardState<Scalar>& w) {
    const auto one = [](std::int64_t) { return Scalar(1); };
    const auto view = [&](Scalar* rows, std::int64_t cols, std::int64_t stride) {
        return TensorView<Scalar>{rows, 1, 1, r, cols, 0, 0, stride, r * stride};
    };
    for (std::int64_t x = 0; x < r; ++x) {
        std::fill(w.q + x * w.pd + p.d, w.q + (x + 1) * w.pd, Scalar(0));
        std::fill(w.o + x * w.pdv + p.d_v, w.o + (x + 1) * w.pdv, Scalar(0));
        w.m[x] = m[x];
        w.l[x] = l[x];
    }
    kernels::unpack_transposed(qt, ld, one, view(w.q, p.d, w.pd), 0, 0, 0, r);
    kernels::unpack_transposed(ot, ld, one, view(w.o, p.d_v, w.pdv), 0, 0, 0, r);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
