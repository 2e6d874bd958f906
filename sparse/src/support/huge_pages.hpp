#pragma once
// Transparent huge pages for the sparse library's large index arrays (supports, their
// transposes and parts). Debian's THP mode is madvise: without the advice every 4 KiB page of a
// fresh array faults on first write, and on a virtual machine a fault costs microseconds (the
// columns of window:256 at N = 16384, 64 MiB, spent 60% of their build in page faults and the
// zeroing around them). The program advises its own blocks of 4 MiB and more the same way
// (measure/aligned_new.cpp); the library cannot replace a caller's operator new, so it advises
// the arrays it allocates, before their first write.

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ioattn::sparse::detail {

/// Advises the whole 2 MiB pages inside [p, p + bytes) to transparent huge pages when the range
/// spans at least 4 MiB (advice only: where the kernel has none, 4 KiB pages stay).
inline void advise_huge_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
    if (p == nullptr || bytes < 2 * kHuge)
        return;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
    if (hi > lo)
        (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/// n zeroed words (n >= 0) whose pages are advised before the zeroing first writes them.
inline std::vector<std::int64_t> zeroed_words(std::int64_t n) {
    std::vector<std::int64_t> v;
    v.reserve(static_cast<std::size_t>(n));
    advise_huge_pages(v.data(), v.capacity() * sizeof(std::int64_t));
    v.resize(static_cast<std::size_t>(n));
    return v;
}

} // namespace ioattn::sparse::detail
