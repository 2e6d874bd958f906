#pragma once
/// Per-worker scratch memory, allocated once before a parallel region and indexed by
/// ioattn::worker_index(), so parallel bodies never allocate. 64-byte aligned, zero-initialised.
/// Blocks come from a small per-thread pool, so repeated calls (benchmarks, training loops)
/// reuse mapped pages instead of faulting fresh ones in on every call.

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace ioattn::kernels {

/// The calling thread's pool of free blocks (bytes, pointer); at most kKeep are kept.
class ScratchPool {
public:
    static constexpr std::size_t kKeep = 8;

    /// The smallest kept block of at least `bytes`, and its size (best fit, and the size kept
    /// with the block: with first fit and the requested size given back, a small request took
    /// the 32 MiB block of the backward's dQ partials and returned it as a small one, so the
    /// partials faulted fresh pages in on every call, 5% of a sparse backward), else a new one.
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

    /// Returns a block of `bytes` (the size take() reported) to the pool, or frees it when the pool is full.
    static void give(void* p, std::size_t bytes) {
        auto& blocks = free_blocks();
        if (blocks.size() < kKeep) {
            blocks.emplace_back(bytes, p);
            return;
        }
        ::operator delete[](p, std::align_val_t{64});
    }

private:
    struct Blocks : std::vector<std::pair<std::size_t, void*>> {
        Blocks() = default;
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

template <typename T>
class Workspace {
public:
    /// `workers` slabs of `words` elements each, zero-initialised unless `zeroed` is false (for
    /// buffers every reader finds written first: zeroing the fused backward's 32 MiB of dQ
    /// partials ran serially, 10% of a window:256 backward at N=16384, H=1).
    Workspace(int workers, std::int64_t words, bool zeroed = true)
        : words_((words + 15) / 16 * 16)
        , count_(static_cast<std::size_t>(workers) * static_cast<std::size_t>(words_)) {
        if (count_ == 0)
            return;
        const auto [block, bytes] = ScratchPool::take(count_ * sizeof(T));
        data_ = static_cast<T*>(block);
        bytes_ = bytes;
        if (zeroed)
            for (std::size_t i = 0; i < count_; ++i)
                data_[i] = T(0);
    }

    ~Workspace() {
        if (data_ != nullptr)
            ScratchPool::give(data_, bytes_);
    }

    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    /// The slab of worker w.
    T* slab(int w) const { return data_ + static_cast<std::int64_t>(w) * words_; }

private:
    std::int64_t words_;
    std::size_t count_;
    std::size_t bytes_ = 0; ///< the block's size, at least count_ * sizeof(T)
    T* data_ = nullptr;
};

} // namespace ioattn::kernels
