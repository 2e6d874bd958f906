#pragma once
// Short runs of the element kernels: the rows of a block whose run of keys in a panel visit
// holds at most kShortRun keys, gathered kLanes rows of one run length at a time, so that a
// batch computes one row per lane (forward_element_rows.hpp run_rows; backward_element_rows.hpp
// query_rows, key_rows) instead of one short chain per row with nothing beside it to overlap.

#include <ioattn/kernels/simd.hpp>

#include <cstddef>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Rows whose run of keys in a panel is at most this long go through run_rows, kLanes rows of
/// one run length at a time. Against every row through run_row: 1.21x on powerlaw:32 (ioattn
/// run --N 16384 --d 64 --pattern powerlaw:32 --schedule fused --threads 2 --repeat 5).
constexpr std::int64_t kShortRun = 4;

/// Up to kLanes rows of a block, each with a run of n keys in the panel.
template <typename Scalar>
struct ShortRows {
    static constexpr int kL = kernels::Simd<Scalar>::kLanes;
    static constexpr auto kN = static_cast<std::size_t>(kL);
    std::int64_t n = 0;           // keys per row
    int count = 0;                // rows
    std::int64_t x[kN];           // the rows, in the block
    const std::int64_t* keys[kN]; // their runs
};

/// The block's rows with short runs in a panel, one batch per run length (no lane idles): a
/// batch runs when it fills, the rest at the panel's end (flush).
template <typename Scalar>
struct ShortBatches {
    ShortRows<Scalar> by_length[kShortRun];

    ShortBatches() {
        for (std::int64_t n = 1; n <= kShortRun; ++n)
            by_length[n - 1].n = n;
    }

    /// Row x's run of n <= kShortRun keys; run(batch) when its batch fills.
    template <typename Run>
    void add(std::int64_t x, const std::int64_t* keys, std::int64_t n, Run&& run) {
        ShortRows<Scalar>& batch = by_length[n - 1];
        batch.x[batch.count] = x;
        batch.keys[batch.count] = keys;
        if (++batch.count == ShortRows<Scalar>::kL) {
            run(batch);
            batch.count = 0;
        }
    }

    /// run(batch) for every batch holding rows.
    template <typename Run>
    void flush(Run&& run) {
        for (ShortRows<Scalar>& batch : by_length)
            if (batch.count > 0) {
                run(batch);
                batch.count = 0;
            }
    }
};

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
