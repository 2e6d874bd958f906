// The module's pool of output blocks (see output_pool.hpp). A block is a 64-byte header holding
// its size, then the array's bytes; kept blocks sit in an unordered list (at most kMaxBlocks).
// Tests: tests/python/test_output_pool.py

#include "output_pool.hpp"

#include <ioattn/error.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ioattn::python {

namespace {

constexpr std::size_t kHeader = 64;

/// IOATTN_OUTPUT_POOL_MB in bytes, or the default when unset or empty.
std::size_t limit_from_environment() {
    const char* env = std::getenv("IOATTN_OUTPUT_POOL_MB"); // NOLINT(concurrency-mt-unsafe)
    if (env == nullptr || *env == '\0')
        return OutputPool::kDefaultLimit;
    const std::string_view text(env);
    std::size_t mb = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mb);
    if (ec != std::errc() || end != text.data() + text.size() || mb > (SIZE_MAX >> 20))
        throw InvalidArgument("ioattn: IOATTN_OUTPUT_POOL_MB = '" + std::string(text) +
                              "' (expected a count of MiB >= 0)");
    return mb << 20;
}

void* block_of(void* p) {
    return static_cast<char*>(p) - kHeader;
}

/// Advises the whole 2 MiB pages of a new block of 4 MiB and more to transparent huge pages,
/// as numpy does its own arrays of that size (advice only).
void advise_huge_pages(void* block, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
    if (bytes < 2 * kHuge)
        return;
    const auto a = reinterpret_cast<std::uintptr_t>(block);
    const std::uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
    if (hi > lo)
        (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)block;
    (void)bytes;
#endif
}

void release(void* block) {
    ::operator delete[](block, std::align_val_t{64});
}

} // namespace

OutputPool& OutputPool::instance() {
    static OutputPool* const pool = new OutputPool(limit_from_environment());
    return *pool;
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
        release(smallest->second);
        kept_.erase(smallest);
    }
}

OutputPool::Stats OutputPool::stats() const {
    const std::lock_guard lock(mutex_);
    return {kept_bytes_, kept_.size(), limit_, reused_, allocated_};
}

} // namespace ioattn::python
