#pragma once
// The fused sparse schedule's plan: row blocks cut by rows and by nonzeros, and for each block
// the sorted keys some row of it may see (the K/V rows the block streams). Built in parallel,
// O(Z_QK + sum over blocks of k log k) for k visible keys per block, once per (support, rows):
// Support::cached_block_keys keeps it with the structure, so repeated calls do not rebuild it.

#include <ioattn/parallel.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace ioattn::sparse::detail {

struct BlockKeys {
    std::vector<std::int64_t> bounds;      ///< n_blocks + 1 row boundaries
    std::vector<std::int64_t> key_offsets; ///< n_blocks + 1 offsets into keys
    std::vector<std::int64_t> keys;        ///< per block, sorted unique visible keys
    std::vector<std::int64_t> row_lo;      ///< per query row: its run, the longest interval
    std::vector<std::int64_t> row_hi;      ///< [lo, hi] of keys it sees (empty row: [0, -1]),
    std::vector<std::int64_t> row_run_at;  ///< at this position of its sorted keys
    /// Per query row, how many of its sorted keys are its block's first keys (the longest
    /// common prefix of the two lists): the masks settle a chunk within it, or a row that is all
    /// prefix, without the row's index array (strided's rows: its block's summary keys, then
    /// their own causal part).
    std::vector<std::int64_t> row_prefix;
    /// Per block, the indices a pass over it reads from slow memory: each row's extra keys,
    /// those outside its run (mask_chunk walks them), unless the row is all prefix
    /// (row_prefix), and its key list unless the block is simple (every row an interval, the
    /// keys one interval: the kernels then read only the ends of each chunk, and mask by the
    /// row runs). Not counted: the row runs and prefixes (4 words per row, O(n_q) per head
    /// beside the n_q (d + d_v + 1) words of Q, O and L), and the list of a simple block where
    /// the backward's bookkeeping or a sparse input's copy walks it (one index per streamed row
    /// beside its d + d_v + 2 words).
    std::vector<std::int64_t> index_reads;

    [[nodiscard]] std::int64_t blocks() const {
        return static_cast<std::int64_t>(bounds.size()) - 1;
    }

    [[nodiscard]] std::span<const std::int64_t> keys_of(std::int64_t b) const {
        const auto lo = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b)]);
        const auto hi = static_cast<std::size_t>(key_offsets[static_cast<std::size_t>(b) + 1]);
        return std::span<const std::int64_t>(keys).subspan(lo, hi - lo);
    }

    /// The entries block b's tiles compute, rows x visible keys: the work the timed kernels
    /// order their blocks by (ioattn::parallel_for_blocks). A block of heavy rows streams every
    /// key (bigbird-block:64:3:2:3's last block, its global rows, holds a tenth of the pairs),
    /// and one run last keeps one worker busy while the others wait.
    [[nodiscard]] std::int64_t work(std::int64_t b) const {
        return rows(b) * static_cast<std::int64_t>(keys_of(b).size());
    }

    [[nodiscard]] std::int64_t row0(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b)];
    }

    [[nodiscard]] std::int64_t rows(std::int64_t b) const {
        return bounds[static_cast<std::size_t>(b) + 1] - bounds[static_cast<std::size_t>(b)];
    }

    /// The indices block b reads, in words of Scalar (an int64 is 8 / sizeof(Scalar) words).
    template <typename Scalar>
    [[nodiscard]] std::int64_t index_words(std::int64_t b) const {
        return index_reads[static_cast<std::size_t>(b)] * kIndexReadWords<Scalar>;
    }

    /// The order indices block b reads when its problem is a reordered one read in place (the
    /// forward's in-place permutation): one per row with reordered rows, one per streamed key
    /// with reordered keys, in words of Scalar.
    template <typename Scalar>
    [[nodiscard]] std::int64_t map_words(std::int64_t b, bool rows_mapped, bool keys_mapped) const {
        const std::int64_t n = (rows_mapped ? rows(b) : 0) +
                               (keys_mapped ? static_cast<std::int64_t>(keys_of(b).size()) : 0);
        return n * kIndexReadWords<Scalar>;
    }

    static BlockKeys build(const Support& support, std::int64_t max_rows);
};

/// Rows and keys of a reordered problem read in place (the permuted variant without copies):
/// query row i is row rows[i] of Q, O, L, dO and dQ, key j is row keys[j] of K, V, dK and dV
/// (null: the identity).
struct Maps {
    const std::int64_t* rows = nullptr;
    const std::int64_t* keys = nullptr;

    [[nodiscard]] std::int64_t row(std::int64_t i) const { return rows != nullptr ? rows[i] : i; }

    [[nodiscard]] std::int64_t key(std::int64_t j) const { return keys != nullptr ? keys[j] : j; }
};

/// ioattn::parallel_for_blocks over the row blocks of `plan` in each of `slices` (batch, head)
/// slices, ordered by BlockKeys::work: body(slice, block, worker, Counter&).
template <typename Counter, typename Body>
void parallel_for_row_blocks(std::int64_t slices,
                             const BlockKeys& plan,
                             Counter& counter,
                             const Body& body) {
    parallel_for_blocks(
        slices, plan.blocks(), [&](std::int64_t b) { return plan.work(b); }, counter, body);
}

/// The pairs above which a row of `s` is heavy (global tokens, a graph's hubs): 4x the mean
/// row's, 4 ceil(Z_QK / n_q). row_blocks and the planner's split count heavy rows by it.
inline std::int64_t heavy_above(const Support& s) {
    return s.n_q() > 0 ? 4 * ((s.z_qk() + s.n_q() - 1) / s.n_q()) : 0;
}

/// The shortest run of consecutive keys the fused kernels read in place as a chunk of its own.
inline constexpr std::int64_t kMinRun = 16;

} // namespace ioattn::sparse::detail
