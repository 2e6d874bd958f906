#pragma once
// The blocks behind the module's large output arrays, kept after their arrays are freed and
// given to the next call's arrays: a training loop's outputs then land on pages already
// mapped. Through numpy's allocator every call's 4 MiB dQ, dK and dV came back from the
// system as fresh pages (glibc maps or trims blocks of this size), and on this virtual
// machine faulting them in made a window:256 backward (N = 16384, d = 64) take 32 ms through
// Python against 21 ms in the program.
// Process-wide and thread-safe (a capsule may free its array on any thread); the blocks of at
// least kMinBytes only, at most kMaxBlocks and `limit` bytes kept (IOATTN_OUTPUT_POOL_MB at
// import, ioattn.set_output_pool_limit after; 0 keeps nothing), the largest kept when full, and
// all freed when a call would otherwise be refused for memory (ioattn::on_memory_pressure).

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace ioattn::python {

class OutputPool {
public:
    /// Arrays below this size come from numpy's allocator (glibc reuses small blocks itself).
    static constexpr std::size_t kMinBytes = std::size_t{1} << 20;
    static constexpr std::size_t kMaxBlocks = 16;
    static constexpr std::size_t kDefaultLimit = std::size_t{1} << 30;

    /// The module's pool (never destroyed: arrays may outlive the interpreter's teardown).
    static OutputPool& instance();

    /// A 64-byte aligned block of at least `bytes`: a kept one of at most twice the size
    /// (the smallest such), else a new one.
    void* take(std::size_t bytes);

    /// Gives back a block take() returned: kept while the pool has room, else freed.
    void give(void* p);

    /// Keeps at most `bytes` from now on, freeing kept blocks beyond it.
    void set_limit(std::size_t bytes);

    /// Frees every kept block (the limit stays): memory pressure (ioattn::require_memory).
    void release() noexcept;

    struct Stats {
        std::size_t kept_bytes = 0, blocks = 0, limit = 0;
        std::uint64_t reused = 0, allocated = 0;
    };

    [[nodiscard]] Stats stats() const;

private:
    explicit OutputPool(std::size_t limit)
        : limit_(limit) {}

    /// Frees the smallest kept blocks until the pool is within its limits; the lock is held.
    void trim();

    mutable std::mutex mutex_;
    std::vector<std::pair<std::size_t, void*>> kept_; ///< (size, block)
    std::size_t kept_bytes_ = 0, limit_;
    std::uint64_t reused_ = 0, allocated_ = 0;
};

} // namespace ioattn::python
