#pragma once
/// The two-level memory model: an unbounded slow memory and a fast memory of M words.

#include <cstdint>

namespace ioattn {

/// Fast memory of `fast_words` words; a word is one scalar of the working type.
struct MemoryModel {
    std::int64_t fast_words = 0;

    /// The per-core L2 cache of this machine in words of `bytes_per_word` bytes, read from
    /// /sys/devices/system/cpu/cpu0/cache (the unified level-2 entry); 1 MiB if unreadable.
    static MemoryModel per_core_l2(std::int64_t bytes_per_word = 4);

    /// The fast memory to plan tilings with for a real cache of `cache_bytes` bytes (LRU,
    /// set-associative, 64-byte lines): M = cache_bytes / bytes_per_word / kCacheSlack words.
    /// A tiling whose footprint is the whole cache thrashes under LRU; with the cache at 2M
    /// words the simulated traffic of every dense schedule and pass stays within 1.25x of the
    /// counted words, with the crossover where the model puts it (bench/cache_validate.py,
    /// the `cache` test; docs/design.md section 8). Throws InvalidArgument when that leaves M < 1.
    static MemoryModel for_cache(std::int64_t cache_bytes, std::int64_t bytes_per_word = 4);

    /// Throws InvalidArgument unless fast_words >= 1.
    void validate(const char* where) const;

    bool operator==(const MemoryModel&) const = default;
};

/// Words of ideal fast memory per word of a real cache that the tilings for it leave free:
/// M = C / kCacheSlack (MemoryModel::for_cache).
inline constexpr std::int64_t kCacheSlack = 2;

/// Per-core L2 size in bytes from sysfs (0 if it cannot be read).
std::int64_t l2_cache_bytes();

} // namespace ioattn
