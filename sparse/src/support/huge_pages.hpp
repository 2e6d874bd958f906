#pragma once
// Transparent huge pages for the sparse library's large index arrays (supports, their
// transposes and parts). Debian's THP mode is madvise: without the advice every 4 KiB page of a
// fresh array faults on first write, and on a virtual machine a fault costs microseconds (the
// columns of window:256 at N = 16384, 64 MiB, spent 60% of their build in page faults and the
// zeroing around them). The program advises its own blocks of 4 MiB and more the same way
// (measure/aligned_new.cpp); the library cannot replace a caller's operator new, so it advises
// the arrays it allocates, before their first write.

#include "support/index_pool.hpp"

#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ioattn::sparse::detail {

/// Faults in the pages of [p, p + bytes) writable, by parts in parallel, when the range spans
/// at least 4 MiB. A fresh page is zeroed by the kernel on its first write, and on this virtual
/// machine that zeroing ran at about 1 GB/s, in the one thread of a vector's value-initialising
/// memset: the mask's and the transpose's columns of window:256 (64 MiB each, N = 16384) were
/// a fifth of its fresh step. Advice only: where the kernel has no MADV_POPULATE_WRITE, the
/// first writes fault the pages in.
inline void populate_pages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    constexpr std::size_t kPart = std::size_t{2} << 20;
    if (p == nullptr || bytes < 2 * kPart)
        return;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (a + 4095) & ~std::uintptr_t{4095},
                         hi = (a + bytes) & ~std::uintptr_t{4095};
    const auto parts = static_cast<std::int64_t>((hi - lo + kPart - 1) / kPart);
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        const std::uintptr_t b = lo + static_cast<std::uintptr_t>(t) * kPart;
        const std::uintptr_t e = std::min<std::uintptr_t>(hi, b + kPart);
        (void)madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
    });
#else
    (void)p;
    (void)bytes;
#endif
}

/// n words (n >= 0) for an index array its caller writes in full (every builder of a support,
/// its transpose, parts and reorderings does): an array of the index pool
/// (support/index_pool.hpp) when it keeps one with room, its words as its last support left
/// them, else new (with room for n / 16 more when the pool may keep it), its pages advised and
/// faulted in (populate_pages) before the zeroing first writes them. Zeroing a kept array in
/// full, which its builder then overwrote, was 4% of a fresh window:256 step.
inline std::vector<std::int64_t> index_words(std::int64_t n) {
    std::vector<std::int64_t> v = take_index_array(n);
    if (!v.empty() || n == 0)
        return v;
    // room for n + n / 16 words when the pool may keep it: the next mask of a fresh random
    // pattern, a few words longer or shorter, then fits in it
    v.reserve(static_cast<std::size_t>(n >= kPoolMinWords ? n + n / 16 : n));
    advise_huge_pages(v.data(), v.capacity() * sizeof(std::int64_t));
    populate_pages(v.data(), v.capacity() * sizeof(std::int64_t));
    v.resize(static_cast<std::size_t>(n));
    if (n >= kPoolMinWords)
        note_fresh_array(v.data());
    return v;
}

} // namespace ioattn::sparse::detail
