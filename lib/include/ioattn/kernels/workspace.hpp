#pragma once
// Per-worker scratch memory, allocated once before a parallel region and indexed by
// ioattn::worker_index(), so parallel bodies never allocate. 64-byte aligned.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace ioattn::kernels {

template <typename T>
class Workspace {
public:
    /// `workers` slabs of `words` elements each (zero-initialised).
    Workspace(int workers, std::int64_t words)
        : words_((words + 15) / 16 * 16) {
        const auto n = static_cast<std::size_t>(workers) * static_cast<std::size_t>(words_);
        if (n > 0) {
            data_.reset(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64})));
            for (std::size_t i = 0; i < n; ++i)
                data_[i] = T(0);
        }
    }

    /// The slab of worker w.
    T* slab(int w) const { return data_.get() + static_cast<std::int64_t>(w) * words_; }

private:
    struct Free {
        void operator()(T* p) const { ::operator delete[](p, std::align_val_t{64}); }
    };
    std::int64_t words_;
    std::unique_ptr<T[], Free> data_;
};

} // namespace ioattn::kernels
