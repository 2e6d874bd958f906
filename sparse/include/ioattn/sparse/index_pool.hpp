#pragma once
/// The index pool: the storage of the large index arrays of freed supports (columns,
/// transposes, the variant planner's parts; 4 MiB and more each) is kept and written by the
/// next support built, on pages already mapped. A loop that builds a fresh mask every step
/// otherwise has every array's pages faulted in and zeroed by the kernel again.
///
/// One process-wide pool (a mutex), at most kIndexPoolArrays arrays and limit bytes, the
/// largest kept when full. The limit: the environment variable IOATTN_INDEX_POOL_MB (MiB >= 0)
/// when the pool is first used, else kDefaultIndexPoolBytes; set_index_pool_limit changes it
/// at any time; 0 keeps nothing (and frees what is kept). Everything kept is freed before a
/// request is refused for memory (ioattn::on_memory_pressure, ioattn/resources.hpp).

#include <cstddef>
#include <cstdint>

namespace ioattn::sparse {

inline constexpr std::size_t kDefaultIndexPoolBytes = std::size_t{512} << 20;
inline constexpr std::size_t kIndexPoolArrays = 8;

struct IndexPoolStats {
    std::size_t kept_bytes = 0; ///< the storage kept now
    std::size_t arrays = 0;     ///< the arrays kept now
    std::size_t limit = 0;      ///< the most bytes kept
    std::uint64_t reused = 0;   ///< arrays taken from the pool since the process started
};

IndexPoolStats index_pool_stats();

/// Keeps at most `bytes` from now on, freeing kept arrays beyond it.
void set_index_pool_limit(std::size_t bytes);

} // namespace ioattn::sparse
