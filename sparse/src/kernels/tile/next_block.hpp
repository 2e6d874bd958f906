#pragma once
// What a block of the fused sparse forward (forward_fused.cpp) prefetches for the next one
// while it computes, a share per chunk (kernels/prefetch.hpp): the next block's Q rows, read
// in order, and its K and V rows beyond this block's keys when they are one interval (a band's
// new keys). Prefetches move no counted words: the next block reads them, and counts them.
// Tests: the fused forward's (tests/sparse/forward_test.cpp; the results do not depend on it)

#include "kernels/common/row_source.hpp"
#include "support/block_keys.hpp"

#include <ioattn/kernels/prefetch.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The Q rows of block blk + 1 of the slice when they are rows of a dense Q read in order (none
/// otherwise), for row_block to prefetch while block blk computes: else the pack of a block's
/// Q^T waits for its rows (16 KB at 64 rows, d = 64), 5% of window:64's forward under perf.
template <typename Scalar>
kernels::RowLines next_q_rows(const ForwardArgs<Scalar>& a,
                              const detail::Operands<Scalar>& src,
                              const detail::BlockKeys& plan,
                              std::int64_t b,
                              std::int64_t h,
                              std::int64_t blk,
                              const Maps& maps) {
    if (src.q.sparse != nullptr || maps.rows != nullptr || blk + 1 >= plan.blocks())
        return {};
    constexpr auto kWord = static_cast<std::int64_t>(sizeof(Scalar));
    return {a.q.row(b, h, plan.row0(blk + 1)),
            a.q.stride_row * kWord,
            a.problem.d * kWord,
            plan.rows(blk + 1)};
}

/// The K and V rows of block blk + 1's keys above block blk's last key when they are one
/// interval of dense rows read in order (a band's new keys: 64 rows of each for window:64's
/// 64-row blocks), for row_block to prefetch while block blk computes, as next_q_rows: the
/// hardware's stream prefetch brings them late. 1.05x on window:64 (ioattn run --N 16384 --d 64
/// --pattern window:64 --schedule fused --threads 2 --repeat 30).
template <typename Scalar>
std::pair<kernels::RowLines, kernels::RowLines> next_kv_rows(const ForwardArgs<Scalar>& a,
                                                             const detail::Operands<Scalar>& src,
                                                             const detail::BlockKeys& plan,
                                                             std::int64_t b,
                                                             std::int64_t g,
                                                             std::int64_t blk,
                                                             const Maps& maps) {
    if (src.k.sparse != nullptr || src.v.sparse != nullptr || maps.keys != nullptr ||
        blk + 1 >= plan.blocks())
        return {};
    const auto cur = plan.keys_of(blk);
    const auto nxt = plan.keys_of(blk + 1);
    if (cur.empty() || nxt.empty())
        return {};
    const auto* first = std::upper_bound(nxt.data(), nxt.data() + nxt.size(), cur.back());
    const auto n = static_cast<std::int64_t>(nxt.data() + nxt.size() - first);
    if (n == 0 || nxt.back() - *first + 1 != n)
        return {};
    constexpr auto kWord = static_cast<std::int64_t>(sizeof(Scalar));
    const Problem& p = a.problem;
    return {kernels::RowLines(a.k.row(b, g, *first), a.k.stride_row * kWord, p.d * kWord, n),
            kernels::RowLines(a.v.row(b, g, *first), a.v.stride_row * kWord, p.d_v * kWord, n)};
}

/// What a block prefetches for the next one while it computes (next_block).
struct NextBlock {
    kernels::RowLines q, k, v;

    /// The lines of the first `chunk` of `chunks` shares (all of them when chunk >= chunks).
    void upto(std::int64_t chunk, std::int64_t chunks) {
        for (kernels::RowLines* rows : {&q, &k, &v})
            rows->upto(rows->lines() * std::min(chunk, chunks) / chunks);
    }
};

/// The rows block blk prefetches for block blk + 1 of slice (b, h), kv head g: next_q_rows
/// and next_kv_rows.
template <typename Scalar>
NextBlock next_block(const ForwardArgs<Scalar>& a,
                     const detail::Operands<Scalar>& src,
                     const detail::BlockKeys& plan,
                     std::int64_t b,
                     std::int64_t h,
                     std::int64_t g,
                     std::int64_t blk,
                     const Maps& maps) {
    auto [k, v] = next_kv_rows(a, src, plan, b, g, blk, maps);
    return {next_q_rows(a, src, plan, b, h, blk, maps), k, v};
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
