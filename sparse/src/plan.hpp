#pragma once
// The fused sparse schedule's plan: row blocks cut by rows and by nonzeros, and for each block
// the sorted keys some row of it may see (the K/V rows the block streams). Built in parallel,
// O(Z_QK + sum over blocks of k log k) for k visible keys per block.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
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

} // namespace ioattn::sparse::detail
