#pragma once
// The fused sparse schedule's plan: row blocks cut by rows and by nonzeros, and for each block
// the sorted keys some row of it may see (the K/V rows the block streams). Built in parallel,
// O(Z_QK + sum over blocks of k log k) for k visible keys per block.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace ioattn::sparse::detail {

struct FusedPlan {
    std::vector<std::int64_t> bounds;      ///< n_blocks + 1 row boundaries
    std::vector<std::int64_t> key_offsets; ///< n_blocks + 1 offsets into keys
    std::vector<std::int64_t> keys;        ///< per block, sorted unique visible keys

    [[nodiscard]] std::int64_t blocks() const {
        return static_cast<std::int64_t>(bounds.size()) - 1;
    }

    [[nodiscard]] std::span<const std::int64_t> keys_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const std::int64_t>(keys).subspan(lo, hi - lo);
    }

    [[nodiscard]] std::int64_t row0(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b)];
    }

    [[nodiscard]] std::int64_t rows(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b) + 1] - bounds[static_cast<std::size_t>(b)];
    }

    static FusedPlan build(const Support& support, std::int64_t max_rows);
};

/// Omega^T: the n_k x n_q support whose row j lists the queries that may see key j.
Support transpose(const Support& support);

/// Applies Omega to the chunk keys[0, c) of St: for each row, advance its cursor over its sorted
/// keys; rows whose keys cover the chunk are left alone. Returns whether any row was partial.
template <typename Scalar>
inline bool mask_chunk(const Support& s,
                std::int64_t i0,
                std::int64_t r,
                const std::int64_t* keys,
                std::int64_t c,
                std::int64_t* cursor,
                Scalar* st,
                std::int64_t ld) {
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    bool partial = false;
    for (std::int64_t x = 0; x < r; ++x) {
        const auto row = s.row(i0 + x);
        const auto n = static_cast<std::int64_t>(row.size());
        std::int64_t a = cursor[x], e = a;
        while (e < n && row[static_cast<std::size_t>(e)] <= keys[c - 1])
            ++e;
        cursor[x] = e;
        if (e - a == c)
            continue; // every key of the chunk allowed
        partial = true;
        for (std::int64_t y = 0; y < c; ++y) {
            if (a < e && row[static_cast<std::size_t>(a)] == keys[y])
                ++a;
            else
                st[y * ld + x] = kNegInf;
        }
    }
    return partial;
}

} // namespace ioattn::sparse::detail
