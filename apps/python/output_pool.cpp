// The module's pool of output blocks (see output_pool.hpp). A block is a 64-byte header holding
// its size, then the array's bytes; kept blocks sit in an unordered list (at most kMaxBlocks).
// Tests: tests/python/test_output_pool.py

#include "output_pool.hpp"

#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>

#include <algorithm>
#include <new>
#include <string>
#include <string_view>

namespace ioattn::python {

namespace {

constexpr std::size_t kHeader = 64;

/// IOATTN_OUTPUT_POOL_MB in bytes, or the default when unset or empty.
std::size_t limit_from_environment() {
    return environment_count(
               "IOATTN_OUTPUT_POOL_MB", "ioattn", "a count of MiB >= 0", std::uint64_t{1} << 20)
        .value_or(OutputPool::kDefaultLimit);
}

void* block_of(void* p) {
    return static_cast<char*>(p) - kHeader;
}

void release_block(void* block) {
    ::operator delete[](block, std::align_val_t{64});
}

} // namespace

OutputPool& OutputPool::instance() {
    static OutputPool* const pool = [] {
        auto* p = new OutputPool(limit_from_environment());
        on_memory_pressure([] { OutputPool::instance().release(); });
        return p;
    }();
    return *pool;
}

void OutputPool::release() noexcept {
    const std::lock_guard lock(mutex_);
    for (const auto& [bytes, block] : kept_)
        release_block(block);
    kept_.clear();
    kept_bytes_ = 0;
}

void* OutputPool::take(std::size_t bytes) {
    {
        const std::lock_guard lock(mutex_);
        auto best = kept_.end();
        for (auto it = kept_.begin(); it != kept_.end(); ++it)
            if (it->first >= bytes && it->first / 2 <= bytes &&
                (best == kept_.end() || it->first < best->first))
                best = it;
        if (best != kept_.end()) {
            void* block = best->second;
            kept_bytes_ -= best->first;
            kept_.erase(best);
            ++reused_;
            return static_cast<char*>(block) + kHeader;
        }
        ++allocated_;
    }
    void* block = ::operator new[](bytes + kHeader, std::align_val_t{64});
    advise_huge_pages(block, bytes + kHeader);
    *static_cast<std::size_t*>(block) = bytes;
    return static_cast<char*>(block) + kHeader;
}

void OutputPool::give(void* p) {
    void* block = block_of(p);
    const std::size_t bytes = *static_cast<std::size_t*>(block);
    const std::lock_guard lock(mutex_);
    kept_.emplace_back(bytes, block);
    kept_bytes_ += bytes;
    trim();
}

void OutputPool::set_limit(std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    limit_ = bytes;
    trim();
}

void OutputPool::trim() {
    while (!kept_.empty() && (kept_bytes_ > limit_ || kept_.size() > kMaxBlocks)) {
        const auto smallest = std::min_element(kept_.begin(), kept_.end());
        kept_bytes_ -= smallest->first;
        release_block(smallest->second);
        kept_.erase(smallest);
    }
}

OutputPool::Stats OutputPool::stats() const {
    const std::lock_guard lock(mutex_);
    return {kept_bytes_, kept_.size(), limit_, reused_, allocated_};
}

} // namespace ioattn::python
