#pragma once
// A narrow block of the fused sparse forward (forward_fused.cpp): at most kLanes / 4 query rows
// that all see every key of their block (bigbird's global rows, a block of their own:
// row_blocks), run with the keys in batches that the rows share and their softmax state
// row-major, as the element kernels run one row (forward_element_rows.hpp), instead of one
// lane vector computing kLanes lanes for r rows over every chunk.
//   q rows (scaled), O rows, m, l at the start of the block's scratch
//   per batch of 2 kLanes keys: every row's s = q . K_j, online softmax step, O += P V_j
//   write O / l, L = ln 2 (m + log2 l)
// I/O: the kernel's: its chunks read the block's K and V rows once, as the batches do.
// Tests: the fused forward's (tests/sparse/forward_test.cpp, kernel_case.hpp, variants_test.cpp,
// adversarial_test.cpp run blocks of global rows and of rows that see one key).

#include "kernels/element/forward_element_rows.hpp"
#include "kernels/tile/block_element.hpp"
#include "support/block_keys.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Whether block [i0, i0 + r) is narrow: at most kLanes / 4 rows, each seeing all nk keys of
/// the block (bigbird's global rows, a block of their own: row_blocks), over dense operands
/// (Q, K and V) read without orders. Such a block runs narrow_block: in the tile path its one
/// lane vector would compute kLanes lanes for r rows over every chunk. 1.04x on
/// bigbird:64:2:3 (ioattn run --N 16384 --d 64 --pattern bigbird:64:2:3 --schedule fused
/// --threads 2 --repeat 20).
template <typename Scalar>
bool narrow_rows(const Support& s,
                 std::int64_t i0,
                 std::int64_t r,
                 std::int64_t nk,
                 bool dense,
                 const Maps& maps) {
    if (!dense || maps.rows != nullptr || maps.keys != nullptr ||
        4 * r > kernels::Simd<Scalar>::kLanes)
        return false;
    for (std::int64_t x = 0; x < r; ++x)
        if (s.row_nonzeros(i0 + x) != nk)
            return false;
    return true;
}

/// A narrow block (narrow_rows): its rows' q, O, m and l row-major at the start of the block's
/// scratch, the keys in batches of 2 kLanes that every row reads while they are in L1
/// (shared_rows, forward_element_rows.hpp), then O = O / l, L = ln 2 (m + log2 l) (a row
/// without keys: O = 0, L = -inf). They take r (d + d_v rounded up to a vector) + 2 r words,
/// within Scratch::words: r <= kLanes / 4 and rp >= kLanes (the tile path's Q^T, O^T, m and
/// l alone hold rp (d + d_v + 2)). The K and V rows are streamed once, as the chunks that the
/// I/O counts.
template <typename Scalar>
void narrow_block(const ForwardArgs<Scalar>& a,
                  std::int64_t b,
                  std::int64_t h,
                  std::int64_t g,
                  std::int64_t i0,
                  std::int64_t r,
                  std::span<const std::int64_t> keys,
                  Scalar* base,
                  const Support* element = nullptr,
                  Scalar* element_base = nullptr) {
    constexpr std::int64_t kL = kernels::Simd<Scalar>::kLanes;
    const Problem& p = a.problem;
    // with the split's element part, the rows' state is laid out as the element kernels take
    // it (ForwardState at element_base), so block_element_pairs goes on from it in place
    ForwardState<Scalar> fs;
    if (element != nullptr)
        fs = ForwardState<Scalar>(element_base, p, r);
    const std::int64_t pq = element != nullptr ? fs.pd : p.d;
    // O rows: batch_axpy stores whole vectors
    const std::int64_t pv = element != nullptr ? fs.pdv : (p.d_v + kL - 1) / kL * kL;
    Scalar* q = element != nullptr ? fs.q : base;
    Scalar* o = element != nullptr ? fs.o : q + r * p.d;
    Scalar* m = element != nullptr ? fs.m : o + r * pv;
    Scalar* l = element != nullptr ? fs.l : m + r;
    const auto qs = static_cast<Scalar>(p.scale * kernels::kLog2e);
    for (std::int64_t x = 0; x < r; ++x) {
        const Scalar* qr = a.q.row(b, h, i0 + x);
        for (std::int64_t z = 0; z < p.d; ++z)
            q[x * pq + z] = qr[z] * qs;
        std::fill(q + x * pq + p.d, q + (x + 1) * pq, Scalar(0));
        std::fill(o + x * pv, o + (x + 1) * pv, Scalar(0));
        m[x] = -std::numeric_limits<Scalar>::infinity();
        l[x] = Scalar(0);
    }
    detail::shared_rows(a, b, g, keys.data(), std::ssize(keys), r, q, pq, o, pv, m, l);
    if (element != nullptr) { // the split's element pairs of these rows (block_element.hpp)
        block_element_pairs(a, *element, b, h, g, i0, r, fs);
        return;
    }
    for (std::int64_t x = 0; x < r; ++x)
        finish_row(o + x * pv, m[x], l[x], p.d_v, a.o.row(b, h, i0 + x), a.lse.row(b, h, i0 + x));
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
