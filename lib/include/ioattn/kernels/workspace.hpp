#pragma once
/// Per-worker scratch memory, allocated once before a parallel region and indexed by
/// ioattn::worker_index(), so parallel bodies never allocate. 64-byte aligned, zero-initialised.
/// Blocks come from a small per-thread pool, so repeated calls (benchmarks, training loops)
/// reuse mapped pages instead of faulting fresh ones in on every call. The bytes a call needs
/// are checked before they are allocated (ioattn::CallMemory, ioattn/resources.hpp).

#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace ioattn::kernels {

/// The calling thread's pool of free blocks (bytes, pointer); at most kKeep are kept.
class ScratchPool {
public:
    static constexpr std::size_t kKeep = 8;

    /// The smallest kept block of at least `bytes`, and its size (best fit, and the size kept
    /// with the block: with first fit and the requested size given back, a small request would
    /// take the 32 MiB block of the backward's dQ partials and return it as a small one, so the
    /// partials would fault fresh pages in on every call, 5% of a sparse backward), else a new
    /// one.
    static std::pair<void*, std::size_t> take(std::size_t bytes) {
        auto& blocks = free_blocks();
        std::size_t best = blocks.size();
        for (std::size_t i = 0; i < blocks.size(); ++i)
            if (blocks[i].first >= bytes &&
                (best == blocks.size() || blocks[i].first < blocks[best].first))
                best = i;
        if (best == blocks.size())
            return {::operator new[](bytes, std::align_val_t{64}), bytes};
        const auto block = blocks[best];
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(best));
        return {block.second, block.first};
    }

    /// Returns a block of `bytes` (the size take() reported) to the pool. A full pool keeps its
    /// kKeep largest blocks and frees the smallest (freeing the block given back would let a
    /// few 256-byte blocks hold the slots while bigbird:64:2:3's split backward, 10 blocks,
    /// frees its 32 MiB of dQ partials on every call): 1.2x on that backward (ioattn run --N
    /// 16384 --d 64 --pattern bigbird:64:2:3 --pass backward --threads 2 --repeat 20).
    static void give(void* p, std::size_t bytes) {
        auto& blocks = free_blocks();
        if (blocks.size() < kKeep) {
            blocks.emplace_back(bytes, p);
            return;
        }
        const auto smallest = std::min_element(blocks.begin(), blocks.end());
        if (smallest->first < bytes) {
            std::swap(smallest->first, bytes);
            std::swap(smallest->second, p);
        }
        ::operator delete[](p, std::align_val_t{64});
    }

    /// The bytes the calling thread's pool holds.
    static std::size_t kept_bytes() {
        std::size_t n = 0;
        for (const auto& b : free_blocks())
            n += b.first;
        return n;
    }

private:
    struct Blocks : std::vector<std::pair<std::size_t, void*>> {
        Blocks() { reserve(kKeep); } // so that give(), called by destructors, never allocates

        Blocks(const Blocks&) = delete;
        Blocks& operator=(const Blocks&) = delete;

        ~Blocks() {
            for (auto& b : *this)
                ::operator delete[](b.second, std::align_val_t{64});
        }
    };

    static Blocks& free_blocks() {
        thread_local Blocks blocks;
        return blocks;
    }
};

/// `workers` slabs of `words` elements of T (an arithmetic or pointer type) each. Sized and
/// allocated as a WorkspaceBlock (ioattn/resources.hpp): inside a CallMemory by its allocate(),
/// else at once; either way a call that cannot fit throws ResourceError before anything is
/// allocated.
template <typename T>
class Workspace : WorkspaceBlock {
public:
    /// Zero-initialised unless `zeroed` is false (for buffers every reader finds written first:
    /// zeroing the fused backward's 32 MiB of dQ partials would run serially, 10% of a window:256
    /// backward at N=16384, H=1). A negative `words` (an overflowed size) cannot fit.
    Workspace(int workers, std::int64_t words, bool zeroed = true)
        : WorkspaceBlock(bytes(workers, words), zeroed)
        , words_(padded(words)) {}

    /// The bytes `workers` slabs of `words` elements take (saturating).
    static std::uint64_t bytes(int workers, std::int64_t words) {
        const std::int64_t w = padded(words);
        if (workers <= 0 || w == 0)
            return 0;
        if (w < 0 || w > std::numeric_limits<std::int64_t>::max() / workers)
            return std::numeric_limits<std::uint64_t>::max();
        return bytes_of(w * workers, sizeof(T));
    }

    /// The slab of worker w (null for an empty workspace). Precondition: allocated (checked
    /// in Debug).
    T* slab(int w) const {
        IOATTN_ASSERT(ready());
        T* base = static_cast<T*>(data());
        return base == nullptr ? nullptr : base + static_cast<std::int64_t>(w) * words_;
    }

private:
    static_assert(std::is_arithmetic_v<T> || std::is_pointer_v<T>,
                  "zero-filled by memset (all-zero bytes: 0, or a null pointer on every target)");

    /// words rounded up to 16 (64 bytes of float); -1 if negative or overflowing.
    static std::int64_t padded(std::int64_t words) {
        if (words < 0 || words > std::numeric_limits<std::int64_t>::max() - 15)
            return -1;
        return (words + 15) / 16 * 16;
    }

    std::int64_t words_;
};

} // namespace ioattn::kernels
