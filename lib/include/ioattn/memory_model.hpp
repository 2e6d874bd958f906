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

    /// Throws InvalidArgument unless fast_words >= 1.
    void validate(const char* where) const;

    bool operator==(const MemoryModel&) const = default;
};

/// Per-core L2 size in bytes from sysfs (0 if it cannot be read).
std::int64_t l2_cache_bytes();

} // namespace ioattn
