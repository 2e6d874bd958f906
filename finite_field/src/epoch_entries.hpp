#pragma once
// Shared pieces of epoch_stats and replay_epoch (private): where a complete event lies, the
// entries of Omega inside its block, the inner dimensions w_ij = |T_i & U_j| of sparse inputs,
// and the stored words of a read block in I/O order.

#include <ioattn/ff/epochs.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace ioattn::ff::detail {

/// Throws InvalidArgument unless b is a block of slice 0's n_q x n_k scores.
void check_complete(const Block& b, std::int64_t n_q, std::int64_t n_k, const char* where);

/// The epoch of a complete event after `pos` words: that of the last word moved before it.
inline std::int64_t epoch_of(std::int64_t pos, std::int64_t m) {
    return pos == 0 ? 0 : (pos - 1) / m;
}

/// The columns of pattern row r inside [c0, c0 + cols), as a pointer range.
inline std::pair<const std::int64_t*, const std::int64_t*>
cols_in(const RowPattern& pat, std::int64_t r, std::int64_t c0, std::int64_t cols) {
    const auto u = static_cast<std::size_t>(r);
    const std::int64_t* first = pat.cols.data() + pat.offsets[u];
    const std::int64_t* last = pat.cols.data() + pat.offsets[u + 1];
    const std::int64_t* a = std::lower_bound(first, last, c0);
    return {a, std::lower_bound(a, last, c0 + cols)};
}

/// Calls f(i, j) for every entry of block b inside Omega (every entry when omega is null).
template <typename F>
void for_each_entry(const Block& b, const RowPattern* omega, F&& f) {
    for (std::int64_t i = b.row0; i < b.row0 + b.rows; ++i) {
        if (omega == nullptr) {
            for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
                f(i, j);
            continue;
        }
        const auto [a, z] = cols_in(*omega, i, b.col0, b.cols);
        for (const std::int64_t* j = a; j != z; ++j)
            f(i, *j);
    }
}

/// Row bitsets of the stored patterns of Q and K: w_ij = |T_i & U_j| and the shared columns.
class InnerDims {
public:
    explicit InnerDims(const EpochShape& s);

    /// Whether both operands are dense (w_ij = d for every entry).
    [[nodiscard]] bool dense() const { return dense_; }

    /// w_ij = |T_i & U_j|.
    [[nodiscard]] std::int64_t operator()(std::int64_t i, std::int64_t j) const {
        if (dense_)
            return d_;
        std::int64_t w = 0;
        const std::uint64_t* a = q_.data() + i * words_;
        const std::uint64_t* b = k_.data() + j * words_;
        for (std::int64_t x = 0; x < words_; ++x)
            w += std::popcount(a[x] & b[x]);
        return w;
    }

    /// Calls f(c) for every c in T_i & U_j, ascending.
    template <typename F>
    void for_each_shared(std::int64_t i, std::int64_t j, F&& f) const {
        if (dense_) {
            for (std::int64_t c = 0; c < d_; ++c)
                f(c);
            return;
        }
        const std::uint64_t* a = q_.data() + i * words_;
        const std::uint64_t* b = k_.data() + j * words_;
        for (std::int64_t x = 0; x < words_; ++x)
            for (std::uint64_t bits = a[x] & b[x]; bits != 0; bits &= bits - 1)
                f(x * 64 + std::countr_zero(bits));
    }

private:
    std::int64_t d_ = 0;
    std::int64_t words_ = 0;
    bool dense_ = true;
    std::vector<std::uint64_t> q_;
    std::vector<std::uint64_t> k_;
};

/// Words a read block of Q (pattern = shape.q) or K (shape.k) holds: its stored entries inside
/// the block, or all of it for a dense operand (null pattern).
std::int64_t stored_words(const Block& b, const RowPattern* pattern);

/// Calls f(key_column) for the first `count` stored words of block b in I/O order (row-major
/// over the stored entries), passing (row, column).
template <typename F>
void for_each_word(const Block& b, const RowPattern* pattern, std::int64_t count, F&& f) {
    std::int64_t n = 0;
    for (std::int64_t r = b.row0; r < b.row0 + b.rows && n < count; ++r) {
        if (pattern == nullptr) {
            for (std::int64_t c = b.col0; c < b.col0 + b.cols && n < count; ++c, ++n)
                f(r, c);
            continue;
        }
        const auto [a, z] = cols_in(*pattern, r, b.col0, b.cols);
        for (const std::int64_t* c = a; c != z && n < count; ++c, ++n)
            f(r, *c);
    }
}

} // namespace ioattn::ff::detail
