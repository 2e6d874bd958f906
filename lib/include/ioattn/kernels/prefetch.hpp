#pragma once
/// Software prefetch of a range of rows, a share at a time (RowLines): the fused sparse
/// forward brings the next row block's Q rows in while the current block computes, so that
/// its transposed pack (pack.hpp) does not wait for them.
///
/// The prefetch is an asm statement: GCC 12 deletes a loop whose only statements are
/// __builtin_prefetch calls (docs/performance.md section 11). Only rows streamed in order are
/// prefetched here: a prefetch of gathered rows (the element kernels' K and V) waits for the
/// line-fill buffers that out-of-order execution already fills (element_ops.hpp).

#include <ioattn/kernels/target.hpp>

#include <cstdint>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// Brings the cache line holding p into the caches, for reading.
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht0 %0" ::"m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 0, 3);
#endif
}

/// Brings the cache line holding p into the second-level cache (and the third), for reading.
inline void prefetch_line_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht1 %0" ::"m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 0, 2);
#endif
}

/// The cache lines of `rows` rows of `row_bytes` bytes each, `stride` bytes apart, prefetched
/// in order by upto(n): lines [0, n) have been asked for after it (lines() in all).
class RowLines {
public:
    static constexpr std::int64_t kLine = 64;

    RowLines() = default;

    RowLines(const void* base, std::int64_t stride, std::int64_t row_bytes, std::int64_t rows)
        : base_(static_cast<const char*>(base))
        , stride_(stride)
        , per_row_((row_bytes + kLine - 1) / kLine)
        , rows_(rows) {}

    [[nodiscard]] std::int64_t lines() const { return per_row_ * rows_; }

    /// Prefetches the lines up to the n-th (n <= lines()) not asked for yet.
    void upto(std::int64_t n) {
        for (; done_ < n; ++done_) {
            prefetch_line(base_ + row_ * stride_ + line_ * kLine);
            if (++line_ == per_row_) {
                line_ = 0;
                ++row_;
            }
        }
    }

private:
    const char* base_ = nullptr;
    std::int64_t stride_ = 0, per_row_ = 0, rows_ = 0;
    std::int64_t row_ = 0, line_ = 0, done_ = 0;
};

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
